package nfs

import (
	"context"
	"fmt"

	"github.com/tristore/tristore/proto/nfs3"
)

// READDIR and READDIRPLUS. The page calls expose cookies for callers that
// stream (the FUSE tree); Readdir/Readdirplus read a whole directory.

// maxDirPages bounds a whole-directory listing (a server that never says
// EOF must not keep us looping): 1M pages of at least one entry.
const maxDirPages = 1 << 20

// ReaddirPage returns the entries after cookie (0 = start), the cookie
// verifier to pass with the next page, and whether this is the last page.
// count bounds the reply size in bytes (0 = 64 KiB).
func (c *Client) ReaddirPage(ctx context.Context, dir FH, cookie uint64, verf Verifier, count uint32) ([]DirEntry, Verifier, bool, error) {
	if count == 0 {
		count = 64 << 10
	}
	var res nfs3.ReaddirRes
	args := &nfs3.ReaddirArgs{Dir: nfs3.FH(dir), Cookie: cookie, CookieVerf: verf, Count: count}
	if err := c.callNFS(ctx, "READDIR", nfs3.ProcReaddir, true, args, &res); err != nil {
		return nil, verf, false, err
	}
	if err := status("READDIR", res.Status); err != nil {
		return nil, verf, false, err
	}
	out := make([]DirEntry, len(res.Entries))
	for i, e := range res.Entries {
		out[i] = DirEntry{FileID: e.FileID, Name: e.Name, Cookie: e.Cookie}
	}
	return out, res.CookieVerf, res.EOF, nil
}

// ReaddirplusPage is ReaddirPage with attributes and handles. dircount
// bounds the directory information, maxcount the whole reply (0 = 8 KiB
// and 256 KiB).
func (c *Client) ReaddirplusPage(ctx context.Context, dir FH, cookie uint64, verf Verifier, dircount, maxcount uint32) ([]DirEntry, Verifier, bool, error) {
	if dircount == 0 {
		dircount = 8 << 10
	}
	if maxcount == 0 {
		maxcount = 256 << 10
	}
	var res nfs3.ReaddirplusRes
	args := &nfs3.ReaddirplusArgs{Dir: nfs3.FH(dir), Cookie: cookie, CookieVerf: verf, DirCount: dircount, MaxCount: maxcount}
	if err := c.callNFS(ctx, "READDIRPLUS", nfs3.ProcReaddirplus, true, args, &res); err != nil {
		return nil, verf, false, err
	}
	if err := status("READDIRPLUS", res.Status); err != nil {
		return nil, verf, false, err
	}
	out := make([]DirEntry, len(res.Entries))
	for i, e := range res.Entries {
		out[i] = DirEntry{FileID: e.FileID, Name: e.Name, Cookie: e.Cookie, Attr: fromFattr(e.Attr.Attr), FH: cloneFH(e.FH.FH)}
	}
	return out, res.CookieVerf, res.EOF, nil
}

// Readdir lists a whole directory ("." and ".." included if the server
// sends them).
func (c *Client) Readdir(ctx context.Context, dir FH) ([]DirEntry, error) {
	return c.readAll(ctx, "READDIR", func(cookie uint64, verf Verifier) ([]DirEntry, Verifier, bool, error) {
		return c.ReaddirPage(ctx, dir, cookie, verf, 0)
	})
}

// Readdirplus lists a whole directory with attributes and handles.
func (c *Client) Readdirplus(ctx context.Context, dir FH) ([]DirEntry, error) {
	return c.readAll(ctx, "READDIRPLUS", func(cookie uint64, verf Verifier) ([]DirEntry, Verifier, bool, error) {
		return c.ReaddirplusPage(ctx, dir, cookie, verf, 0, 0)
	})
}

func (c *Client) readAll(ctx context.Context, op string, page func(uint64, Verifier) ([]DirEntry, Verifier, bool, error)) ([]DirEntry, error) {
	var all []DirEntry
	var cookie uint64
	var verf Verifier
	for i := 0; i < maxDirPages; i++ {
		ents, nv, eof, err := page(cookie, verf)
		if err != nil {
			return nil, err
		}
		all = append(all, ents...)
		if eof {
			return all, nil
		}
		if len(ents) == 0 {
			return nil, &OpError{Op: op, Err: fmt.Errorf("server returned an empty page without EOF")}
		}
		cookie, verf = ents[len(ents)-1].Cookie, nv
	}
	return nil, &OpError{Op: op, Err: fmt.Errorf("directory listing exceeded %d pages", maxDirPages)}
}

package nfs

import (
	"context"
	"fmt"

	"github.com/tristore/tristore/proto/nfs3"
)

// READ, WRITE and COMMIT: single calls. Chunked parallel transfers of whole
// files are in transfer.go.

// Read reads up to len(p) bytes (at most Rsize) at off into p. eof reports
// that the read reached the end of the file.
func (c *Client) Read(ctx context.Context, fh FH, off uint64, p []byte) (n int, eof bool, err error) {
	if len(p) > int(c.Rsize()) {
		p = p[:c.Rsize()]
	}
	var res nfs3.ReadRes
	var cerr error
	// The data usually arrives in p straight from the socket (res.Data is
	// then p[:n]); otherwise it is copied out of the reply inside the
	// call, whose buffer is recycled right after.
	if err := c.callNFSThen(ctx, "READ", nfs3.ProcRead, true, &nfs3.ReadArgs{FH: nfs3.FH(fh), Offset: off, Count: uint32(len(p))}, &res, func() {
		switch {
		case res.Status != nfs3.OK:
			cerr = status("READ", res.Status)
		case len(res.Data) > len(p):
			cerr = &OpError{Op: "READ", Err: fmt.Errorf("server sent %d bytes for a %d-byte read", len(res.Data), len(p))}
		case len(res.Data) > 0 && &res.Data[0] == &p[0]:
			n = len(res.Data) // already in place
		default:
			n = copy(p, res.Data)
		}
		res.Data = nil
	}, p); err != nil {
		return 0, false, err
	}
	if cerr != nil {
		return 0, false, cerr
	}
	return n, res.EOF, nil
}

// WriteResult is what a WRITE reply says: how much was written, how stable
// it is, and the server's write verifier (compare it with COMMIT's to know
// whether UNSTABLE data survived).
type WriteResult struct {
	Count     uint32
	Committed Stable
	Verf      Verifier
	WCC       WCC
}

// Write writes data (at most Wsize bytes) at off with the given stability.
// WRITE is retransmitted after a connection drop: writing the same bytes at
// the same offset twice leaves the same file.
func (c *Client) Write(ctx context.Context, fh FH, off uint64, data []byte, how Stable) (WriteResult, error) {
	if len(data) > int(c.Wsize()) {
		return WriteResult{}, &OpError{Op: "WRITE", Err: fmt.Errorf("%d bytes over wsize %d", len(data), c.Wsize())}
	}
	var res nfs3.WriteRes
	args := &nfs3.WriteArgs{FH: nfs3.FH(fh), Offset: off, Count: uint32(len(data)), Stable: nfs3.StableHow(how), Data: data}
	if err := c.callNFS(ctx, "WRITE", nfs3.ProcWrite, true, args, &res); err != nil {
		return WriteResult{}, err
	}
	wr := WriteResult{Count: res.Count, Committed: Stable(res.Committed), Verf: res.Verf, WCC: fromWcc(&res.Wcc)}
	if err := status("WRITE", res.Status); err != nil {
		return wr, err
	}
	if res.Count > uint32(len(data)) {
		return wr, &OpError{Op: "WRITE", Err: fmt.Errorf("server claims %d bytes written of %d", res.Count, len(data))}
	}
	return wr, nil
}

// Commit asks the server to make [off, off+count) stable (count 0 = to the
// end of the file) and returns its write verifier.
func (c *Client) Commit(ctx context.Context, fh FH, off uint64, count uint32) (Verifier, error) {
	var res nfs3.CommitRes
	if err := c.callNFS(ctx, "COMMIT", nfs3.ProcCommit, true, &nfs3.CommitArgs{FH: nfs3.FH(fh), Offset: off, Count: count}, &res); err != nil {
		return Verifier{}, err
	}
	if err := status("COMMIT", res.Status); err != nil {
		return Verifier{}, err
	}
	return res.Verf, nil
}

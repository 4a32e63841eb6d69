package nfsclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/client/nfs"
)

// serverUnderTest describes what a procedure suite run may assume.
type serverUnderTest struct {
	// Dir is the exported directory on the local disk (to check what the
	// server really stored), "" if not known.
	Dir string
	// Mknod: the server creates FIFOs (ganesha) rather than refusing MKNOD.
	Mknod bool
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func randBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func mustNFSErr(t *testing.T, err error, want nfs.Status, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

// runProcedureSuite exercises every NFS v3 procedure of the client against
// a mounted server, checking results (and, where Dir is set, the bytes the
// server really wrote).
func runProcedureSuite(t *testing.T, c *nfs.Client, root nfs.FH, s serverUnderTest) {
	ctx := ctxT(t)
	top := fmt.Sprintf("suite-%d", time.Now().UnixNano())

	t.Run("NullFsinfoFsstatPathconf", func(t *testing.T) {
		if err := c.Null(ctx); err != nil {
			t.Fatal(err)
		}
		fi, err := c.Fsinfo(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if fi.RtMax == 0 || fi.WtMax == 0 || fi.DtPref == 0 {
			t.Fatalf("fsinfo has zero sizes: %+v", fi)
		}
		if c.Rsize() > fi.RtMax || c.Wsize() > fi.WtMax {
			t.Fatalf("rsize/wsize %d/%d not capped by fsinfo %d/%d", c.Rsize(), c.Wsize(), fi.RtMax, fi.WtMax)
		}
		st, err := c.Fsstat(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if st.TotalBytes == 0 || st.AvailBytes > st.TotalBytes {
			t.Fatalf("implausible fsstat %+v", st)
		}
		pc, err := c.Pathconf(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if pc.NameMax < 255 {
			t.Fatalf("name_max %d", pc.NameMax)
		}
		a, err := c.Getattr(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if a.Type != nfs.TypeDir {
			t.Fatalf("root is %v", a.Type)
		}
	})

	dir, dattr, err := c.Mkdir(ctx, root, top, nfs.SetAttr{Mode: u32(0o755)})
	if err != nil {
		t.Fatalf("MKDIR: %v", err)
	}
	if dattr.Type != nfs.TypeDir || dattr.Mode&0o777 != 0o755 {
		t.Fatalf("mkdir attrs %+v", dattr)
	}
	if s.Dir != "" {
		if fi, err := os.Stat(filepath.Join(s.Dir, top)); err != nil || !fi.IsDir() {
			t.Fatalf("directory not on server disk: %v", err)
		}
	}

	t.Run("CreateModes", func(t *testing.T) {
		fh, a, err := c.Create(ctx, dir, "unchecked", nfs.Unchecked, nfs.SetAttr{Mode: u32(0o640)}, nfs.Verifier{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Type != nfs.TypeReg || a.Mode&0o777 != 0o640 || a.Size != 0 || len(fh) == 0 {
			t.Fatalf("create attrs %+v", a)
		}
		_, _, err = c.Create(ctx, dir, "unchecked", nfs.Guarded, nfs.SetAttr{Mode: u32(0o640)}, nfs.Verifier{})
		mustNFSErr(t, err, nfs.ErrExist, "GUARDED create of existing file")
		v := nfs.Verifier{1, 2, 3, 4, 5, 6, 7, 8}
		fh1, _, err := c.Create(ctx, dir, "excl", nfs.Exclusive, nfs.SetAttr{Mode: u32(0o600)}, v)
		if err != nil {
			t.Fatal(err)
		}
		// A retransmission (same verifier) must succeed with the same file.
		fh2, a2, err := c.Create(ctx, dir, "excl", nfs.Exclusive, nfs.SetAttr{Mode: u32(0o600)}, v)
		if err != nil {
			t.Fatalf("EXCLUSIVE retransmission: %v", err)
		}
		if !bytes.Equal(fh1, fh2) || a2.Mode&0o777 != 0o600 {
			t.Fatalf("exclusive retransmission gave another file or mode %o", a2.Mode)
		}
		_, _, err = c.Create(ctx, dir, "excl", nfs.Exclusive, nfs.SetAttr{}, nfs.Verifier{9})
		mustNFSErr(t, err, nfs.ErrExist, "EXCLUSIVE create with another verifier")
	})

	t.Run("WriteReadCommit", func(t *testing.T) {
		fh, _, err := c.Create(ctx, dir, "data", nfs.Unchecked, nfs.SetAttr{Mode: u32(0o644)}, nfs.Verifier{})
		if err != nil {
			t.Fatal(err)
		}
		small := []byte("hello, nfs")
		wr, err := c.Write(ctx, fh, 0, small, nfs.FileSync)
		if err != nil {
			t.Fatal(err)
		}
		if wr.Count != uint32(len(small)) || wr.Committed != nfs.FileSync {
			t.Fatalf("FILE_SYNC write result %+v", wr)
		}
		wr2, err := c.Write(ctx, fh, 100, small, nfs.Unstable)
		if err != nil {
			t.Fatal(err)
		}
		cv, err := c.Commit(ctx, fh, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if cv != wr2.Verf {
			t.Fatalf("COMMIT verifier %x differs from WRITE's %x without a restart", cv, wr2.Verf)
		}
		buf := make([]byte, 200)
		n, eof, err := c.Read(ctx, fh, 0, buf)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, 110)
		copy(want, small)
		copy(want[100:], small)
		if !eof || !bytes.Equal(buf[:n], want) {
			t.Fatalf("read back %d bytes eof=%v: %q", n, eof, buf[:n])
		}
		// Large parallel transfer: several rsize/wsize chunks.
		big := randBytes(t, 3*int(c.Wsize())+12345)
		if err := c.WriteFile(ctx, fh, big, nfs.Unstable); err != nil {
			t.Fatal(err)
		}
		got, err := c.ReadFile(ctx, fh)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, big) {
			t.Fatalf("ReadFile: %d bytes, differs from the %d written", len(got), len(big))
		}
		if s.Dir != "" {
			disk, err := os.ReadFile(filepath.Join(s.Dir, top, "data"))
			if err != nil || !bytes.Equal(disk, big) {
				t.Fatalf("server disk has %d bytes (err %v), want the %d written", len(disk), err, len(big))
			}
		}
		// FILE_SYNC path of WriteFile, at a different size.
		big2 := randBytes(t, int(c.Wsize())+7)
		fh2, _, err := c.Create(ctx, dir, "data2", nfs.Unchecked, nfs.SetAttr{Mode: u32(0o644)}, nfs.Verifier{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WriteFile(ctx, fh2, big2, nfs.FileSync); err != nil {
			t.Fatal(err)
		}
		part := make([]byte, 1000)
		if n, err := c.ReadAt(ctx, fh2, part, uint64(len(big2)-500)); n != 500 || err == nil {
			t.Fatalf("ReadAt over EOF: n=%d err=%v, want 500 and io.EOF", n, err)
		}
		if !bytes.Equal(part[:500], big2[len(big2)-500:]) {
			t.Fatal("ReadAt tail differs")
		}
	})

	t.Run("SetattrAccess", func(t *testing.T) {
		fh, a, err := c.Create(ctx, dir, "attrs", nfs.Unchecked, nfs.SetAttr{Mode: u32(0o644)}, nfs.Verifier{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(ctx, fh, 0, make([]byte, 5000), nfs.FileSync); err != nil {
			t.Fatal(err)
		}
		mt := time.Unix(1_600_000_000, 0)
		wcc, err := c.Setattr(ctx, fh, nfs.SetAttr{Size: u64(1234), Mode: u32(0o600), Mtime: &mt}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if wcc.After == nil || wcc.After.Size != 1234 || wcc.After.Mode&0o777 != 0o600 || !wcc.After.Mtime.Equal(mt) {
			t.Fatalf("setattr after-attrs %+v", wcc.After)
		}
		a2, err := c.Getattr(ctx, fh)
		if err != nil {
			t.Fatal(err)
		}
		if a2.Size != 1234 || a2.FileID != a.FileID {
			t.Fatalf("getattr after setattr %+v", a2)
		}
		// Guarded SETATTR with a stale ctime must fail with NOT_SYNC.
		old := a2.Ctime.Add(-time.Hour)
		_, err = c.Setattr(ctx, fh, nfs.SetAttr{Size: u64(1)}, &old)
		mustNFSErr(t, err, nfs.ErrNotSync, "guarded SETATTR with wrong ctime")
		if _, err := c.Setattr(ctx, fh, nfs.SetAttr{Size: u64(1)}, &a2.Ctime); err != nil {
			t.Fatalf("guarded SETATTR with current ctime: %v", err)
		}
		acc, err := c.Access(ctx, fh, nfs.AccessRead|nfs.AccessModify)
		if err != nil {
			t.Fatal(err)
		}
		if acc&nfs.AccessRead == 0 {
			t.Fatalf("root has no read access: %#x", acc)
		}
	})

	t.Run("LookupErrors", func(t *testing.T) {
		_, _, err := c.Lookup(ctx, dir, "no-such-file")
		mustNFSErr(t, err, nfs.ErrNoEnt, "LOOKUP of a missing name")
		var oe *nfs.OpError
		if !errors.As(err, &oe) || oe.Op != "LOOKUP" {
			t.Fatalf("error %v is not an *OpError for LOOKUP", err)
		}
		fh, _, err := c.Lookup(ctx, dir, "data")
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Lookup(ctx, fh, "x")
		mustNFSErr(t, err, nfs.ErrNotDir, "LOOKUP in a file")
		_, err = c.Getattr(ctx, nfs.FH{1, 2, 3, 4, 5, 6, 7, 8})
		if !errors.Is(err, nfs.ErrStale) && !errors.Is(err, nfs.ErrBadHandle) {
			t.Fatalf("GETATTR of a made-up handle: %v, want STALE or BADHANDLE", err)
		}
	})

	t.Run("SymlinkReadlinkLink", func(t *testing.T) {
		lfh, la, err := c.Symlink(ctx, dir, "sym", "data", nfs.SetAttr{})
		if err != nil {
			t.Fatal(err)
		}
		if la.Type != nfs.TypeLnk {
			t.Fatalf("symlink type %v", la.Type)
		}
		target, err := c.Readlink(ctx, lfh)
		if err != nil || target != "data" {
			t.Fatalf("READLINK = %q, %v", target, err)
		}
		fh, _, err := c.Lookup(ctx, dir, "data")
		if err != nil {
			t.Fatal(err)
		}
		a, err := c.Link(ctx, fh, dir, "hardlink")
		if err != nil {
			t.Fatal(err)
		}
		if a != nil && a.Nlink != 2 {
			t.Fatalf("nlink after LINK = %d", a.Nlink)
		}
		hfh, ha, err := c.Lookup(ctx, dir, "hardlink")
		if err != nil {
			t.Fatal(err)
		}
		fa, _ := c.Getattr(ctx, fh)
		if ha.FileID != fa.FileID || fa.Nlink != 2 {
			t.Fatalf("hard link has fileid %d vs %d, nlink %d", ha.FileID, fa.FileID, fa.Nlink)
		}
		_ = hfh
		_, err = c.Link(ctx, fh, dir, "hardlink")
		mustNFSErr(t, err, nfs.ErrExist, "LINK onto an existing name")
	})

	t.Run("Mknod", func(t *testing.T) {
		_, a, err := c.Mknod(ctx, dir, "fifo", nfs.TypeFIFO, nfs.SetAttr{Mode: u32(0o644)}, 0, 0)
		if s.Mknod {
			if err != nil || a.Type != nfs.TypeFIFO {
				t.Fatalf("MKNOD fifo: %v %+v", err, a)
			}
			return
		}
		var st nfs.Status
		if !errors.As(err, &st) {
			t.Fatalf("MKNOD on a server that refuses it: %v, want an NFS3ERR status", err)
		}
	})

	t.Run("ReaddirPaging", func(t *testing.T) {
		sub, _, err := c.Mkdir(ctx, dir, "many", nfs.SetAttr{Mode: u32(0o755)})
		if err != nil {
			t.Fatal(err)
		}
		const n = 150
		want := map[string]bool{}
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("file-with-a-longish-name-%04d", i)
			want[name] = true
			if _, _, err := c.Create(ctx, sub, name, nfs.Unchecked, nfs.SetAttr{Mode: u32(0o644)}, nfs.Verifier{}); err != nil {
				t.Fatal(err)
			}
		}
		names := func(ents []nfs.DirEntry) []string {
			var out []string
			for _, e := range ents {
				if e.Name != "." && e.Name != ".." {
					out = append(out, e.Name)
				}
			}
			sort.Strings(out)
			return out
		}
		all, err := c.Readdir(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(all); len(got) != n || !want[got[0]] || !want[got[n-1]] {
			t.Fatalf("READDIR listed %d names, want %d", len(got), n)
		}
		// Small pages: the cookie/verifier protocol must carry on correctly.
		var cookie uint64
		var verf nfs.Verifier
		var paged []nfs.DirEntry
		pages := 0
		for ; pages < 1000; pages++ {
			ents, nv, eof, err := c.ReaddirPage(ctx, sub, cookie, verf, 1024)
			if err != nil {
				t.Fatalf("page %d: %v", pages, err)
			}
			paged = append(paged, ents...)
			if eof {
				break
			}
			cookie, verf = ents[len(ents)-1].Cookie, nv
		}
		if pages < 3 {
			t.Fatalf("1 KiB pages over %d entries took only %d pages", n, pages+1)
		}
		if got := names(paged); len(got) != n {
			t.Fatalf("paged READDIR listed %d names, want %d", len(got), n)
		}
		plus, err := c.Readdirplus(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(plus); len(got) != n {
			t.Fatalf("READDIRPLUS listed %d names, want %d", len(got), n)
		}
		for _, e := range plus {
			if e.Name == "." || e.Name == ".." {
				continue
			}
			if e.Attr == nil || e.Attr.Type != nfs.TypeReg || len(e.FH) == 0 {
				t.Fatalf("READDIRPLUS entry %q without attrs/handle: %+v", e.Name, e)
			}
		}
		// Clean up with REMOVE and RMDIR.
		err = c.Rmdir(ctx, dir, "many")
		mustNFSErr(t, err, nfs.ErrNotEmpty, "RMDIR of a non-empty directory")
		for name := range want {
			if err := c.Remove(ctx, sub, name); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Rmdir(ctx, dir, "many"); err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Lookup(ctx, dir, "many")
		mustNFSErr(t, err, nfs.ErrNoEnt, "LOOKUP after RMDIR")
	})

	t.Run("RenameRemove", func(t *testing.T) {
		d2, _, err := c.Mkdir(ctx, dir, "other", nfs.SetAttr{Mode: u32(0o755)})
		if err != nil {
			t.Fatal(err)
		}
		fh, _, err := c.Lookup(ctx, dir, "data2")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Rename(ctx, dir, "data2", d2, "moved"); err != nil {
			t.Fatal(err)
		}
		mfh, ma, err := c.Lookup(ctx, d2, "moved")
		if err != nil {
			t.Fatal(err)
		}
		fa, err := c.Getattr(ctx, fh)
		if err != nil {
			t.Fatalf("handle no longer valid after RENAME: %v", err)
		}
		if ma.FileID != fa.FileID {
			t.Fatal("renamed file has another fileid")
		}
		_, _, err = c.Lookup(ctx, dir, "data2")
		mustNFSErr(t, err, nfs.ErrNoEnt, "LOOKUP of the old name")
		err = c.Rename(ctx, dir, "nope", d2, "x")
		mustNFSErr(t, err, nfs.ErrNoEnt, "RENAME of a missing name")
		if err := c.Remove(ctx, d2, "moved"); err != nil {
			t.Fatal(err)
		}
		_, err = c.Getattr(ctx, mfh)
		if err == nil && s.Dir != "" {
			if _, serr := os.Stat(filepath.Join(s.Dir, top, "other", "moved")); serr == nil {
				t.Fatal("file still on disk after REMOVE")
			}
		}
		err = c.Remove(ctx, d2, "moved")
		mustNFSErr(t, err, nfs.ErrNoEnt, "second REMOVE")
	})

	t.Run("ConcurrentCalls", func(t *testing.T) {
		fh, _, err := c.Lookup(ctx, dir, "data")
		if err != nil {
			t.Fatal(err)
		}
		want, err := c.ReadFile(ctx, fh)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for g := 0; g < 32; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					off := uint64((g*7919 + i*104729) % (len(want) - 4096))
					buf := make([]byte, 4096)
					n, _, err := c.Read(ctx, fh, off, buf)
					if err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(buf[:n], want[off:off+uint64(n)]) {
						errs <- fmt.Errorf("goroutine %d: wrong bytes at %d", g, off)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})

	t.Run("Reconnect", func(t *testing.T) {
		before := c.Reconnects()
		c.DropConnection()
		if _, err := c.Getattr(ctx, dir); err != nil {
			t.Fatalf("GETATTR after a dropped connection: %v", err)
		}
		if c.Reconnects() != before+1 {
			t.Fatalf("reconnects %d -> %d, want one more", before, c.Reconnects())
		}
	})

	t.Run("ExportsDump", func(t *testing.T) {
		ex, err := c.Exports(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ex) == 0 {
			t.Fatal("EXPORT returned no exports")
		}
		if _, err := c.Dump(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }

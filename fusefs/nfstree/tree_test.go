package nfstree

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/client/nfs"
)

// The mount itself is tested end to end (kernel, FUSE, both servers) in
// test/nfsclient; these check the pieces that need no server.

func TestAttrConversion(t *testing.T) {
	mt := time.Unix(1_700_000_000, 123)
	cases := []struct {
		typ  nfs.FileType
		want uint32
	}{
		{nfs.TypeReg, syscall.S_IFREG}, {nfs.TypeDir, syscall.S_IFDIR}, {nfs.TypeLnk, syscall.S_IFLNK},
		{nfs.TypeFIFO, syscall.S_IFIFO}, {nfs.TypeSock, syscall.S_IFSOCK}, {nfs.TypeChr, syscall.S_IFCHR}, {nfs.TypeBlk, syscall.S_IFBLK},
	}
	for _, c := range cases {
		a := &nfs.Attr{Type: c.typ, Mode: 0o4755, Nlink: 3, UID: 7, GID: 8, Size: 5000, Used: 8192, FileID: 42,
			RdevMajor: 8, RdevMinor: 1, Atime: mt, Mtime: mt, Ctime: mt}
		var out fuse.Attr
		fillAttr(a, &out)
		if out.Mode != c.want|0o4755 || out.Ino != 42 || out.Size != 5000 || out.Blocks != 16 || out.Nlink != 3 ||
			out.Uid != 7 || out.Gid != 8 || out.Mtime != uint64(mt.Unix()) || out.Mtimensec != 123 {
			t.Errorf("%v: %+v", c.typ, out)
		}
		if c.typ == nfs.TypeBlk && out.Rdev != 8<<8|1 {
			t.Errorf("rdev %#x", out.Rdev)
		}
	}
}

func TestNewChecks(t *testing.T) {
	// A client that is not mounted has no root.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	c, err := nfs.Dial(context.Background(), ln.Addr().String(), nfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := New(c, Options{}); err == nil {
		t.Fatal("New accepted a client that is not mounted")
	}
	if _, err := New(c, Options{Form: "bogus", Root: nfs.FH{1}}); err == nil {
		t.Fatal("New accepted access form \"bogus\"")
	}
	f, err := New(c, Options{Root: nfs.FH{1}, Form: "direct"})
	if err != nil || f.opts.AttrTimeout != time.Second || f.opts.WriteBehind != 8<<20 {
		t.Fatalf("defaults: %+v %v", f, err)
	}
}

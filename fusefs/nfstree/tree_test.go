package nfstree

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/proto/nfs4"
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

// TestOwner4 maps v4 owner strings to ids: numeric as they are,
// name@domain through the local databases, unknown names to nobody.
func TestOwner4(t *testing.T) {
	var ic idCache
	for _, c := range []struct {
		s     string
		group bool
		want  uint32
	}{{"1234", false, 1234}, {"5678", true, 5678}, {"root@localdomain", false, 0}, {"root", true, 0},
		{"no-such-user-xyz@example.com", false, nobody}, {"no-such-group-xyz@example.com", true, nobody}} {
		if got := ic.id(c.s, c.group); got != c.want {
			t.Errorf("id(%q, group %v) = %d, want %d", c.s, c.group, got, c.want)
		}
	}
}

// TestSattr4 converts a v3 SetAttr to fattr4: the mask has exactly the
// fields set, owners go out numeric, times as client or server time.
func TestSattr4(t *testing.T) {
	mode, uid, gid, size := uint32(0o640), uint32(7), uint32(8), uint64(99)
	mt := time.Unix(1_600_000_000, 5)
	raw := sattr(nfs.SetAttr{Mode: &mode, UID: &uid, GID: &gid, Size: &size, Mtime: &mt, SetAtimeNow: true})
	want := nfs4.NewBitmap(nfs4.AttrSize, nfs4.AttrMode, nfs4.AttrOwner, nfs4.AttrOwnerGroup, nfs4.AttrTimeAccessSet, nfs4.AttrTimeModifySet)
	if fmt.Sprint(raw.Mask) != fmt.Sprint(want) {
		t.Fatalf("mask %v, want %v", raw.Mask, want)
	}
	fa, st := raw.Parse()
	if st != nfs4.OK || fa.Mode != 0o640 || fa.Owner != "7" || fa.OwnerGroup != "8" || fa.Size != 99 ||
		!fa.TimeAccessSet.Server || fa.TimeModifySet.Server || fa.TimeModifySet.T != (nfs4.Time{Sec: 1_600_000_000, Nsec: 5}) {
		t.Fatalf("%v %+v", st, fa)
	}
	if raw := sattr(nfs.SetAttr{}); !raw.Mask.Empty() || len(raw.Vals) != 0 {
		t.Fatalf("empty SetAttr: %+v", raw)
	}
}

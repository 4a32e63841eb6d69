package nfsclient

import (
	"testing"

	"github.com/tristore/tristore/client/nfs"
)

// TestClientVsGanesha runs every procedure of our client against the
// nfs-ganesha peer (VFS FSAL), checking the bytes on ganesha's disk too.
func TestClientVsGanesha(t *testing.T) {
	g := startGanesha(t, "")
	ctx := ctxT(t)
	c, err := nfs.Dial(ctx, g.NFSAddr, nfs.Options{MountAddr: g.MntAddr, Dial: g.Dialer()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root, err := c.Mount(ctx, g.Export)
	if err != nil {
		t.Fatal(err)
	}
	runProcedureSuite(t, c, root, serverUnderTest{Dir: g.Export, Mknod: true})
	if err := c.Unmount(ctx); err != nil {
		t.Fatalf("UMNT: %v", err)
	}
}

// TestMountViaPortmapper: without a MOUNT address the client asks MOUNT on
// the NFS port, gets PROG_UNAVAIL from ganesha, and finds MOUNT through
// rpcbind (GETPORT on port 111), as kernel clients do.
func TestMountViaPortmapper(t *testing.T) {
	g := startGanesha(t, "")
	ctx := ctxT(t)
	c, err := nfs.Dial(ctx, g.NFSAddr, nfs.Options{Dial: g.Dialer()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root, err := c.Mount(ctx, g.Export)
	if err != nil {
		t.Fatalf("MNT via portmapper: %v", err)
	}
	if a, err := c.Getattr(ctx, root); err != nil || a.Type != nfs.TypeDir {
		t.Fatalf("root: %+v %v", a, err)
	}
}

package nfstree

import (
	"context"
	"time"

	"github.com/tristore/tristore/client/nfs"
)

// Conn is what the tree needs of an NFS client, in v3's terms (nfs.Attr,
// nfs.SetAttr, stable_how). The v3 *nfs.Client is one (through v3Conn);
// v4Conn (v4.go) adapts the NFSv4.1 client.
type Conn interface {
	Getattr(ctx context.Context, fh nfs.FH) (*nfs.Attr, error)
	Setattr(ctx context.Context, fh nfs.FH, s nfs.SetAttr, guard *time.Time) (nfs.WCC, error)
	Lookup(ctx context.Context, dir nfs.FH, name string) (nfs.FH, *nfs.Attr, error)
	Create(ctx context.Context, dir nfs.FH, name string, how nfs.CreateMode, s nfs.SetAttr, verf nfs.Verifier) (nfs.FH, *nfs.Attr, error)
	Mkdir(ctx context.Context, dir nfs.FH, name string, s nfs.SetAttr) (nfs.FH, *nfs.Attr, error)
	Mknod(ctx context.Context, dir nfs.FH, name string, typ nfs.FileType, s nfs.SetAttr, major, minor uint32) (nfs.FH, *nfs.Attr, error)
	Symlink(ctx context.Context, dir nfs.FH, name, target string, s nfs.SetAttr) (nfs.FH, *nfs.Attr, error)
	Remove(ctx context.Context, dir nfs.FH, name string) error
	Rmdir(ctx context.Context, dir nfs.FH, name string) error
	Rename(ctx context.Context, fromDir nfs.FH, fromName string, toDir nfs.FH, toName string) error
	Link(ctx context.Context, fh nfs.FH, dir nfs.FH, name string) (*nfs.Attr, error)
	Readlink(ctx context.Context, fh nfs.FH) (string, error)
	Readdir(ctx context.Context, dir nfs.FH) ([]nfs.DirEntry, error)
	Readdirplus(ctx context.Context, dir nfs.FH) ([]nfs.DirEntry, error)
	Fsstat(ctx context.Context, fh nfs.FH) (*nfs.FSStat, error)
	// ReadAt fills p from off; n < len(p) only at end of file (io.EOF).
	ReadAt(ctx context.Context, fh nfs.FH, p []byte, off uint64) (int, error)
	// Write is one WRITE of at most Wsize bytes.
	Write(ctx context.Context, fh nfs.FH, off uint64, data []byte, how nfs.Stable) (nfs.WriteResult, error)
	Wsize() uint32
	// NewUnstable tracks UNSTABLE writes to fh until COMMIT (see
	// nfs.UnstableWriter).
	NewUnstable(fh nfs.FH) Unstable
}

// Unstable is nfs.UnstableWriter's method set.
type Unstable interface {
	WriteAt(ctx context.Context, data []byte, off uint64, owned bool) error
	Commit(ctx context.Context) error
	Pending() int
	Resends() int
}

// v3Conn is the NFS v3 client as a Conn.
type v3Conn struct{ *nfs.Client }

func (c v3Conn) NewUnstable(fh nfs.FH) Unstable { return nfs.NewUnstable(c.Client, fh) }

var _ Conn = v3Conn{}

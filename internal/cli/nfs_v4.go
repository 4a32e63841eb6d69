package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/proto/nfs4"
)

// The `tristore nfs` commands over NFSv4.1 (URL option version=4.1): the
// path is in the server's v4 namespace (tristore: the data tree from "/";
// nfs-ganesha: its Pseudo paths), and each command is one session.

// withNFS4 runs f with an NFSv4.1 session if the URL asks for v4; it
// reports whether it did.
func withNFS4(cmd *cobra.Command, raw string, f func(ctx context.Context, c *nfs.Client4, p string) error) (bool, error) {
	u, err := parseNFSURL(raw, nil)
	if err != nil {
		return true, err
	}
	if !u.V4 {
		return false, nil
	}
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	c, err := nfs.Dial4(ctx, u.Addr, u.Opts)
	if err != nil {
		return true, err
	}
	defer c.Close(context.Background())
	return true, f(ctx, c, u.Path)
}

// errNFSv3Only refuses version=4.1 where only v3 is implemented, rather
// than quietly speaking v3.
func errNFSv3Only(what string) error {
	return fmt.Errorf("%s speaks NFS v3 only: drop version=4.1 from the URL (over v4.1: tristore mount, and tristore nfs ls, cat, get, put, mkdir, rm and bench-ops)", what)
}

var ls4Mask = nfs4.NewBitmap(nfs4.AttrType, nfs4.AttrSize, nfs4.AttrMode, nfs4.AttrOwner, nfs4.AttrOwnerGroup, nfs4.AttrTimeModify)

func ls4(ctx context.Context, c *nfs.Client4, p string, long bool, out io.Writer) error {
	fh, a, err := c.LookupPath(ctx, p)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
	defer w.Flush()
	show := func(name string, a *nfs4.Fattr) {
		if !long || a == nil {
			fmt.Fprintln(w, name)
			return
		}
		mode := os.FileMode(a.Mode & 0o777)
		switch a.Type {
		case nfs4.TypeDir:
			mode |= os.ModeDir
		case nfs4.TypeLnk:
			mode |= os.ModeSymlink
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", mode, a.Owner, a.OwnerGroup, a.Size,
			time.Unix(a.TimeModify.Sec, int64(a.TimeModify.Nsec)).UTC().Format(time.RFC3339), name)
	}
	if a.Type != nfs4.TypeDir {
		show(path.Base(p), a)
		return nil
	}
	ents, err := c.Readdir(ctx, fh, ls4Mask)
	if err != nil {
		return err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
	for _, e := range ents {
		fa, st := e.Attrs.Parse()
		if st != nfs4.OK {
			show(e.Name, nil)
			continue
		}
		show(e.Name, &fa)
	}
	return nil
}

// split4 returns the handle of p's directory and p's last name.
func split4(ctx context.Context, c *nfs.Client4, p, what string) (nfs.FH, string, error) {
	dirPath, name := path.Split(path.Clean("/" + p))
	if name == "" {
		return nil, "", fmt.Errorf("%s: give a path below the root", what)
	}
	dir, _, err := c.LookupPath(ctx, dirPath)
	return dir, name, err
}

func get4(ctx context.Context, c *nfs.Client4, p string, out io.Writer) error {
	dir, name, err := split4(ctx, c, p, "get")
	if err != nil {
		return err
	}
	b, err := c.ReadFile(ctx, dir, name)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

// put4 uploads in one WriteFile (the whole file in memory: files larger
// than 4 GiB are refused rather than swapped through).
func put4(ctx context.Context, c *nfs.Client4, p string, in *os.File, mode uint32) error {
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if fi.Size() > 4<<30 {
		return fmt.Errorf("put over NFSv4.1: %s is %s; this command holds a file in memory and takes at most 4 GiB", in.Name(), strconv.FormatInt(fi.Size(), 10))
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	dir, name, err := split4(ctx, c, p, "put")
	if err != nil {
		return err
	}
	return c.WriteFile(ctx, dir, name, data, mode)
}

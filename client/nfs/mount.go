package nfs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// MOUNT v3: MNT, UMNT, EXPORT, DUMP. MOUNT runs on its own RPC client
// (Options.MountAddr) because ganesha and knfsd serve it on another port;
// tristore's server answers it on the NFS port.

func (c *Client) callMount(ctx context.Context, op string, proc uint32, idempotent bool, args encoder, res decoder) error {
	c.mu.Lock()
	mnt := c.mnt
	c.mu.Unlock()
	r, err := mnt.call(ctx, nfs3.ProgMount, nfs3.VersMount, proc, idempotent, encodeFunc(args))
	if err != nil {
		return &OpError{Op: op, Err: err}
	}
	if res != nil {
		if err := res.Decode(r); err != nil {
			return &OpError{Op: op, Err: fmt.Errorf("decoding reply: %w", err)}
		}
	}
	return nil
}

// Mount asks for the root handle of export (MNT) and reads FSINFO to cap
// rsize/wsize at the server's maxima. The handle is also kept as Root.
//
// Without Options.MountAddr, MOUNT is first asked on the NFS port; if the
// server does not serve it there (PROG_UNAVAIL, as ganesha and knfsd), the
// portmapper on port 111 of the same host is asked where it is (GETPORT).
func (c *Client) Mount(ctx context.Context, export string) (FH, error) {
	var res nfs3.MntRes
	err := c.callMount(ctx, "MNT", nfs3.MountProcMnt, true, &nfs3.DirPath{Path: export}, &res)
	var re *sunrpc.RPCError
	c.mu.Lock()
	shared := c.mnt == c.nfs
	c.mu.Unlock()
	if err != nil && shared && errors.As(err, &re) && re.Reply.Accepted && re.Reply.AcceptStat == sunrpc.ProgUnavail {
		port, perr := c.getport(ctx, nfs3.ProgMount, nfs3.VersMount)
		if perr != nil {
			return nil, fmt.Errorf("%w (and asking the portmapper for MOUNT: %v)", err, perr)
		}
		host, _, _ := net.SplitHostPort(c.nfs.addr)
		mnt := newRPCClient(net.JoinHostPort(host, strconv.Itoa(int(port))), c.opts.Dial, c.nfs.base, c.opts.Timeout, c.opts.Retries, c.opts.Hard)
		c.mu.Lock()
		c.mnt = mnt
		c.mu.Unlock()
		err = c.callMount(ctx, "MNT", nfs3.MountProcMnt, true, &nfs3.DirPath{Path: export}, &res)
	}
	if err != nil {
		return nil, err
	}
	if res.Status != nfs3.MntOK {
		return nil, &OpError{Op: "MNT", Err: fmt.Errorf("%s: %w", export, res.Status)}
	}
	root := cloneFH(res.FH)
	info, err := c.Fsinfo(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("nfs: mounted %s but FSINFO failed: %w", export, err)
	}
	c.mu.Lock()
	c.root, c.export, c.fsinfo = root, export, info
	if info.RtMax > 0 && c.rsize > info.RtMax {
		c.rsize = info.RtMax
	}
	if info.WtMax > 0 && c.wsize > info.WtMax {
		c.wsize = info.WtMax
	}
	c.mu.Unlock()
	return root, nil
}

// Unmount tells the server the export is no longer mounted (UMNT). The
// server's mount list is advisory, so this is best effort by design.
func (c *Client) Unmount(ctx context.Context) error {
	c.mu.Lock()
	export := c.export
	c.mu.Unlock()
	if export == "" {
		return nil
	}
	return c.callMount(ctx, "UMNT", nfs3.MountProcUmnt, true, &nfs3.DirPath{Path: export}, nil)
}

// Export is one entry of the server's export list.
type Export struct {
	Dir    string
	Groups []string
}

// Exports lists the server's exports (EXPORT).
func (c *Client) Exports(ctx context.Context) ([]Export, error) {
	var res nfs3.ExportRes
	if err := c.callMount(ctx, "EXPORT", nfs3.MountProcExport, true, nil, &res); err != nil {
		return nil, err
	}
	out := make([]Export, len(res.Exports))
	for i, e := range res.Exports {
		out[i] = Export{Dir: e.Dir, Groups: append([]string(nil), e.Groups...)}
	}
	return out, nil
}

// MountEntry is one entry of the server's mount list.
type MountEntry struct{ Host, Dir string }

// Dump lists the clients the server believes have mounted it (DUMP).
func (c *Client) Dump(ctx context.Context) ([]MountEntry, error) {
	var res nfs3.DumpRes
	if err := c.callMount(ctx, "DUMP", nfs3.MountProcDump, true, nil, &res); err != nil {
		return nil, err
	}
	out := make([]MountEntry, len(res.Mounts))
	for i, m := range res.Mounts {
		out[i] = MountEntry{Host: m.Host, Dir: m.Dir}
	}
	return out, nil
}

// getport asks the portmapper (RFC 1833 version 2, TCP port 111 of the NFS
// server's host) for the TCP port of prog/vers.
func (c *Client) getport(ctx context.Context, prog, vers uint32) (uint32, error) {
	host, _, err := net.SplitHostPort(c.nfs.addr)
	if err != nil {
		return 0, err
	}
	pm := newRPCClient(net.JoinHostPort(host, "111"), c.opts.Dial, nil, c.opts.Timeout, 1, false)
	defer pm.close()
	args := &nfs3.Mapping{Prog: prog, Vers: vers, Prot: nfs3.PortmapProto}
	r, err := pm.call(ctx, nfs3.ProgPortmap, nfs3.VersPortmap, nfs3.PortmapProcGetport, true, args.Encode)
	if err != nil {
		return 0, &OpError{Op: "GETPORT", Err: err}
	}
	port := r.Uint32()
	if r.Err() != nil {
		return 0, &OpError{Op: "GETPORT", Err: r.Err()}
	}
	if port == 0 || port > 65535 {
		return 0, &OpError{Op: "GETPORT", Err: fmt.Errorf("program %d version %d is not registered", prog, vers)}
	}
	return port, nil
}

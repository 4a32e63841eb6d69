// Package nfs is tristore's userspace NFS version 3 client (RFC 1813) with
// MOUNT version 3, over TCP. It needs no kernel NFS support, so the file
// view of a store can be used and measured on machines without it (this
// one has none), and it is what `tristore mount nfs://` and `tristore nfs`
// are built on.
//
// One Client holds one TCP connection to the NFS port with many calls in
// flight (replies are matched by XID by a single reader goroutine), redials
// when it drops and retransmits idempotent calls. Every procedure is a
// method taking a context; NFS3ERR_* replies come back as *OpError wrapping
// a Status sentinel (errors.Is(err, nfs.ErrNoEnt)). The wire codec is
// proto/sunrpc + proto/nfs3, shared with tristore's server.
//
//	c, err := nfs.Dial(ctx, "127.0.0.1:2049", nfs.Options{})
//	root, err := c.Mount(ctx, "/export")
//	fh, attr, err := c.Lookup(ctx, root, "file")
package nfs

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// Options configure a Client. The zero value works: AUTH_SYS as the
// calling user, MOUNT on the NFS port, 1 MiB reads and writes (lowered to
// the server's FSINFO limits at Mount).
type Options struct {
	// MountAddr is host:port of the MOUNT service; "" means the NFS address
	// (tristore serves both on one port; ganesha and knfsd use another).
	MountAddr string
	// UID, GID and GIDs are sent in AUTH_SYS. nil UID/GID mean the
	// process's own.
	UID, GID *uint32
	GIDs     []uint32
	// Machine is the AUTH_SYS machine name; default os.Hostname().
	Machine string
	// Rsize and Wsize bound READ and WRITE payloads (default: NFSv3 READs
	// 4 MiB, WRITEs and NFSv4 1 MiB); Mount lowers them to the server's
	// rtmax/wtmax.
	Rsize, Wsize uint32
	// Timeout and Retries are nfs(5)'s timeo and retrans over TCP: the
	// first attempt of a call may take Timeout (default 60 s), the next
	// 2*Timeout, and so on (up to 600 s). While an attempt lasts, a server
	// that refuses or drops connections is redialed and idempotent calls
	// are retransmitted. A soft client (Hard false) fails a call with
	// ErrTimedOut after Retries further attempts (default 2, as Linux;
	// negative: none); a hard one never gives up. See rpcClient.call.
	Timeout time.Duration
	Retries int
	// Hard retries calls without end while the server is down or silent,
	// as a Linux "hard" NFS mount (the default of `tristore mount`): the
	// caller waits until the server is back. Cancel ctx, use WithInterrupt,
	// or call GiveUp to stop waiting.
	Hard bool
	// Dial opens connections (default net.Dialer); tests use it to dial
	// inside a network namespace.
	Dial DialFunc
	// Parallel is how many READ/WRITE calls ReadFile/WriteFile keep in
	// flight (default 8).
	Parallel int
	// V4Owner is the NFSv4 client owner (Dial4); default host/pid/random.
	// A client that reconnects after a server restart with the same owner
	// may reclaim its opens and locks in the server's grace period.
	V4Owner string
	// V4Reclaim makes Dial4 leave RECLAIM_COMPLETE to the caller, who
	// reclaims first (OPEN CLAIM_PREVIOUS, LOCK reclaim) and then calls
	// Client4.ReclaimComplete.
	V4Reclaim bool
}

// Client is an NFS v3 client bound to one server. It is safe for
// concurrent use.
type Client struct {
	opts Options
	nfs  *rpcClient
	mnt  *rpcClient // == nfs when MOUNT shares the port

	mu     sync.Mutex
	root   FH
	export string
	rsize  uint32
	wsize  uint32
	fsinfo *FSInfo
}

// Dial connects to the NFS service at addr (host:port). It does not mount;
// call Mount for the root handle of an export.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	if opts.Rsize == 0 {
		opts.Rsize = defaultRsize3
	}
	opts, cred, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	c := &Client{opts: opts, rsize: opts.Rsize, wsize: opts.Wsize}
	c.nfs = newRPCClient(addr, opts.Dial, cred, opts.Timeout, opts.Retries, opts.Hard)
	c.mnt = c.nfs
	if opts.MountAddr != "" && opts.MountAddr != addr {
		c.mnt = newRPCClient(opts.MountAddr, opts.Dial, cred, opts.Timeout, opts.Retries, opts.Hard)
	}
	// Connect now so a wrong address fails here, not at the first call.
	if _, err := c.nfs.conn(ctx, time.Time{}); err != nil {
		return nil, err
	}
	return c, nil
}

// prepare fills in Options' defaults and builds the AUTH_SYS identity
// (shared by Dial and Dial4).
func prepare(opts Options) (Options, *sunrpc.AuthSys, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.Retries == 0 {
		opts.Retries = 2
	} else if opts.Retries < 0 {
		opts.Retries = 0
	}
	if opts.Rsize == 0 {
		opts.Rsize = 1 << 20
	}
	if opts.Wsize == 0 {
		opts.Wsize = 1 << 20
	}
	if opts.Rsize > nfs3.MaxData || opts.Wsize > nfs3.MaxData {
		return opts, nil, fmt.Errorf("nfs: rsize/wsize over %d bytes", nfs3.MaxData)
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	if opts.Dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		opts.Dial = d.DialContext
	}
	if opts.Machine == "" {
		opts.Machine, _ = os.Hostname()
		if len(opts.Machine) > sunrpc.MaxMachineName {
			opts.Machine = opts.Machine[:sunrpc.MaxMachineName]
		}
	}
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if opts.UID != nil {
		uid = *opts.UID
	}
	if opts.GID != nil {
		gid = *opts.GID
	}
	if len(opts.GIDs) > sunrpc.MaxAuthSysGIDs {
		return opts, nil, fmt.Errorf("nfs: %d supplementary groups (AUTH_SYS allows %d)", len(opts.GIDs), sunrpc.MaxAuthSysGIDs)
	}
	cred := &sunrpc.AuthSys{Stamp: uint32(time.Now().Unix()), MachineName: opts.Machine, UID: uid, GID: gid, GIDs: opts.GIDs}
	return opts, cred, nil
}

// Close drops the connections; calls in flight fail with ErrClosed.
// It does not send UMNT (see Unmount).
func (c *Client) Close() error {
	c.nfs.close()
	c.mu.Lock()
	mnt := c.mnt
	c.mu.Unlock()
	if mnt != c.nfs {
		mnt.close()
	}
	return nil
}

// GiveUp makes calls that are waiting for a server that is down or silent
// fail now with ErrTimedOut, and later calls fail as soon as their first
// attempt does, even on a hard client; calls to a server that answers are
// not affected. A mount calls it on shutdown so that an outage cannot hold
// up the unmount.
func (c *Client) GiveUp() {
	c.nfs.stopWaiting()
	c.mu.Lock()
	mnt := c.mnt
	c.mu.Unlock()
	mnt.stopWaiting()
}

// Root is the handle Mount returned (nil before Mount).
func (c *Client) Root() FH {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.root
}

// Rsize and Wsize are the READ/WRITE sizes in use (after Mount, capped by
// the server's FSINFO).
func (c *Client) Rsize() uint32 { c.mu.Lock(); defer c.mu.Unlock(); return c.rsize }
func (c *Client) Wsize() uint32 { c.mu.Lock(); defer c.mu.Unlock(); return c.wsize }

// Reconnects is how many TCP connections the NFS side has opened.
func (c *Client) Reconnects() int {
	c.nfs.mu.Lock()
	defer c.nfs.mu.Unlock()
	return c.nfs.gen
}

// DropConnection closes the NFS connection as if the network failed; the
// next call redials. For tests of the reconnect path.
func (c *Client) DropConnection() { c.nfs.breakConn() }

// jukeboxTries and jukeboxDelay bound the NFS3ERR_JUKEBOX retries
// (delays 0.1, 0.2, 0.4, 0.8, 1.6, 1.6 ... s).
var (
	jukeboxTries = 8
	jukeboxDelay = 100 * time.Millisecond
)

type encoder interface{ Encode(*sunrpc.Writer) }
type decoder interface{ Decode(*sunrpc.Reader) error }

func encodeFunc(args encoder) func(*sunrpc.Writer) {
	if args == nil {
		return nil
	}
	return args.Encode
}

// callNFS runs NFS procedure proc and decodes its result into res.
//
// NFS3ERR_JUKEBOX ("try again later": the server did not perform the call,
// e.g. a file is being recalled from tape) is retried here after a growing
// delay, up to jukeboxTries times, as the kernel client does; every NFS v3
// result starts with its status, so it is recognised before decoding.
func (c *Client) callNFS(ctx context.Context, op string, proc uint32, idempotent bool, args encoder, res decoder) error {
	return c.callNFSThen(ctx, op, proc, idempotent, args, res, nil, nil)
}

// callNFSThen is callNFS for a reply that is used up by then (READ: it
// copies the data out): after then returns, the reply's buffer is recycled,
// so nothing decoded into res may be used afterwards.
//
// dst (READ only, res a *nfs3.ReadRes) is where the data should end up:
// the connection's reader may put it there straight from the socket, and
// then res.Data is dst[:count] (then's copy becomes a no-op); otherwise
// res.Data points into the reply as for any call.
func (c *Client) callNFSThen(ctx context.Context, op string, proc uint32, idempotent bool, args encoder, res decoder, then func(), dst []byte) error {
	var r *sunrpc.Reader
	var err error
	direct := -1
	for try := 0; ; try++ {
		var sink *readSink
		if dst != nil {
			sink = newReadSink(dst)
		}
		r, err = c.nfs.callInto(ctx, nfs3.ProgNFS, nfs3.VersNFS, proc, idempotent, encodeFunc(args), sink)
		if err != nil {
			return &OpError{Op: op, Err: err}
		}
		if sink != nil {
			direct = sink.got
		}
		rest := r.Rest()
		if try+1 >= jukeboxTries || len(rest) < 4 || nfs3.Status(binary.BigEndian.Uint32(rest)) != nfs3.ErrJukebox {
			break
		}
		select {
		case <-ctx.Done():
			return &OpError{Op: op, Err: ctx.Err()}
		case <-time.After(jukeboxDelay << min(try, 4)):
		}
	}
	if rr, ok := res.(*nfs3.ReadRes); ok && direct >= 0 {
		if _, err := rr.DecodeHead(r); err != nil {
			return &OpError{Op: op, Err: fmt.Errorf("decoding reply: %w", err)}
		}
		rr.Data = dst[:direct]
	} else if res != nil {
		if err := res.Decode(r); err != nil {
			return &OpError{Op: op, Err: fmt.Errorf("decoding reply: %w", err)}
		}
	}
	if then != nil {
		then()
		if direct < 0 {
			putRecordBuf(r.Buffer())
		}
	}
	return nil
}

// status turns a non-OK nfsstat3 into the error callers see.
func status(op string, st nfs3.Status) error {
	if st == nfs3.OK {
		return nil
	}
	return &OpError{Op: op, Err: st}
}

// Calls is the number of NFS and MOUNT calls made so far (round trips;
// retransmissions not counted).
func (c *Client) Calls() int64 {
	n := c.nfs.calls.Load()
	if c.mnt != c.nfs {
		n += c.mnt.calls.Load()
	}
	return n
}

// Null pings the NFS service (procedure 0).
func (c *Client) Null(ctx context.Context) error {
	return c.callNFS(ctx, "NULL", nfs3.ProcNull, true, nil, nil)
}

// defaultRsize3 is the NFSv3 READ size asked for when Options.Rsize is 0;
// Mount lowers it to the server's rtmax (1 MiB for knfsd).
const defaultRsize3 = 4 << 20

package nfs

// Client4 is the NFS version 4.1 side of this package (RFC 8881): one
// client ID and one session over the same rpcClient the v3 Client uses.
// Every call is a COMPOUND that starts with SEQUENCE, and the helpers batch
// what v3 needs several round trips for: LookupPath is one COMPOUND for any
// depth, ReadSmall is OPEN+READ+CLOSE in one, WriteSmall is
// OPEN(create)+WRITE+CLOSE in one (4.1's "current stateid" lets later
// operations use the stateid OPEN returned within the same COMPOUND).
//
// Retransmission is safe for every COMPOUND: the session's slot and
// sequence ID make the server answer a retransmitted request from its reply
// cache instead of running it again (exactly-once semantics), so all calls
// go out as idempotent.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tristore/tristore/proto/nfs4"
	"github.com/tristore/tristore/proto/sunrpc"
)

// Op4 is one operation of a COMPOUND: its arguments and where its result
// goes (nil Res: a status-only result).
type Op4 struct {
	Op   nfs4.Op
	Args nfs4.Args
	Res  nfs4.Res
}

// Client4 is an NFSv4.1 client. It is safe for concurrent use: calls take
// one of the session's slots each.
type Client4 struct {
	opts     Options
	rc       *rpcClient
	clientID uint64
	sess     [nfs4.SessionIDSize]byte
	slots    chan uint32
	seqMu    sync.Mutex
	seq      []uint32
	owner    []byte
	ownerN   atomic.Uint64
	rsize    uint32
	wsize    uint32
}

// Dial4 connects to the NFSv4.1 service at addr and establishes a client ID
// and a session (EXCHANGE_ID, CREATE_SESSION, RECLAIM_COMPLETE).
func Dial4(ctx context.Context, addr string, opts Options) (*Client4, error) {
	opts, cred, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	c := &Client4{opts: opts, rc: newRPCClient(addr, opts.Dial, cred, opts.Timeout, opts.Retries, opts.Hard),
		rsize: opts.Rsize, wsize: opts.Wsize}
	if _, err := c.rc.conn(ctx, time.Time{}); err != nil {
		return nil, err
	}
	var verf [nfs4.VerifierSize]byte
	rand.Read(verf[:])
	host, _ := os.Hostname()
	c.owner = fmt.Appendf(nil, "tristore/%s/%d/%x", host, os.Getpid(), verf)
	if opts.V4Owner != "" {
		c.owner = []byte(opts.V4Owner)
	}
	var ex nfs4.ExchangeIDRes
	if err := c.raw(ctx, []Op4{{nfs4.OpExchangeID, &nfs4.ExchangeIDArgs{Verifier: verf, OwnerID: c.owner,
		Impl: []nfs4.ImplID{{Domain: "tristore.dev", Name: "tristore client"}}}, &ex}}); err != nil {
		c.rc.close()
		return nil, err
	}
	want := nfs4.ChannelAttrs{MaxRequestSize: opts.Wsize + 64<<10, MaxResponseSize: opts.Rsize + 64<<10,
		MaxResponseSizeCached: 16 << 10, MaxOperations: 16, MaxRequests: uint32(max(opts.Parallel, 16))}
	var cs nfs4.CreateSessionRes
	if err := c.raw(ctx, []Op4{{nfs4.OpCreateSession, &nfs4.CreateSessionArgs{ClientID: ex.ClientID, Sequence: ex.Sequence,
		Fore: want, Back: nfs4.ChannelAttrs{MaxRequestSize: 4096, MaxResponseSize: 4096, MaxOperations: 2, MaxRequests: 1},
		Flavors: []uint32{nfs4.AuthSys}}, &cs}}); err != nil {
		c.rc.close()
		return nil, err
	}
	c.clientID, c.sess = ex.ClientID, cs.SessionID
	n := max(cs.Fore.MaxRequests, 1)
	c.seq = make([]uint32, n)
	c.slots = make(chan uint32, n)
	for i := range n {
		c.slots <- i
	}
	if cs.Fore.MaxRequestSize > 64<<10 {
		c.wsize = min(c.wsize, cs.Fore.MaxRequestSize-32<<10)
	}
	if cs.Fore.MaxResponseSize > 64<<10 {
		c.rsize = min(c.rsize, cs.Fore.MaxResponseSize-32<<10)
	}
	if !opts.V4Reclaim {
		if err := c.ReclaimComplete(ctx); err != nil {
			c.Close(ctx)
			return nil, err
		}
	}
	return c, nil
}

// ReclaimComplete tells the server this client has reclaimed what it
// wanted after a server restart (or has nothing to reclaim); until then
// its new opens and locks get NFS4ERR_GRACE.
func (c *Client4) ReclaimComplete(ctx context.Context) error {
	err := c.Compound(ctx, Op4{nfs4.OpReclaimComplete, &nfs4.ReclaimCompleteArgs{}, nil})
	if errors.Is(err, nfs4.ErrCompleteAlready) {
		return nil
	}
	return err
}

// ClientID is the client ID the server gave this client.
func (c *Client4) ClientID() uint64 { return c.clientID }

// Close destroys the session and the client ID (a courtesy: the server
// would expire them after a lease) and drops the connection.
func (c *Client4) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c.raw(ctx, []Op4{{nfs4.OpDestroySession, &nfs4.SessionArgs{SessionID: c.sess}, nil}})
	c.raw(ctx, []Op4{{nfs4.OpDestroyClientID, &nfs4.ClientIDArgs{ClientID: c.clientID}, nil}})
	c.rc.close()
	return nil
}

// Calls is the number of COMPOUNDs sent so far (round trips).
func (c *Client4) Calls() int64 { return c.rc.calls.Load() }

// Rsize and Wsize are the READ and WRITE sizes in use.
func (c *Client4) Rsize() uint32 { return c.rsize }
func (c *Client4) Wsize() uint32 { return c.wsize }

// Compound sends ops after a SEQUENCE and decodes their results. The
// first operation that fails ends the COMPOUND; its status is the error.
func (c *Client4) Compound(ctx context.Context, ops ...Op4) error {
	var slot uint32
	select {
	case slot = <-c.slots:
	case <-ctx.Done():
		return &OpError{Op: "COMPOUND", Err: ctx.Err()}
	}
	defer func() { c.slots <- slot }()
	c.seqMu.Lock()
	c.seq[slot]++
	seq := c.seq[slot]
	c.seqMu.Unlock()
	all := append([]Op4{{nfs4.OpSequence, &nfs4.SequenceArgs{SessionID: c.sess, Sequence: seq, Slot: slot,
		HighestSlot: uint32(len(c.seq) - 1)}, &nfs4.SequenceRes{}}}, ops...)
	return c.raw(ctx, all)
}

// raw sends one COMPOUND of exactly ops.
func (c *Client4) raw(ctx context.Context, ops []Op4) error {
	r, err := c.rc.call(ctx, nfs4.Prog, nfs4.Vers, nfs4.ProcCompnd, true, func(w *sunrpc.Writer) {
		nfs4.CompoundArgs{Minor: 1, NOps: uint32(len(ops))}.Encode(w)
		for _, o := range ops {
			w.Uint32(uint32(o.Op))
			o.Args.Encode(w)
		}
	})
	if err != nil {
		return &OpError{Op: "COMPOUND", Err: err}
	}
	defer putRecordBuf(r.Buffer())
	st := nfs4.Status(r.Uint32())
	r.Opaque(nfs4.MaxTag)
	n := int(r.Uint32())
	if r.Err() != nil || n > len(ops) {
		return &OpError{Op: "COMPOUND", Err: fmt.Errorf("malformed reply (%d results for %d operations)", n, len(ops))}
	}
	for i := 0; i < n; i++ {
		op := nfs4.Op(r.Uint32())
		res := ops[i].Res
		if res == nil {
			res = &nfs4.StatusRes{}
		}
		if op != ops[i].Op {
			return &OpError{Op: ops[i].Op.String(), Err: fmt.Errorf("reply for %v", op)}
		}
		res.Decode(r)
		if r.Err() != nil {
			return &OpError{Op: op.String(), Err: fmt.Errorf("decoding reply: %w", r.Err())}
		}
		if s := res.Stat(); s != nfs4.OK {
			return &OpError{Op: op.String(), Err: status4(s)}
		}
	}
	if st != nfs4.OK {
		return &OpError{Op: "COMPOUND", Err: status4(st)}
	}
	// Results decoded above may alias the reply buffer: copy what callers
	// keep (every caller below copies data and handles it needs).
	cloneResults(ops[:n])
	return nil
}

// cloneResults copies byte slices out of results that alias the reply.
func cloneResults(ops []Op4) {
	for _, o := range ops {
		switch r := o.Res.(type) {
		case *nfs4.GetFHRes:
			r.FH = append([]byte(nil), r.FH...)
		case *nfs4.ReadRes:
			r.Data = append([]byte(nil), r.Data...)
		case *nfs4.GetattrRes:
			r.Attrs.Vals = append([]byte(nil), r.Attrs.Vals...)
		case *nfs4.ReaddirRes:
			for i := range r.Entries {
				r.Entries[i].Attrs.Vals = append([]byte(nil), r.Entries[i].Attrs.Vals...)
			}
		}
	}
}

// status4 maps an nfsstat4 to the v3 sentinel with the same number where
// there is one (so errors.Is(err, nfs.ErrNoEnt) works for both versions),
// else to the nfs4.Status itself.
func status4(s nfs4.Status) error {
	if s < 100 || (s >= 10001 && s <= 10008) {
		return Status(s)
	}
	return s
}

// Attr4 are the attributes the helpers ask for.
var Attr4Mask = nfs4.NewBitmap(nfs4.AttrType, nfs4.AttrChange, nfs4.AttrSize, nfs4.AttrFileID, nfs4.AttrMode,
	nfs4.AttrNumLinks, nfs4.AttrOwner, nfs4.AttrOwnerGroup, nfs4.AttrTimeAccess, nfs4.AttrTimeModify, nfs4.AttrTimeMetadata)

func parseAttr(r *nfs4.GetattrRes) (*nfs4.Fattr, error) {
	fa, st := r.Attrs.Parse()
	if st != nfs4.OK {
		return nil, &OpError{Op: "GETATTR", Err: status4(st)}
	}
	return &fa, nil
}

func splitPath(p string) []string {
	clean := strings.Trim(path.Clean("/"+p), "/")
	if clean == "" {
		return nil
	}
	return strings.Split(clean, "/")
}

func lookups(names []string) []Op4 {
	ops := []Op4{{nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil}}
	for _, n := range names {
		ops = append(ops, Op4{nfs4.OpLookup, &nfs4.NameArgs{Name: n}, nil})
	}
	return ops
}

// LookupPath finds p (from the server's root) in one COMPOUND and returns
// its handle and attributes.
func (c *Client4) LookupPath(ctx context.Context, p string) (FH, *nfs4.Fattr, error) {
	var fh nfs4.GetFHRes
	var ga nfs4.GetattrRes
	ops := append(lookups(splitPath(p)), Op4{nfs4.OpGetFH, &nfs4.NoArgs{}, &fh},
		Op4{nfs4.OpGetattr, &nfs4.GetattrArgs{Request: Attr4Mask}, &ga})
	if err := c.Compound(ctx, ops...); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p, err)
	}
	fa, err := parseAttr(&ga)
	return fh.FH, fa, err
}

// Stat returns the attributes of name in dir (PUTFH, LOOKUP, GETATTR).
func (c *Client4) Stat(ctx context.Context, dir FH, name string) (*nfs4.Fattr, error) {
	var ga nfs4.GetattrRes
	if err := c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: dir}, nil},
		Op4{nfs4.OpLookup, &nfs4.NameArgs{Name: name}, nil},
		Op4{nfs4.OpGetattr, &nfs4.GetattrArgs{Request: Attr4Mask}, &ga}); err != nil {
		return nil, err
	}
	return parseAttr(&ga)
}

func (c *Client4) openOwner() nfs4.Owner {
	return nfs4.Owner{ClientID: c.clientID, Owner: fmt.Appendf(nil, "open-%d", c.ownerN.Add(1))}
}

func current() nfs4.Stateid { return nfs4.Stateid{Seqid: 1} }

// ReadSmall reads up to rsize bytes of name in dir with OPEN, READ and
// CLOSE in one COMPOUND, and reports whether that was the whole file.
func (c *Client4) ReadSmall(ctx context.Context, dir FH, name string) ([]byte, bool, error) {
	var rd nfs4.ReadRes
	err := c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: dir}, nil},
		Op4{nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessRead | 0x0400, Owner: c.openOwner(), Claim: nfs4.ClaimNull, Name: name}, &nfs4.OpenRes{}},
		Op4{nfs4.OpRead, &nfs4.ReadArgs{Stateid: current(), Count: c.rsize}, &rd},
		Op4{nfs4.OpClose, &nfs4.CloseArgs{Stateid: current()}, &nfs4.StateidRes{}})
	return rd.Data, rd.EOF, err
}

// WriteSmall creates (or truncates) name in dir and writes data with
// OPEN, WRITE (FILE_SYNC) and CLOSE in one COMPOUND; len(data) must not
// exceed Wsize.
func (c *Client4) WriteSmall(ctx context.Context, dir FH, name string, data []byte, mode uint32) error {
	if uint32(len(data)) > c.wsize {
		return fmt.Errorf("nfs: WriteSmall of %d bytes (wsize %d)", len(data), c.wsize)
	}
	var attrs nfs4.RawFattr
	var w sunrpc.Writer
	fa := nfs4.Fattr{Mode: mode, Size: 0}
	mask := nfs4.NewBitmap(nfs4.AttrSize, nfs4.AttrMode)
	fa.EncodeVals(&w, mask)
	attrs = nfs4.RawFattr{Mask: mask, Vals: w.Bytes()}
	var wr nfs4.WriteRes
	err := c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: dir}, nil},
		Op4{nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessWrite | 0x0400, Owner: c.openOwner(), Create: true,
			CreateMode: nfs4.CreateUnchecked, Attrs: attrs, Claim: nfs4.ClaimNull, Name: name}, &nfs4.OpenRes{}},
		Op4{nfs4.OpWrite, &nfs4.WriteArgs{Stateid: current(), Stable: nfs4.FileSync, Data: data}, &wr},
		Op4{nfs4.OpClose, &nfs4.CloseArgs{Stateid: current()}, &nfs4.StateidRes{}})
	if err == nil && int(wr.Count) != len(data) {
		err = fmt.Errorf("nfs: short write (%d of %d bytes)", wr.Count, len(data))
	}
	return err
}

// Create makes an empty file (GUARDED: an existing name is ErrExist) with
// OPEN and CLOSE in one COMPOUND and returns its handle.
func (c *Client4) Create(ctx context.Context, dir FH, name string, mode uint32) (FH, error) {
	var w sunrpc.Writer
	fa := nfs4.Fattr{Mode: mode}
	mask := nfs4.NewBitmap(nfs4.AttrMode)
	fa.EncodeVals(&w, mask)
	var fh nfs4.GetFHRes
	err := c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: dir}, nil},
		Op4{nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessWrite | 0x0400, Owner: c.openOwner(), Create: true,
			CreateMode: nfs4.CreateGuarded, Attrs: nfs4.RawFattr{Mask: mask, Vals: w.Bytes()}, Claim: nfs4.ClaimNull, Name: name}, &nfs4.OpenRes{}},
		Op4{nfs4.OpGetFH, &nfs4.NoArgs{}, &fh},
		Op4{nfs4.OpClose, &nfs4.CloseArgs{Stateid: current()}, &nfs4.StateidRes{}})
	return fh.FH, err
}

// Mkdir makes a directory and returns its handle.
func (c *Client4) Mkdir(ctx context.Context, dir FH, name string, mode uint32) (FH, error) {
	var w sunrpc.Writer
	fa := nfs4.Fattr{Mode: mode}
	mask := nfs4.NewBitmap(nfs4.AttrMode)
	fa.EncodeVals(&w, mask)
	var fh nfs4.GetFHRes
	err := c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: dir}, nil},
		Op4{nfs4.OpCreate, &nfs4.CreateArgs{Type: nfs4.TypeDir, Name: name, Attrs: nfs4.RawFattr{Mask: mask, Vals: w.Bytes()}}, &nfs4.CreateRes{}},
		Op4{nfs4.OpGetFH, &nfs4.NoArgs{}, &fh})
	return fh.FH, err
}

// Remove removes name (a file or an empty directory) from dir.
func (c *Client4) Remove(ctx context.Context, dir FH, name string) error {
	return c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: dir}, nil},
		Op4{nfs4.OpRemove, &nfs4.NameArgs{Name: name}, &nfs4.CinfoRes{}})
}

// Readdir lists dir with the attributes of mask (nil: type and fileid).
func (c *Client4) Readdir(ctx context.Context, dir FH, mask nfs4.Bitmap) ([]nfs4.DirEntry, error) {
	if mask == nil {
		mask = nfs4.NewBitmap(nfs4.AttrType, nfs4.AttrFileID)
	}
	var out []nfs4.DirEntry
	var cookie uint64
	var verf [nfs4.VerifierSize]byte
	for page := 0; page < 1<<20; page++ {
		var rd nfs4.ReaddirRes
		if err := c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: dir}, nil},
			Op4{nfs4.OpReaddir, &nfs4.ReaddirArgs{Cookie: cookie, CookieVerf: verf, DirCount: 32 << 10, MaxCount: 256 << 10, Request: mask}, &rd}); err != nil {
			return out, err
		}
		out = append(out, rd.Entries...)
		if rd.EOF || len(rd.Entries) == 0 {
			return out, nil
		}
		cookie, verf = rd.Entries[len(rd.Entries)-1].Cookie, rd.CookieVerf
	}
	return out, errors.New("nfs: READDIR did not end")
}

// ReadFile reads the whole of p: OPEN and the first READ in one COMPOUND,
// then up to Options.Parallel READs in flight, then CLOSE.
func (c *Client4) ReadFile(ctx context.Context, dir FH, name string) ([]byte, error) {
	var open nfs4.OpenRes
	var fh nfs4.GetFHRes
	var ga nfs4.GetattrRes
	var first nfs4.ReadRes
	if err := c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: dir}, nil},
		Op4{nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessRead | 0x0400, Owner: c.openOwner(), Claim: nfs4.ClaimNull, Name: name}, &open},
		Op4{nfs4.OpGetFH, &nfs4.NoArgs{}, &fh},
		Op4{nfs4.OpGetattr, &nfs4.GetattrArgs{Request: nfs4.NewBitmap(nfs4.AttrSize)}, &ga},
		Op4{nfs4.OpRead, &nfs4.ReadArgs{Stateid: current(), Count: c.rsize}, &first}); err != nil {
		return nil, err
	}
	defer c.Compound(context.WithoutCancel(ctx), Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh.FH}, nil},
		Op4{nfs4.OpClose, &nfs4.CloseArgs{Stateid: open.Stateid}, &nfs4.StateidRes{}})
	fa, err := parseAttr(&ga)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, fa.Size)
	n := copy(buf, first.Data)
	if first.EOF || uint64(n) >= fa.Size {
		return buf[:n], nil
	}
	offs := make(chan uint64)
	errs := make(chan error, c.opts.Parallel)
	var wg sync.WaitGroup
	for range c.opts.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range offs {
				var rd nfs4.ReadRes
				if err := c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh.FH}, nil},
					Op4{nfs4.OpRead, &nfs4.ReadArgs{Stateid: open.Stateid, Offset: off, Count: c.rsize}, &rd}); err != nil {
					errs <- err
					return
				}
				copy(buf[off:], rd.Data)
			}
		}()
	}
	go func() {
		defer close(offs)
		for off := uint64(n); off < fa.Size; off += uint64(c.rsize) {
			select {
			case offs <- off:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return buf, nil
}

// WriteFile creates (or truncates) name in dir (mode for a new file) and writes data: OPEN in
// one COMPOUND, up to Options.Parallel UNSTABLE WRITEs in flight, then
// COMMIT and CLOSE in one. A write verifier that changes between the
// WRITEs and the COMMIT (a server restart) fails the call.
func (c *Client4) WriteFile(ctx context.Context, dir FH, name string, data []byte, mode uint32) error {
	var w sunrpc.Writer
	fa := nfs4.Fattr{Mode: mode}
	mask := nfs4.NewBitmap(nfs4.AttrSize, nfs4.AttrMode)
	fa.EncodeVals(&w, mask)
	var open nfs4.OpenRes
	var fh nfs4.GetFHRes
	if err := c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: dir}, nil},
		Op4{nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessWrite | 0x0400, Owner: c.openOwner(), Create: true,
			CreateMode: nfs4.CreateUnchecked, Attrs: nfs4.RawFattr{Mask: mask, Vals: w.Bytes()}, Claim: nfs4.ClaimNull, Name: name}, &open},
		Op4{nfs4.OpGetFH, &nfs4.NoArgs{}, &fh}); err != nil {
		return err
	}
	offs := make(chan uint64)
	errs := make(chan error, c.opts.Parallel)
	var verfMu sync.Mutex
	var verfs [][nfs4.VerifierSize]byte
	var wg sync.WaitGroup
	for range c.opts.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range offs {
				end := min(off+uint64(c.wsize), uint64(len(data)))
				var wr nfs4.WriteRes
				if err := c.Compound(ctx, Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh.FH}, nil},
					Op4{nfs4.OpWrite, &nfs4.WriteArgs{Stateid: open.Stateid, Offset: off, Stable: nfs4.Unstable, Data: data[off:end]}, &wr}); err != nil {
					errs <- err
					return
				}
				if int(wr.Count) != int(end-off) {
					errs <- fmt.Errorf("nfs: short write at %d (%d of %d bytes)", off, wr.Count, end-off)
					return
				}
				verfMu.Lock()
				verfs = append(verfs, wr.Verf)
				verfMu.Unlock()
			}
		}()
	}
	go func() {
		defer close(offs)
		for off := uint64(0); off < uint64(len(data)); off += uint64(c.wsize) {
			select {
			case offs <- off:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	var werr error
	select {
	case werr = <-errs:
	default:
		werr = ctx.Err()
	}
	var commit nfs4.VerfRes
	cerr := c.Compound(context.WithoutCancel(ctx), Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh.FH}, nil},
		Op4{nfs4.OpCommit, &nfs4.CommitArgs{}, &commit},
		Op4{nfs4.OpClose, &nfs4.CloseArgs{Stateid: open.Stateid}, &nfs4.StateidRes{}})
	if werr != nil {
		return werr
	}
	if cerr != nil {
		return cerr
	}
	for _, v := range verfs {
		if v != commit.Verf {
			return errors.New("nfs: the server restarted during the write (write verifier changed); write again")
		}
	}
	return nil
}

// Package nfs serves the store's directory tree over NFS version 3
// (RFC 1813) and MOUNT version 3, and NFS version 4.0 (RFC 7530) and 4.1
// (RFC 8881; nfs4*.go), all on one TCP port, with an optional tiny
// portmapper (RFC 1833 GETPORT only) for clients that insist on port 111.
//
// Why not a library: the maintained Go NFS server (willscott/go-nfs) serves a
// billy.Filesystem, which has no notion of stable-storage levels (WRITE
// stable_how, COMMIT, a write verifier), no restart-stable handles (it keeps
// an in-memory handle cache) and its own XDR layer; tristore needs durable
// writes, handles that survive restarts and one codec (proto/sunrpc,
// proto/nfs3) shared with its own client. File semantics live in package vfs.
//
// Connection model:
//
//	conn reader ──record──▶ handler goroutine (≤ MaxInFlight per conn) ──reply──▶ conn writer (mutex)
//
// Replies may leave in a different order than the calls arrived; clients
// match them by XID. A record over MaxRecord or broken record marking drops
// the connection (the stream cannot be resynchronised); a well-framed but
// malformed call gets GARBAGE_ARGS and the connection keeps serving.
//
// Scope and limits: TCP only (no UDP), AUTH_NONE and AUTH_SYS only, no NLM
// locking or NSM (kernel clients mount with -o nolock), rtmax/wtmax 1 MiB,
// READDIR(PLUS) lists neither "." nor "..". Special files (MKNOD, v4
// CREATE) are made with vfs.Mknod. Durability: see nfs_io.go.
package nfs

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/tristore/tristore/frontend"
	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
	"github.com/tristore/tristore/vfs"
)

// Options configures a Server.
type Options struct {
	// DataDir is the root of the store's tree (store.LocalPather.Root()).
	DataDir string
	// Exports; empty means DefaultExport.
	Exports []Export
	// PortmapAddr, if set, serves portmapper GETPORT there (e.g. "127.0.0.1:111").
	PortmapAddr string
	// MaxRecord bounds one RPC record (default sunrpc.DefaultMaxRecord).
	MaxRecord int
	// MaxInFlight bounds concurrent calls per connection (default 64).
	MaxInFlight int
	// MaxInFlightBytes bounds the call records held by all connections
	// together (default 256 MiB); a connection stops reading while over it.
	MaxInFlightBytes int64
	Log              *slog.Logger
	// Metrics, if set, receives per-procedure call counters and latencies.
	Metrics prometheus.Registerer
	// V4Lease is the NFSv4 lease time (default 90 s); V4Grace the grace
	// period after a restart in which clients reclaim (default: one lease;
	// negative: none).
	V4Lease, V4Grace time.Duration
}

// Limits the server advertises in FSINFO and enforces.
const (
	maxIO = 1 << 20 // wtmax (a 1 MiB WRITE fits in DefaultMaxRecord), NFSv4 READ/WRITE
	// maxRead is the v3 rtmax. A READ call is small whatever it asks
	// for, so its size is not bound by MaxRecord; a larger READ costs the
	// server and the client less per byte (see nfsRead).
	maxRead   = 4 << 20
	prefIO    = 1 << 20
	dirPref   = 64 << 10
	maxReaddr = 1 << 20 // cap on READDIR count/maxcount we honour
)

// Server is the NFS v3 + MOUNT v3 front end.
type Server struct {
	opts    Options
	log     *slog.Logger
	exports []*Export
	byID    map[uint32]*Export
	verf    [nfs3.WriteVerfSize]byte // write verifier: boot time, changes on restart
	metrics *metrics
	mem     *semaphore.Weighted // bytes of call records being handled

	closeOnce sync.Once
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	lns       []net.Listener
	closed    bool
	mounts    map[mountKey]struct{}
	v4        *v4state
	drc4      drc // NFSv4.0 duplicate request cache
	started   time.Time
	port      uint32 // TCP port of the main listener (for GETPORT)
	pmapAddr  net.Addr
	handlers  sync.WaitGroup
}

type mountKey struct{ host, dir string }

// New opens the exports and returns a server ready to Serve.
func New(opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, errors.New("nfs: no data directory")
	}
	if opts.MaxRecord <= 0 {
		opts.MaxRecord = sunrpc.DefaultMaxRecord
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 64
	}
	if opts.MaxInFlightBytes <= 0 {
		opts.MaxInFlightBytes = 256 << 20
	}
	opts.MaxInFlightBytes = max(opts.MaxInFlightBytes, int64(opts.MaxRecord))
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if len(opts.Exports) == 0 {
		e, err := ParseExport(DefaultExport)
		if err != nil {
			return nil, err
		}
		opts.Exports = []Export{e}
	}
	s := &Server{opts: opts, log: opts.Log, byID: map[uint32]*Export{},
		conns: map[net.Conn]struct{}{}, mounts: map[mountKey]struct{}{}}
	binary.BigEndian.PutUint64(s.verf[:], uint64(time.Now().UnixNano()))
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("nfs: metrics: %w", err)
	}
	s.metrics = m
	s.mem = semaphore.NewWeighted(opts.MaxInFlightBytes)
	s.started = time.Now()
	if opts.V4Lease <= 0 {
		opts.V4Lease = 90 * time.Second
	}
	if opts.V4Grace == 0 {
		opts.V4Grace = opts.V4Lease
	}
	s.opts = opts
	seen := map[string]bool{}
	for i := range opts.Exports {
		e := opts.Exports[i]
		if seen[e.Path] {
			s.closeExports()
			return nil, fmt.Errorf("nfs: export %s listed twice", e.Path)
		}
		seen[e.Path] = true
		dir := filepath.Join(opts.DataDir, filepath.FromSlash(e.Path))
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			s.closeExports()
			return nil, fmt.Errorf("nfs: export %s: %s is not a directory (create the bucket first)", e.Path, dir)
		}
		// The export id comes from the export's name, not the directory's
		// absolute path, so handles stay valid if the data directory is
		// moved or mounted elsewhere (kernel handles are relative to the
		// file system, not to a path).
		h := fnv.New32a()
		h.Write([]byte(e.Path))
		fs, err := vfs.Open(dir, vfs.Options{
			ExportID: h.Sum32() | 1,
			ReadOnly: e.ReadOnly,
			Async:    e.Async,
			IndexDir: filepath.Join(opts.DataDir, ".tristore", "vfs", "index"),
		})
		if err != nil {
			s.closeExports()
			return nil, fmt.Errorf("nfs: export %s: %w", e.Path, err)
		}
		e.fs = fs
		if _, dup := s.byID[fs.ExportID()]; dup {
			fs.Close()
			s.closeExports()
			return nil, fmt.Errorf("nfs: export %s: export id collision", e.Path)
		}
		s.exports = append(s.exports, &e)
		s.byID[fs.ExportID()] = &e
	}
	s.v4 = newV4State(opts.DataDir, opts.V4Lease, opts.V4Grace, opts.Log)
	return s, nil
}

func (s *Server) closeExports() {
	s.closeOnce.Do(func() {
		if s.v4 != nil {
			s.v4.close()
		}
		for _, e := range s.exports {
			e.fs.Close()
		}
	})
}

// Name implements frontend.Server.
func (s *Server) Name() string { return "nfs" }

// PortmapAddr is the portmapper's listening address once Serve runs (nil if off).
func (s *Server) PortmapAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pmapAddr
}

// WriteVerifier returns the current write verifier (tests compare it across restarts).
func (s *Server) WriteVerifier() [8]byte { return s.verf }

// Serve accepts connections on ln (and on PortmapAddr if set) until ctx
// ends or Close is called, then waits for in-flight calls and returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		s.mu.Lock()
		s.port = uint32(ta.Port)
		s.mu.Unlock()
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.lns = append(s.lns, ln)
	var pln net.Listener
	if s.opts.PortmapAddr != "" {
		var err error
		if pln, err = net.Listen("tcp", s.opts.PortmapAddr); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("nfs: portmapper listen %s: %w", s.opts.PortmapAddr, err)
		}
		s.lns = append(s.lns, pln)
		s.pmapAddr = pln.Addr()
		s.log.Info("listening", "protocol", "portmap", "addr", pln.Addr().String())
	}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.shutdown() })
	defer stop()
	var wg sync.WaitGroup
	accept := func(l net.Listener) {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				s.mu.Lock()
				closed := s.closed
				s.mu.Unlock()
				if closed || errors.Is(err, net.ErrClosed) {
					return
				}
				// Transient (e.g. EMFILE): back off briefly and keep serving.
				s.log.Warn("nfs: accept", "err", err)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if !s.track(c) {
				c.Close()
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serveConn(c)
			}()
		}
	}
	wg.Add(1)
	if pln != nil {
		wg.Add(1)
		go accept(pln)
	}
	accept(ln)
	wg.Wait()
	return nil
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// shutdown stops accepting and stops reading new calls; calls already being
// handled finish and their replies are sent, then connections close.
func (s *Server) shutdown() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for _, l := range s.lns {
		l.Close()
	}
	for c := range s.conns {
		if cr, ok := c.(interface{ CloseRead() error }); ok {
			cr.CloseRead()
		} else {
			c.SetReadDeadline(time.Now())
		}
	}
	s.mu.Unlock()
}

// Close stops the server, waits for in-flight calls and closes the exports.
func (s *Server) Close() error {
	s.shutdown()
	s.handlers.Wait()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.closeExports()
	return nil
}

// conn is one client connection.
type conn struct {
	s    *Server
	c    net.Conn
	addr netip.Addr
	// local: the peer is on this machine (see nfsRead, serveConn).
	local bool
	wmu   sync.Mutex
	werr  error
	sem   chan struct{}
}

var (
	writerPool = sync.Pool{New: func() any { return sunrpc.NewWriter(4096) }}
	// recordBufs recycles call records (up to MaxRecord each).
	recordBufs freeList
)

// freeList keeps up to 64 record buffers. Unlike sync.Pool it is not
// emptied at every GC, so a stream of 1 MiB WRITEs does not keep
// allocating (and zeroing) fresh megabyte buffers.
type freeList struct{ ch chan *[]byte }

func (f *freeList) Get() any {
	select {
	case b := <-f.ch:
		return b
	default:
		b := make([]byte, 0, 4096)
		return &b
	}
}

func (f *freeList) Put(b *[]byte) {
	select {
	case f.ch <- b:
	default:
	}
}

func init() { recordBufs.ch = make(chan *[]byte, 64) }

func (s *Server) serveConn(nc net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
	}()
	c := &conn{s: s, c: nc, sem: make(chan struct{}, s.opts.MaxInFlight)}
	if tc, ok := nc.(*net.TCPConn); ok {
		// Room for several 1 MiB replies and calls in flight.
		tc.SetWriteBuffer(4 << 20)
		tc.SetReadBuffer(4 << 20)
	}
	if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		c.addr = ap.Addr().Unmap()
	}
	if lp, err := netip.ParseAddrPort(nc.LocalAddr().String()); err == nil {
		c.local = sameHost(lp.Addr().Unmap(), c.addr)
	}
	rl := &readLoop{c: c, br: bufio.NewReaderSize(nc, 64<<10), done: make(chan struct{})}
	defer func() {
		rl.inflight.Wait()
		nc.Close()
	}()
	rl.run()
	<-rl.done
}

// readLoop reads a connection's calls, one goroutine at a time, and
// answers each on the goroutine that read it: handing every call to a new
// goroutine cost 40-70 us per call on this 2-core VM (the new goroutine
// waits for a thread; GETATTR round trips 135-193 us against 98-120 us
// answered where they were read, ganesha 87-157 us;
// docs/bench/profiles/nfs-create-s10.txt). So that a slow call (an fsync,
// a READ from the disk) does not hold up the calls queued behind it, a
// timer started with each call hands the reading to a new goroutine once
// the call has run for handOffAfter, and a call is handed off at once when
// the next one has already arrived (a client with several calls in
// flight). done is closed by the reader that meets the end of the
// connection.
type readLoop struct {
	c        *conn
	br       *bufio.Reader
	inflight sync.WaitGroup
	done     chan struct{}
}

// handOffAfter is how long a call answered on the reading goroutine may
// run before the next call is read by another goroutine.
const handOffAfter = 200 * time.Microsecond

// handleHook, when set (tests), runs on the reading goroutine before it
// answers a call there.
var handleHook func(rec []byte)

func (rl *readLoop) run() {
	c, s, nc, br := rl.c, rl.c.s, rl.c.c, rl.br
	for {
		bp := recordBufs.Get().(*[]byte)
		rec, err := sunrpc.ReadRecordInto(br, s.opts.MaxRecord, *bp)
		if err != nil {
			recordBufs.Put(bp)
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isTimeout(err) && !errors.Is(err, syscall.ECONNRESET) {
				s.log.Debug("nfs: dropping connection", "client", nc.RemoteAddr().String(), "err", err)
			}
			close(rl.done)
			return
		}
		c.sem <- struct{}{}
		weight := min(int64(cap(rec)), s.opts.MaxInFlightBytes)
		if err := s.mem.Acquire(context.Background(), weight); err != nil {
			<-c.sem
			recordBufs.Put(bp)
			close(rl.done)
			return
		}
		// A record already buffered when shutdown began is not started:
		// Close waits for handlers and then closes the exports.
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			<-c.sem
			s.mem.Release(weight)
			recordBufs.Put(bp)
			close(rl.done)
			return
		}
		s.handlers.Add(1)
		s.mu.Unlock()
		rl.inflight.Add(1)
		reading := true // this goroutine still reads the connection
		if !(c.local && isV3Read(rec) && c.handle(rec, true)) {
			if br.Buffered() > 0 {
				// The next call is here already: read it now.
				go rl.run()
				reading = false
				c.handle(rec, false)
			} else {
				var handed atomic.Bool
				t := time.AfterFunc(handOffAfter, func() {
					if handed.CompareAndSwap(false, true) {
						rl.run()
					}
				})
				if handleHook != nil {
					handleHook(rec)
				}
				c.handle(rec, false)
				t.Stop()
				reading = handed.CompareAndSwap(false, true)
			}
		}
		// Decoded arguments alias rec; handle has finished with them.
		if cap(rec) <= s.opts.MaxRecord {
			*bp = rec[:0]
		}
		recordBufs.Put(bp)
		<-c.sem
		s.mem.Release(weight)
		rl.inflight.Done()
		s.handlers.Done()
		if !reading {
			return
		}
	}
}

// isV3Read tells whether a call record is an NFSv3 READ (RPC call header:
// xid, type, rpcvers, prog, vers, proc).
func isV3Read(rec []byte) bool {
	return len(rec) >= 24 && binary.BigEndian.Uint32(rec[12:]) == nfs3.ProgNFS &&
		binary.BigEndian.Uint32(rec[16:]) == nfs3.VersNFS && binary.BigEndian.Uint32(rec[20:]) == nfs3.ProcRead
}

// sameHost tells whether a connection's peer runs on this machine: it
// came over loopback or from the address it reached us at.
func sameHost(local, remote netip.Addr) bool {
	return remote.IsValid() && (remote.IsLoopback() || remote == local)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// send writes one reply record (b followed by tail); a write error closes
// the connection.
func (c *conn) send(b []byte, tail ...[]byte) { c.sendFile(b, nil, tail...) }

// sendFile is send with READ data taken from a file (ft non-nil).
func (c *conn) sendFile(b []byte, ft *fileTail, tail ...[]byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return
	}
	c.c.SetWriteDeadline(time.Now().Add(2 * time.Minute))
	var err error
	if ft != nil {
		err = sendFileTail(c.c, b, ft)
	} else if len(tail) == 0 {
		err = sunrpc.WriteRecord(c.c, b)
	} else {
		err = sunrpc.WriteRecordBuffers(c.c, append([][]byte{b}, tail...)...)
	}
	if err != nil {
		c.werr = err
		c.c.Close()
	}
}

// errGarbage from a procedure means "answer GARBAGE_ARGS".
var errGarbage = errors.New("garbage args")

// authInfo is the caller's identity as sent (squashing happens per export).
type authInfo struct {
	none     bool
	uid, gid uint32
	gids     []uint32
	machine  string
}

// request is one decoded call.
type request struct {
	c    *conn
	call sunrpc.Call
	auth authInfo
	// tail is sent after the encoded reply without copying (READ data);
	// release, if set, runs once the reply is sent.
	tail    [][]byte
	file    *fileTail // READ data sent with sendfile after the reply
	release func()
	// inline: handled on the connection's reading goroutine, which must
	// not wait for the disk; a READ whose data is not cached returns
	// errNotInline and is handed to a goroutine of its own.
	inline bool
}

// errNotInline from a procedure called inline means "call me again on a
// goroutine that may block": nothing has been sent.
var errNotInline = errors.New("nfs: not answerable without waiting")

type procFunc func(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error

// handle decodes one call, dispatches it and sends the reply. With
// inline, it runs on the connection's reading goroutine and may decline
// (return false, nothing sent) a call that would wait for the disk.
func (c *conn) handle(rec []byte, inline bool) bool {
	w := writerPool.Get().(*sunrpc.Writer)
	defer func() {
		if w.Len() < 2<<20 {
			w.Reset()
			writerPool.Put(w)
		}
	}()
	w.Reset()
	r := sunrpc.NewReader(rec)
	call, err := sunrpc.DecodeCall(r)
	switch {
	case errors.Is(err, sunrpc.ErrRPCVersion):
		sunrpc.EncodeRPCMismatch(w, call.XID)
		c.send(w.Bytes())
		return true
	case errors.Is(err, sunrpc.ErrNotCall):
		// Not a call: a confused or hostile peer. Nothing sensible can be
		// answered, and what follows is unlikely to be RPC either.
		c.c.Close()
		return true
	case err != nil:
		// The header itself is unreadable. If at least the XID and the
		// fixed fields parsed, answer GARBAGE_ARGS so the caller is not left
		// waiting; otherwise drop the record.
		if len(rec) >= 24 {
			sunrpc.EncodeAccepted(w, call.XID, sunrpc.GarbageArgs)
			c.send(w.Bytes())
		}
		return true
	}
	req := &request{c: c, call: call, inline: inline}
	switch call.Cred.Flavor {
	case sunrpc.AuthFlavorNone:
		req.auth.none = true
	case sunrpc.AuthFlavorSys:
		as, err := sunrpc.DecodeAuthSys(call.Cred.Body)
		if err != nil {
			sunrpc.EncodeAuthError(w, call.XID, sunrpc.AuthBadCred)
			c.send(w.Bytes())
			return true
		}
		req.auth = authInfo{uid: as.UID, gid: as.GID, gids: as.GIDs, machine: as.MachineName}
	default:
		if call.Proc != 0 { // NULL is answered whatever the flavor (RFC 5531 sec. 8.1)
			sunrpc.EncodeAuthError(w, call.XID, sunrpc.AuthTooWeak)
			c.send(w.Bytes())
			return true
		}
		req.auth.none = true
	}
	var table []procFunc
	switch {
	case call.Prog == nfs3.ProgNFS && call.Vers == nfs3.VersNFS:
		table = nfsProcs
	case call.Prog == nfs3.ProgNFS && call.Vers == 4:
		table = v4Procs
	case call.Prog == nfs3.ProgMount && call.Vers == nfs3.VersMount:
		table = mountProcs
	case call.Prog == nfs3.ProgPortmap && call.Vers == nfs3.VersPortmap:
		table = portmapProcs
	case call.Prog == nfs3.ProgNFS:
		sunrpc.EncodeProgMismatch(w, call.XID, nfs3.VersNFS, 4)
		c.send(w.Bytes())
		return true
	case call.Prog == nfs3.ProgMount:
		sunrpc.EncodeProgMismatch(w, call.XID, nfs3.VersMount, nfs3.VersMount)
		c.send(w.Bytes())
		return true
	case call.Prog == nfs3.ProgPortmap:
		sunrpc.EncodeProgMismatch(w, call.XID, nfs3.VersPortmap, nfs3.VersPortmap)
		c.send(w.Bytes())
		return true
	default:
		sunrpc.EncodeAccepted(w, call.XID, sunrpc.ProgUnavail)
		c.send(w.Bytes())
		return true
	}
	if int(call.Proc) >= len(table) || table[call.Proc] == nil {
		sunrpc.EncodeAccepted(w, call.XID, sunrpc.ProcUnavail)
		c.send(w.Bytes())
		return true
	}
	sunrpc.EncodeAccepted(w, call.XID, sunrpc.Success)
	start := time.Now()
	err = c.callProc(table[call.Proc], req, r, w)
	if req.release != nil {
		defer req.release()
	}
	if inline && errors.Is(err, errNotInline) {
		return false
	}
	if err != nil {
		req.tail, req.file = nil, nil
		w.Reset()
		stat := sunrpc.SystemErr
		if errors.Is(err, errGarbage) || errors.Is(err, sunrpc.ErrGarbage) {
			stat = sunrpc.GarbageArgs
		} else {
			c.s.log.Warn("nfs: procedure failed", "prog", call.Prog, "proc", call.Proc, "err", err)
		}
		sunrpc.EncodeAccepted(w, call.XID, stat)
	}
	stat := "SUCCESS"
	if err != nil {
		stat = "ERROR"
	}
	// Counted before the reply leaves, so a client that has its answer
	// also finds the call in the metrics (TestMetrics raced on this).
	c.s.metrics.observe(call.Prog, call.Proc, stat, start)
	c.sendFile(w.Bytes(), req.file, req.tail...)
	return true
}

// callProc runs a procedure, turning a panic into SYSTEM_ERR so one bad
// call never takes the server down.
func (c *conn) callProc(p procFunc, req *request, r *sunrpc.Reader, w *sunrpc.Writer) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return p(c.s, req, r, w)
}

// decodeArgs decodes a procedure's arguments; any failure (including
// trailing garbage beyond a small allowance) is errGarbage.
func decodeArgs(r *sunrpc.Reader, args interface{ Decode(*sunrpc.Reader) error }) error {
	if err := args.Decode(r); err != nil {
		return fmt.Errorf("%w: %v", errGarbage, err)
	}
	return nil
}

var _ frontend.Server = (*Server)(nil)

// Package iscsi is tristore's iSCSI target (RFC 7143). Each volume
// (blockdev/filelun) is LUN 0 of its own target, named as in names.go.
//
//	net.Conn ─ conn.readLoop ─┬─ login.go    (security + operational negotiation, CHAP)
//	                          ├─ text.go     (SendTargets, NOP)
//	                          ├─ task.go     (SCSI Command, Data-Out/R2T, Data-In, Response)
//	                          │     └─ scsi/ (SPC/SBC device server over blockdev.Device)
//	                          ├─ tmf.go      (ABORT TASK ... TARGET WARM RESET)
//	                          └─ logout
//
// Sessions (session.go) order commands by CmdSN and advertise a command
// window (MaxCmdSN) so many commands run concurrently. Error recovery
// level 0: a protocol error on a connection drops that connection only;
// every other session keeps working.
package iscsi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/blockdev/filelun"
	"github.com/tristore/tristore/frontend"
	"github.com/tristore/tristore/frontend/iscsi/scsi"
	"github.com/tristore/tristore/store"
)

// Config configures the target.
type Config struct {
	Store store.Store
	Log   *slog.Logger
	// CHAP applies to every target not in PerTarget; discovery sessions
	// use it too.
	CHAP      CHAPConfig
	PerTarget map[string]CHAPConfig // lower-case IQN -> CHAP; "*" is a default
	// QueueDepth is the command window per session (MaxCmdSN - ExpCmdSN + 1).
	QueueDepth int
	// MaxRecvDataSegmentLength we declare; MaxBurstLength/FirstBurstLength we offer.
	MaxRecvDataSegmentLength int
	MaxBurstLength           int
	FirstBurstLength         int
	MaxConnections           int
	// NopInterval: an idle connection is pinged with NOP-In this often and
	// dropped if the initiator does not answer within NopTimeout. 0 disables.
	NopInterval, NopTimeout time.Duration
	// LoginTimeout bounds the whole login phase.
	LoginTimeout time.Duration
	// Extra serves volumes the store does not hold beside its own (the CLI
	// wires volumes kept as chunks in a remote bucket: tristore volume
	// create --backend); nil: none.
	Extra ExtraVolumes
}

// ExtraVolumes are targets served beside the store's volumes.
type ExtraVolumes interface {
	// Targets lists their IQNs for discovery.
	Targets(ctx context.Context) ([]string, error)
	// Open opens the volume behind iqn; ok is false when iqn is not one
	// of them. The target closes dev when its last session ends.
	Open(ctx context.Context, iqn string) (dev blockdev.Device, serial string, ok bool, err error)
}

func (c *Config) defaults() {
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = 128
	}
	if c.MaxRecvDataSegmentLength <= 0 {
		c.MaxRecvDataSegmentLength = 256 << 10
	}
	if c.MaxBurstLength <= 0 {
		c.MaxBurstLength = 1 << 20
	}
	if c.FirstBurstLength <= 0 {
		c.FirstBurstLength = 256 << 10
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 8
	}
	if c.NopTimeout <= 0 {
		c.NopTimeout = 15 * time.Second
	}
	if c.LoginTimeout <= 0 {
		c.LoginTimeout = 30 * time.Second
	}
}

// maxTransfer is the largest SCSI transfer (EDTL) accepted; also reported
// in the Block Limits VPD page.
const maxTransfer = 32 << 20

// Server is the iSCSI target.
type Server struct {
	cfg Config
	st  filelun.Store
	log *slog.Logger

	mu       sync.Mutex
	targets  map[string]*target // by lower-case IQN, while in use
	sessions map[uint16]*session
	nextTSIH uint16
	conns    map[*conn]struct{}
	lns      map[net.Listener]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// New makes a target server over cfg.Store (which must support
// random-access files and bucket config, as the posix store does).
func New(cfg Config) (*Server, error) {
	cfg.defaults()
	st, err := filelun.AsStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, st: st, log: cfg.Log, targets: map[string]*target{},
		sessions: map[uint16]*session{}, conns: map[*conn]struct{}{}, lns: map[net.Listener]struct{}{}}, nil
}

// Name implements frontend.Server.
func (s *Server) Name() string { return "iscsi" }

// Serve accepts connections until ctx ends or Close is called.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				s.wg.Wait()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
			tc.SetKeepAlive(true)
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every connection once its in-flight
// commands finish (bounded) and releases the volumes.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.shutdown(5 * time.Second) }()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.log.Warn("iscsi: connections still closing after 10s")
	}
	return nil
}

// chapFor returns the CHAP settings of a target ("" = discovery).
func (s *Server) chapFor(iqn string) CHAPConfig {
	if c, ok := s.cfg.PerTarget[strings.ToLower(iqn)]; ok && iqn != "" {
		return c
	}
	if c, ok := s.cfg.PerTarget["*"]; ok {
		return c
	}
	return s.cfg.CHAP
}

// target is one served volume, open while sessions use it.
type target struct {
	name   string
	bucket string
	volume string
	lun    blockdev.Device
	lu     *scsi.LU
	refs   int
	// closed is closed once the last session's release has flushed and
	// closed the LUN; until then the target stays in Server.targets so a
	// new login waits for it instead of opening the volume a second time
	// (which the served lock of store/inuse refuses).
	closed chan struct{}
}

// acquireTarget opens (or shares) the volume behind iqn.
func (s *Server) acquireTarget(ctx context.Context, iqn string) (*target, error) {
	bucket, vol, ok := ParseTargetName(iqn)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a tristore target name", filelun.ErrNotVolume, iqn)
	}
	key := strings.ToLower(iqn)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		t, ok := s.targets[key]
		if !ok {
			break
		}
		if t.refs > 0 {
			t.refs++
			return t, nil
		}
		// Being closed by its last session: wait for that, then open anew.
		s.mu.Unlock()
		select {
		case <-t.closed:
		case <-ctx.Done():
			s.mu.Lock()
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
	var lun blockdev.Device
	var serial string
	if s.cfg.Extra != nil {
		dev, ser, ok, err := s.cfg.Extra.Open(ctx, iqn)
		if err != nil {
			return nil, err
		}
		if ok {
			lun, serial = dev, ser
		}
	}
	if lun == nil {
		l, info, err := filelun.Open(ctx, s.st, bucket, vol)
		if err != nil {
			return nil, err
		}
		lun, serial = l, info.Serial
	}
	var id [8]byte
	for i := 0; i < 8 && 2*i+1 < len(serial); i++ {
		fmt.Sscanf(serial[2*i:2*i+2], "%02x", &id[i])
	}
	t := &target{name: TargetName(bucket, vol), bucket: bucket, volume: vol, lun: lun, refs: 1, closed: make(chan struct{})}
	t.lu = scsi.New(scsi.Config{Dev: lun, Serial: serial, ID: id, TargetName: t.name, MaxTransferBytes: maxTransfer})
	s.targets[key] = t
	return t, nil
}

// releaseTarget drops a reference; the last one flushes and closes the volume.
func (s *Server) releaseTarget(t *target) {
	s.mu.Lock()
	t.refs--
	last := t.refs == 0
	s.mu.Unlock()
	if last {
		if err := t.lun.Flush(context.Background()); err != nil {
			s.log.Warn("iscsi: flushing volume on close", "target", t.name, "err", err)
		}
		t.lun.Close()
		s.mu.Lock()
		delete(s.targets, strings.ToLower(t.name))
		s.mu.Unlock()
		close(t.closed)
	}
}

// listTargets returns the IQN of every volume that can be served (for
// SendTargets). A broken volume (its object gone or unreadable) is left
// out with a warning, and a bucket whose registry cannot be read costs
// only its own volumes (the error is returned with the rest), so one bad
// volume never empties discovery for all the others.
func (s *Server) listTargets(ctx context.Context) ([]string, error) {
	vs, err := filelun.List(ctx, s.st, "")
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if v.State != filelun.StateOK {
			s.log.Warn("iscsi: volume not offered in discovery", "volume", v.Bucket+"/"+v.Name, "state", v.State, "problem", v.Problem)
			continue
		}
		out = append(out, TargetName(v.Bucket, v.Name))
	}
	if s.cfg.Extra != nil {
		extra, xerr := s.cfg.Extra.Targets(ctx)
		out = append(out, extra...)
		err = errors.Join(err, xerr)
	}
	return out, err
}

var _ frontend.Server = (*Server)(nil)

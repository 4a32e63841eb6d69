package iscsi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tristore/tristore/blockdev"
	proto "github.com/tristore/tristore/proto/iscsi"
)

// ErrUnavailable is returned while a session that lost its connection
// has not logged in again within Config.ReplacementTimeout. From then on
// every command fails with it at once (no new wait) while the session
// keeps trying to log in in the background; the first successful login
// brings normal service back. This is open-iscsi's replacement_timeout.
var ErrUnavailable = errors.New("iscsi: target unavailable")

// retryInterval caps the backoff between background login attempts, so
// service comes back at most about this long after the target does.
const retryInterval = time.Second

// Session is a logged-in normal session with one target, used for one
// LUN. It is safe for concurrent use: up to Config.QueueDepth commands
// are in flight at once. At ErrorRecoveryLevel 0 a lost connection means
// a new login with the same ISID (session reinstatement); commands that
// had not completed are issued again on the new connection.
//
// Recovery, as open-iscsi does it:
//
//	connected ──conn lost──▶ recovering ──login ok──▶ connected
//	                             │  (commands wait, up to
//	                             │   ReplacementTimeout after the loss)
//	                             ▼
//	                          failed: commands get ErrUnavailable at once;
//	                          logins go on in the background ──login ok──▶ connected
//
// One goroutine per loss does the logins; Close stops it.
type Session struct {
	cfg  Config
	isid [6]byte
	lun  uint64 // the 8-byte LUN field
	log  *slog.Logger

	slots chan struct{} // queue depth

	stop     context.Context // cancelled by Close: ends background logins
	stopAll  context.CancelFunc
	recovery sync.WaitGroup // the background login goroutine, if any

	mu         sync.Mutex
	c          *conn // nil while recovering or failed
	closed     bool
	lostAt     time.Time     // when the session lost c (while c is nil)
	lostErr    error         // why: the loss, then the last failed login
	changed    chan struct{} // closed and replaced when c is set or the session closes
	reconnects int

	blockSize int
	size      int64
	capacity  proto.Capacity
	limits    proto.BlockLimits // from VPD B0h at Open (zero if the LUN has none)
}

// Dial connects to cfg.Portal and logs in to cfg.Target (which must be
// set). It does not touch the LUN; Open does.
func Dial(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.Target == "" {
		return nil, errors.New("iscsi: no target name (want iscsi://host:port/IQN/LUN)")
	}
	if cfg.LUN > 16383 {
		return nil, fmt.Errorf("iscsi: LUN %d out of range (0..16383)", cfg.LUN)
	}
	cfg = cfg.withDefaults()
	s := &Session{
		cfg: cfg, isid: newISID(), lun: proto.LUNToField(uint16(cfg.LUN)),
		log:     slog.Default().With("target", cfg.Target, "portal", cfg.Portal),
		slots:   make(chan struct{}, cfg.QueueDepth),
		changed: make(chan struct{}),
	}
	pc, st, err := dialLogin(ctx, &s.cfg, s.isid, false)
	if err != nil {
		return nil, err
	}
	s.stop, s.stopAll = context.WithCancel(context.Background())
	s.c = s.newConn(pc, st)
	return s, nil
}

// Params returns the operational parameters agreed at the last login.
func (s *Session) Params() proto.Params {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return proto.Params{}
	}
	return s.c.params
}

// Reconnects counts the logins after the first (for tests and logs).
func (s *Session) Reconnects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconnects
}

// Connected reports whether the session has a live connection now (false
// while it recovers from a loss, after it failed, and after Close).
func (s *Session) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c != nil && !s.c.isDead()
}

// current returns the live connection. While the session recovers it
// waits, but never past ReplacementTimeout after the loss: from then on
// it fails at once with ErrUnavailable until a background login succeeds.
func (s *Session) current(ctx context.Context) (*conn, error) {
	for i := 0; i < 100; i++ {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, blockdev.ErrClosed
		}
		c := s.c
		lost, why, ch := s.lostAt, s.lostErr, s.changed
		s.mu.Unlock()
		if c != nil {
			if !c.isDead() {
				return c, nil
			}
			s.connLost(c, c.err())
			continue
		}
		wait := s.cfg.ReplacementTimeout - time.Since(lost)
		if s.cfg.ReplacementTimeout < 0 || wait <= 0 {
			return nil, fmt.Errorf("%w: %s lost %v ago (logins continue in the background): %v",
				ErrUnavailable, s.cfg.Portal, time.Since(lost).Round(time.Millisecond), why)
		}
		t := time.NewTimer(wait)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
	return nil, fmt.Errorf("%w: session keeps losing its connection", ErrUnavailable)
}

// connLost moves the session from old to recovering, once per loss (a
// loss seen by many commands and by the connection's watcher starts one
// recovery), and starts the background logins.
func (s *Session) connLost(old *conn, why error) {
	if why == nil {
		why = errConnLost
	}
	s.mu.Lock()
	if s.closed || s.c != old {
		s.mu.Unlock()
		return // closing, or someone already handled this loss
	}
	s.c = nil
	s.lostAt = time.Now()
	s.lostErr = why
	retry := s.cfg.ReplacementTimeout >= 0
	if retry {
		s.recovery.Add(1) // under mu and !closed: ordered before Close's Wait
	}
	s.mu.Unlock()
	old.fail(why)
	if !retry {
		s.log.Warn("iscsi: connection lost; reconnect disabled, commands now fail", "err", why)
		return
	}
	s.log.Warn("iscsi: connection lost; logging in again", "err", why, "replacement_timeout", s.cfg.ReplacementTimeout)
	go s.recover()
}

// recover logs in again with backoff until it succeeds or the session is
// closed. Past ReplacementTimeout commands no longer wait for it (see
// current), but it keeps going, so service resumes when the target does.
func (s *Session) recover() {
	defer s.recovery.Done()
	backoff := 100 * time.Millisecond
	warnedFailed := false
	for attempt := 1; ; attempt++ {
		pc, st, err := dialLogin(s.stop, &s.cfg, s.isid, false)
		if err == nil {
			nc := s.newConn(pc, st)
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = nc.logoutAndClose(ctx)
				cancel()
				return
			}
			down := time.Since(s.lostAt)
			s.c = nc
			s.lostAt, s.lostErr = time.Time{}, nil
			s.reconnects++
			s.broadcastLocked()
			s.mu.Unlock()
			s.log.Info("iscsi: logged in again after a lost connection", "attempts", attempt, "down", down.Round(time.Millisecond))
			return
		}
		if s.stop.Err() != nil {
			return
		}
		s.mu.Lock()
		s.lostErr = err
		failed := time.Since(s.lostAt) >= s.cfg.ReplacementTimeout
		s.mu.Unlock()
		switch {
		case failed && !warnedFailed:
			warnedFailed = true
			s.log.Warn("iscsi: target unavailable past replacement_timeout: I/O fails until it is back; still retrying",
				"replacement_timeout", s.cfg.ReplacementTimeout, "attempt", attempt, "err", err)
		case attempt == 1 || attempt%60 == 0:
			s.log.Warn("iscsi: reconnect failed", "attempt", attempt, "err", err)
		default:
			s.log.Debug("iscsi: reconnect failed", "attempt", attempt, "err", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-s.stop.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, retryInterval)
	}
}

// broadcastLocked wakes every command waiting in current.
func (s *Session) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// DropConnection closes the TCP connection under the session as if the
// network had failed (for tests of reconnect); the next command logs in again.
func (s *Session) DropConnection() {
	s.mu.Lock()
	c := s.c
	s.mu.Unlock()
	if c != nil {
		_ = c.pc.NetConn().Close()
	}
}

// Close logs out (bounded to 5 s) and closes the connection; it also
// ends background logins. Commands still running or waiting for a
// reconnect fail with blockdev.ErrClosed.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.c
	s.broadcastLocked()
	s.mu.Unlock()
	s.stopAll()
	s.recovery.Wait() // prompt: dialLogin gives up when s.stop ends
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.logoutAndClose(ctx)
	select {
	case <-c.readDone:
	case <-ctx.Done():
	}
	return err
}

// TargetKeys returns the operational keys the target answered at the last
// login (for diagnostics).
func (s *Session) TargetKeys() []proto.KV {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return nil
	}
	return s.c.targetKeys
}

// newConn wraps a logged-in connection; when it dies (read error, failed
// NOP-Out probe, target logout request) recovery starts at once, not at
// the next command, so the replacement clock runs from the real loss.
func (s *Session) newConn(pc *proto.Conn, st *loginState) *conn {
	c := newConn(pc, st, s.lun, s.log)
	if s.cfg.PingInterval > 0 {
		go c.pinger(s.cfg.PingInterval, s.cfg.PingTimeout)
	}
	go func() {
		<-c.dead
		s.connLost(c, c.err())
	}()
	return c
}

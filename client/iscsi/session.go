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

// Session is a logged-in normal session with one target, used for one
// LUN. It is safe for concurrent use: up to Config.QueueDepth commands
// are in flight at once. At ErrorRecoveryLevel 0 a lost connection means
// a new login with the same ISID (session reinstatement); commands that
// had not completed are issued again on the new connection.
type Session struct {
	cfg  Config
	isid [6]byte
	lun  uint64 // the 8-byte LUN field
	log  *slog.Logger

	slots chan struct{} // queue depth

	mu         sync.Mutex
	c          *conn
	closed     bool
	recon      chan struct{} // non-nil while a reconnect runs; closed when it ends
	reconErr   error
	reconnects int

	blockSize int
	size      int64
	capacity  proto.Capacity
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
		log:   slog.Default().With("target", cfg.Target, "portal", cfg.Portal),
		slots: make(chan struct{}, cfg.QueueDepth),
	}
	pc, st, err := dialLogin(ctx, &s.cfg, s.isid, false)
	if err != nil {
		return nil, err
	}
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

// current returns the live connection, waiting for a reconnect in progress.
func (s *Session) current(ctx context.Context) (*conn, error) {
	for i := 0; i < 100; i++ {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, blockdev.ErrClosed
		}
		c, recon := s.c, s.recon
		s.mu.Unlock()
		if recon == nil {
			if c == nil {
				// An earlier reconnect gave up: try again for this caller.
				if err := s.reconnect(ctx, nil); err != nil {
					return nil, err
				}
				continue
			}
			return c, nil
		}
		select {
		case <-recon:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, errors.New("iscsi: session keeps reconnecting")
}

// reconnect replaces the dead connection old by logging in again, once
// for all the commands that saw it die. It retries with backoff for up to
// Config.ReconnectTimeout.
func (s *Session) reconnect(ctx context.Context, old *conn) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return blockdev.ErrClosed
	}
	if s.c != old && s.c != nil {
		s.mu.Unlock()
		return nil // someone already replaced it
	}
	if s.recon != nil {
		ch := s.recon
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.c == nil {
			return fmt.Errorf("iscsi: reconnect failed: %w", s.reconErr)
		}
		return nil
	}
	if s.cfg.ReconnectTimeout < 0 {
		s.c = nil
		s.reconErr = errConnLost
		s.mu.Unlock()
		return fmt.Errorf("iscsi: connection lost and reconnect disabled")
	}
	ch := make(chan struct{})
	s.recon = ch
	s.c = nil
	s.mu.Unlock()
	old.fail(errConnLost)

	rctx, cancel := context.WithTimeout(context.Background(), s.cfg.ReconnectTimeout)
	defer cancel()
	var nc *conn
	var err error
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var pc *proto.Conn
		var st *loginState
		pc, st, err = dialLogin(rctx, &s.cfg, s.isid, false)
		if err == nil {
			nc = s.newConn(pc, st)
			break
		}
		s.log.Warn("iscsi: reconnect failed", "attempt", attempt+1, "err", err)
		if errors.Is(err, ErrAuth) || errors.Is(err, ErrTargetNotFound) {
			break
		}
		select {
		case <-time.After(backoff):
		case <-rctx.Done():
		}
		if rctx.Err() != nil {
			break
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	s.mu.Lock()
	s.recon = nil
	if nc != nil {
		if s.closed {
			go func() { _ = nc.logoutAndClose(context.Background()) }()
			err = blockdev.ErrClosed
		} else {
			s.c = nc
			s.reconnects++
			s.log.Info("iscsi: logged in again after a lost connection")
		}
	} else {
		s.reconErr = err
	}
	s.mu.Unlock()
	close(ch)
	if nc == nil {
		return fmt.Errorf("iscsi: reconnect to %s: %w", s.cfg.Portal, err)
	}
	return err
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

// Close logs out (bounded to 5 s) and closes the connection. Commands
// still running fail with blockdev.ErrClosed.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.c
	s.mu.Unlock()
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

func (s *Session) newConn(pc *proto.Conn, st *loginState) *conn {
	c := newConn(pc, st, s.lun, s.log)
	if s.cfg.PingInterval > 0 {
		go c.pinger(s.cfg.PingInterval, s.cfg.PingTimeout)
	}
	return c
}

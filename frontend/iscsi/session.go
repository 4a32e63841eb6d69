package iscsi

import (
	"fmt"
	"sync"

	wire "github.com/tristore/tristore/proto/iscsi"
)

// session is an iSCSI session: one I_T nexus with one or more connections.
// It orders non-immediate commands by CmdSN across its connections and
// keeps the command window: MaxCmdSN = ExpCmdSN + QueueDepth - 1 -
// (commands delivered but not finished), which never decreases.
type session struct {
	srv       *Server
	tsih      uint16
	isid      [6]byte
	initiator string
	discovery bool
	tgt       *target // nil for discovery sessions
	nexus     string
	params    wire.Params // session-wide negotiated values

	mu       sync.Mutex
	expCmdSN uint32
	inflight int
	window   int
	pending  map[uint32]func() // out-of-order commands waiting for their turn
	conns    map[uint16]*conn
	tasks    map[uint32]*task // by ITT, every task of every connection
	closed   bool
}

func newSession(srv *Server, isid [6]byte, initiator string, cmdSN uint32) *session {
	return &session{srv: srv, isid: isid, initiator: initiator, expCmdSN: cmdSN,
		window: srv.cfg.QueueDepth, pending: map[uint32]func(){}, conns: map[uint16]*conn{}, tasks: map[uint32]*task{}}
}

// nexusID names the initiator port (iSCSI name + ISID) of an I_T nexus;
// it is also the TransportID reported for persistent reservations. A new
// session from the same port (session reinstatement) keeps registrations.
func nexusID(initiator string, isid [6]byte) string {
	return fmt.Sprintf("%s,i,0x%x", initiator, isid)
}

// sn returns ExpCmdSN and MaxCmdSN for a response.
func (s *session) sn() (exp, max uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snLocked()
}

func (s *session) snLocked() (exp, max uint32) {
	free := s.window - s.inflight
	if free < 1 {
		free = 1 // keep MaxCmdSN >= ExpCmdSN-1 + 1 so it never goes back
	}
	return s.expCmdSN, s.expCmdSN + uint32(free) - 1
}

// snLess is serial number arithmetic (RFC 1982, 32 bits).
func snLess(a, b uint32) bool { return a != b && int32(a-b) < 0 }

// order delivers a command in CmdSN order: run is called (on the caller's
// goroutine or later on another connection's reader) when every earlier
// CmdSN has been delivered. Immediate commands run at once and do not
// advance ExpCmdSN. Non-immediate commands outside the window are dropped
// silently (RFC 7143 §4.2.2.1); ordered reports whether run was accepted.
// counts says whether the command occupies a window slot until done() is
// called (SCSI commands do; NOP, Text, TMF and Logout answer at once).
func (s *session) order(cmdSN uint32, immediate bool, run func()) bool {
	s.mu.Lock()
	if immediate {
		s.mu.Unlock()
		run()
		return true
	}
	_, max := s.snLocked()
	if snLess(cmdSN, s.expCmdSN) || snLess(max, cmdSN) {
		s.mu.Unlock()
		return false
	}
	if cmdSN != s.expCmdSN {
		if _, dup := s.pending[cmdSN]; dup {
			s.mu.Unlock()
			return false
		}
		s.pending[cmdSN] = run
		s.mu.Unlock()
		return true
	}
	s.expCmdSN++
	var runs []func()
	runs = append(runs, run)
	for {
		next, ok := s.pending[s.expCmdSN]
		if !ok {
			break
		}
		delete(s.pending, s.expCmdSN)
		s.expCmdSN++
		runs = append(runs, next)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r()
	}
	return true
}

// begin/end count a command against the window.
func (s *session) begin() { s.mu.Lock(); s.inflight++; s.mu.Unlock() }
func (s *session) end()   { s.mu.Lock(); s.inflight--; s.mu.Unlock() }

func (s *session) addTask(t *task) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.tasks[t.itt]; dup || s.closed {
		return false
	}
	s.tasks[t.itt] = t
	return true
}

func (s *session) removeTask(t *task) {
	s.mu.Lock()
	if s.tasks[t.itt] == t {
		delete(s.tasks, t.itt)
	}
	s.mu.Unlock()
}

func (s *session) findTask(itt uint32) *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tasks[itt]
}

// tasksWhere returns the tasks matching f.
func (s *session) tasksWhere(f func(*task) bool) []*task {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*task
	for _, t := range s.tasks {
		if f(t) {
			out = append(out, t)
		}
	}
	return out
}

func (s *session) addConn(c *conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("session closed")
	}
	if len(s.conns) >= max(1, s.params.MaxConnections) {
		return fmt.Errorf("too many connections")
	}
	s.conns[c.cid] = c
	return nil
}

// removeConn detaches a connection; the last one ends the session.
func (s *session) removeConn(c *conn) {
	s.mu.Lock()
	if s.conns[c.cid] == c {
		delete(s.conns, c.cid)
	}
	last := len(s.conns) == 0 && !s.closed
	if last {
		s.closed = true
	}
	s.mu.Unlock()
	if last {
		s.finish()
	}
}

// finish releases the session's target and table entry.
func (s *session) finish() {
	srv := s.srv
	srv.mu.Lock()
	if srv.sessions[s.tsih] == s {
		delete(srv.sessions, s.tsih)
	}
	srv.mu.Unlock()
	if s.tgt != nil {
		s.tgt.lu.RemoveNexus(s.nexus)
		srv.releaseTarget(s.tgt)
	}
}

// connections returns a snapshot of the session's connections.
func (s *session) connections() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	return out
}

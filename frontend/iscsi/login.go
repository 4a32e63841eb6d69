package iscsi

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	wire "github.com/tristore/tristore/proto/iscsi"
)

// loginError ends a login with a status class and detail (RFC 7143 §11.13.5).
type loginError struct {
	class, detail uint8
	msg           string
}

func (e *loginError) Error() string {
	return fmt.Sprintf("login %02x%02x: %s", e.class, e.detail, e.msg)
}

func initiatorErr(detail uint8, format string, a ...any) *loginError {
	return &loginError{wire.LoginInitiatorError, detail, fmt.Sprintf(format, a...)}
}

// chapState is the target side of a CHAP exchange.
type chapState int

const (
	chapNone  chapState = iota // AuthMethod not yet agreed
	chapWantA                  // AuthMethod=CHAP agreed, waiting for CHAP_A
	chapWantR                  // challenge sent, waiting for CHAP_N/CHAP_R
	chapDone                   // authenticated (or AuthMethod=None)
)

// loginState is one connection's login phase.
type loginState struct {
	c           *conn
	first       *wire.PDU
	initiator   string
	discovery   bool
	targetName  string
	tgt         *target
	join        *session // existing session for a non-leading connection
	auth        CHAPConfig
	chap        chapState
	chapID      byte
	chapChal    []byte
	params      wire.Params
	sentTPGT    bool
	sentMRDSL   bool
	acc         wire.TextAccumulator
	stage       uint8
	securityRun bool
}

// maxLoginPDUs bounds the login exchange.
const maxLoginPDUs = 64

// login runs the login phase. It returns nil when the connection entered
// the full feature phase (c.sess set); on failure it has answered with a
// Login Response carrying the status, and the caller closes the connection.
func (c *conn) login() error {
	srv := c.srv
	c.nc.SetDeadline(time.Now().Add(srv.cfg.LoginTimeout))
	defer c.nc.SetDeadline(time.Time{})
	ls := &loginState{c: c, params: srv.targetParams()}
	for i := 0; i < maxLoginPDUs; i++ {
		p, err := c.wc.ReadPDU()
		if err != nil {
			if p != nil && ls.first != nil {
				c.loginFail(p, initiatorErr(wire.DetailInvalidDuring, "bad PDU: %v", err))
			}
			ls.cleanup()
			return err
		}
		if p.Opcode != wire.OpLoginReq {
			le := initiatorErr(wire.DetailInvalidDuring, "%s during login", p.Opcode)
			c.loginFail(p, le)
			ls.cleanup()
			return le
		}
		done, err := ls.step(p)
		if err != nil {
			var le *loginError
			if !errors.As(err, &le) {
				le = &loginError{wire.LoginTargetError, wire.DetailTargetInternal, err.Error()}
			}
			c.loginFail(p, le)
			ls.cleanup()
			return le
		}
		if done {
			return nil
		}
	}
	le := initiatorErr(wire.DetailInvalidDuring, "login did not finish in %d PDUs", maxLoginPDUs)
	ls.cleanup()
	return le
}

// cleanup releases what a failed login acquired.
func (ls *loginState) cleanup() {
	if ls.tgt != nil {
		ls.c.srv.releaseTarget(ls.tgt)
		ls.tgt = nil
	}
}

// targetParams are the target's preferences before negotiation.
func (s *Server) targetParams() wire.Params {
	p := wire.DefaultParams()
	p.MaxRecvDataSegmentLengthLocal = s.cfg.MaxRecvDataSegmentLength
	p.MaxBurstLength = s.cfg.MaxBurstLength
	p.FirstBurstLength = s.cfg.FirstBurstLength
	p.InitialR2T = false // we accept unsolicited data (OR: the initiator decides)
	p.ImmediateData = true
	p.MaxOutstandingR2T = 16
	p.MaxConnections = s.cfg.MaxConnections
	p.ErrorRecoveryLevel = 0
	p.DefaultTime2Wait = 0
	p.DefaultTime2Retain = 0
	return p
}

// loginFail sends a failing Login Response.
func (c *conn) loginFail(req *wire.PDU, le *loginError) {
	c.srv.log.Info("iscsi: login failed", "remote", c.nc.RemoteAddr().String(), "reason", le.msg,
		"class", le.class, "detail", le.detail)
	resp := &wire.PDU{Opcode: wire.OpLoginResp, CSG: req.CSG, ISID: req.ISID, TSIH: req.TSIH, ITT: req.ITT,
		StatSN: c.statSN, ExpCmdSN: req.CmdSN, MaxCmdSN: req.CmdSN, StatusClass: le.class, StatusDetail: le.detail}
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.wc.WritePDU(resp)
}

// step handles one Login Request; done means full feature phase reached.
func (ls *loginState) step(p *wire.PDU) (bool, error) {
	c := ls.c
	if ls.first == nil {
		if p.VersionMin > 0 {
			return false, initiatorErr(wire.DetailUnsupportedVer, "version-min %d", p.VersionMin)
		}
		ls.first = p
		c.cid = p.CID
		c.statSN = p.ExpStatSN
	} else if p.ISID != ls.first.ISID || p.TSIH != ls.first.TSIH || p.CID != ls.first.CID || p.ITT != ls.first.ITT {
		return false, initiatorErr(wire.DetailInvalidDuring, "ISID/TSIH/CID/ITT changed during login")
	}
	if p.CSG == 2 || p.CSG == wire.StageFullFeature || (p.Final && (p.NSG == 2 || p.NSG <= p.CSG)) {
		return false, initiatorErr(wire.DetailInvalidDuring, "bad stage transition CSG=%d NSG=%d", p.CSG, p.NSG)
	}
	if err := ls.acc.Add(p.Data); err != nil {
		return false, initiatorErr(0, "%v", err)
	}
	resp := &wire.PDU{Opcode: wire.OpLoginResp, CSG: p.CSG, ISID: p.ISID, TSIH: p.TSIH, ITT: p.ITT}
	if p.Continue {
		// More text follows in the next PDU: acknowledge with an empty response.
		return false, ls.send(resp, p)
	}
	kvs, err := ls.acc.Take()
	if err != nil {
		return false, initiatorErr(0, "%v", err)
	}
	var out []wire.KV
	if ls.initiator == "" {
		if err := ls.leading(kvs); err != nil {
			return false, err
		}
		if !ls.discovery && !ls.sentTPGT {
			out = append(out, wire.KV{Key: "TargetPortalGroupTag", Value: "1"})
			ls.sentTPGT = true
		}
	}
	if p.CSG == wire.StageSecurity {
		ls.securityRun = true
	} else if !ls.securityRun && ls.auth.Required() {
		return false, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "CHAP required but security stage skipped"}
	}
	for _, kv := range kvs {
		ans, err := ls.key(kv)
		if err != nil {
			return false, err
		}
		out = append(out, ans...)
	}
	if ls.chap == chapWantA || ls.chap == chapWantR {
		if p.CSG != wire.StageSecurity {
			return false, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "CHAP exchange outside the security stage"}
		}
		ans, err := ls.chapStep(kvs)
		if err != nil {
			return false, err
		}
		out = append(out, ans...)
	}
	if p.CSG == wire.StageSecurity && ls.chap == chapNone && !ls.auth.Required() {
		// The initiator sent no AuthMethod: None is the only method that
		// needs no exchange, and we allow it.
		ls.chap = chapDone
	}
	transit := p.Final
	if p.CSG == wire.StageSecurity && ls.chap != chapDone {
		if p.Final && ls.chap == chapNone {
			return false, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "authentication required"}
		}
		transit = false // CHAP still in progress
	}
	if transit && p.NSG == wire.StageFullFeature || (transit && p.CSG == wire.StageOperational) {
		if !ls.sentMRDSL {
			out = append(out, wire.KV{Key: "MaxRecvDataSegmentLength", Value: fmt.Sprint(ls.params.MaxRecvDataSegmentLengthLocal)})
			ls.sentMRDSL = true
		}
	}
	resp.Data = wire.EncodeText(out)
	if transit {
		resp.Final = true
		resp.NSG = p.NSG
	}
	if transit && p.NSG == wire.StageFullFeature {
		if err := ls.enterFullFeature(resp); err != nil {
			return false, err
		}
		if err := ls.send(resp, p); err != nil {
			return false, err
		}
		c.startFullFeature()
		return true, nil
	}
	return false, ls.send(resp, p)
}

func (ls *loginState) send(resp, req *wire.PDU) error {
	c := ls.c
	resp.StatSN = c.statSN
	resp.ExpCmdSN = req.CmdSN
	resp.MaxCmdSN = req.CmdSN + uint32(c.srv.cfg.QueueDepth) - 1
	if ls.join != nil {
		resp.ExpCmdSN, resp.MaxCmdSN = ls.join.sn()
	}
	if resp.Final && resp.NSG == wire.StageFullFeature {
		c.statSN++ // the final Login Response consumes a StatSN
	}
	return c.wc.WritePDU(resp)
}

// leading handles the declarative keys of the first Login Request.
func (ls *loginState) leading(kvs []wire.KV) error {
	c, srv := ls.c, ls.c.srv
	ls.initiator, _ = wire.Lookup(kvs, "InitiatorName")
	if ls.initiator == "" {
		return initiatorErr(wire.DetailMissingParam, "InitiatorName missing")
	}
	st, _ := wire.Lookup(kvs, "SessionType")
	switch st {
	case "", "Normal":
	case "Discovery":
		ls.discovery = true
	default:
		return initiatorErr(wire.DetailSessionType, "SessionType=%q", st)
	}
	ls.targetName, _ = wire.Lookup(kvs, "TargetName")
	if ls.discovery {
		ls.auth = srv.chapFor("")
	} else {
		if ls.targetName == "" {
			return initiatorErr(wire.DetailMissingParam, "TargetName missing")
		}
		t, err := srv.acquireTarget(c.ctx, ls.targetName)
		if err != nil {
			return initiatorErr(wire.DetailNotFound, "target %s: %v", ls.targetName, err)
		}
		ls.tgt = t
		ls.auth = srv.chapFor(t.name)
	}
	if tsih := ls.first.TSIH; tsih != 0 {
		srv.mu.Lock()
		s := srv.sessions[tsih]
		srv.mu.Unlock()
		if s == nil || s.isid != ls.first.ISID || s.initiator != ls.initiator || s.discovery != ls.discovery ||
			(s.tgt != nil && (ls.tgt == nil || s.tgt.name != ls.tgt.name)) {
			return initiatorErr(wire.DetailSessionNotExist, "no session with TSIH %d", tsih)
		}
		ls.join = s
	}
	return nil
}

// key answers one key.
func (ls *loginState) key(kv wire.KV) ([]wire.KV, error) {
	switch kv.Key {
	case "InitiatorName", "SessionType", "TargetName", "InitiatorAlias":
		return nil, nil // declarative, handled in leading()
	case "AuthMethod":
		return ls.authMethod(kv.Value)
	case "CHAP_A", "CHAP_N", "CHAP_R", "CHAP_I", "CHAP_C":
		return nil, nil // handled as a group by chapStep, below
	}
	if strings.HasPrefix(kv.Key, "CHAP_") {
		return []wire.KV{{Key: kv.Key, Value: wire.ValueNotUnderstood}}, nil
	}
	if kv.Key == "MaxRecvDataSegmentLength" {
		ls.sentMRDSL = true
	}
	ans, err := ls.params.Negotiate(kv.Key, kv.Value)
	if err != nil {
		ls.c.srv.log.Debug("iscsi: login key rejected", "key", kv.Key, "value", kv.Value, "err", err)
	}
	return []wire.KV{{Key: kv.Key, Value: ans}}, nil
}

func (ls *loginState) authMethod(v string) ([]wire.KV, error) {
	offered := wire.SplitList(v)
	has := func(m string) bool {
		for _, o := range offered {
			if o == m {
				return true
			}
		}
		return false
	}
	switch {
	case ls.auth.Required() && has("CHAP"):
		ls.chap = chapWantA
		return []wire.KV{{Key: "AuthMethod", Value: "CHAP"}}, nil
	case ls.auth.Required():
		return nil, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "CHAP required, initiator offered " + v}
	case has("None"):
		ls.chap = chapDone
		return []wire.KV{{Key: "AuthMethod", Value: "None"}}, nil
	}
	return nil, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "no CHAP configured and AuthMethod=None not offered"}
}

// chapStep runs one step of the CHAP exchange over the keys of one PDU.
func (ls *loginState) chapStep(kvs []wire.KV) ([]wire.KV, error) {
	switch ls.chap {
	case chapWantA:
		a, ok := wire.Lookup(kvs, "CHAP_A")
		if !ok {
			return nil, nil
		}
		supported := false
		for _, alg := range wire.SplitList(a) {
			if alg == wire.CHAPAlgorithmMD5 {
				supported = true
			}
		}
		if !supported {
			return nil, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "CHAP_A without MD5 (5): " + a}
		}
		id, chal, err := wire.NewCHAPChallenge()
		if err != nil {
			return nil, err
		}
		ls.chapID, ls.chapChal = id, chal
		ls.chap = chapWantR
		return []wire.KV{{Key: "CHAP_A", Value: wire.CHAPAlgorithmMD5}, {Key: "CHAP_I", Value: fmt.Sprint(id)},
			{Key: "CHAP_C", Value: wire.EncodeBinary(chal)}}, nil
	case chapWantR:
		n, okN := wire.Lookup(kvs, "CHAP_N")
		r, okR := wire.Lookup(kvs, "CHAP_R")
		if !okN || !okR {
			return nil, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "CHAP_N/CHAP_R missing"}
		}
		resp, err := wire.DecodeBinary(r)
		if err != nil || n != ls.auth.Initiator.User || !wire.CHAPVerify(ls.chapID, ls.auth.Initiator.Secret, ls.chapChal, resp) {
			return nil, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "CHAP response does not match for user " + n}
		}
		ls.chap = chapDone
		ci, okI := wire.Lookup(kvs, "CHAP_I")
		cc, okC := wire.Lookup(kvs, "CHAP_C")
		if !okI && !okC {
			return nil, nil
		}
		if !okI || !okC || !ls.auth.Target.Set() {
			return nil, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "mutual CHAP requested but not configured on the target"}
		}
		var id int
		if _, err := fmt.Sscan(ci, &id); err != nil || id < 0 || id > 255 {
			return nil, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "bad CHAP_I " + ci}
		}
		chal, err := wire.DecodeBinary(cc)
		if err != nil || len(chal) == 0 || bytes.Equal(chal, ls.chapChal) {
			// A reflected challenge would let an attacker use us as an oracle.
			return nil, &loginError{wire.LoginInitiatorError, wire.DetailAuthFailure, "bad mutual CHAP challenge"}
		}
		return []wire.KV{{Key: "CHAP_N", Value: ls.auth.Target.User},
			{Key: "CHAP_R", Value: wire.EncodeBinary(wire.CHAPResponse(byte(id), ls.auth.Target.Secret, chal))}}, nil
	}
	return nil, nil
}

// enterFullFeature creates or joins the session and fills the final response.
func (ls *loginState) enterFullFeature(resp *wire.PDU) error {
	c, srv := ls.c, ls.c.srv
	c.params = ls.params
	if ls.join != nil {
		s := ls.join
		// Connection reinstatement: a connection with the same CID is replaced.
		for _, old := range s.connections() {
			if old.cid == c.cid {
				old.shutdown(0)
				old.waitClosed(10 * time.Second)
			}
		}
		c.sess = s
		if err := s.addConn(c); err != nil {
			return &loginError{wire.LoginInitiatorError, wire.DetailTooManyConns, err.Error()}
		}
		if ls.tgt != nil {
			srv.releaseTarget(ls.tgt) // the session already holds the target
			ls.tgt = nil
		}
		resp.TSIH = s.tsih
		return nil
	}
	// Session reinstatement: same initiator, ISID and target replaces the old session.
	srv.mu.Lock()
	var old []*session
	for _, s := range srv.sessions {
		if s.initiator == ls.initiator && s.isid == ls.first.ISID && s.discovery == ls.discovery &&
			(s.tgt == nil) == (ls.tgt == nil) && (s.tgt == nil || s.tgt.name == ls.tgt.name) {
			old = append(old, s)
		}
	}
	srv.mu.Unlock()
	for _, s := range old {
		for _, oc := range s.connections() {
			oc.shutdown(0)
			oc.waitClosed(10 * time.Second)
		}
	}
	s := newSession(srv, ls.first.ISID, ls.initiator, ls.first.CmdSN)
	s.discovery = ls.discovery
	s.params = ls.params
	s.tgt = ls.tgt
	ls.tgt = nil // owned by the session now
	srv.mu.Lock()
	for i := 0; i < 65536; i++ {
		srv.nextTSIH++
		if srv.nextTSIH != 0 && srv.sessions[srv.nextTSIH] == nil {
			break
		}
	}
	s.tsih = srv.nextTSIH
	srv.sessions[s.tsih] = s
	srv.mu.Unlock()
	s.nexus = nexusID(ls.initiator, ls.first.ISID)
	if s.tgt != nil {
		s.tgt.lu.AddNexus(s.nexus)
	}
	c.sess = s
	if err := s.addConn(c); err != nil {
		s.finish()
		return &loginError{wire.LoginTargetError, wire.DetailOutOfResources, err.Error()}
	}
	resp.TSIH = s.tsih
	return nil
}

var _ error = (*loginError)(nil)

package iscsi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	proto "github.com/tristore/tristore/proto/iscsi"
)

// Login errors callers may test with errors.Is.
var (
	// ErrAuth is a login refused for authentication or authorisation
	// (status class 2, detail 1 or 2), or a target that failed mutual CHAP.
	ErrAuth = errors.New("iscsi: authentication failed")
	// ErrTargetNotFound is a login for a target name the portal does not have.
	ErrTargetNotFound = errors.New("iscsi: target not found")
	// ErrLogin is any other refused or malformed login.
	ErrLogin = errors.New("iscsi: login failed")
)

// LoginError carries the status of a refused login.
type LoginError struct {
	Class, Detail uint8
	err           error
}

func (e *LoginError) Error() string {
	return fmt.Sprintf("%v (login status class 0x%02x detail 0x%02x)", e.err, e.Class, e.Detail)
}
func (e *LoginError) Unwrap() error { return e.err }

// Config describes how to reach and log in to a target.
type Config struct {
	Portal string // host:port
	// Target is the target IQN; empty means a discovery session.
	Target string
	LUN    uint64
	// Initiator is our IQN (default iqn.2026-11.org.tristore:initiator.<host>).
	Initiator string
	// CHAP: the target authenticates us (one-way) ...
	CHAP proto.CHAPCredentials
	// ... and, if set, we authenticate the target too (mutual).
	TargetCHAP proto.CHAPCredentials
	// HeaderDigest and DataDigest ask for CRC32C (the target may answer None;
	// see Session.Params for what was agreed).
	HeaderDigest, DataDigest bool
	// QueueDepth bounds the commands in flight (default 32).
	QueueDepth int
	// MaxRecvDataSegmentLength we declare (default 256 KiB).
	MaxRecvDataSegmentLength int
	// MaxBurstLength and FirstBurstLength we propose (defaults 1 MiB, 256 KiB).
	MaxBurstLength, FirstBurstLength int
	// NoImmediateData declines ImmediateData; InitialR2T asks for it (both
	// default to the fast choice: immediate data, unsolicited Data-Out).
	NoImmediateData, InitialR2T bool
	// DialTimeout bounds one TCP connect + login (default 10s).
	DialTimeout time.Duration
	// ReplacementTimeout (open-iscsi's replacement_timeout) bounds how long
	// commands wait for a session that lost its connection to log in
	// again. After it they fail at once with ErrUnavailable while logins
	// continue in the background (about once a second) until the target
	// is back or the session is closed. Default 30s; negative: never log
	// in again, the first lost connection fails the session for good.
	ReplacementTimeout time.Duration
	// PingInterval: after this long without hearing from the target the
	// connection is probed with a NOP-Out; if nothing arrives within
	// PingTimeout it is dropped and the session logs in again, so a hung
	// target does not hang I/O forever (defaults 10s and 15s; negative
	// PingInterval disables).
	PingInterval, PingTimeout time.Duration
	// MaxIOSize caps one SCSI command's transfer; larger I/O is split
	// into several commands in flight (default 1 MiB).
	MaxIOSize int
}

// ConfigFromAddress fills a Config from a parsed URL.
func ConfigFromAddress(a *Address) Config {
	return Config{
		Portal: a.Portal, Target: a.Target, LUN: a.LUN, Initiator: a.Initiator,
		CHAP:         proto.CHAPCredentials{User: a.User, Secret: a.Secret},
		TargetCHAP:   proto.CHAPCredentials{User: a.TargetUser, Secret: a.TargetSecret},
		HeaderDigest: a.HeaderDigest, DataDigest: a.DataDigest,
		ReplacementTimeout: a.ReplacementTimeout,
	}
}

func (c *Config) withDefaults() Config {
	o := *c
	if o.Initiator == "" {
		h, _ := os.Hostname()
		h = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
				return r
			}
			if r >= 'A' && r <= 'Z' {
				return r + 'a' - 'A'
			}
			return '-'
		}, h)
		if h == "" {
			h = "localhost"
		}
		o.Initiator = "iqn.2026-11.org.tristore:initiator." + h
	}
	if o.QueueDepth <= 0 {
		o.QueueDepth = 32
	}
	if o.MaxRecvDataSegmentLength <= 0 {
		o.MaxRecvDataSegmentLength = 256 << 10
	}
	if o.MaxBurstLength <= 0 {
		o.MaxBurstLength = 1 << 20
	}
	if o.FirstBurstLength <= 0 {
		o.FirstBurstLength = 256 << 10
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.ReplacementTimeout == 0 {
		o.ReplacementTimeout = 30 * time.Second
	}
	if o.PingInterval == 0 {
		o.PingInterval = 10 * time.Second
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 15 * time.Second
	}
	if o.MaxIOSize <= 0 {
		o.MaxIOSize = 1 << 20
	}
	return o
}

func newISID() [6]byte {
	var b [6]byte
	_, _ = rand.Read(b[1:4])
	b[0] = 0x80 // "random" ISID format (RFC 7143 §11.12.5)
	return b
}

// loginState is what a login produces for the connection that follows.
type loginState struct {
	params                     proto.Params
	tsih                       uint16
	cmdSN, expStatSN, maxCmdSN uint32
	expCmdSN                   uint32
	targetKeys                 []proto.KV
}

// login runs the login phase on pc (RFC 7143 §6.3): the security stage
// (None or CHAP) and the operational stage, then moves to full feature.
func login(ctx context.Context, pc *proto.Conn, cfg *Config, isid [6]byte, discovery bool) (*loginState, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = pc.NetConn().SetDeadline(dl)
		defer pc.NetConn().SetDeadline(time.Time{})
	}
	st := &loginState{params: proto.DefaultParams(), cmdSN: 1}
	lg := &loginConv{pc: pc, isid: isid, st: st, itt: 1}

	// Security stage.
	keys := []proto.KV{{Key: "InitiatorName", Value: cfg.Initiator}}
	if discovery {
		keys = append(keys, proto.KV{Key: "SessionType", Value: "Discovery"})
	} else {
		keys = append(keys, proto.KV{Key: "SessionType", Value: "Normal"}, proto.KV{Key: "TargetName", Value: cfg.Target})
	}
	if cfg.CHAP.Set() {
		// With one-way CHAP a target that needs no authentication (tgt's
		// discovery sessions, say) may answer None; with mutual CHAP we
		// insist on authenticating the target, so CHAP is the only offer.
		offer := "CHAP,None"
		if cfg.TargetCHAP.Set() {
			offer = "CHAP"
		}
		keys = append(keys, proto.KV{Key: "AuthMethod", Value: offer})
		resp, err := lg.exchange(proto.StageSecurity, proto.StageOperational, false, keys)
		if err != nil {
			return nil, err
		}
		switch v, _ := proto.Lookup(resp, "AuthMethod"); {
		case v == "CHAP":
			if err := lg.chap(cfg); err != nil {
				return nil, err
			}
		case v == "None" && !cfg.TargetCHAP.Set():
			if err := lg.untilTransit(proto.StageSecurity, proto.StageOperational); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: target answered AuthMethod=%q to %s", ErrAuth, v, offer)
		}
	} else {
		keys = append(keys, proto.KV{Key: "AuthMethod", Value: "None"})
		resp, err := lg.exchange(proto.StageSecurity, proto.StageOperational, true, keys)
		if err != nil {
			return nil, err
		}
		if v, ok := proto.Lookup(resp, "AuthMethod"); ok && v != "None" {
			return nil, fmt.Errorf("%w: target requires AuthMethod=%s; give user:secret@ in the URL", ErrAuth, v)
		}
		if err := lg.untilTransit(proto.StageSecurity, proto.StageOperational); err != nil {
			return nil, err
		}
	}

	// Operational stage.
	p := &st.params
	p.HeaderDigest, p.DataDigest = cfg.HeaderDigest, cfg.DataDigest
	p.MaxRecvDataSegmentLengthLocal = cfg.MaxRecvDataSegmentLength
	p.InitialR2T = cfg.InitialR2T
	p.ImmediateData = !cfg.NoImmediateData
	p.MaxBurstLength = cfg.MaxBurstLength
	p.FirstBurstLength = min(cfg.FirstBurstLength, cfg.MaxBurstLength)
	p.DefaultTime2Wait, p.DefaultTime2Retain = 0, 0
	offer := p.Offer()
	for i, kv := range offer {
		// Asked-for digests are required, not a preference: some targets
		// (tgt) answer None to "CRC32C,None".
		if kv.Key == "HeaderDigest" && cfg.HeaderDigest || kv.Key == "DataDigest" && cfg.DataDigest {
			offer[i].Value = "CRC32C"
		}
	}
	if discovery {
		// Session-wide data keys are irrelevant to discovery sessions.
		var short []proto.KV
		for _, kv := range offer {
			switch kv.Key {
			case "HeaderDigest", "DataDigest", "MaxRecvDataSegmentLength", "DefaultTime2Wait", "DefaultTime2Retain":
				short = append(short, kv)
			}
		}
		offer = short
	}
	answered := map[string]bool{}
	resp, err := lg.exchange(proto.StageOperational, proto.StageFullFeature, true, offer)
	for i := 0; err == nil; i++ {
		for _, kv := range resp {
			if proto.IsOperationalKey(kv.Key) {
				if aerr := p.Apply(kv.Key, kv.Value); aerr != nil {
					return nil, fmt.Errorf("%w: %v", ErrLogin, aerr)
				}
				answered[kv.Key] = true
			}
		}
		st.targetKeys = append(st.targetKeys, resp...)
		if lg.transit {
			break
		}
		if i >= 8 {
			return nil, fmt.Errorf("%w: target did not finish operational negotiation", ErrLogin)
		}
		resp, err = lg.exchange(proto.StageOperational, proto.StageFullFeature, true, nil)
	}
	if err != nil {
		return nil, err
	}
	if !answered["MaxRecvDataSegmentLength"] {
		p.MaxRecvDataSegmentLengthPeer = 8192
	}
	p.Normalize()
	if cfg.HeaderDigest && !p.HeaderDigest || cfg.DataDigest && !p.DataDigest {
		return nil, fmt.Errorf("%w: CRC32C digests were asked for but the target answered HeaderDigest=%s DataDigest=%s",
			ErrLogin, digestName(p.HeaderDigest), digestName(p.DataDigest))
	}
	st.tsih = lg.tsih
	return st, nil
}

// loginConv is one login conversation (a Login Request/Response sequence).
type loginConv struct {
	pc      *proto.Conn
	isid    [6]byte
	st      *loginState
	itt     uint32
	tsih    uint16
	transit bool // the last response had T=1
	first   bool
}

// exchange sends one login request (split over PDUs is never needed for
// our small key sets) and collects the whole response, following the C bit.
func (lg *loginConv) exchange(csg, nsg uint8, transit bool, keys []proto.KV) ([]proto.KV, error) {
	req := &proto.PDU{
		Opcode: proto.OpLoginReq, Immediate: true, Final: transit,
		CSG: csg, NSG: nsg, ISID: lg.isid, TSIH: 0, ITT: lg.itt,
		CmdSN: lg.st.cmdSN, ExpStatSN: lg.st.expStatSN, Data: proto.EncodeText(keys),
	}
	if !transit {
		req.NSG = 0
	}
	var acc proto.TextAccumulator
	for i := 0; i < 16; i++ {
		if err := lg.pc.WritePDU(req); err != nil {
			return nil, fmt.Errorf("iscsi: login: %w", err)
		}
		resp, err := lg.pc.ReadPDU()
		if err != nil {
			return nil, fmt.Errorf("iscsi: login: reading response: %w", err)
		}
		if resp.Opcode != proto.OpLoginResp {
			return nil, fmt.Errorf("%w: got %s during login", ErrLogin, resp.Opcode)
		}
		if resp.StatusClass != proto.LoginSuccess {
			return nil, loginStatusError(resp)
		}
		lg.st.expStatSN = resp.StatSN + 1
		lg.st.expCmdSN, lg.st.maxCmdSN = resp.ExpCmdSN, resp.MaxCmdSN
		lg.tsih = resp.TSIH
		if err := acc.Add(resp.Data); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrLogin, err)
		}
		if resp.Continue {
			// More text to come: answer with an empty request (§11.12.2).
			req = &proto.PDU{Opcode: proto.OpLoginReq, Immediate: true, CSG: csg, ISID: lg.isid,
				ITT: lg.itt, CmdSN: lg.st.cmdSN, ExpStatSN: lg.st.expStatSN}
			continue
		}
		lg.transit = resp.Final
		if resp.Final && resp.NSG != nsg {
			return nil, fmt.Errorf("%w: target moved to stage %d, we asked for %d", ErrLogin, resp.NSG, nsg)
		}
		kvs, err := acc.Take()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrLogin, err)
		}
		return kvs, nil
	}
	return nil, fmt.Errorf("%w: login response text too long", ErrLogin)
}

// untilTransit re-sends empty requests with T=1 until the target agrees
// to leave the stage (bounded).
func (lg *loginConv) untilTransit(csg, nsg uint8) error {
	for i := 0; !lg.transit; i++ {
		if i >= 8 {
			return fmt.Errorf("%w: target stayed in login stage %d", ErrLogin, csg)
		}
		if _, err := lg.exchange(csg, nsg, true, nil); err != nil {
			return err
		}
	}
	return nil
}

// chap runs CHAP_A / CHAP_I+CHAP_C / CHAP_N+CHAP_R, and for mutual CHAP
// checks the target's answer to our own challenge.
func (lg *loginConv) chap(cfg *Config) error {
	resp, err := lg.exchange(proto.StageSecurity, proto.StageOperational, false,
		[]proto.KV{{Key: "CHAP_A", Value: proto.CHAPAlgorithmMD5}})
	if err != nil {
		return err
	}
	a, _ := proto.Lookup(resp, "CHAP_A")
	is, _ := proto.Lookup(resp, "CHAP_I")
	cs, _ := proto.Lookup(resp, "CHAP_C")
	if a != proto.CHAPAlgorithmMD5 || is == "" || cs == "" {
		return fmt.Errorf("%w: target's CHAP offer CHAP_A=%q CHAP_I=%q incomplete", ErrLogin, a, is)
	}
	id, err := strconv.ParseUint(is, 0, 8)
	if err != nil {
		return fmt.Errorf("%w: bad CHAP_I %q", ErrLogin, is)
	}
	chal, err := proto.DecodeBinary(cs)
	if err != nil {
		return fmt.Errorf("%w: CHAP_C: %v", ErrLogin, err)
	}
	keys := []proto.KV{
		{Key: "CHAP_N", Value: cfg.CHAP.User},
		{Key: "CHAP_R", Value: proto.EncodeBinary(proto.CHAPResponse(byte(id), cfg.CHAP.Secret, chal))},
	}
	var myID byte
	var myChal []byte
	if cfg.TargetCHAP.Set() {
		myID, myChal, err = proto.NewCHAPChallenge()
		if err != nil {
			return err
		}
		keys = append(keys, proto.KV{Key: "CHAP_I", Value: strconv.Itoa(int(myID))},
			proto.KV{Key: "CHAP_C", Value: proto.EncodeBinary(myChal)})
	}
	resp, err = lg.exchange(proto.StageSecurity, proto.StageOperational, true, keys)
	if err != nil {
		return err
	}
	if cfg.TargetCHAP.Set() {
		n, _ := proto.Lookup(resp, "CHAP_N")
		rs, _ := proto.Lookup(resp, "CHAP_R")
		r, derr := proto.DecodeBinary(rs)
		if n != cfg.TargetCHAP.User || derr != nil || !proto.CHAPVerify(myID, cfg.TargetCHAP.Secret, myChal, r) {
			return fmt.Errorf("%w: the target failed mutual CHAP (name %q)", ErrAuth, n)
		}
	}
	return lg.untilTransit(proto.StageSecurity, proto.StageOperational)
}

func loginStatusError(p *proto.PDU) error {
	e := &LoginError{Class: p.StatusClass, Detail: p.StatusDetail, err: ErrLogin}
	switch {
	case p.StatusClass == proto.LoginInitiatorError && (p.StatusDetail == proto.DetailAuthFailure || p.StatusDetail == proto.DetailAuthorization):
		e.err = ErrAuth
	case p.StatusClass == proto.LoginInitiatorError && (p.StatusDetail == proto.DetailNotFound || p.StatusDetail == proto.DetailTargetRemoved):
		e.err = ErrTargetNotFound
	case p.StatusClass == proto.LoginRedirect:
		kvs, _ := proto.ParseText(p.Data)
		addr, _ := proto.Lookup(kvs, "TargetAddress")
		e.err = &redirectError{addr: addr}
	}
	return e
}

// redirectError is a login redirected to another portal (status class 1).
type redirectError struct{ addr string }

func (r *redirectError) Error() string { return "iscsi: login redirected to " + r.addr }

// dialLogin connects to portal and logs in, following at most two
// redirects (TargetAddress=host:port,tpgt).
func dialLogin(ctx context.Context, cfg *Config, isid [6]byte, discovery bool) (*proto.Conn, *loginState, error) {
	portal := cfg.Portal
	for hop := 0; ; hop++ {
		lctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
		var d net.Dialer
		nc, err := d.DialContext(lctx, "tcp", portal)
		if err != nil {
			cancel()
			return nil, nil, fmt.Errorf("iscsi: connect %s: %w", portal, err)
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		pc := proto.NewConn(nc)
		// A cancelled ctx (Session.Close during a background login) ends
		// the login now, not at its deadline: expire the socket.
		unhook := context.AfterFunc(lctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
		st, err := login(lctx, pc, cfg, isid, discovery)
		if !unhook() && err == nil {
			err = lctx.Err() // logged in, but the deadline may now be set: give up
		}
		cancel()
		if err == nil {
			return pc, st, nil
		}
		pc.Close()
		var rd *redirectError
		if errors.As(err, &rd) && rd.addr != "" && hop < 2 {
			portal, _, _ = strings.Cut(rd.addr, ",")
			continue
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, err
	}
}

func digestName(on bool) string {
	if on {
		return "CRC32C"
	}
	return "None"
}

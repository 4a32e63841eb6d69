package sunrpc

import (
	"errors"
	"fmt"
)

// Message types, reply status and the accept/reject/auth codes of RFC 5531.
const (
	MsgCall  = 0
	MsgReply = 1

	RPCVersion = 2

	MsgAccepted = 0
	MsgDenied   = 1
)

// AcceptStat is the status of an accepted call.
type AcceptStat uint32

const (
	Success      AcceptStat = 0 // RPC executed successfully
	ProgUnavail  AcceptStat = 1 // remote hasn't exported program
	ProgMismatch AcceptStat = 2 // remote can't support version #
	ProcUnavail  AcceptStat = 3 // program can't support procedure
	GarbageArgs  AcceptStat = 4 // procedure can't decode params
	SystemErr    AcceptStat = 5 // e.g. memory allocation failure
)

func (s AcceptStat) String() string {
	switch s {
	case Success:
		return "SUCCESS"
	case ProgUnavail:
		return "PROG_UNAVAIL"
	case ProgMismatch:
		return "PROG_MISMATCH"
	case ProcUnavail:
		return "PROC_UNAVAIL"
	case GarbageArgs:
		return "GARBAGE_ARGS"
	case SystemErr:
		return "SYSTEM_ERR"
	}
	return fmt.Sprintf("accept_stat(%d)", uint32(s))
}

// RejectStat is the reason a call was denied.
type RejectStat uint32

const (
	RPCMismatch RejectStat = 0 // RPC version number != 2
	AuthError   RejectStat = 1 // remote can't authenticate caller
)

// AuthStat is the reason for an AUTH_ERROR.
type AuthStat uint32

const (
	AuthOK           AuthStat = 0
	AuthBadCred      AuthStat = 1 // bad credential (seal broken)
	AuthRejectedCred AuthStat = 2 // client must begin new session
	AuthBadVerf      AuthStat = 3 // bad verifier (seal broken)
	AuthRejectedVerf AuthStat = 4 // verifier expired or replayed
	AuthTooWeak      AuthStat = 5 // rejected for security reasons
)

// Authentication flavors.
const (
	AuthFlavorNone  = 0
	AuthFlavorSys   = 1
	AuthFlavorShort = 2
)

// MaxAuthBytes is the RFC 5531 limit on opaque_auth bodies.
const MaxAuthBytes = 400

// OpaqueAuth is a credential or verifier: a flavor and an opaque body.
type OpaqueAuth struct {
	Flavor uint32
	Body   []byte
}

// AuthNone is the AUTH_NONE credential/verifier.
func AuthNone() OpaqueAuth { return OpaqueAuth{Flavor: AuthFlavorNone} }

// Encode writes the opaque_auth.
func (a OpaqueAuth) Encode(w *Writer) {
	w.Uint32(a.Flavor)
	w.Opaque(a.Body)
}

// Decode reads an opaque_auth (body aliases the input).
func (a *OpaqueAuth) Decode(r *Reader) {
	a.Flavor = r.Uint32()
	a.Body = r.Opaque(MaxAuthBytes)
}

// Call is the header of an RPC call message; the procedure's arguments follow it.
type Call struct {
	XID  uint32
	Prog uint32
	Vers uint32
	Proc uint32
	Cred OpaqueAuth
	Verf OpaqueAuth
}

// Encode writes the call header (msg type CALL, rpcvers 2).
func (c Call) Encode(w *Writer) {
	w.Uint32(c.XID)
	w.Uint32(MsgCall)
	w.Uint32(RPCVersion)
	w.Uint32(c.Prog)
	w.Uint32(c.Vers)
	w.Uint32(c.Proc)
	c.Cred.Encode(w)
	c.Verf.Encode(w)
}

// ErrRPCVersion is returned by DecodeCall for a well-formed call whose RPC
// version is not 2; the server answers MSG_DENIED/RPC_MISMATCH.
var ErrRPCVersion = errors.New("sunrpc: rpc version mismatch")

// ErrNotCall is returned by DecodeCall when the message is a reply.
var ErrNotCall = errors.New("sunrpc: message is not a call")

// DecodeCall reads a call header. On ErrRPCVersion the XID is valid (so the
// server can answer); on ErrGarbage (wrapped) nothing is reliable except
// possibly the XID.
func DecodeCall(r *Reader) (Call, error) {
	var c Call
	c.XID = r.Uint32()
	mt := r.Uint32()
	if r.Err() != nil {
		return c, r.Err()
	}
	if mt != MsgCall {
		return c, ErrNotCall
	}
	if v := r.Uint32(); r.Err() == nil && v != RPCVersion {
		return c, ErrRPCVersion
	}
	c.Prog = r.Uint32()
	c.Vers = r.Uint32()
	c.Proc = r.Uint32()
	c.Cred.Decode(r)
	c.Verf.Decode(r)
	return c, r.Err()
}

// Reply is a decoded reply header. For an accepted SUCCESS reply the
// procedure's results follow in the Reader.
type Reply struct {
	XID        uint32
	Accepted   bool       // MSG_ACCEPTED (else MSG_DENIED)
	Verf       OpaqueAuth // accepted only
	AcceptStat AcceptStat // accepted only
	RejectStat RejectStat // denied only
	AuthStat   AuthStat   // denied with AUTH_ERROR
	// MismatchLow/High: supported versions for PROG_MISMATCH (program
	// versions) and RPC_MISMATCH (RPC versions).
	MismatchLow, MismatchHigh uint32
}

// RPCError describes a reply that did not carry results.
type RPCError struct{ Reply Reply }

func (e *RPCError) Error() string {
	r := e.Reply
	if r.Accepted {
		if r.AcceptStat == ProgMismatch {
			return fmt.Sprintf("rpc: PROG_MISMATCH (supported %d..%d)", r.MismatchLow, r.MismatchHigh)
		}
		return "rpc: " + r.AcceptStat.String()
	}
	if r.RejectStat == RPCMismatch {
		return fmt.Sprintf("rpc: RPC_MISMATCH (supported %d..%d)", r.MismatchLow, r.MismatchHigh)
	}
	return fmt.Sprintf("rpc: AUTH_ERROR (auth_stat %d)", r.AuthStat)
}

// Err returns nil for an accepted SUCCESS reply and an *RPCError otherwise.
func (r Reply) Err() error {
	if r.Accepted && r.AcceptStat == Success {
		return nil
	}
	return &RPCError{Reply: r}
}

// DecodeReply reads a reply header. A malformed header returns ErrGarbage
// (wrapped); a well-formed but unsuccessful reply returns nil here and
// Reply.Err() describes it.
func DecodeReply(r *Reader) (Reply, error) {
	var rep Reply
	rep.XID = r.Uint32()
	if mt := r.Uint32(); r.Err() == nil && mt != MsgReply {
		r.Fail("message type %d, want REPLY", mt)
	}
	switch st := r.Uint32(); st {
	case MsgAccepted:
		rep.Accepted = true
		rep.Verf.Decode(r)
		rep.AcceptStat = AcceptStat(r.Uint32())
		if rep.AcceptStat == ProgMismatch {
			rep.MismatchLow = r.Uint32()
			rep.MismatchHigh = r.Uint32()
		}
	case MsgDenied:
		rep.RejectStat = RejectStat(r.Uint32())
		switch rep.RejectStat {
		case RPCMismatch:
			rep.MismatchLow = r.Uint32()
			rep.MismatchHigh = r.Uint32()
		case AuthError:
			rep.AuthStat = AuthStat(r.Uint32())
		default:
			r.Fail("reject_stat %d", rep.RejectStat)
		}
	default:
		r.Fail("reply_stat %d", st)
	}
	return rep, r.Err()
}

// EncodeAccepted writes an accepted reply header with the given status and
// an AUTH_NONE verifier. For Success the caller appends the results; for
// ProgMismatch use EncodeProgMismatch instead.
func EncodeAccepted(w *Writer, xid uint32, stat AcceptStat) {
	w.Uint32(xid)
	w.Uint32(MsgReply)
	w.Uint32(MsgAccepted)
	AuthNone().Encode(w)
	w.Uint32(uint32(stat))
}

// EncodeProgMismatch writes a PROG_MISMATCH reply with the supported range.
func EncodeProgMismatch(w *Writer, xid, low, high uint32) {
	EncodeAccepted(w, xid, ProgMismatch)
	w.Uint32(low)
	w.Uint32(high)
}

// EncodeRPCMismatch writes a MSG_DENIED/RPC_MISMATCH reply (we speak only version 2).
func EncodeRPCMismatch(w *Writer, xid uint32) {
	w.Uint32(xid)
	w.Uint32(MsgReply)
	w.Uint32(MsgDenied)
	w.Uint32(uint32(RPCMismatch))
	w.Uint32(RPCVersion)
	w.Uint32(RPCVersion)
}

// EncodeAuthError writes a MSG_DENIED/AUTH_ERROR reply.
func EncodeAuthError(w *Writer, xid uint32, why AuthStat) {
	w.Uint32(xid)
	w.Uint32(MsgReply)
	w.Uint32(MsgDenied)
	w.Uint32(uint32(AuthError))
	w.Uint32(uint32(why))
}

package nfs

// NFS version 4.0 (RFC 7530) and 4.1 (RFC 8881) beside v3, on the same
// listener, over the same exports and the same vfs.FS: program 100003
// version 4 has two procedures, NULL and COMPOUND, and a COMPOUND carries a
// list of operations evaluated in order until one fails.
//
// This file holds the COMPOUND evaluator: the per-request state (current and
// saved filehandle, current stateid, session), the rules on which
// operations may appear where, the 4.1 reply cache, and the one place where
// vfs and store errors become nfsstat4 (statusOf4). The operations are in
// nfs4_fs.go (files and directories), nfs4_open.go (OPEN, CLOSE, locks),
// nfs4_client.go (client IDs, sessions, leases) and nfs4_state.go (the state
// tables and their persistence for the grace period).
//
// Not implemented, and answered NFS4ERR_NOTSUPP: delegations (no callback
// channel is ever used, so none can be recalled), named attributes
// (OPENATTR), pNFS layouts, RPCSEC_GSS and SSV state protection. ACLs are
// not offered as attributes (mode bits are the permission model, as in v3).

import (
	"errors"
	"hash/crc32"
	"net/netip"
	"sync"
	"syscall"

	"github.com/tristore/tristore/proto/nfs4"
	"github.com/tristore/tristore/proto/sunrpc"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/vfs"
)

// Limits this server advertises for v4.
const (
	v4MaxOps      = 64 // operations per COMPOUND (4.1 sessions negotiate down from this)
	v4MaxSlots    = 64 // slots per 4.1 session
	v4MaxReqSize  = 1<<20 + 64<<10
	v4MaxRespSize = 1<<20 + 64<<10
	v4MaxCached   = 64 << 10 // largest reply a slot keeps for replay
	v4MinChannel  = 256      // smallest request/reply size a session channel may have
	v4MaxSessions = 16       // sessions one client may hold at once
)

// compound is the state of one COMPOUND being evaluated.
type compound struct {
	s     *Server
	req   *request
	minor uint32
	cur   fh4 // current filehandle
	saved fh4
	curSt nfs4.Stateid // 4.1 current stateid
	hasSt bool
	// the saved filehandle's stateid (SAVEFH/RESTOREFH keep them together)
	savedSt    nfs4.Stateid
	savedHasSt bool
	nops       uint32 // operations in the COMPOUND
	reqLen     int    // bytes of the call record
	cacheThis  bool   // SEQUENCE asked for the reply to be cached
	sess       *v4session
	slot       *v4slot
	// seqOwner, if set by an operation, is the 4.0 open or lock owner whose
	// seqid the operation consumed: the encoded result is kept for replay.
	seqOwner *v4owner
	// cleanup runs once the reply is encoded (READ buffers go back).
	cleanup []func()
}

// rawRes is a result already encoded (a 4.0 owner's replayed reply).
type rawRes struct {
	st nfs4.Status
	b  []byte
}

func (r rawRes) Encode(w *sunrpc.Writer) { w.FixedOpaque(r.b) }
func (r *rawRes) Decode(*sunrpc.Reader)  {}
func (r rawRes) Stat() nfs4.Status       { return r.st }

type op4Func func(c *compound, args nfs4.Args) nfs4.Res

var v4Procs = []procFunc{0: nfsNull, 1: nfs4Compound}

// ops4 lists the implemented operations.
var ops4 map[nfs4.Op]op4Func

func init() {
	ops4 = map[nfs4.Op]op4Func{
		nfs4.OpAccess:             op4Access,
		nfs4.OpClose:              op4Close,
		nfs4.OpCommit:             op4Commit,
		nfs4.OpCreate:             op4Create,
		nfs4.OpDelegPurge:         op4NotSupp,
		nfs4.OpDelegReturn:        op4DelegReturn,
		nfs4.OpGetattr:            op4Getattr,
		nfs4.OpGetFH:              op4GetFH,
		nfs4.OpLink:               op4Link,
		nfs4.OpLock:               op4Lock,
		nfs4.OpLockT:              op4LockT,
		nfs4.OpLockU:              op4LockU,
		nfs4.OpLookup:             op4Lookup,
		nfs4.OpLookupP:            op4LookupP,
		nfs4.OpNVerify:            op4NVerify,
		nfs4.OpOpen:               op4Open,
		nfs4.OpOpenAttr:           op4NotSupp,
		nfs4.OpOpenConfirm:        op4OpenConfirm,
		nfs4.OpOpenDowngrade:      op4OpenDowngrade,
		nfs4.OpPutFH:              op4PutFH,
		nfs4.OpPutPubFH:           op4PutRootFH,
		nfs4.OpPutRootFH:          op4PutRootFH,
		nfs4.OpRead:               op4Read,
		nfs4.OpReaddir:            op4Readdir,
		nfs4.OpReadlink:           op4Readlink,
		nfs4.OpRemove:             op4Remove,
		nfs4.OpRename:             op4Rename,
		nfs4.OpRenew:              op4Renew,
		nfs4.OpRestoreFH:          op4RestoreFH,
		nfs4.OpSaveFH:             op4SaveFH,
		nfs4.OpSecinfo:            op4Secinfo,
		nfs4.OpSetattr:            op4Setattr,
		nfs4.OpSetClientID:        op4SetClientID,
		nfs4.OpSetClientIDConfirm: op4SetClientIDConfirm,
		nfs4.OpVerify:             op4Verify,
		nfs4.OpWrite:              op4Write,
		nfs4.OpReleaseLockOwner:   op4ReleaseLockOwner,
		nfs4.OpBackchannelCtl:     op4BackchannelCtl,
		nfs4.OpBindConnToSession:  op4BindConn,
		nfs4.OpExchangeID:         op4ExchangeID,
		nfs4.OpCreateSession:      op4CreateSession,
		nfs4.OpDestroySession:     op4DestroySession,
		nfs4.OpFreeStateID:        op4FreeStateID,
		nfs4.OpSecinfoNoName:      op4SecinfoNoName,
		nfs4.OpSequence:           op4Sequence,
		nfs4.OpTestStateID:        op4TestStateID,
		nfs4.OpDestroyClientID:    op4DestroyClientID,
		nfs4.OpReclaimComplete:    op4ReclaimComplete,
	}
}

// only40 are 4.0 operations that 4.1 replaced (RFC 8881 section 18:
// "MUST NOT be implemented" for 4.1, answered NOTSUPP).
func only40(op nfs4.Op) bool {
	switch op {
	case nfs4.OpOpenConfirm, nfs4.OpRenew, nfs4.OpSetClientID, nfs4.OpSetClientIDConfirm, nfs4.OpReleaseLockOwner:
		return true
	}
	return false
}

// sessionless are the 4.1 operations allowed without a SEQUENCE first
// (each must then be the only operation).
func sessionless(op nfs4.Op) bool {
	switch op {
	case nfs4.OpExchangeID, nfs4.OpCreateSession, nfs4.OpDestroySession, nfs4.OpBindConnToSession, nfs4.OpDestroyClientID:
		return true
	}
	return false
}

func op4NotSupp(*compound, nfs4.Args) nfs4.Res { return &nfs4.StatusRes{Status: nfs4.ErrNotSupp} }

// nfs4Compound evaluates one COMPOUND.
func nfs4Compound(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	args := r.Rest() // the whole COMPOUND4args, for the duplicate request cache
	var hdr nfs4.CompoundArgs
	hdr.Decode(r)
	if r.Err() != nil {
		return errGarbage
	}
	replyStart := w.Len()
	statusOff := w.Reserve(4)
	w.Opaque(hdr.Tag)
	countOff := w.Reserve(4)
	status, n := nfs4.OK, 0
	finish := func() {
		w.PutUint32At(statusOff, uint32(status))
		w.PutUint32At(countOff, uint32(n))
	}
	if hdr.Minor > 1 {
		status = nfs4.ErrMinorVersMismatch
		finish()
		return nil
	}
	c := &compound{s: s, req: req, minor: hdr.Minor, nops: hdr.NOps, reqLen: len(r.Buffer())}
	var dk drcKey
	if hdr.Minor == 0 {
		// 4.0 has no sessions: a retransmitted non-idempotent COMPOUND
		// (same client, XID and arguments) is answered from the duplicate
		// request cache instead of being run again.
		dk = drcKey{addr: req.c.addr, xid: req.call.XID, sum: crc32.ChecksumIEEE(args)}
		if b := s.drc4.get(dk); b != nil {
			w.Truncate(replyStart)
			w.FixedOpaque(b)
			return nil
		}
	}
	mutating := false
	defer c.release()
	if hdr.NOps > nfs4.MaxOps || (hdr.Minor == 0 && hdr.NOps > v4MaxOps) {
		// 4.0 has no "too many ops" error; RESOURCE is what RFC 7530 names.
		status = nfs4.ErrResource
		if hdr.Minor == 1 {
			status = nfs4.ErrTooManyOps
		}
		// The first operation still gets its result (4.1 requires the
		// SEQUENCE to be answered; an empty array is accepted from 4.0).
		if hdr.NOps > 0 {
			opnum := nfs4.Op(r.Uint32())
			w.Uint32(uint32(opnum))
			w.Uint32(uint32(status))
			n = 1
		}
		finish()
		return nil
	}
	for i := 0; i < int(hdr.NOps); i++ {
		opnum := nfs4.Op(r.Uint32())
		if r.Err() != nil {
			status = nfs4.ErrBadXDR
			break
		}
		var res nfs4.Res
		mutating = mutating || nonIdempotent(opnum)
		switch {
		case !opnum.Known(hdr.Minor):
			opnum = nfs4.OpIllegal
			res = &nfs4.StatusRes{Status: nfs4.ErrOpIllegal}
		case hdr.Minor == 1 && only40(opnum):
			res = &nfs4.StatusRes{Status: nfs4.ErrNotSupp}
		case hdr.Minor == 1 && i == 0 && opnum != nfs4.OpSequence && !sessionless(opnum):
			res = &nfs4.StatusRes{Status: nfs4.ErrOpNotInSession}
		case hdr.Minor == 1 && i == 0 && sessionless(opnum) && hdr.NOps > 1 && opnum != nfs4.OpDestroySession:
			res = &nfs4.StatusRes{Status: nfs4.ErrNotOnlyOp}
		case hdr.Minor == 1 && i > 0 && opnum == nfs4.OpSequence:
			res = &nfs4.StatusRes{Status: nfs4.ErrSequencePos}
		default:
			args := nfs4.NewArgs(opnum)
			fn := ops4[opnum]
			if args == nil || fn == nil {
				res = &nfs4.StatusRes{Status: nfs4.ErrNotSupp}
				break
			}
			args.Decode(r)
			if r.Err() != nil {
				res = &nfs4.StatusRes{Status: nfs4.ErrBadXDR}
				break
			}
			res = c.call(fn, args)
		}
		if rr, ok := res.(*replayRes); ok {
			// 4.1 slot replay: the cached reply replaces everything.
			w.Truncate(replyStart)
			w.FixedOpaque(rr.reply)
			return nil
		}
		start := w.Len()
		w.Uint32(uint32(opnum))
		res.Encode(w)
		if c.sess != nil && res.Stat() == nfs4.OK {
			// The session's reply limits (RFC 8881 18.46.3): the operation
			// whose result would cross them fails instead.
			size := w.Len() - replyStart
			tooBig := nfs4.OK
			switch {
			case size > int(c.sess.fore.MaxResponseSize):
				tooBig = nfs4.ErrRepTooBig
			case c.cacheThis && size > int(c.sess.fore.MaxResponseSizeCached):
				tooBig = nfs4.ErrRepTooBigToCache
			}
			if tooBig != nfs4.OK {
				w.Truncate(start)
				w.Uint32(uint32(opnum))
				res = &nfs4.StatusRes{Status: tooBig}
				res.Encode(w)
			}
		}
		if c.seqOwner != nil {
			s.v4.mu.Lock()
			c.seqOwner.remember(opnum, w.Bytes()[start+4:])
			s.v4.mu.Unlock()
			c.seqOwner = nil
		}
		n++
		if status = res.Stat(); status != nfs4.OK {
			break
		}
		if w.Len()-replyStart > v4MaxRespSize {
			status = nfs4.ErrResource
			if hdr.Minor == 1 {
				status = nfs4.ErrRepTooBig
			}
			break
		}
	}
	finish()
	if hdr.Minor == 0 && mutating {
		s.drc4.put(dk, w.Bytes()[replyStart:])
	}
	if c.slot != nil {
		c.s.v4.finishSlot(c.sess, c.slot, w.Bytes()[replyStart:])
		c.slot = nil
	}
	return nil
}

// nonIdempotent are the operations whose repetition would not give the
// same answer (the 4.0 duplicate request cache keeps their replies).
func nonIdempotent(op nfs4.Op) bool {
	switch op {
	case nfs4.OpCreate, nfs4.OpRemove, nfs4.OpRename, nfs4.OpLink, nfs4.OpSetattr, nfs4.OpWrite,
		nfs4.OpOpen, nfs4.OpClose, nfs4.OpLock, nfs4.OpLockU, nfs4.OpOpenConfirm, nfs4.OpOpenDowngrade,
		nfs4.OpSetClientID, nfs4.OpSetClientIDConfirm, nfs4.OpReleaseLockOwner:
		return true
	}
	return false
}

type drcKey struct {
	addr netip.Addr
	xid  uint32
	sum  uint32
}

// drc is a bounded duplicate request cache (the newest 1,024 replies of at
// most 32 KiB each).
type drc struct {
	mu    sync.Mutex
	m     map[drcKey][]byte
	order []drcKey
}

const drcEntries, drcMaxReply = 1024, 32 << 10

func (d *drc) get(k drcKey) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b, ok := d.m[k]; ok {
		return append([]byte(nil), b...)
	}
	return nil
}

func (d *drc) put(k drcKey, b []byte) {
	if len(b) > drcMaxReply {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[drcKey][]byte{}
	}
	if _, ok := d.m[k]; !ok {
		d.order = append(d.order, k)
	}
	d.m[k] = append([]byte(nil), b...)
	for len(d.order) > drcEntries {
		delete(d.m, d.order[0])
		d.order = d.order[1:]
	}
}

// call runs an operation, turning a panic into SERVERFAULT so one bad
// request cannot take the server down.
func (c *compound) call(fn op4Func, args nfs4.Args) (res nfs4.Res) {
	defer func() {
		if v := recover(); v != nil {
			c.s.log.Error("nfs4: operation panicked", "panic", v)
			res = &nfs4.StatusRes{Status: nfs4.ErrServerFault}
		}
	}()
	return fn(c, args)
}

// release ends the slot's "in use" mark if the compound stopped early.
func (c *compound) release() {
	if c.slot != nil {
		c.s.v4.releaseSlot(c.sess, c.slot)
	}
	for _, f := range c.cleanup {
		f()
	}
}

// statusOf4 is the one place where file-system, vfs and store errors become
// nfsstat4.
func statusOf4(err error) nfs4.Status {
	if err == nil {
		return nfs4.OK
	}
	var st nfs4.Status
	if errors.As(err, &st) {
		return st
	}
	switch {
	case errors.Is(err, vfs.ErrStale):
		return nfs4.ErrStale
	case errors.Is(err, vfs.ErrBadHandle):
		return nfs4.ErrBadHandle
	case errors.Is(err, vfs.ErrInvalidName):
		return nfs4.ErrBadName
	case errors.Is(err, vfs.ErrReserved):
		return nfs4.ErrAccess
	case errors.Is(err, vfs.ErrNotSupp), errors.Is(err, store.ErrNotSupported):
		return nfs4.ErrNotSupp
	case errors.Is(err, vfs.ErrNotSync):
		return nfs4.ErrNotSame
	case errors.Is(err, vfs.ErrReadOnly), errors.Is(err, store.ErrReadOnly):
		return nfs4.ErrROFS
	case errors.Is(err, vfs.ErrBadCookie):
		return nfs4.ErrBadCookie
	case errors.Is(err, store.ErrNoSpace):
		return nfs4.ErrNoSpc
	case errors.Is(err, store.ErrInUse):
		// A served block volume: see statusOf for why ACCESS, not DELAY.
		return nfs4.ErrAccess
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EPERM:
			return nfs4.ErrPerm
		case syscall.ENOENT:
			return nfs4.ErrNoEnt
		case syscall.ENXIO:
			return nfs4.ErrNXIO
		case syscall.EACCES:
			return nfs4.ErrAccess
		case syscall.EEXIST:
			return nfs4.ErrExist
		case syscall.EXDEV:
			return nfs4.ErrXDev
		case syscall.ENOTDIR:
			return nfs4.ErrNotDir
		case syscall.EISDIR:
			return nfs4.ErrIsDir
		case syscall.EINVAL:
			return nfs4.ErrInval
		case syscall.ELOOP:
			return nfs4.ErrSymlink
		case syscall.EFBIG:
			return nfs4.ErrFBig
		case syscall.ENOSPC:
			return nfs4.ErrNoSpc
		case syscall.EROFS:
			return nfs4.ErrROFS
		case syscall.EMLINK:
			return nfs4.ErrMLink
		case syscall.ENAMETOOLONG:
			return nfs4.ErrNameTooLong
		case syscall.ENOTEMPTY:
			return nfs4.ErrNotEmpty
		case syscall.EDQUOT:
			return nfs4.ErrDQuot
		case syscall.ESTALE:
			return nfs4.ErrStale
		case syscall.EOPNOTSUPP:
			return nfs4.ErrNotSupp
		case syscall.EAGAIN, syscall.EBUSY:
			return nfs4.ErrDelay
		}
	}
	return nfs4.ErrIO
}

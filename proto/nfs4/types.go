// Package nfs4 is the wire format of NFS version 4.0 (RFC 7530) and 4.1
// (RFC 8881): the COMPOUND procedure, its operations' arguments and results,
// and the fattr4 attribute encoding. Like proto/nfs3 it builds on
// proto/sunrpc's XDR codec and is shared by tristore's server
// (frontend/nfs) and client, so both sides agree by construction.
//
// Why hand-written: no maintained Go package encodes NFSv4 (go-nfs and
// go-nfs-client are v3-only); generated code from the RFCs' .x files would
// pull in a reflection-based XDR runtime with no per-field limits (see the
// proto/sunrpc package comment). Every decoder bounds its lengths before
// allocating and reports malformed input as sunrpc.ErrGarbage, which the
// server answers with NFS4ERR_BADXDR.
//
// Scope: the operations of 4.0 and 4.1 that a file server without pNFS,
// delegations or RPCSEC_GSS needs. The remaining operation numbers are
// known (so a COMPOUND naming them is answered NFS4ERR_NOTSUPP, not
// OP_ILLEGAL) but have no argument decoder; a COMPOUND stops at them.
package nfs4

import (
	"fmt"

	"github.com/tristore/tristore/proto/sunrpc"
)

// Program numbers.
const (
	Prog       = 100003
	Vers       = 4
	ProcNull   = 0
	ProcCompnd = 1
)

// Limits from RFC 7530/8881 and this implementation's own bounds on what it
// decodes (a hostile length is refused before allocation).
const (
	FHSize        = 128
	VerifierSize  = 8
	OtherSize     = 12
	OpaqueLimit   = 1024
	SessionIDSize = 16
	MaxName       = 255  // longest component decoded
	MaxPath       = 4096 // longest symlink target decoded
	MaxTag        = 1024
	MaxOps        = 128 // ops per COMPOUND decoded at most (the server may advertise fewer)
	MaxBitmap     = 64  // bitmap4 words decoded at most (bits past the known ones are ignored or refused by meaning)
	MaxAttrVals   = 64 << 10
	MaxData       = 1 << 20 // largest WRITE accepted
)

// Op is an operation number (nfs_opnum4).
type Op uint32

const (
	OpAccess             Op = 3
	OpClose              Op = 4
	OpCommit             Op = 5
	OpCreate             Op = 6
	OpDelegPurge         Op = 7
	OpDelegReturn        Op = 8
	OpGetattr            Op = 9
	OpGetFH              Op = 10
	OpLink               Op = 11
	OpLock               Op = 12
	OpLockT              Op = 13
	OpLockU              Op = 14
	OpLookup             Op = 15
	OpLookupP            Op = 16
	OpNVerify            Op = 17
	OpOpen               Op = 18
	OpOpenAttr           Op = 19
	OpOpenConfirm        Op = 20
	OpOpenDowngrade      Op = 21
	OpPutFH              Op = 22
	OpPutPubFH           Op = 23
	OpPutRootFH          Op = 24
	OpRead               Op = 25
	OpReaddir            Op = 26
	OpReadlink           Op = 27
	OpRemove             Op = 28
	OpRename             Op = 29
	OpRenew              Op = 30
	OpRestoreFH          Op = 31
	OpSaveFH             Op = 32
	OpSecinfo            Op = 33
	OpSetattr            Op = 34
	OpSetClientID        Op = 35
	OpSetClientIDConfirm Op = 36
	OpVerify             Op = 37
	OpWrite              Op = 38
	OpReleaseLockOwner   Op = 39
	// 4.1
	OpBackchannelCtl    Op = 40
	OpBindConnToSession Op = 41
	OpExchangeID        Op = 42
	OpCreateSession     Op = 43
	OpDestroySession    Op = 44
	OpFreeStateID       Op = 45
	OpGetDirDelegation  Op = 46
	OpGetDeviceInfo     Op = 47
	OpGetDeviceList     Op = 48
	OpLayoutCommit      Op = 49
	OpLayoutGet         Op = 50
	OpLayoutReturn      Op = 51
	OpSecinfoNoName     Op = 52
	OpSequence          Op = 53
	OpSetSSV            Op = 54
	OpTestStateID       Op = 55
	OpWantDelegation    Op = 56
	OpDestroyClientID   Op = 57
	OpReclaimComplete   Op = 58
	OpIllegal           Op = 10044
)

var opNames = map[Op]string{
	OpAccess: "ACCESS", OpClose: "CLOSE", OpCommit: "COMMIT", OpCreate: "CREATE", OpDelegPurge: "DELEGPURGE",
	OpDelegReturn: "DELEGRETURN", OpGetattr: "GETATTR", OpGetFH: "GETFH", OpLink: "LINK", OpLock: "LOCK",
	OpLockT: "LOCKT", OpLockU: "LOCKU", OpLookup: "LOOKUP", OpLookupP: "LOOKUPP", OpNVerify: "NVERIFY",
	OpOpen: "OPEN", OpOpenAttr: "OPENATTR", OpOpenConfirm: "OPEN_CONFIRM", OpOpenDowngrade: "OPEN_DOWNGRADE",
	OpPutFH: "PUTFH", OpPutPubFH: "PUTPUBFH", OpPutRootFH: "PUTROOTFH", OpRead: "READ", OpReaddir: "READDIR",
	OpReadlink: "READLINK", OpRemove: "REMOVE", OpRename: "RENAME", OpRenew: "RENEW", OpRestoreFH: "RESTOREFH",
	OpSaveFH: "SAVEFH", OpSecinfo: "SECINFO", OpSetattr: "SETATTR", OpSetClientID: "SETCLIENTID",
	OpSetClientIDConfirm: "SETCLIENTID_CONFIRM", OpVerify: "VERIFY", OpWrite: "WRITE",
	OpReleaseLockOwner: "RELEASE_LOCKOWNER", OpBackchannelCtl: "BACKCHANNEL_CTL",
	OpBindConnToSession: "BIND_CONN_TO_SESSION", OpExchangeID: "EXCHANGE_ID", OpCreateSession: "CREATE_SESSION",
	OpDestroySession: "DESTROY_SESSION", OpFreeStateID: "FREE_STATEID", OpGetDirDelegation: "GET_DIR_DELEGATION",
	OpGetDeviceInfo: "GETDEVICEINFO", OpGetDeviceList: "GETDEVICELIST", OpLayoutCommit: "LAYOUTCOMMIT",
	OpLayoutGet: "LAYOUTGET", OpLayoutReturn: "LAYOUTRETURN", OpSecinfoNoName: "SECINFO_NO_NAME",
	OpSequence: "SEQUENCE", OpSetSSV: "SET_SSV", OpTestStateID: "TEST_STATEID", OpWantDelegation: "WANT_DELEGATION",
	OpDestroyClientID: "DESTROY_CLIENTID", OpReclaimComplete: "RECLAIM_COMPLETE", OpIllegal: "ILLEGAL",
}

func (o Op) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return fmt.Sprintf("OP_%d", uint32(o))
}

// Known reports whether o is an operation of minor version minor (others
// are answered OP_ILLEGAL).
func (o Op) Known(minor uint32) bool {
	if o >= OpAccess && o <= OpReleaseLockOwner {
		return true
	}
	return minor >= 1 && o >= OpBackchannelCtl && o <= OpReclaimComplete
}

// Status is nfsstat4.
type Status uint32

const (
	OK                       Status = 0
	ErrPerm                  Status = 1
	ErrNoEnt                 Status = 2
	ErrIO                    Status = 5
	ErrNXIO                  Status = 6
	ErrAccess                Status = 13
	ErrExist                 Status = 17
	ErrXDev                  Status = 18
	ErrNotDir                Status = 20
	ErrIsDir                 Status = 21
	ErrInval                 Status = 22
	ErrFBig                  Status = 27
	ErrNoSpc                 Status = 28
	ErrROFS                  Status = 30
	ErrMLink                 Status = 31
	ErrNameTooLong           Status = 63
	ErrNotEmpty              Status = 66
	ErrDQuot                 Status = 69
	ErrStale                 Status = 70
	ErrBadHandle             Status = 10001
	ErrBadCookie             Status = 10003
	ErrNotSupp               Status = 10004
	ErrTooSmall              Status = 10005
	ErrServerFault           Status = 10006
	ErrBadType               Status = 10007
	ErrDelay                 Status = 10008
	ErrSame                  Status = 10009
	ErrDenied                Status = 10010
	ErrExpired               Status = 10011
	ErrLocked                Status = 10012
	ErrGrace                 Status = 10013
	ErrFHExpired             Status = 10014
	ErrShareDenied           Status = 10015
	ErrWrongSec              Status = 10016
	ErrClidInUse             Status = 10017
	ErrResource              Status = 10018
	ErrMoved                 Status = 10019
	ErrNoFileHandle          Status = 10020
	ErrMinorVersMismatch     Status = 10021
	ErrStaleClientID         Status = 10022
	ErrStaleStateID          Status = 10023
	ErrOldStateID            Status = 10024
	ErrBadStateID            Status = 10025
	ErrBadSeqID              Status = 10026
	ErrNotSame               Status = 10027
	ErrLockRange             Status = 10028
	ErrSymlink               Status = 10029
	ErrRestoreFH             Status = 10030
	ErrLeaseMoved            Status = 10031
	ErrAttrNotSupp           Status = 10032
	ErrNoGrace               Status = 10033
	ErrReclaimBad            Status = 10034
	ErrReclaimConflict       Status = 10035
	ErrBadXDR                Status = 10036
	ErrLocksHeld             Status = 10037
	ErrOpenMode              Status = 10038
	ErrBadOwner              Status = 10039
	ErrBadChar               Status = 10040
	ErrBadName               Status = 10041
	ErrBadRange              Status = 10042
	ErrLockNotSupp           Status = 10043
	ErrOpIllegal             Status = 10044
	ErrDeadlock              Status = 10045
	ErrFileOpen              Status = 10046
	ErrAdminRevoked          Status = 10047
	ErrCBPathDown            Status = 10048
	ErrBadIOMode             Status = 10049
	ErrBadLayout             Status = 10050
	ErrBadSessionDigest      Status = 10051
	ErrBadSession            Status = 10052
	ErrBadSlot               Status = 10053
	ErrCompleteAlready       Status = 10054
	ErrConnNotBoundToSession Status = 10055
	ErrDelegAlreadyWanted    Status = 10056
	ErrBackChanBusy          Status = 10057
	ErrSeqMisordered         Status = 10063
	ErrSequencePos           Status = 10064
	ErrReqTooBig             Status = 10065
	ErrRepTooBig             Status = 10066
	ErrRepTooBigToCache      Status = 10067
	ErrRetryUncachedRep      Status = 10068
	ErrUnsafeCompound        Status = 10069
	ErrTooManyOps            Status = 10070
	ErrOpNotInSession        Status = 10071
	ErrHashAlgUnsupp         Status = 10072
	ErrClientIDBusy          Status = 10074
	ErrSeqFalseRetry         Status = 10076
	ErrBadHighSlot           Status = 10077
	ErrDeadSession           Status = 10078
	ErrEncrAlgUnsupp         Status = 10079
	ErrNotOnlyOp             Status = 10081
	ErrWrongCred             Status = 10082
	ErrWrongType             Status = 10083
	ErrDirDelegUnavail       Status = 10084
	ErrRejectDeleg           Status = 10085
	ErrReturnConflict        Status = 10086
	ErrDelegRevoked          Status = 10087
)

func (s Status) Error() string { return fmt.Sprintf("NFS4 status %d", uint32(s)) }

// FileType is nfs_ftype4.
type FileType uint32

const (
	TypeReg       FileType = 1
	TypeDir       FileType = 2
	TypeBlk       FileType = 3
	TypeChr       FileType = 4
	TypeLnk       FileType = 5
	TypeSock      FileType = 6
	TypeFIFO      FileType = 7
	TypeAttrDir   FileType = 8
	TypeNamedAttr FileType = 9
)

// Access bits (ACCESS4_*), share access/deny, open results and flags.
const (
	AccessRead    = 0x01
	AccessLookup  = 0x02
	AccessModify  = 0x04
	AccessExtend  = 0x08
	AccessDelete  = 0x10
	AccessExecute = 0x20

	ShareAccessRead  = 1
	ShareAccessWrite = 2
	ShareAccessBoth  = 3
	ShareDenyNone    = 0
	ShareDenyRead    = 1
	ShareDenyWrite   = 2
	ShareDenyBoth    = 3
	ShareWantMask    = 0xff00 // 4.1 delegation wishes in share_access

	OpenResultConfirm     = 0x2
	OpenResultLockPosix   = 0x4
	OpenResultMayNotifyLk = 0x20

	OpenNoCreate = 0
	OpenCreate   = 1

	CreateUnchecked   = 0
	CreateGuarded     = 1
	CreateExclusive   = 2
	CreateExclusive41 = 3

	ClaimNull         = 0
	ClaimPrevious     = 1
	ClaimDelegateCur  = 2
	ClaimDelegatePrev = 3
	ClaimFH           = 4
	ClaimDelegCurFH   = 5
	ClaimDelegPrevFH  = 6

	DelegNone    = 0
	DelegRead    = 1
	DelegWrite   = 2
	DelegNoneExt = 3

	WNDNotWanted    = 0
	WNDNotSuppFtype = 3
	WNDResource     = 2

	ReadLT   = 1
	WriteLT  = 2
	ReadWLT  = 3
	WriteWLT = 4

	Unstable = 0
	DataSync = 1
	FileSync = 2

	TimeServer = 0
	TimeClient = 1

	FHPersistent = 0

	ExchgIDSuppMovedRefer   = 0x1
	ExchgIDSuppMovedMigr    = 0x2
	ExchgIDBindPrincStateID = 0x100
	ExchgIDUseNonPNFS       = 0x10000
	ExchgIDUsePNFSMDS       = 0x20000
	ExchgIDUsePNFSDS        = 0x40000
	ExchgIDMaskPNFS         = 0x70000
	ExchgIDUpdConfirmedRecA = 0x40000000
	ExchgIDConfirmedR       = 0x80000000

	SP4None     = 0
	SP4MachCred = 1
	SP4SSV      = 2

	CreateSessionPersist      = 0x1
	CreateSessionConnBackChan = 0x2
	CreateSessionConnRDMA     = 0x4

	Seq4StatusCBPathDown           = 0x1
	Seq4StatusRestartReclaimNeeded = 0x100

	SecinfoStyleCurrentFH = 0
	SecinfoStyleParent    = 1

	AuthNone = 0
	AuthSys  = 1

	ChanDirFore = 1
	ChanDirBack = 2
	ChanDirBoth = 3
)

// Uint64Max is NFS4_UINT64_MAX: a lock length meaning "to the end of the file".
const Uint64Max = ^uint64(0)

// Stateid is stateid4.
type Stateid struct {
	Seqid uint32
	Other [OtherSize]byte
}

func (s Stateid) Encode(w *sunrpc.Writer) {
	w.Uint32(s.Seqid)
	w.FixedOpaque(s.Other[:])
}

func (s *Stateid) Decode(r *sunrpc.Reader) {
	s.Seqid = r.Uint32()
	copy(s.Other[:], r.FixedOpaque(OtherSize))
}

// Anonymous is the all-zeros special stateid; Bypass the all-ones one;
// Current (4.1) means "the stateid the previous operation produced".
func (s Stateid) Anonymous() bool { return s.Seqid == 0 && s.Other == [OtherSize]byte{} }
func (s Stateid) Bypass() bool {
	return s.Seqid == ^uint32(0) && s.Other == [OtherSize]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
}
func (s Stateid) Current() bool { return s.Seqid == 1 && s.Other == [OtherSize]byte{} }
func (s Stateid) Invalid() bool { return s.Seqid == ^uint32(0) && s.Other == [OtherSize]byte{} }
func (s Stateid) Special() bool { return s.Anonymous() || s.Bypass() || s.Current() || s.Invalid() }

// Time is nfstime4.
type Time struct {
	Sec  int64
	Nsec uint32
}

func (t Time) Encode(w *sunrpc.Writer) { w.Int64(t.Sec); w.Uint32(t.Nsec) }

// Decode reads nfstime4. Nanoseconds of 10^9 or more decode (they are
// well-formed XDR); a server refuses them as NFS4ERR_INVAL.
func (t *Time) Decode(r *sunrpc.Reader) {
	t.Sec = r.Int64()
	t.Nsec = r.Uint32()
}

// Bitmap is bitmap4: bit n is word n/32, bit n%32.
type Bitmap []uint32

// Has reports whether bit n is set.
func (b Bitmap) Has(n int) bool { return n/32 < len(b) && b[n/32]&(1<<(n%32)) != 0 }

// Set sets bit n, growing the bitmap.
func (b *Bitmap) Set(n int) {
	for len(*b) <= n/32 {
		*b = append(*b, 0)
	}
	(*b)[n/32] |= 1 << (n % 32)
}

// And is the intersection of b and o.
func (b Bitmap) And(o Bitmap) Bitmap {
	n := min(len(b), len(o))
	r := make(Bitmap, n)
	for i := range n {
		r[i] = b[i] & o[i]
	}
	return r.trim()
}

// Minus is b without the bits of o.
func (b Bitmap) Minus(o Bitmap) Bitmap {
	r := append(Bitmap(nil), b...)
	for i := range min(len(r), len(o)) {
		r[i] &^= o[i]
	}
	return r.trim()
}

// Empty reports whether no bit is set.
func (b Bitmap) Empty() bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

func (b Bitmap) trim() Bitmap {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// Bits lists the set bits in ascending order.
func (b Bitmap) Bits() []int {
	var r []int
	for i, w := range b {
		for j := range 32 {
			if w&(1<<j) != 0 {
				r = append(r, i*32+j)
			}
		}
	}
	return r
}

func (b Bitmap) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(len(b)))
	for _, v := range b {
		w.Uint32(v)
	}
}

func (b *Bitmap) Decode(r *sunrpc.Reader) {
	n := r.Uint32()
	if n > MaxBitmap {
		r.Fail("bitmap4 of %d words", n)
		return
	}
	*b = make(Bitmap, n)
	for i := range *b {
		(*b)[i] = r.Uint32()
	}
}

// NewBitmap returns a bitmap with the given bits set.
func NewBitmap(bits ...int) Bitmap {
	var b Bitmap
	for _, n := range bits {
		b.Set(n)
	}
	return b
}

// ChangeInfo is change_info4.
type ChangeInfo struct {
	Atomic        bool
	Before, After uint64
}

func (c ChangeInfo) Encode(w *sunrpc.Writer) { w.Bool(c.Atomic); w.Uint64(c.Before); w.Uint64(c.After) }
func (c *ChangeInfo) Decode(r *sunrpc.Reader) {
	c.Atomic = r.Bool()
	c.Before = r.Uint64()
	c.After = r.Uint64()
}

// Owner is state_owner4 (open_owner4 and lock_owner4).
type Owner struct {
	ClientID uint64
	Owner    []byte
}

func (o Owner) Encode(w *sunrpc.Writer) { w.Uint64(o.ClientID); w.Opaque(o.Owner) }
func (o *Owner) Decode(r *sunrpc.Reader) {
	o.ClientID = r.Uint64()
	o.Owner = r.Opaque(OpaqueLimit)
}

// Key is a comparable form of the owner.
func (o Owner) Key() string { return fmt.Sprintf("%016x/%x", o.ClientID, o.Owner) }

// Component decodes a component4 (a name), refusing over-long ones.
func Component(r *sunrpc.Reader) string { return r.String(MaxName * 4) }

// FH decodes nfs_fh4.
func FH(r *sunrpc.Reader) []byte { return r.Opaque(FHSize) }

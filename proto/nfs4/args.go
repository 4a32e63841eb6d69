package nfs4

import "github.com/tristore/tristore/proto/sunrpc"

// Args is an operation's arguments.
type Args interface {
	Encode(w *sunrpc.Writer)
	Decode(r *sunrpc.Reader)
}

// NewArgs returns empty arguments for op, or nil if this package has no
// decoder for it (the server answers such an op NFS4ERR_NOTSUPP; its
// arguments cannot be skipped, so the COMPOUND ends there).
func NewArgs(op Op) Args {
	switch op {
	case OpAccess:
		return &AccessArgs{}
	case OpClose:
		return &CloseArgs{}
	case OpCommit:
		return &CommitArgs{}
	case OpCreate:
		return &CreateArgs{}
	case OpDelegPurge:
		return &ClientIDArgs{}
	case OpDelegReturn:
		return &StateidArgs{}
	case OpGetattr:
		return &GetattrArgs{}
	case OpGetFH, OpLookupP, OpPutPubFH, OpPutRootFH, OpReadlink, OpRestoreFH, OpSaveFH:
		return &NoArgs{}
	case OpLink:
		return &NameArgs{}
	case OpLock:
		return &LockArgs{}
	case OpLockT:
		return &LockTArgs{}
	case OpLockU:
		return &LockUArgs{}
	case OpLookup, OpRemove, OpSecinfo:
		return &NameArgs{}
	case OpNVerify, OpVerify:
		return &VerifyArgs{}
	case OpOpen:
		return &OpenArgs{}
	case OpOpenAttr:
		return &OpenAttrArgs{}
	case OpOpenConfirm:
		return &OpenConfirmArgs{}
	case OpOpenDowngrade:
		return &OpenDowngradeArgs{}
	case OpPutFH:
		return &PutFHArgs{}
	case OpRead:
		return &ReadArgs{}
	case OpReaddir:
		return &ReaddirArgs{}
	case OpRename:
		return &RenameArgs{}
	case OpRenew:
		return &ClientIDArgs{}
	case OpSetattr:
		return &SetattrArgs{}
	case OpSetClientID:
		return &SetClientIDArgs{}
	case OpSetClientIDConfirm:
		return &SetClientIDConfirmArgs{}
	case OpWrite:
		return &WriteArgs{}
	case OpReleaseLockOwner:
		return &OwnerArgs{}
	case OpBackchannelCtl:
		return &BackchannelCtlArgs{}
	case OpBindConnToSession:
		return &BindConnArgs{}
	case OpExchangeID:
		return &ExchangeIDArgs{}
	case OpCreateSession:
		return &CreateSessionArgs{}
	case OpDestroySession:
		return &SessionArgs{}
	case OpFreeStateID:
		return &StateidArgs{}
	case OpSecinfoNoName:
		return &SecinfoNoNameArgs{}
	case OpSequence:
		return &SequenceArgs{}
	case OpTestStateID:
		return &TestStateIDArgs{}
	case OpDestroyClientID:
		return &ClientIDArgs{}
	case OpReclaimComplete:
		return &ReclaimCompleteArgs{}
	}
	return nil
}

// NoArgs is the arguments of GETFH, LOOKUPP, PUTROOTFH, PUTPUBFH, READLINK,
// SAVEFH and RESTOREFH.
type NoArgs struct{}

func (NoArgs) Encode(*sunrpc.Writer)  {}
func (*NoArgs) Decode(*sunrpc.Reader) {}

// NameArgs is one component: LOOKUP, REMOVE, SECINFO, LINK (the new name).
type NameArgs struct{ Name string }

func (a NameArgs) Encode(w *sunrpc.Writer)  { w.String(a.Name) }
func (a *NameArgs) Decode(r *sunrpc.Reader) { a.Name = Component(r) }

// ClientIDArgs: RENEW, DELEGPURGE, DESTROY_CLIENTID.
type ClientIDArgs struct{ ClientID uint64 }

func (a ClientIDArgs) Encode(w *sunrpc.Writer)  { w.Uint64(a.ClientID) }
func (a *ClientIDArgs) Decode(r *sunrpc.Reader) { a.ClientID = r.Uint64() }

// StateidArgs: DELEGRETURN, FREE_STATEID.
type StateidArgs struct{ Stateid Stateid }

func (a StateidArgs) Encode(w *sunrpc.Writer)  { a.Stateid.Encode(w) }
func (a *StateidArgs) Decode(r *sunrpc.Reader) { a.Stateid.Decode(r) }

// OwnerArgs: RELEASE_LOCKOWNER.
type OwnerArgs struct{ Owner Owner }

func (a OwnerArgs) Encode(w *sunrpc.Writer)  { a.Owner.Encode(w) }
func (a *OwnerArgs) Decode(r *sunrpc.Reader) { a.Owner.Decode(r) }

// SessionArgs: DESTROY_SESSION.
type SessionArgs struct{ SessionID [SessionIDSize]byte }

func (a SessionArgs) Encode(w *sunrpc.Writer)  { w.FixedOpaque(a.SessionID[:]) }
func (a *SessionArgs) Decode(r *sunrpc.Reader) { copy(a.SessionID[:], r.FixedOpaque(SessionIDSize)) }

type AccessArgs struct{ Access uint32 }

func (a AccessArgs) Encode(w *sunrpc.Writer)  { w.Uint32(a.Access) }
func (a *AccessArgs) Decode(r *sunrpc.Reader) { a.Access = r.Uint32() }

type CloseArgs struct {
	Seqid   uint32
	Stateid Stateid
}

func (a CloseArgs) Encode(w *sunrpc.Writer) { w.Uint32(a.Seqid); a.Stateid.Encode(w) }
func (a *CloseArgs) Decode(r *sunrpc.Reader) {
	a.Seqid = r.Uint32()
	a.Stateid.Decode(r)
}

type CommitArgs struct {
	Offset uint64
	Count  uint32
}

func (a CommitArgs) Encode(w *sunrpc.Writer) { w.Uint64(a.Offset); w.Uint32(a.Count) }
func (a *CommitArgs) Decode(r *sunrpc.Reader) {
	a.Offset = r.Uint64()
	a.Count = r.Uint32()
}

// CreateArgs: CREATE (non-regular objects).
type CreateArgs struct {
	Type     FileType
	LinkData string    // NF4LNK
	Dev      [2]uint32 // NF4BLK, NF4CHR
	Name     string
	Attrs    RawFattr
}

func (a CreateArgs) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(a.Type))
	switch a.Type {
	case TypeLnk:
		w.String(a.LinkData)
	case TypeBlk, TypeChr:
		w.Uint32(a.Dev[0])
		w.Uint32(a.Dev[1])
	}
	w.String(a.Name)
	a.Attrs.Encode(w)
}

func (a *CreateArgs) Decode(r *sunrpc.Reader) {
	a.Type = FileType(r.Uint32())
	switch a.Type {
	case TypeLnk:
		a.LinkData = r.String(MaxPath)
	case TypeBlk, TypeChr:
		a.Dev[0] = r.Uint32()
		a.Dev[1] = r.Uint32()
	}
	a.Name = Component(r)
	a.Attrs.Decode(r)
}

type GetattrArgs struct{ Request Bitmap }

func (a GetattrArgs) Encode(w *sunrpc.Writer)  { a.Request.Encode(w) }
func (a *GetattrArgs) Decode(r *sunrpc.Reader) { a.Request.Decode(r) }

// Locker is locker4: a new lock owner (from an open) or an existing one.
type Locker struct {
	New bool
	// New:
	OpenSeqid   uint32
	OpenStateid Stateid
	LockSeqid   uint32
	LockOwner   Owner
	// Existing:
	LockStateid Stateid
}

type LockArgs struct {
	Type    uint32
	Reclaim bool
	Offset  uint64
	Length  uint64
	Locker  Locker
}

func (a LockArgs) Encode(w *sunrpc.Writer) {
	w.Uint32(a.Type)
	w.Bool(a.Reclaim)
	w.Uint64(a.Offset)
	w.Uint64(a.Length)
	w.Bool(a.Locker.New)
	if a.Locker.New {
		w.Uint32(a.Locker.OpenSeqid)
		a.Locker.OpenStateid.Encode(w)
		w.Uint32(a.Locker.LockSeqid)
		a.Locker.LockOwner.Encode(w)
	} else {
		a.Locker.LockStateid.Encode(w)
		w.Uint32(a.Locker.LockSeqid)
	}
}

func (a *LockArgs) Decode(r *sunrpc.Reader) {
	a.Type = r.Uint32()
	a.Reclaim = r.Bool()
	a.Offset = r.Uint64()
	a.Length = r.Uint64()
	a.Locker.New = r.Bool()
	if a.Locker.New {
		a.Locker.OpenSeqid = r.Uint32()
		a.Locker.OpenStateid.Decode(r)
		a.Locker.LockSeqid = r.Uint32()
		a.Locker.LockOwner.Decode(r)
	} else {
		a.Locker.LockStateid.Decode(r)
		a.Locker.LockSeqid = r.Uint32()
	}
}

type LockTArgs struct {
	Type   uint32
	Offset uint64
	Length uint64
	Owner  Owner
}

func (a LockTArgs) Encode(w *sunrpc.Writer) {
	w.Uint32(a.Type)
	w.Uint64(a.Offset)
	w.Uint64(a.Length)
	a.Owner.Encode(w)
}

func (a *LockTArgs) Decode(r *sunrpc.Reader) {
	a.Type = r.Uint32()
	a.Offset = r.Uint64()
	a.Length = r.Uint64()
	a.Owner.Decode(r)
}

type LockUArgs struct {
	Type    uint32
	Seqid   uint32
	Stateid Stateid
	Offset  uint64
	Length  uint64
}

func (a LockUArgs) Encode(w *sunrpc.Writer) {
	w.Uint32(a.Type)
	w.Uint32(a.Seqid)
	a.Stateid.Encode(w)
	w.Uint64(a.Offset)
	w.Uint64(a.Length)
}

func (a *LockUArgs) Decode(r *sunrpc.Reader) {
	a.Type = r.Uint32()
	a.Seqid = r.Uint32()
	a.Stateid.Decode(r)
	a.Offset = r.Uint64()
	a.Length = r.Uint64()
}

// VerifyArgs: VERIFY and NVERIFY.
type VerifyArgs struct{ Attrs RawFattr }

func (a VerifyArgs) Encode(w *sunrpc.Writer)  { a.Attrs.Encode(w) }
func (a *VerifyArgs) Decode(r *sunrpc.Reader) { a.Attrs.Decode(r) }

// OpenArgs is OPEN4args.
type OpenArgs struct {
	Seqid       uint32
	ShareAccess uint32
	ShareDeny   uint32
	Owner       Owner
	Create      bool
	CreateMode  uint32   // with Create
	Attrs       RawFattr // UNCHECKED4, GUARDED4, EXCLUSIVE4_1
	Verifier    [VerifierSize]byte
	Claim       uint32
	Name        string  // CLAIM_NULL, CLAIM_DELEGATE_CUR, CLAIM_DELEGATE_PREV
	DelegType   uint32  // CLAIM_PREVIOUS
	DelegState  Stateid // CLAIM_DELEGATE_CUR, CLAIM_DELEG_CUR_FH
}

func (a OpenArgs) Encode(w *sunrpc.Writer) {
	w.Uint32(a.Seqid)
	w.Uint32(a.ShareAccess)
	w.Uint32(a.ShareDeny)
	a.Owner.Encode(w)
	if a.Create {
		w.Uint32(OpenCreate)
		w.Uint32(a.CreateMode)
		switch a.CreateMode {
		case CreateUnchecked, CreateGuarded:
			a.Attrs.Encode(w)
		case CreateExclusive:
			w.FixedOpaque(a.Verifier[:])
		case CreateExclusive41:
			w.FixedOpaque(a.Verifier[:])
			a.Attrs.Encode(w)
		}
	} else {
		w.Uint32(OpenNoCreate)
	}
	w.Uint32(a.Claim)
	switch a.Claim {
	case ClaimNull, ClaimDelegatePrev:
		w.String(a.Name)
	case ClaimPrevious:
		w.Uint32(a.DelegType)
	case ClaimDelegateCur:
		a.DelegState.Encode(w)
		w.String(a.Name)
	case ClaimDelegCurFH:
		a.DelegState.Encode(w)
	}
}

func (a *OpenArgs) Decode(r *sunrpc.Reader) {
	a.Seqid = r.Uint32()
	a.ShareAccess = r.Uint32()
	a.ShareDeny = r.Uint32()
	a.Owner.Decode(r)
	switch r.Uint32() {
	case OpenNoCreate:
	case OpenCreate:
		a.Create = true
		a.CreateMode = r.Uint32()
		switch a.CreateMode {
		case CreateUnchecked, CreateGuarded:
			a.Attrs.Decode(r)
		case CreateExclusive:
			copy(a.Verifier[:], r.FixedOpaque(VerifierSize))
		case CreateExclusive41:
			copy(a.Verifier[:], r.FixedOpaque(VerifierSize))
			a.Attrs.Decode(r)
		default:
			r.Fail("createmode4 %d", a.CreateMode)
		}
	default:
		r.Fail("opentype4")
	}
	a.Claim = r.Uint32()
	switch a.Claim {
	case ClaimNull, ClaimDelegatePrev:
		a.Name = Component(r)
	case ClaimPrevious:
		a.DelegType = r.Uint32()
	case ClaimDelegateCur:
		a.DelegState.Decode(r)
		a.Name = Component(r)
	case ClaimFH, ClaimDelegPrevFH:
	case ClaimDelegCurFH:
		a.DelegState.Decode(r)
	default:
		r.Fail("open_claim_type4 %d", a.Claim)
	}
}

type OpenAttrArgs struct{ CreateDir bool }

func (a OpenAttrArgs) Encode(w *sunrpc.Writer)  { w.Bool(a.CreateDir) }
func (a *OpenAttrArgs) Decode(r *sunrpc.Reader) { a.CreateDir = r.Bool() }

type OpenConfirmArgs struct {
	Stateid Stateid
	Seqid   uint32
}

func (a OpenConfirmArgs) Encode(w *sunrpc.Writer) { a.Stateid.Encode(w); w.Uint32(a.Seqid) }
func (a *OpenConfirmArgs) Decode(r *sunrpc.Reader) {
	a.Stateid.Decode(r)
	a.Seqid = r.Uint32()
}

type OpenDowngradeArgs struct {
	Stateid     Stateid
	Seqid       uint32
	ShareAccess uint32
	ShareDeny   uint32
}

func (a OpenDowngradeArgs) Encode(w *sunrpc.Writer) {
	a.Stateid.Encode(w)
	w.Uint32(a.Seqid)
	w.Uint32(a.ShareAccess)
	w.Uint32(a.ShareDeny)
}

func (a *OpenDowngradeArgs) Decode(r *sunrpc.Reader) {
	a.Stateid.Decode(r)
	a.Seqid = r.Uint32()
	a.ShareAccess = r.Uint32()
	a.ShareDeny = r.Uint32()
}

type PutFHArgs struct{ FH []byte }

func (a PutFHArgs) Encode(w *sunrpc.Writer)  { w.Opaque(a.FH) }
func (a *PutFHArgs) Decode(r *sunrpc.Reader) { a.FH = FH(r) }

type ReadArgs struct {
	Stateid Stateid
	Offset  uint64
	Count   uint32
}

func (a ReadArgs) Encode(w *sunrpc.Writer) {
	a.Stateid.Encode(w)
	w.Uint64(a.Offset)
	w.Uint32(a.Count)
}
func (a *ReadArgs) Decode(r *sunrpc.Reader) {
	a.Stateid.Decode(r)
	a.Offset = r.Uint64()
	a.Count = r.Uint32()
}

type ReaddirArgs struct {
	Cookie     uint64
	CookieVerf [VerifierSize]byte
	DirCount   uint32
	MaxCount   uint32
	Request    Bitmap
}

func (a ReaddirArgs) Encode(w *sunrpc.Writer) {
	w.Uint64(a.Cookie)
	w.FixedOpaque(a.CookieVerf[:])
	w.Uint32(a.DirCount)
	w.Uint32(a.MaxCount)
	a.Request.Encode(w)
}

func (a *ReaddirArgs) Decode(r *sunrpc.Reader) {
	a.Cookie = r.Uint64()
	copy(a.CookieVerf[:], r.FixedOpaque(VerifierSize))
	a.DirCount = r.Uint32()
	a.MaxCount = r.Uint32()
	a.Request.Decode(r)
}

type RenameArgs struct{ From, To string }

func (a RenameArgs) Encode(w *sunrpc.Writer) { w.String(a.From); w.String(a.To) }
func (a *RenameArgs) Decode(r *sunrpc.Reader) {
	a.From = Component(r)
	a.To = Component(r)
}

type SetattrArgs struct {
	Stateid Stateid
	Attrs   RawFattr
}

func (a SetattrArgs) Encode(w *sunrpc.Writer) { a.Stateid.Encode(w); a.Attrs.Encode(w) }
func (a *SetattrArgs) Decode(r *sunrpc.Reader) {
	a.Stateid.Decode(r)
	a.Attrs.Decode(r)
}

type SetClientIDArgs struct {
	Verifier  [VerifierSize]byte
	ID        []byte
	CBProgram uint32
	CBNetID   string
	CBAddr    string
	CBIdent   uint32
}

func (a SetClientIDArgs) Encode(w *sunrpc.Writer) {
	w.FixedOpaque(a.Verifier[:])
	w.Opaque(a.ID)
	w.Uint32(a.CBProgram)
	w.String(a.CBNetID)
	w.String(a.CBAddr)
	w.Uint32(a.CBIdent)
}

func (a *SetClientIDArgs) Decode(r *sunrpc.Reader) {
	copy(a.Verifier[:], r.FixedOpaque(VerifierSize))
	a.ID = r.Opaque(OpaqueLimit)
	a.CBProgram = r.Uint32()
	a.CBNetID = r.String(OpaqueLimit)
	a.CBAddr = r.String(OpaqueLimit)
	a.CBIdent = r.Uint32()
}

type SetClientIDConfirmArgs struct {
	ClientID uint64
	Confirm  [VerifierSize]byte
}

func (a SetClientIDConfirmArgs) Encode(w *sunrpc.Writer) {
	w.Uint64(a.ClientID)
	w.FixedOpaque(a.Confirm[:])
}
func (a *SetClientIDConfirmArgs) Decode(r *sunrpc.Reader) {
	a.ClientID = r.Uint64()
	copy(a.Confirm[:], r.FixedOpaque(VerifierSize))
}

type WriteArgs struct {
	Stateid Stateid
	Offset  uint64
	Stable  uint32
	Data    []byte
}

func (a WriteArgs) Encode(w *sunrpc.Writer) {
	a.Stateid.Encode(w)
	w.Uint64(a.Offset)
	w.Uint32(a.Stable)
	w.Opaque(a.Data)
}

func (a *WriteArgs) Decode(r *sunrpc.Reader) {
	a.Stateid.Decode(r)
	a.Offset = r.Uint64()
	a.Stable = r.Uint32()
	a.Data = r.Opaque(MaxData)
}

// CallbackSec is one callback_sec_parms4 (only the flavor is kept: this
// server makes no callbacks).
func decodeCallbackSecs(r *sunrpc.Reader) []uint32 {
	n := r.Uint32()
	if n > 16 {
		r.Fail("%d callback_sec_parms4", n)
		return nil
	}
	var fl []uint32
	for range n {
		f := r.Uint32()
		switch f {
		case AuthNone:
		case AuthSys:
			r.Uint32()                    // stamp
			r.String(255)                 // machine name
			r.Uint32()                    // uid
			r.Uint32()                    // gid
			if k := r.Uint32(); k <= 16 { // gids
				for range k {
					r.Uint32()
				}
			} else {
				r.Fail("%d gids", k)
			}
		case 6: // RPCSEC_GSS: service, handle from server, handle from client
			r.Uint32()
			r.Opaque(OpaqueLimit)
			r.Opaque(OpaqueLimit)
		default:
			r.Fail("callback flavor %d", f)
		}
		fl = append(fl, f)
	}
	return fl
}

func encodeCallbackSecs(w *sunrpc.Writer, fl []uint32) {
	w.Uint32(uint32(len(fl)))
	for _, f := range fl {
		w.Uint32(f)
		if f == AuthSys {
			w.Uint32(0)
			w.String("")
			w.Uint32(0)
			w.Uint32(0)
			w.Uint32(0)
		}
	}
}

type BackchannelCtlArgs struct {
	CBProgram uint32
	Flavors   []uint32
}

func (a BackchannelCtlArgs) Encode(w *sunrpc.Writer) {
	w.Uint32(a.CBProgram)
	encodeCallbackSecs(w, a.Flavors)
}
func (a *BackchannelCtlArgs) Decode(r *sunrpc.Reader) {
	a.CBProgram = r.Uint32()
	a.Flavors = decodeCallbackSecs(r)
}

type BindConnArgs struct {
	SessionID [SessionIDSize]byte
	Dir       uint32
	RDMA      bool
}

func (a BindConnArgs) Encode(w *sunrpc.Writer) {
	w.FixedOpaque(a.SessionID[:])
	w.Uint32(a.Dir)
	w.Bool(a.RDMA)
}

func (a *BindConnArgs) Decode(r *sunrpc.Reader) {
	copy(a.SessionID[:], r.FixedOpaque(SessionIDSize))
	a.Dir = r.Uint32()
	a.RDMA = r.Bool()
}

// ImplID is nfs_impl_id4.
type ImplID struct {
	Domain, Name string
	Date         Time
}

func decodeImplIDs(r *sunrpc.Reader) []ImplID {
	n := r.Uint32()
	if n > 1 {
		r.Fail("nfs_impl_id4<1> of %d", n)
		return nil
	}
	var ids []ImplID
	for range n {
		var id ImplID
		id.Domain = r.String(OpaqueLimit)
		id.Name = r.String(OpaqueLimit)
		id.Date.Decode(r)
		ids = append(ids, id)
	}
	return ids
}

func encodeImplIDs(w *sunrpc.Writer, ids []ImplID) {
	w.Uint32(uint32(len(ids)))
	for _, id := range ids {
		w.String(id.Domain)
		w.String(id.Name)
		id.Date.Encode(w)
	}
}

// ExchangeIDArgs is EXCHANGE_ID4args. SP4_SSV parameters are decoded and
// dropped (the server refuses SSV).
type ExchangeIDArgs struct {
	Verifier              [VerifierSize]byte
	OwnerID               []byte
	Flags                 uint32
	Protect               uint32 // SP4_*
	MustEnforce, MayAllow Bitmap // SP4_MACH_CRED
	Impl                  []ImplID
}

func (a ExchangeIDArgs) Encode(w *sunrpc.Writer) {
	w.FixedOpaque(a.Verifier[:])
	w.Opaque(a.OwnerID)
	w.Uint32(a.Flags)
	w.Uint32(a.Protect)
	if a.Protect == SP4MachCred {
		a.MustEnforce.Encode(w)
		a.MayAllow.Encode(w)
	}
	encodeImplIDs(w, a.Impl)
}

func (a *ExchangeIDArgs) Decode(r *sunrpc.Reader) {
	copy(a.Verifier[:], r.FixedOpaque(VerifierSize))
	a.OwnerID = r.Opaque(OpaqueLimit)
	a.Flags = r.Uint32()
	a.Protect = r.Uint32()
	switch a.Protect {
	case SP4None:
	case SP4MachCred:
		a.MustEnforce.Decode(r)
		a.MayAllow.Decode(r)
	case SP4SSV:
		a.MustEnforce.Decode(r)
		a.MayAllow.Decode(r)
		for range 2 { // hash and encryption algorithm OIDs
			n := r.Uint32()
			if n > 16 {
				r.Fail("%d sec_oid4", n)
				return
			}
			for range n {
				r.Opaque(OpaqueLimit)
			}
		}
		r.Uint32() // window
		r.Uint32() // number of GSS handles
	default:
		r.Fail("state_protect_how4 %d", a.Protect)
	}
	a.Impl = decodeImplIDs(r)
}

// ChannelAttrs is channel_attrs4.
type ChannelAttrs struct {
	HeaderPadSize, MaxRequestSize, MaxResponseSize, MaxResponseSizeCached uint32
	MaxOperations, MaxRequests                                            uint32
	RDMAIrd                                                               []uint32
}

func (c ChannelAttrs) Encode(w *sunrpc.Writer) {
	w.Uint32(c.HeaderPadSize)
	w.Uint32(c.MaxRequestSize)
	w.Uint32(c.MaxResponseSize)
	w.Uint32(c.MaxResponseSizeCached)
	w.Uint32(c.MaxOperations)
	w.Uint32(c.MaxRequests)
	w.Uint32(uint32(len(c.RDMAIrd)))
	for _, v := range c.RDMAIrd {
		w.Uint32(v)
	}
}

func (c *ChannelAttrs) Decode(r *sunrpc.Reader) {
	c.HeaderPadSize = r.Uint32()
	c.MaxRequestSize = r.Uint32()
	c.MaxResponseSize = r.Uint32()
	c.MaxResponseSizeCached = r.Uint32()
	c.MaxOperations = r.Uint32()
	c.MaxRequests = r.Uint32()
	n := r.Uint32()
	if n > 1 {
		r.Fail("ca_rdma_ird<1> of %d", n)
		return
	}
	c.RDMAIrd = nil
	for range n {
		c.RDMAIrd = append(c.RDMAIrd, r.Uint32())
	}
}

type CreateSessionArgs struct {
	ClientID  uint64
	Sequence  uint32
	Flags     uint32
	Fore      ChannelAttrs
	Back      ChannelAttrs
	CBProgram uint32
	Flavors   []uint32
}

func (a CreateSessionArgs) Encode(w *sunrpc.Writer) {
	w.Uint64(a.ClientID)
	w.Uint32(a.Sequence)
	w.Uint32(a.Flags)
	a.Fore.Encode(w)
	a.Back.Encode(w)
	w.Uint32(a.CBProgram)
	encodeCallbackSecs(w, a.Flavors)
}

func (a *CreateSessionArgs) Decode(r *sunrpc.Reader) {
	a.ClientID = r.Uint64()
	a.Sequence = r.Uint32()
	a.Flags = r.Uint32()
	a.Fore.Decode(r)
	a.Back.Decode(r)
	a.CBProgram = r.Uint32()
	a.Flavors = decodeCallbackSecs(r)
}

type SecinfoNoNameArgs struct{ Style uint32 }

func (a SecinfoNoNameArgs) Encode(w *sunrpc.Writer)  { w.Uint32(a.Style) }
func (a *SecinfoNoNameArgs) Decode(r *sunrpc.Reader) { a.Style = r.Uint32() }

type SequenceArgs struct {
	SessionID   [SessionIDSize]byte
	Sequence    uint32
	Slot        uint32
	HighestSlot uint32
	CacheThis   bool
}

func (a SequenceArgs) Encode(w *sunrpc.Writer) {
	w.FixedOpaque(a.SessionID[:])
	w.Uint32(a.Sequence)
	w.Uint32(a.Slot)
	w.Uint32(a.HighestSlot)
	w.Bool(a.CacheThis)
}

func (a *SequenceArgs) Decode(r *sunrpc.Reader) {
	copy(a.SessionID[:], r.FixedOpaque(SessionIDSize))
	a.Sequence = r.Uint32()
	a.Slot = r.Uint32()
	a.HighestSlot = r.Uint32()
	a.CacheThis = r.Bool()
}

type TestStateIDArgs struct{ Stateids []Stateid }

func (a TestStateIDArgs) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(len(a.Stateids)))
	for _, s := range a.Stateids {
		s.Encode(w)
	}
}

func (a *TestStateIDArgs) Decode(r *sunrpc.Reader) {
	n := r.Uint32()
	if n > 1024 {
		r.Fail("%d stateids", n)
		return
	}
	a.Stateids = make([]Stateid, n)
	for i := range a.Stateids {
		a.Stateids[i].Decode(r)
	}
}

type ReclaimCompleteArgs struct{ OneFS bool }

func (a ReclaimCompleteArgs) Encode(w *sunrpc.Writer)  { w.Bool(a.OneFS) }
func (a *ReclaimCompleteArgs) Decode(r *sunrpc.Reader) { a.OneFS = r.Bool() }

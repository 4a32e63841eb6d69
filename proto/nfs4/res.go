package nfs4

import "github.com/tristore/tristore/proto/sunrpc"

// Res is an operation's result. Every result starts with its status; the
// rest is present only as each operation's union says.
type Res interface {
	Encode(w *sunrpc.Writer)
	Decode(r *sunrpc.Reader)
	Stat() Status
}

// StatusRes is a result that is only a status (LOOKUP, PUTFH, SAVEFH,
// RENEW, VERIFY, DESTROY_SESSION, RECLAIM_COMPLETE, ...).
type StatusRes struct{ Status Status }

func (s StatusRes) Encode(w *sunrpc.Writer)  { w.Uint32(uint32(s.Status)) }
func (s *StatusRes) Decode(r *sunrpc.Reader) { s.Status = Status(r.Uint32()) }
func (s StatusRes) Stat() Status             { return s.Status }

type AccessRes struct {
	Status            Status
	Supported, Access uint32
}

func (s AccessRes) Stat() Status { return s.Status }
func (s AccessRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.Uint32(s.Supported)
		w.Uint32(s.Access)
	}
}
func (s *AccessRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		s.Supported = r.Uint32()
		s.Access = r.Uint32()
	}
}

// StateidRes: CLOSE, OPEN_CONFIRM, OPEN_DOWNGRADE, LOCKU.
type StateidRes struct {
	Status  Status
	Stateid Stateid
}

func (s StateidRes) Stat() Status { return s.Status }
func (s StateidRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		s.Stateid.Encode(w)
	}
}
func (s *StateidRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		s.Stateid.Decode(r)
	}
}

// VerfRes: COMMIT.
type VerfRes struct {
	Status Status
	Verf   [VerifierSize]byte
}

func (s VerfRes) Stat() Status { return s.Status }
func (s VerfRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.FixedOpaque(s.Verf[:])
	}
}
func (s *VerfRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		copy(s.Verf[:], r.FixedOpaque(VerifierSize))
	}
}

// CinfoRes: LINK, REMOVE.
type CinfoRes struct {
	Status Status
	Cinfo  ChangeInfo
}

func (s CinfoRes) Stat() Status { return s.Status }
func (s CinfoRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		s.Cinfo.Encode(w)
	}
}
func (s *CinfoRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		s.Cinfo.Decode(r)
	}
}

type CreateRes struct {
	Status  Status
	Cinfo   ChangeInfo
	AttrSet Bitmap
}

func (s CreateRes) Stat() Status { return s.Status }
func (s CreateRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		s.Cinfo.Encode(w)
		s.AttrSet.Encode(w)
	}
}
func (s *CreateRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		s.Cinfo.Decode(r)
		s.AttrSet.Decode(r)
	}
}

type GetattrRes struct {
	Status Status
	Attrs  RawFattr
}

func (s GetattrRes) Stat() Status { return s.Status }
func (s GetattrRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		s.Attrs.Encode(w)
	}
}
func (s *GetattrRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		s.Attrs.Decode(r)
	}
}

type GetFHRes struct {
	Status Status
	FH     []byte
}

func (s GetFHRes) Stat() Status { return s.Status }
func (s GetFHRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.Opaque(s.FH)
	}
}
func (s *GetFHRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		s.FH = FH(r)
	}
}

// LockDenied is LOCK4denied.
type LockDenied struct {
	Offset, Length uint64
	Type           uint32
	Owner          Owner
}

func (d LockDenied) Encode(w *sunrpc.Writer) {
	w.Uint64(d.Offset)
	w.Uint64(d.Length)
	w.Uint32(d.Type)
	d.Owner.Encode(w)
}
func (d *LockDenied) Decode(r *sunrpc.Reader) {
	d.Offset = r.Uint64()
	d.Length = r.Uint64()
	d.Type = r.Uint32()
	d.Owner.Decode(r)
}

// LockRes: LOCK (stateid when OK) and LOCKT (nothing when OK); both carry
// the conflicting lock when DENIED.
type LockRes struct {
	Status  Status
	Test    bool // LOCKT: no stateid
	Stateid Stateid
	Denied  LockDenied
}

func (s LockRes) Stat() Status { return s.Status }
func (s LockRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	switch {
	case s.Status == OK && !s.Test:
		s.Stateid.Encode(w)
	case s.Status == ErrDenied:
		s.Denied.Encode(w)
	}
}
func (s *LockRes) Decode(r *sunrpc.Reader) {
	s.Status = Status(r.Uint32())
	switch {
	case s.Status == OK && !s.Test:
		s.Stateid.Decode(r)
	case s.Status == ErrDenied:
		s.Denied.Decode(r)
	}
}

type OpenRes struct {
	Status  Status
	Stateid Stateid
	Cinfo   ChangeInfo
	Flags   uint32
	AttrSet Bitmap
	// Delegation is always none: DelegNone (4.0) or DelegNoneExt with Why (4.1).
	Deleg uint32
	Why   uint32
}

func (s OpenRes) Stat() Status { return s.Status }
func (s OpenRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status != OK {
		return
	}
	s.Stateid.Encode(w)
	s.Cinfo.Encode(w)
	w.Uint32(s.Flags)
	s.AttrSet.Encode(w)
	w.Uint32(s.Deleg)
	if s.Deleg == DelegNoneExt {
		w.Uint32(s.Why)
		if s.Why == 1 || s.Why == WNDResource { // WND4_CONTENTION, WND4_RESOURCE carry a bool
			w.Bool(false)
		}
	}
}
func (s *OpenRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status != OK {
		return
	}
	s.Stateid.Decode(r)
	s.Cinfo.Decode(r)
	s.Flags = r.Uint32()
	s.AttrSet.Decode(r)
	s.Deleg = r.Uint32()
	switch s.Deleg {
	case DelegNone:
	case DelegNoneExt:
		s.Why = r.Uint32()
		if s.Why == 1 || s.Why == WNDResource {
			r.Bool()
		}
	default:
		r.Fail("delegations are not decoded")
	}
}

type ReadRes struct {
	Status Status
	EOF    bool
	Data   []byte
}

func (s ReadRes) Stat() Status { return s.Status }
func (s ReadRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.Bool(s.EOF)
		w.Opaque(s.Data)
	}
}
func (s *ReadRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		s.EOF = r.Bool()
		s.Data = r.Opaque(MaxData)
	}
}

// DirEntry is entry4.
type DirEntry struct {
	Cookie uint64
	Name   string
	Attrs  RawFattr
}

type ReaddirRes struct {
	Status     Status
	CookieVerf [VerifierSize]byte
	Entries    []DirEntry
	EOF        bool
}

func (s ReaddirRes) Stat() Status { return s.Status }
func (s ReaddirRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status != OK {
		return
	}
	w.FixedOpaque(s.CookieVerf[:])
	for _, e := range s.Entries {
		w.Bool(true)
		w.Uint64(e.Cookie)
		w.String(e.Name)
		e.Attrs.Encode(w)
	}
	w.Bool(false)
	w.Bool(s.EOF)
}
func (s *ReaddirRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status != OK {
		return
	}
	copy(s.CookieVerf[:], r.FixedOpaque(VerifierSize))
	for r.Err() == nil && r.Bool() {
		var e DirEntry
		e.Cookie = r.Uint64()
		e.Name = Component(r)
		e.Attrs.Decode(r)
		s.Entries = append(s.Entries, e)
	}
	s.EOF = r.Bool()
}

type ReadlinkRes struct {
	Status Status
	Link   string
}

func (s ReadlinkRes) Stat() Status { return s.Status }
func (s ReadlinkRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.String(s.Link)
	}
}
func (s *ReadlinkRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		s.Link = r.String(MaxPath)
	}
}

type RenameRes struct {
	Status   Status
	From, To ChangeInfo
}

func (s RenameRes) Stat() Status { return s.Status }
func (s RenameRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		s.From.Encode(w)
		s.To.Encode(w)
	}
}
func (s *RenameRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		s.From.Decode(r)
		s.To.Decode(r)
	}
}

// SecinfoRes: SECINFO and SECINFO_NO_NAME (flavors without GSS details:
// this server offers AUTH_SYS and AUTH_NONE).
type SecinfoRes struct {
	Status  Status
	Flavors []uint32
}

func (s SecinfoRes) Stat() Status { return s.Status }
func (s SecinfoRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.Uint32(uint32(len(s.Flavors)))
		for _, f := range s.Flavors {
			w.Uint32(f)
		}
	}
}
func (s *SecinfoRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status != OK {
		return
	}
	n := r.Uint32()
	if n > 16 {
		r.Fail("%d flavors", n)
		return
	}
	for range n {
		f := r.Uint32()
		if f == 6 { // RPCSEC_GSS: oid, qop, service
			r.Opaque(OpaqueLimit)
			r.Uint32()
			r.Uint32()
		}
		s.Flavors = append(s.Flavors, f)
	}
}

// SetattrRes carries the attributes set whatever the status.
type SetattrRes struct {
	Status  Status
	AttrSet Bitmap
}

func (s SetattrRes) Stat() Status { return s.Status }
func (s SetattrRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	s.AttrSet.Encode(w)
}
func (s *SetattrRes) Decode(r *sunrpc.Reader) {
	s.Status = Status(r.Uint32())
	s.AttrSet.Decode(r)
}

type SetClientIDRes struct {
	Status   Status
	ClientID uint64
	Confirm  [VerifierSize]byte
	// CLID_INUSE: where the other client is.
	NetID, Addr string
}

func (s SetClientIDRes) Stat() Status { return s.Status }
func (s SetClientIDRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	switch s.Status {
	case OK:
		w.Uint64(s.ClientID)
		w.FixedOpaque(s.Confirm[:])
	case ErrClidInUse:
		w.String(s.NetID)
		w.String(s.Addr)
	}
}
func (s *SetClientIDRes) Decode(r *sunrpc.Reader) {
	switch s.Status = Status(r.Uint32()); s.Status {
	case OK:
		s.ClientID = r.Uint64()
		copy(s.Confirm[:], r.FixedOpaque(VerifierSize))
	case ErrClidInUse:
		s.NetID = r.String(OpaqueLimit)
		s.Addr = r.String(OpaqueLimit)
	}
}

type WriteRes struct {
	Status    Status
	Count     uint32
	Committed uint32
	Verf      [VerifierSize]byte
}

func (s WriteRes) Stat() Status { return s.Status }
func (s WriteRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.Uint32(s.Count)
		w.Uint32(s.Committed)
		w.FixedOpaque(s.Verf[:])
	}
}
func (s *WriteRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		s.Count = r.Uint32()
		s.Committed = r.Uint32()
		copy(s.Verf[:], r.FixedOpaque(VerifierSize))
	}
}

type ExchangeIDRes struct {
	Status                Status
	ClientID              uint64
	Sequence              uint32
	Flags                 uint32
	Protect               uint32
	MustEnforce, MayAllow Bitmap
	MinorID               uint64
	MajorID               []byte
	Scope                 []byte
	Impl                  []ImplID
}

func (s ExchangeIDRes) Stat() Status { return s.Status }
func (s ExchangeIDRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status != OK {
		return
	}
	w.Uint64(s.ClientID)
	w.Uint32(s.Sequence)
	w.Uint32(s.Flags)
	w.Uint32(s.Protect)
	if s.Protect == SP4MachCred {
		s.MustEnforce.Encode(w)
		s.MayAllow.Encode(w)
	}
	w.Uint64(s.MinorID)
	w.Opaque(s.MajorID)
	w.Opaque(s.Scope)
	encodeImplIDs(w, s.Impl)
}
func (s *ExchangeIDRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status != OK {
		return
	}
	s.ClientID = r.Uint64()
	s.Sequence = r.Uint32()
	s.Flags = r.Uint32()
	s.Protect = r.Uint32()
	switch s.Protect {
	case SP4None:
	case SP4MachCred:
		s.MustEnforce.Decode(r)
		s.MayAllow.Decode(r)
	default:
		r.Fail("state_protect4_r %d not decoded", s.Protect)
	}
	s.MinorID = r.Uint64()
	s.MajorID = r.Opaque(OpaqueLimit)
	s.Scope = r.Opaque(OpaqueLimit)
	s.Impl = decodeImplIDs(r)
}

type CreateSessionRes struct {
	Status     Status
	SessionID  [SessionIDSize]byte
	Sequence   uint32
	Flags      uint32
	Fore, Back ChannelAttrs
}

func (s CreateSessionRes) Stat() Status { return s.Status }
func (s CreateSessionRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.FixedOpaque(s.SessionID[:])
		w.Uint32(s.Sequence)
		w.Uint32(s.Flags)
		s.Fore.Encode(w)
		s.Back.Encode(w)
	}
}
func (s *CreateSessionRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		copy(s.SessionID[:], r.FixedOpaque(SessionIDSize))
		s.Sequence = r.Uint32()
		s.Flags = r.Uint32()
		s.Fore.Decode(r)
		s.Back.Decode(r)
	}
}

type SequenceRes struct {
	Status            Status
	SessionID         [SessionIDSize]byte
	Sequence          uint32
	Slot              uint32
	HighestSlot       uint32
	TargetHighestSlot uint32
	StatusFlags       uint32
}

func (s SequenceRes) Stat() Status { return s.Status }
func (s SequenceRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.FixedOpaque(s.SessionID[:])
		w.Uint32(s.Sequence)
		w.Uint32(s.Slot)
		w.Uint32(s.HighestSlot)
		w.Uint32(s.TargetHighestSlot)
		w.Uint32(s.StatusFlags)
	}
}
func (s *SequenceRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		copy(s.SessionID[:], r.FixedOpaque(SessionIDSize))
		s.Sequence = r.Uint32()
		s.Slot = r.Uint32()
		s.HighestSlot = r.Uint32()
		s.TargetHighestSlot = r.Uint32()
		s.StatusFlags = r.Uint32()
	}
}

type TestStateIDRes struct {
	Status Status
	Codes  []Status
}

func (s TestStateIDRes) Stat() Status { return s.Status }
func (s TestStateIDRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.Uint32(uint32(len(s.Codes)))
		for _, c := range s.Codes {
			w.Uint32(uint32(c))
		}
	}
}
func (s *TestStateIDRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status != OK {
		return
	}
	n := r.Uint32()
	if n > 1024 {
		r.Fail("%d codes", n)
		return
	}
	for range n {
		s.Codes = append(s.Codes, Status(r.Uint32()))
	}
}

type BindConnRes struct {
	Status    Status
	SessionID [SessionIDSize]byte
	Dir       uint32
	RDMA      bool
}

func (s BindConnRes) Stat() Status { return s.Status }
func (s BindConnRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.Status))
	if s.Status == OK {
		w.FixedOpaque(s.SessionID[:])
		w.Uint32(s.Dir)
		w.Bool(s.RDMA)
	}
}
func (s *BindConnRes) Decode(r *sunrpc.Reader) {
	if s.Status = Status(r.Uint32()); s.Status == OK {
		copy(s.SessionID[:], r.FixedOpaque(SessionIDSize))
		s.Dir = r.Uint32()
		s.RDMA = r.Bool()
	}
}

// CompoundArgs is the COMPOUND4args header; the operations follow it.
type CompoundArgs struct {
	Tag   []byte
	Minor uint32
	NOps  uint32
}

func (c CompoundArgs) Encode(w *sunrpc.Writer) { w.Opaque(c.Tag); w.Uint32(c.Minor); w.Uint32(c.NOps) }
func (c *CompoundArgs) Decode(r *sunrpc.Reader) {
	c.Tag = r.Opaque(MaxTag)
	c.Minor = r.Uint32()
	c.NOps = r.Uint32()
}

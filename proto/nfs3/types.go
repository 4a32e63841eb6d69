// Package nfs3 holds the MOUNT v3 and NFS v3 (RFC 1813) protocol types with
// their XDR encoders and decoders, for both tristore's server (frontend/nfs)
// and client (client/nfs). Every argument and result type has
//
//	Encode(w *sunrpc.Writer)
//	Decode(r *sunrpc.Reader) error   // wraps sunrpc.ErrGarbage on bad input
//
// Decoded byte slices (file handles, names, data) alias the record buffer;
// copy them to keep them after the record is reused.
//
// Why hand-written (no library): see package sunrpc. The types are plain
// structs with no behaviour so the vfs layer stays free of NFS v3 types and
// can serve NFSv4 later.
package nfs3

import (
	"fmt"

	"github.com/tristore/tristore/proto/sunrpc"
)

// Program numbers and versions.
const (
	ProgNFS      = 100003
	ProgMount    = 100005
	ProgPortmap  = 100000
	VersNFS      = 3
	VersMount    = 3
	VersPortmap  = 2
	PortmapProto = 6 // IPPROTO_TCP
)

// NFS v3 procedure numbers.
const (
	ProcNull        = 0
	ProcGetattr     = 1
	ProcSetattr     = 2
	ProcLookup      = 3
	ProcAccess      = 4
	ProcReadlink    = 5
	ProcRead        = 6
	ProcWrite       = 7
	ProcCreate      = 8
	ProcMkdir       = 9
	ProcSymlink     = 10
	ProcMknod       = 11
	ProcRemove      = 12
	ProcRmdir       = 13
	ProcRename      = 14
	ProcLink        = 15
	ProcReaddir     = 16
	ProcReaddirplus = 17
	ProcFsstat      = 18
	ProcFsinfo      = 19
	ProcPathconf    = 20
	ProcCommit      = 21
)

// Limits used by the decoders. Names and paths are decoded up to these
// generous limits; a server then applies its own (e.g. NAME_MAX 255 ->
// NFS3ERR_NAMETOOLONG) so a long name gets a protocol error, not GARBAGE_ARGS.
const (
	FHSize         = 64      // NFS3_FHSIZE
	MaxName        = 4096    // filename3 accepted by the decoder
	MaxPath        = 4096    // nfspath3
	MaxDirPath     = 1024    // MNTPATHLEN
	MaxData        = 4 << 20 // READ/WRITE payload accepted by the decoder
	CookieVerfSize = 8
	CreateVerfSize = 8
	WriteVerfSize  = 8
	maxListItems   = 1 << 20 // bound on XDR linked lists (entries, exports)
)

// Status is nfsstat3.
type Status uint32

const (
	OK             Status = 0
	ErrPerm        Status = 1
	ErrNoEnt       Status = 2
	ErrIO          Status = 5
	ErrNXIO        Status = 6
	ErrAcces       Status = 13
	ErrExist       Status = 17
	ErrXDev        Status = 18
	ErrNoDev       Status = 19
	ErrNotDir      Status = 20
	ErrIsDir       Status = 21
	ErrInval       Status = 22
	ErrFBig        Status = 27
	ErrNoSpc       Status = 28
	ErrROFS        Status = 30
	ErrMLink       Status = 31
	ErrNameTooLong Status = 63
	ErrNotEmpty    Status = 66
	ErrDQuot       Status = 69
	ErrStale       Status = 70
	ErrRemote      Status = 71
	ErrBadHandle   Status = 10001
	ErrNotSync     Status = 10002
	ErrBadCookie   Status = 10003
	ErrNotSupp     Status = 10004
	ErrTooSmall    Status = 10005
	ErrServerFault Status = 10006
	ErrBadType     Status = 10007
	ErrJukebox     Status = 10008
)

var statusNames = map[Status]string{
	OK: "NFS3_OK", ErrPerm: "NFS3ERR_PERM", ErrNoEnt: "NFS3ERR_NOENT", ErrIO: "NFS3ERR_IO",
	ErrNXIO: "NFS3ERR_NXIO", ErrAcces: "NFS3ERR_ACCES", ErrExist: "NFS3ERR_EXIST", ErrXDev: "NFS3ERR_XDEV",
	ErrNoDev: "NFS3ERR_NODEV", ErrNotDir: "NFS3ERR_NOTDIR", ErrIsDir: "NFS3ERR_ISDIR", ErrInval: "NFS3ERR_INVAL",
	ErrFBig: "NFS3ERR_FBIG", ErrNoSpc: "NFS3ERR_NOSPC", ErrROFS: "NFS3ERR_ROFS", ErrMLink: "NFS3ERR_MLINK",
	ErrNameTooLong: "NFS3ERR_NAMETOOLONG", ErrNotEmpty: "NFS3ERR_NOTEMPTY", ErrDQuot: "NFS3ERR_DQUOT",
	ErrStale: "NFS3ERR_STALE", ErrRemote: "NFS3ERR_REMOTE", ErrBadHandle: "NFS3ERR_BADHANDLE",
	ErrNotSync: "NFS3ERR_NOT_SYNC", ErrBadCookie: "NFS3ERR_BAD_COOKIE", ErrNotSupp: "NFS3ERR_NOTSUPP",
	ErrTooSmall: "NFS3ERR_TOOSMALL", ErrServerFault: "NFS3ERR_SERVERFAULT", ErrBadType: "NFS3ERR_BADTYPE",
	ErrJukebox: "NFS3ERR_JUKEBOX",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("nfsstat3(%d)", uint32(s))
}

// Error makes a non-OK Status usable as a Go error (clients return it).
func (s Status) Error() string { return s.String() }

// FileType is ftype3.
type FileType uint32

const (
	TypeReg  FileType = 1
	TypeDir  FileType = 2
	TypeBlk  FileType = 3
	TypeChr  FileType = 4
	TypeLnk  FileType = 5
	TypeSock FileType = 6
	TypeFifo FileType = 7
)

// ACCESS bits (access3).
const (
	AccessRead    = 0x0001
	AccessLookup  = 0x0002
	AccessModify  = 0x0004
	AccessExtend  = 0x0008
	AccessDelete  = 0x0010
	AccessExecute = 0x0020
)

// StableHow is stable_how for WRITE.
type StableHow uint32

const (
	Unstable StableHow = 0
	DataSync StableHow = 1
	FileSync StableHow = 2
)

// CreateMode is createmode3.
type CreateMode uint32

const (
	Unchecked CreateMode = 0
	Guarded   CreateMode = 1
	Exclusive CreateMode = 2
)

// FSINFO properties bits.
const (
	FSFLink        = 0x0001
	FSFSymlink     = 0x0002
	FSFHomogeneous = 0x0008
	FSFCanSetTime  = 0x0010
)

// Time is nfstime3.
type Time struct {
	Sec  uint32
	Nsec uint32
}

func (t Time) Encode(w *sunrpc.Writer) { w.Uint32(t.Sec); w.Uint32(t.Nsec) }
func (t *Time) Decode(r *sunrpc.Reader) error {
	t.Sec = r.Uint32()
	t.Nsec = r.Uint32()
	return r.Err()
}

// SpecData is specdata3 (device numbers).
type SpecData struct{ Major, Minor uint32 }

func (s SpecData) Encode(w *sunrpc.Writer) { w.Uint32(s.Major); w.Uint32(s.Minor) }
func (s *SpecData) Decode(r *sunrpc.Reader) error {
	s.Major = r.Uint32()
	s.Minor = r.Uint32()
	return r.Err()
}

// FH is nfs_fh3: an opaque handle of at most 64 bytes.
type FH []byte

func (f FH) Encode(w *sunrpc.Writer) { w.Opaque(f) }
func (f *FH) Decode(r *sunrpc.Reader) error {
	*f = r.Opaque(FHSize)
	return r.Err()
}

// Fattr is fattr3.
type Fattr struct {
	Type   FileType
	Mode   uint32
	Nlink  uint32
	UID    uint32
	GID    uint32
	Size   uint64
	Used   uint64
	Rdev   SpecData
	FSID   uint64
	FileID uint64
	Atime  Time
	Mtime  Time
	Ctime  Time
}

func (a *Fattr) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(a.Type))
	w.Uint32(a.Mode)
	w.Uint32(a.Nlink)
	w.Uint32(a.UID)
	w.Uint32(a.GID)
	w.Uint64(a.Size)
	w.Uint64(a.Used)
	a.Rdev.Encode(w)
	w.Uint64(a.FSID)
	w.Uint64(a.FileID)
	a.Atime.Encode(w)
	a.Mtime.Encode(w)
	a.Ctime.Encode(w)
}

func (a *Fattr) Decode(r *sunrpc.Reader) error {
	a.Type = FileType(r.Uint32())
	a.Mode = r.Uint32()
	a.Nlink = r.Uint32()
	a.UID = r.Uint32()
	a.GID = r.Uint32()
	a.Size = r.Uint64()
	a.Used = r.Uint64()
	a.Rdev.Decode(r)
	a.FSID = r.Uint64()
	a.FileID = r.Uint64()
	a.Atime.Decode(r)
	a.Mtime.Decode(r)
	a.Ctime.Decode(r)
	return r.Err()
}

// PostOpAttr is post_op_attr: Attr is nil when absent.
type PostOpAttr struct{ Attr *Fattr }

func (p PostOpAttr) Encode(w *sunrpc.Writer) {
	w.Bool(p.Attr != nil)
	if p.Attr != nil {
		p.Attr.Encode(w)
	}
}

func (p *PostOpAttr) Decode(r *sunrpc.Reader) error {
	p.Attr = nil
	if r.Bool() {
		p.Attr = new(Fattr)
		p.Attr.Decode(r)
	}
	return r.Err()
}

// WccAttr is wcc_attr: the attributes a client needs to validate its cache.
type WccAttr struct {
	Size  uint64
	Mtime Time
	Ctime Time
}

// PreOpAttr is pre_op_attr: Attr is nil when absent.
type PreOpAttr struct{ Attr *WccAttr }

func (p PreOpAttr) Encode(w *sunrpc.Writer) {
	w.Bool(p.Attr != nil)
	if p.Attr != nil {
		w.Uint64(p.Attr.Size)
		p.Attr.Mtime.Encode(w)
		p.Attr.Ctime.Encode(w)
	}
}

func (p *PreOpAttr) Decode(r *sunrpc.Reader) error {
	p.Attr = nil
	if r.Bool() {
		p.Attr = new(WccAttr)
		p.Attr.Size = r.Uint64()
		p.Attr.Mtime.Decode(r)
		p.Attr.Ctime.Decode(r)
	}
	return r.Err()
}

// WccData is wcc_data: attributes before and after a modifying operation.
type WccData struct {
	Before PreOpAttr
	After  PostOpAttr
}

func (d WccData) Encode(w *sunrpc.Writer) { d.Before.Encode(w); d.After.Encode(w) }
func (d *WccData) Decode(r *sunrpc.Reader) error {
	d.Before.Decode(r)
	return d.After.Decode(r)
}

// PostOpFH is post_op_fh3: FH is nil when absent.
type PostOpFH struct{ FH FH }

func (p PostOpFH) Encode(w *sunrpc.Writer) {
	w.Bool(p.FH != nil)
	if p.FH != nil {
		p.FH.Encode(w)
	}
}

func (p *PostOpFH) Decode(r *sunrpc.Reader) error {
	p.FH = nil
	if r.Bool() {
		p.FH.Decode(r)
		if p.FH == nil && r.Err() == nil {
			p.FH = FH{}
		}
	}
	return r.Err()
}

// TimeHow is time_how for sattr3 times.
type TimeHow uint32

const (
	DontChange      TimeHow = 0
	SetToServerTime TimeHow = 1
	SetToClientTime TimeHow = 2
)

// SetTime is set_atime / set_mtime.
type SetTime struct {
	How  TimeHow
	Time Time // when How == SetToClientTime
}

func (s SetTime) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(s.How))
	if s.How == SetToClientTime {
		s.Time.Encode(w)
	}
}

func (s *SetTime) Decode(r *sunrpc.Reader) error {
	s.How = TimeHow(r.Uint32())
	switch s.How {
	case DontChange, SetToServerTime:
	case SetToClientTime:
		s.Time.Decode(r)
	default:
		r.Fail("time_how %d", s.How)
	}
	return r.Err()
}

// Sattr is sattr3; nil pointers mean "don't set".
type Sattr struct {
	Mode  *uint32
	UID   *uint32
	GID   *uint32
	Size  *uint64
	Atime SetTime
	Mtime SetTime
}

func encOpt32(w *sunrpc.Writer, v *uint32) {
	w.Bool(v != nil)
	if v != nil {
		w.Uint32(*v)
	}
}

func decOpt32(r *sunrpc.Reader) *uint32 {
	if r.Bool() {
		v := r.Uint32()
		return &v
	}
	return nil
}

func (s *Sattr) Encode(w *sunrpc.Writer) {
	encOpt32(w, s.Mode)
	encOpt32(w, s.UID)
	encOpt32(w, s.GID)
	w.Bool(s.Size != nil)
	if s.Size != nil {
		w.Uint64(*s.Size)
	}
	s.Atime.Encode(w)
	s.Mtime.Encode(w)
}

func (s *Sattr) Decode(r *sunrpc.Reader) error {
	s.Mode = decOpt32(r)
	s.UID = decOpt32(r)
	s.GID = decOpt32(r)
	s.Size = nil
	if r.Bool() {
		v := r.Uint64()
		s.Size = &v
	}
	s.Atime.Decode(r)
	return s.Mtime.Decode(r)
}

// DirOpArgs is diropargs3: a directory handle and a name in it.
type DirOpArgs struct {
	Dir  FH
	Name string
}

func (d *DirOpArgs) Encode(w *sunrpc.Writer) { d.Dir.Encode(w); w.String(d.Name) }
func (d *DirOpArgs) Decode(r *sunrpc.Reader) error {
	d.Dir.Decode(r)
	d.Name = r.String(MaxName)
	return r.Err()
}

// Uint32Ptr and Uint64Ptr help build Sattr values.
func Uint32Ptr(v uint32) *uint32 { return &v }
func Uint64Ptr(v uint64) *uint64 { return &v }

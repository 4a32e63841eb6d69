package nfs4

import (
	"github.com/tristore/tristore/proto/sunrpc"
)

// Attribute numbers (FATTR4_*) that this package encodes.
const (
	AttrSupportedAttrs    = 0
	AttrType              = 1
	AttrFHExpireType      = 2
	AttrChange            = 3
	AttrSize              = 4
	AttrLinkSupport       = 5
	AttrSymlinkSupport    = 6
	AttrNamedAttr         = 7
	AttrFSID              = 8
	AttrUniqueHandles     = 9
	AttrLeaseTime         = 10
	AttrRdattrError       = 11
	AttrACL               = 12
	AttrACLSupport        = 13
	AttrArchive           = 14
	AttrCanSetTime        = 15
	AttrCaseInsensitive   = 16
	AttrCasePreserving    = 17
	AttrChownRestricted   = 18
	AttrFileHandle        = 19
	AttrFileID            = 20
	AttrFilesAvail        = 21
	AttrFilesFree         = 22
	AttrFilesTotal        = 23
	AttrFSLocations       = 24
	AttrHidden            = 25
	AttrHomogeneous       = 26
	AttrMaxFileSize       = 27
	AttrMaxLink           = 28
	AttrMaxName           = 29
	AttrMaxRead           = 30
	AttrMaxWrite          = 31
	AttrMimeType          = 32
	AttrMode              = 33
	AttrNoTrunc           = 34
	AttrNumLinks          = 35
	AttrOwner             = 36
	AttrOwnerGroup        = 37
	AttrQuotaAvailHard    = 38
	AttrQuotaAvailSoft    = 39
	AttrQuotaUsed         = 40
	AttrRawDev            = 41
	AttrSpaceAvail        = 42
	AttrSpaceFree         = 43
	AttrSpaceTotal        = 44
	AttrSpaceUsed         = 45
	AttrSystem            = 46
	AttrTimeAccess        = 47
	AttrTimeAccessSet     = 48
	AttrTimeBackup        = 49
	AttrTimeCreate        = 50
	AttrTimeDelta         = 51
	AttrTimeMetadata      = 52
	AttrTimeModify        = 53
	AttrTimeModifySet     = 54
	AttrMountedOnFileID   = 55
	AttrSuppattrExclcreat = 75
)

// SetTime is settime4.
type SetTime struct {
	Set    bool // the attribute was given
	Server bool // SET_TO_SERVER_TIME4
	T      Time // SET_TO_CLIENT_TIME4
}

// FSID is fsid4.
type FSID struct{ Major, Minor uint64 }

// Fattr holds the values of the attributes this package knows. Which ones
// are meaningful is said by the bitmap given to Encode or returned by
// DecodeFattr.
type Fattr struct {
	SupportedAttrs    Bitmap
	Type              FileType
	FHExpireType      uint32
	Change            uint64
	Size              uint64
	LinkSupport       bool
	SymlinkSupport    bool
	NamedAttr         bool
	FSID              FSID
	UniqueHandles     bool
	LeaseTime         uint32
	RdattrError       Status
	ACLSupport        uint32
	CanSetTime        bool
	CaseInsensitive   bool
	CasePreserving    bool
	ChownRestricted   bool
	FileHandle        []byte
	FileID            uint64
	FilesAvail        uint64
	FilesFree         uint64
	FilesTotal        uint64
	Homogeneous       bool
	MaxFileSize       uint64
	MaxLink           uint32
	MaxName           uint32
	MaxRead           uint64
	MaxWrite          uint64
	Mode              uint32
	NoTrunc           bool
	NumLinks          uint32
	Owner             string
	OwnerGroup        string
	RawDev            [2]uint32
	SpaceAvail        uint64
	SpaceFree         uint64
	SpaceTotal        uint64
	SpaceUsed         uint64
	TimeAccess        Time
	TimeAccessSet     SetTime
	TimeDelta         Time
	TimeMetadata      Time
	TimeModify        Time
	TimeModifySet     SetTime
	MountedOnFileID   uint64
	SuppattrExclcreat Bitmap
}

// Encodable is every attribute Encode and DecodeFattr handle.
var Encodable = NewBitmap(AttrSupportedAttrs, AttrType, AttrFHExpireType, AttrChange, AttrSize,
	AttrLinkSupport, AttrSymlinkSupport, AttrNamedAttr, AttrFSID, AttrUniqueHandles, AttrLeaseTime,
	AttrRdattrError, AttrACLSupport, AttrCanSetTime, AttrCaseInsensitive, AttrCasePreserving,
	AttrChownRestricted, AttrFileHandle, AttrFileID, AttrFilesAvail, AttrFilesFree, AttrFilesTotal,
	AttrHomogeneous, AttrMaxFileSize, AttrMaxLink, AttrMaxName, AttrMaxRead, AttrMaxWrite, AttrMode,
	AttrNoTrunc, AttrNumLinks, AttrOwner, AttrOwnerGroup, AttrRawDev, AttrSpaceAvail, AttrSpaceFree,
	AttrSpaceTotal, AttrSpaceUsed, AttrTimeAccess, AttrTimeAccessSet, AttrTimeDelta, AttrTimeMetadata,
	AttrTimeModify, AttrTimeModifySet, AttrMountedOnFileID, AttrSuppattrExclcreat)

// Writable is the attributes a client may set (SETATTR, CREATE, OPEN).
var Writable = NewBitmap(AttrSize, AttrMode, AttrOwner, AttrOwnerGroup, AttrTimeAccessSet, AttrTimeModifySet)

// WriteOnly are attributes that can be set but never read.
var WriteOnly = NewBitmap(AttrTimeAccessSet, AttrTimeModifySet)

func (t SetTime) encode(w *sunrpc.Writer) {
	if t.Server {
		w.Uint32(TimeServer)
		return
	}
	w.Uint32(TimeClient)
	t.T.Encode(w)
}

func (t *SetTime) decode(r *sunrpc.Reader) {
	t.Set = true
	switch r.Uint32() {
	case TimeServer:
		t.Server = true
	case TimeClient:
		t.T.Decode(r)
	default:
		r.Fail("time_how4")
	}
}

// Encode writes fattr4 with the attributes of mask that Encodable knows, in
// bit order (the bitmap written says which).
func (f *Fattr) Encode(w *sunrpc.Writer, mask Bitmap) {
	mask = mask.And(Encodable)
	mask.Encode(w)
	off := w.Reserve(4)
	start := w.Len()
	f.EncodeVals(w, mask)
	w.PutUint32At(off, uint32(w.Len()-start))
	w.FixedOpaque(nil) // already aligned: every value is a multiple of 4 bytes
}

// EncodeVals writes the attrlist4 values of mask (no bitmap, no length).
func (f *Fattr) EncodeVals(w *sunrpc.Writer, mask Bitmap) {
	for _, n := range mask.Bits() {
		switch n {
		case AttrSupportedAttrs:
			f.SupportedAttrs.Encode(w)
		case AttrType:
			w.Uint32(uint32(f.Type))
		case AttrFHExpireType:
			w.Uint32(f.FHExpireType)
		case AttrChange:
			w.Uint64(f.Change)
		case AttrSize:
			w.Uint64(f.Size)
		case AttrLinkSupport:
			w.Bool(f.LinkSupport)
		case AttrSymlinkSupport:
			w.Bool(f.SymlinkSupport)
		case AttrNamedAttr:
			w.Bool(f.NamedAttr)
		case AttrFSID:
			w.Uint64(f.FSID.Major)
			w.Uint64(f.FSID.Minor)
		case AttrUniqueHandles:
			w.Bool(f.UniqueHandles)
		case AttrLeaseTime:
			w.Uint32(f.LeaseTime)
		case AttrRdattrError:
			w.Uint32(uint32(f.RdattrError))
		case AttrACLSupport:
			w.Uint32(f.ACLSupport)
		case AttrCanSetTime:
			w.Bool(f.CanSetTime)
		case AttrCaseInsensitive:
			w.Bool(f.CaseInsensitive)
		case AttrCasePreserving:
			w.Bool(f.CasePreserving)
		case AttrChownRestricted:
			w.Bool(f.ChownRestricted)
		case AttrFileHandle:
			w.Opaque(f.FileHandle)
		case AttrFileID:
			w.Uint64(f.FileID)
		case AttrFilesAvail:
			w.Uint64(f.FilesAvail)
		case AttrFilesFree:
			w.Uint64(f.FilesFree)
		case AttrFilesTotal:
			w.Uint64(f.FilesTotal)
		case AttrHomogeneous:
			w.Bool(f.Homogeneous)
		case AttrMaxFileSize:
			w.Uint64(f.MaxFileSize)
		case AttrMaxLink:
			w.Uint32(f.MaxLink)
		case AttrMaxName:
			w.Uint32(f.MaxName)
		case AttrMaxRead:
			w.Uint64(f.MaxRead)
		case AttrMaxWrite:
			w.Uint64(f.MaxWrite)
		case AttrMode:
			w.Uint32(f.Mode)
		case AttrNoTrunc:
			w.Bool(f.NoTrunc)
		case AttrNumLinks:
			w.Uint32(f.NumLinks)
		case AttrOwner:
			w.String(f.Owner)
		case AttrOwnerGroup:
			w.String(f.OwnerGroup)
		case AttrRawDev:
			w.Uint32(f.RawDev[0])
			w.Uint32(f.RawDev[1])
		case AttrSpaceAvail:
			w.Uint64(f.SpaceAvail)
		case AttrSpaceFree:
			w.Uint64(f.SpaceFree)
		case AttrSpaceTotal:
			w.Uint64(f.SpaceTotal)
		case AttrSpaceUsed:
			w.Uint64(f.SpaceUsed)
		case AttrTimeAccess:
			f.TimeAccess.Encode(w)
		case AttrTimeAccessSet:
			f.TimeAccessSet.encode(w)
		case AttrTimeDelta:
			f.TimeDelta.Encode(w)
		case AttrTimeMetadata:
			f.TimeMetadata.Encode(w)
		case AttrTimeModify:
			f.TimeModify.Encode(w)
		case AttrTimeModifySet:
			f.TimeModifySet.encode(w)
		case AttrMountedOnFileID:
			w.Uint64(f.MountedOnFileID)
		case AttrSuppattrExclcreat:
			f.SuppattrExclcreat.Encode(w)
		}
	}
}

// RawFattr is a fattr4 as received: the bitmap and the undecoded values
// (VERIFY and NVERIFY compare these bytes with the server's own encoding).
type RawFattr struct {
	Mask Bitmap
	Vals []byte
}

func (a RawFattr) Encode(w *sunrpc.Writer) { a.Mask.Encode(w); w.Opaque(a.Vals) }
func (a *RawFattr) Decode(r *sunrpc.Reader) {
	a.Mask.Decode(r)
	a.Vals = r.Opaque(MaxAttrVals)
}

// Parse decodes the values. An attribute this package does not know gives
// ErrAttrNotSupp; values that do not parse, or bytes left over, give
// ErrBadXDR.
func (a RawFattr) Parse() (Fattr, Status) {
	var f Fattr
	if !a.Mask.Minus(Encodable).Empty() {
		return f, ErrAttrNotSupp
	}
	r := sunrpc.NewReader(a.Vals)
	for _, n := range a.Mask.Bits() {
		switch n {
		case AttrSupportedAttrs:
			f.SupportedAttrs.Decode(r)
		case AttrType:
			f.Type = FileType(r.Uint32())
		case AttrFHExpireType:
			f.FHExpireType = r.Uint32()
		case AttrChange:
			f.Change = r.Uint64()
		case AttrSize:
			f.Size = r.Uint64()
		case AttrLinkSupport:
			f.LinkSupport = r.Bool()
		case AttrSymlinkSupport:
			f.SymlinkSupport = r.Bool()
		case AttrNamedAttr:
			f.NamedAttr = r.Bool()
		case AttrFSID:
			f.FSID.Major = r.Uint64()
			f.FSID.Minor = r.Uint64()
		case AttrUniqueHandles:
			f.UniqueHandles = r.Bool()
		case AttrLeaseTime:
			f.LeaseTime = r.Uint32()
		case AttrRdattrError:
			f.RdattrError = Status(r.Uint32())
		case AttrACLSupport:
			f.ACLSupport = r.Uint32()
		case AttrCanSetTime:
			f.CanSetTime = r.Bool()
		case AttrCaseInsensitive:
			f.CaseInsensitive = r.Bool()
		case AttrCasePreserving:
			f.CasePreserving = r.Bool()
		case AttrChownRestricted:
			f.ChownRestricted = r.Bool()
		case AttrFileHandle:
			f.FileHandle = r.Opaque(FHSize)
		case AttrFileID:
			f.FileID = r.Uint64()
		case AttrFilesAvail:
			f.FilesAvail = r.Uint64()
		case AttrFilesFree:
			f.FilesFree = r.Uint64()
		case AttrFilesTotal:
			f.FilesTotal = r.Uint64()
		case AttrHomogeneous:
			f.Homogeneous = r.Bool()
		case AttrMaxFileSize:
			f.MaxFileSize = r.Uint64()
		case AttrMaxLink:
			f.MaxLink = r.Uint32()
		case AttrMaxName:
			f.MaxName = r.Uint32()
		case AttrMaxRead:
			f.MaxRead = r.Uint64()
		case AttrMaxWrite:
			f.MaxWrite = r.Uint64()
		case AttrMode:
			f.Mode = r.Uint32()
		case AttrNoTrunc:
			f.NoTrunc = r.Bool()
		case AttrNumLinks:
			f.NumLinks = r.Uint32()
		case AttrOwner:
			f.Owner = r.String(OpaqueLimit)
		case AttrOwnerGroup:
			f.OwnerGroup = r.String(OpaqueLimit)
		case AttrRawDev:
			f.RawDev[0] = r.Uint32()
			f.RawDev[1] = r.Uint32()
		case AttrSpaceAvail:
			f.SpaceAvail = r.Uint64()
		case AttrSpaceFree:
			f.SpaceFree = r.Uint64()
		case AttrSpaceTotal:
			f.SpaceTotal = r.Uint64()
		case AttrSpaceUsed:
			f.SpaceUsed = r.Uint64()
		case AttrTimeAccess:
			f.TimeAccess.Decode(r)
		case AttrTimeAccessSet:
			f.TimeAccessSet.decode(r)
		case AttrTimeDelta:
			f.TimeDelta.Decode(r)
		case AttrTimeMetadata:
			f.TimeMetadata.Decode(r)
		case AttrTimeModify:
			f.TimeModify.Decode(r)
		case AttrTimeModifySet:
			f.TimeModifySet.decode(r)
		case AttrMountedOnFileID:
			f.MountedOnFileID = r.Uint64()
		case AttrSuppattrExclcreat:
			f.SuppattrExclcreat.Decode(r)
		}
	}
	if r.Err() != nil || r.Remaining() != 0 {
		return f, ErrBadXDR
	}
	return f, OK
}

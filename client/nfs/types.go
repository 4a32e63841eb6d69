package nfs

import (
	"os"
	"time"
)

// The client's public types are plain Go values (time.Time, os.FileMode,
// pointers for optional fields) rather than the XDR structs of proto/nfs3,
// so callers (the FUSE tree, the CLI, the benchmark) never depend on wire
// details; conversion happens in one place (convert.go).

// FH is an NFS v3 file handle (opaque, at most 64 bytes).
type FH []byte

// FileType is ftype3.
type FileType uint32

const (
	TypeReg  FileType = 1
	TypeDir  FileType = 2
	TypeBlk  FileType = 3
	TypeChr  FileType = 4
	TypeLnk  FileType = 5
	TypeSock FileType = 6
	TypeFIFO FileType = 7
)

func (t FileType) String() string {
	switch t {
	case TypeReg:
		return "file"
	case TypeDir:
		return "dir"
	case TypeBlk:
		return "block"
	case TypeChr:
		return "char"
	case TypeLnk:
		return "symlink"
	case TypeSock:
		return "socket"
	case TypeFIFO:
		return "fifo"
	}
	return "unknown"
}

// Attr is fattr3.
type Attr struct {
	Type         FileType
	Mode         uint32 // permission and set-id bits (07777)
	Nlink        uint32
	UID, GID     uint32
	Size, Used   uint64
	RdevMajor    uint32
	RdevMinor    uint32
	FSID, FileID uint64
	Atime, Mtime time.Time
	Ctime        time.Time
}

// FileMode is the os.FileMode equivalent of Type and Mode.
func (a *Attr) FileMode() os.FileMode {
	m := os.FileMode(a.Mode & 0o777)
	if a.Mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if a.Mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if a.Mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	switch a.Type {
	case TypeDir:
		m |= os.ModeDir
	case TypeLnk:
		m |= os.ModeSymlink
	case TypeBlk:
		m |= os.ModeDevice
	case TypeChr:
		m |= os.ModeDevice | os.ModeCharDevice
	case TypeSock:
		m |= os.ModeSocket
	case TypeFIFO:
		m |= os.ModeNamedPipe
	}
	return m
}

// SetAttr is sattr3: nil fields are left unchanged. SetAtimeNow/SetMtimeNow
// ask for the server's clock (SET_TO_SERVER_TIME) and win over Atime/Mtime.
type SetAttr struct {
	Mode        *uint32
	UID, GID    *uint32
	Size        *uint64
	Atime       *time.Time
	Mtime       *time.Time
	SetAtimeNow bool
	SetMtimeNow bool
}

// WCC is the weak cache consistency data of a modifying reply: the size and
// times before (if the server sent them) and the attributes after.
type WCC struct {
	Before *WCCAttr
	After  *Attr
}

// WCCAttr is wcc_attr.
type WCCAttr struct {
	Size         uint64
	Mtime, Ctime time.Time
}

// Stable is stable_how for WRITE.
type Stable uint32

const (
	Unstable Stable = 0
	DataSync Stable = 1
	FileSync Stable = 2
)

func (s Stable) String() string {
	switch s {
	case Unstable:
		return "UNSTABLE"
	case DataSync:
		return "DATA_SYNC"
	case FileSync:
		return "FILE_SYNC"
	}
	return "STABLE?"
}

// Verifier is a writeverf3 / cookieverf3 / createverf3.
type Verifier [8]byte

// CreateMode is createmode3.
type CreateMode uint32

const (
	Unchecked CreateMode = 0
	Guarded   CreateMode = 1
	Exclusive CreateMode = 2
)

// DirEntry is one READDIR / READDIRPLUS entry. Attr and FH are set only by
// READDIRPLUS, and only when the server chose to send them.
type DirEntry struct {
	FileID uint64
	Name   string
	Cookie uint64
	Attr   *Attr
	FH     FH
}

// FSStat is FSSTAT3resok.
type FSStat struct {
	TotalBytes, FreeBytes, AvailBytes uint64
	TotalFiles, FreeFiles, AvailFiles uint64
	Invarsec                          uint32
}

// FSInfo is FSINFO3resok.
type FSInfo struct {
	RtMax, RtPref, RtMult uint32
	WtMax, WtPref, WtMult uint32
	DtPref                uint32
	MaxFileSize           uint64
	TimeDelta             time.Duration
	Properties            uint32
}

// PathConf is PATHCONF3resok.
type PathConf struct {
	LinkMax         uint32
	NameMax         uint32
	NoTrunc         bool
	ChownRestricted bool
	CaseInsensitive bool
	CasePreserving  bool
}

// ACCESS3 bits.
const (
	AccessRead    uint32 = 0x01
	AccessLookup  uint32 = 0x02
	AccessModify  uint32 = 0x04
	AccessExtend  uint32 = 0x08
	AccessDelete  uint32 = 0x10
	AccessExecute uint32 = 0x20
)

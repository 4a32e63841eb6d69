package nfs3

import (
	"fmt"

	"github.com/tristore/tristore/proto/sunrpc"
)

// MOUNT v3 (RFC 1813 appendix I) procedures, status codes and types.

// MOUNT v3 procedure numbers.
const (
	MountProcNull    = 0
	MountProcMnt     = 1
	MountProcDump    = 2
	MountProcUmnt    = 3
	MountProcUmntall = 4
	MountProcExport  = 5
)

// MountStatus is mountstat3.
type MountStatus uint32

const (
	MntOK             MountStatus = 0
	MntErrPerm        MountStatus = 1
	MntErrNoEnt       MountStatus = 2
	MntErrIO          MountStatus = 5
	MntErrAcces       MountStatus = 13
	MntErrNotDir      MountStatus = 20
	MntErrInval       MountStatus = 22
	MntErrNameTooLong MountStatus = 63
	MntErrNotSupp     MountStatus = 10004
	MntErrServerFault MountStatus = 10006
)

func (s MountStatus) Error() string { return fmt.Sprintf("mountstat3(%d)", uint32(s)) }

// MaxMountName is MNTNAMLEN (host and group names).
const MaxMountName = 255

// DirPath is the argument of MNT and UMNT.
type DirPath struct{ Path string }

func (a *DirPath) Encode(w *sunrpc.Writer) { w.String(a.Path) }
func (a *DirPath) Decode(r *sunrpc.Reader) error {
	a.Path = r.String(MaxDirPath)
	return r.Err()
}

// MntRes is mountres3.
type MntRes struct {
	Status      MountStatus
	FH          FH
	AuthFlavors []uint32
}

func (x *MntRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	if x.Status == MntOK {
		x.FH.Encode(w)
		w.Uint32(uint32(len(x.AuthFlavors)))
		for _, f := range x.AuthFlavors {
			w.Uint32(f)
		}
	}
}

func (x *MntRes) Decode(r *sunrpc.Reader) error {
	x.Status = MountStatus(r.Uint32())
	if x.Status == MntOK {
		x.FH.Decode(r)
		n := r.Uint32()
		if n > 64 {
			r.Fail("%d auth flavors", n)
		}
		x.AuthFlavors = nil
		for i := uint32(0); i < n && r.Err() == nil; i++ {
			x.AuthFlavors = append(x.AuthFlavors, r.Uint32())
		}
	}
	return r.Err()
}

// MountEntry is one mountbody of a DUMP reply.
type MountEntry struct {
	Host string
	Dir  string
}

// DumpRes is the mountlist of DUMP.
type DumpRes struct{ Mounts []MountEntry }

func (x *DumpRes) Encode(w *sunrpc.Writer) {
	encodeList(w, x.Mounts, func(m *MountEntry) {
		w.String(m.Host)
		w.String(m.Dir)
	})
}

func (x *DumpRes) Decode(r *sunrpc.Reader) error {
	x.Mounts = decodeList(r, nil, "mount list too long", func(m *MountEntry) {
		m.Host = r.String(MaxMountName)
		m.Dir = r.String(MaxDirPath)
	})
	return r.Err()
}

// ExportEntry is one exportnode of an EXPORT reply.
type ExportEntry struct {
	Dir    string
	Groups []string
}

// ExportRes is the exports list of EXPORT.
type ExportRes struct{ Exports []ExportEntry }

func (x *ExportRes) Encode(w *sunrpc.Writer) {
	encodeList(w, x.Exports, func(e *ExportEntry) {
		w.String(e.Dir)
		encodeList(w, e.Groups, func(g *string) { w.String(*g) })
	})
}

func (x *ExportRes) Decode(r *sunrpc.Reader) error {
	x.Exports = decodeList(r, nil, "export list too long", func(e *ExportEntry) {
		e.Dir = r.String(MaxDirPath)
		e.Groups = decodeList(r, nil, "group list too long", func(g *string) { *g = r.String(MaxMountName) })
	})
	return r.Err()
}

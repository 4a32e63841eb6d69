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
	for _, m := range x.Mounts {
		w.Bool(true)
		w.String(m.Host)
		w.String(m.Dir)
	}
	w.Bool(false)
}

func (x *DumpRes) Decode(r *sunrpc.Reader) error {
	x.Mounts = nil
	for i := 0; r.Bool(); i++ {
		if i >= maxListItems {
			r.Fail("mount list too long")
			break
		}
		m := MountEntry{Host: r.String(MaxMountName), Dir: r.String(MaxDirPath)}
		if r.Err() != nil {
			break
		}
		x.Mounts = append(x.Mounts, m)
	}
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
	for _, e := range x.Exports {
		w.Bool(true)
		w.String(e.Dir)
		for _, g := range e.Groups {
			w.Bool(true)
			w.String(g)
		}
		w.Bool(false)
	}
	w.Bool(false)
}

func (x *ExportRes) Decode(r *sunrpc.Reader) error {
	x.Exports = nil
	for i := 0; r.Bool(); i++ {
		if i >= maxListItems {
			r.Fail("export list too long")
			break
		}
		e := ExportEntry{Dir: r.String(MaxDirPath)}
		for j := 0; r.Bool(); j++ {
			if j >= maxListItems {
				r.Fail("group list too long")
				break
			}
			e.Groups = append(e.Groups, r.String(MaxMountName))
		}
		if r.Err() != nil {
			break
		}
		x.Exports = append(x.Exports, e)
	}
	return r.Err()
}

package nfs

import (
	"time"

	"github.com/tristore/tristore/proto/nfs3"
)

// Conversions between proto/nfs3's XDR structs and the client's Go types:
// the only place that knows both.

func fromTime(t nfs3.Time) time.Time { return time.Unix(int64(t.Sec), int64(t.Nsec)) }

func toTime(t time.Time) nfs3.Time {
	s := t.Unix()
	if s < 0 {
		s = 0
	}
	if s > 1<<32-1 {
		s = 1<<32 - 1
	}
	return nfs3.Time{Sec: uint32(s), Nsec: uint32(t.Nanosecond())}
}

func fromFattr(a *nfs3.Fattr) *Attr {
	if a == nil {
		return nil
	}
	return &Attr{
		Type: FileType(a.Type), Mode: a.Mode & 0o7777, Nlink: a.Nlink, UID: a.UID, GID: a.GID,
		Size: a.Size, Used: a.Used, RdevMajor: a.Rdev.Major, RdevMinor: a.Rdev.Minor,
		FSID: a.FSID, FileID: a.FileID,
		Atime: fromTime(a.Atime), Mtime: fromTime(a.Mtime), Ctime: fromTime(a.Ctime),
	}
}

func fromWcc(d *nfs3.WccData) WCC {
	w := WCC{After: fromFattr(d.After.Attr)}
	if b := d.Before.Attr; b != nil {
		w.Before = &WCCAttr{Size: b.Size, Mtime: fromTime(b.Mtime), Ctime: fromTime(b.Ctime)}
	}
	return w
}

func toSattr(s SetAttr) nfs3.Sattr {
	out := nfs3.Sattr{Mode: s.Mode, UID: s.UID, GID: s.GID, Size: s.Size}
	switch {
	case s.SetAtimeNow:
		out.Atime.How = nfs3.SetToServerTime
	case s.Atime != nil:
		out.Atime = nfs3.SetTime{How: nfs3.SetToClientTime, Time: toTime(*s.Atime)}
	}
	switch {
	case s.SetMtimeNow:
		out.Mtime.How = nfs3.SetToServerTime
	case s.Mtime != nil:
		out.Mtime = nfs3.SetTime{How: nfs3.SetToClientTime, Time: toTime(*s.Mtime)}
	}
	return out
}

// cloneFH copies a handle out of a reply record (decoded slices alias the
// record buffer).
func cloneFH(b []byte) FH {
	if b == nil {
		return nil
	}
	return append(FH(nil), b...)
}

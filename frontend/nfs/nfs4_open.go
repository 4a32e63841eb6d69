package nfs

// NFSv4 open state and I/O: OPEN, OPEN_CONFIRM, OPEN_DOWNGRADE, CLOSE,
// READ, WRITE, LOCK, LOCKT, LOCKU, RELEASE_LOCKOWNER, DELEGRETURN.
//
// Durability is v3's (nfs_io.go): WRITE UNSTABLE4 leaves data in the page
// cache, DATA_SYNC4 fdatasyncs and FILE_SYNC4 fsyncs before the reply,
// COMMIT fsyncs, and the write verifier changes when the server restarts.
// Opens that create files go through vfs.Create, so a created name is on
// disk before OPEN answers (unless the export is async).
//
// 4.0 open and lock owners carry sequence ids: a request with the owner's
// last seqid is a retransmission and gets the remembered reply; one that is
// neither that nor the next is NFS4ERR_BAD_SEQID. 4.1 ignores these seqids
// (the session's slots give exactly-once semantics instead).

import (
	"encoding/binary"

	"github.com/tristore/tristore/proto/nfs4"
	"github.com/tristore/tristore/vfs"
)

// seqCheck applies the 4.0 owner seqid rule. It returns a replayed result
// when seqid repeats the owner's last one for the same operation.
func (c *compound) seqCheck(o *v4owner, seqid uint32, op nfs4.Op) (nfs4.Res, nfs4.Status) {
	if c.minor >= 1 {
		return nil, nfs4.OK
	}
	switch {
	case seqid == o.seqid+1:
		return nil, nfs4.OK
	case seqid == o.seqid && o.hasLast && o.lastOp == op:
		b := append([]byte(nil), o.last...)
		return &rawRes{st: nfs4.Status(binary.BigEndian.Uint32(b)), b: b}, nfs4.OK
	}
	return nil, nfs4.ErrBadSeqID
}

// replayed answers a 4.0 retransmission of a seqid operation on a stateid
// from the owner's replay cache before the stateid is checked (by then the
// original may have changed or closed it). The caller holds v4.mu.
func (c *compound) replayed(sid nfs4.Stateid, seqid uint32, op nfs4.Op) nfs4.Res {
	if c.minor >= 1 {
		return nil
	}
	o := c.s.v4.ownerOf(sid)
	if o == nil {
		return nil
	}
	if rep, _ := c.seqCheck(o, seqid, op); rep != nil {
		return rep
	}
	return nil
}

// consume records that an operation used the owner's next seqid, whatever
// its outcome, except for the errors RFC 7530 section 9.1.7 exempts.
func (c *compound) consume(o *v4owner, seqid uint32, st nfs4.Status) {
	if c.minor >= 1 || o == nil {
		return
	}
	switch st {
	case nfs4.ErrStaleClientID, nfs4.ErrStaleStateID, nfs4.ErrBadStateID, nfs4.ErrBadSeqID,
		nfs4.ErrBadXDR, nfs4.ErrResource, nfs4.ErrNoFileHandle, nfs4.ErrMoved:
		return
	}
	o.seqid = seqid
	c.seqOwner = o
}

// resolveStateid replaces 4.1's "current stateid" with the compound's.
func (c *compound) resolveStateid(sid nfs4.Stateid) (nfs4.Stateid, nfs4.Status) {
	if c.minor >= 1 && sid.Current() {
		if !c.hasSt {
			return sid, nfs4.ErrBadStateID
		}
		return c.curSt, nfs4.OK
	}
	return sid, nfs4.OK
}

func (c *compound) setStateid(s nfs4.Stateid) { c.curSt, c.hasSt = s, true }

// stateFor finds a non-special stateid and checks that it belongs to the
// file f. The caller holds v4.mu.
func (c *compound) stateFor(f fh4, sid nfs4.Stateid) (*v4stateid, nfs4.Status) {
	sid, st := c.resolveStateid(sid)
	if st != nfs4.OK {
		return nil, st
	}
	if sid.Special() {
		return nil, nfs4.ErrBadStateID
	}
	s, st := c.s.v4.findState(sid, c.minor)
	if st != nfs4.OK {
		return nil, st
	}
	if f.pseudo || s.e != f.e || s.file.key != keyOf(f.e, f.h) {
		return nil, nfs4.ErrBadStateID
	}
	if c.minor == 0 && !s.lock && !s.owner.confirmed {
		return nil, nfs4.ErrBadStateID
	}
	return s, nfs4.OK
}

// ioCheck decides whether READ, WRITE or a size change with stateid sid may
// go ahead on f: special stateids are refused by other opens' deny modes;
// an open (or a lock's open) must allow writing for a write.
func (c *compound) ioCheck(f fh4, sid nfs4.Stateid, write bool, off, n uint64) nfs4.Status {
	st := c.s.v4
	st.mu.Lock()
	defer st.mu.Unlock()
	sid, s4 := c.resolveStateid(sid)
	if s4 != nfs4.OK {
		return s4
	}
	if sid.Anonymous() || sid.Bypass() {
		file := st.files[keyOf(f.e, f.h)]
		if file == nil || (sid.Bypass() && !write) {
			return nfs4.OK
		}
		if file.denied(write) {
			return nfs4.ErrLocked
		}
		if write {
			if s, _ := file.lockConflict(off, off+max(n, 1), true, nil); s != nil {
				return nfs4.ErrLocked
			}
		}
		return nfs4.OK
	}
	s, s4 := c.stateFor(f, sid)
	if s4 != nfs4.OK {
		return s4
	}
	open := s
	if s.lock {
		open = s.open
	}
	if write && open.access&nfs4.ShareAccessWrite == 0 {
		return nfs4.ErrOpenMode
	}
	if !write && open.access&nfs4.ShareAccessRead == 0 && c.minor == 0 {
		// 4.0 lets a server refuse; knfsd allows it for write-only opens
		// (clients read to fill partial pages), and so does this server.
	}
	if write && s.file.lockConflictClient(off, off+max(n, 1), true, s.owner.client) != nil {
		return nfs4.ErrLocked
	}
	return nfs4.OK
}

// fileCheck returns the type error of an I/O on a non-regular object.
func fileCheck(a vfs.Attr, minor uint32) nfs4.Status {
	switch a.Type {
	case vfs.TypeRegular:
		return nfs4.OK
	case vfs.TypeDir:
		return nfs4.ErrIsDir
	case vfs.TypeSymlink:
		if minor >= 1 {
			return nfs4.ErrSymlink
		}
		return nfs4.ErrInval
	}
	if minor >= 1 {
		return nfs4.ErrWrongType
	}
	return nfs4.ErrInval
}

func op4Read(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.ReadArgs)
	f, cred, st := c.needReal(nfs4.ErrIsDir)
	if st != nfs4.OK {
		return &nfs4.ReadRes{Status: st}
	}
	at, err := f.e.fs.GetAttr(f.h)
	if err != nil {
		return &nfs4.ReadRes{Status: statusOf4(err)}
	}
	if st := fileCheck(at, c.minor); st != nfs4.OK {
		return &nfs4.ReadRes{Status: st}
	}
	if st := c.ioCheck(f, args.Stateid, false, args.Offset, uint64(args.Count)); st != nfs4.OK {
		return &nfs4.ReadRes{Status: st}
	}
	if args.Offset >= at.Size {
		// At or past the end (pread would refuse offsets near 2^63 with
		// EINVAL): nothing to read.
		return &nfs4.ReadRes{EOF: true, Data: []byte{}}
	}
	count := min(args.Count, maxIO)
	bp := readBufs.Get().(*[]byte)
	c.cleanup = append(c.cleanup, func() { readBufs.Put(bp) })
	n, eof, _, err := f.e.fs.Read(cred, f.h, args.Offset, (*bp)[:count])
	if err != nil {
		return &nfs4.ReadRes{Status: statusOf4(err)}
	}
	return &nfs4.ReadRes{EOF: eof, Data: (*bp)[:n]}
}

func op4Write(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.WriteArgs)
	f, cred, st := c.needReal(nfs4.ErrIsDir)
	if st != nfs4.OK {
		return &nfs4.WriteRes{Status: st}
	}
	at, err := f.e.fs.GetAttr(f.h)
	if err != nil {
		return &nfs4.WriteRes{Status: statusOf4(err)}
	}
	if st := fileCheck(at, c.minor); st != nfs4.OK {
		return &nfs4.WriteRes{Status: st}
	}
	if args.Offset+uint64(len(args.Data)) < args.Offset {
		return &nfs4.WriteRes{Status: nfs4.ErrInval}
	}
	if st := c.ioCheck(f, args.Stateid, true, args.Offset, uint64(len(args.Data))); st != nfs4.OK {
		return &nfs4.WriteRes{Status: st}
	}
	how, committed := vfs.Unstable, uint32(nfs4.Unstable)
	switch args.Stable {
	case nfs4.DataSync:
		how, committed = vfs.DataSync, nfs4.DataSync
	case nfs4.FileSync:
		how, committed = vfs.FileSync, nfs4.FileSync
	case nfs4.Unstable:
	default:
		return &nfs4.WriteRes{Status: nfs4.ErrInval}
	}
	n, _, _, err := f.e.fs.Write(cred, f.h, args.Offset, args.Data, how)
	if err != nil {
		return &nfs4.WriteRes{Status: statusOf4(err)}
	}
	return &nfs4.WriteRes{Count: uint32(n), Committed: committed, Verf: c.s.verf}
}

// stateClient is the client an owner names: the session's (4.1) or a
// confirmed one by ID (4.0). The caller holds v4.mu.
func (c *compound) stateClient(id uint64) (*v4client, nfs4.Status) {
	if c.minor >= 1 {
		if c.sess == nil {
			return nil, nfs4.ErrOpNotInSession
		}
		c.sess.client.renewed = timeNow()
		return c.sess.client, nfs4.OK
	}
	return c.s.v4.client(id)
}

func op4Open(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.OpenArgs)
	f, cred, st := c.need()
	if st != nfs4.OK {
		return &nfs4.OpenRes{Status: st}
	}
	access, deny := args.ShareAccess&^nfs4.ShareWantMask, args.ShareDeny
	if c.minor == 0 {
		access = args.ShareAccess
	}
	if access == 0 || access > nfs4.ShareAccessBoth || deny > nfs4.ShareDenyBoth {
		return &nfs4.OpenRes{Status: nfs4.ErrInval}
	}
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	cl, st := c.stateClient(args.Owner.ClientID)
	if st != nfs4.OK {
		return &nfs4.OpenRes{Status: st}
	}
	o, fresh := v4.owner(cl, args.Owner, false)
	if !fresh && c.minor == 0 && !o.confirmed && !(args.Seqid == o.seqid && o.hasLast && o.lastOp == nfs4.OpOpen) {
		// An unconfirmed owner is replaced by a new OPEN (RFC 7530 16.18.5);
		// a retransmission of its first OPEN is replayed below.
		v4.removeOwner(o)
		o, fresh = v4.owner(cl, args.Owner, false)
	}
	if !fresh {
		if rep, st := c.seqCheck(o, args.Seqid, nfs4.OpOpen); rep != nil || st != nfs4.OK {
			if rep != nil {
				return rep
			}
			return &nfs4.OpenRes{Status: st}
		}
	}
	res := c.open(f, cred, cl, o, args, access, deny)
	if fresh && c.minor == 0 && res.Status != nfs4.OK {
		v4.removeOwner(o)
		return res
	}
	if fresh && c.minor >= 1 {
		o.confirmed = true
	}
	c.consume(o, args.Seqid, res.Status)
	return res
}

// open does the work of OPEN with v4.mu held.
func (c *compound) open(f fh4, cred vfs.Cred, cl *v4client, o *v4owner, args *nfs4.OpenArgs, access, deny uint32) *nfs4.OpenRes {
	v4 := c.s.v4
	var (
		fh      vfs.Handle
		fa      vfs.Attr
		dc      vfs.DirChange
		created bool
		attrSet nfs4.Bitmap
		dir     = f
	)
	switch args.Claim {
	case nfs4.ClaimNull:
		if v4.inGrace() || c.minor >= 1 && !cl.reclaimDone {
			return &nfs4.OpenRes{Status: nfs4.ErrGrace}
		}
		if f.pseudo {
			if args.Create {
				return &nfs4.OpenRes{Status: nfs4.ErrROFS}
			}
			return &nfs4.OpenRes{Status: nfs4.ErrIsDir}
		}
		da, err := f.e.fs.GetAttr(f.h)
		if err != nil {
			return &nfs4.OpenRes{Status: statusOf4(err)}
		}
		if da.Type != vfs.TypeDir {
			return &nfs4.OpenRes{Status: dirStatus(da.Type)}
		}
		if st := checkName4(args.Name); st != nfs4.OK {
			return &nfs4.OpenRes{Status: st}
		}
		dc = vfs.DirChange{Before: &da, After: &da}
		if args.Create {
			var st nfs4.Status
			fh, fa, dc, created, attrSet, st = c.openCreate(f, cred, args)
			if st != nfs4.OK {
				return &nfs4.OpenRes{Status: st}
			}
		} else {
			var err error
			fh, fa, _, err = f.e.fs.Lookup(cred, f.h, args.Name)
			if err != nil {
				return &nfs4.OpenRes{Status: statusOf4(err)}
			}
		}
	case nfs4.ClaimPrevious, nfs4.ClaimFH:
		if f.pseudo {
			return &nfs4.OpenRes{Status: nfs4.ErrIsDir}
		}
		if args.Claim == nfs4.ClaimPrevious {
			if !v4.mayReclaim(cl) {
				if v4.inGrace() {
					return &nfs4.OpenRes{Status: nfs4.ErrReclaimBad}
				}
				return &nfs4.OpenRes{Status: nfs4.ErrNoGrace}
			}
			if args.DelegType != nfs4.DelegNone {
				return &nfs4.OpenRes{Status: nfs4.ErrReclaimBad}
			}
		} else {
			if c.minor == 0 {
				return &nfs4.OpenRes{Status: nfs4.ErrBadXDR}
			}
			if v4.inGrace() || !cl.reclaimDone {
				return &nfs4.OpenRes{Status: nfs4.ErrGrace}
			}
		}
		var err error
		fh = f.h
		if fa, err = f.e.fs.GetAttr(f.h); err != nil {
			return &nfs4.OpenRes{Status: statusOf4(err)}
		}
	default:
		// Delegation claims: this server grants no delegations.
		return &nfs4.OpenRes{Status: nfs4.ErrReclaimBad}
	}
	if st := fileCheck(fa, c.minor); st != nfs4.OK {
		switch {
		case fa.Type == vfs.TypeSymlink:
			st = nfs4.ErrSymlink
		case fa.Type != vfs.TypeDir && c.minor == 0:
			st = nfs4.ErrSymlink // what 4.0 servers answer for other non-regular files (pynfs OPEN7)
		}
		return &nfs4.OpenRes{Status: st}
	}
	if !created {
		var want uint32
		if access&nfs4.ShareAccessRead != 0 {
			want |= vfs.AccessRead
		}
		if access&nfs4.ShareAccessWrite != 0 {
			want |= vfs.AccessModify
		}
		got, _, err := f.e.fs.Access(cred, fh, want)
		if err != nil {
			return &nfs4.OpenRes{Status: statusOf4(err)}
		}
		if got&want != want && cred.UID != fa.UID {
			return &nfs4.OpenRes{Status: nfs4.ErrAccess}
		}
	}
	file := v4.file(f.e, fh)
	v4.expireConflicting(file)
	file = v4.file(f.e, fh)
	var s *v4stateid
	for _, x := range o.states {
		if x.file == file && !x.lock {
			s = x
		}
	}
	if file.shareConflict(access, deny) {
		if len(file.states) == 0 {
			delete(v4.files, file.key)
		}
		return &nfs4.OpenRes{Status: nfs4.ErrShareDenied}
	}
	// Truncation asked for by an open of an existing file (UNCHECKED4
	// with size 0) happens only once the open is allowed.
	// UNCHECKED4 on an existing file ignores the attributes (RFC 7530
	// 16.16.5), except that size 0 truncates, which is how clients send
	// O_CREAT|O_TRUNC.
	if pa, _ := args.Attrs.Parse(); args.Create && !created && args.CreateMode == nfs4.CreateUnchecked &&
		args.Attrs.Mask.Has(nfs4.AttrSize) && pa.Size == 0 {
		if access&nfs4.ShareAccessWrite == 0 {
			return &nfs4.OpenRes{Status: nfs4.ErrInval}
		}
		var zero uint64
		if _, _, err := f.e.fs.SetAttrs(cred, fh, vfs.SetAttr{Size: &zero}, nil); err != nil {
			return &nfs4.OpenRes{Status: statusOf4(err)}
		}
		attrSet = nfs4.NewBitmap(nfs4.AttrSize)
	}
	if s == nil {
		s = v4.newState(o, file, f.e, fh, false)
	} else {
		s.bump()
	}
	s.access |= access
	s.deny |= deny
	s.accesses |= 1 << access
	s.denies |= 1 << deny
	res := &nfs4.OpenRes{Stateid: s.id(), Cinfo: cinfo(dc), Flags: nfs4.OpenResultLockPosix, AttrSet: attrSet}
	if c.minor == 0 && !o.confirmed {
		res.Flags |= nfs4.OpenResultConfirm
	}
	if c.minor >= 1 {
		switch args.ShareAccess & nfs4.ShareWantMask {
		case 0:
		case 0x0400: // WANT_NO_DELEG
			res.Deleg, res.Why = nfs4.DelegNoneExt, nfs4.WNDNotWanted
		case 0x0500: // WANT_CANCEL
			res.Deleg, res.Why = nfs4.DelegNoneExt, 7
		default:
			res.Deleg, res.Why = nfs4.DelegNoneExt, nfs4.WNDResource
		}
	}
	_ = dir
	c.cur = fh4{set: true, e: f.e, h: fh}
	c.setStateid(s.id())
	return res
}

// openCreate creates (or, for UNCHECKED4, finds) the file of an OPEN.
func (c *compound) openCreate(f fh4, cred vfs.Cred, args *nfs4.OpenArgs) (vfs.Handle, vfs.Attr, vfs.DirChange, bool, nfs4.Bitmap, nfs4.Status) {
	var (
		sa   vfs.SetAttr
		mode vfs.CreateMode
		set  nfs4.Bitmap
	)
	switch args.CreateMode {
	case nfs4.CreateUnchecked, nfs4.CreateGuarded:
		var st nfs4.Status
		if _, sa, st = parseSettable(args.Attrs, c.minor); st != nfs4.OK {
			return nil, vfs.Attr{}, vfs.DirChange{}, false, nil, st
		}
		mode, set = vfs.CreateUnchecked, args.Attrs.Mask
		if args.CreateMode == nfs4.CreateGuarded {
			mode = vfs.CreateGuarded
		}
	case nfs4.CreateExclusive:
		mode = vfs.CreateExclusive
	case nfs4.CreateExclusive41:
		if c.minor == 0 {
			return nil, vfs.Attr{}, vfs.DirChange{}, false, nil, nfs4.ErrInval
		}
		if !args.Attrs.Mask.Minus(exclCreatAttrs).Empty() {
			return nil, vfs.Attr{}, vfs.DirChange{}, false, nil, nfs4.ErrInval
		}
		var st nfs4.Status
		if _, sa, st = parseSettable(args.Attrs, c.minor); st != nfs4.OK {
			return nil, vfs.Attr{}, vfs.DirChange{}, false, nil, st
		}
		mode, set = vfs.CreateExclusive, args.Attrs.Mask
	default:
		return nil, vfs.Attr{}, vfs.DirChange{}, false, nil, nfs4.ErrInval
	}
	// An existing name under UNCHECKED4 is opened as it is (its size is
	// dealt with once the open is allowed).
	if mode == vfs.CreateUnchecked {
		if h, a, _, err := f.e.fs.Lookup(cred, f.h, args.Name); err == nil {
			da, _ := f.e.fs.GetAttr(f.h)
			return h, a, vfs.DirChange{Before: &da, After: &da}, false, nil, nfs4.OK
		}
	}
	attrs := sa
	if mode == vfs.CreateExclusive {
		attrs = vfs.SetAttr{}
	}
	h, a, dc, err := f.e.fs.CreateFile(cred, f.h, args.Name, mode, attrs, args.Verifier)
	if err != nil {
		return nil, vfs.Attr{}, dc, false, nil, statusOf4(err)
	}
	if mode == vfs.CreateExclusive && (sa.Mode != nil || sa.UID != nil || sa.GID != nil || sa.Size != nil) {
		if _, a2, err := f.e.fs.SetAttrs(cred, h, sa, nil); err == nil {
			a = a2
		}
	}
	return h, a, dc, true, set, nfs4.OK
}

func op4OpenConfirm(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.OpenConfirmArgs)
	f, _, st := c.needReal(nfs4.ErrIsDir)
	if st != nfs4.OK {
		return &nfs4.StateidRes{Status: st}
	}
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	if rep := c.replayed(args.Stateid, args.Seqid, nfs4.OpOpenConfirm); rep != nil {
		return rep
	}
	s, st := v4.findState(args.Stateid, c.minor)
	if st != nfs4.OK {
		return &nfs4.StateidRes{Status: st}
	}
	if s.lock || s.e != f.e || s.file.key != keyOf(f.e, f.h) {
		return &nfs4.StateidRes{Status: nfs4.ErrBadStateID}
	}
	o := s.owner
	if rep, st := c.seqCheck(o, args.Seqid, nfs4.OpOpenConfirm); rep != nil || st != nfs4.OK {
		if rep != nil {
			return rep
		}
		return &nfs4.StateidRes{Status: st}
	}
	res := &nfs4.StateidRes{}
	if o.confirmed {
		res.Status = nfs4.ErrBadStateID
	} else {
		o.confirmed = true
		s.bump()
		res.Stateid = s.id()
	}
	c.consume(o, args.Seqid, res.Status)
	return res
}

// seqStateOp is the start that CLOSE, OPEN_DOWNGRADE and LOCKU share: a
// 4.0 retransmission is answered from the owner's replay cache; then the
// stateid must be an open (lock false) or lock stateid of f, and the seqid
// the owner's next. It returns the state, or else the result to send. The
// caller holds v4.mu.
func (c *compound) seqStateOp(f fh4, sid nfs4.Stateid, seqid uint32, op nfs4.Op, lock bool) (*v4stateid, nfs4.Res) {
	if rep := c.replayed(sid, seqid, op); rep != nil {
		return nil, rep
	}
	s, st := c.stateFor(f, sid)
	if st == nfs4.OK && s.lock != lock {
		st = nfs4.ErrBadStateID
	}
	if st != nfs4.OK {
		return nil, &nfs4.StateidRes{Status: st}
	}
	if rep, st := c.seqCheck(s.owner, seqid, op); rep != nil {
		return nil, rep
	} else if st != nfs4.OK {
		return nil, &nfs4.StateidRes{Status: st}
	}
	return s, nil
}

func op4OpenDowngrade(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.OpenDowngradeArgs)
	f, _, st := c.needReal(nfs4.ErrIsDir)
	if st != nfs4.OK {
		return &nfs4.StateidRes{Status: st}
	}
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	s, early := c.seqStateOp(f, args.Stateid, args.Seqid, nfs4.OpOpenDowngrade, false)
	if early != nil {
		return early
	}
	res := &nfs4.StateidRes{}
	access, deny := args.ShareAccess&^nfs4.ShareWantMask, args.ShareDeny
	switch {
	case access == 0 || access > nfs4.ShareAccessBoth || deny > nfs4.ShareDenyBoth,
		access&^s.access != 0 || deny&^s.deny != 0,
		s.accesses&(1<<access) == 0 || s.denies&(1<<deny) == 0:
		res.Status = nfs4.ErrInval
	default:
		s.access, s.deny = access, deny
		s.bump()
		res.Stateid = s.id()
		c.setStateid(res.Stateid)
	}
	c.consume(s.owner, args.Seqid, res.Status)
	return res
}

func op4Close(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.CloseArgs)
	f, _, st := c.needReal(nfs4.ErrIsDir)
	if st != nfs4.OK {
		return &nfs4.StateidRes{Status: st}
	}
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	s, early := c.seqStateOp(f, args.Stateid, args.Seqid, nfs4.OpClose, false)
	if early != nil {
		return early
	}
	o := s.owner
	res := &nfs4.StateidRes{}
	if s.holdsLocks() {
		res.Status = nfs4.ErrLocksHeld
	} else {
		for _, x := range s.file.states {
			if x.lock && x.open == s {
				v4.removeState(x)
			}
		}
		s.bump()
		res.Stateid = s.id()
		if c.minor >= 1 {
			res.Stateid = nfs4.Stateid{Seqid: ^uint32(0)} // RFC 8881 18.2.4: the invalid special stateid
			// 4.1 has no seqid replays (the session's slots answer
			// retransmissions): nothing of the closed stateid is kept, and
			// an open owner left without opens is dropped. A client that
			// takes a fresh owner per OPEN (client/nfs does) otherwise grows
			// a record per OPEN for as long as it lives (issue 14's soak).
			v4.removeState(s)
			if len(o.states) == 0 {
				delete(o.client.owners, o.key)
			}
		} else {
			v4.closeState(s)
		}
	}
	c.consume(o, args.Seqid, res.Status)
	return res
}

// lockSpan checks the lock type and turns (offset, length) into the
// range [start, end) it names (LOCK, LOCKT and LOCKU share the rules).
func lockSpan(typ uint32, off, length uint64) (lockRange, nfs4.Status) {
	write := typ == nfs4.WriteLT || typ == nfs4.WriteWLT
	switch {
	case typ < nfs4.ReadLT || typ > nfs4.WriteWLT, length == 0:
		return lockRange{}, nfs4.ErrInval
	case length == nfs4.Uint64Max:
		return lockRange{off, ^uint64(0), write}, nfs4.OK
	case off+length < off:
		return lockRange{}, nfs4.ErrInval
	}
	return lockRange{off, off + length, write}, nfs4.OK
}

func denied(s *v4stateid, r *lockRange) nfs4.LockDenied {
	d := nfs4.LockDenied{Offset: r.start, Length: r.end - r.start, Type: nfs4.ReadLT, Owner: s.owner.owner}
	if r.end == ^uint64(0) {
		d.Length = nfs4.Uint64Max
	}
	if r.write {
		d.Type = nfs4.WriteLT
	}
	return d
}

func op4Lock(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.LockArgs)
	f, _, st := c.needReal(nfs4.ErrIsDir)
	if st != nfs4.OK {
		return &nfs4.LockRes{Status: st}
	}
	span, st := lockSpan(args.Type, args.Offset, args.Length)
	if st != nfs4.OK {
		return &nfs4.LockRes{Status: st}
	}
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	var (
		ls       *v4stateid
		seqOwner *v4owner
		seqid    uint32
		op       = nfs4.OpLock
	)
	if c.minor == 0 {
		sid, seqid := args.Locker.LockStateid, args.Locker.LockSeqid
		if args.Locker.New {
			sid, seqid = args.Locker.OpenStateid, args.Locker.OpenSeqid
		}
		if rep := c.replayed(sid, seqid, op); rep != nil {
			return rep
		}
	}
	if args.Locker.New {
		open, st := c.stateFor(f, args.Locker.OpenStateid)
		if st != nfs4.OK {
			return &nfs4.LockRes{Status: st}
		}
		if open.lock {
			return &nfs4.LockRes{Status: nfs4.ErrBadStateID}
		}
		seqOwner, seqid = open.owner, args.Locker.OpenSeqid
		if rep, st := c.seqCheck(seqOwner, seqid, op); rep != nil || st != nfs4.OK {
			if rep != nil {
				return rep
			}
			return &nfs4.LockRes{Status: st}
		}
		if c.minor == 0 && args.Locker.LockOwner.ClientID != open.owner.client.id {
			res := &nfs4.LockRes{Status: nfs4.ErrStaleClientID}
			return res
		}
		lo, _ := v4.owner(open.owner.client, args.Locker.LockOwner, true)
		lo.confirmed = true
		for _, x := range lo.states {
			if x.file == open.file {
				ls = x
			}
		}
		if ls == nil {
			ls = v4.newState(lo, open.file, f.e, f.h, true)
			ls.open = open
			ls.seqid = 0 // the first LOCK makes it 1
			lo.seqid = args.Locker.LockSeqid
		}
	} else {
		s, st := c.stateFor(f, args.Locker.LockStateid)
		if st != nfs4.OK {
			return &nfs4.LockRes{Status: st}
		}
		if !s.lock {
			return &nfs4.LockRes{Status: nfs4.ErrBadStateID}
		}
		ls, seqOwner, seqid = s, s.owner, args.Locker.LockSeqid
		if rep, st := c.seqCheck(seqOwner, seqid, op); rep != nil || st != nfs4.OK {
			if rep != nil {
				return rep
			}
			return &nfs4.LockRes{Status: st}
		}
	}
	res := c.lock(ls, args.Reclaim, span)
	if ls.seqid == 0 && res.Status != nfs4.OK {
		v4.removeState(ls) // a lock stateid is not born from a failed LOCK
	}
	c.consume(seqOwner, seqid, res.Status)
	return res
}

func (c *compound) lock(ls *v4stateid, reclaim bool, span lockRange) *nfs4.LockRes {
	v4 := c.s.v4
	cl := ls.owner.client
	switch {
	case reclaim && !v4.mayReclaim(cl):
		if v4.inGrace() {
			return &nfs4.LockRes{Status: nfs4.ErrReclaimBad}
		}
		return &nfs4.LockRes{Status: nfs4.ErrNoGrace}
	case !reclaim && (v4.inGrace() || c.minor >= 1 && !cl.reclaimDone):
		return &nfs4.LockRes{Status: nfs4.ErrGrace}
	}
	if span.write && ls.open.access&nfs4.ShareAccessWrite == 0 {
		return &nfs4.LockRes{Status: nfs4.ErrOpenMode}
	}
	if !span.write && ls.open.access&nfs4.ShareAccessRead == 0 {
		return &nfs4.LockRes{Status: nfs4.ErrOpenMode}
	}
	if s, _ := ls.file.lockConflict(span.start, span.end, span.write, ls.owner); s != nil && s.owner.client != cl {
		v4.expireConflicting(ls.file)
	}
	if s, r := ls.file.lockConflict(span.start, span.end, span.write, ls.owner); s != nil {
		return &nfs4.LockRes{Status: nfs4.ErrDenied, Denied: denied(s, r)}
	}
	ls.setRange(span.start, span.end, span.write)
	ls.bump()
	c.setStateid(ls.id())
	return &nfs4.LockRes{Stateid: ls.id()}
}

func op4LockT(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.LockTArgs)
	f, _, st := c.needReal(nfs4.ErrIsDir)
	if st != nfs4.OK {
		return &nfs4.LockRes{Test: true, Status: st}
	}
	if at, err := f.e.fs.GetAttr(f.h); err != nil {
		return &nfs4.LockRes{Test: true, Status: statusOf4(err)}
	} else if st := fileCheck(at, c.minor); st != nfs4.OK {
		return &nfs4.LockRes{Test: true, Status: st}
	}
	span, st := lockSpan(args.Type, args.Offset, args.Length)
	if st != nfs4.OK {
		return &nfs4.LockRes{Test: true, Status: st}
	}
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	cl, st := c.stateClient(args.Owner.ClientID)
	if st != nfs4.OK {
		return &nfs4.LockRes{Test: true, Status: st}
	}
	if v4.inGrace() {
		return &nfs4.LockRes{Test: true, Status: nfs4.ErrGrace}
	}
	file := v4.files[keyOf(f.e, f.h)]
	if file == nil {
		return &nfs4.LockRes{Test: true}
	}
	owner := cl.owners["l/"+args.Owner.Key()]
	if s, r := file.lockConflict(span.start, span.end, span.write, owner); s != nil && (owner != nil || s.owner.owner.Key() != args.Owner.Key()) {
		return &nfs4.LockRes{Test: true, Status: nfs4.ErrDenied, Denied: denied(s, r)}
	}
	return &nfs4.LockRes{Test: true}
}

func op4LockU(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.LockUArgs)
	f, _, st := c.needReal(nfs4.ErrIsDir)
	if st != nfs4.OK {
		return &nfs4.StateidRes{Status: st}
	}
	span, st := lockSpan(args.Type, args.Offset, args.Length)
	if st != nfs4.OK {
		return &nfs4.StateidRes{Status: st}
	}
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	s, early := c.seqStateOp(f, args.Stateid, args.Seqid, nfs4.OpLockU, true)
	if early != nil {
		return early
	}
	s.unlock(span.start, span.end)
	s.bump()
	c.consume(s.owner, args.Seqid, nfs4.OK)
	c.setStateid(s.id())
	return &nfs4.StateidRes{Stateid: s.id()}
}

func op4ReleaseLockOwner(c *compound, a nfs4.Args) nfs4.Res {
	owner := a.(*nfs4.OwnerArgs).Owner
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	cl, st := v4.client(owner.ClientID)
	if st != nfs4.OK {
		return &nfs4.StatusRes{Status: st}
	}
	o := cl.owners["l/"+owner.Key()]
	if o == nil {
		return &nfs4.StatusRes{}
	}
	for _, s := range o.states {
		if len(s.ranges) > 0 {
			return &nfs4.StatusRes{Status: nfs4.ErrLocksHeld}
		}
	}
	v4.removeOwner(o)
	return &nfs4.StatusRes{}
}

// op4DelegReturn: no delegation is ever granted, so no stateid names one.
func op4DelegReturn(c *compound, a nfs4.Args) nfs4.Res {
	sid := a.(*nfs4.StateidArgs).Stateid
	if _, _, st := c.needReal(nfs4.ErrInval); st != nfs4.OK {
		return &nfs4.StatusRes{Status: st}
	}
	v4 := c.s.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	if _, st := v4.findState(sid, c.minor); st != nfs4.OK && !sid.Special() {
		return &nfs4.StatusRes{Status: st}
	}
	return &nfs4.StatusRes{Status: nfs4.ErrBadStateID}
}

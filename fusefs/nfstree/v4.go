package nfstree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/proto/nfs4"
)

// The mount over NFSv4.1 (New4): v4Conn adapts nfs.Client4 to Conn, so the
// tree, its caching and its write-back are the same for both versions.
//
// What differs from v3:
//   - READ, WRITE and size changes use the anonymous stateid: a FUSE open
//     sends no OPEN, so the mount holds no open or lock state on the server
//     (nothing to reclaim after a server restart; share reservations of
//     other v4 clients still apply to it, as to any anonymous I/O).
//   - Creating a regular file is OPEN(create)+GETFH+GETATTR+CLOSE in one
//     COMPOUND; O_EXCL is GUARDED (a retransmission is answered from the
//     session's reply cache, so v3's EXCLUSIVE verifier is not needed).
//   - Owners are strings: numeric ones ("1000", as tristore sends) are
//     used as they are, "name@domain" is looked up in the local user and
//     group databases, anything else is nobody (65534). Owners are sent
//     numeric.
//   - The lease is renewed (SEQUENCE) every third of the server's lease
//     time while the mount is up. When the server lost the session (it
//     restarted), a new client ID and session are made and the call is
//     sent again; GRACE and DELAY answers are retried for up to graceWait.
//   - No RENAME_NOREPLACE atomicity, locks or xattrs (as over v3).

// anon is the anonymous stateid (all zeros).
var anon nfs4.Stateid

// attrMask is what the tree asks for (and what Client4's calls by handle
// return): type, size, mode, owners, times, fileid, fsid, rdev, space used.
var attrMask = nfs.AttrFullMask

type v4Conn struct {
	ids   idCache
	par   int
	stopR chan struct{}
	once  sync.Once

	mu     sync.Mutex
	c      *nfs.Client4   // the current session
	owned  []*nfs.Client4 // sessions made by renewSession, closed by close
	gaveUp bool
	redial sync.Mutex // one renewSession at a time
	// gate is held shared by every call and exclusively by renewSession:
	// no call may still be on the old session when the new one exists.
	// (tristore, restarted within the same second, can give the new
	// session the old one's ID; a late request of the old session would
	// then be taken for the new one's, and answered from its reply cache.)
	gate sync.RWMutex
}

// graceWait bounds how long a call is retried while the server answers
// NFS4ERR_GRACE or NFS4ERR_DELAY (a restarted server's grace period lasts
// one lease, 90 s on tristore by default).
const graceWait = 3 * time.Minute

// slowCall is how long a call may take before it is logged.
const slowCall = 10 * time.Second

func (v *v4Conn) client() *nfs.Client4 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.c
}

// sessionLost says the server no longer knows our session or client ID
// (it restarted, or expired us).
func sessionLost(err error) bool {
	var st nfs4.Status
	if !errors.As(err, &st) {
		return false
	}
	switch st {
	case nfs4.ErrBadSession, nfs4.ErrDeadSession, nfs4.ErrStaleClientID, nfs4.ErrExpired:
		return true
	}
	return false
}

// retryLater says the server asks us to try again later.
func retryLater(err error) bool {
	var st4 nfs4.Status
	if errors.As(err, &st4) && (st4 == nfs4.ErrGrace || st4 == nfs4.ErrDelay) {
		return true
	}
	var st nfs.Status
	return errors.As(err, &st) && st == nfs.ErrJukebox // NFS4ERR_DELAY has v3's number
}

// do runs f on the current session. When the server lost the session (a
// restart), it makes a new one and runs f again (a hard mount keeps
// working across server restarts, as over v3); GRACE and DELAY are retried
// for up to graceWait.
func (v *v4Conn) do(ctx context.Context, f func(c *nfs.Client4) error) error {
	start := time.Now()
	deadline := start.Add(graceWait)
	lost := 0
	for try := 0; ; try++ {
		v.gate.RLock()
		c := v.client()
		err := f(c)
		v.gate.RUnlock()
		if d := time.Since(start); d > slowCall && (err == nil || !retryLater(err)) {
			slog.Warn("nfs mount: slow NFSv4.1 call", "took", d.Round(time.Millisecond), "tries", try+1, "err", err)
		}
		switch {
		case err == nil:
			return nil
		case sessionLost(err) && lost < 3:
			lost++
			if rerr := v.renewSession(ctx, c); rerr != nil {
				return fmt.Errorf("%w (new session: %v)", err, rerr)
			}
		case retryLater(err) && time.Now().Before(deadline):
			select {
			case <-time.After(min(50*time.Millisecond<<min(try, 5), time.Second)):
			case <-ctx.Done():
				return err
			}
		default:
			return err
		}
	}
}

// renewSession replaces old (whose session the server lost) with a new
// client ID and session, unless another call already did.
func (v *v4Conn) renewSession(ctx context.Context, old *nfs.Client4) error {
	v.redial.Lock()
	defer v.redial.Unlock()
	if v.client() != old {
		return nil
	}
	v.gate.Lock() // waits for the calls still on old (they fail the same way)
	defer v.gate.Unlock()
	nc, err := old.Redial(ctx)
	if err != nil {
		return err
	}
	v.mu.Lock()
	v.c = nc
	v.owned = append(v.owned, nc)
	if v.gaveUp {
		nc.GiveUp()
	}
	v.mu.Unlock()
	slog.Info("nfs mount: the server lost our NFSv4.1 session (restart?); made a new one")
	return nil
}

// GiveUp makes calls waiting for a down server fail (see nfs.Client.GiveUp).
func (v *v4Conn) GiveUp() {
	v.mu.Lock()
	v.gaveUp = true
	c := v.c
	v.mu.Unlock()
	c.GiveUp()
}

// New4 builds the tree over an NFSv4.1 session; root is the directory to
// mount (from c.LookupPath). Close stops the lease renewal; it does not
// close c.
func New4(c *nfs.Client4, root nfs.FH, opts Options) (*FS, error) {
	if root == nil {
		return nil, errors.New("nfstree: no root handle")
	}
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	vc := &v4Conn{c: c, par: 4, stopR: make(chan struct{})}
	lease := 60 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if fa, err := c.GetattrMask(ctx, root, nfs4.NewBitmap(nfs4.AttrLeaseTime)); err == nil && fa.LeaseTime > 0 {
		lease = time.Duration(fa.LeaseTime) * time.Second
	}
	go vc.renew(max(lease/3, time.Second))
	f := newFS(vc, root, opts)
	f.closer = vc.close
	return f, nil
}

func (v *v4Conn) close() {
	v.once.Do(func() {
		close(v.stopR)
		v.mu.Lock()
		owned := v.owned
		v.owned = nil
		v.mu.Unlock()
		// DESTROY_SESSION/CLIENTID are a courtesy (the server expires
		// them after a lease): do not hold up an unmount for a down server.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for _, c := range owned {
			c.Close(ctx)
		}
	})
}

// renew keeps the client's lease while the mount is up (a mount that is
// idle sends nothing else).
func (v *v4Conn) renew(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-v.stopR:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), every)
			v.do(ctx, func(c *nfs.Client4) error { return c.Renew(ctx) })
			cancel()
		}
	}
}

// idCache maps owner strings to ids.
type idCache struct {
	mu sync.Mutex
	m  map[string]uint32
}

const nobody = 65534

func (ic *idCache) id(s string, group bool) uint32 {
	if v, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(v)
	}
	key := s
	if group {
		key = "g:" + s
	}
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if v, ok := ic.m[key]; ok {
		return v
	}
	name, _, _ := strings.Cut(s, "@")
	id := uint32(nobody)
	if group {
		if g, err := user.LookupGroup(name); err == nil {
			if v, err := strconv.ParseUint(g.Gid, 10, 32); err == nil {
				id = uint32(v)
			}
		}
	} else if u, err := user.Lookup(name); err == nil {
		if v, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
			id = uint32(v)
		}
	}
	if ic.m == nil || len(ic.m) > 1024 {
		ic.m = map[string]uint32{}
	}
	ic.m[key] = id
	return id
}

func t4(t nfs4.Time) time.Time { return time.Unix(t.Sec, int64(t.Nsec)) }

func (v *v4Conn) attr(fa *nfs4.Fattr) *nfs.Attr {
	if fa == nil {
		return nil
	}
	return &nfs.Attr{Type: nfs.FileType(fa.Type), Mode: fa.Mode & 0o7777, Nlink: fa.NumLinks,
		UID: v.ids.id(fa.Owner, false), GID: v.ids.id(fa.OwnerGroup, true), Size: fa.Size, Used: fa.SpaceUsed,
		RdevMajor: fa.RawDev[0], RdevMinor: fa.RawDev[1], FSID: fa.FSID.Major, FileID: fa.FileID,
		Atime: t4(fa.TimeAccess), Mtime: t4(fa.TimeModify), Ctime: t4(fa.TimeMetadata)}
}

// sattr converts a v3 SetAttr into fattr4 values and their mask.
func sattr(s nfs.SetAttr) nfs4.RawFattr {
	var fa nfs4.Fattr
	var bits []int
	if s.Size != nil {
		fa.Size = *s.Size
		bits = append(bits, nfs4.AttrSize)
	}
	if s.Mode != nil {
		fa.Mode = *s.Mode & 0o7777
		bits = append(bits, nfs4.AttrMode)
	}
	if s.UID != nil {
		fa.Owner = strconv.FormatUint(uint64(*s.UID), 10)
		bits = append(bits, nfs4.AttrOwner)
	}
	if s.GID != nil {
		fa.OwnerGroup = strconv.FormatUint(uint64(*s.GID), 10)
		bits = append(bits, nfs4.AttrOwnerGroup)
	}
	setTime := func(now bool, t *time.Time, dst *nfs4.SetTime, bit int) {
		switch {
		case now:
			*dst = nfs4.SetTime{Set: true, Server: true}
		case t != nil:
			*dst = nfs4.SetTime{Set: true, T: nfs4.Time{Sec: t.Unix(), Nsec: uint32(t.Nanosecond())}}
		default:
			return
		}
		bits = append(bits, bit)
	}
	setTime(s.SetAtimeNow, s.Atime, &fa.TimeAccessSet, nfs4.AttrTimeAccessSet)
	setTime(s.SetMtimeNow, s.Mtime, &fa.TimeModifySet, nfs4.AttrTimeModifySet)
	return nfs.RawAttrs(&fa, nfs4.NewBitmap(bits...))
}

func (v *v4Conn) withAttr(fh nfs.FH, fa *nfs4.Fattr, err error) (nfs.FH, *nfs.Attr, error) {
	if err != nil {
		return nil, nil, err
	}
	return fh, v.attr(fa), nil
}

func (v *v4Conn) Getattr(ctx context.Context, fh nfs.FH) (*nfs.Attr, error) {
	var fa *nfs4.Fattr
	err := v.do(ctx, func(c *nfs.Client4) (err error) { fa, err = c.GetattrMask(ctx, fh, attrMask); return })
	if err != nil {
		return nil, err
	}
	return v.attr(fa), nil
}

func (v *v4Conn) Setattr(ctx context.Context, fh nfs.FH, s nfs.SetAttr, _ *time.Time) (nfs.WCC, error) {
	var fa *nfs4.Fattr
	if err := v.do(ctx, func(c *nfs.Client4) (err error) { fa, err = c.Setattr(ctx, fh, anon, sattr(s)); return }); err != nil {
		return nfs.WCC{}, err
	}
	return nfs.WCC{After: v.attr(fa)}, nil
}

func (v *v4Conn) Lookup(ctx context.Context, dir nfs.FH, name string) (nfs.FH, *nfs.Attr, error) {
	var fh nfs.FH
	var fa *nfs4.Fattr
	err := v.do(ctx, func(c *nfs.Client4) (err error) { fh, fa, err = c.Lookup(ctx, dir, name); return })
	return v.withAttr(fh, fa, err)
}

func (v *v4Conn) Create(ctx context.Context, dir nfs.FH, name string, how nfs.CreateMode, s nfs.SetAttr, _ nfs.Verifier) (nfs.FH, *nfs.Attr, error) {
	var fh nfs.FH
	var fa *nfs4.Fattr
	err := v.do(ctx, func(c *nfs.Client4) (err error) {
		fh, fa, err = c.CreateFile(ctx, dir, name, how != nfs.Unchecked, sattr(s))
		return
	})
	return v.withAttr(fh, fa, err)
}

func (v *v4Conn) create(ctx context.Context, dir nfs.FH, args nfs4.CreateArgs) (nfs.FH, *nfs.Attr, error) {
	var fh nfs.FH
	var fa *nfs4.Fattr
	err := v.do(ctx, func(c *nfs.Client4) (err error) { fh, fa, err = c.CreateObject(ctx, dir, args); return })
	return v.withAttr(fh, fa, err)
}

func (v *v4Conn) Mkdir(ctx context.Context, dir nfs.FH, name string, s nfs.SetAttr) (nfs.FH, *nfs.Attr, error) {
	return v.create(ctx, dir, nfs4.CreateArgs{Type: nfs4.TypeDir, Name: name, Attrs: sattr(s)})
}

func (v *v4Conn) Mknod(ctx context.Context, dir nfs.FH, name string, typ nfs.FileType, s nfs.SetAttr, major, minor uint32) (nfs.FH, *nfs.Attr, error) {
	return v.create(ctx, dir, nfs4.CreateArgs{Type: nfs4.FileType(typ), Dev: [2]uint32{major, minor}, Name: name, Attrs: sattr(s)})
}

func (v *v4Conn) Symlink(ctx context.Context, dir nfs.FH, name, target string, s nfs.SetAttr) (nfs.FH, *nfs.Attr, error) {
	return v.create(ctx, dir, nfs4.CreateArgs{Type: nfs4.TypeLnk, LinkData: target, Name: name, Attrs: sattr(s)})
}

func (v *v4Conn) Remove(ctx context.Context, dir nfs.FH, name string) error {
	return v.do(ctx, func(c *nfs.Client4) error { return c.Remove(ctx, dir, name) })
}

func (v *v4Conn) Rmdir(ctx context.Context, dir nfs.FH, name string) error {
	return v.do(ctx, func(c *nfs.Client4) error { return c.Remove(ctx, dir, name) })
}

func (v *v4Conn) Rename(ctx context.Context, fromDir nfs.FH, fromName string, toDir nfs.FH, toName string) error {
	return v.do(ctx, func(c *nfs.Client4) error { return c.Rename(ctx, fromDir, fromName, toDir, toName) })
}

func (v *v4Conn) Link(ctx context.Context, fh nfs.FH, dir nfs.FH, name string) (*nfs.Attr, error) {
	var fa *nfs4.Fattr
	err := v.do(ctx, func(c *nfs.Client4) (err error) { fa, err = c.Link(ctx, fh, dir, name); return })
	if err != nil {
		return nil, err
	}
	return v.attr(fa), nil
}

func (v *v4Conn) Readlink(ctx context.Context, fh nfs.FH) (string, error) {
	var l string
	err := v.do(ctx, func(c *nfs.Client4) (err error) { l, err = c.Readlink(ctx, fh); return })
	return l, err
}

// readdirMask: the entries' attributes and handles (READDIRPLUS's worth).
var readdirMask = nfs4.NewBitmap(append(attrMask.Bits(), nfs4.AttrFileHandle, nfs4.AttrRdattrError)...)

func (v *v4Conn) Readdirplus(ctx context.Context, dir nfs.FH) ([]nfs.DirEntry, error) {
	var ents []nfs4.DirEntry
	err := v.do(ctx, func(c *nfs.Client4) (err error) { ents, err = c.Readdir(ctx, dir, readdirMask); return })
	if err != nil {
		return nil, err
	}
	out := make([]nfs.DirEntry, 0, len(ents))
	for _, e := range ents {
		de := nfs.DirEntry{Name: e.Name, Cookie: e.Cookie}
		if fa, st := e.Attrs.Parse(); st == nfs4.OK {
			de.FileID = fa.FileID
			if e.Attrs.Mask.Has(nfs4.AttrType) && fa.RdattrError == nfs4.OK && len(fa.FileHandle) > 0 {
				de.Attr = v.attr(&fa)
				de.FH = append(nfs.FH(nil), fa.FileHandle...)
			}
		}
		out = append(out, de)
	}
	return out, nil
}

func (v *v4Conn) Readdir(ctx context.Context, dir nfs.FH) ([]nfs.DirEntry, error) {
	return v.Readdirplus(ctx, dir)
}

var fsstatMask = nfs4.NewBitmap(nfs4.AttrFilesAvail, nfs4.AttrFilesFree, nfs4.AttrFilesTotal,
	nfs4.AttrSpaceAvail, nfs4.AttrSpaceFree, nfs4.AttrSpaceTotal)

func (v *v4Conn) Fsstat(ctx context.Context, fh nfs.FH) (*nfs.FSStat, error) {
	var fa *nfs4.Fattr
	err := v.do(ctx, func(c *nfs.Client4) (err error) { fa, err = c.GetattrMask(ctx, fh, fsstatMask); return })
	if err != nil {
		return nil, err
	}
	return &nfs.FSStat{TotalBytes: fa.SpaceTotal, FreeBytes: fa.SpaceFree, AvailBytes: fa.SpaceAvail,
		TotalFiles: fa.FilesTotal, FreeFiles: fa.FilesFree, AvailFiles: fa.FilesAvail}, nil
}

// ReadAt reads p at off in rsize pieces, up to v.par at once.
func (v *v4Conn) ReadAt(ctx context.Context, fh nfs.FH, p []byte, off uint64) (int, error) {
	rs := int(v.client().Rsize())
	var mu sync.Mutex
	end := len(p)
	err := pieces(ctx, len(p), rs, v.par, func(ctx context.Context, lo, hi int) error {
		got := 0
		for tries := 0; lo+got < hi && tries < 64; tries++ {
			var data []byte
			var eof bool
			err := v.do(ctx, func(c *nfs.Client4) (err error) {
				data, eof, err = c.Read(ctx, fh, anon, off+uint64(lo+got), uint32(hi-lo-got))
				return
			})
			if err != nil {
				return err
			}
			got += copy(p[lo+got:hi], data)
			if eof || len(data) == 0 {
				mu.Lock()
				end = min(end, lo+got)
				mu.Unlock()
				return nil
			}
		}
		if lo+got < hi {
			return fmt.Errorf("nfs: READ made no progress at offset %d", off+uint64(lo+got))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if end < len(p) {
		return end, io.EOF
	}
	return len(p), nil
}

// pieces runs f on [lo, hi) pieces of at most size bytes of [0, n), up to
// par at once; the first error is returned.
func pieces(ctx context.Context, n, size, par int, f func(ctx context.Context, lo, hi int) error) error {
	if n <= size {
		if n == 0 {
			return nil
		}
		return f(ctx, 0, n)
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for lo := 0; lo < n; lo += size {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(ctx, lo, hi); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}(lo, min(lo+size, n))
	}
	wg.Wait()
	return first
}

func (v *v4Conn) Write(ctx context.Context, fh nfs.FH, off uint64, data []byte, how nfs.Stable) (nfs.WriteResult, error) {
	var wr nfs4.WriteRes
	err := v.do(ctx, func(c *nfs.Client4) (err error) { wr, err = c.Write(ctx, fh, anon, off, data, uint32(how)); return })
	if err != nil {
		return nfs.WriteResult{}, err
	}
	return nfs.WriteResult{Count: wr.Count, Committed: nfs.Stable(wr.Committed), Verf: nfs.Verifier(wr.Verf)}, nil
}

func (v *v4Conn) Wsize() uint32 { return v.client().Wsize() }

// NewUnstable tracks UNSTABLE writes to fh with nfs.UnstableWriter (every
// uncommitted byte kept, resent when the write verifier changes, i.e. the
// server restarted), writing and committing through this session.
func (v *v4Conn) NewUnstable(fh nfs.FH) Unstable {
	return nfs.NewUnstableOps(nfs.UnstableOps{
		Write: func(ctx context.Context, off uint64, data []byte) (nfs.WriteResult, error) {
			return v.Write(ctx, fh, off, data, nfs.Unstable)
		},
		Commit: func(ctx context.Context) (nfs.Verifier, error) {
			var cv [nfs4.VerifierSize]byte
			err := v.do(ctx, func(c *nfs.Client4) (err error) { cv, err = c.Commit(ctx, fh); return })
			return nfs.Verifier(cv), err
		},
		Wsize:    func() int { return int(v.Wsize()) },
		Parallel: v.par,
	})
}

var _ Conn = (*v4Conn)(nil)

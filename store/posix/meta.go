package posix

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/newdir"
)

// record is the metadata kept with one object file (xattr value or sidecar).
// Size and MtimeNs say which content ETag was computed for; Ino ties a
// sidecar to one inode (0 in xattrs, where the file is implicit).
type record struct {
	ETag    string            `json:"etag"`
	Size    int64             `json:"size"`
	MtimeNs int64             `json:"mtime"`
	Ino     uint64            `json:"ino,omitempty"`
	CT      string            `json:"ct,omitempty"`
	User    map[string]string `json:"um,omitempty"`
	Headers map[string]string `json:"h,omitempty"`
	Sums    map[string]string `json:"cs,omitempty"`
	ACL     string            `json:"acl,omitempty"`
	Owner   string            `json:"own,omitempty"`
	Tags    map[string]string `json:"tg,omitempty"`
	Parts   []partRec         `json:"parts,omitempty"`
	// Key is the object's key for a file of the hidden area (hidden.go),
	// whose name is only a hash of it; "" for plain files, whose key is
	// their path.
	Key string `json:"key,omitempty"`
	// Versioning (versions.go): the version's ID ("" = null), its
	// creation sequence (orders versions) and whether it is a delete marker.
	VersionID string `json:"vid,omitempty"`
	VSeq      int64  `json:"vseq,omitempty"`
	DM        bool   `json:"dm,omitempty"`
	// Object Lock of this version.
	LockMode  string `json:"lm,omitempty"`
	LockUntil int64  `json:"lu,omitempty"` // unix ns
	LegalHold bool   `json:"lh,omitempty"`
	// Enc is the S3 front end's encryption envelope (store.ObjectMeta.Encryption).
	Enc map[string]string `json:"enc,omitempty"`
}

type partRec struct {
	N int    `json:"n"`
	S int64  `json:"s"`
	E string `json:"e"`
	// C: the part's checksums of the algorithms the object has a
	// whole-object checksum of (GetObjectAttributes lists them per part).
	C map[string]string `json:"c,omitempty"`
}

func (r *record) setMeta(m store.ObjectMeta) {
	r.CT, r.User, r.Headers, r.Sums, r.ACL, r.Owner, r.Tags = m.ContentType, m.UserMeta, m.Headers, m.Checksums, m.ACL, m.Owner, m.Tags
	r.LockMode, r.LegalHold, r.LockUntil = m.LockMode, m.LegalHold, 0
	r.Enc = m.Encryption
	if !m.LockUntil.IsZero() {
		r.LockUntil = m.LockUntil.UnixNano()
	}
}

// updateMeta is setMeta for a metadata-only change (UpdateMeta,
// UpdateVersionMeta): the encryption envelope describes the content, which
// does not change, so it stays whatever meta says (a tagging or ACL update
// that left it out must not make the object unreadable).
func (r *record) updateMeta(m store.ObjectMeta) {
	enc := r.Enc
	r.setMeta(m)
	r.Enc = enc
}

func (r *record) meta() store.ObjectMeta {
	ct := r.CT
	if ct == "" {
		ct = "application/octet-stream"
	}
	m := store.ObjectMeta{ContentType: ct, UserMeta: r.User, Headers: r.Headers, Checksums: r.Sums, ACL: r.ACL, Owner: r.Owner, Tags: r.Tags,
		LockMode: r.LockMode, LegalHold: r.LegalHold, Encryption: r.Enc}
	if r.LockUntil != 0 {
		m.LockUntil = time.Unix(0, r.LockUntil).UTC()
	}
	return m
}

func (r *record) info(bucket, key string, st *unix.Stat_t) store.ObjectInfo {
	oi := store.ObjectInfo{
		Bucket:       bucket,
		Key:          key,
		Size:         st.Size,
		ModTime:      time.Unix(st.Mtim.Unix()).UTC(),
		ETag:         r.ETag,
		Meta:         r.meta(),
		VersionID:    r.VersionID,
		DeleteMarker: r.DM,
	}
	if len(r.Parts) > 0 {
		oi.Parts = make([]store.PartInfo, len(r.Parts))
		for i, p := range r.Parts {
			oi.Parts[i] = store.PartInfo{Number: p.N, Size: p.S, ETag: p.E, ModTime: oi.ModTime, Checksums: p.C}
		}
	}
	return oi
}

// fresh reports whether r describes the content whose stat is st.
func (r *record) fresh(st *unix.Stat_t) bool {
	return r != nil && r.ETag != "" && r.Size == st.Size && r.MtimeNs == st.Mtim.Nano() && (r.Ino == 0 || r.Ino == st.Ino)
}

// sidecarPath is where the fallback metadata of the file p lives: under
// .tristore/meta/ mirroring the tree for objects, next to the file for
// anything already inside .tristore (multipart parts).
func (b *Backend) sidecarPath(p string) string {
	if strings.HasPrefix(p, b.sys+string(filepath.Separator)) {
		return p + ".json"
	}
	rel, err := filepath.Rel(b.root, p)
	if err != nil {
		return p + ".json"
	}
	return filepath.Join(b.metaDir(), rel+".json")
}

// readRecord returns the metadata of file p (fd f if non-nil) whose inode
// is ino, or nil when there is none (a file created by another view).
func (b *Backend) readRecord(p string, f *os.File, ino uint64) *record {
	b.vers.records.Add(1) // counted for the listing-cost tests
	if b.useXattr {
		if data, err := getxattr(p, f, metaXattr); err == nil {
			var r record
			if json.Unmarshal(data, &r) == nil {
				return &r
			}
		}
	}
	for _, r := range b.readSidecar(p) {
		if r.Ino == ino {
			return &r
		}
	}
	return nil
}

// readSidecar returns the records of p's sidecar. A sidecar holds the
// record of the current file and, while a Put is being published, the one
// of the file it replaces (see writeRecord): each names its inode.
func (b *Backend) readSidecar(p string) []record {
	data, err := os.ReadFile(b.sidecarPath(p))
	if err != nil {
		return nil
	}
	var rs []record
	if json.Unmarshal(data, &rs) != nil {
		return nil
	}
	return rs
}

// getxattr reads one xattr through the fd when there is one (so it belongs
// to the opened version) or else by path, growing the buffer as needed.
func getxattr(p string, f *os.File, name string) ([]byte, error) {
	buf := make([]byte, 1024)
	for range 8 {
		var n int
		var err error
		if f != nil {
			n, err = unix.Fgetxattr(int(f.Fd()), name, buf)
		} else {
			n, err = unix.Lgetxattr(p, name, buf)
		}
		if errors.Is(err, syscall.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
	return nil, syscall.ERANGE
}

// writeRecord stores r for file p (fd f if non-nil, st its stat). With
// xattrs it falls back to a sidecar only when the value does not fit.
//
// A sidecar cannot be renamed together with the data file, so it is keyed
// by inode and written before the rename: it keeps the record of the file
// now at p (the old version, whose inode differs) next to the new one.
// A crash before the rename leaves the old file with its own record; after
// it, the new inode finds its record; the next write drops the stale one.
// Callers hold keyLock(p) in sidecar mode. durable fsyncs the sidecar (an
// xattr is made durable by the caller's fsync of f).
func (b *Backend) writeRecord(p string, f *os.File, st *unix.Stat_t, r *record, durable bool) error {
	if b.useXattr {
		r.Ino = 0
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if f != nil {
			err = unix.Fsetxattr(int(f.Fd()), metaXattr, data, 0)
		} else {
			err = unix.Lsetxattr(p, metaXattr, data, 0)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.E2BIG) && !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.ERANGE) && !errors.Is(err, syscall.ENOTSUP) {
			return fsErr(err)
		}
		// Too big for this file system's xattr space: drop any stale value
		// and use the sidecar.
		if f != nil {
			unix.Fremovexattr(int(f.Fd()), metaXattr)
		} else {
			unix.Lremovexattr(p, metaXattr)
		}
	}
	r.Ino = st.Ino
	rs := []record{*r}
	var cur unix.Stat_t
	if unix.Lstat(p, &cur) == nil && cur.Ino != st.Ino {
		for _, old := range b.readSidecar(p) {
			if old.Ino == cur.Ino {
				rs = append(rs, old)
				break
			}
		}
	}
	data, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	return b.writeFileAtomic(b.sidecarPath(p), data, durable)
}

// lockSidecar takes keyLock(p) in sidecar mode (a no-op with xattrs).
func (b *Backend) lockSidecar(p string) func() {
	if b.useXattr {
		return func() {}
	}
	l := b.keyLock(p)
	l.Lock()
	return l.Unlock
}

// removeSidecar deletes the fallback metadata of p (if any).
func (b *Backend) removeSidecar(p string) {
	sp := b.sidecarPath(p)
	if os.Remove(sp) == nil && !strings.HasSuffix(p, ".json") {
		b.removeEmptyParents(b.metaDir(), filepath.Dir(sp))
	}
}

// writeFileAtomic writes data to path via a temp file and rename, creating
// parent directories; with sync it also makes the result durable,
// including the entries of the directories it created (a sidecar in a new
// .tristore/meta/<bucket>/<dir>/ is lost in a power cut unless every new
// directory's parent is fsynced too).
func (b *Backend) writeFileAtomic(path string, data []byte, sync bool) error {
	dir := filepath.Dir(path)
	var f *os.File
	var err error
	var changed []string // parents of the directories made here
	// A concurrent removeSidecar may rmdir an empty parent between our
	// mkdirAll and OpenFile (or inside mkdirAll, which then fails with
	// ENOENT): both are retried, a bounded number of times.
	for range 20 {
		f, err = os.OpenFile(b.tempPath(dir), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		var c []string
		if c, err = mkdirAll(dir, 64); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fsErr(err)
		}
		changed = append(changed, c...)
	}
	if err != nil {
		return fsErr(err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	durable, renamed := false, false
	if err == nil && sync && b.noJournal {
		// The file replaced is kept until the rename is durable, as a
		// replaced object's (victim.go); writers of one path take turns
		// from the hold to the rename, so the file replaced is the one
		// held and given a second name.
		l := atomicLock(path)
		l.Lock()
		victim := victimOf(path, true, b.tmpDir, b.tempName)
		defer func() { releaseVictim(victim, durable, renamed) }()
		if hookBeforeAtomicRename != nil {
			hookBeforeAtomicRename(path)
		}
		err = os.Rename(tmp, path)
		l.Unlock()
		renamed = err == nil
	} else if err == nil {
		err = os.Rename(tmp, path)
		renamed = err == nil
	}
	if err != nil {
		b.removeFileRetired(tmp)
		return fsErr(err)
	}
	if !sync {
		return nil
	}
	if err := fsyncDir(dir); err != nil {
		return err
	}
	for i := len(changed) - 1; i >= 0; i-- {
		if !newdir.HasUnsettledChild(changed[i]) {
			continue // fsyncDir(dir) made it durable (see syncMade)
		}
		if err := fsyncDir(changed[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	durable = true
	return nil
}

// atomicLocks serialise writeFileAtomic's hold-and-rename per path (its
// own set: callers may hold a keyLock stripe, see lockSidecar).
var atomicLocks [16]sync.Mutex

func atomicLock(path string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(path))
	return &atomicLocks[h.Sum32()%uint32(len(atomicLocks))]
}

// hookBeforeAtomicRename, set only by tests, runs just before
// writeFileAtomic's rename on a file system without a journal.
var hookBeforeAtomicRename func(path string)

// mkdirAll is os.MkdirAll (mode 0755, at most depth levels) that returns
// the directories whose entries it changed: the parent of every directory
// it made, outermost first.
func mkdirAll(dir string, depth int) ([]string, error) {
	fi, err := os.Stat(dir)
	if err == nil {
		if fi.IsDir() {
			return nil, nil
		}
		return nil, &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	}
	parent := filepath.Dir(dir)
	if parent == dir || depth <= 0 {
		return nil, err
	}
	changed, err := mkdirAll(parent, depth-1)
	if err != nil {
		return nil, err
	}
	if err := newdir.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return changed, nil
		}
		return nil, err
	}
	return append(changed, parent), nil
}

// hashFile computes the hex MD5 of the whole file, checking ctx between
// chunks (a stale block volume can be gigabytes).
func hashFile(ctx context.Context, f *os.File) (string, error) {
	h := md5.New()
	buf := getBuf()
	defer putBuf(buf)
	for off := int64(0); ; {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := f.ReadAt(*buf, off)
		h.Write((*buf)[:n])
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// refresh returns a record valid for the file's current content: r itself
// when fresh, else one whose ETag is recomputed (multipart part info is
// dropped, the content no longer matches it). The new record is saved when
// the file did not change while it was hashed.
func (b *Backend) refresh(ctx context.Context, p string, f *os.File, st *unix.Stat_t, r *record) (*record, error) {
	if r.fresh(st) {
		return r, nil
	}
	if r != nil && r.Ino != 0 && r.Ino != st.Ino {
		r = nil // a sidecar of a file that was replaced: none of it applies
	}
	if f == nil {
		var err error
		var st2 unix.Stat_t
		f, st2, err = openRegular(p, os.O_RDONLY, 0)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		*st = st2
	}
	etag, err := hashFile(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("hashing %s: %w", p, err)
	}
	nr := &record{}
	if r != nil {
		*nr = *r
	}
	nr.ETag, nr.Size, nr.MtimeNs, nr.Parts = etag, st.Size, st.Mtim.Nano(), nil
	var after unix.Stat_t
	if unix.Fstat(int(f.Fd()), &after) == nil && after.Size == st.Size && after.Mtim == st.Mtim {
		unlock := b.lockSidecar(p)
		defer unlock()
		if err := b.writeRecord(p, f, st, nr, false); err != nil {
			b.log.Debug("posix store: could not save recomputed ETag", "path", p, "err", err)
		}
	}
	return nr, nil
}

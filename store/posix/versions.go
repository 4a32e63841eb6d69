package posix

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/inuse"
)

// Object versions (S3 versioning). The current version of a key stays
// where an unversioned object lives (its plain file, or its file in the
// hidden keys area), so NFS and iSCSI keep seeing the latest data. Older
// versions and delete markers live in the bucket's hidden area:
//
//	DATA/<bucket>/.tristore-hidden/versions/<sha256 hex of key>/<version ID>
//	    one file per older version (content and metadata record, which
//	    holds the key, the version ID and its sequence number), or an empty
//	    file whose record says it is a delete marker; "null" is the null
//	    version's name.
//
// Version IDs are 32 hex digits: the creation sequence (nanoseconds, kept
// strictly increasing in this process) then 8 random bytes. Versions of a
// key are ordered by that sequence (kept in the record, also for the null
// version, whose ID says nothing about its age).
//
// The latest version is the current file when there is one, else the
// newest entry of the versions directory (then a delete marker, or a
// version that a crash left before it was made current again). An entry
// with the same ID as the current file is the same version (a crash
// between preserving the old version and publishing the new one leaves
// that duplicate) and is not listed.
//
// Crash order: a replaced current version is first hard-linked into the
// versions directory (record with its key written, file and directory
// fsynced), only then is the new version renamed over it; a delete marker
// is written (temp, fsync, rename, directory fsync) before the current
// file is unlinked. So an acknowledged version is never lost.
const hiddenVersionsDir = "versions"

const nullVersion = "null"

// verLocks serialise the versioning steps of one key (preserve, publish,
// mark, promote); they are separate from keyLocks, which publishMode takes.
var verLocks [64]sync.Mutex

func verLock(bucket, key string) func() {
	h := fnv.New32a()
	h.Write([]byte(bucket))
	h.Write([]byte{0})
	h.Write([]byte(key))
	l := &verLocks[h.Sum32()%uint32(len(verLocks))]
	l.Lock()
	return l.Unlock
}

var lastSeq atomic.Int64

// nextSeq returns a strictly increasing sequence number (wall-clock ns).
func nextSeq() int64 {
	for {
		now, last := time.Now().UnixNano(), lastSeq.Load()
		if now <= last {
			now = last + 1
		}
		if lastSeq.CompareAndSwap(last, now) {
			return now
		}
	}
}

func newVersionID(seq int64) string { return fmt.Sprintf("%016x%s", seq, randomHex(8)) }

// validVersionID reports whether id could name a version.
func validVersionID(id string) bool {
	if id == nullVersion {
		return true
	}
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (b *Backend) versionsDir(bucket string) string {
	return filepath.Join(b.bucketPath(bucket), hiddenDirName, hiddenVersionsDir)
}

func (b *Backend) versionDir(bucket, key string) string {
	return filepath.Join(b.versionsDir(bucket), hiddenName(key))
}

// versioning returns the bucket's versioning state ("" = never enabled).
func (b *Backend) versioning(ctx context.Context, bucket string) string {
	v, _ := b.GetBucketConfig(ctx, bucket, store.VersioningConfig)
	return v
}

// verID is the wire form of a record's version ID.
func verID(id string) string {
	if id == "" {
		return nullVersion
	}
	return id
}

// verEntry is one file of a key's versions directory.
type verEntry struct {
	id   string
	path string
	rec  *record
	st   unix.Stat_t
}

func (e *verEntry) seq() int64 {
	if e.rec.VSeq != 0 {
		return e.rec.VSeq
	}
	return e.st.Mtim.Nano()
}

func (e *verEntry) info(bucket, key string) store.ObjectInfo {
	oi := e.rec.info(bucket, key, &e.st)
	oi.VersionID = e.rec.VersionID
	return oi
}

// readVersions returns the entries of key's versions directory, newest first.
func (b *Backend) readVersions(bucket, key string) ([]verEntry, error) {
	dir := b.versionDir(bucket, key)
	names, err := versionNames(dir)
	if err != nil {
		return nil, err
	}
	var out []verEntry
	for _, n := range names {
		if strings.HasPrefix(n, store.ReservedPrefix) || !validVersionID(n) {
			continue
		}
		e := verEntry{id: n, path: filepath.Join(dir, n)}
		if unix.Lstat(e.path, &e.st) != nil || e.st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		e.rec = b.readRecord(e.path, nil, e.st.Ino)
		if e.rec == nil || e.rec.Key != key || verID(e.rec.VersionID) != n {
			continue // not (yet) a complete version of this key
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq() > out[j].seq() })
	return out, nil
}

// current opens the current version of loc's key; ok is false when there is none.
func (b *Backend) current(ctx context.Context, loc keyLoc) (f *os.File, p string, st unix.Stat_t, rec *record, ok bool, err error) {
	f, p, st, rec, err = b.openObject(ctx, loc.bucket, loc.key)
	if errors.Is(err, store.ErrNoSuchKey) {
		return nil, "", st, nil, false, nil
	}
	return f, p, st, rec, err == nil, err
}

// preserve hard-links the current version (open as f at p) into the
// versions directory under its own ID, with a record naming its key, and
// makes that durable before anything replaces or removes p.
func (b *Backend) preserve(loc keyLoc, f *os.File, st *unix.Stat_t, rec *record) error {
	dir := b.versionDir(loc.bucket, loc.key)
	changed, err := mkdirParents(b.bucketPath(loc.bucket), dir)
	if err != nil {
		return err
	}
	nr := *rec
	nr.Key = loc.key
	if nr.VSeq == 0 {
		nr.VSeq = st.Mtim.Nano()
	}
	final := filepath.Join(dir, verID(nr.VersionID))
	tmp := b.tempPath(dir)
	if err := os.Link(f.Name(), tmp); err != nil {
		return fsErr(err)
	}
	rp, rf := tmp, f // xattr: on the inode (through f); sidecar: at the final path
	if !b.useXattr {
		rp, rf = final, nil
		unlock := b.lockSidecar(final)
		err = b.writeRecord(final, nil, st, &nr, true)
		unlock()
	} else {
		err = b.writeRecord(rp, rf, st, &nr, true)
	}
	if err == nil && b.useXattr {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		os.Remove(tmp)
		return fsErr(err)
	}
	if err := fsyncDir(dir); err != nil {
		return err
	}
	return syncMade(changed)
}

// publishVersion is publishKey on a bucket with versioning on: it gives
// rec its version (a new ID when Enabled, the null version when
// Suspended), preserves the version it replaces, publishes, and (when
// Suspended) drops the older null version the new one replaces.
func (b *Backend) publishVersion(f *os.File, loc keyLoc, hidden bool, changed []string, rec *record, noReplace bool, state string) (unix.Stat_t, error) {
	unlock := verLock(loc.bucket, loc.key)
	defer unlock()
	rec.Key, rec.VSeq, rec.VersionID = loc.key, nextSeq(), ""
	if state == store.VersioningEnabled {
		rec.VersionID = newVersionID(rec.VSeq)
	}
	if !noReplace {
		cf, _, cst, crec, ok, err := b.current(context.Background(), loc)
		if err != nil {
			b.dropTemp(f)
			return unix.Stat_t{}, err
		}
		if ok {
			if state == store.VersioningEnabled || crec.VersionID != "" {
				err = b.preserve(loc, cf, &cst, crec)
			}
			cf.Close()
			if err != nil {
				b.dropTemp(f)
				return unix.Stat_t{}, err
			}
		}
	}
	st, err := b.publishKeyNow(f, loc, hidden, changed, rec, noReplace)
	if err != nil {
		return st, err
	}
	if rec.VersionID == "" {
		b.removeVersionFile(loc, nullVersion)
	}
	return st, nil
}

// removeVersionFile unlinks one entry of key's versions directory (and
// its sidecar) durably; a missing one is not an error.
func (b *Backend) removeVersionFile(loc keyLoc, id string) error {
	dir := b.versionDir(loc.bucket, loc.key)
	p := filepath.Join(dir, id)
	// Without a journal the removed file and directory are held until
	// their removal is durable and then retired (retire.go).
	held := b.holdRemoved(p)
	defer func() { retireFds(held) }()
	if err := os.Remove(p); err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return fsErr(err)
	}
	b.removeSidecar(p)
	if err := fsyncDir(dir); err != nil {
		closeFds(held) // not durable: let it go without writing it as deleted
		held = nil
		return err
	}
	hd := b.holdRemoved(dir)
	if syscall.Rmdir(dir) == nil {
		if fsyncDir(filepath.Dir(dir)) == nil {
			held = append(held, hd...)
			return nil
		}
	}
	closeFds(hd)
	return nil
}

// writeMarker durably adds a delete marker with the given ID ("" = null).
func (b *Backend) writeMarker(loc keyLoc, id string, seq int64) (unix.Stat_t, error) {
	dir := b.versionDir(loc.bucket, loc.key)
	target := filepath.Join(dir, verID(id))
	f, changed, err := b.tempFor(loc.bucket, target)
	if err != nil {
		return unix.Stat_t{}, err
	}
	rec := &record{Key: loc.key, VersionID: id, VSeq: seq, DM: true}
	return b.publishMode(f, target, changed, rec, false, false, nil)
}

// DeleteObject deletes key: on a versioned bucket by adding a delete
// marker (and keeping the current version as an older one), else as Delete.
func (b *Backend) DeleteObject(ctx context.Context, bucket, key string) (store.ObjectInfo, error) {
	loc, err := b.check(bucket, key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	state := b.versioning(ctx, bucket)
	if state == "" {
		return store.ObjectInfo{}, b.deletePlain(ctx, loc)
	}
	if err := b.bucketExists(bucket); err != nil {
		return store.ObjectInfo{}, err
	}
	unlock := verLock(bucket, key)
	defer unlock()
	cf, cp, cst, crec, ok, err := b.current(ctx, loc)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if ok {
		defer cf.Close()
		if inuse.Served(cp) {
			return store.ObjectInfo{}, fmt.Errorf("%s/%s: %w", bucket, key, store.ErrInUse)
		}
		if state == store.VersioningEnabled || crec.VersionID != "" {
			if err := b.preserve(loc, cf, &cst, crec); err != nil {
				return store.ObjectInfo{}, err
			}
		}
	}
	seq := nextSeq()
	id := ""
	if state == store.VersioningEnabled {
		id = newVersionID(seq)
	}
	// A delete marker must never be newer than a current file that is
	// still there (the current file is always the latest version). So the
	// current file goes first and the marker after it; a crash between
	// the two leaves the preserved version newest with no current file,
	// which repairVersions makes current again (the delete did not
	// happen). The one exception is the null current version under
	// Suspended, which is replaced, not preserved: its marker "null" is
	// written first, and is not visible while the null file is current.
	nullOver := ok && id == "" && crec.VersionID == ""
	if ok && !nullOver {
		if err := b.unlinkCurrent(loc, cp); err != nil {
			return store.ObjectInfo{}, err
		}
	}
	mst, err := b.writeMarker(loc, id, seq)
	if err != nil {
		if ok && !nullOver {
			b.promote(ctx, loc) // put the preserved version back
		}
		return store.ObjectInfo{}, err
	}
	if nullOver {
		if err := b.unlinkCurrent(loc, cp); err != nil {
			b.removeVersionFile(loc, nullVersion) // the delete did not happen
			return store.ObjectInfo{}, err
		}
	}
	return store.ObjectInfo{Bucket: bucket, Key: key, VersionID: id, DeleteMarker: true, IsLatest: true,
		ModTime: time.Unix(mst.Mtim.Unix()).UTC()}, nil
}

// unlinkCurrent removes the current file p of loc (and a shadowed hidden copy).
func (b *Backend) unlinkCurrent(loc keyLoc, p string) error {
	if p == loc.hidden {
		return b.unlinkHidden(loc)
	}
	if err := b.unlinkObject(loc.bucket, loc.key, p, true, nil); err != nil {
		return err
	}
	return b.dropHidden(loc)
}

// deletePlain is Delete on a bucket without versioning.
func (b *Backend) deletePlain(ctx context.Context, loc keyLoc) error {
	// The hidden copy goes first: when both exist the plain file is the
	// object, so a crash between the two unlinks leaves the object as it
	// was (the other order could bring back a shadowed old version).
	hidErr := b.unlinkHidden(loc)
	if hidErr != nil && !errors.Is(hidErr, store.ErrNoSuchKey) {
		return hidErr
	}
	if loc.plain == "" {
		return hidErr
	}
	err := b.unlinkObject(loc.bucket, loc.key, loc.plain, true, nil)
	if errors.Is(err, store.ErrNoSuchKey) && hidErr == nil {
		return nil
	}
	return err
}

// DeleteVersion removes one version for good; removing the latest makes
// the next newer one (if not a delete marker) the current file again.
func (b *Backend) DeleteVersion(ctx context.Context, bucket, key, versionID string) (store.ObjectInfo, error) {
	loc, err := b.check(bucket, key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if !validVersionID(versionID) {
		return store.ObjectInfo{}, fmt.Errorf("%w: %q", store.ErrInvalidVersion, versionID)
	}
	if err := b.bucketExists(bucket); err != nil {
		return store.ObjectInfo{}, err
	}
	unlock := verLock(bucket, key)
	defer unlock()
	cf, cp, cst, crec, ok, err := b.current(ctx, loc)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if ok {
		cf.Close()
		if verID(crec.VersionID) == versionID {
			oi := crec.info(bucket, key, &cst)
			if err := b.unlinkCurrent(loc, cp); err != nil {
				return store.ObjectInfo{}, err
			}
			if err := b.removeVersionFile(loc, versionID); err != nil {
				return oi, err
			}
			return oi, b.promote(ctx, loc)
		}
	}
	vs, err := b.readVersions(bucket, key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	for i := range vs {
		if vs[i].id != versionID {
			continue
		}
		oi := vs[i].info(bucket, key)
		if err := b.removeVersionFile(loc, versionID); err != nil {
			return store.ObjectInfo{}, err
		}
		if !ok && i == 0 {
			return oi, b.promote(ctx, loc)
		}
		return oi, nil
	}
	return store.ObjectInfo{}, nil
}

// promote makes the newest older version the current file again when
// there is no current file and that version is not a delete marker. It
// links the version next to its target and publishes it without
// replacing anything (a file another view made meanwhile stays current),
// then removes it from the versions directory.
func (b *Backend) promote(ctx context.Context, loc keyLoc) error {
	vs, err := b.readVersions(loc.bucket, loc.key)
	if err != nil || len(vs) == 0 || vs[0].rec.DM {
		return err
	}
	top := vs[0]
	target, hidden := loc.plain, loc.plain == "" || isDirAt(loc.plain)
	if hidden {
		target = loc.hidden
	}
	changed, err := mkdirParents(b.bucketPath(loc.bucket), filepath.Dir(target))
	if err != nil && !hidden {
		hidden, target = true, loc.hidden
		changed, err = mkdirParents(b.bucketPath(loc.bucket), filepath.Dir(target))
	}
	if err != nil {
		return err
	}
	tmp := b.tempPath(filepath.Dir(target))
	if err := os.Link(top.path, tmp); err != nil {
		return fsErr(err)
	}
	f, _, err := openRegular(tmp, os.O_RDONLY, 0)
	if err != nil {
		os.Remove(tmp)
		return fsErr(err)
	}
	rec := *top.rec
	if _, err := b.publishKeyNow(f, loc, hidden, changed, &rec, true); err != nil {
		if errors.Is(err, store.ErrPreconditionFailed) {
			return nil // something else is current now
		}
		return err
	}
	return b.removeVersionFile(loc, top.id)
}

// repairVersions finishes, at start-up, what a crash interrupted: a key
// whose newest version is not a delete marker but which has no current
// file (a crash between removing the current file and writing the
// marker, or between removing the latest version and promoting the one
// before it) gets that version back as its current file. Without it a
// GET would answer NoSuchKey while the listing named a latest version.
// It reads every bucket's versions area once.
func (b *Backend) repairVersions() {
	buckets, err := os.ReadDir(b.root)
	if err != nil {
		return
	}
	ctx := context.Background()
	for _, bk := range buckets {
		if !bk.IsDir() || validBucket(bk.Name()) != nil {
			continue
		}
		keys, err := b.versionedKeys(bk.Name())
		if err != nil {
			b.log.Warn("posix store: reading versions", "bucket", bk.Name(), "err", err)
			continue
		}
		for _, key := range keys {
			loc, err := b.check(bk.Name(), key)
			if err != nil {
				continue
			}
			f, _, _, _, ok, err := b.current(ctx, loc)
			if err != nil {
				continue
			}
			if ok {
				f.Close()
				continue
			}
			if err := b.promote(ctx, loc); err != nil {
				b.log.Warn("posix store: restoring the latest version", "bucket", bk.Name(), "key", key, "err", err)
			}
		}
	}
}

// findVersion opens version versionID of loc ("" = latest).
func (b *Backend) findVersion(ctx context.Context, loc keyLoc, versionID string) (*os.File, string, unix.Stat_t, *record, bool, error) {
	var st unix.Stat_t
	if versionID != "" && !validVersionID(versionID) {
		return nil, "", st, nil, false, fmt.Errorf("%w: %q", store.ErrInvalidVersion, versionID)
	}
	f, p, st, rec, ok, err := b.current(ctx, loc)
	if err != nil {
		return nil, "", st, nil, false, err
	}
	if ok && (versionID == "" || verID(rec.VersionID) == versionID) {
		return f, p, st, rec, true, nil
	}
	if ok {
		f.Close()
	}
	if err := b.bucketExists(loc.bucket); err != nil {
		return nil, "", st, nil, false, err
	}
	vs, err := b.readVersions(loc.bucket, loc.key)
	if err != nil {
		return nil, "", st, nil, false, err
	}
	for i, e := range vs {
		if (versionID == "" && i == 0) || e.id == versionID {
			if versionID == "" && !e.rec.DM {
				break // a version left out of place by a crash is not "the object"
			}
			if e.rec.DM {
				return nil, e.path, e.st, e.rec, !ok && i == 0, store.ErrDeleteMarker
			}
			f, st, err := openRegular(e.path, os.O_RDONLY, 0)
			if err != nil {
				return nil, "", st, nil, false, b.missing(err, loc.bucket, loc.key)
			}
			rec, err := b.refresh(ctx, e.path, f, &st, e.rec)
			if err != nil {
				f.Close()
				return nil, "", st, nil, false, err
			}
			return f, e.path, st, rec, !ok && i == 0, nil
		}
	}
	if versionID == "" {
		return nil, "", st, nil, false, fmt.Errorf("%w: %s/%s", store.ErrNoSuchKey, loc.bucket, loc.key)
	}
	return nil, "", st, nil, false, fmt.Errorf("%w: %s/%s?versionId=%s", store.ErrNoSuchVersion, loc.bucket, loc.key, versionID)
}

func (b *Backend) versionInfo(loc keyLoc, st *unix.Stat_t, rec *record, latest bool) store.ObjectInfo {
	oi := rec.info(loc.bucket, loc.key, st)
	oi.IsLatest = latest
	return oi
}

// StatVersion returns a version's info; a delete marker's with ErrDeleteMarker.
func (b *Backend) StatVersion(ctx context.Context, bucket, key, versionID string) (store.ObjectInfo, error) {
	loc, err := b.check(bucket, key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	f, _, st, rec, latest, err := b.findVersion(ctx, loc, versionID)
	if errors.Is(err, store.ErrDeleteMarker) {
		return b.versionInfo(loc, &st, rec, latest), err
	}
	if err != nil {
		return store.ObjectInfo{}, err
	}
	f.Close()
	return b.versionInfo(loc, &st, rec, latest), nil
}

// GetVersion reads a version (see Get).
func (b *Backend) GetVersion(ctx context.Context, bucket, key, versionID string, off, n int64) (io.ReadCloser, store.ObjectInfo, error) {
	loc, err := b.check(bucket, key)
	if err != nil {
		return nil, store.ObjectInfo{}, err
	}
	f, _, st, rec, latest, err := b.findVersion(ctx, loc, versionID)
	if errors.Is(err, store.ErrDeleteMarker) {
		return nil, b.versionInfo(loc, &st, rec, latest), err
	}
	if err != nil {
		return nil, store.ObjectInfo{}, err
	}
	oi := b.versionInfo(loc, &st, rec, latest)
	if off < 0 || off > oi.Size || (off == oi.Size && oi.Size > 0) {
		f.Close()
		return nil, store.ObjectInfo{}, fmt.Errorf("%w: offset %d, size %d", store.ErrInvalidRange, off, oi.Size)
	}
	if n < 0 || off+n > oi.Size {
		n = oi.Size - off
	}
	return &objReader{f: f, off: off, n: n}, oi, nil
}

// UpdateVersionMeta replaces one version's metadata (Object Lock
// retention and legal hold, tags), keeping its content and identity.
func (b *Backend) UpdateVersionMeta(ctx context.Context, bucket, key, versionID string, meta store.ObjectMeta) (store.ObjectInfo, error) {
	loc, err := b.check(bucket, key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	unlock := verLock(bucket, key)
	defer unlock()
	f, p, st, rec, latest, err := b.findVersion(ctx, loc, versionID)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	defer f.Close()
	nr := *rec
	nr.updateMeta(meta)
	release := b.lockSidecar(p)
	err = b.writeRecord(p, f, &st, &nr, true)
	release()
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if err := f.Sync(); err != nil {
		return store.ObjectInfo{}, fsErr(err)
	}
	return b.versionInfo(loc, &st, &nr, latest), nil
}

// versionedKeys returns the sorted keys that have a versions directory.
// It reads one record per key (the listing of versions costs one
// directory read per versioned key; see docs/s3.md).
func (b *Backend) versionedKeys(bucket string) ([]string, error) {
	root := b.versionsDir(bucket)
	hashes, err := versionNames(root)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, h := range hashes {
		if strings.HasPrefix(h, store.ReservedPrefix) {
			continue
		}
		dir := filepath.Join(root, h)
		dd, err := openDir(dir)
		if err != nil {
			continue
		}
		names, _ := dd.Readdirnames(-1)
		dd.Close()
		for _, n := range names {
			if strings.HasPrefix(n, store.ReservedPrefix) {
				continue
			}
			p := filepath.Join(dir, n)
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil {
				continue
			}
			if rec := b.readRecord(p, nil, st.Ino); rec != nil && rec.Key != "" && hiddenName(rec.Key) == h {
				keys = append(keys, rec.Key)
				break
			}
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// versionsEmpty reports whether bucket keeps no older version or marker.
func (b *Backend) versionsEmpty(bucket string) (bool, error) {
	keys, err := b.versionedKeys(bucket)
	return len(keys) == 0, err
}

var (
	_ store.Versioner = (*Backend)(nil)
)

// versionNames lists a directory of the versions area; one that does not
// exist (no version was ever kept there) lists as empty.
func versionNames(dir string) ([]string, error) {
	d, err := openDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil
		}
		return nil, fsErr(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fsErr(err)
	}
	return names, nil
}

package posix

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/inuse"
)

// copyBufSize is the chunk size for PUT bodies: big enough that a 4 MiB
// object takes a handful of read/write calls, small enough to keep 16
// parallel writers cheap.
const copyBufSize = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

func getBuf() *[]byte  { return bufPool.Get().(*[]byte) }
func putBuf(b *[]byte) { bufPool.Put(b) }

func (b *Backend) keyLock(p string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(p))
	return &b.keyLocks[h.Sum32()%uint32(len(b.keyLocks))]
}

// tempFor creates a temp file in the directory of target, making the
// parent directories. It first just tries to create the file (one
// openat2 that refuses symlinks: the common case of an existing parent);
// only when that fails does it look at and make the parents. A concurrent
// Delete may remove a just-made empty parent, so creation is retried a few
// times.
func (b *Backend) tempFor(bucket, target string) (*os.File, []string, error) {
	bdir := b.bucketPath(bucket)
	dir := filepath.Dir(target)
	var changed []string
	for range 20 {
		f, err := createTemp(b.tempPath(dir))
		if err == nil {
			return f, changed, nil
		}
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, syscall.ELOOP) {
			return nil, nil, fsErr(err)
		}
		c, err := mkdirParents(bdir, dir)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				return nil, nil, err
			}
			if err := b.bucketExists(bucket); err != nil {
				return nil, nil, err
			}
			continue // a parent was removed by a concurrent Delete: again
		}
		changed = append(changed, c...)
	}
	return nil, nil, fmt.Errorf("posix: parent directory of %s keeps disappearing", target)
}

// createTemp creates a new file at p (O_EXCL), refusing a symlink in any
// component (safe.go). os.OpenFile would also register the descriptor
// with the network poller (an epoll_ctl that fails for a regular file and
// four fcntl calls around it); a file of the tree is never polled, so it
// is wrapped as a plain file.
func createTemp(p string) (*os.File, error) {
	fd, err := openat2(p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// mayBeServed reports whether the file at p could be a served volume
// (store/inuse): only DATA/BUCKET/NAME with NAME an inuse.VolumeName can
// be, so for every other path the in-use check and lock are skipped.
func (b *Backend) mayBeServed(p string) bool {
	rel, ok := strings.CutPrefix(p, b.root+string(filepath.Separator))
	if !ok {
		return true // not under the root: cannot tell, so lock
	}
	_, name, ok := strings.Cut(rel, string(filepath.Separator))
	return ok && !strings.Contains(name, string(filepath.Separator)) && inuse.VolumeName(name)
}

// directMin: a body of known size at least this large is written with
// O_DIRECT, whole chunks (copyBufSize) straight from the buffer to the disk
// and the unaligned tail through the page cache. A buffered write copies
// each byte into newly allocated page-cache pages, which was half of the
// server's CPU time for 4 MiB PUTs at 16 in parallel
// (docs/bench/profiles/s3-put-gc-before.*); the fsync before the rename
// then has only the tail and the metadata left. A file system without
// O_DIRECT (tmpfs, some FUSE) keeps the buffered path.
const (
	directMin   = 1 << 20
	directAlign = 4096
)

// setDirect turns O_DIRECT on or off for fd; it reports success.
func setDirect(fd int, on bool) bool {
	if fd < 0 {
		return false
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return false
	}
	if on {
		fl |= unix.O_DIRECT
	} else {
		fl &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl)
	return err == nil
}

// fill copies the body into f, hashing it. size < 0 reads to EOF.
//
// It does not use io.ReadFull, which drops an error returned together with
// the bytes that complete the buffer: verifying readers (checksums, chunk
// signatures) report a bad body exactly that way, or on the Read after the
// last byte. So every error is kept, and once size bytes are in, one more
// Read must report EOF (or more data, which is left unread) rather than an
// error; only then is the body accepted.
func fill(ctx context.Context, f *os.File, r io.Reader, size int64, h hash.Hash) (_ int64, ferr error) {
	buf := getBuf()
	defer putBuf(buf)
	var n int64
	fd := -1
	if size >= directMin {
		fd = int(f.Fd())
	}
	direct := setDirect(fd, true)
	var directEnd int64 // the body's bytes before this offset went to the disk directly
	defer func() {
		if direct {
			setDirect(fd, false)
		}
		if directEnd > 0 && ferr == nil {
			readBack(fd, directEnd)
		}
	}()
	for size < 0 || n < size {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		chunk := *buf
		if size >= 0 && size-n < int64(len(chunk)) {
			chunk = chunk[:size-n]
		}
		m, rerr := readChunk(r, chunk)
		if rerr != nil && rerr != io.EOF {
			return n, rerr
		}
		if m > 0 {
			h.Write(chunk[:m])
			if direct && m%directAlign != 0 {
				// The tail: buffered (the offset stays aligned, since
				// every earlier chunk was whole).
				direct = !setDirect(fd, false)
			}
			k, err := f.Write(chunk[:m])
			if err != nil && direct && errors.Is(err, syscall.EINVAL) {
				// The file system refused this direct write (alignment):
				// the rest goes through the page cache.
				direct = !setDirect(fd, false)
				var k2 int
				k2, err = f.Write(chunk[k:m])
				k += k2
			}
			if direct && err == nil {
				directEnd = n + int64(m)
			}
			if err != nil {
				return n, fsErr(err)
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			if size >= 0 && n < size {
				return n, fmt.Errorf("%w: got %d of %d bytes", store.ErrIncompleteBody, n, size)
			}
			return n, nil
		}
	}
	// size bytes are in: the reader must not fail at its end.
	var probe [1]byte
	for range 100 {
		m, err := r.Read(probe[:])
		if err != nil && err != io.EOF {
			return n, err
		}
		if m > 0 || err == io.EOF {
			return n, nil
		}
	}
	return n, nil
}

// readBack asks the kernel to read [0, end) of fd, written with O_DIRECT,
// into the page cache in the background (POSIX_FADV_WILLNEED submits the
// reads and returns). A direct write leaves none of the body in the page
// cache, so without it the first GETs of a new object wait for the disk:
// 4 MiB GETs right after their PUTs at 16 in parallel fell from 1.49x to
// 0.79x versitygw with O_DIRECT (BENCHMARKS.md). Reading back costs a disk
// read but no CPU copy, the copy that O_DIRECT took out of the PUT; the
// object's page cache then holds what a buffered write would have left.
// Advisory: an error changes nothing.
func readBack(fd int, end int64) {
	unix.Fadvise(fd, 0, end, unix.FADV_WILLNEED)
}

// readChunk fills p from r like io.ReadFull but returns any error that
// came with the last bytes; io.EOF means the body ended (m may be < len(p)).
func readChunk(r io.Reader, p []byte) (int, error) {
	m := 0
	for zero := 0; m < len(p) && zero < 100; {
		k, err := r.Read(p[m:])
		m += k
		if err != nil {
			return m, err
		}
		if k == 0 {
			zero++
		}
	}
	if m < len(p) {
		return m, io.ErrNoProgress
	}
	return m, nil
}

// publish finishes a temp file: stores rec (with the file's final size and
// mtime) as metadata, fsyncs, renames it over target and fsyncs the
// directory (and any parents whose entries were created). Afterwards the
// object survives a crash; before the rename no reader can see it.
func (b *Backend) publish(f *os.File, target string, changed []string, rec *record) (unix.Stat_t, error) {
	return b.publishMode(f, target, changed, rec, false, false, nil)
}

// hookBeforeRename, set only by tests, runs just before publishMode's
// rename, so a test can change the tree at the worst moment.
var hookBeforeRename func(target string)

// hookVictimHeld, set only by tests, runs in publishMode after the file
// the rename will replace is held (victimOf), just before the rename.
var hookVictimHeld func(target string)

// hookAfterRename, set only by tests, runs right after publishMode's
// rename succeeded, before the directory fsyncs.
var hookAfterRename func(target string)

// errConflictKept: publishMode found a directory at its target (a prefix
// of other keys appeared meanwhile) and, as asked, kept the temp file open
// so the caller can publish it in the hidden area instead.
var errConflictKept = fmt.Errorf("%w: target became a prefix of other keys", store.ErrKeyConflict)

// publishMode is publish; with noReplace the rename refuses an existing
// target (renameat2 RENAME_NOREPLACE, see exclusive.go) and returns
// store.ErrPreconditionFailed, leaving the existing object untouched.
// With keepOnConflict a directory at target returns errConflictKept and
// leaves f open and in place. around, if not nil, wraps the rename (the
// hidden area's index is updated under its lock, hidden.go).
func (b *Backend) publishMode(f *os.File, target string, changed []string, rec *record, noReplace, keepOnConflict bool, around func(func() error) error) (unix.Stat_t, error) {
	var st unix.Stat_t
	tmp := f.Name()
	fail := func(err error) (unix.Stat_t, error) {
		b.dropTemp(f)
		return st, fsErr(err)
	}
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fail(err)
	}
	rec.Size, rec.MtimeNs = st.Size, st.Mtim.Nano()
	if b.useXattr {
		// The metadata travels with the inode: set it before the fsync.
		if err := b.writeRecord(target, f, &st, rec, true); err != nil {
			return fail(err)
		}
	}
	if !faultSkip("put-file") {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	// A served volume must never be replaced under its LUN (store/inuse):
	// hold the change lock on the file being replaced across the rename.
	// (A no-replace publish never replaces anything.)
	var held *inuse.Change
	var err error
	if !noReplace && b.mayBeServed(target) {
		if held, err = inuse.ChangeAt(unix.AT_FDCWD, target); err != nil {
			return fail(inUseErr(err, target))
		}
		defer held.Release()
	}
	var unlock func()
	if !b.useXattr || (b.noJournal && !noReplace) {
		// Sidecar and rename are two steps: keep writers of the key in
		// order so the last sidecar written describes the last file renamed.
		// Without a journal the file a rename replaces must be the one
		// victimOf gave a second name: another PUT's (or a DELETE's)
		// rename or unlink of the key landing between the two would
		// replace or free a file without one (victim.go).
		l := b.keyLock(target)
		l.Lock()
		unlock = l.Unlock
	}
	if !b.useXattr {
		if noReplace {
			// Refuse before the sidecar is written, so a loser never
			// touches the winner's metadata; the key lock keeps other
			// S3 writers out until the rename below.
			if err := existsErr(target); err != nil {
				unlock()
				return fail(err)
			}
		}
		if err := b.writeRecord(target, f, &st, rec, true); err != nil {
			unlock()
			return fail(err)
		}
	}
	if hookBeforeRename != nil {
		hookBeforeRename(target)
	}
	published := false // the rename and its directory fsyncs done
	renamed := false   // the rename done
	if !noReplace {
		// The file this rename replaces is freed after the PUT, not in
		// the rename (victim.go); without a journal it keeps a second
		// name until the rename is durable and is then written as
		// deleted.
		victim := victimOf(target, b.noJournal, b.tmpDir, b.tempName)
		defer func() { releaseVictim(victim, published, renamed) }()
		if hookVictimHeld != nil {
			hookVictimHeld(target)
		}
	}
	rename := func() error {
		if noReplace {
			return renameNoReplace(tmp, target)
		}
		// Not os.Rename, which lstats target first to refuse a
		// directory there: the kernel refuses it too (EISDIR), handled below.
		if err := unix.Rename(tmp, target); err != nil {
			return &os.LinkError{Op: "rename", Old: tmp, New: target, Err: err}
		}
		renamed = true
		return nil
	}
	if around != nil {
		err = around(rename)
	} else {
		err = rename()
	}
	if unlock != nil {
		unlock()
	}
	if keepOnConflict && err != nil && isDirAt(target) {
		return st, errConflictKept
	}
	if noReplace && errors.Is(err, syscall.EEXIST) {
		e := existsErr(target) // a directory is a key conflict
		if e == nil {          // it existed at the rename, then went away
			e = fmt.Errorf("%w: %s exists", store.ErrPreconditionFailed, target)
		}
		return fail(e)
	}
	if err != nil {
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			err = fmt.Errorf("%w: %s is a prefix of other keys", store.ErrKeyConflict, target)
		}
		return fail(err)
	}
	f.Close()
	if hookAfterRename != nil {
		hookAfterRename(target)
	}
	if faultSkip("put-dir") {
		return st, nil
	}
	if err := fsyncDir(filepath.Dir(target)); err != nil {
		return st, err
	}
	if src := filepath.Dir(tmp); src != filepath.Dir(target) && b.noJournal {
		// A move into another directory (the hidden area). Without a
		// journal the temp name would stay on disk until write-back and,
		// after a power cut, still name the inode once it is freed and
		// given to another file (e2fsck may then keep that name and drop
		// the real one). A source directory removed meanwhile (emptied by
		// this move, then pruned by a DELETE) took the name with it.
		if err := fsyncDir(src); err != nil && !errors.Is(err, os.ErrNotExist) {
			return st, err
		}
	}
	if err := syncMade(changed); err != nil {
		return st, err
	}
	published = true
	return st, nil
}

// Put stores an object atomically and durably (see package doc).
func (b *Backend) Put(ctx context.Context, bucket, key string, r io.Reader, size int64, meta store.ObjectMeta) (store.ObjectInfo, error) {
	return b.put(ctx, bucket, key, r, size, meta, false)
}

// put is Put and, with noReplace, PutIfAbsent. The object goes to the
// key's plain path when it has one that is free of the other shape (a
// directory of other keys at it, a file where a parent should be), else
// to the hidden area (hidden.go); which one is decided before the body is
// read, and again at the rename, where a directory that appeared meanwhile
// sends the finished temp file to the hidden area.
func (b *Backend) put(ctx context.Context, bucket, key string, r io.Reader, size int64, meta store.ObjectMeta, noReplace bool) (store.ObjectInfo, error) {
	loc, err := b.check(bucket, key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	bs, err := b.bucketState(ctx, bucket)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	loc.noHidden, loc.hiddenGen = bs.noHidden, bs.hiddenGen
	f, changed, hidden, err := b.tempForKey(loc)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	h, release := bodyHash(size)
	if _, err := fill(ctx, f, r, size, h); err != nil {
		release()
		b.dropTemp(f)
		return store.ObjectInfo{}, err
	}
	rec := &record{ETag: hex.EncodeToString(h.Sum(nil))}
	release()
	rec.setMeta(meta)
	st, err := b.publishKey(ctx, f, loc, hidden, changed, rec, noReplace)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	return rec.info(bucket, key, &st), nil
}

// tempForKey makes the temp file for a new object of loc next to where
// it will be published: its plain path when it has one free of the other
// shape, else the hidden area (hidden reports which). It refuses a served
// volume before any body is read (publish decides races).
func (b *Backend) tempForKey(loc keyLoc) (*os.File, []string, bool, error) {
	// A directory at the plain path (the key is a prefix of others) is
	// found by the rename (EISDIR), which then publishes in the hidden
	// area (publishKeyNow): no lstat here for the rare case. Without
	// xattrs the record goes to a sidecar named after the path before the
	// rename, so there the directory is looked for first, as before.
	target, hidden := loc.plain, loc.plain == "" || !b.useXattr && isDirAt(loc.plain)
	if hidden {
		target = loc.hidden
	}
	if b.mayBeServed(target) && inuse.Served(target) {
		return nil, nil, false, fmt.Errorf("%s/%s: %w", loc.bucket, loc.key, store.ErrInUse)
	}
	f, changed, err := b.tempFor(loc.bucket, target)
	if !hidden && errors.Is(err, store.ErrKeyConflict) {
		hidden = true
		f, changed, err = b.tempFor(loc.bucket, loc.hidden)
	}
	return f, changed, hidden, err
}

// publishKey publishes the finished temp file f as the object of loc:
// at its plain path unless hidden (or a directory took that path), else
// in the hidden area with the key in its record. With noReplace an object
// of the key in either place makes it fail with ErrPreconditionFailed.
func (b *Backend) publishKey(ctx context.Context, f *os.File, loc keyLoc, hidden bool, changed []string, rec *record, noReplace bool) (unix.Stat_t, error) {
	if rec.Enc != nil {
		// Ciphertext (S3 encryption at rest) is no file content for NFS
		// or a volume: mode 0600 keeps other users out while the server
		// can still read it (docs/s3.md, Encryption at rest).
		if err := f.Chmod(0o600); err != nil {
			b.dropTemp(f)
			return unix.Stat_t{}, fsErr(err)
		}
	}
	if state := b.versioning(ctx, loc.bucket); state != "" {
		return b.publishVersion(f, loc, hidden, changed, rec, noReplace, state) // versions.go
	}
	return b.publishKeyNow(f, loc, hidden, changed, rec, noReplace)
}

// publishKeyNow is publishKey without versioning.
func (b *Backend) publishKeyNow(f *os.File, loc keyLoc, hidden bool, changed []string, rec *record, noReplace bool) (unix.Stat_t, error) {
	if noReplace {
		// The plain rename refuses a plain object; a hidden one must be
		// refused too (and a plain one before a hidden publish).
		other := loc.hidden
		if hidden {
			other = loc.plain
		}
		if other != "" && isRegularAt(other) {
			b.dropTemp(f)
			return unix.Stat_t{}, fmt.Errorf("%w: %s/%s exists", store.ErrPreconditionFailed, loc.bucket, loc.key)
		}
	}
	if !hidden {
		st, err := b.publishMode(f, loc.plain, changed, rec, noReplace, true, nil)
		if err == nil {
			// A hidden copy (from when the path was taken) is now shadowed.
			return st, b.dropHidden(loc)
		}
		if !errors.Is(err, errConflictKept) {
			return st, err
		}
		c, err := mkdirParents(b.bucketPath(loc.bucket), filepath.Dir(loc.hidden))
		if err != nil {
			b.dropTemp(f)
			return st, err
		}
		changed = append(changed, c...)
	}
	rec.Key = loc.key
	return b.publishMode(f, loc.hidden, changed, rec, noReplace, false, b.hiddenAround(loc.bucket))
}

// dropHidden removes the hidden copy of a key that now has a plain file.
// A bucket without a hidden area (in the state the Put read, with no
// hidden entry changed by this process since) has no copy to look for.
// Another process filling the area in that window leaves its copy
// shadowed by the plain file, as a crash between the two steps would.
func (b *Backend) dropHidden(loc keyLoc) error {
	if loc.noHidden && b.hidden.gen.Load() == loc.hiddenGen {
		return nil
	}
	if !isRegularAt(loc.hidden) {
		return nil
	}
	err := b.unlinkHidden(loc)
	if errors.Is(err, store.ErrNoSuchKey) {
		return nil
	}
	return err
}

// isDirAt reports whether p is a directory (not following a symlink).
func isDirAt(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// isRegularAt reports whether p is a regular file (not following a symlink).
func isRegularAt(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// notHere reports whether an error opening a plain path means that no
// object is there (so the hidden area is looked at).
func notHere(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) ||
		errors.Is(err, syscall.ELOOP) || errors.Is(err, errNotRegular) || errors.Is(err, syscall.ENAMETOOLONG)
}

// openObject opens the file of key for reading (its plain path first,
// then the hidden area) and returns its path, its stat and a fresh
// metadata record, both belonging to the opened version.
func (b *Backend) openObject(ctx context.Context, bucket, key string) (*os.File, string, unix.Stat_t, *record, error) {
	var st unix.Stat_t
	loc, err := b.check(bucket, key)
	if err != nil {
		return nil, "", st, nil, err
	}
	p := loc.plain
	var f *os.File
	if p != "" {
		f, st, err = openRegular(p, os.O_RDONLY, 0)
		if err != nil && !notHere(err) {
			return nil, "", st, nil, b.missing(err, bucket, key)
		}
	}
	var rec *record
	if f == nil {
		p = loc.hidden
		f, st, err = openRegular(p, os.O_RDONLY, 0)
		if err != nil {
			return nil, "", st, nil, b.missing(err, bucket, key)
		}
		if rec = b.readRecord(p, f, st.Ino); rec == nil || rec.Key != key {
			f.Close()
			return nil, "", st, nil, b.missing(os.ErrNotExist, bucket, key)
		}
	} else {
		rec = b.readRecord(p, f, st.Ino)
	}
	rec, err = b.refresh(ctx, p, f, &st, rec)
	if err != nil {
		f.Close()
		return nil, "", st, nil, err
	}
	return f, p, st, rec, nil
}

// Get returns a reader on the opened file, so a concurrent Put (a rename)
// cannot mix versions.
func (b *Backend) Get(ctx context.Context, bucket, key string, off, n int64) (io.ReadCloser, store.ObjectInfo, error) {
	f, _, st, rec, err := b.openObject(ctx, bucket, key)
	if err != nil {
		return nil, store.ObjectInfo{}, err
	}
	oi := rec.info(bucket, key, &st)
	if off < 0 || off > oi.Size || (off == oi.Size && oi.Size > 0) {
		f.Close()
		return nil, store.ObjectInfo{}, fmt.Errorf("%w: offset %d, size %d", store.ErrInvalidRange, off, oi.Size)
	}
	if n < 0 || off+n > oi.Size {
		n = oi.Size - off
	}
	return &objReader{f: f, off: off, n: n}, oi, nil
}

// objReader reads a range of an open file. WriteTo hands the kernel a
// LimitedReader over the *os.File so a socket writer can use sendfile.
type objReader struct {
	f   *os.File
	off int64
	n   int64
}

func (r *objReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	m, err := r.f.ReadAt(p, r.off)
	r.off += int64(m)
	r.n -= int64(m)
	if err == io.EOF && r.n > 0 {
		err = io.ErrUnexpectedEOF // truncated underneath us by another view
	} else if err == io.EOF {
		err = nil
	}
	return m, err
}

func (r *objReader) WriteTo(w io.Writer) (int64, error) {
	if r.n <= 0 {
		return 0, nil
	}
	if _, err := r.f.Seek(r.off, io.SeekStart); err != nil {
		return 0, err
	}
	m, err := io.Copy(w, &io.LimitedReader{R: r.f, N: r.n})
	r.off += m
	r.n -= m
	if err == nil && r.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return m, err
}

func (r *objReader) Close() error { return r.f.Close() }

// Stat returns the object's info (recomputing a stale ETag). It opens the
// file (rather than stat by path) so that stat and metadata belong to one
// version and no symlink is followed.
func (b *Backend) Stat(ctx context.Context, bucket, key string) (store.ObjectInfo, error) {
	f, _, st, rec, err := b.openObject(ctx, bucket, key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	f.Close()
	return rec.info(bucket, key, &st), nil
}

// Delete removes the object (its plain file and any hidden copy), its
// sidecar and the empty parent directories it leaves (up to the bucket).
// On a bucket with versioning on it adds a delete marker (versions.go).
func (b *Backend) Delete(ctx context.Context, bucket, key string) error {
	_, err := b.DeleteObject(ctx, bucket, key)
	return err
}

// unlinkHidden removes key's file in the hidden area.
func (b *Backend) unlinkHidden(loc keyLoc) error {
	return b.unlinkObject(loc.bucket, loc.key, loc.hidden, false, b.hiddenAround(loc.bucket))
}

// unlinkObject removes the object file p, its sidecar and (cleanParents)
// the empty parent directories it leaves. around, if not nil, wraps the
// unlink (as for publishMode).
func (b *Backend) unlinkObject(bucket, key, p string, cleanParents bool, around func(func() error) error) error {
	// Unlink relative to the parent opened without following symlinks, so
	// a symlinked directory can never redirect the delete out of the tree.
	dir, name := filepath.Split(p)
	d, err := openDir(dir)
	if err != nil {
		return b.missing(err, bucket, key)
	}
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return b.missing(err, bucket, key)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: %s/%s", store.ErrNoSuchKey, bucket, key)
	}
	// The sidecar's writers are kept in order (as publishMode); without
	// a journal the file held (and retired below) must be the one the
	// unlink removes, so no PUT of the key may rename between the two.
	var unlockKey func()
	if !b.useXattr || b.noJournal {
		l := b.keyLock(p)
		l.Lock()
		unlockKey = l.Unlock
	}
	defer func() {
		if unlockKey != nil {
			unlockKey()
		}
	}()
	held, err := inuse.ChangeAt(int(d.Fd()), name)
	if err != nil {
		return inUseErr(err, p)
	}
	defer held.Release()
	unlink := func() error { return unix.Unlinkat(int(d.Fd()), name, 0) }
	if around != nil {
		err = around(unlink)
	} else {
		err = unlink()
	}
	if b.useXattr && unlockKey != nil {
		unlockKey() // no sidecar to keep in order
		unlockKey = nil
	}
	if err != nil {
		return b.missing(err, bucket, key)
	}
	if hookAfterUnlink != nil {
		hookAfterUnlink(p)
	}
	if !faultSkip("delete-dir") {
		if err := syncUnlinkDir(d, filepath.Clean(dir)); err != nil {
			return fsErr(err)
		}
		if b.noJournal {
			held.Retire() // written as deleted before it is let go
		}
	}
	// The sidecar goes only once the unlink is durable: removing it can
	// make its emptied directory's removal durable (removeEmptyParents
	// fsyncs the first directory it keeps on a file system without a
	// journal), and a power cut between that and the directory fsync
	// above left the object without its metadata. A sidecar left behind
	// by a cut after the unlink names an inode no file has any more.
	b.removeSidecar(p)
	if cleanParents {
		b.removeEmptyParents(b.bucketPath(bucket), filepath.Clean(dir))
	}
	return nil
}

// hookAfterUnlink, set only by tests, runs right after unlinkObject's
// unlink succeeded, before the directory fsync.
var hookAfterUnlink func(p string)

// syncUnlinkDir makes an unlink in dir (open as d) durable. It goes
// through the directory group commit (dirsync.go), so concurrent deletes
// and PUTs in one directory share its fsyncs; that fsync opens dir by
// path, so when the path no longer names d's directory afterwards (a
// concurrent delete removed it as an empty parent, or it was replaced) d
// itself is fsynced, as before.
func syncUnlinkDir(d *os.File, dir string) error {
	err := fsyncDir(dir)
	if err == nil {
		var ds, ps unix.Stat_t
		if unix.Fstat(int(d.Fd()), &ds) == nil && unix.Lstat(dir, &ps) == nil && ds.Ino == ps.Ino && ds.Dev == ps.Dev {
			return nil
		}
	} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, syscall.ELOOP) {
		return err
	}
	return d.Sync()
}

// inUseErr names the object in a store.ErrInUse from store/inuse; other
// errors of taking the lock are file-system errors.
func inUseErr(err error, p string) error {
	if errors.Is(err, store.ErrInUse) {
		return fmt.Errorf("%s: %w", p, err)
	}
	return fsErr(err)
}

// UpdateMeta replaces the metadata of an existing object, keeping its
// content, ETag and part list.
func (b *Backend) UpdateMeta(ctx context.Context, bucket, key string, meta store.ObjectMeta) (store.ObjectInfo, error) {
	f, p, st, rec, err := b.openObject(ctx, bucket, key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	defer f.Close()
	nr := *rec
	nr.updateMeta(meta)
	if !b.useXattr {
		l := b.keyLock(p)
		l.Lock()
		defer l.Unlock()
	}
	if err := b.writeRecord(p, f, &st, &nr, true); err != nil {
		return store.ObjectInfo{}, err
	}
	if err := f.Sync(); err != nil {
		return store.ObjectInfo{}, fsErr(err)
	}
	return nr.info(bucket, key, &st), nil
}

var (
	_ store.Store       = (*Backend)(nil)
	_ store.MetaUpdater = (*Backend)(nil)
	_ store.LocalPather = (*Backend)(nil)
	_ io.WriterTo       = (*objReader)(nil)
)

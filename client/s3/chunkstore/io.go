package chunkstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// MaxFileSize bounds a file (and a volume): 2^50 bytes.
const MaxFileSize = 1 << 50

// ReadAt reads ino's bytes at off like io.ReaderAt: fewer than len(p)
// bytes only at the end of the file, then with io.EOF. Holes read as
// zeros without a request; a chunk not cached is fetched (and verified
// against its name), and sequential reading grows the prefetch window.
func (s *Store) ReadAt(ctx context.Context, ino uint64, p []byte, off int64) (int, error) {
	s.mu.Lock()
	in := s.m.Inodes[ino]
	if in == nil {
		s.mu.Unlock()
		return 0, ErrNotExist
	}
	if in.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		s.mu.Unlock()
		return 0, ErrIsDir
	}
	size := in.Size
	s.mu.Unlock()
	if off < 0 {
		return 0, ErrInvalid
	}
	if off >= size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), size)
	n := int64(0)
	for pos := off; pos < end; {
		idx := pos / s.cs
		co := pos - idx*s.cs
		l := min(s.cs-co, end-pos)
		if err := s.readChunk(ctx, ino, idx, p[n:n+l], co); err != nil {
			return int(n), err
		}
		pos += l
		n += l
	}
	s.noteRead(ino, off/s.cs, (end-1)/s.cs)
	if end < off+int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

func (s *Store) readChunk(ctx context.Context, ino uint64, idx int64, dst []byte, co int64) error {
	lk := s.chunkLock(ino, idx)
	lk.Lock()
	defer lk.Unlock()
	fetched := false
	for turn := 0; ; turn++ {
		s.mu.Lock()
		in := s.m.Inodes[ino]
		if in == nil {
			s.mu.Unlock()
			return ErrNotExist
		}
		var d *dirtyChunk
		if st := s.st[ino]; st != nil {
			d = st.dirty[idx]
		}
		h := in.Chunks[idx]
		hint := min(s.cs, in.Size-idx*s.cs)
		partial := d != nil && overlaps(d.miss, co, co+int64(len(dst)))
		var base string
		var baseHint int64
		var lost error
		if partial {
			base, baseHint, lost = d.base, d.miss[len(d.miss)-1].B, d.lost
		}
		s.mu.Unlock()
		switch {
		case partial && lost == nil && turn < 4 && s.cache.has(base):
			// A byte this read wants is still only in the base, which
			// is cached: read the written bytes from the dirty file and
			// the rest from the base, leaving the chunk partial (its
			// charge stays the bytes written; completing it would make
			// it a whole chunk of dirty data).
			ok, err := s.readOverlay(ino, idx, d, base, dst, co)
			if err != nil {
				return err
			}
			if ok {
				if !fetched {
					s.hits.Add(1)
				}
				return nil
			}
			// The base was evicted meanwhile: look again.
		case partial && lost == nil && !fetched:
			// Fetch the base without the chunk lock (as for a clean
			// miss), then look again.
			s.misses.Add(1)
			fetched = true
			lk.Unlock()
			err := s.fetch(ctx, base, baseHint)
			lk.Lock()
			if errors.Is(err, ErrCorrupt) || errors.Is(err, errNotFound) {
				return s.loseBase(ino, idx, d, base, err)
			}
			if err != nil {
				return err
			}
		case partial:
			// The base is lost, or the cache cannot keep it: complete
			// the chunk (fill returns with the lock held and the chunk
			// whole, so the next turn reads the dirty file).
			if err := s.fill(ctx, ino, idx, lk); err != nil {
				return err
			}
		case d != nil:
			f, err := s.dirtyFile(ino, idx, d)
			if err != nil {
				return err
			}
			return readFill(f, dst, co)
		case h == "":
			clear(dst)
			return nil
		case !fetched && !s.cache.peek(h):
			// A miss: fetch without the chunk lock, so that a write to
			// this chunk meanwhile (the kernel's read-ahead is often in
			// flight ahead of a writer) does not wait for the network.
			// Then look again: the chunk may have been written.
			s.misses.Add(1)
			fetched = true
			lk.Unlock()
			err := s.fetch(ctx, h, hint)
			lk.Lock()
			if err != nil {
				return err
			}
		default:
			return s.readClean(ctx, h, hint, dst, co, !fetched)
		}
	}
}

// readOverlay reads dst at co from partial chunk idx (d, on base): the
// written bytes from the dirty file, the missing ranges from the cached
// base. false: the base is no longer cached. The caller holds the chunk
// lock, under which d's missing ranges do not change.
func (s *Store) readOverlay(ino uint64, idx int64, d *dirtyChunk, base string, dst []byte, co int64) (bool, error) {
	cf, err := os.Open(s.cache.cleanPath(base))
	if errors.Is(err, fs.ErrNotExist) {
		s.cache.forget(base) // evicted between the check and the open
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer cf.Close()
	f, err := s.dirtyFile(ino, idx, d)
	if err != nil {
		return false, err
	}
	if err := readFill(f, dst, co); err != nil {
		return false, err
	}
	s.mu.Lock()
	miss := d.miss
	s.mu.Unlock()
	end := co + int64(len(dst))
	for _, m := range miss {
		if a, b := max(m.A, co), min(m.B, end); a < b {
			if err := readFill(cf, dst[a-co:b-co], a); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// readFill reads dst at off from f; bytes past f's end are zeros.
func readFill(f *os.File, dst []byte, off int64) error {
	n, err := f.ReadAt(dst, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	clear(dst[n:])
	return nil
}

// readClean reads from clean chunk h, fetching it when not cached (hint:
// its expected length). hit: a read served from the cache counts as a
// hit (false: the caller counted a miss and fetched it).
func (s *Store) readClean(ctx context.Context, h string, hint int64, dst []byte, co int64, hit bool) error {
	for attempt := 0; attempt < 3; attempt++ {
		if s.cache.has(h) {
			f, err := os.Open(s.cache.cleanPath(h))
			if errors.Is(err, fs.ErrNotExist) {
				s.cache.forget(h) // evicted between the check and the open
				continue
			}
			if err != nil {
				return err
			}
			err = readFill(f, dst, co)
			f.Close()
			if err != nil {
				return err
			}
			if hit {
				s.hits.Add(1)
				s.pfMu.Lock()
				if s.pfDone[h] {
					delete(s.pfDone, h)
					s.prefetchHits.Add(1)
				}
				s.pfMu.Unlock()
			}
			return nil
		}
		if hit {
			s.misses.Add(1)
			hit = false
		}
		if err := s.fetch(ctx, h, hint); err != nil {
			return err
		}
	}
	// The cache could not keep it (dirty data and other readers' chunks
	// fill it): serve this read from a download of its own.
	return s.readDirect(ctx, h, hint, dst, co)
}

// readDirect downloads chunk h into a transfer buffer, checks it against
// its name and copies dst from it, without the cache.
func (s *Store) readDirect(ctx context.Context, h string, hint int64, dst []byte, co int64) error {
	buf, err := s.getBuf(ctx)
	if err != nil {
		return err
	}
	defer s.putBuf(buf)
	data, err := s.getChunk(ctx, h, buf, hint)
	if err != nil {
		return fmt.Errorf("get chunk %s: %w", h, err)
	}
	if got := hashOf(data); got != h {
		return fmt.Errorf("%w: chunk object %s holds bytes that hash to %s (modified by someone else)", ErrCorrupt, h, got)
	}
	s.downloads.Add(1)
	s.downBytes.Add(int64(len(data)))
	n := 0
	if co < int64(len(data)) {
		n = copy(dst, data[co:])
	}
	clear(dst[n:])
	return nil
}

// getChunk downloads chunk h into buf, in FetchParts ranged parts when
// its expected length (hint) allows parts of MinFetchPart or more; the
// caller checks the hash.
func (s *Store) getChunk(ctx context.Context, h string, buf []byte, hint int64) ([]byte, error) {
	parts := int(min(int64(s.cfg.FetchParts), hint/MinFetchPart))
	return s.b.getParts(ctx, chunkKey(h), buf, s.cs, hint, parts)
}

// fetch downloads chunk h (hint: its expected length) into the cache,
// once however many ask at once. Its bytes must hash to its name;
// anything else was modified by someone.
func (s *Store) fetch(ctx context.Context, h string, hint int64) error {
	s.pfMu.Lock()
	if ch, ok := s.inflight[h]; ok {
		s.pfMu.Unlock()
		select {
		case <-ch:
			return nil // the other fetch's outcome shows in the cache
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ch := make(chan struct{})
	s.inflight[h] = ch
	s.pfMu.Unlock()
	defer func() {
		s.pfMu.Lock()
		delete(s.inflight, h)
		s.pfMu.Unlock()
		close(ch)
	}()
	buf, err := s.getBuf(ctx)
	if err != nil {
		return err
	}
	defer s.putBuf(buf)
	data, err := s.getChunk(ctx, h, buf, hint)
	if errors.Is(err, errNotFound) {
		return fmt.Errorf("%w: chunk %s is missing from the bucket (deleted by someone else?)", ErrCorrupt, h)
	}
	if err != nil {
		return fmt.Errorf("get chunk %s: %w", h, err)
	}
	if got := hashOf(data); got != h {
		return fmt.Errorf("%w: chunk object %s holds bytes that hash to %s (modified by someone else)", ErrCorrupt, h, got)
	}
	s.downloads.Add(1)
	s.downBytes.Add(int64(len(data)))
	err = s.cache.put(h, data)
	if errors.Is(err, ErrNoSpace) && s.cache.shed(int64(len(data))) {
		err = s.cache.put(h, data)
	}
	return err
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// prefetchCap is the window's maximum for the store's chunk size.
func (s *Store) prefetchCap() int {
	switch c := s.cfg.PrefetchMax; {
	case c < 0:
		return 0
	case c > 0:
		return c
	case s.cs <= 64<<10:
		return 16
	case s.cs <= 1<<20:
		return 8
	case s.cs <= 4<<20:
		return 4
	}
	return 2
}

// noteRead updates ino's sequential-access detector with a read of chunks
// first..last and starts prefetches. After chunks n-i..n-1 were read in
// order, reading chunk n makes the window 2^(i-1) chunks (seed 001 §6.3.3,
// like the kernel's read-ahead), capped; a jump resets it to 0.
func (s *Store) noteRead(ino uint64, first, last int64) {
	limit := s.prefetchCap()
	if limit == 0 {
		return
	}
	s.mu.Lock()
	st := s.istate(ino)
	window := st.advance(first, last, limit)
	type chunk struct {
		h    string
		hint int64
	}
	var want []chunk
	if in := s.m.Inodes[ino]; in != nil {
		for idx := last + 1; idx <= last+int64(window) && idx*s.cs < in.Size; idx++ {
			hint := min(s.cs, in.Size-idx*s.cs)
			if d := st.dirty[idx]; d != nil {
				if len(d.miss) > 0 && d.lost == nil {
					want = append(want, chunk{d.base, s.cs}) // a partial chunk's base
				}
			} else if h := in.Chunks[idx]; h != "" {
				want = append(want, chunk{h, hint})
			}
		}
	}
	ctx := s.bgctx
	s.mu.Unlock()
	for _, c := range want {
		h := c.h
		if s.cache.peek(h) {
			continue
		}
		s.pfMu.Lock()
		busy := s.pfBusy[h] || s.inflight[h] != nil
		if !busy {
			s.pfBusy[h] = true
		}
		s.pfMu.Unlock()
		if busy {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			err := s.fetch(ctx, h, c.hint)
			s.pfMu.Lock()
			delete(s.pfBusy, h)
			if err == nil {
				s.pfDone[h] = true
				if len(s.pfDone) > 4096 {
					clear(s.pfDone)
				}
			}
			s.pfMu.Unlock()
			if err == nil {
				s.prefetched.Add(1)
			} else if ctx.Err() == nil {
				s.log.Debug("chunkstore: prefetch failed", "chunk", h, "err", err)
			}
		}()
	}
}

// advance feeds a read of chunks first..last to the detector and returns
// the prefetch window: 0 after a jump, 2^(i-1) (at most limit) when the
// i chunks before this one were read in order.
func (st *istate) advance(first, last int64, limit int) int {
	for idx := first; idx <= last; idx++ {
		switch idx {
		case st.lastIdx:
		case st.lastIdx + 1:
			st.run++
		default:
			st.run = 0
		}
		st.lastIdx = idx
	}
	if st.run == 0 {
		return 0
	}
	return min(1<<min(st.run-1, 20), limit)
}

// dirtyFile opens d's cache file; the caller holds the chunk lock.
func (s *Store) dirtyFile(ino uint64, idx int64, d *dirtyChunk) (*os.File, error) {
	if d.f != nil {
		return d.f, nil
	}
	f, err := os.OpenFile(s.dirtyPath(ino, idx), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, noSpace(err)
	}
	d.f = f
	return f, nil
}

// WriteAt writes p at off into ino, growing it as needed. The bytes go to
// the chunk's dirty cache file and are uploaded by write-back, Flush or
// Sync. It never waits for the network: a chunk not cached becomes a
// partial dirty chunk, completed from the bucket only when needed
// (partial.go).
func (s *Store) WriteAt(ctx context.Context, ino uint64, p []byte, off int64) (int, error) {
	t0 := time.Now()
	n, err := s.writeAt(ctx, ino, p, off)
	if n > 0 {
		d := int64(time.Since(t0))
		s.writes.Add(1)
		s.writeNanos.Add(d)
		for m := s.writeMax.Load(); d > m && !s.writeMax.CompareAndSwap(m, d); m = s.writeMax.Load() {
		}
	}
	return n, err
}

func (s *Store) writeAt(ctx context.Context, ino uint64, p []byte, off int64) (int, error) {
	s.mu.Lock()
	err := s.writable()
	in := s.m.Inodes[ino]
	switch {
	case err != nil:
	case in == nil:
		err = ErrNotExist
	case in.Mode&syscall.S_IFMT == syscall.S_IFDIR:
		err = ErrIsDir
	case in.Mode&syscall.S_IFMT != syscall.S_IFREG:
		err = ErrInvalid
	case off < 0:
		err = ErrInvalid
	case off+int64(len(p)) > MaxFileSize:
		err = ErrTooLarge
	case s.m.Kind == KindVolume && off+int64(len(p)) > in.Size:
		err = ErrTooLarge
	}
	var size int64
	if err == nil {
		size = in.Size
	}
	s.mu.Unlock()
	if err != nil || len(p) == 0 {
		return 0, err
	}
	end := off + int64(len(p))
	if end > size {
		if err := s.seal(ctx, ino, size); err != nil {
			return 0, err
		}
	}
	over := false
	n := int64(0)
	for pos := off; pos < end; {
		idx := pos / s.cs
		co := pos - idx*s.cs
		l := min(s.cs-co, end-pos)
		o, err := s.writeChunk(ctx, ino, idx, p[n:n+l], co)
		over = over || o
		if err != nil {
			return int(n), err
		}
		pos += l
		n += l
	}
	tj := time.Now()
	s.mu.Lock()
	if in = s.m.Inodes[ino]; in != nil {
		a := attrs(in)
		a.Size = max(a.Size, end)
		a.Mtime = time.Now().UnixNano()
		a.Ctime = a.Mtime
		err = s.record(&rec{O: "i", I: a})
	}
	s.mu.Unlock()
	s.journalNanos.Add(int64(time.Since(tj)))
	if err != nil {
		return int(n), err
	}
	if over {
		// Dirty data alone fills the cache: upload some now instead of
		// letting the cache grow past its limit.
		if err := s.relieve(ctx); err != nil {
			return int(n), err
		}
	}
	s.earlyWriteBack()
	return int(n), nil
}

func (s *Store) writeChunk(ctx context.Context, ino uint64, idx int64, data []byte, co int64) (over bool, err error) {
	lk := s.chunkLock(ino, idx)
	lk.Lock()
	defer lk.Unlock()
	s.mu.Lock()
	size := int64(0)
	if in := s.m.Inodes[ino]; in != nil {
		size = in.Size
	}
	fresh := s.st[ino] == nil || s.st[ino].dirty[idx] == nil
	s.mu.Unlock()
	whole := co == 0 && (int64(len(data)) >= s.cs || idx*s.cs+int64(len(data)) >= size)
	t0 := time.Now()
	d, wrote, err := s.makeDirty(ctx, ino, idx, whole, data, co)
	if err != nil {
		return false, err
	}
	if fresh {
		s.newChunks.Add(1)
		s.newChunkNanos.Add(int64(time.Since(t0)))
	}
	if !wrote {
		f, err := s.dirtyFile(ino, idx, d)
		if err != nil {
			return false, err
		}
		_, err = f.WriteAt(data, co)
		if err != nil && errors.Is(noSpace(err), ErrNoSpace) && s.cache.shed(int64(len(data))+s.cs) {
			_, err = f.WriteAt(data, co) // the disk filled before the limit: clean chunks made room
		}
		if err != nil {
			return false, fmt.Errorf("cache: %w", noSpace(err))
		}
	}
	s.mu.Lock()
	d.ver++
	d.flen = max(d.flen, co+int64(len(data)))
	miss := d.miss
	over = s.recharge(d) // again below once the missing ranges shrink
	s.mu.Unlock()
	if len(miss) == 0 {
		return over, nil
	}
	// The bytes are in the file; now the record that they are the
	// chunk's (before that, a crash keeps the base's bytes there: the
	// write was not acknowledged).
	left := without(miss, co, co+int64(len(data)))
	if sameSpans(left, miss) {
		return over, nil
	}
	if err := s.setMiss(ino, idx, d, d.base, left); err != nil {
		return over, err
	}
	s.mu.Lock()
	d.miss = left
	if len(left) == 0 {
		d.base, d.lost = "", nil
	}
	over = s.recharge(d) || over
	s.mu.Unlock()
	if len(left) > maxSpans {
		// Too scattered to keep track of cheaply: complete it now. The
		// write itself is done; a failed fetch is tried again later.
		if err := s.fill(ctx, ino, idx, lk); err != nil {
			s.log.Debug("chunkstore: completing a scattered partial chunk failed", "inode", ino, "chunk", idx, "err", err)
		}
	}
	return over, nil
}

// makeDirty returns chunk idx's dirty state, creating it when the chunk
// is clean: a dirty file with the chunk's object as its base and all of
// it missing (a partial chunk, partial.go), whether the object is cached
// or not, so that a write never copies or fetches a chunk. Nothing is
// missing when the chunk is a hole or whole (the caller overwrites all
// of it). With data (the write that makes the chunk dirty, at co) and a
// pooled file ready, the new file is named with data already in it and
// the record already without the written range, and wrote is true: the
// caller's write is done. The caller holds the chunk lock.
func (s *Store) makeDirty(ctx context.Context, ino uint64, idx int64, whole bool, data []byte, co int64) (*dirtyChunk, bool, error) {
	s.mu.Lock()
	in := s.m.Inodes[ino]
	if in == nil {
		s.mu.Unlock()
		return nil, false, ErrNotExist
	}
	st := s.istate(ino)
	if d := st.dirty[idx]; d != nil {
		s.mu.Unlock()
		return d, false, nil
	}
	h := in.Chunks[idx]
	bound := max(0, min(s.cs, in.Size-idx*s.cs))
	s.mu.Unlock()
	d := &dirtyChunk{since: time.Now()}
	if h != "" && !whole && bound > 0 {
		d.base, d.miss = h, []span{{0, bound}}
	}
	path := s.dirtyPath(ino, idx)
	if f := s.takeForWrite(data); f != nil {
		// The write goes into an unnamed file (newfile.go) and the
		// record says at once which bytes are the file's own; the
		// record is named before the file, so a crash in between
		// leaves a record without a file (dropped at Open), never a
		// file whose record is missing.
		miss := without(d.miss, co, co+int64(len(data)))
		_, err := f.WriteAt(data, co)
		if err == nil {
			err = s.setMiss(ino, idx, d, d.base, miss)
			if err == nil {
				if err = s.newDirty.link(f, filepath.Base(path)); err == nil {
					if d.miss = miss; len(miss) == 0 {
						d.base = ""
					}
					d.f = f
					s.mu.Lock()
					st.dirty[idx] = d
					s.mu.Unlock()
					return d, true, nil
				}
				d.closeFiles()
				s.saveMiss(ino, idx, "", nil)
			}
		}
		f.Close() // and the ordinary way below
	}
	// The record goes first: a dirty file without one is complete.
	if err := s.setMiss(ino, idx, d, d.base, d.miss); err != nil {
		return nil, false, err
	}
	// A pooled file when one is ready (newfile.go), else a new one.
	f, err := s.newDirty.create(filepath.Base(path), nil)
	if err != nil {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	}
	if err != nil {
		d.closeFiles()
		s.saveMiss(ino, idx, "", nil)
		return nil, false, noSpace(err)
	}
	d.f = f
	s.mu.Lock()
	st.dirty[idx] = d
	s.mu.Unlock()
	return d, false, nil
}

// takeForWrite is an unnamed file for a chunk's first write (data), or
// nil when there is no write or no pooled file.
func (s *Store) takeForWrite(data []byte) *os.File {
	if len(data) == 0 {
		return nil
	}
	return s.newDirty.take()
}

// dropDirty forgets chunk idx's dirty data; the caller holds the chunk
// lock and s.mu.
func (s *Store) dropDirty(ino uint64, idx int64) {
	st := s.st[ino]
	if st == nil || st.dirty[idx] == nil {
		return
	}
	d := st.dirty[idx]
	d.closeFiles()
	os.Remove(s.dirtyPath(ino, idx))
	os.Remove(s.partialPath(ino, idx))
	delete(st.dirty, idx)
	s.cache.reserveDirty(-d.charge)
}

// Truncate sets ino's size. Shrinking drops the chunks past the end and
// zeroes the tail of the last one (so growing again reads zeros); growing
// only changes the size: the new range is a hole.
func (s *Store) Truncate(ctx context.Context, ino uint64, size int64) error {
	s.mu.Lock()
	err := s.writable()
	in := s.m.Inodes[ino]
	switch {
	case err != nil:
	case in == nil:
		err = ErrNotExist
	case in.Mode&syscall.S_IFMT == syscall.S_IFDIR:
		err = ErrIsDir
	case in.Mode&syscall.S_IFMT != syscall.S_IFREG || size < 0:
		err = ErrInvalid
	case size > MaxFileSize:
		err = ErrTooLarge
	case s.m.Kind == KindVolume && size != in.Size:
		err = ErrInvalid
	}
	var drop []int64
	if err == nil && size < in.Size {
		keep := (size + s.cs - 1) / s.cs
		seen := map[int64]bool{}
		for idx := range in.Chunks {
			if idx >= keep {
				seen[idx] = true
			}
		}
		if st := s.st[ino]; st != nil {
			for idx := range st.dirty {
				if idx >= keep {
					seen[idx] = true
				}
			}
		}
		for idx := range seen {
			drop = append(drop, idx)
		}
	}
	shrink := err == nil && size < in.Size
	var oldSize int64
	if err == nil {
		oldSize = in.Size
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if size > oldSize {
		if err := s.seal(ctx, ino, oldSize); err != nil {
			return err
		}
	}
	for _, idx := range drop {
		if err := s.clearChunk(ino, idx); err != nil {
			return err
		}
	}
	if shrink && size%s.cs != 0 {
		idx := size / s.cs
		lk := s.chunkLock(ino, idx)
		lk.Lock()
		d, _, err := s.makeDirty(ctx, ino, idx, false, nil, 0)
		if err == nil {
			var f *os.File
			if f, err = s.dirtyFile(ino, idx, d); err == nil {
				err = f.Truncate(size % s.cs)
			}
			s.mu.Lock()
			d.ver++
			if err == nil {
				d.flen = size % s.cs
			}
			miss, left := d.miss, cut(d.miss, size%s.cs)
			s.recharge(d)
			s.mu.Unlock()
			if err == nil && !sameSpans(miss, left) {
				// The base's bytes past the new end are gone too.
				if err = s.setMiss(ino, idx, d, d.base, left); err == nil {
					s.mu.Lock()
					if d.miss = left; len(left) == 0 {
						d.base, d.lost = "", nil
					}
					s.mu.Unlock()
				}
			}
		}
		lk.Unlock()
		if err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if in = s.m.Inodes[ino]; in == nil {
		return ErrNotExist
	}
	a := attrs(in)
	a.Size = size
	a.Mtime = time.Now().UnixNano()
	a.Ctime = a.Mtime
	return s.record(&rec{O: "i", I: a})
}

// Punch makes [off, off+n) of ino a hole: chunks wholly inside are dropped
// (no object, no cache), the partial chunks at the edges get zeros. The
// size does not change (fallocate's PUNCH_HOLE|KEEP_SIZE, SCSI UNMAP).
func (s *Store) Punch(ctx context.Context, ino uint64, off, n int64) error {
	s.mu.Lock()
	err := s.writable()
	in := s.m.Inodes[ino]
	switch {
	case err != nil:
	case in == nil:
		err = ErrNotExist
	case in.Mode&syscall.S_IFMT != syscall.S_IFREG || off < 0 || n < 0:
		err = ErrInvalid
	}
	var end int64
	if err == nil {
		end = min(off+n, in.Size)
	}
	s.mu.Unlock()
	if err != nil || off >= end {
		return err
	}
	a, e := (off+s.cs-1)/s.cs, end/s.cs // whole chunks [a, e)
	for idx := a; idx < e; idx++ {
		if err := s.clearChunk(ino, idx); err != nil {
			return err
		}
	}
	edges := [][2]int64{{off, min(a*s.cs, end)}, {max(e*s.cs, off), end}}
	if a > e { // inside one chunk
		edges = [][2]int64{{off, end}}
	}
	for _, r := range edges {
		if r[0] < r[1] {
			if _, err := s.WriteAt(ctx, ino, make([]byte, r[1]-r[0]), r[0]); err != nil {
				return err
			}
		}
	}
	return nil
}

// seal trims the chunk holding the end of a file of oldSize bytes before
// the file grows past it. A chunk object may hold bytes past the size: a
// manifest published in the middle of a truncate names the old last chunk
// with the new, smaller size (its trimmed copy is still dirty). Those
// bytes are never read while they are past the end, but growing the file
// would expose them, so the grown file gets the chunk trimmed (as a dirty
// copy) instead. Nothing happens when the chunk is a hole, already dirty
// (dirty copies never hold bytes past the size) or the size is aligned.
func (s *Store) seal(ctx context.Context, ino uint64, oldSize int64) error {
	if oldSize%s.cs == 0 {
		return nil
	}
	idx := oldSize / s.cs
	lk := s.chunkLock(ino, idx)
	lk.Lock()
	defer lk.Unlock()
	s.mu.Lock()
	in := s.m.Inodes[ino]
	if in == nil || in.Size != oldSize || in.Chunks[idx] == "" || (s.st[ino] != nil && s.st[ino].dirty[idx] != nil) {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	d, _, err := s.makeDirty(ctx, ino, idx, false, nil, 0)
	if err != nil {
		return err
	}
	s.mu.Lock()
	d.ver++
	s.mu.Unlock()
	return nil
}

// clearChunk turns chunk idx of ino into a hole (truncate and punch hole):
// any dirty copy is dropped, and a chunk the manifest names is cleared
// through the journal. It takes the chunk's lock, then s.mu.
func (s *Store) clearChunk(ino uint64, idx int64) error {
	lk := s.chunkLock(ino, idx)
	lk.Lock()
	defer lk.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropDirty(ino, idx)
	if in := s.m.Inodes[ino]; in != nil && in.Chunks[idx] != "" {
		return s.record(&rec{O: "c", N: ino, X: idx})
	}
	return nil
}

package chunkstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"sync"
	"time"
)

type chunkRef struct {
	ino uint64
	idx int64
}

// Sync uploads every dirty chunk and publishes the manifest. Chunks
// whose base is lost (ErrBaseLost) stay dirty and do not hold back the
// rest: everything else is uploaded and published, then Sync returns
// an error that errors.Is ErrBaseLost (and only then: any other failure
// comes first and nothing is published).
func (s *Store) Sync(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	err := s.upload(ctx, s.dirtyChunks(func(uint64, *dirtyChunk) bool { return true }))
	if err != nil && !errors.Is(err, ErrBaseLost) {
		return err
	}
	if perr := s.publish(ctx); perr != nil {
		return perr
	}
	return err
}

// Flush uploads ino's dirty chunks and, with publish, the manifest: what
// fsync(2) needs (the file's data and its name are in the bucket). Without
// publish (close(2)) the data is uploaded now and the manifest naming it
// follows at the next write-back check.
func (s *Store) Flush(ctx context.Context, ino uint64, publish bool) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	refs := s.dirtyChunks(func(i uint64, _ *dirtyChunk) bool { return i == ino })
	if err := s.upload(ctx, refs); err != nil {
		return err
	}
	if publish {
		return s.publish(ctx)
	}
	if len(refs) > 0 {
		s.mu.Lock()
		s.publishSoon = true
		s.mu.Unlock()
	}
	return nil
}

// writeBack uploads dirty chunks older than age and publishes when data
// went up, a close asked for it, or metadata changes are older than age.
func (s *Store) writeBack(ctx context.Context, age time.Duration) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	cut := time.Now().Add(-age)
	// Chunks whose base is lost wait for writes (or Sync, Flush, the
	// next Open); the error was logged when it was found.
	refs := s.dirtyChunks(func(_ uint64, d *dirtyChunk) bool { return !d.since.After(cut) && d.lost == nil })
	if err := s.upload(ctx, refs); err != nil && !errors.Is(err, ErrBaseLost) {
		return err
	}
	s.mu.Lock()
	due := s.changes > 0 && (len(refs) > 0 || s.publishSoon || !s.firstChange.After(cut))
	s.mu.Unlock()
	if !due {
		return nil
	}
	return s.publish(ctx)
}

// earlyWriteBack starts uploading the oldest dirty chunks in the
// background once dirty chunks fill more than half the cache limit, until
// a quarter is left, whatever their age: without it nothing went up
// before dirty data alone passed the limit, and then the write that
// passed it waited for every dirty chunk's upload (seconds per write with
// chunks of several MiB on a WAN). Writes do not wait for it; only one
// runs at a time, and it holds flushMu like any write-back.
func (s *Store) earlyWriteBack() {
	if high, _ := s.cache.pressure(); !high || !s.draining.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	if s.closed || s.stop == nil || s.writable() != nil {
		s.mu.Unlock()
		s.draining.Store(false)
		return
	}
	ctx := s.bgctx
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer s.draining.Store(false)
		if err := s.drain(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("chunkstore: early write-back failed; the write-back will retry", "err", err)
		}
	}()
}

// drain uploads the oldest dirty chunks until a quarter of the cache
// limit is left dirty, then publishes.
func (s *Store) drain(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	high, excess := s.cache.pressure()
	if !high {
		return nil
	}
	if err := s.upload(ctx, s.oldestDirty(excess)); err != nil && !errors.Is(err, ErrBaseLost) {
		return err
	}
	return s.publish(ctx)
}

// relieve is what a write that took dirty data past the cache limit
// waits for: the oldest dirty chunks are uploaded until dirty data is
// down to three quarters of the limit (not every dirty chunk, as before:
// the writer waits for as few uploads as it can).
func (s *Store) relieve(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	_, dirty := s.cache.usage()
	excess := dirty - s.cache.limit*3/4
	if excess <= 0 {
		return nil // an upload that ran meanwhile made room
	}
	if err := s.upload(ctx, s.oldestDirty(excess)); err != nil && !errors.Is(err, ErrBaseLost) {
		return err
	}
	return s.publish(ctx)
}

// oldestDirty lists the oldest dirty chunks (not lost) whose charges add
// up to at least excess bytes.
func (s *Store) oldestDirty(excess int64) []chunkRef {
	refs := s.dirtyChunks(func(_ uint64, d *dirtyChunk) bool { return d.lost == nil })
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := int64(0)
	for i, r := range refs {
		if sum >= excess {
			return refs[:i]
		}
		if st := s.st[r.ino]; st != nil && st.dirty[r.idx] != nil {
			sum += st.dirty[r.idx].charge
		}
	}
	return refs
}

func (s *Store) writeBackLoop(ctx context.Context) {
	defer s.wg.Done()
	tk := time.NewTicker(s.cfg.WriteBackEvery)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		if err := s.writeBack(ctx, s.cfg.WriteBackAge); err != nil && ctx.Err() == nil {
			s.log.Warn("chunkstore: write-back failed; will retry", "err", err)
		}
	}
}

// dirtyChunks lists the dirty chunks keep selects, oldest first.
func (s *Store) dirtyChunks(keep func(uint64, *dirtyChunk) bool) []chunkRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	type aged struct {
		chunkRef
		since time.Time
	}
	var l []aged
	for ino, st := range s.st {
		for idx, d := range st.dirty {
			if keep(ino, d) {
				l = append(l, aged{chunkRef{ino, idx}, d.since})
			}
		}
	}
	sort.Slice(l, func(i, j int) bool { return l[i].since.Before(l[j].since) })
	out := make([]chunkRef, len(l))
	for i, a := range l {
		out[i] = a.chunkRef
	}
	return out
}

// upload sends the chunks with Parallelism workers (each holding one
// transfer buffer: the memory bound). All are tried; the first error is
// returned, one that is not ErrBaseLost if there is one (else all the
// ErrBaseLost ones, joined). The caller holds flushMu.
func (s *Store) upload(ctx context.Context, refs []chunkRef) error {
	if len(refs) == 0 {
		return nil
	}
	s.mu.Lock()
	err := s.writable()
	if errors.Is(err, ErrClosed) {
		err = nil // Close's own final sync
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	var (
		mu    sync.Mutex
		first error
		lost  []error
		next  int
		wg    sync.WaitGroup
	)
	for range min(s.cfg.Parallelism, len(refs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= len(refs) {
					mu.Unlock()
					return
				}
				r := refs[next]
				next++
				mu.Unlock()
				if err := s.uploadChunk(ctx, r.ino, r.idx); err != nil {
					mu.Lock()
					switch {
					case errors.Is(err, ErrBaseLost):
						lost = append(lost, err)
					case first == nil:
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return errors.Join(lost...)
}

// uploadChunk stores one dirty chunk as the object named by its hash
// (skipped if the published manifest already names that hash, or the
// chunk is all zeros: a hole), records the name, and turns the dirty
// chunk into a clean cache entry unless a write came in meanwhile. A
// partial chunk is put together in the transfer buffer (its base's
// bytes where it has none of its own: read from the cache, or downloaded
// for this upload alone) and never completed on disk, so it keeps
// counting only its written bytes against the cache limit while it is
// uploaded.
func (s *Store) uploadChunk(ctx context.Context, ino uint64, idx int64) error {
	lk := s.chunkLock(ino, idx)
	lk.Lock()
	var (
		d        *dirtyChunk
		in       *Inode
		ver      uint64
		bound    int64
		base     string
		miss     []span
		baseData []byte // a partial chunk's base
		dlBase   string // the base baseData holds
	)
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		in = s.m.Inodes[ino]
		d = nil
		if st := s.st[ino]; st != nil {
			d = st.dirty[idx]
		}
		if in == nil || d == nil {
			s.mu.Unlock()
			lk.Unlock()
			return nil
		}
		ver, bound, base, miss = d.ver, min(s.cs, in.Size-idx*s.cs), d.base, d.miss
		lost := d.lost
		s.mu.Unlock()
		if len(miss) == 0 || lost != nil {
			if lost != nil {
				lk.Unlock()
				return fmt.Errorf("complete chunk %d of inode %d for upload: %w", idx, ino, lost)
			}
			baseData = nil
			break
		}
		if baseData != nil && dlBase == base {
			break // downloaded on the turn before, the base unchanged
		}
		if s.cache.has(base) {
			b, err := os.ReadFile(s.cache.cleanPath(base))
			if err == nil {
				baseData, dlBase = b, base
				break
			}
			if !errors.Is(err, fs.ErrNotExist) {
				lk.Unlock()
				return err
			}
			s.cache.forget(base) // evicted between the check and the read
		}
		if attempt > 4 {
			lk.Unlock()
			return fmt.Errorf("chunk %d of inode %d: its base keeps changing", idx, ino)
		}
		// Download the base without the chunk lock (writes go on) and
		// before taking a transfer buffer (none is held while waiting
		// for a chunk lock), then look again.
		lk.Unlock()
		data, err := s.download(ctx, base, miss[len(miss)-1].B)
		lk.Lock()
		if errors.Is(err, ErrCorrupt) || errors.Is(err, errNotFound) {
			err = s.loseBase(ino, idx, d, base, err)
		}
		if err != nil {
			lk.Unlock()
			return fmt.Errorf("complete chunk %d of inode %d for upload: %w", idx, ino, err)
		}
		baseData, dlBase = data, base
	}
	buf, err := s.getBuf(ctx)
	if err != nil {
		lk.Unlock()
		return err
	}
	// The buffer goes back before the chunk lock is taken again below:
	// holding it while waiting for a lock stripe that another uploader
	// holds while it waits in getBuf would deadlock once every buffer is
	// held that way.
	release := sync.OnceFunc(func() { s.putBuf(buf) })
	defer release()
	f, err := s.dirtyFile(ino, idx, d)
	n := 0
	if err == nil && bound > 0 {
		if len(miss) == 0 {
			n, err = f.ReadAt(buf[:bound], 0)
			if errors.Is(err, io.EOF) {
				err = nil
			}
		} else {
			n = int(bound)
			err = assemble(f, buf[:bound], baseData, miss)
		}
	}
	// Bytes past the size are a write whose size is not recorded yet
	// (WriteAt records it after the data): this upload does not cover
	// them, so the chunk stays dirty.
	longer := false
	if err == nil {
		if fi, serr := f.Stat(); serr == nil {
			longer = fi.Size() > max(bound, 0)
		}
	}
	lk.Unlock()
	if err != nil {
		return fmt.Errorf("read dirty chunk %d of inode %d: %w", idx, ino, err)
	}
	data := buf[:n]
	h := ""
	if !allZero(data) {
		h = hashOf(data)
		s.mu.Lock()
		_, have := s.pubRefs[h]
		s.mu.Unlock()
		if !have {
			if _, err := s.b.put(ctx, chunkKey(h), data, ""); err != nil {
				return fmt.Errorf("put chunk %d of inode %d: %w", idx, ino, err)
			}
			s.uploads.Add(1)
			s.upBytes.Add(int64(n))
		}
		if len(miss) > 0 {
			// A partial chunk has no complete file to adopt: its bytes
			// go to the cache from the buffer (content-addressed, so
			// right whatever happens to the dirty chunk meanwhile).
			if err := s.cache.put(h, data); err != nil {
				s.log.Debug("chunkstore: caching an uploaded chunk failed", "chunk", h, "err", err)
			}
		}
	}
	release()
	lk.Lock()
	defer lk.Unlock()
	s.mu.Lock()
	in = s.m.Inodes[ino]
	st := s.st[ino]
	if in == nil || st == nil || st.dirty[idx] != d {
		s.mu.Unlock()
		return nil // deleted or truncated away meanwhile
	}
	if in.Chunks[idx] != h {
		if err := s.record(&rec{O: "c", N: ino, X: idx, H: h}); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	if d.ver != ver || longer {
		// Written meanwhile: stays dirty, the upload still counts. A
		// partial chunk's missing bytes are now those of h (they were
		// its base's), and the old base is no longer named, so it may
		// be deleted at the next publish: h becomes the base.
		var err error
		if len(d.miss) > 0 && d.base == base {
			if h == "" {
				err = s.setMiss(ino, idx, d, "", nil) // the missing bytes were zeros, as the file's holes are
				if err == nil {
					d.miss, d.base, d.lost = nil, "", nil
				}
			} else if err = s.setMiss(ino, idx, d, h, d.miss); err == nil {
				d.base = h
			}
			s.recharge(d)
		}
		s.mu.Unlock()
		return err
	}
	delete(st.dirty, idx)
	s.cache.reserveDirty(-d.charge)
	s.mu.Unlock()
	path := s.dirtyPath(ino, idx)
	d.closeFiles()
	if len(miss) > 0 {
		os.Remove(path)
		return os.Remove(s.partialPath(ino, idx))
	}
	if h == "" {
		return os.Remove(path)
	}
	// The file may be longer than the chunk after a crash between a write
	// and its size record; the clean copy holds exactly the hashed bytes.
	if err := os.Truncate(path, int64(n)); err != nil {
		os.Remove(path)
		return nil
	}
	if err := s.cache.adopt(h, path, int64(n)); err != nil {
		os.Remove(path)
	}
	return nil
}

// assemble puts a partial chunk's bytes together in dst: the dirty
// file's bytes, with the missing ranges from its base (bytes past the
// base's end are zeros). The caller holds the chunk lock.
func assemble(f *os.File, dst []byte, base []byte, miss []span) error {
	if err := readFill(f, dst, 0); err != nil {
		return err
	}
	for _, m := range miss {
		if a, b := m.A, min(m.B, int64(len(dst))); a < b {
			k := 0
			if a < int64(len(base)) {
				k = copy(dst[a:b], base[a:])
			}
			clear(dst[a+int64(k) : b])
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// publish writes the manifest if anything changed since the last one:
// after checking the bucket's manifest is still the one this gateway last
// wrote (HEAD, and If-Match where the server supports it), so a store
// changed by someone else is never overwritten (ErrConflict). Then it
// deletes the chunks the previous manifest named and this one does not.
// The caller holds flushMu, so no upload runs meanwhile.
func (s *Store) publish(ctx context.Context) error {
	s.mu.Lock()
	if s.changes == 0 && s.m.Generation > 0 {
		s.mu.Unlock()
		return nil
	}
	if err := s.writable(); err != nil && !errors.Is(err, ErrClosed) {
		s.mu.Unlock()
		return err
	}
	if s.lease != nil && !s.lease.valid(time.Second) {
		s.mu.Unlock()
		return fmt.Errorf("%w: the lease expired (renewals failed); not publishing", ErrReadOnly)
	}
	m := &Manifest{Format: s.m.Format, Kind: s.m.Kind, ChunkSize: s.m.ChunkSize, Generation: s.m.Generation + 1,
		NextIno: s.m.NextIno, Inodes: make(map[uint64]*Inode, len(s.m.Inodes))}
	for ino, in := range s.m.Inodes {
		m.Inodes[ino] = in.clone()
	}
	covered, etag := s.changes, s.pubETag
	s.mu.Unlock()
	data, err := m.encode()
	if err != nil {
		return err
	}
	cur, err := s.b.head(ctx, manifestKey)
	switch {
	case errors.Is(err, errNotFound):
		cur = ""
	case err != nil:
		return fmt.Errorf("check manifest: %w", err)
	}
	if cur != etag {
		return fmt.Errorf("%w: the bucket's manifest has ETag %s, this gateway last wrote %q; not publishing over it",
			ErrConflict, cur, etag)
	}
	newETag, err := s.b.put(ctx, manifestKey, data, etag)
	if errors.Is(err, errPrecondition) {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	if err != nil {
		return fmt.Errorf("put manifest: %w", err)
	}
	if newETag == "" {
		if newETag, err = s.b.head(ctx, manifestKey); err != nil {
			return fmt.Errorf("check manifest: %w", err)
		}
	}
	s.publishes.Add(1)
	s.mu.Lock()
	left := s.changes - covered
	err = s.record(&rec{O: "g", Gen: m.Generation, ETag: newETag, X: int64(left)})
	s.changes = left
	if left > 0 {
		s.firstChange = time.Now()
	}
	s.publishSoon = false
	prev := s.pubRefs
	s.pubRefs = refs(m.Inodes)
	if err == nil && s.jrecs > 10000 {
		err = s.writeSnapshot()
	}
	next := s.pubRefs
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for h := range prev {
		if _, ok := next[h]; ok {
			continue
		}
		if err := s.b.del(ctx, chunkKey(h)); err != nil {
			s.log.Warn("chunkstore: could not delete a chunk no longer named; the next open sweeps it", "chunk", h, "err", err)
			continue
		}
		s.deleted.Add(1)
	}
	return nil
}

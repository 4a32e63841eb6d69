package chunkstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Partial dirty chunks. A write into a chunk that the bucket holds but the
// cache does not must not wait for the chunk to come over the network:
// the written bytes go to the dirty file at once, and the chunk remembers
// its base (the object it was made from) and the ranges of the base that
// are still missing from the file. Byte x of such a chunk is
//
//	the base's byte x   if x lies in a missing range,
//	the file's byte x   otherwise (zeros past the file's end).
//
// The missing ranges only ever shrink (writes cover them, a truncate cuts
// them), and they never reach past the file size as it was when the chunk
// became dirty, so the base's bytes past that size stay unseen. The base
// is fetched, and the missing ranges filled in from it (fill), only when
// something needs them: a read of a missing byte, or the chunk's upload.
// A chunk whose writes cover all of its missing ranges is never fetched.
//
// The record lives in partial/<ino>.<idx> beside dirty/<ino>.<idx>: it is
// named before the dirty file is (a pooled unnamed file, newfile.go, or
// a temp file + rename), rewritten after every write that covers a
// missing range, and removed once the file is complete, so a killed
// gateway's next Open knows which bytes of each dirty file are its own
// (see adopt).

// span is the byte range [A, B) of a chunk.
type span struct{ A, B int64 }

// maxSpans bounds a partial chunk's missing ranges: scattered small writes
// into a big chunk would make the record large, so past this many the
// write fetches the base instead (read-modify-write, as for a cached one).
const maxSpans = 128

// partialRec is the JSON in partial/<ino>.<idx>.
type partialRec struct {
	Base string     `json:"base"`
	Miss [][2]int64 `json:"miss"`
}

// without returns miss with [a, b) taken out.
func without(miss []span, a, b int64) []span {
	var out []span
	for _, m := range miss {
		if m.B <= a || m.A >= b {
			out = append(out, m)
			continue
		}
		if m.A < a {
			out = append(out, span{m.A, a})
		}
		if m.B > b {
			out = append(out, span{b, m.B})
		}
	}
	return out
}

// cut returns miss with everything at or past n removed.
func cut(miss []span, n int64) []span {
	return without(miss, max(n, 0), MaxChunkSize+1)
}

func overlaps(miss []span, a, b int64) bool {
	for _, m := range miss {
		if m.A < b && a < m.B {
			return true
		}
	}
	return false
}

func sameSpans(a, b []span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s *Store) partialPath(ino uint64, idx int64) string {
	return filepath.Join(s.dir, "partial", strconv.FormatUint(ino, 10)+"."+strconv.FormatInt(idx, 10))
}

// saveMiss records chunk idx's base and missing ranges (none: removes the
// record). The caller holds the chunk lock.
func (s *Store) saveMiss(ino uint64, idx int64, base string, miss []span) error {
	path := s.partialPath(ino, idx)
	if len(miss) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	r := partialRec{Base: base, Miss: make([][2]int64, len(miss))}
	for i, m := range miss {
		r.Miss[i] = [2]int64{m.A, m.B}
	}
	b, err := json.Marshal(&r)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "partial-")
	if err != nil {
		return fmt.Errorf("cache: %w", noSpace(err))
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cache: %w", noSpace(err))
	}
	return nil
}

// setMiss is saveMiss for chunk idx's dirty state d, whose record
// already exists or is created here: an existing record is rewritten in
// place with one pwrite at offset 0, padded with spaces to its old length
// (JSON ignores them), when the new one fits in 4 KiB, which one write
// into the page cache replaces whole even if the process is killed (a
// crash of the machine loses unsynced cache files either way); otherwise,
// and for the first record, a new file renamed over the old. On this
// machine's ext4 a new file and rename cost about 1 ms, the pwrite tens
// of microseconds, and a write into a partial chunk rewrites the record
// each time it covers missing bytes. The caller holds the chunk lock.
func (s *Store) setMiss(ino uint64, idx int64, d *dirtyChunk, base string, miss []span) error {
	var b []byte
	if len(miss) > 0 {
		r := partialRec{Base: base, Miss: make([][2]int64, len(miss))}
		for i, m := range miss {
			r.Miss[i] = [2]int64{m.A, m.B}
		}
		var err error
		if b, err = json.Marshal(&r); err != nil {
			return err
		}
	}
	if len(b) > 0 && len(b) <= 4096 && d.rf != nil {
		if pad := d.rlen - len(b); pad > 0 {
			b = append(b, strings.Repeat(" ", pad)...)
		}
		if _, err := d.rf.WriteAt(b, 0); err == nil {
			d.rlen = len(b)
			return nil
		}
	}
	if d.rf != nil {
		d.rf.Close()
		d.rf, d.rlen = nil, 0
	}
	if len(b) > 0 && len(b) <= 4096 {
		// A new record: a pooled file, named with its bytes already in
		// it (newfile.go), when one is ready and the name is free.
		if f, err := s.newPartial.create(filepath.Base(s.partialPath(ino, idx)), b); err == nil {
			d.rf, d.rlen = f, len(b)
			return nil
		}
	}
	if err := s.saveMiss(ino, idx, base, miss); err != nil {
		return err
	}
	if len(miss) > 0 {
		if f, err := os.OpenFile(s.partialPath(ino, idx), os.O_RDWR, 0); err == nil {
			if fi, err := f.Stat(); err == nil && fi.Size() <= 4096 {
				d.rf, d.rlen = f, int(fi.Size())
			} else {
				f.Close()
			}
		}
	}
	return nil
}

// loadMiss reads chunk idx's record: "" and nil when there is none.
func (s *Store) loadMiss(ino uint64, idx int64) (string, []span, error) {
	b, err := os.ReadFile(s.partialPath(ino, idx))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	var r partialRec
	if err := json.Unmarshal(b, &r); err != nil || !validHash(r.Base) {
		return "", nil, fmt.Errorf("%w: cache record %s: %q", ErrCorrupt, s.partialPath(ino, idx), b)
	}
	var miss []span
	for _, m := range r.Miss {
		if m[0] < 0 || m[1] <= m[0] || m[1] > MaxChunkSize {
			return "", nil, fmt.Errorf("%w: cache record %s: range %v", ErrCorrupt, s.partialPath(ino, idx), m)
		}
		miss = append(miss, span{m[0], m[1]})
	}
	return r.Base, miss, nil
}

// fill completes chunk idx of ino if it is partial: the base is fetched
// (into the cache, without holding the chunk lock, so writes to the chunk
// go on meanwhile) and whatever is still missing is copied from it into
// the dirty file. The caller holds lk, the chunk's lock; fill holds it
// again when it returns, and then chunk idx is not partial (unless err).
// (An upload does not complete a partial chunk: uploadChunk.)
func (s *Store) fill(ctx context.Context, ino uint64, idx int64, lk *sync.Mutex) error {
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		base, hint := "", int64(0)
		var d *dirtyChunk
		if st := s.st[ino]; st != nil {
			if d = st.dirty[idx]; d != nil && len(d.miss) > 0 {
				// The base is at least as long as the missing ranges
				// reach (the last one open-ended covers a longer one).
				base, hint = d.base, d.miss[len(d.miss)-1].B
			}
		}
		var lost error
		if base != "" {
			lost = d.lost
		}
		s.mu.Unlock()
		if base == "" {
			return nil
		}
		if lost != nil {
			return lost
		}
		if attempt > 8 {
			return fmt.Errorf("chunk %d of inode %d: its base keeps changing or vanishing from the cache", idx, ino)
		}
		var data []byte
		if s.cache.has(base) {
			b, err := os.ReadFile(s.cache.cleanPath(base))
			switch {
			case err == nil:
				data = b
			case errors.Is(err, fs.ErrNotExist):
				s.cache.forget(base) // evicted between the check and the read
			default:
				return err
			}
		}
		if data == nil {
			lk.Unlock()
			var err error
			if attempt < 2 {
				s.misses.Add(1)
				err = s.fetch(ctx, base, hint)
			} else {
				// The cache cannot keep it (full of dirty data): a
				// download of its own.
				data, err = s.download(ctx, base, hint)
			}
			lk.Lock()
			if errors.Is(err, ErrCorrupt) || errors.Is(err, errNotFound) {
				return s.loseBase(ino, idx, d, base, err)
			}
			if err != nil {
				return err
			}
			if data == nil {
				continue
			}
		}
		if err := s.merge(ino, idx, base, data); err != nil {
			return err
		}
	}
}

// download fetches chunk h, verified, into a new slice (no cache).
func (s *Store) download(ctx context.Context, h string, hint int64) ([]byte, error) {
	buf, err := s.getBuf(ctx)
	if err != nil {
		return nil, err
	}
	defer s.putBuf(buf)
	data, err := s.getChunk(ctx, h, buf, hint)
	if err != nil {
		return nil, fmt.Errorf("get chunk %s: %w", h, err)
	}
	if got := hashOf(data); got != h {
		return nil, fmt.Errorf("%w: chunk object %s holds bytes that hash to %s (modified by someone else)", ErrCorrupt, h, got)
	}
	s.downloads.Add(1)
	s.downBytes.Add(int64(len(data)))
	return append([]byte(nil), data...), nil
}

// merge writes base's bytes into the missing ranges of chunk idx's dirty
// file, if the chunk is still partial on that base, then drops the record.
// The caller holds the chunk lock.
func (s *Store) merge(ino uint64, idx int64, base string, data []byte) error {
	s.mu.Lock()
	var d *dirtyChunk
	if st := s.st[ino]; st != nil {
		d = st.dirty[idx]
	}
	if d == nil || len(d.miss) == 0 || d.base != base {
		s.mu.Unlock()
		return nil
	}
	miss := d.miss
	s.mu.Unlock()
	f, err := s.dirtyFile(ino, idx, d)
	if err != nil {
		return err
	}
	flen := int64(0)
	for _, m := range miss {
		// The missing ranges of the file are holes (zeros): only the
		// base's bytes need writing, and a base shorter than a range
		// (never written that far) leaves zeros.
		if m.A >= int64(len(data)) {
			continue
		}
		e := min(m.B, int64(len(data)))
		if _, err := f.WriteAt(data[m.A:e], m.A); err != nil {
			return fmt.Errorf("cache: %w", noSpace(err))
		}
		flen = max(flen, e)
	}
	// The file is complete before the record goes: a crash in between
	// merges the same bytes again.
	if err := s.setMiss(ino, idx, d, base, nil); err != nil {
		return err
	}
	s.mu.Lock()
	d.miss, d.base, d.lost = nil, "", nil
	d.flen = max(d.flen, flen)
	s.recharge(d)
	s.mu.Unlock()
	return nil
}

// loseBase marks partial chunk idx of ino (d, on base) as one whose base
// is lost (why: missing or not its bytes) and logs it once. Its dirty
// file and record stay where they are, so nothing written is dropped:
// the bytes written are read from the file as before, a read of a byte
// still missing fails, and its upload is refused (it would put zeros
// where the base was) until writes cover the missing bytes or a
// truncate or unlink drops them; every Open tries the base again. The
// caller holds the chunk lock.
func (s *Store) loseBase(ino uint64, idx int64, d *dirtyChunk, base string, why error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st[ino]
	if st == nil || st.dirty[idx] != d || d.base != base || len(d.miss) == 0 {
		return fmt.Errorf("chunk %d of inode %d: its base %s: %w", idx, ino, base, why)
	}
	if d.lost != nil {
		return d.lost
	}
	name := s.pathOf(ino)
	var missing int64
	for _, m := range d.miss {
		missing += m.B - m.A
	}
	d.lost = fmt.Errorf("%w: %s (inode %d), chunk %d (bytes %d..%d of the file): %d bytes of it were never written here and must come from its base object %s, which is gone (%v); "+
		"not uploading it (that would put zeros where the base was). The written bytes are kept in %s (missing ranges in %s); "+
		"reading the other bytes fails until they are written again, or truncate or remove the file to drop them",
		ErrBaseLost, name, ino, idx, idx*s.cs, (idx+1)*s.cs, missing, s.b.prefix+chunkKey(base), why,
		s.dirtyPath(ino, idx), s.partialPath(ino, idx))
	s.log.Error("chunkstore: a partly written chunk's base object is lost", "file", name, "inode", ino, "chunk", idx,
		"base", s.b.prefix+chunkKey(base), "kept", s.dirtyPath(ino, idx), "record", s.partialPath(ino, idx), "err", why)
	return d.lost
}

// pathOf names ino by a path from the root (for messages), or
// "inode N" when no directory lists it. The caller holds s.mu.
func (s *Store) pathOf(ino uint64) string {
	if s.m.Kind == KindVolume {
		return "the volume"
	}
	var parts []string
	for cur, hops := ino, 0; cur != RootIno && hops < 4096; hops++ {
		var dir uint64
		for dino, din := range s.m.Inodes {
			for n, e := range din.Ents {
				if e == cur && n != "." && n != ".." {
					parts, dir = append(parts, n), dino
					break
				}
			}
			if dir != 0 {
				break
			}
		}
		if dir == 0 {
			return fmt.Sprintf("inode %d", ino)
		}
		cur = dir
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteString("/" + parts[i])
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

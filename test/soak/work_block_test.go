package soak

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fsx is an fsx-style model checker (after xfstests' fsx): random writes,
// reads, truncates, hole punches and fsyncs on one file, with the
// expected content in memory. Every read is compared with the model; a
// "drop" op fsyncs and evicts the file's pages (POSIX_FADV_DONTNEED) so
// the next read comes from the block device — here ext4 on a loop device
// on the iSCSI FUSE mount. With direct set the file is opened O_DIRECT
// and every op is 4 KiB aligned, so reads and writes go to the device
// each time.
type fsx struct {
	name    string
	path    string
	direct  bool
	maxSize int64
	f       *os.File
	model   []byte
	ops     int
	errRun  int // consecutive errors
	resyncs int
}

const fsxAlign = 4096

// alignedBuf returns n bytes starting at a 4 KiB boundary (O_DIRECT).
func alignedBuf(n int) []byte {
	b := make([]byte, n+fsxAlign)
	off := int(fsxAlign - uintptr(unsafe.Pointer(&b[0]))%fsxAlign)
	if off == fsxAlign {
		off = 0
	}
	return b[off : off+n : off+n]
}

func (x *fsx) open() error {
	flags := os.O_RDWR | os.O_CREATE
	if x.direct {
		flags |= syscall.O_DIRECT
	}
	f, err := os.OpenFile(x.path, flags, 0o644)
	if err != nil {
		return err
	}
	x.f = f
	return nil
}

func (x *fsx) close() {
	if x.f != nil {
		x.f.Close()
		x.f = nil
	}
}

// span picks an offset and length; aligned for O_DIRECT.
func (x *fsx) span(rng *rand.Rand, limit int64, maxLen int64) (int64, int64) {
	if limit <= 0 {
		limit = 1
	}
	off := rng.Int64N(limit)
	n := 1 + rng.Int64N(maxLen)
	if x.direct {
		off &^= fsxAlign - 1
		n = (n + fsxAlign - 1) &^ (fsxAlign - 1)
	}
	if off+n > x.maxSize {
		n = x.maxSize - off
	}
	return off, n
}

// step does one random operation; an error is the op's error (the
// caller records it), a content mismatch is recorded here as data loss.
func (x *fsx) step(rec *recorder, rng *rand.Rand) (string, error) {
	x.ops++
	size := int64(len(x.model))
	switch p := rng.IntN(100); {
	case p < 40: // write, often extending the file
		off, n := x.span(rng, min(size+size/4+64<<10, x.maxSize), 256<<10)
		if n <= 0 {
			return "write", nil
		}
		buf := alignedBuf(int(n))
		seed := rng.Uint64()
		for i := range buf {
			buf[i] = byte(seed>>(8*(i%8))) ^ byte(i/8)
		}
		if _, err := x.f.WriteAt(buf, off); err != nil {
			return "write", err
		}
		if off+n > size {
			x.model = append(x.model, make([]byte, off+n-size)...)
		}
		copy(x.model[off:], buf)
		return "write", nil
	case p < 70: // read and compare
		if size == 0 {
			return "read", nil
		}
		off, n := x.span(rng, size, 512<<10)
		return "read", x.check(rec, off, n, "read")
	case p < 75: // truncate: to between half and 1.25 times the size
		ns := size/2 + rng.Int64N(max(size*3/4, 1))
		ns = min(ns, x.maxSize)
		if x.direct {
			ns &^= fsxAlign - 1
		}
		if err := x.f.Truncate(ns); err != nil {
			return "truncate", err
		}
		if ns < size {
			x.model = x.model[:ns]
		} else {
			x.model = append(x.model, make([]byte, ns-size)...)
		}
		return "truncate", nil
	case p < 82: // punch a hole (the file keeps its size)
		if size == 0 {
			return "punch", nil
		}
		off, n := x.span(rng, size, 128<<10)
		n = min(n, size-off)
		if x.direct {
			n &^= fsxAlign - 1
		}
		if n <= 0 {
			return "punch", nil
		}
		if err := unix.Fallocate(int(x.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
			return "punch", err
		}
		clear(x.model[off : off+n])
		return "punch", nil
	case p < 94:
		return "fsync", x.f.Sync()
	default: // fsync, evict, read everything back from the device
		if err := x.f.Sync(); err != nil {
			return "drop+verify", err
		}
		if err := unix.Fadvise(int(x.f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return "drop+verify", err
		}
		return "drop+verify", x.checkAll(rec, "after fsync+evict")
	}
}

// check reads [off, off+n) and compares it with the model.
func (x *fsx) check(rec *recorder, off, n int64, what string) error {
	size := int64(len(x.model))
	buf := alignedBuf(int(n))
	got, err := x.f.ReadAt(buf, off)
	want := min(n, max(size-off, 0))
	if err != nil && int64(got) < want {
		return fmt.Errorf("read %d bytes at %d: got %d: %w", n, off, got, err)
	}
	if int64(got) != want {
		rec.bad("fsx %s: %s at %d: read %d bytes, the file should have %d there (size %d)", x.name, what, off, got, want, size)
		x.resync(rec)
		return nil
	}
	if i := firstDiff(buf[:got], x.model[off:off+want]); i >= 0 {
		rec.bad("fsx %s: %s: %d bytes at %d differ from the model from offset %d (op %d, size %d)", x.name, what, got, off, off+int64(i), x.ops, size)
		x.resync(rec)
	}
	return nil
}

func (x *fsx) checkAll(rec *recorder, what string) error {
	st, err := x.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() != int64(len(x.model)) {
		rec.bad("fsx %s: %s: size %d, model %d (op %d)", x.name, what, st.Size(), len(x.model), x.ops)
		x.resync(rec)
		return nil
	}
	for off := int64(0); off < st.Size(); off += 1 << 20 {
		if err := x.check(rec, off, min(1<<20, st.Size()-off), what); err != nil {
			return err
		}
	}
	return nil
}

// resync takes the file as it is as the new model after a reported
// mismatch or an error, so one fault is not reported on every later op.
func (x *fsx) resync(rec *recorder) {
	x.resyncs++
	st, err := x.f.Stat()
	if err != nil {
		return
	}
	buf := alignedBuf(int((st.Size() + fsxAlign - 1) &^ (fsxAlign - 1)))
	n, _ := x.f.ReadAt(buf, 0)
	x.model = append(x.model[:0], buf[:min(int64(n), st.Size())]...)
	rec.note("fsx %s: model resynchronised from the file (size %d) after op %d", x.name, len(x.model), x.ops)
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func (x *fsx) run(ctx context.Context, rec *recorder, rng *rand.Rand, maxOps int) {
	if err := rec.do(x.name, viewBlock, "open", x.open); err != nil {
		return
	}
	for i := 0; i < maxOps && ctx.Err() == nil; i++ {
		var op string
		err := rec.do(x.name, viewBlock, "op", func() error {
			var err error
			op, err = x.step(rec, rng)
			return err
		})
		if err == nil {
			rec.count(x.name, op, 1)
			x.errRun = 0
			continue
		}
		// The op's effect is unknown: take the file as it is, and give up
		// after a run of errors (ext4 remounted read-only, device gone).
		x.resync(rec)
		if x.errRun++; x.errRun >= 20 {
			rec.note("fsx %s: 20 errors in a row; stopping (last: %v)", x.name, err)
			return
		}
		time.Sleep(time.Second)
	}
	if err := rec.do(x.name, viewBlock, "fsync", x.f.Sync); err == nil {
		rec.do(x.name, viewBlock, "verify", func() error { return x.checkAll(rec, "end of run") })
	}
}

// verifyReopen compares the file at path (after a remount) with the model.
func (x *fsx) verifyReopen(rec *recorder, path, where string) string {
	x.close()
	b, err := os.ReadFile(path)
	if err != nil {
		rec.bad("fsx %s %s: %v", x.name, where, err)
		return fmt.Sprintf("fsx %s %s: unreadable", x.name, where)
	}
	if i := firstDiff(b, x.model); i >= 0 || len(b) != len(x.model) {
		rec.bad("fsx %s %s: %d bytes, model %d; first difference at %d", x.name, where, len(b), len(x.model), i)
		return fmt.Sprintf("fsx %s %s: DIFFERS", x.name, where)
	}
	return fmt.Sprintf("fsx %s %s: %d bytes equal the model after %d ops (%d resyncs)", x.name, where, len(b), x.ops, x.resyncs)
}

// ext4Files writes whole files with fsync, keeps the last 24 and checks
// their checksums at the end (after an unmount and e2fsck).
type ext4Files struct {
	dir  string
	sums map[string][32]byte
	seq  int
}

func (e *ext4Files) run(ctx context.Context, rec *recorder, rng *rand.Rand, maxIter int) {
	const w = "ext4-files"
	e.sums = map[string][32]byte{}
	if rec.do(w, viewBlock, "mkdir", func() error { return os.MkdirAll(e.dir, 0o755) }) != nil {
		return
	}
	for i := 0; i < maxIter && ctx.Err() == nil; i++ {
		name := fmt.Sprintf("f%05d", i)
		body := randBody(rng, 1+rng.IntN(2<<20))
		if rec.do(w, viewBlock, "write+fsync", func() error { return writeFileSync(filepath.Join(e.dir, name), body) }) == nil {
			e.sums[name] = sha256.Sum256(body)
		}
		if len(e.sums) > 24 {
			names := e.names()
			old := names[0]
			if rec.do(w, viewBlock, "unlink", func() error { return os.Remove(filepath.Join(e.dir, old)) }) == nil {
				delete(e.sums, old)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(200+rng.IntN(800)) * time.Millisecond):
		}
	}
}

func (e *ext4Files) names() []string {
	var n []string
	for k := range e.sums {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func (e *ext4Files) verify(rec *recorder, where string) string {
	bad := 0
	for _, name := range e.names() {
		b, err := os.ReadFile(filepath.Join(e.dir, name))
		if err != nil || sha256.Sum256(b) != e.sums[name] {
			bad++
			rec.bad("ext4 %s: %s: %d bytes (%v), checksum differs", where, name, len(b), err)
		}
	}
	return fmt.Sprintf("ext4 files %s: %d fsynced files checked, %d differ", where, len(e.sums), bad)
}

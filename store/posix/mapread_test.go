package posix_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// mappedOf reports whether addr lies in a mapping of the file path
// (/proc/self/maps).
func mappedOf(t *testing.T, addr uintptr, path string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != path {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h {
			return true
		}
	}
	return false
}

// mapCheckWriter collects what is written and notes whether every Write
// came from a mapping of path.
type mapCheckWriter struct {
	t       *testing.T
	path    string
	buf     bytes.Buffer
	writes  int
	fromMap int
}

func (w *mapCheckWriter) Write(p []byte) (int, error) {
	w.writes++
	if len(p) > 0 && mappedOf(w.t, uintptr(unsafe.Pointer(&p[0])), w.path) {
		w.fromMap++
	}
	return w.buf.Write(p)
}

func putRandom(t *testing.T, b *posix.Backend, key string, size int) []byte {
	t.Helper()
	data := make([]byte, size)
	rand.New(rand.NewSource(int64(size))).Read(data)
	if _, err := b.Put(context.Background(), "bkt", key, bytes.NewReader(data), int64(size), store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestLargeGetWritesFromFileMapping: a GET of a large object (range) hands
// the writer the bytes straight from a mapping of the object's file, not
// copied through a buffer (mapread.go: over loopback that costs less CPU
// than sendfile's page-per-fragment socket buffers); small ones do not.
// Unaligned ranges and ranges longer than one mapping window come back
// intact.
func TestLargeGetWritesFromFileMapping(t *testing.T) {
	ctx := context.Background()
	b := open(t, posix.Options{})
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	const size = 9<<20 + 1234 // more than one 8 MiB window
	data := putRandom(t, b, "big", size)
	path := filepath.Join(b.Root(), "bkt", "big")
	for _, c := range []struct {
		off, n  int64
		wantMap bool
	}{
		{0, -1, true},
		{12345, 3<<20 + 17, true},
		{size - (2<<20 + 5), -1, true},
		{4097, 64 << 10, false}, // small range: sendfile / copy as before
	} {
		rd, _, err := b.Get(ctx, "bkt", "big", c.off, c.n)
		if err != nil {
			t.Fatal(err)
		}
		w := &mapCheckWriter{t: t, path: path}
		n, err := io.Copy(w, rd)
		rd.Close()
		want := data[c.off:]
		if c.n >= 0 {
			want = want[:c.n]
		}
		if err != nil || n != int64(len(want)) || !bytes.Equal(w.buf.Bytes(), want) {
			t.Fatalf("range %d+%d: %d bytes, err %v, equal %v", c.off, c.n, n, err, bytes.Equal(w.buf.Bytes(), want))
		}
		if c.wantMap && w.fromMap != w.writes {
			t.Errorf("range %d+%d: %d of %d writes from a mapping of the file, want all", c.off, c.n, w.fromMap, w.writes)
		}
		if !c.wantMap && w.fromMap != 0 {
			t.Errorf("range %d+%d (small): %d of %d writes from a mapping, want none", c.off, c.n, w.fromMap, w.writes)
		}
	}
}

// truncatingWriter cuts the object's file to nothing on its first Write
// and then reads all of p, as net/http does with the bytes behind the
// headers: the pages past the new end fault (SIGBUS).
type truncatingWriter struct {
	path string
	sum  byte
}

func (w *truncatingWriter) Write(p []byte) (int, error) {
	if err := os.Truncate(w.path, 0); err != nil {
		return 0, err
	}
	for i := 0; i < len(p); i += 4096 {
		w.sum += p[i]
	}
	return len(p), nil
}

// TestLargeGetFileShrinks: another view truncating the object while a GET
// writes it from a mapping ends that GET with an error; the fault is not a
// crash of the server (without SetPanicOnFault the test binary dies with
// "unexpected fault address").
func TestLargeGetFileShrinks(t *testing.T) {
	ctx := context.Background()
	b := open(t, posix.Options{})
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	putRandom(t, b, "big", 4<<20)
	rd, _, err := b.Get(ctx, "bkt", "big", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	_, err = io.Copy(&truncatingWriter{path: filepath.Join(b.Root(), "bkt", "big")}, rd)
	if err == nil || !strings.Contains(err.Error(), "shrank") {
		t.Fatalf("GET of an object truncated under it: err %v, want the file-shrank error", err)
	}
	var re interface{ RuntimeError() }
	if errors.As(err, &re) {
		t.Fatalf("a runtime error leaked: %v", err)
	}
}

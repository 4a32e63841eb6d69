package filelun

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/store/posix"
)

func newStore(t *testing.T) Store {
	t.Helper()
	b, err := posix.Open(t.TempDir(), posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateBucket(context.Background(), "vols", ""); err != nil {
		t.Fatal(err)
	}
	st, err := AsStore(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestVolumeLifecycle(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	in, err := Create(ctx, st, "vols", "disk1", 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	if in.Size != 8<<20 || in.Serial == "" || in.Allocated > 64<<10 {
		t.Fatalf("created %+v (should be sparse)", in)
	}
	if _, err := Create(ctx, st, "vols", "disk1", 4096); !errors.Is(err, ErrVolumeExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := Create(ctx, st, "vols", "Bad_Name", 4096); !errors.Is(err, ErrBadName) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := Create(ctx, st, "vols", "odd", 1000); !errors.Is(err, ErrBadSize) {
		t.Fatalf("bad size: %v", err)
	}
	l, _, err := Open(ctx, st, "vols", "disk1")
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("tristore"), 512)
	if _, err := l.WriteAtFUA(ctx, data, 4096); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := l.ReadAt(ctx, got, 4096); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	if _, err := l.ReadAt(ctx, got, 8<<20); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("out of range: %v", err)
	}
	if _, err := l.WriteAt(ctx, got[:100], 0); !errors.Is(err, blockdev.ErrMisaligned) {
		t.Fatalf("misaligned: %v", err)
	}
	if err := l.Unmap(ctx, 4096, 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadAt(ctx, got, 4096); err != nil || !bytes.Equal(got, make([]byte, len(got))) {
		t.Fatalf("unmapped range not zero: %v", err)
	}
	// In use: shrink and delete are refused, grow is seen live.
	if _, err := Resize(ctx, st, "vols", "disk1", 4<<20); !errors.Is(err, ErrInUse) {
		t.Fatalf("shrink in use: %v", err)
	}
	if err := Delete(ctx, st, "vols", "disk1"); !errors.Is(err, ErrInUse) {
		t.Fatalf("delete in use: %v", err)
	}
	if _, err := Resize(ctx, st, "vols", "disk1", 16<<20); err != nil {
		t.Fatal(err)
	}
	if sz := l.RefreshSize(); sz != 16<<20 {
		t.Fatalf("size after grow %d", sz)
	}
	l.Close()
	if _, err := l.ReadAt(ctx, got, 0); !errors.Is(err, blockdev.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	if in, err := Resize(ctx, st, "vols", "disk1", 1<<20); err != nil || in.Size != 1<<20 {
		t.Fatalf("shrink: %+v %v", in, err)
	}
	vs, err := List(ctx, st, "")
	if err != nil || len(vs) != 1 || vs[0].Name != "disk1" {
		t.Fatalf("list %+v %v", vs, err)
	}
	if err := Delete(ctx, st, "vols", "disk1"); err != nil {
		t.Fatal(err)
	}
	if _, err := Get(ctx, st, "vols", "disk1"); !errors.Is(err, ErrNotVolume) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	// IEC prefixes are powers of 1024, SI powers of 1000 (internal/units).
	for in, want := range map[string]int64{"1Gi": 1 << 30, "512Mi": 512 << 20, "4096": 4096, "10GiB": 10 << 30,
		"2Ki": 2048, "1Ti": 1 << 40, "1G": 1e9, "1.5Gi": 3 << 29, "512k": 512000} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
	for in, msg := range map[string]string{"": "no number", "0": "not a positive multiple", "-1G": "no number", "G": "no number",
		"1X": "unknown unit", "100": "not a positive multiple of the 512-byte block", "1M": "did you mean 1Mi?", "2k": "did you mean 2Ki?"} {
		if _, err := ParseSize(in); !errors.Is(err, ErrBadSize) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseSize(%q): %v; want ErrBadSize with %q", in, err, msg)
		}
	}
}

func TestSizePoll(t *testing.T) {
	old := SizePollInterval
	SizePollInterval = 20 * time.Millisecond
	defer func() { SizePollInterval = old }()
	ctx := context.Background()
	st := newStore(t)
	if _, err := Create(ctx, st, "vols", "v", 1<<20); err != nil {
		t.Fatal(err)
	}
	l, _, err := Open(ctx, st, "vols", "v")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Resize(ctx, st, "vols", "v", 2<<20); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.Size() != 2<<20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l.Size() != 2<<20 {
		t.Fatalf("size not refreshed: %d", l.Size())
	}
}

func TestProvisioning(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	if _, err := Create(ctx, st, "vols", "thin", 4<<20); err != nil {
		t.Fatal(err)
	}
	l, _, err := Open(ctx, st, "vols", "thin")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if m, n, err := l.Provisioning(0); err != nil || m || n != 4<<20 {
		t.Fatalf("empty volume: %v %d %v", m, n, err)
	}
	if _, err := l.WriteAt(ctx, bytes.Repeat([]byte{1}, 64<<10), 1<<20); err != nil {
		t.Fatal(err)
	}
	if m, n, err := l.Provisioning(0); err != nil || m || n != 1<<20 {
		t.Fatalf("before data: %v %d %v", m, n, err)
	}
	if m, n, err := l.Provisioning(1 << 20); err != nil || !m || n < 64<<10 {
		t.Fatalf("data: %v %d %v", m, n, err)
	}
	if _, _, err := l.Provisioning(4 << 20); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("past the end: %v", err)
	}
}

package chunkstore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/tristore/tristore/blockdev"
)

// TestVolume: a volume reads what was written, unmapped ranges read zeros
// and drop their chunk objects, out-of-range I/O is refused, the size is
// fixed, and a second gateway cannot open it.
func TestVolume(t *testing.T) {
	v := newEnv(t)
	ctx := context.Background()
	c := v.cfg(t.TempDir())
	vol, err := CreateVolume(ctx, c, 16*cs)
	if err != nil {
		t.Fatal(err)
	}
	defer vol.Close()
	if _, err := CreateVolume(ctx, v.cfg(t.TempDir()), 16*cs); err == nil {
		t.Fatal("a second create succeeded")
	}
	data := randBytes(1, 16*cs)
	if _, err := vol.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := vol.WriteAt(ctx, []byte{1}, 16*cs); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past the end: %v", err)
	}
	if err := vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if k := v.chunkKeys(); len(k) != 16 {
		t.Fatalf("%d chunk objects, want 16", len(k))
	}
	// Unmap chunks 2..5 plus 100 bytes on each side.
	if err := vol.Unmap(ctx, 2*cs-100, 4*cs+200); err != nil {
		t.Fatal(err)
	}
	copy(data[2*cs-100:6*cs+100], make([]byte, 4*cs+200))
	got := make([]byte, len(data))
	if _, err := vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after unmap: %v", err)
	}
	if err := vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if k := v.chunkKeys(); len(k) != 12 {
		t.Fatalf("%d chunk objects after unmapping 4 chunks, want 12", len(k))
	}
	if err := vol.st.Truncate(ctx, VolumeIno, cs); !errors.Is(err, ErrInvalid) {
		t.Fatalf("resize through truncate: %v", err)
	}
	if _, err := OpenVolume(ctx, v.cfg(t.TempDir())); !errors.Is(err, ErrLeased) {
		t.Fatalf("second gateway: %v", err)
	}
	vol.Close()
	ro := v.cfg(t.TempDir())
	ro.ReadOnly = true
	vol2, err := OpenVolume(ctx, ro)
	if err != nil {
		t.Fatal(err)
	}
	defer vol2.Close()
	if _, err := vol2.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fresh gateway reads different bytes: %v", err)
	}
}

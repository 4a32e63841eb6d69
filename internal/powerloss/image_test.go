package powerloss

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestLargeSparseImage: the shape of the kernel rig's disk image
// (test/powerloss/kernel_test.go): one large sparse file, written in
// scattered 4 KiB blocks as a block device would be, with fsyncs in
// between. After the cut only the blocks written before the last fsync
// are there, the size is kept, and the file holds memory for the chunks
// written only (64 KiB each), not for its size.
func TestLargeSparseImage(t *testing.T) {
	f, dir := mount(t)
	p := filepath.Join(dir, "disk.img")
	const size = 4 << 30
	img, err := os.Create(p)
	must(t, err)
	must(t, img.Truncate(size))
	block := func(i int, gen byte) []byte { return bytes.Repeat([]byte{byte(i), gen}, 2048) }
	offsets := make([]int64, 200)
	for i := range offsets {
		offsets[i] = int64(i) * 20 << 20 // 20 MiB apart: one chunk each
	}
	for i, off := range offsets {
		_, err := img.WriteAt(block(i, 1), off)
		must(t, err)
	}
	must(t, img.Sync())
	fsyncPath(t, dir)
	for i, off := range offsets[:100] {
		_, err := img.WriteAt(block(i, 2), off) // after the last fsync: lost
		must(t, err)
	}
	must(t, img.Close())
	f.mu.Lock()
	var chunks int
	for _, n := range f.nodes {
		if n.isReg() {
			chunks += len(n.data.chunks)
		}
	}
	f.mu.Unlock()
	if chunks != len(offsets) {
		t.Errorf("%d chunks held for %d written blocks of a %d-byte file", chunks, len(offsets), int64(size))
	}
	crash(t, f)
	img, err = os.Open(p)
	must(t, err)
	defer img.Close()
	st, err := img.Stat()
	must(t, err)
	if st.Size() != size {
		t.Fatalf("size %d after the cut, want %d", st.Size(), int64(size))
	}
	got := make([]byte, 4096)
	for i, off := range offsets {
		_, err := img.ReadAt(got, off)
		must(t, err)
		if !bytes.Equal(got, block(i, 1)) {
			t.Fatalf("block %d at %d: not the fsynced content after the cut", i, off)
		}
	}
	if _, err := img.ReadAt(got, 5<<20); err != nil || !bytes.Equal(got, make([]byte, 4096)) {
		t.Fatalf("a hole reads %v, %x...", err, got[:8])
	}
}

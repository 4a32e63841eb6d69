package posix_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"math/rand"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// oddReader hands out its data in pieces of odd sizes, so fill's chunks
// are assembled from many reads.
type oddReader struct {
	data []byte
	i    int
}

func (r *oddReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1 + (r.i*7919)%70001
	r.i++
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// TestLargePutSizes: bodies of 1 MiB and more are written partly with
// O_DIRECT (whole chunks) and partly through the page cache (an unaligned
// tail); every size reads back whole with the body's MD5 as ETag.
func TestLargePutSizes(t *testing.T) {
	ctx := context.Background()
	for _, nox := range []bool{false, true} {
		b := open(t, posix.Options{NoXattr: nox})
		if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(1))
		for _, size := range []int{1 << 20, 1<<20 - 1, 1<<20 + 1, 2<<20 + 4095, 4 << 20, 4<<20 + 1, 5<<20 - 512, 9<<20 + 12345} {
			data := make([]byte, size)
			rng.Read(data)
			key := "big/" + hex.EncodeToString([]byte{byte(size), byte(size >> 8), byte(size >> 16)})
			oi, err := b.Put(ctx, "bkt", key, &oddReader{data: data}, int64(size), store.ObjectMeta{})
			if err != nil {
				t.Fatalf("nox=%v size %d: %v", nox, size, err)
			}
			sum := md5.Sum(data)
			if oi.ETag != hex.EncodeToString(sum[:]) {
				t.Errorf("nox=%v size %d: ETag %s, want %x", nox, size, oi.ETag, sum)
			}
			got, gi := readAll(t, b, key)
			if got != string(data) || gi.Size != int64(size) {
				t.Errorf("nox=%v size %d: read back %d bytes (size %d), differs", nox, size, len(got), gi.Size)
			}
		}
	}
}

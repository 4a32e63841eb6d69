package raid

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/blockdev/filelun"
)

// osFile adapts *os.File to store.File for filelun.New.
type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func openLUN(t testing.TB, path string, size int64) blockdev.Device {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if size > 0 {
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
	}
	l, err := filelun.New(osFile{f}, 512)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestFileLUNMembers runs the same checks over filelun members (temp
// files): random I/O against a reference, clean close, reassembly in a
// shuffled order from reopened files, and a degraded assembly without
// one file.
func TestFileLUNMembers(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	for _, level := range []int{0, 5} {
		t.Run("raid"+strconv.Itoa(level), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(level)))
			dir := t.TempDir()
			paths := make([]string, 4)
			ds := make([]blockdev.Device, 4)
			for i := range paths {
				paths[i] = filepath.Join(dir, "m"+strconv.Itoa(i))
				ds[i] = openLUN(t, paths[i], memOff+32*chunkT)
			}
			a, err := testCreate(ctx, level, ds)
			if err != nil {
				t.Fatal(err)
			}
			ref := make([]byte, a.Size())
			runOps(t, ctx, r, a, ref, 200)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			reopen := func(skip int) []blockdev.Device {
				var out []blockdev.Device
				for i, p := range paths {
					if i != skip {
						out = append(out, openLUN(t, p, 0))
					}
				}
				r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
				return out
			}
			b, err := Assemble(ctx, reopen(-1))
			if err != nil {
				t.Fatal(err)
			}
			verifyAll(t, ctx, b, ref)
			runOps(t, ctx, r, b, ref, 100)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if level == 5 {
				c, err := Assemble(ctx, reopen(r.IntN(4)))
				if err != nil {
					t.Fatal(err)
				}
				verifyAll(t, ctx, c, ref)
				runOps(t, ctx, r, c, ref, 50)
				c.Close()
				// The member left out missed those writes: it is stale now.
				if _, err := Assemble(ctx, reopen(-1)); !errors.Is(err, ErrStale) {
					t.Fatalf("assemble with the member absent during degraded writes: %v, want ErrStale", err)
				}
			}
		})
	}
}

// BenchmarkFileWrite measures RAID-5 writes over three temp-file members
// with and without the journal (the write hole's price): 128 KiB writes
// (one full stripe of 64 KiB chunks) by 1 and 8 writers.
func BenchmarkFileWrite(b *testing.B) {
	ctx := context.Background()
	for _, nj := range []bool{false, true} {
		for _, w := range []int{1, 8} {
			name := "journal"
			if nj {
				name = "nojournal"
			}
			b.Run(name+"/w"+strconv.Itoa(w), func(b *testing.B) {
				dir := b.TempDir()
				ds := make([]blockdev.Device, 3)
				for i := range ds {
					ds[i] = openLUN(b, filepath.Join(dir, "m"+strconv.Itoa(i)), 72<<20)
				}
				a, err := CreateWith(ctx, Options{Level: 5, NoJournal: nj}, ds)
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				const n = 128 << 10
				slots := a.Size() / n
				b.SetBytes(n)
				b.SetParallelism(w)
				var next atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					p := make([]byte, n)
					for pb.Next() {
						i := next.Add(1) % slots
						if _, err := a.WriteAt(ctx, p, i*n); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

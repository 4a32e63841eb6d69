// Package drivertest is the conformance suite every bench.Driver passes,
// and a loopback tristore server (all three protocols) to run it and the
// suites against.
package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
)

// Run checks d's contract: Put/Get round trips (sizes 0, odd, block, large),
// replacing a file, OpenFile with every access form (ReadAt/WriteAt/Sync),
// List, Delete, Mkdir and RemoveAll leaving nothing behind. It works under
// directory dir, which must not exist yet, and removes it.
func Run(t *testing.T, d bench.Driver, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if d.Protocol() == "" || d.Target() == "" || len(d.Forms()) == 0 || d.Forms()[0] != bench.FormDefault {
		t.Fatalf("identity: %q %q %v", d.Protocol(), d.Target(), d.Forms())
	}
	if err := d.Mkdir(ctx, dir); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	t.Cleanup(func() { d.RemoveAll(context.Background(), dir) })

	t.Run("PutGet", func(t *testing.T) {
		for i, size := range []int{0, 1, 1000, 4096, 65536 + 3, 3 << 20} {
			name := fmt.Sprintf("%s/pg-%d", dir, i)
			data := bench.AlignedBuffer(size)
			bench.Fill(data, uint64(i+10))
			if err := d.Put(ctx, name, data); err != nil {
				t.Fatalf("Put %d bytes: %v", size, err)
			}
			buf := bench.AlignedBuffer(size)
			start := time.Now()
			n, first, err := d.Get(ctx, name, buf)
			if err != nil || n != size {
				t.Fatalf("Get %d bytes: n=%d %v", size, n, err)
			}
			if !bytes.Equal(buf, data) {
				t.Fatalf("Get %d bytes: data differs", size)
			}
			if !first.IsZero() && (first.Before(start) || first.After(time.Now())) {
				t.Fatalf("first byte at %v outside the request", first)
			}
		}
		// Replace with shorter content.
		name := dir + "/pg-5"
		short := []byte("short")
		if err := d.Put(ctx, name, short); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(short))
		if n, _, err := d.Get(ctx, name, buf); err != nil || n != len(short) || string(buf) != "short" {
			t.Fatalf("replaced: %d %q %v", n, buf[:n], err)
		}
	})

	t.Run("ListDelete", func(t *testing.T) {
		sub := dir + "/ls"
		if err := d.Mkdir(ctx, sub); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := d.Put(ctx, fmt.Sprintf("%s/f%d", sub, i), []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		names, err := d.List(ctx, sub)
		slices.Sort(names)
		if err != nil || !slices.Equal(names, []string{"f0", "f1", "f2", "f3", "f4"}) {
			t.Fatalf("List: %v %v", names, err)
		}
		if err := d.Delete(ctx, sub+"/f2"); err != nil {
			t.Fatal(err)
		}
		names, _ = d.List(ctx, sub)
		if slices.Contains(names, "f2") || len(names) != 4 {
			t.Fatalf("after Delete: %v", names)
		}
		if _, _, err := d.Get(ctx, sub+"/f2", make([]byte, 1)); err == nil {
			t.Fatal("Get of a deleted file succeeded")
		}
	})

	t.Run("Forms", func(t *testing.T) {
		const size = 1 << 20
		for _, form := range d.Forms() {
			name := dir + "/units-" + form
			f, err := d.OpenFile(ctx, name, size, form)
			if err != nil {
				t.Fatalf("OpenFile %s: %v", form, err)
			}
			p := bench.AlignedBuffer(64 << 10)
			bench.Fill(p, 99)
			_, werr := f.WriteAt(ctx, p, 128<<10)
			if errors.Is(werr, bench.ErrNotSupported) {
				// Objects are written whole: reads only.
			} else if werr != nil {
				t.Fatalf("WriteAt %s: %v", form, werr)
			} else if err := f.Sync(ctx); err != nil {
				t.Fatalf("Sync %s: %v", form, err)
			}
			got := bench.AlignedBuffer(64 << 10)
			if n, err := f.ReadAt(ctx, got, 128<<10); err != nil || n != len(got) {
				t.Fatalf("ReadAt %s: %d %v", form, n, err)
			}
			if werr == nil && !bytes.Equal(got, p) {
				t.Fatalf("ReadAt %s after WriteAt: data differs", form)
			}
			// The last unit of the file reads whole.
			if n, err := f.ReadAt(ctx, got, size-int64(len(got))); err != nil || n != len(got) {
				t.Fatalf("ReadAt end %s: %d %v", form, n, err)
			}
			if err := f.Close(ctx); err != nil {
				t.Fatalf("Close %s: %v", form, err)
			}
		}
		if _, err := d.OpenFile(ctx, dir+"/x", 4096, "no-such-form"); err == nil {
			t.Fatal("OpenFile accepted an unknown access form")
		}
	})

	t.Run("RemoveAll", func(t *testing.T) {
		if err := d.RemoveAll(ctx, dir); err != nil {
			t.Fatalf("RemoveAll: %v", err)
		}
		if names, err := d.List(ctx, dir); err == nil && len(names) > 0 {
			t.Fatalf("after RemoveAll %s still lists %v", dir, names)
		}
		if err := d.RemoveAll(ctx, dir); err != nil {
			t.Fatalf("RemoveAll of a removed dir: %v", err)
		}
		if err := d.RemoveAll(ctx, ""); err == nil && d.Protocol() != "iscsi" {
			t.Fatal("RemoveAll of the root was not refused")
		}
	})
}

package raid

import (
	"bytes"
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/blockdev/filelun"
	"github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/internal/testutil/tgt"
	"github.com/tristore/tristore/raid"
)

// TestTgtMembers: issue 10 asks that tgt targets work as RAID members, not
// only tristore's own. A RAID-5 over two tgt LUNs and a local file is
// written, one tgtd is stopped (its LUN vanishes mid-life), everything reads
// back degraded, a fresh local member is rebuilt in, and a scrub is clean.
func TestTgtMembers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	t1 := tgt.Start(t, tgt.Opts{Size: 32 << 20, IQN: "iqn.2026-11.org.tristore.test:m1"})
	t2 := tgt.Start(t, tgt.Opts{Size: 32 << 20, IQN: "iqn.2026-11.org.tristore.test:m2"})
	open := func(tt *tgt.Target) *iscsi.Session {
		s, err := iscsi.Open(ctx, iscsi.Config{Portal: tt.Portal, Target: tt.IQN, LUN: 1,
			ReplacementTimeout: 2 * time.Second, DialTimeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("open %s: %v", tt.IQN, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	file := func(name string) blockdev.Device {
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if err := f.Truncate(32 << 20); err != nil {
			t.Fatal(err)
		}
		d, err := filelun.New(osFile{f}, 512)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	s1, s2 := open(t1), open(t2)
	members := []blockdev.Device{s1, s2, file("local.img")}
	a, err := raid.Create(ctx, 5, 64<<10, members)
	if err != nil {
		t.Fatalf("create over tgt members: %v", err)
	}
	defer a.Close()

	want := make([]byte, 8<<20)
	rand.New(rand.NewSource(7)).Read(want)
	if _, err := a.WriteAt(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := a.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back over tgt members: err %v, equal %v", err, bytes.Equal(got, want))
	}

	// Stop the second tgtd: its LUN vanishes. Reads must fail it and
	// reconstruct from the others.
	t2.Stop()
	clear(got)
	if _, err := a.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("degraded read after tgtd stopped: err %v, equal %v", err, bytes.Equal(got, want))
	}
	if st := a.Status(); len(st.Failed) != 1 || st.Failed[0] != 1 {
		t.Fatalf("status after tgtd stopped: %+v, want slot 1 failed", st)
	}

	if err := a.Replace(ctx, 1, file("fresh.img"), nil); err != nil {
		t.Fatalf("replace the tgt member: %v", err)
	}
	clear(got)
	if _, err := a.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after rebuild: err %v, equal %v", err, bytes.Equal(got, want))
	}
	mm, err := a.Check(ctx, false)
	if err != nil || len(mm) != 0 {
		t.Fatalf("scrub after rebuild: %d mismatches, err %v", len(mm), err)
	}
}

// osFile adapts *os.File to store.File for filelun.New.
type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

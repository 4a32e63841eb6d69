package raid

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
)

// TestReplaceOnline: a member fails, a fresh one is rebuilt while random
// I/O keeps flowing; afterwards parity checks clean, the data equals the
// reference, and losing any other member still reconstructs it.
func TestReplaceOnline(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 7))
	ms, ds := mems(4, memOff+200*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	ref := make([]byte, a.Size())
	runOps(t, ctx, r, a, ref, 100)
	victim := r.IntN(4)
	ms[victim].setFailed(true)
	runOps(t, ctx, r, a, ref, 50)

	fresh := newMem(memOff + 200*chunkT)
	var mu sync.Mutex // ref and r are shared with the I/O goroutine
	var last int64
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- a.Replace(ctx, victim, fresh, func(d, total int64) {
			if d <= last || d > total {
				t.Errorf("progress %d/%d after %d", d, total, last)
			}
			last = d
			calls++
		})
	}()
	for i := 0; ; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("replace: %v", err)
			}
			mu.Lock()
			verifyAll(t, ctx, a, ref)
			mu.Unlock()
			if st := a.Status(); len(st.Failed) != 0 || st.Rebuilding != -1 {
				t.Fatalf("status after rebuild: %+v", st)
			}
			if last != 200*chunkT || calls != 200 {
				t.Fatalf("progress ended at %d after %d calls", last, calls)
			}
			if mm, err := a.Check(ctx, false); err != nil || len(mm) != 0 {
				t.Fatalf("check after rebuild: %v %v", mm, err)
			}
			ms[(victim+1)%4].setFailed(true)
			verifyAll(t, ctx, a, ref)
			return
		default:
		}
		if i > 100000 {
			t.Fatal("rebuild did not finish")
		}
		mu.Lock()
		runOps(t, ctx, r, a, ref, 5)
		mu.Unlock()
	}
}

// TestRebuildResume: a rebuild interrupted after a checkpoint resumes from
// it after the array is reassembled, and the result is correct.
func TestRebuildResume(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 8))
	ms, ds := mems(3, memOff+300*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	ref := make([]byte, a.Size())
	runOps(t, ctx, r, a, ref, 100)
	ms[1].setFailed(true)
	runOps(t, ctx, r, a, ref, 20)
	fresh := newMem(memOff + 300*chunkT)
	cctx, cancel := context.WithCancel(ctx)
	err = a.Replace(cctx, 1, fresh, func(d, total int64) {
		if d >= 150*chunkT {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted replace: %v", err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Restart: assemble from the durable images, in another order.
	b, err := Assemble(ctx, []blockdev.Device{fresh.reopen(), ms[2].reopen(), ms[0].reopen()})
	if err != nil {
		t.Fatal(err)
	}
	slot, pos := b.Rebuilding()
	if slot != 1 || pos != 128*chunkT {
		t.Fatalf("after restart: rebuilding slot %d from %d, want slot 1 from %d (last checkpoint)", slot, pos, 128*chunkT)
	}
	verifyAll(t, ctx, b, ref)
	first := int64(-1)
	if err := b.Resume(ctx, func(d, total int64) {
		if first < 0 {
			first = d
		}
	}); err != nil {
		t.Fatal(err)
	}
	if first != 129*chunkT {
		t.Fatalf("resume started at %d, want after checkpoint %d", first, 128*chunkT)
	}
	if mm, err := b.Check(ctx, false); err != nil || len(mm) != 0 {
		t.Fatalf("check after resume: %v %v", mm, err)
	}
	// The rebuilt member alone stands in for a lost one.
	b.devs[0].(*memDevice).setFailed(true)
	verifyAll(t, ctx, b, ref)
}

// TestRebuildRate: a rebuild limited to 1 MiB/s over 256 KiB of member
// data takes at least about a quarter of a second.
func TestRebuildRate(t *testing.T) {
	ctx := context.Background()
	ms, ds := mems(3, memOff+64*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	ms[0].setFailed(true)
	if _, err := a.WriteAt(ctx, make([]byte, 512), 0); err != nil {
		t.Fatal(err)
	}
	a.SetRebuildRate(1 << 20)
	start := time.Now()
	if err := a.Replace(ctx, 0, newMem(memOff+64*chunkT), nil); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if want := 250 * time.Millisecond; el < want*9/10 || el > 10*want {
		t.Fatalf("rate-limited rebuild of 256 KiB at 1 MiB/s took %v, want about %v", el, want)
	}
}

// TestRebuildVerifyCatchesBadMember: a replacement that silently drops the
// writes to one row is caught by the verify pass; the slot stays failed and
// the array keeps serving the right data degraded.
func TestRebuildVerifyCatchesBadMember(t *testing.T) {
	ctx := context.Background()
	ms, ds := mems(3, memOff+32*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	ref := make([]byte, a.Size())
	r := rand.New(rand.NewPCG(5, 6))
	for i := range ref {
		ref[i] = byte(r.Uint32())
	}
	if _, err := a.WriteAt(ctx, ref, 0); err != nil {
		t.Fatal(err)
	}
	ms[1].setFailed(true)
	verifyAll(t, ctx, a, ref)
	liar := newMem(memOff + 32*chunkT)
	bad := a.moff(10, 0)
	liar.drop = func(off int64, n int) bool { return off <= bad && bad < off+int64(n) }
	err = a.Replace(ctx, 1, liar, nil)
	if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), "row 10") {
		t.Fatalf("replace onto a member that drops row 10: %v, want ErrVerify at row 10", err)
	}
	if st := a.Status(); len(st.Failed) != 1 || st.Failed[0] != 1 || st.Rebuilding != -1 {
		t.Fatalf("status after failed verify: %+v", st)
	}
	verifyAll(t, ctx, a, ref)
}

// TestRAID1 runs a mirror through random I/O, a failed copy, reads from
// the survivors, a replacement and a scrub.
func TestRAID1(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 11))
	ms, ds := mems(3, memOff+40*chunkT)
	a, err := testCreate(ctx, 1, ds)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size() != 40*chunkT {
		t.Fatalf("RAID-1 size %d", a.Size())
	}
	ref := make([]byte, a.Size())
	runOps(t, ctx, r, a, ref, 150)
	ms[0].setFailed(true)
	runOps(t, ctx, r, a, ref, 100)
	ms[2].setFailed(true)
	runOps(t, ctx, r, a, ref, 50) // one copy left
	if st := a.Status(); len(st.Failed) != 2 {
		t.Fatalf("status: %+v", st)
	}
	if err := a.Replace(ctx, 0, newMem(memOff+40*chunkT), nil); err != nil {
		t.Fatal(err)
	}
	ms[1].setFailed(true) // the rebuilt copy alone must hold everything
	verifyAll(t, ctx, a, ref)
	b, err := Assemble(ctx, []blockdev.Device{a.devs[0].(*memDevice).reopen()})
	if err != nil {
		t.Fatal(err)
	}
	verifyAll(t, ctx, b, ref)
	// Scrub: a copy that differs is found and repaired from the lowest slot.
	_, ds2 := mems(2, memOff+8*chunkT)
	c, err := testCreate(ctx, 1, ds2)
	if err != nil {
		t.Fatal(err)
	}
	ds2[1].(*memDevice).cur[memOff+3*chunkT+7] ^= 1
	if mm, err := c.Check(ctx, true); err != nil || len(mm) != 1 || mm[0].Row != 3 {
		t.Fatalf("RAID-1 check: %v %v", mm, err)
	}
	if mm, err := c.Check(ctx, false); err != nil || len(mm) != 0 {
		t.Fatalf("RAID-1 check after repair: %v %v", mm, err)
	}
}

// TestRebuildCancelAtCheckpoint: cancelling a rebuild while it records a
// checkpoint leaves the checkpoint recorded and the new member in place
// (not failed), so Resume continues from there.
func TestRebuildCancelAtCheckpoint(t *testing.T) {
	ctx := context.Background()
	ms, ds := mems(3, memOff+200*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	ms[2].setFailed(true)
	if err := a.Fail(ctx, 2); err != nil {
		t.Fatal(err)
	}
	fresh := newMem(memOff + 200*chunkT)
	cctx, cancel := context.WithCancel(ctx)
	// Cancel as the 64th row is done, before its checkpoint flush.
	fresh.drop = func(off int64, n int) bool {
		if off == a.moff(63, 0) {
			cancel()
		}
		return false
	}
	if err := a.Replace(cctx, 2, fresh, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled replace: %v", err)
	}
	if slot, pos := a.Rebuilding(); slot != 2 || pos != 64*chunkT {
		t.Fatalf("after cancel: rebuilding slot %d at %d, want slot 2 at the checkpoint %d", slot, pos, 64*chunkT)
	}
	if err := a.Resume(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if st := a.Status(); len(st.Failed) != 0 {
		t.Fatalf("after resume: %+v", st)
	}
}

package raid

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
)

// testSeed returns RAID_SEED if set, else a time-based seed; it is
// printed on failure so a run can be repeated.
func testSeed(t *testing.T) uint64 {
	if s := os.Getenv("RAID_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	s := uint64(time.Now().UnixNano())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce with RAID_SEED=%d", s)
		}
	})
	return s
}

func mems(n int, size int64) ([]*memDevice, []blockdev.Device) {
	ms := make([]*memDevice, n)
	ds := make([]blockdev.Device, n)
	for i := range ms {
		ms[i] = newMem(size)
		ds[i] = ms[i]
	}
	return ms, ds
}

const chunkT = 4096

// jT is the tests' journal ring: small, so checkpoints (ring full) happen
// often; memOff is where member data starts with it.
const (
	jT     = 16 * chunkT
	memOff = DataOffset + jT
)

func testCreate(ctx context.Context, level int, ds []blockdev.Device) (*Array, error) {
	return CreateWith(ctx, Options{Level: level, Chunk: chunkT, Journal: jT}, ds)
}

// randIO returns an aligned random range of the array: mostly small, some
// spanning several rows.
func randIO(r *rand.Rand, size int64) (int64, int) {
	blocks := size / 512
	var n int64
	switch r.IntN(4) {
	case 0:
		n = 1 + r.Int64N(8)
	case 1:
		n = 1 + r.Int64N(64)
	default:
		n = 1 + r.Int64N(200)
	}
	n = min(n, blocks)
	off := r.Int64N(blocks - n + 1)
	return off * 512, int(n * 512)
}

// runOps applies count random writes/reads/flushes to a and a reference
// byte slice, checking every read.
func runOps(t *testing.T, ctx context.Context, r *rand.Rand, a blockdev.Device, ref []byte, count int) {
	t.Helper()
	for i := range count {
		off, n := randIO(r, a.Size())
		switch r.IntN(10) {
		case 0:
			if err := a.Flush(ctx); err != nil {
				t.Fatalf("op %d flush: %v", i, err)
			}
		case 1, 2, 3, 4:
			p := make([]byte, n)
			for j := range p {
				p[j] = byte(r.Uint32())
			}
			if _, err := a.WriteAt(ctx, p, off); err != nil {
				t.Fatalf("op %d write %d@%d: %v", i, n, off, err)
			}
			copy(ref[off:], p)
		default:
			p := make([]byte, n)
			if _, err := a.ReadAt(ctx, p, off); err != nil {
				t.Fatalf("op %d read %d@%d: %v", i, n, off, err)
			}
			if !bytes.Equal(p, ref[off:off+int64(n)]) {
				t.Fatalf("op %d read %d@%d differs from reference", i, n, off)
			}
		}
	}
}

func verifyAll(t *testing.T, ctx context.Context, a blockdev.Device, ref []byte) {
	t.Helper()
	got := make([]byte, len(ref))
	if _, err := a.ReadAt(ctx, got, 0); err != nil {
		t.Fatalf("full read: %v", err)
	}
	if !bytes.Equal(got, ref) {
		for i := range got {
			if got[i] != ref[i] {
				t.Fatalf("full read differs from reference first at byte %d", i)
			}
		}
	}
}

func TestRandomOps(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	for _, tc := range []struct{ level, n int }{{0, 1}, {0, 3}, {1, 2}, {1, 3}, {5, 3}, {5, 4}, {5, 5}} {
		t.Run("raid"+strconv.Itoa(tc.level)+"x"+strconv.Itoa(tc.n), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(tc.level*10+tc.n)))
			_, ds := mems(tc.n, memOff+32*chunkT+1000)
			a, err := testCreate(ctx, tc.level, ds)
			if err != nil {
				t.Fatal(err)
			}
			ref := make([]byte, a.Size())
			runOps(t, ctx, r, a, ref, 400)
			verifyAll(t, ctx, a, ref)
			if tc.level != 0 {
				mm, err := a.Check(ctx, false)
				if err != nil || len(mm) != 0 {
					t.Fatalf("check after random ops: %v %v", mm, err)
				}
			}
		})
	}
}

// TestConcurrentStripeWrites: many goroutines writing disjoint blocks of
// the same few stripes must leave parity consistent (per-stripe locking).
func TestConcurrentStripeWrites(t *testing.T) {
	ctx := context.Background()
	ms, ds := mems(4, memOff+2*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		m.delay = 20 * time.Microsecond
	}
	ref := make([]byte, a.Size())
	// Goroutine g owns data chunk g (6 chunks in 2 rows) and writes random
	// blocks in it, so writers of one row update the same parity ranges.
	const G = 6
	done := make(chan error, G)
	for g := range G {
		go func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 50 {
				blk := int64(g)*chunkT/512 + int64(r.IntN(chunkT/512))
				p := bytes.Repeat([]byte{byte(r.Uint32())}, 512)
				if _, err := a.WriteAt(ctx, p, blk*512); err != nil {
					done <- err
					return
				}
				copy(ref[blk*512:], p) // block owned by goroutine g alone
			}
			done <- nil
		}()
	}
	for range G {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	verifyAll(t, ctx, a, ref)
	if mm, err := a.Check(ctx, false); err != nil || len(mm) != 0 {
		t.Fatalf("parity inconsistent after concurrent writes: %v %v", mm, err)
	}
}

// TestGroupCommit: writers of different stripes share journal batches (one
// ring write and flush per member for many records).
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	ms, ds := mems(4, memOff+16*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		m.delay = 200 * time.Microsecond
	}
	const G = 8
	errs := make(chan error, G)
	for g := range G {
		go func() {
			p := bytes.Repeat([]byte{byte(g)}, 512)
			for i := range 20 {
				if _, err := a.WriteAt(ctx, p, int64(g*2+i%2)*3*chunkT); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range G {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := a.Status()
	t.Logf("journal: %d records in %d batches, %d checkpoints", st.JournalRecords, st.JournalBatches, st.JournalCheckpoints)
	if st.JournalRecords != G*20 || st.JournalBatches*2 > st.JournalRecords {
		t.Fatalf("journal: %d records in %d batches: concurrent writers did not share batches", st.JournalRecords, st.JournalBatches)
	}
}

// TestDegraded: a member fails at a random point; reads reconstruct, writes
// continue, the failure is recorded, and a second failure stops the array.
func TestDegraded(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 2))
	ms, ds := mems(4, memOff+32*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	ref := make([]byte, a.Size())
	runOps(t, ctx, r, a, ref, 150)
	victim := r.IntN(4)
	ms[victim].setFailed(true)
	runOps(t, ctx, r, a, ref, 300)
	verifyAll(t, ctx, a, ref)
	st := a.Status()
	if len(st.Failed) != 1 || st.Failed[0] != victim || st.Events < 2 {
		t.Fatalf("status after failure of slot %d: %+v", victim, st)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Survivors record the failure: reassembling with the failed member's
	// old superblock is refused as stale, without it works degraded.
	ms[victim].setFailed(false)
	var surv []blockdev.Device
	for i, m := range ms {
		if i != victim {
			surv = append(surv, m.reopen())
		}
	}
	if _, err := Assemble(ctx, append(append([]blockdev.Device{}, surv...), ms[victim].reopen())); !errors.Is(err, ErrStale) {
		t.Fatalf("assemble with stale member: %v, want ErrStale", err)
	}
	b, err := Assemble(ctx, surv)
	if err != nil {
		t.Fatal(err)
	}
	verifyAll(t, ctx, b, ref)
	// Second failure: the array stops with ErrArrayFailed, never wrong data.
	live := surv[r.IntN(len(surv))].(*memDevice)
	live.setFailed(true)
	p := make([]byte, b.Size())
	if _, err := b.ReadAt(ctx, p, 0); !errors.Is(err, ErrArrayFailed) {
		t.Fatalf("read after second failure: %v, want ErrArrayFailed", err)
	}
	if _, err := b.WriteAt(ctx, p[:512], 0); !errors.Is(err, ErrArrayFailed) {
		t.Fatalf("write after second failure: %v, want ErrArrayFailed", err)
	}
}

func TestRAID0MemberFailureStops(t *testing.T) {
	ctx := context.Background()
	ms, ds := mems(3, memOff+8*chunkT)
	a, err := testCreate(ctx, 0, ds)
	if err != nil {
		t.Fatal(err)
	}
	ms[1].setFailed(true)
	p := make([]byte, a.Size())
	if _, err := a.ReadAt(ctx, p, 0); !errors.Is(err, ErrArrayFailed) {
		t.Fatalf("RAID-0 read with failed member: %v, want ErrArrayFailed", err)
	}
}

// TestBadReads: short reads and garbage are errors / detected, not data.
func TestShortReadFailsMember(t *testing.T) {
	ctx := context.Background()
	ms, ds := mems(3, memOff+8*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	ref := bytes.Repeat([]byte("0123456789abcdef"), int(a.Size()/16))
	if _, err := a.WriteAt(ctx, ref, 0); err != nil {
		t.Fatal(err)
	}
	ms[2].mu.Lock()
	ms[2].short = true
	ms[2].mu.Unlock()
	verifyAll(t, ctx, a, ref)
	if st := a.Status(); len(st.Failed) != 1 || st.Failed[0] != 2 {
		t.Fatalf("short-reading member not failed: %+v", st)
	}
}

func TestCheckFindsGarbage(t *testing.T) {
	ctx := context.Background()
	ms, ds := mems(3, memOff+8*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte{7}, int(a.Size()))
	if _, err := a.WriteAt(ctx, p, 0); err != nil {
		t.Fatal(err)
	}
	ms[1].mu.Lock()
	ms[1].cur[memOff+3*chunkT+100] ^= 1 // silent corruption in row 3
	ms[1].mu.Unlock()
	mm, err := a.Check(ctx, true)
	if err != nil || len(mm) != 1 || mm[0].Row != 3 {
		t.Fatalf("check: %v %v, want one mismatch in row 3", mm, err)
	}
	if mm, err := a.Check(ctx, false); err != nil || len(mm) != 0 {
		t.Fatalf("after repair: %v %v", mm, err)
	}
	// A member that answers every read with garbage (no error) is caught
	// by the scrub in every row.
	ms[2].mu.Lock()
	ms[2].garbage = true
	ms[2].mu.Unlock()
	if mm, err := a.Check(ctx, false); err != nil || len(mm) != 8 {
		t.Fatalf("garbage member: %d mismatches (%v), want all 8 rows", len(mm), err)
	}
}

func TestAssembleShuffledAndRefusals(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 3))
	for _, level := range []int{0, 5} {
		ms, ds := mems(4, memOff+16*chunkT)
		a, err := testCreate(ctx, level, ds)
		if err != nil {
			t.Fatal(err)
		}
		ref := make([]byte, a.Size())
		runOps(t, ctx, r, a, ref, 100)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		re := func() []blockdev.Device {
			out := make([]blockdev.Device, len(ms))
			for i, m := range ms {
				out[i] = m.reopen()
			}
			r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
			return out
		}
		b, err := Assemble(ctx, re())
		if err != nil {
			t.Fatal(err)
		}
		verifyAll(t, ctx, b, ref)
		b.Close()

		// Foreign member.
		_, other := mems(4, memOff+16*chunkT)
		if _, err := testCreate(ctx, level, other); err != nil {
			t.Fatal(err)
		}
		mix := re()
		mix[0] = other[0]
		if _, err := Assemble(ctx, mix); !errors.Is(err, ErrForeign) {
			t.Fatalf("foreign member: %v, want ErrForeign", err)
		}
		// Corrupt superblock.
		bad := re()
		bm := bad[1].(*memDevice)
		bm.cur[40] ^= 0xff
		if _, err := Assemble(ctx, bad); !errors.Is(err, ErrBadSuperblock) {
			t.Fatalf("corrupt superblock: %v, want ErrBadSuperblock", err)
		}
		// Duplicate member.
		dup := re()
		dup[1] = dup[0].(*memDevice).reopen()
		if _, err := Assemble(ctx, dup); !errors.Is(err, ErrMismatch) {
			t.Fatalf("duplicate member: %v, want ErrMismatch", err)
		}
		// Too-small member.
		small := re()
		sm := newMem(memOff + 8*chunkT)
		copy(sm.cur, small[2].(*memDevice).cur[:SuperblockSize])
		small[2] = sm
		if _, err := Assemble(ctx, small); !errors.Is(err, ErrMismatch) {
			t.Fatalf("small member: %v, want ErrMismatch", err)
		}
	}
	// Mismatched sizes at create are refused (naming the member) unless
	// the smallest is allowed to set the size.
	_, ds := mems(3, memOff+16*chunkT)
	ds[1] = newMem(memOff + 9*chunkT + 512)
	if _, err := testCreate(ctx, 5, ds); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "member 1") {
		t.Fatalf("mixed sizes: %v, want ErrMismatch naming member 1", err)
	}
	a, err := CreateWith(ctx, Options{Level: 5, Chunk: chunkT, Journal: jT, UseSmallest: true}, ds)
	if err != nil || a.Size() != 2*9*chunkT {
		t.Fatalf("mixed sizes, smallest allowed: size %v err %v", a, err)
	}
}

// TestCrashRecovery (arrays without a journal: RAID-0, and RAID-5 created
// with NoJournal): writes after the last flush are dropped at random on
// each member. After Assemble (a full parity resync for the RAID-5), every
// block holds either its last flushed value or one of the values written
// after that flush, and a later member failure still reconstructs exactly
// that data (parity matches).
func TestCrashRecovery(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	for round := range 20 {
		r := rand.New(rand.NewPCG(seed, uint64(100+round)))
		level := []int{0, 5}[round%2]
		ms, ds := mems(4, memOff+16*chunkT)
		a, err := CreateWith(ctx, Options{Level: level, Chunk: chunkT, NoJournal: true}, ds)
		if err != nil {
			t.Fatal(err)
		}
		size := a.Size()
		ref := make([]byte, size)
		runOps(t, ctx, r, a, ref, 60)
		if err := a.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		flushed := append([]byte(nil), ref...)
		// Candidate values per block written after the flush.
		cand := map[int64][][]byte{}
		for range 1 + r.IntN(20) {
			off, n := randIO(r, size)
			p := make([]byte, n)
			for j := range p {
				p[j] = byte(r.Uint32())
			}
			if _, err := a.WriteAt(ctx, p, off); err != nil {
				t.Fatal(err)
			}
			for b := int64(0); b < int64(n); b += 512 {
				cand[(off+b)/512] = append(cand[(off+b)/512], p[b:b+512])
			}
		}
		out := make([]blockdev.Device, len(ms))
		for i, m := range ms {
			m.crash(func() bool { return r.IntN(2) == 0 })
			out[i] = m.reopen()
		}
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		b, err := Assemble(ctx, out)
		if err != nil {
			t.Fatalf("round %d: assemble after crash: %v", round, err)
		}
		got := make([]byte, size)
		if _, err := b.ReadAt(ctx, got, 0); err != nil {
			t.Fatal(err)
		}
		checkBlocks := func(what string, got []byte) {
			for blk := int64(0); blk < size/512; blk++ {
				g := got[blk*512 : (blk+1)*512]
				ok := bytes.Equal(g, flushed[blk*512:(blk+1)*512])
				for _, c := range cand[blk] {
					ok = ok || bytes.Equal(g, c)
				}
				if !ok {
					t.Fatalf("round %d (level %d) %s: block %d is neither flushed nor written data", round, level, what, blk)
				}
			}
		}
		checkBlocks("after assemble", got)
		if level == 5 {
			if mm, err := b.Check(ctx, false); err != nil || len(mm) != 0 {
				t.Fatalf("round %d: parity not resynced: %v %v", round, mm, err)
			}
			// Degraded reads after recovery return the same data.
			out[r.IntN(4)].(*memDevice).setFailed(true)
			deg := make([]byte, size)
			if _, err := b.ReadAt(ctx, deg, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(deg, got) {
				t.Fatalf("round %d: degraded read after crash recovery differs", round)
			}
		}
	}
}

// TestNoJournalDirtyDegradedRefused: without a journal, a crash while
// writing and then a lost member: assembly refuses rather than reconstruct
// from possibly stale parity; with every member it resyncs.
func TestNoJournalDirtyDegradedRefused(t *testing.T) {
	ctx := context.Background()
	ms, ds := mems(3, memOff+8*chunkT)
	a, err := CreateWith(ctx, Options{Level: 5, Chunk: chunkT, NoJournal: true}, ds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteAt(ctx, make([]byte, 512), 0); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		m.crash(func() bool { return false })
	}
	if _, err := Assemble(ctx, []blockdev.Device{ms[0].reopen(), ms[2].reopen()}); !errors.Is(err, ErrDirtyDegraded) {
		t.Fatalf("dirty degraded assemble: %v, want ErrDirtyDegraded", err)
	}
	if _, err := Assemble(ctx, []blockdev.Device{ms[0].reopen(), ms[1].reopen(), ms[2].reopen()}); err != nil {
		t.Fatalf("dirty complete assemble: %v", err)
	}
}

func TestXOR(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 100 {
		a, b := make([]byte, n), make([]byte, n)
		for i := range a {
			a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		want := make([]byte, n)
		for i := range a {
			want[i] = a[i] ^ b[i]
		}
		xorInto(a, b)
		if !bytes.Equal(a, want) {
			t.Fatalf("xor len %d wrong", n)
		}
	}
}

func BenchmarkXOR(b *testing.B) {
	dst, src := make([]byte, 64<<10), make([]byte, 64<<10)
	b.SetBytes(int64(len(dst)))
	for b.Loop() {
		xorInto(dst, src)
	}
}

// TestFailMidWrite: a member vanishes in the middle of a request (after a
// random number of its writes, so some members of a row have the new data
// and others not); the retry in degraded mode must leave exactly the
// written data, readable degraded and after reassembly.
func TestFailMidWrite(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	for round := range 10 {
		r := rand.New(rand.NewPCG(seed, uint64(200+round)))
		ms, ds := mems(4, memOff+32*chunkT)
		for _, m := range ms {
			m.delay = time.Microsecond
		}
		a, err := testCreate(ctx, 5, ds)
		if err != nil {
			t.Fatal(err)
		}
		ref := make([]byte, a.Size())
		runOps(t, ctx, r, a, ref, 50)
		victim := r.IntN(4)
		ms[victim].mu.Lock()
		ms[victim].failAfter = 1 + r.IntN(10)
		ms[victim].mu.Unlock()
		runOps(t, ctx, r, a, ref, 150)
		verifyAll(t, ctx, a, ref)
		// The survivors recorded the failure at once (not only at Close):
		// their durable superblocks name the vanished slot.
		var durable []blockdev.Device
		for i, m := range ms {
			if i != victim {
				durable = append(durable, m.reopen())
			}
		}
		if in, err := Examine(ctx, durable); err != nil || len(in.Failed) != 1 || in.Failed[0] != victim {
			t.Fatalf("round %d: survivors' superblocks after slot %d vanished: %+v %v", round, victim, in, err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		var surv []blockdev.Device
		for i, m := range ms {
			if i != victim {
				surv = append(surv, m.reopen())
			}
		}
		b, err := Assemble(ctx, surv)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		verifyAll(t, ctx, b, ref)
	}
}

package raid

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
)

// TestAssembleBadMembers: every kind of bad member is refused with an error
// that names it (its position in the list), and nothing is written.
func TestAssembleBadMembers(t *testing.T) {
	ctx := context.Background()
	arr := func() []*memDevice {
		ms, ds := mems(4, memOff+8*chunkT)
		a, err := testCreate(ctx, 5, ds)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	A, B := arr(), arr()
	devs := func(ms ...*memDevice) []blockdev.Device {
		out := make([]blockdev.Device, len(ms))
		for i, m := range ms {
			out[i] = m.reopen()
		}
		return out
	}
	cases := []struct {
		name    string
		members func() []blockdev.Device
		is      error
		names   string
	}{
		{"garbage", func() []blockdev.Device {
			d := devs(A...)
			d[2].(*memDevice).garbage = true
			return d
		}, ErrBadSuperblock, "member 2"},
		{"short reads", func() []blockdev.Device {
			d := devs(A...)
			d[1].(*memDevice).short = true
			return d
		}, io.ErrUnexpectedEOF, "member 1"},
		{"unreadable", func() []blockdev.Device {
			d := devs(A...)
			d[3].(*memDevice).failed = true
			return d
		}, errInjected, "member 3"},
		{"blank", func() []blockdev.Device {
			d := devs(A...)
			d[0] = newMem(memOff + 8*chunkT)
			return d
		}, ErrBadSuperblock, "member 0"},
		// The odd one out is named even when it comes first.
		{"one from another array", func() []blockdev.Device { return devs(B[0], A[1], A[2], A[3]) }, ErrForeign, "member 0"},
		{"two arrays half and half", func() []blockdev.Device { return devs(A[0], A[1], B[2], B[3]) }, ErrForeign, "member 2"},
		{"same member twice", func() []blockdev.Device { return devs(A[0], A[1], A[1]) }, ErrMismatch, "member 2"},
		{"too small", func() []blockdev.Device {
			d := devs(A...)
			sm := newMem(memOff + 4*chunkT)
			copy(sm.cur, d[3].(*memDevice).cur[:SuperblockSize])
			d[3] = sm
			return d
		}, ErrMismatch, "member 3"},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			ms := c.members()
			_, err := Assemble(ctx, ms)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.names) {
				t.Fatalf("assemble: %v, want %v naming %q", err, c.is, c.names)
			}
			if _, err := Examine(ctx, ms); !errors.Is(err, c.is) {
				t.Fatalf("examine: %v, want %v", err, c.is)
			}
			for i, m := range ms {
				if len(m.(*memDevice).pending) != 0 {
					t.Fatalf("refused assembly wrote to member %d", i)
				}
			}
		})
	}
	// A version-1 (write-intent bitmap) member is refused by name.
	v1 := devs(A...)
	sb := v1[1].(*memDevice).cur[:SuperblockSize]
	binary.LittleEndian.PutUint32(sb[8:], 1)
	binary.LittleEndian.PutUint32(sb[SuperblockSize-4:], crc32.Checksum(sb[:SuperblockSize-4], castagnoli))
	if _, err := Assemble(ctx, v1); !errors.Is(err, ErrBadSuperblock) || !strings.Contains(err.Error(), "member 1: raid: bad superblock: version 1") {
		t.Fatalf("version-1 member: %v", err)
	}
	// Examine of good members writes nothing; they still assemble in any order.
	good := devs(A[3], A[1], A[0], A[2])
	if in, err := Examine(ctx, good); err != nil || in.Dirty || in.Level != 5 {
		t.Fatalf("examine: %+v %v", in, err)
	}
	for i, m := range good {
		if len(m.(*memDevice).pending) != 0 {
			t.Fatalf("examine wrote to member %d", i)
		}
	}
	if _, err := Assemble(ctx, good); err != nil {
		t.Fatal(err)
	}
}

// TestReplaceBadInput: wrong slot, a slot in sync, a too-small or
// wrong-block-size replacement are refused; the array is unchanged.
func TestReplaceBadInput(t *testing.T) {
	ctx := context.Background()
	ms, ds := mems(3, memOff+8*chunkT)
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	fresh := func(size int64) *memDevice { return newMem(size) }
	if err := a.Replace(ctx, 1, fresh(memOff+8*chunkT), nil); err == nil || !strings.Contains(err.Error(), "in sync") {
		t.Fatalf("replace of a slot in sync: %v", err)
	}
	if err := a.Replace(ctx, 7, fresh(memOff+8*chunkT), nil); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("replace of slot 7: %v", err)
	}
	ms[1].setFailed(true)
	if err := a.Fail(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(ctx, 0); err == nil || !strings.Contains(err.Error(), "would stop the array") {
		t.Fatalf("failing a second RAID-5 member: %v", err)
	}
	if err := a.Replace(ctx, 1, fresh(memOff+4*chunkT), nil); !errors.Is(err, ErrMismatch) {
		t.Fatalf("too-small replacement: %v, want ErrMismatch", err)
	}
	big := fresh(memOff + 8*chunkT)
	big.bs = 8192
	if err := a.Replace(ctx, 1, big, nil); !errors.Is(err, ErrMismatch) {
		t.Fatalf("replacement with 8 KiB blocks: %v, want ErrMismatch", err)
	}
	// A live member of this array named as the replacement (the same device
	// twice, or the arguments in the wrong order).
	if err := a.Replace(ctx, 1, ms[2], nil); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "slot 2 of this array") {
		t.Fatalf("replacement that is live slot 2: %v, want ErrMismatch", err)
	}
	if st := a.Status(); len(st.Failed) != 1 || st.Failed[0] != 1 || st.Rebuilding != -1 || st.Stopped {
		t.Fatalf("status after refused replacements: %+v", st)
	}
	if err := a.Replace(ctx, 1, fresh(memOff+8*chunkT), nil); err != nil {
		t.Fatal(err)
	}
}

// TestGarbageMemberVerifiedReads: a member that answers reads with garbage
// and no error. With verified reads the RAID-5 read fails with ErrCorrupt
// (never the garbage), a 3-way mirror outvotes the bad copy, and a 2-way
// mirror fails the read; without verification the garbage would pass.
func TestGarbageMemberVerifiedReads(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		level, n int
		want     error // nil: the right data
	}{{5, 4, ErrCorrupt}, {1, 3, nil}, {1, 2, ErrCorrupt}} {
		ms, ds := mems(tc.n, memOff+8*chunkT)
		a, err := testCreate(ctx, tc.level, ds)
		if err != nil {
			t.Fatal(err)
		}
		ref := make([]byte, a.Size())
		for i := range ref {
			ref[i] = byte(i/512 + i)
		}
		if _, err := a.WriteAt(ctx, ref, 0); err != nil {
			t.Fatal(err)
		}
		ms[1].mu.Lock()
		ms[1].garbage = true
		ms[1].mu.Unlock()
		a.SetVerifyReads(true)
		got := make([]byte, len(ref))
		_, err = a.ReadAt(ctx, got, 0)
		switch {
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Fatalf("RAID-%d x%d verified read over a garbage member: %v, want %v", tc.level, tc.n, err, tc.want)
		case tc.want == nil && (err != nil || !bytes.Equal(got, ref)):
			t.Fatalf("RAID-%d x%d verified read: err %v, data equal %v", tc.level, tc.n, err, bytes.Equal(got, ref))
		}
		// Unverified, the garbage comes through: that is what the option is for.
		a.SetVerifyReads(false)
		if _, err := a.ReadAt(ctx, got, 0); err != nil {
			t.Fatal(err)
		}
		if tc.level == 5 && bytes.Equal(got, ref) {
			t.Fatal("unverified read over a garbage member returned the right data: the test injects nothing")
		}
	}
}

// TestCancelledFlushFailsNoMember: a caller that gives up (its context is
// cancelled) makes member flushes fail, but that is not the members'
// fault: none may be marked failed.
func TestCancelledFlushFailsNoMember(t *testing.T) {
	_, ds := mems(3, memOff+8*chunkT)
	a, err := CreateWith(context.Background(), Options{Level: 5, Chunk: chunkT, NoJournal: true}, ds)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("flush with a cancelled context: %v", err)
	}
	if st := a.Status(); len(st.Failed) != 0 || st.Stopped {
		t.Fatalf("a cancelled flush failed members: %+v", st)
	}
}

// TestHungMemberTimesOut: a member that stops answering (and ignores its
// context) is failed after the member timeout; reads and writes go on
// degraded with the right data instead of hanging.
func TestHungMemberTimesOut(t *testing.T) {
	ctx := context.Background()
	ms, raw := mems(3, memOff+8*chunkT)
	ds := make([]blockdev.Device, len(raw))
	for i, d := range raw {
		ds[i] = WithTimeout(d, 200*time.Millisecond)
	}
	a, err := testCreate(ctx, 5, ds)
	if err != nil {
		t.Fatal(err)
	}
	ref := make([]byte, a.Size())
	for i := range ref {
		ref[i] = byte(i / 512)
	}
	if _, err := a.WriteAt(ctx, ref, 0); err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	defer close(hang)
	ms[1].mu.Lock()
	ms[1].hang = hang
	ms[1].mu.Unlock()
	start := time.Now()
	p := bytes.Repeat([]byte{0xab}, 2*chunkT)
	if _, err := a.WriteAt(ctx, p, chunkT); err != nil {
		t.Fatalf("write with a hung member: %v", err)
	}
	copy(ref[chunkT:], p)
	verifyAll(t, ctx, a, ref)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("I/O with a hung member took %v", el)
	}
	if st := a.Status(); len(st.Failed) != 1 || st.Failed[0] != 1 {
		t.Fatalf("hung member not failed: %+v", st)
	}
}

package iscsiblock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/internal/testutil/tgt"
	proto "github.com/tristore/tristore/proto/iscsi"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// checkRW writes random data at random block-aligned offsets with many
// goroutines (queue depth qd) and I/O sizes, then reads everything back
// through the device and compares checksums. It returns the expected
// content so callers can compare it with the target's backing file.
func checkRW(t *testing.T, dev blockdev.Device, qd int, sizes []int, seed uint64) []byte {
	t.Helper()
	ctx := testCtx(t)
	size := dev.Size()
	bs := dev.BlockSize()
	shadow := make([]byte, size)
	if _, err := dev.ReadAt(ctx, shadow, 0); err != nil {
		t.Fatalf("initial read: %v", err)
	}
	// Non-overlapping regions per worker, so the expected content is
	// well defined even though writes run concurrently.
	region := size / int64(qd)
	region -= region % int64(bs)
	var wg sync.WaitGroup
	errs := make(chan error, qd)
	for w := 0; w < qd; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			base := int64(w) * region
			for i := 0; i < 6; i++ {
				n := sizes[rng.IntN(len(sizes))]
				if int64(n) > region {
					n = int(region)
				}
				n -= n % bs
				off := base + rng.Int64N((region-int64(n))/int64(bs)+1)*int64(bs)
				p := shadow[off : off+int64(n)]
				for j := range p {
					p[j] = byte(rng.Uint32())
				}
				if _, err := dev.WriteAt(ctx, p, off); err != nil {
					errs <- fmt.Errorf("write %d@%d: %w", n, off, err)
					return
				}
				got := make([]byte, n)
				if _, err := dev.ReadAt(ctx, got, off); err != nil {
					errs <- fmt.Errorf("read %d@%d: %w", n, off, err)
					return
				}
				if !bytes.Equal(got, p) {
					errs <- fmt.Errorf("read-back mismatch %d@%d", n, off)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := dev.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	all := make([]byte, size)
	if _, err := dev.ReadAt(ctx, all, 0); err != nil {
		t.Fatalf("full read: %v", err)
	}
	if sha256.Sum256(all) != sha256.Sum256(shadow) {
		t.Fatal("device content checksum differs from what was written")
	}
	return shadow
}

func openURL(t *testing.T, cfg iscsi.Config) *iscsi.Session {
	t.Helper()
	s, err := iscsi.Open(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.Portal, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestInitiatorAgainstTgt(t *testing.T) {
	tg := tgt.Start(t, tgt.Opts{Size: 32 << 20, Digests: true})
	ctx := testCtx(t)

	targets, err := iscsi.Discover(ctx, iscsi.Config{Portal: tg.Portal})
	if err != nil {
		t.Fatalf("discover: %v", err)
	}
	if len(targets) != 1 || targets[0].Name != tg.IQN || len(targets[0].Addresses) == 0 {
		t.Fatalf("discover: %+v", targets)
	}

	for _, tc := range []struct {
		name string
		cfg  iscsi.Config
		qd   int
	}{
		{"qd1", iscsi.Config{QueueDepth: 1}, 1},
		{"qd8-digests", iscsi.Config{QueueDepth: 8, HeaderDigest: true, DataDigest: true}, 8},
		{"qd32-initialr2t-noimm-small-segments", iscsi.Config{QueueDepth: 32, InitialR2T: true, NoImmediateData: true,
			MaxRecvDataSegmentLength: 8192, MaxBurstLength: 64 << 10, FirstBurstLength: 16 << 10}, 32},
		{"qd16-unsolicited", iscsi.Config{QueueDepth: 16, MaxIOSize: 256 << 10}, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Portal, cfg.Target, cfg.LUN = tg.Portal, tg.IQN, 1
			s := openURL(t, cfg)
			if s.Size() != 32<<20 || s.BlockSize() != 512 {
				t.Fatalf("capacity %d/%d", s.Size(), s.BlockSize())
			}
			if cfg.HeaderDigest && !s.Params().HeaderDigest {
				t.Fatal("header digest not negotiated with tgt")
			}
			want := checkRW(t, s, tc.qd, []int{512, 4096, 65536, 300 << 10, 2 << 20}, uint64(tc.qd))
			if err := s.Close(); err != nil {
				t.Fatalf("logout: %v", err)
			}
			got, err := os.ReadFile(tg.Backing)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("tgt's backing file differs from what the initiator wrote")
			}
		})
	}

	t.Run("luns-inquiry", func(t *testing.T) {
		s := openURL(t, iscsi.Config{Portal: tg.Portal, Target: tg.IQN, LUN: 1})
		luns, err := s.ReportLUNs(ctx)
		if err != nil || len(luns) != 2 {
			t.Fatalf("REPORT LUNS: %v %v", luns, err)
		}
		inq, err := s.Inquiry(ctx)
		if err != nil || inq.DeviceType != 0 {
			t.Fatalf("INQUIRY: %+v %v", inq, err)
		}
		if _, err := s.ReadAt(ctx, make([]byte, 512), s.Size()); !errors.Is(err, blockdev.ErrOutOfRange) {
			t.Fatalf("read past end: %v", err)
		}
		if _, err := s.WriteAtFUA(ctx, bytes.Repeat([]byte{9}, 4096), 0); err != nil {
			t.Fatalf("FUA write: %v", err)
		}
	})

	t.Run("bad-target", func(t *testing.T) {
		_, err := iscsi.Open(ctx, iscsi.Config{Portal: tg.Portal, Target: "iqn.2026-11.org.example:nope", LUN: 1})
		if !errors.Is(err, iscsi.ErrTargetNotFound) {
			t.Fatalf("login to unknown target: %v", err)
		}
	})
}

func TestInitiatorCHAPAgainstTgt(t *testing.T) {
	tg := tgt.Start(t, tgt.Opts{Size: 8 << 20, Digests: true, User: "alice", Secret: "alicesecret12", OutUser: "tgt", OutSecret: "targetsecret1"})
	ctx := testCtx(t)
	base := iscsi.Config{Portal: tg.Portal, Target: tg.IQN, LUN: 1}

	one := base
	one.CHAP = proto.CHAPCredentials{User: "alice", Secret: "alicesecret12"}
	s := openURL(t, one)
	checkRW(t, s, 4, []int{4096, 128 << 10}, 3)

	mutual := one
	mutual.TargetCHAP = proto.CHAPCredentials{User: "tgt", Secret: "targetsecret1"}
	mutual.HeaderDigest, mutual.DataDigest = true, true
	s2 := openURL(t, mutual)
	if _, err := s2.ReadAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}

	bad := base
	bad.CHAP = proto.CHAPCredentials{User: "alice", Secret: "wrongsecret12"}
	if _, err := iscsi.Open(ctx, bad); !errors.Is(err, iscsi.ErrAuth) {
		t.Fatalf("wrong secret: %v", err)
	}
	none := base
	if _, err := iscsi.Open(ctx, none); !errors.Is(err, iscsi.ErrAuth) {
		t.Fatalf("no CHAP against a CHAP target: %v", err)
	}
	badTarget := mutual
	badTarget.TargetCHAP.Secret = "notthetargets"
	if _, err := iscsi.Open(ctx, badTarget); !errors.Is(err, iscsi.ErrAuth) {
		t.Fatalf("target with the wrong mutual secret accepted: %v", err)
	}
}

// TestInitiatorReconnectTgt kills the TCP connection under a session with
// commands in flight; every command must still complete correctly.
func TestInitiatorReconnectTgt(t *testing.T) {
	tg := tgt.Start(t, tgt.Opts{Size: 16 << 20})
	s := openURL(t, iscsi.Config{Portal: tg.Portal, Target: tg.IQN, LUN: 1, QueueDepth: 8})
	reconnectCheck(t, s)
}

func reconnectCheck(t *testing.T, s *iscsi.Session) {
	ctx := testCtx(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 3; i++ {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			s.DropConnection()
		}
	}()
	want := checkRW(t, s, 8, []int{4096, 256 << 10, 1 << 20}, 11)
	close(stop)
	<-done
	got := make([]byte, len(want))
	if _, err := s.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("content after reconnects differs")
	}
	if s.Reconnects() == 0 {
		t.Log("note: no command was in flight when the connection dropped")
	}
	t.Logf("reconnects: %d", s.Reconnects())
}

package iscsiblock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/client/iscsi"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/internal/testutil/iscsitarget"
	proto "github.com/tristore/tristore/proto/iscsi"
)

// ourTarget is tristore's target (frontend/iscsi) over a posix store in a
// temp dir, serving one volume (vols/disk1) on 127.0.0.1.
type ourTarget = iscsitarget.Target

func startOurs(t testing.TB, size int64, chap iscsitgt.CHAPConfig) *ourTarget {
	t.Helper()
	return startOursCfg(t, size, iscsitgt.Config{CHAP: chap})
}

// startOursCfg is startOurs with target options (window, NOP pings, ...).
func startOursCfg(t testing.TB, size int64, tc iscsitgt.Config) *ourTarget {
	t.Helper()
	tc.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	return iscsitarget.Start(t, "disk1", size, tc)
}

func TestInitiatorAgainstOurs(t *testing.T) {
	tg := startOurs(t, 32<<20, iscsitgt.CHAPConfig{})
	ctx := testCtx(t)
	ts, err := iscsi.Discover(ctx, iscsi.Config{Portal: tg.Portal})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range ts {
		found = found || x.Name == tg.IQN
	}
	if !found {
		t.Fatalf("discover: %v does not list %s", ts, tg.IQN)
	}
	for _, tc := range []struct {
		name string
		cfg  iscsi.Config
		qd   int
	}{
		{"qd1", iscsi.Config{QueueDepth: 1}, 1},
		{"qd32-digests", iscsi.Config{QueueDepth: 32, HeaderDigest: true, DataDigest: true}, 32},
		{"qd8-initialr2t-noimm", iscsi.Config{QueueDepth: 8, InitialR2T: true, NoImmediateData: true,
			MaxRecvDataSegmentLength: 8192, MaxBurstLength: 64 << 10, FirstBurstLength: 16 << 10}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Portal, cfg.Target, cfg.LUN = tg.Portal, tg.IQN, 0
			s := openURL(t, cfg)
			if s.Size() != 32<<20 {
				t.Fatalf("size %d", s.Size())
			}
			if cfg.DataDigest && !s.Params().DataDigest {
				t.Fatal("data digest not in use")
			}
			checkRW(t, s, tc.qd, []int{512, 4096, 65536, 300 << 10, 3 << 20}, uint64(tc.qd)+100)
		})
	}
	t.Run("fua-unmap-bounds", func(t *testing.T) {
		s := openURL(t, iscsi.Config{Portal: tg.Portal, Target: tg.IQN})
		data := bytes.Repeat([]byte{0xEE}, 64<<10)
		if _, err := s.WriteAtFUA(ctx, data, 1<<20); err != nil {
			t.Fatal(err)
		}
		if err := s.Unmap(ctx, 1<<20, 64<<10); err != nil {
			t.Fatalf("unmap: %v", err)
		}
		got := make([]byte, 64<<10)
		if _, err := s.ReadAt(ctx, got, 1<<20); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, make([]byte, 64<<10)) {
			t.Fatal("unmapped range does not read as zeros")
		}
		if _, err := s.WriteAt(ctx, make([]byte, 4096), s.Size()-512); !errors.Is(err, blockdev.ErrOutOfRange) {
			t.Fatalf("write across the end: %v", err)
		}
	})
}

func TestInitiatorCHAPAgainstOurs(t *testing.T) {
	chap := iscsitgt.CHAPConfig{
		Initiator: proto.CHAPCredentials{User: "alice", Secret: "alicesecret12"},
		Target:    proto.CHAPCredentials{User: "tgt", Secret: "targetsecret1"},
	}
	tg := startOurs(t, 8<<20, chap)
	ctx := testCtx(t)
	base := iscsi.Config{Portal: tg.Portal, Target: tg.IQN}
	mutual := base
	mutual.CHAP, mutual.TargetCHAP = chap.Initiator, chap.Target
	mutual.HeaderDigest, mutual.DataDigest = true, true
	s := openURL(t, mutual)
	checkRW(t, s, 4, []int{4096, 128 << 10}, 5)

	one := base
	one.CHAP = chap.Initiator
	openURL(t, one)

	for name, c := range map[string]iscsi.Config{
		"wrong-secret":        func() iscsi.Config { c := one; c.CHAP.Secret = "wrongsecret12"; return c }(),
		"no-chap":             base,
		"wrong-target-secret": func() iscsi.Config { c := mutual; c.TargetCHAP.Secret = "notthetargets"; return c }(),
	} {
		if _, err := iscsi.Open(ctx, c); !errors.Is(err, iscsi.ErrAuth) {
			t.Errorf("%s: got %v, want ErrAuth", name, err)
		}
	}
	if _, err := iscsi.Discover(ctx, iscsi.Config{Portal: tg.Portal, CHAP: chap.Initiator}); err != nil {
		t.Errorf("discovery with CHAP: %v", err)
	}
}

func TestInitiatorReconnectOurs(t *testing.T) {
	tg := startOurs(t, 16<<20, iscsitgt.CHAPConfig{})
	s := openURL(t, iscsi.Config{Portal: tg.Portal, Target: tg.IQN, QueueDepth: 8, HeaderDigest: true, DataDigest: true})
	reconnectCheck(t, s)
}

// TestInitiatorWindowPingsCancel: a target window (4) smaller than the
// initiator's queue depth (32), NOP-In pings every 50 ms that the
// initiator must answer or be dropped, and cancelled commands.
func TestInitiatorWindowPingsCancel(t *testing.T) {
	tg := startOursCfg(t, 16<<20, iscsitgt.Config{QueueDepth: 4, NopInterval: 50 * time.Millisecond, NopTimeout: time.Second})
	s := openURL(t, iscsi.Config{Portal: tg.Portal, Target: tg.IQN, QueueDepth: 32})
	checkRW(t, s, 32, []int{4096, 64 << 10}, 21)
	time.Sleep(1500 * time.Millisecond) // idle: only pings flow
	ctx := testCtx(t)
	if _, err := s.ReadAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if n := s.Reconnects(); n != 0 {
		t.Fatalf("the target dropped us %d times: NOP-In pings not answered", n)
	}
	// Cancel big writes mid-flight; the session must stay usable.
	for i := 0; i < 5; i++ {
		cctx, cancel := context.WithTimeout(ctx, time.Duration(i)*time.Millisecond)
		_, err := s.WriteAt(cctx, make([]byte, 8<<20), 0)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cancelled write: %v", err)
		}
	}
	checkRW(t, s, 8, []int{4096, 1 << 20}, 22)
}

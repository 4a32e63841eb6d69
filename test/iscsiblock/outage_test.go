package iscsiblock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/client/iscsi"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/internal/testutil/iscsitarget"
)

// startRestartable serves a volume vols/disk1 of size bytes with our
// target (testutil/iscsitarget), which Stop and Start take down and bring
// back on the same portal.
func startRestartable(t *testing.T, size int64) *iscsitarget.Target {
	t.Helper()
	return iscsitarget.Start(t, "disk1", size, iscsitgt.Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// TestInitiatorOutageLongerThanReplacementTimeout: the target goes away
// for longer than the session's replacement timeout. I/O during the
// outage fails (no panic), I/O after the timeout fails at once instead of
// waiting the whole budget again, and the same session serves I/O again
// as soon as the target is back.
func TestInitiatorOutageLongerThanReplacementTimeout(t *testing.T) {
	const budget = 1500 * time.Millisecond
	tg := startRestartable(t, 8<<20)
	s := openURL(t, iscsi.Config{Portal: tg.Portal, Target: tg.IQN, QueueDepth: 8, ReplacementTimeout: budget})
	ctx := testCtx(t)
	data := bytes.Repeat([]byte("outage! "), 64<<10/8)
	if _, err := s.WriteAt(ctx, data, 4096); err != nil {
		t.Fatal(err)
	}

	tg.Stop()
	start := time.Now()
	buf := make([]byte, len(data))
	_, err := s.ReadAt(ctx, buf, 4096)
	took := time.Since(start)
	if !errors.Is(err, iscsi.ErrUnavailable) {
		t.Fatalf("read during the outage: %v, want ErrUnavailable", err)
	}
	if took > budget+3*time.Second {
		t.Fatalf("read during the outage failed only after %v (budget %v)", took, budget)
	}
	t.Logf("first I/O of the outage failed after %v: %v", took, err)

	// Past the budget every request fails at once, concurrent ones too.
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		start = time.Now()
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.WriteAt(ctx, data[:4096], int64(i)*4096)
			}()
		}
		wg.Wait()
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Fatalf("round %d: I/O after the budget took %v to fail", round, took)
		}
		for i, err := range errs {
			if !errors.Is(err, iscsi.ErrUnavailable) {
				t.Fatalf("round %d write %d: %v, want ErrUnavailable", round, i, err)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	if s.Connected() {
		t.Fatal("Connected() while the target is down")
	}

	tg.Start()
	start = time.Now()
	var lastErr error
	for time.Since(start) < 10*time.Second {
		if _, lastErr = s.ReadAt(ctx, buf, 4096); lastErr == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if lastErr != nil {
		t.Fatalf("no service 10s after the target came back: %v", lastErr)
	}
	back := time.Since(start)
	if !bytes.Equal(buf, data) {
		t.Fatal("data written before the outage differs after it")
	}
	if back > 3*time.Second {
		t.Fatalf("service came back %v after the target (want about a second)", back)
	}
	if _, err := s.WriteAt(ctx, data, 1<<20); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	if s.Reconnects() == 0 || !s.Connected() {
		t.Fatalf("reconnects %d connected %v", s.Reconnects(), s.Connected())
	}
	t.Logf("service back %v after the target", back)
}

// TestInitiatorCloseDuringOutage: Close while the target is down and a
// command waits for it returns promptly and fails the command with
// ErrClosed, however long the replacement timeout.
func TestInitiatorCloseDuringOutage(t *testing.T) {
	tg := startRestartable(t, 8<<20)
	s, err := iscsi.Open(testCtx(t), iscsi.Config{Portal: tg.Portal, Target: tg.IQN, ReplacementTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tg.Stop()
	got := make(chan error, 1)
	go func() {
		_, err := s.ReadAt(context.Background(), make([]byte, 4096), 0)
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close during an outage took %v", took)
	}
	select {
	case err := <-got:
		if !errors.Is(err, blockdev.ErrClosed) {
			t.Fatalf("waiting read ended with %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a read waiting for the target did not end at Close")
	}
}

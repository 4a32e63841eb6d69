package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuf is a bytes.Buffer safe for mpb's drawing goroutine.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDrawsWhenForced(t *testing.T) {
	var out syncBuf
	p := New(Options{Out: &out, Refresh: 10 * time.Millisecond})
	if p == nil {
		t.Fatal("forced progress is disabled")
	}
	b := p.Add("upload", 3<<20, Bytes)
	files := p.Add("files", 3, Count)
	for range 3 {
		b.Add(1 << 20)
		files.Add(1)
	}
	p.Wait()
	s := out.String()
	for _, want := range []string{"upload", "3.0 MiB / 3.0 MiB", "files", "3 / 3", "100 %"} {
		if !strings.Contains(s, want) {
			t.Errorf("drawing lacks %q:\n%q", want, s)
		}
	}
}

// Under `go test` stdout is not a terminal: bars are off, and every method
// of the disabled (nil) values is a harmless no-op.
func TestSilentWhenNotATerminalOrQuiet(t *testing.T) {
	var out syncBuf
	if (Options{}).Enabled() {
		t.Fatal("enabled although stdout is not a terminal")
	}
	if (Options{Out: &out, Quiet: true}).Enabled() {
		t.Fatal("--quiet did not win")
	}
	p := New(Options{Quiet: true, Out: &out})
	if p != nil {
		t.Fatal("quiet progress is not nil")
	}
	b := p.Add("x", 10, Bytes)
	b.Add(5)
	b.SetTotal(20)
	b.Done()
	p.Wait()
	if out.String() != "" {
		t.Fatalf("quiet progress wrote %q", out.String())
	}
}

// A bar whose work failed half way is completed where it stopped, so Wait
// returns instead of waiting for bytes that will never come.
func TestWaitEndsUnfinishedBars(t *testing.T) {
	var out syncBuf
	p := New(Options{Out: &out, Refresh: 10 * time.Millisecond})
	b := p.Add("half", 100, Bytes)
	b.Add(50)
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait hangs on an unfinished bar")
	}
}

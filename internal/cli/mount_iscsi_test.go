package cli

import (
	"strings"
	"testing"
	"time"
)

// stuckServer is a FUSE server whose Unmount succeeds, after blocking
// until release is closed when block is set.
type stuckServer struct {
	block   bool
	release chan struct{}
}

func (s *stuckServer) Unmount() error {
	if s.block {
		<-s.release
	}
	return nil
}

// TestUnmountRetryBounded: unmountRetry returns within unmountLimit with
// an error naming the directory when the FUSE server does not stop:
// Unmount itself stuck (a request waiting on the device holds go-fuse's
// request loops), or Unmount done but the server's Wait not returning.
// An unmount that ends normally returns nil.
func TestUnmountRetryBounded(t *testing.T) {
	defer func(l time.Duration) { unmountLimit = l }(unmountLimit)
	unmountLimit = 200 * time.Millisecond
	for _, c := range []struct {
		name    string
		srv     *stuckServer
		stopped bool // done closed
		wantErr bool
	}{
		{"unmount stuck", &stuckServer{block: true}, false, true},
		{"server does not stop", &stuckServer{}, false, true},
		{"clean", &stuckServer{}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.srv.release = make(chan struct{})
			defer close(c.srv.release)
			done := make(chan struct{})
			if c.stopped {
				close(done)
			}
			res := make(chan error, 1)
			start := time.Now()
			go func() { res <- unmountRetry("/mnt/x", c.srv, done) }()
			select {
			case err := <-res:
				if c.wantErr != (err != nil) {
					t.Fatalf("error %v, want one: %v", err, c.wantErr)
				}
				if err != nil && (!strings.Contains(err.Error(), "/mnt/x") || !strings.Contains(err.Error(), "did not stop within")) {
					t.Fatalf("error %q does not say which mount did not stop", err)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("took %v with a limit of %v", d, unmountLimit)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("unmountRetry still waiting after 10 s")
			}
		})
	}
}

// Package iscsitarget starts tristore's own iSCSI target (frontend/iscsi)
// in-process for tests that talk to it from outside the front end: a posix
// store in a temp dir with one volume vols/NAME, served on 127.0.0.1 until
// the test ends. (frontend/iscsi's own tests cannot import it: that would be
// an import cycle.)
package iscsitarget

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev/filelun"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/store/posix"
)

// Target is one running target serving LUN 0 of vols/NAME.
type Target struct {
	Portal string // 127.0.0.1:port
	IQN    string
	URL    string // iscsi://Portal/IQN/0
	Store  filelun.Store
	Path   string // the volume's file in the store tree

	t       testing.TB
	cfg     iscsitgt.Config
	mu      sync.Mutex
	running func() // stops the current server; nil while stopped
}

// Start creates the volume vols/name of size bytes and serves it with cfg
// (its Store is set here; its Log, when set, is also the store's). The
// target is stopped by t's cleanup, which fails t if it takes over 20s.
// Stop and Start take it down and bring it back on the same portal (an
// outage).
func Start(t testing.TB, name string, size int64, cfg iscsitgt.Config) *Target {
	t.Helper()
	dir := t.TempDir()
	b, err := posix.Open(dir, posix.Options{Log: cfg.Log})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.CreateBucket(ctx, "vols", ""); err != nil {
		t.Fatal(err)
	}
	st, err := filelun.AsStore(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := filelun.Create(ctx, st, "vols", name, size); err != nil {
		t.Fatal(err)
	}
	cfg.Store = b
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	iqn := iscsitgt.TargetName("vols", name)
	portal := ln.Addr().String()
	tg := &Target{Portal: portal, IQN: iqn, URL: "iscsi://" + portal + "/" + iqn + "/0", Store: st, Path: filepath.Join(dir, "vols", name),
		t: t, cfg: cfg}
	tg.serve(ln)
	t.Cleanup(tg.Stop)
	return tg
}

func (tg *Target) serve(ln net.Listener) {
	tg.t.Helper()
	srv, err := iscsitgt.New(tg.cfg)
	if err != nil {
		ln.Close()
		tg.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tg.mu.Lock()
	tg.running = func() {
		cancel()
		srv.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			tg.t.Error("our target did not stop within 20s")
		}
	}
	tg.mu.Unlock()
}

// Stop takes the target down (at most 20 s, else an error of the test);
// nothing if it is down.
func (tg *Target) Stop() {
	tg.mu.Lock()
	f := tg.running
	tg.running = nil
	tg.mu.Unlock()
	if f != nil {
		f()
	}
}

// Start brings a stopped target back on the same portal, with a new
// server over the same store; nothing if it runs. The port was ours a
// moment ago: the listen is retried for up to 5 s if the kernel disagrees.
func (tg *Target) Start() {
	tg.t.Helper()
	tg.mu.Lock()
	up := tg.running != nil
	tg.mu.Unlock()
	if up {
		return
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", tg.Portal); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		tg.t.Fatalf("listen again on %s: %v", tg.Portal, err)
	}
	tg.serve(ln)
}

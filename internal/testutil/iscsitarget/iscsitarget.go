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
}

// Start creates the volume vols/name of size bytes and serves it with cfg
// (its Store is set here; its Log, when set, is also the store's). The
// target is stopped by t's cleanup, which fails t if it takes over 20s.
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
	srv, err := iscsitgt.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		cancel()
		srv.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("our target did not stop within 20s")
		}
	})
	iqn := iscsitgt.TargetName("vols", name)
	portal := ln.Addr().String()
	return &Target{Portal: portal, IQN: iqn, URL: "iscsi://" + portal + "/" + iqn + "/0", Store: st, Path: filepath.Join(dir, "vols", name)}
}

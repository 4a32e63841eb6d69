package bench_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/bench/drivertest"
	"github.com/tristore/tristore/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	if shared.s != nil {
		shared.s.Stop()
		os.RemoveAll(shared.s.Data)
	}
	shared.mu.Unlock()
	testutil.RemoveTristoreBin()
	os.Exit(code)
}

// shared is one loopback tristore for the package's tests (each uses its own
// directory or bucket), started by the first test that needs it.
var shared struct {
	mu sync.Mutex
	s  *drivertest.Server
}

func server(t *testing.T) *drivertest.Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.s == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// Built first: a failed build ends the test before anything is
		// made to clean up.
		bin := testutil.TristoreBin(ctx, t)
		data, err := os.MkdirTemp("", "tristore-bench-data-")
		if err != nil {
			t.Fatal(err)
		}
		s, err := drivertest.Start(ctx, bin, data)
		if err != nil {
			os.RemoveAll(data)
			t.Fatal(err)
		}
		shared.s = s
	}
	return shared.s
}

func open(t *testing.T, target string) bench.Driver {
	t.Helper()
	d, err := bench.Open(context.Background(), target, bench.Options{AccessKey: drivertest.AccessKey, SecretKey: drivertest.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

func TestDriverPOSIX(t *testing.T) {
	root := t.TempDir()
	drivertest.Run(t, open(t, root), "conf")
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

func TestDriverS3(t *testing.T) {
	s := server(t)
	d := open(t, s.S3)
	drivertest.Run(t, d, "conf")
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The bucket the driver created is gone again.
	if _, err := os.Stat(filepath.Join(s.Data, "bench")); !os.IsNotExist(err) {
		t.Fatalf("bucket left behind: %v", err)
	}
}

func TestDriverNFS(t *testing.T) {
	s := server(t)
	drivertest.Run(t, open(t, s.NFS), "conf-nfs")
	if _, err := os.Stat(filepath.Join(s.Data, "conf-nfs")); !os.IsNotExist(err) {
		t.Fatalf("directory left behind: %v", err)
	}
}

func TestDriverISCSI(t *testing.T) {
	s := server(t)
	d := open(t, s.ISCSI)
	drivertest.Run(t, d, "conf")
	if n := d.(*bench.ISCSI).Files(); n != 0 {
		t.Fatalf("%d regions left", n)
	}
}

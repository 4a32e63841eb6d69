// Package powerloss_test runs `tristore serve` on the power-loss file
// system (internal/powerloss), keeps S3, NFS and iSCSI clients busy, cuts
// the power at a random moment, reboots (kill -9, remount with only the
// durable state, restart) and checks every promise the front ends made
// before the cut: acknowledged data and names are there, whole; what was
// acknowledged as deleted stays deleted; no temp file is visible.
//
// teeth_test.go builds the binary with -tags faultsync and skips one fsync
// at a time: the same scenarios must then report a lost write. See
// docs/durability.md.
package powerloss_test

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/powerloss"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store/posix"
)

const (
	accessKey = "POWERLOSSACCESSKEY01"
	secretKey = "powerloss-test-secret-key-01"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// long reports the soak mode (TRISTORE_LONG=1): many more power cuts.
func long() bool { return os.Getenv("TRISTORE_LONG") == "1" }

// iterations is how many power cuts a scenario makes.
func iterations(short int) int {
	if long() {
		return short * 25
	}
	return short
}

// scenarioTimeout bounds one scenario run (all its rounds).
func scenarioTimeout() time.Duration {
	if long() {
		return 50 * time.Minute
	}
	return 5 * time.Minute
}

// rig is one power-loss file system with a tristore server on it.
type rig struct {
	t    testing.TB
	fs   *powerloss.FS
	data string // the mount point, given to serve as --data
	bin  string
	env  []string // extra environment for the server (fault selection)
	srv  *server
	cfg  string // XDG_CONFIG_HOME, kept across restarts
	// reboot, when set, replaces the file system's Remount in crash (the
	// kernel rig: unmount ext4, reboot powerloss, e2fsck, mount again).
	reboot func()
}

func needFUSE(t testing.TB) {
	t.Helper()
	testutil.NeedRoot(t, "mounts the power-loss FUSE file system")
	testutil.NeedFUSE(t)
}

func newRig(t testing.TB, bin string, env ...string) *rig {
	t.Helper()
	return newRigOn(t, powerloss.New(), bin, env...)
}

// newSidecarRig is newRig on a file system without xattrs: the store
// keeps object metadata and the volume registry in sidecar files.
func newSidecarRig(t testing.TB, bin string) *rig {
	t.Helper()
	pfs := powerloss.New()
	pfs.DisableXattrs()
	return newRigOn(t, pfs, bin)
}

// newRigOn is newRig on a given (not yet mounted) file system.
func newRigOn(t testing.TB, pfs *powerloss.FS, bin string, env ...string) *rig {
	t.Helper()
	needFUSE(t)
	r := &rig{t: t, fs: pfs, data: t.TempDir(), bin: bin, env: env, cfg: t.TempDir()}
	if err := r.fs.Mount(r.data); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.srv != nil {
			r.srv.kill()
		}
		if err := r.fs.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return r
}

// run runs a tristore subcommand on the data tree (e.g. volume create).
func (r *rig) run(ctx context.Context, args ...string) {
	r.t.Helper()
	cmd := exec.CommandContext(ctx, r.bin, append(args, "--data", r.data)...)
	cmd.Env = r.environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("tristore %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (r *rig) environ() []string {
	env := []string{"TRISTORE_ACCESS_KEY=" + accessKey, "TRISTORE_SECRET_KEY=" + secretKey, "XDG_CONFIG_HOME=" + r.cfg}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "TRISTORE_") && !strings.HasPrefix(e, "XDG_CONFIG_HOME=") {
			env = append(env, e)
		}
	}
	return append(env, r.env...)
}

// start starts `tristore serve` with S3, NFS (sync export of the root)
// and iSCSI on 127.0.0.1 ephemeral ports.
func (r *rig) start(ctx context.Context) *server {
	r.t.Helper()
	env := append([]string{"TRISTORE_ACCESS_KEY=" + accessKey, "TRISTORE_SECRET_KEY=" + secretKey, "XDG_CONFIG_HOME=" + r.cfg}, r.env...)
	p := testutil.StartServe(r.t, testutil.ServeOptions{Bin: r.bin, Data: r.data, On: []string{"s3", "nfs", "iscsi"},
		Args: []string{"--nfs-export", "/=rw,sync,clients=127.0.0.0/8,no_root_squash"}, Env: env})
	s := &server{proc: p, addrs: p.Addrs}
	r.srv = s
	// The store must open clean after a power cut: start-up may remove
	// leftovers, but nothing may fail.
	if o := p.Log(); strings.Contains(o, "level=ERROR") {
		r.t.Errorf("tristore serve logged an error while starting:\n%s", o)
	}
	return s
}

// crash is the power loss: cut (every file system request fails from
// now), kill -9 the server, reboot the file system with only its durable
// state. The caller starts the server again.
func (r *rig) crash() {
	r.t.Helper()
	r.fs.Cut()
	r.srv.kill()
	if r.reboot != nil {
		r.reboot()
		return
	}
	if err := r.fs.Remount(); err != nil {
		r.t.Fatal(err)
	}
}

// tempFiles lists ".tristore-tmp-*" files in the tree (the iam directory
// belongs to another package), once the running server's start-up has
// removed the leftovers: that walk runs in the background, and its end is
// a log line (bounded wait; a server that never logs it fails the check
// with the files still there).
func (r *rig) tempFiles() []string {
	if r.srv != nil && !r.srv.proc.WaitLog(posix.CleanupDoneLog, 60*time.Second) {
		r.t.Logf("no %q in the server's log after 60 s", posix.CleanupDoneLog)
	}
	var out []string
	filepath.WalkDir(r.data, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == "iam" {
			return filepath.SkipDir
		}
		if strings.HasPrefix(d.Name(), ".tristore-tmp-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// server is one running `tristore serve`.
type server struct {
	proc  *testutil.Served
	addrs map[string]string
}

// kill is the crash: SIGKILL, wait until the process is gone.
func (s *server) kill() { s.proc.Kill() }

// cutter decides when to cut the power: after a random number of
// acknowledgements (at least one, so every round has something to lose),
// or when the round's time runs out.
type cutter struct {
	mu     sync.Mutex
	acks   int
	target int
	fire   chan struct{}
	once   sync.Once
}

func newCutter(rng *rand.Rand, maxAcks int) *cutter {
	return &cutter{target: 1 + rng.IntN(maxAcks), fire: make(chan struct{})}
}

// ack counts one acknowledged operation.
func (c *cutter) ack() {
	c.mu.Lock()
	c.acks++
	n := c.acks
	c.mu.Unlock()
	if n >= c.target {
		c.once.Do(func() { close(c.fire) })
	}
}

// now makes the cut due at once (every worker has stopped).
func (c *cutter) now() { c.once.Do(func() { close(c.fire) }) }

// wait blocks until the cut is due (or the bound passes).
func (c *cutter) wait(bound time.Duration) {
	select {
	case <-c.fire:
	case <-time.After(bound):
	}
}

// report collects promise violations; a scenario returns them instead of
// failing, so teeth_test.go can expect them.
type report struct {
	mu   sync.Mutex
	errs []string
	// handleChecks counts NFS handles from before a cut that were tried.
	handleChecks int
}

func (r *report) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 50 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}

// errorAll reports every violation as an error of t.
func (r *report) errorAll(t testing.TB) {
	t.Helper()
	for _, e := range r.errs {
		t.Error(e)
	}
}

func (r *report) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs) > 0
}

// payload is deterministic pseudo-random content for (seed, n).
func payload(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		x := rng.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
	return b
}

// ourBin is the binary under test: $TRISTORE_POWERLOSS_BIN when set (a
// prebuilt binary, e.g. of an older commit to show a fix), else
// cmd/tristore built normally once per run.
func ourBin(t testing.TB) string {
	if p := os.Getenv("TRISTORE_POWERLOSS_BIN"); p != "" {
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return testutil.TristoreBin(ctx, t)
}

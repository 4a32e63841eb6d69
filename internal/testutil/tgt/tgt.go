// Package tgt runs tgtd, the peer userspace iSCSI target, for tests that
// compare tristore's target or initiator with it: one target with one LUN
// (1) over a file, on a free port of 127.0.0.1, stopped by t's cleanup.
package tgt

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/internal/testutil"
	proto "github.com/tristore/tristore/proto/iscsi"
)

// Target is a running tgtd with one target and one LUN (1) backed by a
// file, listening on 127.0.0.1 only.
type Target struct {
	Portal  string // host:port
	IQN     string
	Backing string
	ctl     string // tgtd control port (-C), names its unix socket
	pid     int
	done    chan struct{}
}

// Stop kills this tgtd (its process group) as a crash would and waits up
// to 10 s for it to exit, so a test can make a target vanish mid-run.
// The cleanup registered by Start still runs and tolerates the dead daemon.
func (tt *Target) Stop() {
	_ = syscall.Kill(-tt.pid, syscall.SIGKILL)
	select {
	case <-tt.done:
	case <-time.After(10 * time.Second):
	}
}

// Opts configures Start; the zero value is a 64 MiB LUN without CHAP.
type Opts struct {
	Size               int64  // of a new backing file (default 64 MiB)
	User, Secret       string // one-way CHAP (target authenticates initiator)
	OutUser, OutSecret string // mutual CHAP (initiator authenticates target)
	Backing            string // existing file to serve; else a new one
	TID                int    // target id (default 1)
	Digests            bool   // allow CRC32C header and data digests
	IQN                string // default iqn.2026-11.org.tristore.test:tgt
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func tgtadm(ctx context.Context, ctl string, args ...string) error {
	a := append([]string{"-C", ctl, "--lld", "iscsi"}, args...)
	out, err := exec.CommandContext(ctx, "tgtadm", a...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("tgtadm %v: %v: %s", args, err, out)
	}
	return nil
}

// Start runs tgtd in the foreground on a free port and configures it.
// t.Cleanup deletes the target, stops the daemon and kills it by PID if
// it did not exit. It skips t when not root and needs tgtd and tgtadm
// (testutil.NeedCmd).
func Start(t testing.TB, o Opts) *Target {
	t.Helper()
	testutil.NeedRoot(t, "tgtd needs root")
	testutil.NeedCmd(t, "tgtd")
	testutil.NeedCmd(t, "tgtadm")
	if o.Size == 0 {
		o.Size = 64 << 20
	}
	if o.TID == 0 {
		o.TID = 1
	}
	if o.IQN == "" {
		o.IQN = "iqn.2026-11.org.tristore.test:tgt"
	}
	port := freePort(t)
	tt := &Target{Portal: fmt.Sprintf("127.0.0.1:%d", port), IQN: o.IQN}
	// -C names tgtd's control socket (max 32767); pick one nobody uses.
	for i := 0; i < 100; i++ {
		n := 1000 + (port+i*7919)%31000
		if _, err := os.Stat(fmt.Sprintf("/var/run/tgtd/socket.%d", n)); os.IsNotExist(err) {
			tt.ctl = strconv.Itoa(n)
			break
		}
	}
	if tt.ctl == "" {
		t.Fatal("no free tgtd control socket number")
	}
	tt.Backing = o.Backing
	if tt.Backing == "" {
		tt.Backing = filepath.Join(t.TempDir(), "tgt.img")
		f, err := os.Create(tt.Backing)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(o.Size); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "tgtd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("tgtd", "-f", "--iscsi", "portal="+tt.Portal, "-C", tt.ctl)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tt.pid, tt.done = cmd.Process.Pid, done
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = tgtadm(ctx, tt.ctl, "--op", "delete", "--mode", "target", "--tid", strconv.Itoa(o.TID), "--force")
		_ = exec.CommandContext(ctx, "tgtadm", "-C", tt.ctl, "--op", "delete", "--mode", "system").Run()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// wait for the control socket: bounded by ctx
	for {
		err = tgtadm(ctx, tt.ctl, "--op", "new", "--mode", "target", "--tid", strconv.Itoa(o.TID), "-T", o.IQN)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("tgtd did not come up: %v", err)
		case <-done:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("tgtd exited: %s", b)
		case <-time.After(100 * time.Millisecond):
		}
	}
	steps := [][]string{
		{"--op", "new", "--mode", "logicalunit", "--tid", strconv.Itoa(o.TID), "--lun", "1", "-b", tt.Backing, "--bstype", "rdwr"},
		{"--op", "bind", "--mode", "target", "--tid", strconv.Itoa(o.TID), "-I", "ALL"},
	}
	if o.User != "" {
		steps = append(steps,
			[]string{"--op", "new", "--mode", "account", "--user", o.User, "--password", o.Secret},
			[]string{"--op", "bind", "--mode", "account", "--tid", strconv.Itoa(o.TID), "--user", o.User})
	}
	if o.OutUser != "" {
		steps = append(steps,
			[]string{"--op", "new", "--mode", "account", "--user", o.OutUser, "--password", o.OutSecret},
			[]string{"--op", "bind", "--mode", "account", "--tid", strconv.Itoa(o.TID), "--user", o.OutUser, "--outgoing"})
	}
	if o.Digests {
		for _, k := range []string{"HeaderDigest", "DataDigest"} {
			steps = append(steps, []string{"--op", "update", "--mode", "target", "--tid", strconv.Itoa(o.TID), "-n", k, "-v", "CRC32C,None"})
		}
	}
	for _, s := range steps {
		if err := tgtadm(ctx, tt.ctl, s...); err != nil {
			t.Fatal(err)
		}
	}
	// If the port was taken meanwhile, tgtd falls back to its default
	// portal (every address, port 3260): make sure it serves ours.
	dcfg := iscsi.Config{Portal: tt.Portal}
	if o.User != "" {
		dcfg.CHAP = proto.CHAPCredentials{User: o.User, Secret: o.Secret}
	}
	ts, err := iscsi.Discover(ctx, dcfg)
	if err != nil || len(ts) != 1 || ts[0].Name != o.IQN {
		t.Fatalf("tgtd is not serving %s on %s (port taken?): %v %v", o.IQN, tt.Portal, ts, err)
	}
	return tt
}

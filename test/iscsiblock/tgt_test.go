package iscsiblock

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

// tgtTarget is a running tgtd (the peer userspace target) with one target
// and one LUN backed by a file, listening on 127.0.0.1 only.
type tgtTarget struct {
	Portal  string // host:port
	IQN     string
	Backing string
	ctl     string // tgtd control port (-C), names its unix socket
}

type tgtOpts struct {
	size               int64
	user, secret       string // one-way CHAP (target authenticates initiator)
	outUser, outSecret string // mutual CHAP (initiator authenticates target)
	backing            string // existing file to serve; else a new one
	tid                int
	digests            bool // allow CRC32C header and data digests
	iqn                string
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

// startTgt runs tgtd in the foreground on a free port and configures it.
// t.Cleanup deletes the target, stops the daemon and kills it by PID if
// it did not exit.
func startTgt(t testing.TB, o tgtOpts) *tgtTarget {
	t.Helper()
	testutil.NeedRoot(t, "tgtd needs root")
	testutil.NeedCmd(t, "tgtd")
	testutil.NeedCmd(t, "tgtadm")
	if o.size == 0 {
		o.size = 64 << 20
	}
	if o.tid == 0 {
		o.tid = 1
	}
	if o.iqn == "" {
		o.iqn = "iqn.2026-11.org.tristore.test:tgt"
	}
	port := freePort(t)
	tt := &tgtTarget{Portal: fmt.Sprintf("127.0.0.1:%d", port), IQN: o.iqn}
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
	tt.Backing = o.backing
	if tt.Backing == "" {
		tt.Backing = filepath.Join(t.TempDir(), "tgt.img")
		f, err := os.Create(tt.Backing)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(o.size); err != nil {
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
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = tgtadm(ctx, tt.ctl, "--op", "delete", "--mode", "target", "--tid", strconv.Itoa(o.tid), "--force")
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
		err = tgtadm(ctx, tt.ctl, "--op", "new", "--mode", "target", "--tid", strconv.Itoa(o.tid), "-T", o.iqn)
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
		{"--op", "new", "--mode", "logicalunit", "--tid", strconv.Itoa(o.tid), "--lun", "1", "-b", tt.Backing, "--bstype", "rdwr"},
		{"--op", "bind", "--mode", "target", "--tid", strconv.Itoa(o.tid), "-I", "ALL"},
	}
	if o.user != "" {
		steps = append(steps,
			[]string{"--op", "new", "--mode", "account", "--user", o.user, "--password", o.secret},
			[]string{"--op", "bind", "--mode", "account", "--tid", strconv.Itoa(o.tid), "--user", o.user})
	}
	if o.outUser != "" {
		steps = append(steps,
			[]string{"--op", "new", "--mode", "account", "--user", o.outUser, "--password", o.outSecret},
			[]string{"--op", "bind", "--mode", "account", "--tid", strconv.Itoa(o.tid), "--user", o.outUser, "--outgoing"})
	}
	if o.digests {
		for _, k := range []string{"HeaderDigest", "DataDigest"} {
			steps = append(steps, []string{"--op", "update", "--mode", "target", "--tid", strconv.Itoa(o.tid), "-n", k, "-v", "CRC32C,None"})
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
	if o.user != "" {
		dcfg.CHAP = proto.CHAPCredentials{User: o.user, Secret: o.secret}
	}
	ts, err := iscsi.Discover(ctx, dcfg)
	if err != nil || len(ts) != 1 || ts[0].Name != o.iqn {
		t.Fatalf("tgtd is not serving %s on %s (port taken?): %v %v", o.iqn, tt.Portal, ts, err)
	}
	return tt
}

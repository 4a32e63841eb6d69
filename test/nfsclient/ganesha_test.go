package nfsclient

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/tristore/tristore/internal/testutil"
)

// ganesha is an nfs-ganesha server (VFS FSAL) running in a private network
// namespace that the test created. Why a namespace: ganesha needs rpcbind,
// and rpcbind listens on every address of the host; inside its own namespace
// (and its own mount namespace with a private /run and /var/lib/nfs, so the
// rpcbind unix socket and ganesha's recovery state are not shared with
// anything else on the machine) neither can disturb other tests.
type ganesha struct {
	NS      string // network namespace name
	Export  string // exported directory (also the MOUNT path for NFSv3)
	NFSAddr string // 127.0.0.1:2049 inside NS
	MntAddr string // 127.0.0.1:20048 inside NS
	Log     string
}

var nsSeq atomic.Int64

// startGanesha starts ganesha exporting a fresh directory under base (a
// t.TempDir() if base is ""). Everything is torn down in t.Cleanup.
func startGanesha(t testing.TB, base string) *ganesha {
	t.Helper()
	testutil.NeedRoot(t, "nfs-ganesha and its network namespace need root")
	gbin := testutil.NeedCmd(t, "ganesha.nfsd")
	testutil.NeedCmd(t, "rpcbind")
	testutil.NeedCmd(t, "ip")
	testutil.NeedCmd(t, "unshare")
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so"); err != nil {
		if matches, _ := filepath.Glob("/usr/lib/*/ganesha/libfsalvfs.so"); len(matches) == 0 {
			testutil.Missing(t, "nfs-ganesha-vfs (libfsalvfs.so) is not installed (scripts/deps.sh installs it)")
		}
	}
	if base == "" {
		base = t.TempDir()
	}
	work, err := os.MkdirTemp(base, "ganesha-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	g := &ganesha{
		NS:      fmt.Sprintf("tsnfsc-%d-%d", os.Getpid(), nsSeq.Add(1)),
		Export:  filepath.Join(work, "export"),
		NFSAddr: "127.0.0.1:2049",
		MntAddr: "127.0.0.1:20048",
		Log:     filepath.Join(work, "ganesha.log"),
	}
	if err := os.MkdirAll(g.Export, 0o777); err != nil {
		t.Fatal(err)
	}
	// Bind_addr is left out on purpose: ganesha resolves it with
	// getaddrinfo(AI_ADDRCONFIG), which fails in a namespace that only has
	// lo. The namespace is private, so listening on all of it is fine.
	conf := fmt.Sprintf(`NFS_CORE_PARAM {
	NFS_Port = 2049; MNT_Port = 20048; NLM_Port = 32803; Rquota_Port = 875;
	Protocols = 3,4; Enable_UDP = false; Enable_NLM = false; Enable_RQUOTA = false;
}
NFSV4 { Graceless = true; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
	Export_Id = 1; Path = %s; Pseudo = /export;
	Access_Type = RW; Squash = No_Root_Squash; Protocols = 3,4; Transports = TCP; SecType = sys;
	FSAL { Name = VFS; }
}
`, g.Export)
	confPath := filepath.Join(work, "ganesha.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Run(t, 30*time.Second, "ip", "netns", "add", g.NS)
	t.Cleanup(func() { deleteNS(t, g.NS) })
	testutil.Run(t, 30*time.Second, "ip", "netns", "exec", g.NS, "ip", "link", "set", "lo", "up")
	rpcPid := filepath.Join(work, "rpcbind.pid")
	script := fmt.Sprintf(`set -e
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var/lib/nfs
mkdir -p /var/lib/nfs/ganesha /run/ganesha
rpcbind -f & echo $! > %[1]s
for i in $(seq 1 100); do [ -S /run/rpcbind.sock ] && break; sleep 0.1; done
exec %[2]s -F -f %[3]s -L %[4]s -p %[5]s
`, rpcPid, gbin, confPath, g.Log, filepath.Join(work, "ganesha.pid"))
	cmd := exec.Command("ip", "netns", "exec", g.NS, "unshare", "--mount", "--propagation", "private", "bash", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.Create(filepath.Join(work, "ganesha.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting ganesha: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(exited) }()
	t.Cleanup(func() {
		// The process group holds exactly the processes this test started
		// (the shell exec'ed into ganesha.nfsd, and rpcbind).
		pgid := cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
		}
		syscall.Kill(-pgid, syscall.SIGKILL) // rpcbind, if it outlived ganesha
	})
	// Ready when both ports accept connections inside the namespace.
	deadline := time.Now().Add(60 * time.Second)
	dial := g.Dialer()
	for _, a := range []string{g.NFSAddr, g.MntAddr} {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c, err := dial(ctx, "tcp", a)
			cancel()
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				b, _ := os.ReadFile(g.Log)
				o, _ := os.ReadFile(filepath.Join(work, "ganesha.out"))
				t.Fatalf("ganesha exited early: %s\n%s", o, tail(string(b), 3000))
			default:
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(g.Log)
				t.Fatalf("ganesha not listening on %s after 60s: %v\n%s", a, err, tail(string(b), 3000))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return g
}

// Dialer returns a dial function whose sockets live in the ganesha
// namespace: the dialing goroutine locks its OS thread, switches the thread
// into the namespace for the socket() and connect() calls and switches back.
// A socket stays in the namespace it was created in, so the connection
// works from any goroutine afterwards.
func (g *ganesha) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return nsDialer(g.NS)
}

func nsDialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			orig, err := netns.Get()
			if err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, err}
				return
			}
			defer orig.Close()
			target, err := netns.GetFromName(ns)
			if err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, fmt.Errorf("netns %s: %w", ns, err)}
				return
			}
			defer target.Close()
			if err := netns.Set(target); err != nil {
				runtime.UnlockOSThread()
				ch <- result{nil, fmt.Errorf("setns %s: %w", ns, err)}
				return
			}
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			// If switching back fails the thread stays locked and Go
			// discards it when this goroutine exits.
			if netns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// deleteNS kills whatever is left in the namespace (only processes this
// test started can be there) and deletes it.
func deleteNS(t testing.TB, ns string) {
	for i := 0; i < 50; i++ {
		out, _ := testutil.TryRun(30*time.Second, "ip", "netns", "pids", ns)
		pids := strings.Fields(out)
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			var pid int
			if _, err := fmt.Sscan(p, &pid); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := testutil.TryRun(30*time.Second, "ip", "netns", "del", ns); err != nil {
		t.Logf("%v: %s", err, out)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

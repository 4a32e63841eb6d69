package netemlink

import (
	"bufio"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// TestServeAcrossLink runs `tristore netem serve`, reaches the server's
// /healthz from the client namespace across the link, then stops it with
// SIGTERM and checks that the server and the namespaces are gone.
func TestServeAcrossLink(t *testing.T) {
	needLink(t)
	curl := testutil.NeedCmd(t, "curl")
	name := linkName(t)
	data := t.TempDir()
	cmd := exec.Command(binPath, "netem", "serve", "--name", name, "--delay", "5ms", "--",
		"--data", data, "--nfs-addr", "off", "--iscsi-addr", "off")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	}()
	lines := make(chan string, 100)
	var out strings.Builder // read only after scanned is closed
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	admin := regexp.MustCompile(`^\s+admin\s+(\S+)`)
	var addr string
	deadline := time.After(60 * time.Second)
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				<-scanned
				t.Fatalf("netem serve exited:\n%s", out.String())
			}
			if m := admin.FindStringSubmatch(l); m != nil {
				addr = m[1]
			}
			ready = strings.HasPrefix(l, "run clients with")
		case <-deadline:
			t.Fatal("netem serve not ready within 60s")
		}
	}
	if !strings.HasPrefix(addr, "192.0.2.2:") {
		t.Fatalf("admin address %q not on the server side", addr)
	}
	res, err := exec.Command("ip", "netns", "exec", name+"-c", curl, "-s", "-m", "20", "http://"+addr+"/healthz").CombinedOutput()
	if err != nil || strings.TrimSpace(string(res)) != "ok" {
		t.Fatalf("healthz across the link: %v %q", err, res)
	}
	if err := cmd.Process.Signal(syscallSIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("netem serve ignored SIGTERM")
	}
	<-scanned
	waitGone(t, name, data)
	if !strings.Contains(out.String(), "9001") {
		t.Errorf("no per-port counters printed:\n%s", out.String())
	}
}

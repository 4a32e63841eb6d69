package netemlink

import (
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
	p := startTristore(t, "netem", "serve", "--name", name, "--delay", "5ms", "--",
		"--data", data, "--nfs-addr", "off", "--iscsi-addr", "off")
	admin := regexp.MustCompile(`^\s+admin\s+(\S+)`)
	var addr string
	p.waitLine(t, 60*time.Second, func(l string) bool {
		if m := admin.FindStringSubmatch(l); m != nil {
			addr = m[1]
		}
		return strings.HasPrefix(l, "run clients with")
	})
	if !strings.HasPrefix(addr, "192.0.2.2:") {
		t.Fatalf("admin address %q not on the server side", addr)
	}
	res, err := exec.Command("ip", "netns", "exec", name+"-c", curl, "-s", "-m", "20", "http://"+addr+"/healthz").CombinedOutput()
	if err != nil || strings.TrimSpace(string(res)) != "ok" {
		t.Fatalf("healthz across the link: %v %q", err, res)
	}
	p.signal(t, syscallSIGTERM)
	waitGone(t, name, data)
	if !strings.Contains(p.output(), "9001") {
		t.Errorf("no per-port counters printed:\n%s", p.output())
	}
}

package netemlink

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartRemovesLeftoversOfKilledRun: a SIGKILLed `netem run` cannot
// remove its namespaces (ts-<pid>-<rand>-c/-s); the next link start does,
// because their pid is dead, and keeps those of a live process and names
// that carry no pid.
func TestStartRemovesLeftoversOfKilledRun(t *testing.T) {
	needLink(t)
	marker := "30.5" + strconv.Itoa(os.Getpid()) // sleep 30.5<pid>: about 30 s
	p := startTristore(t, "netem", "run", "--", "sleep", marker)
	dead := fmt.Sprintf("ts-%d-", p.cmd.Process.Pid)
	// Namespaces this test makes by hand: one of a live process (this
	// test's own pid) and one whose name carries no pid.
	live := fmt.Sprintf("ts-%d-keep-c", os.Getpid())
	nopid := fmt.Sprintf("ts-nopid%d-c", os.Getpid())
	t.Cleanup(func() {
		killMarked(marker)
		for _, n := range append(namespacesWith(dead), live, nopid) {
			exec.Command("ip", "netns", "del", n).Run()
		}
	})
	for _, n := range []string{live, nopid} {
		if out, err := exec.Command("ip", "netns", "add", n).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v %s", n, err, out)
		}
	}
	up := false
	for i := 0; i < 400 && !up; i++ {
		up = len(namespacesWith(dead)) == 2 && markedPIDs(marker) != nil
		if !up {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !up {
		t.Fatalf("link %s* and its child never came up (namespaces %v):\n%s", dead, namespacesWith(dead), p.output())
	}
	p.cmd.Process.Kill()
	// The orphaned child keeps the output pipe open; stop it so the
	// killed process is reaped promptly.
	killMarked(marker)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("SIGKILLed netem run not reaped:\n%s", p.output())
	}
	if left := namespacesWith(dead); len(left) != 2 {
		t.Fatalf("after SIGKILL the namespaces %s* should still be there, found %v", dead, left)
	}

	name := linkName(t)
	out, code := run(t, "netem", "run", "--name", name, "--", "true")
	if code != 0 {
		t.Fatalf("second link: exit %d:\n%s", code, out)
	}
	if left := namespacesWith(dead); len(left) != 0 {
		t.Errorf("namespaces of the killed run survived the next link start: %v\n%s", left, out)
	}
	for _, n := range []string{live, nopid} {
		if _, err := os.Stat(filepath.Join("/run/netns", n)); err != nil {
			t.Errorf("namespace %s (not of a dead process) was removed: %v", n, err)
		}
	}
	waitGone(t, name, "")
}

// namespacesWith lists the named namespaces that start with prefix.
func namespacesWith(prefix string) []string {
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// markedPIDs lists processes whose command line contains marker (and not
// "netem", so the tristore process itself is not among them).
func markedPIDs(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) && !bytes.Contains(b, []byte("netem")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killMarked SIGKILLs the processes markedPIDs finds.
func killMarked(marker string) {
	for _, pid := range markedPIDs(marker) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

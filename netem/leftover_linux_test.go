package netem

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOwnerRules checks which ts-* names a link start may remove on its
// own: only those whose pid is gone (exited, or a zombie not yet reaped),
// never those of a live process nor names without a pid.
func TestOwnerRules(t *testing.T) {
	self := os.Getpid()
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	// Wait (bounded) until the child has exited but is not reaped yet.
	stat := "/proc/" + strconv.Itoa(zombie.Process.Pid) + "/stat"
	isZombie := false
	for i := 0; i < 200 && !isZombie; i++ {
		b, err := os.ReadFile(stat)
		isZombie = err == nil && strings.Contains(string(b), ") Z ")
		if !isZombie {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !isZombie {
		t.Fatal("child never became a zombie")
	}
	for _, c := range []struct {
		name       string
		dead, live bool
	}{
		{"ts-" + strconv.Itoa(self) + "-ab12cd-c", false, true},
		{"ts-1-x-s", false, true},
		{"ts-4194304-ab12cd-c", true, false}, // above pid_max: never ran
		{"ts-" + strconv.Itoa(zombie.Process.Pid) + "-ab12cd-s", true, false},
		{"ts-bench-c", false, false}, // a user's --name: no pid, no owner
		{"ts-c", false, false},
		{"ts-0-x-c", false, false},
	} {
		if got := ownerDead(c.name); got != c.dead {
			t.Errorf("ownerDead(%q) = %v, want %v", c.name, got, c.dead)
		}
		if got := ownerAlive(c.name); got != c.live {
			t.Errorf("ownerAlive(%q) = %v, want %v", c.name, got, c.live)
		}
	}
}

package bench

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/testutil"
)

// TestClientMainLeavesRealtime: a clients-suite client started by a
// process that runs a netns link (SCHED_FIFO, inherited) puts itself back
// on SCHED_OTHER before anything else, so busy clients cannot starve the
// link's forwarder.
func TestClientMainLeavesRealtime(t *testing.T) {
	testutil.NeedRoot(t, "SCHED_FIFO")
	setAll := func(policy, prio uint32) {
		ents, _ := os.ReadDir("/proc/self/task")
		for _, e := range ents {
			tid, _ := strconv.Atoi(e.Name())
			a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy, Priority: prio}
			if err := unix.SchedSetAttr(tid, &a, 0); err != nil && err != unix.ESRCH {
				t.Fatal(err)
			}
		}
	}
	setAll(unix.SCHED_FIFO, 1)
	defer setAll(unix.SCHED_NORMAL, 0)
	err := ClientMain(context.Background(), strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no job") {
		t.Fatalf("ClientMain without a job: %v", err)
	}
	ents, _ := os.ReadDir("/proc/self/task")
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		a, err := unix.SchedGetAttr(tid, 0)
		if err == nil && a.Policy != unix.SCHED_NORMAL {
			t.Fatalf("thread %d still has policy %d after ClientMain", tid, a.Policy)
		}
	}
}

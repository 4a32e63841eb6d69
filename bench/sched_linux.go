package bench

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// normalScheduling puts every thread of this process on SCHED_OTHER. A
// process started by one that runs a netns link inherits the link's
// SCHED_FIFO (netem makes its whole process realtime while a link runs):
// the clients suite's client processes then ran realtime, and two of them
// busy in Go's scheduler starved the link's forwarder and everything else
// on a 2-core machine (a run hung with both clients at 95 % CPU). Two
// passes catch a thread created during the first.
func normalScheduling() error {
	var first error
	for pass := 0; pass < 2; pass++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
			if err := unix.SchedSetAttr(tid, &a, 0); err != nil && err != unix.ESRCH && first == nil {
				first = err
			}
		}
	}
	return first
}

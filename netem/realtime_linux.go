package netem

import (
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Why realtime: the forwarder's timing is only as good as the time it
// takes the OS to run it after a packet arrives or a timer fires. On a
// shared 2-core machine with a load of 15+, a normal (or even nice -20)
// process waits several milliseconds for a CPU, which adds that to the RTT
// and turns a clean 50 Mbit/s link into a lossy one. Under SCHED_FIFO at
// the lowest priority the same machine keeps RTTs within ~0.3 ms. A
// userspace forwarder cannot make only "its" threads realtime: Go code
// needs a P, which any of the process's threads may hold, so the whole
// process becomes SCHED_FIFO priority 1 while a link runs (the kernel's RT
// throttling still leaves 5 % of each CPU to others), and returns to
// SCHED_OTHER when the last link closes. Children started with Command
// are reset to SCHED_OTHER (chrt -o 0) so a busy server does not become
// realtime too.

var (
	rtMu    sync.Mutex
	rtUsers int
)

// enterRealtime makes every thread of the process SCHED_FIFO (priority 1).
// It returns false (and changes nothing) if the kernel refuses.
func enterRealtime() bool {
	rtMu.Lock()
	defer rtMu.Unlock()
	if rtUsers == 0 {
		if err := setAllThreads(&unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}); err != nil {
			_ = setAllThreads(&unix.SchedAttr{Policy: unix.SCHED_NORMAL})
			return false
		}
	}
	rtUsers++
	return true
}

// leaveRealtime undoes one enterRealtime.
func leaveRealtime() {
	rtMu.Lock()
	defer rtMu.Unlock()
	rtUsers--
	if rtUsers == 0 {
		_ = setAllThreads(&unix.SchedAttr{Policy: unix.SCHED_NORMAL})
	}
}

// setAllThreads applies attr to every thread; new threads inherit the
// policy of the thread that creates them, so two passes catch a thread
// created during the first.
func setAllThreads(attr *unix.SchedAttr) error {
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
			a := *attr
			if err := unix.SchedSetAttr(tid, &a, 0); err != nil && err != unix.ESRCH {
				return err
			}
		}
	}
	return nil
}

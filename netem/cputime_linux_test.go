package netem

import (
	"syscall"
	"time"
)

// cpuTime is this process's user+system CPU time.
type cpuTime struct{ ru syscall.Rusage }

func (c *cpuTime) read() { _ = syscall.Getrusage(syscall.RUSAGE_SELF, &c.ru) }
func (c *cpuTime) total() time.Duration {
	return time.Duration(c.ru.Utime.Nano() + c.ru.Stime.Nano())
}

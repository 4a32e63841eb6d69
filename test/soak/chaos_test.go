package soak

import (
	"context"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// chaos kills and stalls the server. Outages stay short (a kill is
// followed by a restart after at most maxPause; a stall lasts at most
// maxStop) so that errors they cause can be told apart from the known
// defects of issue 15, which need outages of 6 s (NFS soft mount) and
// 30 s (iSCSI hang).
type chaos struct {
	srv      *server
	rng      *rand.Rand
	kinds    []string // "kill9", "stop"
	every    [2]time.Duration
	maxPause time.Duration // between SIGKILL and the restart
	maxStop  time.Duration // SIGSTOP to SIGCONT
	rec      *recorder

	mu     sync.Mutex
	events []outage
}

func (c *chaos) outages() []outage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]outage(nil), c.events...)
}

func (c *chaos) begin(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, outage{Kind: kind, Start: time.Now()})
	return len(c.events) - 1
}

func (c *chaos) end(i int) {
	c.mu.Lock()
	c.events[i].End = time.Now()
	o := c.events[i]
	c.mu.Unlock()
	c.rec.logf("chaos: %s (server pid %d)", o, c.srv.pid())
}

func (c *chaos) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(c.rng.Int64N(int64(hi-lo)))
}

// run injects one fault every `every` until ctx ends or maxEvents have
// happened. A server that will not come back is a finding; it stops the
// chaos (the workloads then see a dead server and the soak fails).
func (c *chaos) run(ctx context.Context, maxEvents int) {
	if len(c.kinds) == 0 {
		return
	}
	for n := 0; n < maxEvents; n++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.between(c.every[0], c.every[1])):
		}
		switch c.kinds[c.rng.IntN(len(c.kinds))] {
		case "kill9":
			i := c.begin("kill9")
			if err := c.srv.kill9(); err != nil {
				c.rec.bad("chaos: %v", err)
				c.end(i)
				return
			}
			time.Sleep(c.between(200*time.Millisecond, c.maxPause))
			var err error
			for try := 0; try < 3; try++ {
				if _, err = c.srv.start(60 * time.Second); err == nil {
					break
				}
				c.rec.note("restart %d after kill -9 failed: %v", try+1, err)
				c.srv.kill9()
			}
			c.end(i)
			if err != nil {
				c.rec.bad("server did not restart after kill -9: %v", err)
				return
			}
		case "stop":
			i := c.begin("stop")
			if err := c.srv.signal(syscall.SIGSTOP); err != nil {
				c.rec.bad("chaos: SIGSTOP: %v", err)
				c.end(i)
				return
			}
			time.Sleep(c.between(time.Second, c.maxStop))
			if err := c.srv.signal(syscall.SIGCONT); err != nil {
				c.rec.bad("chaos: SIGCONT: %v", err)
			}
			c.end(i)
		}
	}
}

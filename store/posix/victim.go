package posix

import (
	"sync"

	"golang.org/x/sys/unix"
)

// The replaced file of an overwriting PUT is freed off the request's path.
//
// A rename over an existing object drops the old file's last name; when
// nothing else holds it, the kernel frees its inode and blocks inside the
// rename, before the PUT can answer. On the bench disk (ext4 without a
// journal, mounted with discard) that was about 0.9 ms of an overwriting
// 4 KiB PUT's rename against 0.1 ms for a new key (strace -T, one stream;
// docs/bench/profiles/s3-put-4k-p1.strace-T.txt). So publishMode first
// opens the old file with O_PATH (a reference, no read access, no lock),
// renames, makes the rename durable, answers, and the reference is closed
// afterwards by a background drainer, which is where the kernel then frees
// it. Nothing the PUT promises depends on when the old file is freed: the
// new file and its name are durable before the PUT returns, as before.
// An O_PATH descriptor takes no OFD lock, so the in-use locks of served
// volumes (store/inuse) are untouched.

// maxVictims bounds the descriptors waiting to be closed; with more, the
// next one is closed at once (the old behaviour: freed on the PUT's path).
const maxVictims = 256

var victimQ struct {
	mu      sync.Mutex
	fds     []int
	running bool
}

// hookVictimClose, set only by tests, runs in the drainer just before it
// closes a held descriptor.
var hookVictimClose func(fd int)

// holdVictim returns an O_PATH descriptor of the file at target, or -1
// when there is none (a new key) or it cannot be opened.
func holdVictim(target string) int {
	fd, err := openat2(target, unix.O_PATH, 0)
	if err != nil {
		return -1
	}
	return fd
}

// releaseVictim hands fd (from holdVictim; -1 is nothing) to the drainer.
func releaseVictim(fd int) {
	if fd < 0 {
		return
	}
	q := &victimQ
	q.mu.Lock()
	if len(q.fds) >= maxVictims {
		q.mu.Unlock()
		unix.Close(fd)
		return
	}
	q.fds = append(q.fds, fd)
	if !q.running {
		q.running = true
		go drainVictims()
	}
	q.mu.Unlock()
}

// drainVictims closes the queued descriptors and exits when none is left
// (no goroutine stays behind while the server is idle).
func drainVictims() {
	q := &victimQ
	for {
		q.mu.Lock()
		if len(q.fds) == 0 {
			q.running = false
			q.fds = nil
			q.mu.Unlock()
			return
		}
		fd := q.fds[0]
		q.fds = q.fds[1:]
		q.mu.Unlock()
		if hookVictimClose != nil {
			hookVictimClose(fd)
		}
		unix.Close(fd)
	}
}

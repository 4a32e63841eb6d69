package posix

import (
	"errors"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/fsjournal"
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
//
// On a file system without a journal (internal/fsjournal) the rename alone
// is not safe: it drops the old inode's link count to 0 in the inode
// table block at once, and any fsync of a neighbouring inode (another
// PUT's file, 16 inodes share a block) can write that to disk before the
// directory fsync writes the new entry. After a power cut the old name is
// then still on disk, pointing at a deleted inode, and e2fsck clears it:
// the key is gone although the PUT was still in flight (old or new
// content were allowed; test/powerloss TestKernelScenarios/s3 saw it).
// So there the old file first gets a second name in DATA/.tristore/tmp
// (a link to the held descriptor): the rename takes its count from 2 to
// 1, never 0. Once the rename is durable the drainer removes that name,
// fsyncs the tmp directory (the name is gone for good, so the inode
// cannot be named twice once it is reused), writes the inode as deleted
// (fsjournal.Retire: after a power cut it does not claim blocks or show as
// a live file under a reused inode number) and closes it. A name left by
// a crash is removed with the rest of the tmp directory at the next start.

// maxVictims bounds the descriptors waiting to be closed; with more, the
// next one is freed at once (the old behaviour: freed on the PUT's path).
const maxVictims = 256

var victimQ struct {
	mu      sync.Mutex
	vs      []victim
	running bool
}

// victim is a held replaced file: fd (-1: none), keep its second name
// ("" when it has none), retire: the rename that replaced it is durable
// (then, without a journal, it is written as deleted before the close;
// before that point it would make a name durable whose inode is deleted).
type victim struct {
	fd        int
	keep      string
	retire    bool
	noJournal bool
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

// victimOf holds the file at target (holdVictim) and, when noJournal,
// links it as a new temp name in tmpDir() (see above); a file that cannot
// be linked (a directory, another file system) is only held.
func victimOf(target string, noJournal bool, tmpDir func() string, tempName func() string) victim {
	v := victim{fd: holdVictim(target), noJournal: noJournal}
	if v.fd < 0 || !noJournal {
		return v
	}
	keep := filepath.Join(tmpDir(), tempName())
	if err := fsjournal.LinkFd(v.fd, keep); err == nil {
		v.keep = keep
	}
	return v
}

// releaseVictim hands v to the drainer; durable says the rename that
// replaced it is durable, renamed that it was done. A victim renamed over
// but not made durable (an fsync failed) keeps its second name until the
// next start: removing it could leave its old name on disk pointing at a
// deleted inode.
func releaseVictim(v victim, durable, renamed bool) {
	if v.fd < 0 {
		return
	}
	v.retire = durable && v.noJournal
	if renamed && !durable {
		v.keep = ""
	}
	q := &victimQ
	q.mu.Lock()
	if len(q.vs) >= maxVictims {
		q.mu.Unlock()
		freeVictims([]victim{v})
		return
	}
	q.vs = append(q.vs, v)
	if !q.running {
		q.running = true
		go drainVictims()
	}
	q.mu.Unlock()
}

// drainVictims frees the queued victims, in batches of what is queued,
// and exits when none is left (no goroutine stays behind while the server
// is idle).
func drainVictims() {
	q := &victimQ
	for {
		q.mu.Lock()
		if len(q.vs) == 0 {
			q.running = false
			q.vs = nil
			q.mu.Unlock()
			return
		}
		batch := q.vs
		q.vs = nil
		q.mu.Unlock()
		freeVictims(batch)
	}
}

// freeVictims removes the victims' second names, fsyncs the directories
// that held them (one fsync per directory for the batch), retires the
// inodes whose replacement is durable and closes them.
func freeVictims(vs []victim) {
	dirs := map[string]bool{}
	for _, v := range vs {
		if v.keep == "" {
			continue
		}
		if err := unix.Unlink(v.keep); err == nil || errors.Is(err, unix.ENOENT) {
			dirs[filepath.Dir(v.keep)] = true
		}
	}
	for d := range dirs {
		fsyncDir(d) // best effort: a name left behind goes at the next start
	}
	for _, v := range vs {
		if hookVictimClose != nil {
			hookVictimClose(v.fd)
		}
		if v.retire {
			retire(v.fd)
		}
		unix.Close(v.fd)
	}
}

// Package newdir keeps the directories this process made whose name may
// not be durable yet, for every writer of the data tree (the store's S3
// path in store/posix, NFS and FUSE in vfs).
//
// A writer that makes a directory fsyncs the directory's parent before it
// replies. But a second writer may find that directory, put its own file
// in it, fsync the file and the directory, and reply while the first
// writer's fsync of the parent has not happened yet: a power cut then
// loses the directory, and with it the second writer's acknowledged file.
// A directory that exists is not yet a durable one. (CI caught this once:
// TestS3PowerLossSidecar lost an acknowledged PUT in a hidden area a
// concurrent PUT had just made; store/posix's
// TestNewDirDurableForConcurrentPut makes it happen every time, and vfs's
// TestNewDirDurableAcrossViews across S3 and NFS.) The two writers may be
// different views: an S3 PUT making a prefix while an NFS CREATE puts a
// file in it.
//
// So every directory a writer makes is registered (Mkdir, or Register
// around the writer's own mkdir) from just before its mkdir until an
// fsync of its parent that began after the mkdir has ended (SettleBegin
// before such an fsync, SettleEnd after it). And before a writer replies
// for a change in a directory, it also fsyncs UnsettledParents of that
// directory. Once the directories have settled (the common case) that
// check is one atomic load.
//
// Paths are absolute and clean; one process, one registry.
package newdir

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

var reg = struct {
	mu  sync.Mutex
	m   map[string]*newDir
	n   atomic.Int64 // len(m), read without the lock
	seq uint64       // counts successful mkdirs
}{m: map[string]*newDir{}}

// newDir is one registered directory; guarded by reg.mu.
type newDir struct {
	refs int    // mkdirs of this path under way
	made uint64 // seq of its last successful mkdir not yet settled; 0: none
}

// Mkdir is os.Mkdir, registering dir (see the package comment).
func Mkdir(dir string, perm os.FileMode) error {
	done := Register(dir)
	err := os.Mkdir(dir, perm)
	done(err == nil)
	return err
}

// Register is for a writer that makes dir its own way (mkdirat on a
// descriptor): call it just before the mkdir, and the function it returns
// right after, with whether the mkdir succeeded.
func Register(dir string) (made func(ok bool)) {
	s := &reg
	s.mu.Lock()
	d := s.m[dir]
	if d == nil {
		d = &newDir{}
		s.m[dir] = d
		s.n.Add(1)
	}
	d.refs++
	s.mu.Unlock()
	return func(ok bool) {
		s.mu.Lock()
		d.refs--
		if ok {
			s.seq++
			d.made = s.seq
		}
		if d.refs == 0 && d.made == 0 {
			delete(s.m, dir)
			s.n.Add(-1)
		}
		s.mu.Unlock()
	}
}

// Pending reports whether any directory is registered (one atomic load):
// when false, UnsettledParents is empty for every path.
func Pending() bool { return reg.n.Load() != 0 }

// Settling is a registered directory an fsync of its parent will settle.
type Settling struct {
	dir  string
	made uint64
}

// SettleBegin lists the registered directories whose name lives in
// parent and whose mkdir has ended: an fsync of parent beginning now
// makes their names durable.
func SettleBegin(parent string) []Settling {
	s := &reg
	if s.n.Load() == 0 {
		return nil
	}
	var out []Settling
	s.mu.Lock()
	for dir, d := range s.m {
		if d.made != 0 && filepath.Dir(dir) == parent {
			out = append(out, Settling{dir, d.made})
		}
	}
	s.mu.Unlock()
	return out
}

// SettleEnd forgets the directories of SettleBegin after the fsync of
// their parent succeeded (unless one was made again since).
func SettleEnd(list []Settling) {
	if len(list) == 0 {
		return
	}
	s := &reg
	s.mu.Lock()
	for _, e := range list {
		d := s.m[e.dir]
		if d == nil || d.made != e.made {
			continue
		}
		d.made = 0
		if d.refs == 0 {
			delete(s.m, e.dir)
			s.n.Add(-1)
		}
	}
	s.mu.Unlock()
}

// HasUnsettledChild reports whether a registered directory's name lives
// in parent: whether an fsync of parent is still owed to one.
func HasUnsettledChild(parent string) bool {
	s := &reg
	if s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for dir := range s.m {
		if filepath.Dir(dir) == parent {
			return true
		}
	}
	return false
}

// UnsettledParents returns the parents of the registered directories on
// dir's path (dir itself included), innermost first: fsyncs of these,
// begun now, make the whole path durable (given that the directories
// already exist, which they do for a writer that has put a file in dir).
func UnsettledParents(dir string) []string {
	s := &reg
	if s.n.Load() == 0 {
		return nil
	}
	var out []string
	s.mu.Lock()
	for d := filepath.Clean(dir); ; {
		p := filepath.Dir(d)
		if p == d {
			break
		}
		if _, ok := s.m[d]; ok {
			out = append(out, p)
		}
		d = p
	}
	s.mu.Unlock()
	return out
}

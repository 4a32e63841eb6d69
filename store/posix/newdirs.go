package posix

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Directories this process made whose name may not be durable yet.
//
// A writer that makes a directory fsyncs the directory's parent before it
// replies. But a second writer may find that directory, put its own file
// in it, fsync the file and the directory, and reply while the first
// writer's fsync of the parent has not happened yet: a power cut then
// loses the directory, and with it the second writer's acknowledged file.
// A directory that exists is not yet a durable one. (CI caught this once:
// TestS3PowerLossSidecar lost an acknowledged PUT in a hidden area a
// concurrent PUT had just made; TestNewDirDurableForConcurrentPut makes it
// happen every time.)
//
// So every directory the store makes (mkdirNew) is registered from just
// before its mkdir until an fsync of its parent that began after the
// mkdir has ended (the group commit settles it, dirsync.go). And fsyncDir,
// which every writer calls for the directory it changed before it
// replies, also fsyncs the parent of every still-registered directory on
// that directory's path. Once the directories have settled (the common
// case) that check is one atomic load.
var newDirs = struct {
	mu  sync.Mutex
	m   map[string]*newDir
	n   atomic.Int64 // len(m), read without the lock
	seq uint64       // counts successful mkdirs
}{m: map[string]*newDir{}}

// newDir is one registered directory; guarded by newDirs.mu.
type newDir struct {
	refs int    // mkdirs of this path under way
	made uint64 // seq of its last successful mkdir not yet settled; 0: none
}

// mkdirNew is os.Mkdir for the store's tree, registering dir (above).
func mkdirNew(dir string, perm os.FileMode) error {
	s := &newDirs
	s.mu.Lock()
	d := s.m[dir]
	if d == nil {
		d = &newDir{}
		s.m[dir] = d
		s.n.Add(1)
	}
	d.refs++
	s.mu.Unlock()
	err := os.Mkdir(dir, perm)
	s.mu.Lock()
	d.refs--
	if err == nil {
		s.seq++
		d.made = s.seq
	}
	if d.refs == 0 && d.made == 0 {
		delete(s.m, dir)
		s.n.Add(-1)
	}
	s.mu.Unlock()
	return err
}

// settling is a registered directory an fsync of its parent will settle.
type settling struct {
	dir  string
	made uint64
}

// settleBegin lists the registered directories whose name lives in
// parent and whose mkdir has ended: an fsync of parent beginning now
// makes their names durable.
func settleBegin(parent string) []settling {
	s := &newDirs
	if s.n.Load() == 0 {
		return nil
	}
	var out []settling
	s.mu.Lock()
	for dir, d := range s.m {
		if d.made != 0 && filepath.Dir(dir) == parent {
			out = append(out, settling{dir, d.made})
		}
	}
	s.mu.Unlock()
	return out
}

// settleEnd forgets the directories of settleBegin after the fsync of
// their parent succeeded (unless one was made again since).
func settleEnd(list []settling) {
	if len(list) == 0 {
		return
	}
	s := &newDirs
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

// unsettledParents returns the parents of the registered directories on
// dir's path (dir itself included), innermost first: fsyncs of these,
// begun now, make the whole path durable (given that the directories
// already exist, which they do for a writer that has put a file in dir).
func unsettledParents(dir string) []string {
	s := &newDirs
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

package posix

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store/newdir"
)

// Group commit of directory fsyncs.
//
// A directory's fsync makes durable every entry change made in it before
// the fsync began. So concurrent callers that changed the same directory
// (PUTs renaming into one prefix, say) need not each fsync it: one fsync
// that begins after all of their changes covers them all. fsyncDir keeps,
// per directory path, at most one fsync running and one round waiting:
//
//   - with none running, the caller starts a round at once (it leads it);
//   - while one runs, the caller joins the next round, which will begin
//     only after the running one ends, so after the caller's change; a
//     caller never counts on an fsync that was already under way when it
//     arrived, since that one may have begun before its change;
//   - when a round ends, one of the next round's members leads it (opens
//     the directory afresh and fsyncs it) and every member gets its result.
//
// So each caller still returns only after an fsync of the directory (by
// path, opened after the caller arrived, as before) that began after the
// caller's change and ended without error; what changes is that N callers
// arriving during one fsync share the next one instead of making N.

// dirSyncs is the process's committer: directory path -> its group.
var dirSyncs = struct {
	mu     sync.Mutex
	groups map[string]*dirGroup
}{groups: map[string]*dirGroup{}}

// dirGroup is one directory's state; its fields are guarded by dirSyncs.mu.
type dirGroup struct {
	cond    *sync.Cond // signalled when a round ends
	running *dirRound  // the fsync under way, if any
	next    *dirRound  // the round new callers join, if any
	refs    int        // callers inside fsyncDir for this directory
}

type dirRound struct {
	done bool
	err  error
}

// Test hooks (export_test.go), nil in production: hookDirSyncJoin runs when
// a caller has joined a round (before it waits), hookDirFsync just before a
// round's fsync begins; the function it returns, just after the fsync ended.
var (
	hookDirSyncJoin func(dir string)
	hookDirFsync    func(dir string) (done func())
)

// fsyncDir makes a directory's entries (a rename, a new file) durable:
// it returns after an fsync of dir that began after the call (shared with
// concurrent callers, see above), and after fsyncs of the parents of any
// directory on dir's path that this process made and has not yet made
// durable (store/newdir), so the new entry cannot be lost with one of them.
func fsyncDir(dir string) error {
	if err := fsyncDirGroup(dir); err != nil {
		return err
	}
	for _, p := range newdir.UnsettledParents(dir) {
		if err := fsyncDirGroup(p); err != nil {
			return err
		}
	}
	return nil
}

// syncMade makes durable the directories a writer made (changed: their
// parents), after fsyncDir of the directory it wrote into: that call
// already fsynced the parents of every still-unsettled directory on its
// path, so only a parent that still owes an fsync to a new directory is
// fsynced here (one the writer made off that path: a plain path given up
// for the hidden area). Without this check a PUT making one new prefix
// fsynced its parent twice.
func syncMade(changed []string) error {
	for _, d := range changed {
		if !newdir.HasUnsettledChild(d) {
			continue
		}
		if err := fsyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// fsyncDirGroup is the group commit of one directory's fsync (above).
func fsyncDirGroup(dir string) error {
	s := &dirSyncs
	s.mu.Lock()
	g := s.groups[dir]
	if g == nil {
		g = &dirGroup{cond: sync.NewCond(&s.mu)}
		s.groups[dir] = g
	}
	g.refs++
	if g.next == nil {
		g.next = &dirRound{}
	}
	mine := g.next
	if hookDirSyncJoin != nil {
		hookDirSyncJoin(dir)
	}
	for !mine.done {
		if g.running == nil && g.next == mine {
			// Lead: the round begins now, after every member joined.
			g.next, g.running = nil, mine
			s.mu.Unlock()
			var done func()
			if hookDirFsync != nil {
				done = hookDirFsync(dir)
			}
			settle := newdir.SettleBegin(dir) // new subdirectories this fsync makes durable
			err := fsyncDirNow(dir)
			if done != nil {
				done()
			}
			if err == nil {
				newdir.SettleEnd(settle)
			}
			s.mu.Lock()
			mine.err, mine.done = err, true
			g.running = nil
			g.cond.Broadcast()
			break
		}
		g.cond.Wait()
	}
	g.refs--
	if g.refs == 0 {
		delete(s.groups, dir)
	}
	s.mu.Unlock()
	return mine.err
}

// fsyncDirNow opens dir and fsyncs it (on the bare descriptor: an *os.File
// would cost an fcntl to wrap it).
func fsyncDirNow(dir string) error {
	fd, err := openat2(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	for range 100 {
		if err = unix.Fsync(fd); err != unix.EINTR {
			break
		}
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

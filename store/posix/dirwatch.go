package posix

import (
	"errors"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
)

// A snapshot of a big directory is kept up to date by an inotify watch
// instead of being read again whenever the directory's stamp moves.
// Without it, one PUT into a flat bucket of a million keys (or one file
// made over NFS) made the next page read and sort all million entries
// again (about a second here), and a bucket written all the time was read
// whole for every page, since its stamp never settled.
//
// The watch is added on the open directory (/proc/self/fd/N, so exactly
// the inode being read) before the directory is read, so every create,
// delete or rename of an entry after that is queued by the kernel before
// the call that made it returns. Each use of a cached snapshot first reads
// the queued events and applies them (itemList.with: one chunk copied per
// change); per name the last event wins, which makes the result right
// whatever the events' order relative to the read. The queue overflowing
// drops every watched snapshot (they are read again); the directory
// itself removed or moved away drops its snapshot. Watches are used only
// on local file systems (a network file system's remote changes raise no
// events; there the stamp rule of dircache.go stays) and for directories
// of at least watchMinDirSize bytes (small ones are cheap to read again).

// watchMinDirSize is the directory size (st_size: on ext4 about 4 KiB per
// 100-200 entries) from which a snapshot is watched. A variable for tests.
var watchMinDirSize int64 = 64 << 10

const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// localFS are the file systems whose changes all go through this kernel.
var localFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC: true, unix.XFS_SUPER_MAGIC: true, unix.BTRFS_SUPER_MAGIC: true,
	unix.TMPFS_MAGIC: true, unix.F2FS_SUPER_MAGIC: true,
}

// dirWatch is the dirCache's inotify instance (fd 0 until first needed,
// -1 when unavailable) and its watched snapshots by watch descriptor.
type dirWatch struct {
	fd  int
	wds map[int32]*dirSnap
	buf []byte
	// reading holds the changes seen on a watch while a snapshot of its
	// directory is being read (the events are drained by other listings
	// meanwhile); put applies them to the new snapshot.
	reading map[int32]*readBuf
}

type readBuf struct {
	changes map[string]dirChange
	refs    int
}

// watch adds a watch on the open directory fd when it is worth one and
// returns its descriptor, or -1.
func (c *dirCache) watch(fd int, st *unix.Stat_t) int32 {
	if st.Size < watchMinDirSize {
		return -1
	}
	var sf unix.Statfs_t
	if unix.Fstatfs(fd, &sf) != nil || !localFS[int64(sf.Type)] {
		return -1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w.fd == 0 {
		c.w.fd = -1
		if ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC); err == nil {
			c.w.fd, c.w.wds, c.w.buf = ifd, map[int32]*dirSnap{}, make([]byte, 64<<10)
			c.w.reading = map[int32]*readBuf{}
		}
	}
	if c.w.fd < 0 {
		return -1
	}
	w, err := unix.InotifyAddWatch(c.w.fd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	if err != nil {
		return -1 // e.g. out of watches: the stamp rule applies
	}
	wd := int32(w)
	rb := c.w.reading[wd]
	if rb == nil {
		rb = &readBuf{changes: map[string]dirChange{}}
		c.w.reading[wd] = rb
	}
	rb.refs++
	return wd
}

// done ends the read of a watched directory begun by watch; s is the
// snapshot read (nil if none is kept) and gets the changes seen meanwhile.
// c.mu is held.
func (c *dirCache) done(wd int32, s *dirSnap) *dirSnap {
	rb := c.w.reading[wd]
	if rb == nil {
		return s
	}
	if s != nil && len(rb.changes) > 0 {
		s = s.with(rb.changes)
	}
	if rb.refs--; rb.refs == 0 {
		delete(c.w.reading, wd)
		if c.w.wds[wd] == nil && (s == nil || s.wd != wd) {
			unix.InotifyRmWatch(c.w.fd, uint32(wd))
		}
	}
	return s
}

// drain applies the queued events to the watched snapshots. c.mu is held.
func (c *dirCache) drain() {
	if c.w.fd <= 0 {
		return
	}
	pending := map[int32]map[string]dirChange{}
	for range 1 << 16 { // bounded: the queue holds at most max_queued_events
		n, err := unix.Read(c.w.fd, c.w.buf)
		if err != nil || n <= 0 {
			if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
				c.dropWatched() // an error reading the queue: trust none of it
				return
			}
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&c.w.buf[off]))
			name := ""
			if ev.Len > 0 {
				raw := c.w.buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				if i := strings.IndexByte(string(raw), 0); i >= 0 {
					raw = raw[:i]
				}
				name = string(raw)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				c.dropWatched()
				clear(pending)
				continue
			}
			if rb := c.w.reading[ev.Wd]; rb != nil && name != "" {
				rb.changes[name] = dirChange{present: ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0, isDir: ev.Mask&unix.IN_ISDIR != 0}
			}
			s := c.w.wds[ev.Wd]
			if s == nil {
				continue
			}
			switch {
			case ev.Mask&unix.IN_IGNORED != 0: // the watch is gone (directory removed)
				delete(pending, ev.Wd)
				delete(c.w.wds, ev.Wd)
				c.drop(s)
			case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0:
				delete(pending, ev.Wd)
				c.drop(s)
			case name != "":
				m := pending[ev.Wd]
				if m == nil {
					m = map[string]dirChange{}
					pending[ev.Wd] = m
				}
				m[name] = dirChange{present: ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0, isDir: ev.Mask&unix.IN_ISDIR != 0}
			}
		}
	}
	for wd, m := range pending {
		if s := c.w.wds[wd]; s != nil {
			c.replace(s, s.with(m))
		}
	}
}

// with is the snapshot with the changes applied (a new dirSnap).
func (s *dirSnap) with(changes map[string]dirChange) *dirSnap {
	ns := *s
	ns.elem = nil
	names := map[string]dirChange{}
	for name, ch := range changes {
		if strings.HasPrefix(name, store.ReservedPrefix) {
			if name == dirMarker && s.withMarker {
				ns.hasMarker = ch.present && !ch.isDir // a regular file, or gone (a symlink would not be one)
			}
			continue
		}
		names[name] = ch
	}
	if len(names) > 0 {
		ns.items = s.items.with(names)
	}
	return &ns
}

// replace puts ns in the place of the cached s (same path and watch).
func (c *dirCache) replace(s, ns *dirSnap) {
	ns.elem = s.elem
	ns.elem.Value = ns
	c.m[s.path] = ns
	c.w.wds[s.wd] = ns
	c.entries += ns.items.Len() - s.items.Len()
	for c.entries > dirCacheBudget && c.lru.Len() > 0 {
		c.drop(c.lru.Back().Value.(*dirSnap))
	}
}

// dropWatched drops every watched snapshot.
func (c *dirCache) dropWatched() {
	for _, s := range c.w.wds {
		c.drop(s)
	}
}

// unwatch removes s's watch unless another snapshot uses it. c.mu is held.
func (c *dirCache) unwatch(s *dirSnap) {
	if s.wd < 0 || c.w.wds[s.wd] != s {
		return
	}
	delete(c.w.wds, s.wd)
	if c.w.reading[s.wd] == nil { // else a read in progress still needs it
		unix.InotifyRmWatch(c.w.fd, uint32(s.wd))
	}
}

// close releases the inotify instance (Backend.Close).
func (c *dirCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w.fd > 0 {
		unix.Close(c.w.fd)
	}
	c.w.fd, c.w.wds, c.w.reading = -1, nil, nil
	c.m, c.entries = nil, 0
	c.lru.Init()
}

package filelun

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The shape of a LUN's page cache.
//
// On Linux 6.18 with ext4 a 4 KiB buffered write into a part of the file
// that the page cache holds as a large folio costs several times what it
// costs into a single 4 KiB page: ext4_block_write_begin walks the buffer
// heads of the whole folio. `go run ./scripts/bench/foliocost`
// (docs/bench/profiles/iscsi-randwrite-foliocost.txt) measured 9-22k random
// 4 KiB writes/s into a 256 MiB file cached in large folios against
// 90-315k/s into the same file cached in pages, and this walk was 49 % of
// the target's CPU in the QD 32 random-write profile
// (docs/bench/profiles/iscsi-randwrite-wr32-after.perf.txt). Large folios
// are made by the kernel's readahead and by large writes into parts of the
// file that are not cached; pages that exist stay pages under later large
// writes.
//
// So a LUN over a local file (1) reads through a descriptor of its own
// with readahead off (POSIX_FADV_RANDOM, which affects only that open
// file): a read then brings in exactly the 4 KiB pages asked for, never a
// large folio; and (2) the first time a process opens a given file as a
// LUN, it drops the file's clean cached pages, so that folios made before
// the target served the file (by `dd` into it, an import, NFS or S3 reads
// with readahead) are read back as pages. Dropping never loses data: dirty
// pages are written first (sync_file_range on the lock descriptor, so a
// write-back error it sees is still reported to the LUN's own Sync: each
// open file has its own error cursor), and DONTNEED drops only clean ones.
// Later opens of the same file in the same process keep the cache, which
// their own reads and writes have shaped.
//
// The drop goes through the file in chunks of dropChunk bytes in the
// background, so the open (the initiator's login) does not wait for it;
// but a write into a chunk not yet dropped first drops that chunk itself
// (dropRange): a write landing in a large folio before the drop would make
// it dirty, DONTNEED would then skip it, and it would stay a large folio
// with every later 4 KiB write into it paying the folio's price. The
// QD 32 random-write profile right after login showed exactly that
// (docs/bench/profiles/iscsi-randwrite-drop-*): ext4_block_write_begin at
// 8-19 % of the target's CPU instead of too little to list. A write waits
// at most for its own chunks' write-back and drop (plus the chunk the
// background is on), not for the whole file's.
//
// The price: without readahead, cold sequential reads wait for each
// request's own I/O, and warm 1 MiB reads copy from 256 pages instead of a
// few folios (foliocost: 62-86 against 27-45 ms per 256 MiB). Large writes
// into parts of the file that are not cached still make large folios
// (splitting them into 4 KiB writes cost 3-7x on the fill in the same
// tool's kind of measurement), so a fresh, sequentially written region is
// slow to write randomly until it leaves the cache.

// dropped holds the identity of every file whose cache this process has
// already dropped (or is dropping) at a LUN's open.
var dropped sync.Map

// dropChunk is the unit of the open-time drop (a multiple of the largest
// folio, so no folio straddles two chunks).
const dropChunk = 8 << 20

// dropHook, when set (tests), runs in the background drop between the
// write-back and the DONTNEED of each chunk.
var dropHook func(k int)

// cacheDrop is the state of a LUN's open-time drop.
type cacheDrop struct {
	fd   int // the lock descriptor; -1 once the LUN is closed
	mu   sync.Mutex
	done []bool // per chunk: dropped (or given up on)
}

// fileID names a file for dropped: device, inode and birth time (an inode
// number freed by a deleted volume may be reused by a new one).
type fileID struct {
	major, minor uint32
	ino          uint64
	birth        unix.StatxTimestamp
}

// openLocalCache sets up (1) and (2) above for a LUN whose file is open
// locally as lockf (the served lock's descriptor). Failures leave the
// LUN reading through its store.File as before.
func (l *LUN) openLocalCache(lockf *os.File) {
	l.dropDone = make(chan struct{})
	var st unix.Statx_t
	if err := unix.Statx(int(lockf.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_BTIME|unix.STATX_SIZE, &st); err != nil {
		close(l.dropDone)
		return
	}
	id := fileID{st.Dev_major, st.Dev_minor, st.Ino, st.Btime}
	// The same open file, not the same name: /proc/self/fd reopens the
	// locked inode even if the name was replaced meanwhile.
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", lockf.Fd()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		var rst unix.Statx_t
		if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_BTIME, &rst) == nil &&
			(fileID{rst.Dev_major, rst.Dev_minor, rst.Ino, rst.Btime}) == id &&
			unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM) == nil {
			l.rf = os.NewFile(uintptr(fd), lockf.Name())
		} else {
			unix.Close(fd)
		}
	}
	if _, seen := dropped.LoadOrStore(id, true); seen {
		close(l.dropDone)
		return
	}
	d := &cacheDrop{fd: int(lockf.Fd()), done: make([]bool, (int64(st.Size)+dropChunk-1)/dropChunk)}
	l.drop = d
	l.dropping.Store(true)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(l.dropDone)
		for k := range d.done {
			select {
			case <-l.stop:
				// Closed before the end: the next open drops again.
				dropped.Delete(id)
				return
			default:
			}
			d.mu.Lock()
			d.dropChunk(k, dropHook)
			d.mu.Unlock()
		}
		l.dropping.Store(false)
	}()
}

// dropChunk writes back and drops chunk k unless that was done. d.mu is
// held; hook (tests) runs between the two.
func (d *cacheDrop) dropChunk(k int, hook func(int)) {
	if d.done[k] || d.fd < 0 {
		return
	}
	d.done[k] = true
	off := int64(k) * dropChunk
	if unix.SyncFileRange(d.fd, off, dropChunk, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER) != nil {
		return // DONTNEED would start write-back on its own; leave it
	}
	if hook != nil {
		hook(k)
	}
	unix.Fadvise(d.fd, off, dropChunk, unix.FADV_DONTNEED)
}

// dropRange drops the chunks of [off, off+n) the open-time drop has not
// reached yet, before a write into them (see above). Cheap once the drop
// is over (one atomic load, by the caller).
func (l *LUN) dropRange(off, n int64) {
	d := l.drop
	if d == nil || n <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := off / dropChunk; k <= (off+n-1)/dropChunk && k < int64(len(d.done)); k++ {
		d.dropChunk(int(k), nil)
	}
}

package nfs

// NFSv4 state: client records, 4.1 sessions and their slots, open and lock
// owners, stateids, share reservations and byte-range locks, leases, and
// the grace period after a restart.
//
// Everything is in memory except the list of confirmed clients' owner IDs,
// which is written (atomically, fsynced) to DATA/.tristore/nfs4/clients
// whenever a client is confirmed or removed. After a restart that list says
// who may reclaim: if it is not empty the server is in its grace period for
// one lease time, in which only reclaims (OPEN CLAIM_PREVIOUS, LOCK with
// reclaim) are accepted from the listed clients and new opens and locks get
// NFS4ERR_GRACE; 4.1 clients end their part early with RECLAIM_COMPLETE,
// and the grace period ends when every listed client has. With an empty
// list there is nothing to reclaim and no grace period at all.
//
// Locks are the server's own (advisory among NFSv4 clients, as POSIX locks
// are); they do not reach the kernel. Share reservations (OPEN deny modes)
// are enforced against other v4 opens and against v4 READ/WRITE with the
// anonymous stateid.

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tristore/tristore/proto/nfs4"
	"github.com/tristore/tristore/vfs"
)

// fileKey names a file for state: its export and vfs.Handle.Identity (not
// the inode number alone, which a new file may reuse).
type fileKey struct {
	export uint32
	id     string
}

func keyOf(e *Export, h vfs.Handle) fileKey { return fileKey{e.fs.ExportID(), h.Identity()} }

type v4state struct {
	mu      sync.Mutex
	log     *slog.Logger
	boot    uint32
	counter uint64
	lease   time.Duration
	// graceEnd is zero when there is no grace period.
	graceEnd    time.Time
	reclaim     map[string]bool // owner IDs (hex) that may reclaim
	path        string          // persisted list of confirmed owner IDs
	clients     map[uint64]*v4client
	confirmed   map[string]*v4client // by owner ID
	unconfirmed map[string]*v4client
	sessions    map[[nfs4.SessionIDSize]byte]*v4session
	stateids    map[[nfs4.OtherSize]byte]*v4stateid
	files       map[fileKey]*v4file
	// closed remembers the owner of recently closed open stateids (a 4.0
	// CLOSE retransmission is answered from the owner's replay cache);
	// expired remembers stateids of clients whose state was purged, so
	// using one is NFS4ERR_EXPIRED, not BAD_STATEID. Both are bounded.
	closed   map[[nfs4.OtherSize]byte]*v4owner
	expired  map[[nfs4.OtherSize]byte]bool
	stop     chan struct{}
	stopOnce sync.Once
}

const maxRemembered = 1 << 16

type v4client struct {
	id          uint64
	ownerID     []byte
	verf        [nfs4.VerifierSize]byte
	confirmVerf [nfs4.VerifierSize]byte
	minor       uint32
	principal   string
	confirmed   bool
	renewed     time.Time
	csSeq       uint32
	csReply     *nfs4.CreateSessionRes
	sessions    map[[nfs4.SessionIDSize]byte]*v4session
	owners      map[string]*v4owner
	reclaimDone bool
}

type v4session struct {
	id     [nfs4.SessionIDSize]byte
	client *v4client
	fore   nfs4.ChannelAttrs
	back   nfs4.ChannelAttrs
	slots  []v4slot
}

type v4slot struct {
	seq    uint32
	inUse  bool
	cached bool
	reply  []byte
}

type v4owner struct {
	client    *v4client
	owner     nfs4.Owner
	key       string
	lock      bool
	seqid     uint32
	confirmed bool
	lastOp    nfs4.Op
	last      []byte
	hasLast   bool
	states    map[[nfs4.OtherSize]byte]*v4stateid
}

type lockRange struct {
	start, end uint64 // end exclusive; ^0 means "to the end of the file"
	write      bool
}

type v4stateid struct {
	other  [nfs4.OtherSize]byte
	seqid  uint32
	lock   bool
	owner  *v4owner
	file   *v4file
	access uint32 // open: OPEN4_SHARE_ACCESS_* held
	deny   uint32
	// accesses and denies are the share values opened with so far (bit
	// n: value n): OPEN_DOWNGRADE may only go back to one of them (RFC
	// 7530 section 16.19.4), as knfsd's access and deny bitmaps.
	accesses, denies uint8
	open             *v4stateid // lock: the open it came from
	ranges           []lockRange
	fh               vfs.Handle
	e                *Export
}

type v4file struct {
	key    fileKey
	states map[[nfs4.OtherSize]byte]*v4stateid
}

func newV4State(dataDir string, lease, grace time.Duration, log *slog.Logger) *v4state {
	st := &v4state{
		log: log, lease: lease, boot: bootEpoch(),
		reclaim: map[string]bool{}, clients: map[uint64]*v4client{},
		confirmed: map[string]*v4client{}, unconfirmed: map[string]*v4client{},
		sessions: map[[nfs4.SessionIDSize]byte]*v4session{}, stateids: map[[nfs4.OtherSize]byte]*v4stateid{},
		files: map[fileKey]*v4file{}, stop: make(chan struct{}),
		closed: map[[nfs4.OtherSize]byte]*v4owner{}, expired: map[[nfs4.OtherSize]byte]bool{},
	}
	if dataDir != "" {
		st.path = filepath.Join(dataDir, ".tristore", "nfs4", "clients")
		if f, err := os.Open(st.path); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if l := strings.TrimSpace(sc.Text()); l != "" {
					st.reclaim[l] = true
				}
			}
			f.Close()
		}
	}
	if len(st.reclaim) > 0 && grace > 0 {
		st.graceEnd = time.Now().Add(grace)
		log.Info("nfs4: grace period", "clients", len(st.reclaim), "until", st.graceEnd.Format(time.RFC3339))
	}
	go st.reaper()
	return st
}

// bootEpoch is a random nonzero number that starts every client ID,
// session ID and stateid this server instance issues, so that anything from
// an earlier instance is recognised as stale. (Whole seconds of the start
// time were used before: a server restarted within the same second handed
// out the same IDs again, and a client's old session then matched a new
// one, replies from its slot cache included.)
func bootEpoch() uint32 {
	var b [4]byte
	for {
		rand.Read(b[:])
		if v := binary.BigEndian.Uint32(b[:]); v != 0 {
			return v
		}
	}
}

func (st *v4state) close() { st.stopOnce.Do(func() { close(st.stop) }) }

// reaper removes clients whose lease expired, every quarter lease, until
// the server closes.
func (st *v4state) reaper() {
	t := time.NewTicker(max(st.lease/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-st.stop:
			return
		case <-t.C:
		}
		st.mu.Lock()
		now := time.Now()
		changed := false
		for _, cl := range st.clients {
			if now.Sub(cl.renewed) > st.lease+st.lease/2 && !st.busy(cl) {
				changed = changed || cl.confirmed
				st.removeClient(cl)
			}
		}
		if !st.graceEnd.IsZero() && now.After(st.graceEnd) {
			st.graceEnd = time.Time{}
			st.reclaim = map[string]bool{}
		}
		if changed {
			st.persistLocked()
		}
		st.mu.Unlock()
	}
}

// busy reports whether a request of the client is being handled (a slot in
// use): its lease does not run out under it.
func (st *v4state) busy(cl *v4client) bool {
	for _, s := range cl.sessions {
		for i := range s.slots {
			if s.slots[i].inUse {
				return true
			}
		}
	}
	return false
}

func (st *v4state) inGrace() bool {
	return !st.graceEnd.IsZero() && time.Now().Before(st.graceEnd)
}

// mayReclaim reports whether the client was confirmed before the restart
// and has not finished reclaiming.
func (st *v4state) mayReclaim(cl *v4client) bool {
	return st.inGrace() && st.reclaim[hex.EncodeToString(cl.ownerID)] && !cl.reclaimDone
}

// endReclaim records that a client finished reclaiming; the grace period
// ends when every listed client has.
func (st *v4state) endReclaim(cl *v4client) {
	cl.reclaimDone = true
	delete(st.reclaim, hex.EncodeToString(cl.ownerID))
	if len(st.reclaim) == 0 {
		st.graceEnd = time.Time{}
	}
}

func (st *v4state) newClientID() uint64 {
	st.counter++
	return uint64(st.boot)<<32 | uint64(uint32(st.counter))
}

func (st *v4state) newOther() [nfs4.OtherSize]byte {
	st.counter++
	var o [nfs4.OtherSize]byte
	binary.BigEndian.PutUint32(o[:4], st.boot)
	binary.BigEndian.PutUint64(o[4:], st.counter)
	return o
}

func randomVerifier() [nfs4.VerifierSize]byte {
	var v [nfs4.VerifierSize]byte
	rand.Read(v[:])
	return v
}

// staleClientID reports whether id was issued before this server started.
func (st *v4state) staleClientID(id uint64) bool { return uint32(id>>32) != st.boot }

// client finds a confirmed client by ID and renews its lease.
func (st *v4state) client(id uint64) (*v4client, nfs4.Status) {
	cl := st.clients[id]
	if cl == nil || !cl.confirmed {
		if cl == nil && !st.staleClientID(id) {
			// Issued by this server and since removed: its lease expired.
			return nil, nfs4.ErrExpired
		}
		return nil, nfs4.ErrStaleClientID
	}
	cl.renewed = time.Now()
	return cl, nfs4.OK
}

// removeClient drops a client and everything it holds.
func (st *v4state) removeClient(cl *v4client) {
	if len(st.expired) > maxRemembered {
		clear(st.expired)
	}
	// One pass over the closed-stateid replay entries for all the
	// client's owners (removeOwner's own pass per owner is quadratic for
	// a client with many owners).
	for other, ow := range st.closed {
		if ow.client == cl {
			delete(st.closed, other)
		}
	}
	for _, o := range cl.owners {
		for other, s := range o.states {
			st.expired[other] = true
			st.removeState(s)
		}
		delete(cl.owners, o.key)
	}
	for id := range cl.sessions {
		delete(st.sessions, id)
	}
	delete(st.clients, cl.id)
	if st.confirmed[string(cl.ownerID)] == cl {
		delete(st.confirmed, string(cl.ownerID))
	}
	if st.unconfirmed[string(cl.ownerID)] == cl {
		delete(st.unconfirmed, string(cl.ownerID))
	}
}

func (st *v4state) removeOwner(o *v4owner) {
	for _, s := range o.states {
		st.removeState(s)
	}
	for other, ow := range st.closed {
		if ow == o {
			delete(st.closed, other)
		}
	}
	delete(o.client.owners, o.key)
}

func (st *v4state) removeState(s *v4stateid) {
	delete(st.stateids, s.other)
	delete(s.owner.states, s.other)
	if s.file != nil {
		delete(s.file.states, s.other)
		if len(s.file.states) == 0 {
			delete(st.files, s.file.key)
		}
	}
}

// owner finds or makes an open or lock owner.
func (st *v4state) owner(cl *v4client, o nfs4.Owner, lock bool) (*v4owner, bool) {
	k := "o/" + o.Key()
	if lock {
		k = "l/" + o.Key()
	}
	if ow := cl.owners[k]; ow != nil {
		return ow, false
	}
	if cl.owners == nil {
		cl.owners = map[string]*v4owner{}
	}
	ow := &v4owner{client: cl, owner: nfs4.Owner{ClientID: o.ClientID, Owner: append([]byte(nil), o.Owner...)},
		key: k, lock: lock, states: map[[nfs4.OtherSize]byte]*v4stateid{}}
	cl.owners[k] = ow
	return ow, true
}

// remember keeps the encoded result of the owner's last seqid-consuming
// operation for a 4.0 retransmission.
func (o *v4owner) remember(op nfs4.Op, b []byte) {
	o.lastOp = op
	o.last = append(o.last[:0], b...)
	o.hasLast = true
}

// ownerOf finds the owner of a stateid, current or recently closed.
func (st *v4state) ownerOf(sid nfs4.Stateid) *v4owner {
	if s := st.stateids[sid.Other]; s != nil {
		return s.owner
	}
	return st.closed[sid.Other]
}

// closeState removes an open stateid, remembering its owner for replays.
func (st *v4state) closeState(s *v4stateid) {
	if len(st.closed) > maxRemembered {
		clear(st.closed)
	}
	st.closed[s.other] = s.owner
	st.removeState(s)
}

func (st *v4state) file(e *Export, h vfs.Handle) *v4file {
	k := keyOf(e, h)
	f := st.files[k]
	if f == nil {
		f = &v4file{key: k, states: map[[nfs4.OtherSize]byte]*v4stateid{}}
		st.files[k] = f
	}
	return f
}

func (st *v4state) newState(o *v4owner, f *v4file, e *Export, h vfs.Handle, lock bool) *v4stateid {
	s := &v4stateid{other: st.newOther(), seqid: 1, lock: lock, owner: o, file: f, e: e,
		fh: append(vfs.Handle(nil), h...)}
	st.stateids[s.other] = s
	o.states[s.other] = s
	f.states[s.other] = s
	return s
}

func (s *v4stateid) id() nfs4.Stateid { return nfs4.Stateid{Seqid: s.seqid, Other: s.other} }

// bump advances the stateid's seqid (wrapping past 0, which 4.1 reserves).
func (s *v4stateid) bump() {
	s.seqid++
	if s.seqid == 0 {
		s.seqid = 1
	}
}

// findState resolves a non-special stateid: BAD_STATEID if it was never
// issued, STALE_STATEID if it is from before a restart (4.0; 4.1 says
// BAD_STATEID too), OLD_STATEID if its seqid is behind, EXPIRED if its
// client's lease ran out.
func (st *v4state) findState(sid nfs4.Stateid, minor uint32) (*v4stateid, nfs4.Status) {
	if sid.Special() {
		return nil, nfs4.ErrBadStateID
	}
	s := st.stateids[sid.Other]
	if s == nil && st.expired[sid.Other] {
		return nil, nfs4.ErrExpired
	}
	if s == nil {
		if binary.BigEndian.Uint32(sid.Other[:4]) != st.boot {
			if minor == 0 {
				return nil, nfs4.ErrStaleStateID
			}
			return nil, nfs4.ErrBadStateID
		}
		return nil, nfs4.ErrBadStateID
	}
	switch {
	case sid.Seqid == 0 && minor >= 1:
	case sid.Seqid < s.seqid:
		return nil, nfs4.ErrOldStateID
	case sid.Seqid > s.seqid:
		return nil, nfs4.ErrBadStateID
	}
	if time.Since(s.owner.client.renewed) > st.lease+st.lease/2 && !st.busy(s.owner.client) {
		return nil, nfs4.ErrExpired
	}
	s.owner.client.renewed = time.Now()
	return s, nfs4.OK
}

// writeBlocked reports whether a write to [start, end) of the file (from
// NFSv3, which has no state) would break an NFSv4 client's write lock or
// deny-write open.
func (st *v4state) writeBlocked(e *Export, h vfs.Handle, start, end uint64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	f := st.files[keyOf(e, h)]
	if f == nil {
		return false
	}
	if end <= start {
		end = start + 1
	}
	if f.denied(true) {
		return true
	}
	s, _ := f.lockConflict(start, end, true, nil)
	return s != nil
}

// isOpen reports whether some client has the file open.
func (st *v4state) isOpen(e *Export, h vfs.Handle) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.files[keyOf(e, h)] != nil
}

// expireConflicting removes the clients holding state on f whose lease has
// run out (a "courteous" server keeps them until someone else needs what
// they hold, RFC 8881 section 8.4.3's option). The caller holds st.mu.
func (st *v4state) expireConflicting(f *v4file) {
	if f == nil {
		return
	}
	changed := false
	for _, s := range f.states {
		cl := s.owner.client
		if time.Since(cl.renewed) > st.lease && !st.busy(cl) {
			changed = changed || cl.confirmed
			st.removeClient(cl)
		}
	}
	if changed {
		st.persistLocked()
	}
}

// shareConflict reports whether opening with access/deny conflicts with
// an open of the file, the same owner's included (RFC 7530 sections 9.9
// and 16.16.5: an owner's own deny mode refuses its own later OPEN too).
func (f *v4file) shareConflict(access, deny uint32) bool {
	for _, s := range f.states {
		if s.lock {
			continue
		}
		if access&s.deny != 0 || deny&s.access != 0 {
			return true
		}
	}
	return false
}

// denied reports whether an I/O with a special stateid (no open) is
// refused by another open's deny mode.
func (f *v4file) denied(write bool) bool {
	want := uint32(nfs4.ShareDenyRead)
	if write {
		want = nfs4.ShareDenyWrite
	}
	for _, s := range f.states {
		if !s.lock && s.deny&want != 0 {
			return true
		}
	}
	return false
}

// lockConflictClient is lockConflict for I/O with a stateid: only locks
// of other clients stand in the way (the client arbitrates its own lock
// owners, as a local file system lets a process write under its own locks).
func (f *v4file) lockConflictClient(start, end uint64, write bool, cl *v4client) *v4stateid {
	for _, s := range f.states {
		if !s.lock || s.owner.client == cl {
			continue
		}
		for _, r := range s.ranges {
			if r.start < end && start < r.end && (write || r.write) {
				return s
			}
		}
	}
	return nil
}

// lockConflict finds a lock of another owner that overlaps [start, end)
// in a conflicting way.
func (f *v4file) lockConflict(start, end uint64, write bool, owner *v4owner) (*v4stateid, *lockRange) {
	for _, s := range f.states {
		if !s.lock || s.owner == owner {
			continue
		}
		for i := range s.ranges {
			r := &s.ranges[i]
			if r.start < end && start < r.end && (write || r.write) {
				return s, r
			}
		}
	}
	return nil, nil
}

// setRange records [start, end) as locked (write or read) by s, replacing
// whatever s held there, and unlock removes it; both split ranges as POSIX
// locks do.
func (s *v4stateid) setRange(start, end uint64, write bool) {
	s.unlock(start, end)
	// Merge with ranges of the same type that touch or overlap, as POSIX
	// locks of one owner merge.
	var out []lockRange
	for _, r := range s.ranges {
		if r.write == write && r.start <= end && start <= r.end {
			start, end = min(start, r.start), max(end, r.end)
			continue
		}
		out = append(out, r)
	}
	s.ranges = append(out, lockRange{start, end, write})
}

func (s *v4stateid) unlock(start, end uint64) {
	var out []lockRange
	for _, r := range s.ranges {
		if r.end <= start || end <= r.start {
			out = append(out, r)
			continue
		}
		if r.start < start {
			out = append(out, lockRange{r.start, start, r.write})
		}
		if end < r.end {
			out = append(out, lockRange{end, r.end, r.write})
		}
	}
	s.ranges = out
}

// holdsLocks reports whether any lock owner of the open's client holds a
// lock on the open's file that came from this open.
func (s *v4stateid) holdsLocks() bool {
	for _, o := range s.file.states {
		if o.lock && o.open == s && len(o.ranges) > 0 {
			return true
		}
	}
	return false
}

// persistLocked writes the confirmed clients' owner IDs (the ones that may
// reclaim after a restart) durably: temp file, fsync, rename, fsync dir.
func (st *v4state) persistLocked() {
	if st.path == "" {
		return
	}
	var b strings.Builder
	for id, cl := range st.confirmed {
		if cl.confirmed {
			b.WriteString(hex.EncodeToString([]byte(id)))
			b.WriteByte('\n')
		}
	}
	// Clients still allowed to reclaim stay listed until they do or the
	// grace period ends, so a second restart does not forget them.
	if st.inGrace() {
		for id := range st.reclaim {
			if _, ok := st.confirmed[string(mustHex(id))]; !ok {
				b.WriteString(id)
				b.WriteByte('\n')
			}
		}
	}
	dir := filepath.Dir(st.path)
	if err := mkdirDurable(dir); err != nil {
		st.log.Warn("nfs4: persisting clients", "err", err)
		return
	}
	if err := writeFileDurable(st.path, []byte(b.String())); err != nil {
		st.log.Warn("nfs4: persisting clients", "err", err)
	}
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

func mkdirDurable(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

func writeFileDurable(p string, data []byte) error {
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if !faultSkip("nfs4-clients") {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	if faultSkip("nfs4-clients") {
		return nil
	}
	return syncDir(filepath.Dir(p))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Slots (4.1).

func (st *v4state) finishSlot(sess *v4session, sl *v4slot, body []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	sl.inUse = false
	if len(body) <= v4MaxCached {
		sl.reply = append(sl.reply[:0], body...)
		sl.cached = true
	} else {
		sl.reply, sl.cached = nil, false
	}
}

func (st *v4state) releaseSlot(sess *v4session, sl *v4slot) {
	st.mu.Lock()
	sl.inUse = false
	st.mu.Unlock()
}

// Package chunkstore keeps files and block volumes in any S3-compatible
// bucket as a manifest plus fixed-size, content-addressed chunk objects,
// with a local disk cache in front (seed 001 §6.3; s3backer and JuiceFS do
// the same): an LRU cache bounded in bytes that survives restarts,
// write-back of dirty chunks older than WriteBackAge checked every
// WriteBackEvery, Flush for fsync/close, an adaptive prefetch window that
// doubles with sequential access, and chunk transfers in parallel within a
// memory bound.
//
// Crash safety comes from the order of writes: a chunk object is named by
// the SHA-256 of its bytes, so it is complete before anything names it;
// the manifest is replaced in one PUT only after every chunk it names is
// stored; a chunk no longer named is deleted only after that PUT. Locally,
// every change is journaled before it is applied and dirty chunks live in
// files, so a killed gateway's dirty data is uploaded at the next Open.
//
// One gateway writes a store at a time: Open takes a lease object with an
// expiry, renews it, and refuses (ErrLeased) while another holds it.
package chunkstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	s3client "github.com/tristore/tristore/client/s3"
)

// Chunk size bounds. The default, 1 MiB, is where seed 001's file system
// case study (§6.3, Figures 26-29) found the lowest average latency with
// prefetching (4 MiB was best without it), and where scripts/bench/
// cloudfs.sh on the realistic link found it too: level with 256 KiB on
// reads, ahead of 64 KiB, with 4× fewer objects than 256 KiB
// (BENCHMARKS.md, "Cloud file system").
const (
	MinChunkSize     = 4 << 10
	MaxChunkSize     = 64 << 20
	DefaultChunkSize = 1 << 20
	// MinFetchPart is the least a ranged part of a chunk download asks
	// for; DefaultFetchParts is Config.FetchParts's default.
	MinFetchPart      = 64 << 10
	DefaultFetchParts = 16
)

// Errors. Front ends translate them in one place (fusefs/cloudfs: errno).
var (
	ErrNotExist    = errors.New("no such file or directory")
	ErrExist       = errors.New("file exists")
	ErrNotDir      = errors.New("not a directory")
	ErrIsDir       = errors.New("is a directory")
	ErrNotEmpty    = errors.New("directory not empty")
	ErrNameTooLong = errors.New("file name too long")
	ErrInvalid     = errors.New("invalid argument")
	ErrTooLarge    = errors.New("file too large")
	ErrReadOnly    = errors.New("store is read-only")
	ErrClosed      = errors.New("store is closed")
	// ErrNoSpace: the cache disk is full.
	ErrNoSpace = errors.New("cache disk full")
	// ErrLeased: another gateway holds the store's lease.
	ErrLeased = errors.New("store is leased by another gateway")
	// ErrConflict: the bucket's manifest changed behind this gateway's
	// back (someone else wrote the store); nothing is published over it.
	ErrConflict = errors.New("manifest changed by someone else")
	// ErrCorrupt: a manifest, chunk or cache file is not what was written
	// (a chunk's bytes do not match its name, a malformed manifest).
	ErrCorrupt  = errors.New("corrupt store data")
	ErrNoBucket = errors.New("no such bucket")
	ErrDenied   = errors.New("access denied")
	// ErrNoStore: the bucket prefix holds no manifest and Create was not set.
	ErrNoStore = errors.New("no chunk store at this location")
	// ErrBaseLost: a partial dirty chunk (partial.go) cannot be completed
	// because its base object is missing from the bucket or no longer
	// holds its bytes (someone else deleted or replaced it). Its written
	// bytes stay in the cache and readable; reads of the other bytes and
	// its upload fail with this error until they are written again.
	ErrBaseLost = errors.New("base object of a partly written chunk is lost")
)

// Config says where a store lives and how it behaves. Zero fields take
// the defaults named.
type Config struct {
	Engine *s3client.Engine // endpoint, credentials, retries
	Bucket string
	Prefix string // key prefix; "" or "dir/" (a missing "/" is added)
	// CacheDir holds the local state and cache of this store (required);
	// the store uses a subdirectory named after the endpoint, bucket and
	// prefix, so one directory can serve several stores.
	CacheDir  string
	CacheSize int64 // bytes, default 1 GiB
	// ChunkSize applies to a store being created; an existing store keeps
	// its own (DefaultChunkSize).
	ChunkSize int64
	// Parallelism is how many chunk transfers run at once (default 8);
	// Parallelism × chunk size must fit MaxMemory (default 256 MiB).
	Parallelism int
	MaxMemory   int64
	// WriteBackAge: dirty chunks older than this are uploaded (30 s);
	// WriteBackEvery: how often that is checked (5 s).
	WriteBackAge   time.Duration
	WriteBackEvery time.Duration
	// PrefetchMax caps the prefetch window in chunks; 0 chooses by chunk
	// size (16 up to 64 KiB, 8 up to 1 MiB, 4 up to 4 MiB, else 2: seed
	// 001's finding that big chunks suffer from aggressive prefetching);
	// negative turns prefetching off.
	PrefetchMax int
	// FetchParts splits a chunk download into up to that many ranged GETs
	// in parallel, each at least MinFetchPart bytes (default 16; 1: one
	// GET per chunk). On the realistic link a 1 MiB object came 5.5×
	// faster as 16 parallel parts than as one GET (1.2 s: one TCP stream
	// in slow start and losses; scripts/bench/chunkfetch.sh); see
	// bucket.getParts. The HTTP client's pool should keep Parallelism ×
	// FetchParts connections.
	FetchParts int
	// LeaseTTL is how long a lease lasts unless renewed (default 60 s;
	// renewed every third of it).
	LeaseTTL time.Duration
	// RequestTimeout bounds one attempt of one request, body included
	// (default: the engine's RequestTimeout, else 2 minutes); an attempt
	// that runs over is retried like a reset connection.
	RequestTimeout time.Duration
	// Create makes a new store of Kind (default KindFS) when the prefix
	// has no manifest; VolumeSize is the size of a new KindVolume store.
	// Without Create, an empty Kind opens a store of either kind.
	Create     bool
	Kind       string
	VolumeSize int64
	// ReadOnly opens without a lease; writes fail with ErrReadOnly.
	ReadOnly bool
	// Owner names this gateway in the lease (default host/pid).
	Owner string
	Log   *slog.Logger
}

// Stats counts what the store did, for tests and benchmarks.
type Stats struct {
	Hits, Misses       int64 // chunk reads served from cache / fetched
	Prefetched         int64 // chunks fetched ahead of need
	PrefetchHits       int64 // demand reads served by a prefetched chunk
	Uploads, Downloads int64 // chunk objects moved
	UploadBytes        int64
	DownloadBytes      int64
	Publishes          int64 // manifests written
	Deleted            int64 // chunk objects deleted as garbage
	Recovered          int64 // dirty chunks found at Open
	// Writes counts WriteAt calls that wrote; WriteNanos is their time
	// in the store, summed, and WriteMaxNanos the longest (what a FUSE
	// WRITE spends in the store, without the kernel's share).
	Writes, WriteNanos, WriteMaxNanos int64
	// Of that time: NewChunkNanos in the NewChunks writes that made a
	// chunk dirty (its files and, when pooled files were ready, the
	// write itself), JournalNanos in the writes' journal records.
	NewChunks, NewChunkNanos, JournalNanos int64
}

// Store is an open chunk store.
type Store struct {
	cfg   Config
	b     *bucket
	id    string
	dir   string
	log   *slog.Logger
	cache *cache
	lease *lease
	cs    int64

	mu       sync.Mutex
	m        *Manifest
	pubETag  string
	changes  uint64              // unpublished metadata changes
	pubRefs  map[string]struct{} // chunks the published manifest names
	st       map[uint64]*istate
	jf       *os.File
	jrecs    int
	joff     int64 // journal length: the offset of the next record
	closed   bool
	created  bool // Open made a new store
	leaseErr error
	// newDirty and newPartial keep unnamed files ready for new dirty
	// chunk files and records (newfile.go); nil: files are made.
	newDirty, newPartial *newFiles

	locks       [256]sync.Mutex // chunk locks, by chunk
	flushMu     sync.Mutex      // one upload+publish at a time
	bufs        chan []byte     // the memory bound: one buffer per transfer
	pfMu        sync.Mutex
	pfBusy      map[string]bool          // prefetches in flight
	pfDone      map[string]bool          // prefetched, not yet read
	inflight    map[string]chan struct{} // fetches in flight
	firstChange time.Time                // when the oldest unpublished change was made
	publishSoon bool                     // a close uploaded data: publish at the next check
	draining    atomic.Bool              // an early write-back is running
	bgctx       context.Context

	stop context.CancelFunc
	wg   sync.WaitGroup

	hits, misses, prefetched, prefetchHits atomic.Int64
	uploads, downloads, upBytes, downBytes atomic.Int64
	publishes, deleted, recovered          atomic.Int64
	writes, writeNanos, writeMax           atomic.Int64
	newChunks, newChunkNanos, journalNanos atomic.Int64
}

// istate is what the store knows about an inode beyond the manifest.
type istate struct {
	dirty   map[int64]*dirtyChunk
	opens   int
	lastIdx int64 // last chunk read (sequential detection)
	run     int   // chunks read in sequence before lastIdx+1
}

// dirtyChunk is a chunk whose newest bytes exist only in the cache file
// dirty/<ino>.<idx>. ver counts writes, so an upload that raced a write
// leaves the chunk dirty. A partial chunk (miss not empty) takes the
// bytes of miss from its base object (partial.go); both change under the
// chunk lock and s.mu.
type dirtyChunk struct {
	since time.Time
	ver   uint64
	f     *os.File
	base  string
	miss  []span
	// lost: the base cannot be had (ErrBaseLost, with the file, object
	// and cache paths named); fill returns it without asking the bucket
	// again. Cleared when writes or a truncate leave nothing missing.
	lost error
	// flen is the dirty file's length; charge is what the chunk counts
	// against the cache limit (recharge): the bytes the file holds, i.e.
	// flen less the missing ranges (holes), in 4 KiB blocks. A partial
	// chunk with one 64 KiB write counts 64 KiB, not the chunk size.
	flen   int64
	charge int64
	// rf is the open partial/ record once it exists (rlen bytes), so
	// that a write covering a missing range rewrites it in place
	// (setMiss) instead of making a new file and renaming it over.
	rf   *os.File
	rlen int
}

// closeFiles closes d's dirty file and record, if open.
func (d *dirtyChunk) closeFiles() {
	if d.f != nil {
		d.f.Close()
		d.f = nil
	}
	if d.rf != nil {
		d.rf.Close()
		d.rf = nil
	}
}

// recharge sets d's charge from its length and missing ranges and
// reports whether dirty data alone now exceeds the cache limit (only
// when the charge grew). The caller holds s.mu (and the chunk lock).
func (s *Store) recharge(d *dirtyChunk) (over bool) {
	n := d.flen
	for _, m := range d.miss {
		if b := min(m.B, d.flen); b > m.A {
			n -= b - m.A
		}
	}
	n = min((n+4095)&^4095, max(s.cs, d.flen))
	delta := n - d.charge
	d.charge = n
	if delta == 0 {
		return false
	}
	return s.cache.reserveDirty(delta)
}

func (s *Store) istate(ino uint64) *istate {
	st := s.st[ino]
	if st == nil {
		st = &istate{dirty: map[int64]*dirtyChunk{}, lastIdx: -2}
		s.st[ino] = st
	}
	return st
}

func (s *Store) chunkLock(ino uint64, idx int64) *sync.Mutex {
	return &s.locks[(ino*0x9E3779B97F4A7C15+uint64(idx))%uint64(len(s.locks))]
}

func (s *Store) dirtyPath(ino uint64, idx int64) string {
	return filepath.Join(s.dir, "dirty", fmt.Sprintf("%d.%d", ino, idx))
}

// Open opens (or with Create makes) the store at cfg.Bucket/cfg.Prefix.
// It takes the lease, loads the manifest, replays the local journal,
// uploads dirty chunks a crash left behind, publishes, and removes chunk
// objects nothing names. It refuses clearly when another gateway holds
// the lease, when the local cache holds unpublished changes to a store
// someone else has changed since, and when the bucket is missing or the
// credentials are refused.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Engine == nil || cfg.Bucket == "" || cfg.CacheDir == "" {
		return nil, fmt.Errorf("chunkstore: engine, bucket and cache directory are required")
	}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 1 << 30
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.Parallelism == 0 {
		cfg.Parallelism = 8
	}
	if cfg.FetchParts == 0 {
		cfg.FetchParts = DefaultFetchParts
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = 256 << 20
	}
	if cfg.WriteBackAge == 0 {
		cfg.WriteBackAge = 30 * time.Second
	}
	if cfg.WriteBackEvery == 0 {
		cfg.WriteBackEvery = 5 * time.Second
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 60 * time.Second
	}
	if cfg.Kind == "" && cfg.Create {
		cfg.Kind = KindFS
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	switch {
	case cfg.ChunkSize < MinChunkSize || cfg.ChunkSize > MaxChunkSize:
		return nil, fmt.Errorf("chunkstore: chunk size %d: want %d..%d", cfg.ChunkSize, MinChunkSize, MaxChunkSize)
	case cfg.FetchParts < 1 || cfg.FetchParts > 64:
		return nil, fmt.Errorf("chunkstore: fetch parts %d: want 1..64", cfg.FetchParts)
	case cfg.Parallelism < 1 || cfg.Parallelism > 1024:
		return nil, fmt.Errorf("chunkstore: parallelism %d: want 1..1024", cfg.Parallelism)
	case cfg.WriteBackAge < 0 || cfg.WriteBackEvery < 0 || cfg.LeaseTTL < 3*time.Second:
		return nil, fmt.Errorf("chunkstore: negative write-back times or a lease under 3 s")
	case cfg.Kind != "" && cfg.Kind != KindFS && cfg.Kind != KindVolume:
		return nil, fmt.Errorf("chunkstore: kind %q", cfg.Kind)
	}
	ec := cfg.Engine.Config()
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = ec.RequestTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 2 * time.Minute
	}
	b := &bucket{api: cfg.Engine.API(), name: cfg.Bucket, prefix: cfg.Prefix, retries: ec.Retries, timeout: cfg.RequestTimeout}
	s := &Store{cfg: cfg, b: b, log: cfg.Log, st: map[uint64]*istate{}, pfBusy: map[string]bool{}, pfDone: map[string]bool{},
		inflight: map[string]chan struct{}{}, bgctx: context.Background()}
	s.id = ec.Endpoint + " " + cfg.Bucket + "/" + cfg.Prefix
	sum := sha256.Sum256([]byte(s.id))
	s.dir = filepath.Join(cfg.CacheDir, hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("chunkstore: cache: %w", noSpace(err))
	}
	if err := s.open(ctx); err != nil {
		if s.lease != nil {
			s.lease.release(context.WithoutCancel(ctx))
		}
		if s.jf != nil {
			s.jf.Close()
		}
		s.newDirty.close()
		s.newPartial.close()
		return nil, fmt.Errorf("chunkstore: open s3://%s/%s: %w", cfg.Bucket, cfg.Prefix, err)
	}
	bgctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.bgctx, s.stop = bgctx, cancel
	s.mu.Unlock()
	if !cfg.ReadOnly {
		s.wg.Add(1)
		go s.writeBackLoop(bgctx)
		s.lease.start(bgctx, &s.wg, func(err error) {
			s.mu.Lock()
			s.leaseErr = err
			s.mu.Unlock()
		})
	}
	return s, nil
}

func (s *Store) open(ctx context.Context) error {
	// The remote manifest first: it also tells a missing bucket or refused
	// credentials apart before anything is written.
	raw, etag, err := s.b.get(ctx, manifestKey, nil, 1<<31)
	var remote *Manifest
	switch {
	case errors.Is(err, errNotFound):
	case err != nil:
		return err
	default:
		if remote, err = decodeManifest(raw); err != nil {
			return err
		}
	}
	if !s.cfg.ReadOnly {
		s.lease = &lease{b: s.b, owner: s.cfg.Owner, ttl: s.cfg.LeaseTTL, log: s.log}
		if err := s.lease.acquire(ctx); err != nil {
			return err
		}
		// Someone may have published between our read and the lease.
		if e2, err := s.b.head(ctx, manifestKey); err == nil && e2 != etag {
			return s.open2(ctx)
		}
	}
	return s.adopt(ctx, remote, etag)
}

// open2 re-reads the manifest once the lease is held.
func (s *Store) open2(ctx context.Context) error {
	raw, etag, err := s.b.get(ctx, manifestKey, nil, 1<<31)
	if err != nil {
		return err
	}
	remote, err := decodeManifest(raw)
	if err != nil {
		return err
	}
	return s.adopt(ctx, remote, etag)
}

// adopt reconciles the remote manifest with the local state and recovers.
func (s *Store) adopt(ctx context.Context, remote *Manifest, etag string) error {
	local, err := loadLocal(s.dir)
	if err != nil {
		return err
	}
	if local != nil && local.ID != s.id {
		return fmt.Errorf("cache directory %s belongs to %q", s.dir, local.ID)
	}
	dirtyFiles, err := os.ReadDir(filepath.Join(s.dir, "dirty"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	unpublished := local != nil && (local.Changes > 0 || len(dirtyFiles) > 0)
	switch {
	case remote == nil && local == nil:
		if !s.cfg.Create {
			return ErrNoStore
		}
		s.m = newManifest(s.cfg)
		s.changes = 1
		s.created = true
	case remote == nil:
		if local.Manifest.Generation > 0 {
			return fmt.Errorf("%w: the bucket has no manifest but the cache knew generation %d (deleted by someone else?); move the cache directory %s away to start afresh",
				ErrConflict, local.Manifest.Generation, s.dir)
		}
		s.m, s.changes, s.pubETag = local.Manifest, local.Changes, ""
	case local != nil && local.Manifest.Generation == remote.Generation && (local.ETag == etag || local.ETag == ""):
		s.m, s.changes, s.pubETag = local.Manifest, local.Changes, etag
	case unpublished:
		return fmt.Errorf("%w: the cache %s holds unpublished changes made on generation %d, but the bucket is at generation %d; move the cache directory away to drop them",
			ErrConflict, s.dir, local.Manifest.Generation, remote.Generation)
	default:
		s.m, s.changes, s.pubETag = remote, 0, etag
		for _, f := range dirtyFiles {
			os.Remove(filepath.Join(s.dir, "dirty", f.Name()))
		}
		dirtyFiles = nil
	}
	if remote != nil {
		s.pubRefs = refs(remote.Inodes)
	} else {
		s.pubRefs = map[string]struct{}{}
	}
	s.cs = s.m.ChunkSize
	if s.cfg.Kind != "" && s.cfg.Kind != s.m.Kind {
		return fmt.Errorf("the store is a %s, not a %s", s.m.Kind, s.cfg.Kind)
	}
	if s.cfg.Parallelism > int(s.cfg.MaxMemory/s.cs) {
		return fmt.Errorf("%d transfers × %d-byte chunks exceed the memory bound %d: %w",
			s.cfg.Parallelism, s.cs, s.cfg.MaxMemory, s3client.ErrMemoryBound)
	}
	s.bufs = make(chan []byte, s.cfg.Parallelism)
	for range s.cfg.Parallelism {
		s.bufs <- nil
	}
	if s.cache, err = openCache(s.dir, s.cfg.CacheSize); err != nil {
		return err
	}
	if !s.cfg.ReadOnly {
		s.newDirty = openNewFiles(filepath.Join(s.dir, "dirty"))
		s.newPartial = openNewFiles(filepath.Join(s.dir, "partial"))
	}
	if s.cfg.CacheSize < 4*s.cs {
		// Each chunk read needs a whole chunk in the cache, so chunks
		// evict each other; dirty data counts only the bytes written.
		s.log.Warn("chunkstore: the cache holds fewer than 4 chunks: reads will evict each other's chunks; a cache of 8 chunks or more is better",
			"cache_size", s.cfg.CacheSize, "chunk_size", s.cs)
	}
	// Dirty chunk files are the newest data of their chunks.
	partials := map[string]bool{}
	for _, f := range dirtyFiles {
		var ino uint64
		var idx int64
		path := filepath.Join(s.dir, "dirty", f.Name())
		in := (*Inode)(nil)
		if _, err := fmt.Sscanf(f.Name(), "%d.%d", &ino, &idx); err == nil {
			in = s.m.Inodes[ino]
		}
		if in == nil || idx*s.cs >= in.Size {
			os.Remove(path)
			continue
		}
		info, err := f.Info()
		if err != nil {
			return err
		}
		// Bytes past the size are a write that died before its size was
		// recorded: not acknowledged, dropped, as on a local disk.
		if bound := in.Size - idx*s.cs; info.Size() > bound {
			if err := os.Truncate(path, bound); err != nil {
				return err
			}
		}
		d := &dirtyChunk{since: info.ModTime(), ver: 1}
		// A partial chunk's record says which bytes of the file are its
		// own; the rest comes from its base at the upload below.
		if d.base, d.miss, err = s.loadMiss(ino, idx); err != nil {
			return err
		}
		if d.miss = cut(d.miss, min(s.cs, in.Size-idx*s.cs)); len(d.miss) == 0 {
			d.base = ""
		}
		partials[filepath.Base(s.partialPath(ino, idx))] = true
		s.istate(ino).dirty[idx] = d
		d.flen = min(info.Size(), in.Size-idx*s.cs)
		s.recharge(d)
		s.recovered.Add(1)
	}
	// Records without a dirty file: the chunk died before its file was
	// made, or was completed or dropped before its record went.
	recs, _ := os.ReadDir(filepath.Join(s.dir, "partial"))
	for _, f := range recs {
		if !partials[f.Name()] {
			os.Remove(filepath.Join(s.dir, "partial", f.Name()))
		}
	}
	if s.recovered.Load() > 0 {
		s.log.Info("chunkstore: found dirty chunks from a previous run; uploading", "chunks", s.recovered.Load())
	}
	s.mu.Lock()
	err = s.writeSnapshot()
	var orphans []uint64
	for ino, in := range s.m.Inodes {
		if in.Nlink == 0 && ino != RootIno && ino != VolumeIno {
			orphans = append(orphans, ino)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	// Files unlinked while open when the last gateway died are removed.
	for _, ino := range orphans {
		if err := s.removeInode(ino); err != nil {
			return err
		}
	}
	if s.cfg.ReadOnly {
		return nil
	}
	// A recovered partial chunk whose base is gone does not stop the
	// store (it is logged, kept and refused upload: loseBase).
	if err := s.Sync(ctx); err != nil && !errors.Is(err, ErrBaseLost) {
		return err
	}
	return s.sweep(ctx)
}

func newManifest(cfg Config) *Manifest {
	now := time.Now().UnixNano()
	m := &Manifest{Format: Format, Kind: cfg.Kind, ChunkSize: cfg.ChunkSize, NextIno: 3, Inodes: map[uint64]*Inode{}}
	if cfg.Kind == KindFS {
		m.Inodes[RootIno] = &Inode{Ino: RootIno, Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Atime: now, Mtime: now, Ctime: now,
			Parent: RootIno, Ents: map[string]uint64{}}
	} else {
		m.Inodes[VolumeIno] = &Inode{Ino: VolumeIno, Mode: syscall.S_IFREG | 0o600, Nlink: 1, Size: cfg.VolumeSize,
			Atime: now, Mtime: now, Ctime: now}
	}
	return m
}

// sweep deletes chunk objects that the published manifest does not name:
// leftovers of uploads or deletions a crash interrupted. It runs at Open,
// after the recovery publish, under the lease, so nothing unpublished of
// ours is in the bucket and nobody else writes.
func (s *Store) sweep(ctx context.Context) error {
	s.mu.Lock()
	live := refs(s.m.Inodes)
	s.mu.Unlock()
	var garbage []string
	err := s.b.list(ctx, chunkPrefix, 100_000_000, func(key string, _ int64) error {
		h := key[strings.LastIndexByte(key, '/')+1:]
		if _, ok := live[h]; !ok {
			garbage = append(garbage, key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list chunks: %w", err)
	}
	for _, k := range garbage {
		if err := s.b.del(ctx, k); err != nil {
			s.log.Warn("chunkstore: could not delete an unreferenced chunk", "key", k, "err", err)
			continue
		}
		s.deleted.Add(1)
	}
	return nil
}

// Close writes back everything, publishes, releases the lease and stops
// the background work. The store must not be used afterwards.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	var err error
	if !s.cfg.ReadOnly {
		err = s.Sync(ctx)
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	s.flushMu.Lock()
	s.mu.Lock()
	// Only chunks whose base is lost left unpublished: everything else
	// is published; they stay in the cache for the next Open.
	lostOnly := errors.Is(err, ErrBaseLost)
	if err == nil || lostOnly {
		if serr := s.writeSnapshot(); serr != nil {
			err, lostOnly = serr, false
		}
	}
	for _, st := range s.st {
		for _, d := range st.dirty {
			d.closeFiles()
		}
	}
	if s.jf != nil {
		s.jf.Close()
		s.jf = nil
	}
	s.mu.Unlock()
	s.flushMu.Unlock()
	s.newDirty.close()
	s.newPartial.close()
	if s.lease != nil && (err == nil || lostOnly) {
		// With unpublished data left, the lease stays until it expires,
		// so nobody else starts from the older manifest meanwhile (but
		// a lost base will not come back by waiting).
		s.lease.release(context.WithoutCancel(ctx))
	}
	return err
}

// Abandon stops the store without writing anything back or releasing the
// lease, as if the process had been killed (crash tests).
func (s *Store) Abandon() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	s.mu.Lock()
	for _, st := range s.st {
		for _, d := range st.dirty {
			d.closeFiles()
		}
	}
	if s.jf != nil {
		s.jf.Close()
		s.jf = nil
	}
	s.mu.Unlock()
	s.newDirty.close()
	s.newPartial.close()
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	return Stats{Hits: s.hits.Load(), Misses: s.misses.Load(), Prefetched: s.prefetched.Load(),
		PrefetchHits: s.prefetchHits.Load(), Uploads: s.uploads.Load(), Downloads: s.downloads.Load(),
		UploadBytes: s.upBytes.Load(), DownloadBytes: s.downBytes.Load(), Publishes: s.publishes.Load(),
		Deleted: s.deleted.Load(), Recovered: s.recovered.Load(),
		Writes: s.writes.Load(), WriteNanos: s.writeNanos.Load(), WriteMaxNanos: s.writeMax.Load(),
		NewChunks: s.newChunks.Load(), NewChunkNanos: s.newChunkNanos.Load(), JournalNanos: s.journalNanos.Load()}
}

// ChunkSize is the store's chunk size.
func (s *Store) ChunkSize() int64 { return s.cs }

// Kind is KindFS or KindVolume.
func (s *Store) Kind() string { return s.m.Kind }

// CacheDir is the store's own directory inside Config.CacheDir.
func (s *Store) CacheDir() string { return s.dir }

// Generation is the generation of the last manifest published or loaded.
func (s *Store) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Generation
}

// check fails writes once the store is closed, read-only or the lease lost.
func (s *Store) writable() error {
	switch {
	case s.closed:
		return ErrClosed
	case s.cfg.ReadOnly:
		return ErrReadOnly
	case s.leaseErr != nil:
		return fmt.Errorf("%w: lease lost: %v", ErrReadOnly, s.leaseErr)
	}
	return nil
}

// getBuf takes one transfer buffer (the memory bound) and returns it.
func (s *Store) getBuf(ctx context.Context) ([]byte, error) {
	select {
	case b := <-s.bufs:
		if b == nil {
			b = make([]byte, s.cs)
		}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Store) putBuf(b []byte) { s.bufs <- b[:cap(b)] }

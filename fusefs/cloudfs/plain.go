package cloudfs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Plain mode (`tristore mount --plain s3://bucket[/prefix] DIR`) shows a
// bucket of ordinary objects as a tree, like mountpoint-s3: a key's
// slashes are directories, listing is ListObjectsV2 with a delimiter (no
// data read), reads are ranged GETs of plainBlock bytes pinned to the
// ETag seen at open (an object replaced meanwhile is ESTALE, never a mix).
// It is read-mostly: a file can be created or rewritten whole (the new
// bytes are spooled in the cache directory and PUT at close or fsync; an
// existing object written without O_TRUNC is first downloaded whole), and
// removed; what objects cannot do is refused: rename (EXDEV, so mv copies),
// links (EPERM), chmod/chown (EPERM).

const plainBlock = 1 << 20

// PlainOptions configure a plain mount.
type PlainOptions struct {
	Bucket, Prefix string // Prefix "" or "dir/"
	Spool          string // directory for files being written
	ReadOnly       bool   // refuse every change with EROFS
	AttrTimeout    time.Duration
	FsName         string
	Debug          bool
	Log            *slog.Logger
}

// PlainFS is a mounted bucket of ordinary objects.
type PlainFS struct {
	api *awss3.Client
	o   PlainOptions
	log *slog.Logger
	uid uint32
	gid uint32
}

// NewPlain wraps a bucket.
func NewPlain(api *awss3.Client, o PlainOptions) (*PlainFS, error) {
	if o.Prefix != "" && !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.AttrTimeout == 0 {
		o.AttrTimeout = time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.FsName == "" {
		o.FsName = "s3://" + o.Bucket + "/" + o.Prefix
	}
	if err := os.MkdirAll(o.Spool, 0o700); err != nil {
		return nil, fmt.Errorf("cloudfs: spool: %w", err)
	}
	// The bucket must exist and the credentials work: one listing.
	p := &PlainFS{api: api, o: o, log: o.Log, uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}
	_, err := api.ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: &o.Bucket, Prefix: &o.Prefix, MaxKeys: aws.Int32(1)})
	if err != nil {
		return nil, fmt.Errorf("cloudfs: list s3://%s/%s: %w", o.Bucket, o.Prefix, err)
	}
	return p, nil
}

// Mount mounts the bucket on dir.
func (p *PlainFS) Mount(dir string) (*fuse.Server, error) {
	t := p.o.AttrTimeout
	mo := fuse.MountOptions{FsName: p.o.FsName, Name: "tristore", MaxWrite: 1 << 20, MaxReadAhead: 1 << 20,
		Debug: p.o.Debug, DisableXAttrs: true, Options: []string{"default_permissions"}}
	if os.Geteuid() == 0 {
		mo.AllowOther, mo.DirectMount = true, true
	}
	root := &pnode{p: p, dir: true, mtime: time.Now()}
	return fs.Mount(dir, root, &fs.Options{MountOptions: mo, EntryTimeout: &t, AttrTimeout: &t})
}

// errno maps S3 errors for the kernel (one place for plain mode).
func (p *PlainFS) errno(err error) syscall.Errno {
	var re *smithyhttp.ResponseError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound:
		return syscall.ENOENT
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusPreconditionFailed:
		p.log.Warn("cloudfs: object changed while open", "err", err)
		return syscall.ESTALE
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusForbidden:
		p.log.Error("cloudfs: access denied", "err", err)
		return syscall.EACCES
	}
	p.log.Error("cloudfs: I/O error", "err", err)
	return syscall.EIO
}

// pnode is an object (file) or a key prefix (directory).
type pnode struct {
	fs.Inode
	p   *PlainFS
	key string // relative to the mount's prefix; a directory's ends in "/" (root: "")
	dir bool

	mu    sync.Mutex
	size  int64
	mtime time.Time
	etag  string
	// kids caches the last listing briefly so the lookups that follow a
	// readdir (ls -l) cost no request.
	kids     map[string]child
	kidsTime time.Time
	writer   *phandle // newest open for writing
}

type child struct {
	dir   bool
	size  int64
	mtime time.Time
	etag  string
}

func keyIno(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64() | 1<<63 // never 1, the root
}

func (n *pnode) fill(out *fuse.Attr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dir {
		out.Mode = syscall.S_IFDIR | 0o755
		out.Nlink = 2
	} else {
		out.Mode = syscall.S_IFREG | 0o644
		out.Nlink = 1
		out.Size = uint64(n.size)
		out.Blocks = (out.Size + 511) / 512
	}
	out.Blksize = plainBlock
	out.Owner = fuse.Owner{Uid: n.p.uid, Gid: n.p.gid}
	out.SetTimes(&n.mtime, &n.mtime, &n.mtime)
}

func (n *pnode) full() string { return n.p.o.Prefix + n.key }

// list reads the directory: common prefixes are directories, objects
// files; the directory's own marker object ("dir/") is not an entry.
func (n *pnode) list(ctx context.Context) (map[string]child, error) {
	n.mu.Lock()
	if n.kids != nil && time.Since(n.kidsTime) < n.p.o.AttrTimeout {
		k := n.kids
		n.mu.Unlock()
		return k, nil
	}
	n.mu.Unlock()
	pre := n.full()
	kids := map[string]child{}
	var token *string
	for page := 0; page < 100000; page++ {
		out, err := n.p.api.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &n.p.o.Bucket, Prefix: &pre,
			Delimiter: aws.String("/"), ContinuationToken: token})
		if err != nil {
			return nil, err
		}
		for _, cp := range out.CommonPrefixes {
			name := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), pre), "/")
			if okName(name) {
				kids[name] = child{dir: true, mtime: time.Now()}
			}
		}
		for _, o := range out.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), pre)
			if !okName(name) {
				continue
			}
			if _, isDir := kids[name]; isDir {
				continue // "a" and "a/x" both exist: the directory wins
			}
			kids[name] = child{size: aws.ToInt64(o.Size), mtime: aws.ToTime(o.LastModified), etag: aws.ToString(o.ETag)}
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			n.mu.Lock()
			n.kids, n.kidsTime = kids, time.Now()
			n.mu.Unlock()
			return kids, nil
		}
		token = out.NextContinuationToken
	}
	return nil, fmt.Errorf("list %s: too many pages", pre)
}

func okName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.Contains(name, "/") && len(name) <= 255
}

func (n *pnode) forget() {
	n.mu.Lock()
	n.kids = nil
	n.mu.Unlock()
}

func (n *pnode) newChild(ctx context.Context, name string, c child, out *fuse.EntryOut) *fs.Inode {
	key := n.key + name
	mode := uint32(syscall.S_IFREG)
	if c.dir {
		key += "/"
		mode = syscall.S_IFDIR
	}
	node := &pnode{p: n.p, key: key, dir: c.dir, size: c.size, mtime: c.mtime, etag: c.etag}
	node.fill(&out.Attr)
	ch := n.NewInode(ctx, node, fs.StableAttr{Mode: mode, Ino: keyIno(key)})
	// An inode the kernel already knows keeps its node: refresh it.
	if old, ok := ch.Operations().(*pnode); ok && old != node {
		old.mu.Lock()
		old.size, old.mtime, old.etag = c.size, c.mtime, c.etag
		old.mu.Unlock()
	}
	return ch
}

// Lookup finds name: from a fresh listing of this directory, else one
// HEAD (a file) and one short listing (a directory).
func (n *pnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !okName(name) {
		return nil, syscall.ENOENT
	}
	n.mu.Lock()
	c, ok := n.kids[name]
	fresh := n.kids != nil && time.Since(n.kidsTime) < n.p.o.AttrTimeout
	n.mu.Unlock()
	if fresh {
		if !ok {
			return nil, syscall.ENOENT
		}
		return n.newChild(ctx, name, c, out), 0
	}
	key := n.full() + name
	dp := key + "/"
	lo, err := n.p.api.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &n.p.o.Bucket, Prefix: &dp, MaxKeys: aws.Int32(1)})
	if err != nil {
		return nil, n.p.errno(err)
	}
	if len(lo.Contents) > 0 {
		return n.newChild(ctx, name, child{dir: true, mtime: time.Now()}, out), 0
	}
	h, err := n.p.api.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &n.p.o.Bucket, Key: &key})
	if err != nil {
		return nil, n.p.errno(err)
	}
	return n.newChild(ctx, name, child{size: aws.ToInt64(h.ContentLength), mtime: aws.ToTime(h.LastModified), etag: aws.ToString(h.ETag)}, out), 0
}

// Readdir lists the prefix (no object data is read).
func (n *pnode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	n.forget()
	kids, err := n.list(ctx)
	if err != nil {
		return nil, n.p.errno(err)
	}
	ents := make([]fuse.DirEntry, 0, len(kids))
	for name, c := range kids {
		mode, key := uint32(syscall.S_IFREG), n.key+name
		if c.dir {
			mode, key = syscall.S_IFDIR, key+"/"
		}
		ents = append(ents, fuse.DirEntry{Name: name, Mode: mode, Ino: keyIno(key)})
	}
	return fs.NewListDirStream(ents), 0
}

// Getattr reports what the listing or the last HEAD said.
func (n *pnode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*phandle); ok && h.spool != nil {
		h.mu.Lock()
		fi, err := h.spool.Stat()
		h.mu.Unlock()
		if err == nil {
			n.mu.Lock()
			n.size = fi.Size()
			n.mu.Unlock()
		}
	}
	n.fill(&out.Attr)
	return 0
}

// Setattr: a size change on a file being written truncates its spool;
// times are accepted (an object's mtime is its upload time); mode and
// owner cannot be stored on a plain object (EPERM).
func (n *pnode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := in.GetMode(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetUID(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetGID(); ok {
		return syscall.EPERM
	}
	if sz, ok := in.GetSize(); ok {
		if n.dir {
			return syscall.EISDIR
		}
		h, ok := fh.(*phandle)
		if !ok || h.spool == nil {
			// open(O_TRUNC) truncates without naming the handle: the
			// newest writer of this file is the one.
			n.mu.Lock()
			h = n.writer
			n.mu.Unlock()
		}
		if h == nil {
			return syscall.EPERM // truncate(2) with no open writer to upload the result
		}
		if e := h.truncate(ctx, int64(sz)); e != 0 {
			return e
		}
		n.mu.Lock()
		n.size = int64(sz)
		n.mu.Unlock()
	}
	n.fill(&out.Attr)
	return 0
}

// phandle is one open file: reads go to ranged GETs pinned to the ETag,
// writes to a spool file uploaded whole.
type phandle struct {
	n    *pnode
	etag string
	size int64

	mu     sync.Mutex
	block  []byte // last block read, at blockOff
	boff   int64
	spool  *os.File
	dirty  bool
	loaded bool // spool holds the object's bytes (or was truncated)
}

// Open refreshes the attributes (close-to-open) and pins the ETag.
func (n *pnode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.dir {
		return nil, 0, syscall.EISDIR
	}
	key := n.full()
	hd, err := n.p.api.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &n.p.o.Bucket, Key: &key})
	if err != nil {
		return nil, 0, n.p.errno(err)
	}
	n.mu.Lock()
	n.size, n.mtime, n.etag = aws.ToInt64(hd.ContentLength), aws.ToTime(hd.LastModified), aws.ToString(hd.ETag)
	h := &phandle{n: n, etag: n.etag, size: n.size}
	n.mu.Unlock()
	if flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 {
		if n.p.o.ReadOnly {
			return nil, 0, syscall.EROFS
		}
		if err := h.openSpool(); err != nil {
			return nil, 0, n.p.errno(err)
		}
		n.mu.Lock()
		n.writer = h
		n.mu.Unlock()
		return h, fuse.FOPEN_DIRECT_IO, 0
	}
	return h, fuse.FOPEN_KEEP_CACHE, 0
}

// Create makes a new (empty) object, PUT at close.
func (n *pnode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.p.o.ReadOnly {
		return nil, nil, 0, syscall.EROFS
	}
	if !okName(name) {
		return nil, nil, 0, syscall.EINVAL
	}
	ch := n.newChild(ctx, name, child{mtime: time.Now()}, out)
	node := ch.Operations().(*pnode)
	h := &phandle{n: node, loaded: true, dirty: true}
	if err := h.openSpool(); err != nil {
		return nil, nil, 0, n.p.errno(err)
	}
	node.mu.Lock()
	node.writer = h
	node.mu.Unlock()
	n.forget()
	return ch, h, fuse.FOPEN_DIRECT_IO, 0
}

func (h *phandle) openSpool() error {
	f, err := os.CreateTemp(h.n.p.o.Spool, "put-")
	if err != nil {
		return err
	}
	os.Remove(f.Name()) // anonymous: nothing left behind after a crash
	h.spool = f
	return nil
}

// load fills the spool with the object's current bytes before a partial
// rewrite; the caller holds h.mu.
func (h *phandle) load(ctx context.Context) error {
	if h.loaded {
		return nil
	}
	h.loaded = true
	if h.size == 0 {
		return nil
	}
	key := h.n.full()
	out, err := h.n.p.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: &h.n.p.o.Bucket, Key: &key, IfMatch: &h.etag})
	if err != nil {
		h.loaded = false
		return err
	}
	defer out.Body.Close()
	if _, err := io.Copy(io.NewOffsetWriter(h.spool, 0), out.Body); err != nil {
		h.loaded = false
		return err
	}
	return nil
}

func (h *phandle) truncate(ctx context.Context, size int64) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.spool == nil {
		return syscall.EBADF
	}
	if size != 0 {
		if err := h.load(ctx); err != nil {
			return h.n.p.errno(err)
		}
	}
	h.loaded = true
	if err := h.spool.Truncate(size); err != nil {
		return syscall.EIO
	}
	h.dirty = true
	return 0
}

// Read serves a read-only open from aligned blocks, a writer from its spool.
func (n *pnode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(*phandle)
	if !ok {
		return nil, syscall.EBADF
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.spool != nil {
		if err := h.load(ctx); err != nil {
			return nil, n.p.errno(err)
		}
		c, err := h.spool.ReadAt(dest, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, syscall.EIO
		}
		return fuse.ReadResultData(dest[:c]), 0
	}
	total := 0
	for total < len(dest) && off < h.size {
		bo := off / plainBlock * plainBlock
		if h.block == nil || h.boff != bo {
			l := min(plainBlock, h.size-bo)
			buf := make([]byte, l)
			key, rng := n.full(), fmt.Sprintf("bytes=%d-%d", bo, bo+l-1)
			out, err := n.p.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: &n.p.o.Bucket, Key: &key, Range: &rng, IfMatch: &h.etag})
			if err != nil {
				return nil, n.p.errno(err)
			}
			_, err = io.ReadFull(out.Body, buf)
			out.Body.Close()
			if err != nil {
				return nil, n.p.errno(err)
			}
			h.block, h.boff = buf, bo
		}
		c := copy(dest[total:], h.block[off-bo:])
		total += c
		off += int64(c)
	}
	return fuse.ReadResultData(dest[:total]), 0
}

// Write goes to the spool (an existing object is first loaded whole).
func (n *pnode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := fh.(*phandle)
	if !ok || h.spool == nil {
		return 0, syscall.EBADF
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.load(ctx); err != nil {
		return 0, n.p.errno(err)
	}
	c, err := h.spool.WriteAt(data, off)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return uint32(c), syscall.ENOSPC
		}
		return uint32(c), syscall.EIO
	}
	h.dirty = true
	n.mu.Lock()
	n.size = max(n.size, off+int64(c))
	n.mu.Unlock()
	return uint32(c), 0
}

// upload PUTs the spool as the object; the caller holds h.mu.
func (h *phandle) upload(ctx context.Context) syscall.Errno {
	if h.spool == nil || !h.dirty {
		return 0
	}
	fi, err := h.spool.Stat()
	if err != nil {
		return syscall.EIO
	}
	key := h.n.full()
	out, err := h.n.p.api.PutObject(ctx, &awss3.PutObjectInput{Bucket: &h.n.p.o.Bucket, Key: &key,
		Body: io.NewSectionReader(h.spool, 0, fi.Size()), ContentLength: aws.Int64(fi.Size())})
	if err != nil {
		return h.n.p.errno(err)
	}
	h.dirty = false
	h.etag = aws.ToString(out.ETag)
	h.n.mu.Lock()
	h.n.size, h.n.mtime, h.n.etag = fi.Size(), time.Now(), h.etag
	h.n.mu.Unlock()
	return 0
}

// Flush (close) and Fsync upload a written file whole.
func (n *pnode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	h, ok := fh.(*phandle)
	if !ok {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.upload(ctx)
}

// Fsync: see Flush.
func (n *pnode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	return n.Flush(ctx, fh)
}

// Release drops the spool.
func (n *pnode) Release(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	if h, ok := fh.(*phandle); ok && h.spool != nil {
		h.spool.Close()
		n.mu.Lock()
		if n.writer == h {
			n.writer = nil
		}
		n.mu.Unlock()
	}
	return 0
}

// Unlink deletes the object.
func (n *pnode) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.p.o.ReadOnly {
		return syscall.EROFS
	}
	key := n.full() + name
	if _, err := n.p.api.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &n.p.o.Bucket, Key: &key}); err != nil {
		return n.p.errno(err)
	}
	_, err := n.p.api.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &n.p.o.Bucket, Key: &key})
	n.forget()
	return n.p.errno(err)
}

// Mkdir stores a directory marker object "name/".
func (n *pnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.p.o.ReadOnly {
		return nil, syscall.EROFS
	}
	if !okName(name) {
		return nil, syscall.EINVAL
	}
	key := n.full() + name + "/"
	if _, err := n.p.api.PutObject(ctx, &awss3.PutObjectInput{Bucket: &n.p.o.Bucket, Key: &key, Body: strings.NewReader(""), ContentLength: aws.Int64(0)}); err != nil {
		return nil, n.p.errno(err)
	}
	n.forget()
	return n.newChild(ctx, name, child{dir: true, mtime: time.Now()}, out), 0
}

// Rmdir removes an empty directory's marker; a non-empty one is ENOTEMPTY.
func (n *pnode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if n.p.o.ReadOnly {
		return syscall.EROFS
	}
	dp := n.full() + name + "/"
	lo, err := n.p.api.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &n.p.o.Bucket, Prefix: &dp, MaxKeys: aws.Int32(2)})
	if err != nil {
		return n.p.errno(err)
	}
	for _, o := range lo.Contents {
		if aws.ToString(o.Key) != dp {
			return syscall.ENOTEMPTY
		}
	}
	if len(lo.Contents) == 0 {
		return syscall.ENOENT
	}
	_, err = n.p.api.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &n.p.o.Bucket, Key: &dp})
	n.forget()
	return n.p.errno(err)
}

// Rename cannot be atomic on plain objects: EXDEV makes mv copy and delete.
func (n *pnode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EXDEV
}

// Symlink and Link: plain objects have neither.
func (n *pnode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

// Link: see Symlink.
func (n *pnode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

// Mknod: only regular files exist in a bucket.
func (n *pnode) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

// Allocate: see Node.Allocate.
func (n *pnode) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	return syscall.EOPNOTSUPP
}

var (
	_ fs.NodeLookuper  = (*pnode)(nil)
	_ fs.NodeReaddirer = (*pnode)(nil)
	_ fs.NodeGetattrer = (*pnode)(nil)
	_ fs.NodeSetattrer = (*pnode)(nil)
	_ fs.NodeOpener    = (*pnode)(nil)
	_ fs.NodeCreater   = (*pnode)(nil)
	_ fs.NodeReader    = (*pnode)(nil)
	_ fs.NodeWriter    = (*pnode)(nil)
	_ fs.NodeFlusher   = (*pnode)(nil)
	_ fs.NodeFsyncer   = (*pnode)(nil)
	_ fs.NodeReleaser  = (*pnode)(nil)
	_ fs.NodeUnlinker  = (*pnode)(nil)
	_ fs.NodeMkdirer   = (*pnode)(nil)
	_ fs.NodeRmdirer   = (*pnode)(nil)
	_ fs.NodeRenamer   = (*pnode)(nil)
	_ fs.NodeSymlinker = (*pnode)(nil)
	_ fs.NodeLinker    = (*pnode)(nil)
	_ fs.NodeMknoder   = (*pnode)(nil)
	_ fs.NodeAllocater = (*pnode)(nil)
)

package nfstree

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/client/nfs"
)

// Open files and the three access forms (seed 000, Table I):
//
//	formDirect (O_DIRECT): FOPEN_DIRECT_IO, so the kernel neither caches
//	  nor reads ahead; a write(2) of up to wsize bytes is one FILE_SYNC
//	  WRITE, a larger one is UNSTABLE WRITEs in parallel plus a COMMIT, so
//	  it is stable before write(2) returns either way (what the Linux NFS
//	  client does for O_DIRECT).
//	formSync (O_SYNC / O_DSYNC): page cache and read-ahead for reads; each
//	  write(2) is sent at once as FILE_SYNC (DATA_SYNC for O_DSYNC).
//	formDefault: page cache and read-ahead; write-back. Writes collect in
//	  a buffer of Options.WriteBehind bytes (contiguous appends grow it, any
//	  other write sends it first), are sent UNSTABLE in parallel wsize
//	  chunks, and COMMITted on fsync(2), on close(2) (FUSE flush) and when
//	  Options.CommitEvery bytes are uncommitted. Data stays in memory until
//	  its COMMIT succeeds under the same write verifier; if the verifier
//	  changed (server restart), it is all sent again.

type form int

const (
	formDefault form = iota
	formSync
	formDirect
)

type handle struct {
	n    *Node
	form form
	how  nfs.Stable // for formSync

	mu   sync.Mutex // serialises this handle's I/O
	buf  []byte     // write-behind buffer (formDefault)
	bufO uint64     // file offset of buf[0]
	un   Unstable
	err  syscall.Errno // a failed send, reported at the next flush/fsync
	// lastAfter is the post-op attributes of the last stable WRITE.
	lastAfter *nfs.Attr
	// cred is the opener's identity (CallerCreds), used for all I/O.
	cred    nfs.Cred
	hasCred bool

	// Full write-behind buffers are sent in the background (at most
	// maxAsync at once) so the writer keeps filling the next one. They
	// cover disjoint, ascending ranges: any other write drains them first.
	bgSem chan struct{}
	bgWG  sync.WaitGroup
	bgMu  sync.Mutex
	bgErr error
}

const maxAsync = 2

func (n *Node) newHandle(ctx context.Context, flags uint32, a *nfs.Attr) (*handle, uint32) {
	h := &handle{n: n, form: formDefault}
	h.cred, h.hasCred = nfs.CredFrom(ctx)
	switch n.fsys.opts.Form {
	case "direct":
		flags |= syscall.O_DIRECT
	case "sync":
		flags |= syscall.O_SYNC
	}
	var fuseFlags uint32
	switch {
	case flags&syscall.O_DIRECT != 0:
		h.form = formDirect
		fuseFlags |= fuse.FOPEN_DIRECT_IO
	case flags&syscall.O_SYNC == syscall.O_SYNC:
		h.form, h.how = formSync, nfs.FileSync
	case flags&syscall.O_DSYNC != 0:
		h.form, h.how = formSync, nfs.DataSync
	}
	n.mu.Lock()
	n.opens++
	if h.form != formDirect && a != nil && a.Size == n.seenSize && a.Mtime.Equal(n.seenMtime) {
		// Close-to-open: unchanged since we last looked, keep the cache.
		fuseFlags |= fuse.FOPEN_KEEP_CACHE
	}
	if a != nil {
		n.seenSize, n.seenMtime = a.Size, a.Mtime
	}
	if h.form == formDefault && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		h.un = n.fsys.c.NewUnstable(n.fh)
		if n.writers == nil {
			n.writers = map[*handle]struct{}{}
		}
		n.writers[h] = struct{}{}
	}
	n.mu.Unlock()
	return h, fuseFlags
}

// Open implements fs.NodeOpener; it revalidates attributes (close-to-open).
func (n *Node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ctx = n.fsys.cctx(ctx)
	if e := n.flushWriters(ctx); e != 0 {
		return nil, 0, e
	}
	a, err := n.fsys.c.Getattr(ctx, n.handle())
	if err != nil {
		return nil, 0, errno(err)
	}
	if flags&syscall.O_TRUNC != 0 && a.Size != 0 {
		wcc, err := n.fsys.c.Setattr(ctx, n.handle(), nfs.SetAttr{Size: new(uint64)}, nil)
		if err != nil {
			return nil, 0, errno(err)
		}
		if wcc.After != nil {
			a = wcc.After
		}
	}
	h, ff := n.newHandle(ctx, flags, a)
	return h, ff, 0
}

// Read implements fs.FileReader.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	ctx = h.ictx(ctx)
	// Reads must see data buffered by any open handle of this file (this
	// one included), so send those buffers first.
	if e := h.n.flushWriters(ctx); e != 0 {
		return nil, e
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.n.fsys.c.ReadAt(ctx, h.n.handle(), dest, uint64(off))
	if err != nil && n == 0 && !isEOF(err) {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Write implements fs.FileWriter.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ctx = h.ictx(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.n.fsys.c
	fh := h.n.handle()
	switch h.form {
	case formDirect:
		if len(data) <= int(c.Wsize()) {
			wr, err := c.Write(ctx, fh, uint64(off), data, nfs.FileSync)
			if err == nil && int(wr.Count) < len(data) {
				// Short write: send the rest the general way.
				err = h.writeStableRest(ctx, fh, uint64(off)+uint64(wr.Count), data[wr.Count:])
			}
			if err != nil {
				return 0, errno(err)
			}
			return uint32(len(data)), 0
		}
		u := c.NewUnstable(fh)
		if err := u.WriteAt(ctx, data, uint64(off), false); err != nil {
			return 0, errno(err)
		}
		if err := u.Commit(ctx); err != nil {
			return 0, errno(err)
		}
		return uint32(len(data)), 0
	case formSync:
		if err := h.writeStable(ctx, fh, uint64(off), data, h.how); err != nil {
			return 0, errno(err)
		}
		return uint32(len(data)), 0
	}
	// formDefault: write-behind.
	if h.un == nil {
		return 0, syscall.EBADF
	}
	if len(h.buf) > 0 && uint64(off) != h.bufO+uint64(len(h.buf)) {
		if e := h.sendLocked(ctx); e != 0 {
			return 0, e
		}
	}
	if len(h.buf) == 0 {
		// append grows the buffer as needed: small files stay small.
		h.bufO = uint64(off)
	}
	h.buf = append(h.buf, data...)
	if len(h.buf) >= h.n.fsys.opts.WriteBehind {
		if e := h.sendAsyncLocked(ctx); e != 0 {
			return 0, e
		}
	}
	return uint32(len(data)), 0
}

// sendAsyncLocked hands a full buffer to a background sender, waiting for
// a free slot (backpressure) and committing first if too much is
// uncommitted.
func (h *handle) sendAsyncLocked(ctx context.Context) syscall.Errno {
	if h.un.Pending() >= h.n.fsys.opts.CommitEvery {
		if e := h.drainLocked(); e != 0 {
			return e
		}
		if err := h.un.Commit(ctx); err != nil {
			h.err = errno(err)
			return h.err
		}
	}
	if h.bgSem == nil {
		h.bgSem = make(chan struct{}, maxAsync)
	}
	select {
	case h.bgSem <- struct{}{}:
	case <-ctx.Done():
		return syscall.EINTR
	}
	data, off := h.buf, h.bufO
	h.buf = nil
	h.bgWG.Add(1)
	// Detached from the FUSE request (ictx), and from its interrupt: the
	// request's channel is reused by later requests once this one ends.
	bctx := nfs.WithInterrupt(ctx, nil)
	go func() {
		defer h.bgWG.Done()
		defer func() { <-h.bgSem }()
		if err := h.un.WriteAt(bctx, data, off, true); err != nil {
			h.bgMu.Lock()
			if h.bgErr == nil {
				h.bgErr = err
			}
			h.bgMu.Unlock()
		}
	}()
	return 0
}

// drainLocked waits for background sends and reports their first error.
func (h *handle) drainLocked() syscall.Errno {
	h.bgWG.Wait()
	h.bgMu.Lock()
	err := h.bgErr
	h.bgErr = nil
	h.bgMu.Unlock()
	if err != nil {
		h.err = errno(err)
		return h.err
	}
	return 0
}

func (h *handle) writeStable(ctx context.Context, fh nfs.FH, off uint64, data []byte, how nfs.Stable) error {
	c := h.n.fsys.c
	for len(data) > 0 {
		n := min(len(data), int(c.Wsize()))
		wr, err := c.Write(ctx, fh, off, data[:n], how)
		if err != nil {
			return err
		}
		if wr.Count == 0 {
			return syscall.EIO
		}
		off += uint64(wr.Count)
		data = data[wr.Count:]
		h.lastAfter = wr.WCC.After
	}
	return nil
}

func (h *handle) writeStableRest(ctx context.Context, fh nfs.FH, off uint64, data []byte) error {
	return h.writeStable(ctx, fh, off, data, nfs.FileSync)
}

// sendBuffered sends buffered data without committing (before GETATTR).
func (h *handle) sendBuffered(ctx context.Context) syscall.Errno {
	ctx = h.ictx(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sendLocked(ctx)
}

// sendLocked sends the write-behind buffer UNSTABLE and commits early when
// too much is uncommitted. The buffer is handed to the UnstableWriter (it
// keeps it until COMMIT), so a fresh one is started.
func (h *handle) sendLocked(ctx context.Context) syscall.Errno {
	if h.un == nil {
		return 0
	}
	if e := h.drainLocked(); e != 0 {
		return e
	}
	if len(h.buf) == 0 {
		return 0
	}
	data, off := h.buf, h.bufO
	h.buf = nil
	if err := h.un.WriteAt(ctx, data, off, true); err != nil {
		h.err = errno(err)
		return h.err
	}
	if h.un.Pending() >= h.n.fsys.opts.CommitEvery {
		if err := h.un.Commit(ctx); err != nil {
			h.err = errno(err)
			return h.err
		}
	}
	return 0
}

// commitLocked sends and commits everything (fsync, close).
func (h *handle) commitLocked(ctx context.Context) syscall.Errno {
	if h.un == nil {
		return 0
	}
	if e := h.drainLocked(); e != 0 {
		return e
	}
	wrote := h.un.Pending() > 0 || len(h.buf) > 0
	single := h.un.Pending() == 0 && len(h.buf) > 0 && len(h.buf) <= int(h.n.fsys.c.Wsize())
	if single {
		// Everything fits in one WRITE: send it FILE_SYNC and skip the
		// COMMIT (the Linux client's FLUSH_COND_STABLE).
		data, off := h.buf, h.bufO
		h.buf = h.buf[:0]
		if err := h.writeStable(ctx, h.n.handle(), off, data, nfs.FileSync); err != nil {
			h.err = errno(err)
			return h.err
		}
	} else if e := h.sendLocked(ctx); e != 0 {
		return e
	}
	before := h.un.Resends()
	err := h.un.Commit(ctx)
	h.n.fsys.resends.Add(int64(h.un.Resends() - before))
	if err != nil {
		h.err = errno(err)
		return h.err
	}
	if wrote && !single {
		h.n.fsys.commits.Add(1)
	}
	if e := h.err; e != 0 {
		h.err = 0
		return e
	}
	if !wrote {
		return 0
	}
	// Our own writes changed size and mtime: remember them so the next
	// open keeps the page cache. A FILE_SYNC flush brought the attributes
	// in its reply; otherwise ask.
	a, err := h.lastAfter, error(nil)
	if h.lastAfter == nil || !single {
		a, err = h.n.fsys.c.Getattr(ctx, h.n.handle())
	}
	h.lastAfter = nil
	if err == nil {
		h.n.mu.Lock()
		h.n.seenSize, h.n.seenMtime = a.Size, a.Mtime
		h.n.mu.Unlock()
	}
	return 0
}

// Flush implements fs.FileFlusher (called on every close(2) of the fd).
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	ctx = h.ictx(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.commitLocked(ctx)
}

// Fsync implements fs.FileFsyncer.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ctx = h.ictx(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.form != formDefault {
		return 0 // every write was already stable
	}
	return h.commitLocked(ctx)
}

// Release implements fs.FileReleaser. Flush already committed; this only
// retries if that failed and unregisters the handle.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	ctx = h.ictx(ctx)
	h.mu.Lock()
	e := h.commitLocked(ctx)
	h.mu.Unlock()
	n := h.n
	n.mu.Lock()
	delete(n.writers, h)
	n.opens--
	var sillyDir nfs.FH
	var sillyName string
	if n.opens == 0 && n.sillyName != "" {
		sillyDir, sillyName = n.sillyDir, n.sillyName
		n.sillyDir, n.sillyName = nil, ""
	}
	n.mu.Unlock()
	if sillyName != "" {
		// Last close of a file unlinked while open: remove it for real.
		if err := n.fsys.c.Remove(context.WithoutCancel(ctx), sillyDir, sillyName); err != nil && e == 0 {
			e = errno(err)
		}
	}
	return e
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

var (
	_ fs.NodeOpener   = (*Node)(nil)
	_ fs.FileReader   = (*handle)(nil)
	_ fs.FileWriter   = (*handle)(nil)
	_ fs.FileFlusher  = (*handle)(nil)
	_ fs.FileFsyncer  = (*handle)(nil)
	_ fs.FileReleaser = (*handle)(nil)
)

// ictx gives I/O on this handle the opener's identity.
// Like cctx it passes FUSE interrupts on only for waits on a down server.
func (h *handle) ictx(ctx context.Context) context.Context {
	ctx = nfs.WithInterrupt(context.WithoutCancel(ctx), ctx.Done())
	if !h.hasCred {
		return ctx
	}
	return nfs.WithCred(ctx, h.cred)
}

package nfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
)

// Higher-level helpers: path walk, parallel chunked reads and writes, and
// the UNSTABLE-write bookkeeping (keep data until COMMIT, resend when the
// verifier changes) shared by WriteFile and the FUSE mount.

// LookupPath walks p (slash-separated, relative to the mounted root; "" or
// "/" is the root) with one LOOKUP per component. Symbolic links are not
// followed.
func (c *Client) LookupPath(ctx context.Context, p string) (FH, *Attr, error) {
	fh := c.Root()
	if fh == nil {
		return nil, nil, errors.New("nfs: not mounted")
	}
	clean := strings.Trim(path.Clean("/"+p), "/")
	if clean == "" {
		a, err := c.Getattr(ctx, fh)
		return fh, a, err
	}
	var attr *Attr
	for _, name := range strings.Split(clean, "/") {
		next, a, err := c.Lookup(ctx, fh, name)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p, err)
		}
		fh, attr = next, a
	}
	return c.withAttr(ctx, fh, attr)
}

// withAttr returns fh with attr, or, when the server left the optional
// post-op attributes out (attr is nil), with attributes from a GETATTR:
// callers of Create/Mkdir/LookupPath rely on getting both.
func (c *Client) withAttr(ctx context.Context, fh FH, attr *Attr) (FH, *Attr, error) {
	if attr != nil {
		return fh, attr, nil
	}
	a, err := c.Getattr(ctx, fh)
	if err != nil {
		return nil, nil, err
	}
	return fh, a, nil
}

// chunks splits [off, off+n) into pieces of at most size bytes and runs f
// on up to par of them at once; the first error stops the rest.
func chunks(ctx context.Context, off uint64, n int, size int, par int, f func(ctx context.Context, off uint64, lo, hi int) error) error {
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for lo := 0; lo < n; lo += size {
		hi := min(lo+size, n)
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(ctx, off+uint64(lo), lo, hi); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}(lo, hi)
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// ReadAt fills p from offset off with up to Options.Parallel READs in
// flight. It returns the number of bytes before end of file; n < len(p)
// only at end of file (with io.EOF).
func (c *Client) ReadAt(ctx context.Context, fh FH, p []byte, off uint64) (int, error) {
	rs := int(c.Rsize())
	var mu sync.Mutex
	end := len(p) // lowest offset (relative) at which EOF was seen
	err := chunks(ctx, off, len(p), rs, c.opts.Parallel, func(ctx context.Context, o uint64, lo, hi int) error {
		// While this READ waits behind the others in flight, its part of p
		// is faulted in on another goroutine (see prefault).
		go prefault(p[lo:hi])
		got := 0
		// A server may return fewer bytes than asked without EOF; ask again
		// for the rest (bounded: each round makes progress or stops).
		for tries := 0; lo+got < hi && tries < 64; tries++ {
			n, eof, err := c.Read(ctx, fh, o+uint64(got), p[lo+got:hi])
			if err != nil {
				return err
			}
			got += n
			if eof || n == 0 {
				mu.Lock()
				if lo+got < end {
					end = lo + got
				}
				mu.Unlock()
				return nil
			}
		}
		if lo+got < hi {
			return &OpError{Op: "READ", Err: fmt.Errorf("no progress at offset %d", o+uint64(got))}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if end < len(p) {
		return end, io.EOF
	}
	return len(p), nil
}

// ReadFile reads a whole file.
func (c *Client) ReadFile(ctx context.Context, fh FH) ([]byte, error) {
	a, err := c.Getattr(ctx, fh)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, a.Size)
	n, err := c.ReadAt(ctx, fh, buf, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return buf[:n], nil
}

// WriteFile writes data at offset 0 of fh with parallel WRITEs. With
// FileSync or DataSync every WRITE is stable when acknowledged; with
// Unstable the data is sent UNSTABLE and then committed (and resent if the
// server restarted in between), so either way it is stable on return.
// Data that fits in one WRITE is sent FILE_SYNC instead of UNSTABLE+COMMIT.
func (c *Client) WriteFile(ctx context.Context, fh FH, data []byte, how Stable) error {
	if how != Unstable || len(data) <= int(c.Wsize()) {
		// One WRITE is enough: make it FILE_SYNC and skip the COMMIT round
		// trip, as the Linux client does when everything fits in one
		// request (FLUSH_COND_STABLE).
		if how == Unstable {
			how = FileSync
		}
		return c.writeStable(ctx, fh, data, 0, how)
	}
	u := NewUnstable(c, fh)
	if err := u.WriteAt(ctx, data, 0, true); err != nil {
		return err
	}
	return u.Commit(ctx)
}

func (c *Client) writeStable(ctx context.Context, fh FH, data []byte, off uint64, how Stable) error {
	return chunks(ctx, off, len(data), int(c.Wsize()), c.opts.Parallel, func(ctx context.Context, o uint64, lo, hi int) error {
		return writeFull(ctx, o, data[lo:hi], how, func(ctx context.Context, off uint64, data []byte) (WriteResult, error) {
			return c.Write(ctx, fh, off, data, how)
		}, nil)
	})
}

// writeFull sends one chunk with write, repeating for short writes. Each
// reply's verifier and stability is passed to note (if not nil).
func writeFull(ctx context.Context, off uint64, data []byte, how Stable, write func(ctx context.Context, off uint64, data []byte) (WriteResult, error), note func(WriteResult)) error {
	for tries := 0; len(data) > 0; tries++ {
		if tries >= 64 {
			return &OpError{Op: "WRITE", Err: fmt.Errorf("no progress at offset %d", off)}
		}
		wr, err := write(ctx, off, data)
		if err != nil {
			return err
		}
		if how != Unstable && wr.Committed < how {
			return &OpError{Op: "WRITE", Err: fmt.Errorf("asked for %v, server committed only %v", how, wr.Committed)}
		}
		if note != nil {
			note(wr)
		}
		off += uint64(wr.Count)
		data = data[wr.Count:]
	}
	return nil
}

// UnstableWriter tracks UNSTABLE writes to one file until they are committed.
// The server may lose UNSTABLE data if it restarts before COMMIT; it says
// so by changing its write verifier. So UnstableWriter keeps every uncommitted
// byte and, when a WRITE or COMMIT reply carries a verifier different from
// the one the data was written under, resends it all and commits again.
type UnstableWriter struct {
	ops UnstableOps

	mu       sync.Mutex
	extents  []extent // uncommitted data, in write order
	bytes    int
	verf     Verifier
	haveVerf bool
	mixed    bool // replies carried different verifiers: resend before trusting COMMIT
	resends  int
}

type extent struct {
	off  uint64
	data []byte
}

// UnstableOps are what an UnstableWriter needs of a protocol version: one
// UNSTABLE WRITE to the file (it may write less than asked), its COMMIT,
// the largest WRITE and how many to keep in flight. NewUnstable fills them
// from a v3 Client; the v4.1 FUSE mount (fusefs/nfstree) from its session.
type UnstableOps struct {
	Write    func(ctx context.Context, off uint64, data []byte) (WriteResult, error)
	Commit   func(ctx context.Context) (Verifier, error)
	Wsize    func() int
	Parallel int
}

// NewUnstable starts tracking writes to fh.
func NewUnstable(c *Client, fh FH) *UnstableWriter {
	return NewUnstableOps(UnstableOps{
		Write: func(ctx context.Context, off uint64, data []byte) (WriteResult, error) {
			return c.Write(ctx, fh, off, data, Unstable)
		},
		Commit:   func(ctx context.Context) (Verifier, error) { return c.Commit(ctx, fh, 0, 0) },
		Wsize:    func() int { return int(c.Wsize()) },
		Parallel: c.opts.Parallel,
	})
}

// NewUnstableOps starts tracking writes made with ops.
func NewUnstableOps(ops UnstableOps) *UnstableWriter { return &UnstableWriter{ops: ops} }

// Resends counts how often uncommitted data was sent again because the
// server's write verifier changed.
func (u *UnstableWriter) Resends() int { u.mu.Lock(); defer u.mu.Unlock(); return u.resends }

// Pending is the number of bytes written but not yet committed.
func (u *UnstableWriter) Pending() int { u.mu.Lock(); defer u.mu.Unlock(); return u.bytes }

func (u *UnstableWriter) note(wr WriteResult) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.haveVerf {
		u.verf, u.haveVerf = wr.Verf, true
	} else if wr.Verf != u.verf {
		u.verf = wr.Verf
		u.mixed = true
	}
}

// WriteAt sends data at off as UNSTABLE WRITEs (parallel chunks of wsize).
// owned says the caller will not modify data afterwards, so it can be kept
// for a resend without a copy.
func (u *UnstableWriter) WriteAt(ctx context.Context, data []byte, off uint64, owned bool) error {
	if len(data) == 0 {
		return nil
	}
	if !owned {
		data = append([]byte(nil), data...)
	}
	err := chunks(ctx, off, len(data), u.ops.Wsize(), u.ops.Parallel, func(ctx context.Context, o uint64, lo, hi int) error {
		return writeFull(ctx, o, data[lo:hi], Unstable, u.ops.Write, u.note)
	})
	u.mu.Lock()
	// Keep the data even on error: part of it may be on the server
	// uncommitted, and a later Commit must not claim it stable.
	u.extents = append(u.extents, extent{off, data})
	u.bytes += len(data)
	u.mu.Unlock()
	return err
}

// Commit makes everything written so far stable: COMMIT, compare the
// verifier with the writes', and on a mismatch resend all uncommitted data
// and commit again (at most 5 rounds, then ErrVerifierChanged).
func (u *UnstableWriter) Commit(ctx context.Context) error {
	for round := 0; round < 5; round++ {
		u.mu.Lock()
		if len(u.extents) == 0 {
			u.mu.Unlock()
			return nil
		}
		exts, mixed, verf := u.extents, u.mixed, u.verf
		u.mu.Unlock()
		if !mixed {
			cv, err := u.ops.Commit(ctx)
			if err != nil {
				return err
			}
			if cv == verf {
				u.mu.Lock()
				// Only what was there when COMMIT was sent is stable.
				u.extents = u.extents[len(exts):]
				u.bytes = 0
				for _, e := range u.extents {
					u.bytes += len(e.data)
				}
				u.mu.Unlock()
				return nil
			}
		}
		// The server restarted (or replies disagreed): resend everything
		// under the new verifier, then commit again.
		u.mu.Lock()
		u.haveVerf, u.mixed = false, false
		u.extents, u.bytes = nil, 0
		u.resends++
		u.mu.Unlock()
		for _, e := range exts {
			if err := u.WriteAt(ctx, e.data, e.off, true); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("%w: still changing after 5 resends", ErrVerifierChanged)
}

// Discard forgets uncommitted data (e.g. after the file was removed).
func (u *UnstableWriter) Discard() {
	u.mu.Lock()
	u.extents, u.bytes, u.haveVerf, u.mixed = nil, 0, false, false
	u.mu.Unlock()
}

package nfs

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
	"github.com/tristore/tristore/vfs"
)

// READ, WRITE and COMMIT: the durability rules live here.
//
//	WRITE UNSTABLE   -> page cache only; reply committed=UNSTABLE
//	WRITE DATA_SYNC  -> fdatasync before the reply
//	WRITE FILE_SYNC  -> fsync before the reply
//	COMMIT           -> fsync before the reply
//
// Every WRITE/COMMIT reply carries the server's write verifier (its start
// time): a client that sees it change re-sends its uncommitted writes.

// READ buffers: up to maxIO from readBufs; larger READs (up to maxRead)
// take a buffer from bigReadBufs only while the server's budget for call
// memory (Options.MaxInFlightBytes) has room for it, else they are cut to
// maxIO (a short READ, which clients continue).
var (
	readBufs    = sync.Pool{New: func() any { b := make([]byte, maxIO); return &b }}
	bigReadBufs = sync.Pool{New: func() any { b := make([]byte, maxRead); return &b }}
)

// readPaths counts how READs were answered (tests check which path a READ
// took): with sendfile, on the connection's reading goroutine (inline; of
// those, mapped: written to the socket from a mapping of the file), or
// declined there because the data was not cached.
var readPaths struct{ sendfile, inline, mapped, declined atomic.Int64 }

func nfsRead(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.ReadArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.ReadRes{}
	e, cred, st := s.exportOf(req, args.FH)
	if _, tcp := req.c.c.(*net.TCPConn); tcp && !req.c.local && st == nfs3.OK && args.Count >= sendfileMin {
		return readSendfile(e, cred, &args, req, w)
	}
	if st == nfs3.OK && req.inline {
		// Written to the socket from a mapping of the file: one copy
		// (page cache to socket) instead of two (into a buffer, then to
		// the socket).
		data, unmap, eof, a, err := e.fs.MapCached(cred, vfs.Handle(args.FH), args.Offset, int(min(args.Count, maxRead)))
		switch {
		case errors.Is(err, vfs.ErrNotCached):
			readPaths.declined.Add(1)
			return errNotInline
		case !errors.Is(err, vfs.ErrNoMap):
			readPaths.inline.Add(1)
			readPaths.mapped.Add(1)
			st = statusOf(err)
			if a.FileID != 0 {
				res.Attr = postOp(&a)
			}
			if st == nfs3.OK {
				req.release = unmap
				res.Count = uint32(len(data))
				res.EOF = eof
				res.Data = data
			}
			res.Status = st
			res.EncodeHead(w)
			if st == nfs3.OK {
				req.tail = [][]byte{res.Data, nfs3.Pad(len(res.Data))}
			}
			return nil
		}
		// Not mappable: copied below.
	}
	if st == nfs3.OK {
		count := min(args.Count, maxRead)
		pool := &readBufs
		if count > maxIO {
			if s.mem.TryAcquire(maxRead) {
				pool = &bigReadBufs
			} else {
				count = maxIO
			}
		}
		bp := pool.Get().(*[]byte)
		req.release = func() {
			pool.Put(bp)
			if pool == &bigReadBufs {
				s.mem.Release(maxRead)
			}
		}
		read := e.fs.Read
		if req.inline {
			read = e.fs.ReadCached
		}
		n, eof, a, err := read(cred, vfs.Handle(args.FH), args.Offset, (*bp)[:count])
		if errors.Is(err, vfs.ErrNotCached) {
			readPaths.declined.Add(1)
			return errNotInline
		}
		if req.inline {
			readPaths.inline.Add(1)
		}
		st = statusOf(err)
		if a.FileID != 0 {
			res.Attr = postOp(&a)
		}
		if st == nfs3.OK {
			res.Count = uint32(n)
			res.EOF = eof
			res.Data = (*bp)[:n]
		}
	}
	res.Status = st
	// The data goes out straight from the read buffer (no copy into w).
	res.EncodeHead(w)
	if st == nfs3.OK {
		req.tail = [][]byte{res.Data, nfs3.Pad(len(res.Data))}
	}
	return nil
}

func nfsWrite(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.WriteArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.WriteRes{}
	e, cred, st := s.exportOf(req, args.FH)
	if st == nfs3.OK && s.v4.writeBlocked(e, vfs.Handle(args.FH), args.Offset, args.Offset+uint64(len(args.Data))) {
		// An NFSv4 client holds a write lock on the range or opened the
		// file denying writes: v3 has no locks of its own (no NLM), so the
		// v4 lock is enforced here. ACCES, not JUKEBOX: fail the write at
		// once rather than hang the writer for as long as the lock lasts.
		st = nfs3.ErrAcces
	}
	if st == nfs3.OK {
		how := vfs.Unstable
		switch args.Stable {
		case nfs3.DataSync:
			how = vfs.DataSync
		case nfs3.FileSync:
			how = vfs.FileSync
		}
		n, before, after, err := e.fs.Write(cred, vfs.Handle(args.FH), args.Offset, args.Data, how)
		st = statusOf(err)
		if before.FileID != 0 {
			res.Wcc = wcc(&before, &after)
		}
		if st == nfs3.OK {
			res.Count = uint32(n)
			res.Committed = args.Stable
			res.Verf = s.verf
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsCommit(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.CommitArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.CommitRes{}
	e, cred, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		before, after, err := e.fs.CommitAs(cred, vfs.Handle(args.FH))
		st = statusOf(err)
		if before.FileID != 0 {
			res.Wcc = wcc(&before, &after)
		}
		if st == nfs3.OK {
			res.Verf = s.verf
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

// sendfileMin is the READ size from which data goes from the page cache to
// the socket with sendfile(2) (no copy through user space); smaller reads
// are cheaper with one pread.
//
// Not for a client on this machine (loopback, conn.local): sendfile's
// replies carry references to page-cache pages in 4 KiB pieces, and the
// local client receiving them paid more than the copy saves here
// (scripts/bench/nfsreadprof, 64 MiB reads with client/nfs, 8 READs in
// flight: client CPU 44-53 ms per read against 33-37 with pread + writev,
// server 22-31 against 26-30; docs/bench/profiles/nfs-read-*). Such READs
// are copied, and answered on the connection's reading goroutine when the
// data is in the page cache (preadv2 RWF_NOWAIT, vfs.ReadCached), so a
// cached READ needs no goroutine of its own and no hand-off of the
// connection's write lock; an uncached one is handed to a goroutine that
// may wait for the disk.
const sendfileMin = 64 << 10

// readSendfile answers a READ by sending the reply header and then the file
// range with sendfile. The count in the header is fixed before sending, from
// the size at open time; if the file shrinks meanwhile, the missing bytes go
// out as zeros so the record stays well-formed (the next GETATTR shows the
// new size).
func readSendfile(e *Export, cred vfs.Cred, args *nfs3.ReadArgs, req *request, w *sunrpc.Writer) error {
	res := nfs3.ReadRes{}
	f, a, err := e.fs.OpenRead(cred, vfs.Handle(args.FH))
	res.Status = statusOf(err)
	if a.FileID != 0 {
		res.Attr = postOp(&a)
	}
	if res.Status != nfs3.OK {
		res.Encode(w)
		return nil
	}
	req.release = func() { f.Close() }
	readPaths.sendfile.Add(1)
	count := uint64(min(args.Count, maxRead))
	if args.Offset >= a.Size {
		count = 0
	} else {
		count = min(count, a.Size-args.Offset)
	}
	res.Count = uint32(count)
	res.EOF = args.Offset+count >= a.Size
	// EncodeHead writes the data length from len(Data); only the length matters.
	res.Data = zeroLen[:0:0]
	res.EncodeHead(w)
	// Patch the opaque length (last word written) to the real count.
	w.PutUint32At(w.Len()-4, uint32(count))
	req.file = &fileTail{f: f, off: int64(args.Offset), n: int64(count)}
	return nil
}

var zeroLen [0]byte

// fileTail is READ data sent from a file after the encoded reply.
type fileTail struct {
	f   *os.File
	off int64
	n   int64
}

// sendFileTail sends the record: header + b, then t's range of the file
// with sendfile, then zeros for anything the file no longer has, then XDR
// padding. The caller holds the connection's write lock.
//
// The header goes out with MSG_MORE, so TCP sends it in one segment with
// the first data instead of a small segment of its own: a client waiting
// for the reply wakes once for it, not once for the header and again for
// the data (libnfs's nfs-cp, one READ at a time, did). sendfile is given
// the offset, so the descriptor's own offset is neither used nor moved.
func sendFileTail(conn net.Conn, b []byte, t *fileTail) error {
	total := len(b) + int(t.n) + len(nfs3.Pad(int(t.n)))
	hdr := append(sunrpc.AppendFragmentHeader(make([]byte, 0, 4+len(b)), total, true), b...)
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return sendFileTailCopy(conn, hdr, t)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	flags := 0
	if t.n > 0 {
		flags = unix.MSG_MORE // data follows at once
	}
	var serr error
	sent := 0
	err = rc.Write(func(fd uintptr) bool {
		for sent < len(hdr) {
			n, err := unix.SendmsgN(int(fd), hdr[sent:], nil, nil, flags)
			switch {
			case err == unix.EAGAIN:
				return false
			case err == unix.EINTR:
			case err != nil:
				serr = err
				return true
			default:
				sent += n
			}
		}
		return true
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	off, left := t.off, t.n
	ffd := int(t.f.Fd())
	err = rc.Write(func(fd uintptr) bool {
		for left > 0 {
			n, err := unix.Sendfile(int(fd), ffd, &off, int(min(left, 1<<30)))
			if n > 0 {
				left -= int64(n)
			}
			switch {
			case err == unix.EAGAIN:
				return false
			case err == unix.EINTR:
			case err != nil:
				serr = err
				return true
			case n == 0:
				return true // end of file: the file shrank
			}
		}
		return true
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	return sendTailEnd(conn, t, t.n-left)
}

// sendFileTailCopy is sendFileTail for a connection without a descriptor
// (tests' pipes): the data is read and written.
func sendFileTailCopy(conn net.Conn, hdr []byte, t *fileTail) error {
	if _, err := conn.Write(hdr); err != nil {
		return err
	}
	sent, err := io.Copy(conn, io.NewSectionReader(t.f, t.off, t.n))
	if err != nil {
		return err
	}
	return sendTailEnd(conn, t, sent)
}

// sendTailEnd sends zeros for the part of t's range the file no longer
// had (sent bytes went out), then the XDR padding.
func sendTailEnd(conn net.Conn, t *fileTail, sent int64) error {
	for sent < t.n {
		z := make([]byte, min(t.n-sent, 64<<10))
		m, err := conn.Write(z)
		if err != nil {
			return err
		}
		sent += int64(m)
	}
	if pad := nfs3.Pad(int(t.n)); len(pad) > 0 {
		_, err := conn.Write(pad)
		return err
	}
	return nil
}

package posix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/reqmemo"
	"github.com/tristore/tristore/store"
)

// Bucket state cache.
//
// Every S3 request reads its bucket's record (owner) and several of its
// configuration documents (policy, ownership controls, Object Lock,
// default encryption, versioning): a 4 KiB PUT read five of them, each an
// lstat of the bucket directory, a getxattr of the record, a getxattr of
// the document and (when unset) an open of its fallback file, about 20
// system calls. So a bucket's record and documents are read together into
// one bucketState, kept in memory and reused while they cannot have changed:
//
//   - through this process: SetBucketConfig, CreateBucket and DeleteBucket
//     drop the bucket's state (and the calling request's memo, below)
//     after the change, and bump a generation so that a read racing with
//     the change cannot put back what it read before it;
//   - through another process on the same tree (`tristore volume create`
//     next to a running server writes the iscsi-volumes document) or by
//     hand (setfattr): documents live in xattrs of the bucket directory,
//     whose ctime every xattr change moves, or in files of
//     .tristore/buckets/<bucket>/, replaced by rename, which moves that
//     directory's times. A state is reused only while both directories
//     keep the stamp (inode, mtime, ctime) they had when it was read, and
//     only if both stamps were settled then (older than stampSettle, the
//     rule of dircache.go: a change in the same clock tick as the stamp
//     could leave it unchanged). Checking costs two stats.
//
// Within one request the state is validated once: the first lookup keeps
// it in the request's memo (internal/reqmemo, started by the S3 front
// end), so the request sees one state of its bucket, and its other
// lookups cost nothing. A change made during the request by someone else
// applies from the next request on.
//
// Not seen: a fallback file rewritten in place by hand (not by rename),
// and any change if the clock steps back by more than stampSettle between
// the change and the stamp. Top-level keys are entries of the bucket
// directory, so in a bucket whose top level keeps changing the stamp is
// seldom settled and the state is read again for each request: 4-5 calls
// (lstat, llistxattr, the xattrs that are set), not 20.
//
// The state also records whether the bucket has a hidden area at all
// (hidden.go); a Put of a plain key then need not look for a hidden copy
// of it (see dropHidden).
type bucketState struct {
	info  store.BucketInfo
	docs  map[string]string // set documents by name
	stamp dirStamp          // the bucket directory
	sys   dirStamp          // .tristore/buckets/<bucket>; zero when absent
	// noHidden: DATA/<bucket>/.tristore-hidden did not exist when this
	// state was read; hiddenGen is hiddenIndex.gen then.
	noHidden  bool
	hiddenGen int64
}

type bucketCache struct {
	mu  sync.Mutex
	m   map[string]*bucketState
	gen map[string]uint64
	// reads counts states read from disk (for tests).
	reads atomic.Int64
}

// memoKey names a bucket's state in a request memo.
type memoKey struct {
	b      *Backend
	bucket string
}

// invalidate drops bucket's state after a change through this process,
// in the cache and in ctx's request memo.
func (b *Backend) invalidateBucket(ctx context.Context, bucket string) {
	c := &b.bcache
	c.mu.Lock()
	delete(c.m, bucket)
	if c.gen == nil {
		c.gen = map[string]uint64{}
	}
	c.gen[bucket]++
	c.mu.Unlock()
	reqmemo.From(ctx).Delete(memoKey{b, bucket})
}

// statDirOrAbsent stamps the directory at path; ok is false when it is absent.
func statDirOrAbsent(path string) (s dirStamp, ok bool, err error) {
	s, err = statStamp(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return dirStamp{}, false, nil
		}
		return dirStamp{}, false, err
	}
	return s, true, nil
}

// bucketState returns the bucket's current state, or ErrNoSuchBucket.
func (b *Backend) bucketState(ctx context.Context, bucket string) (*bucketState, error) {
	if err := validBucket(bucket); err != nil {
		return nil, noSuchBucketIfInvalid(err)
	}
	memo := reqmemo.From(ctx)
	mk := memoKey{b, bucket}
	if v, ok := memo.Get(mk); ok {
		return v.(*bucketState), nil
	}
	now := time.Now()
	stamp, err := statStamp(b.bucketPath(bucket))
	if err != nil {
		return nil, fmt.Errorf("%w: %s", store.ErrNoSuchBucket, bucket)
	}
	sys, sysOK, err := statDirOrAbsent(b.bucketSysDir(bucket))
	if err != nil {
		return nil, fsErr(err)
	}
	c := &b.bcache
	c.mu.Lock()
	s := c.m[bucket]
	gen := c.gen[bucket]
	c.mu.Unlock()
	if s != nil && s.stamp == stamp && s.sys == sys {
		memo.Set(mk, s)
		return s, nil
	}
	s, err = b.readBucketState(bucket, stamp, sys)
	if err != nil {
		return nil, err
	}
	settled := stamp.settled(now) && (!sysOK || sys.settled(now))
	c.mu.Lock()
	if settled && c.gen[bucket] == gen {
		if c.m == nil {
			c.m = map[string]*bucketState{}
		}
		c.m[bucket] = s
	} else if !settled {
		delete(c.m, bucket)
	}
	c.mu.Unlock()
	memo.Set(mk, s)
	return s, nil
}

// readBucketState reads the record and documents of bucket, whose
// directories had the given stamps just before.
func (b *Backend) readBucketState(bucket string, stamp, sys dirStamp) (*bucketState, error) {
	b.bcache.reads.Add(1)
	p := b.bucketPath(bucket)
	s := &bucketState{
		info:      store.BucketInfo{Name: bucket, Created: time.Unix(0, stamp.mtime).UTC()},
		docs:      map[string]string{},
		stamp:     stamp,
		sys:       sys,
		hiddenGen: b.hidden.gen.Load(),
	}
	var rec []byte
	haveRec := false
	if b.useXattr {
		names, err := listxattr(p)
		if err != nil && !errors.Is(err, syscall.ENOTSUP) {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%w: %s", store.ErrNoSuchBucket, bucket)
			}
			return nil, fsErr(err)
		}
		for _, n := range names {
			name, isCfg := strings.CutPrefix(n, cfgXattrPfx)
			if !isCfg && n != bucketXattr {
				continue
			}
			v, err := getxattr(p, nil, n)
			if err != nil {
				continue // removed meanwhile; the stamp has moved, read again next time
			}
			if isCfg {
				s.docs[name] = string(v)
			} else {
				rec, haveRec = v, true
			}
		}
	}
	if sys != (dirStamp{}) {
		ents, err := os.ReadDir(b.bucketSysDir(bucket))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fsErr(err)
		}
		for _, e := range ents {
			name, isCfg := strings.CutPrefix(e.Name(), "cfg-")
			if !(isCfg && validCfgName(name) == nil) && !(e.Name() == "info.json" && !haveRec) {
				continue
			}
			if _, ok := s.docs[name]; isCfg && ok {
				continue // the xattr wins, as in the lookup by name
			}
			data, err := os.ReadFile(filepath.Join(b.bucketSysDir(bucket), e.Name()))
			if err != nil {
				continue
			}
			if isCfg {
				s.docs[name] = string(data)
			} else {
				rec, haveRec = data, true
			}
		}
	}
	var r bucketRec
	if haveRec && json.Unmarshal(rec, &r) == nil {
		s.info.Owner = r.Owner
		if !r.Created.IsZero() {
			s.info.Created = r.Created
		}
	}
	var st unix.Stat_t
	s.noHidden = errors.Is(unix.Lstat(filepath.Join(p, hiddenDirName), &st), unix.ENOENT)
	return s, nil
}

// listxattr returns the names of the xattrs of p (not following a symlink).
func listxattr(p string) ([]string, error) {
	buf := make([]byte, 1024)
	for range 8 {
		n, err := unix.Llistxattr(p, buf)
		if errors.Is(err, syscall.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "llistxattr", Path: p, Err: err}
		}
		var names []string
		for _, n := range bytes.Split(buf[:n], []byte{0}) {
			if len(n) > 0 {
				names = append(names, string(n))
			}
		}
		return names, nil
	}
	return nil, syscall.ERANGE
}

// BucketStateReads returns how many times a bucket's record and documents
// were read from disk (the cache above missed); for tests.
func (b *Backend) BucketStateReads() int64 { return b.bcache.reads.Load() }

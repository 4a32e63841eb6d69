package s3

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/tristore/tristore/store"
)

// The lifecycle worker enforces the buckets' lifecycle rules in the
// background: one goroutine per Server, started by the first Serve and
// stopped by Close, that scans every bucket with a configuration once per
// interval (a 24th of the lifecycle day, at most an hour) and right after
// a PutBucketLifecycleConfiguration.
//
//	ticker/kick --> scan: ListBuckets --> rules (bucket config "lifecycle")
//	                  |--> List(prefix) --> filter --> due? --> re-Stat --> Delete
//	                  '--> ListMultipartUploads(prefix) --> due? --> AbortMultipart
//
// A "day" is 24 hours unless Options.LifecycleDay (or the environment
// variable TRISTORE_LIFECYCLE_DAY, e.g. "2s", read when the option is
// zero) makes it shorter, so tests and demos can watch rules act. With
// real days an object expires, as in S3, at the first midnight UTC at
// least Days after its last modification; with a shortened day exactly
// Days×day after it (no rounding). Expiration by Date acts once the
// server's clock passes the date.
//
// An object is re-read just before it is deleted and kept if it changed
// since it was listed (it is looked at again on the next scan). A served
// block volume (store.ErrInUse) is never expired: the refusal is logged
// and the object skipped.

// lifecycleEnv names the environment variable that shortens the day.
const lifecycleEnv = "TRISTORE_LIFECYCLE_DAY"

// maxScanPages bounds one bucket walk (1000 keys a page).
const maxScanPages = 1 << 20

type lifecycleWorker struct {
	once   sync.Once
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{}
	day    time.Duration
	now    func() time.Time
}

// lifecycleDay resolves the length of a lifecycle day.
func (s *Server) lifecycleDay() time.Duration {
	if d := s.opts.LifecycleDay; d > 0 {
		return d
	}
	if v := os.Getenv(lifecycleEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err == nil && d > 0 {
			return d
		}
		s.log.Warn("s3: ignoring "+lifecycleEnv+": not a positive duration", "value", v)
	}
	return 24 * time.Hour
}

// startLifecycle starts the worker once (Serve may run on several listeners).
func (s *Server) startLifecycle(parent context.Context) {
	s.lc.once.Do(func() {
		ctx, cancel := context.WithCancel(parent)
		s.lc.mu.Lock()
		s.lc.cancel, s.lc.done, s.lc.kick = cancel, make(chan struct{}), make(chan struct{}, 1)
		s.lc.day, s.lc.now = s.lifecycleDay(), time.Now
		done, kick := s.lc.done, s.lc.kick
		s.lc.mu.Unlock()
		interval := min(s.lc.day/24, time.Hour)
		interval = max(interval, 10*time.Millisecond)
		go func() {
			defer close(done)
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				s.lifecycleScan(ctx)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				case <-kick:
				}
			}
		}()
	})
}

// stopLifecycle stops the worker and waits for a scan in progress.
func (s *Server) stopLifecycle() {
	s.lc.mu.Lock()
	cancel, done := s.lc.cancel, s.lc.done
	s.lc.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// lifecycleKick asks for a scan now (after a new configuration).
func (s *Server) lifecycleKick() {
	s.lc.mu.Lock()
	kick := s.lc.kick
	s.lc.mu.Unlock()
	if kick != nil {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// lifecycleScan applies every bucket's rules once.
func (s *Server) lifecycleScan(ctx context.Context) {
	if _, ok := s.st.(store.BucketConfigurer); !ok {
		return
	}
	buckets, err := s.st.ListBuckets(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("lifecycle: listing buckets", "err", err)
		}
		return
	}
	for _, b := range buckets {
		if ctx.Err() != nil {
			return
		}
		c, err := s.bucketLifecycle(ctx, b.Name)
		if err != nil {
			s.log.Warn("lifecycle: configuration unreadable, bucket skipped", "bucket", b.Name, "err", err)
			continue
		}
		if c == nil {
			continue
		}
		for i := range c.Rules {
			if ru := &c.Rules[i]; ru.enabled {
				s.applyRule(ctx, b.Name, ru)
			}
		}
	}
}

// expiresAt is when an object last modified at mod expires under a
// Days rule.
func (s *Server) expiresAt(mod time.Time, days int) time.Time {
	if s.lc.day == 24*time.Hour {
		t := mod.UTC().Add(time.Duration(days) * 24 * time.Hour)
		m := t.Truncate(24 * time.Hour)
		if m.Before(t) {
			m = m.Add(24 * time.Hour)
		}
		return m
	}
	return mod.Add(time.Duration(days) * s.lc.day)
}

// due reports whether oi has expired under rule ru at now.
func (s *Server) due(ru *lcRule, oi store.ObjectInfo, now time.Time) bool {
	e := ru.Expiration
	switch {
	case e == nil:
		return false
	case e.Days != nil:
		return !now.Before(s.expiresAt(oi.ModTime, *e.Days))
	case !ru.date.IsZero():
		return !now.Before(ru.date)
	}
	return false
}

func (s *Server) applyRule(ctx context.Context, bucket string, ru *lcRule) {
	now := s.lc.now()
	if e := ru.Expiration; e != nil && (e.Days != nil || !ru.date.IsZero()) {
		after := ""
		for range maxScanPages {
			res, err := s.st.List(ctx, bucket, store.ListOptions{Prefix: ru.prefix, After: after, Limit: 1000})
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("lifecycle: listing", "bucket", bucket, "prefix", ru.prefix, "err", err)
				}
				break
			}
			for _, oi := range res.Objects {
				if ru.matches(oi) && s.due(ru, oi, now) {
					s.expire(ctx, bucket, ru, oi, now)
				}
			}
			if !res.IsTruncated || res.NextAfter == "" {
				break
			}
			after = res.NextAfter
		}
	}
	s.applyVersionRules(ctx, bucket, ru, now)
	if a := ru.AbortIncompleteMultipart; a != nil && a.DaysAfterInitiation != nil {
		mp, ok := s.st.(store.Multiparter)
		if !ok {
			return
		}
		ups, err := mp.ListMultipartUploads(ctx, bucket, ru.prefix)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("lifecycle: listing uploads", "bucket", bucket, "err", err)
			}
			return
		}
		for _, u := range ups {
			if now.Before(u.Initiated.Add(time.Duration(*a.DaysAfterInitiation) * s.lc.day)) {
				continue
			}
			err := mp.AbortMultipart(ctx, bucket, u.Key, u.UploadID)
			if err != nil && !errors.Is(err, store.ErrNoSuchUpload) {
				s.log.Warn("lifecycle: aborting upload", "bucket", bucket, "key", u.Key, "upload", u.UploadID, "err", err)
				continue
			}
			s.log.Info("lifecycle: aborted incomplete multipart upload", "bucket", bucket, "key", u.Key, "upload", u.UploadID, "rule", ru.ID)
		}
	}
}

// expire deletes oi if it is still the object that was listed.
func (s *Server) expire(ctx context.Context, bucket string, ru *lcRule, oi store.ObjectInfo, now time.Time) {
	cur, err := s.st.Stat(ctx, bucket, oi.Key)
	if err != nil || cur.ETag != oi.ETag || !cur.ModTime.Equal(oi.ModTime) || !ru.matches(cur) || !s.due(ru, cur, now) {
		return // gone or changed since the listing: the next scan decides
	}
	if err := s.st.Delete(ctx, bucket, oi.Key); err != nil {
		switch {
		case errors.Is(err, store.ErrInUse):
			s.log.Info("lifecycle: not expiring a served block volume", "bucket", bucket, "key", oi.Key, "rule", ru.ID)
		case errors.Is(err, store.ErrNoSuchKey):
		default:
			if ctx.Err() == nil {
				s.log.Warn("lifecycle: expiring", "bucket", bucket, "key", oi.Key, "err", err)
			}
		}
		return
	}
	s.log.Info("lifecycle: expired object", "bucket", bucket, "key", oi.Key, "rule", ru.ID)
}

// maxVersionPages bounds one walk of a bucket's versions (1000 a page).
const maxVersionPages = 1 << 20

// applyVersionRules enforces NoncurrentVersionExpiration and
// Expiration/ExpiredObjectDeleteMarker on a bucket whose store keeps
// versions. A version becomes noncurrent when the next newer one is
// written, so its noncurrent age counts from that version's time, as in
// S3; NewerNoncurrentVersions keeps that many newest noncurrent versions
// whatever their age. A delete marker that is the only version left of
// its key is "expired" and removed by ExpiredObjectDeleteMarker. A
// version under Object Lock (retention in force or legal hold) is never
// removed.
func (s *Server) applyVersionRules(ctx context.Context, bucket string, ru *lcRule, now time.Time) {
	nv := ru.NoncurrentVersionExpiration
	eodm := ru.Expiration != nil && ru.Expiration.ExpiredObjectDeleteMarker != nil && *ru.Expiration.ExpiredObjectDeleteMarker
	if nv == nil && !eodm {
		return
	}
	v, ok := s.st.(store.Versioner)
	if !ok {
		return
	}
	var (
		key         string
		newerTime   time.Time // ModTime of the next newer version of key
		noncurrents int       // noncurrent versions of key seen so far (newest first)
		only        *store.ObjectInfo
		count       int // versions of key seen
	)
	// flush decides about a latest delete marker once all of its key's
	// versions have been seen.
	flush := func() {
		if eodm && only != nil && count == 1 {
			s.removeVersion(ctx, v, bucket, ru, *only, "expired delete marker")
		}
		only, count = nil, 0
	}
	opts := store.ListVersionsOptions{Prefix: ru.prefix, Limit: 1000}
	for range maxVersionPages {
		res, err := v.ListVersions(ctx, bucket, opts)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("lifecycle: listing versions", "bucket", bucket, "err", err)
			}
			return
		}
		for _, oi := range res.Versions {
			if oi.Key != key {
				flush()
				key, noncurrents = oi.Key, 0
			}
			count++
			if oi.IsLatest {
				if oi.DeleteMarker {
					o := oi
					only = &o
				}
				newerTime = oi.ModTime
				continue
			}
			became := newerTime
			newerTime = oi.ModTime
			if nv == nil || !ru.matches(oi) {
				continue
			}
			noncurrents++
			if n := nv.NewerNoncurrentVersions; n != nil && noncurrents <= *n {
				continue
			}
			if !now.Before(became.Add(time.Duration(*nv.NoncurrentDays) * s.lc.day)) {
				s.removeVersion(ctx, v, bucket, ru, oi, "noncurrent version expired")
			}
		}
		if !res.IsTruncated {
			break
		}
		opts.KeyMarker, opts.VersionIDMarker = res.NextKeyMarker, res.NextVersionIDMarker
	}
	flush()
}

// removeVersion deletes one version for good unless Object Lock holds it.
func (s *Server) removeVersion(ctx context.Context, v store.Versioner, bucket string, ru *lcRule, oi store.ObjectInfo, why string) {
	if oi.Meta.LegalHold || (oi.Meta.LockMode != "" && s.lc.now().Before(oi.Meta.LockUntil)) {
		s.log.Info("lifecycle: version kept by Object Lock", "bucket", bucket, "key", oi.Key, "version", oi.VersionID, "rule", ru.ID)
		return
	}
	if _, err := v.DeleteVersion(ctx, bucket, oi.Key, versionArg(oi.VersionID)); err != nil {
		if errors.Is(err, store.ErrInUse) {
			s.log.Info("lifecycle: not removing a served block volume", "bucket", bucket, "key", oi.Key, "rule", ru.ID)
		} else if ctx.Err() == nil {
			s.log.Warn("lifecycle: removing version", "bucket", bucket, "key", oi.Key, "version", oi.VersionID, "err", err)
		}
		return
	}
	s.log.Info("lifecycle: "+why, "bucket", bucket, "key", oi.Key, "version", oi.VersionID, "rule", ru.ID)
}

// versionArg names a version for the Versioner: "" in ObjectInfo is the null version.
func versionArg(id string) string {
	if id == "" {
		return "null"
	}
	return id
}

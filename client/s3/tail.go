package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// The tail of a ranged download
//
// A download's ranges run at one TCP connection's rate each, and on a lossy
// long link one connection gets a fraction of the link (on netem's
// `realistic`, 0.4-0.96 MiB/s of 12.5). Once every range has started, the
// streams that finish first would idle while the last ranges crawl to
// their end on one connection each: the link is full only while enough
// ranges are in flight. So an idle stream takes the end of the range
// expected to finish last (at its own rate so far) and fetches it with its
// own GET into the same buffer; the range's first GET stops where the
// split was made. The cut is where both should end together: half of a
// range going at the others' rate, nearly all of a stalled one (splitPoint).
// This repeats until no range has enough left, so the last bytes of the
// object come over many connections, not one.
//
// No buffer is added (a split range writes into its part's buffer), and
// the requests in flight stay within Parallelism (e.slots): the memory
// bound and --parallel mean what they meant.

// minSplit is the smallest piece a split leaves on either side: a GET
// costs a round trip or two before its first byte, so a smaller piece
// would not come sooner.
const minSplit = 256 << 10

// readStep is how many bytes a piece's reader claims at a time; a split is
// made beyond what is claimed, so two GETs never write the same bytes.
const readStep = 64 << 10

// dlPart is one chunk-sized part of the object and its buffer.
type dlPart struct {
	off     int64  // object offset of buf[0]
	buf     []byte // the part's bytes
	full    []byte // buf's pool buffer
	pending int    // pieces not finished (under the download's mutex)
	failed  bool   // a piece failed: never written
}

// dlPiece is the bytes [pos, hi) of a part that one GET is fetching.
type dlPiece struct {
	part     *dlPart
	pos      int64 // next byte to read (relative to the part)
	reserved int64 // the reader may be writing up to here
	hi       int64 // end; a split lowers it
	// started is when the current GET was sent (zero: not yet), got the
	// bytes it has brought since: its rate.
	started time.Time
	got     int64
}

// rate is pc's bytes per second since its GET started; ok is false while
// that is too young to say (minAge).
func (pc *dlPiece) rate(now time.Time) (float64, bool) {
	age := now.Sub(pc.started)
	if pc.started.IsZero() || age < minAge {
		return 0, false
	}
	return float64(pc.got) / age.Seconds(), true
}

// errRetryLater: ranges are still in flight, none worth splitting now.
var errRetryLater = errors.New("nothing to split yet")

// pollSplit is how often an idle stream looks again for a range to split.
const pollSplit = 50 * time.Millisecond

// minAge is how long a GET runs before its rate counts.
const minAge = 300 * time.Millisecond

// splitPoint chooses the piece to split and where, among the active
// pieces (under the download's mutex): the one with the longest expected
// time left at its own rate, cut so that both sides should end together
// if a new GET runs at the median rate of the GETs so far (done: the rates
// of those finished). A piece at the
// median rate is halved (when 2 × minSplit are left); one far slower is
// taken over nearly whole (a stalled connection keeps only what it has
// claimed). -1: nothing worth splitting.
func splitPoint(active []*dlPiece, done []float64, now time.Time) (*dlPiece, int64) {
	rates := slices.Clone(done)
	for _, pc := range active {
		if r, ok := pc.rate(now); ok && pc.got > 0 {
			rates = append(rates, r)
		}
	}
	med := 0.0
	if len(rates) > 0 {
		slices.Sort(rates)
		med = rates[len(rates)/2]
	}
	var (
		victim   *dlPiece
		worst    float64
		vr       float64
		fallback *dlPiece
	)
	for _, pc := range active {
		left := pc.hi - pc.reserved
		if left < readStep {
			continue
		}
		if fallback == nil || left > fallback.hi-fallback.reserved {
			fallback = pc
		}
		r, ok := pc.rate(now)
		if !ok || med == 0 {
			continue
		}
		if t := float64(left) / max(r, 1); t > worst {
			victim, worst, vr = pc, t, r
		}
	}
	if victim == nil {
		// No rates yet: halve the piece with the most left.
		if fallback == nil || fallback.hi-fallback.reserved < 2*minSplit {
			return nil, -1
		}
		return fallback, fallback.reserved + (fallback.hi-fallback.reserved)/2
	}
	left := victim.hi - victim.reserved
	if vr >= med/2 {
		// About the others' rate: halve it, if both halves are worth a GET.
		if left < 2*minSplit {
			return nil, -1
		}
		return victim, victim.reserved + left/2
	}
	// Far slower: a new GET should bring what is left at least twice as
	// fast, a round trip or two included. Cut where both should end
	// together (nearly all of it for a stalled one).
	if float64(left)/max(vr, 1) < 2*float64(left)/med+takeoverCost.Seconds() {
		return nil, -1
	}
	mid := victim.reserved + int64(float64(left)*vr/(vr+med))
	return victim, min(mid, victim.hi-readStep)
}

// takeoverCost is what a new GET costs before its first byte (a round
// trip or two on a long link).
const takeoverCost = 200 * time.Millisecond

// rangeDownload fetches the object's size bytes in parts of chunk with up
// to Parallelism ranged GETs in flight, splitting the largest remaining
// range for an idle stream once every part has started (unless
// Config.NoTailSplit), and writes each part to w when it is complete.
func (e *Engine) rangeDownload(ctx context.Context, st *stats, bucket, key string, etag *string, size, chunk int64, w io.WriterAt) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nparts := (size + chunk - 1) / chunk
	var (
		mu        sync.Mutex
		next      int64
		active    []*dlPiece
		doneRates []float64
		wg        sync.WaitGroup
		once      sync.Once
		firstErr  error
	)
	// take returns the next piece to fetch: a new part while there are
	// any, then (splitting) the second half of the largest piece left.
	take := func() (*dlPiece, error) {
		mu.Lock()
		if next < nparts {
			i := next
			next++
			mu.Unlock()
			buf, err := e.pool.get(ctx)
			if err != nil {
				return nil, err
			}
			off := i * chunk
			n := min(chunk, size-off)
			pc := &dlPiece{part: &dlPart{off: off, buf: buf[:n], full: buf, pending: 1}, hi: n}
			mu.Lock()
			active = append(active, pc)
			mu.Unlock()
			return pc, nil
		}
		defer mu.Unlock()
		if e.cfg.NoTailSplit || len(active) == 0 {
			return nil, nil
		}
		victim, mid := splitPoint(active, doneRates, time.Now())
		if victim == nil {
			return nil, errRetryLater
		}
		pc := &dlPiece{part: victim.part, pos: mid, reserved: mid, hi: victim.hi}
		victim.hi = mid
		victim.part.pending++
		active = append(active, pc)
		return pc, nil
	}
	// finish retires pc; the last piece of a part writes it and frees
	// its buffer.
	finish := func(pc *dlPiece, err error) error {
		mu.Lock()
		for i, a := range active {
			if a == pc {
				active = append(active[:i], active[i+1:]...)
				break
			}
		}
		if age := time.Since(pc.started); err == nil && pc.got > 0 && age > 0 && !pc.started.IsZero() {
			doneRates = append(doneRates, float64(pc.got)/age.Seconds())
		}
		p := pc.part
		p.pending--
		if err != nil {
			p.failed = true
		}
		last, failed := p.pending == 0, p.failed
		mu.Unlock()
		if !last {
			return err
		}
		defer e.pool.put(p.full)
		if failed {
			return err
		}
		if _, werr := w.WriteAt(p.buf, p.off); werr != nil {
			return fmt.Errorf("write local at %d: %w", p.off, werr)
		}
		e.progress(int64(len(p.buf)))
		return nil
	}
	// Streams: Parallelism, but at most 4 per part, so a batch of small
	// multipart files does not keep P × P goroutines looking for splits.
	for range min(int64(e.cfg.Parallelism), 4*nparts) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				pc, err := take()
				if err == nil && pc == nil {
					return
				}
				if err == errRetryLater {
					// Nothing to split yet: a range may slow down
					// (or its rate become known) while it runs.
					select {
					case <-time.After(pollSplit):
					case <-ctx.Done():
					}
					continue
				}
				if err == nil {
					err = e.slot(ctx, func() error { return e.getPiece(ctx, st, bucket, key, etag, pc, &mu) })
					err = finish(pc, err)
				}
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

// slot runs fn holding one of the engine's Parallelism request slots.
func (e *Engine) slot(ctx context.Context, fn func() error) error {
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-e.slots }()
	return fn()
}

// getPiece fetches pc's bytes with one ranged GET (retried from where it
// stopped), reading until pc.pos reaches pc.hi, which a split may lower
// meanwhile; the rest of the answer is then dropped with its connection.
func (e *Engine) getPiece(ctx context.Context, st *stats, bucket, key string, etag *string, pc *dlPiece, mu *sync.Mutex) error {
	p := pc.part
	return e.do(ctx, st, func(ctx context.Context) error {
		mu.Lock()
		from, to := pc.pos, pc.hi
		pc.started, pc.got = time.Now(), 0
		mu.Unlock()
		if from >= to {
			return nil
		}
		rng := fmt.Sprintf("bytes=%d-%d", p.off+from, p.off+to-1)
		out, err := e.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bucket, Key: &key, IfMatch: etag, Range: &rng})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if got := aws.ToString(out.ETag); etag != nil && got != "" && got != *etag {
			return fmt.Errorf("range %s: ETag %s, want %s: %w", rng, got, *etag, ErrChanged)
		}
		if n := aws.ToInt64(out.ContentLength); n != to-from {
			return fmt.Errorf("range %s: response has %d bytes, want %d: %w", rng, n, to-from, ErrChecksum)
		}
		for {
			mu.Lock()
			at, hi := pc.pos, pc.hi
			lim := min(at+readStep, hi)
			pc.reserved = lim
			mu.Unlock()
			if at >= hi {
				return nil
			}
			for at < lim {
				n, err := out.Body.Read(p.buf[at:lim])
				at += int64(n)
				mu.Lock()
				pc.pos += int64(n)
				pc.got += int64(n)
				mu.Unlock()
				if err != nil && at < lim {
					if err == io.EOF {
						err = io.ErrUnexpectedEOF
					}
					return fmt.Errorf("range %s: %w", rng, err)
				}
			}
		}
	})
}

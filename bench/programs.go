package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Programs runs one step of independent programs: s.Threads workers, each
// running prog to its end (a PostMark instance, which issues its own
// sequence of requests of different kinds), unlike Step, whose workers take
// the next request of one shared kind. Every request a program makes goes
// through its Recorder, which times and records it (failed ones too) and
// tells the program when to stop: the context ended, or
// MaxConsecutiveErrors requests of the step in a row failed. planned is the
// number of requests expected (for the progress display only).
//
// The step's Phase record in run.json spans the first program's start to
// the last one's end, so a rate over it is the aggregate of all programs.
func (r *Runner) Programs(ctx context.Context, s Step, planned int, prog func(ctx context.Context, w int, rec *Recorder) error) error {
	if s.Threads < 1 {
		s.Threads = 1
	}
	name := s.String()
	limit := int64(r.cfg.MaxConsecutiveErrors)
	if limit <= 0 {
		limit = 10
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	st := &stepState{r: r, s: s, limit: limit, cancel: cancel}
	m := r.beginPhase(name, int64(planned))
	var wg sync.WaitGroup
	for w := range s.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := &Recorder{st: st, w: w}
			err := func() (err error) {
				defer func() {
					if v := recover(); v != nil {
						err = fmt.Errorf("internal error in program %d: %v\n%s", w, v, debug.Stack())
					}
				}()
				return prog(ctx, w, rec)
			}()
			if err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("program %d: %w", w, err))
			}
		}()
	}
	wg.Wait()
	r.endPhase(m, name, Phase{Name: s.Phase, Form: s.Form, Unit: s.Unit, Threads: s.Threads,
		Ops: st.nops.Load(), Errors: st.nerr.Load(), Payload: st.payload.Load()}, true)
	return r.phaseErr(ctx, name)
}

type stepState struct {
	r                           *Runner
	s                           Step
	limit                       int64
	cancel                      context.CancelCauseFunc
	nops, nerr, payload, consec atomic.Int64
}

// Recorder times and records the requests of one program of Programs.
type Recorder struct {
	st *stepState
	w  int
}

// ErrStepStopped is what Recorder.Do returns once the step must end (the
// context ended or too many requests in a row failed); the program returns
// it (or any error) and the step reports the cause.
var ErrStepStopped = errors.New("bench: step stopped")

// Do performs one request of kind op (recorded as the record's op) and
// records it with the payload bytes fn moved. A failed request is recorded
// and Do returns nil, so the program goes on as the benchmark it
// reproduces would (PostMark reports an error and continues), unless the
// step must stop: then Do returns ErrStepStopped. A panic in fn ends the
// step as an internal error.
func (rc *Recorder) Do(ctx context.Context, op string, fn func(ctx context.Context) (int64, error)) error {
	st := rc.st
	if ctx.Err() != nil {
		return ErrStepStopped
	}
	t0 := time.Now()
	n, _, err, bug := safeCall(ctx, func(ctx context.Context, _, _ int) (int64, time.Time, error) {
		n, err := fn(ctx)
		return n, time.Time{}, err
	}, rc.w, 0)
	t1 := time.Now()
	r := st.r
	o := Operation{Phase: st.s.Phase, Form: st.s.Form, Op: op, Size: n, Unit: st.s.Unit, Threads: st.s.Threads, Worker: rc.w,
		Start: r.W.Since(t0), End: r.W.Since(t1)}
	st.nops.Add(1)
	r.doneOps.Add(1)
	if err != nil {
		o.Err = err.Error()
		st.nerr.Add(1)
		r.W.Add(o)
		if bug != nil {
			st.cancel(bug)
			return ErrStepStopped
		}
		if ctx.Err() != nil {
			return ErrStepStopped
		}
		if st.consec.Add(1) >= st.limit {
			st.cancel(fmt.Errorf("%d requests in a row failed; last: %w", st.limit, err))
			return ErrStepStopped
		}
		return nil
	}
	st.consec.Store(0)
	st.payload.Add(n)
	r.W.Add(o)
	return nil
}

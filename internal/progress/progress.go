// Package progress draws progress bars for long work (transfers, rebuilds,
// benchmark steps) with one look across tristore, on mpb.
//
// Bars are for a person watching: they are drawn on stderr only when both
// stdout and stderr are terminals and the user did not ask for --quiet, so
// scripts, pipes and JSON output never see a cursor escape. Everything here
// is safe on a disabled (or nil) Progress: callers never branch on whether
// bars are shown.
package progress

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// Unit says how a bar's counts read.
type Unit int

const (
	Bytes Unit = iota // shown as KiB/MiB/GiB with a rate
	Count             // shown as n/total items
)

// Options configures New.
type Options struct {
	// Quiet disables every bar (--quiet).
	Quiet bool
	// Out, when set, forces bars on and draws them there (tests, or a
	// caller that has already decided). When nil, bars go to stderr and
	// only when stdout and stderr are terminals.
	Out io.Writer
	// Refresh is the redraw interval (default 150 ms).
	Refresh time.Duration
}

// Enabled reports whether New(o) would draw anything.
func (o Options) Enabled() bool {
	if o.Quiet {
		return false
	}
	if o.Out != nil {
		return true
	}
	return term.IsTerminal(int(os.Stdout.Fd())) && term.IsTerminal(int(os.Stderr.Fd()))
}

// Progress is a set of bars drawn together. A nil *Progress is valid and
// draws nothing.
type Progress struct {
	p    *mpb.Progress
	mu   sync.Mutex
	bars []*Bar
}

// New starts a progress container, or returns nil when bars are disabled.
func New(o Options) *Progress {
	if !o.Enabled() {
		return nil
	}
	if o.Refresh <= 0 {
		o.Refresh = 150 * time.Millisecond
	}
	opts := []mpb.ContainerOption{mpb.WithWidth(40), mpb.WithRefreshRate(o.Refresh)}
	if o.Out != nil {
		// mpb only redraws on its own on a terminal; a forced writer
		// asked for the drawing anyway.
		opts = append(opts, mpb.WithOutput(o.Out), mpb.WithAutoRefresh())
	} else {
		opts = append(opts, mpb.WithOutput(os.Stderr))
	}
	return &Progress{p: mpb.New(opts...)}
}

// Bar is one bar; a nil *Bar is valid and does nothing.
type Bar struct {
	b *mpb.Bar
}

// Add starts a bar named name counting to total (0: unknown yet, set it
// later with SetTotal).
func (p *Progress) Add(name string, total int64, unit Unit) *Bar {
	if p == nil {
		return nil
	}
	var counter, rate decor.Decorator
	if unit == Bytes {
		counter = decor.Counters(decor.SizeB1024(0), "% .1f / % .1f")
		rate = decor.AverageSpeed(decor.SizeB1024(0), "% .1f")
	} else {
		counter = decor.CountersNoUnit("%d / %d")
		rate = decor.Name("")
	}
	b := p.p.New(total, mpb.BarStyle(),
		mpb.PrependDecorators(decor.Name(name, decor.WC{C: decor.DindentRight | decor.DextraSpace}), counter),
		mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), decor.Name(" "), rate),
	)
	bar := &Bar{b: b}
	p.mu.Lock()
	p.bars = append(p.bars, bar)
	p.mu.Unlock()
	return bar
}

// Add advances the bar by n.
func (b *Bar) Add(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.b.IncrInt64(n)
}

// SetTotal changes the bar's target (e.g. once a listing has been summed).
func (b *Bar) SetTotal(total int64) {
	if b == nil {
		return
	}
	b.b.SetTotal(total, false)
}

// Done completes the bar at its current count, whether or not it reached
// its total (failed work stops the bar where it got to).
func (b *Bar) Done() {
	if b == nil {
		return
	}
	b.b.SetTotal(-1, true)
}

// Wait completes every bar still open and waits for the last redraw, so
// the terminal is clean before the caller prints its summary.
func (p *Progress) Wait() {
	if p == nil {
		return
	}
	p.mu.Lock()
	bars := append([]*Bar(nil), p.bars...)
	p.mu.Unlock()
	for _, b := range bars {
		if !b.b.Completed() {
			b.Done()
		}
	}
	p.p.Wait()
}

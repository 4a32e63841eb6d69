package netem

import (
	"testing"
	"time"
)

// TestWakeAtDefersWhileBusy: while packets arrive close together, the
// timer waits up to the train window past the head's first segment's due
// time (an arrival will likely deliver it sooner); at rest, or after a
// single packet following a pause, it is set for the due time.
func TestWakeAtDefersWhileBusy(t *testing.T) {
	ms := int64(time.Millisecond)
	f := &forwarder{dirs: [2]*fwdDir{{window: ms}, {window: ms / 2}}}
	now := 10 * ms
	if got := f.wakeAt(now); got != -1 {
		t.Fatalf("nothing held: wakeAt %d, want -1", got)
	}
	var seq uint64
	// A super-packet whose first segment was due 0.4 ms before its last.
	f.dirs[0].h.push(&Packet{Due: 30 * ms, first: 30*ms - 4*ms/10}, &seq)
	f.lastRead = now - 2*ms
	if got, want := f.wakeAt(now), 30*ms-int64(slack); got != want {
		t.Errorf("at rest: wakeAt %d, want the due time less slack %d", got, want)
	}
	// One packet just read, the one before 5 ms earlier (a ping, a
	// request): on time.
	f.prevRead, f.lastRead = now-5*ms, now
	if got, want := f.wakeAt(now), 30*ms-int64(slack); got != want {
		t.Errorf("one packet after a pause: wakeAt %d, want the due time less slack %d", got, want)
	}
	f.prevRead = now - ms/10
	if got, want := f.wakeAt(now), 30*ms+6*ms/10; got != want {
		t.Errorf("busy: wakeAt %d, want the first segment's due + window %d", got, want)
	}
	// Paced super-packets 1.2 windows apart (100 Mbit/s, 25 ms): busy.
	f.prevRead = now - 12*ms/10
	if got, want := f.wakeAt(now), 30*ms+6*ms/10; got != want {
		t.Errorf("reads 1.2 windows apart: wakeAt %d, want the first segment's due + window %d", got, want)
	}
	f.prevRead = now - ms/10
	// The other direction's head, due earlier, comes first, by its own window.
	f.dirs[1].h.push(&Packet{Due: 29 * ms, first: 29 * ms}, &seq)
	if got, want := f.wakeAt(now), 29*ms+ms/2; got != want {
		t.Errorf("two directions: wakeAt %d, want %d", got, want)
	}
}

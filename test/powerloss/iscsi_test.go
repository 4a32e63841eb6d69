package powerloss_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/client/iscsi"
)

const (
	lunBucket     = "plv"
	lunName       = "vol0"
	lunIQN        = "iqn.2026-11.io.tristore:" + lunBucket + ":" + lunName
	lunWorkers    = 4
	lunBlock      = 4096 // bytes per tracked block (one WRITE unit)
	lunPerWorker  = 32   // tracked blocks each worker owns
	lunVolumeSize = "4MiB"
)

// lunOps names the operations a run may use; claimNoWCE makes the checker
// treat the LUN as if it reported WCE=0 (every completed write promised).
type lunOps struct{ fua, flush, claimNoWCE bool }

var allLUNOps = lunOps{fua: true, flush: true}

// blockState is what a block may hold after a cut: the promised content,
// or any version written (or in flight) since then.
type blockState struct {
	promised string
	since    []string
}

func lunOpen(ctx context.Context, portal string) (*iscsi.Session, error) {
	return iscsi.Open(ctx, iscsi.Config{Portal: portal, Target: lunIQN, QueueDepth: 8, DialTimeout: 5 * time.Second})
}

// writeCacheEnabled reads the WCE bit of the caching mode page (MODE
// SENSE(6), page 08h, no block descriptors).
func writeCacheEnabled(ctx context.Context, s *iscsi.Session) (bool, error) {
	buf := make([]byte, 255)
	r, err := s.Do(ctx, &iscsi.Command{CDB: []byte{0x1a, 0x08, 0x08, 0, 255, 0}, In: buf})
	if err != nil {
		return false, err
	}
	if err := r.Err(); err != nil {
		return false, err
	}
	page := buf[4+int(buf[3]):]
	if r.N < 4+int(buf[3])+3 || page[0]&0x3f != 0x08 {
		return false, fmt.Errorf("MODE SENSE: no caching page in %x", buf[:r.N])
	}
	return page[2]&0x04 != 0, nil
}

// lunScenario: workers write their own blocks of a volume with FUA, or
// plainly and then SYNCHRONIZE CACHE, while the power is cut after a
// random number of completions. After each reboot every block must hold
// its promised content or a version written after it. What a plain write
// promises follows the caching mode page: with WCE=0 every completed write
// is promised, so a LUN that reports no write cache but caches is caught.
func lunScenario(t testing.TB, r *rig, seed uint64, rounds int, ops lunOps) *report {
	rep := &report{}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout())
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 5))
	r.run(ctx, "volume", "create", lunBucket+"/"+lunName, lunVolumeSize)
	srv := r.start(ctx)
	zero := sum(make([]byte, lunBlock))
	blocks := make([]blockState, lunWorkers*lunPerWorker)
	for i := range blocks {
		blocks[i].promised = zero
	}
	for round := range rounds {
		s, err := lunOpen(ctx, srv.addrs["iscsi"])
		if err != nil {
			t.Fatalf("iSCSI login: %v\n%s", err, srv.proc.Log())
		}
		wce, err := writeCacheEnabled(ctx, s)
		if err != nil {
			t.Fatalf("caching mode page: %v", err)
		}
		if !wce {
			// The LUN keeps plain writes in the page cache: WCE=0 would be a
			// false claim (and the checker below would then find lost writes).
			t.Errorf("caching mode page reports WCE=0, but plain writes are only durable after SYNCHRONIZE CACHE")
		}
		if ops.claimNoWCE {
			wce = false
		}
		cut := newCutter(rng, 60)
		stop := make(chan struct{})
		rctx, rcancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := range lunWorkers {
			wseed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				lunWorker(rctx, s, w, wseed, ops, wce, blocks[w*lunPerWorker:(w+1)*lunPerWorker], cut, stop)
			}()
		}
		go func() { wg.Wait(); cut.now() }()
		cut.wait(20 * time.Second)
		r.crash()
		close(stop)
		rcancel()
		wg.Wait()
		s.Close()
		srv = r.start(ctx)
		lunCheck(ctx, srv.addrs["iscsi"], blocks, rep, round)
		t.Logf("iscsi round %d (WCE=%v): cut after %d completions; %d violations so far; fs %+v", round, wce, cut.acks, len(rep.errs), r.fs.Stats())
	}
	return rep
}

func lunWorker(ctx context.Context, s *iscsi.Session, w int, seed uint64, ops lunOps, wce bool, blocks []blockState, cut *cutter, stop chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 6))
	base := int64(w * lunPerWorker * lunBlock)
	for i := 0; i < 400; i++ {
		select {
		case <-stop:
			return
		default:
		}
		octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
		fua := ops.fua && (!ops.flush || rng.IntN(2) == 0)
		if fua {
			b := rng.IntN(len(blocks))
			data := payload(rng.Uint64(), lunBlock)
			v := sum(data)
			blocks[b].since = append(blocks[b].since, v)
			_, err := s.WriteAtFUA(octx, data, base+int64(b)*lunBlock)
			ocancel()
			if err != nil {
				return
			}
			blocks[b].promised, blocks[b].since = v, nil
			cut.ack()
			continue
		}
		// A few plain writes, then SYNCHRONIZE CACHE.
		for range 1 + rng.IntN(4) {
			b := rng.IntN(len(blocks))
			data := payload(rng.Uint64(), lunBlock)
			v := sum(data)
			blocks[b].since = append(blocks[b].since, v)
			if _, err := s.WriteAt(octx, data, base+int64(b)*lunBlock); err != nil {
				ocancel()
				return
			}
			if !wce { // no write cache reported: completion is the promise
				blocks[b].promised, blocks[b].since = v, nil
			}
			cut.ack()
		}
		err := s.Flush(octx)
		ocancel()
		if err != nil {
			return
		}
		for b := range blocks {
			if n := len(blocks[b].since); n > 0 {
				blocks[b].promised, blocks[b].since = blocks[b].since[n-1], nil
			}
		}
		cut.ack()
	}
}

// lunCheck reads every tracked block after the reboot.
func lunCheck(ctx context.Context, portal string, blocks []blockState, rep *report, round int) {
	s, err := lunOpen(ctx, portal)
	if err != nil {
		rep.violate("round %d: iSCSI login after restart: %v", round, err)
		return
	}
	defer s.Close()
	buf := make([]byte, len(blocks)*lunBlock)
	if _, err := s.ReadAt(ctx, buf, 0); err != nil {
		rep.violate("round %d: READ after restart: %v", round, err)
		return
	}
	for b := range blocks {
		got := sum(buf[b*lunBlock : (b+1)*lunBlock])
		ok := got == blocks[b].promised
		for _, v := range blocks[b].since {
			ok = ok || got == v
		}
		if !ok {
			rep.violate("round %d: block %d holds %s; promised %s, written since %v", round, b, got, blocks[b].promised, blocks[b].since)
		}
		blocks[b].promised, blocks[b].since = got, nil
	}
}

func TestISCSIPowerLoss(t *testing.T) {
	r := newRig(t, ourBin(t))
	rep := lunScenario(t, r, uint64(time.Now().UnixNano()), iterations(20), allLUNOps)
	rep.errorAll(t)
}

// TestISCSIPowerLossSidecar is the iSCSI scenario on a file system without
// xattrs (the volume registry then lives in a sidecar file, not on the
// bucket directory).
func TestISCSIPowerLossSidecar(t *testing.T) {
	r := newSidecarRig(t, ourBin(t))
	rep := lunScenario(t, r, uint64(time.Now().UnixNano()), iterations(5), allLUNOps)
	rep.errorAll(t)
}

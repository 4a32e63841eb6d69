package powerloss_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/client/nfs"
)

const nfsWorkers = 4

// anyContent is the state of a name that exists but whose content is not
// promised (a WRITE or COMMIT was in flight at the cut).
const anyContent = "<any>"

// nfsOps names the operations a run may use.
// oldHandles also checks that file handles from before a cut still
// resolve after the reboot.
// crossOnly makes every RENAME move the file into sub/.
type nfsOps struct{ fileSync, commit, namespace, oldHandles, crossOnly bool }

var allNFSOps = nfsOps{fileSync: true, commit: true, namespace: true}

// nfsFile is one name a worker made; worker w owns nfs/w<w>.
type nfsFile struct {
	keyState
	fh nfs.FH // handle from before the last cut (it must survive the reboot)
}

func nfsDial(ctx context.Context, addr string) (*nfs.Client, error) {
	c, err := nfs.Dial(ctx, addr, nfs.Options{Timeout: 15 * time.Second, Retries: -1})
	if err != nil {
		return nil, err
	}
	if _, err := c.Mount(ctx, "/"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// nfsScenario: workers CREATE files on a sync export, WRITE them with
// FILE_SYNC or UNSTABLE + COMMIT, RENAME and REMOVE them, while the power
// is cut after a random number of replies. After each reboot every name
// must be as acknowledged (or as the one call in flight would leave it),
// file handles from before the cut must still work, and the write
// verifier must have changed.
func nfsScenario(t testing.TB, r *rig, seed uint64, rounds int, ops nfsOps) *report {
	rep := &report{}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout())
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 3))
	srv := r.start(ctx)
	c, err := nfsDial(ctx, srv.addrs["nfs"])
	if err != nil {
		t.Fatalf("nfs mount: %v", err)
	}
	top, _, err := c.Mkdir(ctx, c.Root(), "nfs", nfs.SetAttr{})
	if err != nil {
		t.Fatalf("MKDIR nfs: %v", err)
	}
	files := make([]map[string]*nfsFile, nfsWorkers)
	for w := range nfsWorkers {
		wd, _, err := c.Mkdir(ctx, top, fmt.Sprintf("w%d", w), nfs.SetAttr{})
		if err != nil {
			t.Fatalf("MKDIR: %v", err)
		}
		if _, _, err := c.Mkdir(ctx, wd, "sub", nfs.SetAttr{}); err != nil {
			t.Fatalf("MKDIR: %v", err)
		}
		files[w] = map[string]*nfsFile{}
	}
	c.Close()
	var verf nfs.Verifier
	for round := range rounds {
		c, err := nfsDial(ctx, srv.addrs["nfs"])
		if err != nil {
			t.Fatalf("nfs mount: %v", err)
		}
		cut := newCutter(rng, 40)
		stop := make(chan struct{})
		rctx, rcancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var vmu sync.Mutex
		for w := range nfsWorkers {
			wseed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := nfsWorker(rctx, c, w, wseed, round, ops, files[w], cut, stop)
				vmu.Lock()
				if v != (nfs.Verifier{}) {
					verf = v
				}
				vmu.Unlock()
			}()
		}
		t0 := time.Now()
		go func() { wg.Wait(); cut.now() }()
		cut.wait(20 * time.Second)
		t1 := time.Now()
		r.crash()
		close(stop)
		rcancel() // calls in flight stay unacknowledged
		wg.Wait()
		c.Close()
		srv = r.start(ctx)
		t3 := time.Now()
		nfsCheck(ctx, r, srv.addrs["nfs"], files, verf, ops.oldHandles, rep, round)
		t.Logf("nfs round %d: cut after %d replies (%v running, %v to reboot, %v to check); %d violations so far, %d old handles checked; fs %+v", round, cut.acks, t1.Sub(t0), t3.Sub(t1), time.Since(t3), len(rep.errs), rep.handleChecks, r.fs.Stats())
	}
	return rep
}

// nfsWorker runs file lives in dir nfs/w<w>: CREATE, WRITE (FILE_SYNC,
// DATA_SYNC or UNSTABLE + COMMIT), RENAME (within the directory or into
// its sub/), and REMOVE of an older file. It returns the
// last write verifier it saw.
func nfsWorker(ctx context.Context, c *nfs.Client, w int, seed uint64, round int, ops nfsOps, files map[string]*nfsFile, cut *cutter, stop chan struct{}) (verf nfs.Verifier) {
	rng := rand.New(rand.NewPCG(seed, 4))
	dir, _, err := c.LookupPath(ctx, fmt.Sprintf("nfs/w%d", w))
	if err != nil {
		return
	}
	sub, _, err := c.Lookup(ctx, dir, "sub")
	if err != nil {
		return
	}
	// call runs one acknowledged step: the name's state is pending while
	// it runs and acked when it returns without error.
	call := func(f *nfsFile, pending string, do func(context.Context) error) bool {
		f.pending = pending
		octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
		err := do(octx)
		ocancel()
		if err != nil {
			return false
		}
		f.acked, f.pending = pending, ""
		cut.ack()
		return true
	}
	// remove REMOVEs one existing file other than keep; false when the
	// call failed (the power is out).
	remove := func(keep string) bool {
		for n, o := range files {
			if n != keep && o.acked != absent {
				rdir := dir
				if path.Dir(n) == "sub" {
					rdir = sub
				}
				if !call(o, absent, func(ctx context.Context) error { return c.Remove(ctx, rdir, path.Base(n)) }) {
					return false
				}
				o.fh = nil
				return true
			}
		}
		return true
	}
	for i := 0; i < 200; i++ {
		select {
		case <-stop:
			return
		default:
		}
		// Keep a worker's directory small (a soak's checks stay short):
		// first remove what earlier rounds left beyond 16 files.
		live := 0
		for _, o := range files {
			if o.acked != absent {
				live++
			}
		}
		for ; live > 16; live-- {
			if !remove("") {
				return
			}
		}
		name := fmt.Sprintf("f%d-%d", round, i)
		f := &nfsFile{keyState: keyState{acked: absent}}
		files[name] = f
		var fh nfs.FH
		if !call(f, sum(nil), func(ctx context.Context) error { // an empty file
			var err error
			fh, _, err = c.Create(ctx, dir, name, nfs.Guarded, nfs.SetAttr{}, nfs.Verifier{})
			return err
		}) {
			return
		}
		if !ops.namespace {
			f.acked = anyContent // CREATE's durability is not under test
		}
		f.fh = fh
		body := payload(rng.Uint64(), 1+rng.IntN(96<<10))
		useCommit := ops.commit && (!ops.fileSync || rng.IntN(2) == 0)
		ok := call(f, sum(body), func(ctx context.Context) error {
			if !useCommit {
				how := nfs.FileSync
				if rng.IntN(3) == 0 {
					how = nfs.DataSync
				}
				res, err := c.Write(ctx, fh, 0, body, how)
				if err == nil && (res.Committed < how || int(res.Count) != len(body)) {
					err = fmt.Errorf("WRITE %v answered %v, %d of %d bytes", how, res.Committed, res.Count, len(body))
				}
				verf = res.Verf
				return err
			}
			for off := 0; off < len(body); off += 32 << 10 {
				end := min(off+32<<10, len(body))
				res, err := c.Write(ctx, fh, uint64(off), body[off:end], nfs.Unstable)
				if err != nil {
					return err
				}
				verf = res.Verf
			}
			v, err := c.Commit(ctx, fh, 0, 0)
			if err == nil && v != verf {
				err = errors.New("verifier changed between WRITE and COMMIT")
			}
			return err
		})
		if !ok {
			f.pending = anyContent
			return
		}
		if !ops.namespace {
			continue
		}
		// RENAME f… -> g… in the same directory or into sub/ (then both
		// directories must be fsynced).
		gname, gdir := "g"+name[1:], dir
		if ops.crossOnly || rng.IntN(2) == 0 {
			gname, gdir = "sub/g"+name[1:], sub
		}
		g := &nfsFile{keyState: keyState{acked: absent}, fh: fh}
		files[gname] = g
		content := f.acked
		f.pending, g.pending = absent, content
		octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
		err := c.Rename(octx, dir, name, gdir, path.Base(gname))
		ocancel()
		if err != nil {
			return
		}
		f.acked, f.pending, f.fh = absent, "", nil
		g.acked, g.pending = content, ""
		cut.ack()
		// REMOVE an older file now and then.
		if rng.IntN(2) == 0 && !remove(gname) {
			return
		}
	}
	return
}

// nfsCheck verifies every name after a reboot through a fresh mount and
// through the handles from before the cut.
func nfsCheck(ctx context.Context, r *rig, addr string, files []map[string]*nfsFile, verf nfs.Verifier, oldHandles bool, rep *report, round int) {
	c, err := nfsDial(ctx, addr)
	if err != nil {
		rep.violate("round %d: mount after restart: %v", round, err)
		return
	}
	defer c.Close()
	checkedVerf := false
	for w, m := range files {
		dir, _, err := c.LookupPath(ctx, fmt.Sprintf("nfs/w%d", w))
		if err != nil {
			rep.violate("round %d: LOOKUP nfs/w%d: %v", round, w, err)
			continue
		}
		for _, d := range []string{"", "sub"} {
			ents, _ := os.ReadDir(filepath.Join(r.data, "nfs", fmt.Sprintf("w%d", w), d))
			for _, e := range ents {
				if _, ok := m[path.Join(d, e.Name())]; !ok && !(d == "" && e.Name() == "sub") {
					rep.violate("round %d: unexpected name nfs/w%d/%s after restart", round, w, path.Join(d, e.Name()))
				}
			}
		}
		sub, _, err := c.Lookup(ctx, dir, "sub")
		if err != nil {
			rep.violate("round %d: LOOKUP nfs/w%d/sub: %v", round, w, err)
			continue
		}
		for name, f := range m {
			// First the handle from before the cut, as a client that held
			// the file open would use it (before any LOOKUP warms a cache).
			if oldHandles && f.fh != nil && f.acked != absent {
				rep.handleChecks++
				if _, err := c.Getattr(ctx, f.fh); err != nil {
					rep.violate("round %d: handle of nfs/w%d/%s from before the reboot: %v", round, w, name, err)
				}
			}
			got := absent
			ldir := dir
			if path.Dir(name) == "sub" {
				ldir = sub
			}
			fh, _, err := c.Lookup(ctx, ldir, path.Base(name))
			switch {
			case errors.Is(err, nfs.ErrNoEnt):
			case err != nil:
				rep.violate("round %d: LOOKUP %s: %v", round, name, err)
				continue
			default:
				b, err := c.ReadFile(ctx, fh)
				if err != nil {
					rep.violate("round %d: READ %s: %v", round, name, err)
					continue
				}
				got = sum(b)
				if !checkedVerf && verf != (nfs.Verifier{}) {
					checkedVerf = true
					if v, err := c.Commit(ctx, fh, 0, 0); err == nil && v == verf {
						rep.violate("round %d: write verifier %x unchanged across the reboot", round, v)
					}
				}
			}
			ok := got == f.acked || got == f.pending
			if (f.acked == anyContent || f.pending == anyContent) && got != absent {
				ok = true
			}
			if !ok {
				rep.violate("round %d: nfs/w%d/%s holds %s; acknowledged %s, in flight %q", round, w, name, got, f.acked, f.pending)
			}
			f.acked, f.pending = got, ""
			if got == absent {
				delete(m, name)
			} else {
				f.fh = fh
			}
		}
	}
}

func TestNFSPowerLoss(t *testing.T) {
	r := newRig(t, ourBin(t))
	rep := nfsScenario(t, r, uint64(time.Now().UnixNano()), iterations(20), allNFSOps)
	rep.errorAll(t)
}

// TestNFSOldHandlesAfterPowerLoss: an NFS file handle must survive a
// server reboot (RFC 1813 handles are persistent). It used to fail: after
// a reboot (a cold dcache) open_by_handle_at of a regular file yields a
// disconnected dentry whose /proc path is "/", and vfs called the handle
// stale. vfs now finds the file again through the directory its handle
// carries (vfs/reconnect.go).
func TestNFSOldHandlesAfterPowerLoss(t *testing.T) {
	r := newRig(t, ourBin(t))
	ops := allNFSOps
	ops.oldHandles = true
	rep := nfsScenario(t, r, uint64(time.Now().UnixNano()), iterations(2), ops)
	rep.errorAll(t)
}

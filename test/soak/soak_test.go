package soak

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/internal/testutil"
)

func TestMain(m *testing.M) {
	if os.Getenv(supervisorEnv) == "1" {
		superviseMain()
		return
	}
	testutil.Main(m)
}

// settings of one soak run, from the environment (docs/soak.md).
type settings struct {
	dur      time.Duration
	seed     uint64
	kinds    []string         // chaos: kill9, stop
	every    [2]time.Duration // between chaos events
	maxPause time.Duration    // kill -9 .. restart
	maxStop  time.Duration    // SIGSTOP .. SIGCONT
	netem    []string         // `tristore netem run` link flags; nil = loopback
	report   string           // summary path (text; + .json)
	volSize  int64
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func parseSettings(dur time.Duration) (settings, error) {
	s := settings{dur: dur, seed: uint64(time.Now().UnixNano()), maxPause: 2 * time.Second, maxStop: 4 * time.Second,
		report: os.Getenv("TRISTORE_SOAK_REPORT"), volSize: 256 << 20}
	if v := os.Getenv("TRISTORE_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("TRISTORE_SOAK_SEED=%q: %v", v, err)
		}
		s.seed = n
	}
	switch c := envOr("TRISTORE_SOAK_CHAOS", "kill9,stop"); c {
	case "none", "off":
	default:
		for _, k := range strings.Split(c, ",") {
			if k != "kill9" && k != "stop" {
				return s, fmt.Errorf("TRISTORE_SOAK_CHAOS=%q: want kill9,stop or none", c)
			}
			s.kinds = append(s.kinds, k)
		}
	}
	ev := strings.SplitN(envOr("TRISTORE_SOAK_EVERY", "8s-20s"), "-", 2)
	for i := range 2 {
		d, err := time.ParseDuration(ev[min(i, len(ev)-1)])
		if err != nil || d < time.Second {
			return s, fmt.Errorf("TRISTORE_SOAK_EVERY: want MIN-MAX like 8s-20s (at least 1s)")
		}
		s.every[i] = d
	}
	if v := os.Getenv("TRISTORE_SOAK_NETEM"); v != "" {
		s.netem = strings.Fields(v)
	}
	return s, nil
}

func (s settings) describe() map[string]string {
	m := map[string]string{
		"duration": s.dur.String(), "seed": strconv.FormatUint(s.seed, 10), "chaos": strings.Join(s.kinds, ","),
		"chaos_every": s.every[0].String() + "-" + s.every[1].String(), "kill_pause_max": s.maxPause.String(),
		"stop_max": s.maxStop.String(), "volume": fmt.Sprintf("%dMiB", s.volSize>>20), "link": "loopback",
	}
	if len(s.kinds) == 0 {
		m["chaos"] = "none"
	}
	if s.netem != nil {
		m["link"] = "netem " + strings.Join(s.netem, " ")
	}
	return m
}

// TestSoak is the long soak: TRISTORE_SOAK=DURATION (e.g. 10m), run by
// scripts/soak.sh. It needs root (FUSE, loop devices, mount).
func TestSoak(t *testing.T) {
	v := os.Getenv("TRISTORE_SOAK")
	if v == "" {
		t.Skip("the soak runs only with TRISTORE_SOAK=DURATION (e.g. TRISTORE_SOAK=10m, or scripts/soak.sh 10m): it takes minutes")
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 20*time.Second {
		t.Fatalf("TRISTORE_SOAK=%q: want a duration of at least 20s", v)
	}
	s, err := parseSettings(d)
	if err != nil {
		t.Fatal(err)
	}
	runSoak(t, s)
}

// rig is everything the soak set up; teardown removes it in reverse,
// even after a failure.
type rig struct {
	sup      *supervisor
	t        *testing.T
	rec      *recorder
	root     string
	srv      *server
	link     *proc // `tristore netem run`, or nil
	clientNS string
	nfs      *proc
	iscsi    *proc
	loop     *testutil.Loop
	ext4     string
	nfsMnt   string
	iscsiMnt string
}

func runSoak(t *testing.T, st settings) {
	testutil.NeedRoot(t, "FUSE mounts, loop devices and mount(8)")
	testutil.NeedFUSE(t)
	for _, c := range []string{"go", "git", "tar", "sqlite3", "losetup", "mkfs.ext4", "e2fsck", "mount", "umount", "nsenter"} {
		testutil.NeedCmd(t, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), st.dur+25*time.Minute)
	defer cancel()
	started := time.Now()
	sum := &summary{Started: started, Settings: st.describe(), LoadBefore: loadavg()}
	rec := newRecorder(t.Logf)
	rng := rand.New(rand.NewPCG(st.seed, st.seed^0x5eed))
	t.Logf("soak: %v, seed %d, chaos %v every %v, link %s; load %s", st.dur, st.seed, st.kinds, st.every, sum.Settings["link"], sum.LoadBefore)

	bin := testutil.TristoreBin(ctx, t)
	root, err := os.MkdirTemp("", "tsoak-") // not tristore-*: a broad cleanup glob of other tests must not reach live mounts
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, rec: rec, root: root, nfsMnt: filepath.Join(root, "nfs"), iscsiMnt: filepath.Join(root, "iscsi"), ext4: filepath.Join(root, "ext4")}
	t.Cleanup(r.teardown)

	host := "127.0.0.1"
	var serverNS string
	if st.netem != nil {
		if serverNS, err = r.startLink(bin, st); err != nil {
			t.Fatal(err)
		}
		host = "192.0.2.2"
	}
	// Before any mount exists: see supervisor_test.go.
	if r.sup, err = startSupervisor(); err != nil {
		t.Fatal(err)
	}
	if r.srv, err = newServer(r.sup, bin, root, host, serverNS); err != nil {
		t.Fatal(err)
	}
	if out, err := r.srv.tristore(ctx, "volume", "create", "--data", r.srv.data, "vols/lun0", strconv.FormatInt(st.volSize, 10)); err != nil {
		t.Fatalf("volume create: %v\n%s", err, out)
	}
	if took, err := r.srv.start(90 * time.Second); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("serve ready in %v at %v", took, r.srv.addr)
	}
	var dial dialFunc
	if r.clientNS != "" {
		dial = nsDialer(r.clientNS)
	}
	s3c := newS3(r.srv.addr["s3"], dial)
	for _, b := range []string{"soak", "soaks3"} {
		if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatalf("CreateBucket %s: %v", b, err)
		}
	}
	if r.nfs, err = startMount(ctx, r.srv, "nfs mount", "nfs://"+r.srv.addr["nfs"]+"/", r.nfsMnt, filepath.Join(root, "mount-nfs.log"), r.clientNS, "", 0); err != nil {
		t.Fatal(err)
	}
	iqn := "iqn.2026-11.io.tristore:vols:lun0"
	if r.iscsi, err = startMount(ctx, r.srv, "iscsi mount", "iscsi://"+r.srv.addr["iscsi"]+"/"+iqn+"/0", r.iscsiMnt,
		filepath.Join(root, "mount-iscsi.log"), r.clientNS, "lun", st.volSize); err != nil {
		t.Fatal(err)
	}
	r.loop = testutil.AttachLoop(t, filepath.Join(r.iscsiMnt, "lun"))
	// After the loop device's own cleanup registered by AttachLoop, so it
	// runs first: the ext4 on it goes before the device is detached.
	t.Cleanup(r.dropExt4)
	if _, err := run(ctx, 5*time.Minute, "", nil, "mkfs.ext4", "-q", "-F", "-E", "nodiscard", r.loop.Dev); err != nil {
		t.Fatal(err)
	}
	if err := r.mountExt4(ctx); err != nil {
		t.Fatal(err)
	}
	tarball, want := sourceTree(ctx, t, root)

	// The workloads.
	base := filepath.Join(r.nfsMnt, "soak")
	gw := &gitWork{dir: filepath.Join(base, "git")}
	tw := &tarWork{dir: filepath.Join(base, "tar"), tarball: tarball, want: want}
	sw := &sqliteWork{db: filepath.Join(base, "sqlite", "soak.db")}
	s3w := &s3Work{c: s3c, bucket: "soaks3", keys: 48}
	xw := &xviewWork{c: s3c, bucket: "soak", mnt: r.nfsMnt}
	fb := &fsx{name: "fsx", path: filepath.Join(r.ext4, "fsx.bin"), maxSize: 8 << 20}
	fd := &fsx{name: "fsx-direct", path: filepath.Join(r.ext4, "fsx-direct.bin"), maxSize: 4 << 20, direct: true}
	ef := &ext4Files{dir: filepath.Join(r.ext4, "files")}

	setupDone := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, st.dur)
	defer wcancel()
	rec.end = wctx
	var wg sync.WaitGroup
	done := map[string]chan struct{}{}
	goWork := func(name string, fn func(rng *rand.Rand)) {
		ch := make(chan struct{})
		done[name] = ch
		seed := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(ch)
			fn(rand.New(rand.NewPCG(seed, seed+1)))
		}()
	}
	goWork("git", func(rng *rand.Rand) { gw.run(wctx, rec, rng, 100000) })
	goWork("tar", func(*rand.Rand) { tw.run(wctx, rec, 10000) })
	goWork("sqlite", func(rng *rand.Rand) { sw.run(wctx, rec, rng, 1000000) })
	goWork("s3", func(rng *rand.Rand) { s3w.run(wctx, rec, rng, 10000000) })
	goWork("xview", func(rng *rand.Rand) { xw.run(wctx, rec, rng, 100000) })
	goWork("fsx", func(rng *rand.Rand) { fb.run(wctx, rec, rng, 10000000) })
	goWork("fsx-direct", func(rng *rand.Rand) { fd.run(wctx, rec, rng, 10000000) })
	goWork("ext4-files", func(rng *rand.Rand) { ef.run(wctx, rec, rng, 1000000) })

	// Chaos until a quiet tail before the end, so the last operations
	// meet a settled server.
	quietTail := min(30*time.Second, st.dur/4)
	cctx, ccancel := context.WithTimeout(ctx, st.dur-quietTail)
	defer ccancel()
	ch := &chaos{srv: r.srv, rng: rand.New(rand.NewPCG(st.seed+7, st.seed+8)), kinds: st.kinds, every: st.every,
		maxPause: st.maxPause, maxStop: st.maxStop, rec: rec}
	chaosDone := make(chan struct{})
	go func() { defer close(chaosDone); ch.run(cctx, 100000) }()

	// Progress and the hang watchdog.
	watchDone := make(chan struct{})
	dataGone := false
	go func() {
		defer close(watchDone)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			rec.watchHangs(2 * time.Minute)
			if _, err := os.Stat(filepath.Join(r.srv.data, "vols", "lun0")); err != nil && !dataGone {
				// Someone removed the server's tree under it: say when,
				// and who was running.
				dataGone = true
				ps, _ := run(context.Background(), 20*time.Second, "", nil, "ps", "-eo", "pid,ppid,etime,args")
				rec.bad("the server's tree lost vols/lun0 (%v); processes:\n%s", err, clip(ps, 20000))
			}
			if n%12 == 0 {
				t.Logf("soak: %v in, %d outages, load %s, ops %v", time.Since(setupDone).Round(time.Second), len(ch.outages()), loadavg(), rec.snapshot())
			}
		}
	}()
	<-wctx.Done()
	<-chaosDone
	<-watchDone
	// Workloads end their current op; a stuck one is a finding (and the
	// teardown's kills unstick it).
	waitAll := make(chan struct{})
	go func() { wg.Wait(); close(waitAll) }()
	select {
	case <-waitAll:
	case <-time.After(5 * time.Minute):
		for name, c := range done {
			select {
			case <-c:
			default:
				rec.stuck(name, viewOf(name), 5*time.Minute)
			}
		}
		rec.watchHangs(time.Minute)
	}
	t.Logf("workloads stopped after %v; verifying", time.Since(setupDone).Round(time.Second))
	if r.srv.pid() == 0 {
		rec.note("server was down at the end; starting it for the checks")
		if _, err := r.srv.start(90 * time.Second); err != nil {
			rec.bad("server does not start for the final checks: %v", err)
		}
	} else {
		r.srv.signal(syscall.SIGCONT)
	}

	// Final checks, live through the mounts. Each is bounded: one stuck
	// on a hung mount is a finding, and the soak goes on to the rest.
	vctx, vcancel := context.WithTimeout(ctx, 20*time.Minute)
	defer vcancel()
	var checkMu sync.Mutex
	check := func(s string) { checkMu.Lock(); sum.Checks = append(sum.Checks, s); checkMu.Unlock(); t.Log(s) }
	bounded := func(what, view string, d time.Duration, fn func() string) {
		check(rec.bounded(what, view, d, fn))
	}
	bounded("git check through the NFS mount", viewNFS, 5*time.Minute, func() string { return gw.verify(vctx, rec, gw.dir, "through the NFS mount") })
	bounded("tar check through the NFS mount", viewNFS, 5*time.Minute, func() string { return tw.verify(rec, r.nfsMnt, r.nfsMnt, "through the NFS mount") })
	bounded("sqlite check through the NFS mount", viewNFS, 5*time.Minute, func() string { return sw.verify(vctx, rec, sw.db, "through the NFS mount") })
	bounded("s3 check", viewS3, 5*time.Minute, func() string { return s3w.verify(vctx, rec) })
	bounded("xview check through the NFS mount", viewNFS, 5*time.Minute, func() string { return xw.verify(vctx, rec, r.nfsMnt, "through the NFS mount") })
	// ext4: unmount, fsck, mount again, compare with the models.
	bounded("ext4 checks", viewBlock, 15*time.Minute, func() string {
		check(ef.verify(rec, "live"))
		fb.close()
		fd.close()
		if err := r.umountExt4(vctx); err != nil {
			rec.bad("umount ext4: %v", err)
			return "ext4: umount FAILED"
		}
		out, err := run(vctx, 10*time.Minute, "", nil, "e2fsck", "-fn", r.loop.Dev)
		if err != nil {
			rec.bad("e2fsck -fn after the soak: %v", err)
			check("ext4: e2fsck -fn FAILED: " + clip(out, 500))
		} else {
			check("ext4: e2fsck -fn clean after unmount")
		}
		if err := r.mountExt4(vctx); err != nil {
			rec.bad("mount ext4 again: %v", err)
			return "ext4: mount after fsck FAILED"
		}
		check(fb.verifyReopen(rec, fb.path, "after remount"))
		check(fd.verifyReopen(rec, fd.path, "after remount"))
		check(ef.verify(rec, "after remount"))
		if err := r.umountExt4(vctx); err != nil {
			rec.bad("umount ext4: %v", err)
			return "ext4: final umount FAILED"
		}
		return "ext4: checks done"
	})
	dumped := false
	if rec.isHung() {
		// Goroutine dumps of the mounts and the server, for the report;
		// SIGQUIT ends them, so the server is started again.
		dumped = true
		r.dumpStacks()
		if _, err := r.srv.start(90 * time.Second); err != nil {
			rec.bad("server does not start after the stack dump: %v", err)
		}
	}
	if r.ext4Mounted() {
		rec.note("ext4 still mounted after the checks; detaching it lazily")
		testutil.Quiet("umount", "-l", r.ext4)
	}
	r.detachLoop()
	for _, p := range []*proc{r.iscsi, r.nfs} {
		if err := p.stop(syscall.SIGINT, 60*time.Second); err != nil && !dumped {
			rec.bad("%v", err)
		}
	}
	// Everything again from the server's own tree (what a fresh client
	// sees), and the volume must be the same bytes over all three views.
	data := r.srv.data
	bounded("git check in the server's tree", viewNFS, 5*time.Minute, func() string {
		return gw.verify(vctx, rec, filepath.Join(data, "soak", "git"), "in the server's tree")
	})
	check(tw.verify(rec, r.nfsMnt, data, "in the server's tree"))
	check(sw.verify(vctx, rec, filepath.Join(data, "soak", "sqlite", "soak.db"), "in the server's tree"))
	bounded("xview check in the server's tree", viewS3, 5*time.Minute, func() string { return xw.verify(vctx, rec, data, "in the server's tree") })
	if nfs2, err := startMount(vctx, r.srv, "nfs mount 2", "nfs://"+r.srv.addr["nfs"]+"/", r.nfsMnt, filepath.Join(root, "mount-nfs2.log"), r.clientNS, "", 0); err != nil {
		rec.bad("second NFS mount: %v", err)
	} else {
		r.nfs = nfs2
		bounded("volume over three views", viewNFS, 10*time.Minute, func() string {
			return volumeViews(vctx, rec, s3c, filepath.Join(r.nfsMnt, "vols", "lun0"), filepath.Join(data, "vols", "lun0"))
		})
		if err := nfs2.stop(syscall.SIGINT, 60*time.Second); err != nil {
			rec.bad("nfs mount 2: %v", err)
		}
	}
	if err := r.srv.shutdown(); err != nil {
		rec.bad("server shutdown: %v", err)
	}
	sum.Starts = r.srv.starts

	outs := ch.outages()
	rec.mu.Lock()
	classify(rec.errs, outs)
	sum.Ops, sum.Cut, sum.Errors, sum.Data, sum.Notes = rec.ok, rec.cut, rec.errs, rec.data, rec.notes
	rec.mu.Unlock()
	sum.Outages = outs
	sum.Wall = fmt.Sprintf("%v (setup %v, workloads %v, checks %v)", time.Since(started).Round(time.Second),
		setupDone.Sub(started).Round(time.Second), st.dur, time.Since(setupDone.Add(st.dur)).Round(time.Second))
	sum.LoadAfter = loadavg()
	var failed []string
	for _, e := range sum.Errors {
		if failing(e.Class) {
			failed = append(failed, e.Workload+" "+e.Op)
		}
	}
	sum.Verdict = "PASS"
	if len(sum.Data) > 0 || len(failed) > 0 {
		sum.Verdict = fmt.Sprintf("FAIL (%d data failures, %d new operation errors/hangs)", len(sum.Data), len(failed))
	}
	if err := sum.write(st.report); err != nil {
		t.Errorf("writing the summary: %v", err)
	}
	t.Log("\n" + sum.text())
	if sum.Verdict != "PASS" {
		t.Errorf("soak: %s", sum.Verdict)
	}
}

func viewOf(workload string) string {
	switch workload {
	case "s3":
		return viewS3
	case "fsx", "fsx-direct", "ext4-files":
		return viewBlock
	}
	return viewNFS
}

func (r *recorder) snapshot() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	tot := map[string]int64{}
	for k, n := range r.ok {
		tot[strings.Fields(k)[0]] += n
	}
	return fmt.Sprintf("%v errors %d data %d", tot, len(r.errs), len(r.data))
}

// sourceTree tars Go's src/net (about 440 entries) as the tar workload's
// input and returns its expected checksums.
func sourceTree(ctx context.Context, t *testing.T, root string) (string, map[string]string) {
	goroot := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		goroot = strings.TrimSpace(string(out))
	}
	src := filepath.Join(goroot, "src", "net")
	want, err := treeSums(src)
	if err != nil {
		t.Fatalf("no Go source tree to untar: %v", err)
	}
	tarball := filepath.Join(root, "net.tar")
	if _, err := run(ctx, 2*time.Minute, "", nil, "tar", "-C", filepath.Dir(src), "-cf", tarball, "net"); err != nil {
		t.Fatal(err)
	}
	return tarball, want
}

// volumeViews: the LUN's bytes over S3 (GET), over NFS (the mount) and
// on the server's disk must be identical.
func volumeViews(ctx context.Context, rec *recorder, c *s3.Client, nfsPath, diskPath string) string {
	hashFile := func(p string) (string, error) {
		f, err := os.Open(p)
		if err != nil {
			return "", err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	disk, err := hashFile(diskPath)
	if err != nil {
		rec.bad("volume on disk: %v", err)
		return "volume: unreadable on disk"
	}
	viaNFS, err := hashFile(nfsPath)
	if err != nil {
		rec.bad("volume over NFS: %v", err)
	}
	var viaS3 string
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("vols"), Key: aws.String("lun0")})
	if err != nil {
		rec.bad("volume over S3: %v", err)
	} else {
		h := sha256.New()
		_, err = io.Copy(h, out.Body)
		out.Body.Close()
		if err != nil {
			rec.bad("volume over S3: %v", err)
		}
		viaS3 = hex.EncodeToString(h.Sum(nil))
	}
	if viaNFS != disk || viaS3 != disk {
		rec.bad("volume views disagree: disk %.12s NFS %.12s S3 %.12s", disk, viaNFS, viaS3)
		return "volume: the three views DISAGREE"
	}
	return "volume: SHA-256 " + disk[:12] + " over S3, over NFS and on disk"
}

func (r *rig) mountExt4(ctx context.Context) error {
	if err := os.MkdirAll(r.ext4, 0o755); err != nil {
		return err
	}
	_, err := run(ctx, 2*time.Minute, "", nil, "mount", "-t", "ext4", "-o", "errors=remount-ro", r.loop.Dev, r.ext4)
	return err
}

func (r *rig) ext4Mounted() bool { return testutil.IsMounted(r.ext4) }

// dumpStacks sends SIGQUIT to the mounts and the server: each Go process
// writes all its goroutines to its log (copied next to the summary) and
// exits.
func (r *rig) dumpStacks() {
	var ps []*proc
	for _, p := range []*proc{r.nfs, r.iscsi} {
		if p != nil && p.alive() {
			ps = append(ps, p)
			p.cmd.Process.Signal(syscall.SIGQUIT)
		}
	}
	if r.srv.pid() != 0 {
		r.srv.signal(syscall.SIGCONT)
		r.srv.signal(syscall.SIGQUIT) // the group: serve (nsenter has exec'd it)
		for i := 0; i < 100 && r.srv.pid() != 0; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if r.srv.pid() != 0 {
			r.srv.kill9()
		}
	}
	for _, p := range ps {
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
		}
	}
}

func (r *rig) umountExt4(ctx context.Context) error {
	if !testutil.IsMounted(r.ext4) {
		return nil
	}
	_, err := run(ctx, 5*time.Minute, "", nil, "umount", r.ext4)
	return err
}

// detachLoop detaches the loop device (Loop.Detach: retried, waits for
// the release); a failure is logged, the teardown sweeps what is left.
func (r *rig) detachLoop() {
	if r.loop == nil {
		return
	}
	if err := r.loop.Detach(r.t); err != nil {
		r.t.Logf("%v", err)
	}
	r.loop = nil
}

// startLink runs `tristore netem run --name ts-<pid>-soak FLAGS -- sleep`
// in the background: its namespaces carry the link while it lives. The
// server runs in the server namespace, the mounts and the S3 client in
// the client one.
func (r *rig) startLink(bin string, st settings) (serverNS string, err error) {
	testutil.NeedCmd(r.t, "chrt")
	testutil.NeedCmd(r.t, "ip")
	testutil.NeedTUN(r.t) // TRISTORE_SOAK_NETEM needs it
	name := fmt.Sprintf("ts-%d-soak", os.Getpid())
	sleep := strconv.Itoa(int((st.dur + 30*time.Minute).Seconds()))
	argv := append(append([]string{bin, "netem", "run", "--name", name}, st.netem...), "--", "sleep", sleep)
	if r.link, err = startProc("netem link", filepath.Join(r.root, "netem.log"), os.Environ(), argv...); err != nil {
		return "", err
	}
	c, s := "/run/netns/"+name+"-c", "/run/netns/"+name+"-s"
	for i := 0; i < 300; i++ {
		_, e1 := os.Stat(c)
		_, e2 := os.Stat(s)
		if e1 == nil && e2 == nil {
			// Give it a moment to finish the addresses and routes.
			time.Sleep(500 * time.Millisecond)
			r.clientNS = c
			return s, nil
		}
		if !r.link.alive() {
			return "", fmt.Errorf("netem link exited: %s", r.link.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("netem link not up after 30 s: %s", r.link.output())
}

// dropExt4 unmounts the ext4 if it is mounted; stuck on a hung iSCSI
// mount, it ends the mount (I/O then fails instead of waiting) and
// detaches the ext4 lazily.
func (r *rig) dropExt4() {
	if !testutil.IsMounted(r.ext4) {
		return
	}
	if _, err := run(context.Background(), time.Minute, "", nil, "umount", r.ext4); err != nil {
		if r.iscsi != nil {
			r.iscsi.stop(syscall.SIGKILL, 10*time.Second)
		}
		testutil.Quiet("umount", "-l", r.ext4)
	}
}

// teardown removes everything the soak made, whatever state it is in:
// ext4 mount, loop device, FUSE mounts (their processes by PID, then lazy
// unmounts), the server, the link; then checks nothing is left.
func (r *rig) teardown() {
	t := r.t
	r.dropExt4()
	r.detachLoop()
	// Loop devices on our file that someone else attached (or a failed
	// losetup -d left): by back file.
	testutil.DetachLoopsUnder(t, r.root)
	for _, p := range []*proc{r.iscsi, r.nfs} {
		if p != nil && p.alive() {
			p.stop(syscall.SIGINT, 30*time.Second)
		}
	}
	for _, m := range []string{r.iscsiMnt, r.nfsMnt} {
		if testutil.IsMounted(m) {
			testutil.Quiet("umount", "-l", m)
		}
	}
	if r.srv != nil && r.srv.pid() != 0 {
		r.srv.shutdown()
	}
	if r.sup != nil {
		r.sup.close()
	}
	if r.link != nil {
		if err := r.link.stop(syscall.SIGTERM, 30*time.Second); err != nil && !strings.Contains(err.Error(), "signal: terminated") && !strings.Contains(err.Error(), "exit status") {
			t.Logf("netem link: %v", err)
		}
	}
	if left := mountsUnder(r.root); len(left) > 0 {
		t.Errorf("mounts left under %s: %v (not removing it)", r.root, left)
		return
	}
	if rep := os.Getenv("TRISTORE_SOAK_REPORT"); rep != "" {
		// The server's and the mounts' logs go next to the summary.
		logs, _ := filepath.Glob(filepath.Join(r.root, "*.log"))
		if len(logs) > 0 && os.MkdirAll(rep+".logs", 0o755) == nil {
			for _, l := range logs {
				if b, err := os.ReadFile(l); err == nil {
					os.WriteFile(filepath.Join(rep+".logs", filepath.Base(l)), b, 0o644)
				}
			}
		}
	}
	if os.Getenv("TRISTORE_SOAK_KEEP") != "" {
		t.Logf("kept %s (TRISTORE_SOAK_KEEP)", r.root)
		return
	}
	os.RemoveAll(r.root)
}

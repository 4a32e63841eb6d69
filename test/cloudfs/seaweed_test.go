package cloudfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/client/iscsi"
	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/internal/testutil"
)

// weedCluster is a SeaweedFS cluster of separate processes on 127.0.0.1:
// one master (replication 001: every volume has a copy on a second server
// of the rack), three volume servers, a filer and the S3 gateway.
type weedCluster struct {
	t      *testing.T
	weed   string
	dir    string
	base   int
	procs  map[string]*exec.Cmd
	s3Port int
}

// freeBlock finds 70 free ports in a row for the cluster's fixed ports.
// They are taken below the kernel's ephemeral range: a port checked free
// there stays free until weed binds it, whereas inside that range any
// other test's outgoing connection or :0 listener may take it meanwhile
// (CI once saw "bind: address already in use" for the S3 gateway).
func freeBlock(t *testing.T) int {
	t.Helper()
	top := 32768 // the default start of net.ipv4.ip_local_port_range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > 10000+700 {
				top = lo
			}
		}
	}
	for try := 0; try < 50; try++ {
		base := 10000 + rand.IntN((top-10000-70)/10)*10
		ok := true
		for off := 0; off < 70 && ok; off++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off))
			if err != nil {
				ok = false
				break
			}
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no block of 70 free ports")
	return 0
}

func (c *weedCluster) start(name string, args ...string) {
	c.t.Helper()
	dir := filepath.Join(c.dir, name)
	os.MkdirAll(dir, 0o755)
	logf, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.weed, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	logf.Close()
	c.procs[name] = cmd
	c.t.Cleanup(func() { c.kill(name) })
}

// kill stops one process with SIGKILL (a crash) and reaps it.
func (c *weedCluster) kill(name string) {
	cmd := c.procs[name]
	if cmd == nil || cmd.ProcessState != nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
}

func (c *weedCluster) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func startWeed(t *testing.T) *weedCluster {
	t.Helper()
	c := &weedCluster{t: t, weed: testutil.NeedCmd(t, "weed"), dir: t.TempDir(), base: freeBlock(t), procs: map[string]*exec.Cmd{}}
	b := c.base
	master := fmt.Sprintf("127.0.0.1:%d.%d", b, b+1) // host:port.grpcPort
	lo := []string{"-ip=127.0.0.1", "-ip.bind=127.0.0.1"}
	c.start("master", append([]string{"master", fmt.Sprintf("-port=%d", b), fmt.Sprintf("-port.grpc=%d", b+1),
		"-mdir=.", "-defaultReplication=001", "-volumeSizeLimitMB=16"}, lo...)...)
	for i := 1; i <= 3; i++ {
		c.start(fmt.Sprintf("volume%d", i), append([]string{"volume", fmt.Sprintf("-port=%d", b+10*i), fmt.Sprintf("-port.grpc=%d", b+10*i+1),
			"-dir=.", "-mserver=" + master, "-max=30", "-dataCenter=dc1", "-rack=r1"}, lo...)...)
	}
	c.start("filer", append([]string{"filer", fmt.Sprintf("-port=%d", b+50), fmt.Sprintf("-port.grpc=%d", b+51), "-master=" + master}, lo...)...)
	conf := filepath.Join(c.dir, "s3.json")
	os.WriteFile(conf, []byte(`{"identities":[{"name":"t","credentials":[{"accessKey":"`+ak+`","secretKey":"`+sk+`"}],"actions":["Admin","Read","Write","List","Tagging"]}]}`), 0o600)
	c.s3Port = b + 60
	c.start("s3", "s3", fmt.Sprintf("-filer=127.0.0.1:%d.%d", b+50, b+51), fmt.Sprintf("-port=%d", b+60), fmt.Sprintf("-port.grpc=%d", b+61),
		"-port.iceberg=0", "-port.lance=0", "-config="+conf, "-ip.bind=127.0.0.1")
	return c
}

// held is what volume server i (1..3) says it stores (GET /status):
// bytes and needles in its volumes that hold at least one needle.
func (c *weedCluster) held(i int) (bytes int64, needles int, err error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/status", c.base+10*i))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var st struct {
		Volumes []struct {
			Size      int64
			FileCount int
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, 0, fmt.Errorf("status of volume%d: %w", i, err)
	}
	for _, v := range st.Volumes {
		if v.FileCount > 0 {
			bytes += v.Size
			needles += v.FileCount
		}
	}
	return bytes, needles, nil
}

// victim returns the volume server holding the most data, once one
// holds atLeast bytes (polling, 60 s at most): with replication
// 001 and volumes grown in pairs a server may hold nothing at all, and
// killing that one would prove nothing.
func (c *weedCluster) victim(atLeast int64) (name string, held int64, needles int) {
	c.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		best, desc := 0, []string{}
		for i := 1; i <= 3; i++ {
			b, n, err := c.held(i)
			desc = append(desc, fmt.Sprintf("volume%d %d bytes in %d needles (%v)", i, b, n, err))
			if err == nil && b >= atLeast && b > held {
				best, held, needles = i, b, n
			}
		}
		if best > 0 {
			return fmt.Sprintf("volume%d", best), held, needles
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no volume server holds %d bytes of the written-back data after 60 s (%s): killing one would prove nothing",
				atLeast, strings.Join(desc, "; "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitWrittenBack waits (polling, 60 s at most) until the stores in the
// given mount caches have no dirty chunk left: the write-back uploaded
// everything written so far.
func waitWrittenBack(t *testing.T, caches ...string) {
	t.Helper()
	for _, c := range caches {
		if d, _ := filepath.Glob(filepath.Join(c, "*", "dirty")); len(d) != 1 {
			t.Fatalf("cache %s: want one store directory with dirty/, found %v", c, d)
		}
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		var left []string
		for _, c := range caches {
			d, _ := filepath.Glob(filepath.Join(c, "*", "dirty", "*"))
			left = append(left, d...)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the write-back left %d dirty chunks 60 s after the writes, e.g. %v", len(left), left[:min(len(left), 3)])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writer is one writer of the workload a volume server dies in: step i
// writes its piece and makes it durable (fsync, SYNCHRONIZE CACHE); a
// step that returned is acknowledged and must not be lost.
type writer struct {
	name   string
	acked  atomic.Int64 // steps that returned
	before int          // steps started before the kill was seen
	err    error
	done   chan struct{}
}

// startWriter runs step(0), step(1), ... until after steps have started
// since killed was closed, max steps at most; an error ends it.
func startWriter(name string, killed <-chan struct{}, after, max int, step func(int) error) *writer {
	w := &writer{name: name, before: -1, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; i < max; i++ {
			if w.before < 0 {
				select {
				case <-killed:
					w.before = i
				default:
				}
			}
			if w.before >= 0 && i-w.before >= after {
				return
			}
			if err := step(i); err != nil {
				w.err = fmt.Errorf("%s, step %d: %w", name, i, err)
				return
			}
			w.acked.Store(int64(i + 1))
		}
		w.err = fmt.Errorf("%s: %d steps without %d after the kill", name, max, after)
	}()
	return w
}

// blob is step data: n (a multiple of 8) pseudo-random bytes from seed.
func blob(seed, n int) []byte {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
}

// writeSync writes p to a new file and fsyncs it before closing.
func writeSync(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkFiles compares dir/f000 ... for the first n steps with the data.
func checkFiles(t *testing.T, dir string, n int, seed int, size func(int) int) {
	t.Helper()
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("f%03d", i))
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, blob(seed+i, size(i))) {
			t.Fatalf("%s, acknowledged before it was read back (%d of %d), differs: %v", p, i, n, err)
		}
	}
}

// TestSeaweedCluster: a SeaweedFS cluster of six processes (master with
// replication 001, three volume servers, filer, S3 gateway). A tree is
// mounted with `tristore mount`, a block volume too (ext4 through a loop
// device), and a second volume is served as an iSCSI LUN by `tristore
// serve`. A first copy into the tree and the ext4 is written back (the
// test waits until the mounts have no dirty chunk left), and the volume
// server to kill is one that the servers' /status shows holding that
// data. Then three writers run (files fsynced into the tree, files
// fsynced into the ext4, 128 KiB blocks written and SYNCHRONIZE CACHE'd
// over iSCSI by client/iscsi); once each has acknowledged 3 steps the
// volume server is killed with SIGKILL and each goes on for 8 more steps
// while source trees are copied into the tree and the ext4. Nothing may
// fail; the ext4 checks clean; every acknowledged step, and the copies,
// read back identical through fresh read-only mounts with empty caches;
// and the first volume copied out over iSCSI by libiscsi (qemu-img) is
// the same clean ext4, all with the volume server still dead.
// It runs in the default suite: the waits are for events (write-back
// done, data placed, writers' progress), each bounded, instead of fixed
// sleeps that under load let it kill a server holding nothing (it failed
// so in the full suite at ccb91c6), and its ports are taken below the
// ephemeral range (freeBlock).
func TestSeaweedCluster(t *testing.T) {
	testutil.NeedRoot(t, "FUSE mounts")
	testutil.NeedFUSE(t)
	for _, cmd := range []string{"losetup", "mkfs.ext4", "e2fsck", "qemu-img", "iscsi-ls"} {
		testutil.NeedCmd(t, cmd)
	}
	ctx := context.Background()
	bin := testutil.TristoreBin(ctx, t)
	start := time.Now()
	c := startWeed(t)
	ep := fmt.Sprintf("http://127.0.0.1:%d", c.s3Port)
	e, err := s3client.New(s3client.Config{Endpoint: ep, AccessKey: ak, SecretKey: sk, PathStyle: true, Retries: s3client.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	bucket := "tree"
	for i := 0; ; i++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := e.API().CreateBucket(cctx, &awss3.CreateBucketInput{Bucket: &bucket})
		cancel()
		if err == nil {
			break
		}
		if i > 120 {
			t.Fatalf("SeaweedFS S3 not ready in 60 s: %v\n%s\n%s", err, c.log("s3"), c.log("filer"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	common := []string{"--s3-endpoint", ep, "--s3-access-key", ak, "--s3-secret-key", sk, "--s3-retries", "10",
		"--s3-chunk-size", "256KiB", "--s3-lease-ttl", "10s"}
	writeBack := []string{"--s3-write-back-age", "1s", "--s3-write-back-every", "250ms"}
	jsonSrc := filepath.Join(runtime.GOROOT(), "src", "encoding", "json")
	xmlSrc := filepath.Join(runtime.GOROOT(), "src", "encoding", "xml")
	wantJSON, wantXML := sums(t, jsonSrc), sums(t, xmlSrc)
	backend := fmt.Sprintf("s3://127.0.0.1:%d/tree", c.s3Port)
	gw1, gw2 := t.TempDir(), t.TempDir() // the gateways' data directories
	for vol, gw := range map[string]string{"vol1": gw1, "vol2": gw2} {
		testutil.Run(t, 2*time.Minute, bin, "volume", "create", "--data", gw, "--backend", backend, "--s3-access-key", ak, "--s3-secret-key", sk, vol, "64Mi")
	}

	dir, cache := t.TempDir(), t.TempDir()
	m := testutil.StartMount(t, bin, "s3://tree/home", dir, append(append([]string{"--cache", cache}, writeBack...), common...)...)
	// vol1: ext4 through the mount and a loop device (what an iSCSI
	// initiator would see of the LUN).
	vdir, vcache := t.TempDir(), t.TempDir()
	vm := testutil.StartMount(t, bin, "s3://tree/volumes/vol1", vdir, append(append([]string{"--cache", vcache}, writeBack...), common...)...)
	lun := filepath.Join(vdir, "lun")
	dev := testutil.AttachLoop(t, lun)
	testutil.Run(t, 2*time.Minute, "mkfs.ext4", "-q", "-F", dev.Dev)
	vmnt := t.TempDir()
	mountFS(t, dev.Dev, vmnt)
	// vol2: an iSCSI LUN of `tristore serve`.
	sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: gw2, On: []string{"iscsi"}})
	sess, err := iscsi.Open(ctx, iscsi.Config{Portal: sv.Addrs["iscsi"], Target: "iqn.2026-11.io.tristore:-cloud:vol2"})
	if err != nil {
		t.Fatalf("iSCSI login to vol2: %v\n%s", err, sv.LogTail(3000))
	}
	defer sess.Close()

	t.Logf("cluster, mounts and LUN up at %.1f s", time.Since(start).Seconds())
	// The first copy, left to the write-back; then the server to kill is
	// one holding (one of the two copies of) some of it.
	testutil.Run(t, 2*time.Minute, "cp", "-a", jsonSrc, filepath.Join(dir, "json"))
	testutil.Run(t, 2*time.Minute, "cp", "-a", jsonSrc, filepath.Join(vmnt, "json"))
	testutil.Run(t, 2*time.Minute, "sync", "-f", filepath.Join(vmnt, "json"))
	waitWrittenBack(t, cache, vcache)
	written := time.Since(start)
	victim, held, needles := c.victim(256 << 10)

	// Three writers; the server dies once each has made progress.
	for _, d := range []string{filepath.Join(dir, "load"), filepath.Join(vmnt, "load")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	treeSize := func(i int) int { return 64<<10 + (i*37<<10)%(256<<10) }
	extSize := func(i int) int { return 16<<10 + (i*13<<10)%(80<<10) }
	const lunStep = 128 << 10
	killed := make(chan struct{})
	const after, most = 8, 300
	ws := []*writer{
		startWriter("tree mount", killed, after, most, func(i int) error {
			return writeSync(filepath.Join(dir, "load", fmt.Sprintf("f%03d", i)), blob(1000+i, treeSize(i)))
		}),
		startWriter("ext4 on the mounted volume", killed, after, most, func(i int) error {
			return writeSync(filepath.Join(vmnt, "load", fmt.Sprintf("f%03d", i)), blob(2000+i, extSize(i)))
		}),
		startWriter("iSCSI LUN", killed, after, most, func(i int) error {
			wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			if _, err := sess.WriteAt(wctx, blob(3000+i, lunStep), int64(i)*lunStep); err != nil {
				return err
			}
			return sess.Flush(wctx)
		}),
	}
	waitWriters := func(until func(*writer) bool, within time.Duration, what string) {
		t.Helper()
		for deadline := time.Now().Add(within); ; {
			all := true
			for _, w := range ws {
				select {
				case <-w.done:
					if w.err != nil {
						t.Fatalf("%v (%d steps acknowledged, %s killed)", w.err, w.acked.Load(), victim)
					}
				default:
				}
				all = all && until(w)
			}
			if all {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the writers did not %s within %v", what, within)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitWriters(func(w *writer) bool { return w.acked.Load() >= 3 }, 60*time.Second, "acknowledge 3 steps each")
	c.kill(victim)
	close(killed)
	killedAt := time.Since(start)
	t.Logf("killed %s (it held %d bytes in %d needles) at %.1f s (first copy written back at %.1f s) with the writers at %d, %d and %d steps",
		victim, held, needles, killedAt.Seconds(), written.Seconds(), ws[0].acked.Load(), ws[1].acked.Load(), ws[2].acked.Load())
	// Copies while the writers go on and the cluster notices the loss.
	testutil.Run(t, 2*time.Minute, "cp", "-a", xmlSrc, filepath.Join(dir, "xml"))
	testutil.Run(t, 2*time.Minute, "cp", "-a", filepath.Join(dir, "json"), filepath.Join(dir, "json-copy"))
	if got := sums(t, filepath.Join(dir, "json-copy")); !maps.Equal(got, wantJSON) {
		t.Fatal("copy inside the mount differs after the volume server died")
	}
	testutil.Run(t, 2*time.Minute, "cp", "-a", xmlSrc, filepath.Join(vmnt, "xml"))
	waitWriters(func(w *writer) bool {
		select {
		case <-w.done:
			return true
		default:
			return false
		}
	}, 120*time.Second, fmt.Sprintf("finish %d steps after the kill", after))
	t.Logf("the writers finished %.1f s after the kill", (time.Since(start) - killedAt).Seconds())
	n := make([]int, len(ws))
	for i, w := range ws {
		n[i] = int(w.acked.Load())
		t.Logf("%s: %d steps acknowledged, %d started after the kill", w.name, n[i], n[i]-w.before)
	}
	for i := 0; i < n[2]; i++ {
		b := make([]byte, lunStep)
		if _, err := sess.ReadAt(ctx, b, int64(i)*lunStep); err != nil || !bytes.Equal(b, blob(3000+i, lunStep)) {
			t.Fatalf("block %d read back over iSCSI differs: %v", i, err)
		}
	}

	// Everything stops cleanly: final write-backs and the LUN's flush.
	testutil.Run(t, 2*time.Minute, "umount", vmnt)
	testutil.Run(t, 2*time.Minute, "e2fsck", "-fn", dev.Dev)
	if err := dev.Detach(t); err != nil {
		t.Fatal(err)
	}
	vm.Stop(t, 90*time.Second)
	m.Stop(t, 90*time.Second)
	if strings.Contains(m.Output()+vm.Output(), "write-back failed") {
		t.Logf("write-backs were retried while the cluster noticed the dead server:\n%s", m.Output())
	}

	if err := sess.Close(); err != nil {
		t.Logf("iSCSI logout: %v", err)
	}
	if !sv.Stop() || !sv.ExitedCleanly() {
		t.Fatalf("tristore serve did not stop cleanly: %v\n%s", sv.Err(), sv.LogTail(3000))
	}

	t.Logf("everything stopped cleanly at %.1f s", time.Since(start).Seconds())

	// Fresh read-only mounts with empty caches, the server still dead.
	ro := append([]string{"--s3-read-only"}, common...)
	dir2 := t.TempDir()
	m2 := testutil.StartMount(t, bin, "s3://tree/home", dir2, append([]string{"--cache", t.TempDir()}, ro...)...)
	for name, want := range map[string]map[string]string{"json": wantJSON, "xml": wantXML, "json-copy": wantJSON} {
		if got := sums(t, filepath.Join(dir2, name)); !maps.Equal(got, want) {
			t.Fatalf("%s differs when read back with one volume server dead", name)
		}
	}
	checkFiles(t, filepath.Join(dir2, "load"), n[0], 1000, treeSize)
	m2.Stop(t, 90*time.Second)
	t.Logf("the tree read back at %.1f s", time.Since(start).Seconds())

	vdir2 := t.TempDir()
	vm2 := testutil.StartMount(t, bin, "s3://tree/volumes/vol1", vdir2, append([]string{"--cache", t.TempDir()}, ro...)...)
	lun2 := filepath.Join(vdir2, "lun")
	dev2 := testutil.AttachLoop(t, lun2, "-r")
	testutil.Run(t, 2*time.Minute, "e2fsck", "-fn", dev2.Dev)
	vmnt2 := t.TempDir()
	mountFS(t, dev2.Dev, vmnt2, "-o", "ro")
	for name, want := range map[string]map[string]string{"json": wantJSON, "xml": wantXML} {
		if got := sums(t, filepath.Join(vmnt2, name)); !maps.Equal(got, want) {
			t.Fatalf("%s on the volume differs when read back with one volume server dead", name)
		}
	}
	checkFiles(t, filepath.Join(vmnt2, "load"), n[1], 2000, extSize)
	testutil.Run(t, 2*time.Minute, "umount", vmnt2)
	if err := dev2.Detach(t); err != nil {
		t.Fatal(err)
	}
	vm2.Stop(t, 90*time.Second)
	t.Logf("vol1 read back at %.1f s", time.Since(start).Seconds())

	vdir3 := t.TempDir()
	vm3 := testutil.StartMount(t, bin, "s3://tree/volumes/vol2", vdir3, append([]string{"--cache", t.TempDir()}, ro...)...)
	f, err := os.Open(filepath.Join(vdir3, "lun"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n[2]; i++ {
		b := make([]byte, lunStep)
		if _, err := f.ReadAt(b, int64(i)*lunStep); err != nil || !bytes.Equal(b, blob(3000+i, lunStep)) {
			f.Close()
			t.Fatalf("LUN block %d, acknowledged over iSCSI, differs when read back from an empty cache: %v", i, err)
		}
	}
	f.Close()
	vm3.Stop(t, 90*time.Second)
	t.Logf("vol2 read back at %.1f s", time.Since(start).Seconds())

	// vol1 as an iSCSI LUN of `tristore serve` (the gateway's data
	// directory from volume create): libiscsi (qemu-img) copies it out, a
	// clean ext4 with the files.
	vmnt3 := copyOverISCSI(t, bin, gw1, "vol1")
	t.Logf("vol1 copied out over iSCSI at %.1f s", time.Since(start).Seconds())
	for name, want := range map[string]map[string]string{"json": wantJSON, "xml": wantXML} {
		if got := sums(t, filepath.Join(vmnt3, name)); !maps.Equal(got, want) {
			t.Fatalf("%s differs in the copy read over iSCSI with one volume server dead", name)
		}
	}
	checkFiles(t, filepath.Join(vmnt3, "load"), n[1], 2000, extSize)
}

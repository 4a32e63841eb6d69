package cloudfs

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

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

// TestSeaweedCluster: `tristore mount` of a tree and of a block volume
// (ext4 through a loop device) over a real SeaweedFS cluster of six
// processes; one volume server is killed (SIGKILL) in the middle of the
// workload; both keep working, their final write-backs succeed, the ext4
// checks clean, and fresh mounts with empty caches read every file
// identical; then `tristore serve` offers the volume as an iSCSI LUN and
// a copy read over it by libiscsi (qemu-img) is the same clean ext4, all
// with the volume server still dead.
// Behind TRISTORE_LONG=1: in the full suite it failed twice at 08dec7e and
// ccb91c6 (a port of its block taken before weed bound it, fixed by
// freeBlock; then the killed volume server holding no data yet, so the
// test could prove nothing), while it passed alone every time.
func TestSeaweedCluster(t *testing.T) {
	if os.Getenv("TRISTORE_LONG") == "" {
		t.Skip("starts a six-process SeaweedFS cluster: set TRISTORE_LONG=1")
	}
	testutil.NeedRoot(t, "FUSE mounts")
	testutil.NeedFUSE(t)
	ctx := context.Background()
	bin := testutil.TristoreBin(ctx, t)
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
	json := filepath.Join(runtime.GOROOT(), "src", "encoding", "json")
	xml := filepath.Join(runtime.GOROOT(), "src", "encoding", "xml")
	wantJSON, wantXML := sums(t, json), sums(t, xml)

	dir := t.TempDir()
	m := testutil.StartMount(t, bin, "s3://tree/home", dir, append([]string{"--cache", t.TempDir(),
		"--s3-write-back-age", "1s", "--s3-write-back-every", "250ms"}, common...)...)
	sh(t, "cp", "-a", json, filepath.Join(dir, "json"))

	// A block volume in the same cluster: ext4 on it through the mount and
	// a loop device (what an iSCSI initiator would see of the LUN).
	gw := t.TempDir()
	sh(t, bin, "volume", "create", "--data", gw, "--backend", fmt.Sprintf("s3://127.0.0.1:%d/tree", c.s3Port),
		"--s3-access-key", ak, "--s3-secret-key", sk, "vol1", "64Mi")
	vdir := t.TempDir()
	vm := testutil.StartMount(t, bin, "s3://tree/volumes/vol1", vdir, append([]string{"--cache", t.TempDir(),
		"--s3-write-back-age", "1s", "--s3-write-back-every", "250ms"}, common...)...)
	lun := filepath.Join(vdir, "lun")
	dev := loop(t, lun, false)
	sh(t, "mkfs.ext4", "-q", "-F", dev)
	vmnt := t.TempDir()
	mountFS(t, dev, vmnt)
	sh(t, "cp", "-a", json, filepath.Join(vmnt, "json"))
	sh(t, "sync", "-f", filepath.Join(vmnt, "json"))
	time.Sleep(2 * time.Second) // written back, spread over the volume servers
	// The server about to die holds some of the data (as one of two copies).
	held := int64(0)
	dats, _ := filepath.Glob(filepath.Join(c.dir, "volume2", "*.dat"))
	for _, d := range dats {
		if fi, err := os.Stat(d); err == nil {
			held += fi.Size()
		}
	}
	if held < 64<<10 {
		t.Fatalf("volume2 holds %d bytes of volume data before it is killed; the test would prove nothing", held)
	}
	t.Logf("killing volume2, which holds %d bytes in %d volumes", held, len(dats))
	c.kill("volume2")
	sh(t, "cp", "-a", xml, filepath.Join(dir, "xml"))
	sh(t, "cp", "-a", filepath.Join(dir, "json"), filepath.Join(dir, "json-copy"))
	if got := sums(t, filepath.Join(dir, "json-copy")); !maps.Equal(got, wantJSON) {
		t.Fatal("copy inside the mount differs after the volume server died")
	}
	sh(t, "cp", "-a", xml, filepath.Join(vmnt, "xml"))
	sh(t, "umount", vmnt)
	sh(t, "e2fsck", "-fn", dev)
	detach(t, dev, lun)
	vm.Stop(t, 90*time.Second)
	m.Stop(t, 90*time.Second)
	if strings.Contains(m.Output()+vm.Output(), "write-back failed") {
		t.Logf("write-backs were retried while the cluster noticed the dead server:\n%s", m.Output())
	}

	dir2 := t.TempDir()
	m2 := testutil.StartMount(t, bin, "s3://tree/home", dir2, append([]string{"--cache", t.TempDir(), "--s3-read-only"}, common...)...)
	for name, want := range map[string]map[string]string{"json": wantJSON, "xml": wantXML, "json-copy": wantJSON} {
		if got := sums(t, filepath.Join(dir2, name)); !maps.Equal(got, want) {
			t.Fatalf("%s differs when read back with one volume server dead", name)
		}
	}
	m2.Stop(t, 90*time.Second)

	// The volume from an empty cache, still with one volume server dead.
	vdir2 := t.TempDir()
	vm2 := testutil.StartMount(t, bin, "s3://tree/volumes/vol1", vdir2, append([]string{"--cache", t.TempDir(), "--s3-read-only"}, common...)...)
	lun2 := filepath.Join(vdir2, "lun")
	dev2 := loop(t, lun2, true)
	sh(t, "e2fsck", "-fn", dev2)
	vmnt2 := t.TempDir()
	mountFS(t, dev2, vmnt2, "-o", "ro")
	for name, want := range map[string]map[string]string{"json": wantJSON, "xml": wantXML} {
		if got := sums(t, filepath.Join(vmnt2, name)); !maps.Equal(got, want) {
			t.Fatalf("%s on the volume differs when read back with one volume server dead", name)
		}
	}
	sh(t, "umount", vmnt2)
	detach(t, dev2, lun2)
	vm2.Stop(t, 90*time.Second)

	// The same volume as an iSCSI LUN of `tristore serve` (the gateway's
	// data directory from volume create), still with one volume server
	// dead: libiscsi (qemu-img) copies it out, a clean ext4 with the files.
	for _, cmd := range []string{"qemu-img", "iscsi-ls"} {
		testutil.NeedCmd(t, cmd)
	}
	vmnt3 := copyOverISCSI(t, bin, gw)
	for name, want := range map[string]map[string]string{"json": wantJSON, "xml": wantXML} {
		if got := sums(t, filepath.Join(vmnt3, name)); !maps.Equal(got, want) {
			t.Fatalf("%s differs in the copy read over iSCSI with one volume server dead", name)
		}
	}
}

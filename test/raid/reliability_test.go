package raid

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/fusefs/blockfile"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/raid"
)

// memberSize is each target's volume; the RAID-5 over four holds three.
const memberSize = 40 << 20

// target is one `tristore serve` process holding the volume vol/m.
type target struct {
	bin  string
	data string
	sv   *testutil.Served
}

func startTarget(t *testing.T, bin string) *target {
	t.Helper()
	tg := &target{bin: bin, data: t.TempDir()}
	testutil.Run(t, 2*time.Minute, bin, "volume", "create", "--data", tg.data, "vol/m", fmt.Sprint(memberSize))
	tg.start(t)
	return tg
}

func (tg *target) start(t *testing.T) {
	t.Helper()
	tg.sv = testutil.StartServe(t, testutil.ServeOptions{Bin: tg.bin, Data: tg.data, On: []string{"iscsi"}})
}

func (tg *target) stop(t *testing.T) {
	t.Helper()
	if !tg.sv.Stop() {
		t.Fatalf("target did not stop:\n%s", tg.sv.Log())
	}
}

// wipe zeroes the volume's object behind the stopped target's back: the
// disk was replaced by a blank one of the same size.
func (tg *target) wipe(t *testing.T) {
	t.Helper()
	p := filepath.Join(tg.data, "vol", "m")
	if fi, err := os.Stat(p); err != nil || fi.Size() != memberSize {
		t.Fatalf("volume object %s: %v %v", p, fi, err)
	}
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, memberSize); err != nil {
		t.Fatal(err)
	}
}

func (tg *target) open(t *testing.T) *iscsi.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := iscsi.Open(ctx, iscsi.Config{Portal: tg.sv.Addrs["iscsi"], Target: "iqn.2026-11.io.tristore:vol:m",
		ReplacementTimeout: 3 * time.Second, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("login to %s: %v", tg.sv.Addrs["iscsi"], err)
	}
	return s
}

// fsStack is the array as a file (FUSE), a loop device and an ext4 mount.
type fsStack struct {
	srv  *blockfile.Server
	fuse string // where srv is mounted
	loop *testutil.Loop
	mnt  string
}

func mountArray(t *testing.T, dev blockdev.Device, mkfs bool) *fsStack {
	t.Helper()
	fuse := t.TempDir()
	srv, err := blockfile.Mount(fuse, dev, blockfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &fsStack{srv: srv, fuse: fuse, mnt: t.TempDir()}
	t.Cleanup(func() { s.down(t) })
	s.loop = testutil.AttachLoop(t, filepath.Join(fuse, "lun"))
	if mkfs {
		testutil.Run(t, 2*time.Minute, "mkfs.ext4", "-q", "-F", "-E", "nodiscard", s.loop.Dev)
	}
	mountExt4(t, s.loop.Dev, s.mnt)
	return s
}

// down unmounts ext4 (checking it with e2fsck), detaches the loop device
// and unmounts FUSE; safe to call twice.
func (s *fsStack) down(t *testing.T) {
	if testutil.IsMounted(s.mnt) {
		testutil.Run(t, 2*time.Minute, "umount", s.mnt)
		testutil.Run(t, 2*time.Minute, "e2fsck", "-fn", s.loop.Dev)
	}
	if s.loop != nil { // nil: the attach failed
		if err := s.loop.Detach(t); err != nil {
			t.Error(err)
		}
	}
	if s.srv != nil {
		// the loop device may hold the file a moment
		if err := testutil.UnmountFUSE(s.fuse, s.srv.Unmount, 10*time.Second); err != nil {
			t.Error(err)
		}
		s.srv = nil
	}
}

// TestReliabilityFourTargets is seed 002's reliability experiment: four
// tristore targets (separate processes), a RAID-5 over their LUNs through
// our initiator, ext4 on it through FUSE + loop, a source tree unpacked
// from a tarball and its checksums recorded. A target is stopped while the
// file system is in use (reads and a new file then go degraded), its
// volume wiped, and the array assembled degraded from the other three:
// every checksum verifies. The blank volume is added back as a
// replacement and rebuilt online while the file system stays mounted:
// every checksum verifies again. Finally a different target is stopped,
// so the rebuilt member's data is what reconstruction depends on, and
// the tree still verifies.
func TestReliabilityFourTargets(t *testing.T) {
	t.Parallel() // independent processes and directories; most of the time is spent waiting
	testutil.NeedRoot(t, "loop devices and mounts")
	testutil.NeedFUSE(t)
	for _, c := range []string{"losetup", "mkfs.ext4", "e2fsck", "mount", "umount", "tar"} {
		testutil.NeedCmd(t, c)
	}
	ctx := context.Background()
	bin := testutil.TristoreBin(ctx, t)
	tarball := filepath.Join(t.TempDir(), "src.tar.gz")
	testutil.Run(t, 2*time.Minute, "tar", "-C", filepath.Join(runtime.GOROOT(), "src"), "-czf", tarball, "encoding", "compress")
	ref := t.TempDir()
	testutil.Run(t, 2*time.Minute, "tar", "-C", ref, "-xzf", tarball)
	want := sums(t, ref)

	var tgs []*target
	for range 4 {
		tgs = append(tgs, startTarget(t, bin))
	}
	open := func(idx ...int) []blockdev.Device {
		var ds []blockdev.Device
		for _, i := range idx {
			ds = append(ds, tgs[i].open(t))
		}
		return ds
	}
	a, err := raid.Create(ctx, 5, 0, open(0, 1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			a.Close()
		}
	})
	fs := mountArray(t, a, true)
	testutil.Run(t, 2*time.Minute, "tar", "-C", fs.mnt, "-xzf", tarball)
	testutil.Run(t, 2*time.Minute, "sync", "-f", fs.mnt)
	check := func(stage string) {
		t.Helper()
		got := sums(t, fs.mnt)
		delete(got, "lost+found")
		delete(got, ".")
		w := map[string]string{}
		for k, v := range want {
			if k != "." {
				w[k] = v
			}
		}
		if d := diffSums(w, got); d != nil {
			t.Fatalf("%s: tree differs: %v", stage, d)
		}
	}
	check("on the new array")

	// Target 3 goes away with the file system in use: a new file is written
	// degraded once the member's session gives up (3 s).
	tgs[3].stop(t)
	extra := make([]byte, 3<<20)
	for i := range extra {
		extra[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(fs.mnt, "written-degraded.bin"), extra, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Run(t, 2*time.Minute, "sync", "-f", fs.mnt)
	want["written-degraded.bin"] = sums(t, fs.mnt)["written-degraded.bin"]
	if st := a.Status(); len(st.Failed) != 1 || st.Failed[0] != 3 || st.Stopped {
		t.Fatalf("after target 3 stopped: %+v", st)
	}
	fs.down(t)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true

	// Its disk is replaced by a blank one; the array assembles degraded
	// from the other three, in another order.
	tgs[3].wipe(t)
	tgs[3].start(t)
	a, err = raid.Assemble(ctx, open(2, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	closed = false
	if st := a.Status(); len(st.Failed) != 1 || st.Failed[0] != 3 {
		t.Fatalf("degraded assembly: %+v", st)
	}
	fs = mountArray(t, a, false)
	check("assembled degraded")

	// The blank volume replaces slot 3, rebuilt while the file system is mounted.
	if err := a.Replace(ctx, 3, open(3)[0], nil); err != nil {
		t.Fatalf("replace: %v", err)
	}
	if st := a.Status(); len(st.Failed) != 0 || st.Rebuilding != -1 {
		t.Fatalf("after the rebuild: %+v", st)
	}
	check("after the rebuild")
	fs.down(t)
	if mm, err := a.Check(ctx, false); err != nil || len(mm) != 0 {
		t.Fatalf("scrub after the rebuild: %v mismatches, %v", len(mm), err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true

	// Target 0 goes now: the rebuilt member is part of every reconstruction.
	tgs[0].stop(t)
	a, err = raid.Assemble(ctx, open(3, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	closed = false
	fs = mountArray(t, a, false)
	check("degraded again, relying on the rebuilt member")
	fs.down(t)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
}

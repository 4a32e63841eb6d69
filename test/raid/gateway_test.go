package raid

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/internal/testutil"
)

const gatewayIQN = "iqn.2026-11.io.tristore:-raid:r5"

// TestGatewayExt4: a RAID-5 over three local files, made by `tristore raid
// create`, served by `tristore serve --raid r5=...` as an iSCSI LUN and
// mounted with the same `tristore mount iscsi://` + loop path as a single
// volume; ext4 on it holds a copy of a Go source tree. Stopping serve
// closes the array cleanly (the superblocks say clean). With one member
// file gone, serve assembles it degraded and says so in its log; the tree
// reads back with every checksum intact and e2fsck finds the file system
// clean.
func TestGatewayExt4(t *testing.T) {
	t.Parallel() // independent processes and directories; most of the time is spent waiting
	testutil.NeedRoot(t, "loop devices and mounts")
	testutil.NeedFUSE(t)
	for _, c := range []string{"losetup", "mkfs.ext4", "e2fsck", "mount", "umount", "cp"} {
		testutil.NeedCmd(t, c)
	}
	bin := testutil.TristoreBin(context.Background(), t)
	dir := t.TempDir()
	var members []string
	for i := range 3 {
		members = append(members, filepath.Join(dir, "m"+string(rune('0'+i))))
	}
	testutil.Run(t, 2*time.Minute, bin, append([]string{"raid", "create", "--level", "5", "--size", "48Mi"}, members...)...)
	raidFlag := "r5=" + strings.Join(members, ",")

	src := filepath.Join(runtime.GOROOT(), "src", "encoding")
	want := sums(t, src)

	sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: t.TempDir(), On: []string{"iscsi"}, Args: []string{"--raid", raidFlag}})
	url := "iscsi://" + sv.Addrs["iscsi"] + "/" + gatewayIQN + "/0"
	fuse := t.TempDir()
	m := testutil.StartMount(t, bin, url, fuse)
	lun := filepath.Join(fuse, "lun")
	fi, err := os.Stat(lun)
	if err != nil {
		t.Fatal(err)
	}
	// 2 data members of 48 MiB less the 4 KiB superblock and 4 MiB journal, whole chunks.
	if fi.Size() != 2*(48<<20-4<<20-64<<10) {
		t.Fatalf("LUN is %d bytes", fi.Size())
	}
	l := testutil.AttachLoop(t, lun)
	testutil.Run(t, 2*time.Minute, "mkfs.ext4", "-q", "-F", "-E", "nodiscard", l.Dev)
	mnt := t.TempDir()
	mountExt4(t, l.Dev, mnt)
	testutil.Run(t, 2*time.Minute, "cp", "-a", src, filepath.Join(mnt, "encoding"))
	if d := diffSums(want, sums(t, filepath.Join(mnt, "encoding"))); d != nil {
		t.Fatalf("tree differs on ext4 over the gateway: %v", d)
	}
	testutil.Run(t, 2*time.Minute, "umount", mnt)
	if err := l.Detach(t); err != nil {
		t.Fatal(err)
	}
	m.Stop(t, 60*time.Second)
	if !sv.Stop() || !sv.ExitedCleanly() {
		t.Fatalf("serve did not stop cleanly: %v\n%s", sv.Err(), sv.Log())
	}
	if log := sv.Log(); !strings.Contains(log, "array closed cleanly") {
		t.Fatalf("serve log does not say the array was closed:\n%s", log)
	}
	var st struct {
		Dirty  bool
		Failed []int
	}
	if err := json.Unmarshal([]byte(testutil.Run(t, 2*time.Minute, bin, append([]string{"raid", "status", "--json"}, members...)...)), &st); err != nil {
		t.Fatal(err)
	}
	if st.Dirty || len(st.Failed) != 0 {
		t.Fatalf("after serve stopped the array is %+v, want clean", st)
	}

	// Lose member 1: the gateway starts degraded and says so.
	if err := os.Remove(members[1]); err != nil {
		t.Fatal(err)
	}
	sv = testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: t.TempDir(), On: []string{"iscsi"}, Args: []string{"--raid", raidFlag}})
	if log := sv.Log(); !strings.Contains(log, "DEGRADED") || !strings.Contains(log, members[1]) {
		t.Fatalf("serve log does not report the degraded start naming the lost member:\n%s", log)
	}
	url = "iscsi://" + sv.Addrs["iscsi"] + "/" + gatewayIQN + "/0"
	m = testutil.StartMount(t, bin, url, fuse)
	l = testutil.AttachLoop(t, lun)
	mountExt4(t, l.Dev, mnt)
	if d := diffSums(want, sums(t, filepath.Join(mnt, "encoding"))); d != nil {
		t.Fatalf("tree differs on the degraded array: %v", d)
	}
	testutil.Run(t, 2*time.Minute, "umount", mnt)
	testutil.Run(t, 2*time.Minute, "e2fsck", "-fn", l.Dev)
	if err := l.Detach(t); err != nil {
		t.Fatal(err)
	}
	m.Stop(t, 60*time.Second)

	// Too few members: serve refuses to start and names the array.
	if err := os.Remove(members[2]); err != nil {
		t.Fatal(err)
	}
	out, err := runBin(bin, "serve", "--data", t.TempDir(), "--iscsi-addr", "127.0.0.1:0", "--s3-addr", "off", "--nfs-addr", "off",
		"--admin-addr", "off", "--raid", raidFlag)
	if err == nil || !strings.Contains(out, "raid r5") || !strings.Contains(out, "array failed") {
		t.Fatalf("serve with 1 of 3 members: %v\n%s", err, out)
	}
}

// TestGatewayISCSIMembers: the gateway over members that are LUNs of three
// other tristore targets (iscsi:// URLs). Data written through the
// gateway's LUN reads back; when one member target stops, the gateway
// fails that member after --raid-member-timeout and keeps serving the
// same data degraded, also for new writes; at shutdown it closes the array
// cleanly and the survivors record the failed slot.
func TestGatewayISCSIMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin := testutil.TristoreBin(ctx, t)
	var tgs []*target
	var urls []string
	for range 3 {
		tg := startTarget(t, bin)
		tgs = append(tgs, tg)
		urls = append(urls, "iscsi://"+tg.sv.Addrs["iscsi"]+"/iqn.2026-11.io.tristore:vol:m/0")
	}
	testutil.Run(t, 2*time.Minute, bin, append([]string{"raid", "create", "--level", "5"}, urls...)...)
	gw := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: t.TempDir(), On: []string{"iscsi"},
		Args: []string{"--raid", "r=" + strings.Join(urls, ","), "--raid-member-timeout", "2s"}})
	s, err := iscsi.Open(ctx, iscsi.Config{Portal: gw.Addrs["iscsi"], Target: "iqn.2026-11.io.tristore:-raid:r"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	chunk := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	readBack := func(stage string, want []byte, off int64) {
		t.Helper()
		got := make([]byte, len(want))
		if _, err := s.ReadAt(ctx, got, off); err != nil {
			t.Fatalf("%s: read: %v", stage, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: data differs", stage)
		}
	}
	a := chunk(1 << 20)
	if _, err := s.WriteAt(ctx, a, 5<<20); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	readBack("through the gateway", a, 5<<20)

	tgs[1].stop(t)
	readBack("member 1 stopped", a, 5<<20)
	b := chunk(512 << 10)
	if _, err := s.WriteAt(ctx, b, 9<<20); err != nil {
		t.Fatalf("degraded write: %v", err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("degraded flush: %v", err)
	}
	readBack("written degraded", b, 9<<20)
	s.Close()
	if !gw.Stop() || !gw.ExitedCleanly() {
		t.Fatalf("gateway did not stop cleanly:\n%s", gw.Log())
	}
	if !strings.Contains(gw.Log(), "array closed cleanly") {
		t.Fatalf("gateway log:\n%s", gw.Log())
	}
	var st struct {
		Dirty  bool
		Failed []int
	}
	out := testutil.Run(t, 2*time.Minute, bin, "raid", "status", "--json", urls[0], urls[2])
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Dirty || len(st.Failed) != 1 || st.Failed[0] != 1 {
		t.Fatalf("after the gateway stopped: %s", out)
	}

	// Member 1's target comes back with a blank volume: given in --raid,
	// the gateway rebuilds onto it in the background while serving.
	tgs[1].wipe(t)
	tgs[1].start(t)
	urls[1] = "iscsi://" + tgs[1].sv.Addrs["iscsi"] + "/iqn.2026-11.io.tristore:vol:m/0"
	gw = testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: t.TempDir(), On: []string{"iscsi"},
		Args: []string{"--raid", "r=" + strings.Join(urls, ","), "--raid-member-timeout", "2s"}})
	s, err = iscsi.Open(ctx, iscsi.Config{Portal: gw.Addrs["iscsi"], Target: "iqn.2026-11.io.tristore:-raid:r"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	readBack("while rebuilding", a, 5<<20)
	for deadline := time.Now().Add(90 * time.Second); !strings.Contains(gw.Log(), "rebuild verified"); {
		if time.Now().After(deadline) || strings.Contains(gw.Log(), "rebuild failed") {
			t.Fatalf("no verified rebuild:\n%s", gw.Log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	readBack("after the rebuild", a, 5<<20)
	readBack("after the rebuild", b, 9<<20)
	s.Close()
	if !gw.Stop() || !gw.ExitedCleanly() {
		t.Fatalf("gateway did not stop cleanly:\n%s", gw.Log())
	}
	out = testutil.Run(t, 2*time.Minute, bin, "raid", "status", "--json", urls[2], urls[1], urls[0])
	st.Failed = nil
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Dirty || len(st.Failed) != 0 {
		t.Fatalf("after the rebuild: %s", out)
	}
	// The rebuilt member carries data: the array without member 0 reads the same.
	tgs[0].stop(t)
	gw = testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: t.TempDir(), On: []string{"iscsi"},
		Args: []string{"--raid", "r=" + strings.Join(urls[1:], ","), "--raid-member-timeout", "2s"}})
	s, err = iscsi.Open(ctx, iscsi.Config{Portal: gw.Addrs["iscsi"], Target: "iqn.2026-11.io.tristore:-raid:r"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	readBack("without member 0, from the rebuilt member", a, 5<<20)
	readBack("without member 0, from the rebuilt member", b, 9<<20)
}

package raid

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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
	sh(t, bin, append([]string{"raid", "create", "--level", "5", "--size", "48Mi"}, members...)...)
	raidFlag := "r5=" + strings.Join(members, ",")

	src := filepath.Join(runtime.GOROOT(), "src", "encoding")
	want := sums(t, src)

	sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: t.TempDir(), On: []string{"iscsi"}, Args: []string{"--raid", raidFlag}})
	url := "iscsi://" + sv.Addrs["iscsi"] + "/" + gatewayIQN + "/0"
	fuse := t.TempDir()
	m := startMount(t, bin, url, fuse)
	lun := filepath.Join(fuse, "lun")
	fi, err := os.Stat(lun)
	if err != nil {
		t.Fatal(err)
	}
	// 2 data members of 48 MiB less the 4 KiB superblock and 4 MiB journal, whole chunks.
	if fi.Size() != 2*(48<<20-4<<20-64<<10) {
		t.Fatalf("LUN is %d bytes", fi.Size())
	}
	l := attachLoop(t, lun)
	sh(t, "mkfs.ext4", "-q", "-F", "-E", "nodiscard", l.dev)
	mnt := t.TempDir()
	mountExt4(t, l.dev, mnt)
	sh(t, "cp", "-a", src, filepath.Join(mnt, "encoding"))
	if d := diffSums(want, sums(t, filepath.Join(mnt, "encoding"))); d != nil {
		t.Fatalf("tree differs on ext4 over the gateway: %v", d)
	}
	sh(t, "umount", mnt)
	l.detach()
	m.stop(t)
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
	if err := json.Unmarshal([]byte(sh(t, bin, append([]string{"raid", "status", "--json"}, members...)...)), &st); err != nil {
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
	m = startMount(t, bin, url, fuse)
	l = attachLoop(t, lun)
	mountExt4(t, l.dev, mnt)
	if d := diffSums(want, sums(t, filepath.Join(mnt, "encoding"))); d != nil {
		t.Fatalf("tree differs on the degraded array: %v", d)
	}
	sh(t, "umount", mnt)
	sh(t, "e2fsck", "-fn", l.dev)
	l.detach()
	m.stop(t)

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

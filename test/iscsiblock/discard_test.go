package iscsiblock

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/client/iscsi"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/internal/testutil"
)

// allocated is the space the file at path takes on disk (st_blocks).
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestFstrimReachesVolume: kernel ext4 -> loop -> FUSE file -> our
// initiator -> our target -> a sparse volume file. Writing a file grows
// the volume's allocation; removing it and running fstrim must shrink it
// again: the loop device advertises discard (statfs block size), turns it
// into fallocate(PUNCH_HOLE) on the FUSE file, which becomes WRITE SAME
// with UNMAP on the LUN and a punched hole in the volume file.
func TestFstrimReachesVolume(t *testing.T) {
	testutil.NeedRoot(t, "losetup and mount need root")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse on this machine")
	}
	for _, c := range []string{"losetup", "mkfs.ext4", "mount", "umount", "fstrim"} {
		testutil.NeedCmd(t, c)
	}
	tg := startOurs(t, 128<<20, iscsitgt.CHAPConfig{})
	dev := openDev(t, iscsi.Config{Portal: tg.Portal, Target: tg.IQN, QueueDepth: 16})
	defer dev.Close()
	s := dev.(*iscsi.Session)
	if !s.Thin() {
		t.Fatal("our target's LUN does not report LBPME")
	}
	mnt := t.TempDir()
	st := up(t, dev, mnt, true)

	var sfs syscall.Statfs_t
	if err := syscall.Statfs(filepath.Join(st.fuse, "lun"), &sfs); err != nil || sfs.Bsize == 0 {
		t.Fatalf("statfs of the FUSE file: bsize %d, %v", sfs.Bsize, err)
	}
	if g, err := os.ReadFile("/sys/block/" + filepath.Base(st.loop) + "/queue/discard_granularity"); err != nil ||
		strings.TrimSpace(string(g)) == "0" {
		t.Fatalf("loop device advertises no discard (granularity %q, %v)", g, err)
	}

	data := make([]byte, 48<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(mnt, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	syscall.Sync()
	full := allocated(t, tg.Path)
	if full < 40<<20 {
		t.Fatalf("volume allocation %d after writing 48 MiB: the data did not reach it", full)
	}
	if err := os.Remove(filepath.Join(mnt, "big.bin")); err != nil {
		t.Fatal(err)
	}
	syscall.Sync()
	out := run(t, 3*time.Minute, "fstrim", "-v", mnt)
	trimmed := allocated(t, tg.Path)
	t.Logf("volume allocation: %d MiB after writing, %d MiB after rm + fstrim (%s)", full>>20, trimmed>>20, out)
	if full-trimmed < 40<<20 {
		t.Fatalf("fstrim freed %d bytes of the volume, want the ~48 MiB of the removed file", full-trimmed)
	}

	// The file system is intact after the trim.
	if err := os.WriteFile(filepath.Join(mnt, "after.txt"), []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, time.Minute, "umount", mnt)
	st.mnt = ""
	run(t, 3*time.Minute, "e2fsck", "-fn", st.loop)
}

package iscsiblock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/client/iscsi"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/fusefs/blockfile"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/internal/testutil/tgt"
)

// fileDev is a Device over a local file: the reference the iSCSI-backed
// runs are compared with, and a way to test the FUSE+loop path alone.
type fileDev struct {
	f  *os.File
	sz int64
}

func openFileDev(t *testing.T, path string, size int64) *fileDev {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return &fileDev{f: f, sz: size}
}

func (d *fileDev) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	if off%512 != 0 || len(p)%512 != 0 {
		return 0, blockdev.ErrMisaligned
	}
	return d.f.ReadAt(p, off)
}
func (d *fileDev) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	if off%512 != 0 || len(p)%512 != 0 {
		return 0, blockdev.ErrMisaligned
	}
	return d.f.WriteAt(p, off)
}
func (d *fileDev) Flush(context.Context) error { return d.f.Sync() }
func (d *fileDev) Size() int64                 { return d.sz }
func (d *fileDev) BlockSize() int              { return 512 }
func (d *fileDev) Close() error                { return d.f.Close() }

// stack is one FUSE mount + loop device + (optionally) ext4 mount.
type stack struct {
	srv  *blockfile.Server
	fuse string
	loop *testutil.Loop
	mnt  string
}

// up is upFS for ext4: mkfs.ext4 (no discard) when mkfs is set, else the
// file system already on dev is mounted.
func up(t *testing.T, dev blockdev.Device, mnt string, mkfs bool) *stack {
	t.Helper()
	var argv []string
	if mkfs {
		argv = []string{"mkfs.ext4", "-q", "-F", "-E", "nodiscard"}
	}
	return upFS(t, dev, mnt, argv...)
}

// upFS mounts dev through FUSE, attaches a loop device to the file, runs
// mkfs (argv, the device appended; none if empty) and mounts the file
// system on mnt. Cleanups are registered first, so a failure half way
// still leaves nothing behind: down once for the FUSE mount, and again
// once the loop device is attached, so that it runs before the device's
// own cleanup (umount, then detach, then the FUSE unmount).
func upFS(t *testing.T, dev blockdev.Device, mnt string, mkfs ...string) *stack {
	t.Helper()
	s := &stack{fuse: t.TempDir(), mnt: mnt}
	srv, err := blockfile.Mount(s.fuse, dev, blockfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.srv = srv
	t.Cleanup(func() { s.down(t) })
	s.loop = testutil.AttachLoop(t, filepath.Join(s.fuse, "lun"))
	t.Cleanup(func() { s.down(t) })
	if len(mkfs) > 0 {
		testutil.Run(t, 3*time.Minute, mkfs[0], append(mkfs[1:], s.loop.Dev)...)
	}
	testutil.Run(t, time.Minute, "mount", s.loop.Dev, mnt)
	return s
}

// down unmounts in reverse order; safe to call twice.
func (s *stack) down(t *testing.T) {
	if s.mnt != "" {
		testutil.Quiet("umount", s.mnt)
		s.mnt = ""
	}
	if s.loop != nil {
		if err := s.loop.Detach(t); err != nil {
			t.Error(err)
		}
		s.loop = nil
	}
	if s.srv != nil {
		// the loop device (or udev probing it) may hold the file a while
		if err := testutil.UnmountFUSE(s.fuse, s.srv.Unmount, 30*time.Second); err != nil {
			t.Error(err)
		}
		s.srv = nil
	}
}

// ext4RoundTrip formats ext4 on the device open() returns (through FUSE
// and a loop device), writes files, tears everything down, opens the
// device again and verifies every file's checksum.
func ext4RoundTrip(t *testing.T, open func(t *testing.T) blockdev.Device) {
	testutil.NeedRoot(t, "losetup and mount need root")
	testutil.NeedFUSE(t)
	for _, c := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		testutil.NeedCmd(t, c)
	}
	mnt := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 9))
	sums := map[string][32]byte{}

	dev := open(t)
	s := up(t, dev, mnt, true)
	for i := 0; i < 12; i++ {
		data := make([]byte, 1+rng.IntN(900<<10))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("f%02d.bin", i)
		if err := os.WriteFile(filepath.Join(mnt, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sums[name] = sha256.Sum256(data)
	}
	// one file written with O_SYNC, as a database would
	f, err := os.OpenFile(filepath.Join(mnt, "sync.bin"), os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	syncData := bytes.Repeat([]byte("o_sync "), 10000)
	if _, err := f.Write(syncData); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sums["sync.bin"] = sha256.Sum256(syncData)
	s.down(t)
	if err := dev.Close(); err != nil {
		t.Fatalf("close device: %v", err)
	}

	dev = open(t)
	defer dev.Close()
	s = up(t, dev, mnt, false)
	for name, want := range sums {
		got, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(got) != want {
			t.Fatalf("%s: checksum mismatch after remount", name)
		}
	}
	testutil.Run(t, 3*time.Minute, "umount", mnt)
	s.mnt = ""
	// the file system must be clean after a proper unmount
	if out, err := testutil.TryRun(3*time.Minute, "e2fsck", "-fn", s.loop.Dev); err != nil {
		t.Fatalf("after remount: %v\n%s", err, out)
	}
	s.down(t)
}

// TestExt4OverFUSEFile checks the FUSE + loop + ext4 path over a plain
// local file, without iSCSI in between.
func TestExt4OverFUSEFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.img")
	ext4RoundTrip(t, func(t *testing.T) blockdev.Device { return openFileDev(t, path, 64<<20) })
}

// TestExt4OverISCSIOurs: kernel ext4 -> loop -> FUSE file -> our initiator
// -> our target -> a sparse volume file in the posix store.
func TestExt4OverISCSIOurs(t *testing.T) {
	testutil.NeedRoot(t, "losetup and mount need root")
	tg := startOurs(t, 64<<20, iscsitgt.CHAPConfig{})
	ext4RoundTrip(t, func(t *testing.T) blockdev.Device {
		return openDev(t, iscsi.Config{Portal: tg.Portal, Target: tg.IQN, QueueDepth: 16})
	})
}

// TestExt4OverISCSITgt is the same stack on tgt as the target.
func TestExt4OverISCSITgt(t *testing.T) {
	testutil.NeedRoot(t, "losetup and mount need root")
	tg := tgt.Start(t, tgt.Opts{Size: 64 << 20})
	ext4RoundTrip(t, func(t *testing.T) blockdev.Device {
		return openDev(t, iscsi.Config{Portal: tg.Portal, Target: tg.IQN, LUN: 1, QueueDepth: 16})
	})
}

func openDev(t *testing.T, cfg iscsi.Config) blockdev.Device {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := iscsi.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

package raid

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/internal/testutil"
)

// TestDiskLayouts: `tristore serve --disks D0,D1,D2 --layout L
// --disk-volume NAME=SIZE` for each layout. Three volumes are created and
// written over iSCSI; independent puts one on each disk (balanced), raid0
// and raid5 put a member file of each on every disk. After a restart with
// only --data (the layout is recorded there) every volume is found again
// with its data; other --layout or --disks values are refused; for raid5 a
// lost member file leaves the volume degraded, with a warning, and its
// data intact.
func TestDiskLayouts(t *testing.T) {
	t.Parallel() // independent processes and directories; most of the time is spent waiting
	ctx := context.Background()
	bin := testutil.TristoreBin(ctx, t)
	// Without the iSCSI front end the volumes could not be served: refused, not ignored.
	out, err := runBin(bin, "serve", "--data", t.TempDir(), "--iscsi-addr", "off", "--s3-addr", "off", "--nfs-addr", "off",
		"--admin-addr", "off", "--disks", t.TempDir(), "--layout", "independent", "--disk-volume", "a=1Mi")
	if err == nil || !strings.Contains(out, "--iscsi-addr is off") {
		t.Fatalf("serve --disks with iSCSI off: %v\n%s", err, out)
	}
	for _, layout := range []string{"independent", "raid0", "raid5"} {
		t.Run(layout, func(t *testing.T) {
			data := t.TempDir()
			var disks []string
			for range 3 {
				disks = append(disks, t.TempDir())
			}
			names := []string{"a", "b", "c"}
			args := []string{"--disks", strings.Join(disks, ","), "--layout", layout}
			for _, n := range names {
				args = append(args, "--disk-volume", n+"=8Mi")
			}
			sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"iscsi"}, Args: args})
			content := map[string][]byte{}
			rng := rand.New(rand.NewPCG(1, 2))
			for _, n := range names {
				b := make([]byte, 1<<20)
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				content[n] = b
				s := login(t, sv.Addrs["iscsi"], n)
				if s.Size() < 8<<20 {
					t.Fatalf("volume %s is %d bytes", n, s.Size())
				}
				if _, err := s.WriteAt(ctx, b, 3<<20); err != nil {
					t.Fatal(err)
				}
				if err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				s.Close()
			}
			if !sv.Stop() || !sv.ExitedCleanly() {
				t.Fatalf("serve did not stop cleanly:\n%s", sv.Log())
			}
			// Where the files are.
			for _, n := range names {
				var on []int
				for i, d := range disks {
					ext := ".member"
					if layout == "independent" {
						ext = ".img"
					}
					if _, err := os.Stat(filepath.Join(d, "tristore-volumes", n+ext)); err == nil {
						on = append(on, i)
					}
				}
				if layout == "independent" && len(on) != 1 || layout != "independent" && len(on) != 3 {
					t.Fatalf("volume %s has files on disks %v", n, on)
				}
			}
			var rec struct {
				Layout  string
				Volumes []struct {
					Name string
					Disk int
				}
			}
			b, err := os.ReadFile(filepath.Join(data, ".tristore-disks", "layout.json"))
			if err != nil || json.Unmarshal(b, &rec) != nil || rec.Layout != layout || len(rec.Volumes) != 3 {
				t.Fatalf("recorded layout: %v %s", err, b)
			}
			if layout == "independent" {
				used := map[int]bool{}
				for _, v := range rec.Volumes {
					used[v.Disk] = true
				}
				if len(used) != 3 {
					t.Fatalf("independent volumes not spread over the disks: %s", b)
				}
			}

			// Other values for this data directory are refused.
			other := "raid0"
			if layout == "raid0" {
				other = "independent"
			}
			for _, bad := range [][]string{{"--layout", other}, {"--disks", disks[0] + "," + disks[1]}} {
				out, err := runBin(bin, append([]string{"serve", "--data", data, "--iscsi-addr", "127.0.0.1:0", "--s3-addr", "off",
					"--nfs-addr", "off", "--admin-addr", "off"}, bad...)...)
				if err == nil || !strings.Contains(out, "was set up with") {
					t.Fatalf("serve %v: %v\n%s", bad, err, out)
				}
			}

			if layout == "raid5" {
				if err := os.Remove(filepath.Join(disks[1], "tristore-volumes", "a.member")); err != nil {
					t.Fatal(err)
				}
			}
			sv = testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"iscsi"}})
			if layout == "raid5" && !strings.Contains(sv.Log(), "DEGRADED") {
				t.Fatalf("no degraded warning:\n%s", sv.Log())
			}
			for _, n := range names {
				s := login(t, sv.Addrs["iscsi"], n)
				got := make([]byte, 1<<20)
				if _, err := s.ReadAt(ctx, got, 3<<20); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, content[n]) {
					t.Fatalf("volume %s: data differs after restart", n)
				}
				s.Close()
			}
		})
	}
}

func login(t *testing.T, addr, name string) *iscsi.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := iscsi.Open(ctx, iscsi.Config{Portal: addr, Target: "iqn.2026-11.io.tristore:-disk:" + name})
	if err != nil {
		t.Fatalf("login to volume %s: %v", name, err)
	}
	return s
}

// TestDiskVolumeCreateFailsCleanly: a raid5 volume whose member cannot be
// made on one disk (the disk path is a file) fails serve with the reason
// and leaves no member file on the other disks, so once the disk is back
// the next start creates the volume.
func TestDiskVolumeCreateFailsCleanly(t *testing.T) {
	t.Parallel()
	bin := testutil.TristoreBin(context.Background(), t)
	data := t.TempDir()
	disks := []string{t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "d2")}
	if err := os.WriteFile(disks[2], []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--disks", strings.Join(disks, ","), "--layout", "raid5", "--disk-volume", "a=8Mi"}
	out, err := runBin(bin, append([]string{"serve", "--data", data, "--iscsi-addr", "127.0.0.1:0", "--s3-addr", "off",
		"--nfs-addr", "off", "--admin-addr", "off"}, args...)...)
	if err == nil || !strings.Contains(out, "disk volume a") {
		t.Fatalf("serve with a disk that is a file: %v\n%s", err, out)
	}
	for _, d := range disks[:2] {
		if _, err := os.Stat(filepath.Join(d, "tristore-volumes", "a.member")); err == nil {
			t.Fatalf("a failed create left a member file on %s", d)
		}
	}
	if err := os.Remove(disks[2]); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(disks[2], 0o755); err != nil {
		t.Fatal(err)
	}
	sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"iscsi"}, Args: args})
	s := login(t, sv.Addrs["iscsi"], "a")
	defer s.Close()
	if s.Size() < 8<<20 {
		t.Fatalf("volume is %d bytes", s.Size())
	}
}

package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// TestServeISCSI runs `tristore serve` with only the iSCSI front end on a
// free loopback port and checks a volume created by `tristore volume` is
// visible to libiscsi's iscsi-ls and iscsi-readcapacity16.
func TestServeISCSI(t *testing.T) {
	testutil.NeedCmd(t, "iscsi-ls")
	testutil.NeedCmd(t, "iscsi-readcapacity16")
	data := t.TempDir()
	if out, err := runVolumeCLI(t, "volume", "create", "--data", data, "vols/served", "8M"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ready := filepath.Join(t.TempDir(), "ready.json")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := NewRoot()
		root.SetArgs([]string{"serve", "--data", data, "--s3-addr", "off", "--nfs-addr", "off", "--admin-addr", "off",
			"--iscsi-addr", "127.0.0.1:0", "--ready-file", ready})
		done <- root.ExecuteContext(ctx)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop")
		}
	}()
	var addrs map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &addrs) == nil && addrs["iscsi"] != "" {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not write its ready file")
		}
		time.Sleep(20 * time.Millisecond)
	}
	iqn := VolumeIQN("vols", "served")
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	out, err := exec.CommandContext(cctx, "iscsi-ls", "-s", "iscsi://"+addrs["iscsi"]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), iqn) {
		t.Fatalf("iscsi-ls: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(cctx, "iscsi-readcapacity16", "iscsi://"+addrs["iscsi"]+"/"+iqn+"/0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Total size:8388608") {
		t.Fatalf("iscsi-readcapacity16: %v\n%s", err, out)
	}
}

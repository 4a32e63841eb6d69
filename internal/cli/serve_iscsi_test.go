package cli

import (
	"context"
	"os/exec"
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
	if out, err := runVolumeCLI(t, "volume", "create", "--data", data, "vols/served", "8Mi"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	addrs := startServe(t, "iscsi", 30*time.Second, "--data", data, "--s3-addr", "off", "--nfs-addr", "off", "--admin-addr", "off",
		"--iscsi-addr", "127.0.0.1:0")
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

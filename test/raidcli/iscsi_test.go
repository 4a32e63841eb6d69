package raidcli

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/raid"
)

// TestISCSIMembers runs the raid commands over a mix of members: three LUNs
// of a `tristore serve` iSCSI target (separate process, 127.0.0.1) and one
// local file. Create, status, check, fail of an iSCSI member, replace onto
// another LUN, check again, stop.
func TestISCSIMembers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	data := t.TempDir()
	run := func(args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		c := exec.CommandContext(ctx, bin, args...)
		c.Stdout, c.Stderr = &out, &out
		err := c.Run()
		return out.String(), err
	}
	for _, v := range []string{"d1", "d2", "d3"} {
		if out, err := run("volume", "create", "--data", data, "vols/"+v, "4Mi"); err != nil {
			t.Fatalf("volume create: %v\n%s", err, out)
		}
	}
	srv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"iscsi"}})
	lun := func(v string) string {
		return "iscsi://" + srv.Addrs["iscsi"] + "/iqn.2026-11.io.tristore:vols:" + v + "/0"
	}
	file := filepath.Join(t.TempDir(), "m")
	members := []string{lun("d1"), lun("d2"), file}
	if out, err := run(append([]string{"raid", "create", "--level", "5", "--chunk", "16Ki", "--journal", "128Ki", "--size", "4Mi"}, members...)...); err != nil {
		t.Fatalf("create over iSCSI + file: %v\n%s", err, out)
	}
	status := func(ms ...string) raid.Info {
		t.Helper()
		out, err := run(append([]string{"raid", "status", "--json"}, ms...)...)
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		var in raid.Info
		if err := json.Unmarshal([]byte(out), &in); err != nil {
			t.Fatalf("status JSON: %v\n%s", err, out)
		}
		return in
	}
	if in := status(file, lun("d2"), lun("d1")); in.Level != 5 || in.Members != 3 || in.Dirty || len(in.Failed) != 0 {
		t.Fatalf("status: %+v", in)
	}
	if out, err := run(append([]string{"raid", "check"}, members...)...); err != nil || !strings.Contains(out, "0 mismatched stripes") {
		t.Fatalf("check: %v\n%s", err, out)
	}
	if out, err := run(append([]string{"raid", "fail", "1"}, members...)...); err != nil {
		t.Fatalf("fail slot 1 (an iSCSI LUN): %v\n%s", err, out)
	}
	if in := status(lun("d1"), file); len(in.Failed) != 1 || in.Failed[0] != 1 {
		t.Fatalf("status after fail: %+v", in)
	}
	if out, err := run("raid", "replace", "1", lun("d3"), lun("d1"), file); err != nil || !strings.Contains(out, "rebuild of slot 1 verified") {
		t.Fatalf("replace onto d3: %v\n%s", err, out)
	}
	fixed := []string{lun("d3"), file, lun("d1")}
	if out, err := run(append([]string{"raid", "check"}, fixed...)...); err != nil || !strings.Contains(out, "0 mismatched stripes") {
		t.Fatalf("check after replace: %v\n%s", err, out)
	}
	if out, err := run(append([]string{"raid", "stop"}, fixed...)...); err != nil || !strings.Contains(out, "state: clean") {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	if in := status(fixed...); in.Dirty || len(in.Failed) != 0 || in.Rebuilding != -1 {
		t.Fatalf("status after stop: %+v", in)
	}
}

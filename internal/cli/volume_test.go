package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func runVolumeCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestVolumeCommands(t *testing.T) {
	data := t.TempDir()
	out, err := runVolumeCLI(t, "volume", "create", "--data", data, "vols/disk1", "64Mi")
	if err != nil || !strings.Contains(out, "iqn.2026-11.io.tristore:vols:disk1") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if _, err := runVolumeCLI(t, "volume", "create", "--data", data, "vols/disk1", "1Gi"); err == nil {
		t.Fatal("duplicate create succeeded")
	}
	for _, bad := range [][]string{{"vols/Bad_Name", "1G"}, {"vols/x", "12Q"}, {"vols/y", "1M"}, {"vols/z", "1000"}, {"novolume", "1G"}} {
		if _, err := runVolumeCLI(t, append([]string{"volume", "create", "--data", data}, bad...)...); err == nil {
			t.Errorf("create %v succeeded", bad)
		}
	}
	if _, err := runVolumeCLI(t, "volume", "resize", "--data", data, "vols/disk1", "128Mi"); err != nil {
		t.Fatal(err)
	}
	out, err = runVolumeCLI(t, "volume", "list", "--data", data, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Bucket, Name, IQN string
		Size, Allocated   int64
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rows) != 1 || rows[0].Name != "disk1" || rows[0].Size != 128<<20 || rows[0].Allocated > 1<<20 {
		t.Fatalf("list: %+v", rows)
	}
	out, err = runVolumeCLI(t, "volume", "list", "--data", data)
	if err != nil || !strings.Contains(out, "BUCKET") || !strings.Contains(out, "134217728") {
		t.Fatalf("table: %v\n%s", err, out)
	}
	if _, err := runVolumeCLI(t, "volume", "delete", "--data", data, "vols/disk1"); err != nil {
		t.Fatal(err)
	}
	if _, err := runVolumeCLI(t, "volume", "delete", "--data", data, "vols/disk1"); err == nil {
		t.Fatal("second delete succeeded")
	}
}

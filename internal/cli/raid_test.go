package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRaidCommands drives `tristore raid` end to end over local files:
// create, assemble in another order, a parity mismatch found by check and
// repaired, a degraded array after a member is lost, and a replace that
// brings it back to clean.
func TestRaidCommands(t *testing.T) {
	dir := t.TempDir()
	m := func(i int) string { return filepath.Join(dir, "m"+string(rune('0'+i))) }
	status := func(args ...string) map[string]any {
		t.Helper()
		out, err := runVolumeCLI(t, append([]string{"raid", "status", "--json"}, args...)...)
		if err != nil {
			t.Fatalf("raid status %v: %v\n%s", args, err, out)
		}
		var st map[string]any
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status JSON: %v\n%s", err, out)
		}
		return st
	}
	if out, err := runVolumeCLI(t, "raid", "create", "--level", "5", "--chunk", "64Ki", "--journal", "512Ki", "--size", "4Mi", m(0), m(1), m(2)); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	st := status(m(2), m(0), m(1)) // any order
	if st["Level"] != float64(5) || st["Members"] != float64(3) || len(failedSlots(st)) != 0 {
		t.Fatalf("status after create: %v", st)
	}
	if out, err := runVolumeCLI(t, "raid", "check", m(0), m(1), m(2)); err != nil || !strings.Contains(out, "0 mismatched stripes") {
		t.Fatalf("check of a new array: %v\n%s", err, out)
	}
	// Scribble on member 1's data area (past its 4 KiB superblock and 512 KiB journal) behind the array's back.
	f, err := os.OpenFile(m(1), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("not parity"), 4096+512<<10+100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := runVolumeCLI(t, "raid", "check", m(0), m(1), m(2))
	if err == nil || !strings.Contains(out, "1 mismatched stripes") {
		t.Fatalf("check after scribbling: err=%v\n%s", err, out)
	}
	if out, err := runVolumeCLI(t, "raid", "check", "--repair", m(0), m(1), m(2)); err != nil {
		t.Fatalf("check --repair: %v\n%s", err, out)
	}
	if out, err := runVolumeCLI(t, "raid", "check", m(0), m(1), m(2)); err != nil || !strings.Contains(out, "0 mismatched stripes") {
		t.Fatalf("check after repair: %v\n%s", err, out)
	}
	// A member of another array is refused.
	if out, err := runVolumeCLI(t, "raid", "create", "--level", "0", "--size", "4Mi", m(3), m(4)); err != nil {
		t.Fatalf("second array: %v\n%s", err, out)
	}
	if _, err := runVolumeCLI(t, "raid", "status", m(0), m(1), m(3)); err == nil {
		t.Fatal("assembling with a member of another array succeeded")
	}
	// Lose member 2: the array assembles degraded; replace rebuilds slot 2.
	if err := os.Remove(m(2)); err != nil {
		t.Fatal(err)
	}
	st = status(m(0), m(1))
	if f, _ := st["Missing"].([]any); len(f) != 1 || f[0] != float64(2) || len(failedSlots(st)) != 0 {
		t.Fatalf("status with a member missing: %v", st)
	}
	// assemble starts it degraded: slot 2 is then recorded as failed.
	if out, err := runVolumeCLI(t, "raid", "assemble", m(0), m(1)); err != nil || !strings.Contains(out, "degraded (failed slots [2])") {
		t.Fatalf("degraded assemble: %v\n%s", err, out)
	}
	if f := failedSlots(status(m(0), m(1))); len(f) != 1 || f[0] != float64(2) {
		t.Fatalf("status after degraded assemble: failed %v", f)
	}
	// Failing one more member of a degraded RAID-5 is refused.
	if out, err := runVolumeCLI(t, "raid", "fail", "0", m(0), m(1)); err == nil || !strings.Contains(err.Error(), "would stop the array") {
		t.Fatalf("fail of a second member: %v\n%s", err, out)
	}
	if out, err := runVolumeCLI(t, "raid", "replace", "--size", "4Mi", "2", m(5), m(0), m(1)); err != nil {
		t.Fatalf("replace: %v\n%s", err, out)
	}
	st = status(m(1), m(5), m(0))
	if len(failedSlots(st)) != 0 || st["Rebuilding"] != float64(-1) {
		t.Fatalf("status after replace: %v", st)
	}
	if out, err := runVolumeCLI(t, "raid", "check", m(0), m(1), m(5)); err != nil || !strings.Contains(out, "0 mismatched stripes") {
		t.Fatalf("check after rebuild: %v\n%s", err, out)
	}
	// fail marks a member failed on the others (event counter bumped); the
	// failed member is then refused, and the rest assemble degraded.
	before := status(m(0), m(1), m(5))["Events"].(float64)
	if out, err := runVolumeCLI(t, "raid", "fail", "1", m(0), m(1), m(5)); err != nil {
		t.Fatalf("fail: %v\n%s", err, out)
	}
	st = status(m(0), m(5))
	if f := failedSlots(st); len(f) != 1 || f[0] != float64(1) || st["Events"].(float64) <= before || st["Dirty"] != false {
		t.Fatalf("status after fail: %v (events before %v)", st, before)
	}
	if out, err := runVolumeCLI(t, "raid", "status", m(0), m(1), m(5)); err == nil || !strings.Contains(err.Error(), "stale member") {
		t.Fatalf("status with the failed member: %v\n%s", err, out)
	}
	if out, err := runVolumeCLI(t, "raid", "stop", m(0), m(5)); err != nil || !strings.Contains(out, "degraded (failed slots [1])") {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	// RAID-1 and mismatched sizes.
	if out, err := runVolumeCLI(t, "raid", "create", "--level", "1", "--chunk", "4Ki", "--journal", "64Ki", "--size", "1Mi", m(6), m(7)); err != nil || !strings.Contains(out, "level: 1") {
		t.Fatalf("raid1 create: %v\n%s", err, out)
	}
	if err := os.WriteFile(m(8), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(m(8), 3<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := runVolumeCLI(t, "raid", "create", "--level", "0", "--size", "4Mi", m(9), m(8)); err == nil || !strings.Contains(err.Error(), "member 1") {
		t.Fatalf("create with mismatched sizes: %v\n%s", err, out)
	}
	if out, err := runVolumeCLI(t, "raid", "create", "--level", "0", "--use-smallest", m(9), m(8)); err != nil {
		t.Fatalf("create --use-smallest: %v\n%s", err, out)
	}
}

// failedSlots is the Failed list of a JSON status (null when none).
func failedSlots(st map[string]any) []any {
	f, _ := st["Failed"].([]any)
	return f
}

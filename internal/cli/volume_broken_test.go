package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs the command line and returns stdout, stderr and the error.
func runCLI3(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := NewRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

// A volume whose object was removed behind tristore's back is listed as
// broken (with a warning), does not make `volume list` fail for the
// others, and `volume delete` removes its registration.
func TestVolumeListAndDeleteBroken(t *testing.T) {
	data := t.TempDir()
	for _, v := range []string{"vols/good", "vols/lost", "other/fine"} {
		if _, _, err := runCLI3(t, "volume", "create", "--data", data, v, "1Mi"); err != nil {
			t.Fatalf("create %s: %v", v, err)
		}
	}
	if err := os.Remove(filepath.Join(data, "vols", "lost")); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI3(t, "volume", "list", "--data", data)
	if err != nil {
		t.Fatalf("list with one broken volume: %v\n%s%s", err, out, errOut)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 6 {
			t.Fatalf("row %q: want 6 columns\n%s", line, out)
		}
		rows[f[0]+"/"+f[1]] = f[4] + " " + f[2]
	}
	want := map[string]string{"vols/good": "ok 1048576", "vols/lost": "broken -", "other/fine": "ok 1048576"}
	for k, w := range want {
		if rows[k] != w {
			t.Errorf("%s: %q, want %q\n%s", k, rows[k], w, out)
		}
	}
	if !strings.Contains(out, "STATE") || !strings.Contains(errOut, "vols/lost is broken") || !strings.Contains(errOut, "volume delete vols/lost") {
		t.Errorf("want a STATE column and a warning naming the fix:\n%s%s", out, errOut)
	}
	out, _, err = runCLI3(t, "volume", "list", "--data", data, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var js []struct {
		Name, State, Problem string
		Served               bool
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil || len(js) != 3 {
		t.Fatalf("json: %v\n%s", err, out)
	}
	for _, r := range js {
		if (r.Name == "lost") != (r.State == "broken") || (r.State == "broken") != (r.Problem != "") || r.Served {
			t.Errorf("json row %+v", r)
		}
	}
	if _, _, err := runCLI3(t, "volume", "delete", "--data", data, "vols/lost"); err != nil {
		t.Fatalf("delete of a broken volume: %v", err)
	}
	out, errOut, err = runCLI3(t, "volume", "list", "--data", data)
	if err != nil || strings.Contains(out, "lost") || errOut != "" || strings.Count(out, " ok ") != 2 {
		t.Fatalf("after delete: %v\n%s%s", err, out, errOut)
	}
}

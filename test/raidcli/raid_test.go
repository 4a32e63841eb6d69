// Package raidcli tests `tristore raid` through the built binary: a rebuild
// killed with SIGKILL resumes from its checkpoint (not from zero) after a
// restart, and the rebuilt member really carries the data.
package raidcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/blockdev/filelun"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/raid"
)

func TestMain(m *testing.M) { testutil.Main(m) }

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// open opens member files as Devices.
func open(t *testing.T, paths ...string) []blockdev.Device {
	t.Helper()
	var ds []blockdev.Device
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := filelun.New(osFile{f}, 512)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, l)
	}
	return ds
}

func TestRebuildKilledResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	dir := t.TempDir()
	m := func(i int) string { return filepath.Join(dir, fmt.Sprintf("m%d", i)) }
	run := func(args ...string) (string, string, error) {
		t.Helper()
		var out, errb bytes.Buffer
		c := exec.CommandContext(ctx, bin, args...)
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		return out.String(), errb.String(), err
	}
	status := func(members ...string) raid.Info {
		t.Helper()
		out, e, err := run(append([]string{"raid", "status", "--json"}, members...)...)
		if err != nil {
			t.Fatalf("status: %v\n%s%s", err, out, e)
		}
		var in raid.Info
		if err := json.Unmarshal([]byte(out), &in); err != nil {
			t.Fatalf("status JSON: %v\n%s", err, out)
		}
		return in
	}
	if out, e, err := run("raid", "create", "--level", "5", "--chunk", "4Ki", "--journal", "64Ki", "--size", "2Mi", m(0), m(1), m(2)); err != nil {
		t.Fatalf("create: %v\n%s%s", err, out, e)
	}
	// Fill the array with known data.
	a, err := raid.Assemble(ctx, open(t, m(0), m(1), m(2)))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, a.Size())
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if _, err := a.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if out, e, err := run("raid", "fail", "2", m(0), m(1), m(2)); err != nil {
		t.Fatalf("fail: %v\n%s%s", err, out, e)
	}
	if in := status(m(0), m(1)); len(in.Failed) != 1 || in.Failed[0] != 2 {
		t.Fatalf("after fail: %+v", in)
	}

	// Rebuild slot 2 onto m3, slowly, and kill the process half way.
	c := exec.CommandContext(ctx, bin, "raid", "replace", "--rate", "1Mi", "--size", "2Mi", "2", m(3), m(0), m(1))
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	killed := false
	for sc.Scan() {
		var slot, pct int
		var done, total int64
		if n, _ := fmt.Sscanf(sc.Text(), "rebuild: slot %d %d%% (%d of %d bytes)", &slot, &pct, &done, &total); n == 4 && pct >= 40 {
			c.Process.Kill()
			killed = true
			break
		}
	}
	c.Wait()
	if !killed {
		t.Fatal("the rebuild ended before it could be killed at 40 %")
	}
	in := status(m(0), m(1), m(3))
	memberBytes := int64(len(data) / 2)
	if in.Rebuilding != 2 || in.RebuildPos <= 0 || in.RebuildPos >= memberBytes || !in.Dirty {
		t.Fatalf("after the kill: %+v, want slot 2 rebuilding from a checkpoint inside (0, %d), dirty", in, memberBytes)
	}

	// Restart: the rebuild continues from the checkpoint, not from zero.
	out, e, err := run("raid", "assemble", "--resume", m(3), m(0), m(1))
	if err != nil {
		t.Fatalf("assemble --resume: %v\n%s%s", err, out, e)
	}
	if want := fmt.Sprintf("resuming rebuild of slot 2 at byte %d\n", in.RebuildPos); !strings.Contains(e, want) {
		t.Fatalf("resume output lacks %q:\n%s", want, e)
	}
	var first int64 = -1
	for _, l := range strings.Split(e, "\n") {
		var slot, pct int
		var done, total int64
		if n, _ := fmt.Sscanf(l, "rebuild: slot %d %d%% (%d of %d bytes)", &slot, &pct, &done, &total); n == 4 {
			first = done
			break
		}
	}
	if first <= in.RebuildPos || first > in.RebuildPos+64<<10 {
		t.Fatalf("first progress after resume at %d bytes, want just past the checkpoint %d", first, in.RebuildPos)
	}
	if !strings.Contains(out, "state: clean") {
		t.Fatalf("after resume: %s", out)
	}
	if out, e, err := run("raid", "check", m(0), m(1), m(3)); err != nil || !strings.Contains(out, "0 mismatched stripes") {
		t.Fatalf("check after resumed rebuild: %v\n%s%s", err, out, e)
	}
	// The rebuilt member stands in for a lost one: without m0, the data
	// of slot 0 is reconstructed from m1 and the rebuilt m3.
	b, err := raid.Assemble(ctx, open(t, m(3), m(1)))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := b.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("data read through the rebuilt member differs from what was written")
	}
}

package newdir

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestRegistry: a made directory stays unsettled until an fsync of its
// parent that began after its mkdir has ended; a failed mkdir leaves
// nothing behind; a directory made again after an fsync began is not
// settled by that fsync.
func TestRegistry(t *testing.T) {
	root := t.TempDir()
	a := filepath.Join(root, "a")
	ab := filepath.Join(a, "b")
	if Pending() {
		t.Fatal("registry not empty at the start")
	}
	if err := Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Mkdir(ab, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Mkdir(ab, 0o755); !os.IsExist(err) {
		t.Fatalf("second mkdir: %v, want EEXIST", err)
	}
	// A file in a/b/c's directory needs root (a's parent) and a (b's) fsynced.
	if got, want := UnsettledParents(filepath.Join(ab, "c")), []string{a, root}; !reflect.DeepEqual(got, want) {
		t.Fatalf("UnsettledParents = %v, want %v", got, want)
	}
	if got, want := UnsettledParents(ab), []string{a, root}; !reflect.DeepEqual(got, want) {
		t.Fatalf("UnsettledParents(dir itself) = %v, want %v", got, want)
	}

	// An fsync of root settles a only.
	s := SettleBegin(root)
	SettleEnd(s)
	if got, want := UnsettledParents(ab), []string{a}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after root's fsync: %v, want %v", got, want)
	}

	// b removed and made again after a's fsync began: that fsync does
	// not settle it.
	s = SettleBegin(a)
	if err := os.Remove(ab); err != nil {
		t.Fatal(err)
	}
	if err := Mkdir(ab, 0o755); err != nil {
		t.Fatal(err)
	}
	SettleEnd(s)
	if got, want := UnsettledParents(ab), []string{a}; !reflect.DeepEqual(got, want) {
		t.Fatalf("made again during the fsync: %v, want %v", got, want)
	}
	SettleEnd(SettleBegin(a))
	if Pending() || len(UnsettledParents(ab)) != 0 {
		t.Fatalf("after a's second fsync: still pending %v", UnsettledParents(ab))
	}

	// A failed mkdir registers nothing.
	if err := Mkdir(filepath.Join(root, "no", "such"), 0o755); err == nil {
		t.Fatal("mkdir under a missing parent succeeded")
	}
	if Pending() {
		t.Fatal("a failed mkdir left an entry")
	}
	// A mkdir under way (Register without its end) counts for the path.
	done := Register(filepath.Join(root, "c"))
	if got := UnsettledParents(filepath.Join(root, "c")); len(got) != 1 || got[0] != root {
		t.Fatalf("mkdir under way: %v", got)
	}
	done(false)
	if Pending() {
		t.Fatal("a registered mkdir that failed left an entry")
	}
}

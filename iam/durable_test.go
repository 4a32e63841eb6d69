package iam

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/fsjournal"
)

// TestEnsureRootUnchangedWritesNothing: a serve start whose root keys are
// those already stored (given, or none given with an admin present) does
// not rewrite users.json (same inode, same ctime). Every start used to
// replace it, and on ext4 without a journal each replaced file freed was
// a chance for a power cut to leave its name over a reused inode.
func TestEnsureRootUnchangedWritesNothing(t *testing.T) {
	for _, keys := range [][2]string{{"ROOTKEY0123456789ABC", "rootsecret-rootsecret-rootsecret-0123456"}, {"", ""}} {
		dir := t.TempDir()
		start := func() fileID {
			t.Helper()
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := s.EnsureRoot(keys[0], keys[1]); err != nil {
				t.Fatal(err)
			}
			id, err := statID(filepath.Join(dir, dirName, usersFile))
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		first := start()
		for i := 0; i < 2; i++ {
			if again := start(); again != first {
				t.Fatalf("keys %q: start %d rewrote users.json: %+v, was %+v", keys[0], i+2, again, first)
			}
		}
		if keys[0] == "" {
			continue
		}
		// A changed secret is still written.
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := s.EnsureRoot(keys[0], "another-secret-another-secret-0123456789"); err != nil {
			t.Fatal(err)
		}
		if id, _ := statID(filepath.Join(dir, dirName, usersFile)); id == first {
			t.Fatal("a changed root secret did not rewrite users.json")
		}
		if sec, err := s.SecretFor(t.Context(), keys[0]); err != nil || sec != "another-secret-another-secret-0123456789" {
			t.Fatalf("secret after the change: %q %v", sec, err)
		}
	}
}

// forceNoJournal makes Open take the journal-less path whatever the test
// directory's file system is.
func forceNoJournal(t *testing.T) {
	journaled = func(string) bool { return false }
	t.Cleanup(func() {
		journaled = fsjournal.JournaledPath
		hookBeforeRename, hookRetire = nil, nil
	})
}

type retired struct {
	mu   sync.Mutex
	inos map[uint64]unix.Stat_t
}

func recordRetired(t *testing.T) *retired {
	r := &retired{inos: map[uint64]unix.Stat_t{}}
	hookRetire = func(fd int) {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Errorf("fstat of a retired fd: %v", err)
		}
		r.mu.Lock()
		r.inos[st.Ino] = st
		r.mu.Unlock()
	}
	return r
}

func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") || strings.Contains(e.Name(), oldInfix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestRewriteKeepsReplacedFile: without a journal, the users.json an
// update replaces has a second name when the rename runs (link count 2, so
// the rename never takes it to 0 before it is durable), and afterwards that
// name is gone and the old inode, nameless, was retired before its close.
// Fails without the second name (count 1 at the rename) or the retire.
func TestRewriteKeepsReplacedFile(t *testing.T) {
	forceNoJournal(t)
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Add("alice", false); err != nil {
		t.Fatal(err)
	}
	var old unix.Stat_t
	if err := unix.Stat(filepath.Join(s.dir, usersFile), &old); err != nil {
		t.Fatal(err)
	}
	var atRename unix.Stat_t
	hookBeforeRename = func(target string) { unix.Stat(target, &atRename) }
	r := recordRetired(t)
	if _, _, err := s.Add("bob", false); err != nil {
		t.Fatal(err)
	}
	if atRename.Ino != old.Ino || atRename.Nlink != 2 {
		t.Errorf("at the rename users.json is inode %d with %d names, want the old %d with 2", atRename.Ino, atRename.Nlink, old.Ino)
	}
	if st, ok := r.inos[old.Ino]; !ok || st.Nlink != 0 {
		t.Errorf("the replaced users.json (inode %d) was not retired without a name: %v %+v", old.Ino, ok, st)
	}
	if l := leftovers(t, s.dir); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestFailedWriteRetiresTemp: a temp file whose rename failed is removed,
// and without a journal retired (written as deleted) before it is let go.
func TestFailedWriteRetiresTemp(t *testing.T) {
	forceNoJournal(t)
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "x", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := recordRetired(t)
	if err := s.writeFileAtomic("x", []byte("12345")); err == nil {
		t.Fatal("a rename over a non-empty directory succeeded")
	}
	found := false
	for _, st := range r.inos {
		if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 5 && st.Nlink == 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("the failed temp file was not retired: %+v", r.inos)
	}
	if l := leftovers(t, s.dir); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestOpenRemovesStale: temp files and second names a crash left are
// removed at Open and, without a journal, retired.
func TestOpenRemovesStale(t *testing.T) {
	forceNoJournal(t)
	data := t.TempDir()
	s, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	var inos []uint64
	for _, n := range []string{".users.json.tmp-123", ".users.json" + oldInfix + "abc"} {
		p := filepath.Join(s.dir, n)
		if err := os.WriteFile(p, []byte("stale"), 0o600); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		unix.Stat(p, &st)
		inos = append(inos, st.Ino)
	}
	r := recordRetired(t)
	if _, err := Open(data); err != nil {
		t.Fatal(err)
	}
	if l := leftovers(t, s.dir); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
	for _, ino := range inos {
		if _, ok := r.inos[ino]; !ok {
			t.Errorf("stale inode %d not retired", ino)
		}
	}
}

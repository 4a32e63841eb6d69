package posix_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
	"golang.org/x/sys/unix"
)

func inodeOf(t *testing.T, p string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPutTakesPooledInode: a PUT's file is an inode made ahead of time in
// .tristore/tmp (not one allocated on the request path), and it gets what
// open(O_CREAT) would have given it: the mode under the umask and the
// current times, even though the pooled file was made (here: aged) long
// before.
func TestPutTakesPooledInode(t *testing.T) {
	root := t.TempDir()
	st, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	// The first PUT starts the pool; wait (bounded) until it is full.
	if _, err := st.Put(ctx, "bkt", "first", bytes.NewReader(nil), 0, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(root, ".tristore", "tmp")
	var pool map[uint64]string
	for i := 0; i < 200; i++ {
		if pool = testutil.UnnamedFiles(t, tmp); len(pool) >= 8 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(pool) == 0 {
		t.Fatalf("no unnamed files in %s: the store keeps no inode pool", tmp)
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range pool {
		ts := []unix.Timespec{unix.NsecToTimespec(old.UnixNano()), unix.NsecToTimespec(old.UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now().Add(-time.Second)
	for _, key := range []string{"empty", "dir/data"} {
		body := []byte(key)
		if key == "empty" {
			body = nil
		}
		if _, err := st.Put(ctx, "bkt", key, bytes.NewReader(body), int64(len(body)), store.ObjectMeta{}); err != nil {
			t.Fatal(err)
		}
		s := inodeOf(t, filepath.Join(root, "bkt", key))
		if _, ok := pool[s.Ino]; !ok {
			t.Errorf("%s: inode %d is not one of the pooled inodes %v", key, s.Ino, pool)
		}
		if got, want := s.Mode&0o7777, 0o644&^uint32(umask()); got != want {
			t.Errorf("%s: mode %o, want %o (open(O_CREAT, 0644) under the umask)", key, got, want)
		}
		if m := time.Unix(s.Mtim.Unix()); m.Before(before) {
			t.Errorf("%s: mtime %v is the pooled file's, not the PUT's", key, m)
		}
		rc, _, err := st.Get(ctx, "bkt", key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		got.ReadFrom(rc)
		rc.Close()
		if !bytes.Equal(got.Bytes(), body) {
			t.Errorf("%s: read %q, want %q", key, got.Bytes(), body)
		}
	}
}

// TestPutInSetGIDDirKeepsGroup: a file made in a set-group-ID directory
// takes the directory's group; a pooled file (made in .tristore/tmp) would
// not, so such a directory gets a freshly created file.
func TestPutInSetGIDDirKeepsGroup(t *testing.T) {
	testutil.NeedRoot(t, "chown of a directory to another group")
	root := t.TempDir()
	st, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "bkt", "d/first", bytes.NewReader(nil), 0, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(root, "bkt", "d")
	const gid = 4242
	if err := os.Chown(d, 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(d, 0o2755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // more than one, so a pooled file would surely be offered
		k := "d/k" + strconv.Itoa(i)
		if _, err := st.Put(ctx, "bkt", k, bytes.NewReader([]byte("x")), 1, store.ObjectMeta{}); err != nil {
			t.Fatal(err)
		}
		if s := inodeOf(t, filepath.Join(root, "bkt", k)); s.Gid != gid {
			t.Errorf("%s: group %d, want the set-group-ID directory's %d", k, s.Gid, gid)
		}
	}
}

func umask() int {
	m := unix.Umask(0o022)
	unix.Umask(m)
	return m
}

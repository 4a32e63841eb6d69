package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// UnnamedFiles returns this process's open unnamed files (O_TMPFILE) made
// in dir, as inode number -> /proc/self/fd link: the kernel shows such a
// descriptor as "DIR/#INODE (deleted)". Tests of store/inodepool's users
// use it to tell whether a new file came from the pool.
func UnnamedFiles(t testing.TB, dir string) map[uint64]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]string{}
	for _, e := range ents {
		p := filepath.Join("/proc/self/fd", e.Name())
		l, err := os.Readlink(p)
		if err != nil {
			continue
		}
		rest, ok := strings.CutPrefix(l, dir+"/#")
		if !ok {
			continue
		}
		if ino, err := strconv.ParseUint(strings.TrimSuffix(rest, " (deleted)"), 10, 64); err == nil {
			got[ino] = p
		}
	}
	return got
}

package posix_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// waitCleanup waits (bounded) until b's background removal of the temp
// files of earlier incarnations has ended.
func waitCleanup(t *testing.T, b *posix.Backend) {
	t.Helper()
	select {
	case <-b.CleanupDone():
	case <-time.After(30 * time.Second):
		t.Fatal("background temp-file cleanup not done after 30 s")
	}
}

// tempsIn lists the temp file names in dir, sorted.
func tempsIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tristore-tmp-") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// staleTree makes a tree with bucket bkt holding x/y, closes it and leaves
// temp files of earlier incarnations in it as a crash would: one with an
// older version's name (no incarnation), one of incarnation 1 and one of
// the incarnation of the opener that made the tree. It returns the root
// and the leftovers' paths.
func staleTree(t *testing.T) (string, []string) {
	t.Helper()
	root := t.TempDir()
	b, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateBucket(context.Background(), "bkt", "me"); err != nil {
		t.Fatal(err)
	}
	putS(t, b, "x/y", "keep")
	waitCleanup(t, b)
	inc := b.Incarnation()
	b.Close()
	left := []string{
		filepath.Join(root, "bkt", ".tristore-tmp-0badc0de"),
		filepath.Join(root, "bkt", "x", ".tristore-tmp-0000000000000001-00112233445566ff"),
		filepath.Join(root, "bkt", fmt.Sprintf(".tristore-tmp-%016x-0123456789abcdef", inc)),
		filepath.Join(root, ".tristore", "meta", fmt.Sprintf(".tristore-tmp-%016x-fedcba9876543210", inc)),
	}
	for _, p := range left {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("half a PUT"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, left
}

// openBlocked opens root with the background walk held at its start; it
// returns the backend and a function that lets the walk go on. Open must
// return while the walk is held: start-up does not wait for it.
func openBlocked(t *testing.T, root string) (*posix.Backend, func()) {
	t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	posix.SetHookCleanupStart(func() {
		close(started)
		<-release
	})
	t.Cleanup(func() { posix.SetHookCleanupStart(nil) })
	type res struct {
		b   *posix.Backend
		err error
	}
	opened := make(chan res, 1)
	go func() {
		b, err := posix.Open(root, posix.Options{})
		opened <- res{b, err}
	}()
	var r res
	select {
	case r = <-opened:
	case <-time.After(20 * time.Second):
		close(release) // let Open finish, then fail
		r = <-opened
		if r.b != nil {
			r.b.Close()
		}
		t.Fatal("Open waited for the walk of the tree")
	}
	if r.err != nil {
		close(release)
		t.Fatal(r.err)
	}
	var once bool
	let := func() {
		if !once {
			once = true
			close(release)
		}
	}
	t.Cleanup(func() { let(); r.b.Close() })
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("background walk did not start")
	}
	return r.b, let
}

// TestOpenDoesNotWaitForTempWalk: Open returns while the walk of the tree
// for stale temp files is held, and the store answers meanwhile.
func TestOpenDoesNotWaitForTempWalk(t *testing.T) {
	root, left := staleTree(t)
	b, let := openBlocked(t, root)
	select {
	case <-b.CleanupDone():
		t.Fatal("CleanupDone closed before the walk ran")
	default:
	}
	for _, p := range left {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("leftover %s gone before the walk ran: %v", p, err)
		}
	}
	putS(t, b, "new", "served")
	if got, _ := readAll(t, b, "new"); got != "served" {
		t.Fatalf("Get new = %q while the walk is held", got)
	}
	let()
	waitCleanup(t, b)
}

// TestStaleTempsRemovedWhileServing: the temp files of earlier
// incarnations stay invisible to List, Stat and Get until the background
// walk removes them, which it does while the store serves.
func TestStaleTempsRemovedWhileServing(t *testing.T) {
	root, left := staleTree(t)
	b, let := openBlocked(t, root)
	ctx := context.Background()
	putS(t, b, "x/z", "during")
	for _, opts := range []store.ListOptions{{}, {Prefix: "x/"}, {Delimiter: "/"}, {Prefix: "x/", Delimiter: "/"}} {
		for _, k := range listKeys(t, b, opts) {
			if strings.Contains(k, ".tristore") {
				t.Fatalf("List %+v shows %q", opts, k)
			}
		}
	}
	if got := strings.Join(listKeys(t, b, store.ListOptions{}), ","); got != "x/y,x/z" {
		t.Fatalf("List = %q, want x/y,x/z", got)
	}
	for _, p := range left {
		rel, _ := filepath.Rel(filepath.Join(root, "bkt"), p)
		key := filepath.ToSlash(rel)
		if _, err := b.Stat(ctx, "bkt", key); err == nil {
			t.Fatalf("Stat %q finds a leftover temp file", key)
		}
		if rc, _, err := b.Get(ctx, "bkt", key, 0, -1); err == nil {
			rc.Close()
			t.Fatalf("Get %q reads a leftover temp file", key)
		}
	}
	let()
	waitCleanup(t, b)
	for _, p := range left {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover %s still there after the walk (%v)", p, err)
		}
	}
	if n, err := b.CleanupResult(); n != len(left) || err != nil {
		t.Errorf("CleanupResult = %d, %v; want %d, nil", n, err, len(left))
	}
	if got, _ := readAll(t, b, "x/y"); got != "keep" {
		t.Fatalf("object lost: %q", got)
	}
}

// TestLiveTempSurvivesWalk: a PUT of the running incarnation whose temp
// file is made while the walk is under way keeps it: the PUT completes
// with its content after the walk has passed its directory.
func TestLiveTempSurvivesWalk(t *testing.T) {
	root, left := staleTree(t)
	b, let := openBlocked(t, root)
	target := filepath.Join(root, "bkt", "live")
	atRename, finish := make(chan struct{}), make(chan struct{})
	posix.SetHookBeforeRename(func(p string) {
		if p == target {
			close(atRename)
			<-finish
		}
	})
	t.Cleanup(func() { posix.SetHookBeforeRename(nil) })
	put := make(chan error, 1)
	go func() {
		_, err := b.Put(context.Background(), "bkt", "live", strings.NewReader("in flight"), 9, store.ObjectMeta{})
		put <- err
	}()
	select {
	case <-atRename:
	case err := <-put:
		t.Fatalf("Put ended before its rename: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Put did not reach its rename")
	}
	var live []string
	for _, n := range tempsIn(t, filepath.Join(root, "bkt")) {
		if inc, ok := posix.TempIncarnation(n); ok && inc == b.Incarnation() {
			live = append(live, n)
		}
	}
	if len(live) != 1 {
		t.Fatalf("temp files of this incarnation in bkt: %q, want the PUT's one", live)
	}
	let()
	waitCleanup(t, b)
	if _, err := os.Stat(filepath.Join(root, "bkt", live[0])); err != nil {
		t.Fatalf("the walk removed the live PUT's temp file: %v", err)
	}
	for _, p := range left {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover %s still there after the walk (%v)", p, err)
		}
	}
	close(finish)
	if err := <-put; err != nil {
		t.Fatalf("Put after the walk: %v", err)
	}
	if got, _ := readAll(t, b, "live"); got != "in flight" {
		t.Fatalf("Get live = %q", got)
	}
	if got := tempsIn(t, filepath.Join(root, "bkt")); len(got) != 0 {
		t.Fatalf("temp files left in bkt: %q", got)
	}
}

// TestIncarnationGrows: each opener that has the tree to itself takes a
// larger incarnation and stores it; one that shares the tree takes the
// stored one, so the sharer's temp files never look stale to the walk.
func TestIncarnationGrows(t *testing.T) {
	root := t.TempDir()
	var last uint64
	for i := range 3 {
		b, err := posix.Open(root, posix.Options{})
		if err != nil {
			t.Fatal(err)
		}
		inc := b.Incarnation()
		if inc <= last {
			t.Fatalf("open %d: incarnation %x, not above %x", i, inc, last)
		}
		data, err := os.ReadFile(filepath.Join(root, ".tristore", "incarnation"))
		if err != nil || strings.TrimSpace(string(data)) != fmt.Sprintf("%016x", inc) {
			t.Fatalf("stored incarnation %q, %v; want %016x", data, err, inc)
		}
		shared, err := posix.Open(root, posix.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if shared.Incarnation() != inc {
			t.Fatalf("sharing opener: incarnation %x, want %x", shared.Incarnation(), inc)
		}
		waitCleanup(t, shared)
		waitCleanup(t, b)
		shared.Close()
		b.Close()
		last = inc
	}
	// A stored number ahead of the clock is still exceeded.
	future := uint64(time.Now().Add(24 * time.Hour).UnixNano())
	os.WriteFile(filepath.Join(root, ".tristore", "incarnation"), []byte(fmt.Sprintf("%016x\n", future)), 0o644)
	b, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	waitCleanup(t, b)
	if b.Incarnation() != future+1 {
		t.Fatalf("incarnation %x after a stored %x", b.Incarnation(), future)
	}
}

// TestTempNamesOnlyFromTempName: every temp file name of the store comes
// from Backend.tempName (tempfiles.go), so it carries the incarnation; a
// name made elsewhere from tmpPrefix would look stale to the background
// walk and could be removed under a live write.
func TestTempNamesOnlyFromTempName(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sources: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "tempfiles.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			code, _, _ := strings.Cut(line, "//")
			def := strings.Contains(code, `".tristore-tmp-"`) // the constant itself
			if strings.Contains(code, "tmpPrefix") && !strings.Contains(code, "HasPrefix") && !def {
				t.Errorf("%s:%d makes a temp name without tempName: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

package inuse

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
)

// holdEnv makes the test binary a helper process that serves a file.
const holdEnv = "TRISTORE_INUSE_TEST_SERVE"

func TestMain(m *testing.M) {
	if p := os.Getenv(holdEnv); p != "" {
		f, err := Serve(p)
		if err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("ready\n")
		var b [1]byte
		os.Stdin.Read(b[:]) // until the test closes our stdin
		f.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func newFile(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("volume"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServedRefusesChangeInProcess(t *testing.T) {
	dir := t.TempDir()
	p := newFile(t, dir, "v")
	if Served(p) {
		t.Fatal("served before Serve")
	}
	f, err := Serve(p)
	if err != nil {
		t.Fatal(err)
	}
	if !Served(p) {
		t.Fatal("Served false while served")
	}
	start := time.Now()
	c, err := ChangeAt(unix.AT_FDCWD, p)
	if !errors.Is(err, store.ErrInUse) {
		t.Fatalf("ChangeAt on a served file: %v, %v", c, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusal took %v; a served file must be refused at once", d)
	}
	// One volume, one server: a second one is refused at once.
	if f2, err := Serve(p); !errors.Is(err, ErrServed) || !errors.Is(err, store.ErrInUse) {
		t.Fatalf("second Serve: %v, %v", f2, err)
	}
	f.Close()
	if Served(p) {
		t.Fatal("served after close")
	}
	c, err = ChangeAt(unix.AT_FDCWD, p)
	if err != nil || c == nil {
		t.Fatalf("ChangeAt after close: %v %v", c, err)
	}
	// A server waits for a change, then gets the file.
	done := make(chan error, 1)
	go func() {
		f, err := Serve(p)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Serve did not wait for the change: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	c.Release()
	if err := <-done; err != nil {
		t.Fatalf("Serve after the change: %v", err)
	}
}

func TestChangeAtNothing(t *testing.T) {
	dir := t.TempDir()
	if c, err := ChangeAt(unix.AT_FDCWD, filepath.Join(dir, "none")); c != nil || err != nil {
		t.Fatalf("missing: %v %v", c, err)
	}
	if c, err := ChangeAt(unix.AT_FDCWD, dir); c != nil || err != nil {
		t.Fatalf("directory: %v %v", c, err)
	}
	os.Symlink("none", filepath.Join(dir, "l"))
	if c, err := ChangeAt(unix.AT_FDCWD, filepath.Join(dir, "l")); c != nil || err != nil {
		t.Fatalf("symlink: %v %v", c, err)
	}
}

// Changers of one file never refuse each other: two S3 PUTs of one key
// must both succeed (the last one wins).
func TestChangersShare(t *testing.T) {
	dir := t.TempDir()
	p := newFile(t, dir, "k")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				c, err := ChangeAt(unix.AT_FDCWD, p)
				if err != nil {
					errs <- err
					return
				}
				// Replace the file as a Put would, holding the lock.
				tmp := filepath.Join(dir, "tmp"+string(rune('a'+i))+string(rune('a'+j)))
				os.WriteFile(tmp, []byte("x"), 0o644)
				err = os.Rename(tmp, p)
				c.Release()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("changer: %v", err)
	}
}

// A server in another process is seen too (the lock is not per process).
func TestServedByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	p := newFile(t, dir, "v")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+p)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	if _, err := ChangeAt(unix.AT_FDCWD, p); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("ChangeAt while another process serves: %v", err)
	}
	if !Served(p) {
		t.Fatal("Served false")
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	c, err := ChangeAt(unix.AT_FDCWD, p)
	if err != nil || c == nil {
		t.Fatalf("after the server exited: %v %v", c, err)
	}
	c.Release()
}

// ChangeFd locks the inode behind an O_PATH descriptor (vfs SETATTR).
func TestChangeFd(t *testing.T) {
	dir := t.TempDir()
	p := newFile(t, dir, "v")
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	f, err := Serve(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ChangeFd(fd); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("ChangeFd while served: %v", err)
	}
	f.Close()
	c, err := ChangeFd(fd)
	if err != nil || c == nil {
		t.Fatalf("ChangeFd: %v %v", c, err)
	}
	c.Release()
}

// Serve locks the inode at the path, not one replaced meanwhile.
func TestServeSeesReplacement(t *testing.T) {
	dir := t.TempDir()
	p := newFile(t, dir, "v")
	c, err := ChangeAt(unix.AT_FDCWD, p)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *os.File, 1)
	go func() {
		f, err := Serve(p)
		if err != nil {
			t.Error(err)
		}
		done <- f
	}()
	time.Sleep(20 * time.Millisecond) // Serve has opened the old inode and waits
	newFile(t, dir, "new")
	if err := os.Rename(filepath.Join(dir, "new"), p); err != nil {
		t.Fatal(err)
	}
	c.Release()
	f := <-done
	if f == nil {
		return
	}
	defer f.Close()
	var a, b unix.Stat_t
	unix.Fstat(int(f.Fd()), &a)
	unix.Stat(p, &b)
	if a.Ino != b.Ino {
		t.Fatalf("Serve locked inode %d, path is %d", a.Ino, b.Ino)
	}
}

// The cost every overwriting PUT, REMOVE and RENAME now pays.
func BenchmarkChangeAt(b *testing.B) {
	dir := b.TempDir()
	p := filepath.Join(dir, "k")
	os.WriteFile(p, []byte("x"), 0o644)
	for b.Loop() {
		c, err := ChangeAt(unix.AT_FDCWD, p)
		if err != nil || c == nil {
			b.Fatal(err)
		}
		c.Release()
	}
}

func BenchmarkServed(b *testing.B) {
	dir := b.TempDir()
	p := filepath.Join(dir, "k")
	os.WriteFile(p, []byte("x"), 0o644)
	for b.Loop() {
		if Served(p) {
			b.Fatal("served")
		}
	}
}

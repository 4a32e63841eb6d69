package crash_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// The store-level crash test complements the S3 one: it runs in a helper
// process (this test binary re-executed) that does Puts and multipart
// Completes straight on store/posix, in both metadata modes (xattrs and
// sidecar files), and is killed with SIGKILL. Besides content it checks
// that metadata (content type, user metadata, part list) always belongs to
// the surviving content — the sidecar mode writes metadata and data in two
// steps, which is exactly what a crash can split.

const (
	helperDirEnv   = "TRISTORE_CRASH_HELPER_DIR"
	helperNoXattr  = "TRISTORE_CRASH_HELPER_NOXATTR"
	storeKeys      = 16
	storeWorkers   = 8
	mpKey          = "mp/object.bin"
	mpPart1        = 5 << 20
	helperMaxPuts  = 400
	helperDuration = 30 * time.Second
)

func storeKey(i int) string {
	if i == storeKeys {
		return mpKey
	}
	return fmt.Sprintf("s/%02d/v.bin", i)
}

func verMeta(v int) store.ObjectMeta {
	return store.ObjectMeta{ContentType: fmt.Sprintf("application/x-v%d", v), UserMeta: map[string]string{"v": strconv.Itoa(v)}}
}

// mpContent is version v of the multipart key: part 1 is MinPartSize bytes.
func mpContent(v int) []byte { return contentSized(mpKey, v, mpPart1+1000+v) }

// TestStoreCrashHelper is the helper process; it does nothing in a normal run.
func TestStoreCrashHelper(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestStoreKillDuringPuts")
	}
	st, err := posix.Open(dir, posix.Options{NoXattr: os.Getenv(helperNoXattr) == "1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		outMu.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", a...)
		outMu.Unlock()
	}
	// Continue each key's version numbers from what it holds now.
	cur := make([]int, storeKeys+1)
	for ki := range cur {
		rc, _, err := st.Get(ctx, "crash", storeKey(ki), 0, 200)
		if err != nil {
			continue
		}
		head, _ := io.ReadAll(rc)
		rc.Close()
		if m := hdrRE.FindSubmatch(head); m != nil {
			cur[ki], _ = strconv.Atoi(string(m[2]))
		}
	}
	deadline := time.Now().Add(helperDuration)
	var puts sync.WaitGroup
	var count sync.Mutex
	n := 0
	next := func() bool {
		count.Lock()
		defer count.Unlock()
		n++
		return n <= helperMaxPuts && time.Now().Before(deadline)
	}
	for w := range storeWorkers {
		puts.Add(1)
		go func() {
			defer puts.Done()
			for i := 0; next(); i++ {
				ki := w + (i%(storeKeys/storeWorkers))*storeWorkers
				cur[ki]++ // each key has one writer
				v := cur[ki]
				say("START %d %d", ki, v)
				data := content(storeKey(ki), v)
				if _, err := st.Put(ctx, "crash", storeKey(ki), bytes.NewReader(data), int64(len(data)), verMeta(v)); err != nil {
					say("ERR %v", err)
					return
				}
				say("ACK %d %d", ki, v)
			}
		}()
	}
	puts.Add(1)
	go func() {
		defer puts.Done()
		for v := cur[storeKeys] + 1; next(); v++ {
			data := mpContent(v)
			id, err := st.CreateMultipart(ctx, "crash", mpKey, verMeta(v))
			if err != nil {
				say("ERR %v", err)
				return
			}
			p1, err := st.PutPart(ctx, "crash", mpKey, id, 1, bytes.NewReader(data[:mpPart1]), mpPart1)
			if err != nil {
				say("ERR %v", err)
				return
			}
			p2, err := st.PutPart(ctx, "crash", mpKey, id, 2, bytes.NewReader(data[mpPart1:]), int64(len(data)-mpPart1))
			if err != nil {
				say("ERR %v", err)
				return
			}
			say("START %d %d", storeKeys, v)
			if _, err := st.CompleteMultipart(ctx, "crash", mpKey, id, []store.CompletePart{{Number: 1, ETag: p1.ETag}, {Number: 2, ETag: p2.ETag}}); err != nil {
				say("ERR %v", err)
				return
			}
			say("ACK %d %d", storeKeys, v)
		}
	}()
	puts.Wait()
	say("DONE")
}

func TestStoreKillDuringPuts(t *testing.T) {
	if os.Getenv(helperDirEnv) != "" {
		t.Skip("inside the helper")
	}
	for _, mode := range []string{"xattr", "sidecar"} {
		t.Run(mode, func(t *testing.T) { storeCrash(t, mode == "sidecar") })
	}
}

func storeCrash(t *testing.T, noXattr bool) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := posix.Open(dir, posix.Options{NoXattr: noXattr})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBucket(ctx, "crash", ""); err != nil {
		t.Fatal(err)
	}
	for i := range storeKeys {
		d := content(storeKey(i), 0)
		if _, err := st.Put(ctx, "crash", storeKey(i), bytes.NewReader(d), int64(len(d)), verMeta(0)); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	states := make([]keyState, storeKeys+1)
	states[storeKeys] = keyState{acked: -1, attempted: -1} // no multipart object yet

	rounds := 2
	if os.Getenv("TRISTORE_LONG") == "1" {
		rounds = 20
	}
	for round := range rounds {
		acks, killedAt := runHelper(t, dir, noXattr, states)
		t.Logf("round %d: %d acknowledged writes, killed %s", round+1, acks, killedAt)
		st, err := posix.Open(dir, posix.Options{NoXattr: noXattr})
		if err != nil {
			t.Fatal(err)
		}
		select { // leftovers are removed in the background
		case <-st.CleanupDone():
		case <-time.After(60 * time.Second):
			t.Fatal("background temp-file cleanup not done 60 s after reopening")
		}
		if left := tempFiles(t, dir); len(left) > 0 {
			t.Fatalf("temp files left after reopening: %v", left)
		}
		verifyStore(t, st, states)
		st.Close()
	}
}

// runHelper starts the helper, lets it acknowledge some writes, SIGKILLs it
// with writes in flight and returns once its output is fully read.
func runHelper(t *testing.T, dir string, noXattr bool, states []keyState) (int, string) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestStoreCrashHelper$", "-test.count=1")
	nx := "0"
	if noXattr {
		nx = "1"
	}
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperNoXattr+"="+nx)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := make(chan struct{})
	var once sync.Once
	kill := func() { once.Do(func() { cmd.Process.Signal(syscall.SIGKILL); close(killed) }) }
	t.Cleanup(kill)
	timer := time.AfterFunc(60*time.Second, kill) // bound: never wait forever
	defer timer.Stop()

	acks, mpAcks := 0, 0
	killAt := 40 + len(states)
	when := "by the time bound"
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "START", "ACK":
			if len(f) != 3 {
				continue
			}
			ki, _ := strconv.Atoi(f[1])
			v, _ := strconv.Atoi(f[2])
			if ki < 0 || ki >= len(states) {
				continue
			}
			if f[0] == "START" {
				states[ki].attempted = v
			} else {
				states[ki].acked = v
				acks++
				if ki == storeKeys {
					mpAcks++
				}
			}
		case "ERR":
			kill()
			t.Fatalf("helper write failed: %s\n%s", sc.Text(), stderr.String())
		case "DONE":
			when = "after it finished (machine too slow to catch it mid-flight)"
		}
		if acks >= killAt && mpAcks >= 1 {
			when = fmt.Sprintf("after %d acknowledgements", acks)
			kill()
		}
	}
	io.Copy(io.Discard, out)
	cmd.Wait()
	return acks, when
}

// verifyStore checks content, ETag and metadata of every key after a crash.
func verifyStore(t *testing.T, st *posix.Backend, states []keyState) {
	ctx := context.Background()
	for ki := range states {
		k := storeKey(ki)
		if ki == storeKeys && states[ki].attempted < 0 {
			continue // no multipart Complete started
		}
		rc, oi, err := st.Get(ctx, "crash", k, 0, -1)
		if err != nil {
			if ki == storeKeys && states[ki].acked < 0 {
				continue // the first Complete was cut off
			}
			t.Fatalf("Get %s: %v", k, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		v, err := parseVersion(k, data)
		if err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
		s := states[ki]
		if v < s.acked || v > max(s.attempted, s.acked) {
			t.Fatalf("key %s holds version %d; acknowledged %d, attempted %d", k, v, s.acked, s.attempted)
		}
		if want := verMeta(v); oi.Meta.ContentType != want.ContentType || oi.Meta.UserMeta["v"] != want.UserMeta["v"] {
			t.Fatalf("key %s holds version %d but metadata %q/%v (metadata of another version or lost)", k, v, oi.Meta.ContentType, oi.Meta.UserMeta)
		}
		if ki == storeKeys {
			h := md5.New()
			for _, part := range [][]byte{data[:mpPart1], data[mpPart1:]} {
				s := md5.Sum(part)
				h.Write(s[:])
			}
			if want := hex.EncodeToString(h.Sum(nil)) + "-2"; oi.ETag != want || len(oi.Parts) != 2 {
				t.Fatalf("multipart key: ETag %s parts %d, want %s and 2", oi.ETag, len(oi.Parts), want)
			}
		} else if sum := md5.Sum(data); oi.ETag != hex.EncodeToString(sum[:]) {
			t.Fatalf("key %s: ETag %s does not match content", k, oi.ETag)
		}
		states[ki] = keyState{acked: v, attempted: v}
	}
}

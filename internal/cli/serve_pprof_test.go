package cli

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServePprof: --pprof serves Go profiles on the admin address (for the
// benchmarks' profiles); without it the path is not there.
func TestServePprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		args := []string{"--data", t.TempDir(), "--s3-addr", "off", "--nfs-addr", "off", "--iscsi-addr", "off",
			"--admin-addr", "127.0.0.1:0", "--access-key", "PPROFTESTACCESSKEY01", "--secret-key", "pprof-test-secret"}
		if on {
			args = append(args, "--pprof", "--pprof-mutex-fraction", "5")
		}
		addrs := startServe(t, "admin", 30*time.Second, args...)
		res, err := http.Get("http://" + addrs["admin"] + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got := res.StatusCode == http.StatusOK && strings.Contains(string(b), "goroutine profile:")
		if got != on {
			t.Fatalf("--pprof=%v: GET /debug/pprof/goroutine answered %d %.80q", on, res.StatusCode, b)
		}
	}
}

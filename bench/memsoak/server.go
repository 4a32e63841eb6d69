package memsoak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tristore/tristore/internal/serveproc"
)

// server is one `tristore serve` this package started, with every front
// end on 127.0.0.1:0 and the admin endpoint serving /metrics and pprof.
type server struct {
	proc  *serveproc.Proc
	addrs map[string]string
	admin *http.Client
}

// Credentials of the server's admin user (the soak's own throw-away setup).
const (
	accessKey = "memsoakaccesskey"
	secretKey = "memsoaksecretkey0123456789abcdef"
)

// startServer runs bin serve on data with S3, NFS, iSCSI and the admin
// endpoint on loopback ports of the kernel's choice, and waits for its
// ready file. Its log goes to logPath (the ready file and config beside it).
func startServer(ctx context.Context, bin, data, logPath string, extra []string) (*server, error) {
	p, err := serveproc.Start(ctx, serveproc.Options{Bin: bin, Data: data, On: []string{"s3", "nfs", "iscsi", "admin"},
		Dir: filepath.Dir(logPath), LogPath: logPath,
		Args: append([]string{"--pprof", "--access-key", accessKey, "--secret-key", secretKey}, extra...)})
	if err != nil {
		return nil, err
	}
	return &server{proc: p, addrs: p.Addrs,
		// One connection per scrape, closed after it, so the scrapes
		// hold no descriptor or goroutine in the server between samples.
		admin: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}, nil
}

// stop sends SIGTERM and waits up to 30 s, then SIGKILL. It reports
// whether serve stopped by itself.
func (s *server) stop() bool { return s.proc.Stop() }

func (s *server) pid() int { return s.proc.PID() }

// procStats reads the server's resident set (VmRSS, VmHWM, KiB) and its
// number of open descriptors from /proc.
func procStats(pid int) (rssKiB, hwmKiB int64, fds int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
		case "VmHWM:":
			hwmKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	return rssKiB, hwmKiB, len(ents), nil
}

// metrics scrapes the admin endpoint's Prometheus text and returns the
// gauges named in want (go_goroutines, go_memstats_heap_inuse_bytes, ...).
func (s *server) metrics(ctx context.Context, want ...string) (map[string]float64, error) {
	body, err := s.adminGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, w := range want {
			if rest, ok := strings.CutPrefix(line, w+" "); ok {
				v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
				if err == nil {
					out[w] = v
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, w := range want {
		if _, ok := out[w]; !ok {
			return nil, fmt.Errorf("GET /metrics: no %s", w)
		}
	}
	return out, nil
}

// goroutineDump fetches the server's goroutine profile in text
// (/debug/pprof/goroutine?debug=1: stacks grouped with counts).
func (s *server) goroutineDump(ctx context.Context) ([]byte, error) {
	body, err := s.adminGet(ctx, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(body)
}

// adminGet GETs path from the server's admin endpoint and returns the body
// of a 200 answer (any other status is an error naming the path).
func (s *server) adminGet(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+s.addrs["admin"]+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.admin.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return resp.Body, nil
}

// forceGC makes the server collect garbage twice (a heap profile with
// gc=1 runs runtime.GC first; the second empties what sync.Pools kept in
// their victim caches through the first), so the heap in use sampled next
// is live data only. The last profile goes to w if not nil.
func (s *server) forceGC(ctx context.Context, w io.Writer) error {
	for i := range 2 {
		body, err := s.adminGet(ctx, "/debug/pprof/heap?gc=1")
		if err != nil {
			return err
		}
		dst := io.Discard
		if i == 1 && w != nil {
			dst = w
		}
		_, err = io.Copy(dst, body)
		body.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// fdList lists what the server's descriptors point to (readlink of each
// /proc/PID/fd entry), sorted, for the report of a leak.
func fdList(pid int) []string {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		// socket:[12345] -> socket: the inode differs between runs.
		if i := strings.IndexByte(l, '['); i > 0 {
			l = l[:i]
		}
		out = append(out, l)
	}
	return out
}

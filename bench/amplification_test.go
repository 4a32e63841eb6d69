package bench_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/bench/drivertest"
	"github.com/tristore/tristore/bench/report"
	"github.com/tristore/tristore/internal/testutil"
)

// TestSuiteAmplification: every protocol at a tiny scale, each access form
// the target has; network targets count wire bytes (a counting link without
// --network) and every write and read step moved at least its payload
// across it; the saved results redraw as the report's amplification bars.
func TestSuiteAmplification(t *testing.T) {
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "results")
			run, ops := execute(t, bench.Config{Suite: "amplification", Target: target, Scale: 0.01, Out: out,
				Sizes: []int64{4 << 10, 64 << 10}, Threads: []int{1, 2}, Count: 4})
			forms := map[string]string{"posix": "default,sync,direct", "s3": "default", "nfs": "default,sync", "iscsi": "default,sync"}[proto]
			if strings.Join(run.Forms, ",") != forms {
				t.Fatalf("forms %v, want %s", run.Forms, forms)
			}
			n := count(t, ops)
			k := len(run.Forms) * 2 * 2 * 4 // forms x sizes x threads x files
			if want := fmt.Sprint(map[string]int{"delete": k, "read": k, "write": k}); fmt.Sprint(n) != want {
				t.Fatalf("records %v, want %v", n, want)
			}
			for _, o := range ops {
				if o.Form == "" {
					t.Fatalf("record without a form: %+v", o)
				}
			}
			page := redraw(t, out)
			if proto == "posix" {
				if run.Params.Extra["wire"] == "" || !strings.Contains(page, "amplification is not measured") {
					t.Fatalf("posix run does not say the wire was not measured: %+v", run.Params)
				}
				checkClean(t, proto, target, run)
				return
			}
			for _, ph := range run.Phases {
				if ph.Name == "delete" {
					continue
				}
				if ph.Payload != 4*ph.Unit {
					t.Fatalf("%+v: payload", ph)
				}
				if (ph.Name == "write" && ph.WireUp < ph.Payload) || (ph.Name == "read" && ph.WireDn < ph.Payload) {
					t.Fatalf("%s %s %s x%d: wire up %d down %d for payload %d", ph.Name, ph.Form, bench.FormatSize(ph.Unit), ph.Threads, ph.WireUp, ph.WireDn, ph.Payload)
				}
			}
			// Figure 7's shape: write and read bars at 1 and 2 threads,
			// a bar series per form.
			if got := strings.Count(page, "<svg "); got < 4 {
				t.Fatalf("report has %d plots, want the 4 amplification bar charts", got)
			}
			for _, f := range run.Forms {
				if !strings.Contains(page, " "+f+"</text>") {
					t.Fatalf("report has no series for form %s", f)
				}
			}
			checkClean(t, proto, target, run)
		})
	}
}

// redraw draws the saved results with the report package (from the files
// alone) and returns the page.
func redraw(t *testing.T, dir string) string {
	t.Helper()
	runs, err := report.Load([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := report.Write(out, runs, report.Options{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, report.HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// countingRelay is an independent witness of the bytes a link carries: a
// TCP relay on 127.0.0.1 in front of a server that logs every chunk it
// forwards with the time it read it. The link under test sits in front of
// it, so the TCP stream bytes both see are the same.
type countingRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	log    []chunk
	wg     sync.WaitGroup
}

type chunk struct {
	at time.Time
	up bool
	n  int
}

func startRelay(t *testing.T, target string) *countingRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &countingRelay{ln: ln, target: target}
	var conns sync.Map
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			conns.Store(a, b)
			c.wg.Add(2)
			go c.copy(b, a, true)
			go c.copy(a, b, false)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(a, b any) bool { a.(net.Conn).Close(); b.(net.Conn).Close(); return true })
		c.wg.Wait()
	})
	return c
}

func (c *countingRelay) copy(dst, src net.Conn, up bool) {
	defer c.wg.Done()
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c.mu.Lock()
			c.log = append(c.log, chunk{time.Now(), up, n})
			c.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			if cw, ok := dst.(*net.TCPConn); ok {
				cw.CloseWrite()
			}
			return
		}
	}
}

// between sums the bytes forwarded each way in [from, to].
func (c *countingRelay) between(from, to time.Time) (up, down int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.log {
		if ch.at.Before(from) || ch.at.After(to) {
			continue
		}
		if ch.up {
			up += int64(ch.n)
		} else {
			down += int64(ch.n)
		}
	}
	return up, down
}

// via points target at the relay.
func via(t *testing.T, target string) (string, *countingRelay) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, u.Host)
	u.Host = r.ln.Addr().String()
	return u.String(), r
}

// TestAmplificationWireAgreesWithLink: the wire bytes the amplification
// suite records per step (run.json phases, what the report divides by the
// payload) agree with an independent count of the same link's traffic: a
// relay behind the link logs every chunk with its time, and the chunks
// inside each step's window must add up to the step's wire bytes, each
// direction. Through a proxy link both count TCP stream bytes, so they
// must be equal; through a netns link (root) the link counts IP packets,
// so it must be the stream plus TCP/IP headers: at least the stream and
// at most a header-sized overhead more.
func TestAmplificationWireAgreesWithLink(t *testing.T) {
	s := server(t)
	for _, c := range []struct{ link, proto, target string }{
		{"proxy", "s3", s.S3},
		{"proxy", "nfs", s.NFS},
		{"proxy", "iscsi", s.ISCSI},
		{"netns", "s3", s.S3},
		{"netns", "nfs", s.NFS},
	} {
		t.Run(c.link+"-"+c.proto, func(t *testing.T) {
			if c.link == "netns" {
				testutil.NeedRoot(t, "a netns link")
				testutil.NeedTUN(t)
			}
			target, relay := via(t, c.target)
			cfg := bench.Config{Suite: "amplification", Target: target, Link: c.link, Out: filepath.Join(t.TempDir(), "results"),
				Sizes: []int64{4 << 10, 256 << 10}, Threads: []int{1, 3}, Count: 6,
				Options: bench.Options{AccessKey: drivertest.AccessKey, SecretKey: drivertest.SecretKey, Timeout: 10 * time.Second}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run, err := bench.Execute(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if run.Params.Extra["link"] != c.link {
				t.Fatalf("link %q, want %s", run.Params.Extra["link"], c.link)
			}
			saved, err := bench.ReadRunMeta(cfg.Out)
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			for i, ph := range saved.Phases {
				// Windows from the in-memory run (monotonic start).
				ph0 := run.Phases[i]
				up, dn := relay.between(run.Start.Add(ph0.Start), run.Start.Add(ph0.End))
				total += up + dn
				what := fmt.Sprintf("%s %s %s x%d", ph.Name, ph.Form, bench.FormatSize(ph.Unit), ph.Threads)
				switch c.link {
				case "proxy":
					if ph.WireUp != up || ph.WireDn != dn {
						t.Errorf("%s: run.json wire up %d down %d, the relay saw %d / %d", what, ph.WireUp, ph.WireDn, up, dn)
					}
				case "netns":
					// Headers: ~52 bytes a packet (TCP/IP with timestamps),
					// some packets per request and per MSS of stream.
					// (ACKs of one direction's data travel the other way.)
					slack := (up+dn)/8 + 2048*ph.Ops + 4096
					if ph.WireUp < up || ph.WireUp > up+slack || ph.WireDn < dn || ph.WireDn > dn+slack {
						t.Errorf("%s: run.json wire up %d down %d (IP bytes), the relay saw %d / %d stream bytes", what, ph.WireUp, ph.WireDn, up, dn)
					}
				}
				if ph.Name != "delete" && ph.Payload == 0 {
					t.Errorf("%s: no payload", what)
				}
			}
			if total == 0 {
				t.Fatal("the relay saw nothing inside the steps")
			}
		})
	}
}

// TestSuiteAmplificationFUSE: POSIX access forms over an NFS export the
// workbench mounts through FUSE (fuse+nfs://): default, O_SYNC and O_DIRECT
// each write and read through the counting link — a read served from the
// page cache instead would move less than its payload over the wire — and
// the mount and its directory are gone afterwards.
func TestSuiteAmplificationFUSE(t *testing.T) {
	testutil.NeedRoot(t, "a FUSE mount")
	testutil.NeedFUSE(t)
	s := server(t)
	target := "fuse+nfs" + strings.TrimPrefix(s.NFS, "nfs")
	out := filepath.Join(t.TempDir(), "results")
	run, ops := execute(t, bench.Config{Suite: "amplification", Target: target, Out: out, Link: "proxy",
		Sizes: []int64{4 << 10, 256 << 10}, Threads: []int{1, 2}, Count: 4})
	if run.Protocol != "fuse+nfs" || strings.Join(run.Forms, ",") != "default,sync,direct" || len(ops) != 3*2*2*4*3 {
		t.Fatalf("run: %s %v, %d records", run.Protocol, run.Forms, len(ops))
	}
	amp := map[string]float64{}
	for _, ph := range run.Phases {
		what := fmt.Sprintf("%s %s %s x%d", ph.Name, ph.Form, bench.FormatSize(ph.Unit), ph.Threads)
		switch ph.Name {
		case "write":
			if ph.WireUp < ph.Payload {
				t.Fatalf("%s: %d bytes up for %d of payload", what, ph.WireUp, ph.Payload)
			}
		case "read":
			if ph.WireDn < ph.Payload {
				t.Fatalf("%s: %d bytes down for %d of payload: read from a cache?", what, ph.WireDn, ph.Payload)
			}
		}
		if ph.Payload > 0 {
			amp[what] = float64(ph.WireUp+ph.WireDn) / float64(ph.Payload)
		}
	}
	t.Logf("amplification: %v", amp)
	if m, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(m), "tristore-bench-fuse-") {
		t.Fatalf("a bench FUSE mount is left:\n%s", m)
	}
	checkClean(t, "nfs", s.NFS, run)
	if page := redraw(t, out); !strings.Contains(page, "fuse+nfs") || !strings.Contains(page, " direct</text>") {
		t.Fatal("report lacks the fuse+nfs direct series")
	}
}

// TestSuiteAmplificationExt4: seed 000's iSCSI — ext4 on the LUN, through
// FUSE and a loop device, all of its I/O on this process's session across
// the counting link. Every step moved at least its payload; O_SYNC writes
// of small files carry ext4's journal and metadata, so their amplification
// is well above the raw LUN's (seed 000 Equation 2: (journal + metadata +
// s) ÷ s); and the stack is gone afterwards.
func TestSuiteAmplificationExt4(t *testing.T) {
	testutil.NeedRoot(t, "losetup and mount")
	testutil.NeedFUSE(t)
	for _, c := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		testutil.NeedCmd(t, c)
	}
	s := server(t)
	target := "ext4+" + s.ISCSI
	out := filepath.Join(t.TempDir(), "results")
	run, ops := execute(t, bench.Config{Suite: "amplification", Target: target, Out: out, Link: "proxy",
		Sizes: []int64{4 << 10, 256 << 10}, Threads: []int{1}, Count: 8})
	if run.Protocol != "ext4+iscsi" || strings.Join(run.Forms, ",") != "default,sync,direct" || len(ops) != 3*2*8*3 {
		t.Fatalf("run: %s %v, %d records", run.Protocol, run.Forms, len(ops))
	}
	amp := map[string]float64{}
	for _, ph := range run.Phases {
		what := fmt.Sprintf("%s %s %s", ph.Name, ph.Form, bench.FormatSize(ph.Unit))
		if (ph.Name == "write" && ph.WireUp < ph.Payload) || (ph.Name == "read" && ph.WireDn < ph.Payload) {
			t.Fatalf("%s: wire up %d down %d for %d of payload", what, ph.WireUp, ph.WireDn, ph.Payload)
		}
		if ph.Payload > 0 {
			amp[what] = float64(ph.WireUp+ph.WireDn) / float64(ph.Payload)
		}
	}
	t.Logf("amplification: %v", amp)
	if a := amp["write sync 4KiB"]; a < 2 {
		t.Fatalf("O_SYNC writes of 4 KiB files on ext4: amplification %.2f, want the journal's and metadata's share (> 2)", a)
	}
	m, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(m), "tristore-bench-ext4-") {
		t.Fatalf("a bench mount is left:\n%s", m)
	}
}

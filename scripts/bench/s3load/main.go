// Command s3load is the S3 PUT/GET load generator behind scripts/bench/s3.sh.
// It drives any S3 endpoint with aws-sdk-go-v2 (unsigned payload, no
// additional checksums, so the client spends the same small CPU on every
// server) and reports, per (operation, object size, parallelism), the
// request rate, throughput and latency percentiles.
//
// Each configuration first PUTs fresh keys for -duration, then GETs the
// keys it wrote, round-robin, for -duration.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:9000", "S3 endpoint URL")
	ak := flag.String("access", os.Getenv("AWS_ACCESS_KEY_ID"), "access key")
	sk := flag.String("secret", os.Getenv("AWS_SECRET_ACCESS_KEY"), "secret key")
	bucket := flag.String("bucket", "bench", "bucket (created if missing)")
	sizes := flag.String("sizes", "4KiB,4MiB", "object sizes (KiB/MiB suffixes)")
	pars := flag.String("par", "1,16", "parallelism levels")
	dur := flag.Duration("duration", 10*time.Second, "duration of each PUT and each GET phase")
	label := flag.String("label", "server", "name of the server, first column of the output")
	csvPath := flag.String("csv", "", "append result rows to this CSV file")
	asJSON := flag.Bool("json", false, "print the results as one JSON array on stdout (the text lines go to stderr)")
	flag.BoolVar(&getBuffer, "getbuf", false, "read each GET body into a buffer of the object's size, as `tristore bench objects` does (default: discard it through io.Copy, 8 KiB reads)")
	flag.IntVar(&fillN, "fill", 0, "LIST mode: first PUT this many empty objects under list/ (32 in parallel)")
	flag.IntVar(&listN, "list", 0, "LIST mode: list this many keys under list/ with ListObjectsV2 in 1,000-key pages, checking every key (no PUT/GET phases)")
	flag.StringVar(&scaleFill, "scale-fill", "", "scaling mode: make -keys objects (-layout) directly on disk in this directory, the bucket's own on the server (scale.go)")
	flag.StringVar(&scaleOps, "scale-ops", "", "scaling mode: comma-separated put,get,head of random existing keys of a -keys bucket, -duration each, first -par")
	flag.StringVar(&scaleList, "scale-list", "", "scaling mode: comma-separated first,middle,delim 1,000-key pages of a -keys bucket, -repeat each")
	flag.IntVar(&scaleKeys, "keys", 0, "scaling mode: objects in the bucket")
	flag.StringVar(&scaleLayout, "layout", "flat", "scaling mode: flat (o0000123) or nested (a0/b1/c2/o0000123) keys")
	flag.IntVar(&scaleRepeat, "repeat", 5, "scaling mode: requests per LIST page kind")
	flag.StringVar(&scaleAlso, "scale-fill-also", "", "scaling mode: with -scale-fill, the endpoint of a second server whose bucket is the same directory (its probe's xattrs are copied too)")
	flag.BoolVar(&scaleCreate, "scale-create", false, "scaling mode: only create the bucket")
	flag.BoolVar(&scaleToken, "token-is-key", false, "scaling mode: send the middle page's start key as the continuation token too (versitygw's token is the last key; it ignores start-after alone)")
	flag.StringVar(&serveMem, "serve-mem", "", "serve the memory-only S3 ceiling on this address (memserve.go) instead of generating load")
	flag.BoolVar(&onePrefix, "one-prefix", false, "PUT every worker's keys into one prefix (one directory on a file-system server), not one prefix per worker")
	flag.BoolVar(&putOnly, "put-only", false, "only the PUT phase (no GET phase)")
	flag.IntVar(&serverPID, "server-pid", 0, "also report the CPU time (user+system, /proc/PID/stat) this server process spent per operation in each phase")
	flag.Parse()
	if serveMem != "" {
		if err := serveMemory(serveMem); err != nil {
			fmt.Fprintln(os.Stderr, "s3load:", err)
			os.Exit(1)
		}
		return
	}
	if *asJSON {
		text = os.Stderr
	}
	if err := run(*endpoint, *ak, *sk, *bucket, *sizes, *pars, *dur, *label, *csvPath); err != nil {
		fmt.Fprintln(os.Stderr, "s3load:", err)
		os.Exit(1)
	}
	if *asJSON {
		if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
			fmt.Fprintln(os.Stderr, "s3load:", err)
			os.Exit(1)
		}
	}
	// A failed request makes the figure meaningless (an error can be much
	// faster or slower than a success): the run fails instead of reporting it.
	for _, r := range results {
		if r.Errors > 0 {
			fmt.Fprintf(os.Stderr, "s3load: %s %s %s par %d: %d failed requests, first: %s\n", r.Label, r.Op, r.Size, r.Par, r.Errors, r.FirstError)
			os.Exit(1)
		}
	}
}

// text receives the human-readable lines (stderr with -json).
var text io.Writer = os.Stdout

// getBuffer (-getbuf) reads GET bodies into a per-worker buffer of the
// object's size instead of io.Discard. io.Copy to io.Discard reads 8 KiB
// at a time, so a 64 KiB body takes 8 reads and the worker parks between
// socket chunks; the workbench reads the object whole into memory. That
// difference in client work, not in timing, made bench's GETs 1.1-1.5x
// s3load's on this 2-core VM; the agreement test uses -getbuf so both do
// the same work.
var getBuffer bool

// onePrefix (-one-prefix): all workers PUT into one prefix, so on a
// file-system server concurrent PUTs rename into one directory (and can
// share its fsyncs); by default each worker has its own (wNN/).
// putOnly (-put-only): no GET phase.
var onePrefix, putOnly bool

// serverPID (-server-pid): the server's process, whose CPU time per
// operation each phase reports (server_cpu_ms_per_op): on a shared machine
// op/s moves with other load, CPU per operation much less. Kernel work done
// on the server's behalf outside it (write-back of its page cache by
// kworkers) is not counted.
var serverPID int

// procCPU is the user+system CPU time of process pid so far (0 if unknown).
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// jsonResult is one (operation, size, parallelism) measurement.
type jsonResult struct {
	Label      string  `json:"label"`
	Op         string  `json:"op"`
	Size       string  `json:"size"`
	Par        int     `json:"par"`
	Seconds    float64 `json:"seconds"`
	Ops        int     `json:"ops"`
	OpsPerSec  float64 `json:"ops_per_s"`
	MiBPerSec  float64 `json:"mib_per_s"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	// ServerCPUms: the -server-pid process's CPU ms per operation (0 without).
	ServerCPUms float64 `json:"server_cpu_ms_per_op"`
}

var results []jsonResult

func parseSize(s string) (int, error) {
	s = strings.TrimSpace(s)
	mult := 1
	switch {
	case strings.HasSuffix(s, "KiB"):
		mult, s = 1<<10, strings.TrimSuffix(s, "KiB")
	case strings.HasSuffix(s, "MiB"):
		mult, s = 1<<20, strings.TrimSuffix(s, "MiB")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func run(endpoint, ak, sk, bucket, sizes, pars string, dur time.Duration, label, csvPath string) error {
	if ak == "" || sk == "" {
		return errors.New("set -access and -secret (or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)")
	}
	credAK, credSK = ak, sk
	cl, err := newClient(endpoint)
	if err != nil {
		return err
	}
	c := cl
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		var ae smithy.APIError
		if !errors.As(err, &ae) || (ae.ErrorCode() != "BucketAlreadyOwnedByYou" && ae.ErrorCode() != "BucketAlreadyExists") {
			return fmt.Errorf("create bucket: %w", err)
		}
	}
	if fillN > 0 || listN > 0 {
		return listMode(ctx, c, bucket, label)
	}
	if scaleFill != "" || scaleOps != "" || scaleList != "" || scaleCreate {
		par, err := strconv.Atoi(strings.TrimSpace(strings.Split(pars, ",")[0]))
		if err != nil || par < 1 {
			return fmt.Errorf("bad parallelism %q", pars)
		}
		return scaleMode(ctx, c, bucket, label, dur, par)
	}
	var csv io.Writer
	if csvPath != "" {
		f, err := os.OpenFile(csvPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		csv = f
	}
	for _, ss := range strings.Split(sizes, ",") {
		size, err := parseSize(ss)
		if err != nil {
			return err
		}
		data := make([]byte, size)
		rand.Read(data)
		for _, ps := range strings.Split(pars, ",") {
			par, err := strconv.Atoi(strings.TrimSpace(ps))
			if err != nil || par < 1 {
				return fmt.Errorf("bad parallelism %q", ps)
			}
			prefix := fmt.Sprintf("%s-p%d/", strings.TrimSpace(ss), par)
			keyFormat := "%sw%02d/o%06d"
			if onePrefix {
				prefix = fmt.Sprintf("%s-p%d-one/", strings.TrimSpace(ss), par)
				keyFormat = "%sw%02d-o%06d"
			}
			var mu sync.Mutex
			var keys []string
			put := phase(par, dur, func(w, i int) error {
				k := fmt.Sprintf(keyFormat, prefix, w, i)
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &k, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(size))})
				if err == nil {
					mu.Lock()
					keys = append(keys, k)
					mu.Unlock()
				}
				return err
			})
			report(csv, label, "PUT", ss, par, size, put)
			if len(keys) == 0 {
				return fmt.Errorf("no successful PUTs at size %s par %d: %v", ss, par, put.firstErr)
			}
			if putOnly {
				continue
			}
			var next atomic.Int64
			bufs := make([][]byte, par)
			if getBuffer {
				for w := range bufs {
					bufs[w] = make([]byte, size+1) // one more: a longer body shows
				}
			}
			get := phase(par, dur, func(w, i int) error {
				k := keys[int(next.Add(1))%len(keys)]
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &k})
				if err != nil {
					return err
				}
				var n int64
				if getBuffer {
					var m int
					m, err = io.ReadFull(out.Body, bufs[w])
					n = int64(m)
					if err == io.ErrUnexpectedEOF {
						err = nil
					}
				} else {
					n, err = io.Copy(io.Discard, out.Body)
				}
				out.Body.Close()
				if err == nil && n != int64(size) {
					err = fmt.Errorf("GET %s: %d bytes, want %d", k, n, size)
				}
				return err
			})
			report(csv, label, "GET", ss, par, size, get)
		}
	}
	return nil
}

// credAK and credSK are the credentials of every client (run sets them).
var credAK, credSK string

// newClient is the S3 client of every mode.
func newClient(endpoint string) (*s3.Client, error) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(credAK, credSK, ""),
		HTTPClient: &http.Client{Transport: tr}, RetryMaxAttempts: 1}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware(st)
		})
	}), nil
}

// errDone from an op ends its worker's phase early (nothing left to do).
var errDone = errors.New("done")

type result struct {
	ops, errs int
	elapsed   time.Duration
	cpu       time.Duration // the -server-pid process's CPU time in the phase
	lat       []time.Duration
	firstErr  error
}

// phase runs op on par workers until dur has passed (each worker stops
// after its current request), collecting latencies.
func phase(par int, dur time.Duration, op func(worker, i int) error) result {
	var mu sync.Mutex
	var res result
	var wg sync.WaitGroup
	cpu0 := procCPU(serverPID)
	start := time.Now()
	deadline := start.Add(dur)
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			errs := 0
			var first error
			for i := 0; time.Now().Before(deadline) && i < 10_000_000; i++ {
				t0 := time.Now()
				if err := op(w, i); err == errDone {
					break
				} else if err != nil {
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.errs += errs
			if res.firstErr == nil {
				res.firstErr = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.cpu = procCPU(serverPID) - cpu0
	res.ops = len(res.lat)
	return res
}

func report(csv io.Writer, label, op, sizeName string, par, size int, r result) {
	sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
	pct := func(p float64) float64 {
		if len(r.lat) == 0 {
			return 0
		}
		return float64(r.lat[int(p*float64(len(r.lat)-1))].Microseconds()) / 1000
	}
	secs := r.elapsed.Seconds()
	opsPerSec := float64(r.ops) / secs
	mibs := opsPerSec * float64(size) / (1 << 20)
	fmt.Fprintf(text, "%-10s %-4s %-6s par=%-3d %9.1f op/s %9.2f MiB/s  p50 %7.2f ms  p99 %7.2f ms  errors %d\n",
		label, op, sizeName, par, opsPerSec, mibs, pct(0.5), pct(0.99), r.errs)
	jr := jsonResult{Label: label, Op: op, Size: sizeName, Par: par, Seconds: secs, Ops: r.ops, OpsPerSec: opsPerSec,
		MiBPerSec: mibs, P50ms: pct(0.5), P99ms: pct(0.99), MaxMs: pct(1), Errors: r.errs}
	if serverPID > 0 && r.ops > 0 {
		jr.ServerCPUms = float64(r.cpu.Microseconds()) / 1000 / float64(r.ops)
		fmt.Fprintf(text, "           server CPU %.3f ms/op\n", jr.ServerCPUms)
	}
	if r.firstErr != nil {
		fmt.Fprintf(text, "           first error: %v\n", r.firstErr)
		jr.FirstError = r.firstErr.Error()
	}
	results = append(results, jr)
	if csv != nil {
		fmt.Fprintf(csv, "%s,%s,%s,%d,%.1f,%.2f,%.2f,%.2f,%d\n", label, op, sizeName, par, opsPerSec, mibs, pct(0.5), pct(0.99), r.errs)
	}
}

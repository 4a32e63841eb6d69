package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"
)

// The scaling mode of scripts/bench/s3-scaling.sh (issue 14, "How cost
// grows"): a bucket holding N empty objects, flat ("o0000123") or nested
// ("a0/b1/c2/o0000123": 1,000 keys per leaf directory), in which
//
//   -scale-fill DIR   makes the N objects directly on disk in the bucket's
//                     directory DIR (much faster than N PUTs), with the
//                     metadata xattrs the server wrote for a probe object
//                     PUT through S3 just before;
//   -scale-ops LIST   measures PUT (a new key, in the directory of a random
//                     existing one), GET and HEAD of random existing keys
//                     for -duration each, and DELETE of the keys PUT made
//                     (all of them: the bucket is back to N);
//   -scale-list LIST  times 1,000-key ListObjectsV2 pages, -repeat times
//                     each: first (the bucket's first page), middle (from
//                     the middle of the key space), afterput (the middle
//                     page, each request right after a PUT overwriting one
//                     of its keys: the first page after a change to the
//                     directory; only the LIST is timed), delim (nested only: the
//                     1,000 keys of the leaf directory in the middle, with
//                     delimiter "/"), canned (the middle page's bytes,
//                     fetched once from the server, then served by a
//                     memory-only net/http handler in this process: the
//                     client's own cost of a page, the floor under every
//                     server's row). Every key of every page is checked.
//
// The pages are timed first, then the operations (results in that order).

var (
	scaleFill   string
	scaleOps    string
	scaleList   string
	scaleKeys   int
	scaleLayout string
	scaleRepeat int
	scaleToken  bool
	// scaleAlso is a second server (endpoint URL) sharing the bucket's
	// directory: -scale-fill also copies the xattrs it writes.
	scaleAlso   string
	scaleCreate bool
)

// scaleKey is the i-th key of the bucket; keys sort in the order of i.
func scaleKey(layout string, i int) string {
	if layout == "nested" {
		l := i / 1000
		return fmt.Sprintf("a%d/b%d/c%d/o%07d", l/100, (l/10)%10, l%10, i)
	}
	return fmt.Sprintf("o%07d", i)
}

func scaleMode(ctx context.Context, c *s3.Client, bucket, label string, dur time.Duration, par int) error {
	if scaleCreate {
		return nil // run created the bucket
	}
	if scaleKeys <= 0 || scaleKeys > 1_000_000 || (scaleLayout != "flat" && scaleLayout != "nested") {
		return errors.New("-keys must be 1..1000000 and -layout flat or nested")
	}
	if scaleFill != "" {
		clients := []*s3.Client{c}
		if scaleAlso != "" {
			c2, err := newClient(scaleAlso)
			if err != nil {
				return err
			}
			clients = append(clients, c2)
		}
		return fillDisk(ctx, clients, bucket, scaleFill)
	}
	for _, kind := range strings.Split(scaleList, ",") {
		if kind == "" {
			continue
		}
		if err := scalePage(ctx, c, bucket, label, kind); err != nil {
			return err
		}
	}
	for _, op := range strings.Split(scaleOps, ",") {
		if op == "" {
			continue
		}
		if err := scaleOp(ctx, c, bucket, label, op, dur, par); err != nil {
			return err
		}
	}
	return nil
}

// fillDisk makes the bucket's N objects as files under dir (a file that
// exists already, from a fill cut off, gets its xattrs again), each with a
// copy of the xattrs of a probe object PUT through each server (tristore's
// record names the file's mtime: it is set to the new file's).
func fillDisk(ctx context.Context, clients []*s3.Client, bucket, dir string) error {
	attrs := map[string][]byte{}
	var names []string
	for i, c := range clients {
		probe := fmt.Sprintf("zz-scale-probe-%d", i)
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &probe, Body: bytes.NewReader(nil), ContentLength: aws.Int64(0)}); err != nil {
			return fmt.Errorf("probe PUT: %w", err)
		}
		pp := filepath.Join(dir, probe)
		ns, err := listXattrs(pp)
		if err != nil {
			return err
		}
		for _, n := range ns {
			v, err := getXattr(pp, n)
			if err != nil {
				return err
			}
			attrs[n] = v
			names = append(names, n)
		}
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &probe}); err != nil {
			return fmt.Errorf("probe DELETE: %w", err)
		}
	}
	var rec map[string]any
	if v, ok := attrs["user.tristore.meta"]; ok {
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("tristore record: %w", err)
		}
		if _, ok := rec["ino"]; ok {
			return errors.New("tristore record names an inode: not copied")
		}
	}
	start := time.Now()
	n := scaleKeys
	if scaleLayout == "nested" {
		for l := 0; l*1000 < n; l++ {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(scaleKey("nested", l*1000))), 0o755); err != nil {
				return err
			}
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fillOne(filepath.Join(dir, scaleKey(scaleLayout, i)), attrs, rec); err != nil {
					errc <- err
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	fmt.Fprintf(text, "made %d %s objects on disk under %s in %.1f s (xattrs: %v)\n", n, scaleLayout, dir, time.Since(start).Seconds(), names)
	return nil
}

func fillOne(p string, attrs map[string][]byte, rec map[string]any) error {
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	for name, v := range attrs {
		if name == "user.tristore.meta" {
			r := make(map[string]any, len(rec)+1) // rec is shared by the workers
			for k, x := range rec {
				r[k] = x
			}
			r["mtime"] = st.Mtim.Nano()
			v, _ = json.Marshal(r)
		}
		if err := unix.Fsetxattr(fd, name, v, 0); err != nil {
			return fmt.Errorf("setxattr %s %s: %w", p, name, err)
		}
	}
	return nil
}

func listXattrs(p string) ([]string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Listxattr(p, buf)
	if err != nil {
		return nil, fmt.Errorf("listxattr %s: %w", p, err)
	}
	var out []string
	for _, s := range strings.Split(string(buf[:n]), "\x00") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

func getXattr(p, name string) ([]byte, error) {
	buf := make([]byte, 65536)
	n, err := unix.Getxattr(p, name, buf)
	if err != nil {
		return nil, fmt.Errorf("getxattr %s %s: %w", p, name, err)
	}
	return buf[:n], nil
}

// putKeys are the keys the last "put" phase made; "delete" removes them.
var putKeys []string

// newKey is a key the bucket does not hold: in the directory of existing
// key i, after all of the listed keys of that directory.
func newKey(label string, i, w, n int) string {
	k := scaleKey(scaleLayout, i)
	return fmt.Sprintf("%szz-put-%s-w%02d-%07d", k[:strings.LastIndexByte(k, '/')+1], label, w, n)
}

// scaleOp runs one operation for dur: put makes new keys (each in the
// directory of a random existing key), get and head read random existing
// keys, delete removes the keys put made (so the bucket is back to N).
func scaleOp(ctx context.Context, c *s3.Client, bucket, label, op string, dur time.Duration, par int) error {
	rngs := make([]*rand.Rand, par)
	for w := range rngs {
		rngs[w] = rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	}
	var mu sync.Mutex
	var f func(w, i int) error
	switch op {
	case "put":
		putKeys = nil
		f = func(w, i int) error {
			k := newKey(label, rngs[w].IntN(scaleKeys), w, i)
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &k, Body: bytes.NewReader(nil), ContentLength: aws.Int64(0)})
			mu.Lock()
			putKeys = append(putKeys, k) // also a failed one: delete tries it
			mu.Unlock()
			return err
		}
	case "get":
		f = func(w, i int) error {
			k := scaleKey(scaleLayout, rngs[w].IntN(scaleKeys))
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &k})
			if err != nil {
				return err
			}
			n, err := io.Copy(io.Discard, out.Body)
			out.Body.Close()
			if err == nil && n != 0 {
				err = fmt.Errorf("GET %s: %d bytes, want 0", k, n)
			}
			return err
		}
	case "head":
		f = func(w, i int) error {
			k := scaleKey(scaleLayout, rngs[w].IntN(scaleKeys))
			out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &k})
			if err == nil && aws.ToInt64(out.ContentLength) != 0 {
				err = fmt.Errorf("HEAD %s: length %d, want 0", k, aws.ToInt64(out.ContentLength))
			}
			return err
		}
	case "delete":
		keys := putKeys
		var next atomic.Int64
		f = func(w, i int) error {
			j := int(next.Add(1)) - 1
			if j >= len(keys) {
				return errDone
			}
			_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &keys[j]})
			return err
		}
		// All of them, however long it takes (at most 10 minutes).
		dur = 10 * time.Minute
	default:
		return fmt.Errorf("unknown op %q", op)
	}
	res := phase(par, dur, f)
	report(nil, label, strings.ToUpper(op), fmt.Sprintf("%d-%s", scaleKeys, scaleLayout), par, 0, res)
	return nil
}

// scalePage times -repeat requests of one kind of 1,000-key page.
func scalePage(ctx context.Context, c *s3.Client, bucket, label, kind string) error {
	n := scaleKeys
	in := &s3.ListObjectsV2Input{Bucket: &bucket, MaxKeys: aws.Int32(1000)}
	first, want := 0, min(1000, n)
	switch kind {
	case "first":
	case "middle", "afterput":
		first = (n - want) / 2
		if first > 0 {
			after := scaleKey(scaleLayout, first-1)
			in.StartAfter = &after
			if scaleToken { // versitygw v1.8.0 ignores start-after without a token; its token is the last key
				in.ContinuationToken = &after
			}
		}
	case "canned":
		first = (n - want) / 2
		if first > 0 {
			after := scaleKey(scaleLayout, first-1)
			in.StartAfter = &after
			if scaleToken {
				in.ContinuationToken = &after
			}
		}
		mc, stop, err := cannedClient(ctx, c, in)
		if err != nil {
			return err
		}
		defer stop()
		c = mc
	case "delim":
		if scaleLayout != "nested" {
			return errors.New("delim pages are for the nested layout")
		}
		k := scaleKey(scaleLayout, n/2)
		prefix := k[:strings.LastIndexByte(k, '/')+1]
		in.Prefix, in.Delimiter = &prefix, aws.String("/")
		first = n / 2 / 1000 * 1000
		want = min(1000, n-first)
	default:
		return fmt.Errorf("unknown page kind %q", kind)
	}
	var res result
	start := time.Now()
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	for r := 0; r < scaleRepeat; r++ {
		if kind == "afterput" {
			// One PUT (overwrite) of a key in the page's directory first:
			// the page is then the first one after a change to it.
			k := scaleKey(scaleLayout, first+rng.IntN(want))
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &k, Body: bytes.NewReader(nil), ContentLength: aws.Int64(0)}); err != nil {
				return fmt.Errorf("PUT before a LIST page: %w", err)
			}
		}
		t0 := time.Now()
		out, err := c.ListObjectsV2(ctx, in)
		if err != nil {
			return fmt.Errorf("LIST %s page: %w", kind, err)
		}
		res.lat = append(res.lat, time.Since(t0))
		if len(out.Contents) != want || len(out.CommonPrefixes) != 0 {
			return fmt.Errorf("LIST %s page: %d keys and %d prefixes, want %d keys", kind, len(out.Contents), len(out.CommonPrefixes), want)
		}
		for j, o := range out.Contents {
			if k := aws.ToString(o.Key); k != scaleKey(scaleLayout, first+j) {
				return fmt.Errorf("LIST %s page: key %d is %q, want %q", kind, j, k, scaleKey(scaleLayout, first+j))
			}
		}
	}
	res.elapsed = time.Since(start)
	res.ops = len(res.lat)
	report(nil, label, "LIST-"+kind, fmt.Sprintf("%d-%s", n, scaleLayout), 1, 0, res)
	return nil
}

// recorder keeps the body of the last response it carried.
type recorder struct {
	rt   http.RoundTripper
	body []byte
}

func (r *recorder) RoundTrip(q *http.Request) (*http.Response, error) {
	resp, err := r.rt.RoundTrip(q)
	if err == nil {
		r.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(r.body))
	}
	return resp, err
}

// cannedClient fetches the page in (untimed) and returns a client of a
// memory-only handler on 127.0.0.1 that answers every request with that
// page's bytes, and a function that stops the handler.
func cannedClient(ctx context.Context, c *s3.Client, in *s3.ListObjectsV2Input) (*s3.Client, func(), error) {
	rec := &recorder{rt: http.DefaultTransport}
	if _, err := c.ListObjectsV2(ctx, in, func(o *s3.Options) { o.HTTPClient = &http.Client{Transport: rec} }); err != nil {
		return nil, nil, fmt.Errorf("LIST canned page: %w", err)
	}
	body := rec.body
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})}
	go srv.Serve(ln)
	mc := s3.New(c.Options(), func(o *s3.Options) { o.BaseEndpoint = aws.String("http://" + ln.Addr().String()) })
	return mc, func() { srv.Close() }, nil
}

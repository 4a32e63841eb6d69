package cloudfs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/client/s3/chunkstore"
)

// holdKey is a transport that holds GETs whose path contains key until
// open is closed (or their context ends): a chunk on a link so slow that
// whatever waits for it never returns.
type holdKey struct {
	next http.RoundTripper
	key  string
	open chan struct{}
}

func (h *holdKey) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, h.key) {
		select {
		case <-h.open:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return h.next.RoundTrip(r)
}

// TestWriteNotBehindReadAhead: the kernel's read-ahead reads past a
// sequential read and keeps those pages locked until its READ is
// answered; a READ reaching into a chunk the cache does not hold waits
// for that chunk's fetch, and a write to any of its pages waits with it
// although the store itself takes such a write without any GET (a
// partial chunk, or here a whole one). After three sequential 64 KiB reads of chunk 0, a write
// at the start of chunk 1, whose GET never completes: with the default
// read-ahead (128 KiB) it waits (checked, so the case stays real), with
// read-ahead off (Options.ReadAhead < 0, --s3-read-ahead 0) it returns
// at once.
func TestWriteNotBehindReadAhead(t *testing.T) {
	r := newRig(t)
	const cs = 256 << 10 // storeConfig's chunk size
	// Chunk 1 is 64 KiB long, so the write covers it whole and its
	// upload needs no GET either.
	data := make([]byte, cs+64<<10)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rnd.Uint32())
	}
	m := r.mount(t.TempDir())
	if err := os.WriteFile(filepath.Join(m.dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.unmnt(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data[cs:])
	hold := &holdKey{next: http.DefaultTransport, key: hex.EncodeToString(sum[:]), open: make(chan struct{})}
	t.Cleanup(func() { close(hold.open) })
	e, err := s3client.New(s3client.Config{Endpoint: r.endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true,
		Retries: s3client.NoRetries, HTTPClient: &http.Client{Transport: hold}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ra := range []int{0, -1} {
		r.fsOpts = func(o *Options) { o.ReadAhead = ra }
		m2 := r.mount(t.TempDir(), func(c *chunkstore.Config) { c.Engine, c.PrefetchMax, c.RequestTimeout = e, -1, 5*time.Second })
		err := readsThenWrite(filepath.Join(m2.dir, "f"), data[cs:], cs)
		if ra == 0 && err == nil {
			t.Fatal("with the default read-ahead the write did not wait for chunk 1: the test no longer shows the case")
		}
		if ra < 0 && err != nil {
			t.Fatalf("read-ahead off: %v", err)
		}
		m2.unmnt()
	}
}

// readsThenWrite reads 64 KiB at 0, 64 KiB and 128 KiB of name, then
// writes w at cs (chunk 1's own bytes: its object keeps its name, so the
// GET held stays held for the next mount); an error if any of it takes
// over 2 s.
func readsThenWrite(name string, w []byte, cs int64) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	done := make(chan error, 1)
	go func() {
		defer f.Close()
		for _, off := range []int64{0, 64 << 10, 128 << 10} {
			if _, err := f.ReadAt(buf, off); err != nil {
				done <- fmt.Errorf("read at %d (chunk 0): %w", off, err)
				return
			}
		}
		_, err := f.WriteAt(w, cs)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Second):
		return fmt.Errorf("three 64 KiB reads of chunk 0 and a write at the start of chunk 1 took over 2 s: they wait for chunk 1's GET")
	}
}

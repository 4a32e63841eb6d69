package nfspeers

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	nfsclient "github.com/tristore/tristore/client/nfs"
)

// Server-side benchmarks: tristore's own client against tristore's NFS
// server over loopback TCP, on a temp directory of the local disk.
//
//	go test -run '^$' -bench 'Server' -benchtime 3x ./test/nfspeers/
//
// docs/bench/nfs-server.md records the figures; the ganesha comparison with
// the same client is in the client's benchmarks (client/nfs).

func benchClient(b *testing.B, exports ...string) (*nfsclient.Client, context.Context) {
	b.Helper()
	dir := b.TempDir()
	port := startServer(b, dir, exports...)
	ctx := context.Background()
	c, err := nfsclient.Dial(ctx, fmt.Sprintf("127.0.0.1:%d", port), nfsclient.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if _, err := c.Mount(ctx, "/"); err != nil {
		b.Fatal(err)
	}
	return c, ctx
}

// BenchmarkServerCreate4KiB: CREATE + 4 KiB WRITE (UNSTABLE) + COMMIT per
// file, 16 files in flight; reports files/s. The export is "sync" (the
// default): each CREATE is on disk before its reply.
func BenchmarkServerCreate4KiB(b *testing.B) { benchCreates(b) }

// BenchmarkServerCreate4KiBAsync is the same on an "async" export (CREATE
// answered before the directory is synced; COMMIT still syncs the data).
func BenchmarkServerCreate4KiBAsync(b *testing.B) { benchCreates(b, "/=rw,async") }

func benchCreates(b *testing.B, exports ...string) {
	c, ctx := benchClient(b, exports...)
	dir, _, err := c.Mkdir(ctx, c.Root(), fmt.Sprintf("creates-%d", time.Now().UnixNano()), nfsclient.SetAttr{})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 4096)
	rand.Read(data)
	const workers = 16
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				fh, _, err := c.Create(ctx, dir, fmt.Sprintf("f%08d", i), nfsclient.Unchecked, nfsclient.SetAttr{}, nfsclient.Verifier{})
				if err == nil {
					_, err = c.Write(ctx, fh, 0, data, nfsclient.Unstable)
				}
				if err == nil {
					_, err = c.Commit(ctx, fh, 0, 0)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if e := firstErr.Load(); e != nil {
		b.Fatal(e)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "files/s")
}

const seqSize = 64 << 20

// BenchmarkServerWrite64MiB: one 64 MiB file written with 1 MiB UNSTABLE
// WRITEs (8 in flight) and a final COMMIT.
func BenchmarkServerWrite64MiB(b *testing.B) {
	c, ctx := benchClient(b)
	data := make([]byte, seqSize)
	rand.Read(data)
	b.SetBytes(seqSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fh, _, err := c.Create(ctx, c.Root(), fmt.Sprintf("seq%d", i), nfsclient.Unchecked, nfsclient.SetAttr{}, nfsclient.Verifier{})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.WriteFile(ctx, fh, data, nfsclient.Unstable); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServerRead64MiB: one 64 MiB file read with 1 MiB READs (8 in flight).
func BenchmarkServerRead64MiB(b *testing.B) {
	c, ctx := benchClient(b)
	data := make([]byte, seqSize)
	rand.Read(data)
	fh, _, err := c.Create(ctx, c.Root(), "seqread", nfsclient.Unchecked, nfsclient.SetAttr{}, nfsclient.Verifier{})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.WriteFile(ctx, fh, data, nfsclient.Unstable); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(seqSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := c.ReadFile(ctx, fh)
		if err != nil || len(got) != seqSize {
			b.Fatalf("read %d bytes: %v", len(got), err)
		}
	}
}

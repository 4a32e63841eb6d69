package s3

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// Benchmarks of the front end over loopback HTTP with the posix store
// (anonymous, so signing is not measured), for profiling:
//
//	go test ./frontend/s3 -run - -bench . -cpuprofile cpu.out
//
// Cross-server figures come from scripts/bench/s3.sh.

func benchPut(b *testing.B, size int) {
	ts := newTestServer(b)
	ts.do(b, "PUT", "/bench", nil, nil)
	data := bytes.Repeat([]byte{7}, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/bench/k%d", ts.url, i%64), bytes.NewReader(data))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
}

func benchGet(b *testing.B, size int) {
	ts := newTestServer(b)
	ts.do(b, "PUT", "/bench", nil, nil)
	ts.do(b, "PUT", "/bench/obj", bytes.Repeat([]byte{7}, size), nil)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := http.Get(ts.url + "/bench/obj")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || n != int64(size) {
			b.Fatalf("status %d, %d bytes", res.StatusCode, n)
		}
	}
}

func BenchmarkPut4KiB(b *testing.B) { benchPut(b, 4<<10) }
func BenchmarkPut4MiB(b *testing.B) { benchPut(b, 4<<20) }
func BenchmarkGet4KiB(b *testing.B) { benchGet(b, 4<<10) }
func BenchmarkGet4MiB(b *testing.B) { benchGet(b, 4<<20) }

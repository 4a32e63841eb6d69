// Command chunkfetch times what a chunk cache miss costs on a link: one
// GET of a whole chunk object against the same object fetched as N
// ranged GETs in parallel, and against the time to the first 64 KiB of
// it, run inside `tristore netem run` by scripts/bench/chunkfetch.sh
// (issue 12: what a 1 MiB cloudfs read miss waits for).
//
// Each trial fetches a different object (the server's page cache holds
// them all; the link is what is measured) after an idle gap, as the
// replay's misses are spread out in time; modes rotate per trial.
// Output: one JSON line per mode with the trials' times in ms.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
)

func main() {
	endpoint := flag.String("endpoint", "http://192.0.2.2:9000", "S3 endpoint")
	size := flag.Int64("size", 1<<20, "chunk object size, bytes")
	modes := flag.String("modes", "whole,first64k,parts4,parts8,parts16,small64k", "modes: whole, firstNk, partsN, small64k (a 64 KiB object)")
	trials := flag.Int("trials", 8, "trials per mode")
	gap := flag.Duration("gap", 500*time.Millisecond, "idle time before each fetch")
	flag.Parse()
	ak, sk := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	e, err := s3client.New(s3client.Config{Endpoint: *endpoint, AccessKey: ak, SecretKey: sk, PathStyle: true, Parallelism: 16})
	if err != nil {
		fail(err)
	}
	api := e.API()
	ctx := context.Background()
	b := "chunkfetch"
	if _, err := api.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &b}); err != nil {
		fail(err)
	}
	ms := strings.Split(*modes, ",")
	n := *trials * len(ms)
	r := rand.New(rand.NewPCG(1, 1))
	// Objects, put in parallel (not timed).
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			sz := *size
			if strings.HasPrefix(ms[i%len(ms)], "small") {
				sz = 64 << 10
			}
			data := make([]byte, sz)
			for j := range data {
				data[j] = byte(i*131 + j*7)
			}
			k := "o" + strconv.Itoa(i)
			if _, err := api.PutObject(ctx, &awss3.PutObjectInput{Bucket: &b, Key: &k, Body: bytes.NewReader(data), ContentLength: aws.Int64(sz)}); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	_ = r
	times := map[string][]float64{}
	for t := 0; t < *trials; t++ {
		for j := range ms {
			m := ms[(j+t)%len(ms)]
			i := t*len(ms) + (j+t)%len(ms)
			k := "o" + strconv.Itoa(i)
			time.Sleep(*gap)
			start := time.Now()
			switch {
			case m == "whole" || m == "small64k":
				get(ctx, api, b, k, "")
			case strings.HasPrefix(m, "first"):
				kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(m, "first"), "k"))
				get(ctx, api, b, k, fmt.Sprintf("bytes=0-%d", kb<<10-1))
			case strings.HasPrefix(m, "parts"):
				p, _ := strconv.Atoi(strings.TrimPrefix(m, "parts"))
				part := *size / int64(p)
				var wg sync.WaitGroup
				for q := 0; q < p; q++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						get(ctx, api, b, k, fmt.Sprintf("bytes=%d-%d", int64(q)*part, int64(q+1)*part-1))
					}()
				}
				wg.Wait()
			default:
				fail(fmt.Errorf("mode %q", m))
			}
			times[m] = append(times[m], float64(time.Since(start).Microseconds())/1000)
		}
	}
	for _, m := range ms {
		v := times[m]
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		json.NewEncoder(os.Stdout).Encode(map[string]any{"mode": m, "size": *size, "ms": v,
			"mean_ms": sum / float64(len(v)), "median_ms": s[len(s)/2], "min_ms": s[0], "max_ms": s[len(s)-1]})
	}
}

func get(ctx context.Context, api *awss3.Client, b, k, rng string) {
	in := &awss3.GetObjectInput{Bucket: &b, Key: &k}
	if rng != "" {
		in.Range = &rng
	}
	out, err := api.GetObject(ctx, in)
	if err != nil {
		fail(err)
	}
	io.Copy(io.Discard, out.Body)
	out.Body.Close()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "chunkfetch:", err)
	os.Exit(1)
}

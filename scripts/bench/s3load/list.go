package main

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The LIST figure of scripts/bench/s3.sh: a bucket prefix holding n keys
// (filled once per server per run, -fill), listed whole with
// ListObjectsV2 in pages of 1,000 (-list), once per round. The keys are
// flat (one directory on a file-system server): the case where a page's
// cost could grow with the directory instead of the page.

// -fill N / -list N (main.go): the LIST mode instead of PUT/GET.
var fillN, listN int

const listPrefix = "list/"

// listMode runs the LIST mode on a client of run.
func listMode(ctx context.Context, c *s3.Client, bucket, label string) error {
	if fillN > 0 {
		if err := fillList(ctx, c, bucket, listPrefix, fillN, 32); err != nil {
			return err
		}
	}
	if listN > 0 {
		return listAll(ctx, c, bucket, listPrefix, listN, label)
	}
	return nil
}

// listKey is the i-th key of the LIST prefix.
func listKey(prefix string, i int) string { return fmt.Sprintf("%so%07d", prefix, i) }

// fillList PUTs n empty objects under prefix with par workers.
func fillList(ctx context.Context, c *s3.Client, bucket, prefix string, n, par int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				k := listKey(prefix, i)
				var err error
				for try := 0; try < 3; try++ { // a loaded machine: a refused connection is retried, then fatal
					_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &k, Body: bytes.NewReader(nil), ContentLength: aws.Int64(0)})
					if err == nil {
						break
					}
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("fill %s: %w", k, err)
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	fmt.Fprintf(text, "filled %d keys under %s in %.1f s\n", n, prefix, time.Since(start).Seconds())
	return first
}

// listAll lists prefix page by page (1,000 keys per page) and records one
// measurement: op LIST, one op per page. Every key must come back once, in
// order; anything else fails the run.
func listAll(ctx context.Context, c *s3.Client, bucket, prefix string, want int, label string) error {
	var res result
	var token *string
	got := 0
	start := time.Now()
	for page := 0; page < want/1000+10; page++ {
		t0 := time.Now()
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, MaxKeys: aws.Int32(1000), ContinuationToken: token})
		if err != nil {
			return fmt.Errorf("LIST page %d: %w", page, err)
		}
		res.lat = append(res.lat, time.Since(t0))
		for _, o := range out.Contents {
			if k := aws.ToString(o.Key); k != listKey(prefix, got) {
				return fmt.Errorf("LIST: key %d is %q, want %q", got, k, listKey(prefix, got))
			}
			got++
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		token = out.NextContinuationToken
	}
	res.elapsed = time.Since(start)
	res.ops = len(res.lat)
	if got != want {
		return fmt.Errorf("LIST: %d keys, want %d", got, want)
	}
	report(nil, label, "LIST", fmt.Sprintf("%dkeys", want), 1, 0, res)
	return nil
}

// Command nfsnewinode measures the NFS calls that make a new inode on a
// sync export, one call at a time, for scripts/bench/nfs-newinode.sh:
// CREATE of an empty file, CREATE + WRITE FILE_SYNC of 4 KiB, and SYMLINK,
// each in a new directory of the export root. It prints one JSON object
// with the mean milliseconds per operation of each. A measurement tool,
// not a test: nothing here is asserted.
//
//	nfsnewinode -addr 127.0.0.1:PORT [-n 200]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tristore/tristore/client/nfs"
)

func main() {
	addr := flag.String("addr", "", "NFS server host:port (export /)")
	n := flag.Int("n", 200, "files per operation kind (symlinks: n/4)")
	flag.Parse()
	if err := run(*addr, *n); err != nil {
		fmt.Fprintln(os.Stderr, "nfsnewinode:", err)
		os.Exit(1)
	}
}

func run(addr string, n int) error {
	if addr == "" || n < 4 || n > 100000 {
		return fmt.Errorf("want -addr and 4 <= -n <= 100000")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := nfs.Dial(ctx, addr, nfs.Options{Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Mount(ctx, "/"); err != nil {
		return err
	}
	dir, _, err := c.Mkdir(ctx, c.Root(), fmt.Sprintf("newinode-%d", time.Now().UnixNano()), nfs.SetAttr{})
	if err != nil {
		return err
	}
	mode := uint32(0o644)
	body := make([]byte, 4096)
	timeIt := func(count int, op func(i int) error) (float64, error) {
		t0 := time.Now()
		for i := 0; i < count; i++ {
			if err := op(i); err != nil {
				return 0, err
			}
		}
		return float64(time.Since(t0).Microseconds()) / 1000 / float64(count), nil
	}
	out := map[string]float64{}
	if out["create_empty_ms"], err = timeIt(n, func(i int) error {
		_, _, err := c.Create(ctx, dir, fmt.Sprintf("e%d", i), nfs.Guarded, nfs.SetAttr{Mode: &mode}, nfs.Verifier{})
		return err
	}); err != nil {
		return fmt.Errorf("CREATE: %w", err)
	}
	if out["create_write_ms"], err = timeIt(n, func(i int) error {
		fh, _, err := c.Create(ctx, dir, fmt.Sprintf("w%d", i), nfs.Guarded, nfs.SetAttr{Mode: &mode}, nfs.Verifier{})
		if err != nil {
			return err
		}
		res, err := c.Write(ctx, fh, 0, body, nfs.FileSync)
		if err == nil && (res.Committed < nfs.FileSync || int(res.Count) != len(body)) {
			err = fmt.Errorf("WRITE answered %v, %d bytes", res.Committed, res.Count)
		}
		return err
	}); err != nil {
		return fmt.Errorf("CREATE+WRITE: %w", err)
	}
	if out["symlink_ms"], err = timeIt(n/4, func(i int) error {
		_, _, err := c.Symlink(ctx, dir, fmt.Sprintf("l%d", i), "target", nfs.SetAttr{})
		return err
	}); err != nil {
		return fmt.Errorf("SYMLINK: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

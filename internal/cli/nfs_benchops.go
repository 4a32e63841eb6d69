package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"

	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/client/nfs"
)

// `tristore nfs bench-ops URL --version 3|4.1`: issue 16's comparison of
// NFS versions: round trips and time per operation for what a user does
// with small files, and one large read, through the userspace client of
// either version. Seed 000 argues that v4's COMPOUND needs fewer round
// trips per file operation; this measures it instead of assuming it.
//
//	create:          write a new 4 KiB file   v3: CREATE + WRITE FILE_SYNC    v4.1: OPEN+WRITE+CLOSE
//	stat:            attributes of a name     v3: LOOKUP (attributes in it)   v4.1: PUTFH+LOOKUP+GETATTR
//	open-read-close: read a 4 KiB file        v3: LOOKUP + READ               v4.1: OPEN+READ+CLOSE
//	read-64MiB:      one large file, in parallel READs
//
// The client issues one operation at a time (except the large read), as an
// application working through files does, so on a long link the time per
// operation is about round trips × RTT.
func newNFSBenchOpsCmd() *cobra.Command {
	var (
		version string
		files   int
		bigSize string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "bench-ops URL",
		Short: "Round trips and time per operation for small files and one large read, NFS v3 or v4.1",
		Long: `bench-ops works in a new directory under URL (removed at the end) and measures, one
operation at a time: create (a 4 KiB file), stat, open-read-close of those files, then a
parallel read of one --big file. It prints operations, seconds, ms per operation and round
trips (RPC calls or COMPOUNDs) per operation; JSON with --json.

With --version 4.1 the URL path is in the server's NFSv4 namespace (tristore: the data tree;
nfs-ganesha: its Pseudo path); with 3 it is an exported path as for the other commands.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if files < 1 || files > 1_000_000 {
				return errors.New("bench-ops: --files must be 1..1000000")
			}
			big, err := optSize(bigSize)
			if err != nil || big < 0 || big > 16<<30 {
				return fmt.Errorf("bench-ops: --big %q: want a size up to 16GiB", bigSize)
			}
			u, err := parseNFSURL(args[0], nil)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			var b opsBench
			switch version {
			case "3":
				s, err := openNFS(ctx, u)
				if err != nil {
					return err
				}
				defer s.Close()
				b, err = newOps3(ctx, s)
				if err != nil {
					return err
				}
			case "4.1", "4":
				c, err := nfs.Dial4(ctx, u.Addr, u.Opts)
				if err != nil {
					return err
				}
				defer c.Close(context.Background())
				dir, _, err := c.LookupPath(ctx, u.Path)
				if err != nil {
					return err
				}
				b = &ops4{c: c, dir: dir}
			default:
				return fmt.Errorf("bench-ops: --version %q: want 3 or 4.1", version)
			}
			res, err := runOpsBench(ctx, b, version, files, big)
			if err != nil {
				return err
			}
			res.Server = u.Addr
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "NFS %s\top\tops\tseconds\tms/op\tround trips/op\t\n", version)
			for _, o := range res.Ops {
				fmt.Fprintf(tw, "\t%s\t%d\t%.3f\t%.3f\t%.2f\t\n", o.Op, o.Ops, o.Seconds, o.MsPerOp, o.RoundTripsPerOp)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&version, "version", "3", "NFS version: 3 or 4.1")
	cmd.Flags().IntVar(&files, "files", 100, "number of 4 KiB files")
	cmd.Flags().StringVar(&bigSize, "big", "64MiB", "size of the large file read at the end (0: skip)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print results as JSON")
	return cmd
}

// opsResult is what bench-ops prints.
type opsResult struct {
	Server  string    `json:"server"`
	Version string    `json:"version"`
	Files   int       `json:"files"`
	Ops     []opsStat `json:"ops"`
}

type opsStat struct {
	Op              string  `json:"op"`
	Ops             int     `json:"ops"`
	Seconds         float64 `json:"seconds"`
	MsPerOp         float64 `json:"ms_per_op"`
	RoundTrips      int64   `json:"round_trips"`
	RoundTripsPerOp float64 `json:"round_trips_per_op"`
	MBps            float64 `json:"mb_per_s,omitempty"`
}

// opsBench is one protocol version's way of doing each operation.
type opsBench interface {
	mkdir(ctx context.Context, name string) error
	create(ctx context.Context, name string, data []byte) error
	stat(ctx context.Context, name string) (uint64, error)
	openReadClose(ctx context.Context, name string) ([]byte, error)
	readBig(ctx context.Context, name string) ([]byte, error)
	writeBig(ctx context.Context, name string, data []byte) error
	remove(ctx context.Context, name string) error
	rmdir(ctx context.Context) error
	calls() int64
}

func runOpsBench(ctx context.Context, b opsBench, version string, files int, big int64) (*opsResult, error) {
	dir := fmt.Sprintf("bench-ops-%08x", rand.Uint32())
	if err := b.mkdir(ctx, dir); err != nil {
		return nil, fmt.Errorf("bench-ops: making %s: %w", dir, err)
	}
	res := &opsResult{Version: version, Files: files}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		for i := range files {
			b.remove(cctx, fmt.Sprintf("f%06d", i))
		}
		if big > 0 {
			b.remove(cctx, "big")
		}
		b.rmdir(cctx)
	}()
	data := bytes.Repeat([]byte("tristore"), 512) // 4 KiB
	phase := func(op string, n int, fn func(i int) error) error {
		c0, t0 := b.calls(), time.Now()
		for i := range n {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(i); err != nil {
				return fmt.Errorf("bench-ops %s #%d: %w", op, i, err)
			}
		}
		sec := time.Since(t0).Seconds()
		rt := b.calls() - c0
		res.Ops = append(res.Ops, opsStat{Op: op, Ops: n, Seconds: sec, MsPerOp: sec * 1000 / float64(n),
			RoundTrips: rt, RoundTripsPerOp: float64(rt) / float64(n)})
		return nil
	}
	name := func(i int) string { return fmt.Sprintf("f%06d", i) }
	if err := phase("create", files, func(i int) error { return b.create(ctx, name(i), data) }); err != nil {
		return nil, err
	}
	if err := phase("stat", files, func(i int) error {
		size, err := b.stat(ctx, name(i))
		if err == nil && size != uint64(len(data)) {
			err = fmt.Errorf("size %d, want %d", size, len(data))
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := phase("open-read-close", files, func(i int) error {
		got, err := b.openReadClose(ctx, name(i))
		if err == nil && !bytes.Equal(got, data) {
			err = errors.New("read back different data")
		}
		return err
	}); err != nil {
		return nil, err
	}
	if big > 0 {
		payload := make([]byte, big)
		for i := range payload {
			payload[i] = byte(i*7 + i>>12)
		}
		if err := b.writeBig(ctx, "big", payload); err != nil {
			return nil, fmt.Errorf("bench-ops: writing the large file: %w", err)
		}
		if err := phase("read-"+formatSize(big), 1, func(int) error {
			got, err := b.readBig(ctx, "big")
			if err == nil && !bytes.Equal(got, payload) {
				err = errors.New("read back different data")
			}
			return err
		}); err != nil {
			return nil, err
		}
		last := &res.Ops[len(res.Ops)-1]
		last.MBps = float64(big) / 1e6 / last.Seconds
	}
	return res, nil
}

func formatSize(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// ops3 does the operations with NFS v3 calls.
type ops3 struct {
	c    *nfs.Client
	base nfs.FH
	dir  nfs.FH
	name string
}

func newOps3(ctx context.Context, s *nfsSession) (*ops3, error) {
	fh, _, err := s.C.LookupPath(ctx, s.Rel)
	if err != nil {
		return nil, err
	}
	return &ops3{c: s.C, base: fh}, nil
}

func (o *ops3) calls() int64 { return o.c.Calls() }

func (o *ops3) mkdir(ctx context.Context, name string) error {
	mode := uint32(0o755)
	fh, _, err := o.c.Mkdir(ctx, o.base, name, nfs.SetAttr{Mode: &mode})
	o.dir, o.name = fh, name
	return err
}

func (o *ops3) create(ctx context.Context, name string, data []byte) error {
	mode := uint32(0o644)
	fh, _, err := o.c.Create(ctx, o.dir, name, nfs.Unchecked, nfs.SetAttr{Mode: &mode}, nfs.Verifier{})
	if err != nil {
		return err
	}
	_, err = o.c.Write(ctx, fh, 0, data, nfs.FileSync)
	return err
}

func (o *ops3) stat(ctx context.Context, name string) (uint64, error) {
	_, a, err := o.c.Lookup(ctx, o.dir, name)
	if err != nil {
		return 0, err
	}
	return a.Size, nil
}

func (o *ops3) openReadClose(ctx context.Context, name string) ([]byte, error) {
	fh, _, err := o.c.Lookup(ctx, o.dir, name)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	n, _, err := o.c.Read(ctx, fh, 0, buf)
	return buf[:n], err
}

func (o *ops3) readBig(ctx context.Context, name string) ([]byte, error) {
	fh, _, err := o.c.Lookup(ctx, o.dir, name)
	if err != nil {
		return nil, err
	}
	return o.c.ReadFile(ctx, fh)
}

func (o *ops3) writeBig(ctx context.Context, name string, data []byte) error {
	fh, _, err := o.c.Create(ctx, o.dir, name, nfs.Unchecked, nfs.SetAttr{}, nfs.Verifier{})
	if err != nil {
		return err
	}
	return o.c.WriteFile(ctx, fh, data, nfs.Unstable)
}

func (o *ops3) remove(ctx context.Context, name string) error { return o.c.Remove(ctx, o.dir, name) }
func (o *ops3) rmdir(ctx context.Context) error               { return o.c.Rmdir(ctx, o.base, o.name) }

// ops4 does them with NFSv4.1 COMPOUNDs.
type ops4 struct {
	c    *nfs.Client4
	dir  nfs.FH // the URL's directory
	sub  nfs.FH // the benchmark's directory in it
	name string
}

func (o *ops4) calls() int64 { return o.c.Calls() }

func (o *ops4) mkdir(ctx context.Context, name string) error {
	fh, err := o.c.Mkdir(ctx, o.dir, name, 0o755)
	o.sub, o.name = fh, name
	return err
}

func (o *ops4) create(ctx context.Context, name string, data []byte) error {
	return o.c.WriteSmall(ctx, o.sub, name, data, 0o644)
}

func (o *ops4) stat(ctx context.Context, name string) (uint64, error) {
	a, err := o.c.Stat(ctx, o.sub, name)
	if err != nil {
		return 0, err
	}
	return a.Size, nil
}

func (o *ops4) openReadClose(ctx context.Context, name string) ([]byte, error) {
	b, _, err := o.c.ReadSmall(ctx, o.sub, name)
	return b, err
}

func (o *ops4) readBig(ctx context.Context, name string) ([]byte, error) {
	return o.c.ReadFile(ctx, o.sub, name)
}

func (o *ops4) writeBig(ctx context.Context, name string, data []byte) error {
	return o.c.WriteFile(ctx, o.sub, name, data, 0o644)
}

func (o *ops4) remove(ctx context.Context, name string) error { return o.c.Remove(ctx, o.sub, name) }
func (o *ops4) rmdir(ctx context.Context) error               { return o.c.Remove(ctx, o.dir, o.name) }

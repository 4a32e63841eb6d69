package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/internal/units"
)

// `tristore nfs ls|cat|put|get|bench URL`: small commands over the
// userspace NFS v3 client, for scripts, tests and the workbench, on
// machines without a kernel NFS client.
//
// URL form (shared with `tristore mount`):
//
//	nfs://host[:port]/export[/path/in/export][?mountport=P&rsize=N&wsize=N&uid=U&gid=G&hard|soft&timeo=D&retrans=N]
//
// hard, soft, timeo (tenths of a second) and retrans mean what they mean
// in nfs(5); see client/nfs Options and docs/nfs.md. The commands here
// are soft unless the URL says hard; `tristore mount` is hard by default.
//
// The export is found by asking the server's MOUNT EXPORT list for the
// longest export that prefixes the URL path (else by trying prefixes).

func init() { addCommand(newNFSCmd) }

// nfsURL is a parsed nfs:// URL.
type nfsURL struct {
	Addr      string // host:port of NFS
	MountAddr string // host:port of MOUNT ("" = same)
	Path      string // export + path, cleaned, starting with "/"
	Opts      nfs.Options
	Query     url.Values
	// V4 is set by ?version=4.1 (or 4): the path is then in the server's
	// NFSv4 namespace and the commands use an NFSv4.1 session.
	V4 bool
}

func parseNFSURL(raw string, defaults url.Values) (*nfsURL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("bad URL %q: %w", raw, err)
	}
	return nfsURLFrom(u, defaults)
}

func nfsURLFrom(u *url.URL, defaults url.Values) (*nfsURL, error) {
	if u.Scheme != "nfs" {
		return nil, fmt.Errorf("URL %q: scheme must be nfs://", u.String())
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("URL %q: missing host", u.String())
	}
	q := u.Query()
	urlMode := q.Has("hard") || q.Has("soft")
	for k, v := range defaults {
		if (k == "hard" || k == "soft") && urlMode {
			continue // the URL chose hard or soft
		}
		if q.Get(k) == "" && len(v) > 0 && v[0] != "" {
			q.Set(k, v[0])
		}
	}
	port := u.Port()
	if port == "" {
		port = "2049"
	}
	out := &nfsURL{Addr: net.JoinHostPort(u.Hostname(), port), Path: path.Clean("/" + u.Path), Query: q}
	num := func(key string, bits int) (uint64, bool, error) {
		s := q.Get(key)
		if s == "" {
			return 0, false, nil
		}
		v, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return 0, false, fmt.Errorf("URL option %s=%q: %w", key, s, err)
		}
		return v, true, nil
	}
	u32 := func(v uint64) *uint32 { x := uint32(v); return &x }
	for _, o := range []struct {
		key  string
		bits int
		set  func(uint64)
	}{
		{"mountport", 16, func(v uint64) { out.MountAddr = net.JoinHostPort(u.Hostname(), strconv.FormatUint(v, 10)) }},
		{"rsize", 32, func(v uint64) { out.Opts.Rsize = uint32(v) }},
		{"wsize", 32, func(v uint64) { out.Opts.Wsize = uint32(v) }},
		{"uid", 32, func(v uint64) { out.Opts.UID = u32(v) }},
		{"gid", 32, func(v uint64) { out.Opts.GID = u32(v) }},
		{"parallel", 16, func(v uint64) { out.Opts.Parallel = int(v) }},
		// nfs(5): timeo in tenths of a second, retrans the retries.
		{"timeo", 32, func(v uint64) { out.Opts.Timeout = time.Duration(v) * 100 * time.Millisecond }},
		{"retrans", 16, func(v uint64) {
			out.Opts.Retries = int(v)
			if v == 0 {
				out.Opts.Retries = -1 // none (0 means the default)
			}
		}},
	} {
		v, ok, err := num(o.key, o.bits)
		if err != nil {
			return nil, err
		}
		if ok {
			o.set(v)
		}
	}
	for _, k := range []string{"rsize", "wsize"} {
		if v, _, _ := num(k, 32); v != 0 && (v < 4096 || v > 4<<20) {
			return nil, fmt.Errorf("URL option %s=%d: want 4096..4194304", k, v)
		}
	}
	if v, ok, _ := num("timeo", 32); ok && (v < 1 || v > 6000) {
		return nil, fmt.Errorf("URL option timeo=%d: want 1..6000 tenths of a second", v)
	}
	if v, _, _ := num("retrans", 16); v > 1000 {
		return nil, fmt.Errorf("URL option retrans=%d: want 0..1000", v)
	}
	// hard / soft (nfs(5)): a bare key or a true value selects it.
	flag := func(k string) (bool, error) {
		if !q.Has(k) {
			return false, nil
		}
		switch q.Get(k) {
		case "", "1", "true", "yes":
			return true, nil
		case "0", "false", "no":
			return false, nil
		}
		return false, fmt.Errorf("URL option %s=%q: give it bare (?%s) or as %s=1", k, q.Get(k), k, k)
	}
	hard, err := flag("hard")
	if err != nil {
		return nil, err
	}
	soft, err := flag("soft")
	if err != nil {
		return nil, err
	}
	if hard && soft {
		return nil, fmt.Errorf("URL %q: hard and soft both given", u.Redacted())
	}
	out.Opts.Hard = hard
	out.Opts.MountAddr = out.MountAddr
	switch v := q.Get("version"); v {
	case "", "3":
	case "4", "4.1":
		out.V4 = true
	default:
		return nil, fmt.Errorf("URL option version=%q: want 3 or 4.1", v)
	}
	return out, nil
}

// nfsSession is a mounted client plus the path inside the export.
type nfsSession struct {
	C      *nfs.Client
	Export string
	Rel    string // path inside the export ("" = root)
}

func (s *nfsSession) Close() {
	// UMNT is a courtesy: a hard client must not wait for a server that
	// is down to say goodbye.
	s.C.GiveUp()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.C.Unmount(ctx)
	s.C.Close()
}

// openNFS dials and mounts the export that holds u.Path.
func openNFS(ctx context.Context, u *nfsURL) (*nfsSession, error) {
	c, err := nfs.Dial(ctx, u.Addr, u.Opts)
	if err != nil {
		return nil, err
	}
	var candidates []string
	if ex, err := c.Exports(ctx); err == nil {
		for _, e := range ex {
			d := path.Clean("/" + e.Dir)
			if u.Path == d || d == "/" || strings.HasPrefix(u.Path, d+"/") {
				candidates = append(candidates, d)
			}
		}
		sort.Slice(candidates, func(i, j int) bool { return len(candidates[i]) > len(candidates[j]) })
	}
	if len(candidates) == 0 {
		// No usable EXPORT list: try the path and its prefixes, longest first.
		for p := u.Path; ; p = path.Dir(p) {
			candidates = append(candidates, p)
			if p == "/" {
				break
			}
		}
	}
	var lastErr error
	for _, exp := range candidates {
		if _, err := c.Mount(ctx, exp); err != nil {
			lastErr = err
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(u.Path, exp), "/")
		return &nfsSession{C: c, Export: exp, Rel: rel}, nil
	}
	c.Close()
	return nil, fmt.Errorf("no export of %s holds %s: %w", u.Addr, u.Path, lastErr)
}

func newNFSCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nfs",
		Short: "Use an NFS v3 server with the built-in userspace client (ls, cat, put, get, mkdir, rm, bench)",
		Long: `nfs talks NFS v3 over TCP with tristore's own client; no kernel NFS needed.

URL: nfs://host[:port]/export[/path][?mountport=P&rsize=N&wsize=N&uid=U&gid=G&parallel=N&hard|soft&timeo=D&retrans=N]
The port defaults to 2049 and MOUNT to the same port (tristore serves both on
one); for ganesha or knfsd give mountport (e.g. 20048), or let the client ask
the portmapper on port 111 (it does when the NFS port does not serve MOUNT).`,
	}
	cmd.AddCommand(newNFSLsCmd(), newNFSCatCmd(), newNFSPutCmd(), newNFSGetCmd(), newNFSMkdirCmd(), newNFSRmCmd(), newNFSBenchCmd(), newNFSBenchMetaCmd(), newNFSBenchOpsCmd())
	return cmd
}

func withNFS(cmd *cobra.Command, raw string, f func(ctx context.Context, s *nfsSession) error) error {
	u, err := parseNFSURL(raw, nil)
	if err != nil {
		return err
	}
	if u.V4 {
		return errNFSv3Only(cmd.CommandPath())
	}
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	s, err := openNFS(ctx, u)
	if err != nil {
		return err
	}
	defer s.Close()
	return f(ctx, s)
}

// withNFSFile is withNFS for the commands that read one file (cat, get):
// it looks the URL's path up and refuses a directory.
func withNFSFile(cmd *cobra.Command, raw string, f func(ctx context.Context, c *nfs.Client, fh nfs.FH, a *nfs.Attr) error) error {
	return withNFS(cmd, raw, func(ctx context.Context, s *nfsSession) error {
		fh, a, err := s.C.LookupPath(ctx, s.Rel)
		if err != nil {
			return err
		}
		if a.Type == nfs.TypeDir {
			return fmt.Errorf("%s is a directory", raw)
		}
		return f(ctx, s.C, fh, a)
	})
}

func newNFSLsCmd() *cobra.Command {
	var long bool
	cmd := &cobra.Command{
		Use:   "ls URL",
		Short: "List a directory (or show one file)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ok, err := withNFS4(cmd, args[0], func(ctx context.Context, c *nfs.Client4, p string) error {
				return ls4(ctx, c, p, long, cmd.OutOrStdout())
			}); ok {
				return err
			}
			return withNFS(cmd, args[0], func(ctx context.Context, s *nfsSession) error {
				fh, a, err := s.C.LookupPath(ctx, s.Rel)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 1, ' ', 0)
				defer w.Flush()
				show := func(name string, a *nfs.Attr) {
					if !long || a == nil {
						fmt.Fprintln(w, name)
						return
					}
					fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\n", a.FileMode(), a.UID, a.GID, a.Size, a.Mtime.UTC().Format(time.RFC3339), name)
				}
				if a.Type != nfs.TypeDir {
					show(path.Base("/"+s.Rel), a)
					return nil
				}
				ents, err := s.C.Readdirplus(ctx, fh)
				if err != nil {
					return err
				}
				sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
				for _, e := range ents {
					if e.Name == "." || e.Name == ".." {
						continue
					}
					show(e.Name, e.Attr)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "long listing: mode, uid, gid, size, mtime, name")
	return cmd
}

func newNFSCatCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cat URL",
		Short: "Write a file's contents to stdout",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ok, err := withNFS4(cmd, args[0], func(ctx context.Context, c *nfs.Client4, p string) error {
				return get4(ctx, c, p, cmd.OutOrStdout())
			}); ok {
				return err
			}
			return withNFSFile(cmd, args[0], func(ctx context.Context, c *nfs.Client, fh nfs.FH, a *nfs.Attr) error {
				return copyOut(ctx, c, fh, a.Size, cmd.OutOrStdout())
			})
		},
	}
}

// copyOut streams a file in 8 MiB windows of parallel READs.
func copyOut(ctx context.Context, c *nfs.Client, fh nfs.FH, size uint64, w io.Writer) error {
	buf := make([]byte, 8<<20)
	for off := uint64(0); ; {
		n, err := c.ReadAt(ctx, fh, buf, off)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			off += uint64(n)
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func newNFSGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get URL LOCALFILE",
		Short: "Download a file (parallel READs)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ok, err := withNFS4(cmd, args[0], func(ctx context.Context, c *nfs.Client4, p string) error {
				f, err := os.Create(args[1])
				if err != nil {
					return err
				}
				if err := get4(ctx, c, p, f); err != nil {
					f.Close()
					return err
				}
				return f.Close()
			}); ok {
				return err
			}
			return withNFSFile(cmd, args[0], func(ctx context.Context, c *nfs.Client, fh nfs.FH, a *nfs.Attr) error {
				f, err := os.Create(args[1])
				if err != nil {
					return err
				}
				if err := copyOut(ctx, c, fh, a.Size, f); err != nil {
					f.Close()
					return err
				}
				return f.Close()
			})
		},
	}
}

func newNFSPutCmd() *cobra.Command {
	var stable string
	var mode uint32
	cmd := &cobra.Command{
		Use:   "put LOCALFILE URL",
		Short: "Upload a file (parallel WRITEs; UNSTABLE + COMMIT unless --stable file)",
		Long: `put creates or truncates the file named by URL and writes LOCALFILE into it.
With --stable unstable (default) data is sent UNSTABLE and committed at the end
(resent if the server restarted meanwhile); with --stable file every WRITE is
FILE_SYNC. Either way the data is on the server's disk when put returns.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var how nfs.Stable
			switch stable {
			case "unstable":
				how = nfs.Unstable
			case "data":
				how = nfs.DataSync
			case "file":
				how = nfs.FileSync
			default:
				return fmt.Errorf("--stable %q: want unstable, data or file", stable)
			}
			in, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer in.Close()
			if ok, err := withNFS4(cmd, args[1], func(ctx context.Context, c *nfs.Client4, p string) error {
				return put4(ctx, c, p, in, mode)
			}); ok {
				return err
			}
			return withNFS(cmd, args[1], func(ctx context.Context, s *nfsSession) error {
				dir, name, err := splitNFSPath(ctx, s, "put")
				if err != nil {
					return err
				}
				zero := uint64(0)
				fh, _, err := s.C.Create(ctx, dir, name, nfs.Unchecked, nfs.SetAttr{Mode: &mode, Size: &zero}, nfs.Verifier{})
				if err != nil {
					return err
				}
				return copyIn(ctx, s.C, fh, in, how)
			})
		},
	}
	cmd.Flags().StringVar(&stable, "stable", "unstable", "write stability: unstable (+COMMIT), data or file")
	cmd.Flags().Uint32Var(&mode, "mode", 0o644, "permission bits of a created file")
	return cmd
}

// copyIn writes r to fh in 8 MiB windows.
func copyIn(ctx context.Context, c *nfs.Client, fh nfs.FH, r io.Reader, how nfs.Stable) error {
	u := nfs.NewUnstable(c, fh)
	var off uint64
	for {
		buf := make([]byte, 8<<20) // owned by u until COMMIT
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			var err error
			if how == nfs.Unstable {
				err = u.WriteAt(ctx, buf[:n], off, true)
				if err == nil && u.Pending() >= 64<<20 {
					err = u.Commit(ctx)
				}
			} else {
				err = writeStableAt(ctx, c, fh, buf[:n], off, how)
			}
			if err != nil {
				return err
			}
			off += uint64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	return u.Commit(ctx)
}

func writeStableAt(ctx context.Context, c *nfs.Client, fh nfs.FH, data []byte, off uint64, how nfs.Stable) error {
	ws := int(c.Wsize())
	for len(data) > 0 {
		n := min(len(data), ws)
		wr, err := c.Write(ctx, fh, off, data[:n], how)
		if err != nil {
			return err
		}
		if wr.Count == 0 {
			return fmt.Errorf("nfs: server wrote 0 bytes at offset %d", off)
		}
		off += uint64(wr.Count)
		data = data[wr.Count:]
	}
	return nil
}

// splitNFSPath returns the parent directory handle and the last name of
// the session's path.
func splitNFSPath(ctx context.Context, s *nfsSession, what string) (nfs.FH, string, error) {
	dirPath, name := path.Split("/" + s.Rel)
	if name == "" {
		return nil, "", fmt.Errorf("%s: give a path inside the export, not the export itself", what)
	}
	dir, _, err := s.C.LookupPath(ctx, dirPath)
	return dir, name, err
}

func newNFSMkdirCmd() *cobra.Command {
	var mode uint32
	cmd := &cobra.Command{
		Use:   "mkdir URL",
		Short: "Make a directory (its parent must exist)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ok, err := withNFS4(cmd, args[0], func(ctx context.Context, c *nfs.Client4, p string) error {
				dir, name, err := split4(ctx, c, p, "mkdir")
				if err == nil {
					_, err = c.Mkdir(ctx, dir, name, mode)
				}
				return err
			}); ok {
				return err
			}
			return withNFS(cmd, args[0], func(ctx context.Context, s *nfsSession) error {
				dir, name, err := splitNFSPath(ctx, s, "mkdir")
				if err != nil {
					return err
				}
				_, _, err = s.C.Mkdir(ctx, dir, name, nfs.SetAttr{Mode: &mode})
				return err
			})
		},
	}
	cmd.Flags().Uint32Var(&mode, "mode", 0o755, "permission bits")
	return cmd
}

func newNFSRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm URL",
		Short: "Remove a file, symlink or empty directory",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ok, err := withNFS4(cmd, args[0], func(ctx context.Context, c *nfs.Client4, p string) error {
				dir, name, err := split4(ctx, c, p, "rm")
				if err == nil {
					err = c.Remove(ctx, dir, name)
				}
				return err
			}); ok {
				return err
			}
			return withNFS(cmd, args[0], func(ctx context.Context, s *nfsSession) error {
				dir, name, err := splitNFSPath(ctx, s, "rm")
				if err != nil {
					return err
				}
				_, a, err := s.C.Lookup(ctx, dir, name)
				if err != nil {
					return err
				}
				if a != nil && a.Type == nfs.TypeDir {
					return s.C.Rmdir(ctx, dir, name)
				}
				return s.C.Remove(ctx, dir, name)
			})
		},
	}
}

func newNFSBenchCmd() *cobra.Command {
	var files int
	fileSize, seqSize := units.Size(4096), units.Size(64<<20)
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bench URL",
		Short: "Measure creates/s of small files and MB/s of one large sequential write and read",
		Long: `bench works in a fresh directory under URL (removed afterwards):
  creates: --files files of --file-size bytes, one after another, each CREATE + WRITE
           (UNSTABLE) + COMMIT, i.e. durable before the next starts;
  write:   one file of --seq-size bytes, parallel UNSTABLE WRITEs + COMMIT;
  read:    the same file back with parallel READs (verified).
It prints one line per phase, or JSON with --json.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withNFS(cmd, args[0], func(ctx context.Context, s *nfsSession) error {
				res, err := runNFSBench(ctx, s, files, int(fileSize), int(seqSize))
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(res)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "creates   %d x %d B: %.1f files/s\n", files, int64(fileSize), res.CreatesPerSec)
				fmt.Fprintf(cmd.OutOrStdout(), "seq write %s: %.1f MB/s\n", units.FormatIEC(int64(seqSize)), res.WriteMBps)
				fmt.Fprintf(cmd.OutOrStdout(), "seq read  %s: %.1f MB/s\n", units.FormatIEC(int64(seqSize)), res.ReadMBps)
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&files, "files", 1000, "number of small files to create")
	cmd.Flags().Var(&fileSize, "file-size", "size of each small file (4096, 4Ki, 1MiB ...)")
	cmd.Flags().Var(&seqSize, "seq-size", "size of the sequential file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print results as JSON")
	return cmd
}

// nfsBenchResult is what `tristore nfs bench` measures.
type nfsBenchResult struct {
	Server        string  `json:"server"`
	Files         int     `json:"files"`
	FileSize      int     `json:"file_size"`
	CreatesPerSec float64 `json:"creates_per_sec"`
	SeqSize       int     `json:"seq_size"`
	WriteMBps     float64 `json:"write_mb_per_sec"`
	ReadMBps      float64 `json:"read_mb_per_sec"`
	Rsize         uint32  `json:"rsize"`
	Wsize         uint32  `json:"wsize"`
}

func runNFSBench(ctx context.Context, s *nfsSession, files, fileSize, seqSize int) (*nfsBenchResult, error) {
	if files < 1 || fileSize < 0 || seqSize < 1 {
		return nil, fmt.Errorf("bench: --files must be >= 1, --seq-size >= 1")
	}
	c := s.C
	base, _, err := c.LookupPath(ctx, s.Rel)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("tristore-nfs-bench-%d", time.Now().UnixNano())
	dir, _, err := c.Mkdir(ctx, base, name, nfs.SetAttr{})
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if ents, err := c.Readdir(cctx, dir); err == nil {
			for _, e := range ents {
				if e.Name != "." && e.Name != ".." {
					c.Remove(cctx, dir, e.Name)
				}
			}
		}
		c.Rmdir(cctx, base, name)
	}()
	res := &nfsBenchResult{Files: files, FileSize: fileSize, SeqSize: seqSize, Rsize: c.Rsize(), Wsize: c.Wsize()}
	res.Server = s.Export
	small := make([]byte, fileSize)
	for i := range small {
		small[i] = byte(i * 7)
	}
	mode := uint32(0o644)
	start := time.Now()
	for i := 0; i < files; i++ {
		fh, _, err := c.Create(ctx, dir, fmt.Sprintf("f%06d", i), nfs.Guarded, nfs.SetAttr{Mode: &mode}, nfs.Verifier{})
		if err != nil {
			return nil, err
		}
		if fileSize > 0 {
			if err := c.WriteFile(ctx, fh, small, nfs.Unstable); err != nil {
				return nil, err
			}
		}
	}
	res.CreatesPerSec = float64(files) / time.Since(start).Seconds()

	big := make([]byte, seqSize)
	for i := 0; i < len(big); i += 4096 {
		big[i] = byte(i >> 12)
	}
	fh, _, err := c.Create(ctx, dir, "seq", nfs.Guarded, nfs.SetAttr{Mode: &mode}, nfs.Verifier{})
	if err != nil {
		return nil, err
	}
	start = time.Now()
	if err := c.WriteFile(ctx, fh, big, nfs.Unstable); err != nil {
		return nil, err
	}
	res.WriteMBps = float64(seqSize) / 1e6 / time.Since(start).Seconds()
	back := make([]byte, seqSize)
	start = time.Now()
	n, err := c.ReadAt(ctx, fh, back, 0)
	if err != nil {
		return nil, err
	}
	res.ReadMBps = float64(seqSize) / 1e6 / time.Since(start).Seconds()
	if n != seqSize || string(back) != string(big) {
		return nil, fmt.Errorf("bench: read back %d bytes that differ from the %d written", n, seqSize)
	}
	return res, nil
}

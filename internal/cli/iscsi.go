package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tristore/tristore/client/iscsi"
)

func init() { addCommand(newISCSICmd) }

func newISCSICmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "iscsi",
		Short: "Userspace iSCSI initiator: discover, list, read, write and benchmark LUNs",
		Long: `iscsi talks to any iSCSI target (tristore's own, tgt, LIO, ...) from user
space; no kernel initiator is needed. URLs have the form

  iscsi://[user[:secret]@]host[:port]/IQN/LUN[?options]

user:secret is one-way CHAP (or use --chap-user/--chap-secret, or the
environment TRISTORE_CHAP_SECRET, to keep the secret off the command line).
Options: target_user, target_secret (mutual CHAP), header_digest=crc32c,
data_digest=crc32c, initiator=IQN. discover and ls take a URL without
IQN/LUN; read, write and bench need both.`,
	}
	cmd.AddCommand(newISCSIDiscoverCmd(), newISCSILsCmd(), newISCSIReadCmd(), newISCSIWriteCmd(), newISCSIBenchCmd())
	return cmd
}

// iscsiFlags are the connection options every iscsi subcommand shares.
func iscsiFlags(fs *pflag.FlagSet) {
	fs.String("chap-user", "", "CHAP user name (instead of user@ in the URL)")
	fs.String("chap-secret", "", "CHAP secret (instead of :secret in the URL)")
	fs.String("chap-target-user", "", "mutual CHAP: the name the target must answer with")
	fs.String("chap-target-secret", "", "mutual CHAP: the target's secret")
	fs.Bool("header-digest", false, "require CRC32C header digests")
	fs.Bool("data-digest", false, "require CRC32C data digests")
	fs.String("initiator", "", "initiator IQN (default iqn.2026-11.org.tristore:initiator.<host>)")
	fs.Int("queue-depth", 32, "commands in flight on the session")
	fs.Duration("timeout", 30*time.Second, "connect+login timeout and reconnect budget")
}

// iscsiConfig merges the URL with the shared flags (flags win).
func iscsiConfig(raw string, needLUN bool) (iscsi.Config, *iscsi.Address, error) {
	a, err := iscsi.ParseURL(raw)
	if err != nil {
		return iscsi.Config{}, nil, err
	}
	if needLUN && (a.Target == "" || !a.HasLUN) {
		return iscsi.Config{}, nil, fmt.Errorf("URL %s needs /IQN/LUN", a)
	}
	if v := cfg.GetString("chap-user"); v != "" {
		a.User = v
	}
	if v := cfg.GetString("chap-secret"); v != "" {
		a.Secret = v
	}
	if v := cfg.GetString("chap-target-user"); v != "" {
		a.TargetUser = v
	}
	if v := cfg.GetString("chap-target-secret"); v != "" {
		a.TargetSecret = v
	}
	if a.User != "" && a.Secret == "" {
		return iscsi.Config{}, nil, fmt.Errorf("CHAP user %q given without a secret (user:secret@ or --chap-secret)", a.User)
	}
	if (a.TargetUser == "") != (a.TargetSecret == "") {
		return iscsi.Config{}, nil, errors.New("mutual CHAP needs both the target user and the target secret")
	}
	if cfg.GetBool("header-digest") {
		a.HeaderDigest = true
	}
	if cfg.GetBool("data-digest") {
		a.DataDigest = true
	}
	if v := cfg.GetString("initiator"); v != "" {
		a.Initiator = v
	}
	c := iscsi.ConfigFromAddress(a)
	c.QueueDepth = cfg.GetInt("queue-depth")
	if c.QueueDepth < 1 || c.QueueDepth > 1024 {
		return iscsi.Config{}, nil, fmt.Errorf("--queue-depth %d: want 1..1024", c.QueueDepth)
	}
	c.DialTimeout = cfg.GetDuration("timeout")
	if c.ReplacementTimeout == 0 { // not given as ?replacement_timeout= in the URL
		c.ReplacementTimeout = cfg.GetDuration("timeout")
	}
	return c, a, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newISCSIDiscoverCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "discover URL",
		Short: "List the targets a portal offers (SendTargets)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := iscsiConfig(args[0], false)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			ts, err := iscsi.Discover(ctx, c)
			if err != nil {
				return err
			}
			if cfg.GetBool("json") {
				return printJSON(cmd.OutOrStdout(), ts)
			}
			for _, t := range ts {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", t.Name, strings.Join(t.Addresses, " "))
			}
			return nil
		},
	}
	iscsiFlags(cmd.Flags())
	cmd.Flags().Bool("json", false, "print JSON")
	return cmd
}

// lunInfo is one row of `iscsi ls`.
type lunInfo struct {
	Target    string `json:"target"`
	LUN       uint16 `json:"lun"`
	Type      string `json:"type"`
	Vendor    string `json:"vendor"`
	Product   string `json:"product"`
	Size      int64  `json:"size_bytes"`
	BlockSize int    `json:"block_size"`
	URL       string `json:"url"`
	Error     string `json:"error,omitempty"`
}

var scsiTypes = map[uint8]string{0: "disk", 1: "tape", 5: "cdrom", 0x0c: "controller", 0x0d: "enclosure", 0x1f: "none"}

func newISCSILsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls URL",
		Short: "List targets, their LUNs and capacities",
		Long: `ls discovers the portal's targets (or uses the IQN in the URL), logs in to
each, asks REPORT LUNS and, for each LUN, INQUIRY and READ CAPACITY.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, a, err := iscsiConfig(args[0], false)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			names := []string{a.Target}
			if a.Target == "" {
				ts, err := iscsi.Discover(ctx, c)
				if err != nil {
					return err
				}
				names = names[:0]
				for _, t := range ts {
					names = append(names, t.Name)
				}
			}
			var rows []lunInfo
			for _, name := range names {
				rows = append(rows, lsTarget(ctx, c, a, name)...)
			}
			if cfg.GetBool("json") {
				return printJSON(cmd.OutOrStdout(), rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TARGET\tLUN\tTYPE\tVENDOR\tPRODUCT\tSIZE\tBLOCK\tURL")
			for _, r := range rows {
				if r.Error != "" {
					fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\t-\terror: %s\n", r.Target, r.LUN, r.Error)
					continue
				}
				size, block := "-", "-"
				if r.Type == "disk" {
					size, block = humanize.IBytes(uint64(r.Size)), fmt.Sprint(r.BlockSize)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Target, r.LUN, r.Type, r.Vendor, r.Product, size, block, r.URL)
			}
			return tw.Flush()
		},
	}
	iscsiFlags(cmd.Flags())
	cmd.Flags().Bool("json", false, "print JSON")
	return cmd
}

func lsTarget(ctx context.Context, c iscsi.Config, a *iscsi.Address, name string) []lunInfo {
	c.Target, c.LUN = name, 0
	s, err := iscsi.Dial(ctx, c)
	if err != nil {
		return []lunInfo{{Target: name, Error: err.Error()}}
	}
	luns, err := s.ReportLUNs(ctx)
	s.Close()
	if err != nil {
		return []lunInfo{{Target: name, Error: err.Error()}}
	}
	var rows []lunInfo
	for _, l := range luns {
		r := lunInfo{Target: name, LUN: l}
		u := *a
		u.Target, u.LUN, u.HasLUN = name, uint64(l), true
		r.URL = u.String()
		c.LUN = uint64(l)
		ls, err := iscsi.Dial(ctx, c)
		if err != nil {
			r.Error = err.Error()
			rows = append(rows, r)
			continue
		}
		inq, err := ls.Inquiry(ctx)
		if err == nil {
			r.Type = scsiTypes[inq.DeviceType]
			if r.Type == "" {
				r.Type = fmt.Sprintf("type-0x%02x", inq.DeviceType)
			}
			r.Vendor, r.Product = inq.Vendor, inq.Product
			if inq.DeviceType == 0 {
				var capy, cerr = ls.ReadCapacity(ctx)
				if cerr == nil {
					r.Size, r.BlockSize = int64(capy.LastLBA+1)*int64(capy.BlockSize), int(capy.BlockSize)
				} else {
					err = cerr
				}
			}
		}
		if err != nil {
			r.Error = err.Error()
		}
		ls.Close()
		rows = append(rows, r)
	}
	return rows
}

// iscsiOffset turns --offset (bytes, internal/units syntax) or --lba (in the LUN's
// blocks) into a byte offset; read and write both take them.
func iscsiOffset(dev *iscsi.Session, offS string) (int64, error) {
	off, err := iscsiSize(offS)
	if err != nil {
		return 0, fmt.Errorf("--offset: %w", err)
	}
	if lba := cfg.GetInt64("lba"); lba >= 0 {
		if off != 0 {
			return 0, errors.New("give --offset or --lba, not both")
		}
		off = lba * int64(dev.BlockSize())
	}
	return off, nil
}

// iscsiRange turns --offset/--length (bytes, internal/units syntax) or --lba/--blocks
// (in the LUN's blocks) into a block-aligned byte range.
func iscsiRange(dev *iscsi.Session, offS, lenS string) (int64, int64, error) {
	off, err := iscsiOffset(dev, offS)
	if err != nil {
		return 0, 0, err
	}
	bsz := int64(dev.BlockSize())
	n := dev.Size() - off
	if lenS != "" {
		if n, err = iscsiSize(lenS); err != nil {
			return 0, 0, fmt.Errorf("--length: %w", err)
		}
	}
	if blocks := cfg.GetInt64("blocks"); blocks >= 0 {
		if lenS != "" {
			return 0, 0, errors.New("give --length or --blocks, not both")
		}
		n = blocks * bsz
	}
	if off%bsz != 0 || n%bsz != 0 {
		return 0, 0, fmt.Errorf("offset %d and length %d must be multiples of the %d-byte block size", off, n, bsz)
	}
	if off < 0 || n < 0 || off+n > dev.Size() {
		return 0, 0, fmt.Errorf("range [%d,+%d) is outside the %d-byte LUN", off, n, dev.Size())
	}
	return off, n, nil
}

// iscsiSize reads --offset, --length, --bs and --span: the internal/units
// size syntax ("" is 0), like every other size flag.
func iscsiSize(s string) (int64, error) { return optSize(s) }

func openISCSI(ctx context.Context, raw string) (*iscsi.Session, error) {
	c, _, err := iscsiConfig(raw, true)
	if err != nil {
		return nil, err
	}
	return iscsi.Open(ctx, c)
}

func newISCSIReadCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "read URL",
		Short: "Read a byte range of a LUN to stdout or a file",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			dev, err := openISCSI(ctx, args[0])
			if err != nil {
				return err
			}
			defer dev.Close()
			off, n, err := iscsiRange(dev, cfg.GetString("offset"), cfg.GetString("length"))
			if err != nil {
				return err
			}
			var w io.Writer = cmd.OutOrStdout()
			if p := cfg.GetString("output"); p != "" && p != "-" {
				f, err := os.Create(p)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			const chunk = 8 << 20
			buf := make([]byte, chunk)
			for done := int64(0); done < n; {
				b := buf[:min(int64(chunk), n-done)]
				if _, err := dev.ReadAt(ctx, b, off+done); err != nil {
					return err
				}
				if _, err := w.Write(b); err != nil {
					return err
				}
				done += int64(len(b))
			}
			if f, ok := w.(*os.File); ok && f != os.Stdout {
				return f.Close()
			}
			return nil
		},
	}
	iscsiFlags(cmd.Flags())
	cmd.Flags().String("offset", "0", "byte offset (block-aligned; 4096, 4Ki, 1MiB: Ki/Mi/Gi are powers of 1024, k/M/G of 1000)")
	cmd.Flags().String("length", "", "bytes to read (block-aligned; default to the end of the LUN)")
	cmd.Flags().Int64("lba", -1, "first logical block (instead of --offset)")
	cmd.Flags().Int64("blocks", -1, "number of blocks (instead of --length)")
	cmd.Flags().StringP("output", "o", "", "output file (default stdout)")
	return cmd
}

func newISCSIWriteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "write URL",
		Short: "Write stdin or a file to a LUN at an offset, then SYNCHRONIZE CACHE",
		Long: `write copies its input to the LUN starting at --offset and ends with
SYNCHRONIZE CACHE, so the data is durable when it exits 0. The input length
must be a multiple of the block size unless --pad fills the last block with
zeros.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			dev, err := openISCSI(ctx, args[0])
			if err != nil {
				return err
			}
			defer dev.Close()
			off, err := iscsiOffset(dev, cfg.GetString("offset"))
			if err != nil {
				return err
			}
			bs := int64(dev.BlockSize())
			if off%bs != 0 || off < 0 || off >= dev.Size() {
				return fmt.Errorf("--offset %d must be a multiple of %d inside the %d-byte LUN", off, bs, dev.Size())
			}
			var r io.Reader = cmd.InOrStdin()
			if p := cfg.GetString("input"); p != "" && p != "-" {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			fua := cfg.GetBool("fua")
			const chunk = 8 << 20
			buf := make([]byte, chunk)
			pos := off
			for {
				n, rerr := io.ReadFull(r, buf)
				if n > 0 {
					if int64(n)%bs != 0 {
						if !cfg.GetBool("pad") {
							return fmt.Errorf("input ends %d bytes into a %d-byte block (use --pad to zero-fill it)", int64(n)%bs, bs)
						}
						pad := int((bs - int64(n)%bs) % bs)
						clear(buf[n : n+pad])
						n += pad
					}
					if pos+int64(n) > dev.Size() {
						return fmt.Errorf("input is longer than the LUN (%d bytes from offset %d)", dev.Size()-off, off)
					}
					if fua {
						_, err = dev.WriteAtFUA(ctx, buf[:n], pos)
					} else {
						_, err = dev.WriteAt(ctx, buf[:n], pos)
					}
					if err != nil {
						return err
					}
					pos += int64(n)
				}
				if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
					break
				}
				if rerr != nil {
					return rerr
				}
			}
			if err := dev.Flush(ctx); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d bytes at offset %d\n", pos-off, off)
			return nil
		},
	}
	iscsiFlags(cmd.Flags())
	cmd.Flags().String("offset", "0", "byte offset (block-aligned)")
	cmd.Flags().Int64("lba", -1, "first logical block (instead of --offset)")
	cmd.Flags().StringP("input", "i", "", "input file (default stdin)")
	cmd.Flags().Bool("pad", false, "zero-fill a partial last block")
	cmd.Flags().Bool("fua", false, "write with Force Unit Access")
	return cmd
}

func newISCSIBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench URL",
		Short: "Measure IOPS, MB/s and latency of a LUN (random/sequential read/write)",
		Long: `bench runs fio-like workers against the LUN: --queue-depth I/Os of
--bs bytes in flight for --duration. Patterns: randread, randwrite, read,
write (sequential); several may be given, comma-separated, and run one after
the other. Progress goes to stderr; results to stdout (a table or --json).
Write patterns overwrite the LUN's data.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			bs, err := iscsiSize(cfg.GetString("bs"))
			if err != nil {
				return fmt.Errorf("--bs: %w", err)
			}
			span, err := iscsiSize(cfg.GetString("span"))
			if err != nil {
				return fmt.Errorf("--span: %w", err)
			}
			dev, err := openISCSI(ctx, args[0])
			if err != nil {
				return err
			}
			defer dev.Close()
			var progress io.Writer
			if !cfg.GetBool("quiet") {
				progress = cmd.ErrOrStderr()
			}
			var results []*iscsi.BenchResult
			for _, pat := range strings.Split(cfg.GetString("pattern"), ",") {
				r, err := iscsi.Bench(ctx, dev, iscsi.BenchConfig{
					Pattern: strings.TrimSpace(pat), BlockSize: int(bs), QueueDepth: cfg.GetInt("queue-depth"),
					Duration: cfg.GetDuration("duration"), Span: span,
				}, progress)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			if cfg.GetBool("json") {
				return printJSON(cmd.OutOrStdout(), results)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "pattern\tbs\tqd\tIOPS\tMB/s\tp50 µs\tp99 µs\tops\t")
			for _, r := range results {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t%d\t\n", r.Pattern, humanize.IBytes(uint64(r.BlockSize)),
					r.QueueDepth, r.IOPS, r.MBps, r.P50us, r.P99us, r.Ops)
			}
			return tw.Flush()
		},
	}
	iscsiFlags(cmd.Flags())
	fs := cmd.Flags()
	fs.String("pattern", "randread", "randread, randwrite, read, write (comma-separated for several)")
	fs.String("bs", "4KiB", "I/O size (4Ki = 4096, 4k = 4000)")
	fs.Duration("duration", 10*time.Second, "run time per pattern")
	fs.String("span", "", "use only the first SPAN bytes of the LUN (default all)")
	fs.Bool("json", false, "print JSON")
	fs.BoolP("quiet", "q", false, "no progress on stderr")
	return cmd
}

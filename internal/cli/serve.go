package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/tristore/tristore/frontend"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
	"github.com/tristore/tristore/vfs"
)

// ServeEnv is what `tristore serve` hands each front end it builds.
type ServeEnv struct {
	Store   store.Store
	DataDir string
	Log     *slog.Logger
	Metrics prometheus.Registerer
}

// frontendSpec describes one protocol server that `serve` can run.
// Register one from init() in internal/cli/serve_<proto>.go.
type frontendSpec struct {
	Name        string // "s3", "nfs", "iscsi"
	DefaultAddr string // default of --<name>-addr; "" (or "off") disables it
	Help        string // help for --<name>-addr
	// Flags adds the front end's own options to `serve` (name them <proto>-...).
	Flags func(fs *pflag.FlagSet)
	// Build makes the server; options are read from cfg.
	Build func(ctx context.Context, env *ServeEnv) (frontend.Server, error)
}

var frontendSpecs []frontendSpec

func registerFrontend(s frontendSpec) { frontendSpecs = append(frontendSpecs, s) }

func init() { addCommand(newServeCmd) }

// defaultDataDir is $XDG_DATA_HOME/tristore, or ~/.local/share/tristore.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "tristore")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "tristore")
	}
	return "tristore-data"
}

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the store over S3, NFS and iSCSI at once",
		Long: `serve opens the data directory (created on first start: each top-level
directory is a bucket, each file an object) and serves it over every enabled
protocol. An existing tree is adopted; a top-level directory whose name is not
a valid bucket name (3-63 of a-z 0-9 . -, e.g. not "b", "My Photos", "UPPER")
is not visible over S3 (NFS shows it), and a warning at start names them. Set a protocol's address to "off" to disable it. On SIGINT/SIGTERM
it stops accepting, lets in-flight requests finish and exits.

/healthz and Prometheus /metrics are served on --admin-addr.`,
		Args: cobra.NoArgs,
		RunE: runServe,
	}
	fs := cmd.Flags()
	fs.String("data", defaultDataDir(), "data directory (the store's tree)")
	fs.String("admin-addr", "127.0.0.1:9001", "address for /healthz and /metrics (\"off\" to disable)")
	fs.Bool("pprof", false, "also serve Go profiles on the admin address under /debug/pprof/ (for benchmarks)")
	fs.Int("pprof-block-rate", 0, "with --pprof: runtime.SetBlockProfileRate (ns; 0 = no block profile)")
	fs.Int("pprof-mutex-fraction", 0, "with --pprof: runtime.SetMutexProfileFraction (0 = no mutex profile)")
	fs.String("ready-file", "", "after all listeners are up, write their addresses here as JSON (for scripts and tests)")
	fs.Duration("shutdown-timeout", 30*time.Second, "how long in-flight requests may take to finish on shutdown")
	for _, s := range frontendSpecs {
		fs.String(s.Name+"-addr", s.DefaultAddr, s.Help)
		if s.Flags != nil {
			s.Flags(fs)
		}
	}
	return cmd
}

func runServe(cmd *cobra.Command, _ []string) error {
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	log := slog.Default()
	if err := checkGatewayFlags(); err != nil {
		return err
	}
	dataDir := cfg.GetString("data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if !vfs.DirSyncKeepsNewInodes(dataDir) {
		log.Warn("the data directory's file system is not known to journal its metadata (ext4 with a journal and XFS are): "+
			"after a power cut it must be checked (fsck -y) before it is mounted again, and removals and "+
			"overwrites cost extra fsyncs there (docs/durability.md)", "data", dataDir)
	}
	st, err := posix.Open(dataDir, posix.Options{Log: log})
	if err != nil {
		return fmt.Errorf("opening store at %s: %w", dataDir, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	env := &ServeEnv{Store: st, DataDir: dataDir, Log: log, Metrics: reg}

	type running struct {
		srv frontend.Server
		ln  net.Listener
	}
	var servers []running
	addrs := map[string]string{}
	closeAll := func() {
		for _, r := range servers {
			r.srv.Close()
			r.ln.Close()
		}
	}
	for _, s := range frontendSpecs {
		addr := cfg.GetString(s.Name + "-addr")
		if addr == "" || addr == "off" {
			continue
		}
		srv, err := s.Build(ctx, env)
		if err != nil {
			closeAll()
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			srv.Close()
			closeAll()
			return fmt.Errorf("%s: listen %s: %w", s.Name, addr, err)
		}
		servers = append(servers, running{srv, ln})
		addrs[s.Name] = ln.Addr().String()
		log.Info("listening", "protocol", s.Name, "addr", ln.Addr().String())
	}

	g, gctx := errgroup.WithContext(ctx)
	if a := cfg.GetString("admin-addr"); a != "" && a != "off" {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			closeAll()
			return fmt.Errorf("admin: listen %s: %w", a, err)
		}
		addrs["admin"] = ln.Addr().String()
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			if _, err := st.ListBuckets(r.Context()); err != nil {
				http.Error(w, "store: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if cfg.GetBool("pprof") {
			// Profiles for benchmarks (issue 14: profile first). Off by
			// default: they reveal internals and cost CPU while taken.
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			runtime.SetBlockProfileRate(int(cfg.GetInt("pprof-block-rate")))
			runtime.SetMutexProfileFraction(int(cfg.GetInt("pprof-mutex-fraction")))
		}
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		g.Go(func() error {
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("admin: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return hs.Shutdown(sctx)
		})
		log.Info("listening", "protocol", "admin", "addr", ln.Addr().String())
	}
	for _, r := range servers {
		r := r
		g.Go(func() error {
			if err := r.srv.Serve(gctx, r.ln); err != nil {
				return fmt.Errorf("%s: %w", r.srv.Name(), err)
			}
			return nil
		})
	}
	if rf := cfg.GetString("ready-file"); rf != "" {
		b, _ := json.Marshal(addrs)
		tmp := rf + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err == nil {
			err = os.Rename(tmp, rf)
		}
	}
	// When ctx ends (signal) or a server fails, close everything; Serve
	// implementations drain in-flight requests before returning.
	g.Go(func() error {
		<-gctx.Done()
		done := make(chan struct{})
		go func() { closeAll(); close(done) }()
		select {
		case <-done:
		case <-time.After(cfg.GetDuration("shutdown-timeout")):
			log.Warn("shutdown timeout: some requests were cut off")
		}
		return nil
	})
	err = g.Wait()
	if c, ok := any(st).(interface{ Close() error }); ok {
		c.Close()
	}
	log.Info("stopped")
	return err
}

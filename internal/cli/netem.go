package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tristore/tristore/internal/units"
	"github.com/tristore/tristore/netem"
)

func init() { addCommand(newNetemCmd) }

func newNetemCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "netem",
		Short: "Emulated network links: rate, delay, jitter and loss that real kernel TCP feels",
		Long: `netem builds an emulated link between two network namespaces (root, /dev/net/tun):
the client namespace holds 192.0.2.1, the server namespace 192.0.2.2, and this
process forwards every IP packet between them through loss, a rate limiter with
a drop-tail queue, and delay with normal jitter, counting bytes per direction
and per TCP port. Without root, "netem proxy" gives rate/delay/jitter (no loss)
as a TCP proxy on 127.0.0.1.

Delay and jitter are one-way (applied in each direction): --delay 25ms is a
50 ms round trip. Rates: 100mbit, 1gbit, 12.5MiB/s, 0 = unlimited.
Loss: 0.001 or 0.1%. The --up-*/--down-* flags override one direction
(up = client to server).`,
	}
	cmd.AddCommand(newNetemRunCmd(), newNetemServeCmd(), newNetemPresetsCmd(), newNetemProxyCmd(), newNetemCleanupCmd())
	return cmd
}

// addLinkFlags adds the link settings shared by run, serve and proxy.
// Empty strings mean "not set": the preset's value (or none) applies.
func addLinkFlags(fs *pflag.FlagSet) {
	fs.String("preset", "", "start from a preset: "+strings.Join(netem.PresetNames(), ", ")+" (see `netem presets`)")
	for _, p := range []string{"", "up-", "down-"} {
		dir := "both directions"
		switch p {
		case "up-":
			dir = "client to server"
		case "down-":
			dir = "server to client"
		}
		fs.String(p+"rate", "", "rate, "+dir+" (e.g. 100mbit, 12.5MiB/s; 0 = unlimited)")
		fs.String(p+"delay", "", "one-way delay, "+dir+" (e.g. 25ms)")
		fs.String(p+"jitter", "", "standard deviation of normal jitter, "+dir)
		fs.String(p+"loss", "", "Bernoulli loss probability, "+dir+" (0.001 or 0.1%)")
		fs.String(p+"queue", "", "drop-tail queue in bytes before the rate limiter, "+dir+" (default 1.5 x rate x (RTT + 2ms), at least 64 packets; >= MTU)")
	}
	fs.Int("mtu", netem.DefaultMTU, "MTU of the link")
	fs.String("client-addr", "192.0.2.1", "client address (TEST-NET)")
	fs.String("server-addr", "192.0.2.2", "server address (TEST-NET)")
	fs.Int("prefix-len", 24, "prefix length of the link subnet")
	fs.String("name", "", "namespace name prefix (must start with ts-; default ts-<pid>-<random>; a link named ts-<pid>-... is removed by the next link start once <pid> is dead)")
	fs.String("reorder", "", "let jitter reorder packets: true or false (default: the preset's; only realistic reorders)")
	fs.Lookup("reorder").NoOptDefVal = "true"
	fs.Uint64("seed", 0, "random seed for loss and jitter (0 = from the clock)")
	fs.Bool("offload", true, "forward TCP super-packets (TSO/GRO through the TUN devices; loss, rate and jitter still per segment; never on links that reorder); false: packet by packet")
	fs.Bool("json", false, "print the counters as JSON instead of a table")
}

// linkConfig builds and validates a Config from the merged options.
func linkConfig() (netem.Config, error) {
	var c netem.Config
	if p := cfg.GetString("preset"); p != "" {
		var err error
		if c, err = netem.PresetConfig(p); err != nil {
			return c, err
		}
	}
	apply := func(prefix string, d *netem.Dir) error {
		if s := cfg.GetString(prefix + "rate"); s != "" {
			r, err := netem.ParseRate(s)
			if err != nil {
				return fmt.Errorf("--%srate: %w", prefix, err)
			}
			d.Rate = r
		}
		for _, f := range []struct {
			name string
			dst  *time.Duration
		}{{"delay", &d.Delay}, {"jitter", &d.Jitter}} {
			if s := cfg.GetString(prefix + f.name); s != "" {
				v, err := time.ParseDuration(s)
				if err != nil {
					return fmt.Errorf("%w: --%s%s %q: want a duration like 25ms", netem.ErrInvalid, prefix, f.name, s)
				}
				*f.dst = v
			}
		}
		if s := cfg.GetString(prefix + "loss"); s != "" {
			v, err := netem.ParseLoss(s)
			if err != nil {
				return fmt.Errorf("--%sloss: %w", prefix, err)
			}
			d.Loss = v
		}
		if s := cfg.GetString(prefix + "queue"); s != "" {
			v, err := units.ParseSize(s)
			if err != nil || v > 1<<40 {
				return fmt.Errorf("%w: --%squeue %q: want bytes like 65536, 64Ki (65536) or 64k (64000), at most 1TiB: %v", netem.ErrInvalid, prefix, s, err)
			}
			d.Queue = int(v)
		}
		return nil
	}
	for _, d := range []*netem.Dir{&c.Up, &c.Down} {
		if err := apply("", d); err != nil {
			return c, err
		}
	}
	if err := apply("up-", &c.Up); err != nil {
		return c, err
	}
	if err := apply("down-", &c.Down); err != nil {
		return c, err
	}
	c.MTU = cfg.GetInt("mtu")
	var err error
	if c.ClientAddr, err = netip.ParseAddr(cfg.GetString("client-addr")); err != nil {
		return c, fmt.Errorf("%w: --client-addr: %v", netem.ErrInvalid, err)
	}
	if c.ServerAddr, err = netip.ParseAddr(cfg.GetString("server-addr")); err != nil {
		return c, fmt.Errorf("%w: --server-addr: %v", netem.ErrInvalid, err)
	}
	c.PrefixLen = cfg.GetInt("prefix-len")
	c.Name = cfg.GetString("name")
	switch r := cfg.GetString("reorder"); r {
	case "":
	case "true", "1", "yes":
		c.Reorder = true
	case "false", "0", "no":
		c.Reorder = false
	default:
		return c, fmt.Errorf("%w: --reorder %q: want true or false", netem.ErrInvalid, r)
	}
	c.Seed = cfg.GetUint64("seed")
	c.NoOffload = !cfg.GetBool("offload")
	return c, c.Validate()
}

func describeLink(c netem.Config) string {
	d := func(x netem.Dir) string {
		return fmt.Sprintf("rate %s, delay %v, jitter σ %v, loss %g%%, queue %d B", netem.FormatRate(x.Rate), x.Delay, x.Jitter, x.Loss*100, x.Queue)
	}
	return fmt.Sprintf("up (client->server): %s\ndown (server->client): %s\nRTT %v, MTU %d", d(c.Up), d(c.Down), c.RTT(), c.MTU)
}

func printCounters(w io.Writer, c netem.Counters) error {
	if cfg.GetBool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(c)
	}
	return c.WriteTable(w)
}

// child is a command run in its own process group, so that stopping it
// also stops what it started (a shell's children).
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when Wait returned
	err  error         // Wait's result, valid after done
	once sync.Once
}

func startChild(c *exec.Cmd, stdout, stderr io.Writer, env []string) (*child, error) {
	c.Stdout, c.Stderr = stdout, stderr
	c.Env = append(os.Environ(), env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGTERM) }
	c.WaitDelay = 5 * time.Second
	if err := c.Start(); err != nil {
		return nil, err
	}
	ch := &child{cmd: c, done: make(chan struct{})}
	go func() { ch.err = c.Wait(); close(ch.done) }()
	return ch, nil
}

// stop terminates the child's group: SIGTERM, then SIGKILL after 5 s.
// Safe to call more than once and after the child exited.
func (ch *child) stop() {
	if ch == nil {
		return
	}
	ch.once.Do(func() {
		pid := ch.cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-ch.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-ch.done
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL) // stragglers in the group
	})
}

func linkEnv(l *netem.Link) []string {
	return []string{
		"TRISTORE_NETEM_CLIENT_ADDR=" + l.ClientAddr().String(),
		"TRISTORE_NETEM_SERVER_ADDR=" + l.ServerAddr().String(),
		"TRISTORE_NETEM_CLIENT_NS=" + l.Namespace(netem.ClientSide),
		"TRISTORE_NETEM_SERVER_NS=" + l.Namespace(netem.ServerSide),
	}
}

func newNetemRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run CMD in the client namespace across an emulated link (root)",
		Long: `run creates the link, starts --server-cmd (a shell command) in the server
namespace, waits for --server-ready (host:port reachable from the client side)
if given, runs CMD in the client namespace, then stops the server, removes
namespaces and devices, prints the counters and exits with CMD's exit status.
SIGINT/SIGTERM stop everything the same way. Both commands see
TRISTORE_NETEM_{CLIENT,SERVER}_{ADDR,NS} in their environment.`,
		Args: cobra.MinimumNArgs(1),
		RunE: runNetemRun,
	}
	fs := cmd.Flags()
	addLinkFlags(fs)
	fs.String("server-cmd", "", "shell command to run in the server namespace for the duration of CMD")
	fs.String("server-ready", "", "host:port to wait for (TCP connect from the client namespace) before running CMD")
	fs.Duration("server-ready-timeout", 30*time.Second, "how long to wait for --server-ready")
	fs.String("counters-file", "", "write the counters here instead of stderr")
	fs.String("cpuprofile", "", "debug: write a Go CPU profile of the forwarder (this process) for the link's lifetime to this file")
	return cmd
}

func counterWriter(cmd *cobra.Command) (io.Writer, func() error, error) {
	if p := cfg.GetString("counters-file"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return nil, nil, err
		}
		return f, f.Close, nil
	}
	return cmd.ErrOrStderr(), func() error { return nil }, nil
}

// startLink builds the link the flags describe, for run and serve. ctx
// ends on SIGINT/SIGTERM; the caller defers stop and l.Close.
func startLink(cmd *cobra.Command, holdP bool) (l *netem.Link, ctx context.Context, stop context.CancelFunc, err error) {
	conf, err := linkConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	conf.HoldP = holdP
	ctx, cancel := signalContext(cmd.Context())
	stopProfile, err := startCPUProfile(cfg.GetString("cpuprofile"))
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	stop = func() { stopProfile(); cancel() }
	if l, err = netem.Start(ctx, conf); err != nil {
		stop()
		return nil, nil, nil, err
	}
	return l, ctx, stop, nil
}

// startCPUProfile writes a Go CPU profile of this process (the forwarder:
// with a link running it is nearly all of the process's work) to path
// until the returned function is called; "" profiles nothing. It is a
// debugging aid for the forwarder's cost (issue 14: profile first):
// `go tool pprof -top tristore FILE`.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "netem: --cpuprofile %s: %v\n", path, err)
			}
		})
	}, nil
}

// closeLink removes the link and prints its final counters (to
// --counters-file or stderr). The counters are read first: they describe
// the whole run, including what teardown cuts off.
func closeLink(cmd *cobra.Command, l *netem.Link) (closeErr, printErr error) {
	counters := l.Counters()
	closeErr = l.Close()
	w, closeW, err := counterWriter(cmd)
	if err != nil {
		return closeErr, err
	}
	return closeErr, errors.Join(printCounters(w, counters), closeW())
}

func runNetemRun(cmd *cobra.Command, args []string) error {
	// This process only forwards: client and server are other programs.
	// One P, held by the link's loop between its yields, saves a thread
	// hand-off per yield (netem.Config.HoldP).
	runtime.GOMAXPROCS(1)
	l, ctx, stop, err := startLink(cmd, true)
	if err != nil {
		return err
	}
	defer stop()
	defer l.Close()
	stderr := cmd.ErrOrStderr()
	fmt.Fprintf(stderr, "netem: link %s <-> %s (namespaces %s, %s)\n%s\n", l.ClientAddr(), l.ServerAddr(),
		l.Namespace(netem.ClientSide), l.Namespace(netem.ServerSide), describeLink(l.Config()))
	env := linkEnv(l)

	var srv *child
	var srvDone <-chan struct{} // nil (never ready) without a server command
	if sc := cfg.GetString("server-cmd"); sc != "" {
		srv, err = startChild(l.Command(context.Background(), netem.ServerSide, "sh", "-c", sc), cmd.OutOrStdout(), stderr, env)
		if err != nil {
			return fmt.Errorf("server command: %w", err)
		}
		defer srv.stop()
		srvDone = srv.done
		if ra := cfg.GetString("server-ready"); ra != "" {
			if err := waitReady(ctx, l, ra, cfg.GetDuration("server-ready-timeout"), srv); err != nil {
				return err
			}
		}
	}

	clCmd := l.Command(ctx, netem.ClientSide, args[0], args[1:]...)
	clCmd.Stdin = os.Stdin
	cl, err := startChild(clCmd, cmd.OutOrStdout(), stderr, env)
	if err != nil {
		return fmt.Errorf("client command: %w", err)
	}
	defer cl.stop()
	var runErr error
	select {
	case <-cl.done:
		runErr = cl.err
	case <-srvDone:
		cl.stop()
		runErr = fmt.Errorf("server command exited before the client: %v", srv.err)
	case err := <-l.Err():
		cl.stop()
		runErr = err
	}
	srv.stop()
	closeErr, err := closeLink(cmd, l)
	if closeErr != nil {
		return fmt.Errorf("netem: teardown: %w", closeErr)
	}
	if ctx.Err() != nil {
		return &exitError{code: 130, err: errors.New("netem run: interrupted; link removed")}
	}
	var ee *exec.ExitError
	if errors.As(runErr, &ee) {
		code := ee.ExitCode()
		if code < 0 {
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
		return &exitError{code: code, err: fmt.Errorf("client command %s: %w", args[0], runErr)}
	}
	if runErr != nil {
		return runErr
	}
	return err
}

// waitReady dials addr from the client namespace until it answers.
func waitReady(ctx context.Context, l *netem.Link, addr string, timeout time.Duration, srv *child) error {
	deadline := time.Now().Add(timeout)
	for i := 0; time.Now().Before(deadline) && i < 100000; i++ {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := l.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-srv.done:
			return fmt.Errorf("server command exited before %s was ready: %v", addr, srv.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("server not ready at %s after %v", addr, timeout)
}

func newNetemServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [flags] [-- SERVE-FLAGS...]",
		Short: "Run `tristore serve` in the server namespace of an emulated link until signalled (root)",
		Long: `serve creates the link and runs "tristore serve" in the server namespace with
every protocol bound to the server address (default ports kept), prints the
addresses and namespace names, and stays up until SIGINT/SIGTERM (or until the
server exits). Run clients with: ip netns exec <client-namespace> CMD.
Flags after -- go to "tristore serve" (e.g. -- --data /srv/tristore).`,
		RunE: runNetemServe,
	}
	addLinkFlags(cmd.Flags())
	cmd.Flags().String("counters-file", "", "write the counters here instead of stderr")
	cmd.Flags().String("cpuprofile", "", "debug: write a Go CPU profile of the forwarder (this process) for the link's lifetime to this file")
	return cmd
}

func runNetemServe(cmd *cobra.Command, extra []string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	l, ctx, stop, err := startLink(cmd, false)
	if err != nil {
		return err
	}
	defer stop()
	defer l.Close()
	tmp, err := os.MkdirTemp("", "tristore-serve-ready-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ready := filepath.Join(tmp, "ready.json")
	given := strings.Join(extra, " ")
	host := l.ServerAddr().String()
	args := []string{"serve", "--ready-file", ready}
	rebind := func(flag, def string) {
		if def == "" || def == "off" || strings.Contains(given, "--"+flag) {
			return
		}
		_, port, err := net.SplitHostPort(def)
		if err != nil {
			return
		}
		args = append(args, "--"+flag+"="+net.JoinHostPort(host, port))
	}
	rebind("admin-addr", "127.0.0.1:9001")
	for _, s := range frontendSpecs {
		rebind(s.Name+"-addr", s.DefaultAddr)
	}
	args = append(args, extra...)
	srv, err := startChild(l.Command(context.Background(), netem.ServerSide, exe, args...), cmd.OutOrStdout(), cmd.ErrOrStderr(), linkEnv(l))
	if err != nil {
		return fmt.Errorf("tristore serve: %w", err)
	}
	defer srv.stop()

	out := cmd.OutOrStdout()
	var addrs map[string]string
	deadline := time.After(60 * time.Second)
wait:
	for {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &addrs) == nil {
			break
		}
		select {
		case <-srv.done:
			return fmt.Errorf("tristore serve exited during start: %v", srv.err)
		case <-ctx.Done():
			break wait
		case <-deadline:
			return errors.New("tristore serve did not become ready within 60s")
		case <-time.After(100 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "netem serve: client namespace %s (%s), server namespace %s (%s)\n%s\n",
		l.Namespace(netem.ClientSide), l.ClientAddr(), l.Namespace(netem.ServerSide), l.ServerAddr(), describeLink(l.Config()))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for name, a := range addrs {
		fmt.Fprintf(tw, "  %s\t%s\n", name, a)
	}
	tw.Flush()
	fmt.Fprintf(out, "run clients with: ip netns exec %s CMD   (stop with Ctrl-C / SIGTERM)\n", l.Namespace(netem.ClientSide))

	var runErr error
	select {
	case <-ctx.Done():
	case <-srv.done:
		runErr = fmt.Errorf("tristore serve exited: %v", srv.err)
	case err := <-l.Err():
		runErr = err
	}
	srv.stop()
	closeErr, err := closeLink(cmd, l)
	return errors.Join(runErr, closeErr, err)
}

func newNetemPresetsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "presets",
		Short: "List the link presets",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "preset\trate\tone-way delay\tone-way jitter σ\tloss\treorder\tdescription")
			for _, n := range netem.PresetNames() {
				p := netem.Presets[n]
				fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%g%%\t%v\t%s\n", n, netem.FormatRate(p.Dir.Rate), p.Dir.Delay, p.Dir.Jitter, p.Dir.Loss*100, p.Reorder, p.Help)
			}
			fmt.Fprintln(tw, "custom\t--rate\t--delay\t--jitter\t--loss\t--reorder\tany preset plus flags; --up-*/--down-* for one direction")
			return tw.Flush()
		},
	}
}

func newNetemProxyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proxy --listen 127.0.0.1:P --target 127.0.0.1:Q [flags]",
		Short: "No-root fallback: a TCP proxy with rate, delay and jitter (no packet loss)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conf, err := linkConfig()
			if err != nil {
				return err
			}
			listen, target := cfg.GetString("listen"), cfg.GetString("target")
			if target == "" {
				return errors.New("netem proxy: --target is required")
			}
			p, err := netem.NewProxy(listen, target, conf)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			errw := cmd.ErrOrStderr()
			fmt.Fprintln(errw, netem.ProxyNote)
			if conf.Up.Loss > 0 || conf.Down.Loss > 0 {
				fmt.Fprintf(errw, "netem proxy: the loss setting (%g%% up, %g%% down) is IGNORED\n", conf.Up.Loss*100, conf.Down.Loss*100)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "netem proxy: listening on %s -> %s\n%s\n", p.Addr(), target, describeLink(conf))
			err = p.Serve(ctx)
			if perr := printCounters(errw, p.Counters()); err == nil {
				err = perr
			}
			return err
		},
	}
	addLinkFlags(cmd.Flags())
	cmd.Flags().String("listen", "127.0.0.1:0", "address to listen on")
	cmd.Flags().String("target", "", "address to forward connections to")
	return cmd
}

func newNetemCleanupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove leftover ts-* namespaces and devices (of crashed netem runs) (root)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			removed, err := netem.Cleanup(!cfg.GetBool("all"))
			for _, n := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), "removed", n)
			}
			if err == nil && len(removed) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing to clean up")
			}
			return err
		},
	}
	cmd.Flags().Bool("all", false, "also remove namespaces whose creating process still runs (breaks links in use)")
	return cmd
}

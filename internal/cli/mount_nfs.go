package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/fusefs/nfstree"
	"github.com/tristore/tristore/proto/nfs4"
)

// `tristore mount nfs://host:port/export DIR`: the export through FUSE over
// the userspace NFS v3 client (fusefs/nfstree); with ?version=4.1 over an
// NFSv4.1 session, the path then in the server's v4 namespace.

func init() {
	registerMount(mountSpec{
		Scheme: "nfs",
		Help:   "nfs://host[:port]/export[?version=4.1&mountport=P&rsize=N&wsize=N&access=default|sync|direct&hard|soft&timeo=D&retrans=N]  NFS v3 export (version=4.1: NFSv4.1, path in the server's v4 namespace, mountport unused)",
		Flags: func(fs *pflag.FlagSet) {
			fs.Uint16("nfs-mountport", 0, "nfs: MOUNT port if not the NFS port (ganesha/knfsd: 20048); URL mountport= wins")
			sizeFlag(fs, "nfs-rsize", 1<<20, "nfs: READ size (capped by the server's FSINFO); URL rsize= (bytes) wins")
			sizeFlag(fs, "nfs-wsize", 1<<20, "nfs: WRITE size (capped by the server's FSINFO); URL wsize= (bytes) wins")
			fs.String("nfs-access", "default", "nfs: access form for every open: default (per open flags: O_DIRECT, O_SYNC, else write-back), sync (all writes FILE_SYNC), direct (no page cache, write-through); URL access= wins")
			fs.Duration("nfs-attr-timeout", time.Second, "nfs: how long the kernel caches attributes and names (0 = no caching)")
			sizeFlag(fs, "nfs-write-behind", 8<<20, "nfs: bytes an open file buffers before sending them UNSTABLE (default access form; the client's write buffer, seed 003)")
			sizeFlag(fs, "nfs-commit-every", 64<<20, "nfs: uncommitted bytes per open file that force a COMMIT before close/fsync")
			fs.Bool("nfs-caller-creds", true, "nfs: send each calling process's uid/gid/groups (AUTH_SYS) like the kernel client, so the server's permissions and root_squash apply per user; false: one identity (the URL's uid/gid or this process's) for all, owners set by SETATTR")
			fs.Bool("nfs-soft", false, "nfs: soft mount: a call fails with EIO once the server has not answered for --nfs-timeo and --nfs-retrans (nfs(5)); default hard: wait until the server is back (interruptible); URL soft / hard wins")
			fs.Uint("nfs-timeo", 600, "nfs: tenths of a second the first attempt of a call may take; each retry waits one timeo longer (nfs(5) timeo); URL timeo= wins")
			fs.Uint("nfs-retrans", 2, "nfs: soft mount: retries after the first attempt before EIO (nfs(5) retrans); URL retrans= wins")
			fs.Bool("nfs-debug", false, "nfs: log every FUSE request")
		},
		Run: runMountNFS,
	})
}

func runMountNFS(cmd *cobra.Command, u *url.URL, dir string) error {
	defaults := url.Values{}
	if p := cfg.GetUint("nfs-mountport"); p != 0 {
		defaults.Set("mountport", strconv.FormatUint(uint64(p), 10))
	}
	for _, k := range []string{"rsize", "wsize"} {
		n, err := cfgSize("nfs-"+k, 0, 1<<32-1)
		if err != nil {
			return err
		}
		defaults.Set(k, strconv.FormatInt(n, 10))
	}
	defaults.Set("access", cfg.GetString("nfs-access"))
	if cfg.GetBool("nfs-soft") {
		defaults.Set("soft", "1")
	} else {
		defaults.Set("hard", "1") // as Linux NFS mounts
	}
	defaults.Set("timeo", strconv.FormatUint(uint64(cfg.GetUint("nfs-timeo")), 10))
	defaults.Set("retrans", strconv.FormatUint(uint64(cfg.GetUint("nfs-retrans")), 10))
	nu, err := nfsURLFrom(u, defaults)
	if err != nil {
		return err
	}
	form := nu.Query.Get("access")
	switch form {
	case "default", "sync", "direct":
	default:
		return fmt.Errorf("access=%q: want default, sync or direct", form)
	}
	wb, err := cfgSize("nfs-write-behind", 4096, 1<<40)
	if err != nil {
		return err
	}
	ce, err := cfgSize("nfs-commit-every", 4096, 1<<40)
	if err != nil {
		return err
	}
	if ce < wb {
		return fmt.Errorf("--nfs-write-behind %d must be <= --nfs-commit-every %d", wb, ce)
	}
	at := cfg.GetDuration("nfs-attr-timeout")
	opts := nfstree.Options{
		AttrTimeout: at,
		NoCache:     at == 0,
		Form:        form,
		Debug:       cfg.GetBool("nfs-debug"),
		CallerCreds: cfg.GetBool("nfs-caller-creds"),
		WriteBehind: int(wb),
		CommitEvery: int(ce),
		FsName:      "nfs://" + nu.Addr + nu.Path,
	}
	ctx := cmd.Context()
	var tree *nfstree.FS
	var giveUp func()
	var rsize, wsize uint32
	if nu.V4 {
		// NFSv4.1: one session; the path is in the server's v4 namespace.
		dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		c, err := nfs.Dial4(dctx, nu.Addr, nu.Opts)
		if err != nil {
			cancel()
			return err
		}
		defer func() {
			// A courtesy to the server (it would expire the session):
			// bounded, so a down server does not hold up the exit.
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			c.Close(cctx)
		}()
		root, a, err := c.LookupPath(dctx, nu.Path)
		cancel()
		if err != nil {
			return fmt.Errorf("mount: %w", err)
		}
		if a.Type != nfs4.TypeDir {
			return fmt.Errorf("mount: %s is not a directory", nu.Path)
		}
		opts.FsName += "?version=4.1"
		if tree, err = nfstree.New4(c, root, opts); err != nil {
			return err
		}
		defer tree.Close()
		giveUp, rsize, wsize = tree.GiveUp, c.Rsize(), c.Wsize()
	} else {
		dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		s, err := openNFS(dctx, nu)
		cancel()
		if err != nil {
			return err
		}
		defer s.Close()
		// A path below the export mounts that subdirectory.
		if s.Rel != "" {
			fh, a, err := s.C.LookupPath(ctx, s.Rel)
			if err != nil {
				return fmt.Errorf("mount: %s in export %s: %w", s.Rel, s.Export, err)
			}
			if a.Type != nfs.TypeDir {
				return fmt.Errorf("mount: %s is a %s, not a directory", nu.Path, a.Type)
			}
			opts.Root = fh
		}
		if tree, err = nfstree.New(s.C, opts); err != nil {
			return err
		}
		giveUp, rsize, wsize = s.C.GiveUp, s.C.Rsize(), s.C.Wsize()
	}
	mctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	srv, err := tree.Mount(mctx, dir)
	cancel()
	if err != nil {
		return fmt.Errorf("mount %s on %s: %w", u.Redacted(), dir, err)
	}
	slog.Info("mounted", "url", u.Redacted(), "dir", dir, "version", map[bool]string{false: "3", true: "4.1"}[nu.V4], "rsize", rsize, "wsize", wsize, "access", form,
		"hard", nu.Opts.Hard, "timeo", nu.Opts.Timeout, "retrans", nu.Query.Get("retrans"))
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		// Unmounted from outside (fusermount3 -u / umount).
	case <-ctx.Done():
		// A hard mount would keep calls to a down server waiting, and the
		// programs making them keep the mount busy: let them fail (EIO)
		// so the unmount goes through. Calls the server answers finish.
		giveUp()
		if err := srv.Unmount(); err != nil {
			slog.Warn("unmount failed; is the mount busy?", "dir", dir, "err", err)
			// Bounded retries while programs leave the mount.
			for i := 0; i < 20 && err != nil; i++ {
				time.Sleep(500 * time.Millisecond)
				err = srv.Unmount()
			}
			if err != nil {
				// Still busy after 10 s: detach it (umount -l) so it
				// disappears once the last user leaves, instead of leaving
				// a dead mount behind when this process exits.
				if derr := syscall.Unmount(dir, syscall.MNT_DETACH); derr != nil {
					return fmt.Errorf("unmount %s: %w (lazy unmount: %v)", dir, err, derr)
				}
				slog.Warn("mount was busy; detached lazily", "dir", dir)
			}
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("unmount %s: FUSE server did not stop", dir)
		}
	}
	slog.Info("unmounted", "dir", dir)
	return nil
}

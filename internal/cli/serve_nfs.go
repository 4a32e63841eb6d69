package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/tristore/tristore/frontend"
	"github.com/tristore/tristore/frontend/nfs"
	"github.com/tristore/tristore/store"
)

// The NFS front end: MOUNT v3, NFS v3 and NFS v4.0/4.1 on one TCP port
// (default 127.0.0.1:2049), serving the store's directory tree through vfs.
func init() {
	registerFrontend(frontendSpec{
		Name:        "nfs",
		DefaultAddr: "127.0.0.1:2049",
		Help:        "NFS v3 + MOUNT v3 + NFS v4.0/4.1 listen address, one TCP port for all (\"off\" to disable)",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringArray("nfs-export", nil, "export PATH=OPTIONS, repeatable; PATH is / or /bucket; options: rw|ro, sync|async, "+
				"clients=CIDR[+CIDR...], root_squash|no_root_squash|all_squash, anonuid=N, anongid=N "+
				"(default \""+nfs.DefaultExport+"\"; in the config file a list, in TRISTORE_NFS_EXPORT space-separated)")
			fs.String("nfs-portmap-addr", "", "also answer portmapper GETPORT (program 100000 v2) here, e.g. 127.0.0.1:111 (default off)")
			fs.Duration("nfs4-lease", 90*time.Second, "NFSv4 lease time: a client silent for longer loses its opens and locks")
			fs.Duration("nfs4-grace", 0, "NFSv4 grace period after a restart in which clients known before it reclaim their state (0: one lease; negative: none)")
		},
		Build: buildNFS,
	})
}

func buildNFS(ctx context.Context, env *ServeEnv) (frontend.Server, error) {
	lp, ok := env.Store.(store.LocalPather)
	if !ok {
		return nil, errors.New("the NFS server needs a store kept in a local directory tree (store.LocalPather)")
	}
	var exports []nfs.Export
	for _, s := range cfg.GetStringSlice("nfs-export") {
		e, err := nfs.ParseExport(s)
		if err != nil {
			return nil, fmt.Errorf("--nfs-export: %w", err)
		}
		exports = append(exports, e)
	}
	return nfs.New(nfs.Options{
		DataDir:     lp.Root(),
		Exports:     exports,
		PortmapAddr: cfg.GetString("nfs-portmap-addr"),
		Log:         env.Log,
		Metrics:     env.Metrics,
		V4Lease:     cfg.GetDuration("nfs4-lease"),
		V4Grace:     cfg.GetDuration("nfs4-grace"),
	})
}

package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tristore/tristore/frontend"
	"github.com/tristore/tristore/frontend/s3"
	"github.com/tristore/tristore/iam"
)

// The S3 front end: on by default on 127.0.0.1:9000, with the users kept
// by iam in the data directory. On first start (no admin yet, no keys
// given) root keys are generated, saved 0600 under DATA/.tristore/iam and
// printed once to stderr; they are never logged.
func init() {
	registerFrontend(frontendSpec{
		Name:        "s3",
		DefaultAddr: "127.0.0.1:9000",
		Help:        "S3 API listen address (\"off\" to disable)",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("s3-region", "us-east-1", "S3 region reported to clients and required in SigV4 credential scopes")
			fs.Bool("s3-anonymous", false, "let unsigned S3 requests act with full access (throw-away setups only; without it unsigned requests get only what public ACLs/policies grant)")
			fs.String("s3-domain", "", "comma-separated domains for virtual-host-style requests (Host: <bucket>.<domain>)")
			fs.String("access-key", "", "access key of the admin user (with --secret-key; env TRISTORE_ACCESS_KEY); default: generated on first start")
			fs.String("secret-key", "", "secret key of the admin user (env TRISTORE_SECRET_KEY)")
			fs.String("s3-tls-cert", "", "PEM certificate (chain) file: serve S3 over HTTPS (with --s3-tls-key)")
			fs.String("s3-tls-key", "", "PEM private key file for --s3-tls-cert")
		},
		Build: buildS3,
	})
}

// sseKeyFile is where the SSE-S3 server key lives: beside the IAM master
// key under DATA/.tristore (hidden from every view), created 0600 on first use.
func sseKeyFile(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	return filepath.Join(dataDir, ".tristore", "sse", "server.key")
}

func buildS3(ctx context.Context, env *ServeEnv) (frontend.Server, error) {
	warnNotBuckets(env.Log, env.Store)
	users, err := iam.Open(env.DataDir)
	if err != nil {
		return nil, fmt.Errorf("opening users: %w", err)
	}
	u, secret, created, err := users.EnsureRoot(cfg.GetString("access-key"), cfg.GetString("secret-key"))
	if err != nil {
		return nil, fmt.Errorf("admin user: %w", err)
	}
	if created {
		fmt.Fprintf(os.Stderr, "tristore: created admin user %q (shown once; also saved in %s, mode 0600)\n  access key: %s\n  secret key: %s\n",
			u.Name, iam.RootCredentialsPath(env.DataDir), u.AccessKey, secret)
	}
	region := cfg.GetString("s3-region")
	var domains []string
	for _, d := range strings.Split(cfg.GetString("s3-domain"), ",") {
		if d = strings.TrimSpace(d); d != "" {
			domains = append(domains, d)
		}
	}
	var tlsCfg *tls.Config
	certFile, keyFile := cfg.GetString("s3-tls-cert"), cfg.GetString("s3-tls-key")
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("set both --s3-tls-cert and --s3-tls-key, or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("s3 TLS: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return s3.New(env.Store, s3.Options{
		TLS:            tlsCfg,
		Region:         region,
		AllowAnonymous: cfg.GetBool("s3-anonymous"),
		VirtualHosts:   domains,
		Log:            env.Log,
		Metrics:        env.Metrics,
		Auth:           s3.NewSigV4Auth(users, region),
		Authz:          s3.NewPolicyAuthz(),
		SSEKeyFile:     sseKeyFile(env.DataDir),
	})
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/tristore/tristore/frontend"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	wire "github.com/tristore/tristore/proto/iscsi"
)

// The iSCSI front end: every volume (see `tristore volume`) is LUN 0 of
// the target iqn.2026-11.io.tristore:BUCKET:NAME, on 127.0.0.1:3260 by
// default. CHAP: --iscsi-chap-user/secret make one-way CHAP mandatory;
// --iscsi-chap-mutual-user/secret are what the target answers with when an
// initiator asks for mutual CHAP; --iscsi-chap-file sets them per target.
func init() {
	registerFrontend(frontendSpec{
		Name:        "iscsi",
		DefaultAddr: "127.0.0.1:3260",
		Help:        "iSCSI target listen address (\"off\" to disable); each volume is LUN 0 of iqn.2026-11.io.tristore:BUCKET:NAME",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("iscsi-chap-user", "", "require one-way CHAP: the user name initiators must log in with")
			fs.String("iscsi-chap-secret", "", "require one-way CHAP: the initiators' secret (env TRISTORE_ISCSI_CHAP_SECRET)")
			fs.String("iscsi-chap-mutual-user", "", "mutual CHAP: the user name the target answers with")
			fs.String("iscsi-chap-mutual-secret", "", "mutual CHAP: the target's secret")
			fs.String("iscsi-chap-file", "", "per-target CHAP file: lines \"IQN USER SECRET [MUTUAL-USER MUTUAL-SECRET]\" (\"*\" = default)")
			fs.Int("iscsi-queue-depth", 128, "commands in flight per session (CmdSN window)")
			sizeFlag(fs, "iscsi-max-recv-data-segment", 256<<10, "MaxRecvDataSegmentLength the target declares (512 to 2^24-1 bytes, RFC 7143)")
			sizeFlag(fs, "iscsi-max-burst", 1<<20, "MaxBurstLength the target offers (512 to 2^24-1 bytes)")
			fs.Duration("iscsi-nop-interval", 30*time.Second, "ping idle connections with NOP-In this often (0 disables)")
			raidServeFlags(fs)
			diskServeFlags(fs)
		},
		Build: buildISCSI,
	})
}

// VolumeIQN is the target name of a volume (for `tristore volume` output).
func VolumeIQN(bucket, name string) string { return iscsitgt.TargetName(bucket, name) }

func buildISCSI(ctx context.Context, env *ServeEnv) (frontend.Server, error) {
	chap := iscsitgt.CHAPConfig{
		Initiator: wire.CHAPCredentials{User: cfg.GetString("iscsi-chap-user"), Secret: cfg.GetString("iscsi-chap-secret")},
		Target:    wire.CHAPCredentials{User: cfg.GetString("iscsi-chap-mutual-user"), Secret: cfg.GetString("iscsi-chap-mutual-secret")},
	}
	if chap.Initiator.Set() != (chap.Initiator.Secret != "") {
		return nil, fmt.Errorf("--iscsi-chap-user and --iscsi-chap-secret go together")
	}
	if chap.Target.Set() != (chap.Target.Secret != "") {
		return nil, fmt.Errorf("--iscsi-chap-mutual-user and --iscsi-chap-mutual-secret go together")
	}
	var per map[string]iscsitgt.CHAPConfig
	if f := cfg.GetString("iscsi-chap-file"); f != "" {
		var err error
		if per, err = iscsitgt.LoadCHAPFile(f); err != nil {
			return nil, err
		}
	}
	mrdsl, err := cfgSize("iscsi-max-recv-data-segment", 512, 1<<24-1)
	if err != nil {
		return nil, err
	}
	burst, err := cfgSize("iscsi-max-burst", 512, 1<<24-1)
	if err != nil {
		return nil, err
	}
	specs, err := parseRaidSpecs(cfg.GetStringSlice("raid"))
	if err != nil {
		return nil, err
	}
	// RAID arrays (--raid) and volumes on data disks (--disks) are served
	// by the gateway beside the remote volumes.
	var extra iscsitgt.ExtraVolumes = &cloudVolumes{data: env.DataDir, log: env.Log}
	gw := newGateway(env.Log, extra)
	if err := startRaidGateway(ctx, gw, specs); err != nil {
		return nil, errors.Join(err, gw.close())
	}
	if err := openDiskVolumes(ctx, env.Log, env.DataDir, gw); err != nil {
		return nil, errors.Join(err, gw.close())
	}
	if len(gw.arrays) > 0 {
		extra = gw
	} else {
		gw.cancel()
		gw = nil
	}
	srv, err := iscsitgt.New(iscsitgt.Config{
		Store:                    env.Store,
		Log:                      env.Log,
		CHAP:                     chap,
		PerTarget:                per,
		QueueDepth:               cfg.GetInt("iscsi-queue-depth"),
		MaxRecvDataSegmentLength: int(mrdsl),
		MaxBurstLength:           int(burst),
		NopInterval:              cfg.GetDuration("iscsi-nop-interval"),
		Extra:                    extra,
	})
	switch {
	case err != nil && gw != nil:
		return nil, errors.Join(err, gw.close())
	case err != nil:
		return nil, err
	case gw != nil:
		return &gatewayServer{Server: srv, g: gw}, nil
	}
	return srv, nil
}

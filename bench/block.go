package bench

import (
	"github.com/tristore/tristore/blockdev"
)

// OpenBlock drives dev — any blockdev.Device: a RAID volume (raid.Array),
// a file LUN, an iSCSI session — the way the iscsi:// driver drives a LUN:
// no file system, each file of a run a region of the device (aligned to
// Alignment), THE DEVICE'S DATA OVERWRITTEN from offset 0 on. Access forms
// default (writes, Flush at Sync/Close) and sync (every write with FUA if
// dev is a blockdev.FUAWriter, else a write and a Flush). target names the
// device in run.json and messages (e.g. "raid5://4x64MiB"); protocol is
// what run.json and the report call it (e.g. "raid5").
//
// Give it to Execute as Config.Driver (Config.Target is then only the
// name); Execute closes it, which closes dev:
//
//	d := bench.OpenBlock(array, "raid5://4x64MiB", "raid5")
//	run, err := bench.Execute(ctx, bench.Config{Suite: "iozone", Target: d.Target(), Driver: d,
//		FileSize: 64 << 20, Out: dir})
func OpenBlock(dev blockdev.Device, target, protocol string) *ISCSI {
	return &ISCSI{s: dev, proto: protocol, target: target, files: map[string]region{}, dirs: map[string]bool{}}
}

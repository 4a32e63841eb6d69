package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/blockdev/filelun"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/internal/units"
	"github.com/tristore/tristore/raid"
)

// Local disk layouts (seed 003): `tristore serve --disks D1,D2,... --layout
// independent|raid0|raid5 --disk-volume NAME=SIZE` keeps block volumes on
// several data directories (one per disk) and serves each as LUN 0 of
// iqn.2026-11.io.tristore:-disk:NAME, whatever the layout, so a client
// mounts it with `tristore mount iscsi://` as any other volume.
//
//   - independent: each volume is one file, DISK/tristore-volumes/NAME.img,
//     on the disk holding the fewest volume bytes when it is created (ties:
//     the first such disk), so volumes spread evenly and one disk's loss
//     costs only its own volumes.
//   - raid0, raid5: each volume is an array (package raid, 64 KiB chunk)
//     over one member file per disk, DISK/tristore-volumes/NAME.member;
//     raid5 survives one disk, and starts degraded (with a warning) when a
//     member file is missing.
//
// The layout, the disks and every volume (name, size, and for independent
// its disk) are recorded in DATA/.tristore-disks/layout.json, written when
// the first volume is made: a later start finds each volume where it was
// put, refuses other --disks/--layout values for that data directory, and
// needs no --disk-volume flags to serve the volumes again. A --disk-volume
// that is not yet recorded is created.
//
// What the other views see: these volumes are block devices only. The one
// tree S3 and NFS serve is still --data alone; nothing on the disks is a
// bucket or an object, and S3/NFS buckets are not placed on the disks
// (pinning buckets to disks for S3/NFS is not implemented).

// diskBucket is the IQN's bucket part for disk volumes (a bucket name
// cannot start with '-').
const diskBucket = "-disk"

// DiskVolumeIQN is the target name of a disk volume.
func DiskVolumeIQN(name string) string { return iscsitgt.TargetName(diskBucket, name) }

func diskServeFlags(fs *pflag.FlagSet) {
	fs.StringSlice("disks", nil, "data directories, one per disk, for block volumes laid out by --layout (recorded in DATA/.tristore-disks)")
	fs.String("layout", "", "how --disk-volume volumes use --disks: independent (each volume on one disk, balanced), raid0 or raid5 (each volume striped over all of them)")
	fs.StringArray("disk-volume", nil, "a block volume on --disks, NAME=SIZE, created at start if not yet recorded; served as iqn.2026-11.io.tristore:-disk:NAME LUN 0 (repeatable)")
}

// diskLayout is DATA/.tristore-disks/layout.json.
type diskLayout struct {
	Layout  string       `json:"layout"`
	Disks   []string     `json:"disks"`
	Volumes []diskVolume `json:"volumes"`
}

type diskVolume struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	Disk int    `json:"disk"` // independent: index into Disks; -1 for arrays
}

func diskLayoutPath(data string) string {
	return filepath.Join(data, ".tristore-disks", "layout.json")
}

// loadDiskLayout merges the recorded layout with the flags: the flags may
// repeat what is recorded, add volumes, or be left out.
func loadDiskLayout(data string) (*diskLayout, []diskVolume, error) {
	disks := cfg.GetStringSlice("disks")
	layout := cfg.GetString("layout")
	var want []diskVolume
	for _, v := range cfg.GetStringSlice("disk-volume") {
		name, size, ok := strings.Cut(v, "=")
		if !ok || !filelun.ValidName(name) {
			return nil, nil, fmt.Errorf("--disk-volume %q: want NAME=SIZE, NAME of a-z, 0-9 and '-'", v)
		}
		n, err := units.ParseSize(size)
		if err != nil || n <= 0 || n%512 != 0 {
			return nil, nil, fmt.Errorf("--disk-volume %q: size must be a positive multiple of 512 bytes", v)
		}
		want = append(want, diskVolume{Name: name, Size: n, Disk: -1})
	}
	for i := range disks {
		abs, err := filepath.Abs(disks[i])
		if err != nil {
			return nil, nil, err
		}
		disks[i] = abs
	}
	var rec diskLayout
	b, err := os.ReadFile(diskLayoutPath(data))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(disks) == 0 && layout == "" && len(want) == 0 {
			return nil, nil, nil
		}
		rec = diskLayout{Layout: layout, Disks: disks}
	case err != nil:
		return nil, nil, fmt.Errorf("disk layout: %w", err)
	default:
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, nil, fmt.Errorf("disk layout %s: %w", diskLayoutPath(data), err)
		}
		if layout != "" && layout != rec.Layout {
			return nil, nil, fmt.Errorf("--layout %s: %s was set up with layout %s", layout, data, rec.Layout)
		}
		if len(disks) > 0 && !slices.Equal(disks, rec.Disks) {
			return nil, nil, fmt.Errorf("--disks %s: %s was set up with disks %s (same order)", strings.Join(disks, ","), data, strings.Join(rec.Disks, ","))
		}
	}
	switch {
	case rec.Layout != "independent" && rec.Layout != "raid0" && rec.Layout != "raid5":
		return nil, nil, fmt.Errorf("--layout %q: want independent, raid0 or raid5", rec.Layout)
	case len(rec.Disks) == 0:
		return nil, nil, errors.New("--layout needs --disks DIR,DIR,...")
	case rec.Layout == "raid5" && len(rec.Disks) < 3:
		return nil, nil, fmt.Errorf("--layout raid5 needs at least 3 disks, got %d", len(rec.Disks))
	case len(rec.Disks) > 32:
		return nil, nil, fmt.Errorf("--disks: %d directories (at most 32)", len(rec.Disks))
	}
	var add []diskVolume
	for _, w := range want {
		i := slices.IndexFunc(rec.Volumes, func(v diskVolume) bool { return v.Name == w.Name })
		switch {
		case i < 0 && !slices.ContainsFunc(add, func(v diskVolume) bool { return v.Name == w.Name }):
			add = append(add, w)
		case i >= 0 && rec.Volumes[i].Size != w.Size:
			return nil, nil, fmt.Errorf("--disk-volume %s=%d: it exists with size %d", w.Name, w.Size, rec.Volumes[i].Size)
		}
	}
	return &rec, add, nil
}

func saveDiskLayout(data string, rec *diskLayout) error {
	p := diskLayoutPath(data)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rec, "", "  ")
	tmp := p + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// placeIndependent picks the disk holding the fewest volume bytes.
func placeIndependent(rec *diskLayout) int {
	used := make([]int64, len(rec.Disks))
	for _, v := range rec.Volumes {
		if v.Disk >= 0 && v.Disk < len(used) {
			used[v.Disk] += v.Size
		}
	}
	best := 0
	for i, u := range used {
		if u < used[best] {
			best = i
		}
	}
	return best
}

func volDir(disk string) string { return filepath.Join(disk, "tristore-volumes") }

// memberSize is the member file size for a volume of size bytes striped
// over n disks: the data share rounded up to whole chunks, plus the
// superblock and (RAID-5) the journal.
func memberSize(layout string, n int, size int64) int64 {
	data := n
	over := int64(raid.DataOffset)
	if layout == "raid5" {
		data = n - 1
		over += raid.DefaultJournal
	}
	share := (size + int64(data) - 1) / int64(data)
	share = (share + raid.DefaultChunk - 1) / raid.DefaultChunk * raid.DefaultChunk
	return share + over
}

// createFile makes a new file of size bytes (sparse), refusing to reuse
// one that exists: a volume's data is never overwritten by a create.
func createFile(p string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// openDiskVolumes opens (and first creates) the disk volumes into g.
func openDiskVolumes(ctx context.Context, log *slog.Logger, data string, g *raidGateway) error {
	rec, add, err := loadDiskLayout(data)
	if err != nil || rec == nil {
		return err
	}
	// Record the layout and disks at once, so a later start with other
	// values is refused even before the first volume exists.
	if err := saveDiskLayout(data, rec); err != nil {
		return fmt.Errorf("disk layout: %w", err)
	}
	for _, d := range rec.Disks {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			log.Warn("disks: a data disk is not available", "disk", d, "err", err)
		}
	}
	for _, v := range add {
		if err := createDiskVolume(ctx, log, rec, &v); err != nil {
			return fmt.Errorf("disk volume %s: %w", v.Name, err)
		}
		rec.Volumes = append(rec.Volumes, v)
		if err := saveDiskLayout(data, rec); err != nil {
			return fmt.Errorf("disk layout: %w", err)
		}
	}
	for _, v := range rec.Volumes {
		dev, err := openDiskVolume(ctx, log, rec, v)
		if err != nil {
			return fmt.Errorf("disk volume %s: %w", v.Name, err)
		}
		g.add(v.Name, DiskVolumeIQN(v.Name), dev)
		if a, ok := dev.(*raid.Array); ok {
			g.resume(v.Name, a)
		}
		where := "striped over every disk"
		if v.Disk >= 0 {
			where = rec.Disks[v.Disk]
		}
		log.Info("disks: volume served", "volume", v.Name, "layout", rec.Layout, "size", dev.Size(), "on", where, "target", DiskVolumeIQN(v.Name))
	}
	return nil
}

func createDiskVolume(ctx context.Context, log *slog.Logger, rec *diskLayout, v *diskVolume) error {
	if rec.Layout == "independent" {
		v.Disk = placeIndependent(rec)
		return createFile(filepath.Join(volDir(rec.Disks[v.Disk]), v.Name+".img"), v.Size)
	}
	ms := memberSize(rec.Layout, len(rec.Disks), v.Size)
	var devs []blockdev.Device
	var made []string
	// A create that fails half way removes the member files it made, so
	// the next start can create the volume again.
	undo := func(err error) error {
		closeAll(devs)
		for _, p := range made {
			os.Remove(p)
		}
		return err
	}
	for _, d := range rec.Disks {
		p := filepath.Join(volDir(d), v.Name+".member")
		if err := createFile(p, ms); err != nil {
			return undo(err)
		}
		made = append(made, p)
		dev, err := openFileMember(p, 0)
		if err != nil {
			return undo(err)
		}
		devs = append(devs, dev)
	}
	level := 0
	if rec.Layout == "raid5" {
		level = 5
	}
	a, err := raid.Create(ctx, level, 0, devs)
	if err != nil {
		return undo(err)
	}
	log.Info("disks: volume created", "volume", v.Name, "layout", rec.Layout, "disks", len(rec.Disks), "member_bytes", ms)
	return a.Close()
}

func openDiskVolume(ctx context.Context, log *slog.Logger, rec *diskLayout, v diskVolume) (blockdev.Device, error) {
	if rec.Layout == "independent" {
		if v.Disk < 0 || v.Disk >= len(rec.Disks) {
			return nil, fmt.Errorf("recorded on disk %d of %d", v.Disk, len(rec.Disks))
		}
		return openFileMember(filepath.Join(volDir(rec.Disks[v.Disk]), v.Name+".img"), 0)
	}
	var devs []blockdev.Device
	var missing []string
	for _, d := range rec.Disks {
		p := filepath.Join(volDir(d), v.Name+".member")
		dev, err := openFileMember(p, 0)
		if err != nil {
			log.Warn("disks: member cannot be opened; assembling without it", "volume", v.Name, "member", p, "err", err)
			missing = append(missing, p)
			continue
		}
		devs = append(devs, dev)
	}
	a, err := raid.Assemble(ctx, devs)
	if err != nil {
		closeAll(devs)
		return nil, err
	}
	if st := a.Status(); len(st.Failed) > 0 {
		log.Warn("disks: volume is DEGRADED: one more disk loss stops it; `tristore raid replace` over its member files rebuilds it",
			"volume", v.Name, "failed_slots", st.Failed, "members_not_opened", missing)
	}
	return a, nil
}

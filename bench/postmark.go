package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// postmark (seed 003): PostMark's transaction mix, the same work the
// `postmark` program (J. Katcher, NetApp, v1.5x) does, over any Driver.
// Each instance:
//
//  1. creates a pool of Number files of Low … High bytes (uniform), written
//     in WriteBlock-byte writes (phase "create", op create);
//  2. runs Transactions transactions (phase "transactions"): each is a read
//     of a whole file in ReadBlock-byte reads or an append of 1 … (High −
//     size) bytes to a file (BiasRead in 10 picks the read), then the
//     creation of a new file or the deletion of one (BiasCreate in 10
//     picks the creation); ops read, append, create, delete;
//  3. deletes what is left (phase "delete", op delete).
//
// The random choices are PostMark's own: its Mersenne Twister seeded as
// PostMark seeds it, drawn in PostMark's order, so one instance with
// PostMark's parameters does exactly the requests `postmark` does (the
// same files created, read, appended and deleted, the same bytes):
// TestPostMarkSameWork checks it against the real program. An append to a
// file already at High bytes does nothing (as in PostMark); a run that
// runs out of files fails, as PostMark gives no report then.
//
// Instances (--instances, Params.Threads, powers of two up to 8 scaled)
// run at once, each in its own directory with the same seed (as N copies
// of one PostMark configuration), and start each phase together, so the
// transaction phases overlap; transactions/s of a step is Instances ×
// Transactions ÷ the phase's wall time (run.json's phase, threads =
// instances). --scale shrinks Number and Transactions (never below 50).
//
// How each protocol does a file operation: see FileOps (POSIX: open,
// write/read in blocks, close, never fsync, as PostMark; NFS: in place with
// COMMIT at close, as a kernel client's close-to-open). Drivers without
// FileOps (S3, a raw iSCSI LUN) create with Put, read with Get and append
// by Get + Put of the longer file: an object store has no append, so the
// client rewrites the object (the record's size is still the appended
// bytes, PostMark's count; the wire carries the whole object twice).
//
// Records: one per request; unit 0; threads = instances; worker = the
// instance. Settings (Params.Extra, `tristore bench postmark` flags):
// number, size_low, size_high, transactions, read_block, write_block,
// bias_read, bias_create (0 … 10, -1 turns the pair off), subdirectories,
// seed, buffered.
func init() {
	register(&Suite{
		Name: "postmark",
		Seed: "seed 003 (PostMark)",
		Doc:  "PostMark's create/read/append/delete transaction mix over a pool of 500 files of 500 B … 10 KB, 1 … 8 instances",
		Defaults: func(scale float64) Params {
			pm := DefaultPostMark()
			pm.Number = ScaleCount(pm.Number, scale, min(pm.Number, 50))
			pm.Transactions = ScaleCount(pm.Transactions, scale, min(pm.Transactions, 50))
			return Params{Threads: ScaleThreads([]int{1, 2, 4, 8}, scale), Extra: pm.Settings()}
		},
		Run: runPostMark,
	})
}

// PostMark is one PostMark configuration (PostMark's `set` commands).
type PostMark struct {
	Number       int  // set number: files in the pool
	Low, High    int  // set size: bounds of a file's size in bytes
	Transactions int  // set transactions
	ReadBlock    int  // set read: bytes per read
	WriteBlock   int  // set write: bytes per write
	BiasRead     int  // set bias read: in 10, read rather than append; -1 off
	BiasCreate   int  // set bias create: in 10, create rather than delete; -1 off
	Subdirs      int  // set subdirectories (used when > 1, as PostMark)
	Seed         int  // set seed
	Buffered     bool // set buffering: stdio-buffered I/O
}

// DefaultPostMark is PostMark's defaults.
func DefaultPostMark() PostMark {
	return PostMark{Number: 500, Low: 500, High: 10000, Transactions: 500, ReadBlock: 512, WriteBlock: 512,
		BiasRead: 5, BiasCreate: 5, Subdirs: 0, Seed: 42, Buffered: true}
}

// Settings is pm as the Params.Extra keys the suite reads.
func (pm PostMark) Settings() map[string]string {
	return map[string]string{"number": strconv.Itoa(pm.Number), "size_low": strconv.Itoa(pm.Low), "size_high": strconv.Itoa(pm.High),
		"transactions": strconv.Itoa(pm.Transactions), "read_block": strconv.Itoa(pm.ReadBlock), "write_block": strconv.Itoa(pm.WriteBlock),
		"bias_read": strconv.Itoa(pm.BiasRead), "bias_create": strconv.Itoa(pm.BiasCreate), "subdirectories": strconv.Itoa(pm.Subdirs),
		"seed": strconv.Itoa(pm.Seed), "buffered": strconv.FormatBool(pm.Buffered)}
}

// ParsePostMark reads a configuration from Params.Extra (missing keys keep
// PostMark's defaults) and checks it as PostMark's commands would.
func ParsePostMark(extra map[string]string) (PostMark, error) {
	pm := DefaultPostMark()
	ints := map[string]*int{"number": &pm.Number, "size_low": &pm.Low, "size_high": &pm.High, "transactions": &pm.Transactions,
		"read_block": &pm.ReadBlock, "write_block": &pm.WriteBlock, "bias_read": &pm.BiasRead, "bias_create": &pm.BiasCreate,
		"subdirectories": &pm.Subdirs, "seed": &pm.Seed}
	for k, p := range ints {
		if v, ok := extra[k]; ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return pm, fmt.Errorf("postmark: %s %q: not a number", k, v)
			}
			*p = n
		}
	}
	if v, ok := extra["buffered"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return pm, fmt.Errorf("postmark: buffered %q: want true or false", v)
		}
		pm.Buffered = b
	}
	switch {
	case pm.Number < 1 || pm.Number > 1<<20:
		return pm, fmt.Errorf("postmark: number %d: want 1 … %d files", pm.Number, 1<<20)
	case pm.Low < 1 || pm.High < pm.Low || pm.High > 1<<30:
		return pm, fmt.Errorf("postmark: size %d … %d: want 1 <= low <= high <= 1 GiB", pm.Low, pm.High)
	case pm.Transactions < 1 || pm.Transactions > 1<<30:
		return pm, fmt.Errorf("postmark: transactions %d: want at least 1", pm.Transactions)
	case pm.ReadBlock < 1 || pm.WriteBlock < 1 || pm.ReadBlock > 1<<30 || pm.WriteBlock > 1<<30:
		return pm, fmt.Errorf("postmark: block sizes read %d, write %d: want 1 … 1 GiB", pm.ReadBlock, pm.WriteBlock)
	case pm.BiasRead < -1 || pm.BiasRead > 10 || pm.BiasCreate < -1 || pm.BiasCreate > 10:
		return pm, fmt.Errorf("postmark: biases read %d, create %d: want 0 … 10, or -1 to turn one off", pm.BiasRead, pm.BiasCreate)
	case pm.Subdirs < 0 || pm.Subdirs > 1<<16:
		return pm, fmt.Errorf("postmark: subdirectories %d: want 0 … 65536", pm.Subdirs)
	case pm.Seed < 1:
		return pm, fmt.Errorf("postmark: seed %d: want a positive number (as PostMark)", pm.Seed)
	}
	return pm, nil
}

// mt19937 is the Mersenne Twister exactly as PostMark 1.5x carries it
// (Matsumoto and Nishimura's genrand with the 1998 sgenrand seeding), so
// that the same seed draws the same choices.
type mt19937 struct {
	mt  [624]uint32
	mti int
}

func newMT(seed uint32) *mt19937 {
	m := &mt19937{}
	for i := range m.mt {
		m.mt[i] = seed & 0xffff0000
		seed = 69069*seed + 1
		m.mt[i] |= (seed & 0xffff0000) >> 16
		seed = 69069*seed + 1
	}
	m.mti = len(m.mt)
	return m
}

func (m *mt19937) next() uint32 {
	const n, k = 624, 397
	mag := [2]uint32{0, 0x9908b0df}
	if m.mti >= n {
		var kk int
		for kk = 0; kk < n-k; kk++ {
			y := m.mt[kk]&0x80000000 | m.mt[kk+1]&0x7fffffff
			m.mt[kk] = m.mt[kk+k] ^ y>>1 ^ mag[y&1]
		}
		for ; kk < n-1; kk++ {
			y := m.mt[kk]&0x80000000 | m.mt[kk+1]&0x7fffffff
			m.mt[kk] = m.mt[kk+k-n] ^ y>>1 ^ mag[y&1]
		}
		y := m.mt[n-1]&0x80000000 | m.mt[0]&0x7fffffff
		m.mt[n-1] = m.mt[k-1] ^ y>>1 ^ mag[y&1]
		m.mti = 0
	}
	y := m.mt[m.mti]
	m.mti++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	y ^= y >> 18
	return y
}

// rnd is PostMark's RND(x): 0 for x <= 0 without drawing.
func (m *mt19937) rnd(x int) int {
	if x <= 0 {
		return 0
	}
	return int(m.next() % uint32(x))
}

// pmFile is a slot of PostMark's file table (size 0: free).
type pmFile struct {
	name string
	size int
}

// pmInstance is one PostMark instance's state: its table of 2 × Number
// slots, counters, the source buffer files are written from.
type pmInstance struct {
	pm        PostMark
	dir       string
	rng       *mt19937
	source    []byte
	readBuf   []byte
	table     []pmFile
	allocated int
	created   int
	deleted   int
}

func newPMInstance(pm PostMark, dir string) *pmInstance {
	in := &pmInstance{pm: pm, dir: dir, rng: newMT(uint32(pm.Seed)), table: make([]pmFile, 2*pm.Number)}
	// PostMark fills its source of "readable randomness" first: 2 × High
	// bytes, drawing once per byte.
	in.source = make([]byte, 2*pm.High)
	for i := range in.source {
		in.source[i] = byte(32 + in.rng.rnd(95))
	}
	in.readBuf = make([]byte, pm.High)
	return in
}

// freeSlot is PostMark's find_free_file.
func (in *pmInstance) freeSlot() int {
	n := len(in.table)
	if in.allocated < n && in.table[in.allocated].size == 0 {
		in.allocated++
		return in.allocated - 1
	}
	for i := range in.table {
		if in.table[i].size == 0 {
			in.allocated = i + 1
			return i
		}
	}
	return -1
}

// errPMNoFile is find_used_file drawing too long (PostMark would loop
// forever on an empty table; the out-of-files check prevents it).
var errPMNoFile = errors.New("postmark: no file in use found")

// usedSlot is PostMark's find_used_file, bounded.
func (in *pmInstance) usedSlot() (int, error) {
	for range 100_000_000 {
		if i := in.rng.rnd(len(in.table)); in.table[i].size != 0 {
			return i, nil
		}
	}
	return 0, errPMNoFile
}

// create is PostMark's create_file: name, then size, then the write.
func (in *pmInstance) create(ctx context.Context, rec *Recorder, fo FileOps) error {
	slot := in.freeSlot()
	if slot < 0 {
		return nil // the table is full: PostMark does nothing
	}
	name := in.dir + "/"
	if in.pm.Subdirs > 1 {
		name += fmt.Sprintf("s%d/", in.rng.rnd(in.pm.Subdirs))
	}
	in.created++
	name += strconv.Itoa(in.created)
	size := in.pm.Low + in.rng.rnd(in.pm.High-in.pm.Low)
	in.table[slot] = pmFile{name: name, size: size}
	return rec.Do(ctx, "create", func(ctx context.Context) (int64, error) {
		return int64(size), fo.CreateFile(ctx, name, in.source[:size], in.io())
	})
}

func (in *pmInstance) io() FileIO {
	return FileIO{ReadBlock: in.pm.ReadBlock, WriteBlock: in.pm.WriteBlock, Buffered: in.pm.Buffered}
}

// remove is PostMark's delete_file.
func (in *pmInstance) remove(ctx context.Context, r *Runner, rec *Recorder, slot int) error {
	f := in.table[slot]
	if f.size == 0 {
		return nil
	}
	in.table[slot].size = 0
	in.deleted++
	return rec.Do(ctx, "delete", func(ctx context.Context) (int64, error) {
		return 0, r.D.Delete(ctx, f.name)
	})
}

// transaction is one of PostMark's run_transactions loop.
func (in *pmInstance) transaction(ctx context.Context, r *Runner, rec *Recorder, fo FileOps) error {
	if in.pm.BiasRead != -1 {
		read := in.rng.rnd(10) < in.pm.BiasRead
		slot, err := in.usedSlot()
		if err != nil {
			return err
		}
		f := &in.table[slot]
		if read {
			size := f.size
			if err := rec.Do(ctx, "read", func(ctx context.Context) (int64, error) {
				n, err := fo.ReadFile(ctx, f.name, in.readBuf[:size], in.io())
				if err == nil && n != size {
					err = fmt.Errorf("short read of %s: %d of %d bytes", f.name, n, size)
				}
				return int64(n), err
			}); err != nil {
				return err
			}
		} else if f.size < in.pm.High {
			block := in.rng.rnd(in.pm.High-f.size) + 1
			old := f.size
			f.size += block
			if err := rec.Do(ctx, "append", func(ctx context.Context) (int64, error) {
				return int64(block), fo.AppendFile(ctx, f.name, int64(old), in.source[:block], in.io())
			}); err != nil {
				return err
			}
		}
	}
	if in.pm.BiasCreate != -1 {
		if in.rng.rnd(10) < in.pm.BiasCreate {
			return in.create(ctx, rec, fo)
		}
		slot, err := in.usedSlot()
		if err != nil {
			return err
		}
		return in.remove(ctx, r, rec, slot)
	}
	return nil
}

func runPostMark(ctx context.Context, r *Runner) error {
	pm, err := ParsePostMark(r.P.Extra)
	if err != nil {
		return err
	}
	fo := fileOpsOf(r.D)
	r.W.Update(func(run *Run) {
		run.Params.Extra["file_ops"] = fo.describe()
	})
	for _, n := range r.P.Threads {
		if n < 1 || n > 1024 {
			return fmt.Errorf("postmark: %d instances: want 1 … 1024", n)
		}
		if err := postMarkStep(ctx, r, pm, n, fo); err != nil {
			return err
		}
	}
	return nil
}

// postMarkStep runs n instances at once through PostMark's three phases.
func postMarkStep(ctx context.Context, r *Runner, pm PostMark, n int, fo fileOps) error {
	base := r.Path(fmt.Sprintf("postmark-x%d", n))
	if err := r.Setup("mkdir "+base, r.D.Mkdir(ctx, base)); err != nil {
		return err
	}
	ins := make([]*pmInstance, n)
	for w := range ins {
		dir := fmt.Sprintf("%s/i%d", base, w)
		if err := r.Setup("mkdir "+dir, r.D.Mkdir(ctx, dir)); err != nil {
			return err
		}
		if pm.Subdirs > 1 {
			for s := range pm.Subdirs {
				sub := fmt.Sprintf("%s/s%d", dir, s)
				if err := r.Setup("mkdir "+sub, r.D.Mkdir(ctx, sub)); err != nil {
					return err
				}
			}
		}
		ins[w] = newPMInstance(pm, dir)
	}
	if err := r.Programs(ctx, Step{Phase: "create", Threads: n}, n*pm.Number,
		func(ctx context.Context, w int, rec *Recorder) error {
			for range pm.Number {
				if err := ins[w].create(ctx, rec, fo); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
		return err
	}
	if err := r.Programs(ctx, Step{Phase: "transactions", Threads: n}, 2*n*pm.Transactions,
		func(ctx context.Context, w int, rec *Recorder) error {
			in := ins[w]
			for i := range pm.Transactions {
				if in.created == in.deleted {
					return fmt.Errorf("instance %d ran out of files after %d of %d transactions (PostMark gives no report then): raise number or lower transactions",
						w, i, pm.Transactions)
				}
				if err := in.transaction(ctx, r, rec, fo); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
		return err
	}
	return r.Programs(ctx, Step{Phase: "delete", Threads: n}, n*pm.Number,
		func(ctx context.Context, w int, rec *Recorder) error {
			for slot := range ins[w].table {
				if err := ins[w].remove(ctx, r, rec, slot); err != nil {
					return err
				}
			}
			return nil
		})
}

// PostMarkRate is the transactions/s of a postmark run's step with n
// instances: n × transactions ÷ the transactions phase's wall time (0 if
// the run has no such phase).
func PostMarkRate(run *Run, n int) float64 {
	pm, err := ParsePostMark(run.Params.Extra)
	if err != nil {
		return 0
	}
	for _, ph := range run.Phases {
		if ph.Name == "transactions" && ph.Threads == n && ph.End > ph.Start {
			return float64(n*pm.Transactions) / (ph.End - ph.Start).Seconds()
		}
	}
	return 0
}

package chunkstore

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The local state in the cache directory is the manifest as this gateway
// last knew it (state.json) plus a journal of every change since
// (journal, one JSON record per line). Every change is written to the
// journal with one write(2) before it is applied in memory, so a killed
// process (kill -9) loses nothing it acknowledged: the next Open replays
// the journal, finds the dirty chunk files, uploads them and publishes.

// rec is one journal record. Ops:
//
//	"i"  upsert inode attributes (I; entries and chunks untouched)
//	"d"  delete inode N
//	"l"  directory P: entry Name -> N (added or replaced)
//	"u"  directory P: entry Name removed
//	"c"  inode N chunk X is H ("" : a hole)
//	"g"  manifest generation Gen published with ETag; X changes remain
type rec struct {
	O    string `json:"o"`
	I    *Inode `json:"i,omitempty"`
	N    uint64 `json:"n,omitempty"`
	P    uint64 `json:"p,omitempty"`
	Name string `json:"name,omitempty"`
	X    int64  `json:"x,omitempty"`
	H    string `json:"h,omitempty"`
	Gen  uint64 `json:"gen,omitempty"`
	ETag string `json:"etag,omitempty"`
}

// localState is state.json.
type localState struct {
	ID       string    `json:"id"` // endpoint bucket/prefix, checked at Open
	ETag     string    `json:"etag"`
	Changes  uint64    `json:"changes"` // unpublished metadata changes
	Manifest *Manifest `json:"manifest"`
}

// applyRec changes m as r says; it is the only code that mutates the
// manifest, used both live and during replay. changed reports whether the
// record is a change that needs publishing.
func applyRec(m *Manifest, r *rec, etag *string) (changed bool, err error) {
	switch r.O {
	case "i":
		if r.I == nil {
			return false, errors.New("inode record without inode")
		}
		old := m.Inodes[r.I.Ino]
		n := r.I.clone()
		n.Ents, n.Chunks = nil, nil
		if old != nil {
			n.Ents, n.Chunks = old.Ents, old.Chunks
		}
		if n.Mode&syscall.S_IFMT == syscall.S_IFDIR && n.Ents == nil {
			n.Ents = map[string]uint64{}
		}
		m.Inodes[n.Ino] = n
		m.NextIno = max(m.NextIno, n.Ino+1)
	case "d":
		delete(m.Inodes, r.N)
	case "l", "u":
		d := m.Inodes[r.P]
		if d == nil || d.Ents == nil {
			return false, fmt.Errorf("entry record for missing directory %d", r.P)
		}
		if r.O == "l" {
			d.Ents[r.Name] = r.N
		} else {
			delete(d.Ents, r.Name)
		}
	case "c":
		in := m.Inodes[r.N]
		if in == nil {
			return false, fmt.Errorf("chunk record for missing inode %d", r.N)
		}
		if r.H == "" {
			delete(in.Chunks, r.X)
		} else {
			if in.Chunks == nil {
				in.Chunks = map[int64]string{}
			}
			in.Chunks[r.X] = r.H
		}
	case "g":
		m.Generation = r.Gen
		*etag = r.ETag
		return false, nil
	default:
		return false, fmt.Errorf("unknown journal op %q", r.O)
	}
	return true, nil
}

// loadLocal reads state.json and replays the journal. A journal whose last
// line is torn (the process died inside write(2)) ends at the last whole
// record. It returns nil, nil when there is no local state.
func loadLocal(dir string) (*localState, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ls localState
	if err := json.Unmarshal(b, &ls); err != nil || ls.Manifest == nil {
		return nil, fmt.Errorf("%w: cache state %s: %v", ErrCorrupt, filepath.Join(dir, "state.json"), err)
	}
	if ls.Manifest.Inodes == nil {
		ls.Manifest.Inodes = map[uint64]*Inode{}
	}
	normalize(ls.Manifest)
	f, err := os.Open(filepath.Join(dir, "journal"))
	if errors.Is(err, fs.ErrNotExist) {
		return &ls, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			break // torn tail
		}
		ch, err := applyRec(ls.Manifest, &r, &ls.ETag)
		if err != nil {
			return nil, fmt.Errorf("%w: cache journal: %v", ErrCorrupt, err)
		}
		if ch {
			ls.Changes++
		} else if r.O == "g" {
			ls.Changes = uint64(r.X) // what the publish did not cover
		}
	}
	return &ls, sc.Err()
}

// writeSnapshot replaces state.json (temp file, fsync, rename) and starts
// an empty journal; the caller holds s.mu.
func (s *Store) writeSnapshot() error {
	ls := localState{ID: s.id, ETag: s.pubETag, Changes: s.changes, Manifest: s.m}
	b, err := json.Marshal(&ls)
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, "state.json.tmp")
	if err := writeFileSync(tmp, b); err != nil {
		return noSpace(err)
	}
	if s.jf != nil {
		s.jf.Close()
		s.jf = nil
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "state.json")); err != nil {
		return err
	}
	jf, err := os.OpenFile(filepath.Join(s.dir, "journal"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	s.jf, s.jrecs, s.joff = jf, 0, 0
	return syncDir(s.dir)
}

// record journals r and applies it; the caller holds s.mu. A journal that
// cannot be written (full disk) fails the change before it happens.
func (s *Store) record(r *rec) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := s.jf.WriteAt(b, s.joff); err != nil {
		// A torn record would end the replay before any later record:
		// cut it off. On a full disk, make room and try once more.
		s.jf.Truncate(s.joff)
		if !errors.Is(noSpace(err), ErrNoSpace) || !s.cache.shed(1<<20) {
			return fmt.Errorf("cache journal: %w", noSpace(err))
		}
		if _, err := s.jf.WriteAt(b, s.joff); err != nil {
			s.jf.Truncate(s.joff)
			return fmt.Errorf("cache journal: %w", noSpace(err))
		}
	}
	s.joff += int64(len(b))
	ch, err := applyRec(s.m, r, &s.pubETag)
	if err != nil {
		return err
	}
	if ch {
		if s.changes == 0 {
			s.firstChange = time.Now()
		}
		s.changes++
	}
	s.jrecs++
	if s.jrecs >= 100000 {
		return s.writeSnapshot()
	}
	return nil
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
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
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// noSpace marks a full cache disk with ErrNoSpace.
func noSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

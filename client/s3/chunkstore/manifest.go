package chunkstore

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"syscall"
)

// On-bucket layout under the store's prefix (see docs/cloudfs.md):
//
//	manifest              gzip'd JSON Manifest, replaced whole by one PUT
//	chunks/ab/abcdef...   one chunk, named by the SHA-256 of its bytes
//	lease                 JSON Lease: which gateway may write, until when
const (
	manifestKey = "manifest"
	chunkPrefix = "chunks/"
	leaseKey    = "lease"
	// Format names the manifest format; a manifest with another is refused.
	Format = "tristore-chunkstore/1"
)

// Kinds of store: a file tree (mount) or one block volume.
const (
	KindFS     = "fs"
	KindVolume = "volume"
)

// RootIno is the root directory of a KindFS store; VolumeIno is the one
// file of a KindVolume store.
const (
	RootIno   = 1
	VolumeIno = 2
)

// Inode is one file, directory or symlink as the manifest records it.
// Chunks maps a chunk index to the SHA-256 (hex) of its bytes; an index
// that is absent is a hole and reads as zeros, so sparse regions cost no
// object. A chunk object never holds bytes past the file's size.
type Inode struct {
	Ino    uint64            `json:"ino"`
	Mode   uint32            `json:"mode"` // S_IFMT bits included
	UID    uint32            `json:"uid"`
	GID    uint32            `json:"gid"`
	Nlink  uint32            `json:"nlink"`
	Size   int64             `json:"size"`
	Atime  int64             `json:"atime"` // unix nanoseconds
	Mtime  int64             `json:"mtime"`
	Ctime  int64             `json:"ctime"`
	Parent uint64            `json:"parent,omitempty"` // directories only
	Target string            `json:"target,omitempty"` // symlinks only
	Rdev   uint32            `json:"rdev,omitempty"`
	Ents   map[string]uint64 `json:"entries,omitempty"` // directories only
	Chunks map[int64]string  `json:"chunks,omitempty"`
}

// clone is a deep copy (entries and chunk maps are not shared).
func (i *Inode) clone() *Inode {
	c := *i
	c.Ents = maps.Clone(i.Ents)
	c.Chunks = maps.Clone(i.Chunks)
	return &c
}

// Manifest is the whole published state of a store. It is written only
// after every chunk it names is stored, and replaces the previous one in a
// single PUT, so a reader sees either the old or the new state, never a
// manifest naming a chunk that is not (yet) there.
type Manifest struct {
	Format     string            `json:"format"`
	Kind       string            `json:"kind"`
	ChunkSize  int64             `json:"chunk_size"`
	Generation uint64            `json:"generation"`
	NextIno    uint64            `json:"next_ino"`
	Inodes     map[uint64]*Inode `json:"inodes"`
}

func (m *Manifest) encode() ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(m); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeManifest parses and checks a manifest: the format, a sane chunk
// size, and that every chunk name is a SHA-256 and every entry names an
// inode that exists. Anything else was not written by this package.
func decodeManifest(b []byte) (*Manifest, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: manifest is not gzip: %v", ErrCorrupt, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 1<<31))
	if err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%w: manifest format %q, want %q", ErrCorrupt, m.Format, Format)
	}
	if m.Kind != KindFS && m.Kind != KindVolume {
		return nil, fmt.Errorf("%w: manifest kind %q", ErrCorrupt, m.Kind)
	}
	if m.ChunkSize < MinChunkSize || m.ChunkSize > MaxChunkSize {
		return nil, fmt.Errorf("%w: chunk size %d", ErrCorrupt, m.ChunkSize)
	}
	if m.Inodes == nil {
		m.Inodes = map[uint64]*Inode{}
	}
	normalize(&m)
	for ino, in := range m.Inodes {
		if in == nil || in.Ino != ino {
			return nil, fmt.Errorf("%w: inode %d malformed", ErrCorrupt, ino)
		}
		if ino >= m.NextIno {
			return nil, fmt.Errorf("%w: inode %d >= next_ino %d", ErrCorrupt, ino, m.NextIno)
		}
		for idx, h := range in.Chunks {
			if idx < 0 || !validHash(h) || idx*m.ChunkSize >= in.Size {
				return nil, fmt.Errorf("%w: inode %d chunk %d %q", ErrCorrupt, ino, idx, h)
			}
		}
		for name, c := range in.Ents {
			if m.Inodes[c] == nil || name == "" || strings.Contains(name, "/") {
				return nil, fmt.Errorf("%w: directory %d entry %q -> %d", ErrCorrupt, ino, name, c)
			}
		}
	}
	return &m, nil
}

// normalize gives every directory an entry map: JSON drops empty ones.
func normalize(m *Manifest) {
	for _, in := range m.Inodes {
		if in != nil && in.Mode&syscall.S_IFMT == syscall.S_IFDIR && in.Ents == nil {
			in.Ents = map[string]uint64{}
		}
	}
}

func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func chunkKey(h string) string { return chunkPrefix + h[:2] + "/" + h }

// attrs is a copy of in without its entries and chunks (an "i" record).
func attrs(in *Inode) *Inode {
	a := *in
	a.Ents, a.Chunks = nil, nil
	return &a
}

// refs is the set of chunk names the inodes reference.
func refs(inodes map[uint64]*Inode) map[string]struct{} {
	s := map[string]struct{}{}
	for _, in := range inodes {
		for _, h := range in.Chunks {
			s[h] = struct{}{}
		}
	}
	return s
}

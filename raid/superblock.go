package raid

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Superblock layout: the first SuperblockSize bytes of every member hold
// one superblock; a RAID-1/5 member then has its journal ring (journal.go)
// and array data starts at the recorded data offset. All integers are
// little-endian.
//
//	off  size  field
//	0    8     magic "TRIRAID1"
//	8    4     version (2; version 1 had a write-intent bitmap instead of a journal)
//	12   4     level (0, 1 or 5)
//	16   16    array UUID (random at Create)
//	32   4     chunk size in bytes
//	36   4     member count
//	40   4     this member's index (slot) in the array
//	44   4     array block size
//	48   8     data offset on the member (bytes)
//	56   8     per-member data size (bytes, a multiple of the chunk)
//	64   8     event counter (bumped on every membership change: failure, replace, degraded start)
//	72   4     state: 0 clean (shut down cleanly), 1 dirty (open)
//	76   4     failed mask: bit i set = slot i is failed / not in sync
//	80   8     rebuild checkpoint (member data bytes rebuilt; valid if rebuild slot >= 0)
//	88   4     rebuild slot (int32, -1 = none)
//	92   4     flags (0)
//	96   8     journal offset on the member (0 = no journal: RAID-0, or RAID-1/5 created without one)
//	104  8     journal size in bytes
//	112  8     journal checkpoint: entries with a lower sequence are already in place
//	120  3972  reserved (zero)
//	4092 4     CRC32C (Castagnoli) of bytes 0..4091
const (
	SuperblockSize = 4096
	// DataOffset is where array data starts on the members of an array
	// without a journal (RAID-0); RAID-1/5 data follows the journal.
	DataOffset = SuperblockSize
	sbMagic    = "TRIRAID1"
	sbVersion  = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type superblock struct {
	Level      int
	UUID       [16]byte
	Chunk      int
	Members    int
	Index      int
	BlockSize  int
	DataOffset int64
	MemberSize int64
	Events     uint64
	Dirty      bool
	FailedMask uint32
	RebuildPos int64
	RebuildIdx int
	JournalOff int64
	JournalLen int64
	JournalCk  uint64
}

func (s *superblock) marshal() []byte {
	b := make([]byte, SuperblockSize)
	copy(b, sbMagic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], sbVersion)
	le.PutUint32(b[12:], uint32(s.Level))
	copy(b[16:32], s.UUID[:])
	le.PutUint32(b[32:], uint32(s.Chunk))
	le.PutUint32(b[36:], uint32(s.Members))
	le.PutUint32(b[40:], uint32(s.Index))
	le.PutUint32(b[44:], uint32(s.BlockSize))
	le.PutUint64(b[48:], uint64(s.DataOffset))
	le.PutUint64(b[56:], uint64(s.MemberSize))
	le.PutUint64(b[64:], s.Events)
	if s.Dirty {
		le.PutUint32(b[72:], 1)
	}
	le.PutUint32(b[76:], s.FailedMask)
	le.PutUint64(b[80:], uint64(s.RebuildPos))
	le.PutUint32(b[88:], uint32(int32(s.RebuildIdx)))
	le.PutUint64(b[96:], uint64(s.JournalOff))
	le.PutUint64(b[104:], uint64(s.JournalLen))
	le.PutUint64(b[112:], s.JournalCk)
	le.PutUint32(b[SuperblockSize-4:], crc32.Checksum(b[:SuperblockSize-4], castagnoli))
	return b
}

func unmarshalSuperblock(b []byte) (*superblock, error) {
	if len(b) < SuperblockSize {
		return nil, fmt.Errorf("%w: short superblock (%d bytes)", ErrBadSuperblock, len(b))
	}
	if string(b[:8]) != sbMagic {
		return nil, fmt.Errorf("%w: no raid magic", ErrBadSuperblock)
	}
	le := binary.LittleEndian
	if got, want := le.Uint32(b[SuperblockSize-4:]), crc32.Checksum(b[:SuperblockSize-4], castagnoli); got != want {
		return nil, fmt.Errorf("%w: CRC32C mismatch (stored %08x, computed %08x)", ErrBadSuperblock, got, want)
	}
	if v := le.Uint32(b[8:]); v != sbVersion {
		if v == 1 {
			return nil, fmt.Errorf("%w: version 1 (write-intent bitmap) array: this build closes the write hole with a journal (version 2); recreate the array", ErrBadSuperblock)
		}
		return nil, fmt.Errorf("%w: unsupported version %d", ErrBadSuperblock, v)
	}
	s := &superblock{
		Level:      int(le.Uint32(b[12:])),
		Chunk:      int(le.Uint32(b[32:])),
		Members:    int(le.Uint32(b[36:])),
		Index:      int(le.Uint32(b[40:])),
		BlockSize:  int(le.Uint32(b[44:])),
		DataOffset: int64(le.Uint64(b[48:])),
		MemberSize: int64(le.Uint64(b[56:])),
		Events:     le.Uint64(b[64:]),
		Dirty:      le.Uint32(b[72:]) == 1,
		FailedMask: le.Uint32(b[76:]),
		RebuildPos: int64(le.Uint64(b[80:])),
		RebuildIdx: int(int32(le.Uint32(b[88:]))),
		JournalOff: int64(le.Uint64(b[96:])),
		JournalLen: int64(le.Uint64(b[104:])),
		JournalCk:  le.Uint64(b[112:]),
	}
	copy(s.UUID[:], b[16:32])
	switch {
	case s.Level != 0 && s.Level != 1 && s.Level != 5:
		return nil, fmt.Errorf("%w: unknown level %d", ErrBadSuperblock, s.Level)
	case s.Members < 1 || s.Members > 32 || s.Index < 0 || s.Index >= s.Members:
		return nil, fmt.Errorf("%w: member index %d of %d", ErrBadSuperblock, s.Index, s.Members)
	case s.BlockSize <= 0 || s.Chunk <= 0 || s.Chunk%s.BlockSize != 0:
		return nil, fmt.Errorf("%w: chunk %d / block size %d", ErrBadSuperblock, s.Chunk, s.BlockSize)
	case s.MemberSize <= 0 || s.MemberSize%int64(s.Chunk) != 0 || s.DataOffset < SuperblockSize:
		return nil, fmt.Errorf("%w: member size %d / data offset %d", ErrBadSuperblock, s.MemberSize, s.DataOffset)
	case s.JournalLen != 0 && (s.Level == 0 || s.JournalOff < SuperblockSize || s.JournalLen < 0 || s.JournalOff+s.JournalLen > s.DataOffset):
		return nil, fmt.Errorf("%w: journal %d+%d / data offset %d", ErrBadSuperblock, s.JournalOff, s.JournalLen, s.DataOffset)
	case s.RebuildIdx < -1 || s.RebuildIdx >= s.Members:
		return nil, fmt.Errorf("%w: rebuild slot %d", ErrBadSuperblock, s.RebuildIdx)
	}
	return s, nil
}

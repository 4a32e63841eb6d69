package iscsi

import "fmt"

// BlockLimits is the part of the Block Limits VPD page (B0h, SBC-4
// §6.6.4) an initiator needs to size UNMAP and WRITE SAME commands.
// Counts are in logical blocks; 0 means "not reported" except where noted.
type BlockLimits struct {
	MaxTransfer, OptimalTransfer uint32
	// UnmapReported: the page is long enough to carry the unmap fields.
	UnmapReported bool
	// MaxUnmapLBACount: most LBAs one UNMAP may name (0: UNMAP is not
	// implemented; 0xffffffff: no limit). MaxUnmapDescriptors likewise
	// for block descriptors.
	MaxUnmapLBACount, MaxUnmapDescriptors uint32
	// UnmapGranularity is the optimal unmap granularity; UnmapAlignment
	// (valid when UnmapAlignmentValid) the first LBA of a granule.
	UnmapGranularity    uint32
	UnmapAlignment      uint32
	UnmapAlignmentValid bool
	// MaxWriteSameLength caps one WRITE SAME.
	MaxWriteSameLength uint64
}

// ParseBlockLimits decodes a Block Limits VPD page. A short page (an old
// SBC-2 device: 0Ch bytes of page) yields only the transfer lengths.
func ParseBlockLimits(b []byte) (BlockLimits, error) {
	if len(b) < 4 || b[1] != 0xb0 {
		return BlockLimits{}, fmt.Errorf("scsi: not a Block Limits VPD page (%d bytes)", len(b))
	}
	n := min(len(b), 4+int(be.Uint16(b[2:])))
	var l BlockLimits
	if n >= 16 {
		l.MaxTransfer = be.Uint32(b[8:])
		l.OptimalTransfer = be.Uint32(b[12:])
	}
	if n >= 36 {
		l.UnmapReported = true
		l.MaxUnmapLBACount = be.Uint32(b[20:])
		l.MaxUnmapDescriptors = be.Uint32(b[24:])
		l.UnmapGranularity = be.Uint32(b[28:])
		l.UnmapAlignmentValid = b[32]&0x80 != 0
		l.UnmapAlignment = be.Uint32(b[32:]) & 0x7fffffff
	}
	if n >= 44 {
		l.MaxWriteSameLength = be.Uint64(b[36:])
	}
	return l, nil
}

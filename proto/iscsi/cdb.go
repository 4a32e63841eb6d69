package iscsi

import (
	"errors"
	"fmt"
)

// SCSI operation codes used by tristore (SPC-4, SBC-3).
const (
	ScsiTestUnitReady     = 0x00
	ScsiRequestSense      = 0x03
	ScsiRead6             = 0x08
	ScsiWrite6            = 0x0a
	ScsiInquiry           = 0x12
	ScsiModeSelect6       = 0x15
	ScsiReserve6          = 0x16
	ScsiRelease6          = 0x17
	ScsiModeSense6        = 0x1a
	ScsiStartStopUnit     = 0x1b
	ScsiSendDiagnostic    = 0x1d
	ScsiPreventAllow      = 0x1e
	ScsiReadCapacity10    = 0x25
	ScsiRead10            = 0x28
	ScsiWrite10           = 0x2a
	ScsiWriteVerify10     = 0x2e
	ScsiVerify10          = 0x2f
	ScsiPrefetch10        = 0x34
	ScsiSyncCache10       = 0x35
	ScsiWriteBuffer       = 0x3b
	ScsiReadBuffer        = 0x3c
	ScsiWriteSame10       = 0x41
	ScsiUnmap             = 0x42
	ScsiModeSelect10      = 0x55
	ScsiModeSense10       = 0x5a
	ScsiPersistResIn      = 0x5e
	ScsiPersistResOut     = 0x5f
	ScsiExtendedCopy      = 0x83
	ScsiReceiveCopy       = 0x84
	ScsiRead16            = 0x88
	ScsiCompareAndWrite   = 0x89
	ScsiWrite16           = 0x8a
	ScsiOrwrite16         = 0x8b
	ScsiWriteVerify16     = 0x8e
	ScsiVerify16          = 0x8f
	ScsiPrefetch16        = 0x90
	ScsiSyncCache16       = 0x91
	ScsiWriteSame16       = 0x93
	ScsiServiceActionIn16 = 0x9e // service action 0x10: READ CAPACITY 16, 0x12: GET LBA STATUS
	ScsiReportLUNs        = 0xa0
	ScsiMaintenanceIn     = 0xa3 // service action 0x0c: REPORT SUPPORTED OPCODES
	ScsiRead12            = 0xa8
	ScsiWrite12           = 0xaa
	ScsiWriteVerify12     = 0xae
	ScsiVerify12          = 0xaf

	SAReadCapacity16     = 0x10
	SAGetLBAStatus       = 0x12
	SAReportSupportedOps = 0x0c
)

// CDBLen returns the CDB length implied by an operation code's group, or 0
// for groups with vendor-specific/variable length.
func CDBLen(op byte) int {
	switch op >> 5 {
	case 0:
		return 6
	case 1, 2:
		return 10
	case 4:
		return 16
	case 5:
		return 12
	}
	return 0
}

// RW is the decoded form of a block command's CDB: READ/WRITE/VERIFY/
// WRITE AND VERIFY/WRITE SAME/COMPARE AND WRITE/SYNCHRONIZE CACHE/PRE-FETCH.
type RW struct {
	Op     byte
	LBA    uint64
	Blocks uint32 // transfer length in blocks (0 for READ/WRITE 6 means 256)
	FUA    bool
	DPO    bool
	// BytChk is the BYTCHK field of VERIFY / WRITE AND VERIFY.
	BytChk uint8
	// Unmap and Anchor are the WRITE SAME bits; NDOB is "no data-out buffer".
	Unmap, Anchor, NDOB bool
	// Immed is the IMMED bit of SYNCHRONIZE CACHE.
	Immed bool
	// Protect is RDPROTECT/WRPROTECT/VRPROTECT (non-zero is unsupported by tristore).
	Protect uint8
}

// ErrCDB is returned by ParseRW for a CDB it cannot decode.
var ErrCDB = errors.New("scsi: malformed CDB")

// ParseRW decodes the LBA/length form of a block command. It checks the CDB
// is long enough for its group but not the range against a capacity.
func ParseRW(cdb []byte) (RW, error) {
	if len(cdb) == 0 {
		return RW{}, ErrCDB
	}
	r := RW{Op: cdb[0]}
	need := CDBLen(cdb[0])
	if need == 0 || len(cdb) < need {
		return r, fmt.Errorf("%w: opcode 0x%02x needs %d bytes, have %d", ErrCDB, cdb[0], need, len(cdb))
	}
	switch cdb[0] {
	case ScsiRead6, ScsiWrite6:
		r.LBA = uint64(cdb[1]&0x1f)<<16 | uint64(cdb[2])<<8 | uint64(cdb[3])
		r.Blocks = uint32(cdb[4])
		if r.Blocks == 0 {
			r.Blocks = 256
		}
		return r, nil
	case ScsiRead10, ScsiWrite10, ScsiWriteVerify10, ScsiVerify10, ScsiSyncCache10, ScsiPrefetch10, ScsiWriteSame10:
		r.LBA = uint64(be.Uint32(cdb[2:]))
		r.Blocks = uint32(be.Uint16(cdb[7:]))
	case ScsiRead12, ScsiWrite12, ScsiWriteVerify12, ScsiVerify12:
		r.LBA = uint64(be.Uint32(cdb[2:]))
		r.Blocks = be.Uint32(cdb[6:])
	case ScsiRead16, ScsiWrite16, ScsiWriteVerify16, ScsiVerify16, ScsiSyncCache16, ScsiPrefetch16, ScsiWriteSame16, ScsiOrwrite16:
		r.LBA = be.Uint64(cdb[2:])
		r.Blocks = be.Uint32(cdb[10:])
	case ScsiCompareAndWrite:
		r.LBA = be.Uint64(cdb[2:])
		r.Blocks = uint32(cdb[13])
	default:
		return r, fmt.Errorf("%w: opcode 0x%02x is not a block command", ErrCDB, cdb[0])
	}
	b1 := cdb[1]
	r.Protect = b1 >> 5
	switch cdb[0] {
	case ScsiSyncCache10, ScsiSyncCache16, ScsiPrefetch10, ScsiPrefetch16:
		r.Immed = b1&0x02 != 0
		r.Protect = 0
	case ScsiWriteSame10, ScsiWriteSame16:
		r.Unmap = b1&0x08 != 0
		r.Anchor = b1&0x10 != 0
		r.NDOB = cdb[0] == ScsiWriteSame16 && b1&0x01 != 0
	case ScsiVerify10, ScsiVerify12, ScsiVerify16, ScsiWriteVerify10, ScsiWriteVerify12, ScsiWriteVerify16:
		r.BytChk = (b1 >> 1) & 0x03
		r.DPO = b1&0x10 != 0
	default:
		r.DPO = b1&0x10 != 0
		r.FUA = b1&0x08 != 0
	}
	return r, nil
}

// AllocationLength returns the allocation length of the non-block commands
// that have one (INQUIRY, MODE SENSE, REQUEST SENSE, REPORT LUNS, READ
// CAPACITY 16, PERSISTENT RESERVE IN, ...), or -1.
func AllocationLength(cdb []byte) int {
	if len(cdb) < 6 {
		return -1
	}
	switch cdb[0] {
	case ScsiInquiry:
		return int(be.Uint16(cdb[3:]))
	case ScsiModeSense6, ScsiRequestSense:
		return int(cdb[4])
	}
	if len(cdb) < 10 {
		return -1
	}
	switch cdb[0] {
	case ScsiModeSense10, ScsiPersistResIn:
		return int(be.Uint16(cdb[7:]))
	case ScsiReadCapacity10:
		return 8
	}
	if len(cdb) < 12 {
		return -1
	}
	switch cdb[0] {
	case ScsiReportLUNs, ScsiMaintenanceIn:
		return int(be.Uint32(cdb[6:]))
	}
	if len(cdb) < 16 {
		return -1
	}
	if cdb[0] == ScsiServiceActionIn16 {
		return int(be.Uint32(cdb[10:]))
	}
	return -1
}

// CDB builders (for the initiator and tests). They return 16-byte CDBs
// zero-padded as the BHS carries them; the meaningful length is CDBLen(op).

func cdb16() []byte { return make([]byte, 16) }

// TestUnitReady builds TEST UNIT READY.
func TestUnitReady() []byte { return cdb16() }

// Inquiry builds INQUIRY (evpd with page, or standard data when evpd is false).
func Inquiry(evpd bool, page byte, alloc uint16) []byte {
	c := cdb16()
	c[0] = ScsiInquiry
	if evpd {
		c[1] = 1
		c[2] = page
	}
	be.PutUint16(c[3:], alloc)
	return c
}

// ReportLUNs builds REPORT LUNS.
func ReportLUNs(alloc uint32) []byte {
	c := cdb16()
	c[0] = ScsiReportLUNs
	be.PutUint32(c[6:], alloc)
	return c
}

// ReadCapacity10 builds READ CAPACITY (10).
func ReadCapacity10() []byte { c := cdb16(); c[0] = ScsiReadCapacity10; return c }

// ReadCapacity16 builds READ CAPACITY (16).
func ReadCapacity16(alloc uint32) []byte {
	c := cdb16()
	c[0] = ScsiServiceActionIn16
	c[1] = SAReadCapacity16
	be.PutUint32(c[10:], alloc)
	return c
}

// Read10 builds READ (10).
func Read10(lba uint32, blocks uint16, fua bool) []byte {
	return rw10(ScsiRead10, lba, blocks, fua)
}

// Write10 builds WRITE (10).
func Write10(lba uint32, blocks uint16, fua bool) []byte {
	return rw10(ScsiWrite10, lba, blocks, fua)
}

func rw10(op byte, lba uint32, blocks uint16, fua bool) []byte {
	c := cdb16()
	c[0] = op
	if fua {
		c[1] = 0x08
	}
	be.PutUint32(c[2:], lba)
	be.PutUint16(c[7:], blocks)
	return c
}

// Read16 builds READ (16).
func Read16(lba uint64, blocks uint32, fua bool) []byte {
	return rw16(ScsiRead16, lba, blocks, fua)
}

// Write16 builds WRITE (16).
func Write16(lba uint64, blocks uint32, fua bool) []byte {
	return rw16(ScsiWrite16, lba, blocks, fua)
}

func rw16(op byte, lba uint64, blocks uint32, fua bool) []byte {
	c := cdb16()
	c[0] = op
	if fua {
		c[1] = 0x08
	}
	be.PutUint64(c[2:], lba)
	be.PutUint32(c[10:], blocks)
	return c
}

// SyncCache10 builds SYNCHRONIZE CACHE (10) for the whole device.
func SyncCache10() []byte { c := cdb16(); c[0] = ScsiSyncCache10; return c }

// SyncCache16 builds SYNCHRONIZE CACHE (16) for a range (0 blocks = to the end).
func SyncCache16(lba uint64, blocks uint32) []byte {
	c := cdb16()
	c[0] = ScsiSyncCache16
	be.PutUint64(c[2:], lba)
	be.PutUint32(c[10:], blocks)
	return c
}

// WriteSame16 builds WRITE SAME (16), with UNMAP when unmap is set.
func WriteSame16(lba uint64, blocks uint32, unmap bool) []byte {
	c := rw16(ScsiWriteSame16, lba, blocks, false)
	if unmap {
		c[1] |= 0x08
	}
	return c
}

// Unmap builds UNMAP; its parameter list comes from UnmapParams.
func Unmap(paramLen uint16) []byte {
	c := cdb16()
	c[0] = ScsiUnmap
	be.PutUint16(c[7:], paramLen)
	return c
}

// UnmapDescriptor is one LBA range of an UNMAP parameter list.
type UnmapDescriptor struct {
	LBA    uint64
	Blocks uint32
}

// UnmapParams encodes an UNMAP parameter list.
func UnmapParams(ds []UnmapDescriptor) []byte {
	b := make([]byte, 8+16*len(ds))
	be.PutUint16(b[0:], uint16(6+16*len(ds)))
	be.PutUint16(b[2:], uint16(16*len(ds)))
	for i, d := range ds {
		be.PutUint64(b[8+16*i:], d.LBA)
		be.PutUint32(b[16+16*i:], d.Blocks)
	}
	return b
}

// ParseUnmapParams decodes an UNMAP parameter list.
func ParseUnmapParams(b []byte) ([]UnmapDescriptor, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: UNMAP parameter list of %d bytes", ErrCDB, len(b))
	}
	n := int(be.Uint16(b[2:]))
	if n%16 != 0 || 8+n > len(b) {
		return nil, fmt.Errorf("%w: UNMAP block descriptor length %d", ErrCDB, n)
	}
	ds := make([]UnmapDescriptor, n/16)
	for i := range ds {
		ds[i].LBA = be.Uint64(b[8+16*i:])
		ds[i].Blocks = be.Uint32(b[16+16*i:])
	}
	return ds, nil
}

// Capacity is READ CAPACITY data.
type Capacity struct {
	LastLBA   uint64
	BlockSize uint32
	// ThinProvisioned (LBPME) and reads of unmapped blocks return zeros (LBPRZ).
	LBPME, LBPRZ bool
	// PhysExp is the logical-blocks-per-physical-block exponent.
	PhysExp uint8
}

// Marshal16 encodes READ CAPACITY (16) parameter data (32 bytes).
func (c Capacity) Marshal16() []byte {
	b := make([]byte, 32)
	be.PutUint64(b, c.LastLBA)
	be.PutUint32(b[8:], c.BlockSize)
	b[13] = c.PhysExp & 0x0f
	if c.LBPME {
		b[14] |= 0x80
	}
	if c.LBPRZ {
		b[14] |= 0x40
	}
	return b
}

// Marshal10 encodes READ CAPACITY (10) data; LBAs past 32 bits read 0xffffffff.
func (c Capacity) Marshal10() []byte {
	b := make([]byte, 8)
	last := c.LastLBA
	if last > 0xffffffff {
		last = 0xffffffff
	}
	be.PutUint32(b, uint32(last))
	be.PutUint32(b[4:], c.BlockSize)
	return b
}

// ParseCapacity16 decodes READ CAPACITY (16) data.
func ParseCapacity16(b []byte) (Capacity, error) {
	if len(b) < 12 {
		return Capacity{}, fmt.Errorf("scsi: READ CAPACITY(16) data of %d bytes", len(b))
	}
	c := Capacity{LastLBA: be.Uint64(b), BlockSize: be.Uint32(b[8:])}
	if len(b) >= 15 {
		c.PhysExp = b[13] & 0x0f
		c.LBPME = b[14]&0x80 != 0
		c.LBPRZ = b[14]&0x40 != 0
	}
	return c, nil
}

// ParseCapacity10 decodes READ CAPACITY (10) data.
func ParseCapacity10(b []byte) (Capacity, error) {
	if len(b) < 8 {
		return Capacity{}, fmt.Errorf("scsi: READ CAPACITY(10) data of %d bytes", len(b))
	}
	return Capacity{LastLBA: uint64(be.Uint32(b)), BlockSize: be.Uint32(b[4:])}, nil
}

// ParseReportLUNs decodes REPORT LUNS data into raw 8-byte LUN values.
func ParseReportLUNs(b []byte) ([]uint64, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("scsi: REPORT LUNS data of %d bytes", len(b))
	}
	n := int(be.Uint32(b)) / 8
	var out []uint64
	for i := 0; i < n && 8+8*i+8 <= len(b); i++ {
		out = append(out, be.Uint64(b[8+8*i:]))
	}
	return out, nil
}

// LUNToField encodes a LUN number (< 16384) in the 8-byte LUN field with
// SAM's flat (<256: peripheral) addressing, as Linux and libiscsi do.
func LUNToField(lun uint16) uint64 {
	if lun < 256 {
		return uint64(lun) << 48
	}
	return (uint64(0x4000|lun&0x3fff) << 48)
}

// LUNFromField decodes a single-level LUN field (peripheral or flat).
func LUNFromField(f uint64) uint16 {
	top := uint16(f >> 48)
	switch top >> 14 {
	case 0: // peripheral device addressing: bus 0 only
		return top & 0x3fff // bus != 0 yields a LUN >= 256 that will not exist
	case 1: // flat space
		return top & 0x3fff
	}
	return 0xffff
}

package scsi

import (
	"context"
	"encoding/binary"

	"github.com/tristore/tristore/proto/iscsi"
)

// SPC-4 primary commands: TEST UNIT READY, INQUIRY (+VPD), REPORT LUNS,
// REQUEST SENSE, MODE SENSE/SELECT, START STOP UNIT, PREVENT ALLOW MEDIUM
// REMOVAL.

var be = binary.BigEndian

func init() {
	handlers[iscsi.ScsiTestUnitReady] = (*LU).testUnitReady
	handlers[iscsi.ScsiInquiry] = (*LU).inquiry
	handlers[iscsi.ScsiReportLUNs] = (*LU).reportLUNs
	handlers[iscsi.ScsiRequestSense] = (*LU).requestSense
	handlers[iscsi.ScsiModeSense6] = (*LU).modeSense
	handlers[iscsi.ScsiModeSense10] = (*LU).modeSense
	handlers[iscsi.ScsiModeSelect6] = (*LU).modeSelect
	handlers[iscsi.ScsiModeSelect10] = (*LU).modeSelect
	handlers[iscsi.ScsiStartStopUnit] = (*LU).startStop
	handlers[iscsi.ScsiPreventAllow] = (*LU).preventAllow
}

func (lu *LU) testUnitReady(ctx context.Context, r *Request) *Response { return good(nil) }

// Version descriptors: SAM-5, iSCSI, SPC-4, SBC-3.
var versionDescriptors = []uint16{0x00a0, 0x0960, 0x0460, 0x04c0}

func padASCII(dst []byte, s string) {
	for i := range dst {
		dst[i] = ' '
	}
	copy(dst, s)
}

func (lu *LU) inquiry(ctx context.Context, r *Request) *Response {
	c := r.CDB
	evpd := c[1]&0x01 != 0
	if c[1]&0x02 != 0 { // CMDDT is obsolete
		return checkCondition(errInvalidFieldInCDB(1))
	}
	alloc := int(be.Uint16(c[3:]))
	if !evpd {
		if c[2] != 0 {
			return checkCondition(errInvalidFieldInCDB(2))
		}
		d := make([]byte, 96)
		d[0] = 0x00 // connected, direct access block device
		d[2] = 0x06 // SPC-4
		d[3] = 0x12 // HiSup, response data format 2
		d[4] = byte(len(d) - 5)
		d[7] = 0x02 // CmdQue
		padASCII(d[8:16], "TRISTORE")
		padASCII(d[16:32], lu.cfg.Product)
		padASCII(d[32:36], "0001")
		for i, v := range versionDescriptors {
			be.PutUint16(d[58+2*i:], v)
		}
		return good(allocCut(d, alloc))
	}
	var d []byte
	switch c[2] {
	case 0x00:
		d = []byte{0, 0x00, 0, 6, 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2}
	case 0x80:
		d = append([]byte{0, 0x80, 0, byte(len(lu.cfg.Serial))}, lu.cfg.Serial...)
	case 0x83:
		d = lu.deviceIdentification()
	case 0xb0:
		d = lu.blockLimits()
	case 0xb1:
		d = make([]byte, 64)
		d[1] = 0xb1
		be.PutUint16(d[2:], 0x3c)
		be.PutUint16(d[4:], 0) // medium rotation rate not reported (a file on any disk)
	case 0xb2:
		d = make([]byte, 8)
		d[1] = 0xb2
		be.PutUint16(d[2:], 4)
		d[5] = 0x80 | 0x40 | 0x20 | 0x04 // LBPU, LBPWS, LBPWS10, LBPRZ
		if lu.thin() {
			d[6] = 0x02 // thin provisioned
		}
	default:
		return checkCondition(errInvalidFieldInCDB(2))
	}
	return good(allocCut(d, alloc))
}

// deviceIdentification builds VPD page 0x83: an NAA (locally assigned)
// designator, a T10 vendor ID designator and the target's SCSI name.
func (lu *LU) deviceIdentification() []byte {
	var ds []byte
	naa := lu.cfg.ID
	naa[0] = 0x30 | naa[0]&0x0f
	ds = append(ds, 0x01, 0x03, 0, 8) // binary, LU, NAA
	ds = append(ds, naa[:]...)
	t10 := make([]byte, 8, 8+len(lu.cfg.Serial))
	padASCII(t10, "TRISTORE")
	t10 = append(t10, lu.cfg.Serial...)
	ds = append(ds, 0x02, 0x01, 0, byte(len(t10))) // ASCII, LU, T10 vendor ID
	ds = append(ds, t10...)
	if name := lu.cfg.TargetName; name != "" {
		n := len(name) + 1
		n = (n + 3) &^ 3
		b := make([]byte, n)
		copy(b, name)
		ds = append(ds, 0x53, 0xa8, 0, byte(n)) // iSCSI, UTF-8, PIV, target device, SCSI name string
		ds = append(ds, b...)
	}
	d := []byte{0, 0x83, 0, 0}
	be.PutUint16(d[2:], uint16(len(ds)))
	return append(d, ds...)
}

// Limits reported in the Block Limits VPD page (and enforced by sbc.go).
const (
	maxCompareAndWriteBlocks = 255
	maxUnmapBlocks           = 1 << 20
	maxUnmapDescriptors      = 64
	maxWriteSameBlocks       = 1 << 22
)

func (lu *LU) blockLimits() []byte {
	d := make([]byte, 64)
	d[1] = 0xb0
	be.PutUint16(d[2:], 0x3c)
	d[4] = 0x01 // WSNZ: WRITE SAME with 0 blocks is refused
	d[5] = maxCompareAndWriteBlocks
	gran := uint16(4096 / lu.bs)
	if gran == 0 {
		gran = 1
	}
	be.PutUint16(d[6:], gran)
	maxXfer := uint32(lu.cfg.MaxTransferBytes / lu.bs)
	be.PutUint32(d[8:], maxXfer)
	be.PutUint32(d[12:], uint32((1<<20)/lu.bs)) // optimal: 1 MiB
	be.PutUint32(d[16:], 0)
	be.PutUint32(d[20:], maxUnmapBlocks)
	be.PutUint32(d[24:], maxUnmapDescriptors)
	be.PutUint32(d[28:], uint32(gran))
	be.PutUint64(d[36:], maxWriteSameBlocks)
	return d
}

func (lu *LU) thin() bool {
	if t, ok := lu.dev.(interface{ CanPunchHoles() bool }); ok {
		return t.CanPunchHoles()
	}
	return false
}

func (lu *LU) reportLUNs(ctx context.Context, r *Request) *Response {
	c := r.CDB
	switch c[2] {
	case 0x00, 0x01, 0x02, 0x10, 0x11, 0x12:
	default:
		return checkCondition(errInvalidFieldInCDB(2))
	}
	alloc := int(be.Uint32(c[6:]))
	if alloc < 16 {
		return checkCondition(errInvalidFieldInCDB(6))
	}
	d := make([]byte, 16)
	be.PutUint32(d, 8) // one LUN: 0
	return good(allocCut(d, alloc))
}

func (lu *LU) requestSense(ctx context.Context, r *Request) *Response {
	c := r.CDB
	s, ok := lu.popUA(r.Nexus)
	if !ok {
		s = iscsi.Sense{Key: iscsi.SenseNoSense}
	}
	var d []byte
	if c[1]&0x01 != 0 { // DESC: descriptor format
		d = []byte{0x72, s.Key, byte(s.ASC >> 8), byte(s.ASC), 0, 0, 0, 0}
	} else {
		d = s.Marshal()
	}
	return good(allocCut(d, int(c[4])))
}

func (lu *LU) startStop(ctx context.Context, r *Request) *Response {
	// A file-backed LU is always spinning; START/STOP/LOEJ are accepted
	// but have nothing to do. POWER CONDITION changes are not supported.
	if r.CDB[4]&0xf0 != 0 {
		return checkCondition(errInvalidFieldInCDB(4))
	}
	return good(nil)
}

func (lu *LU) preventAllow(ctx context.Context, r *Request) *Response {
	// Nothing is removable; PREVENT is accepted and has no effect.
	return good(nil)
}

// Mode pages.

const (
	pageCaching = 0x08
	pageControl = 0x0a
	pageIEC     = 0x1c
	pageAll     = 0x3f
)

// modePage returns the page in the given page control (0 current,
// 1 changeable, 2 default).
func (lu *LU) modePage(code byte, pc byte) []byte {
	switch code {
	case pageCaching:
		p := make([]byte, 20)
		p[0], p[1] = pageCaching, 0x12
		switch pc {
		case 0:
			if lu.wce.Load() {
				p[2] |= 0x04 // WCE: writes are cached until SYNCHRONIZE CACHE/FUA
			}
		case 1:
			p[2] = 0x04 // WCE is changeable
		case 2:
			p[2] = 0x04
		}
		return p
	case pageControl:
		p := make([]byte, 12)
		p[0], p[1] = pageControl, 0x0a
		if pc != 1 {
			p[3] = 0x10                 // queue algorithm modifier 1: unrestricted reordering
			be.PutUint16(p[8:], 0xffff) // busy timeout: unlimited
		}
		return p
	case pageIEC:
		p := make([]byte, 12)
		p[0], p[1] = pageIEC, 0x0a
		return p
	}
	return nil
}

func (lu *LU) modeSense(ctx context.Context, r *Request) *Response {
	c := r.CDB
	ten := c[0] == iscsi.ScsiModeSense10
	dbd := c[1]&0x08 != 0
	llbaa := ten && c[1]&0x10 != 0
	pc := c[2] >> 6
	page := c[2] & 0x3f
	sub := c[3]
	var alloc int
	if ten {
		alloc = int(be.Uint16(c[7:]))
	} else {
		alloc = int(c[4])
	}
	if pc == 3 {
		return checkCondition(errSavingNotSupp)
	}
	var pages []byte
	switch {
	case page == pageAll && (sub == 0 || sub == 0xff):
		for _, p := range []byte{pageCaching, pageControl, pageIEC} {
			pages = append(pages, lu.modePage(p, pc)...)
		}
	case sub == 0 && lu.modePage(page, pc) != nil:
		pages = lu.modePage(page, pc)
	default:
		return checkCondition(errInvalidFieldInCDB(2))
	}
	var bd []byte
	if !dbd {
		blocks := uint64(lu.dev.Size() / int64(lu.bs))
		if llbaa {
			bd = make([]byte, 16)
			be.PutUint64(bd, blocks)
			be.PutUint32(bd[12:], uint32(lu.bs))
		} else {
			bd = make([]byte, 8)
			if blocks > 0xffffffff {
				be.PutUint32(bd, 0xffffffff)
			} else {
				be.PutUint32(bd, uint32(blocks))
			}
			be.PutUint32(bd[4:], uint32(lu.bs)) // byte 4 is reserved, 5-7 block length
		}
	}
	devSpecific := byte(0x10) // DPOFUA
	var d []byte
	if ten {
		d = make([]byte, 8)
		be.PutUint16(d[0:], uint16(6+len(bd)+len(pages)))
		d[3] = devSpecific
		if llbaa && !dbd {
			d[4] = 0x01
		}
		be.PutUint16(d[6:], uint16(len(bd)))
	} else {
		d = make([]byte, 4)
		d[0] = byte(3 + len(bd) + len(pages))
		d[2] = devSpecific
		d[3] = byte(len(bd))
	}
	d = append(append(d, bd...), pages...)
	return good(allocCut(d, alloc))
}

// modeSelect accepts the caching page (WCE may be turned off, which makes
// every write synchronous) and the control and IEC pages unchanged.
func (lu *LU) modeSelect(ctx context.Context, r *Request) *Response {
	c := r.CDB
	ten := c[0] == iscsi.ScsiModeSelect10
	var plen int
	if ten {
		plen = int(be.Uint16(c[7:]))
	} else {
		plen = int(c[4])
	}
	return lu.modeSelectParams(c, plen, r.DataOut, ten).dataOut(int64(plen))
}

func (lu *LU) modeSelectParams(c []byte, plen int, data []byte, ten bool) *Response {
	if c[1]&0x01 != 0 { // SP: saving pages is not supported
		return checkCondition(errInvalidFieldInCDB(1))
	}
	if plen == 0 {
		return good(nil)
	}
	if len(data) < plen {
		return checkCondition(errParamListLength)
	}
	if c[1]&0x10 == 0 { // PF must be set: we only understand SPC page format
		return checkCondition(errInvalidFieldInCDB(1))
	}
	data = data[:plen]
	hdr, bdl := 4, 0
	if ten {
		hdr = 8
		if len(data) < hdr {
			return checkCondition(errParamListLength)
		}
		bdl = int(be.Uint16(data[6:]))
	} else {
		if len(data) < hdr {
			return checkCondition(errParamListLength)
		}
		bdl = int(data[3])
	}
	off := hdr
	if bdl > 0 {
		if off+bdl > len(data) || (bdl != 8 && bdl != 16) {
			return checkCondition(errInvalidFieldInParam(uint16(off)))
		}
		blen := be.Uint32(data[off+bdl-4:]) & 0xffffff
		if blen != 0 && int(blen) != lu.bs {
			return checkCondition(errInvalidFieldInParam(uint16(off + bdl - 3)))
		}
		off += bdl
	}
	newWCE := lu.wce.Load()
	for off < len(data) {
		if off+2 > len(data) {
			return checkCondition(errParamListLength)
		}
		code := data[off] & 0x3f
		if data[off]&0x40 != 0 { // SPF: no subpages here
			return checkCondition(errInvalidFieldInParam(uint16(off)))
		}
		n := int(data[off+1]) + 2
		if off+n > len(data) {
			return checkCondition(errParamListLength)
		}
		cur := lu.modePage(code, 0)
		mask := lu.modePage(code, 1)
		if cur == nil || len(cur) != n {
			return checkCondition(errInvalidFieldInParam(uint16(off)))
		}
		p := data[off : off+n]
		for i := 2; i < n; i++ {
			if (p[i]^cur[i])&^mask[i] != 0 {
				return checkCondition(errInvalidFieldInParam(uint16(off + i)))
			}
		}
		if code == pageCaching {
			newWCE = p[2]&0x04 != 0
		}
		off += n
	}
	lu.wce.Store(newWCE)
	return good(nil)
}

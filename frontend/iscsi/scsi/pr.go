package scsi

import (
	"context"
	"sync"

	"github.com/tristore/tristore/proto/iscsi"
)

// Reservations: SPC-4 persistent reservations (PERSISTENT RESERVE IN/OUT)
// and SPC-2 RESERVE(6)/RELEASE(6). State is kept in memory per LU: it
// survives sessions coming and going but not a restart of the target
// (APTPL is not supported, and REPORT CAPABILITIES says so).

// Persistent reservation types.
const (
	prWE   = 1 // write exclusive
	prEA   = 3 // exclusive access
	prWERO = 5 // write exclusive, registrants only
	prEARO = 6 // exclusive access, registrants only
	prWEAR = 7 // write exclusive, all registrants
	prEAAR = 8 // exclusive access, all registrants
)

const (
	ascReservationsReleased   = 0x2a04
	ascReservationsPreempted  = 0x2a03
	ascRegistrationsPreempted = 0x2a05
	ascInvalidRelease         = 0x2604
)

type prState struct {
	mu         sync.Mutex
	generation uint32
	keys       map[string]uint64 // registered I_T nexus -> reservation key
	holder     string            // nexus holding the reservation ("" for all-registrants types)
	resType    uint8             // 0 = no persistent reservation
	spc2       string            // nexus holding a RESERVE(6) reservation
	lu         *LU
}

func (p *prState) init() { p.keys = map[string]uint64{} }

// reset: LU/target reset releases SPC-2 reservations; persistent ones stay.
func (p *prState) reset() {
	p.mu.Lock()
	p.spc2 = ""
	p.mu.Unlock()
}

// nexusLost: I_T nexus loss releases its SPC-2 reservation.
func (p *prState) nexusLost(nexus string) {
	p.mu.Lock()
	if p.spc2 == nexus {
		p.spc2 = ""
	}
	p.mu.Unlock()
}

func allRegistrants(t uint8) bool { return t == prWEAR || t == prEAAR }

// isHolder reports whether nexus holds the persistent reservation.
func (p *prState) isHolder(nexus string) bool {
	if p.resType == 0 {
		return false
	}
	if allRegistrants(p.resType) {
		_, ok := p.keys[nexus]
		return ok
	}
	return p.holder == nexus
}

// access classes for the conflict table (SPC-4 §5.13.1).
func accessClass(op byte) (read, write bool) {
	switch op {
	case iscsi.ScsiRead6, iscsi.ScsiRead10, iscsi.ScsiRead12, iscsi.ScsiRead16,
		iscsi.ScsiVerify10, iscsi.ScsiVerify12, iscsi.ScsiVerify16,
		iscsi.ScsiPrefetch10, iscsi.ScsiPrefetch16, iscsi.ScsiModeSense6, iscsi.ScsiModeSense10:
		return true, false
	case iscsi.ScsiWrite6, iscsi.ScsiWrite10, iscsi.ScsiWrite12, iscsi.ScsiWrite16,
		iscsi.ScsiWriteVerify10, iscsi.ScsiWriteVerify12, iscsi.ScsiWriteVerify16,
		iscsi.ScsiWriteSame10, iscsi.ScsiWriteSame16, iscsi.ScsiUnmap, iscsi.ScsiCompareAndWrite,
		iscsi.ScsiSyncCache10, iscsi.ScsiSyncCache16, iscsi.ScsiModeSelect6, iscsi.ScsiModeSelect10,
		iscsi.ScsiStartStopUnit:
		return false, true
	}
	return false, false
}

// check returns RESERVATION CONFLICT when a reservation held by another
// nexus forbids the command.
func (p *prState) check(r *Request) *Response {
	op := r.CDB[0]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.spc2 != "" && p.spc2 != r.Nexus {
		switch op {
		case iscsi.ScsiInquiry, iscsi.ScsiReportLUNs, iscsi.ScsiRequestSense, iscsi.ScsiRelease6:
			return nil
		}
		return checkCondition(errResvConflict)
	}
	if p.resType == 0 || p.isHolder(r.Nexus) {
		return nil
	}
	read, write := accessClass(op)
	_, registered := p.keys[r.Nexus]
	conflict := false
	switch p.resType {
	case prWE:
		conflict = write
	case prEA:
		conflict = read || write
	case prWERO, prWEAR:
		conflict = write && !registered
	case prEARO, prEAAR:
		conflict = (read || write) && !registered
	}
	if !conflict && (op == iscsi.ScsiReserve6) {
		conflict = true // an SPC-2 reserve under a persistent reservation
	}
	if conflict {
		return checkCondition(errResvConflict)
	}
	return nil
}

func init() {
	handlers[iscsi.ScsiPersistResIn] = (*LU).persistResIn
	handlers[iscsi.ScsiPersistResOut] = (*LU).persistResOut
	handlers[iscsi.ScsiReserve6] = (*LU).reserve6
	handlers[iscsi.ScsiRelease6] = (*LU).release6
}

func (lu *LU) reserve6(ctx context.Context, r *Request) *Response {
	if r.CDB[1]&0x01 != 0 { // third-party/extent reservations are obsolete
		return checkCondition(errInvalidFieldInCDB(1))
	}
	p := &lu.pr
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resType != 0 || (p.spc2 != "" && p.spc2 != r.Nexus) {
		return checkCondition(errResvConflict)
	}
	p.spc2 = r.Nexus
	return good(nil)
}

func (lu *LU) release6(ctx context.Context, r *Request) *Response {
	p := &lu.pr
	p.mu.Lock()
	if p.spc2 == r.Nexus {
		p.spc2 = ""
	}
	p.mu.Unlock()
	return good(nil)
}

func (lu *LU) persistResIn(ctx context.Context, r *Request) *Response {
	c := r.CDB
	alloc := int(be.Uint16(c[7:]))
	p := &lu.pr
	p.mu.Lock()
	defer p.mu.Unlock()
	var d []byte
	switch c[1] & 0x1f {
	case 0: // READ KEYS
		d = make([]byte, 8, 8+8*len(p.keys))
		be.PutUint32(d, p.generation)
		for _, k := range p.sortedKeys() {
			var b [8]byte
			be.PutUint64(b[:], k.key)
			d = append(d, b[:]...)
		}
		be.PutUint32(d[4:], uint32(len(d)-8))
	case 1: // READ RESERVATION
		d = make([]byte, 8)
		be.PutUint32(d, p.generation)
		if p.resType != 0 {
			rd := make([]byte, 16)
			if !allRegistrants(p.resType) {
				be.PutUint64(rd, p.keys[p.holder])
			}
			rd[13] = p.resType & 0x0f // scope 0: logical unit
			d = append(d, rd...)
			be.PutUint32(d[4:], 16)
		}
	case 2: // REPORT CAPABILITIES
		d = make([]byte, 8)
		be.PutUint16(d, 8)
		d[2] = 0x10 // CRH: RESERVE(6) conflicts are handled as SPC-4 says
		d[3] = 0x80 // TMV: the type mask below is valid
		d[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02
		d[5] = 0x01
	case 3: // READ FULL STATUS
		d = make([]byte, 8)
		be.PutUint32(d, p.generation)
		for _, k := range p.sortedKeys() {
			e := make([]byte, 24)
			be.PutUint64(e, k.key)
			if p.isHolder(k.nexus) {
				e[12] = 0x01
				e[13] = p.resType & 0x0f
			}
			tid := transportID(k.nexus)
			be.PutUint32(e[20:], uint32(len(tid)))
			d = append(append(d, e...), tid...)
		}
		be.PutUint32(d[4:], uint32(len(d)-8))
	default:
		return checkCondition(errInvalidFieldInCDB(1))
	}
	return good(allocCut(d, alloc))
}

type regKey struct {
	nexus string
	key   uint64
}

func (p *prState) sortedKeys() []regKey {
	out := make([]regKey, 0, len(p.keys))
	for n, k := range p.keys {
		out = append(out, regKey{n, k})
	}
	for i := 1; i < len(out); i++ { // few registrants: insertion sort by nexus
		for j := i; j > 0 && out[j].nexus < out[j-1].nexus; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// transportID encodes an iSCSI initiator port TransportID (format 01:
// "name,i,0xISID", NUL-terminated, padded to a multiple of 4).
func transportID(nexus string) []byte {
	n := len(nexus) + 1
	n = max(20, (n+3)&^3)
	b := make([]byte, 4+n)
	b[0] = 0x45
	be.PutUint16(b[2:], uint16(n))
	copy(b[4:], nexus)
	return b
}

func (lu *LU) persistResOut(ctx context.Context, r *Request) *Response {
	c := r.CDB
	plen := int64(be.Uint32(c[5:]))
	fail := func(err error) *Response { return checkCondition(err).dataOut(plen) }
	if int64(len(r.DataOut)) != plen {
		return fail(errParamListLength)
	}
	sa := c[1] & 0x1f
	if sa == 7 { // REGISTER AND MOVE
		return fail(errInvalidFieldInCDB(1))
	}
	if sa > 7 {
		return fail(errInvalidFieldInCDB(1))
	}
	if plen != 24 {
		return fail(errParamListLength)
	}
	d := r.DataOut
	key := be.Uint64(d)
	sark := be.Uint64(d[8:])
	flags := d[20]
	if flags&0x08 != 0 || flags&0x01 != 0 { // SPEC_I_PT, APTPL unsupported
		return fail(errInvalidFieldInParam(20))
	}
	scope, typ := c[2]>>4, c[2]&0x0f
	p := &lu.pr
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, registered := p.keys[r.Nexus]
	ok := func() *Response { return good(nil).dataOut(plen) }

	switch sa {
	case 0, 6: // REGISTER, REGISTER AND IGNORE EXISTING KEY
		if !registered {
			if sa == 0 && key != 0 {
				return fail(errResvConflict)
			}
			if sark != 0 {
				p.keys[r.Nexus] = sark
				p.generation++
			}
			return ok()
		}
		if sa == 0 && key != cur {
			return fail(errResvConflict)
		}
		if sark == 0 {
			p.unregister(r.Nexus)
		} else {
			p.keys[r.Nexus] = sark
		}
		p.generation++
		return ok()
	}
	// Everything else needs a registration with the right key.
	if !registered || key != cur {
		return fail(errResvConflict)
	}
	validType := func() bool {
		switch typ {
		case prWE, prEA, prWERO, prEARO, prWEAR, prEAAR:
			return scope == 0
		}
		return false
	}
	switch sa {
	case 1: // RESERVE
		if !validType() {
			return fail(errInvalidFieldInCDB(2))
		}
		if p.resType == 0 {
			if p.spc2 != "" && p.spc2 != r.Nexus {
				return fail(errResvConflict)
			}
			p.resType, p.holder = typ, r.Nexus
			return ok()
		}
		if p.isHolder(r.Nexus) && p.resType == typ {
			return ok()
		}
		return fail(errResvConflict)
	case 2: // RELEASE
		if p.resType == 0 || !p.isHolder(r.Nexus) {
			return ok()
		}
		if !validType() || typ != p.resType {
			return fail(newSense(iscsi.SenseIllegalRequest, ascInvalidRelease))
		}
		t := p.resType
		p.resType, p.holder = 0, ""
		if t == prWERO || t == prEARO || t == prWEAR || t == prEAAR {
			p.uaToRegistrants(r.Nexus, ascReservationsReleased)
		}
		return ok()
	case 3: // CLEAR
		p.uaToRegistrants(r.Nexus, ascReservationsPreempted)
		p.keys = map[string]uint64{}
		p.resType, p.holder = 0, ""
		p.generation++
		return ok()
	case 4, 5: // PREEMPT, PREEMPT AND ABORT
		if p.resType != 0 && !validType() {
			return fail(errInvalidFieldInCDB(2))
		}
		removed := 0
		switch {
		case p.resType == 0:
			if sark == 0 {
				return fail(errInvalidFieldInParam(8))
			}
			removed = p.removeKey(sark, r.Nexus)
		case allRegistrants(p.resType):
			if sark == 0 {
				for n := range p.keys {
					if n != r.Nexus {
						p.lu.addUAOne(n, iscsi.Sense{Key: iscsi.SenseUnitAttention, ASC: ascRegistrationsPreempted})
						delete(p.keys, n)
						removed++
					}
				}
				p.resType, p.holder = typ, r.Nexus
			} else {
				removed = p.removeKey(sark, r.Nexus)
			}
		default:
			if sark == p.keys[p.holder] {
				removed = p.removeKey(sark, r.Nexus)
				p.resType, p.holder = typ, r.Nexus
				removed = max(removed, 1)
			} else {
				if sark == 0 {
					return fail(errInvalidFieldInParam(8))
				}
				removed = p.removeKey(sark, r.Nexus)
			}
		}
		if removed == 0 {
			return fail(errResvConflict)
		}
		p.generation++
		return ok()
	}
	return fail(errInvalidFieldInCDB(1))
}

// unregister drops nexus's key; a holder's reservation goes with it (for
// all-registrants types only when the last registrant leaves).
func (p *prState) unregister(nexus string) {
	delete(p.keys, nexus)
	switch {
	case p.resType == 0:
	case allRegistrants(p.resType):
		if len(p.keys) == 0 {
			p.resType, p.holder = 0, ""
		}
	case p.holder == nexus:
		t := p.resType
		p.resType, p.holder = 0, ""
		if t == prWERO || t == prEARO {
			p.uaToRegistrants(nexus, ascReservationsReleased)
		}
	}
}

// removeKey unregisters every nexus (other than self... included if it
// matches, as SPC-4 allows) registered with key; it returns how many.
func (p *prState) removeKey(key uint64, self string) int {
	n := 0
	for nx, k := range p.keys {
		if k == key {
			delete(p.keys, nx)
			if nx != self {
				p.lu.addUAOne(nx, iscsi.Sense{Key: iscsi.SenseUnitAttention, ASC: ascRegistrationsPreempted})
			}
			if p.holder == nx {
				p.holder = ""
			}
			n++
		}
	}
	if p.resType != 0 && !allRegistrants(p.resType) && p.holder == "" {
		p.resType = 0
	}
	return n
}

func (p *prState) uaToRegistrants(except string, asc uint16) {
	for n := range p.keys {
		if n != except {
			p.lu.addUAOne(n, iscsi.Sense{Key: iscsi.SenseUnitAttention, ASC: asc})
		}
	}
}

package scsi

import (
	"context"
	"sort"

	"github.com/tristore/tristore/proto/iscsi"
)

// REPORT SUPPORTED OPERATION CODES (MAINTENANCE IN, service action 0x0C),
// built from the handler table so it always tells the truth.

func init() {
	handlers[iscsi.ScsiMaintenanceIn] = (*LU).maintenanceIn
}

// serviceActions lists the service actions of opcodes that have them.
var serviceActions = map[byte][]uint16{
	iscsi.ScsiServiceActionIn16: {iscsi.SAReadCapacity16, iscsi.SAGetLBAStatus},
	iscsi.ScsiMaintenanceIn:     {iscsi.SAReportSupportedOps},
	iscsi.ScsiPersistResIn:      {0, 1, 2, 3},
	iscsi.ScsiPersistResOut:     {0, 1, 2, 3, 4, 5, 6},
}

type opEntry struct {
	op    byte
	sa    uint16
	hasSA bool
}

func supportedOps() []opEntry {
	var out []opEntry
	for op := range handlers {
		if sas, ok := serviceActions[op]; ok {
			for _, sa := range sas {
				out = append(out, opEntry{op, sa, true})
			}
		} else {
			out = append(out, opEntry{op: op})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].op != out[j].op {
			return out[i].op < out[j].op
		}
		return out[i].sa < out[j].sa
	})
	return out
}

// usage returns a CDB usage bitmap: the opcode, every field bit usable,
// and the CONTROL byte's NACA/link bits.
func usage(op byte, sa uint16, hasSA bool) []byte {
	n := iscsi.CDBLen(op)
	u := make([]byte, n)
	u[0] = op
	for i := 1; i < n-1; i++ {
		u[i] = 0xff
	}
	u[n-1] = 0x07
	if hasSA {
		u[1] = 0x1f // the service action field
	}
	return u
}

func timeoutsDescriptor() []byte {
	d := make([]byte, 12)
	be.PutUint16(d, 0x0a)
	return d // nominal and recommended timeouts: 0 = not specified
}

func (lu *LU) maintenanceIn(ctx context.Context, r *Request) *Response {
	c := r.CDB
	if c[1]&0x1f != iscsi.SAReportSupportedOps {
		return checkCondition(errInvalidFieldInCDB(1))
	}
	rctd := c[2]&0x80 != 0
	opts := c[2] & 0x07
	reqOp := c[3]
	reqSA := be.Uint16(c[4:])
	alloc := int(be.Uint32(c[6:]))
	var d []byte
	switch opts {
	case 0:
		d = make([]byte, 4)
		for _, e := range supportedOps() {
			desc := make([]byte, 8)
			desc[0] = e.op
			be.PutUint16(desc[2:], e.sa)
			if e.hasSA {
				desc[5] |= 0x01 // SERVACTV
			}
			if rctd {
				desc[5] |= 0x02 // CTDP
			}
			be.PutUint16(desc[6:], uint16(iscsi.CDBLen(e.op)))
			d = append(d, desc...)
			if rctd {
				d = append(d, timeoutsDescriptor()...)
			}
		}
		be.PutUint32(d, uint32(len(d)-4))
	case 1, 2:
		_, ok := handlers[reqOp]
		sas, hasSA := serviceActions[reqOp]
		if (opts == 1 && hasSA) || (opts == 2 && ok && !hasSA) {
			return checkCondition(errInvalidFieldInCDB(2))
		}
		if opts == 2 && ok {
			found := false
			for _, sa := range sas {
				if sa == reqSA {
					found = true
				}
			}
			ok = found
		}
		d = make([]byte, 4)
		if !ok {
			d[1] = 0x01 // not supported
		} else {
			d[1] = 0x03 // supported as the standard says
			u := usage(reqOp, reqSA, hasSA)
			be.PutUint16(d[2:], uint16(len(u)))
			d = append(d, u...)
		}
		if rctd {
			d[1] |= 0x80
			d = append(d, timeoutsDescriptor()...)
		}
	default:
		return checkCondition(errInvalidFieldInCDB(2))
	}
	return good(allocCut(d, alloc))
}

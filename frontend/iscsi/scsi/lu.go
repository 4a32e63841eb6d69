// Package scsi is the SCSI device server of tristore's iSCSI target: it
// executes CDBs (SPC-4 primary commands in spc.go, SBC-3 block commands in
// sbc.go) against a blockdev.Device and returns status, sense data and the
// data-in buffer. It knows nothing about iSCSI PDUs; the transport layer
// collects data-out, splits data-in and computes residuals.
//
// Errors from the device and from CDB checks become sense data in exactly
// one place, sense.go.
package scsi

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/proto/iscsi"
)

// Request is one SCSI command as the transport delivers it.
type Request struct {
	CDB []byte
	// DataOut holds the data-out bytes the initiator sent (len == the
	// iSCSI Expected Data Transfer Length for writes), nil for reads.
	DataOut []byte
	// ExpectedLen is the transport's expected data transfer length.
	ExpectedLen uint32
	// Nexus identifies the I_T nexus (initiator port + target port) for
	// unit attentions and reservations.
	Nexus string
}

// Response is the outcome of a command.
type Response struct {
	Status uint8
	Sense  []byte // fixed-format sense data when Status is CHECK CONDITION
	// DataIn is the data-in buffer the command produced, already cut to
	// its allocation length; the transport sends min(len, ExpectedLen).
	DataIn []byte
	// DataOutLen is the data-out length the CDB asked for (SPDTL) for
	// commands that take data-out, so the transport can report residuals;
	// -1 when the command takes no data-out.
	DataOutLen int64

	pooled bool // DataIn came from GetBuf
}

// dataOut sets DataOutLen, the data-out length the CDB asked for, and
// returns r: every response to a command that takes data-out carries it,
// success or not, so the transport can report residuals.
func (r *Response) dataOut(n int64) *Response {
	r.DataOutLen = n
	return r
}

// Release recycles the data-in buffer; call it once DataIn has been sent.
func (r *Response) Release() {
	if r.pooled {
		PutBuf(r.DataIn)
		r.DataIn, r.pooled = nil, false
	}
}

// Config describes a logical unit.
type Config struct {
	Dev blockdev.Device
	// Serial is the unit serial number (VPD 0x80); ID is 8 bytes used for
	// the NAA designator (VPD 0x83). Both must be stable across restarts.
	Serial string
	ID     [8]byte
	// TargetName is reported as a SCSI name string designator.
	TargetName string
	// Product is the INQUIRY product identification (max 16 chars).
	Product string
	// MaxTransferBytes is the largest READ/WRITE the transport accepts.
	MaxTransferBytes int
}

// LU is one logical unit. It is safe for concurrent use: commands run in
// parallel; COMPARE AND WRITE excludes writes for its duration.
type LU struct {
	cfg   Config
	dev   blockdev.Device
	bs    int
	wce   atomic.Bool  // volatile write cache enabled (mode page 8)
	cawMu sync.RWMutex // writes RLock, COMPARE AND WRITE Lock

	uaMu    sync.Mutex
	nexuses map[string][]iscsi.Sense // pending unit attentions per I_T nexus
	lastCap int64

	pr prState // persistent reservations (pr.go)
}

// New makes a logical unit over cfg.Dev.
func New(cfg Config) *LU {
	if cfg.Product == "" {
		cfg.Product = "VOLUME"
	}
	if cfg.MaxTransferBytes <= 0 {
		cfg.MaxTransferBytes = 32 << 20
	}
	lu := &LU{cfg: cfg, dev: cfg.Dev, bs: cfg.Dev.BlockSize(), nexuses: map[string][]iscsi.Sense{}, lastCap: cfg.Dev.Size()}
	lu.wce.Store(true)
	lu.pr.init()
	lu.pr.lu = lu
	return lu
}

// Device returns the underlying device.
func (lu *LU) Device() blockdev.Device { return lu.dev }

// AddNexus registers an I_T nexus (a session) so it receives unit attentions.
func (lu *LU) AddNexus(nexus string) {
	lu.uaMu.Lock()
	if _, ok := lu.nexuses[nexus]; !ok {
		lu.nexuses[nexus] = nil
	}
	lu.uaMu.Unlock()
}

// RemoveNexus forgets a nexus (session closed): its unit attentions and
// its registrations' reservation hold (SPC: I_T nexus loss keeps PR keys).
func (lu *LU) RemoveNexus(nexus string) {
	lu.uaMu.Lock()
	delete(lu.nexuses, nexus)
	lu.uaMu.Unlock()
	lu.pr.nexusLost(nexus)
}

// Reset is a LOGICAL UNIT RESET or TARGET WARM RESET: every nexus except
// the one that asked gets a POWER ON, RESET unit attention (29/00 for a
// target reset, 29/03 for an LU reset), and SPC-2 reservations are released.
func (lu *LU) Reset(from string, target bool) {
	asc := uint16(0x2903)
	if target {
		asc = 0x2902
	}
	lu.AddUA(from, iscsi.Sense{Key: iscsi.SenseUnitAttention, ASC: asc})
	lu.pr.reset()
}

// AddUA queues a unit attention for every nexus except except.
func (lu *LU) AddUA(except string, s iscsi.Sense) {
	lu.uaMu.Lock()
	for n, q := range lu.nexuses {
		if n != except && len(q) < 8 {
			lu.nexuses[n] = append(q, s)
		}
	}
	lu.uaMu.Unlock()
}

// addUAOne queues a unit attention for one nexus.
func (lu *LU) addUAOne(nexus string, s iscsi.Sense) {
	lu.uaMu.Lock()
	if q, ok := lu.nexuses[nexus]; ok && len(q) < 8 {
		lu.nexuses[nexus] = append(q, s)
	}
	lu.uaMu.Unlock()
}

// checkCapacity raises CAPACITY DATA HAS CHANGED when the device was resized.
func (lu *LU) checkCapacity() {
	sz := lu.dev.Size()
	lu.uaMu.Lock()
	changed := sz != lu.lastCap
	lu.lastCap = sz
	lu.uaMu.Unlock()
	if changed {
		lu.AddUA("", iscsi.Sense{Key: iscsi.SenseUnitAttention, ASC: iscsi.ASCCapacityDataChanged})
	}
}

// popUA returns and removes the oldest unit attention of nexus.
func (lu *LU) popUA(nexus string) (iscsi.Sense, bool) {
	lu.uaMu.Lock()
	defer lu.uaMu.Unlock()
	q := lu.nexuses[nexus]
	if len(q) == 0 {
		return iscsi.Sense{}, false
	}
	lu.nexuses[nexus] = q[1:]
	return q[0], true
}

// Execute runs one command. It never returns a Go error: failures are
// CHECK CONDITION responses with sense data.
func (lu *LU) Execute(ctx context.Context, r *Request) *Response {
	if len(r.CDB) == 0 {
		return checkCondition(errInvalidOpcode)
	}
	lu.checkCapacity()
	op := r.CDB[0]
	// Unit attentions are reported on any command but these (SPC-4 §5.14).
	if op != iscsi.ScsiInquiry && op != iscsi.ScsiReportLUNs && op != iscsi.ScsiRequestSense {
		if s, ok := lu.popUA(r.Nexus); ok {
			return &Response{Status: iscsi.StatusCheckCondition, Sense: s.Marshal(), DataOutLen: -1}
		}
	}
	if resp := lu.pr.check(r); resp != nil {
		return resp
	}
	h, ok := handlers[op]
	if !ok {
		return checkCondition(errInvalidOpcode)
	}
	if need := iscsi.CDBLen(op); need > 0 && len(r.CDB) < need {
		return checkCondition(errInvalidFieldInCDB(0))
	}
	return h(lu, ctx, r)
}

type handler func(lu *LU, ctx context.Context, r *Request) *Response

// handlers maps opcodes to their implementation (filled by spc.go, sbc.go, pr.go).
var handlers = map[byte]handler{}

func good(data []byte) *Response {
	return &Response{Status: iscsi.StatusGood, DataIn: data, DataOutLen: -1}
}

// allocCut limits data to the allocation length.
func allocCut(data []byte, alloc int) []byte {
	if alloc >= 0 && len(data) > alloc {
		return data[:alloc]
	}
	return data
}

// NoSuchLUN answers a command addressed to a LUN that does not exist:
// INQUIRY gets peripheral qualifier 3 ("not connected"), REPORT LUNS
// works as for LUN 0, anything else gets LOGICAL UNIT NOT SUPPORTED.
func NoSuchLUN(r *Request) *Response {
	if len(r.CDB) > 0 {
		switch r.CDB[0] {
		case iscsi.ScsiInquiry:
			if len(r.CDB) >= 5 && r.CDB[1]&0x01 == 0 {
				d := make([]byte, 36)
				d[0] = 0x7f
				d[2], d[3], d[4] = 0x06, 0x12, 31
				return good(allocCut(d, int(be.Uint16(r.CDB[3:]))))
			}
		case iscsi.ScsiReportLUNs:
			lu := &LU{}
			return lu.reportLUNs(context.Background(), r)
		}
	}
	return checkCondition(newSense(iscsi.SenseIllegalRequest, iscsi.ASCLUNNotSupported))
}

// TooLarge answers a command whose transfer exceeds what the target
// accepts (the Block Limits VPD page reports the limit).
func TooLarge() *Response {
	return checkCondition(errInvalidFieldInCDB(0))
}

package iscsi

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// BHSLen is the size of the Basic Header Segment.
const BHSLen = 48

// MaxDataSegmentLength is the largest value the 24-bit DataSegmentLength can hold.
const MaxDataSegmentLength = 1<<24 - 1

// PDU is one iSCSI PDU: a decoded Basic Header Segment, the raw Additional
// Header Segments and the data segment (without padding or digests).
//
// One struct for all opcodes keeps both sides simple: a field is meaningful
// only for the opcodes named in its comment and is zero (ignored) otherwise.
// Flag bits of byte 1 that the RFC defines per opcode have their own bools.
type PDU struct {
	Opcode    Opcode
	Immediate bool // I bit (initiator PDUs)

	// Final is the F bit; for Login PDUs it is the T (Transit) bit.
	Final bool
	// Continue is the C bit of Login and Text PDUs.
	Continue bool

	// SCSI Command flags.
	Read, Write bool
	Attr        uint8 // task attribute (AttrSimple ...)

	// Data-In flags: Acknowledge and StatusPresent (S).
	Acknowledge   bool
	StatusPresent bool
	// Residual flags of SCSI Response and Data-In (O, U) and SCSI Response bidi (o, u).
	ResidualOverflow, ResidualUnderflow bool
	BidiOverflow, BidiUnderflow         bool

	// Login: CSG and NSG stages, VersionMax/VersionMin (request) or
	// VersionMax/VersionActive (response, in VersionMin).
	CSG, NSG               uint8
	VersionMax, VersionMin uint8
	ISID                   [6]byte
	TSIH                   uint16
	StatusClass            uint8 // Login Response
	StatusDetail           uint8 // Login Response

	// Response is byte 2 of SCSI Response, Task Mgmt Response and Logout Response.
	Response uint8
	// Status is the SCSI status (SCSI Response; Data-In with StatusPresent).
	Status uint8
	// Function is the task management function (Task Mgmt Request).
	Function uint8
	// Reason is the logout reason (Logout Request) or reject reason (Reject).
	Reason uint8
	// SNACKType is the type of a SNACK Request.
	SNACKType uint8

	LUN uint64 // 8-byte LUN field, kept as its raw big-endian value
	ITT uint32 // Initiator Task Tag
	TTT uint32 // Target Transfer Tag (Data-Out, Data-In, R2T, NOP, Text, SNACK)
	CID uint16 // Login and Logout Request

	CmdSN     uint32 // initiator PDUs
	ExpStatSN uint32 // initiator PDUs
	StatSN    uint32 // target PDUs
	ExpCmdSN  uint32 // target PDUs
	MaxCmdSN  uint32 // target PDUs

	// DataSN is DataSN (Data-In/Out), R2TSN (R2T), ExpDataSN (SCSI Response,
	// Task Mgmt Request) or DataSN/R2TSN (Reject).
	DataSN       uint32
	BufferOffset uint32 // Data-In, Data-Out, R2T
	// ExpectedDataLength is the Expected Data Transfer Length of a SCSI
	// Command and the Desired Data Transfer Length of an R2T.
	ExpectedDataLength uint32
	ResidualCount      uint32 // SCSI Response, Data-In
	BidiResidualCount  uint32 // SCSI Response
	SNACKTag           uint32 // SCSI Response
	RefTaskTag         uint32 // Task Mgmt Request
	RefCmdSN           uint32 // Task Mgmt Request
	Time2Wait          uint16 // Logout Response
	Time2Retain        uint16 // Logout Response
	BegRun, RunLength  uint32 // SNACK Request

	// Async Message fields.
	AsyncEvent, AsyncVCode uint8
	Param1, Param2, Param3 uint16

	// CDB of a SCSI Command: the 16 bytes of the BHS followed by the
	// Extended CDB AHS, if any (Unmarshal appends it; Marshal splits it).
	CDB []byte

	// AHS holds the Additional Header Segments other than the Extended CDB, raw.
	AHS []byte
	// Data is the data segment without padding.
	Data []byte

	// Raw is the BHS as received (set by Unmarshal; Reject quotes it).
	Raw [BHSLen]byte
}

// Decoding errors. ReadPDU wraps them with context.
var (
	ErrShortHeader   = errors.New("iscsi: short basic header segment")
	ErrUnknownOpcode = errors.New("iscsi: unknown opcode")
	ErrDataTooLong   = errors.New("iscsi: data segment longer than MaxRecvDataSegmentLength")
	ErrHeaderDigest  = errors.New("iscsi: header digest mismatch")
	ErrDataDigest    = errors.New("iscsi: data digest mismatch")
	ErrBadAHS        = errors.New("iscsi: malformed additional header segment")
	ErrBadText       = errors.New("iscsi: malformed text key=value data")
)

// AHS types.
const (
	AHSExtendedCDB = 1
	AHSBidiReadLen = 2
)

var be = binary.BigEndian

// MarshalBHS encodes p's Basic Header Segment. TotalAHSLength and
// DataSegmentLength are taken from len(ahs) and len(p.Data), where ahs is
// the encoded AHS (see EncodeAHS).
func (p *PDU) MarshalBHS(ahsLen int) [BHSLen]byte {
	var b [BHSLen]byte
	b[0] = byte(p.Opcode) & 0x3f
	if p.Immediate {
		b[0] |= 0x40
	}
	if p.Final {
		b[1] |= 0x80
	}
	b[4] = byte(ahsLen / 4)
	dl := len(p.Data)
	b[5], b[6], b[7] = byte(dl>>16), byte(dl>>8), byte(dl)
	be.PutUint32(b[16:], p.ITT)
	switch p.Opcode {
	case OpNOPOut:
		be.PutUint64(b[8:], p.LUN)
		be.PutUint32(b[20:], p.TTT)
		be.PutUint32(b[24:], p.CmdSN)
		be.PutUint32(b[28:], p.ExpStatSN)
	case OpSCSICommand:
		if p.Read {
			b[1] |= 0x40
		}
		if p.Write {
			b[1] |= 0x20
		}
		b[1] |= p.Attr & 0x07
		be.PutUint64(b[8:], p.LUN)
		be.PutUint32(b[20:], p.ExpectedDataLength)
		be.PutUint32(b[24:], p.CmdSN)
		be.PutUint32(b[28:], p.ExpStatSN)
		copy(b[32:48], p.CDB)
	case OpTaskMgmtReq:
		b[1] = 0x80 | p.Function&0x7f
		be.PutUint64(b[8:], p.LUN)
		be.PutUint32(b[20:], p.RefTaskTag)
		be.PutUint32(b[24:], p.CmdSN)
		be.PutUint32(b[28:], p.ExpStatSN)
		be.PutUint32(b[32:], p.RefCmdSN)
		be.PutUint32(b[36:], p.DataSN)
	case OpLoginReq, OpLoginResp:
		if p.Opcode == OpLoginReq {
			b[0] |= 0x40 // login requests are always immediate
		}
		if p.Continue {
			b[1] |= 0x40
		}
		b[1] |= (p.CSG & 3) << 2
		b[1] |= p.NSG & 3
		b[2], b[3] = p.VersionMax, p.VersionMin
		copy(b[8:14], p.ISID[:])
		be.PutUint16(b[14:], p.TSIH)
		if p.Opcode == OpLoginReq {
			be.PutUint16(b[20:], p.CID)
			be.PutUint32(b[24:], p.CmdSN)
			be.PutUint32(b[28:], p.ExpStatSN)
		} else {
			be.PutUint32(b[24:], p.StatSN)
			be.PutUint32(b[28:], p.ExpCmdSN)
			be.PutUint32(b[32:], p.MaxCmdSN)
			b[36], b[37] = p.StatusClass, p.StatusDetail
		}
	case OpTextReq:
		if p.Continue {
			b[1] |= 0x40
		}
		be.PutUint64(b[8:], p.LUN)
		be.PutUint32(b[20:], p.TTT)
		be.PutUint32(b[24:], p.CmdSN)
		be.PutUint32(b[28:], p.ExpStatSN)
	case OpDataOut:
		be.PutUint64(b[8:], p.LUN)
		be.PutUint32(b[20:], p.TTT)
		be.PutUint32(b[28:], p.ExpStatSN)
		be.PutUint32(b[36:], p.DataSN)
		be.PutUint32(b[40:], p.BufferOffset)
	case OpLogoutReq:
		b[1] = 0x80 | p.Reason&0x7f
		be.PutUint16(b[20:], p.CID)
		be.PutUint32(b[24:], p.CmdSN)
		be.PutUint32(b[28:], p.ExpStatSN)
	case OpSNACKReq:
		b[1] = 0x80 | p.SNACKType&0x0f
		be.PutUint64(b[8:], p.LUN)
		be.PutUint32(b[20:], p.TTT)
		be.PutUint32(b[28:], p.ExpStatSN)
		be.PutUint32(b[40:], p.BegRun)
		be.PutUint32(b[44:], p.RunLength)
	case OpNOPIn:
		b[1] = 0x80
		be.PutUint64(b[8:], p.LUN)
		be.PutUint32(b[20:], p.TTT)
		p.putTargetSNs(&b)
	case OpSCSIResponse:
		b[1] = 0x80 | p.residualBits()
		b[2], b[3] = p.Response, p.Status
		be.PutUint32(b[20:], p.SNACKTag)
		p.putTargetSNs(&b)
		be.PutUint32(b[36:], p.DataSN)
		be.PutUint32(b[40:], p.BidiResidualCount)
		be.PutUint32(b[44:], p.ResidualCount)
	case OpTaskMgmtResp:
		b[1] = 0x80
		b[2] = p.Response
		p.putTargetSNs(&b)
	case OpTextResp:
		if p.Continue {
			b[1] |= 0x40
		}
		be.PutUint64(b[8:], p.LUN)
		be.PutUint32(b[20:], p.TTT)
		p.putTargetSNs(&b)
	case OpDataIn:
		if p.Acknowledge {
			b[1] |= 0x40
		}
		if p.StatusPresent {
			b[1] |= 0x01 | p.residualBits()&0x06
			b[3] = p.Status
		}
		be.PutUint64(b[8:], p.LUN)
		be.PutUint32(b[20:], p.TTT)
		p.putTargetSNs(&b)
		be.PutUint32(b[36:], p.DataSN)
		be.PutUint32(b[40:], p.BufferOffset)
		be.PutUint32(b[44:], p.ResidualCount)
	case OpLogoutResp:
		b[1] = 0x80
		b[2] = p.Response
		p.putTargetSNs(&b)
		be.PutUint16(b[40:], p.Time2Wait)
		be.PutUint16(b[42:], p.Time2Retain)
	case OpR2T:
		b[1] = 0x80
		be.PutUint64(b[8:], p.LUN)
		be.PutUint32(b[20:], p.TTT)
		p.putTargetSNs(&b)
		be.PutUint32(b[36:], p.DataSN)
		be.PutUint32(b[40:], p.BufferOffset)
		be.PutUint32(b[44:], p.ExpectedDataLength)
	case OpAsyncMsg:
		b[1] = 0x80
		be.PutUint64(b[8:], p.LUN)
		p.putTargetSNs(&b)
		b[36], b[37] = p.AsyncEvent, p.AsyncVCode
		be.PutUint16(b[38:], p.Param1)
		be.PutUint16(b[40:], p.Param2)
		be.PutUint16(b[42:], p.Param3)
	case OpReject:
		b[1] = 0x80
		b[2] = p.Reason
		p.putTargetSNs(&b)
		be.PutUint32(b[36:], p.DataSN)
	}
	return b
}

func (p *PDU) putTargetSNs(b *[BHSLen]byte) {
	be.PutUint32(b[24:], p.StatSN)
	be.PutUint32(b[28:], p.ExpCmdSN)
	be.PutUint32(b[32:], p.MaxCmdSN)
}

func (p *PDU) residualBits() byte {
	var f byte
	if p.BidiOverflow {
		f |= 0x10
	}
	if p.BidiUnderflow {
		f |= 0x08
	}
	if p.ResidualOverflow {
		f |= 0x04
	}
	if p.ResidualUnderflow {
		f |= 0x02
	}
	return f
}

// UnmarshalBHS decodes a 48-byte Basic Header Segment. It returns the
// TotalAHSLength in bytes and the DataSegmentLength so the caller can read
// the rest of the PDU. An unknown opcode is decoded (Opcode, ITT, Raw set)
// and reported with ErrUnknownOpcode so a target can answer with Reject.
func UnmarshalBHS(b []byte) (p *PDU, ahsLen, dataLen int, err error) {
	if len(b) < BHSLen {
		return nil, 0, 0, ErrShortHeader
	}
	p = &PDU{}
	copy(p.Raw[:], b)
	p.Opcode = Opcode(b[0] & 0x3f)
	p.Immediate = b[0]&0x40 != 0
	p.Final = b[1]&0x80 != 0
	switch p.Opcode {
	case OpTaskMgmtReq, OpLogoutReq, OpSNACKReq, OpNOPIn, OpSCSIResponse, OpTaskMgmtResp,
		OpLogoutResp, OpR2T, OpAsyncMsg, OpReject:
		// RFC 7143: the F bit of these PDUs is always 1 (Marshal writes
		// it so); a peer that leaves it clear means the same PDU.
		p.Final = true
	}
	ahsLen = int(b[4]) * 4
	dataLen = int(b[5])<<16 | int(b[6])<<8 | int(b[7])
	p.ITT = be.Uint32(b[16:])
	switch p.Opcode {
	case OpNOPOut:
		p.LUN = be.Uint64(b[8:])
		p.TTT = be.Uint32(b[20:])
		p.CmdSN = be.Uint32(b[24:])
		p.ExpStatSN = be.Uint32(b[28:])
	case OpSCSICommand:
		p.Read = b[1]&0x40 != 0
		p.Write = b[1]&0x20 != 0
		p.Attr = b[1] & 0x07
		p.LUN = be.Uint64(b[8:])
		p.ExpectedDataLength = be.Uint32(b[20:])
		p.CmdSN = be.Uint32(b[24:])
		p.ExpStatSN = be.Uint32(b[28:])
		p.CDB = append([]byte(nil), b[32:48]...)
	case OpTaskMgmtReq:
		p.Function = b[1] & 0x7f
		p.LUN = be.Uint64(b[8:])
		p.RefTaskTag = be.Uint32(b[20:])
		p.CmdSN = be.Uint32(b[24:])
		p.ExpStatSN = be.Uint32(b[28:])
		p.RefCmdSN = be.Uint32(b[32:])
		p.DataSN = be.Uint32(b[36:])
	case OpLoginReq, OpLoginResp:
		if p.Opcode == OpLoginReq {
			p.Immediate = true // RFC 7143: always immediate (Marshal sets the I bit)
		}
		p.Continue = b[1]&0x40 != 0
		p.CSG = (b[1] >> 2) & 3
		p.NSG = b[1] & 3
		p.VersionMax, p.VersionMin = b[2], b[3]
		copy(p.ISID[:], b[8:14])
		p.TSIH = be.Uint16(b[14:])
		if p.Opcode == OpLoginReq {
			p.CID = be.Uint16(b[20:])
			p.CmdSN = be.Uint32(b[24:])
			p.ExpStatSN = be.Uint32(b[28:])
		} else {
			p.getTargetSNs(b)
			p.StatusClass, p.StatusDetail = b[36], b[37]
		}
	case OpTextReq:
		p.Continue = b[1]&0x40 != 0
		p.LUN = be.Uint64(b[8:])
		p.TTT = be.Uint32(b[20:])
		p.CmdSN = be.Uint32(b[24:])
		p.ExpStatSN = be.Uint32(b[28:])
	case OpDataOut:
		p.LUN = be.Uint64(b[8:])
		p.TTT = be.Uint32(b[20:])
		p.ExpStatSN = be.Uint32(b[28:])
		p.DataSN = be.Uint32(b[36:])
		p.BufferOffset = be.Uint32(b[40:])
	case OpLogoutReq:
		p.Reason = b[1] & 0x7f
		p.CID = be.Uint16(b[20:])
		p.CmdSN = be.Uint32(b[24:])
		p.ExpStatSN = be.Uint32(b[28:])
	case OpSNACKReq:
		p.SNACKType = b[1] & 0x0f
		p.LUN = be.Uint64(b[8:])
		p.TTT = be.Uint32(b[20:])
		p.ExpStatSN = be.Uint32(b[28:])
		p.BegRun = be.Uint32(b[40:])
		p.RunLength = be.Uint32(b[44:])
	case OpNOPIn:
		p.LUN = be.Uint64(b[8:])
		p.TTT = be.Uint32(b[20:])
		p.getTargetSNs(b)
	case OpSCSIResponse:
		p.getResidualBits(b[1])
		p.Response, p.Status = b[2], b[3]
		p.SNACKTag = be.Uint32(b[20:])
		p.getTargetSNs(b)
		p.DataSN = be.Uint32(b[36:])
		p.BidiResidualCount = be.Uint32(b[40:])
		p.ResidualCount = be.Uint32(b[44:])
	case OpTaskMgmtResp:
		p.Response = b[2]
		p.getTargetSNs(b)
	case OpTextResp:
		p.Continue = b[1]&0x40 != 0
		p.LUN = be.Uint64(b[8:])
		p.TTT = be.Uint32(b[20:])
		p.getTargetSNs(b)
	case OpDataIn:
		p.Acknowledge = b[1]&0x40 != 0
		p.StatusPresent = b[1]&0x01 != 0
		if p.StatusPresent {
			p.getResidualBits(b[1] & 0x06)
			p.Status = b[3]
		}
		p.LUN = be.Uint64(b[8:])
		p.TTT = be.Uint32(b[20:])
		p.getTargetSNs(b)
		p.DataSN = be.Uint32(b[36:])
		p.BufferOffset = be.Uint32(b[40:])
		p.ResidualCount = be.Uint32(b[44:])
	case OpLogoutResp:
		p.Response = b[2]
		p.getTargetSNs(b)
		p.Time2Wait = be.Uint16(b[40:])
		p.Time2Retain = be.Uint16(b[42:])
	case OpR2T:
		p.LUN = be.Uint64(b[8:])
		p.TTT = be.Uint32(b[20:])
		p.getTargetSNs(b)
		p.DataSN = be.Uint32(b[36:])
		p.BufferOffset = be.Uint32(b[40:])
		p.ExpectedDataLength = be.Uint32(b[44:])
	case OpAsyncMsg:
		p.LUN = be.Uint64(b[8:])
		p.getTargetSNs(b)
		p.AsyncEvent, p.AsyncVCode = b[36], b[37]
		p.Param1 = be.Uint16(b[38:])
		p.Param2 = be.Uint16(b[40:])
		p.Param3 = be.Uint16(b[42:])
	case OpReject:
		p.Reason = b[2]
		p.getTargetSNs(b)
		p.DataSN = be.Uint32(b[36:])
	default:
		return p, ahsLen, dataLen, fmt.Errorf("%w 0x%02x", ErrUnknownOpcode, uint8(p.Opcode))
	}
	return p, ahsLen, dataLen, nil
}

func (p *PDU) getTargetSNs(b []byte) {
	p.StatSN = be.Uint32(b[24:])
	p.ExpCmdSN = be.Uint32(b[28:])
	p.MaxCmdSN = be.Uint32(b[32:])
}

func (p *PDU) getResidualBits(f byte) {
	p.BidiOverflow = f&0x10 != 0
	p.BidiUnderflow = f&0x08 != 0
	p.ResidualOverflow = f&0x04 != 0
	p.ResidualUnderflow = f&0x02 != 0
}

// EncodeAHS returns the AHS bytes for p: an Extended CDB AHS when the CDB
// is longer than 16 bytes, followed by p.AHS (which must be padded already).
func (p *PDU) EncodeAHS() []byte {
	if p.Opcode != OpSCSICommand || len(p.CDB) <= 16 {
		return p.AHS
	}
	ext := p.CDB[16:]
	l := len(ext) + 1 // AHSLength counts the reserved byte
	out := make([]byte, 0, pad4(4+len(ext))+len(p.AHS))
	out = append(out, byte(l>>8), byte(l), AHSExtendedCDB, 0)
	out = append(out, ext...)
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return append(out, p.AHS...)
}

// decodeAHS parses raw AHS bytes into p: the Extended CDB is appended to
// p.CDB, everything else is kept in p.AHS.
func (p *PDU) decodeAHS(ahs []byte) error {
	rest := ahs
	for len(rest) > 0 {
		if len(rest) < 4 {
			return ErrBadAHS
		}
		l := int(be.Uint16(rest))
		typ := rest[2]
		// AHSLength excludes the 3-byte (length, type) header and
		// includes the type-specific byte at offset 3.
		total := 3 + l
		padded := pad4(total)
		if l == 0 || padded > len(rest) {
			return ErrBadAHS
		}
		if typ == AHSExtendedCDB && p.Opcode == OpSCSICommand {
			p.CDB = append(p.CDB, rest[4:total]...)
		} else {
			p.AHS = append(p.AHS, rest[:padded]...)
		}
		rest = rest[padded:]
	}
	return nil
}

// pad4 rounds n up to a multiple of 4.
func pad4(n int) int { return (n + 3) &^ 3 }

// String summarises a PDU for logs.
func (p *PDU) String() string {
	return fmt.Sprintf("%s itt=0x%x ttt=0x%x cmdsn=%d statsn=%d data=%d", p.Opcode, p.ITT, p.TTT, p.CmdSN, p.StatSN, len(p.Data))
}

var _ fmt.Stringer = (*PDU)(nil)

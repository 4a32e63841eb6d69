package iscsi

import "fmt"

// SCSI status codes (SAM-5).
const (
	StatusGood                = 0x00
	StatusCheckCondition      = 0x02
	StatusConditionMet        = 0x04
	StatusBusy                = 0x08
	StatusReservationConflict = 0x18
	StatusTaskSetFull         = 0x28
	StatusACAActive           = 0x30
	StatusTaskAborted         = 0x40
)

// Sense keys (SPC-4 §4.5.6).
const (
	SenseNoSense        = 0x0
	SenseRecoveredError = 0x1
	SenseNotReady       = 0x2
	SenseMediumError    = 0x3
	SenseHardwareError  = 0x4
	SenseIllegalRequest = 0x5
	SenseUnitAttention  = 0x6
	SenseDataProtect    = 0x7
	SenseAbortedCommand = 0xb
	SenseMiscompare     = 0xe
)

// ASC/ASCQ pairs used by tristore, as one 16-bit value (ASC<<8 | ASCQ).
const (
	ASCNone                     = 0x0000
	ASCWriteError               = 0x0c00
	ASCUnrecoveredReadError     = 0x1100
	ASCMiscompareDuringVerify   = 0x1d00
	ASCParameterListLength      = 0x1a00
	ASCInvalidOpcode            = 0x2000
	ASCLBAOutOfRange            = 0x2100
	ASCInvalidFieldInCDB        = 0x2400
	ASCLUNNotSupported          = 0x2500
	ASCInvalidFieldInParamList  = 0x2600
	ASCWriteProtected           = 0x2700
	ASCPowerOnReset             = 0x2900
	ASCParametersChanged        = 0x2a00
	ASCCapacityDataChanged      = 0x2a09
	ASCReportedLUNsChanged      = 0x3f0e
	ASCSpaceAllocationFailed    = 0x2707
	ASCInternalTargetFailure    = 0x4400
	ASCDataPhaseError           = 0x4b00
	ASCCommandsClearedByAnother = 0x2f00
	ASCSavingNotSupported       = 0x3900
	ASCLogicalUnitNotReady      = 0x0402 // initializing command required (stopped)
	ASCMediumNotPresent         = 0x3a00
)

// Sense is fixed-format sense data (SPC-4 §4.5.3), the form tristore sends.
type Sense struct {
	Key  uint8
	ASC  uint16 // ASC<<8 | ASCQ
	Info uint32 // INFORMATION field, valid when InfoValid
	// InfoValid sets the VALID bit (e.g. the first miscompare offset).
	InfoValid bool
	// SKSV/field pointer for INVALID FIELD IN CDB (optional).
	FieldPointer      uint16
	FieldPointerValid bool
	FieldInCDB        bool
}

// SenseLen is the size of the fixed-format sense data we generate.
const SenseLen = 18

// Marshal encodes fixed-format sense data (response code 0x70, current).
func (s Sense) Marshal() []byte {
	b := make([]byte, SenseLen)
	b[0] = 0x70
	if s.InfoValid {
		b[0] |= 0x80
		be.PutUint32(b[3:], s.Info)
	}
	b[2] = s.Key & 0x0f
	b[7] = SenseLen - 8
	b[12] = byte(s.ASC >> 8)
	b[13] = byte(s.ASC)
	if s.FieldPointerValid {
		b[15] = 0x80
		if s.FieldInCDB {
			b[15] |= 0x40
		}
		be.PutUint16(b[16:], s.FieldPointer)
	}
	return b
}

// ParseSense decodes fixed (0x70/0x71) or descriptor (0x72/0x73) sense data.
func ParseSense(b []byte) (Sense, error) {
	if len(b) < 1 {
		return Sense{}, fmt.Errorf("iscsi: empty sense data")
	}
	var s Sense
	switch b[0] & 0x7f {
	case 0x70, 0x71:
		if len(b) < 14 {
			return s, fmt.Errorf("iscsi: short fixed sense data (%d bytes)", len(b))
		}
		s.Key = b[2] & 0x0f
		s.ASC = uint16(b[12])<<8 | uint16(b[13])
		if b[0]&0x80 != 0 {
			s.InfoValid = true
			s.Info = be.Uint32(b[3:])
		}
		// Sense-key specific bytes (SKSV set): for ILLEGAL REQUEST, the
		// field pointer, so what Marshal wrote reads back the same.
		if len(b) >= 18 && b[7] >= 10 && b[15]&0x80 != 0 {
			s.FieldPointerValid = true
			s.FieldInCDB = b[15]&0x40 != 0
			s.FieldPointer = be.Uint16(b[16:])
		}
	case 0x72, 0x73:
		if len(b) < 4 {
			return s, fmt.Errorf("iscsi: short descriptor sense data")
		}
		s.Key = b[1] & 0x0f
		s.ASC = uint16(b[2])<<8 | uint16(b[3])
	default:
		return s, fmt.Errorf("iscsi: unknown sense response code 0x%02x", b[0])
	}
	return s, nil
}

func (s Sense) String() string {
	return fmt.Sprintf("sense key 0x%x asc/ascq 0x%02x/0x%02x", s.Key, s.ASC>>8, s.ASC&0xff)
}

// SenseSegment wraps sense data for the data segment of a SCSI Response:
// a 2-byte SenseLength followed by the sense bytes (RFC 7143 §11.4.7).
func SenseSegment(sense []byte) []byte {
	out := make([]byte, 2+len(sense))
	be.PutUint16(out, uint16(len(sense)))
	copy(out[2:], sense)
	return out
}

// SenseFromSegment extracts the sense bytes of a SCSI Response data segment.
func SenseFromSegment(data []byte) ([]byte, error) {
	if len(data) < 2 {
		return nil, fmt.Errorf("iscsi: SCSI Response data segment too short for sense length")
	}
	n := int(be.Uint16(data))
	if 2+n > len(data) {
		return nil, fmt.Errorf("iscsi: sense length %d exceeds data segment", n)
	}
	return data[2 : 2+n], nil
}

// CheckConditionError is a SCSI command that ended in CHECK CONDITION, as
// an error for initiators.
type CheckConditionError struct {
	Sense Sense
}

func (e *CheckConditionError) Error() string { return "scsi: check condition: " + e.Sense.String() }

var _ error = (*CheckConditionError)(nil)

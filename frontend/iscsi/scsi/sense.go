package scsi

import (
	"context"
	"errors"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/proto/iscsi"
	"github.com/tristore/tristore/store"
)

// This file is the one place where errors become SCSI status and sense
// data. Handlers return either a *senseError built by the helpers below or
// an error from the device, which checkCondition translates.

// senseError is a CHECK CONDITION with specific sense data.
type senseError struct{ s iscsi.Sense }

func (e *senseError) Error() string { return e.s.String() }

func newSense(key uint8, asc uint16) *senseError { return &senseError{iscsi.Sense{Key: key, ASC: asc}} }

const ascInvalidFieldInIU = 0x0e03

var (
	errInvalidOpcode    = newSense(iscsi.SenseIllegalRequest, iscsi.ASCInvalidOpcode)
	errLBAOutOfRange    = newSense(iscsi.SenseIllegalRequest, iscsi.ASCLBAOutOfRange)
	errParamListLength  = newSense(iscsi.SenseIllegalRequest, iscsi.ASCParameterListLength)
	errSavingNotSupp    = newSense(iscsi.SenseIllegalRequest, iscsi.ASCSavingNotSupported)
	errInvalidFieldInIU = newSense(iscsi.SenseIllegalRequest, ascInvalidFieldInIU)
	errResvConflict     = errors.New("reservation conflict")
)

// errInvalidFieldInCDB points at the offending CDB byte.
func errInvalidFieldInCDB(byteOff uint16) *senseError {
	return &senseError{iscsi.Sense{Key: iscsi.SenseIllegalRequest, ASC: iscsi.ASCInvalidFieldInCDB,
		FieldPointerValid: true, FieldInCDB: true, FieldPointer: byteOff}}
}

// errInvalidFieldInParam points at the offending parameter list byte.
func errInvalidFieldInParam(byteOff uint16) *senseError {
	return &senseError{iscsi.Sense{Key: iscsi.SenseIllegalRequest, ASC: iscsi.ASCInvalidFieldInParamList,
		FieldPointerValid: true, FieldPointer: byteOff}}
}

// errMiscompare reports the byte offset of the first difference.
func errMiscompare(off uint32) *senseError {
	return &senseError{iscsi.Sense{Key: iscsi.SenseMiscompare, ASC: iscsi.ASCMiscompareDuringVerify, InfoValid: true, Info: off}}
}

// checkCondition turns any error into a response. Device errors map to:
// out of range -> ILLEGAL REQUEST/LBA OUT OF RANGE; no space -> DATA
// PROTECT/SPACE ALLOCATION FAILED WRITE PROTECT; closed -> NOT READY;
// cancelled -> ABORTED COMMAND; anything else -> MEDIUM ERROR.
func checkCondition(err error) *Response {
	return checkConditionRW(err, false)
}

func checkConditionRW(err error, write bool) *Response {
	var se *senseError
	var s iscsi.Sense
	switch {
	case errors.As(err, &se):
		s = se.s
	case errors.Is(err, errResvConflict):
		return &Response{Status: iscsi.StatusReservationConflict, DataOutLen: -1}
	case errors.Is(err, blockdev.ErrOutOfRange):
		s = iscsi.Sense{Key: iscsi.SenseIllegalRequest, ASC: iscsi.ASCLBAOutOfRange}
	case errors.Is(err, blockdev.ErrMisaligned):
		s = iscsi.Sense{Key: iscsi.SenseIllegalRequest, ASC: iscsi.ASCInvalidFieldInCDB}
	case errors.Is(err, store.ErrNoSpace):
		s = iscsi.Sense{Key: iscsi.SenseDataProtect, ASC: iscsi.ASCSpaceAllocationFailed}
	case errors.Is(err, store.ErrReadOnly):
		s = iscsi.Sense{Key: iscsi.SenseDataProtect, ASC: iscsi.ASCWriteProtected}
	case errors.Is(err, blockdev.ErrClosed):
		s = iscsi.Sense{Key: iscsi.SenseNotReady, ASC: iscsi.ASCMediumNotPresent}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		s = iscsi.Sense{Key: iscsi.SenseAbortedCommand, ASC: iscsi.ASCNone}
	case write:
		s = iscsi.Sense{Key: iscsi.SenseMediumError, ASC: iscsi.ASCWriteError}
	default:
		s = iscsi.Sense{Key: iscsi.SenseMediumError, ASC: iscsi.ASCUnrecoveredReadError}
	}
	return &Response{Status: iscsi.StatusCheckCondition, Sense: s.Marshal(), DataOutLen: -1}
}

var _ error = (*senseError)(nil)

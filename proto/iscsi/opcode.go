package iscsi

import "fmt"

// Opcode is the 6-bit operation code in byte 0 of every BHS.
type Opcode uint8

// Initiator opcodes (RFC 7143 §11.1.1).
const (
	OpNOPOut      Opcode = 0x00
	OpSCSICommand Opcode = 0x01
	OpTaskMgmtReq Opcode = 0x02
	OpLoginReq    Opcode = 0x03
	OpTextReq     Opcode = 0x04
	OpDataOut     Opcode = 0x05
	OpLogoutReq   Opcode = 0x06
	OpSNACKReq    Opcode = 0x10
)

// Target opcodes.
const (
	OpNOPIn        Opcode = 0x20
	OpSCSIResponse Opcode = 0x21
	OpTaskMgmtResp Opcode = 0x22
	OpLoginResp    Opcode = 0x23
	OpTextResp     Opcode = 0x24
	OpDataIn       Opcode = 0x25
	OpLogoutResp   Opcode = 0x26
	OpR2T          Opcode = 0x31
	OpAsyncMsg     Opcode = 0x32
	OpReject       Opcode = 0x3f
)

var opNames = map[Opcode]string{
	OpNOPOut: "NOP-Out", OpSCSICommand: "SCSI-Command", OpTaskMgmtReq: "Task-Mgmt-Request",
	OpLoginReq: "Login-Request", OpTextReq: "Text-Request", OpDataOut: "Data-Out",
	OpLogoutReq: "Logout-Request", OpSNACKReq: "SNACK-Request", OpNOPIn: "NOP-In",
	OpSCSIResponse: "SCSI-Response", OpTaskMgmtResp: "Task-Mgmt-Response", OpLoginResp: "Login-Response",
	OpTextResp: "Text-Response", OpDataIn: "Data-In", OpLogoutResp: "Logout-Response",
	OpR2T: "R2T", OpAsyncMsg: "Async-Message", OpReject: "Reject",
}

func (o Opcode) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("opcode(0x%02x)", uint8(o))
}

// Known reports whether o is an opcode defined by RFC 7143.
func (o Opcode) Known() bool { _, ok := opNames[o]; return ok }

// ReservedTag is the Initiator Task Tag / Target Transfer Tag value meaning "none".
const ReservedTag uint32 = 0xffffffff

// Login stages (CSG/NSG).
const (
	StageSecurity    = 0
	StageOperational = 1
	StageFullFeature = 3
)

// Login status classes and details (RFC 7143 §11.13.5).
const (
	LoginSuccess          = 0x00
	LoginRedirect         = 0x01
	LoginInitiatorError   = 0x02
	LoginTargetError      = 0x03
	DetailAuthFailure     = 0x01 // class 2
	DetailAuthorization   = 0x02 // class 2
	DetailNotFound        = 0x03 // class 2
	DetailTargetRemoved   = 0x04
	DetailUnsupportedVer  = 0x05
	DetailTooManyConns    = 0x06
	DetailMissingParam    = 0x07
	DetailCantIncludeConn = 0x08
	DetailSessionType     = 0x09
	DetailSessionNotExist = 0x0a
	DetailInvalidDuring   = 0x0b // invalid request during login
	DetailTargetInternal  = 0x00 // class 3: target error
	DetailOutOfResources  = 0x02 // class 3
)

// Reject reasons (RFC 7143 §11.17.1).
const (
	RejectDataDigest       = 0x02
	RejectSNACK            = 0x03
	RejectProtocolError    = 0x04
	RejectCmdNotSupported  = 0x05
	RejectImmCmdReject     = 0x06
	RejectTaskInProgress   = 0x07
	RejectInvalidDataAck   = 0x08
	RejectInvalidPDUField  = 0x09
	RejectLongOpReject     = 0x0a
	RejectWaitingForLogout = 0x0c
)

// Task management functions (RFC 7143 §11.5.1).
const (
	TMFAbortTask        = 1
	TMFAbortTaskSet     = 2
	TMFClearACA         = 3
	TMFClearTaskSet     = 4
	TMFLogicalUnitReset = 5
	TMFTargetWarmReset  = 6
	TMFTargetColdReset  = 7
	TMFTaskReassign     = 8
)

// Task management responses (RFC 7143 §11.6.1).
const (
	TMFRespComplete      = 0
	TMFRespNoTask        = 1
	TMFRespNoLUN         = 2
	TMFRespTaskAllegiant = 3
	TMFRespNoReassign    = 4
	TMFRespNotSupported  = 5
	TMFRespAuthFailed    = 6
	TMFRespRejected      = 255
)

// Logout reasons and responses (RFC 7143 §11.14, §11.15).
const (
	LogoutCloseSession    = 0
	LogoutCloseConnection = 1
	LogoutRemoveForRecov  = 2
	LogoutRespSuccess     = 0
	LogoutRespCIDNotFound = 1
	LogoutRespNoRecovery  = 2
	LogoutRespFailed      = 3
)

// SCSI Response "Response" field.
const (
	RespCompleted    = 0x00
	RespTargetFailed = 0x01
)

// Task attributes in a SCSI Command.
const (
	AttrUntagged = 0
	AttrSimple   = 1
	AttrOrdered  = 2
	AttrHead     = 3
	AttrACA      = 4
)

// Package iscsi is the iSCSI wire codec (RFC 7143) shared by tristore's
// target (frontend/iscsi) and initiator (client/iscsi).
//
// Why hand-written: no maintained Go iSCSI library can be installed here
// (the few Go projects, e.g. gotgt, are whole targets with their own
// backing-store model, not importable codecs), and both of our sides need
// exactly the same encoding of the 48-byte Basic Header Segment, the text
// keys and the negotiation rules. Writing it once keeps them in agreement.
//
// What is here:
//
//   - PDU: every opcode's Basic Header Segment, decoded into one struct whose
//     fields are named after RFC 7143 (only the fields of the PDU's opcode
//     are meaningful), plus the Additional Header Segments and the data
//     segment. Marshal/Unmarshal (pdu.go).
//   - Framing: ReadPDU/WritePDU and the Conn type over a net.Conn with the
//     MaxRecvDataSegmentLength check, 4-byte padding and optional CRC32C
//     header and data digests (frame.go, digest.go).
//   - Text and login keys: key=value\0 encoding (text.go) and the
//     negotiation rules (list, min, max, AND, OR, declarative) that both the
//     target and the initiator apply (params.go).
//   - CHAP with MD5 (RFC 1994) as used by iSCSI login (chap.go).
//   - SCSI: CDB builders and parsers for the commands tristore uses, status
//     codes and fixed-format sense data (cdb.go, sense.go).
//
// Byte order is big-endian everywhere except the CRC32C digests, which go
// on the wire least-significant byte first (RFC 7143 B.4: 32 zero bytes
// give the digest bytes aa 36 91 8a).
package iscsi

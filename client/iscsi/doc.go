// Package iscsi is tristore's userspace iSCSI initiator (RFC 7143). A
// Session logs in to one target (None or CHAP, one-way or mutual; CRC32C
// header and data digests), keeps many SCSI commands in flight within the
// target's CmdSN window, splits large transfers into bursts (immediate and
// unsolicited data, R2T-driven Data-Out), answers the target's NOP-In
// pings, and after a dropped connection logs in again and re-issues the
// commands that had not completed. A Session on one LUN is a
// blockdev.Device, so file systems (via fusefs/blockfile), RAID and the
// benchmarks use a remote LUN like a local disk.
//
// The wire format comes from proto/iscsi, shared with the target in
// frontend/iscsi, so both sides agree on one codec.
package iscsi

package iscsi

import (
	"bytes"
	"testing"
)

// FuzzReadPDU feeds arbitrary bytes to the PDU decoder: it must never
// panic, and what it decodes must re-encode to a PDU that decodes equally.
func FuzzReadPDU(f *testing.F) {
	for _, p := range []*PDU{
		{Opcode: OpSCSICommand, Final: true, Read: true, CDB: Read10(1, 2, false), ExpectedDataLength: 1024},
		{Opcode: OpLoginReq, Final: true, CSG: 1, NSG: 3, Data: []byte("InitiatorName=iqn.a\x00")},
		{Opcode: OpDataOut, Final: true, Data: []byte{1, 2, 3, 4, 5}},
		{Opcode: OpSCSICommand, CDB: make([]byte, 32)},
	} {
		var b bytes.Buffer
		_ = WritePDU(&b, p, Options{})
		f.Add(b.Bytes(), false)
		b.Reset()
		_ = WritePDU(&b, p, Options{HeaderDigest: true, DataDigest: true})
		f.Add(b.Bytes(), true)
	}
	f.Add(make([]byte, 47), false)
	f.Fuzz(func(t *testing.T, data []byte, digests bool) {
		o := Options{HeaderDigest: digests, DataDigest: digests, MaxRecvDataSegmentLength: 1 << 16}
		// The placed path (data read into a caller's buffer) must decode
		// exactly what the allocating path decodes.
		scratch := make([]byte, 1<<16)
		pp, perr := readPDU(bytes.NewReader(data), o, func(p *PDU, n int) []byte {
			if int(p.BufferOffset%64)+n <= len(scratch) {
				off := int(p.BufferOffset % 64)
				return scratch[off : off+n]
			}
			return nil
		})
		p, err := ReadPDU(bytes.NewReader(data), o)
		if (err == nil) != (perr == nil) || (err == nil && !bytes.Equal(p.Data, pp.Data)) {
			t.Fatalf("placed read differs: %v vs %v", err, perr)
		}
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := WritePDU(&b, p, o); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		q, err := ReadPDU(&b, o)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if q.Opcode != p.Opcode || q.ITT != p.ITT || !bytes.Equal(q.Data, p.Data) || !bytes.Equal(q.CDB, p.CDB) {
			t.Fatalf("round trip changed the PDU: %v vs %v", p, q)
		}
	})
}

// FuzzParseCDB checks the CDB parsers never panic on arbitrary input.
func FuzzParseCDB(f *testing.F) {
	f.Add(Read16(1, 2, true))
	f.Add(Write10(1, 2, false))
	f.Add([]byte{ScsiRead6, 0, 0, 0, 0, 0})
	f.Add(UnmapParams([]UnmapDescriptor{{1, 2}}))
	f.Add([]byte{ScsiServiceActionIn16})
	f.Fuzz(func(t *testing.T, cdb []byte) {
		_, _ = ParseRW(cdb)
		_ = AllocationLength(cdb)
		_, _ = ParseUnmapParams(cdb)
		_, _ = ParseSense(cdb)
		_, _ = ParseText(cdb)
		_, _ = ParseCapacity16(cdb)
		_, _ = ParseReportLUNs(cdb)
		_, _ = SenseFromSegment(cdb)
	})
}

package iscsi

import (
	"bytes"
	"fmt"
	"reflect"
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
		if len(p.Data) > o.MaxRecvDataSegmentLength {
			t.Fatalf("decoded a %d-byte data segment over the %d-byte limit", len(p.Data), o.MaxRecvDataSegmentLength)
		}
		// decode(encode(decode(b))) is the same PDU, field by field, and
		// encoding is stable: encode(decode(encode(p))) == encode(p).
		if !reflect.DeepEqual(normPDU(q), normPDU(p)) {
			t.Fatalf("round trip changed the PDU %v: %s", p, pduDiff(normPDU(p), normPDU(q)))
		}
		var b2 bytes.Buffer
		if err := WritePDU(&b2, q, o); err != nil {
			t.Fatalf("re-encode of the re-decoded PDU: %v", err)
		}
		var b1 bytes.Buffer
		WritePDU(&b1, p, o)
		if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
			t.Fatalf("encoding is not stable:\n% x\n% x", b1.Bytes(), b2.Bytes())
		}
	})
}

// FuzzParseCDB checks properties of the CDB and parameter-data parsers,
// not only that they do not panic:
//   - ParseRW: a decoded command re-encodes (encodeRW, an independent
//     encoder written from SBC-3) to a CDB that decodes to the same RW;
//     LBA and transfer length fit their fields (6-byte: 21-bit LBA and
//     1..256 blocks; COMPARE AND WRITE at most 255 blocks).
//   - AllocationLength is -1 or fits its field and the CDB holds it.
//   - ParseUnmapParams: descriptors fit in the buffer and
//     UnmapParams(ds) decodes to the same descriptors.
//   - ParseSense: Marshal of the decoded sense decodes to the same sense.
//   - ParseText: EncodeText of the pairs decodes to the same pairs.
//   - ParseCapacity16: Marshal16 decodes to the same capacity.
//   - ParseReportLUNs: never more LUNs than the buffer and the header hold.
//   - SenseFromSegment: the sense is inside the segment, and SenseSegment
//     of it gives it back.
func FuzzParseCDB(f *testing.F) {
	f.Add(Read16(1, 2, true))
	f.Add(Write10(1, 2, false))
	f.Add([]byte{ScsiRead6, 0x1f, 0xff, 0xff, 0, 0})
	f.Add(UnmapParams([]UnmapDescriptor{{1, 2}}))
	f.Add([]byte{ScsiServiceActionIn16})
	f.Add(WriteSame16(5, 7, true))
	f.Add([]byte{ScsiVerify12, 0x12, 0, 0, 0, 9, 0, 0, 1, 0, 0, 0})
	f.Add([]byte{ScsiCompareAndWrite, 0x08, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0})
	f.Add(Sense{Key: SenseIllegalRequest, ASC: ASCInvalidFieldInCDB, FieldPointerValid: true, FieldInCDB: true, FieldPointer: 7}.Marshal())
	f.Add(EncodeText([]KV{{"MaxBurstLength", "262144"}, {"HeaderDigest", "CRC32C,None"}}))
	f.Fuzz(func(t *testing.T, cdb []byte) {
		if rw, err := ParseRW(cdb); err == nil {
			if len(cdb) < CDBLen(rw.Op) {
				t.Fatalf("ParseRW accepted %d bytes for a %d-byte opcode", len(cdb), CDBLen(rw.Op))
			}
			switch CDBLen(rw.Op) {
			case 6:
				if rw.LBA >= 1<<21 || rw.Blocks < 1 || rw.Blocks > 256 {
					t.Fatalf("6-byte CDB decoded to LBA %d, %d blocks", rw.LBA, rw.Blocks)
				}
			case 10:
				if rw.LBA >= 1<<32 || rw.Blocks >= 1<<16 {
					t.Fatalf("10-byte CDB decoded to LBA %d, %d blocks", rw.LBA, rw.Blocks)
				}
			case 12:
				if rw.LBA >= 1<<32 {
					t.Fatalf("12-byte CDB decoded to LBA %d", rw.LBA)
				}
			}
			if rw.Op == ScsiCompareAndWrite && rw.Blocks > 255 {
				t.Fatalf("COMPARE AND WRITE of %d blocks", rw.Blocks)
			}
			back, err := ParseRW(encodeRW(rw))
			if err != nil || back != rw {
				t.Fatalf("round trip: %+v -> % x -> %+v, %v", rw, encodeRW(rw), back, err)
			}
		}
		if n := AllocationLength(cdb); n < -1 || n > 1<<32-1 {
			t.Fatalf("allocation length %d", n)
		}
		if ds, err := ParseUnmapParams(cdb); err == nil {
			if len(cdb) > 0 && 8+16*len(ds) > len(cdb) {
				t.Fatalf("%d descriptors from %d bytes", len(ds), len(cdb))
			}
			if back, err := ParseUnmapParams(UnmapParams(ds)); err != nil || len(back) != len(ds) || (len(ds) > 0 && !equalDescs(back, ds)) {
				t.Fatalf("UNMAP round trip: %v -> %v, %v", ds, back, err)
			}
		}
		if s, err := ParseSense(cdb); err == nil {
			if back, err := ParseSense(s.Marshal()); err != nil || back != s {
				t.Fatalf("sense round trip: %+v -> %+v, %v", s, back, err)
			}
		}
		if kvs, err := ParseText(cdb); err == nil {
			back, err := ParseText(EncodeText(kvs))
			if err != nil || len(back) != len(kvs) {
				t.Fatalf("text round trip: %q -> %q, %v", kvs, back, err)
			}
			for i := range kvs {
				if back[i] != kvs[i] {
					t.Fatalf("text round trip: %q -> %q", kvs, back)
				}
			}
		}
		if c, err := ParseCapacity16(cdb); err == nil {
			if back, err := ParseCapacity16(c.Marshal16()); err != nil || back != c {
				t.Fatalf("capacity round trip: %+v -> %+v, %v", c, back, err)
			}
		}
		if luns, err := ParseReportLUNs(cdb); err == nil {
			if 8+8*len(luns) > len(cdb) || 8*len(luns) > int(be.Uint32(cdb)) {
				t.Fatalf("%d LUNs from %d bytes (header %d)", len(luns), len(cdb), be.Uint32(cdb))
			}
		}
		if sense, err := SenseFromSegment(cdb); err == nil {
			if len(sense)+2 > len(cdb) {
				t.Fatalf("sense of %d bytes from a %d-byte segment", len(sense), len(cdb))
			}
			if back, err := SenseFromSegment(SenseSegment(sense)); err != nil || !bytes.Equal(back, sense) {
				t.Fatalf("sense segment round trip: % x -> % x, %v", sense, back, err)
			}
		}
	})
}

// normPDU makes nil and empty byte slices compare equal and drops Raw
// (the header bytes as received, which a re-encode canonicalises).
func normPDU(p *PDU) PDU {
	q := *p
	q.Raw = [BHSLen]byte{}
	if len(q.Data) == 0 {
		q.Data = nil
	}
	if len(q.CDB) == 0 {
		q.CDB = nil
	}
	return q
}

// pduDiff names the fields that differ.
func pduDiff(a, b PDU) string {
	var out string
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := 0; i < av.NumField(); i++ {
		if !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			out += fmt.Sprintf(" %s: %v -> %v;", av.Type().Field(i).Name, av.Field(i).Interface(), bv.Field(i).Interface())
		}
	}
	return out
}

func equalDescs(a, b []UnmapDescriptor) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// encodeRW is an independent encoder of the block-command CDB forms (SBC-3
// tables), for the round-trip property: it writes every field RW holds.
func encodeRW(rw RW) []byte {
	c := make([]byte, 16)
	c[0] = rw.Op
	b1 := rw.Protect << 5
	switch rw.Op {
	case ScsiSyncCache10, ScsiSyncCache16, ScsiPrefetch10, ScsiPrefetch16:
		b1 = 0
		if rw.Immed {
			b1 |= 0x02
		}
	case ScsiWriteSame10, ScsiWriteSame16:
		if rw.Unmap {
			b1 |= 0x08
		}
		if rw.Anchor {
			b1 |= 0x10
		}
		if rw.NDOB {
			b1 |= 0x01
		}
	case ScsiVerify10, ScsiVerify12, ScsiVerify16, ScsiWriteVerify10, ScsiWriteVerify12, ScsiWriteVerify16:
		b1 |= rw.BytChk << 1
		if rw.DPO {
			b1 |= 0x10
		}
	default:
		if rw.DPO {
			b1 |= 0x10
		}
		if rw.FUA {
			b1 |= 0x08
		}
	}
	switch rw.Op {
	case ScsiRead6, ScsiWrite6:
		c[1] = byte(rw.LBA>>16) & 0x1f
		c[2], c[3] = byte(rw.LBA>>8), byte(rw.LBA)
		c[4] = byte(rw.Blocks) // 256 is encoded as 0
		return c[:6]
	case ScsiRead10, ScsiWrite10, ScsiWriteVerify10, ScsiVerify10, ScsiSyncCache10, ScsiPrefetch10, ScsiWriteSame10:
		c[1] = b1
		be.PutUint32(c[2:], uint32(rw.LBA))
		be.PutUint16(c[7:], uint16(rw.Blocks))
		return c[:10]
	case ScsiRead12, ScsiWrite12, ScsiWriteVerify12, ScsiVerify12:
		c[1] = b1
		be.PutUint32(c[2:], uint32(rw.LBA))
		be.PutUint32(c[6:], rw.Blocks)
		return c[:12]
	case ScsiCompareAndWrite:
		c[1] = b1
		be.PutUint64(c[2:], rw.LBA)
		c[13] = byte(rw.Blocks)
		return c
	}
	c[1] = b1
	be.PutUint64(c[2:], rw.LBA)
	be.PutUint32(c[10:], rw.Blocks)
	return c
}

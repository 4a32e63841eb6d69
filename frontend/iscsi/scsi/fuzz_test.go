package scsi

import (
	"bytes"
	"testing"

	"github.com/tristore/tristore/proto/iscsi"
)

// FuzzExecute sends arbitrary CDBs and data-out buffers to a logical unit
// and checks what every answer must satisfy, not only that there is one:
//   - CHECK CONDITION carries parseable sense data with a sense key; other
//     statuses carry none;
//   - data-in never exceeds the CDB's allocation length;
//   - a successful READ returns exactly transfer length × block size bytes;
//   - DataOutLen is what the CDB asks for: blocks × block size for writes,
//     twice that for COMPARE AND WRITE, one block (or none with NDOB) for
//     WRITE SAME, -1 for commands without data-out;
//   - only a successful write-type command changes the medium, and a
//     successful WRITE changes exactly its range, to the data sent.
func FuzzExecute(f *testing.F) {
	f.Add(iscsi.Read16(1, 2, true), []byte(nil))
	f.Add(iscsi.Write10(0, 1, false), make([]byte, 512))
	f.Add(iscsi.Write10(14, 2, true), bytes.Repeat([]byte{7}, 1024))
	f.Add(iscsi.Inquiry(true, 0x83, 255), []byte(nil))
	f.Add([]byte{iscsi.ScsiModeSelect10, 0x10, 0, 0, 0, 0, 0, 0, 28, 0}, make([]byte, 28))
	f.Add(iscsi.Unmap(24), iscsi.UnmapParams([]iscsi.UnmapDescriptor{{LBA: 1, Blocks: 2}}))
	f.Add([]byte{iscsi.ScsiPersistResOut, 0, 1, 0, 0, 0, 0, 0, 24, 0}, make([]byte, 24))
	f.Add([]byte{iscsi.ScsiMaintenanceIn, 0x0c, 0x82, iscsi.ScsiRead16, 0, 0, 0, 0, 1, 0, 0, 0}, []byte(nil))
	f.Add([]byte{iscsi.ScsiCompareAndWrite, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}, make([]byte, 1024))
	f.Add(iscsi.WriteSame16(3, 4, false), bytes.Repeat([]byte{9}, 512))
	f.Fuzz(func(t *testing.T, cdb, data []byte) {
		if len(data) > 8<<10 {
			return // larger buffers only slow the fuzzer down: the LU has 16 blocks
		}
		const bs, size = 512, 8 << 10
		dev := &memDev{b: make([]byte, size)}
		for i := range dev.b {
			dev.b[i] = byte(i * 13)
		}
		before := append([]byte(nil), dev.b...)
		lu := New(Config{Dev: dev, Serial: "fuzz", TargetName: "iqn.x:y:z"})
		lu.AddNexus("A")
		r := lu.Execute(t.Context(), &Request{CDB: cdb, DataOut: data, ExpectedLen: uint32(len(data)), Nexus: "A"})
		if r == nil {
			t.Fatal("nil response")
		}
		defer r.Release()
		if r.Status == iscsi.StatusCheckCondition {
			s, err := iscsi.ParseSense(r.Sense)
			if err != nil || s.Key == iscsi.SenseNoSense {
				t.Fatalf("check condition with sense % x: %v", r.Sense, err)
			}
		} else if len(r.Sense) != 0 {
			t.Fatalf("status %#x with sense data", r.Status)
		}
		if alloc := iscsi.AllocationLength(cdb); alloc >= 0 && len(r.DataIn) > alloc {
			t.Fatalf("%d bytes of data-in for allocation length %d", len(r.DataIn), alloc)
		}
		op := byte(0xff)
		if len(cdb) > 0 {
			op = cdb[0]
		}
		rw, rwErr := iscsi.ParseRW(cdb)
		good := r.Status == iscsi.StatusGood
		isRead := op == iscsi.ScsiRead6 || op == iscsi.ScsiRead10 || op == iscsi.ScsiRead12 || op == iscsi.ScsiRead16
		isWrite := op == iscsi.ScsiWrite6 || op == iscsi.ScsiWrite10 || op == iscsi.ScsiWrite12 || op == iscsi.ScsiWrite16 ||
			op == iscsi.ScsiWriteVerify10 || op == iscsi.ScsiWriteVerify12 || op == iscsi.ScsiWriteVerify16
		if good && isRead {
			if rwErr != nil || len(r.DataIn) != int(rw.Blocks)*bs {
				t.Fatalf("READ of %d blocks returned %d bytes", rw.Blocks, len(r.DataIn))
			}
			if !bytes.Equal(r.DataIn, before[rw.LBA*bs:rw.LBA*bs+uint64(len(r.DataIn))]) {
				t.Fatal("READ returned bytes that are not the medium's")
			}
		}
		if rwErr == nil && (good || r.Status == iscsi.StatusCheckCondition) && r.DataOutLen >= 0 {
			want := int64(rw.Blocks) * bs
			switch {
			case op == iscsi.ScsiCompareAndWrite:
				want *= 2
			case op == iscsi.ScsiWriteSame10 || op == iscsi.ScsiWriteSame16:
				want = bs
				if rw.NDOB {
					want = 0
				}
			case isWrite || op == iscsi.ScsiOrwrite16:
			default:
				want = r.DataOutLen // VERIFY: depends on BYTCHK
			}
			if r.DataOutLen != want {
				t.Fatalf("opcode %#x of %d blocks: DataOutLen %d, want %d", op, rw.Blocks, r.DataOutLen, want)
			}
		}
		if rwErr == nil && (isRead || op == iscsi.ScsiSyncCache10 || op == iscsi.ScsiSyncCache16 || op == iscsi.ScsiPrefetch10 || op == iscsi.ScsiPrefetch16) && r.DataOutLen != -1 {
			t.Fatalf("opcode %#x takes no data-out but DataOutLen is %d", op, r.DataOutLen)
		}
		writes := isWrite || op == iscsi.ScsiWriteSame10 || op == iscsi.ScsiWriteSame16 || op == iscsi.ScsiUnmap ||
			op == iscsi.ScsiCompareAndWrite || op == iscsi.ScsiOrwrite16
		if (!writes || !good) && !bytes.Equal(dev.b, before) {
			t.Fatalf("opcode %#x with status %#x changed the medium", op, r.Status)
		}
		if good && isWrite {
			n := min(int64(len(data))/bs*bs, int64(rw.Blocks)*bs)
			off := int64(rw.LBA) * bs
			if !bytes.Equal(dev.b[off:off+n], data[:n]) || !bytes.Equal(dev.b[:off], before[:off]) || !bytes.Equal(dev.b[off+n:], before[off+n:]) {
				t.Fatalf("WRITE of %d blocks at %d changed the wrong bytes", rw.Blocks, rw.LBA)
			}
		}
	})
}

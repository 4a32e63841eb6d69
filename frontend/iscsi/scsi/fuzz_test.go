package scsi

import (
	"testing"

	"github.com/tristore/tristore/proto/iscsi"
)

// FuzzExecute sends arbitrary CDBs and data-out buffers to a logical unit:
// it must answer every one with a status (never panic), and CHECK
// CONDITION must carry parseable sense data.
func FuzzExecute(f *testing.F) {
	f.Add(iscsi.Read16(1, 2, true), []byte(nil))
	f.Add(iscsi.Write10(0, 1, false), make([]byte, 512))
	f.Add(iscsi.Inquiry(true, 0x83, 255), []byte(nil))
	f.Add([]byte{iscsi.ScsiModeSelect10, 0x10, 0, 0, 0, 0, 0, 0, 28, 0}, make([]byte, 28))
	f.Add(iscsi.Unmap(24), iscsi.UnmapParams([]iscsi.UnmapDescriptor{{LBA: 1, Blocks: 2}}))
	f.Add([]byte{iscsi.ScsiPersistResOut, 0, 1, 0, 0, 0, 0, 0, 24, 0}, make([]byte, 24))
	f.Add([]byte{iscsi.ScsiMaintenanceIn, 0x0c, 0x82, iscsi.ScsiRead16, 0, 0, 0, 0, 1, 0, 0, 0}, []byte(nil))
	f.Add([]byte{iscsi.ScsiCompareAndWrite, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}, make([]byte, 1024))
	f.Fuzz(func(t *testing.T, cdb, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		lu, _ := newLU()
		r := lu.Execute(t.Context(), &Request{CDB: cdb, DataOut: data, ExpectedLen: uint32(len(data)), Nexus: "A"})
		if r == nil {
			t.Fatal("nil response")
		}
		if r.Status == iscsi.StatusCheckCondition {
			if _, err := iscsi.ParseSense(r.Sense); err != nil {
				t.Fatalf("check condition without sense: %v", err)
			}
		}
		r.Release()
	})
}

package scsi

import (
	"bytes"
	"context"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/proto/iscsi"
)

// SBC-3 block commands: READ CAPACITY, READ/WRITE 6/10/12/16, WRITE AND
// VERIFY, VERIFY, SYNCHRONIZE CACHE, WRITE SAME, UNMAP, COMPARE AND WRITE,
// PRE-FETCH.

func init() {
	handlers[iscsi.ScsiReadCapacity10] = (*LU).readCapacity10
	handlers[iscsi.ScsiServiceActionIn16] = (*LU).serviceActionIn16
	for _, op := range []byte{iscsi.ScsiRead6, iscsi.ScsiRead10, iscsi.ScsiRead12, iscsi.ScsiRead16} {
		handlers[op] = (*LU).read
	}
	for _, op := range []byte{iscsi.ScsiWrite6, iscsi.ScsiWrite10, iscsi.ScsiWrite12, iscsi.ScsiWrite16,
		iscsi.ScsiWriteVerify10, iscsi.ScsiWriteVerify12, iscsi.ScsiWriteVerify16} {
		handlers[op] = (*LU).write
	}
	for _, op := range []byte{iscsi.ScsiVerify10, iscsi.ScsiVerify12, iscsi.ScsiVerify16} {
		handlers[op] = (*LU).verify
	}
	handlers[iscsi.ScsiSyncCache10] = (*LU).syncCache
	handlers[iscsi.ScsiSyncCache16] = (*LU).syncCache
	handlers[iscsi.ScsiPrefetch10] = (*LU).prefetch
	handlers[iscsi.ScsiPrefetch16] = (*LU).prefetch
	handlers[iscsi.ScsiWriteSame10] = (*LU).writeSame
	handlers[iscsi.ScsiWriteSame16] = (*LU).writeSame
	handlers[iscsi.ScsiUnmap] = (*LU).unmap
	handlers[iscsi.ScsiCompareAndWrite] = (*LU).compareAndWrite
}

func (lu *LU) blocks() uint64 { return uint64(lu.dev.Size() / int64(lu.bs)) }

func (lu *LU) capacity() iscsi.Capacity {
	c := iscsi.Capacity{BlockSize: uint32(lu.bs), LBPME: lu.thin(), LBPRZ: true}
	if n := lu.blocks(); n > 0 {
		c.LastLBA = n - 1
	}
	return c
}

func (lu *LU) readCapacity10(ctx context.Context, r *Request) *Response {
	c := r.CDB
	if be.Uint32(c[2:]) != 0 || c[8]&0x01 != 0 { // obsolete LBA / PMI
		return checkCondition(errInvalidFieldInCDB(2))
	}
	return good(lu.capacity().Marshal10())
}

func (lu *LU) serviceActionIn16(ctx context.Context, r *Request) *Response {
	c := r.CDB
	switch c[1] & 0x1f {
	case iscsi.SAReadCapacity16:
		return good(allocCut(lu.capacity().Marshal16(), int(be.Uint32(c[10:]))))
	case iscsi.SAGetLBAStatus:
		return lu.getLBAStatus(r)
	}
	return checkCondition(errInvalidFieldInCDB(1))
}

// checkRange validates a parsed block command against the capacity and
// the transfer limit; it returns the byte offset and length.
func (lu *LU) checkRange(rw iscsi.RW, limit bool) (int64, int64, error) {
	if rw.Protect != 0 {
		return 0, 0, errInvalidFieldInCDB(1) // no protection information
	}
	n := lu.blocks()
	if rw.LBA > n || uint64(rw.Blocks) > n-rw.LBA {
		return 0, 0, errLBAOutOfRange
	}
	length := int64(rw.Blocks) * int64(lu.bs)
	if limit && length > int64(lu.cfg.MaxTransferBytes) {
		return 0, 0, errInvalidFieldInCDB(7)
	}
	return int64(rw.LBA) * int64(lu.bs), length, nil
}

func (lu *LU) read(ctx context.Context, r *Request) *Response {
	rw, err := iscsi.ParseRW(r.CDB)
	if err != nil {
		return checkCondition(errInvalidFieldInCDB(0))
	}
	off, n, err := lu.checkRange(rw, true)
	if err != nil {
		return checkCondition(err)
	}
	if n == 0 {
		return good(nil)
	}
	buf := GetBuf(int(n))
	if _, err := lu.dev.ReadAt(ctx, buf, off); err != nil {
		PutBuf(buf)
		return checkConditionRW(err, false)
	}
	resp := good(buf)
	resp.pooled = true
	return resp
}

// dataOutMismatch reports a data-out length (iSCSI EDTL) that differs from
// what the CDB asks for. tristore then writes nothing and answers CHECK
// CONDITION / INVALID FIELD IN INFORMATION UNIT, which FCP-4 and libiscsi's
// residual tests allow and which never leaves a partial write behind.
func dataOutMismatch(r *Request, want int64) *Response {
	if int64(len(r.DataOut)) == want {
		return nil
	}
	return checkCondition(errInvalidFieldInIU).dataOut(want)
}

// writeAt writes p at off with cawMu held shared (so COMPARE AND WRITE and
// ORWRITE, which hold it exclusively, see no write between their read and
// their write).
func (lu *LU) writeAt(ctx context.Context, p []byte, off int64, fua bool) error {
	lu.cawMu.RLock()
	defer lu.cawMu.RUnlock()
	return lu.writeLocked(ctx, p, off, fua)
}

// writeLocked writes p at off; with fua, or with the write cache disabled
// (WCE=0), the data is durable on return: WriteAtFUA when the device has
// it, else WriteAt and Flush. The caller holds cawMu.
func (lu *LU) writeLocked(ctx context.Context, p []byte, off int64, fua bool) error {
	if fua || !lu.wce.Load() {
		if f, ok := lu.dev.(blockdev.FUAWriter); ok {
			_, err := f.WriteAtFUA(ctx, p, off)
			return err
		}
		if _, err := lu.dev.WriteAt(ctx, p, off); err != nil {
			return err
		}
		return lu.dev.Flush(ctx)
	}
	_, err := lu.dev.WriteAt(ctx, p, off)
	return err
}

// CachedWrite reports whether cdb is a plain WRITE (6, 10, 12 or 16)
// without FUA while the write cache is on (WCE=1): a write that only goes
// to the page cache and waits for no disk. The iSCSI transport runs such
// writes on the connection's reader instead of a goroutine of their own.
func (lu *LU) CachedWrite(cdb []byte) bool {
	if len(cdb) == 0 || !lu.wce.Load() {
		return false
	}
	switch cdb[0] {
	case iscsi.ScsiWrite6:
		return true
	case iscsi.ScsiWrite10, iscsi.ScsiWrite12, iscsi.ScsiWrite16:
		return len(cdb) > 1 && cdb[1]&0x08 == 0
	}
	return false
}

func (lu *LU) write(ctx context.Context, r *Request) *Response {
	rw, err := iscsi.ParseRW(r.CDB)
	if err != nil {
		return checkCondition(errInvalidFieldInCDB(0))
	}
	want := int64(rw.Blocks) * int64(lu.bs)
	off, n, err := lu.checkRange(rw, true)
	if err != nil {
		return checkCondition(err).dataOut(want)
	}
	resp := good(nil).dataOut(want)
	// When the iSCSI Expected Data Transfer Length and the CDB disagree,
	// FCP-4 (and libiscsi's residual tests) let the device server process
	// the command normally but transfer only what both allow: the whole
	// blocks that were actually sent are written, the transport reports
	// the residual, and nothing beyond the shorter length is touched.
	if have := int64(len(r.DataOut)); have < n {
		n = have - have%int64(lu.bs)
	}
	if n == 0 {
		return resp
	}
	// WRITE AND VERIFY: the medium is verified by writing through to it.
	verify := rw.Op == iscsi.ScsiWriteVerify10 || rw.Op == iscsi.ScsiWriteVerify12 || rw.Op == iscsi.ScsiWriteVerify16
	if err := lu.writeAt(ctx, r.DataOut[:n], off, rw.FUA || verify); err != nil {
		resp = checkConditionRW(err, true).dataOut(want)
	}
	return resp
}

func (lu *LU) verify(ctx context.Context, r *Request) *Response {
	rw, err := iscsi.ParseRW(r.CDB)
	if err != nil {
		return checkCondition(errInvalidFieldInCDB(0))
	}
	var want int64
	switch rw.BytChk {
	case 0:
	case 1:
		want = int64(rw.Blocks) * int64(lu.bs)
	case 3:
		want = int64(lu.bs)
	default:
		return checkCondition(errInvalidFieldInCDB(1))
	}
	if resp := dataOutMismatch(r, want); resp != nil {
		return resp
	}
	fail := func(err error) *Response { return checkCondition(err).dataOut(want) }
	off, n, err := lu.checkRange(rw, true)
	if err != nil {
		return fail(err)
	}
	medium := make([]byte, n)
	if n > 0 {
		if _, err := lu.dev.ReadAt(ctx, medium, off); err != nil {
			return fail(err)
		}
	}
	if rw.BytChk != 0 {
		for i := int64(0); i < n; i += int64(lu.bs) {
			var exp []byte
			if rw.BytChk == 1 {
				exp = r.DataOut[i : i+int64(lu.bs)]
			} else {
				exp = r.DataOut
			}
			if j := firstDiff(exp, medium[i:i+int64(lu.bs)]); j >= 0 {
				return fail(errMiscompare(uint32(i) + uint32(j)))
			}
		}
	}
	return good(nil).dataOut(want)
}

func (lu *LU) syncCache(ctx context.Context, r *Request) *Response {
	rw, err := iscsi.ParseRW(r.CDB)
	if err != nil {
		return checkCondition(errInvalidFieldInCDB(0))
	}
	if _, _, err := lu.checkRange(rw, false); err != nil {
		return checkCondition(err)
	}
	// The whole file is synced: a range sync would need sync_file_range,
	// which does not flush the disk cache or metadata.
	if err := lu.dev.Flush(ctx); err != nil {
		return checkConditionRW(err, true)
	}
	return good(nil)
}

func (lu *LU) prefetch(ctx context.Context, r *Request) *Response {
	rw, err := iscsi.ParseRW(r.CDB)
	if err != nil {
		return checkCondition(errInvalidFieldInCDB(0))
	}
	if _, _, err := lu.checkRange(rw, false); err != nil {
		return checkCondition(err)
	}
	return &Response{Status: iscsi.StatusConditionMet, DataOutLen: -1}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (lu *LU) writeSame(ctx context.Context, r *Request) *Response {
	rw, err := iscsi.ParseRW(r.CDB)
	if err != nil {
		return checkCondition(errInvalidFieldInCDB(0))
	}
	want := int64(lu.bs)
	if rw.NDOB {
		want = 0
	}
	if resp := dataOutMismatch(r, want); resp != nil {
		return resp
	}
	fail := func(err error) *Response { return checkCondition(err).dataOut(want) }
	if rw.Anchor || rw.Blocks == 0 {
		return fail(errInvalidFieldInCDB(1)) // WSNZ=1; anchored blocks unsupported
	}
	if rw.Blocks > maxWriteSameBlocks {
		return fail(errInvalidFieldInCDB(10))
	}
	off, n, err := lu.checkRange(rw, false)
	if err != nil {
		return fail(err)
	}
	pattern := r.DataOut
	if rw.NDOB {
		pattern = make([]byte, lu.bs)
	}
	// A device error while writing is a WRITE ERROR, not a read error.
	failW := func(err error) *Response { return checkConditionRW(err, true).dataOut(want) }
	lu.cawMu.RLock()
	defer lu.cawMu.RUnlock()
	if rw.Unmap && isZero(pattern) {
		if um, ok := lu.dev.(blockdev.Unmapper); ok {
			if err := um.Unmap(ctx, off, n); err != nil {
				return failW(err)
			}
			return good(nil).dataOut(want)
		}
	}
	chunk := make([]byte, min(n, 1<<20))
	for i := 0; i < len(chunk); i += lu.bs {
		copy(chunk[i:], pattern)
	}
	for done := int64(0); done < n; {
		c := min(int64(len(chunk)), n-done)
		if _, err := lu.dev.WriteAt(ctx, chunk[:c], off+done); err != nil {
			return failW(err)
		}
		done += c
	}
	if !lu.wce.Load() {
		if err := lu.dev.Flush(ctx); err != nil {
			return failW(err)
		}
	}
	return good(nil).dataOut(want)
}

func (lu *LU) unmap(ctx context.Context, r *Request) *Response {
	c := r.CDB
	if c[1]&0x01 != 0 { // ANCHOR
		return checkCondition(errInvalidFieldInCDB(1))
	}
	plen := int64(be.Uint16(c[7:]))
	fail := func(err error) *Response { return checkCondition(err).dataOut(plen) }
	if resp := dataOutMismatch(r, plen); resp != nil {
		return resp
	}
	if plen == 0 {
		return good(nil).dataOut(0)
	}
	if plen < 8 {
		return fail(errParamListLength)
	}
	ds, err := iscsi.ParseUnmapParams(r.DataOut)
	if err != nil {
		return fail(errParamListLength)
	}
	if len(ds) > maxUnmapDescriptors {
		return fail(errInvalidFieldInParam(2))
	}
	n := lu.blocks()
	for _, d := range ds {
		if d.LBA > n || uint64(d.Blocks) > n-d.LBA {
			return fail(errLBAOutOfRange)
		}
		if d.Blocks > maxUnmapBlocks {
			return fail(errInvalidFieldInParam(8))
		}
	}
	um, ok := lu.dev.(blockdev.Unmapper)
	if !ok {
		return fail(errInvalidOpcode)
	}
	lu.cawMu.RLock()
	defer lu.cawMu.RUnlock()
	for _, d := range ds {
		if d.Blocks == 0 {
			continue
		}
		if err := um.Unmap(ctx, int64(d.LBA)*int64(lu.bs), int64(d.Blocks)*int64(lu.bs)); err != nil {
			return checkConditionRW(err, true).dataOut(plen)
		}
	}
	return good(nil).dataOut(plen)
}

// firstDiff returns the offset of the first byte where a and b (of one
// length) differ, or -1 if they are equal: the miscompare offset VERIFY and
// COMPARE AND WRITE report.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	return i
}

// compareAndWrite compares N blocks with the first half of the data-out
// buffer and, if equal, writes the second half; other writes are held off
// meanwhile so the pair is atomic.
func (lu *LU) compareAndWrite(ctx context.Context, r *Request) *Response {
	rw, err := iscsi.ParseRW(r.CDB)
	if err != nil {
		return checkCondition(errInvalidFieldInCDB(0))
	}
	want := 2 * int64(rw.Blocks) * int64(lu.bs)
	if int64(len(r.DataOut)) != want {
		// SBC-3: a data-out buffer that does not hold 2*N blocks is an
		// invalid NUMBER OF LOGICAL BLOCKS field.
		return checkCondition(errInvalidFieldInCDB(13)).dataOut(want)
	}
	fail := func(err error) *Response { return checkCondition(err).dataOut(want) }
	if rw.Blocks > maxCompareAndWriteBlocks {
		return fail(errInvalidFieldInCDB(13))
	}
	off, n, err := lu.checkRange(rw, false)
	if err != nil {
		return fail(err)
	}
	resp := good(nil).dataOut(want)
	if n == 0 {
		return resp
	}
	lu.cawMu.Lock()
	defer lu.cawMu.Unlock()
	medium := make([]byte, n)
	if _, err := lu.dev.ReadAt(ctx, medium, off); err != nil {
		return fail(err)
	}
	if i := firstDiff(r.DataOut[:n], medium); i >= 0 {
		return fail(errMiscompare(uint32(i)))
	}
	if err := lu.writeLocked(ctx, r.DataOut[n:], off, rw.FUA); err != nil {
		return checkConditionRW(err, true).dataOut(want)
	}
	return resp
}

func init() { handlers[iscsi.ScsiOrwrite16] = (*LU).orWrite }

// orWrite is ORWRITE(16): each data-out byte is ORed into the medium. The
// read-modify-write runs with other writes held off, like COMPARE AND WRITE.
func (lu *LU) orWrite(ctx context.Context, r *Request) *Response {
	rw, err := iscsi.ParseRW(r.CDB)
	if err != nil {
		return checkCondition(errInvalidFieldInCDB(0))
	}
	want := int64(rw.Blocks) * int64(lu.bs)
	if resp := dataOutMismatch(r, want); resp != nil {
		return resp
	}
	fail := func(err error) *Response { return checkCondition(err).dataOut(want) }
	off, n, err := lu.checkRange(rw, true)
	if err != nil {
		return fail(err)
	}
	resp := good(nil).dataOut(want)
	if n == 0 {
		return resp
	}
	lu.cawMu.Lock()
	defer lu.cawMu.Unlock()
	medium := GetBuf(int(n))
	defer PutBuf(medium)
	if _, err := lu.dev.ReadAt(ctx, medium, off); err != nil {
		return fail(err)
	}
	for i, b := range r.DataOut[:n] {
		medium[i] |= b
	}
	if err := lu.writeLocked(ctx, medium, off, rw.FUA); err != nil {
		return checkConditionRW(err, true).dataOut(want)
	}
	return resp
}

// provisioner is implemented by devices that know which blocks hold data
// (filelun: SEEK_DATA/SEEK_HOLE on the volume file).
type provisioner interface {
	Provisioning(off int64) (mapped bool, n int64, err error)
}

// getLBAStatus is GET LBA STATUS: mapped/deallocated extents from the
// starting LBA, as many descriptors as the allocation length holds (max 64).
func (lu *LU) getLBAStatus(r *Request) *Response {
	c := r.CDB
	lba := be.Uint64(c[2:])
	alloc := int(be.Uint32(c[10:]))
	nb := lu.blocks()
	if lba >= nb {
		return checkCondition(errLBAOutOfRange)
	}
	d := make([]byte, 8)
	pv, _ := lu.dev.(provisioner)
	for i := 0; i < 64 && lba < nb && len(d)+16 <= max(alloc, 24); i++ {
		mapped, n := true, int64(nb-lba)*int64(lu.bs)
		if pv != nil {
			m, l, err := pv.Provisioning(int64(lba) * int64(lu.bs))
			if err != nil {
				return checkCondition(err)
			}
			mapped, n = m, l
		}
		blocks := uint64(n+int64(lu.bs)-1) / uint64(lu.bs)
		blocks = max(1, min(blocks, nb-lba, 0xffffffff))
		e := make([]byte, 16)
		be.PutUint64(e, lba)
		be.PutUint32(e[8:], uint32(blocks))
		if !mapped {
			e[12] = 0x01 // deallocated
		}
		d = append(d, e...)
		lba += blocks
	}
	be.PutUint32(d, uint32(len(d)-4))
	return good(allocCut(d, alloc))
}

const (
	scsiReadDefectData10 = 0x37
	scsiReadDefectData12 = 0xb7
)

func init() {
	handlers[scsiReadDefectData10] = (*LU).readDefectData
	handlers[scsiReadDefectData12] = (*LU).readDefectData
}

// readDefectData reports an empty defect list: a file has no bad sectors
// the target could know about.
func (lu *LU) readDefectData(ctx context.Context, r *Request) *Response {
	c := r.CDB
	if c[0] == scsiReadDefectData10 {
		d := make([]byte, 4)
		d[1] = c[2] & 0x1f // PLISTV, GLISTV and the format echo the request
		return good(allocCut(d, int(be.Uint16(c[7:]))))
	}
	d := make([]byte, 8)
	d[1] = c[1] & 0x1f
	return good(allocCut(d, int(be.Uint32(c[6:]))))
}

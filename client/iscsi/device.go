package iscsi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/tristore/tristore/blockdev"
	proto "github.com/tristore/tristore/proto/iscsi"
)

// Open dials, logs in and reads the LUN's capacity: the result is a
// blockdev.Device for cfg.LUN.
func Open(ctx context.Context, cfg Config) (*Session, error) {
	s, err := Dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.probe(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// probe clears the unit attention of a new nexus and reads the capacity.
func (s *Session) probe(ctx context.Context) error {
	if _, err := s.Do(ctx, &Command{CDB: proto.TestUnitReady()}); err != nil {
		return fmt.Errorf("iscsi: TEST UNIT READY on LUN %d: %w", s.cfg.LUN, err)
	}
	c, err := s.ReadCapacity(ctx)
	if err != nil {
		return err
	}
	if c.BlockSize == 0 || c.BlockSize%512 != 0 {
		return fmt.Errorf("iscsi: LUN %d reports block size %d", s.cfg.LUN, c.BlockSize)
	}
	s.capacity = c
	s.blockSize = int(c.BlockSize)
	s.size = int64(c.LastLBA+1) * int64(c.BlockSize)
	s.limits = s.readBlockLimits(ctx)
	return nil
}

// ReadCapacity asks READ CAPACITY (16), falling back to (10) for targets
// that do not know it.
func (s *Session) ReadCapacity(ctx context.Context) (proto.Capacity, error) {
	buf := make([]byte, 32)
	r, err := s.Do(ctx, &Command{CDB: proto.ReadCapacity16(32), In: buf})
	if err == nil && r.Status == proto.StatusGood {
		return proto.ParseCapacity16(buf[:max(r.N, 12)])
	}
	buf = buf[:8]
	r, err = s.Do(ctx, &Command{CDB: proto.ReadCapacity10(), In: buf})
	if err != nil {
		return proto.Capacity{}, err
	}
	if err := r.Err(); err != nil {
		return proto.Capacity{}, fmt.Errorf("iscsi: READ CAPACITY: %w", err)
	}
	return proto.ParseCapacity10(buf)
}

// InquiryData is the interesting part of standard INQUIRY data.
type InquiryData struct {
	DeviceType             uint8
	Vendor, Product, Rev   string
	Removable, ThinCapable bool
}

// Inquiry reads standard INQUIRY data of the session's LUN.
func (s *Session) Inquiry(ctx context.Context) (InquiryData, error) {
	buf := make([]byte, 96)
	r, err := s.Do(ctx, &Command{CDB: proto.Inquiry(false, 0, uint16(len(buf))), In: buf})
	if err != nil {
		return InquiryData{}, err
	}
	if err := r.Err(); err != nil {
		return InquiryData{}, fmt.Errorf("iscsi: INQUIRY: %w", err)
	}
	if r.N < 36 {
		return InquiryData{}, fmt.Errorf("iscsi: INQUIRY returned %d bytes", r.N)
	}
	return InquiryData{
		DeviceType: buf[0] & 0x1f,
		Removable:  buf[1]&0x80 != 0,
		Vendor:     strings.TrimSpace(string(buf[8:16])),
		Product:    strings.TrimSpace(string(buf[16:32])),
		Rev:        strings.TrimSpace(string(buf[32:36])),
	}, nil
}

// ReportLUNs lists the target's LUN numbers.
func (s *Session) ReportLUNs(ctx context.Context) ([]uint16, error) {
	buf := make([]byte, 8+8*256)
	r, err := s.Do(ctx, &Command{CDB: proto.ReportLUNs(uint32(len(buf))), In: buf})
	if err != nil {
		return nil, err
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("iscsi: REPORT LUNS: %w", err)
	}
	raw, err := proto.ParseReportLUNs(buf[:r.N])
	if err != nil {
		return nil, err
	}
	out := make([]uint16, 0, len(raw))
	for _, f := range raw {
		out = append(out, proto.LUNFromField(f))
	}
	return out, nil
}

// Size is the LUN's capacity in bytes.
func (s *Session) Size() int64 { return s.size }

// BlockSize is the LUN's logical block size.
func (s *Session) BlockSize() int { return s.blockSize }

// Capacity is the READ CAPACITY data read at Open.
func (s *Session) Capacity() proto.Capacity { return s.capacity }

func (s *Session) check(n int, off int64) error {
	if s.blockSize == 0 {
		return errors.New("iscsi: session was not opened on a LUN (use Open)")
	}
	if off%int64(s.blockSize) != 0 || n%s.blockSize != 0 {
		return blockdev.ErrMisaligned
	}
	if off < 0 || off+int64(n) > s.size {
		return blockdev.ErrOutOfRange
	}
	return nil
}

// rw issues READ or WRITE commands for p at off, split into pieces of at
// most MaxIOSize that run concurrently (each takes a queue-depth slot).
func (s *Session) rw(ctx context.Context, p []byte, off int64, write, fua bool) (int, error) {
	if err := s.check(len(p), off); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	chunk := s.cfg.MaxIOSize / s.blockSize * s.blockSize
	if chunk == 0 {
		chunk = s.blockSize
	}
	if len(p) <= chunk {
		return len(p), s.rwOne(ctx, p, off, write, fua)
	}
	g, gctx := errgroup.WithContext(ctx)
	for pos := 0; pos < len(p); pos += chunk {
		piece := p[pos:min(pos+chunk, len(p))]
		at := off + int64(pos)
		g.Go(func() error { return s.rwOne(gctx, piece, at, write, fua) })
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *Session) rwOne(ctx context.Context, p []byte, off int64, write, fua bool) error {
	lba := uint64(off / int64(s.blockSize))
	blocks := uint32(len(p) / s.blockSize)
	var cdb []byte
	switch {
	case lba <= 0xffffffff && blocks <= 0xffff && write:
		cdb = proto.Write10(uint32(lba), uint16(blocks), fua)
	case lba <= 0xffffffff && blocks <= 0xffff:
		cdb = proto.Read10(uint32(lba), uint16(blocks), false)
	case write:
		cdb = proto.Write16(lba, blocks, fua)
	default:
		cdb = proto.Read16(lba, blocks, false)
	}
	cmd := &Command{CDB: cdb}
	if write {
		cmd.Out = p
	} else {
		cmd.In = p
	}
	r, err := s.Do(ctx, cmd)
	if err != nil {
		return err
	}
	if err := r.Err(); err != nil {
		return translateSense(err, write, off, len(p))
	}
	if !write && (r.Under && r.Residual > 0 || r.N < len(p)) {
		return fmt.Errorf("iscsi: short read at %d: %d of %d bytes", off, r.N, len(p))
	}
	if write && r.Under && r.Residual > 0 {
		return fmt.Errorf("iscsi: short write at %d: %d of %d bytes not taken", off, r.Residual, len(p))
	}
	return nil
}

// translateSense is the one place SCSI sense becomes blockdev errors.
func translateSense(err error, write bool, off int64, n int) error {
	op := "READ"
	if write {
		op = "WRITE"
	}
	var cc *proto.CheckConditionError
	if errors.As(err, &cc) && cc.Sense.Key == proto.SenseIllegalRequest && cc.Sense.ASC == proto.ASCLBAOutOfRange {
		return fmt.Errorf("iscsi: %s [%d,+%d): %w", op, off, n, blockdev.ErrOutOfRange)
	}
	return fmt.Errorf("iscsi: %s [%d,+%d): %w", op, off, n, err)
}

// ReadAt reads len(p) bytes at off (both multiples of the block size).
func (s *Session) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return s.rw(ctx, p, off, false, false)
}

// WriteAt writes p at off; the data may sit in the target's write cache
// until Flush.
func (s *Session) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	return s.rw(ctx, p, off, true, false)
}

// WriteAtFUA writes with Force Unit Access: durable when it returns.
func (s *Session) WriteAtFUA(ctx context.Context, p []byte, off int64) (int, error) {
	return s.rw(ctx, p, off, true, true)
}

// Flush sends SYNCHRONIZE CACHE (10) for the whole LUN.
func (s *Session) Flush(ctx context.Context) error {
	r, err := s.Do(ctx, &Command{CDB: proto.SyncCache10()})
	if err != nil {
		return err
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("iscsi: SYNCHRONIZE CACHE: %w", err)
	}
	return nil
}

var (
	_ blockdev.Device    = (*Session)(nil)
	_ blockdev.FUAWriter = (*Session)(nil)
	_ blockdev.Unmapper  = (*Session)(nil)
	_ blockdev.Zeroer    = (*Session)(nil)
)

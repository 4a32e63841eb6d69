package posix

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/tristore/tristore/store"
)

// FULL_OBJECT multipart checksums. S3 gives an upload created with
// x-amz-checksum-type FULL_OBJECT the CRC of the whole object (CRC32,
// CRC32C or CRC64NVME; no "-N"), which a client can check against the
// bytes of a GET like a single PUT's checksum. The whole-object CRC is
// combined from the parts' verified CRCs and sizes (zlib's crc32_combine
// in GF(2), for any reflected CRC with all-ones init and final xor),
// O(log size) per part, instead of reading the assembled object again:
// a multi-GiB complete then costs no extra pass over the data. The part
// CRCs can be trusted for it: each was checked against the part's bytes
// as they arrived (header or aws-chunked trailer), and the part files live
// in the uploads area no other view can write.

// fullCRCs are the algorithms with FULL_OBJECT checksums: their reflected
// polynomial and width in bits.
var fullCRCs = map[string]struct {
	poly  uint64
	width int
}{
	"CRC32":     {0xEDB88320, 32},
	"CRC32C":    {0x82F63B78, 32},
	"CRC64NVME": {0x9A6C9329AC4BC9B5, 64},
}

func gf2Times(mat []uint64, vec uint64) uint64 {
	var sum uint64
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat []uint64) {
	for n := range mat {
		square[n] = gf2Times(mat, mat[n])
	}
}

// crcCombine returns the CRC of A||B from crcA, crcB and len(B).
func crcCombine(poly uint64, width int, crcA, crcB uint64, lenB int64) uint64 {
	if lenB <= 0 {
		return crcA
	}
	even, odd := make([]uint64, width), make([]uint64, width)
	odd[0] = poly // the operator for one zero bit
	row := uint64(1)
	for n := 1; n < width; n++ {
		odd[n] = row
		row <<= 1
	}
	gf2Square(even, odd) // two zero bits
	gf2Square(odd, even) // four
	for {
		gf2Square(even, odd) // one zero byte, then 4, 16, ...
		if lenB&1 != 0 {
			crcA = gf2Times(even, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
		gf2Square(odd, even)
		if lenB&1 != 0 {
			crcA = gf2Times(odd, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

// fullObjectChecksums combines the parts' CRCs into the whole object's,
// for every FULL_OBJECT algorithm all parts have.
func fullObjectChecksums(parts []store.PartInfo) map[string]string {
	var out map[string]string
	for alg, c := range fullCRCs {
		var crc uint64
		ok := true
		for i, p := range parts {
			raw, err := base64.StdEncoding.DecodeString(p.Checksums[alg])
			if err != nil || len(raw) != c.width/8 {
				ok = false
				break
			}
			var v uint64
			if c.width == 32 {
				v = uint64(binary.BigEndian.Uint32(raw))
			} else {
				v = binary.BigEndian.Uint64(raw)
			}
			if i == 0 {
				crc = v
			} else {
				crc = crcCombine(c.poly, c.width, crc, v, p.Size)
			}
		}
		if !ok || len(parts) == 0 {
			continue
		}
		raw := make([]byte, c.width/8)
		if c.width == 32 {
			binary.BigEndian.PutUint32(raw, uint32(crc))
		} else {
			binary.BigEndian.PutUint64(raw, crc)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[alg] = base64.StdEncoding.EncodeToString(raw)
	}
	return out
}

// uploadChecksums is the whole-object checksum set an upload of type
// ctype gets from its chosen parts.
func uploadChecksums(ctype string, parts []store.PartInfo) map[string]string {
	if ctype == "FULL_OBJECT" {
		return fullObjectChecksums(parts)
	}
	return compositeChecksums(parts)
}

// checkCompleteChecksums compares what the client listed (per part) and
// sent (whole object) with what the parts have and the object will get.
func checkCompleteChecksums(asked []store.CompletePart, chosen []store.PartInfo, sums, want map[string]string) error {
	for i, cp := range asked {
		for alg, v := range cp.Checksums {
			// A checksum the part was not uploaded with cannot be
			// checked: refused like a wrong one (as S3 does), not ignored.
			if have := chosen[i].Checksums[alg]; have != v {
				if have == "" {
					return fmt.Errorf("%w: part %d was uploaded without a %s checksum", store.ErrInvalidPart, cp.Number, alg)
				}
				return fmt.Errorf("%w: part %d has %s %s, not %s", store.ErrInvalidPart, cp.Number, alg, have, v)
			}
		}
	}
	for alg, v := range want {
		got, _, _ := strings.Cut(sums[alg], "-")
		if v, _, _ = strings.Cut(v, "-"); got == "" || got != v {
			return fmt.Errorf("%w: the object's %s is %q, the request says %q", store.ErrBadDigest, alg, sums[alg], v)
		}
	}
	return nil
}

// CompleteMultipartChecked is CompleteMultipart (or, with ifAbsent,
// CompleteMultipartIfAbsent) that checks the client's checksums first.
func (b *Backend) CompleteMultipartChecked(ctx context.Context, bucket, key, uploadID string, parts []store.CompletePart, want map[string]string, ifAbsent bool) (store.ObjectInfo, error) {
	if ifAbsent {
		if err := b.keyExists(bucket, key); err != nil {
			return store.ObjectInfo{}, err
		}
	}
	return b.completeChecked(ctx, bucket, key, uploadID, parts, want, ifAbsent)
}

var _ store.ChecksumCompleter = (*Backend)(nil)

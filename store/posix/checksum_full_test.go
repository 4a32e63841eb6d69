package posix

import (
	"encoding/base64"
	"encoding/binary"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"math/rand/v2"
	"testing"

	"github.com/tristore/tristore/store"
)

// TestFullObjectChecksumsCombine: the whole-object CRC32, CRC32C and
// CRC64NVME combined from the parts' CRCs equal the CRC of the
// concatenated bytes, for parts of random sizes (empty and one-byte ones
// included).
func TestFullObjectChecksumsCombine(t *testing.T) {
	mk := map[string]func() hash.Hash{
		"CRC32":     func() hash.Hash { return crc32.NewIEEE() },
		"CRC32C":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
		"CRC64NVME": func() hash.Hash { return crc64.New(crc64.MakeTable(0x9A6C9329AC4BC9B5)) },
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		nparts := 1 + rng.IntN(6)
		var all []byte
		parts := make([]store.PartInfo, nparts)
		for i := range parts {
			n := rng.IntN(70000)
			if round%5 == 0 && i == 1 {
				n = 0
			}
			if round%7 == 0 {
				n = rng.IntN(3)
			}
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			all = append(all, b...)
			parts[i] = store.PartInfo{Number: i + 1, Size: int64(n), Checksums: map[string]string{}}
			for alg, f := range mk {
				h := f()
				h.Write(b)
				parts[i].Checksums[alg] = base64.StdEncoding.EncodeToString(h.Sum(nil))
			}
		}
		got := fullObjectChecksums(parts)
		for alg, f := range mk {
			h := f()
			h.Write(all)
			if want := base64.StdEncoding.EncodeToString(h.Sum(nil)); got[alg] != want {
				t.Fatalf("round %d, %d parts, %s: combined %s, want %s", round, nparts, alg, got[alg], want)
			}
		}
	}
	// A part without the algorithm's CRC: no whole-object checksum of it.
	p := []store.PartInfo{{Number: 1, Size: 1, Checksums: map[string]string{"CRC32": base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, 1))}}, {Number: 2, Size: 1}}
	if got := fullObjectChecksums(p); len(got) != 0 {
		t.Fatalf("parts without CRCs: %v", got)
	}
}

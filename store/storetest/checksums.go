package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/tristore/tristore/store"
)

// testPartChecksums: a PartChecksummer keeps each part's checksums (ListParts
// shows them) and gives the completed object S3's COMPOSITE checksum for
// every algorithm all chosen parts have, base64(H(d1||...||dN))-N.
func testPartChecksums(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	mp, ok := s.(store.Multiparter)
	pc, ok2 := s.(store.PartChecksummer)
	if !ok || !ok2 {
		t.Skip("store does not implement store.PartChecksummer")
	}
	crc := func(b []byte) []byte { return binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(b)) }
	b64 := base64.StdEncoding.EncodeToString
	p1, p2 := pattern(7, store.MinPartSize), pattern(8, 1000)
	id, err := mp.CreateMultipart(ctx, "bkt", "cs", store.ObjectMeta{})
	if err != nil {
		t.Fatal(err)
	}
	s2 := sha256.Sum256(p2)
	var etags []string
	for i, c := range []struct {
		data []byte
		sums map[string]string
	}{
		{p1, map[string]string{"CRC32": b64(crc(p1))}},
		{p2, map[string]string{"CRC32": b64(crc(p2)), "SHA256": b64(s2[:])}},
	} {
		pi, err := pc.PutPartChecksums(ctx, "bkt", "cs", id, i+1, bytes.NewReader(c.data), int64(len(c.data)), func() map[string]string { return c.sums })
		if err != nil {
			t.Fatal(err)
		}
		if pi.Checksums["CRC32"] != c.sums["CRC32"] {
			t.Fatalf("PutPartChecksums info %+v", pi)
		}
		etags = append(etags, pi.ETag)
	}
	ps, _, err := mp.ListParts(ctx, "bkt", "cs", id)
	if err != nil || len(ps) != 2 || ps[1].Checksums["SHA256"] != b64(s2[:]) {
		t.Fatalf("ListParts %+v %v", ps, err)
	}
	oi, err := mp.CompleteMultipart(ctx, "bkt", "cs", id, []store.CompletePart{{Number: 1, ETag: etags[0]}, {Number: 2, ETag: etags[1]}})
	if err != nil {
		t.Fatal(err)
	}
	comp := crc32.NewIEEE()
	comp.Write(crc(p1))
	comp.Write(crc(p2))
	want := fmt.Sprintf("%s-2", b64(comp.Sum(nil)))
	si, err := s.Stat(ctx, "bkt", "cs")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []store.ObjectInfo{oi, si} {
		if got.Meta.Checksums["CRC32"] != want || len(got.Meta.Checksums) != 1 {
			t.Fatalf("completed object checksums %v, want CRC32 %s only (SHA256 is not on every part)", got.Meta.Checksums, want)
		}
	}
}

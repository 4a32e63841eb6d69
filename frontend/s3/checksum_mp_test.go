package s3

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
)

// TestMultipartCompositeChecksum: parts uploaded with x-amz-checksum-crc32
// give the object S3's COMPOSITE checksum base64(crc32(c1||c2))-2, in the
// CompleteMultipartUpload result and on HEAD/GET with checksum mode on
// (before: no checksum at all for multipart objects).
func TestMultipartCompositeChecksum(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/mpc", nil, nil), 200)
	r := ts.do(t, "POST", "/mpc/obj?uploads", nil, map[string]string{"X-Amz-Checksum-Algorithm": "CRC32"})
	wantStatus(t, r, 200)
	var init struct {
		UploadID string `xml:"UploadId"`
	}
	xml.Unmarshal(r.body, &init)
	crc := func(b []byte) []byte { return binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(b)) }
	b64 := base64.StdEncoding.EncodeToString
	parts := [][]byte{bytes.Repeat([]byte("a"), store.MinPartSize), []byte("tail")}
	var body bytes.Buffer
	body.WriteString("<CompleteMultipartUpload>")
	for i, p := range parts {
		pr := ts.do(t, "PUT", fmt.Sprintf("/mpc/obj?partNumber=%d&uploadId=%s", i+1, init.UploadID), p,
			map[string]string{"X-Amz-Checksum-Crc32": b64(crc(p))})
		wantStatus(t, pr, 200)
		fmt.Fprintf(&body, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag><ChecksumCRC32>%s</ChecksumCRC32></Part>", i+1, pr.header.Get("ETag"), b64(crc(p)))
	}
	body.WriteString("</CompleteMultipartUpload>")
	comp := crc32.NewIEEE()
	comp.Write(crc(parts[0]))
	comp.Write(crc(parts[1]))
	want := b64(comp.Sum(nil)) + "-2"
	r = ts.do(t, "POST", "/mpc/obj?uploadId="+init.UploadID, body.Bytes(), nil)
	wantStatus(t, r, 200)
	var res completeResult
	if err := xml.Unmarshal(r.body, &res); err != nil || res.CRC32 != want || res.ChecksumType != "COMPOSITE" {
		t.Fatalf("complete result %s (err %v), want ChecksumCRC32 %s COMPOSITE", r.body, err, want)
	}
	for _, m := range []string{"HEAD", "GET"} {
		h := ts.do(t, m, "/mpc/obj", nil, map[string]string{"X-Amz-Checksum-Mode": "ENABLED"}).header
		if h.Get("X-Amz-Checksum-Crc32") != want || h.Get("X-Amz-Checksum-Type") != "COMPOSITE" {
			t.Fatalf("%s checksum headers %q %q, want %s COMPOSITE", m, h.Get("X-Amz-Checksum-Crc32"), h.Get("X-Amz-Checksum-Type"), want)
		}
	}
	// GetObjectAttributes reports the same, from metadata alone.
	r = ts.do(t, "GET", "/mpc/obj?attributes", nil, map[string]string{
		"X-Amz-Object-Attributes": "ETag,Checksum,ObjectParts,StorageClass,ObjectSize", "X-Amz-Max-Parts": "1"})
	wantStatus(t, r, 200)
	var attrs objectAttributesXML
	if err := xml.Unmarshal(r.body, &attrs); err != nil {
		t.Fatal(err)
	}
	etag := ts.do(t, "HEAD", "/mpc/obj", nil, nil).header.Get("ETag")
	// GetObjectAttributes gives a COMPOSITE checksum without its "-N", as S3 does.
	if `"`+attrs.ETag+`"` != etag || attrs.Checksum == nil || attrs.Checksum.CRC32 != strings.TrimSuffix(want, "-2") || attrs.Checksum.ChecksumType != "COMPOSITE" ||
		attrs.ObjectParts == nil || attrs.ObjectParts.PartsCount != 2 || len(attrs.ObjectParts.Parts) != 1 || !attrs.ObjectParts.IsTruncated ||
		attrs.ObjectParts.Parts[0].Size != store.MinPartSize || attrs.StorageClass != "STANDARD" || attrs.ObjectSize == nil || *attrs.ObjectSize != store.MinPartSize+4 {
		t.Fatalf("GetObjectAttributes: %s", r.body)
	}
	r = ts.do(t, "GET", "/mpc/obj?attributes", nil, map[string]string{"X-Amz-Object-Attributes": "ObjectParts", "X-Amz-Part-Number-Marker": "1"})
	attrs = objectAttributesXML{}
	xml.Unmarshal(r.body, &attrs)
	if attrs.ObjectParts == nil || len(attrs.ObjectParts.Parts) != 1 || attrs.ObjectParts.Parts[0].PartNumber != 2 || attrs.ObjectParts.IsTruncated || attrs.ETag != "" {
		t.Fatalf("GetObjectAttributes page 2: %s", r.body)
	}
	wantErr(t, ts.do(t, "GET", "/mpc/obj?attributes", nil, nil), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "GET", "/mpc/obj?attributes", nil, map[string]string{"X-Amz-Object-Attributes": "Color"}), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "GET", "/mpc/none?attributes", nil, map[string]string{"X-Amz-Object-Attributes": "ETag"}), 404, "NoSuchKey")
}

// TestMultipartFullObjectChecksum: an upload created with
// x-amz-checksum-type FULL_OBJECT gets the CRC of the whole object (no
// "-N"), in the Complete result, on HEAD with checksum mode and with
// x-amz-checksum-type FULL_OBJECT. A Complete whose whole-object checksum
// header or part checksum does not match is refused and publishes
// nothing; the type/algorithm pairs S3 refuses are refused. (Before, such
// an upload got no checksum at all.)
func TestMultipartFullObjectChecksum(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/mpf", nil, nil), 200)
	for _, h := range []map[string]string{
		{"X-Amz-Checksum-Type": "HALF", "X-Amz-Checksum-Algorithm": "CRC32"},
		{"X-Amz-Checksum-Type": "FULL_OBJECT"},
		{"X-Amz-Checksum-Type": "FULL_OBJECT", "X-Amz-Checksum-Algorithm": "SHA256"},
		{"X-Amz-Checksum-Type": "COMPOSITE", "X-Amz-Checksum-Algorithm": "CRC64NVME"},
	} {
		wantErr(t, ts.do(t, "POST", "/mpf/o?uploads", nil, h), 400, "InvalidRequest")
	}
	r := ts.do(t, "POST", "/mpf/o?uploads", nil, map[string]string{"X-Amz-Checksum-Algorithm": "CRC32", "X-Amz-Checksum-Type": "FULL_OBJECT"})
	wantStatus(t, r, 200)
	var init struct {
		UploadID string `xml:"UploadId"`
	}
	xml.Unmarshal(r.body, &init)
	p := []byte("only part")
	crc := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(p)))
	pr := ts.do(t, "PUT", "/mpf/o?partNumber=1&uploadId="+init.UploadID, p, map[string]string{"X-Amz-Checksum-Crc32": crc})
	wantStatus(t, pr, 200)
	done := func(partCRC string) []byte {
		return []byte(fmt.Sprintf("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag><ChecksumCRC32>%s</ChecksumCRC32></Part></CompleteMultipartUpload>", pr.header.Get("ETag"), partCRC))
	}
	other := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE([]byte("other"))))
	wantErr(t, ts.do(t, "POST", "/mpf/o?uploadId="+init.UploadID, done(crc), map[string]string{"X-Amz-Checksum-Crc32": other}), 400, "BadDigest")
	wantErr(t, ts.do(t, "POST", "/mpf/o?uploadId="+init.UploadID, done(other), nil), 400, "InvalidPart")
	wantErr(t, ts.do(t, "POST", "/mpf/o?uploadId="+init.UploadID, done(crc), map[string]string{"X-Amz-Checksum-Crc32c": other}), 400, "BadDigest")
	wantErr(t, ts.do(t, "HEAD", "/mpf/o", nil, nil), 404, "")
	r = ts.do(t, "POST", "/mpf/o?uploadId="+init.UploadID, done(crc), map[string]string{"X-Amz-Checksum-Crc32": crc, "X-Amz-Checksum-Type": "FULL_OBJECT"})
	wantStatus(t, r, 200)
	if !bytes.Contains(r.body, []byte("<ChecksumCRC32>"+crc+"</ChecksumCRC32><ChecksumType>FULL_OBJECT</ChecksumType>")) {
		t.Fatalf("Complete: %s", r.body)
	}
	h := ts.do(t, "HEAD", "/mpf/o", nil, map[string]string{"X-Amz-Checksum-Mode": "ENABLED"}).header
	if h.Get("X-Amz-Checksum-Crc32") != crc || h.Get("X-Amz-Checksum-Type") != "FULL_OBJECT" {
		t.Fatalf("HEAD: %v", h)
	}
}

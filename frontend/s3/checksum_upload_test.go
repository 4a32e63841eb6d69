package s3

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
)

// sumOf is base64(alg(b)) for an upper-case algorithm name.
func sumOf(alg string, b []byte) string {
	h := checksumAlgs[strings.ToLower(alg)]()
	h.Write(b)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// mpCreate starts an upload with the given headers and returns its ID.
func mpCreate(t *testing.T, ts *testServer, path string, hdr map[string]string) string {
	t.Helper()
	r := ts.do(t, "POST", path+"?uploads", nil, hdr)
	wantStatus(t, r, 200)
	var ir initiateResult
	if err := xml.Unmarshal(r.body, &ir); err != nil || ir.UploadID == "" {
		t.Fatalf("CreateMultipartUpload: %s", r.body)
	}
	return ir.UploadID
}

// completeBody lists parts as <Part> elements; sums[i] is "" (no checksum)
// or "ALG=value".
func completeBody(etags, sums []string) []byte {
	var b bytes.Buffer
	b.WriteString("<CompleteMultipartUpload>")
	for i, e := range etags {
		fmt.Fprintf(&b, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag>", i+1, e)
		if i < len(sums) && sums[i] != "" {
			alg, v, _ := strings.Cut(sums[i], "=")
			fmt.Fprintf(&b, "<Checksum%s>%s</Checksum%s>", alg, v, alg)
		}
		b.WriteString("</Part>")
	}
	b.WriteString("</CompleteMultipartUpload>")
	return b.Bytes()
}

// listPartsXML is what a client reads from ListParts.
type listPartsXML struct {
	ChecksumAlgorithm string `xml:"ChecksumAlgorithm"`
	ChecksumType      string `xml:"ChecksumType"`
	Parts             []struct {
		PartNumber int    `xml:"PartNumber"`
		CRC32      string `xml:"ChecksumCRC32"`
		CRC32C     string `xml:"ChecksumCRC32C"`
		CRC64NVME  string `xml:"ChecksumCRC64NVME"`
		SHA1       string `xml:"ChecksumSHA1"`
		SHA256     string `xml:"ChecksumSHA256"`
	} `xml:"Part"`
}

func listPartsOf(t *testing.T, ts *testServer, path, id string) listPartsXML {
	t.Helper()
	r := ts.do(t, "GET", path+"?uploadId="+id, nil, nil)
	wantStatus(t, r, 200)
	var lp listPartsXML
	if err := xml.Unmarshal(r.body, &lp); err != nil {
		t.Fatal(err)
	}
	return lp
}

// TestListPartsChecksums: ListParts of an upload created with a checksum
// algorithm shows each part's checksum of that algorithm and the upload's
// ChecksumAlgorithm/ChecksumType (before: no checksums at all), for all
// five algorithms; ListMultipartUploads shows the algorithm and type. A
// FULL_OBJECT part sent without a checksum gets its CRC computed, and a
// part filled by UploadPartCopy gets its checksum computed from the bytes
// copied (in CopyPartResult and ListParts), as S3 does, so a client can
// list them in its Complete. An upload created without an algorithm lists
// none. CreateMultipartUpload answers the upload's type (COMPOSITE for an
// algorithm alone; before, no type header then).
func TestListPartsChecksums(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/lpc", nil, nil), 200)
	parts := [][]byte{bytes.Repeat([]byte("p"), store.MinPartSize), []byte("the last part")}
	for _, alg := range []string{"CRC32", "CRC32C", "SHA1", "SHA256", "CRC64NVME"} {
		path := "/lpc/" + strings.ToLower(alg)
		cr := ts.do(t, "POST", path+"?uploads", nil, map[string]string{"X-Amz-Checksum-Algorithm": alg})
		var ir initiateResult
		if cr.status != 200 || xml.Unmarshal(cr.body, &ir) != nil {
			t.Fatalf("CreateMultipartUpload %s: %d %s", alg, cr.status, cr.body)
		}
		id := ir.UploadID
		for i, p := range parts {
			wantStatus(t, ts.do(t, "PUT", fmt.Sprintf("%s?partNumber=%d&uploadId=%s", path, i+1, id), p,
				map[string]string{"X-Amz-Checksum-" + alg: sumOf(alg, p)}), 200)
		}
		lp := listPartsOf(t, ts, path, id)
		wantType := "COMPOSITE"
		if alg == "CRC64NVME" {
			wantType = "FULL_OBJECT"
		}
		// CreateMultipartUpload answers the type too, COMPOSITE for an algorithm alone.
		if cr.header.Get("X-Amz-Checksum-Algorithm") != alg || cr.header.Get("X-Amz-Checksum-Type") != wantType {
			t.Fatalf("%s: CreateMultipartUpload answered algorithm %q type %q", alg, cr.header.Get("X-Amz-Checksum-Algorithm"), cr.header.Get("X-Amz-Checksum-Type"))
		}
		if lp.ChecksumAlgorithm != alg || lp.ChecksumType != wantType || len(lp.Parts) != 2 {
			t.Fatalf("%s: ListParts algorithm %q type %q, %d parts", alg, lp.ChecksumAlgorithm, lp.ChecksumType, len(lp.Parts))
		}
		for i, p := range lp.Parts {
			got := map[string]string{"CRC32": p.CRC32, "CRC32C": p.CRC32C, "CRC64NVME": p.CRC64NVME, "SHA1": p.SHA1, "SHA256": p.SHA256}
			for a, v := range got {
				if want := map[bool]string{true: sumOf(alg, parts[i])}[a == alg]; v != want {
					t.Fatalf("%s: part %d Checksum%s %q, want %q", alg, p.PartNumber, a, v, want)
				}
			}
		}
		r := ts.do(t, "GET", "/lpc?uploads&prefix="+strings.ToLower(alg), nil, nil)
		if !bytes.Contains(r.body, []byte("<ChecksumAlgorithm>"+alg+"</ChecksumAlgorithm><ChecksumType>"+wantType+"</ChecksumType>")) {
			t.Fatalf("%s: ListMultipartUploads: %s", alg, r.body)
		}
	}

	// FULL_OBJECT: a part without a checksum gets its CRC32 computed.
	id := mpCreate(t, ts, "/lpc/full", map[string]string{"X-Amz-Checksum-Algorithm": "CRC32", "X-Amz-Checksum-Type": "FULL_OBJECT"})
	pr := ts.do(t, "PUT", "/lpc/full?partNumber=1&uploadId="+id, parts[1], nil)
	wantStatus(t, pr, 200)
	if got := pr.header.Get("X-Amz-Checksum-Crc32"); got != sumOf("CRC32", parts[1]) {
		t.Fatalf("computed part CRC32 %q, want %q", got, sumOf("CRC32", parts[1]))
	}
	if lp := listPartsOf(t, ts, "/lpc/full", id); len(lp.Parts) != 1 || lp.Parts[0].CRC32 != sumOf("CRC32", parts[1]) || lp.ChecksumType != "FULL_OBJECT" {
		t.Fatalf("FULL_OBJECT ListParts: %+v", lp)
	}
	c := ts.do(t, "POST", "/lpc/full?uploadId="+id, completeBody([]string{pr.header.Get("ETag")}, []string{"CRC32=" + sumOf("CRC32", parts[1])}),
		map[string]string{"X-Amz-Checksum-Crc32": sumOf("CRC32", parts[1]), "X-Amz-Checksum-Type": "FULL_OBJECT"})
	wantStatus(t, c, 200)

	// UploadPartCopy: the part's CRC32C is computed from the copied bytes.
	wantStatus(t, ts.do(t, "PUT", "/lpc/src", parts[1], nil), 200)
	id = mpCreate(t, ts, "/lpc/copied", map[string]string{"X-Amz-Checksum-Algorithm": "CRC32C"})
	cp := ts.do(t, "PUT", "/lpc/copied?partNumber=1&uploadId="+id, nil, map[string]string{"X-Amz-Copy-Source": "/lpc/src"})
	wantStatus(t, cp, 200)
	want := sumOf("CRC32C", parts[1])
	if !bytes.Contains(cp.body, []byte("<ChecksumCRC32C>"+want+"</ChecksumCRC32C>")) {
		t.Fatalf("CopyPartResult without the part's CRC32C %s: %s", want, cp.body)
	}
	if lp := listPartsOf(t, ts, "/lpc/copied", id); len(lp.Parts) != 1 || lp.Parts[0].CRC32C != want {
		t.Fatalf("ListParts after UploadPartCopy: %+v", lp)
	}

	// No algorithm at CreateMultipartUpload: no part checksums listed.
	id = mpCreate(t, ts, "/lpc/none", nil)
	wantStatus(t, ts.do(t, "PUT", "/lpc/none?partNumber=1&uploadId="+id, parts[1], map[string]string{"X-Amz-Checksum-Crc32": sumOf("CRC32", parts[1])}), 200)
	r := ts.do(t, "GET", "/lpc/none?uploadId="+id, nil, nil)
	if bytes.Contains(r.body, []byte("<Checksum")) {
		t.Fatalf("ListParts of an upload without an algorithm: %s", r.body)
	}
}

// TestChecksumMismatchRefused: parts and Completes that do not match the
// upload's checksum type or algorithm are refused as S3 refuses them, and
// nothing is published (before, all of them were accepted):
//   - Complete naming another x-amz-checksum-type (COMPOSITE upload
//     completed as FULL_OBJECT, FULL_OBJECT as COMPOSITE, none as either),
//     or an invalid one: 400 InvalidRequest;
//   - a part listed with a checksum of another algorithm: 400 BadDigest;
//     without one: 400 InvalidRequest; with one it was not uploaded with
//     (upload without algorithm): 400 InvalidPart;
//   - a whole-object checksum of another algorithm: 400 BadDigest; two
//     whole-object checksums: 400 InvalidRequest;
//   - UploadPart with a checksum of another algorithm, or (COMPOSITE)
//     without one: 400 InvalidRequest.
func TestChecksumMismatchRefused(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/cmm", nil, nil), 200)
	p := []byte("the only part")
	crc, crcc, sha := sumOf("CRC32", p), sumOf("CRC32C", p), sumOf("SHA256", p)

	// COMPOSITE CRC32 (the algorithm alone).
	id := mpCreate(t, ts, "/cmm/c", map[string]string{"X-Amz-Checksum-Algorithm": "CRC32"})
	up := "/cmm/c?partNumber=1&uploadId=" + id
	wantErr(t, ts.do(t, "PUT", up, p, map[string]string{"X-Amz-Checksum-Sha256": sha}), 400, "InvalidRequest")
	wantErr(t, ts.do(t, "PUT", up, p, nil), 400, "InvalidRequest")
	wantErr(t, ts.do(t, "PUT", up, p, map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32c"}), 400, "InvalidRequest")
	pr := ts.do(t, "PUT", up, p, map[string]string{"X-Amz-Checksum-Crc32": crc})
	wantStatus(t, pr, 200)
	etag := []string{pr.header.Get("ETag")}
	done := "/cmm/c?uploadId=" + id
	for _, c := range []struct {
		sums   []string
		hdr    map[string]string
		status int
		code   string
		msg    string
	}{
		{[]string{"CRC32=" + crc}, map[string]string{"X-Amz-Checksum-Type": "FULL_OBJECT"}, 400, "InvalidRequest", "created using the COMPOSITE checksum mode"},
		{[]string{"CRC32=" + crc}, map[string]string{"X-Amz-Checksum-Type": "HALF"}, 400, "InvalidRequest", "x-amz-checksum-type"},
		{[]string{"SHA256=" + sha}, nil, 400, "BadDigest", "sha256 you specified for part 1"},
		{[]string{"CRC32C=" + crcc}, nil, 400, "BadDigest", "crc32c you specified for part 1"},
		{[]string{""}, nil, 400, "InvalidRequest", "It was missing for part 1"},
		{[]string{"CRC32=" + crc}, map[string]string{"X-Amz-Checksum-Sha256": sha}, 400, "BadDigest", "crc32 checksum"},
		{[]string{"CRC32=" + crc}, map[string]string{"X-Amz-Checksum-Crc32": crc, "X-Amz-Checksum-Crc32c": crcc}, 400, "InvalidRequest", "single x-amz-checksum-"},
	} {
		r := ts.do(t, "POST", done, completeBody(etag, c.sums), c.hdr)
		wantErr(t, r, c.status, c.code)
		if !strings.Contains(string(r.body), c.msg) {
			t.Fatalf("Complete %v %v: message does not say %q: %s", c.sums, c.hdr, c.msg, r.body)
		}
	}
	wantErr(t, ts.do(t, "HEAD", "/cmm/c", nil, nil), 404, "")
	r := ts.do(t, "POST", done, completeBody(etag, []string{"CRC32=" + crc}), map[string]string{"X-Amz-Checksum-Type": "COMPOSITE"})
	wantStatus(t, r, 200)
	if !bytes.Contains(r.body, []byte("<ChecksumType>COMPOSITE</ChecksumType>")) {
		t.Fatalf("Complete: %s", r.body)
	}

	// FULL_OBJECT CRC32 completed as COMPOSITE.
	id = mpCreate(t, ts, "/cmm/f", map[string]string{"X-Amz-Checksum-Algorithm": "CRC32", "X-Amz-Checksum-Type": "FULL_OBJECT"})
	wantErr(t, ts.do(t, "PUT", "/cmm/f?partNumber=1&uploadId="+id, p, map[string]string{"X-Amz-Checksum-Sha1": sumOf("SHA1", p)}), 400, "InvalidRequest")
	pr = ts.do(t, "PUT", "/cmm/f?partNumber=1&uploadId="+id, p, map[string]string{"X-Amz-Checksum-Crc32": crc})
	wantStatus(t, pr, 200)
	r = ts.do(t, "POST", "/cmm/f?uploadId="+id, completeBody([]string{pr.header.Get("ETag")}, []string{"CRC32=" + crc}), map[string]string{"X-Amz-Checksum-Type": "COMPOSITE"})
	wantErr(t, r, 400, "InvalidRequest")
	if !strings.Contains(string(r.body), "FULL_OBJECT checksum mode") {
		t.Fatalf("FULL_OBJECT completed as COMPOSITE: %s", r.body)
	}
	wantErr(t, ts.do(t, "HEAD", "/cmm/f", nil, nil), 404, "")

	// No algorithm: any type is a mismatch ("null"), and a part checksum
	// the part was not uploaded with cannot be checked.
	id = mpCreate(t, ts, "/cmm/n", nil)
	pr = ts.do(t, "PUT", "/cmm/n?partNumber=1&uploadId="+id, p, nil)
	wantStatus(t, pr, 200)
	etag = []string{pr.header.Get("ETag")}
	r = ts.do(t, "POST", "/cmm/n?uploadId="+id, completeBody(etag, nil), map[string]string{"X-Amz-Checksum-Type": "FULL_OBJECT"})
	wantErr(t, r, 400, "InvalidRequest")
	if !strings.Contains(string(r.body), "null checksum mode") {
		t.Fatalf("no-algorithm upload completed as FULL_OBJECT: %s", r.body)
	}
	wantErr(t, ts.do(t, "POST", "/cmm/n?uploadId="+id, completeBody(etag, []string{"CRC32=" + crc}), nil), 400, "InvalidPart")
	wantErr(t, ts.do(t, "HEAD", "/cmm/n", nil, nil), 404, "")
	wantStatus(t, ts.do(t, "POST", "/cmm/n?uploadId="+id, completeBody(etag, nil), nil), 200)
}

// TestObjectAttributesPartChecksums: GetObjectAttributes of a COMPOSITE
// multipart object gives the object's checksum without its "-N" (HEAD
// keeps it) and each part's checksum under ObjectParts, as ListParts
// showed them, also after a restart of the store (kept in the object's
// record); a FULL_OBJECT object gives the whole CRC and no part checksums.
// Before, ObjectParts had no checksums and Checksum kept the "-N".
func TestObjectAttributesPartChecksums(t *testing.T) {
	dir := t.TempDir()
	ts, stop := newTestServerAt(t, dir)
	wantStatus(t, ts.do(t, "PUT", "/oap", nil, nil), 200)
	parts := [][]byte{bytes.Repeat([]byte("o"), store.MinPartSize), []byte("last")}
	upload := func(key string, hdr map[string]string, alg string) (string, []string) {
		t.Helper()
		id := mpCreate(t, ts, "/oap/"+key, hdr)
		var etags, sums []string
		for i, p := range parts {
			pr := ts.do(t, "PUT", fmt.Sprintf("/oap/%s?partNumber=%d&uploadId=%s", key, i+1, id), p, map[string]string{"X-Amz-Checksum-" + alg: sumOf(alg, p)})
			wantStatus(t, pr, 200)
			etags = append(etags, pr.header.Get("ETag"))
			sums = append(sums, alg+"="+sumOf(alg, p))
		}
		r := ts.do(t, "POST", "/oap/"+key+"?uploadId="+id, completeBody(etags, sums), nil)
		wantStatus(t, r, 200)
		return ts.do(t, "HEAD", "/oap/"+key, nil, map[string]string{"X-Amz-Checksum-Mode": "ENABLED"}).header.Get("X-Amz-Checksum-" + alg), sums
	}
	attrs := func(key string) objectAttributesXML {
		t.Helper()
		r := ts.do(t, "GET", "/oap/"+key+"?attributes", nil, map[string]string{"X-Amz-Object-Attributes": "Checksum,ObjectParts"})
		wantStatus(t, r, 200)
		var a objectAttributesXML
		if err := xml.Unmarshal(r.body, &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	whole, sums := upload("comp", map[string]string{"X-Amz-Checksum-Algorithm": "SHA256"}, "SHA256")
	if !strings.HasSuffix(whole, "-2") {
		t.Fatalf("HEAD of the COMPOSITE object: %q", whole)
	}
	full, _ := upload("full", map[string]string{"X-Amz-Checksum-Algorithm": "CRC32", "X-Amz-Checksum-Type": "FULL_OBJECT"}, "CRC32")
	check := func(when string) {
		t.Helper()
		a := attrs("comp")
		if a.Checksum == nil || a.Checksum.SHA256 != strings.TrimSuffix(whole, "-2") || a.Checksum.ChecksumType != "COMPOSITE" {
			t.Fatalf("%s: COMPOSITE Checksum %+v, want %s COMPOSITE", when, a.Checksum, strings.TrimSuffix(whole, "-2"))
		}
		if a.ObjectParts == nil || len(a.ObjectParts.Parts) != 2 {
			t.Fatalf("%s: ObjectParts %+v", when, a.ObjectParts)
		}
		for i, p := range a.ObjectParts.Parts {
			if "SHA256="+p.SHA256 != sums[i] || p.CRC32 != "" {
				t.Fatalf("%s: part %d checksums %+v, want %s", when, p.PartNumber, p.partChecksumXML, sums[i])
			}
		}
		a = attrs("full")
		if a.Checksum == nil || a.Checksum.CRC32 != full || a.Checksum.ChecksumType != "FULL_OBJECT" || a.ObjectParts == nil || len(a.ObjectParts.Parts) != 2 {
			t.Fatalf("%s: FULL_OBJECT attributes %+v %+v", when, a.Checksum, a.ObjectParts)
		}
		for _, p := range a.ObjectParts.Parts {
			if p.partChecksumXML != (partChecksumXML{}) {
				t.Fatalf("%s: FULL_OBJECT part %d lists checksums %+v", when, p.PartNumber, p.partChecksumXML)
			}
		}
	}
	check("before restart")
	stop()
	ts, _ = newTestServerAt(t, dir)
	check("after restart")
}

package s3

import (
	"encoding/xml"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/tristore/tristore/internal/sse"
	"github.com/tristore/tristore/store"
)

var (
	opCreateMultipartUpload   = &operation{"CreateMultipartUpload", "s3:PutObject", (*Server).createMultipartUpload}
	opUploadPart              = &operation{"UploadPart", "s3:PutObject", (*Server).uploadPart}
	opCompleteMultipartUpload = &operation{"CompleteMultipartUpload", "s3:PutObject", (*Server).completeMultipartUpload}
	opAbortMultipartUpload    = &operation{"AbortMultipartUpload", "s3:AbortMultipartUpload", (*Server).abortMultipartUpload}
	opListParts               = &operation{"ListParts", "s3:ListMultipartUploadParts", (*Server).listParts}
	opListMultipartUploads    = &operation{"ListMultipartUploads", "s3:ListBucketMultipartUploads", (*Server).listMultipartUploads}
)

// maxPartSize is S3's largest part (5 GiB).
const maxPartSize = 5 << 30

func (s *Server) multiparter() (store.Multiparter, error) {
	mp, ok := s.st.(store.Multiparter)
	if !ok {
		return nil, ErrNotImplemented.withMessage("this store does not support multipart uploads")
	}
	return mp, nil
}

// partParams reads partNumber (1..10000) and uploadId from the query.
func partParams(r *http.Request) (int, string, error) {
	q := r.URL.Query()
	pn, err := strconv.Atoi(q.Get("partNumber"))
	if err != nil || pn < 1 || pn > 10000 {
		return 0, "", ErrInvalidArgument.withMessage("Part number must be an integer between 1 and 10000, inclusive")
	}
	id := q.Get("uploadId")
	if id == "" {
		return 0, "", ErrInvalidArgument.withMessage("uploadId is required")
	}
	return pn, id, nil
}

type initiateResult struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	NS       string   `xml:"xmlns,attr"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	UploadID string   `xml:"UploadId"`
}

func (s *Server) createMultipartUpload(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	mp, err := s.multiparter()
	if err != nil {
		return err
	}
	meta, err := s.metaFromRequest(r.Header, rc)
	if err != nil {
		return err
	}
	if err := s.sseUploadMeta(r.Context(), r, rc.bucket, rc.key, &meta, w.Header()); err != nil { // sse_multipart.go
		return err
	}
	if err := s.applyObjectLock(r.Context(), r.Header, rc.bucket, &meta); err != nil { // objectlock.go
		return err
	}
	if a := r.Header.Get("X-Amz-Checksum-Algorithm"); a != "" {
		if _, ok := checksumAlgs[strings.ToLower(a)]; !ok {
			return ErrInvalidArgument.withMessage("Unsupported checksum algorithm " + a)
		}
		meta.ChecksumAlgorithm = strings.ToUpper(a)
		w.Header().Set("X-Amz-Checksum-Algorithm", meta.ChecksumAlgorithm)
	}
	ct, err := uploadChecksumType(r.Header) // checksum_complete.go
	if err != nil {
		return err
	}
	if ct != "" {
		meta.ChecksumType = ct
	}
	if t := uploadType(meta); t != "" { // checksum_upload.go: COMPOSITE for an algorithm alone, as S3 answers
		w.Header().Set("X-Amz-Checksum-Type", t)
	}
	id, err := mp.CreateMultipart(r.Context(), rc.bucket, rc.key, meta)
	if err != nil {
		return err
	}
	return writeXML(w, initiateResult{NS: s3NS, Bucket: rc.bucket, Key: rc.key, UploadID: id})
}

func (s *Server) uploadPart(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	mp, err := s.multiparter()
	if err != nil {
		return err
	}
	pn, id, err := partParams(r)
	if err != nil {
		return err
	}
	size, err := bodySize(r)
	if err != nil {
		return err
	}
	if size < 0 {
		return ErrMissingContentLength
	}
	if size > maxPartSize {
		return ErrEntityTooLarge
	}
	up, err := s.uploadOf(r.Context(), rc.bucket, rc.key, id) // checksum_upload.go
	if err != nil {
		return err
	}
	// The upload's checksum algorithm binds its parts (checksum_upload.go);
	// a FULL_OBJECT part without a checksum gets one computed.
	computed, err := checkPartChecksum(r.Header, up)
	if err != nil {
		return err
	}
	vr, sums, err := newVerifyingReader(r.Body, size, r.Header)
	if err != nil {
		return err
	}
	var plain io.Reader = vr
	if computed != nil {
		plain = io.TeeReader(vr, computed)
	}
	// sse_multipart.go: a part of an encrypted upload is stored sealed.
	body, bsize, err := s.ssePart(r, up, pn, plain, size, w.Header())
	if err != nil {
		return err
	}
	var pi store.PartInfo
	if pc, ok := s.st.(store.PartChecksummer); ok {
		// The part keeps its checksums (header or, read after the body,
		// aws-chunked trailer; both verified) for the composite checksum.
		pi, err = pc.PutPartChecksums(r.Context(), rc.bucket, rc.key, id, pn, body, bsize, func() map[string]string {
			all := withTrailerChecksums(sums, r)
			if computed != nil {
				if all == nil {
					all = map[string]string{}
				}
				all[computed.alg] = computed.value()
				sums = all // echoed below
			}
			return all
		})
	} else {
		pi, err = mp.PutPart(r.Context(), rc.bucket, rc.key, id, pn, body, bsize)
	}
	if err != nil {
		return vr.bodyError(err)
	}
	w.Header().Set("ETag", `"`+pi.ETag+`"`)
	for alg, v := range sums {
		w.Header().Set("X-Amz-Checksum-"+strings.ToLower(alg), v)
	}
	echoTrailerChecksums(w.Header(), r)
	w.WriteHeader(http.StatusOK)
	return nil
}

// completeRequest is the body of CompleteMultipartUpload.
type completeRequest struct {
	XMLName xml.Name `xml:"CompleteMultipartUpload"`
	Parts   []struct {
		PartNumber int    `xml:"PartNumber"`
		ETag       string `xml:"ETag"`
		checksumFields
	} `xml:"Part"`
}

// parseCompleteRequest decodes a CompleteMultipartUpload body and checks
// the part list: at least one part, numbers 1..10000 strictly ascending.
func parseCompleteRequest(b []byte) ([]store.CompletePart, error) {
	var req completeRequest
	if err := xml.Unmarshal(b, &req); err != nil || len(req.Parts) == 0 {
		return nil, ErrMalformedXML
	}
	parts := make([]store.CompletePart, 0, len(req.Parts))
	prev := 0
	for _, p := range req.Parts {
		if p.PartNumber < 1 || p.PartNumber > 10000 {
			return nil, ErrInvalidArgument.withMessage("Part number must be an integer between 1 and 10000, inclusive")
		}
		if p.PartNumber <= prev {
			return nil, ErrInvalidPartOrder
		}
		prev = p.PartNumber
		etag := strings.TrimSpace(p.ETag)
		etag = strings.Trim(strings.ReplaceAll(etag, "&quot;", `"`), `"`)
		parts = append(parts, store.CompletePart{Number: p.PartNumber, ETag: etag, Checksums: partChecksums(p.checksumFields)})
	}
	return parts, nil
}

type completeResult struct {
	XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
	NS       string   `xml:"xmlns,attr"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
	checksumFields
}

// checksumFields are the Checksum* elements of CompleteMultipartUpload
// and GetObjectAttributes answers.
type checksumFields struct {
	CRC32        string `xml:"ChecksumCRC32,omitempty"`
	CRC32C       string `xml:"ChecksumCRC32C,omitempty"`
	CRC64NVME    string `xml:"ChecksumCRC64NVME,omitempty"`
	SHA1         string `xml:"ChecksumSHA1,omitempty"`
	SHA256       string `xml:"ChecksumSHA256,omitempty"`
	ChecksumType string `xml:"ChecksumType,omitempty"`
}

func makeChecksumFields(sums map[string]string) checksumFields {
	c := checksumFields{CRC32: sums["CRC32"], CRC32C: sums["CRC32C"], CRC64NVME: sums["CRC64NVME"], SHA1: sums["SHA1"], SHA256: sums["SHA256"]}
	if len(sums) > 0 {
		c.ChecksumType = checksumType(sums)
	}
	return c
}

// checksumType is S3's x-amz-checksum-type: COMPOSITE for a multipart
// checksum-of-checksums ("...-N"), FULL_OBJECT otherwise.
func checksumType(sums map[string]string) string {
	for _, v := range sums {
		if strings.Contains(v, "-") {
			return "COMPOSITE"
		}
	}
	return "FULL_OBJECT"
}

// withTrailerChecksums adds the checksums that arrived in an aws-chunked
// trailer (verified by sigv4 when the body ended) to the header ones.
func withTrailerChecksums(sums map[string]string, r *http.Request) map[string]string {
	var out map[string]string
	add := func(alg, v string) {
		if out == nil {
			out = map[string]string{}
		}
		out[strings.ToUpper(alg)] = v
	}
	for alg, v := range sums {
		add(alg, v)
	}
	for k, vs := range r.Trailer {
		alg, ok := strings.CutPrefix(strings.ToLower(k), "x-amz-checksum-")
		if _, known := checksumAlgs[alg]; ok && known && len(vs) > 0 && vs[0] != "" {
			add(alg, vs[0])
		}
	}
	return out
}

func (s *Server) completeMultipartUpload(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	mp, err := s.multiparter()
	if err != nil {
		return err
	}
	id := r.URL.Query().Get("uploadId")
	b, err := readBody(r, maxXMLBody)
	if err != nil {
		return err
	}
	parts, err := parseCompleteRequest(b)
	if err != nil {
		return err
	}
	want, err := completeWant(r.Header)
	if err != nil {
		return err
	}
	// A Complete must agree with its upload's checksum settings
	// (checksum_upload.go). An upload that is gone is left to the store,
	// which answers a retried Complete that already happened.
	up, _ := s.uploadOf(r.Context(), rc.bucket, rc.key, id)
	if err := checkCompleteAgainstUpload(r.Header, up, parts, want); err != nil {
		return err
	}
	// If-None-Match: * completes only onto an absent key: atomically
	// through the store's no-replace publish when it has one, else by a
	// check first (which two racing completes can both pass).
	ifAbsent := r.Header.Get("If-None-Match") == "*"
	if ifAbsent {
		if _, err := s.st.Stat(r.Context(), rc.bucket, rc.key); err == nil {
			return ErrPreconditionFailed
		}
	}
	oi, err := s.completeUpload(r.Context(), mp, rc, id, parts, want, ifAbsent) // checksum_complete.go
	if err != nil {
		return err
	}
	setVersionHeader(w.Header(), oi, "")
	sseResponseHeaders(w.Header(), oi, r.Header, sseCHdr) // sse.go
	loc := "/" + rc.bucket + "/" + rc.key
	if r.Host != "" {
		loc = "http://" + r.Host + loc
	}
	return writeXML(w, completeResult{NS: s3NS, Location: loc, Bucket: rc.bucket, Key: rc.key, ETag: `"` + oi.ETag + `"`,
		checksumFields: makeChecksumFields(oi.Meta.Checksums)})
}

func (s *Server) abortMultipartUpload(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	mp, err := s.multiparter()
	if err != nil {
		return err
	}
	if err := mp.AbortMultipart(r.Context(), rc.bucket, rc.key, r.URL.Query().Get("uploadId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type partXML struct {
	PartNumber   int    `xml:"PartNumber"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	partChecksumXML
}

// partChecksumXML is a part's checksum in ListParts, of the upload's
// algorithm (none for an upload created without one), as S3 lists it.
type partChecksumXML struct {
	CRC32     string `xml:"ChecksumCRC32,omitempty"`
	CRC32C    string `xml:"ChecksumCRC32C,omitempty"`
	CRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
	SHA1      string `xml:"ChecksumSHA1,omitempty"`
	SHA256    string `xml:"ChecksumSHA256,omitempty"`
}

func makePartChecksumXML(sums map[string]string, algs ...string) partChecksumXML {
	var c partChecksumXML
	for _, alg := range algs {
		v := sums[alg]
		switch alg {
		case "CRC32":
			c.CRC32 = v
		case "CRC32C":
			c.CRC32C = v
		case "CRC64NVME":
			c.CRC64NVME = v
		case "SHA1":
			c.SHA1 = v
		case "SHA256":
			c.SHA256 = v
		}
	}
	return c
}

type listPartsResult struct {
	XMLName              xml.Name  `xml:"ListPartsResult"`
	NS                   string    `xml:"xmlns,attr"`
	Bucket               string    `xml:"Bucket"`
	Key                  string    `xml:"Key"`
	UploadID             string    `xml:"UploadId"`
	Initiator            owner     `xml:"Initiator"`
	Owner                owner     `xml:"Owner"`
	StorageClass         string    `xml:"StorageClass"`
	PartNumberMarker     int       `xml:"PartNumberMarker"`
	NextPartNumberMarker int       `xml:"NextPartNumberMarker"`
	MaxParts             int       `xml:"MaxParts"`
	IsTruncated          bool      `xml:"IsTruncated"`
	Parts                []partXML `xml:"Part"`
	ChecksumAlgorithm    string    `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType         string    `xml:"ChecksumType,omitempty"`
}

// intParam reads a non-negative integer query parameter with a default and a cap.
func intParam(r *http.Request, name string, def, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, ErrInvalidArgument.withMessage(name + " must be a non-negative integer")
	}
	if n > max {
		n = max
	}
	return n, nil
}

func (s *Server) listParts(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	mp, err := s.multiparter()
	if err != nil {
		return err
	}
	id := r.URL.Query().Get("uploadId")
	maxParts, err := intParam(r, "max-parts", 1000, 1000)
	if err != nil {
		return err
	}
	marker, err := intParam(r, "part-number-marker", 0, 10000)
	if err != nil {
		return err
	}
	parts, up, err := mp.ListParts(r.Context(), rc.bucket, rc.key, id)
	if err != nil {
		return err
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].Number < parts[j].Number })
	o := owner{up.Meta.Owner, up.Meta.Owner}
	alg := up.Meta.ChecksumAlgorithm
	res := listPartsResult{NS: s3NS, Bucket: rc.bucket, Key: rc.key, UploadID: id, Initiator: o, Owner: o,
		StorageClass: "STANDARD", PartNumberMarker: marker, MaxParts: maxParts,
		ChecksumAlgorithm: alg, ChecksumType: uploadType(up.Meta)} // checksum_complete.go
	for _, p := range parts {
		if p.Number <= marker {
			continue
		}
		if len(res.Parts) == maxParts {
			res.IsTruncated = true
			break
		}
		if up.Meta.Encryption != nil {
			p.Size, _ = sse.PlainSize(p.Size) // sse_multipart.go: sealed parts
		}
		res.Parts = append(res.Parts, partXML{p.Number, xmlTime(p.ModTime), `"` + p.ETag + `"`, p.Size, makePartChecksumXML(p.Checksums, alg)})
		res.NextPartNumberMarker = p.Number
	}
	return writeXML(w, res)
}

type uploadXML struct {
	Key               string `xml:"Key"`
	UploadID          string `xml:"UploadId"`
	Initiator         owner  `xml:"Initiator"`
	Owner             owner  `xml:"Owner"`
	StorageClass      string `xml:"StorageClass"`
	Initiated         string `xml:"Initiated"`
	ChecksumAlgorithm string `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType      string `xml:"ChecksumType,omitempty"`
}

type listUploadsResult struct {
	XMLName            xml.Name    `xml:"ListMultipartUploadsResult"`
	NS                 string      `xml:"xmlns,attr"`
	Bucket             string      `xml:"Bucket"`
	KeyMarker          string      `xml:"KeyMarker"`
	UploadIDMarker     string      `xml:"UploadIdMarker"`
	NextKeyMarker      string      `xml:"NextKeyMarker"`
	NextUploadIDMarker string      `xml:"NextUploadIdMarker"`
	Prefix             string      `xml:"Prefix"`
	MaxUploads         int         `xml:"MaxUploads"`
	IsTruncated        bool        `xml:"IsTruncated"`
	Uploads            []uploadXML `xml:"Upload"`
}

// listMultipartUploads lists in-progress uploads in key order (then upload
// id), paged by key-marker/upload-id-marker as S3 does.
func (s *Server) listMultipartUploads(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	mp, err := s.multiparter()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	maxUp, err := intParam(r, "max-uploads", 1000, 1000)
	if err != nil {
		return err
	}
	prefix, km, um := q.Get("prefix"), q.Get("key-marker"), q.Get("upload-id-marker")
	ups, err := mp.ListMultipartUploads(r.Context(), rc.bucket, prefix)
	if err != nil {
		return err
	}
	sort.Slice(ups, func(i, j int) bool {
		if ups[i].Key != ups[j].Key {
			return ups[i].Key < ups[j].Key
		}
		return ups[i].UploadID < ups[j].UploadID
	})
	res := listUploadsResult{NS: s3NS, Bucket: rc.bucket, KeyMarker: km, UploadIDMarker: um, Prefix: prefix, MaxUploads: maxUp}
	for _, u := range ups {
		if km != "" && (u.Key < km || (u.Key == km && (um == "" || u.UploadID <= um))) {
			continue
		}
		if len(res.Uploads) == maxUp {
			res.IsTruncated = true
			break
		}
		o := owner{u.Meta.Owner, u.Meta.Owner}
		res.Uploads = append(res.Uploads, uploadXML{u.Key, u.UploadID, o, o, "STANDARD", xmlTime(u.Initiated), u.Meta.ChecksumAlgorithm, uploadType(u.Meta)})
		res.NextKeyMarker, res.NextUploadIDMarker = u.Key, u.UploadID
	}
	return writeXML(w, res)
}

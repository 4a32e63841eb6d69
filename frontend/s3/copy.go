package s3

import (
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tristore/tristore/store"
)

var (
	opCopyObject     = &operation{"CopyObject", "s3:PutObject", (*Server).copyObject}
	opUploadPartCopy = &operation{"UploadPartCopy", "s3:PutObject", (*Server).uploadPartCopy}
)

// parseCopySource splits x-amz-copy-source ("[/]bucket/key[?versionId=ID]",
// URL-encoded) into bucket, key and version ("" = the latest).
func parseCopySource(v string) (bucket, key, vid string, err error) {
	src, ver, _ := strings.Cut(v, "?")
	if ver != "" {
		q, perr := url.ParseQuery(ver)
		if perr != nil {
			return "", "", "", ErrInvalidCopySource
		}
		if vs, ok := q["versionId"]; ok {
			if len(vs) == 0 || vs[0] == "" {
				return "", "", "", ErrInvalidArgument.withMessage("Version id cannot be the empty string")
			}
			vid = vs[0]
		}
	}
	src, perr := url.PathUnescape(src)
	if perr != nil {
		return "", "", "", ErrInvalidCopySource
	}
	src = strings.TrimPrefix(src, "/")
	bucket, key, ok := strings.Cut(src, "/")
	if !ok || bucket == "" || key == "" {
		return "", "", "", ErrInvalidCopySource
	}
	if err := checkKey(key); err != nil {
		return "", "", "", err
	}
	return bucket, key, vid, nil
}

type copyObjectResult struct {
	XMLName      xml.Name `xml:"CopyObjectResult"`
	NS           string   `xml:"xmlns,attr"`
	ETag         string   `xml:"ETag"`
	LastModified string   `xml:"LastModified"`
}

type copyPartResult struct {
	XMLName      xml.Name `xml:"CopyPartResult"`
	NS           string   `xml:"xmlns,attr"`
	ETag         string   `xml:"ETag"`
	LastModified string   `xml:"LastModified"`
	partChecksumXML
}

// copyObject copies (or, onto itself with REPLACE, re-describes) an object.
func (s *Server) copyObject(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	ctx := r.Context()
	sb, sk, svid, err := parseCopySource(r.Header.Get("X-Amz-Copy-Source"))
	if err != nil {
		return err
	}
	if err := s.authorize(ctx, rc, "s3:GetObject", sb, sk); err != nil {
		return err
	}
	if err := s.authorizeVersion(ctx, rc, "s3:GetObjectVersion", sb, sk, svid); err != nil {
		return err
	}
	if err := refuseUnsupported(r.Header); err != nil {
		return err
	}
	directive := strings.ToUpper(r.Header.Get("X-Amz-Metadata-Directive"))
	if directive != "" && directive != "COPY" && directive != "REPLACE" {
		return ErrInvalidArgument.withMessage("Unknown metadata directive.")
	}
	tagDirective := strings.ToUpper(r.Header.Get("X-Amz-Tagging-Directive"))
	if tagDirective != "" && tagDirective != "COPY" && tagDirective != "REPLACE" {
		return ErrInvalidArgument.withMessage("Unknown tagging directive.")
	}
	var newTags map[string]string
	if tagDirective == "REPLACE" {
		if newTags, err = tagsFromHeader(r.Header); err != nil {
			return err
		}
	}
	sw, err := s.sseForWrite(ctx, r, rc.bucket) // sse.go
	if err != nil {
		return err
	}
	rd, oi, err := s.getPlain(ctx, nil, r, sseCopyCHdr, sb, sk, svid, 0, -1)
	if err != nil {
		if errors.Is(err, store.ErrDeleteMarker) {
			return ErrInvalidRequest.withMessage("The source of a copy request may not specifically refer to a delete marker by version id.")
		}
		return err
	}
	defer rd.Close()
	if err := checkPreconditions(r.Header, "X-Amz-Copy-Source-", oi, true); err != nil {
		return err
	}
	var meta store.ObjectMeta
	if directive == "REPLACE" {
		if meta, err = s.metaFromRequest(r.Header, rc); err != nil {
			return err
		}
	} else {
		meta = oi.Meta
		// The ACL is never copied: it comes from this request's headers
		// (acl_grants.go), as in S3.
		if meta.ACL, meta.Owner, err = s.newObjectACL(ctx, r.Header, rc); err != nil {
			return err
		}
	}
	meta.Checksums = oi.Meta.Checksums // same bytes, same checksums
	// Tags follow x-amz-tagging-directive, independently of the metadata
	// directive: COPY (the default) keeps the source's tags.
	meta.Tags = oi.Meta.Tags
	if tagDirective == "REPLACE" {
		meta.Tags = newTags
	}
	if err := s.applyObjectLock(ctx, r.Header, rc.bucket, &meta); err != nil { // objectlock.go
		return err
	}
	encrypted := oi.Meta.Encryption != nil || sw.mode != ""
	body, ssize, err := s.encryptBody(ctx, sw, rc.bucket, rc.key, rd, oi.Size, &meta)
	if err != nil {
		return err
	}
	var res store.ObjectInfo
	if sb == rc.bucket && sk == rc.key && svid == "" {
		if directive != "REPLACE" && r.Header.Get(sseHdr) == "" && r.Header.Get(sseCHdr+"Algorithm") == "" {
			return ErrIllegalCopy
		}
		// On a versioned bucket a copy onto itself is a new version, as in S3.
		state, err := s.versioningState(ctx, rc.bucket)
		if err != nil {
			return err
		}
		if mu, ok := s.st.(store.MetaUpdater); ok && state == "" && !encrypted {
			rd.Close()
			res, err = mu.UpdateMeta(ctx, sb, sk, meta)
		} else {
			res, err = s.st.Put(ctx, rc.bucket, rc.key, body, ssize, meta)
		}
	} else {
		res, err = s.st.Put(ctx, rc.bucket, rc.key, body, ssize, meta)
	}
	if err != nil {
		return err
	}
	sseResponseHeaders(w.Header(), res, r.Header, sseCHdr)
	res = plainInfo(res)
	setVersionHeader(w.Header(), res, "")
	if oi.VersionID != "" || svid != "" {
		w.Header().Set("X-Amz-Copy-Source-Version-Id", wireVersion(oi))
	}
	return writeXML(w, copyObjectResult{NS: s3NS, ETag: `"` + res.ETag + `"`, LastModified: xmlTime(res.ModTime)})
}

// parseCopyRange parses x-amz-copy-source-range ("bytes=first-last",
// both required, inclusive) against the source size.
func parseCopyRange(v string, size int64) (byteRange, error) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(v), "bytes=")
	first, last, ok2 := strings.Cut(spec, "-")
	bad := ErrInvalidArgument.withMessage("The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy")
	if !ok || !ok2 {
		return byteRange{}, bad
	}
	a, err1 := strconv.ParseInt(first, 10, 64)
	b, err2 := strconv.ParseInt(last, 10, 64)
	if err1 != nil || err2 != nil || a < 0 || b < a {
		return byteRange{}, bad
	}
	if b >= size {
		return byteRange{}, ErrInvalidRange.withMessage("The specified copy source range is not satisfiable (object size " + strconv.FormatInt(size, 10) + ").")
	}
	return byteRange{a, b - a + 1}, nil
}

// uploadPartCopy fills a multipart part from (a range of) another object.
func (s *Server) uploadPartCopy(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	ctx := r.Context()
	mp, err := s.multiparter()
	if err != nil {
		return err
	}
	pn, uploadID, err := partParams(r)
	if err != nil {
		return err
	}
	sb, sk, svid, err := parseCopySource(r.Header.Get("X-Amz-Copy-Source"))
	if err != nil {
		return err
	}
	if err := s.authorize(ctx, rc, "s3:GetObject", sb, sk); err != nil {
		return err
	}
	oi, err := s.statPlain(ctx, nil, r, sseCopyCHdr, sb, sk, svid) // sse.go
	if err != nil {
		return err
	}
	if err := checkPreconditions(r.Header, "X-Amz-Copy-Source-", oi, true); err != nil {
		return err
	}
	br := byteRange{0, oi.Size}
	if v := r.Header.Get("X-Amz-Copy-Source-Range"); v != "" {
		if br, err = parseCopyRange(v, oi.Size); err != nil {
			return err
		}
	}
	rd, got, err := s.getPlain(ctx, nil, r, sseCopyCHdr, sb, sk, svid, br.off, br.n)
	if err != nil {
		return err
	}
	defer rd.Close()
	if got.ETag != oi.ETag {
		return ErrPreconditionFailed.withMessage("the copy source changed during the copy")
	}
	up, err := s.uploadOf(ctx, rc.bucket, rc.key, uploadID) // checksum_upload.go
	if err != nil {
		return err
	}
	// A part of an upload with a checksum algorithm gets its checksum
	// computed from the bytes copied, as S3 does, so Complete can list it.
	var plain io.Reader = rd
	sum := newPartSum(up)
	pc, keeps := s.st.(store.PartChecksummer)
	if sum != nil && keeps {
		plain = io.TeeReader(rd, sum)
	}
	body, bsize, err := s.ssePart(r, up, pn, plain, br.n, w.Header()) // sse_multipart.go
	if err != nil {
		return err
	}
	var pi store.PartInfo
	if sum != nil && keeps {
		pi, err = pc.PutPartChecksums(ctx, rc.bucket, rc.key, uploadID, pn, body, bsize, func() map[string]string {
			return map[string]string{sum.alg: sum.value()}
		})
	} else {
		pi, err = mp.PutPart(ctx, rc.bucket, rc.key, uploadID, pn, body, bsize)
	}
	if err != nil {
		return err
	}
	res := copyPartResult{NS: s3NS, ETag: `"` + pi.ETag + `"`, LastModified: xmlTime(pi.ModTime)}
	if sum != nil {
		res.partChecksumXML = makePartChecksumXML(pi.Checksums, sum.alg)
	}
	return writeXML(w, res)
}

package s3

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tristore/tristore/store"
)

var (
	opGetObject  = &operation{"GetObject", "s3:GetObject", (*Server).getObject}
	opHeadObject = &operation{"HeadObject", "s3:GetObject", (*Server).getObject}
)

// byteRange is a resolved single range: n bytes from off.
type byteRange struct{ off, n int64 }

// parseRange resolves an HTTP Range header against an object of size.
// Like S3 it serves only a single range: a header it cannot parse, or one
// with several ranges, is ignored (ok=false, whole object), while a
// well-formed range that starts past the end is ErrInvalidRange (416).
// Hand-written because net/http's parser is internal to http.ServeContent,
// which cannot stream from a store reader with S3's error semantics.
func parseRange(h string, size int64) (br byteRange, ok bool, err error) {
	h = strings.TrimSpace(h)
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return byteRange{}, false, nil
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return byteRange{}, false, nil
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	if first == "" {
		// Suffix range: the last n bytes.
		n, perr := strconv.ParseInt(last, 10, 64)
		if perr != nil || n < 0 || last[0] == '+' {
			return byteRange{}, false, nil
		}
		if n == 0 || size == 0 {
			return byteRange{}, false, ErrInvalidRange
		}
		if n > size {
			n = size
		}
		return byteRange{size - n, n}, true, nil
	}
	start, perr := strconv.ParseInt(first, 10, 64)
	if perr != nil || start < 0 || first[0] == '+' {
		return byteRange{}, false, nil
	}
	end := size - 1
	if last != "" {
		e, perr := strconv.ParseInt(last, 10, 64)
		if perr != nil || e < 0 || last[0] == '+' {
			return byteRange{}, false, nil
		}
		if e < start {
			return byteRange{}, false, nil
		}
		if e < end {
			end = e
		}
	}
	if start >= size {
		return byteRange{}, false, ErrInvalidRange
	}
	return byteRange{start, end - start + 1}, true, nil
}

// etagMatches reports whether an If-Match / If-None-Match list names etag.
func etagMatches(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		t = strings.TrimPrefix(t, "W/")
		if t == "*" || strings.Trim(t, `"`) == etag {
			return true
		}
	}
	return false
}

// checkPreconditions applies If-Match, If-Unmodified-Since, If-None-Match
// and If-Modified-Since in RFC 7232 order, as S3 does: a failed If-Match
// (or, without If-Match, a failed If-Unmodified-Since) is 412 and wins
// over 304; If-None-Match, when present, decides alone between 304 and
// going on; If-Modified-Since is used only without If-None-Match. Header
// names are parameters so CopyObject can use its x-amz-copy-source-if-*.
// For copies a "not modified" outcome is 412, as in S3.
func checkPreconditions(h http.Header, prefix string, oi store.ObjectInfo, forCopy bool) error {
	mod := oi.ModTime.Truncate(time.Second)
	notModified := ErrNotModified
	if forCopy {
		notModified = ErrPreconditionFailed
	}
	if im := h.Get(prefix + "If-Match"); im != "" {
		if !etagMatches(im, oi.ETag) {
			return ErrPreconditionFailed
		}
	} else if ius := h.Get(prefix + "If-Unmodified-Since"); ius != "" {
		if t, err := http.ParseTime(ius); err == nil && mod.After(t) {
			return ErrPreconditionFailed
		}
	}
	if inm := h.Get(prefix + "If-None-Match"); inm != "" {
		if etagMatches(inm, oi.ETag) {
			return notModified
		}
	} else if ims := h.Get(prefix + "If-Modified-Since"); ims != "" {
		if t, err := http.ParseTime(ims); err == nil && !mod.After(t) {
			return notModified
		}
	}
	return nil
}

// hasConditionals reports whether any GET precondition header is present.
func hasConditionals(h http.Header) bool {
	return h.Get("If-Match") != "" || h.Get("If-None-Match") != "" ||
		h.Get("If-Modified-Since") != "" || h.Get("If-Unmodified-Since") != ""
}

// setObjectHeaders writes the stored metadata of oi as response headers.
func setObjectHeaders(h http.Header, oi store.ObjectInfo, withChecksums bool) {
	h.Set("ETag", `"`+oi.ETag+`"`)
	h.Set("Last-Modified", oi.ModTime.UTC().Format(http.TimeFormat))
	ct := oi.Meta.ContentType
	if ct == "" {
		ct = "binary/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Accept-Ranges", "bytes")
	for k, v := range oi.Meta.Headers {
		h.Set(k, v)
	}
	for k, v := range oi.Meta.UserMeta {
		// Lower-case on the wire, as S3 sends them: boto3 takes the
		// metadata key's case verbatim from the header name.
		h["x-amz-meta-"+k] = []string{v}
	}
	if len(oi.Parts) > 0 {
		h.Set("X-Amz-Mp-Parts-Count", strconv.Itoa(len(oi.Parts)))
	}
	if len(oi.Meta.Tags) > 0 {
		h.Set("X-Amz-Tagging-Count", strconv.Itoa(len(oi.Meta.Tags)))
	}
	if withChecksums {
		for alg, v := range oi.Meta.Checksums {
			h.Set("X-Amz-Checksum-"+strings.ToLower(alg), v)
		}
		if len(oi.Meta.Checksums) > 0 {
			h.Set("X-Amz-Checksum-Type", checksumType(oi.Meta.Checksums))
		}
	}
}

// responseOverrides maps response-* query parameters to the header each sets.
var responseOverrides = map[string]string{
	"response-content-type":        "Content-Type",
	"response-content-language":    "Content-Language",
	"response-expires":             "Expires",
	"response-cache-control":       "Cache-Control",
	"response-content-disposition": "Content-Disposition",
	"response-content-encoding":    "Content-Encoding",
}

// getObject serves GetObject and HeadObject.
func (s *Server) getObject(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	ctx := r.Context()
	q := r.URL.Query()
	rangeHdr := r.Header.Get("Range")
	partStr := q.Get("partNumber")
	if partStr != "" && rangeHdr != "" {
		return ErrInvalidRequest.withMessage("Cannot specify both Range header and partNumber query parameter")
	}
	head := r.Method == http.MethodHead
	if err := refuseSSEOnRead(r.Header); err != nil { // sse.go
		return err
	}
	vid, err := versionParam(r)
	if err != nil {
		return err
	}
	if err := s.authorizeVersion(ctx, rc, "s3:GetObjectVersion", rc.bucket, rc.key, vid); err != nil {
		return err
	}

	var (
		rd      io.ReadCloser
		oi      store.ObjectInfo
		br      byteRange
		partial bool
	)
	if rangeHdr == "" && partStr == "" {
		// Common case: one store call. HEAD only needs Stat.
		if head {
			oi, err = s.statPlain(ctx, w, r, sseCHdr, rc.bucket, rc.key, vid) // sse.go
		} else {
			rd, oi, err = s.getPlain(ctx, w, r, sseCHdr, rc.bucket, rc.key, vid, 0, -1)
		}
		if err != nil {
			return err
		}
		if err := checkPreconditions(r.Header, "", oi, false); err != nil {
			if rd != nil {
				rd.Close()
			}
			return err
		}
		br = byteRange{0, oi.Size}
	} else {
		// The range depends on the size: Stat, resolve, then read that
		// range and make sure it is still the same object (bounded retries).
		for attempt := 0; ; attempt++ {
			oi, err = s.statPlain(ctx, w, r, sseCHdr, rc.bucket, rc.key, vid)
			if err != nil {
				return err
			}
			if err := checkPreconditions(r.Header, "", oi, false); err != nil {
				return err
			}
			br, partial, err = resolveRange(rangeHdr, partStr, oi)
			if err != nil {
				if err == ErrInvalidRange {
					w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(oi.Size, 10))
				}
				return err
			}
			if head {
				break
			}
			var got store.ObjectInfo
			rd, got, err = s.getPlain(ctx, w, r, sseCHdr, rc.bucket, rc.key, vid, br.off, br.n)
			if err != nil {
				return err
			}
			if got.ETag == oi.ETag || attempt >= 3 {
				oi = got
				break
			}
			rd.Close()
		}
	}
	if rd != nil {
		defer rd.Close()
	}
	h := w.Header()
	setObjectHeaders(h, oi, !partial && strings.EqualFold(r.Header.Get("X-Amz-Checksum-Mode"), "ENABLED"))
	setVersionHeader(h, oi, vid)
	if oi.VersionID == "" && vid == "" {
		s.nullVersionHeader(ctx, h, rc.bucket) // versioning.go
	}
	sseResponseHeaders(h, oi, r.Header, sseCHdr)
	lockHeaders(h, oi.Meta)
	for p, hdr := range responseOverrides {
		if v := q.Get(p); v != "" {
			h.Set(hdr, v)
		}
	}
	h.Set("Content-Length", strconv.FormatInt(br.n, 10))
	status := http.StatusOK
	if partial {
		status = http.StatusPartialContent
		h.Set("Content-Range", "bytes "+strconv.FormatInt(br.off, 10)+"-"+strconv.FormatInt(br.off+br.n-1, 10)+"/"+strconv.FormatInt(oi.Size, 10))
	}
	w.WriteHeader(status)
	if head {
		return nil
	}
	n, err := io.Copy(w, rd)
	if err == nil && n != br.n {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// resolveRange turns a Range header or a partNumber into a byte range.
func resolveRange(rangeHdr, partStr string, oi store.ObjectInfo) (byteRange, bool, error) {
	if partStr != "" {
		pn, err := strconv.Atoi(partStr)
		if err != nil || pn < 1 || pn > 10000 {
			return byteRange{}, false, ErrInvalidArgument.withMessage("Part number must be an integer between 1 and 10000, inclusive")
		}
		if len(oi.Parts) == 0 {
			if pn != 1 {
				return byteRange{}, false, ErrInvalidRange.withMessage("The requested partnumber is not satisfiable")
			}
			return byteRange{0, oi.Size}, false, nil
		}
		if pn > len(oi.Parts) {
			return byteRange{}, false, ErrInvalidRange.withMessage("The requested partnumber is not satisfiable")
		}
		var off int64
		for _, p := range oi.Parts[:pn-1] {
			off += p.Size
		}
		return byteRange{off, oi.Parts[pn-1].Size}, true, nil
	}
	br, ok, err := parseRange(rangeHdr, oi.Size)
	if err != nil {
		return byteRange{}, false, err
	}
	if !ok {
		return byteRange{0, oi.Size}, false, nil
	}
	return br, true, nil
}

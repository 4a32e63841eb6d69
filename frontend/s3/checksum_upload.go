package s3

import (
	"context"
	"encoding/base64"
	"fmt"
	"hash"
	"net/http"
	"sort"
	"strings"

	"github.com/tristore/tristore/store"
)

// An upload's checksum algorithm and type (CreateMultipartUpload's
// x-amz-checksum-algorithm / x-amz-checksum-type, kept in the upload's
// store.ObjectMeta) bind its parts and its Complete, as in S3:
//
//   - UploadPart with a checksum of another algorithm is refused, and so
//     is one without a checksum for a COMPOSITE upload (the composite is
//     made of the parts' checksums); a FULL_OBJECT part without one gets
//     its CRC computed here from its bytes, as S3 does.
//   - UploadPartCopy parts get their checksum computed from the bytes copied.
//   - ListParts shows each part's checksum of the upload's algorithm.
//   - CompleteMultipartUpload must name the upload's type if it names one,
//     list a checksum of the upload's algorithm for every part, and ask for
//     at most one whole-object checksum, of the upload's algorithm.
//
// Uploads created without an algorithm (and those created before the
// algorithm was kept) are not bound: their parts keep whatever checksums
// came with them, as before.

// uploadType is an upload's checksum type as S3 reports it: the type given
// at CreateMultipartUpload, else COMPOSITE for an algorithm given alone
// (CRC64NVME alone was made FULL_OBJECT there), "" for none.
func uploadType(m store.ObjectMeta) string {
	if m.ChecksumType != "" {
		return m.ChecksumType
	}
	if m.ChecksumAlgorithm != "" {
		return "COMPOSITE"
	}
	return ""
}

// uploadOf returns upload id's description, or nil when the store cannot
// give one without listing its parts.
func (s *Server) uploadOf(ctx context.Context, bucket, key, id string) (*store.Upload, error) {
	ui, ok := s.st.(uploadInfoer) // sse_multipart.go
	if !ok {
		return nil, nil
	}
	up, err := ui.UploadInfo(ctx, bucket, key, id)
	if err != nil {
		return nil, err
	}
	return &up, nil
}

// partAlgs are the checksum algorithms a part request carries (upper
// case): x-amz-checksum-<alg> headers and the one an aws-chunked body
// announces in X-Amz-Trailer.
func partAlgs(h http.Header) []string {
	var out []string
	for alg := range checksumAlgs {
		if h.Get("X-Amz-Checksum-"+alg) != "" {
			out = append(out, strings.ToUpper(alg))
		}
	}
	for _, t := range strings.Split(h.Get("X-Amz-Trailer"), ",") {
		alg, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(t)), "x-amz-checksum-")
		if _, known := checksumAlgs[alg]; ok && known {
			out = append(out, strings.ToUpper(alg))
		}
	}
	sort.Strings(out)
	return out
}

// partSum computes a part's checksum of the upload's algorithm from its
// bytes, for a part that came without one.
type partSum struct {
	alg string
	h   hash.Hash
}

func (p *partSum) Write(b []byte) (int, error) { return p.h.Write(b) }

func (p *partSum) value() string { return base64.StdEncoding.EncodeToString(p.h.Sum(nil)) }

// newPartSum is a partSum of the upload's algorithm, nil for an upload without one.
func newPartSum(up *store.Upload) *partSum {
	if up == nil || up.Meta.ChecksumAlgorithm == "" {
		return nil
	}
	mk, ok := checksumAlgs[strings.ToLower(up.Meta.ChecksumAlgorithm)]
	if !ok {
		return nil
	}
	return &partSum{alg: up.Meta.ChecksumAlgorithm, h: mk()}
}

// checkPartChecksum applies the upload's algorithm to an UploadPart: a
// checksum of another algorithm is InvalidRequest, as is none for a
// COMPOSITE upload (S3's message names "null"). For a FULL_OBJECT upload
// without one it returns the partSum to compute.
func checkPartChecksum(h http.Header, up *store.Upload) (*partSum, error) {
	if up == nil || up.Meta.ChecksumAlgorithm == "" {
		return nil, nil
	}
	alg := up.Meta.ChecksumAlgorithm
	got := partAlgs(h)
	for _, a := range got {
		if a != alg {
			return nil, errChecksumTypeMismatch(alg, a)
		}
	}
	if len(got) > 0 {
		return nil, nil
	}
	if uploadType(up.Meta) == "COMPOSITE" {
		return nil, errChecksumTypeMismatch(alg, "null")
	}
	return newPartSum(up), nil
}

func errChecksumTypeMismatch(want, got string) error {
	return ErrInvalidRequest.withMessage(fmt.Sprintf("Checksum Type mismatch occurred, expected checksum Type: %s, actual checksum Type: %s",
		strings.ToLower(want), strings.ToLower(got)))
}

// checkCompleteAgainstUpload applies S3's rules that relate a
// CompleteMultipartUpload to its upload's checksum settings, before the
// store is asked (so a refusal publishes nothing): an x-amz-checksum-type
// that is not the upload's (InvalidRequest), more than one whole-object
// checksum (InvalidRequest), and for an upload with an algorithm a part
// listed without a checksum (InvalidRequest) or with one of another
// algorithm (BadDigest), or a whole-object checksum of another algorithm
// (BadDigest: the object gets no such checksum to compare). The values
// themselves are compared by the store (ChecksumCompleter).
func checkCompleteAgainstUpload(h http.Header, up *store.Upload, parts []store.CompletePart, want map[string]string) error {
	if ct := h.Get("X-Amz-Checksum-Type"); ct != "" {
		if ct != "COMPOSITE" && ct != "FULL_OBJECT" {
			return ErrInvalidRequest.withMessage("Value for x-amz-checksum-type header is invalid.")
		}
		if up != nil {
			have := uploadType(up.Meta)
			if have == "" {
				have = "null"
			}
			if ct != have {
				return ErrInvalidRequest.withMessage("The upload was created using the " + have + " checksum mode. The complete request must use the same checksum mode.")
			}
		}
	}
	if len(want) > 1 {
		return ErrInvalidRequest.withMessage("Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
	}
	if up == nil || up.Meta.ChecksumAlgorithm == "" {
		return nil
	}
	alg := up.Meta.ChecksumAlgorithm
	for a := range want {
		if a != alg {
			return ErrBadDigest.withMessage("The upload was created using a " + strings.ToLower(alg) + " checksum: the object gets no " +
				strings.ToLower(a) + " checksum to compare with the x-amz-checksum-" + strings.ToLower(a) + " you specified.")
		}
	}
	for _, p := range parts {
		if len(p.Checksums) == 0 {
			return ErrInvalidRequest.withMessage(fmt.Sprintf("The upload was created using a %s checksum. The complete request must include the checksum for each part. It was missing for part %d in the request.",
				strings.ToLower(alg), p.Number))
		}
		for a := range p.Checksums {
			if a != alg {
				return ErrBadDigest.withMessage(fmt.Sprintf("The %s you specified for part %d did not match what we received.", strings.ToLower(a), p.Number))
			}
		}
	}
	return nil
}

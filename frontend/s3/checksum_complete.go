package s3

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/tristore/tristore/store"
)

// Whole-object checksums of multipart uploads, as S3 defines them
// (CreateMultipartUpload x-amz-checksum-algorithm / x-amz-checksum-type,
// CompleteMultipartUpload x-amz-checksum-<alg> and the parts' Checksum*
// elements). COMPOSITE is a checksum of the parts' checksums ("...-N");
// FULL_OBJECT is the CRC of the whole object, which the store combines
// from the parts' CRCs (store/posix/checksum_full.go).

// uploadChecksumType is the checksum type an upload gets from its
// CreateMultipartUpload headers. S3's rules: FULL_OBJECT only with the CRC
// algorithms, COMPOSITE not with CRC64NVME, and CRC64NVME without a type
// means FULL_OBJECT (its only type); a type without an algorithm is
// refused too.
func uploadChecksumType(h http.Header) (string, error) {
	alg := strings.ToUpper(h.Get("X-Amz-Checksum-Algorithm"))
	ct := strings.ToUpper(h.Get("X-Amz-Checksum-Type"))
	switch ct {
	case "":
		if alg == "CRC64NVME" {
			return "FULL_OBJECT", nil
		}
		return "", nil
	case "COMPOSITE", "FULL_OBJECT":
	default:
		return "", ErrInvalidRequest.withMessage("Value for x-amz-checksum-type header is invalid.")
	}
	switch {
	case alg == "":
		return "", ErrInvalidRequest.withMessage("The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.")
	case ct == "FULL_OBJECT" && (alg == "SHA1" || alg == "SHA256"):
		return "", ErrInvalidRequest.withMessage("The FULL_OBJECT checksum type cannot be used with the " + strings.ToLower(alg) + " checksum algorithm.")
	case ct == "COMPOSITE" && alg == "CRC64NVME":
		return "", ErrInvalidRequest.withMessage("The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm.")
	}
	return ct, nil
}

// completeWant reads the whole-object checksums a CompleteMultipartUpload
// asks to be checked (x-amz-checksum-<alg>; a COMPOSITE value may carry
// its "-N"). A malformed one is InvalidDigest, as on PUT.
func completeWant(h http.Header) (map[string]string, error) {
	var want map[string]string
	for alg := range checksumAlgs {
		v := h.Get("X-Amz-Checksum-" + alg)
		if v == "" {
			continue
		}
		b64, _, _ := strings.Cut(v, "-")
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) != checksumSizes[alg] {
			return nil, ErrInvalidDigest.withMessage("Value for x-amz-checksum-" + alg + " header is invalid.")
		}
		if want == nil {
			want = map[string]string{}
		}
		want[strings.ToUpper(alg)] = v
	}
	return want, nil
}

// partChecksums are the Checksum* elements of one Part of the Complete
// request, as upper-case algorithm -> base64.
func partChecksums(c checksumFields) map[string]string {
	var m map[string]string
	for alg, v := range map[string]string{"CRC32": c.CRC32, "CRC32C": c.CRC32C, "CRC64NVME": c.CRC64NVME, "SHA1": c.SHA1, "SHA256": c.SHA256} {
		if v = strings.TrimSpace(v); v != "" {
			if m == nil {
				m = map[string]string{}
			}
			m[alg] = v
		}
	}
	return m
}

// completeUpload runs the store's Complete: with the checks of want and
// the parts' checksums when the store has them (store.ChecksumCompleter),
// and with a no-replace publish for If-None-Match: *.
func (s *Server) completeUpload(ctx context.Context, mp store.Multiparter, rc *reqCtx, id string, parts []store.CompletePart, want map[string]string, ifAbsent bool) (store.ObjectInfo, error) {
	if cc, ok := s.st.(store.ChecksumCompleter); ok {
		return cc.CompleteMultipartChecked(ctx, rc.bucket, rc.key, id, parts, want, ifAbsent)
	}
	if len(want) > 0 {
		return store.ObjectInfo{}, ErrNotImplemented.withMessage("this store cannot check whole-object checksums")
	}
	if ifAbsent {
		if ec, ok := s.st.(store.ExclusiveCompleter); ok {
			return ec.CompleteMultipartIfAbsent(ctx, rc.bucket, rc.key, id, parts)
		}
	}
	return mp.CompleteMultipart(ctx, rc.bucket, rc.key, id, parts)
}

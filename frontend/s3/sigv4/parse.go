package sigv4

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Params are the parts of a SigV4 signature, from either the
// Authorization header or a presigned query string (exported for tests,
// fuzzing and diagnostics).
type Params struct {
	AccessKey     string
	Date          string // yyyymmdd of the credential scope
	Region        string
	Service       string
	SignedHeaders []string
	Signature     string
	// presigned only
	AmzDate string
	Expires time.Duration
}

func (a *Params) scope() string {
	return a.Date + "/" + a.Region + "/" + a.Service + "/aws4_request"
}

const amzDateFormat = "20060102T150405Z"

// parseCredential splits "AKID/20130524/us-east-1/s3/aws4_request". The
// access key itself may not contain '/', so splitting from the right is not
// needed; exactly five parts are required.
func parseCredential(s string) (ak, date, region, service string, msg string) {
	parts := strings.Split(s, "/")
	if len(parts) != 5 {
		return "", "", "", "", "the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\"."
	}
	if parts[0] == "" {
		return "", "", "", "", "the Credential has an empty access key."
	}
	if _, err := time.Parse("20060102", parts[1]); err != nil || len(parts[1]) != 8 {
		return "", "", "", "", "incorrect date format \"" + parts[1] + "\". This date in the credential must be in the format \"yyyyMMdd\"."
	}
	if parts[2] == "" {
		return "", "", "", "", "the Credential has an empty region."
	}
	if parts[3] != "s3" {
		return "", "", "", "", "incorrect service \"" + parts[3] + "\". This endpoint belongs to \"s3\"."
	}
	if parts[4] != "aws4_request" {
		return "", "", "", "", "incorrect terminal \"" + parts[4] + "\". This endpoint uses \"aws4_request\"."
	}
	return parts[0], parts[1], parts[2], parts[3], ""
}

// parseSignedHeaders checks "host;x-amz-date" style lists: lower case,
// sorted, no duplicates, no empty names.
func parseSignedHeaders(s string) ([]string, string) {
	if s == "" {
		return nil, "SignedHeaders is empty."
	}
	hs := strings.Split(s, ";")
	for i, h := range hs {
		if h == "" || strings.ToLower(h) != h || strings.ContainsAny(h, " \t:") {
			return nil, "SignedHeaders has an invalid header name \"" + h + "\"."
		}
		if i > 0 && hs[i-1] >= h {
			return nil, "SignedHeaders must be sorted and unique."
		}
	}
	return hs, ""
}

func isHexSig(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ParseAuthorization parses an Authorization header value:
//
//	AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=<64 hex>
//
// Components may be separated by "," with or without spaces, in any order.
func ParseAuthorization(h string) (Params, *Error) {
	var a Params
	alg, rest, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok {
		if strings.HasPrefix(h, "AWS ") || h == "AWS" {
			return a, errInvalidArg("Signature Version 2 is not supported; use AWS4-HMAC-SHA256.")
		}
		return a, errHeaderMalformed("expecting \"AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...\".")
	}
	switch alg {
	case algorithm:
	case "AWS":
		return a, errInvalidArg("Signature Version 2 is not supported; use AWS4-HMAC-SHA256.")
	case "AWS4-ECDSA-P256-SHA256":
		return a, errNotImplemented("Signature Version 4A is not supported; use AWS4-HMAC-SHA256.")
	default:
		return a, errHeaderMalformed("unsupported algorithm \"" + alg + "\".")
	}
	seen := map[string]bool{}
	for _, comp := range strings.Split(rest, ",") {
		comp = strings.TrimSpace(comp)
		if comp == "" {
			continue
		}
		k, v, ok := strings.Cut(comp, "=")
		if !ok {
			return a, errHeaderMalformed("the component \"" + comp + "\" is not of the form key=value.")
		}
		if seen[k] {
			return a, errHeaderMalformed("duplicate component \"" + k + "\".")
		}
		seen[k] = true
		switch k {
		case "Credential":
			var msg string
			a.AccessKey, a.Date, a.Region, a.Service, msg = parseCredential(v)
			if msg != "" {
				return a, errHeaderMalformed(msg)
			}
		case "SignedHeaders":
			var msg string
			if a.SignedHeaders, msg = parseSignedHeaders(v); msg != "" {
				return a, errHeaderMalformed(msg)
			}
		case "Signature":
			if !isHexSig(v) {
				return a, errHeaderMalformed("the Signature must be 64 lower-case hex digits.")
			}
			a.Signature = v
		default:
			return a, errHeaderMalformed("unknown component \"" + k + "\".")
		}
	}
	if !seen["Credential"] || !seen["SignedHeaders"] || !seen["Signature"] {
		return a, errHeaderMalformed("Credential, SignedHeaders and Signature are all required.")
	}
	return a, nil
}

// ParsePresigned parses the X-Amz-* parameters of a presigned URL query.
func ParsePresigned(q url.Values) (Params, *Error) {
	var a Params
	for _, k := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		if len(q[k]) > 1 {
			return a, errQueryMalformed("Query-string authentication parameter " + k + " appears more than once.")
		}
	}
	switch alg := q.Get("X-Amz-Algorithm"); alg {
	case algorithm:
	case "":
		return a, errQueryMalformed("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
	default:
		return a, errQueryMalformed("X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\".")
	}
	cred, date, exp, sh, sig := q.Get("X-Amz-Credential"), q.Get("X-Amz-Date"), q.Get("X-Amz-Expires"), q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Signature")
	if cred == "" || date == "" || exp == "" || sh == "" || sig == "" {
		return a, errQueryMalformed("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
	}
	var msg string
	if a.AccessKey, a.Date, a.Region, a.Service, msg = parseCredential(cred); msg != "" {
		return a, errQueryMalformed("Error parsing the X-Amz-Credential parameter; " + msg)
	}
	if _, err := time.Parse(amzDateFormat, date); err != nil {
		return a, errQueryMalformed("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\".")
	}
	if date[:8] != a.Date {
		return a, errQueryMalformed("Error parsing the X-Amz-Credential parameter; the date in the credential does not match X-Amz-Date.")
	}
	a.AmzDate = date
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || n < 0 {
		return a, errQueryMalformed("X-Amz-Expires should be a number.")
	}
	if n < 1 {
		return a, errQueryMalformed("X-Amz-Expires must be non-negative.")
	}
	if n > int64(MaxPresignExpiry/time.Second) {
		return a, errQueryMalformed("X-Amz-Expires must be less than a week (in seconds) that is 604800.")
	}
	a.Expires = time.Duration(n) * time.Second
	if a.SignedHeaders, msg = parseSignedHeaders(sh); msg != "" {
		return a, errQueryMalformed(msg)
	}
	if !isHexSig(sig) {
		return a, errQueryMalformed("X-Amz-Signature must be 64 lower-case hex digits.")
	}
	a.Signature = sig
	return a, nil
}

package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// uriEncode encodes s the way SigV4 wants: every byte except the unreserved
// characters A-Z a-z 0-9 - . _ ~ becomes %XX (upper-case hex); '/' is kept
// when keepSlash (object paths), encoded otherwise (query components).
func uriEncode(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) || (c == '/' && keepSlash) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// canonicalURIs returns the canonical URI candidates for u. S3 signs the
// path encoded once (no double encoding, no dot-segment normalisation).
// The first candidate re-encodes the decoded path with the SigV4 rules,
// which matches every client that encodes per spec whatever it chose to
// send on the wire; the second is the path exactly as sent, for clients
// that sign their own (differently) escaped path, e.g. a key holding %2F.
func canonicalURIs(u *url.URL) []string {
	p := u.Path
	if p == "" {
		p = "/"
	}
	first := uriEncode(p, true)
	raw := u.EscapedPath()
	if u.RawPath != "" {
		raw = u.RawPath
	}
	if raw == "" {
		raw = "/"
	}
	if raw != first {
		return []string{first, raw}
	}
	return []string{first}
}

// CanonicalURI is the canonical URI SigV4 signs for an S3 path (exported for
// tests and fuzzing).
func CanonicalURI(u *url.URL) string { return canonicalURIs(u)[0] }

type queryPair struct{ k, v string }

// parseRawQuery splits a raw query string into decoded pairs, keeping
// duplicates and order. A component that does not decode is kept raw, so
// the canonical form is still deterministic (and will simply not match).
func parseRawQuery(raw string) []queryPair {
	var out []queryPair
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		out = append(out, queryPair{k, v})
	}
	return out
}

// CanonicalQuery builds the canonical query string of a raw query: every
// name and value encoded with the SigV4 rules, sorted by name then value,
// joined with '&'; a name without a value gets "=" appended. Parameters
// named in skip (X-Amz-Signature for presigned URLs) are left out.
func CanonicalQuery(rawQuery string, skip string) string {
	pairs := parseRawQuery(rawQuery)
	enc := make([]queryPair, 0, len(pairs))
	for _, p := range pairs {
		if skip != "" && p.k == skip {
			continue
		}
		enc = append(enc, queryPair{uriEncode(p.k, false), uriEncode(p.v, false)})
	}
	sort.Slice(enc, func(i, j int) bool {
		if enc[i].k != enc[j].k {
			return enc[i].k < enc[j].k
		}
		return enc[i].v < enc[j].v
	})
	var b strings.Builder
	for i, p := range enc {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// headerValue returns the canonical value of one signed header: the
// request's values trimmed, inner runs of spaces collapsed, joined with ','.
// Go's server moves Host and Content-Length/Transfer-Encoding out of
// r.Header in some cases, so those are read from the request fields.
func headerValue(r *http.Request, name string) (string, bool) {
	var vals []string
	switch name {
	case "host":
		h := r.Host
		if h == "" && r.URL != nil { // client-side requests (tests, tools)
			h = r.URL.Host
		}
		if h == "" {
			return "", false
		}
		vals = []string{h}
	default:
		vals = r.Header.Values(name)
		if len(vals) == 0 {
			switch name {
			case "content-length":
				if r.ContentLength < 0 {
					return "", false
				}
				return itoa(r.ContentLength), true
			case "transfer-encoding":
				if len(r.TransferEncoding) == 0 {
					return "", false
				}
				vals = r.TransferEncoding
			default:
				return "", false
			}
		}
	}
	for i, v := range vals {
		vals[i] = collapseSpaces(v)
	}
	return strings.Join(vals, ","), true
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return string(buf[i:])
}

func collapseSpaces(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "  ") && !strings.ContainsAny(s, "\t") {
		return s
	}
	var b strings.Builder
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c == '\t' {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteByte(c)
	}
	return b.String()
}

// canonicalRequest assembles the canonical request text.
func canonicalRequest(method, uri, query string, headers []string, vals []string, payload string) string {
	var b strings.Builder
	b.WriteString(method)
	b.WriteByte('\n')
	b.WriteString(uri)
	b.WriteByte('\n')
	b.WriteString(query)
	b.WriteByte('\n')
	for i, h := range headers {
		b.WriteString(h)
		b.WriteByte(':')
		b.WriteString(vals[i])
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(headers, ";"))
	b.WriteByte('\n')
	b.WriteString(payload)
	return b.String()
}

const algorithm = "AWS4-HMAC-SHA256"

func stringToSign(amzDate, scope, canonical string) string {
	return algorithm + "\n" + amzDate + "\n" + scope + "\n" + hashHex([]byte(canonical))
}

func hashHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// signingKey derives (and caches) the key for secret/date/region/service.
func (v *Verifier) signingKey(secret, date, region, service string) []byte {
	id := signingKeyID{secret, date, region, service}
	v.mu.Lock()
	k, ok := v.keys[id]
	v.mu.Unlock()
	if ok {
		return k
	}
	k = hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	k = hmacSHA256(k, "aws4_request")
	v.mu.Lock()
	if len(v.keys) > 4096 { // bounded: keys rotate daily, users are few
		v.keys = make(map[signingKeyID][]byte)
	}
	v.keys[id] = k
	v.mu.Unlock()
	return k
}

// sigEqual compares hex signatures in constant time.
func sigEqual(a, b string) bool {
	return hmac.Equal([]byte(a), []byte(b))
}

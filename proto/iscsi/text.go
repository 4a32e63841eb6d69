package iscsi

import (
	"bytes"
	"fmt"
	"strings"
)

// KV is one text key=value pair (RFC 7143 §6). Order matters in
// negotiation, so text is handled as an ordered list.
type KV struct {
	Key, Value string
}

// Special values.
const (
	ValueNotUnderstood = "NotUnderstood"
	ValueIrrelevant    = "Irrelevant"
	ValueReject        = "Reject"
)

// MaxKeyLen is the longest key name RFC 7143 allows.
const MaxKeyLen = 63

// ParseText decodes "key=value\0" pairs. Trailing NULs (padding) are
// ignored. A pair without '=' or with an empty or over-long key is an error.
func ParseText(data []byte) ([]KV, error) {
	var out []KV
	for len(data) > 0 {
		i := bytes.IndexByte(data, 0)
		var item []byte
		if i < 0 {
			item, data = data, nil // last pair may lack its NUL when split over PDUs
		} else {
			item, data = data[:i], data[i+1:]
		}
		if len(item) == 0 {
			continue
		}
		eq := bytes.IndexByte(item, '=')
		if eq <= 0 || eq > MaxKeyLen {
			return out, fmt.Errorf("%w: %q", ErrBadText, truncate(string(item), 80))
		}
		out = append(out, KV{string(item[:eq]), string(item[eq+1:])})
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// EncodeText encodes pairs as "key=value\0" ...
func EncodeText(kvs []KV) []byte {
	var b bytes.Buffer
	for _, kv := range kvs {
		b.WriteString(kv.Key)
		b.WriteByte('=')
		b.WriteString(kv.Value)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// Lookup returns the value of key in kvs (the last occurrence).
func Lookup(kvs []KV, key string) (string, bool) {
	v, ok := "", false
	for _, kv := range kvs {
		if kv.Key == key {
			v, ok = kv.Value, true
		}
	}
	return v, ok
}

// TextAccumulator joins the data of a Text or Login sequence whose key=value
// pairs span several PDUs (C bit set), bounded to a maximum size.
type TextAccumulator struct {
	buf []byte
	Max int // default 64 KiB
}

// Add appends one PDU's data. It returns an error if the total exceeds Max.
func (a *TextAccumulator) Add(data []byte) error {
	max := a.Max
	if max == 0 {
		max = 64 << 10
	}
	if len(a.buf)+len(data) > max {
		return fmt.Errorf("%w: text sequence longer than %d bytes", ErrBadText, max)
	}
	a.buf = append(a.buf, data...)
	return nil
}

// Take parses and resets the accumulated text.
func (a *TextAccumulator) Take() ([]KV, error) {
	kvs, err := ParseText(a.buf)
	a.buf = a.buf[:0]
	return kvs, err
}

// SplitList splits a comma-separated list value.
func SplitList(v string) []string {
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

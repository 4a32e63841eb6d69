package authz

import (
	"encoding/json"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Condition is one test of a statement's Condition block: an operator
// applied to one context key with a list of values. A block with several
// operators, or an operator with several keys, holds when every test
// holds (AND); the values of one test are alternatives (OR), as the IAM
// reference ("Condition element") defines.
type Condition struct {
	Op       string // base operator, e.g. "StringLike" (IfExists and set prefixes removed)
	IfExists bool   // ...IfExists: a missing key makes the test true
	Set      string // "", "ForAllValues" or "ForAnyValue"
	Key      string // context key, lower case (keys compare case-insensitively)
	Values   []string
}

// Context holds the condition keys of one request, by lower-case key:
// aws:SourceIp, aws:SecureTransport, aws:CurrentTime, aws:EpochTime,
// aws:username, aws:userid, aws:PrincipalType, aws:UserAgent, aws:Referer,
// s3:prefix, s3:delimiter, s3:max-keys, s3:x-amz-acl, s3:x-amz-grant-*,
// s3:signatureversion, s3:authType, ... A key the request does not have
// is absent (not "").
type Context map[string][]string

// operators lists the IAM condition operators and whether each negates
// (a negated test is true when no value matches, and true for a missing key).
var operators = map[string]bool{
	"StringEquals": false, "StringNotEquals": true, "StringEqualsIgnoreCase": false,
	"StringNotEqualsIgnoreCase": true, "StringLike": false, "StringNotLike": true,
	"NumericEquals": false, "NumericNotEquals": true, "NumericLessThan": false,
	"NumericLessThanEquals": false, "NumericGreaterThan": false, "NumericGreaterThanEquals": false,
	"DateEquals": false, "DateNotEquals": true, "DateLessThan": false,
	"DateLessThanEquals": false, "DateGreaterThan": false, "DateGreaterThanEquals": false,
	"Bool": false, "BinaryEquals": false, "IpAddress": false,
	"NotIpAddress": true, "ArnEquals": false, "ArnLike": false,
	"ArnNotEquals": true, "ArnNotLike": true, "Null": false,
}

// parseConditions reads a statement's Condition block. Unknown operators,
// keys outside the aws: and s3: namespaces and values that do not parse
// for their operator (a date, a number, a CIDR) are MalformedPolicy, so a
// condition can never be silently ignored.
func parseConditions(raw json.RawMessage) ([]Condition, *PolicyError) {
	var block map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &block); err != nil || block == nil {
		return nil, malformed("Condition must be an object of operators, each an object of keys")
	}
	var out []Condition
	ops := make([]string, 0, len(block))
	for op := range block {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, full := range ops {
		c := Condition{}
		op := full
		if set, rest, ok := strings.Cut(op, ":"); ok {
			if set != "ForAllValues" && set != "ForAnyValue" {
				return nil, malformed("Invalid Condition type : %s", full)
			}
			c.Set, op = set, rest
		}
		if base, ok := strings.CutSuffix(op, "IfExists"); ok && op != "Null" {
			c.IfExists, op = true, base
		}
		if _, ok := operators[op]; !ok || (c.IfExists && op == "Null") {
			return nil, malformed("Invalid Condition type : %s", full)
		}
		c.Op = op
		keys := block[full]
		if len(keys) == 0 {
			return nil, malformed("Condition %s has no keys", full)
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			lk := strings.ToLower(k)
			if !strings.HasPrefix(lk, "aws:") && !strings.HasPrefix(lk, "s3:") || len(lk) < 5 {
				return nil, malformed("Policy has an invalid condition key: %s", k)
			}
			vals, ok := conditionValues(keys[k])
			if !ok {
				return nil, malformed("Invalid Condition value for %s %s", full, k)
			}
			for _, v := range vals {
				if err := checkValue(op, v); err != nil {
					return nil, err
				}
			}
			cc := c
			cc.Key, cc.Values = lk, vals
			out = append(out, cc)
		}
	}
	return out, nil
}

// conditionValues decodes a value or a non-empty list of strings, numbers
// or booleans (all compared as their string forms).
func conditionValues(raw json.RawMessage) ([]string, bool) {
	var one any
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, false
	}
	scalar := func(v any) (string, bool) {
		switch x := v.(type) {
		case string:
			return x, true
		case bool:
			return strconv.FormatBool(x), true
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64), true
		}
		return "", false
	}
	if list, ok := one.([]any); ok {
		if len(list) == 0 {
			return nil, false
		}
		out := make([]string, 0, len(list))
		for _, v := range list {
			s, ok := scalar(v)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	s, ok := scalar(one)
	return []string{s}, ok
}

func checkValue(op, v string) *PolicyError {
	switch {
	case strings.HasPrefix(op, "Numeric"):
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return malformed("Invalid number %q for %s", v, op)
		}
	case strings.HasPrefix(op, "Date"):
		if _, ok := parseDate(v); !ok {
			return malformed("Invalid date %q for %s", v, op)
		}
	case op == "IpAddress" || op == "NotIpAddress":
		if _, ok := parseCIDR(v); !ok {
			return malformed("Invalid IP address or CIDR %q", v)
		}
	case op == "Bool" || op == "Null":
		if v != "true" && v != "false" {
			return malformed("Invalid boolean %q for %s", v, op)
		}
	}
	return nil
}

// parseDate accepts ISO 8601 (with or without seconds' fraction, a date
// alone) and epoch seconds, as IAM does.
func parseDate(s string) (time.Time, bool) {
	for _, f := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02T15:04Z07:00", "2006-01-02"} {
		if t, err := time.Parse(f, s); err == nil {
			return t, true
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0), true
	}
	return time.Time{}, false
}

func parseCIDR(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

// holds evaluates one condition against ctx; vars expands policy
// variables (${aws:username}, ...) in the condition's string values.
func (c *Condition) holds(ctx Context, vars func(string) string) bool {
	have, present := ctx[c.Key]
	if c.Op == "Null" {
		// "true": the key must be absent; "false": present.
		for _, v := range c.Values {
			if (v == "true") != present {
				return true
			}
		}
		return false
	}
	negated := operators[c.Op]
	if !present || len(have) == 0 {
		if c.IfExists {
			return true
		}
		if c.Set == "ForAllValues" {
			return true // vacuously: every one of no values matches
		}
		return negated
	}
	match := func(v string) bool {
		for _, want := range c.Values {
			if c.matchOne(v, vars(want)) {
				return true
			}
		}
		return false
	}
	switch c.Set {
	case "ForAllValues":
		for _, v := range have {
			if match(v) == negated {
				return false
			}
		}
		return true
	default: // single-valued keys and ForAnyValue: any request value
		for _, v := range have {
			if match(v) {
				return !negated
			}
		}
		return negated
	}
}

// matchOne compares one request value with one policy value, in the
// operator's positive sense (negation is applied by holds).
func (c *Condition) matchOne(have, want string) bool {
	switch c.Op {
	case "StringEquals", "StringNotEquals", "ArnEquals", "ArnNotEquals", "BinaryEquals":
		return have == want
	case "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase":
		return strings.EqualFold(have, want)
	case "StringLike", "StringNotLike", "ArnLike", "ArnNotLike":
		return globMatch(want, have)
	case "Bool":
		return strings.EqualFold(have, want)
	case "IpAddress", "NotIpAddress":
		p, ok := parseCIDR(want)
		a, err := netip.ParseAddr(have)
		return ok && err == nil && p.Contains(a.Unmap())
	}
	if strings.HasPrefix(c.Op, "Numeric") {
		h, err1 := strconv.ParseFloat(have, 64)
		w, err2 := strconv.ParseFloat(want, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		return compare(c.Op[len("Numeric"):], h < w, h == w)
	}
	if strings.HasPrefix(c.Op, "Date") {
		h, ok1 := parseDate(have)
		w, ok2 := parseDate(want)
		if !ok1 || !ok2 {
			return false
		}
		return compare(c.Op[len("Date"):], h.Before(w), h.Equal(w))
	}
	return false
}

func compare(rel string, less, equal bool) bool {
	switch rel {
	case "Equals", "NotEquals":
		return equal
	case "LessThan":
		return less
	case "LessThanEquals":
		return less || equal
	case "GreaterThan":
		return !less && !equal
	case "GreaterThanEquals":
		return !less
	}
	return false
}

// expandVars replaces IAM policy variables in s: ${aws:username} and the
// other keys of ctx, and the escapes ${*}, ${?}, ${$}. A variable the
// request has no value for is left as written, so it matches nothing.
func expandVars(s string, ctx Context) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		name := s[i+2 : i+j]
		switch name {
		case "*", "?", "$":
			b.WriteString(name)
		default:
			if v := ctx[strings.ToLower(name)]; len(v) == 1 {
				b.WriteString(v[0])
			} else {
				b.WriteString(s[i : i+j+1])
			}
		}
		s = s[i+j+1:]
	}
}

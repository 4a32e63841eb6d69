package authz

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// MaxPolicySize is S3's limit on a bucket policy document.
const MaxPolicySize = 20 << 10

// Policy is a parsed bucket policy. Only the elements tristore enforces
// exist here; ParsePolicy rejects documents using anything else (an
// unknown condition operator or key, a service principal), because
// silently ignoring part of a policy would grant more than the owner meant.
type Policy struct {
	Version    string
	ID         string
	Statements []Statement
}

// Statement is one policy statement.
type Statement struct {
	Sid    string
	Effect string // "Allow" or "Deny"
	// Principals holds user names; "*" means everyone, anonymous included.
	Principals []string
	Actions    []string // patterns such as "s3:GetObject", "s3:Get*", "*"
	Resources  []string // patterns such as "arn:aws:s3:::bucket/*"
	// NotPrincipal, NotAction, NotResource: the statement came with the
	// Not* element, so it applies to everything the list does not match.
	NotPrincipal, NotAction, NotResource bool
	// Conditions must all hold for the statement to apply.
	Conditions []Condition
}

// PolicyError is a rejected policy document; Code is the S3 error code
// (MalformedPolicy) and the HTTP status is 400.
type PolicyError struct {
	Code    string
	Message string
}

func (e *PolicyError) Error() string { return e.Code + ": " + e.Message }

func malformed(format string, a ...any) *PolicyError {
	return &PolicyError{Code: "MalformedPolicy", Message: fmt.Sprintf(format, a...)}
}

const arnPrefix = "arn:aws:s3:::"

// ParsePolicy parses and validates a bucket policy for bucket. It accepts
// Version, Id and Statement (an object or a list); each statement may have
// Sid, Effect, Principal or NotPrincipal, Action or NotAction, Resource or
// NotResource, and Condition (condition.go). Anything unknown is rejected
// with MalformedPolicy.
func ParsePolicy(doc []byte, bucket string) (*Policy, error) {
	if len(doc) > MaxPolicySize {
		return nil, malformed("Policies must be no more than 20 KB.")
	}
	var top map[string]json.RawMessage
	if err := strictUnmarshal(doc, &top); err != nil || top == nil {
		return nil, malformed("This policy contains invalid Json")
	}
	p := &Policy{}
	for k, v := range top {
		switch k {
		case "Version":
			if err := json.Unmarshal(v, &p.Version); err != nil {
				return nil, malformed("Version must be a string")
			}
			if p.Version != "2012-10-17" && p.Version != "2008-10-17" {
				return nil, malformed("The policy must contain a valid version string")
			}
		case "Id":
			if err := json.Unmarshal(v, &p.ID); err != nil {
				return nil, malformed("Id must be a string")
			}
		case "Statement":
		default:
			return nil, malformed("Policy has an invalid or unsupported element %q", k)
		}
	}
	raw, ok := top["Statement"]
	if !ok {
		return nil, malformed("Missing required field Statement")
	}
	var stmts []json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		stmts = []json.RawMessage{raw}
	} else if err := json.Unmarshal(raw, &stmts); err != nil {
		return nil, malformed("Statement must be an object or a list of objects")
	}
	if len(stmts) == 0 {
		return nil, malformed("Could not parse the policy: Statement is empty!")
	}
	for i, rs := range stmts {
		st, err := parseStatement(rs, bucket)
		if err != nil {
			err.Message = fmt.Sprintf("statement %d: %s", i+1, err.Message)
			return nil, err
		}
		p.Statements = append(p.Statements, st)
	}
	return p, nil
}

// strictUnmarshal rejects trailing data after the JSON value.
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err == nil {
		return fmt.Errorf("trailing data")
	}
	return nil
}

// stringOrList decodes "x" or ["x", "y"] (non-empty strings, non-empty list).
func stringOrList(raw json.RawMessage) ([]string, bool) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, one != ""
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
		return nil, false
	}
	for _, s := range many {
		if s == "" {
			return nil, false
		}
	}
	return many, true
}

func parseStatement(raw json.RawMessage, bucket string) (Statement, *PolicyError) {
	var st Statement
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return st, malformed("a statement must be an object")
	}
	for k := range m {
		switch k {
		case "Sid", "Effect", "Principal", "Action", "Resource",
			"NotPrincipal", "NotAction", "NotResource", "Condition":
		default:
			return st, malformed("unknown field %s", k)
		}
	}
	if v, ok := m["Sid"]; ok {
		if err := json.Unmarshal(v, &st.Sid); err != nil {
			return st, malformed("Sid must be a string")
		}
	}
	if err := json.Unmarshal(m["Effect"], &st.Effect); err != nil || (st.Effect != "Allow" && st.Effect != "Deny") {
		return st, malformed("Invalid effect: Effect must be Allow or Deny")
	}
	// one picks exactly one of an element and its Not form.
	one := func(name string) (json.RawMessage, bool, *PolicyError) {
		v, has := m[name]
		nv, hasNot := m["Not"+name]
		switch {
		case has && hasNot:
			return nil, false, malformed("Statement may have only one of %s and Not%s", name, name)
		case hasNot:
			return nv, true, nil
		case !has:
			return nil, false, malformed("Missing required field %s", name)
		}
		return v, false, nil
	}
	pr, not, perr := one("Principal")
	if perr != nil {
		return st, perr
	}
	st.NotPrincipal = not
	var err *PolicyError
	if st.Principals, err = parsePrincipal(pr); err != nil {
		return st, err
	}
	ar, not, perr := one("Action")
	if perr != nil {
		return st, perr
	}
	st.NotAction = not
	acts, ok := stringOrList(ar)
	if !ok {
		return st, malformed("Missing required field Action")
	}
	for _, a := range acts {
		if !validActionPattern(a) {
			return st, malformed("Policy has invalid action %q", a)
		}
	}
	st.Actions = acts
	rr, not, perr := one("Resource")
	if perr != nil {
		return st, perr
	}
	st.NotResource = not
	res, ok := stringOrList(rr)
	if !ok {
		return st, malformed("Missing required field Resource")
	}
	for _, r := range res {
		if !strings.HasPrefix(r, arnPrefix) {
			return st, malformed("Policy has invalid resource %q", r)
		}
		b, _, _ := strings.Cut(strings.TrimPrefix(r, arnPrefix), "/")
		if !st.NotResource && !globMatch(b, bucket) {
			return st, malformed("Policy has invalid resource %q: it must refer to bucket %q", r, bucket)
		}
	}
	if c, ok := m["Condition"]; ok {
		if st.Conditions, err = parseConditions(c); err != nil {
			return st, err
		}
	}
	st.Resources = res
	return st, nil
}

// parsePrincipal accepts "*", {"AWS": "*"}, {"AWS": "name"} and
// {"AWS": ["name", "arn:aws:iam::123456789012:user/name", ...]}.
func parsePrincipal(raw json.RawMessage) ([]string, *PolicyError) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s != "*" {
			return nil, malformed("Invalid principal %q: use \"*\" or {\"AWS\": ...}", s)
		}
		return []string{"*"}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) == 0 {
		return nil, malformed("Invalid principal in policy")
	}
	var out []string
	for k, v := range m {
		if k != "AWS" {
			return nil, malformed("Principal type %q is not supported (only AWS)", k)
		}
		names, ok := stringOrList(v)
		if !ok {
			return nil, malformed("Invalid principal in policy")
		}
		for _, n := range names {
			name, ok := principalName(n)
			if !ok {
				return nil, malformed("Invalid principal in policy: %q", n)
			}
			out = append(out, name)
		}
	}
	return out, nil
}

// principalName reduces a principal to a tristore user name: "*", a plain
// name, or arn:aws:iam::<account>:user/<name>.
func principalName(p string) (string, bool) {
	if p == "*" {
		return p, true
	}
	if strings.HasPrefix(p, "arn:") {
		parts := strings.SplitN(p, ":", 6)
		if len(parts) != 6 || parts[1] != "aws" || parts[2] != "iam" || !strings.HasPrefix(parts[5], "user/") {
			return "", false
		}
		p = strings.TrimPrefix(parts[5], "user/")
		if i := strings.LastIndexByte(p, '/'); i >= 0 { // user paths: user/path/name
			p = p[i+1:]
		}
	}
	if p == "" || strings.ContainsAny(p, " \t\n*?") {
		return "", false
	}
	return p, true
}

func validActionPattern(a string) bool {
	if a == "*" {
		return true
	}
	rest, ok := strings.CutPrefix(strings.ToLower(a), "s3:")
	if !ok || rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '*' || c == '?') {
			return false
		}
	}
	return true
}

// globMatch matches s against pattern with '*' (any run) and '?' (any one
// byte), in linear time with single-star backtracking.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

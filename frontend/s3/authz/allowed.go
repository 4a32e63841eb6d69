package authz

import "strings"

// Request is one access decision's input; see the package documentation.
type Request struct {
	Principal   string // user name; "" when anonymous
	Admin       bool   // the principal is an admin (root) user
	Action      string // "s3:GetObject", "s3:PutObject", "s3:ListBucket", ...
	Bucket, Key string
	BucketOwner string
	BucketACL   string // canned ACL name ("" = private)
	ObjectACL   string // canned ACL of the object ("" = private)
	ObjectOwner string
	Policy      *Policy // parsed bucket policy or nil
	// Context holds the request's condition keys (condition.go).
	Context Context
	// ACLsDisabled: the bucket's ownership is BucketOwnerEnforced, so ACLs
	// grant nothing and the bucket owner owns every object.
	ACLsDisabled bool
	// IgnorePublicACLs and RestrictPublicBuckets are the bucket's public
	// access block settings of those names.
	IgnorePublicACLs, RestrictPublicBuckets bool
}

// Allowed decides r, in this order (the S3 user guide's evaluation: an
// explicit deny wins, then an allow from the policy or an ACL):
//
//  1. the bucket owner and admins may always manage the bucket policy
//     (so a Deny-all policy cannot lock them out);
//  2. an explicit Deny in the bucket policy refuses;
//  3. the bucket owner and admins are allowed; so is an object's owner for
//     object actions on that object (not when ACLs are disabled: then the
//     bucket owner owns every object);
//  4. an Allow in the bucket policy allows (with RestrictPublicBuckets and
//     a public policy, only for signed-in users);
//  5. ACLs, unless disabled: canned ACLs (public-read lets anyone list the
//     bucket and read its objects, public-read-write also lets anyone
//     write and delete objects, authenticated-read lets any signed-in user
//     read) and full grant lists (acl_grants.go), on the bucket and on the
//     object; IgnorePublicACLs drops grants to AllUsers/AuthenticatedUsers;
//  6. any signed-in user may list their buckets and create buckets;
//  7. everything else is refused.
//
// Deviation from S3, on purpose: a bucket's canned public-read also makes
// its objects readable (in S3 each object needs its own ACL), because that
// is what people setting it mean. A full grant list follows S3 exactly.
func Allowed(r Request) bool {
	authed := r.Principal != ""
	owner := authed && (r.Admin || r.Principal == r.BucketOwner)
	if owner && policyManagement[r.Action] {
		return true
	}
	if r.Bucket == "" { // ListAllMyBuckets and friends: no bucket, no policy
		return authed && (r.Action == ActionListAllMyBuckets || r.Action == ActionCreateBucket || r.Admin)
	}
	resource := arnPrefix + r.Bucket
	if IsObjectAction(r.Action) {
		resource += "/" + r.Key
	}
	ctx := r.Context
	if ctx == nil {
		ctx = Context{}
	}
	if r.Policy != nil && r.Policy.matches("Deny", r.Principal, r.Action, resource, ctx) {
		return false
	}
	if owner {
		return true
	}
	if authed && IsObjectAction(r.Action) && r.ObjectOwner == r.Principal && !r.ACLsDisabled {
		return true
	}
	if r.Policy != nil && (authed || !r.RestrictPublicBuckets || !r.Policy.IsPublic()) &&
		r.Policy.matches("Allow", r.Principal, r.Action, resource, ctx) {
		return true
	}
	if !r.ACLsDisabled && (aclGrants(r.BucketACL, authed, r.Principal, r.Action, true, r.IgnorePublicACLs) ||
		IsObjectAction(r.Action) && aclGrants(r.ObjectACL, authed, r.Principal, r.Action, false, r.IgnorePublicACLs)) {
		return true
	}
	return authed && r.Action == ActionCreateBucket
}

// aclGrants applies a stored ACL (canned name or grant list) to a non-owner.
func aclGrants(stored string, authed bool, principal, action string, bucketACL, ignorePublic bool) bool {
	if strings.HasPrefix(stored, "{") {
		perms := objectPermActions
		if bucketACL {
			perms = bucketPermActions
		}
		return grantsAllow(DecodeACL(stored), principal, authed, action, perms, ignorePublic)
	}
	if ignorePublic { // every canned ACL that grants anything grants it to a group
		return false
	}
	return aclAllows(stored, authed, action, bucketACL)
}

// aclAllows applies a canned ACL to a non-owner.
func aclAllows(acl string, authed bool, action string, bucketACL bool) bool {
	read := action == ActionGetObject
	if bucketACL {
		read = read || action == ActionListBucket || action == ActionGetBucketLocation
	}
	write := bucketACL && (action == ActionPutObject || action == ActionDeleteObject ||
		action == ActionAbortMultipartUpload || action == ActionListMultipartUploadParts ||
		action == ActionListBucketMultipartUploads)
	switch acl {
	case ACLPublicRead:
		return read
	case ACLPublicReadWrite:
		return read || write
	case ACLAuthenticatedRead:
		return authed && read
	}
	return false
}

// matches reports whether a statement with the given effect applies.
func (p *Policy) matches(effect, principal, action, resource string, ctx Context) bool {
	vars := func(v string) string { return expandVars(v, ctx) }
	for i := range p.Statements {
		st := &p.Statements[i]
		if st.Effect != effect || st.principalMatches(principal) == st.NotPrincipal ||
			anyMatch(st.Actions, action, true, nil) == st.NotAction ||
			anyMatch(st.Resources, resource, false, vars) == st.NotResource {
			continue
		}
		ok := true
		for j := range st.Conditions {
			if !st.Conditions[j].holds(ctx, vars) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// IsPublic reports whether the policy is public in the sense of S3's
// Block Public Access: some Allow statement applies to everyone ("*" or
// a NotPrincipal) without a condition that pins the caller down (a
// source IP range narrower than the whole Internet, a user name or id).
func (p *Policy) IsPublic() bool {
	for _, st := range p.Statements {
		if st.Effect != "Allow" {
			continue
		}
		everyone := st.NotPrincipal
		for _, pr := range st.Principals {
			if pr == "*" {
				everyone = true
			}
		}
		if everyone && !st.restricted() {
			return true
		}
	}
	return false
}

func (st *Statement) restricted() bool {
	for _, c := range st.Conditions {
		switch c.Key {
		case "aws:sourceip":
			if c.Op != "IpAddress" || c.IfExists {
				continue
			}
			narrow := true
			for _, v := range c.Values {
				if pfx, ok := parseCIDR(v); !ok || pfx.Bits() == 0 {
					narrow = false
				}
			}
			if narrow {
				return true
			}
		case "aws:username", "aws:userid", "aws:principalaccount", "aws:principalarn", "aws:sourcevpc", "aws:sourcevpce", "aws:sourceaccount", "aws:sourcearn":
			if (c.Op == "StringEquals" || c.Op == "ArnEquals") && !c.IfExists {
				return true
			}
		}
	}
	return false
}

// anyMatch matches value against patterns; actions compare
// case-insensitively (as IAM does), resources case-sensitively with
// policy variables expanded by vars.
func anyMatch(patterns []string, value string, fold bool, vars func(string) string) bool {
	if fold {
		value = strings.ToLower(value)
	}
	for _, p := range patterns {
		if fold {
			p = strings.ToLower(p)
		}
		if vars != nil {
			p = vars(p)
		}
		if globMatch(p, value) {
			return true
		}
	}
	return false
}

func (st *Statement) principalMatches(principal string) bool {
	for _, p := range st.Principals {
		if p == "*" || (principal != "" && p == principal) {
			return true
		}
	}
	return false
}

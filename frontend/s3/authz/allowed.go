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
}

// Allowed decides r, in this order:
//
//  1. the bucket owner and admins may always manage the bucket policy
//     (so a Deny-all policy cannot lock them out);
//  2. an explicit Deny in the bucket policy refuses;
//  3. the bucket owner and admins are allowed; so is an object's owner for
//     object actions on that object;
//  4. an Allow in the bucket policy allows;
//  5. canned ACLs: public-read lets anyone list the bucket and read its
//     objects, public-read-write also lets anyone write and delete objects,
//     authenticated-read lets any signed-in user read; an object's own ACL
//     grants reading that object in the same way;
//  6. any signed-in user may list their buckets and create buckets;
//  7. everything else is refused.
//
// Deviation from S3, on purpose: a bucket's public-read also makes its
// objects readable (in S3 each object needs its own ACL), because that is
// what people setting it mean.
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
	if r.Policy != nil && r.Policy.matches("Deny", r.Principal, r.Action, resource) {
		return false
	}
	if owner {
		return true
	}
	if authed && IsObjectAction(r.Action) && r.ObjectOwner == r.Principal {
		return true
	}
	if r.Policy != nil && r.Policy.matches("Allow", r.Principal, r.Action, resource) {
		return true
	}
	if aclAllows(r.BucketACL, authed, r.Action, true) {
		return true
	}
	if IsObjectAction(r.Action) && aclAllows(r.ObjectACL, authed, r.Action, false) {
		return true
	}
	return authed && r.Action == ActionCreateBucket
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
func (p *Policy) matches(effect, principal, action, resource string) bool {
	for _, st := range p.Statements {
		if st.Effect == effect && st.principalMatches(principal) && anyMatch(st.Actions, action, true) && anyMatch(st.Resources, resource, false) {
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

// anyMatch matches value against patterns; actions compare
// case-insensitively (as IAM does), resources case-sensitively.
func anyMatch(patterns []string, value string, fold bool) bool {
	if fold {
		value = strings.ToLower(value)
	}
	for _, p := range patterns {
		if fold {
			p = strings.ToLower(p)
		}
		if globMatch(p, value) {
			return true
		}
	}
	return false
}

// Package authz decides whether an authenticated (or anonymous) S3 request
// may act on a bucket or object: the bucket owner and admins, ACLs on
// buckets and objects (canned names and full grant lists to users and the
// AllUsers/AuthenticatedUsers groups, acl_grants.go), and bucket policies
// (Allow/Deny, Principal/NotPrincipal, Action/NotAction,
// Resource/NotResource, Condition with the IAM operators, condition.go),
// with ownership controls and public access block flags. Explicit Deny
// wins; otherwise any Allow; otherwise deny. Pure functions over documents: frontend/s3 loads the documents from
// the store and calls Allowed.
//
// CONTRACT (used by frontend/s3; keep these names and meanings):
//
//	type Request struct {
//	    Principal     string // user name; "" when anonymous
//	    Admin         bool   // the principal is an admin (root) user
//	    Action        string // "s3:GetObject", "s3:PutObject", "s3:ListBucket", ...
//	    Bucket, Key   string
//	    BucketOwner   string
//	    BucketACL     string // canned ACL name ("" = private)
//	    ObjectACL     string // canned ACL of the object ("" = private)
//	    ObjectOwner   string
//	    Policy        *Policy // parsed bucket policy or nil
//	    Context       Context // condition keys of the request
//	    ACLsDisabled, IgnorePublicACLs, RestrictPublicBuckets bool
//	}
//	func Allowed(r Request) bool
//	func ParsePolicy(doc []byte, bucket string) (*Policy, error) // *PolicyError with S3 code MalformedPolicy
//	func ValidCannedACL(name string) bool
package authz

package authz

// S3 action names, as used in bucket policies and in Request.Action.
// frontend/s3 maps each operation to one of these (HeadObject ->
// s3:GetObject, HeadBucket and ListObjects(V2) -> s3:ListBucket, multipart
// create/upload/complete and UploadPartCopy -> s3:PutObject, CopyObject ->
// s3:GetObject on the source and s3:PutObject on the destination).
const (
	ActionListAllMyBuckets           = "s3:ListAllMyBuckets"
	ActionCreateBucket               = "s3:CreateBucket"
	ActionDeleteBucket               = "s3:DeleteBucket"
	ActionListBucket                 = "s3:ListBucket"
	ActionListBucketMultipartUploads = "s3:ListBucketMultipartUploads"
	ActionGetBucketLocation          = "s3:GetBucketLocation"
	ActionGetBucketAcl               = "s3:GetBucketAcl"
	ActionPutBucketAcl               = "s3:PutBucketAcl"
	ActionGetBucketPolicy            = "s3:GetBucketPolicy"
	ActionPutBucketPolicy            = "s3:PutBucketPolicy"
	ActionDeleteBucketPolicy         = "s3:DeleteBucketPolicy"
	ActionGetObject                  = "s3:GetObject"
	ActionPutObject                  = "s3:PutObject"
	ActionDeleteObject               = "s3:DeleteObject"
	ActionGetObjectAcl               = "s3:GetObjectAcl"
	ActionPutObjectAcl               = "s3:PutObjectAcl"
	ActionAbortMultipartUpload       = "s3:AbortMultipartUpload"
	ActionListMultipartUploadParts   = "s3:ListMultipartUploadParts"
	ActionGetObjectTagging           = "s3:GetObjectTagging"
	ActionPutObjectTagging           = "s3:PutObjectTagging"
	ActionDeleteObjectTagging        = "s3:DeleteObjectTagging"
	ActionGetBucketTagging           = "s3:GetBucketTagging"
	ActionPutBucketTagging           = "s3:PutBucketTagging"
	ActionGetObjectAttributes        = "s3:GetObjectAttributes"
)

// Actions lists every action above.
var Actions = []string{
	ActionListAllMyBuckets, ActionCreateBucket, ActionDeleteBucket, ActionListBucket,
	ActionListBucketMultipartUploads, ActionGetBucketLocation, ActionGetBucketAcl, ActionPutBucketAcl,
	ActionGetBucketPolicy, ActionPutBucketPolicy, ActionDeleteBucketPolicy, ActionGetObject,
	ActionPutObject, ActionDeleteObject, ActionGetObjectAcl, ActionPutObjectAcl,
	ActionAbortMultipartUpload, ActionListMultipartUploadParts,
	ActionGetObjectTagging, ActionPutObjectTagging, ActionDeleteObjectTagging,
	ActionGetBucketTagging, ActionPutBucketTagging, ActionGetObjectAttributes,
}

// objectActions act on arn:aws:s3:::bucket/key; every other action acts on
// the bucket (arn:aws:s3:::bucket).
var objectActions = map[string]bool{
	ActionGetObject: true, ActionPutObject: true, ActionDeleteObject: true,
	ActionGetObjectAcl: true, ActionPutObjectAcl: true,
	ActionAbortMultipartUpload: true, ActionListMultipartUploadParts: true,
	ActionGetObjectTagging: true, ActionPutObjectTagging: true, ActionDeleteObjectTagging: true,
	ActionGetObjectAttributes: true,
	// Version and Object Lock actions name one object (version) too.
	"s3:GetObjectVersion": true, "s3:DeleteObjectVersion": true,
	"s3:GetObjectVersionAcl": true, "s3:PutObjectVersionAcl": true,
	"s3:GetObjectVersionAttributes": true, "s3:GetObjectVersionTagging": true,
	"s3:PutObjectVersionTagging": true, "s3:DeleteObjectVersionTagging": true,
	"s3:GetObjectRetention": true, "s3:PutObjectRetention": true,
	"s3:GetObjectLegalHold": true, "s3:PutObjectLegalHold": true,
	"s3:BypassGovernanceRetention": true,
}

// IsObjectAction reports whether action applies to objects (resource
// arn:aws:s3:::bucket/key) rather than to the bucket.
func IsObjectAction(action string) bool { return objectActions[action] }

// policyManagement actions are always allowed to the owner and admins so a
// Deny-everything policy cannot lock them out.
var policyManagement = map[string]bool{
	ActionGetBucketPolicy: true, ActionPutBucketPolicy: true, ActionDeleteBucketPolicy: true,
}

// Canned ACL names.
const (
	ACLPrivate                = "private"
	ACLPublicRead             = "public-read"
	ACLPublicReadWrite        = "public-read-write"
	ACLAuthenticatedRead      = "authenticated-read"
	ACLBucketOwnerRead        = "bucket-owner-read"
	ACLBucketOwnerFullControl = "bucket-owner-full-control"
)

// ValidCannedACL reports whether name is a canned ACL tristore accepts in
// x-amz-acl. The bucket-owner-* ACLs, which S3 clients send on uploads to
// others' buckets, are accepted and mean "private" here: in tristore the
// bucket owner can always read and delete objects in the bucket.
func ValidCannedACL(name string) bool {
	switch name {
	case ACLPrivate, ACLPublicRead, ACLPublicReadWrite, ACLAuthenticatedRead,
		ACLBucketOwnerRead, ACLBucketOwnerFullControl:
		return true
	}
	return false
}

package s3

import (
	"context"
	"time"

	"github.com/tristore/tristore/store"
)

// Bucket configuration documents kept through store.BucketConfigurer.
const (
	cfgACL    = "acl"    // canned ACL name of the bucket
	cfgPolicy = "policy" // bucket policy JSON
)

// objectACLActions are the actions whose answer may depend on the object's
// own ACL and owner, so authorize loads the object's metadata for them.
var objectACLActions = map[string]bool{
	"s3:GetObject":    true,
	"s3:GetObjectAcl": true,
	"s3:PutObjectAcl": true,
	// An object's owner may read and change its tags (authz: object owner).
	"s3:GetObjectTagging":    true,
	"s3:PutObjectTagging":    true,
	"s3:DeleteObjectTagging": true,
	"s3:GetObjectAttributes": true,
	"s3:GetObjectVersion":    true, // (the current version's ACL and owner)
	// The versionId forms of tagging, ACL and attributes requests (version_sub.go).
	"s3:GetObjectVersionTagging": true, "s3:PutObjectVersionTagging": true, "s3:DeleteObjectVersionTagging": true,
	"s3:GetObjectVersionAcl": true, "s3:PutObjectVersionAcl": true, "s3:GetObjectVersionAttributes": true,
}

// authorize decides whether rc's identity may do action on bucket/key.
// Anonymous callers when AllowAnonymous is set may do anything. Admins
// and the bucket owner may do anything unless the bucket has a policy: a
// policy can Deny even them, so then the request goes to the Authorizer,
// which lets admins and owners through except for an explicit Deny (and
// always lets them manage the policy itself, so a Deny-all cannot lock
// them out). Everyone else goes to the Authorizer with the owner, ACLs
// and policy loaded from the store.
func (s *Server) authorize(ctx context.Context, rc *reqCtx, action, bucket, key string) error {
	id := rc.ident
	if id.Anonymous && s.opts.AllowAnonymous {
		return nil
	}
	switch action {
	case "s3:ListAllMyBuckets", "s3:CreateBucket":
		if id.Anonymous {
			return ErrAccessDenied
		}
		return nil
	}
	admin := id.Admin && !id.Anonymous
	bc, hasConfig := s.st.(store.BucketConfigurer)
	var policy string
	if hasConfig {
		var err error
		if policy, err = bc.GetBucketConfig(ctx, bucket, cfgPolicy); err != nil {
			return err // a missing bucket is NoSuchBucket, for admins too
		}
	}
	if admin && policy == "" {
		return nil // no policy, nothing can deny an admin (one lookup per request)
	}
	bi, err := s.st.StatBucket(ctx, bucket)
	if err != nil {
		return err
	}
	req := AccessRequest{Principal: id.User, Admin: admin, Action: action, Bucket: bucket, Key: key, BucketOwner: bi.Owner, Policy: policy}
	if hasConfig {
		if req.BucketACL, err = bc.GetBucketConfig(ctx, bucket, cfgACL); err != nil {
			return err
		}
	}
	owner := !id.Anonymous && id.User != "" && id.User == bi.Owner
	if owner && req.Policy == "" {
		return nil // no policy, nothing can deny the owner
	}
	if req.Policy != "" && rc.cond == nil && rc.req != nil {
		rc.cond = conditionContext(rc.req, id, time.Now()) // only policies read it
	}
	req.Context = rc.cond
	if hasConfig {
		own, err := s.ownership(ctx, bucket)
		if err != nil {
			return err
		}
		pab, err := s.publicAccessBlock(ctx, bucket)
		if err != nil {
			return err
		}
		req.ACLsDisabled = own == "BucketOwnerEnforced"
		req.IgnorePublicACLs, req.RestrictPublicBuckets = pab.IgnoreACLs, pab.Restrict
	}
	if key != "" && objectACLActions[action] {
		if oi, err := s.st.Stat(ctx, bucket, key); err == nil {
			req.ObjectACL = oi.Meta.ACL
			req.ObjectOwner = oi.Meta.Owner
		}
	}
	if s.opts.Authz.Allowed(req) {
		return nil
	}
	return ErrAccessDenied
}

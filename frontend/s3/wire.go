package s3

import (
	"context"
	"net/http"
	"sync"

	"github.com/tristore/tristore/frontend/s3/authz"
	"github.com/tristore/tristore/frontend/s3/sigv2"
	"github.com/tristore/tristore/frontend/s3/sigv4"
	"github.com/tristore/tristore/iam"
)

// Users resolves an access key to a user (iam.Store implements it).
type Users interface {
	sigv4.Credentials
	UserByAccessKey(accessKey string) (iam.User, error)
}

// SigV4Auth authenticates with AWS Signature V4 (frontend/s3/sigv4)
// against the users in an iam store.
type SigV4Auth struct {
	v      *sigv4.Verifier
	users  Users
	region string // the region SigV4 scopes (and POST credentials) must name
}

// NewSigV4Auth returns an Authenticator for users, scoped to region.
func NewSigV4Auth(users Users, region string) *SigV4Auth {
	if region == "" {
		region = "us-east-1"
	}
	return &SigV4Auth{v: sigv4.NewVerifier(users, region), users: users, region: region}
}

// Authenticate implements Authenticator.
// A request signed with SigV2 (an "AWS AK:sig" header or an
// AWSAccessKeyId/Signature query) goes to frontend/s3/sigv2.
func (a *SigV4Auth) Authenticate(r *http.Request) (Identity, error) {
	if sigv2.Is(r) {
		res, err := sigv2.Verify(r.Context(), a.users, r, a.v.Now())
		if err != nil {
			return Identity{}, err
		}
		return a.identity(r.Context(), res.AccessKey)
	}
	res, err := a.v.Verify(r)
	if err != nil {
		return Identity{}, err
	}
	if res.Anonymous {
		return Identity{Anonymous: true}, nil
	}
	return a.identity(r.Context(), res.AccessKey)
}

// userFor is implemented by users that look a key up within a request
// (iam.Store: one check of its file per request, internal/reqmemo).
type userFor interface {
	UserFor(ctx context.Context, accessKey string) (iam.User, error)
}

// identity is the user behind a verified access key.
func (a *SigV4Auth) identity(ctx context.Context, accessKey string) (Identity, error) {
	var u iam.User
	var err error
	if uf, ok := a.users.(userFor); ok {
		u, err = uf.UserFor(ctx, accessKey)
	} else {
		u, err = a.users.UserByAccessKey(accessKey)
	}
	if err != nil {
		// Removed between the signature check and now.
		return Identity{}, ErrInvalidAccessKeyID
	}
	return Identity{AccessKey: accessKey, User: u.Name, Admin: u.Admin}, nil
}

// UserExists implements UserDirectory (grants name users by their name).
func (a *SigV4Auth) UserExists(name string) bool {
	d, ok := a.users.(interface {
		User(string) (iam.User, error)
	})
	if !ok {
		return true
	}
	_, err := d.User(name)
	return err == nil
}

// PolicyAuthz is the Authorizer over frontend/s3/authz. Parsed policies
// are cached by document text, since every request on a bucket with a
// policy would otherwise re-parse it.
type PolicyAuthz struct {
	mu    sync.Mutex
	cache map[string]*authz.Policy // bucket+"\x00"+doc -> policy
}

// maxPolicyCache bounds the parsed-policy cache (it is reset when full).
const maxPolicyCache = 1024

// NewPolicyAuthz returns the authz-backed Authorizer.
func NewPolicyAuthz() *PolicyAuthz { return &PolicyAuthz{cache: map[string]*authz.Policy{}} }

func (p *PolicyAuthz) policy(doc, bucket string) (*authz.Policy, error) {
	if doc == "" {
		return nil, nil
	}
	k := bucket + "\x00" + doc
	p.mu.Lock()
	pol, ok := p.cache[k]
	p.mu.Unlock()
	if ok {
		return pol, nil
	}
	pol, err := authz.ParsePolicy([]byte(doc), bucket)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if len(p.cache) >= maxPolicyCache {
		p.cache = map[string]*authz.Policy{}
	}
	p.cache[k] = pol
	p.mu.Unlock()
	return pol, nil
}

// Allowed implements Authorizer. A stored policy that no longer parses
// denies everyone but owners and admins (fail closed).
func (p *PolicyAuthz) Allowed(r AccessRequest) bool {
	pol, err := p.policy(r.Policy, r.Bucket)
	req := authz.Request{
		Principal: r.Principal, Admin: r.Admin, Action: r.Action, Bucket: r.Bucket, Key: r.Key,
		BucketOwner: r.BucketOwner, BucketACL: r.BucketACL, ObjectACL: r.ObjectACL, ObjectOwner: r.ObjectOwner,
		Policy: pol, Context: r.Context, ACLsDisabled: r.ACLsDisabled,
		IgnorePublicACLs: r.IgnorePublicACLs, RestrictPublicBuckets: r.RestrictPublicBuckets,
	}
	if err != nil {
		return r.Admin || (r.Principal != "" && r.Principal == r.BucketOwner)
	}
	return authz.Allowed(req)
}

// CheckPolicy implements Authorizer.
func (p *PolicyAuthz) CheckPolicy(doc []byte, bucket string) error {
	_, err := authz.ParsePolicy(doc, bucket)
	return err
}

// ValidCannedACL implements Authorizer.
func (p *PolicyAuthz) ValidCannedACL(name string) bool { return authz.ValidCannedACL(name) }

var (
	_ Authenticator = (*SigV4Auth)(nil)
	_ Authorizer    = (*PolicyAuthz)(nil)
	_ Users         = (*iam.Store)(nil)
)

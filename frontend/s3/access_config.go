package s3

import (
	"context"
	"encoding/xml"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tristore/tristore/frontend/s3/authz"
)

// Object ownership controls and the public access block: two bucket
// documents (kept like the ACL and policy through store.BucketConfigurer)
// that change how ACLs and policies are applied, as in S3:
//
//   - BucketOwnerEnforced disables ACLs: they grant nothing, the bucket
//     owner owns every object, and requests that set any ACL other than
//     bucket-owner-full-control (or private on the bucket) are refused
//     with 400 AccessControlListNotSupported. BucketOwnerPreferred and
//     ObjectWriter (the default) keep ACLs.
//   - BlockPublicAcls refuses PUTs that set a public ACL (403
//     AccessDenied); IgnorePublicAcls makes public grants count for
//     nothing; BlockPublicPolicy refuses a public bucket policy (403);
//     RestrictPublicBuckets lets a public policy allow only signed-in users.
const (
	cfgOwnership = "ownershipControls"
	cfgPAB       = "publicAccessBlock"
)

var (
	opGetOwnership    = &operation{"GetBucketOwnershipControls", "s3:GetBucketOwnershipControls", (*Server).getOwnership}
	opPutOwnership    = &operation{"PutBucketOwnershipControls", "s3:PutBucketOwnershipControls", (*Server).putOwnership}
	opDeleteOwnership = &operation{"DeleteBucketOwnershipControls", "s3:PutBucketOwnershipControls", deleteBucketSetting(cfgOwnership)}
	opGetPAB          = &operation{"GetPublicAccessBlock", "s3:GetBucketPublicAccessBlock", (*Server).getPAB}
	opPutPAB          = &operation{"PutPublicAccessBlock", "s3:PutBucketPublicAccessBlock", (*Server).putPAB}
	opDeletePAB       = &operation{"DeletePublicAccessBlock", "s3:PutBucketPublicAccessBlock", deleteBucketSetting(cfgPAB)}
)

var (
	errNoOwnership = &APIError{"OwnershipControlsNotFoundError", http.StatusNotFound, "The bucket ownership controls were not found"}
	errNoPAB       = &APIError{"NoSuchPublicAccessBlockConfiguration", http.StatusNotFound, "The public access block configuration was not found"}
	// ErrACLNotSupported: an ACL on a bucket whose ownership is BucketOwnerEnforced.
	ErrACLNotSupported     = &APIError{"AccessControlListNotSupported", http.StatusBadRequest, "The bucket does not allow ACLs"}
	errPublicACLBlocked    = ErrAccessDenied.withMessage("Access Denied: the bucket's public access block (BlockPublicAcls) refuses public ACLs")
	errPublicPolicyBlocked = ErrAccessDenied.withMessage("Access Denied: the bucket's public access block (BlockPublicPolicy) refuses public policies")
)

// routeAccess routes the ownership-controls and public-access-block
// sub-resources of a bucket, and POST Object form uploads (post.go).
func routeAccess(r *http.Request, bucket, key string) *operation {
	if isPostObject(r, bucket, key) {
		return opPostObject
	}
	if bucket == "" || key != "" {
		return nil
	}
	q := r.URL.Query()
	pick := func(get, put, del *operation) *operation {
		switch r.Method {
		case http.MethodGet:
			return get
		case http.MethodPut:
			return put
		case http.MethodDelete:
			return del
		}
		return nil
	}
	if q.Has("ownershipControls") {
		return pick(opGetOwnership, opPutOwnership, opDeleteOwnership)
	}
	if q.Has("publicAccessBlock") {
		return pick(opGetPAB, opPutPAB, opDeletePAB)
	}
	return nil
}

type ownershipXML struct {
	XMLName xml.Name `xml:"OwnershipControls"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	Rules   []struct {
		ObjectOwnership string `xml:"ObjectOwnership"`
	} `xml:"Rule"`
}

type pabXML struct {
	XMLName               xml.Name `xml:"PublicAccessBlockConfiguration"`
	NS                    string   `xml:"xmlns,attr,omitempty"`
	BlockPublicAcls       *bool    `xml:"BlockPublicAcls"`
	IgnorePublicAcls      *bool    `xml:"IgnorePublicAcls"`
	BlockPublicPolicy     *bool    `xml:"BlockPublicPolicy"`
	RestrictPublicBuckets *bool    `xml:"RestrictPublicBuckets"`
}

// publicAccess is a bucket's public access block (all false when unset).
type publicAccess struct {
	BlockACLs, IgnoreACLs, BlockPolicy, Restrict bool
}

func (s *Server) bucketDoc(ctx context.Context, bucket, name string) (string, error) {
	bc, err := s.bucketConfigurer()
	if err != nil {
		return "", err
	}
	return bc.GetBucketConfig(ctx, bucket, name)
}

// ownership returns the bucket's ObjectOwnership ("" when not set).
func (s *Server) ownership(ctx context.Context, bucket string) (string, error) {
	if _, err := s.bucketConfigurer(); err != nil {
		return "", nil // a store without bucket documents has no controls
	}
	return s.bucketDoc(ctx, bucket, cfgOwnership)
}

func (s *Server) publicAccessBlock(ctx context.Context, bucket string) (publicAccess, error) {
	var p publicAccess
	if _, err := s.bucketConfigurer(); err != nil {
		return p, nil
	}
	doc, err := s.bucketDoc(ctx, bucket, cfgPAB)
	if err != nil || doc == "" {
		return p, err
	}
	for _, f := range strings.Split(doc, ",") {
		switch f {
		case "BlockPublicAcls":
			p.BlockACLs = true
		case "IgnorePublicAcls":
			p.IgnoreACLs = true
		case "BlockPublicPolicy":
			p.BlockPolicy = true
		case "RestrictPublicBuckets":
			p.Restrict = true
		}
	}
	return p, nil
}

func (s *Server) getOwnership(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	v, err := s.bucketDoc(r.Context(), rc.bucket, cfgOwnership)
	if err != nil {
		return err
	}
	if v == "" {
		return errNoOwnership
	}
	out := ownershipXML{NS: s3NS}
	out.Rules = append(out.Rules, struct {
		ObjectOwnership string `xml:"ObjectOwnership"`
	}{v})
	return writeXML(w, out)
}

func (s *Server) putOwnership(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	var in ownershipXML
	if _, err := readXML(r, &in, false); err != nil {
		return err
	}
	if len(in.Rules) != 1 {
		return ErrMalformedXML
	}
	v := in.Rules[0].ObjectOwnership
	switch v {
	case "BucketOwnerEnforced", "BucketOwnerPreferred", "ObjectWriter":
	default:
		return ErrMalformedXML
	}
	if err := s.setBucketConfig(r, rc.bucket, cfgOwnership, v); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getPAB(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	doc, err := s.bucketDoc(r.Context(), rc.bucket, cfgPAB)
	if err != nil {
		return err
	}
	if doc == "" {
		return errNoPAB
	}
	p, err := s.publicAccessBlock(r.Context(), rc.bucket)
	if err != nil {
		return err
	}
	return writeXML(w, pabXML{NS: s3NS, BlockPublicAcls: &p.BlockACLs, IgnorePublicAcls: &p.IgnoreACLs,
		BlockPublicPolicy: &p.BlockPolicy, RestrictPublicBuckets: &p.Restrict})
}

// putPAB stores the four flags (missing ones are false, as in S3). The
// stored form is the list of the true flags' names, or "none" when all
// are false (an empty value would delete the document).
func (s *Server) putPAB(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	var in pabXML
	if _, err := readXML(r, &in, false); err != nil {
		return err
	}
	var on []string
	for _, f := range []struct {
		name string
		v    *bool
	}{{"BlockPublicAcls", in.BlockPublicAcls}, {"IgnorePublicAcls", in.IgnorePublicAcls},
		{"BlockPublicPolicy", in.BlockPublicPolicy}, {"RestrictPublicBuckets", in.RestrictPublicBuckets}} {
		if f.v != nil && *f.v {
			on = append(on, f.name)
		}
	}
	doc := strings.Join(on, ",")
	if doc == "" {
		doc = "none"
	}
	if err := s.setBucketConfig(r, rc.bucket, cfgPAB, doc); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// conditionContext gathers the policy condition keys of r (see
// authz.Context). aws:SourceIp is the TCP peer: forwarding headers are
// not trusted, since any client can send them.
func conditionContext(r *http.Request, id Identity, now time.Time) map[string][]string {
	c := map[string][]string{
		"aws:securetransport": {strconv.FormatBool(r.TLS != nil)},
		"aws:currenttime":     {now.UTC().Format(time.RFC3339)},
		"aws:epochtime":       {strconv.FormatInt(now.Unix(), 10)},
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		c["aws:sourceip"] = []string{host}
	}
	if id.Anonymous || id.User == "" {
		c["aws:principaltype"] = []string{"Anonymous"}
	} else {
		c["aws:principaltype"] = []string{"User"}
		c["aws:username"] = []string{id.User}
		c["aws:userid"] = []string{id.User}
	}
	if v := r.UserAgent(); v != "" {
		c["aws:useragent"] = []string{v}
	}
	if v := r.Referer(); v != "" {
		c["aws:referer"] = []string{v}
	}
	q := r.URL.Query()
	for _, k := range []string{"prefix", "delimiter", "max-keys", "versionId"} {
		if vs, ok := q[k]; ok {
			c["s3:"+strings.ToLower(k)] = vs
		}
	}
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		switch {
		case strings.HasPrefix(lk, "x-amz-grant-"):
			var vals []string
			for _, v := range vs {
				for _, p := range strings.Split(v, ",") {
					if p = strings.TrimSpace(p); p != "" {
						vals = append(vals, p)
					}
				}
			}
			c["s3:"+lk] = vals
		case lk == "x-amz-acl", lk == "x-amz-copy-source", lk == "x-amz-metadata-directive",
			lk == "x-amz-server-side-encryption", lk == "x-amz-storage-class", lk == "x-amz-content-sha256",
			lk == "x-amz-object-lock-mode", lk == "x-amz-object-lock-retain-until-date", lk == "x-amz-object-lock-legal-hold":
			c["s3:"+lk] = vs
		}
	}
	switch {
	case strings.HasPrefix(r.Header.Get("Authorization"), "AWS "):
		c["s3:signatureversion"], c["s3:authtype"] = []string{"AWS"}, []string{"REST-HEADER"}
	case r.Header.Get("Authorization") != "":
		c["s3:signatureversion"], c["s3:authtype"] = []string{"AWS4-HMAC-SHA256"}, []string{"REST-HEADER"}
	case q.Has("X-Amz-Signature"):
		c["s3:signatureversion"], c["s3:authtype"] = []string{"AWS4-HMAC-SHA256"}, []string{"REST-QUERY-STRING"}
	case q.Has("Signature"):
		c["s3:signatureversion"], c["s3:authtype"] = []string{"AWS"}, []string{"REST-QUERY-STRING"}
	}
	return c
}

// checkACLAllowed applies ownership controls and BlockPublicAcls to an
// ACL a request wants to set (stored form, "" = private). bucketACL:
// the ACL is the bucket's (private is then accepted under
// BucketOwnerEnforced, as S3 accepts it).
func (s *Server) checkACLAllowed(ctx context.Context, bucket, stored, canned string, bucketACL bool) error {
	own, err := s.ownership(ctx, bucket)
	if err != nil {
		return err
	}
	if own == "BucketOwnerEnforced" {
		ok := canned == "bucket-owner-full-control" || (stored == "" && (canned == "" || canned == "private") && bucketACL)
		if !ok {
			return ErrACLNotSupported
		}
	}
	pab, err := s.publicAccessBlock(ctx, bucket)
	if err != nil {
		return err
	}
	if pab.BlockACLs && authz.IsPublicACL(stored) {
		return errPublicACLBlocked
	}
	return nil
}

// createBucketAccess reads CreateBucket's access headers (x-amz-acl or
// x-amz-grant-*, x-amz-object-ownership) before the bucket exists, so a
// bad value creates nothing, and returns what stores them afterwards.
// With BucketOwnerEnforced only a private (or no) ACL is accepted, as S3
// answers InvalidBucketAclWithObjectOwnership otherwise.
func (s *Server) createBucketAccess(h http.Header) (func(ctx context.Context, bucket string) error, error) {
	own := h.Get("X-Amz-Object-Ownership")
	switch own {
	case "", "BucketOwnerEnforced", "BucketOwnerPreferred", "ObjectWriter":
	default:
		return nil, ErrInvalidArgument.withMessage("Invalid x-amz-object-ownership header: " + own)
	}
	canned := h.Get("X-Amz-Acl")
	var stored string
	switch {
	case canned != "" && hasGrantHeaders(h):
		return nil, errCannedAndGrants
	case canned != "":
		if !s.opts.Authz.ValidCannedACL(canned) {
			return nil, ErrInvalidArgument.withMessage("unknown canned ACL " + canned)
		}
		stored = storedCanned(canned)
	case hasGrantHeaders(h):
		gs, err := s.grantsFromHeaders(h)
		if err != nil {
			return nil, err
		}
		stored = authz.EncodeACL(gs)
	}
	if own == "BucketOwnerEnforced" && stored != "" {
		return nil, &APIError{"InvalidBucketAclWithObjectOwnership", http.StatusBadRequest, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"}
	}
	if own == "" && stored == "" {
		return func(context.Context, string) error { return nil }, nil
	}
	return func(ctx context.Context, bucket string) error {
		bc, err := s.bucketConfigurer()
		if err != nil {
			return err
		}
		if stored != "" {
			if err := bc.SetBucketConfig(ctx, bucket, cfgACL, stored); err != nil {
				return err
			}
		}
		if own != "" {
			return bc.SetBucketConfig(ctx, bucket, cfgOwnership, own)
		}
		return nil
	}, nil
}

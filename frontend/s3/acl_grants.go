package s3

import (
	"context"
	"encoding/xml"
	"net/http"
	"strings"

	"github.com/tristore/tristore/frontend/s3/authz"
)

// Full ACLs: AccessControlPolicy documents and x-amz-grant-* headers,
// read into authz grant lists (kept in the stored ACL string, see
// authz/acl_grants.go) and rendered back on GET. A canonical user ID is
// a tristore user name; an email grantee is resolved to the user whose
// name is that address (tristore keeps no other email).

// UserDirectory is implemented by Authenticators that can tell whether a
// user exists (SigV4Auth over iam), so grants to unknown IDs or email
// addresses are refused as S3 refuses them. Without one, any ID is kept.
type UserDirectory interface {
	UserExists(name string) bool
}

var (
	errUnresolvableEmail = &APIError{"UnresolvableGrantByEmailAddress", http.StatusBadRequest, "The email address you provided does not match any account on record."}
	errInvalidGrantID    = ErrInvalidArgument.withMessage("Invalid id")
	errCannedAndGrants   = ErrInvalidRequest.withMessage("Specifying both Canned ACLs and Header Grants is not allowed")
)

// grantHeaders maps each x-amz-grant-* header to its permission.
var grantHeaders = []struct{ header, perm string }{
	{"X-Amz-Grant-Read", authz.PermRead},
	{"X-Amz-Grant-Write", authz.PermWrite},
	{"X-Amz-Grant-Read-Acp", authz.PermReadACP},
	{"X-Amz-Grant-Write-Acp", authz.PermWriteACP},
	{"X-Amz-Grant-Full-Control", authz.PermFullControl},
}

func hasGrantHeaders(h http.Header) bool {
	for _, g := range grantHeaders {
		if h.Get(g.header) != "" {
			return true
		}
	}
	return false
}

// resolveGrantee turns one grantee into a grant, checking users exist.
func (s *Server) resolveGrantee(kind, value, perm string) (authz.ACLGrant, error) {
	g := authz.ACLGrant{Permission: perm}
	dir, _ := s.opts.Auth.(UserDirectory)
	switch strings.ToLower(kind) {
	case "id", "canonicaluser":
		if value == "" || (dir != nil && !dir.UserExists(value)) {
			return g, errInvalidGrantID
		}
		g.Type, g.ID = authz.GranteeUser, value
	case "emailaddress", "amazoncustomerbyemail":
		if value == "" || dir == nil || !dir.UserExists(value) {
			return g, errUnresolvableEmail
		}
		g.Type, g.ID = authz.GranteeUser, value
	case "uri", "group":
		if value != authz.AllUsersURI && value != authz.AuthenticatedUsersURI {
			return g, ErrInvalidArgument.withMessage("Invalid group uri")
		}
		g.Type, g.URI = authz.GranteeGroup, value
	default:
		return g, ErrInvalidArgument.withMessage("Argument format not recognized: " + kind)
	}
	return g, nil
}

// grantsFromHeaders parses x-amz-grant-* headers: comma-separated
// `id="..."`, `emailAddress="..."` or `uri="..."` grantees.
func (s *Server) grantsFromHeaders(h http.Header) ([]authz.ACLGrant, error) {
	var out []authz.ACLGrant
	for _, gh := range grantHeaders {
		for _, v := range h.Values(gh.header) {
			for _, item := range strings.Split(v, ",") {
				item = strings.TrimSpace(item)
				if item == "" {
					continue
				}
				k, val, ok := strings.Cut(item, "=")
				if !ok {
					return nil, ErrInvalidArgument.withMessage("Argument format not recognized: " + item)
				}
				val = strings.Trim(strings.TrimSpace(val), `"`)
				g, err := s.resolveGrantee(strings.TrimSpace(k), val, gh.perm)
				if err != nil {
					return nil, err
				}
				out = append(out, g)
			}
		}
	}
	return out, nil
}

// aclIn is an AccessControlPolicy request body.
type aclIn struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	Owner   struct {
		ID string `xml:"ID"`
	} `xml:"Owner"`
	Grants []struct {
		Grantee *struct {
			Type  string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
			ID    string `xml:"ID"`
			URI   string `xml:"URI"`
			Email string `xml:"EmailAddress"`
		} `xml:"Grantee"`
		Permission string `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

// grantsFromBody reads an AccessControlPolicy document. The owner's own
// FULL_CONTROL grant is implied by ownership and dropped.
func (s *Server) grantsFromBody(b []byte, ownerID string) ([]authz.ACLGrant, error) {
	var in aclIn
	if err := xml.Unmarshal(b, &in); err != nil {
		return nil, ErrMalformedACL
	}
	var out []authz.ACLGrant
	for _, g := range in.Grants {
		perm := strings.TrimSpace(g.Permission)
		if !authz.ValidPermission(perm) || g.Grantee == nil {
			return nil, ErrMalformedACL
		}
		var kind, val string
		switch g.Grantee.Type {
		case "CanonicalUser":
			kind, val = "id", strings.TrimSpace(g.Grantee.ID)
		case "AmazonCustomerByEmail":
			kind, val = "emailAddress", strings.TrimSpace(g.Grantee.Email)
		case "Group":
			kind, val = "uri", strings.TrimSpace(g.Grantee.URI)
		default:
			return nil, ErrMalformedACL
		}
		if kind == "id" && val == ownerID && perm == authz.PermFullControl {
			continue
		}
		gr, err := s.resolveGrantee(kind, val, perm)
		if err != nil {
			return nil, err
		}
		out = append(out, gr)
	}
	return out, nil
}

// requestedACL reads the ACL of a Put*Acl request: x-amz-acl, the
// x-amz-grant-* headers or an AccessControlPolicy body (exactly one).
// It returns the stored form ("" = private) and the canned name if one
// was given.
func (s *Server) requestedACL(r *http.Request, ownerID string) (stored, canned string, err error) {
	b, err := readBody(r, maxXMLBody)
	if err != nil {
		return "", "", err
	}
	hdr := r.Header.Get("X-Amz-Acl")
	grants := hasGrantHeaders(r.Header)
	switch {
	case hdr != "" && grants:
		return "", "", errCannedAndGrants
	case (hdr != "" || grants) && len(b) > 0:
		return "", "", ErrInvalidRequest.withMessage("Specify either ACL headers or an ACL document, not both")
	case hdr != "":
		if !s.opts.Authz.ValidCannedACL(hdr) {
			return "", "", ErrInvalidArgument.withMessage("unknown canned ACL " + hdr)
		}
		return storedCanned(hdr), hdr, nil
	case grants:
		gs, err := s.grantsFromHeaders(r.Header)
		if err != nil {
			return "", "", err
		}
		return authz.EncodeACL(gs), "", nil
	case len(b) > 0:
		gs, err := s.grantsFromBody(b, ownerID)
		if err != nil {
			return "", "", err
		}
		return authz.EncodeACL(gs), "", nil
	}
	return "", "", ErrMalformedACL.withMessage("an ACL is required: x-amz-acl, x-amz-grant-* headers or an AccessControlPolicy body")
}

func storedCanned(c string) string {
	if c == "private" {
		return ""
	}
	return c
}

// headerACL is the ACL a PUT, Copy or CreateMultipartUpload asks for in
// its headers (x-amz-acl or x-amz-grant-*), checked against the bucket's
// ownership controls and public access block; set reports whether any
// was given.
func (s *Server) headerACL(ctx context.Context, h http.Header, bucket string) (stored string, set bool, err error) {
	canned := h.Get("X-Amz-Acl")
	grants := hasGrantHeaders(h)
	switch {
	case canned != "" && grants:
		return "", false, errCannedAndGrants
	case canned != "":
		if !s.opts.Authz.ValidCannedACL(canned) {
			return "", false, ErrInvalidArgument.withMessage("unknown canned ACL " + canned)
		}
		stored = storedCanned(canned)
	case grants:
		gs, err := s.grantsFromHeaders(h)
		if err != nil {
			return "", false, err
		}
		stored = authz.EncodeACL(gs)
	default:
		return "", false, nil
	}
	if err := s.checkACLAllowed(ctx, bucket, stored, canned, false); err != nil {
		return "", false, err
	}
	return stored, true, nil
}

// aclGrantsOut renders a stored ACL as the grant list GetBucketAcl and
// GetObjectAcl show: the owner's FULL_CONTROL first, then the grants.
func aclGrantsOut(stored, ownerID string) []grantOut {
	out := []grantOut{{granteeOut{xsiNS, "CanonicalUser", ownerID, ownerID, ""}, authz.PermFullControl}}
	for _, g := range authz.DecodeACL(stored) {
		if g.Type == authz.GranteeGroup {
			out = append(out, grantOut{granteeOut{xsiNS, "Group", "", "", g.URI}, g.Permission})
		} else {
			out = append(out, grantOut{granteeOut{xsiNS, "CanonicalUser", g.ID, g.ID, ""}, g.Permission})
		}
	}
	return out
}

// newObjectACL is the ACL and owner of an object a request writes: the
// ACL from its headers (headerACL) and the writer as owner, or the bucket
// owner when the bucket's ownership is BucketOwnerEnforced.
func (s *Server) newObjectACL(ctx context.Context, h http.Header, rc *reqCtx) (acl, owner string, err error) {
	if acl, _, err = s.headerACL(ctx, h, rc.bucket); err != nil {
		return "", "", err
	}
	owner = rc.ident.User
	own, err := s.ownership(ctx, rc.bucket)
	if err != nil {
		return "", "", err
	}
	if own == "BucketOwnerEnforced" {
		bi, err := s.st.StatBucket(ctx, rc.bucket)
		if err != nil {
			return "", "", err
		}
		owner = bi.Owner
	}
	return acl, owner, nil
}

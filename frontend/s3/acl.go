package s3

import (
	"encoding/xml"
	"net/http"
	"sort"
	"strings"

	"github.com/tristore/tristore/store"
)

var (
	opGetBucketACL = &operation{"GetBucketAcl", "s3:GetBucketAcl", (*Server).getBucketACL}
	opPutBucketACL = &operation{"PutBucketAcl", "s3:PutBucketAcl", (*Server).putBucketACL}
	opGetObjectACL = &operation{"GetObjectAcl", "s3:GetObjectAcl", (*Server).getObjectACL}
	opPutObjectACL = &operation{"PutObjectAcl", "s3:PutObjectAcl", (*Server).putObjectACL}
)

// Group grantee URIs of S3 ACLs.
const (
	allUsersURI  = "http://acs.amazonaws.com/groups/global/AllUsers"
	authUsersURI = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
)

// ACLs are kept as canned ACL names (what authz evaluates); the XML form
// is generated on GET and, on PUT, accepted only when it is equivalent to
// a canned ACL — arbitrary per-user grants are not supported.

type granteeOut struct {
	XMLNSXsi    string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string `xml:"ID,omitempty"`
	DisplayName string `xml:"DisplayName,omitempty"`
	URI         string `xml:"URI,omitempty"`
}

type grantOut struct {
	Grantee    granteeOut `xml:"Grantee"`
	Permission string     `xml:"Permission"`
}

type aclOut struct {
	XMLName xml.Name   `xml:"AccessControlPolicy"`
	NS      string     `xml:"xmlns,attr"`
	Owner   owner      `xml:"Owner"`
	Grants  []grantOut `xml:"AccessControlList>Grant"`
}

const xsiNS = "http://www.w3.org/2001/XMLSchema-instance"

// cannedGrants expands a canned ACL into the grants S3 shows for it.
func cannedGrants(acl, ownerID string) []grantOut {
	g := []grantOut{{granteeOut{xsiNS, "CanonicalUser", ownerID, ownerID, ""}, "FULL_CONTROL"}}
	group := func(uri, perm string) grantOut { return grantOut{granteeOut{xsiNS, "Group", "", "", uri}, perm} }
	switch acl {
	case "public-read":
		g = append(g, group(allUsersURI, "READ"))
	case "public-read-write":
		g = append(g, group(allUsersURI, "READ"), group(allUsersURI, "WRITE"))
	case "authenticated-read":
		g = append(g, group(authUsersURI, "READ"))
	}
	return g
}

// aclIn is an AccessControlPolicy request body.
type aclIn struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	Owner   struct {
		ID string `xml:"ID"`
	} `xml:"Owner"`
	Grants []struct {
		Grantee struct {
			Type  string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
			ID    string `xml:"ID"`
			URI   string `xml:"URI"`
			Email string `xml:"EmailAddress"`
		} `xml:"Grantee"`
		Permission string `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

// parseACLBody maps an AccessControlPolicy document to the canned ACL it
// is equivalent to (grants to the owner are implied by ownership).
func parseACLBody(b []byte, ownerID string) (string, error) {
	var in aclIn
	if err := xml.Unmarshal(b, &in); err != nil {
		return "", ErrMalformedACL
	}
	var set []string
	for _, g := range in.Grants {
		perm := strings.ToUpper(strings.TrimSpace(g.Permission))
		switch perm {
		case "READ", "WRITE", "READ_ACP", "WRITE_ACP", "FULL_CONTROL":
		default:
			return "", ErrMalformedACL
		}
		switch {
		case g.Grantee.URI == allUsersURI:
			set = append(set, "all:"+perm)
		case g.Grantee.URI == authUsersURI:
			set = append(set, "auth:"+perm)
		case g.Grantee.URI == "" && g.Grantee.Email == "" && (g.Grantee.ID == ownerID || g.Grantee.ID == in.Owner.ID) && perm == "FULL_CONTROL":
			// the owner's own grant
		default:
			return "", ErrNotImplemented.withMessage("only ACLs equivalent to a canned ACL (private, public-read, public-read-write, authenticated-read) are supported")
		}
	}
	sort.Strings(set)
	switch strings.Join(set, ",") {
	case "":
		return "private", nil
	case "all:READ":
		return "public-read", nil
	case "all:READ,all:WRITE":
		return "public-read-write", nil
	case "auth:READ":
		return "authenticated-read", nil
	}
	return "", ErrNotImplemented.withMessage("only ACLs equivalent to a canned ACL (private, public-read, public-read-write, authenticated-read) are supported")
}

// requestedACL reads the canned ACL of a Put*Acl request from the x-amz-acl
// header or the XML body (exactly one of them).
func (s *Server) requestedACL(r *http.Request, ownerID string) (string, error) {
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-amz-grant-") {
			return "", ErrNotImplemented.withMessage("x-amz-grant-* headers are not supported; use a canned ACL")
		}
	}
	b, err := readBody(r, maxXMLBody)
	if err != nil {
		return "", err
	}
	hdr := r.Header.Get("X-Amz-Acl")
	switch {
	case hdr != "" && len(b) > 0:
		return "", ErrInvalidRequest.withMessage("Specify either x-amz-acl or an ACL document, not both")
	case hdr != "":
		if !s.opts.Authz.ValidCannedACL(hdr) {
			return "", ErrInvalidArgument.withMessage("unknown canned ACL " + hdr)
		}
		return hdr, nil
	case len(b) > 0:
		return parseACLBody(b, ownerID)
	}
	return "", ErrMalformedACL.withMessage("an ACL is required: x-amz-acl header or AccessControlPolicy body")
}

func (s *Server) getBucketACL(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	bi, err := s.st.StatBucket(r.Context(), rc.bucket)
	if err != nil {
		return err
	}
	acl := ""
	if bc, ok := s.st.(store.BucketConfigurer); ok {
		if acl, err = bc.GetBucketConfig(r.Context(), rc.bucket, cfgACL); err != nil {
			return err
		}
	}
	return writeXML(w, aclOut{NS: s3NS, Owner: owner{bi.Owner, bi.Owner}, Grants: cannedGrants(acl, bi.Owner)})
}

func (s *Server) putBucketACL(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	bi, err := s.st.StatBucket(r.Context(), rc.bucket)
	if err != nil {
		return err
	}
	acl, err := s.requestedACL(r, bi.Owner)
	if err != nil {
		return err
	}
	if acl == "private" {
		acl = ""
	}
	if err := s.setBucketConfig(r, rc.bucket, cfgACL, acl); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getObjectACL(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	oi, err := s.st.Stat(r.Context(), rc.bucket, rc.key)
	if err != nil {
		return err
	}
	return writeXML(w, aclOut{NS: s3NS, Owner: owner{oi.Meta.Owner, oi.Meta.Owner}, Grants: cannedGrants(oi.Meta.ACL, oi.Meta.Owner)})
}

func (s *Server) putObjectACL(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	mu, ok := s.st.(store.MetaUpdater)
	if !ok {
		return ErrNotImplemented.withMessage("this store cannot update object metadata")
	}
	oi, err := s.st.Stat(r.Context(), rc.bucket, rc.key)
	if err != nil {
		return err
	}
	acl, err := s.requestedACL(r, oi.Meta.Owner)
	if err != nil {
		return err
	}
	if acl == "private" {
		acl = ""
	}
	meta := oi.Meta
	meta.ACL = acl
	if _, err := mu.UpdateMeta(r.Context(), rc.bucket, rc.key, meta); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

package s3

import (
	"encoding/xml"
	"net/http"

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

// ACLs are kept as a canned ACL name or a grant list (acl_grants.go,
// authz/acl_grants.go); the XML form is generated on GET.
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
	if own, err := s.ownership(r.Context(), rc.bucket); err != nil {
		return err
	} else if own == "BucketOwnerEnforced" {
		acl = "" // ACLs are disabled: only the owner's FULL_CONTROL applies
	}
	return writeXML(w, aclOut{NS: s3NS, Owner: owner{bi.Owner, bi.Owner}, Grants: aclGrantsOut(acl, bi.Owner)})
}

func (s *Server) putBucketACL(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	bi, err := s.st.StatBucket(r.Context(), rc.bucket)
	if err != nil {
		return err
	}
	acl, canned, err := s.requestedACL(r, bi.Owner)
	if err != nil {
		return err
	}
	if err := s.checkACLAllowed(r.Context(), rc.bucket, acl, canned, true); err != nil {
		return err
	}
	if err := s.setBucketConfig(r, rc.bucket, cfgACL, acl); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getObjectACL(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	_, oi, err := s.subTarget(r.Context(), w, r, rc, "GetObjectAcl")
	if err != nil {
		return err
	}
	acl, own := oi.Meta.ACL, oi.Meta.Owner
	if o, err := s.ownership(r.Context(), rc.bucket); err != nil {
		return err
	} else if o == "BucketOwnerEnforced" {
		bi, err := s.st.StatBucket(r.Context(), rc.bucket)
		if err != nil {
			return err
		}
		acl, own = "", bi.Owner
	}
	return writeXML(w, aclOut{NS: s3NS, Owner: owner{own, own}, Grants: aclGrantsOut(acl, own)})
}

func (s *Server) putObjectACL(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, ok := s.st.(store.MetaUpdater); !ok {
		return ErrNotImplemented.withMessage("this store cannot update object metadata")
	}
	vid, oi, err := s.subTarget(r.Context(), w, r, rc, "PutObjectAcl")
	if err != nil {
		return err
	}
	acl, canned, err := s.requestedACL(r, oi.Meta.Owner)
	if err != nil {
		return err
	}
	if err := s.checkACLAllowed(r.Context(), rc.bucket, acl, canned, false); err != nil {
		return err
	}
	meta := oi.Meta
	meta.ACL = acl
	if err := s.updateSubMeta(r.Context(), rc, vid, oi, meta); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

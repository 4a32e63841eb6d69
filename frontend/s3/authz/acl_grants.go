package authz

import (
	"encoding/json"
	"strings"
)

// Full ACLs. A bucket's or object's ACL is kept as one string: a canned
// ACL name (what most clients send, and what older trees hold) or, for
// any other grant list, the JSON form of an ACL document below (it
// starts with '{', which no canned name does). The owner's own
// FULL_CONTROL is implied by ownership and not listed.

// More ACL permissions (PermRead, PermWrite, PermFullControl are in acl.go).
const (
	PermReadACP  = "READ_ACP"
	PermWriteACP = "WRITE_ACP"
)

// Grantee types of ACL documents.
const (
	GranteeUser  = "CanonicalUser"
	GranteeGroup = "Group"
)

// ACLGrant is one grant of an ACL document: to a user (Type
// CanonicalUser, ID = the tristore user name, which is the canonical ID
// tristore shows) or to a group (Type Group, URI AllUsers or
// AuthenticatedUsers).
type ACLGrant struct {
	Type       string `json:"t"`
	ID         string `json:"id,omitempty"`
	URI        string `json:"uri,omitempty"`
	Permission string `json:"p"`
}

// ACLDoc is a stored non-canned ACL.
type ACLDoc struct {
	Grants []ACLGrant `json:"grants"`
}

// ValidPermission reports whether p is an S3 ACL permission.
func ValidPermission(p string) bool {
	switch p {
	case PermRead, PermWrite, PermReadACP, PermWriteACP, PermFullControl:
		return true
	}
	return false
}

// EncodeACL returns the stored form of grants: the canned name when the
// list is exactly a canned ACL's (so those keep their canned behaviour),
// "" for private, the JSON document otherwise.
func EncodeACL(grants []ACLGrant) string {
	var simple []Grant
	for _, g := range grants {
		if g.Type == GranteeGroup {
			simple = append(simple, Grant{GroupURI: g.URI, Permission: g.Permission})
			continue
		}
		simple = nil
		break
	}
	if len(grants) == 0 {
		return ""
	}
	if simple != nil {
		if c, ok := CannedFromGrants(append([]Grant{{Owner: true, Permission: PermFullControl}}, simple...)); ok {
			if c == ACLPrivate {
				return ""
			}
			return c
		}
	}
	b, _ := json.Marshal(ACLDoc{Grants: grants})
	return string(b)
}

// DecodeACL returns the grants a stored ACL gives besides the owner's
// FULL_CONTROL (canned names expanded; "", private and the bucket-owner-*
// ACLs give none). A document that does not parse gives none (fail closed).
func DecodeACL(stored string) []ACLGrant {
	if strings.HasPrefix(stored, "{") {
		var d ACLDoc
		if json.Unmarshal([]byte(stored), &d) != nil {
			return nil
		}
		return d.Grants
	}
	var out []ACLGrant
	for _, g := range Grants(stored) {
		if !g.Owner {
			out = append(out, ACLGrant{Type: GranteeGroup, URI: g.GroupURI, Permission: g.Permission})
		}
	}
	return out
}

// IsPublicGrant reports whether g grants to everyone or to every
// authenticated user (what Block/IgnorePublicAcls call public).
func IsPublicGrant(g ACLGrant) bool {
	return g.Type == GranteeGroup && (g.URI == AllUsersURI || g.URI == AuthenticatedUsersURI)
}

// IsPublicACL reports whether a stored ACL or a canned name grants anything publicly.
func IsPublicACL(stored string) bool {
	for _, g := range DecodeACL(stored) {
		if IsPublicGrant(g) {
			return true
		}
	}
	return false
}

// bucketPermActions and objectPermActions: which actions each ACL
// permission grants, from the S3 user guide's "Mapping of ACL permissions
// and access policy permissions".
var bucketPermActions = map[string][]string{
	PermRead:     {ActionListBucket, "s3:ListBucketVersions", ActionListBucketMultipartUploads},
	PermWrite:    {ActionPutObject, ActionDeleteObject, "s3:DeleteObjectVersion", ActionAbortMultipartUpload, ActionListMultipartUploadParts},
	PermReadACP:  {ActionGetBucketAcl},
	PermWriteACP: {ActionPutBucketAcl},
}

var objectPermActions = map[string][]string{
	PermRead:     {ActionGetObject, "s3:GetObjectVersion", ActionGetObjectAttributes, "s3:GetObjectVersionAttributes"},
	PermReadACP:  {ActionGetObjectAcl, "s3:GetObjectVersionAcl"},
	PermWriteACP: {ActionPutObjectAcl, "s3:PutObjectVersionAcl"},
}

// grantsAllow reports whether the grants of one ACL give principal
// (authed: signed in) action. ignorePublic drops grants to the groups
// (IgnorePublicAcls).
func grantsAllow(grants []ACLGrant, principal string, authed bool, action string, perms map[string][]string, ignorePublic bool) bool {
	for _, g := range grants {
		switch {
		case g.Type == GranteeUser && authed && g.ID == principal:
		case g.Type == GranteeGroup && g.URI == AllUsersURI && !ignorePublic:
		case g.Type == GranteeGroup && g.URI == AuthenticatedUsersURI && authed && !ignorePublic:
		default:
			continue
		}
		if g.Permission == PermFullControl {
			for _, acts := range perms {
				if containsFold(acts, action) {
					return true
				}
			}
			continue
		}
		if containsFold(perms[g.Permission], action) {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

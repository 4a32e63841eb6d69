package authz

import "sort"

// Grantee groups and permissions of S3 ACL documents, for rendering
// GetBucketAcl/GetObjectAcl and reading PutBucketAcl/PutObjectAcl bodies.
const (
	AllUsersURI           = "http://acs.amazonaws.com/groups/global/AllUsers"
	AuthenticatedUsersURI = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"

	PermFullControl = "FULL_CONTROL"
	PermRead        = "READ"
	PermWrite       = "WRITE"
)

// Grant is one entry of an ACL. Exactly one of Owner (the resource owner,
// a CanonicalUser grantee) and GroupURI is set.
type Grant struct {
	Owner      bool
	GroupURI   string
	Permission string
}

// Grants expands a canned ACL to the grant list S3 shows for it.
func Grants(canned string) []Grant {
	g := []Grant{{Owner: true, Permission: PermFullControl}}
	switch canned {
	case ACLPublicRead:
		g = append(g, Grant{GroupURI: AllUsersURI, Permission: PermRead})
	case ACLPublicReadWrite:
		g = append(g, Grant{GroupURI: AllUsersURI, Permission: PermRead},
			Grant{GroupURI: AllUsersURI, Permission: PermWrite})
	case ACLAuthenticatedRead:
		g = append(g, Grant{GroupURI: AuthenticatedUsersURI, Permission: PermRead})
	}
	return g
}

// CannedFromGrants maps an ACL document (as sent to PutBucketAcl or
// PutObjectAcl) back to the canned ACL it is equal to. Grant lists that no
// canned ACL expresses (grants to other named users, READ_ACP, ...) give
// ok=false; frontend/s3 answers those with NotImplemented.
func CannedFromGrants(grants []Grant) (string, bool) {
	key := func(gs []Grant) string {
		var parts []string
		seen := map[Grant]bool{}
		for _, g := range gs {
			if !seen[g] {
				seen[g] = true
				s := "owner"
				if !g.Owner {
					s = g.GroupURI
				}
				parts = append(parts, s+"|"+g.Permission)
			}
		}
		sort.Strings(parts)
		out := ""
		for _, p := range parts {
			out += p + ";"
		}
		return out
	}
	want := key(grants)
	for _, c := range []string{ACLPrivate, ACLPublicRead, ACLPublicReadWrite, ACLAuthenticatedRead} {
		if key(Grants(c)) == want {
			return c, true
		}
	}
	return "", false
}

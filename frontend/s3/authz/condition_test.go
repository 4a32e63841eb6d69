package authz

import (
	"testing"
)

// allowStmt is a public Allow of action on the bucket's objects and the
// bucket with the given Condition block.
func allowStmt(action, cond string) string {
	return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"` + action +
		`","Resource":["arn:aws:s3:::bkt","arn:aws:s3:::bkt/*"],"Condition":` + cond + `}]}`
}

// TestConditionOperators: each operator family against request contexts,
// including missing keys (false; true for negated operators and
// ...IfExists), as the IAM reference defines.
func TestConditionOperators(t *testing.T) {
	for _, tc := range []struct {
		name, action, cond string
		ctx                Context
		want               bool
	}{
		{"ip in", ActionGetObject, `{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"}}`, Context{"aws:sourceip": {"127.0.0.5"}}, true},
		{"ip out", ActionGetObject, `{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}`, Context{"aws:sourceip": {"127.0.0.5"}}, false},
		{"ip exact", ActionGetObject, `{"IpAddress":{"aws:SourceIp":["10.0.0.0/8","127.0.0.5"]}}`, Context{"aws:sourceip": {"127.0.0.5"}}, true},
		{"v6", ActionGetObject, `{"IpAddress":{"aws:SourceIp":"::1/128"}}`, Context{"aws:sourceip": {"::1"}}, true},
		{"not ip", ActionGetObject, `{"NotIpAddress":{"aws:SourceIp":"10.0.0.0/8"}}`, Context{"aws:sourceip": {"127.0.0.5"}}, true},
		{"not ip in", ActionGetObject, `{"NotIpAddress":{"aws:SourceIp":"127.0.0.0/8"}}`, Context{"aws:sourceip": {"127.0.0.5"}}, false},
		{"tls required, plain", ActionGetObject, `{"Bool":{"aws:SecureTransport":"true"}}`, Context{"aws:securetransport": {"false"}}, false},
		{"tls required, tls", ActionGetObject, `{"Bool":{"aws:SecureTransport":true}}`, Context{"aws:securetransport": {"true"}}, true},
		{"prefix eq", ActionListBucket, `{"StringEquals":{"s3:prefix":"home/"}}`, Context{"s3:prefix": {"home/"}}, true},
		{"prefix eq other", ActionListBucket, `{"StringEquals":{"s3:prefix":"home/"}}`, Context{"s3:prefix": {"etc/"}}, false},
		{"prefix missing", ActionListBucket, `{"StringEquals":{"s3:prefix":"home/"}}`, Context{}, false},
		{"prefix ne missing", ActionListBucket, `{"StringNotEquals":{"s3:prefix":"home/"}}`, Context{}, true},
		{"prefix like", ActionListBucket, `{"StringLike":{"s3:prefix":["home/*","pub/?"]}}`, Context{"s3:prefix": {"home/alice/x"}}, true},
		{"prefix like ?", ActionListBucket, `{"StringLike":{"s3:prefix":["pub/?"]}}`, Context{"s3:prefix": {"pub/ab"}}, false},
		{"prefix notlike", ActionListBucket, `{"StringNotLike":{"s3:prefix":"secret*"}}`, Context{"s3:prefix": {"secret/x"}}, false},
		{"like ifexists missing", ActionListBucket, `{"StringLikeIfExists":{"s3:prefix":"home/*"}}`, Context{}, true},
		{"like ifexists present", ActionListBucket, `{"StringLikeIfExists":{"s3:prefix":"home/*"}}`, Context{"s3:prefix": {"x"}}, false},
		{"ignorecase", ActionListBucket, `{"StringEqualsIgnoreCase":{"s3:delimiter":"X"}}`, Context{"s3:delimiter": {"x"}}, true},
		{"acl", ActionPutObject, `{"StringEquals":{"s3:x-amz-acl":"bucket-owner-full-control"}}`, Context{"s3:x-amz-acl": {"bucket-owner-full-control"}}, true},
		{"acl wrong", ActionPutObject, `{"StringEquals":{"s3:x-amz-acl":"bucket-owner-full-control"}}`, Context{"s3:x-amz-acl": {"public-read"}}, false},
		{"max-keys le", ActionListBucket, `{"NumericLessThanEquals":{"s3:max-keys":"10"}}`, Context{"s3:max-keys": {"10"}}, true},
		{"max-keys gt", ActionListBucket, `{"NumericLessThanEquals":{"s3:max-keys":10}}`, Context{"s3:max-keys": {"11"}}, false},
		{"max-keys missing", ActionListBucket, `{"NumericLessThan":{"s3:max-keys":10}}`, Context{}, false},
		{"numeric ne", ActionListBucket, `{"NumericNotEquals":{"s3:max-keys":10}}`, Context{"s3:max-keys": {"11"}}, true},
		{"after", ActionGetObject, `{"DateGreaterThan":{"aws:CurrentTime":"2020-01-01T00:00:00Z"}}`, Context{"aws:currenttime": {"2026-01-01T00:00:00Z"}}, true},
		{"not yet", ActionGetObject, `{"DateGreaterThan":{"aws:CurrentTime":"2030-01-01T00:00:00Z"}}`, Context{"aws:currenttime": {"2026-01-01T00:00:00Z"}}, false},
		{"before", ActionGetObject, `{"DateLessThan":{"aws:CurrentTime":"2030-01-01"}}`, Context{"aws:currenttime": {"2026-01-01T00:00:00Z"}}, true},
		{"epoch", ActionGetObject, `{"DateLessThan":{"aws:EpochTime":"1000"}}`, Context{"aws:epochtime": {"999"}}, true},
		{"username", ActionGetObject, `{"StringEquals":{"aws:username":"alice"}}`, Context{"aws:username": {"alice"}}, true},
		{"username var", ActionListBucket, `{"StringLike":{"s3:prefix":"home/${aws:username}/*"}}`, Context{"aws:username": {"alice"}, "s3:prefix": {"home/alice/docs"}}, true},
		{"username var other", ActionListBucket, `{"StringLike":{"s3:prefix":"home/${aws:username}/*"}}`, Context{"aws:username": {"bob"}, "s3:prefix": {"home/alice/docs"}}, false},
		{"null true", ActionListBucket, `{"Null":{"s3:delimiter":"true"}}`, Context{}, true},
		{"null true present", ActionListBucket, `{"Null":{"s3:delimiter":"true"}}`, Context{"s3:delimiter": {"/"}}, false},
		{"null false", ActionListBucket, `{"Null":{"s3:delimiter":"false"}}`, Context{"s3:delimiter": {"/"}}, true},
		{"and of keys", ActionListBucket, `{"StringEquals":{"s3:prefix":"a","s3:delimiter":"/"}}`, Context{"s3:prefix": {"a"}}, false},
		{"and of ops", ActionListBucket, `{"StringEquals":{"s3:prefix":"a"},"Bool":{"aws:SecureTransport":"true"}}`, Context{"s3:prefix": {"a"}, "aws:securetransport": {"true"}}, true},
		{"forall", ActionPutObject, `{"ForAllValues:StringEquals":{"s3:x-amz-grant-read":["id=a","id=b"]}}`, Context{"s3:x-amz-grant-read": {"id=a", "id=b"}}, true},
		{"forall one out", ActionPutObject, `{"ForAllValues:StringEquals":{"s3:x-amz-grant-read":["id=a"]}}`, Context{"s3:x-amz-grant-read": {"id=a", "id=c"}}, false},
		{"forany", ActionPutObject, `{"ForAnyValue:StringEquals":{"s3:x-amz-grant-read":["id=c"]}}`, Context{"s3:x-amz-grant-read": {"id=a", "id=c"}}, true},
	} {
		p := mustPolicy(t, allowStmt(tc.action, tc.cond))
		got := Allowed(Request{Principal: "", Action: tc.action, Bucket: "bkt", Key: "k", BucketOwner: "o", Policy: p, Context: tc.ctx})
		if got != tc.want {
			t.Errorf("%s: allowed=%v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestNotElements: NotPrincipal, NotAction and NotResource apply to what
// they do not list; a Deny beats an Allow.
func TestNotElements(t *testing.T) {
	p := mustPolicy(t, `{"Statement":[
	 {"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::bkt/*"},
	 {"Effect":"Deny","NotPrincipal":{"AWS":["alice"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::bkt/alice/*"},
	 {"Effect":"Deny","Principal":"*","NotAction":["s3:GetObject","s3:PutObject"],"Resource":"arn:aws:s3:::bkt/*"},
	 {"Effect":"Deny","Principal":{"AWS":"bob"},"Action":"s3:PutObject","NotResource":"arn:aws:s3:::bkt/bob/*"}]}`)
	for _, tc := range []struct {
		who, action, key string
		want             bool
	}{
		{"alice", ActionGetObject, "alice/x", true},
		{"bob", ActionGetObject, "alice/x", false},
		{"", ActionGetObject, "alice/x", false},
		{"bob", ActionGetObject, "other", true},
		{"bob", ActionDeleteObject, "other", false}, // NotAction deny
		{"bob", ActionPutObject, "bob/x", true},
		{"bob", ActionPutObject, "else/x", false}, // NotResource deny
		{"carol", ActionPutObject, "else/x", true},
	} {
		got := Allowed(Request{Principal: tc.who, Action: tc.action, Bucket: "bkt", Key: tc.key, BucketOwner: "o", Policy: p})
		if got != tc.want {
			t.Errorf("%s %s %s: %v, want %v", tc.who, tc.action, tc.key, got, tc.want)
		}
	}
	// The owner is bound by the explicit deny too.
	if Allowed(Request{Principal: "o", Action: ActionDeleteObject, Bucket: "bkt", Key: "k", BucketOwner: "o", Policy: p}) {
		t.Error("owner escaped an explicit deny")
	}
}

// TestGrantLists: full ACL documents grant exactly the mapped actions,
// IgnorePublicACLs and ACLsDisabled switch them off, and a Deny wins.
func TestGrantLists(t *testing.T) {
	bucketACL := EncodeACL([]ACLGrant{
		{Type: GranteeUser, ID: "bob", Permission: PermRead},
		{Type: GranteeUser, ID: "carol", Permission: PermWrite},
		{Type: GranteeUser, ID: "dave", Permission: PermReadACP},
		{Type: GranteeGroup, URI: AllUsersURI, Permission: PermWriteACP},
	})
	objACL := EncodeACL([]ACLGrant{
		{Type: GranteeGroup, URI: AuthenticatedUsersURI, Permission: PermRead},
		{Type: GranteeUser, ID: "erin", Permission: PermFullControl},
	})
	if bucketACL == "" || bucketACL[0] != '{' || objACL[0] != '{' {
		t.Fatalf("encoded %q %q", bucketACL, objACL)
	}
	if got := EncodeACL([]ACLGrant{{Type: GranteeGroup, URI: AllUsersURI, Permission: PermRead}}); got != ACLPublicRead {
		t.Errorf("a canned-equivalent list is stored as %q", got)
	}
	for _, tc := range []struct {
		who, action string
		want        bool
	}{
		{"bob", ActionListBucket, true},
		{"bob", ActionPutObject, false},
		{"bob", ActionGetObject, true}, // object ACL: AuthenticatedUsers READ
		{"", ActionGetObject, false},
		{"carol", ActionPutObject, true},
		{"carol", ActionDeleteObject, true},
		{"carol", ActionListBucket, false},
		{"dave", ActionGetBucketAcl, true},
		{"dave", ActionPutBucketAcl, true}, // AllUsers WRITE_ACP
		{"", ActionPutBucketAcl, true},
		{"erin", ActionGetObjectAcl, true},
		{"erin", ActionPutObjectAcl, true},
		{"bob", ActionGetObjectAcl, false},
	} {
		r := Request{Principal: tc.who, Action: tc.action, Bucket: "bkt", Key: "k", BucketOwner: "o", ObjectOwner: "o", BucketACL: bucketACL, ObjectACL: objACL}
		if got := Allowed(r); got != tc.want {
			t.Errorf("%q %s: %v, want %v", tc.who, tc.action, got, tc.want)
		}
	}
	r := Request{Principal: "bob", Action: ActionGetObject, Bucket: "bkt", Key: "k", BucketOwner: "o", ObjectACL: objACL}
	r.IgnorePublicACLs = true
	if Allowed(r) {
		t.Error("IgnorePublicAcls kept an AuthenticatedUsers grant")
	}
	r = Request{Principal: "erin", Action: ActionGetObject, Bucket: "bkt", Key: "k", BucketOwner: "o", ObjectACL: objACL, ObjectOwner: "erin", ACLsDisabled: true}
	if Allowed(r) {
		t.Error("BucketOwnerEnforced: a grant (or object ownership) still allowed")
	}
	r = Request{Action: ActionGetObject, Bucket: "bkt", Key: "k", BucketOwner: "o", BucketACL: ACLPublicRead, IgnorePublicACLs: true}
	if Allowed(r) {
		t.Error("IgnorePublicAcls kept canned public-read")
	}
	deny := mustPolicy(t, `{"Statement":{"Effect":"Deny","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::bkt"}}`)
	if Allowed(Request{Principal: "bob", Action: ActionListBucket, Bucket: "bkt", BucketOwner: "o", BucketACL: bucketACL, Policy: deny}) {
		t.Error("an ACL grant beat an explicit deny")
	}
}

// TestPublicPolicy: IsPublic and RestrictPublicBuckets.
func TestPublicPolicy(t *testing.T) {
	pub := mustPolicy(t, `{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::bkt/*"}}`)
	ipOnly := mustPolicy(t, allowStmt("s3:GetObject", `{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"}}`))
	anyIP := mustPolicy(t, allowStmt("s3:GetObject", `{"IpAddress":{"aws:SourceIp":"0.0.0.0/0"}}`))
	named := mustPolicy(t, `{"Statement":{"Effect":"Allow","Principal":{"AWS":"bob"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::bkt/*"}}`)
	for _, tc := range []struct {
		p    *Policy
		want bool
	}{{pub, true}, {ipOnly, false}, {anyIP, true}, {named, false}} {
		if tc.p.IsPublic() != tc.want {
			t.Errorf("IsPublic(%+v) != %v", tc.p.Statements, tc.want)
		}
	}
	r := Request{Action: ActionGetObject, Bucket: "bkt", Key: "k", BucketOwner: "o", Policy: pub}
	if !Allowed(r) {
		t.Fatal("public policy did not allow anonymous")
	}
	r.RestrictPublicBuckets = true
	if Allowed(r) {
		t.Error("RestrictPublicBuckets let anonymous in through a public policy")
	}
	r.Principal = "bob"
	if !Allowed(r) {
		t.Error("RestrictPublicBuckets refused a signed-in user")
	}
}

// TestVersionActionsAreObjectActions: a policy on bucket/key/* and an
// object's READ grant cover the version actions of that object.
func TestVersionActionsAreObjectActions(t *testing.T) {
	p := mustPolicy(t, `{"Statement":{"Effect":"Allow","Principal":{"AWS":"bob"},"Action":["s3:GetObjectVersion","s3:DeleteObjectVersion"],"Resource":"arn:aws:s3:::bkt/pub/*"}}`)
	for _, a := range []string{"s3:GetObjectVersion", "s3:DeleteObjectVersion"} {
		if !Allowed(Request{Principal: "bob", Action: a, Bucket: "bkt", Key: "pub/x", BucketOwner: "o", Policy: p}) {
			t.Errorf("%s on pub/x refused", a)
		}
		if Allowed(Request{Principal: "bob", Action: a, Bucket: "bkt", Key: "priv/x", BucketOwner: "o", Policy: p}) {
			t.Errorf("%s on priv/x allowed", a)
		}
	}
	acl := EncodeACL([]ACLGrant{{Type: GranteeUser, ID: "carol", Permission: PermRead}})
	if !Allowed(Request{Principal: "carol", Action: "s3:GetObjectVersion", Bucket: "bkt", Key: "k", BucketOwner: "o", ObjectACL: acl}) {
		t.Error("object READ grant does not cover s3:GetObjectVersion")
	}
}

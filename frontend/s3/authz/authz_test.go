package authz

import (
	"errors"
	"strings"
	"testing"
)

func mustPolicy(t *testing.T, doc string) *Policy {
	t.Helper()
	p, err := ParsePolicy([]byte(doc), "bkt")
	if err != nil {
		t.Fatalf("ParsePolicy: %v\n%s", err, doc)
	}
	return p
}

func TestAllowedACLs(t *testing.T) {
	base := Request{Bucket: "bkt", Key: "k", BucketOwner: "owner"}
	type tc struct {
		name      string
		principal string
		admin     bool
		action    string
		bucketACL string
		objectACL string
		objOwner  string
		want      bool
	}
	cases := []tc{
		{"owner reads", "owner", false, ActionGetObject, "", "", "", true},
		{"owner deletes bucket", "owner", false, ActionDeleteBucket, "", "", "", true},
		{"admin anything", "root", true, ActionPutBucketAcl, "", "", "", true},
		{"other private read", "bob", false, ActionGetObject, ACLPrivate, "", "", false},
		{"other private list", "bob", false, ActionListBucket, "", "", "", false},
		{"anon private", "", false, ActionGetObject, "", "", "", false},
		{"anon public-read get", "", false, ActionGetObject, ACLPublicRead, "", "", true},
		{"anon public-read list", "", false, ActionListBucket, ACLPublicRead, "", "", true},
		{"anon public-read put", "", false, ActionPutObject, ACLPublicRead, "", "", false},
		{"anon public-read acl", "", false, ActionGetBucketAcl, ACLPublicRead, "", "", false},
		{"anon public-rw put", "", false, ActionPutObject, ACLPublicReadWrite, "", "", true},
		{"anon public-rw delete", "", false, ActionDeleteObject, ACLPublicReadWrite, "", "", true},
		{"anon public-rw delete bucket", "", false, ActionDeleteBucket, ACLPublicReadWrite, "", "", false},
		{"anon public-rw put acl", "", false, ActionPutBucketAcl, ACLPublicReadWrite, "", "", false},
		{"anon auth-read", "", false, ActionGetObject, ACLAuthenticatedRead, "", "", false},
		{"user auth-read", "bob", false, ActionGetObject, ACLAuthenticatedRead, "", "", true},
		{"user auth-read put", "bob", false, ActionPutObject, ACLAuthenticatedRead, "", "", false},
		{"object public-read", "", false, ActionGetObject, "", ACLPublicRead, "", true},
		{"object public-read no list", "", false, ActionListBucket, "", ACLPublicRead, "", false},
		{"object auth-read anon", "", false, ActionGetObject, "", ACLAuthenticatedRead, "", false},
		{"object auth-read user", "bob", false, ActionGetObject, "", ACLAuthenticatedRead, "", true},
		{"object public-rw no put", "", false, ActionPutObject, "", ACLPublicReadWrite, "", false},
		{"object owner", "bob", false, ActionPutObjectAcl, "", "", "bob", true},
		{"object owner not bucket", "bob", false, ActionDeleteBucket, "", "", "bob", false},
		{"anon object owner empty", "", false, ActionGetObject, "", "", "", false},
		{"bucket-owner-full-control is private", "bob", false, ActionGetObject, "", ACLBucketOwnerFullControl, "", false},
	}
	for _, c := range cases {
		r := base
		r.Principal, r.Admin, r.Action, r.BucketACL, r.ObjectACL, r.ObjectOwner = c.principal, c.admin, c.action, c.bucketACL, c.objectACL, c.objOwner
		if got := Allowed(r); got != c.want {
			t.Errorf("%s: Allowed=%v want %v (%+v)", c.name, got, c.want, r)
		}
	}
	// Service-level actions.
	if !Allowed(Request{Principal: "bob", Action: ActionListAllMyBuckets}) || Allowed(Request{Action: ActionListAllMyBuckets}) {
		t.Error("ListAllMyBuckets: signed-in users only")
	}
	if !Allowed(Request{Principal: "bob", Action: ActionCreateBucket, Bucket: "new"}) || Allowed(Request{Action: ActionCreateBucket, Bucket: "new"}) {
		t.Error("CreateBucket: signed-in users only")
	}
}

func TestAllowedPolicy(t *testing.T) {
	p := mustPolicy(t, `{
	  "Version": "2012-10-17",
	  "Statement": [
	    {"Sid": "PublicRead", "Effect": "Allow", "Principal": "*", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::bkt/public/*"},
	    {"Effect": "Allow", "Principal": {"AWS": ["bob", "arn:aws:iam::123456789012:user/carol"]}, "Action": ["s3:Put*", "s3:ListBucket"], "Resource": ["arn:aws:s3:::bkt", "arn:aws:s3:::bkt/*"]},
	    {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:*", "Resource": "arn:aws:s3:::bkt/secret/*"},
	    {"Effect": "Deny", "Principal": {"AWS": "mallory"}, "Action": "*", "Resource": "arn:aws:s3:::bkt*"},
	    {"Effect": "Allow", "Principal": {"AWS": "dave"}, "Action": "s3:getobject", "Resource": "arn:aws:s3:::bkt/doc?.txt"}
	  ]
	}`)
	req := func(principal, action, key string) Request {
		return Request{Principal: principal, Action: action, Bucket: "bkt", Key: key, BucketOwner: "owner", Policy: p}
	}
	cases := []struct {
		r    Request
		want bool
	}{
		{req("", ActionGetObject, "public/a.txt"), true},
		{req("", ActionGetObject, "private/a.txt"), false},
		{req("", ActionListBucket, ""), false},
		{req("bob", ActionPutObject, "x/y"), true},
		{req("bob", ActionPutObjectAcl, "x/y"), true},
		{req("carol", ActionPutObject, "x"), true},
		{req("carol", ActionListBucket, ""), true},
		{req("bob", ActionDeleteObject, "x"), false},
		{req("bob", ActionPutObject, "secret/x"), false},
		{req("owner", ActionGetObject, "secret/x"), false}, // explicit deny beats ownership
		{req("owner", ActionGetObject, "other"), true},
		{req("owner", ActionPutBucketPolicy, ""), true}, // policy management always allowed
		{req("owner", ActionDeleteBucketPolicy, ""), true},
		{req("mallory", ActionGetObject, "public/a.txt"), false},
		{req("dave", ActionGetObject, "doc1.txt"), true},
		{req("dave", ActionGetObject, "doc12.txt"), false},
		{req("dave", ActionGetObject, "public/doc1.txt"), true},
	}
	for _, c := range cases {
		if got := Allowed(c.r); got != c.want {
			t.Errorf("%s %s %q: Allowed=%v want %v", c.r.Principal, c.r.Action, c.r.Key, got, c.want)
		}
	}
	admin := req("root", ActionGetObject, "secret/x")
	admin.Admin = true
	if Allowed(admin) {
		t.Error("explicit deny must also bind admins")
	}
	admin.Action = ActionDeleteBucketPolicy
	if !Allowed(admin) {
		t.Error("admin must be able to delete a locking policy")
	}
	// Deny-all policy cannot lock the owner out of fixing it.
	lock := mustPolicy(t, `{"Statement":{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::bkt","arn:aws:s3:::bkt/*"]}}`)
	r := Request{Principal: "owner", BucketOwner: "owner", Bucket: "bkt", Policy: lock}
	for _, a := range []string{ActionGetBucketPolicy, ActionPutBucketPolicy, ActionDeleteBucketPolicy} {
		r.Action = a
		if !Allowed(r) {
			t.Errorf("owner locked out of %s", a)
		}
	}
	r.Action = ActionListBucket
	if Allowed(r) {
		t.Error("deny-all did not deny ListBucket")
	}
	// Deny beats a public ACL too.
	r = Request{Principal: "", Action: ActionGetObject, Bucket: "bkt", Key: "k", BucketOwner: "owner", BucketACL: ACLPublicRead, Policy: lock}
	if Allowed(r) {
		t.Error("deny did not beat public-read")
	}
}

func TestParsePolicyRejects(t *testing.T) {
	stmt := func(extra string) string {
		return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::bkt/*"` + extra + `}]}`
	}
	bad := map[string]string{
		"not json":          `{`,
		"trailing":          stmt("") + `x`,
		"array top":         `[]`,
		"no statement":      `{"Version":"2012-10-17"}`,
		"empty statement":   `{"Statement":[]}`,
		"bad version":       `{"Version":"2020-01-01","Statement":[]}`,
		"unknown top":       `{"Foo":1,"Statement":[]}`,
		"unknown operator":  stmt(`,"Condition":{"StringSortOf":{"aws:username":"bob"}}`),
		"unknown set":       stmt(`,"Condition":{"ForSomeValues:StringLike":{"s3:prefix":"a"}}`),
		"null ifexists":     stmt(`,"Condition":{"NullIfExists":{"s3:prefix":"true"}}`),
		"bad key":           stmt(`,"Condition":{"StringEquals":{"ec2:Region":"x"}}`),
		"bad cidr":          stmt(`,"Condition":{"IpAddress":{"aws:SourceIp":"300.1.2.3/8"}}`),
		"bad date":          stmt(`,"Condition":{"DateGreaterThan":{"aws:CurrentTime":"yesterday"}}`),
		"bad number":        stmt(`,"Condition":{"NumericLessThan":{"s3:max-keys":"ten"}}`),
		"bad bool":          stmt(`,"Condition":{"Bool":{"aws:SecureTransport":"maybe"}}`),
		"empty values":      stmt(`,"Condition":{"StringEquals":{"s3:prefix":[]}}`),
		"condition array":   stmt(`,"Condition":[]`),
		"both principals":   stmt(`,"NotPrincipal":{"AWS":"bob"}`),
		"both actions":      stmt(`,"NotAction":"s3:PutObject"`),
		"both resources":    stmt(`,"NotResource":"arn:aws:s3:::bkt/x"`),
		"unknown field":     stmt(`,"Foo":"bar"`),
		"bad effect":        `{"Statement":[{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::bkt/*"}]}`,
		"no principal":      `{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::bkt/*"}]}`,
		"service principal": `{"Statement":[{"Effect":"Allow","Principal":{"Service":"x"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::bkt/*"}]}`,
		"bad action":        `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"ec2:RunInstances","Resource":"arn:aws:s3:::bkt/*"}]}`,
		"empty action list": `{"Statement":[{"Effect":"Allow","Principal":"*","Action":[],"Resource":"arn:aws:s3:::bkt/*"}]}`,
		"other bucket":      `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}]}`,
		"not an arn":        `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"bkt/*"}]}`,
		"no resource":       `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject"}]}`,
		"principal string":  `{"Statement":[{"Effect":"Allow","Principal":"bob","Action":"s3:GetObject","Resource":"arn:aws:s3:::bkt/*"}]}`,
		"too large":         `{"Statement":[` + strings.Repeat(" ", MaxPolicySize) + `]}`,
	}
	for name, doc := range bad {
		_, err := ParsePolicy([]byte(doc), "bkt")
		var pe *PolicyError
		if !errors.As(err, &pe) || pe.Code != "MalformedPolicy" {
			t.Errorf("%s: want MalformedPolicy, got %v", name, err)
		}
	}
	// Accepted forms.
	for _, doc := range []string{
		stmt(""),
		`{"Statement":{"Effect":"Deny","Principal":{"AWS":"*"},"Action":"*","Resource":"arn:aws:s3:::bkt"}}`,
		stmt(`,"Condition":{"IpAddress":{"aws:SourceIp":["192.0.2.0/24","::1"]},"StringLikeIfExists":{"s3:prefix":"home/*"},"Bool":{"aws:SecureTransport":false},"NumericLessThanEquals":{"s3:max-keys":10},"DateGreaterThan":{"aws:CurrentTime":"2020-01-01T00:00:00Z"},"ForAnyValue:StringEquals":{"s3:x-amz-acl":"private"},"Null":{"s3:delimiter":"true"}}`),
		`{"Statement":[{"Effect":"Deny","NotPrincipal":{"AWS":"bob"},"NotAction":"s3:Get*","NotResource":"arn:aws:s3:::bkt/public/*"}]}`,
		`{"Id":"x","Version":"2008-10-17","Statement":[{"Sid":"s","Effect":"Allow","Principal":{"AWS":["a","arn:aws:iam::1:user/path/b"]},"Action":["s3:Get*","s3:List?ucket"],"Resource":["arn:aws:s3:::b?t/*"]}]}`,
	} {
		if _, err := ParsePolicy([]byte(doc), "bkt"); err != nil {
			t.Errorf("rejected %s: %v", doc, err)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*c", "abbbc", true}, {"a*c", "abbb", false},
		{"a?c", "abc", true}, {"a?c", "ac", false}, {"*/x/*", "a/x/b", true}, {"**a", "bba", true},
		{"a*b*c", "axbyc", true}, {"a*b*c", "axbyd", false}, {"", "", true}, {"", "a", false},
	} {
		if got := globMatch(c.p, c.s); got != c.want {
			t.Errorf("glob(%q,%q)=%v", c.p, c.s, got)
		}
	}
}

func TestCannedACLs(t *testing.T) {
	for _, n := range []string{ACLPrivate, ACLPublicRead, ACLPublicReadWrite, ACLAuthenticatedRead, ACLBucketOwnerFullControl} {
		if !ValidCannedACL(n) {
			t.Errorf("%s invalid", n)
		}
	}
	for _, n := range []string{"", "public", "PRIVATE", "log-delivery-write"} {
		if ValidCannedACL(n) {
			t.Errorf("%q valid", n)
		}
	}
	for _, n := range []string{ACLPrivate, ACLPublicRead, ACLPublicReadWrite, ACLAuthenticatedRead} {
		if got, ok := CannedFromGrants(Grants(n)); !ok || got != n {
			t.Errorf("round trip %s: %s %v", n, got, ok)
		}
	}
	if _, ok := CannedFromGrants([]Grant{{GroupURI: AllUsersURI, Permission: PermWrite}}); ok {
		t.Error("write-only grants mapped to a canned ACL")
	}
	for _, a := range Actions {
		if !strings.HasPrefix(a, "s3:") {
			t.Errorf("action %s", a)
		}
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::bkt/*"}]}`))
	f.Add([]byte(`{"Statement":{"Effect":"Deny","Principal":{"AWS":["a","arn:aws:iam::1:user/b"]},"Action":["s3:*"],"Resource":"arn:aws:s3:::bkt"}}`))
	f.Add([]byte(`{"Statement":[{"Condition":{}}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := ParsePolicy(doc, "bkt")
		if err != nil {
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Code != "MalformedPolicy" {
				t.Fatalf("error %v is not MalformedPolicy", err)
			}
			return
		}
		if len(p.Statements) == 0 {
			t.Fatal("accepted a policy without statements")
		}
		for _, st := range p.Statements {
			if (st.Effect != "Allow" && st.Effect != "Deny") || len(st.Principals) == 0 || len(st.Actions) == 0 || len(st.Resources) == 0 {
				t.Fatalf("incomplete statement accepted: %+v", st)
			}
		}
		// Evaluating never panics.
		Allowed(Request{Principal: "bob", Action: ActionGetObject, Bucket: "bkt", Key: "k", BucketOwner: "o", Policy: p})
		Allowed(Request{Action: ActionListBucket, Bucket: "bkt", Policy: p})
	})
}

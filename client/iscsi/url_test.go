package iscsi

import "testing"

func TestParseURL(t *testing.T) {
	a, err := ParseURL("iscsi://bob:s3cret@127.0.0.1:3261/iqn.2026-11.org.tristore:vol/3?target_user=t&target_secret=ts&data_digest=crc32c")
	if err != nil {
		t.Fatal(err)
	}
	if a.Portal != "127.0.0.1:3261" || a.Target != "iqn.2026-11.org.tristore:vol" || a.LUN != 3 || !a.HasLUN ||
		a.User != "bob" || a.Secret != "s3cret" || a.TargetUser != "t" || a.TargetSecret != "ts" || !a.DataDigest || a.HeaderDigest {
		t.Fatalf("parsed %+v", a)
	}
	if s := a.String(); s != "iscsi://bob@127.0.0.1:3261/iqn.2026-11.org.tristore:vol/3" {
		t.Fatalf("String() = %q", s)
	}
	d, err := ParseURL("iscsi://localhost")
	if err != nil || d.Portal != "localhost:3260" || d.Target != "" || d.HasLUN {
		t.Fatalf("discovery URL: %+v %v", d, err)
	}
	for _, bad := range []string{
		"http://h/x", "iscsi:///iqn/1", "iscsi://h/iqn/x", "iscsi://h/a/b/c",
		"iscsi://h/iqn/1?bogus=1", "iscsi://h/iqn/1?target_user=x", "iscsi://h/iqn/1?target_user=x&target_secret=y",
		"iscsi://h/iqn/1?header_digest=md5",
	} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

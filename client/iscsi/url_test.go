package iscsi

import (
	"testing"
	"time"
)

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
	for v, want := range map[string]time.Duration{"5": 5 * time.Second, "1500ms": 1500 * time.Millisecond, "2m": 2 * time.Minute} {
		r, err := ParseURL("iscsi://h/iqn.x/0?replacement_timeout=" + v)
		if err != nil || r.ReplacementTimeout != want || ConfigFromAddress(r).ReplacementTimeout != want {
			t.Errorf("replacement_timeout=%s: %+v %v", v, r, err)
		}
	}
	d, err := ParseURL("iscsi://localhost")
	if err != nil || d.Portal != "localhost:3260" || d.Target != "" || d.HasLUN {
		t.Fatalf("discovery URL: %+v %v", d, err)
	}
	for _, bad := range []string{
		"http://h/x", "iscsi:///iqn/1", "iscsi://h/iqn/x", "iscsi://h/a/b/c",
		"iscsi://h/iqn/1?bogus=1", "iscsi://h/iqn/1?target_user=x", "iscsi://h/iqn/1?target_user=x&target_secret=y",
		"iscsi://h/iqn/1?header_digest=md5", "iscsi://h/iqn/1?replacement_timeout=0", "iscsi://h/iqn/1?replacement_timeout=-1s",
		"iscsi://h/iqn/1?replacement_timeout=soon",
	} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// FuzzParseURL: any input either fails cleanly or yields an address whose
// String() parses back to the same portal, target and LUN.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"iscsi://h/iqn.x/1", "iscsi://u:p@[::1]:3261/iqn.a:b/0?data_digest=crc32c",
		"iscsi://h", "iscsi://h/iqn/99999999999999999999", "iscsi://%zz", "iscsi://h/a/b?target_user=x&target_secret=y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseURL(s)
		if err != nil {
			return
		}
		b, err := ParseURL(a.String())
		if err != nil {
			t.Fatalf("%q -> %q does not parse: %v", s, a.String(), err)
		}
		if b.Portal != a.Portal || b.Target != a.Target || b.LUN != a.LUN || b.HasLUN != a.HasLUN {
			t.Fatalf("%q: round trip %+v -> %+v", s, a, b)
		}
	})
}

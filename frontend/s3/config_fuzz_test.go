package s3

import (
	"bytes"
	"encoding/xml"
	"testing"
)

// FuzzLifecycleConfig: whatever parseLifecycle accepts is stored as its
// re-marshalled form, which the worker and GET parse again: that form
// must be accepted too and marshal to the same bytes (a stored document
// that no longer parses would silently switch a bucket's rules off).
func FuzzLifecycleConfig(f *testing.F) {
	for _, s := range []string{
		`<LifecycleConfiguration><Rule><ID>a</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>3</Days></Expiration></Rule></LifecycleConfiguration>`,
		`<LifecycleConfiguration><Rule><Filter><And><Prefix>p</Prefix><Tag><Key>k</Key><Value>v</Value></Tag><ObjectSizeLessThan>9</ObjectSizeLessThan></And></Filter><Status>Disabled</Status><Expiration><Date>2030-01-01T00:00:00Z</Date></Expiration></Rule></LifecycleConfiguration>`,
		`<LifecycleConfiguration><Rule><Prefix></Prefix><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload><NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays><NewerNoncurrentVersions>3</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule></LifecycleConfiguration>`,
		`<LifecycleConfiguration><Rule><Filter/><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule></LifecycleConfiguration>`,
		`<LifecycleConfiguration><Rule><Filter/><Status>Enabled</Status><Expiraton/></Rule></LifecycleConfiguration>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseLifecycle(b)
		if err != nil {
			return
		}
		out, err := xml.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		c2, err := parseLifecycle(out)
		if err != nil {
			t.Fatalf("stored form %s refused: %v", out, err)
		}
		out2, _ := xml.Marshal(c2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}

// FuzzCORSConfig: the same property for CORS documents.
func FuzzCORSConfig(f *testing.F) {
	f.Add([]byte(corsDoc))
	f.Add([]byte(`<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>`))
	f.Add([]byte(`<CORSConfiguration><CORSRule><AllowedOrigin> http://a </AllowedOrigin><AllowedMethod> PUT</AllowedMethod><MaxAgeSeconds>0</MaxAgeSeconds></CORSRule></CORSConfiguration>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCORS(b)
		if err != nil {
			return
		}
		out, err := xml.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		c2, err := parseCORS(out)
		if err != nil {
			t.Fatalf("stored form %s refused: %v", out, err)
		}
		out2, _ := xml.Marshal(c2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}

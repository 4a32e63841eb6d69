package s3

import (
	"bytes"
	"testing"
)

// TestUnsetSettingsAnswerLikeS3 pins the answers to reading a bucket or
// object setting that was never set (before: 501 NotImplemented for all).
func TestUnsetSettingsAnswerLikeS3(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/ubk", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/ubk/obj", []byte("x"), nil), 200)
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/ubk?cors", 404, "NoSuchCORSConfiguration"},
		{"/ubk?lifecycle", 404, "NoSuchLifecycleConfiguration"},
		{"/ubk?encryption", 404, "ServerSideEncryptionConfigurationNotFoundError"},
		{"/ubk?object-lock", 404, "ObjectLockConfigurationNotFoundError"},
		{"/ubk?website", 404, "NoSuchWebsiteConfiguration"},
		{"/ubk?replication", 404, "ReplicationConfigurationNotFoundError"},
		{"/ubk?ownershipControls", 404, "OwnershipControlsNotFoundError"},
		{"/ubk?publicAccessBlock", 404, "NoSuchPublicAccessBlockConfiguration"},
		{"/ubk?tagging", 404, "NoSuchTagSet"},
		{"/ubk?policyStatus", 404, "NoSuchBucketPolicy"},
		{"/ubk?analytics&id=a", 404, "NoSuchConfiguration"},
		{"/ubk/obj?retention", 400, "InvalidRequest"},
		{"/ubk/obj?legal-hold", 400, "InvalidRequest"},
		{"/ubk/nokey?retention", 404, "NoSuchKey"},
		{"/nobkt?cors", 404, "NoSuchBucket"},
		{"/nobkt?tagging", 404, "NoSuchBucket"},
	} {
		t.Run(c.path, func(t *testing.T) { wantErr(t, ts.do(t, "GET", c.path, nil, nil), c.status, c.code) })
	}
	for _, c := range []struct{ path, want string }{
		{"/ubk?requestPayment", "<Payer>BucketOwner</Payer>"},
		{"/ubk?versioning", "<VersioningConfiguration"},
		{"/ubk?logging", "<BucketLoggingStatus"},
		{"/ubk?notification", "<NotificationConfiguration"},
		{"/ubk?accelerate", "<AccelerateConfiguration"},
		{"/ubk?metrics", "<ListMetricsConfigurationsResult"},
		{"/ubk/obj?tagging", "<TagSet></TagSet>"},
	} {
		r := ts.do(t, "GET", c.path, nil, nil)
		if r.status != 200 || !bytes.Contains(r.body, []byte(c.want)) {
			t.Errorf("GET %s: %d %s, want 200 with %s", c.path, r.status, r.body, c.want)
		}
	}
	// Deleting a setting that cannot be set is a no-op success, as in S3.
	for _, p := range []string{"/ubk?cors", "/ubk?lifecycle", "/ubk?encryption", "/ubk?website", "/ubk?replication", "/ubk?tagging"} {
		wantStatus(t, ts.do(t, "DELETE", p, nil, nil), 204)
	}
	// Setting one stays 501: the client must not believe a rule is in force.
	for _, p := range []string{"/ubk?website", "/ubk?replication"} {
		t.Run("PUT"+p, func(t *testing.T) { wantErr(t, ts.do(t, "PUT", p, []byte("<X/>"), nil), 501, "NotImplemented") })
	}
	// Versioning, Object Lock and default encryption (sse_test.go) can be set: a wrong document is MalformedXML.
	for _, p := range []string{"/ubk?encryption", "/ubk?object-lock", "/ubk?versioning", "/ubk/obj?retention", "/ubk/obj?legal-hold"} {
		t.Run("PUT"+p, func(t *testing.T) { wantErr(t, ts.do(t, "PUT", p, []byte("<X/>"), nil), 400, "MalformedXML") })
	}
}

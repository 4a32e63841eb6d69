package s3

import (
	"encoding/xml"
	"net/http"

	"github.com/tristore/tristore/frontend/s3/authz"
)

// Bucket and object settings tristore does not implement (CORS, lifecycle,
// encryption, website, replication, object lock, ...) can never be set, so
// reading one answers exactly what S3 answers for a bucket where it was
// never set: the "not configured" error or the empty/default document.
// Tools probe these settings (aws s3api, terraform, rclone, s3cmd info)
// and break on 501. Setting one stays 501 NotImplemented: the client must
// not believe a rule is in force. Deleting one is a no-op success (204),
// as in S3 when none is set: the state the client asks for already holds.

// unsetSetting is one never-configured bucket sub-resource.
type unsetSetting struct {
	sub    string // query sub-resource
	get    string // operation name of the GET
	action string // IAM action of the GET
	err    *APIError
	doc    any // answered with 200 when err is nil
	del    string
	delAct string
}

type requestPaymentXML struct {
	XMLName xml.Name `xml:"RequestPaymentConfiguration"`
	NS      string   `xml:"xmlns,attr"`
	Payer   string   `xml:"Payer"`
}

type emptyDoc struct {
	XMLName xml.Name
	NS      string `xml:"xmlns,attr"`
}

func emptyXML(name string) emptyDoc { return emptyDoc{XMLName: xml.Name{Local: name}, NS: s3NS} }

var unsetSettings = []unsetSetting{
	{"cors", "GetBucketCors", "s3:GetBucketCORS",
		&APIError{"NoSuchCORSConfiguration", http.StatusNotFound, "The CORS configuration does not exist"}, nil,
		"DeleteBucketCors", "s3:PutBucketCORS"},
	{"lifecycle", "GetBucketLifecycleConfiguration", "s3:GetLifecycleConfiguration",
		&APIError{"NoSuchLifecycleConfiguration", http.StatusNotFound, "The lifecycle configuration does not exist"}, nil,
		"DeleteBucketLifecycle", "s3:PutLifecycleConfiguration"},
	{"website", "GetBucketWebsite", "s3:GetBucketWebsite",
		&APIError{"NoSuchWebsiteConfiguration", http.StatusNotFound, "The specified bucket does not have a website configuration"}, nil,
		"DeleteBucketWebsite", "s3:DeleteBucketWebsite"},
	{"replication", "GetBucketReplication", "s3:GetReplicationConfiguration",
		&APIError{"ReplicationConfigurationNotFoundError", http.StatusNotFound, "The replication configuration was not found"}, nil,
		"DeleteBucketReplication", "s3:PutReplicationConfiguration"},
	{"requestPayment", "GetBucketRequestPayment", "s3:GetBucketRequestPayment",
		nil, requestPaymentXML{NS: s3NS, Payer: "BucketOwner"}, "", ""},
	{"logging", "GetBucketLogging", "s3:GetBucketLogging", nil, emptyXML("BucketLoggingStatus"), "", ""},
	{"notification", "GetBucketNotificationConfiguration", "s3:GetBucketNotification", nil, emptyXML("NotificationConfiguration"), "", ""},
	{"accelerate", "GetBucketAccelerateConfiguration", "s3:GetAccelerateConfiguration", nil, emptyXML("AccelerateConfiguration"), "", ""},
}

// listConfigs are the per-id bucket configurations (analytics, metrics,
// inventory, intelligent-tiering): without ?id the GET lists them (none),
// with ?id it names one that does not exist.
var listConfigs = []struct{ sub, get, list, action, result string }{
	{"analytics", "GetBucketAnalyticsConfiguration", "ListBucketAnalyticsConfigurations", "s3:GetAnalyticsConfiguration", "ListBucketAnalyticsConfigurationResult"},
	{"metrics", "GetBucketMetricsConfiguration", "ListBucketMetricsConfigurations", "s3:GetMetricsConfiguration", "ListMetricsConfigurationsResult"},
	{"inventory", "GetBucketInventoryConfiguration", "ListBucketInventoryConfigurations", "s3:GetInventoryConfiguration", "ListInventoryConfigurationsResult"},
	{"intelligent-tiering", "GetBucketIntelligentTieringConfiguration", "ListBucketIntelligentTieringConfigurations", "s3:GetIntelligentTieringConfiguration", "ListBucketIntelligentTieringConfigurationsResult"},
}

type listConfigsXML struct {
	XMLName     xml.Name
	NS          string `xml:"xmlns,attr"`
	IsTruncated bool   `xml:"IsTruncated"`
}

// errNoSuchConfiguration: a GET ?analytics&id=x (and the like) for an id
// that does not exist, which is every id here.
var errNoSuchConfiguration = &APIError{"NoSuchConfiguration", http.StatusNotFound, "The specified configuration does not exist."}

// errMissingObjectLock is S3's answer to retention and legal-hold
// requests (and x-amz-object-lock-* headers) in a bucket without Object Lock.
var errMissingObjectLock = ErrInvalidRequest.withMessage("Bucket is missing Object Lock Configuration")

// routeUnset returns the operation for a GET or DELETE of a setting that
// can never be set, or nil when r is no such request.
func routeUnset(r *http.Request, bucket, key string) *operation {
	if bucket == "" {
		return nil
	}
	q := r.URL.Query()
	if key != "" {
		return nil // object retention and legal hold: objectlock.go
	}
	for _, u := range unsetSettings {
		if _, ok := q[u.sub]; !ok {
			continue
		}
		switch {
		case r.Method == http.MethodGet:
			return &operation{u.get, u.action, func(s *Server, w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
				if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
					return err
				}
				if u.err != nil {
					return u.err
				}
				return writeXML(w, u.doc)
			}}
		case r.Method == http.MethodDelete && u.del != "":
			return &operation{u.del, u.delAct, func(s *Server, w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
				if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
					return err
				}
				w.WriteHeader(http.StatusNoContent)
				return nil
			}}
		}
		return nil
	}
	if r.Method != http.MethodGet {
		return nil
	}
	if _, ok := q["policyStatus"]; ok {
		return &operation{"GetBucketPolicyStatus", "s3:GetBucketPolicyStatus", (*Server).getBucketPolicyStatus}
	}
	for _, c := range listConfigs {
		if _, ok := q[c.sub]; !ok {
			continue
		}
		if _, ok := q["id"]; ok {
			return &operation{c.get, c.action, func(s *Server, w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
				if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
					return err
				}
				return errNoSuchConfiguration
			}}
		}
		return &operation{c.list, c.action, func(s *Server, w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
			if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
				return err
			}
			return writeXML(w, listConfigsXML{XMLName: xml.Name{Local: c.result}, NS: s3NS})
		}}
	}
	return nil
}

// getBucketPolicyStatus: NoSuchBucketPolicy without a policy, as S3.
// With one, whether it is public needs S3's policy analysis, which
// tristore does not do: 501 rather than a guess.
// getBucketPolicyStatus answers whether the policy is public in S3's
// sense (authz.Policy.IsPublic, the analysis BlockPublicPolicy uses).
func (s *Server) getBucketPolicyStatus(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	doc, err := s.bucketPolicy(r, rc)
	if err != nil {
		return err
	}
	pol, err := authz.ParsePolicy([]byte(doc), rc.bucket)
	if err != nil {
		return err
	}
	return writeXML(w, policyStatusXML{NS: s3NS, IsPublic: pol.IsPublic()})
}

type policyStatusXML struct {
	XMLName  xml.Name `xml:"PolicyStatus"`
	NS       string   `xml:"xmlns,attr"`
	IsPublic bool     `xml:"IsPublic"`
}

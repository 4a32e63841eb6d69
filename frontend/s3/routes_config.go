package s3

import "net/http"

// routeConfig routes the bucket settings that are implemented in their own
// files (cors.go, lifecycle.go). route asks it first, so these
// sub-resources never reach the "never set" answers of config.go or the
// NotImplemented list of router.go.
func routeConfig(r *http.Request, bucket, key string) *operation {
	if bucket == "" || key != "" {
		return nil
	}
	if op := routeEncryption(r, bucket, key); op != nil { // sse_config.go
		return op
	}
	q := r.URL.Query()
	if _, ok := q["cors"]; ok {
		switch r.Method {
		case http.MethodGet:
			return opGetBucketCors
		case http.MethodPut:
			return opPutBucketCors
		case http.MethodDelete:
			return opDeleteBucketCors
		}
	}
	if _, ok := q["lifecycle"]; ok {
		switch r.Method {
		case http.MethodGet:
			return opGetBucketLifecycle
		case http.MethodPut:
			return opPutBucketLifecycle
		case http.MethodDelete:
			return opDeleteBucketLifecycle
		}
	}
	return nil
}

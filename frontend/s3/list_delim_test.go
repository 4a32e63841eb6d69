package s3

import (
	"encoding/xml"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/storetest"
)

// TestListAnyDelimiter pins listings with delimiters other than "/" (501
// NotImplemented before): V1 and V2, page by page with max-keys counting
// keys and common prefixes together, against storetest's S3 model.
func TestListAnyDelimiter(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/dlm", nil, nil), 200)
	keys := []string{"a-1", "a-2", "a-b-c", "a.x", "a/b-c", "a/b/c", "ab", "abab-1", "b", "b-", "c/x-y/z", "é-1", "é-2", "zz"}
	for _, k := range keys {
		wantStatus(t, ts.do(t, "PUT", "/dlm/"+k, []byte(k), nil), 200)
	}
	type page struct{ objs, cps []string }
	for _, delim := range []string{"-", "ab", "é", "/", "b/", "-1"} {
		for _, prefix := range []string{"", "a", "a-", "ab", "c/"} {
			wo, wc, _, _ := storetest.ListModel(keys, store.ListOptions{Prefix: prefix, Delimiter: delim, Limit: 1000})
			for _, maxKeys := range []int{1, 2, 3, 1000} {
				for _, v2 := range []bool{true, false} {
					var gotO, gotC []string
					tok, marker := "", ""
					for n := 0; ; n++ {
						if n > 50 {
							t.Fatalf("delim %q prefix %q max %d v2=%v: no end after 50 pages", delim, prefix, maxKeys, v2)
						}
						q := url.Values{"delimiter": {delim}, "prefix": {prefix}, "max-keys": {fmt.Sprint(maxKeys)}}
						if v2 {
							q.Set("list-type", "2")
							if tok != "" {
								q.Set("continuation-token", tok)
							}
						} else if marker != "" {
							q.Set("marker", marker)
						}
						r := ts.do(t, "GET", "/dlm?"+q.Encode(), nil, nil)
						wantStatus(t, r, 200)
						var res listV1Result // the V1 and V2 fields used here have the same names
						var res2 listV2Result
						if err := xml.Unmarshal(r.body, &res); err != nil {
							t.Fatal(err)
						}
						xml.Unmarshal(r.body, &res2)
						if len(res.Contents)+len(res.CommonPrefixes) > maxKeys {
							t.Fatalf("page of %d entries over max-keys %d: %s", len(res.Contents)+len(res.CommonPrefixes), maxKeys, r.body)
						}
						if v2 && res2.KeyCount != len(res.Contents)+len(res.CommonPrefixes) {
							t.Fatalf("KeyCount %d: %s", res2.KeyCount, r.body)
						}
						if res.Delimiter != delim {
							t.Fatalf("Delimiter %q echoed as %q", delim, res.Delimiter)
						}
						for _, c := range res.Contents {
							gotO = append(gotO, c.Key)
						}
						for _, c := range res.CommonPrefixes {
							gotC = append(gotC, c.Prefix)
						}
						if !res.IsTruncated {
							break
						}
						tok, marker = res2.NextContinuationToken, res.NextMarker
					}
					if fmt.Sprint(gotO) != fmt.Sprint(wo) || fmt.Sprint(gotC) != fmt.Sprint(wc) {
						t.Fatalf("delim %q prefix %q max-keys %d v2=%v:\n got %q %q\nwant %q %q", delim, prefix, maxKeys, v2, gotO, gotC, wo, wc)
					}
				}
			}
		}
	}
	// encoding-type=url encodes the delimiter and the prefixes it makes.
	r := ts.do(t, "GET", "/dlm?list-type=2&encoding-type=url&delimiter="+url.QueryEscape("é"), nil, nil)
	if !strings.Contains(string(r.body), "<Prefix>%C3%A9</Prefix>") || !strings.Contains(string(r.body), "<Delimiter>%C3%A9</Delimiter>") {
		t.Fatalf("url-encoded delimiter listing: %s", r.body)
	}
}

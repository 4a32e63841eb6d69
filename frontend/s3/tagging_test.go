package s3

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

func tagDoc(pairs ...string) []byte {
	var b strings.Builder
	b.WriteString(`<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet>`)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(&b, "<Tag><Key>%s</Key><Value>%s</Value></Tag>", pairs[i], pairs[i+1])
	}
	b.WriteString("</TagSet></Tagging>")
	return []byte(b.String())
}

// getTags reads a GET ?tagging answer as a map.
func getTags(t *testing.T, ts *testServer, path string) map[string]string {
	t.Helper()
	if !strings.Contains(path, "?") {
		path += "?tagging"
	}
	r := ts.do(t, "GET", path, nil, nil)
	wantStatus(t, r, 200)
	var doc tagging
	if err := xml.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, r.body)
	}
	m := map[string]string{}
	for _, tg := range doc.TagSet {
		m[tg.Key] = tg.Value
	}
	return m
}

func TestObjectTagging(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/tgb", nil, nil), 200)
	// x-amz-tagging on PUT, URL-encoded; count on HEAD and GET.
	hdr := map[string]string{"X-Amz-Tagging": "project=blue&note=" + url.QueryEscape("a b/c@d") + "&empty="}
	wantStatus(t, ts.do(t, "PUT", "/tgb/o", []byte("data"), hdr), 200)
	for _, m := range []string{"HEAD", "GET"} {
		if r := ts.do(t, m, "/tgb/o", nil, nil); r.header.Get("X-Amz-Tagging-Count") != "3" {
			t.Fatalf("%s x-amz-tagging-count %q, want 3", m, r.header.Get("X-Amz-Tagging-Count"))
		}
	}
	want := map[string]string{"project": "blue", "note": "a b/c@d", "empty": ""}
	if got := getTags(t, ts, "/tgb/o"); !reflect.DeepEqual(got, want) {
		t.Fatalf("tags %v, want %v", got, want)
	}
	// PutObjectTagging replaces the whole set; content and ETag stay.
	before := ts.do(t, "HEAD", "/tgb/o", nil, nil).header.Get("ETag")
	wantStatus(t, ts.do(t, "PUT", "/tgb/o?tagging", tagDoc("k1", "v1", "k2", "v2"), nil), 200)
	if got := getTags(t, ts, "/tgb/o"); !reflect.DeepEqual(got, map[string]string{"k1": "v1", "k2": "v2"}) {
		t.Fatalf("after PutObjectTagging: %v", got)
	}
	if r := ts.do(t, "GET", "/tgb/o", nil, nil); string(r.body) != "data" || r.header.Get("ETag") != before {
		t.Fatalf("PutObjectTagging changed the object: %q %s (was %s)", r.body, r.header.Get("ETag"), before)
	}
	// Survives a restart: a fresh store over the same tree sees the tags.
	st2, err := posix.Open(ts.st.(store.LocalPather).Root(), posix.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	oi, err := st2.Stat(context.Background(), "tgb", "o")
	st2.Close()
	if err != nil || !reflect.DeepEqual(oi.Meta.Tags, map[string]string{"k1": "v1", "k2": "v2"}) {
		t.Fatalf("reopened store: tags %v err %v", oi.Meta.Tags, err)
	}

	// Bad tag sets: InvalidTag, and nothing changes.
	many := []string{}
	for i := range 11 {
		many = append(many, fmt.Sprintf("k%d", i), "v")
	}
	// More than 10 tags is BadRequest in AWS, the others InvalidTag.
	wantErr(t, ts.do(t, "PUT", "/tgb/o?tagging", tagDoc(many...), nil), 400, "BadRequest")
	wantErr(t, ts.do(t, "PUT", "/tgb/many", []byte("x"), map[string]string{"X-Amz-Tagging": "a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9&j=10&k=11"}), 400, "BadRequest")
	wantErr(t, ts.do(t, "GET", "/tgb/many", nil, nil), 404, "NoSuchKey")
	for name, doc := range map[string][]byte{
		"long key":    tagDoc(strings.Repeat("k", 129), "v"),
		"long value":  tagDoc("k", strings.Repeat("v", 257)),
		"duplicate":   tagDoc("k", "a", "k", "b"),
		"empty key":   tagDoc("", "v"),
		"aws: prefix": tagDoc("aws:x", "v"),
		"bad char":    tagDoc("k", "v#1"),
	} {
		t.Run(name, func(t *testing.T) { wantErr(t, ts.do(t, "PUT", "/tgb/o?tagging", doc, nil), 400, "InvalidTag") })
	}
	wantErr(t, ts.do(t, "PUT", "/tgb/o?tagging", []byte("<Tagging><TagSet>"), nil), 400, "MalformedXML")
	// Limits count characters, not bytes: 128 two-byte letters are fine.
	wantStatus(t, ts.do(t, "PUT", "/tgb/o?tagging", tagDoc(strings.Repeat("é", 128), strings.Repeat("ü", 256)), nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/tgb/o?tagging", tagDoc("k1", "v1", "k2", "v2"), nil), 200)
	wantErr(t, ts.do(t, "PUT", "/tgb/bad", []byte("x"), map[string]string{"X-Amz-Tagging": "a=1&a=2"}), 400, "InvalidTag")
	wantErr(t, ts.do(t, "GET", "/tgb/bad", nil, nil), 404, "NoSuchKey")
	wantErr(t, ts.do(t, "GET", "/tgb/missing?tagging", nil, nil), 404, "NoSuchKey")
	wantErr(t, ts.do(t, "PUT", "/tgb/missing?tagging", tagDoc("a", "b"), nil), 404, "NoSuchKey")

	// CopyObject: COPY (default) keeps the source's tags, REPLACE takes the header's.
	wantStatus(t, ts.do(t, "PUT", "/tgb/c1", nil, map[string]string{"X-Amz-Copy-Source": "/tgb/o"}), 200)
	if got := getTags(t, ts, "/tgb/c1"); !reflect.DeepEqual(got, map[string]string{"k1": "v1", "k2": "v2"}) {
		t.Fatalf("copied tags %v", got)
	}
	wantStatus(t, ts.do(t, "PUT", "/tgb/c2", nil, map[string]string{"X-Amz-Copy-Source": "/tgb/o",
		"X-Amz-Tagging-Directive": "REPLACE", "X-Amz-Tagging": "new=1"}), 200)
	if got := getTags(t, ts, "/tgb/c2"); !reflect.DeepEqual(got, map[string]string{"new": "1"}) {
		t.Fatalf("replaced tags %v", got)
	}
	// Metadata REPLACE alone keeps the tags (the directives are independent).
	wantStatus(t, ts.do(t, "PUT", "/tgb/c3", nil, map[string]string{"X-Amz-Copy-Source": "/tgb/o",
		"X-Amz-Metadata-Directive": "REPLACE", "X-Amz-Meta-A": "b"}), 200)
	if got := getTags(t, ts, "/tgb/c3"); !reflect.DeepEqual(got, map[string]string{"k1": "v1", "k2": "v2"}) {
		t.Fatalf("tags after metadata REPLACE %v", got)
	}
	wantErr(t, ts.do(t, "PUT", "/tgb/c4", nil, map[string]string{"X-Amz-Copy-Source": "/tgb/o", "X-Amz-Tagging-Directive": "MOVE"}), 400, "InvalidArgument")

	// CreateMultipartUpload with x-amz-tagging: the completed object has them.
	r := ts.do(t, "POST", "/tgb/mp?uploads", nil, map[string]string{"X-Amz-Tagging": "mp=yes"})
	wantStatus(t, r, 200)
	var init struct {
		UploadID string `xml:"UploadId"`
	}
	xml.Unmarshal(r.body, &init)
	p := ts.do(t, "PUT", "/tgb/mp?partNumber=1&uploadId="+init.UploadID, []byte("part"), nil)
	wantStatus(t, p, 200)
	done := fmt.Sprintf("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part></CompleteMultipartUpload>", p.header.Get("ETag"))
	wantStatus(t, ts.do(t, "POST", "/tgb/mp?uploadId="+init.UploadID, []byte(done), nil), 200)
	if got := getTags(t, ts, "/tgb/mp"); !reflect.DeepEqual(got, map[string]string{"mp": "yes"}) {
		t.Fatalf("multipart tags %v", got)
	}

	// DeleteObjectTagging: 204, then an empty TagSet and no count header.
	wantStatus(t, ts.do(t, "DELETE", "/tgb/o?tagging", nil, nil), 204)
	if r := ts.do(t, "GET", "/tgb/o?tagging", nil, nil); !bytes.Contains(r.body, []byte("<TagSet></TagSet>")) {
		t.Fatalf("after delete: %s", r.body)
	}
	if h := ts.do(t, "HEAD", "/tgb/o", nil, nil).header.Get("X-Amz-Tagging-Count"); h != "" {
		t.Fatalf("count after delete %q", h)
	}
}

func TestBucketTagging(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/btg", nil, nil), 200)
	wantErr(t, ts.do(t, "GET", "/btg?tagging", nil, nil), 404, "NoSuchTagSet")
	wantStatus(t, ts.do(t, "PUT", "/btg?tagging", tagDoc("env", "prod", "team", "storage"), nil), 204)
	if got := getTags(t, ts, "/btg?tagging"); !reflect.DeepEqual(got, map[string]string{"env": "prod", "team": "storage"}) {
		t.Fatalf("bucket tags %v", got)
	}
	// 50 tags are allowed on a bucket, 51 are not.
	var pairs []string
	for i := range 51 {
		pairs = append(pairs, fmt.Sprintf("k%02d", i), "v")
	}
	wantErr(t, ts.do(t, "PUT", "/btg?tagging", tagDoc(pairs...), nil), 400, "InvalidTag")
	wantStatus(t, ts.do(t, "PUT", "/btg?tagging", tagDoc(pairs[:100]...), nil), 204)
	if got := getTags(t, ts, "/btg?tagging"); len(got) != 50 {
		t.Fatalf("%d bucket tags, want 50", len(got))
	}
	// The largest tag set S3 allows (~19 KB) is kept too (beyond an ext4
	// xattr: the store falls back to a file), and so is the largest object tag set.
	var big []string
	for i := range 50 {
		big = append(big, fmt.Sprintf("%03d", i)+strings.Repeat("k", 125), strings.Repeat("v", 256))
	}
	wantStatus(t, ts.do(t, "PUT", "/btg?tagging", tagDoc(big...), nil), 204)
	if got := getTags(t, ts, "/btg?tagging"); len(got) != 50 || got[big[98]] != big[99] {
		t.Fatalf("big bucket tag set: %d tags", len(got))
	}
	wantStatus(t, ts.do(t, "PUT", "/btg/o", []byte("x"), nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/btg/o?tagging", tagDoc(big[:20]...), nil), 200)
	if got := getTags(t, ts, "/btg/o"); len(got) != 10 || got[big[18]] != big[19] {
		t.Fatalf("big object tag set: %d tags", len(got))
	}
	wantStatus(t, ts.do(t, "PUT", "/btg?tagging", tagDoc(pairs[:100]...), nil), 204)
	wantErr(t, ts.do(t, "PUT", "/btg?tagging", tagDoc("a", "1", "a", "2"), nil), 400, "InvalidTag")
	wantErr(t, ts.do(t, "PUT", "/btg?tagging", tagDoc("a", "1"), map[string]string{"Content-MD5": "AAAAAAAAAAAAAAAAAAAAAA=="}), 400, "BadDigest")
	wantErr(t, ts.do(t, "PUT", "/btg?tagging", tagDoc("a", "1"), map[string]string{"X-Amz-Checksum-Crc32": "AAAAAA=="}), 400, "BadDigest")
	wantErr(t, ts.do(t, "PUT", "/btg?tagging", tagDoc("a", "1"), map[string]string{"X-Amz-Checksum-Crc32": "!!"}), 400, "InvalidDigest")
	wantStatus(t, ts.do(t, "DELETE", "/btg?tagging", nil, nil), 204)
	wantErr(t, ts.do(t, "GET", "/btg?tagging", nil, nil), 404, "NoSuchTagSet")
	wantErr(t, ts.do(t, "PUT", "/nob?tagging", tagDoc("a", "1"), nil), 404, "NoSuchBucket")
}

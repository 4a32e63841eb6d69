package s3

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tristore/tristore/store"
)

var (
	opListObjects   = &operation{"ListObjects", "s3:ListBucket", (*Server).listObjectsV1}
	opListObjectsV2 = &operation{"ListObjectsV2", "s3:ListBucket", (*Server).listObjectsV2}
)

// tokenPrefix marks our continuation tokens so that a token from another
// server (or garbage) is refused instead of silently restarting a listing.
const tokenPrefix = "t1\x00"

// encodeToken makes the opaque ListObjectsV2 continuation token: the
// store's NextAfter, base64url-encoded with a version prefix.
func encodeToken(after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + after))
}

// decodeToken reverses encodeToken; anything else is InvalidArgument.
func decodeToken(tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !strings.HasPrefix(string(b), tokenPrefix) {
		return "", ErrInvalidToken
	}
	after := string(b[len(tokenPrefix):])
	if len(after) > store.MaxKeyLen {
		return "", ErrInvalidToken
	}
	return after, nil
}

type objectXML struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
	Owner        *owner `xml:"Owner,omitempty"`
}

type prefixXML struct {
	Prefix string `xml:"Prefix"`
}

type listV2Result struct {
	XMLName               xml.Name    `xml:"ListBucketResult"`
	NS                    string      `xml:"xmlns,attr"`
	Name                  string      `xml:"Name"`
	Prefix                string      `xml:"Prefix"`
	Delimiter             string      `xml:"Delimiter,omitempty"`
	MaxKeys               int         `xml:"MaxKeys"`
	KeyCount              int         `xml:"KeyCount"`
	IsTruncated           bool        `xml:"IsTruncated"`
	ContinuationToken     string      `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string      `xml:"NextContinuationToken,omitempty"`
	StartAfter            string      `xml:"StartAfter,omitempty"`
	EncodingType          string      `xml:"EncodingType,omitempty"`
	Contents              []objectXML `xml:"Contents"`
	CommonPrefixes        []prefixXML `xml:"CommonPrefixes"`
}

type listV1Result struct {
	XMLName        xml.Name    `xml:"ListBucketResult"`
	NS             string      `xml:"xmlns,attr"`
	Name           string      `xml:"Name"`
	Prefix         string      `xml:"Prefix"`
	Marker         string      `xml:"Marker"`
	NextMarker     string      `xml:"NextMarker,omitempty"`
	MaxKeys        int         `xml:"MaxKeys"`
	Delimiter      string      `xml:"Delimiter,omitempty"`
	IsTruncated    bool        `xml:"IsTruncated"`
	EncodingType   string      `xml:"EncodingType,omitempty"`
	Contents       []objectXML `xml:"Contents"`
	CommonPrefixes []prefixXML `xml:"CommonPrefixes"`
}

// listParams are the options both listing versions share.
type listParams struct {
	prefix, delimiter string
	maxKeys           int
	encode            func(string) string
}

func readListParams(r *http.Request) (listParams, error) {
	q := r.URL.Query()
	p := listParams{prefix: q.Get("prefix"), delimiter: q.Get("delimiter"), encode: func(s string) string { return s }}
	var err error
	if p.maxKeys, err = intParam(r, "max-keys", 1000, 1000); err != nil {
		return p, err
	}
	switch et := q.Get("encoding-type"); et {
	case "":
	case "url":
		p.encode = urlEncodeKey
	default:
		return p, ErrInvalidArgument.withMessage("Invalid Encoding Method specified in Request")
	}
	return p, nil
}

// urlEncodeKey encodes like S3's encoding-type=url (form encoding, '/' kept).
func urlEncodeKey(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "%2F", "/")
}

// list runs one store listing page.
func (s *Server) list(r *http.Request, bucket string, p listParams, after string) (store.ListResult, error) {
	if p.maxKeys == 0 {
		// S3 answers max-keys=0 with an empty, untruncated page.
		if _, err := s.st.StatBucket(r.Context(), bucket); err != nil {
			return store.ListResult{}, err
		}
		return store.ListResult{}, nil
	}
	// Any delimiter, as S3: the store groups keys by it (a store that
	// cannot answers ErrNotSupported, which is 501 NotImplemented).
	return s.st.List(r.Context(), bucket, store.ListOptions{Prefix: p.prefix, Delimiter: p.delimiter, After: after, Limit: p.maxKeys})
}

func contents(res store.ListResult, p listParams, withOwner bool) ([]objectXML, []prefixXML) {
	objs := make([]objectXML, 0, len(res.Objects))
	var lastT time.Time
	lastS := ""
	for _, o := range res.Objects {
		o = plainInfo(o) // sse.go
		// Keys written together share their time: format it once.
		if lastS == "" || !o.ModTime.Equal(lastT) {
			lastT, lastS = o.ModTime, xmlTime(o.ModTime)
		}
		x := objectXML{Key: p.encode(o.Key), LastModified: lastS, ETag: `"` + o.ETag + `"`, Size: o.Size, StorageClass: "STANDARD"}
		if withOwner {
			x.Owner = &owner{o.Meta.Owner, o.Meta.Owner}
		}
		objs = append(objs, x)
	}
	var cps []prefixXML
	for _, cp := range res.CommonPrefixes {
		cps = append(cps, prefixXML{p.encode(cp)})
	}
	return objs, cps
}

func (s *Server) listObjectsV2(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	q := r.URL.Query()
	p, err := readListParams(r)
	if err != nil {
		return err
	}
	after := q.Get("start-after")
	tok := q.Get("continuation-token")
	if _, ok := q["continuation-token"]; ok {
		t, err := decodeToken(tok)
		if err != nil {
			return err
		}
		if t > after {
			after = t
		}
	}
	res, err := s.list(r, rc.bucket, p, after)
	if err != nil {
		return err
	}
	out := listV2Result{NS: s3NS, Name: rc.bucket, Prefix: p.encode(p.prefix), Delimiter: p.encode(p.delimiter),
		MaxKeys: p.maxKeys, IsTruncated: res.IsTruncated, ContinuationToken: tok,
		StartAfter: p.encode(q.Get("start-after")), EncodingType: q.Get("encoding-type")}
	out.Contents, out.CommonPrefixes = contents(res, p, q.Get("fetch-owner") == "true")
	out.KeyCount = len(out.Contents) + len(out.CommonPrefixes)
	if res.IsTruncated {
		out.NextContinuationToken = encodeToken(res.NextAfter)
	}
	return writeListXML(w, &out)
}

func (s *Server) listObjectsV1(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	q := r.URL.Query()
	p, err := readListParams(r)
	if err != nil {
		return err
	}
	marker := q.Get("marker")
	res, err := s.list(r, rc.bucket, p, marker)
	if err != nil {
		return err
	}
	out := listV1Result{NS: s3NS, Name: rc.bucket, Prefix: p.encode(p.prefix), Marker: p.encode(marker),
		MaxKeys: p.maxKeys, Delimiter: p.encode(p.delimiter), IsTruncated: res.IsTruncated, EncodingType: q.Get("encoding-type")}
	out.Contents, out.CommonPrefixes = contents(res, p, true)
	if res.IsTruncated {
		out.NextMarker = p.encode(res.NextAfter)
	}
	return writeListXML(w, &out)
}

package s3

import (
	"encoding/xml"
	"net/http"
)

// Buckets are never versioned (one file per key in the tree), so
// ListObjectVersions lists every object as its only, latest version
// "null" — what S3 itself returns for a bucket that never had versioning
// on. Tools that enumerate versions to empty a bucket rely on this.
var opListObjectVersions = &operation{"ListObjectVersions", "s3:ListBucketVersions", (*Server).listObjectVersions}

type versionXML struct {
	Key          string `xml:"Key"`
	VersionID    string `xml:"VersionId"`
	IsLatest     bool   `xml:"IsLatest"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
	Owner        owner  `xml:"Owner"`
}

type listVersionsResult struct {
	XMLName             xml.Name     `xml:"ListVersionsResult"`
	NS                  string       `xml:"xmlns,attr"`
	Name                string       `xml:"Name"`
	Prefix              string       `xml:"Prefix"`
	KeyMarker           string       `xml:"KeyMarker"`
	VersionIDMarker     string       `xml:"VersionIdMarker"`
	NextKeyMarker       string       `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string       `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int          `xml:"MaxKeys"`
	Delimiter           string       `xml:"Delimiter,omitempty"`
	IsTruncated         bool         `xml:"IsTruncated"`
	EncodingType        string       `xml:"EncodingType,omitempty"`
	Versions            []versionXML `xml:"Version"`
	CommonPrefixes      []prefixXML  `xml:"CommonPrefixes"`
}

func (s *Server) listObjectVersions(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	q := r.URL.Query()
	p, err := readListParams(r)
	if err != nil {
		return err
	}
	km := q.Get("key-marker")
	res, err := s.list(r, rc.bucket, p, km)
	if err != nil {
		return err
	}
	out := listVersionsResult{NS: s3NS, Name: rc.bucket, Prefix: p.encode(p.prefix), KeyMarker: p.encode(km),
		VersionIDMarker: q.Get("version-id-marker"), MaxKeys: p.maxKeys, Delimiter: p.encode(p.delimiter),
		IsTruncated: res.IsTruncated, EncodingType: q.Get("encoding-type")}
	for _, o := range res.Objects {
		out.Versions = append(out.Versions, versionXML{Key: p.encode(o.Key), VersionID: "null", IsLatest: true,
			LastModified: xmlTime(o.ModTime), ETag: `"` + o.ETag + `"`, Size: o.Size, StorageClass: "STANDARD",
			Owner: owner{o.Meta.Owner, o.Meta.Owner}})
	}
	for _, cp := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{p.encode(cp)})
	}
	if res.IsTruncated {
		out.NextKeyMarker = p.encode(res.NextAfter)
		out.NextVersionIDMarker = "null"
	}
	return writeXML(w, out)
}

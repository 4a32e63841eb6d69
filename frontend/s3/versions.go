package s3

import (
	"encoding/xml"
	"net/http"

	"github.com/tristore/tristore/store"
)

// ListObjectVersions lists versions and delete markers (store.Versioner).
// A store without versions lists every object as its only, latest version
// "null" — what S3 itself returns for a bucket that never had versioning
// on. Tools that enumerate versions to empty a bucket rely on this.
var opListObjectVersions = &operation{"ListObjectVersions", "s3:ListBucketVersions", (*Server).listObjectVersions}

// versionEntryXML is a <Version> or a <DeleteMarker> (XMLName says
// which), kept in one slice so the two interleave in key order as in S3.
type versionEntryXML struct {
	XMLName      xml.Name
	Key          string `xml:"Key"`
	VersionID    string `xml:"VersionId"`
	IsLatest     bool   `xml:"IsLatest"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag,omitempty"`
	Size         *int64 `xml:"Size,omitempty"`
	StorageClass string `xml:"StorageClass,omitempty"`
	Owner        owner  `xml:"Owner"`
}

type listVersionsResult struct {
	XMLName             xml.Name          `xml:"ListVersionsResult"`
	NS                  string            `xml:"xmlns,attr"`
	Name                string            `xml:"Name"`
	Prefix              string            `xml:"Prefix"`
	KeyMarker           string            `xml:"KeyMarker"`
	VersionIDMarker     string            `xml:"VersionIdMarker"`
	NextKeyMarker       string            `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string            `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int               `xml:"MaxKeys"`
	Delimiter           string            `xml:"Delimiter,omitempty"`
	IsTruncated         bool              `xml:"IsTruncated"`
	EncodingType        string            `xml:"EncodingType,omitempty"`
	Entries             []versionEntryXML `xml:",any"`
	CommonPrefixes      []prefixXML       `xml:"CommonPrefixes"`
}

func versionEntry(p listParams, o store.ObjectInfo) versionEntryXML {
	e := versionEntryXML{Key: p.encode(o.Key), VersionID: wireVersion(o), IsLatest: o.IsLatest,
		LastModified: xmlTime(o.ModTime), Owner: owner{o.Meta.Owner, o.Meta.Owner}}
	if o.DeleteMarker {
		e.XMLName.Local = "DeleteMarker"
		return e
	}
	e.XMLName.Local = "Version"
	o = plainInfo(o) // sse.go
	size := o.Size
	e.ETag, e.Size, e.StorageClass = `"`+o.ETag+`"`, &size, "STANDARD"
	return e
}

func (s *Server) listObjectVersions(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	q := r.URL.Query()
	p, err := readListParams(r)
	if err != nil {
		return err
	}
	km, vm := q.Get("key-marker"), q.Get("version-id-marker")
	if vm != "" && km == "" {
		return ErrInvalidArgument.withMessage("A version-id marker cannot be specified without a key marker.")
	}
	out := listVersionsResult{NS: s3NS, Name: rc.bucket, Prefix: p.encode(p.prefix), KeyMarker: p.encode(km),
		VersionIDMarker: vm, MaxKeys: p.maxKeys, Delimiter: p.encode(p.delimiter), EncodingType: q.Get("encoding-type")}
	v, ok := s.st.(store.Versioner)
	if !ok {
		if vm != "" && vm != "null" {
			return ErrInvalidVersionID
		}
		res, err := s.list(r, rc.bucket, p, km)
		if err != nil {
			return err
		}
		out.IsTruncated = res.IsTruncated
		for _, o := range res.Objects {
			o.IsLatest = true
			out.Entries = append(out.Entries, versionEntry(p, o))
		}
		for _, cp := range res.CommonPrefixes {
			out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{p.encode(cp)})
		}
		if res.IsTruncated {
			out.NextKeyMarker, out.NextVersionIDMarker = p.encode(res.NextAfter), "null"
		}
		return writeXML(w, out)
	}
	if p.maxKeys == 0 {
		if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
			return err
		}
		return writeXML(w, out)
	}
	res, err := v.ListVersions(r.Context(), rc.bucket, store.ListVersionsOptions{Prefix: p.prefix, Delimiter: p.delimiter,
		KeyMarker: km, VersionIDMarker: vm, Limit: p.maxKeys})
	if err != nil {
		return err
	}
	out.IsTruncated = res.IsTruncated
	for _, o := range res.Versions {
		out.Entries = append(out.Entries, versionEntry(p, o))
	}
	for _, cp := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{p.encode(cp)})
	}
	if res.IsTruncated {
		out.NextKeyMarker, out.NextVersionIDMarker = p.encode(res.NextKeyMarker), res.NextVersionIDMarker
	}
	return writeXML(w, out)
}

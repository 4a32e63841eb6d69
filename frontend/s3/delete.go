package s3

import (
	"encoding/xml"
	"net/http"

	"github.com/tristore/tristore/store"
)

var (
	opDeleteObject  = &operation{"DeleteObject", "s3:DeleteObject", (*Server).deleteObject}
	opDeleteObjects = &operation{"DeleteObjects", "", (*Server).deleteObjects} // authorised per key
)

// deleteObject removes one key (or, with versionId, one version).
// Deleting a missing key succeeds (204), as in S3; on a versioned bucket
// it adds a delete marker (versioning.go).
func (s *Server) deleteObject(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	vid, err := versionParam(r)
	if err != nil {
		return err
	}
	oi, err := s.deleteOne(r.Context(), rc, r, rc.key, vid)
	if err != nil {
		return err
	}
	h := w.Header()
	if oi.DeleteMarker {
		h.Set("X-Amz-Delete-Marker", "true")
	}
	if vid != "" {
		h.Set("X-Amz-Version-Id", vid)
	} else if oi.DeleteMarker {
		h.Set("X-Amz-Version-Id", wireVersion(oi))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteRequest is the body of DeleteObjects.
type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool     `xml:"Quiet"`
	Objects []struct {
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId"`
	} `xml:"Object"`
}

type deletedObject struct {
	Key                   string `xml:"Key"`
	VersionID             string `xml:"VersionId,omitempty"`
	DeleteMarker          bool   `xml:"DeleteMarker,omitempty"`
	DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
}

type deleteError struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
}

type deleteResult struct {
	XMLName xml.Name        `xml:"DeleteResult"`
	NS      string          `xml:"xmlns,attr"`
	Deleted []deletedObject `xml:"Deleted"`
	Errors  []deleteError   `xml:"Error"`
}

// maxDeleteKeys is S3's limit on keys per DeleteObjects request.
const maxDeleteKeys = 1000

// parseDeleteRequest decodes and checks a DeleteObjects body.
func parseDeleteRequest(b []byte) (*deleteRequest, error) {
	var req deleteRequest
	if err := xml.Unmarshal(b, &req); err != nil {
		return nil, ErrMalformedXML
	}
	if len(req.Objects) == 0 || len(req.Objects) > maxDeleteKeys {
		return nil, ErrMalformedXML
	}
	return &req, nil
}

// deleteObjects removes up to 1000 keys, reporting each result (only
// errors when Quiet). A missing key counts as deleted, as in S3. Each key
// is authorised on its own, so a policy denying some keys refuses only
// those (AccessDenied in the result), as S3 does.
func (s *Server) deleteObjects(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	b, err := readBody(r, maxXMLBody)
	if err != nil {
		return err
	}
	if cm := r.Header.Get("Content-MD5"); cm != "" {
		if err := checkContentMD5(cm, b); err != nil {
			return err
		}
	}
	req, err := parseDeleteRequest(b)
	if err != nil {
		return err
	}
	res := deleteResult{NS: s3NS}
	for _, o := range req.Objects {
		err := checkKey(o.Key)
		if err == nil && o.Key == "" {
			err = ErrInvalidKey
		}
		if err == nil {
			err = s.authorize(r.Context(), rc, "s3:DeleteObject", rc.bucket, o.Key)
		}
		var oi store.ObjectInfo
		if err == nil {
			oi, err = s.deleteOne(r.Context(), rc, r, o.Key, o.VersionID)
		}
		if err != nil {
			ae := toAPIError(err)
			res.Errors = append(res.Errors, deleteError{o.Key, o.VersionID, ae.Code, ae.Message})
			continue
		}
		if !req.Quiet {
			d := deletedObject{Key: o.Key, VersionID: o.VersionID, DeleteMarker: oi.DeleteMarker}
			if o.VersionID == "" && oi.DeleteMarker {
				d.DeleteMarkerVersionID = wireVersion(oi)
			}
			res.Deleted = append(res.Deleted, d)
		}
	}
	return writeXML(w, res)
}

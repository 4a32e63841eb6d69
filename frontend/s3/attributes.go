package s3

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"
)

// GetObjectAttributes (GET ?attributes): the attributes named in
// x-amz-object-attributes, from the object's stored metadata without
// reading its content.
var opGetObjectAttributes = &operation{"GetObjectAttributes", "s3:GetObjectAttributes", (*Server).getObjectAttributes}

type attrPartXML struct {
	partChecksumXML       // multipart.go: the part's checksum, for a COMPOSITE object
	PartNumber      int   `xml:"PartNumber"`
	Size            int64 `xml:"Size"`
}

type objectPartsXML struct {
	IsTruncated          bool          `xml:"IsTruncated"`
	MaxParts             int           `xml:"MaxParts"`
	NextPartNumberMarker int           `xml:"NextPartNumberMarker"`
	PartNumberMarker     int           `xml:"PartNumberMarker"`
	Parts                []attrPartXML `xml:"Part"`
	PartsCount           int           `xml:"PartsCount"`
}

type checksumXML struct {
	checksumFields
}

type objectAttributesXML struct {
	XMLName      xml.Name        `xml:"GetObjectAttributesResponse"`
	NS           string          `xml:"xmlns,attr"`
	ETag         string          `xml:"ETag,omitempty"`
	Checksum     *checksumXML    `xml:"Checksum,omitempty"`
	ObjectParts  *objectPartsXML `xml:"ObjectParts,omitempty"`
	StorageClass string          `xml:"StorageClass,omitempty"`
	ObjectSize   *int64          `xml:"ObjectSize,omitempty"`
}

var errBadAttributes = ErrInvalidArgument.withMessage("Invalid attribute name specified.")

func (s *Server) getObjectAttributes(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	want := map[string]bool{}
	for _, v := range r.Header.Values("X-Amz-Object-Attributes") {
		for _, a := range strings.Split(v, ",") {
			switch a = strings.TrimSpace(a); a {
			case "ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize":
				want[a] = true
			case "":
			default:
				return errBadAttributes
			}
		}
	}
	if len(want) == 0 {
		return ErrInvalidArgument.withMessage("The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty")
	}
	maxParts, err := headerInt(r, "X-Amz-Max-Parts", 1000, 1000)
	if err != nil {
		return err
	}
	marker, err := headerInt(r, "X-Amz-Part-Number-Marker", 0, 10000)
	if err != nil {
		return err
	}
	_, oi, err := s.subTarget(r.Context(), w, r, rc, "GetObjectAttributes")
	if err != nil {
		return err
	}
	oi = plainInfo(oi) // sse.go: an encrypted object's plaintext size and ETag
	if err := checkPreconditions(r.Header, "", oi, false); err != nil {
		return err
	}
	out := objectAttributesXML{NS: s3NS}
	if want["ETag"] {
		out.ETag = oi.ETag // unquoted, as S3 sends it here
	}
	composite := checksumType(oi.Meta.Checksums) == "COMPOSITE"
	if want["Checksum"] && len(oi.Meta.Checksums) > 0 {
		// A COMPOSITE checksum is given here without its "-N" suffix
		// (HEAD/GET and CompleteMultipartUpload carry it), as S3 does.
		sums := oi.Meta.Checksums
		if composite {
			sums = make(map[string]string, len(oi.Meta.Checksums))
			for alg, v := range oi.Meta.Checksums {
				sums[alg], _, _ = strings.Cut(v, "-")
			}
		}
		out.Checksum = &checksumXML{makeChecksumFields(sums)}
		out.Checksum.ChecksumType = checksumType(oi.Meta.Checksums)
	}
	if want["ObjectParts"] && len(oi.Parts) > 0 {
		op := &objectPartsXML{MaxParts: maxParts, PartNumberMarker: marker, PartsCount: len(oi.Parts)}
		var algs []string // the object's algorithms, whose part checksums a COMPOSITE object lists
		if composite {
			for alg := range oi.Meta.Checksums {
				algs = append(algs, alg)
			}
		}
		for _, p := range oi.Parts {
			if p.Number <= marker {
				continue
			}
			if len(op.Parts) == maxParts {
				op.IsTruncated = true
				break
			}
			ap := attrPartXML{PartNumber: p.Number, Size: p.Size}
			// Each part's checksum, as ListParts showed it (S3 lists them
			// for COMPOSITE objects only).
			ap.partChecksumXML = makePartChecksumXML(p.Checksums, algs...)
			op.Parts = append(op.Parts, ap)
			op.NextPartNumberMarker = p.Number
		}
		out.ObjectParts = op
	}
	if want["StorageClass"] {
		out.StorageClass = "STANDARD"
	}
	if want["ObjectSize"] {
		out.ObjectSize = &oi.Size
	}
	w.Header().Set("Last-Modified", oi.ModTime.UTC().Format(http.TimeFormat))
	return writeXML(w, out)
}

// headerInt reads a non-negative integer header with a default and a cap.
func headerInt(r *http.Request, name string, def, max int) (int, error) {
	v := r.Header.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, ErrInvalidArgument.withMessage(name + " must be a non-negative integer")
	}
	return min(n, max), nil
}

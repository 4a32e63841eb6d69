package s3

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"
)

// A 1,000-key listing page is about 200 KB of XML; encoding/xml (reflection
// per field, an escaping writer per string) was a quarter of the page's CPU
// time once the store's per-key work was cut (profile:
// docs/bench/profiles/s3-list-nested-*). The two listing results are
// therefore written by hand, byte for byte what xml.Marshal writes for
// them (TestListXMLMatchesMarshal checks that on random pages).

var listBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// writeListXML writes a listing result (*listV2Result or *listV1Result)
// as writeXML does, with its length.
func writeListXML(w http.ResponseWriter, v interface{ appendXML([]byte) []byte }) error {
	bp := listBufs.Get().(*[]byte)
	b := append((*bp)[:0], xml.Header...)
	b = v.appendXML(b)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b) // the status is sent; a failed write only means the client left
	if cap(b) <= 4<<20 {
		*bp = b
		listBufs.Put(bp)
	}
	return nil
}

// appendEscaped appends s escaped as xml.Marshal escapes character data.
func appendEscaped(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\'' && c != '&' && c != '<' && c != '>' {
			i++
			continue
		}
		r, width := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch r {
		case '"':
			esc = "&#34;"
		case '\'':
			esc = "&#39;"
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '\t':
			esc = "&#x9;"
		case '\n':
			esc = "&#xA;"
		case '\r':
			esc = "&#xD;"
		default:
			if !xmlChar(r) || r == utf8.RuneError && width == 1 {
				esc = "\uFFFD"
				break
			}
			i += width
			continue
		}
		b = append(b, s[last:i]...)
		b = append(b, esc...)
		i += width
		last = i
	}
	return append(b, s[last:]...)
}

// xmlChar is encoding/xml's isInCharacterRange.
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

func appendElem(b []byte, name, val string) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = appendEscaped(b, val)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

func appendElemOmit(b []byte, name, val string) []byte {
	if val == "" {
		return b
	}
	return appendElem(b, name, val)
}

func appendIntElem(b []byte, name string, v int64) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = strconv.AppendInt(b, v, 10)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

func appendBoolElem(b []byte, name string, v bool) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = strconv.AppendBool(b, v)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

func appendStart(b []byte, ns string) []byte {
	b = append(b, `<ListBucketResult xmlns="`...)
	b = appendEscaped(b, ns)
	return append(b, `">`...)
}

func appendContents(b []byte, objs []objectXML, cps []prefixXML) []byte {
	for i := range objs {
		o := &objs[i]
		b = append(b, "<Contents>"...)
		b = appendElem(b, "Key", o.Key)
		b = appendElem(b, "LastModified", o.LastModified)
		b = appendElem(b, "ETag", o.ETag)
		b = appendIntElem(b, "Size", o.Size)
		b = appendElem(b, "StorageClass", o.StorageClass)
		if o.Owner != nil {
			b = append(b, "<Owner>"...)
			b = appendElem(b, "ID", o.Owner.ID)
			b = appendElem(b, "DisplayName", o.Owner.DisplayName)
			b = append(b, "</Owner>"...)
		}
		b = append(b, "</Contents>"...)
	}
	for _, cp := range cps {
		b = append(b, "<CommonPrefixes>"...)
		b = appendElem(b, "Prefix", cp.Prefix)
		b = append(b, "</CommonPrefixes>"...)
	}
	return b
}

func (r *listV2Result) appendXML(b []byte) []byte {
	b = appendStart(b, r.NS)
	b = appendElem(b, "Name", r.Name)
	b = appendElem(b, "Prefix", r.Prefix)
	b = appendElemOmit(b, "Delimiter", r.Delimiter)
	b = appendIntElem(b, "MaxKeys", int64(r.MaxKeys))
	b = appendIntElem(b, "KeyCount", int64(r.KeyCount))
	b = appendBoolElem(b, "IsTruncated", r.IsTruncated)
	b = appendElemOmit(b, "ContinuationToken", r.ContinuationToken)
	b = appendElemOmit(b, "NextContinuationToken", r.NextContinuationToken)
	b = appendElemOmit(b, "StartAfter", r.StartAfter)
	b = appendElemOmit(b, "EncodingType", r.EncodingType)
	b = appendContents(b, r.Contents, r.CommonPrefixes)
	return append(b, "</ListBucketResult>"...)
}

func (r *listV1Result) appendXML(b []byte) []byte {
	b = appendStart(b, r.NS)
	b = appendElem(b, "Name", r.Name)
	b = appendElem(b, "Prefix", r.Prefix)
	b = appendElem(b, "Marker", r.Marker)
	b = appendElemOmit(b, "NextMarker", r.NextMarker)
	b = appendIntElem(b, "MaxKeys", int64(r.MaxKeys))
	b = appendElemOmit(b, "Delimiter", r.Delimiter)
	b = appendBoolElem(b, "IsTruncated", r.IsTruncated)
	b = appendElemOmit(b, "EncodingType", r.EncodingType)
	b = appendContents(b, r.Contents, r.CommonPrefixes)
	return append(b, "</ListBucketResult>"...)
}

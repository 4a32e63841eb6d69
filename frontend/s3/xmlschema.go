package s3

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
)

// xmlSchema lists, for each element path ("Root/Child/..."), the child
// elements it may contain. encoding/xml silently drops elements a struct
// has no field for, but S3 refuses a configuration document with an
// element it does not know (a misspelt <Expiraton> would otherwise be
// stored as a rule that does nothing): checkXMLSchema walks the document
// first and answers MalformedXML for anything outside the schema. Paths
// not in the map are leaves (text only). Namespaces are ignored.
type xmlSchema map[string][]string

// checkXMLSchema reports ErrMalformedXML unless b is one well-formed
// element named root whose descendants all appear in schema.
func checkXMLSchema(b []byte, root string, schema xmlSchema) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	var path []string
	seenRoot := false
	for range 1 << 20 {
		tok, err := d.Token()
		if err == io.EOF {
			if !seenRoot || len(path) != 0 {
				return ErrMalformedXML
			}
			return nil
		}
		if err != nil {
			return ErrMalformedXML
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			if len(path) == 0 {
				if seenRoot || name != root {
					return ErrMalformedXML
				}
				seenRoot = true
				path = append(path, name)
				continue
			}
			parent := strings.Join(path, "/")
			allowed, ok := schema[parent]
			if !ok || !contains(allowed, name) {
				return ErrMalformedXML.withMessage("The XML you provided was not well-formed or did not validate against our published schema: unexpected element <" + name + "> in <" + path[len(path)-1] + ">")
			}
			path = append(path, name)
		case xml.EndElement:
			path = path[:len(path)-1]
		case xml.CharData:
			if len(path) == 0 && len(bytes.TrimSpace(t)) > 0 {
				return ErrMalformedXML
			}
		}
	}
	return ErrMalformedXML
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

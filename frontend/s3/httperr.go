package s3

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// A few errors are answered by net/http itself, before any handler runs,
// as plain text written straight to the connection (net/http server.go,
// conn.serve): a malformed request line or header (400), headers over
// MaxHeaderBytes (431), an unknown Transfer-Encoding (501), and, on a TLS
// port, a plain-HTTP request (400). No http.Server hook sees them
// (ErrorLog and ConnState do not carry the answer), so xmlErrListener
// wraps each accepted connection and rewrites exactly those writes into
// S3 XML errors. They are recognised by their fixed shape: the status
// line followed at once by net/http's own errorHeaders, which no handler
// response can produce (every handler response carries a Date header,
// and net/http writes headers sorted, Connection before Content-Type).
//
// What this cannot reach, documented in docs/s3.md: on a TLS listener the
// bytes are encrypted by the time they reach the raw connection, so the
// errors net/http raises inside TLS stay plain text; and 417 for an
// unknown Expect value is sent through the normal response path (empty
// body, no XML).

// netHTTPErrorHeaders is what net/http writes after the status line of
// its own error answers.
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// plainHTTPSError is what crypto/tls + net/http write to a client that
// spoke plain HTTP to a TLS port.
const plainHTTPSError = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"

type xmlErrListener struct {
	net.Listener
	s *Server
}

func (l xmlErrListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &xmlErrConn{Conn: c, s: l.s}, nil
}

// xmlErrConn is a connection whose net/http error answers go out as XML.
// It forwards ReadFrom (so GETs keep sendfile) and CloseWrite (which
// net/http uses after a 431 to let the client read the answer).
type xmlErrConn struct {
	net.Conn
	s *Server
}

func (c *xmlErrConn) Write(p []byte) (int, error) {
	status, detail, ok := parseNetHTTPError(p)
	if !ok {
		return c.Conn.Write(p)
	}
	if _, err := c.Conn.Write(c.s.httpLayerError(status, detail, c.RemoteAddr())); err != nil {
		return 0, err
	}
	return len(p), nil
}

// ReadFrom keeps net/http's sendfile path: it asserts io.ReaderFrom on the connection.
func (c *xmlErrConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite half-closes like *net.TCPConn.
func (c *xmlErrConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// parseNetHTTPError recognises one of net/http's own plain-text error
// answers and returns its status and text.
func parseNetHTTPError(p []byte) (status int, detail string, ok bool) {
	// Cheap first test: most writes are body bytes or handler responses.
	if len(p) < 16 || !bytes.HasPrefix(p, []byte("HTTP/1.")) || p[9] != '4' && p[9] != '5' {
		return 0, "", false
	}
	if bytes.Equal(p, []byte(plainHTTPSError)) {
		return http.StatusBadRequest, "Client sent an HTTP request to an HTTPS server.", true
	}
	line, rest, found := bytes.Cut(p, []byte("\r\n"))
	if !found || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) || len(line) < 13 || line[12] != ' ' {
		return 0, "", false
	}
	if !bytes.HasPrefix(rest, []byte(netHTTPErrorHeaders[2:])) {
		return 0, "", false
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil || code < 400 || code > 599 {
		return 0, "", false
	}
	return code, string(rest[len(netHTTPErrorHeaders)-2:]), true
}

// httpLayerError builds the whole XML answer (status line, headers, body)
// for an error net/http raised, and logs it at DEBUG: it is the client's
// malformed request, not a server fault.
func (s *Server) httpLayerError(status int, detail string, remote net.Addr) []byte {
	code := "BadRequest"
	switch status {
	case http.StatusBadRequest:
		if d, ok := strings.CutPrefix(detail, "400 Bad Request: "); ok {
			detail = "The HTTP request is malformed: " + d
		} else if detail == "400 Bad Request" {
			detail = "The HTTP request line or a header is malformed."
		}
	case http.StatusRequestHeaderFieldsTooLarge:
		code = "RequestHeaderSectionTooLarge"
		detail = "Your request header section exceeds the maximum allowed size."
	case http.StatusNotImplemented:
		code = "NotImplemented"
		detail = "A header you provided implies functionality that is not implemented (Transfer-Encoding)."
	}
	id := newRequestID()
	body, _ := xml.Marshal(errorResponse{Code: code, Message: detail, RequestID: id, HostID: id})
	body = append([]byte(xml.Header), body...)
	s.log.Debug("request refused by the HTTP layer", "status", status, "code", code, "detail", detail, "remote", remote.String(), "id", id)
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\nConnection: close\r\nServer: tristore\r\nx-amz-request-id: %s\r\nx-amz-id-2: %s\r\n\r\n",
		status, http.StatusText(status), len(body), id, id)
	b.Write(body)
	return b.Bytes()
}

var (
	_ io.ReaderFrom = (*xmlErrConn)(nil)
	_ net.Listener  = xmlErrListener{}
)

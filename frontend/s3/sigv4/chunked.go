package sigv4

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// aws-chunked decoding. The framing is
//
//	<hex size>[;chunk-signature=<64 hex>]\r\n<data>\r\n ... 0[;chunk-signature=...]\r\n
//	[<trailer name>:<value>\r\n ... [x-amz-trailer-signature:<64 hex>\r\n]]\r\n
//
// It is decoded here by hand: net/http's chunked reader rejects the
// signature extension handling we need and knows nothing of the chained
// chunk signatures or the signed trailer. Chunk data is passed to the
// caller as it arrives and each chunk's signature is checked when the chunk
// ends; a bad signature turns into an error before io.EOF, so a caller that
// publishes only after EOF never keeps forged data.

const (
	maxChunkLine   = 4096    // a chunk header or trailer line
	maxTrailers    = 64      // lines in the trailer section
	maxChunkSize   = 1 << 40 // sanity bound on one chunk's declared size
	emptySHA256    = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	chunkAlgorithm = "AWS4-HMAC-SHA256-PAYLOAD"
	trailerAlg     = "AWS4-HMAC-SHA256-TRAILER"
)

var crc64NVME = crc64.MakeTable(0x9a6c9329ac4bc9b5)

// newChecksum returns the hash behind a x-amz-checksum-* trailer.
func newChecksum(name string) (hash.Hash, bool) {
	switch name {
	case "x-amz-checksum-crc32":
		return crc32.NewIEEE(), true
	case "x-amz-checksum-crc32c":
		return crc32.New(crc32.MakeTable(crc32.Castagnoli)), true
	case "x-amz-checksum-crc64nvme":
		return crc64.New(crc64NVME), true
	case "x-amz-checksum-sha1":
		return sha1.New(), true
	case "x-amz-checksum-sha256":
		return sha256.New(), true
	}
	return nil, false
}

type lineReader struct{ br *bufio.Reader }

func newLineReader(r io.Reader) *lineReader { return &lineReader{bufio.NewReaderSize(r, 64<<10)} }

// readLine returns one line without its "\n" or "\r\n". io.EOF only when
// nothing at all was left.
func (l *lineReader) readLine() (string, error) {
	var buf []byte
	for len(buf) <= maxChunkLine {
		frag, err := l.br.ReadSlice('\n')
		buf = append(buf, frag...)
		if err == nil {
			break
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(buf) > 0 {
			return "", errIncomplete()
		}
		return "", err
	}
	if len(buf) > maxChunkLine {
		return "", errInvalidReq("aws-chunked line too long.")
	}
	buf = bytes.TrimSuffix(buf, []byte("\n"))
	buf = bytes.TrimSuffix(buf, []byte("\r"))
	return string(buf), nil
}

type chunkedReader struct {
	src    *lineReader
	body   io.Closer
	signed bool // chunk signatures present (not STREAMING-UNSIGNED-...)
	// trailer is true for the -TRAILER variants.
	trailer  bool
	key      []byte
	amzDate  string
	scope    string
	prevSig  string
	want     int64 // decoded length or -1
	expected []string
	req      *http.Request

	sums    map[string]hash.Hash
	left    int64 // bytes left in the current chunk
	inChunk bool
	chunkH  hash.Hash
	sig     string // the current chunk's signature
	total   int64
	err     error
}

func (c *chunkedReader) init() {
	if c.chunkH != nil {
		return
	}
	c.chunkH = sha256.New()
	c.sums = make(map[string]hash.Hash, len(c.expected))
	for _, n := range c.expected {
		if h, ok := newChecksum(n); ok {
			c.sums[n] = h
		}
	}
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.init()
	for !c.inChunk {
		if err := c.nextChunk(); err != nil {
			c.err = err
			return 0, err
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.src.br.Read(p)
	if c.signed { // unsigned streams carry no per-chunk hash to check
		c.chunkH.Write(p[:n])
	}
	for _, h := range c.sums {
		h.Write(p[:n])
	}
	c.left -= int64(n)
	c.total += int64(n)
	if err != nil && c.left > 0 {
		c.err = readErr(err)
		return n, c.err
	}
	if c.left == 0 {
		c.inChunk = false
		if err := c.endChunk(); err != nil {
			c.err = err
			return n, err
		}
		// All announced bytes are in: read the final chunk and trailer now
		// so the verdict comes with the last data (callers that stop after
		// the decoded length still see it).
		if c.want >= 0 && c.total == c.want {
			c.err = c.nextChunk()
			return n, c.err
		}
	}
	return n, nil
}

// nextChunk reads a chunk header. On the final (zero-size) chunk it also
// reads and checks the trailer and sets c.err to io.EOF or the failure.
func (c *chunkedReader) nextChunk() error {
	line, err := c.src.readLine()
	if err != nil {
		return readErr(err)
	}
	size, sig, e := ParseChunkHeader(line, c.signed)
	if e != nil {
		return e
	}
	if c.want >= 0 && c.total+size > c.want {
		return errIncomplete()
	}
	c.sig = sig
	c.left = size
	c.chunkH.Reset()
	if size > 0 {
		c.inChunk = true
		return nil
	}
	// Final chunk: its signature covers the empty payload.
	if c.signed && !c.checkChunkSig() {
		return errChunkSignature()
	}
	if c.trailer {
		if e := c.readTrailer(); e != nil {
			return e
		}
	} else if line, err := c.src.readLine(); err != nil || line != "" {
		if err != nil && err != io.EOF {
			return readErr(err)
		}
		if err == nil {
			return errInvalidReq("aws-chunked body has data after the final chunk.")
		}
	}
	if c.want >= 0 && c.total != c.want {
		return errIncomplete()
	}
	return io.EOF
}

// ParseChunkHeader parses "<hex size>[;chunk-signature=<sig>]". With signed
// the signature is required.
func ParseChunkHeader(line string, signed bool) (int64, string, *Error) {
	sizeStr, ext, hasExt := strings.Cut(line, ";")
	if sizeStr == "" || len(sizeStr) > 16 {
		return 0, "", errInvalidReq("invalid aws-chunked chunk size.")
	}
	size, err := strconv.ParseInt(sizeStr, 16, 64)
	if err != nil || size < 0 || size > maxChunkSize {
		return 0, "", errInvalidReq("invalid aws-chunked chunk size.")
	}
	if !signed {
		return size, "", nil
	}
	if !hasExt {
		return 0, "", errInvalidReq("aws-chunked chunk is missing its chunk-signature.")
	}
	k, sig, _ := strings.Cut(ext, "=")
	if strings.TrimSpace(k) != "chunk-signature" || !isHexSig(sig) {
		return 0, "", errInvalidReq("aws-chunked chunk has a malformed chunk-signature.")
	}
	return size, sig, nil
}

func (c *chunkedReader) checkChunkSig() bool {
	sts := chunkAlgorithm + "\n" + c.amzDate + "\n" + c.scope + "\n" + c.prevSig + "\n" + emptySHA256 + "\n" + hexEncode(c.chunkH.Sum(nil))
	want := hexHMAC(c.key, sts)
	if !sigEqual(want, c.sig) {
		return false
	}
	c.prevSig = want
	return true
}

// endChunk consumes the CRLF after a chunk's data and checks its signature.
func (c *chunkedReader) endChunk() error {
	line, err := c.src.readLine()
	if err != nil {
		return readErr(err)
	}
	if line != "" {
		return errInvalidReq("aws-chunked chunk data is longer than its declared size.")
	}
	if c.signed && !c.checkChunkSig() {
		return errChunkSignature()
	}
	return nil
}

// readTrailer reads the trailer section. SDKs differ in blank lines around
// the trailer (minio-go writes "name:value\n\r\n"), so blank lines are
// skipped until every expected trailer (and for the signed variant the
// trailer signature) has arrived; the section's length is bounded.
func (c *chunkedReader) readTrailer() error {
	got := make(http.Header)
	var canon strings.Builder
	sigSeen := false
	done := func() bool {
		for _, n := range c.expected {
			if got.Get(n) == "" {
				return false
			}
		}
		return !c.signed || sigSeen
	}
	for i := 0; ; i++ {
		if i >= maxTrailers {
			return errInvalidReq("aws-chunked trailer section is too long.")
		}
		line, err := c.src.readLine()
		if err == io.EOF {
			if done() {
				break
			}
			return errIncomplete()
		}
		if err != nil {
			return readErr(err)
		}
		if line == "" {
			if done() {
				break
			}
			continue
		}
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			return errInvalidReq("malformed aws-chunked trailer line.")
		}
		name = strings.ToLower(strings.TrimSpace(name))
		val = strings.TrimSpace(val)
		if name == "x-amz-trailer-signature" {
			if !c.signed {
				return errInvalidReq("x-amz-trailer-signature in an unsigned trailer.")
			}
			sts := trailerAlg + "\n" + c.amzDate + "\n" + c.scope + "\n" + c.prevSig + "\n" + hashHex([]byte(canon.String()))
			if !isHexSig(val) || !sigEqual(hexHMAC(c.key, sts), val) {
				return errChunkSignature()
			}
			sigSeen = true
			continue
		}
		if sigSeen {
			return errInvalidReq("aws-chunked trailer after x-amz-trailer-signature.")
		}
		if !containsStr(c.expected, name) {
			return errInvalidReq("trailer \"" + name + "\" was not declared in x-amz-trailer.")
		}
		got.Set(name, val)
		canon.WriteString(name + ":" + val + "\n")
	}
	// Drain a few stray blank lines some clients add after the trailer.
	for i := 0; i < 4; i++ {
		b, err := c.src.br.Peek(1)
		if err != nil || (b[0] != '\r' && b[0] != '\n') {
			break
		}
		c.src.br.Discard(1)
	}
	for _, n := range c.expected {
		h := c.sums[n]
		want, err := base64.StdEncoding.DecodeString(got.Get(n))
		if err != nil || len(want) != h.Size() {
			return errInvalidReq("Value for " + n + " trailing header is invalid.")
		}
		if !bytes.Equal(want, h.Sum(nil)) {
			return errBadDigest("The " + strings.ToUpper(strings.TrimPrefix(n, "x-amz-checksum-")) + " you specified did not match the calculated checksum.")
		}
	}
	if c.req != nil {
		if c.req.Trailer == nil {
			c.req.Trailer = make(http.Header)
		}
		for k, v := range got {
			c.req.Trailer[k] = v
		}
	}
	return nil
}

func (c *chunkedReader) Close() error { return c.body.Close() }

var _ io.ReadCloser = (*chunkedReader)(nil)

package s3

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/inuse"
)

// An object that is a block volume being served (the served lock the
// iSCSI target holds) cannot be overwritten, copied onto, completed onto
// or deleted over S3: each gets 409 OperationAborted and the data stays.
// Reading it (ranged GET) is allowed. Once it is no longer served it is an
// ordinary object again.
func TestServedVolumeRefusedOverS3(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/vols", nil, nil), 200)
	vol := bytes.Repeat([]byte("LUNDATA!"), 8192)
	wantStatus(t, ts.do(t, "PUT", "/vols/disk", vol, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/vols/src", []byte("other"), nil), 200)
	served, err := inuse.Serve(filepath.Join(ts.st.(store.LocalPather).Root(), "vols", "disk"))
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()

	wantErr(t, ts.do(t, "PUT", "/vols/disk", []byte("x\n"), nil), 409, "OperationAborted")
	wantErr(t, ts.do(t, "DELETE", "/vols/disk", nil, nil), 409, "OperationAborted")
	wantErr(t, ts.do(t, "PUT", "/vols/disk", nil, map[string]string{"x-amz-copy-source": "/vols/src"}), 409, "OperationAborted")
	r := ts.do(t, "POST", "/vols/disk?uploads", nil, nil)
	wantStatus(t, r, 200)
	var ir initiateResult
	xml.Unmarshal(r.body, &ir)
	p1 := ts.do(t, "PUT", "/vols/disk?partNumber=1&uploadId="+ir.UploadID, []byte("part"), nil)
	wantStatus(t, p1, 200)
	body := "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>" + p1.header.Get("ETag") + "</ETag></Part></CompleteMultipartUpload>"
	wantErr(t, ts.do(t, "POST", "/vols/disk?uploadId="+ir.UploadID, []byte(body), nil), 409, "OperationAborted")
	r = ts.do(t, "POST", "/vols?delete", []byte("<Delete><Object><Key>disk</Key></Object><Object><Key>src</Key></Object></Delete>"), nil)
	wantStatus(t, r, 200)
	if !strings.Contains(string(r.body), "<Code>OperationAborted</Code>") || !strings.Contains(string(r.body), "<Deleted><Key>src</Key>") {
		t.Fatalf("DeleteObjects with a served volume: %s", r.body)
	}
	var e errorResponse
	if xml.Unmarshal(ts.do(t, "DELETE", "/vols/disk", nil, nil).body, &e); !strings.Contains(e.Message, "iSCSI") {
		t.Errorf("message %q should say why", e.Message)
	}

	g := ts.do(t, "GET", "/vols/disk", nil, map[string]string{"Range": "bytes=0-15"})
	wantStatus(t, g, 206)
	if string(g.body) != "LUNDATA!LUNDATA!" {
		t.Fatalf("ranged GET of a served volume: %q", g.body)
	}
	if got, err := os.ReadFile(served.Name()); err != nil || !bytes.Equal(got, vol) {
		t.Fatalf("served volume changed by refused requests: %v", err)
	}

	served.Close()
	wantStatus(t, ts.do(t, "PUT", "/vols/disk", []byte("restored image"), nil), 200)
	wantStatus(t, ts.do(t, "DELETE", "/vols/disk", nil, nil), 204)
}

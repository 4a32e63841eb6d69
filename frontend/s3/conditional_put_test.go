package s3

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestIfNoneMatchPutRace sends many PUTs with If-None-Match: * to one new
// key at once. Their bodies are held back until every request has been
// sent, so all of them pass the early existence check before any body
// arrives and the race is decided by the store's atomic publish. Exactly
// one must get 200, the rest 412 PreconditionFailed, and the object must
// be the winner's complete body.
func TestIfNoneMatchPutRace(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/race", nil, nil), 200)
	const writers, size = 16, 64 << 10 // under net/http's 256 KiB drain, so an early 412 still reads the body
	tr := &http.Transport{MaxIdleConnsPerHost: writers}
	t.Cleanup(tr.CloseIdleConnections) // before the server's graceful stop
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	for round := range 3 {
		key := fmt.Sprintf("/race/k%d", round)
		bodies := make([][]byte, writers)
		pws := make([]*io.PipeWriter, writers)
		status := make([]int, writers)
		codes := make([]string, writers)
		etags := make([]string, writers)
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			bodies[w] = bytes.Repeat([]byte(fmt.Sprintf("round %d writer %02d;", round, w)), size/20)
			pr, pw := io.Pipe()
			pws[w] = pw
			req, err := http.NewRequest("PUT", ts.url+key, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(len(bodies[w]))
			req.Header.Set("If-None-Match", "*")
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := client.Do(req)
				if err != nil {
					errs[w] = err
					return
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				status[w], etags[w] = res.StatusCode, res.Header.Get("ETag")
				var e errorResponse
				if xml.Unmarshal(b, &e) == nil {
					codes[w] = e.Code
				}
			}()
		}
		time.Sleep(300 * time.Millisecond) // let every handler reach the body
		var fw sync.WaitGroup
		for w := range writers {
			fw.Add(1)
			go func() {
				defer fw.Done()
				// A loser refused before reading its body makes this write
				// fail; that is fine, the response is what is checked.
				pws[w].Write(bodies[w])
				pws[w].Close()
			}()
		}
		fw.Wait()
		wg.Wait()
		winner := -1
		for w := range writers {
			switch {
			case errs[w] != nil:
				t.Fatalf("%s writer %d: %v", key, w, errs[w])
			case status[w] == 200:
				if winner >= 0 {
					t.Fatalf("%s: writers %d and %d both got 200", key, winner, w)
				}
				winner = w
			case status[w] != 412 || codes[w] != "PreconditionFailed":
				t.Fatalf("%s writer %d: status %d code %q, want 412 PreconditionFailed", key, w, status[w], codes[w])
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no writer got 200", key)
		}
		sum := md5.Sum(bodies[winner])
		want := hex.EncodeToString(sum[:])
		if strings.Trim(etags[winner], `"`) != want {
			t.Fatalf("%s: winner's ETag %s, want %s", key, etags[winner], want)
		}
		g := ts.do(t, "GET", key, nil, nil)
		if g.status != 200 || !bytes.Equal(g.body, bodies[winner]) || strings.Trim(g.header.Get("ETag"), `"`) != want {
			t.Fatalf("%s: stored object (%d, %d bytes, ETag %s) is not writer %d's body", key, g.status, len(g.body), g.header.Get("ETag"), winner)
		}
	}
}

// TestIfNoneMatchCompleteMultipart: CompleteMultipartUpload with
// If-None-Match: * refuses an existing key with 412 and keeps the upload,
// which completes once the key is gone.
func TestIfNoneMatchCompleteMultipart(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/cmp", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/cmp/obj", []byte("old"), nil), 200)
	r := ts.do(t, "POST", "/cmp/obj?uploads", nil, nil)
	wantStatus(t, r, 200)
	var ir initiateResult
	if err := xml.Unmarshal(r.body, &ir); err != nil || ir.UploadID == "" {
		t.Fatalf("initiate: %v %s", err, r.body)
	}
	p := ts.do(t, "PUT", "/cmp/obj?partNumber=1&uploadId="+ir.UploadID, []byte("new content"), nil)
	wantStatus(t, p, 200)
	body := []byte(fmt.Sprintf("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part></CompleteMultipartUpload>", p.header.Get("ETag")))
	inm := map[string]string{"If-None-Match": "*"}
	wantErr(t, ts.do(t, "POST", "/cmp/obj?uploadId="+ir.UploadID, body, inm), 412, "PreconditionFailed")
	if g := ts.do(t, "GET", "/cmp/obj", nil, nil); string(g.body) != "old" {
		t.Fatalf("object changed by a refused complete: %q", g.body)
	}
	wantStatus(t, ts.do(t, "GET", "/cmp/obj?uploadId="+ir.UploadID, nil, nil), 200)
	wantStatus(t, ts.do(t, "DELETE", "/cmp/obj", nil, nil), 204)
	wantStatus(t, ts.do(t, "POST", "/cmp/obj?uploadId="+ir.UploadID, body, inm), 200)
	if g := ts.do(t, "GET", "/cmp/obj", nil, nil); string(g.body) != "new content" {
		t.Fatalf("completed object: %q", g.body)
	}
}

package s3peers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// corsPage is served from one origin and talks to the S3 server on
// another: a PUT with a custom header (so the browser sends a preflight),
// a GET reading an exposed header, and a DELETE, which no rule allows.
const corsPage = `<!doctype html><html><body><pre id="out">running</pre><script>
(async () => {
  const out = [];
  const url = %q;
  try {
    const p = await fetch(url, {method: "PUT", body: "from the browser", headers: {"Content-Type": "text/plain", "x-amz-meta-from": "chromium"}});
    out.push("PUT " + p.status);
    const g = await fetch(url);
    out.push("GET " + g.status + " " + (await g.text()) + " etag=" + (g.headers.get("ETag") ? "yes" : "no"));
  } catch (e) { out.push("ERROR " + e); }
  try { await fetch(url, {method: "DELETE"}); out.push("DELETE allowed"); } catch (e) { out.push("DELETE blocked"); }
  document.getElementById("out").textContent = "RESULT|" + out.join("|") + "|END";
})();
</script></body></html>`

// TestChromiumCORS: headless Chromium on a page from another origin
// uploads and reads an object through the bucket's CORS rules (the
// browser's own preflight and checks, not ours), and is stopped by the
// browser for a method no rule allows.
func TestChromiumCORS(t *testing.T) {
	chromium := testutil.NeedCmd(t, "chromium")
	srv := startServer(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The page's own origin: a plain HTTP server on another port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + ln.Addr().String()
	objURL := srv.endpoint + "/browser-cors/upload.txt"
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, corsPage, objURL)
	})}
	go hs.Serve(ln)
	defer hs.Close()

	do := func(method, path string, body []byte) int {
		req, _ := http.NewRequestWithContext(ctx, method, srv.endpoint+path, bytes.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if s := do("PUT", "/browser-cors", nil); s != 200 {
		t.Fatalf("create bucket: %d", s)
	}
	rules := `<CORSConfiguration><CORSRule><AllowedOrigin>` + origin + `</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedMethod>PUT</AllowedMethod>` +
		`<AllowedHeader>content-type</AllowedHeader><AllowedHeader>x-amz-meta-*</AllowedHeader><ExposeHeader>ETag</ExposeHeader></CORSRule></CORSConfiguration>`
	if s := do("PUT", "/browser-cors?cors", []byte(rules)); s != 200 {
		t.Fatalf("PutBucketCors: %d", s)
	}
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=15000", "--dump-dom", origin+"/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	s := string(out)
	i, j := strings.Index(s, "RESULT|"), strings.Index(s, "|END")
	if i < 0 || j < i {
		t.Fatalf("no result in the page:\n%s", s)
	}
	got := s[i+len("RESULT|") : j]
	want := "PUT 200|GET 200 from the browser etag=yes|DELETE blocked"
	if got != want {
		t.Fatalf("browser saw %q, want %q", got, want)
	}
	// The object is really there (and the DELETE never reached the server).
	if s := do("GET", "/browser-cors/upload.txt", nil); s != 200 {
		t.Fatalf("object after the browser's DELETE attempt: %d", s)
	}
}

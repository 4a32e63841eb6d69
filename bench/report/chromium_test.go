package report

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// chromium runs headless Chromium on the page with args, bounded in time,
// with a profile directory of its own (removed with the test).
func chromium(t *testing.T, bin, page string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	return stdout.Bytes()
}

// TestReportInChromium opens the sample report in headless Chromium: the
// browser's DOM holds every plot (the inline SVG parsed as SVG, with its
// text), and a screenshot of the page is a real picture, not a blank one.
func TestReportInChromium(t *testing.T) {
	bin := testutil.NeedCmd(t, "chromium")
	_, runs, out := writeReport(t, []string{testdata}, Options{})
	page := filepath.Join(out, HTMLFile)

	dom := string(chromium(t, bin, page, "--dump-dom"))
	if got := strings.Count(dom, "<svg "); got != 19 {
		t.Fatalf("Chromium's DOM has %d <svg> elements, want 19", got)
	}
	for _, want := range []string{"units: write throughput vs access unit", "objects: get latency CDF", "transmission efficiency", runs[0].Label} {
		if !strings.Contains(dom, want) {
			t.Fatalf("Chromium's DOM lacks %q", want)
		}
	}

	shot := filepath.Join(out, "shot.png")
	chromium(t, bin, page, "--screenshot="+shot, "--window-size=1200,2000", "--hide-scrollbars")
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 20<<10 {
		t.Fatalf("screenshot is %d bytes: nothing drawn?", len(b))
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if r := img.Bounds(); r.Dx() != 1200 || r.Dy() != 2000 {
		t.Fatalf("screenshot %v, want 1200x2000", r)
	}
	colours, dark, coloured := census(img)
	t.Logf("screenshot: %d bytes, %d colours, %d dark, %d coloured pixels", len(b), colours, dark, coloured)
	// Text, grid lines and several series colours: a blank or failed page
	// has one or two colours.
	if colours < 50 || dark < 2000 || coloured < 500 {
		t.Fatalf("screenshot looks empty: %d colours, %d dark pixels, %d coloured pixels", colours, dark, coloured)
	}
	if os.Getenv("REPORT_KEEP_SHOT") != "" {
		os.WriteFile(os.Getenv("REPORT_KEEP_SHOT"), b, 0o644)
	}
}

// census counts the distinct colours of img, its dark pixels (text, axes)
// and its saturated ones (plot lines and bars).
func census(img image.Image) (colours, dark, coloured int) {
	seen := map[color.RGBA]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			seen[c] = true
			hi, lo := max(c.R, c.G, c.B), min(c.R, c.G, c.B)
			if hi < 100 {
				dark++
			}
			if int(hi)-int(lo) > 80 {
				coloured++
			}
		}
	}
	return len(seen), dark, coloured
}

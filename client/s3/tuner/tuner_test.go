package tuner

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/internal/testutil/s3server"
)

const (
	testAK = "TRISTORETUNERROOT001"
	testSK = "tristore-tuner-root-secret-0001"
)

// setup serves tristore's S3 front end on ln (nil: loopback) and makes
// bucket "tune"; it returns the base engine config.
func setup(t *testing.T, ln net.Listener, dial func(context.Context, string, string) (net.Conn, error)) s3client.Config {
	t.Helper()
	srv := s3server.Start(t, s3server.Config{AccessKey: testAK, SecretKey: testSK, Listener: ln})
	base := s3client.Config{Endpoint: srv.Endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true}
	m := &S3Measurer{Base: base, Dial: dial}
	e, tr, err := m.engine(Point{1 << 20, 1}, new(counters))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	b := "tune"
	if _, err := e.API().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	return base
}

// objects lists what the bucket holds.
func objects(t *testing.T, base s3client.Config, dial func(context.Context, string, string) (net.Conn, error)) []string {
	t.Helper()
	m := &S3Measurer{Base: base, Dial: dial}
	e, tr, err := m.engine(Point{1 << 20, 1}, new(counters))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	b := "tune"
	out, err := e.API().ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: &b})
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, o := range out.Contents {
		ks = append(ks, *o.Key)
	}
	return ks
}

// TestMeasureLoopback: real measurements in both directions move bytes,
// time requests, count CPU, and Cleanup leaves the bucket empty.
func TestMeasureLoopback(t *testing.T) {
	base := setup(t, nil, nil)
	for _, dir := range []Direction{Up, Down} {
		m := &S3Measurer{Base: base, Bucket: "tune", Prefix: ".tune/" + string(dir) + "/", Direction: dir,
			Window: 300 * time.Millisecond, WarmMax: 300 * time.Millisecond}
		for _, pt := range []Point{{64 << 10, 1}, {1 << 20, 4}} {
			s, err := m.Measure(context.Background(), pt)
			if err != nil {
				t.Fatal(dir, pt, err)
			}
			t.Logf("%s %s×%d: %.1f MiB/s, %d requests of %.2f ms, cpu %.3fs, cost %.2fs %d B", dir, fmtSize(pt.ChunkSize), pt.Parallel,
				s.BandwidthBps/(1<<20), s.Requests, s.LatencyMeanS*1e3, s.CPUSeconds, s.Seconds, s.CostBytes)
			if s.BandwidthBps <= 0 || s.Requests == 0 || s.LatencyMeanS <= 0 || s.CPUSeconds <= 0 || s.CostBytes < s.WindowBytes {
				t.Errorf("%s %v: implausible sample %+v", dir, pt, s)
			}
			// Every request completed in the window moved a chunk.
			if got := float64(s.WindowBytes); got < 0.8*float64(s.Requests)*float64(pt.ChunkSize) {
				t.Errorf("%s %v: %d window bytes for %d requests", dir, pt, s.WindowBytes, s.Requests)
			}
			if s.Seconds > 3 {
				t.Errorf("%s %v: a 0.3 s window took %.1fs", dir, pt, s.Seconds)
			}
		}
		if dir == Down && m.OverheadBytes < 4<<20 {
			t.Errorf("probe object's upload not counted: %d bytes", m.OverheadBytes)
		}
		if err := m.Cleanup(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if left := objects(t, base, nil); len(left) != 0 {
		t.Errorf("left in the bucket: %v", left)
	}
}

// TestTuneCycle: a first run samples and saves a profile; a second reuses
// it after one verification sample; a profile whose recorded bandwidth is
// far from what is measured now is re-sampled (drift); --force re-samples.
func TestTuneCycle(t *testing.T) {
	base := setup(t, nil, nil)
	dir := t.TempDir()
	m := &S3Measurer{Base: base, Bucket: "tune", Prefix: ".tune/", Direction: Up,
		Window: 200 * time.Millisecond, WarmMax: 200 * time.Millisecond}
	defer m.Cleanup(context.Background())
	g := Grid{ChunkSizes: []int64{16 << 10, 256 << 10, 1 << 20}, Parallel: []int{1, 4}}
	tu := Tune{Dir: dir, Endpoint: base.Endpoint, Direction: Up, Measurer: m,
		Options: Options{Grid: g, Initial: []Point{{16 << 10, 1}, {1 << 20, 1}, {1 << 20, 4}}, MaxSamples: 4}, Drift: 0.25}
	ctx := context.Background()
	o1, err := tu.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o1.Reused || len(o1.Profile.Report.Samples) < 3 || len(o1.Profile.Report.Samples) > 4 {
		t.Fatalf("first run: reused %v, %d samples", o1.Reused, len(o1.Profile.Report.Samples))
	}
	fp := o1.Profile.Fingerprint
	p, err := Load(dir, fp)
	if err != nil || p == nil {
		t.Fatalf("profile not saved: %v", err)
	}
	// A profile whose recorded bandwidth is 100× what the link does now
	// has drifted: the next run measures once and re-samples.
	p.Report.Choice.MeasuredBps *= 100
	if err := Save(dir, p); err != nil {
		t.Fatal(err)
	}
	o2, err := tu.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o2.Reused || !o2.Drifted || o2.Check == nil {
		t.Fatalf("drifted profile: reused %v drifted %v check %v", o2.Reused, o2.Drifted, o2.Check)
	}
	// Reuse: make the record match what the check will see (a loaded
	// machine's loopback swings more than any threshold, so pin the
	// reference to a fresh measurement of the same point).
	p, _ = Load(dir, fp)
	s, err := m.Measure(ctx, p.Report.Choice.Point)
	if err != nil {
		t.Fatal(err)
	}
	p.Report.Choice.MeasuredBps = s.BandwidthBps
	Save(dir, p)
	tu.Drift = 10 // anything within 11× counts as the same
	o3, err := tu.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !o3.Reused || o3.Check == nil || o3.Profile.Created != p.Created {
		t.Fatalf("matching profile not reused: %+v", o3)
	}
	tu.MaxAge = time.Hour
	o4, err := tu.Run(ctx)
	if err != nil || !o4.Reused || o4.Check != nil {
		t.Fatalf("recently verified profile measured again: %+v %v", o4, err)
	}
	tu.Force = true
	o5, err := tu.Run(ctx)
	if err != nil || o5.Reused || o5.Profile.Created.Equal(p.Created) {
		t.Fatalf("--force reused: %+v %v", o5, err)
	}
}

// TestDrifted pins the threshold both ways.
func TestDrifted(t *testing.T) {
	p := &Profile{Report: &Report{Choice: Choice{MeasuredBps: 100, PredictedBps: 50}}}
	for _, c := range []struct {
		bw   float64
		want bool
	}{{100, false}, {80, false}, {70, true}, {120, false}, {130, true}, {0, true}} {
		if got := p.Drifted(c.bw, 0.25); got != c.want {
			t.Errorf("Drifted(%v) = %v", c.bw, got)
		}
	}
	p.Report.Choice.MeasuredBps = 0 // unsampled choice: against the prediction
	if p.Drifted(55, 0.25) || !p.Drifted(100, 0.25) {
		t.Error("unsampled choice not compared with its prediction")
	}
}

func longRuns() bool { return os.Getenv("TRISTORE_LONG") == "1" }

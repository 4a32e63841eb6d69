package cli

import (
	"context"
	"fmt"
	"math"
	"time"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/client/s3/chunkstore"
	"github.com/tristore/tristore/client/s3/tuner"
)

// The chunk size of a new store when --s3-chunk-size is not given: from
// the tuner's saved download profile for this endpoint and network
// (`tristore s3 tune --direction down`), if there is one; else
// chunkstore.DefaultChunkSize (1 MiB, seed 001 §6.3's finding). Nothing
// is sampled at mount time: tuning moves ~100 MiB, a mount should not.

// Bounds of a chunk chosen from a profile: the range seed 001 §6.3
// measured (64 KiB..16 MiB).
const (
	profileChunkMin = 64 << 10
	profileChunkMax = 16 << 20
)

// profileChunkSize is the chunk size a download model suggests for a
// file system: the chunk whose transfer on one stream takes as long as
// the request's fixed cost, c = A0 / (A2 + 1/min(Bs, B)). A demand read
// of a missing chunk then costs about twice the least any read can cost
// (2 × A0); a smaller chunk saves little on that miss and multiplies the
// requests of a sequential read, a larger one makes every miss wait for
// bytes nobody asked for. Rounded to a power of two (log scale) within
// 64 KiB..16 MiB; 0 when the model has no fixed cost or no rate.
func profileChunkSize(m tuner.Model) int64 {
	r := streamRate(m)
	if m.A0 <= 0 || r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0
	}
	c := m.A0 / (m.A2 + 1/r)
	lg := math.Round(math.Log2(c))
	lg = max(lg, math.Log2(profileChunkMin))
	lg = min(lg, math.Log2(profileChunkMax))
	return int64(1) << int(lg)
}

// streamRate is the rate of one stream alone: Bs, or B if that is lower.
func streamRate(m tuner.Model) float64 {
	r := m.Bs
	if m.B > 0 && (r <= 0 || m.B < r) {
		r = m.B
	}
	return r
}

// mountChunkDefault returns the chunk size for a new store at endpoint
// ("" = AWS in region) and where it came from, for the log.
func mountChunkDefault(ctx context.Context, endpoint, region, dir string) (int64, string) {
	if endpoint == "" {
		if region == "" {
			region = s3client.DefaultRegion
		}
		endpoint = "https://s3." + region + ".amazonaws.com"
	}
	if dir == "" {
		dir = tuner.DefaultDir()
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	const fallback = "default (seed 001 §6.3); "
	fp, desc, err := tuner.Fingerprint(ctx, endpoint, tuner.Down, nil)
	if err != nil {
		return chunkstore.DefaultChunkSize, fallback + err.Error()
	}
	p, err := tuner.Load(dir, fp)
	if err != nil {
		return chunkstore.DefaultChunkSize, fallback + err.Error()
	}
	if p == nil || p.Report == nil {
		return chunkstore.DefaultChunkSize, fmt.Sprintf("%sno saved download profile %s in %s for %s, %s (tristore s3 tune --direction down)",
			fallback, fp, dir, endpoint, desc)
	}
	c := profileChunkSize(p.Report.Model)
	if c == 0 {
		return chunkstore.DefaultChunkSize, "default; the saved profile " + fp + " has no usable model"
	}
	m := p.Report.Model
	return c, fmt.Sprintf("profile %s (down, %s): request cost %.0f ms, one stream %.2f MiB/s",
		fp, p.Created.UTC().Format("2006-01-02"), m.A0*1e3, streamRate(m)/(1<<20))
}

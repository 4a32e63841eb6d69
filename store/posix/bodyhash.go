package posix

import (
	"crypto/md5"
	"hash"
	"sync"
	"sync/atomic"

	md5simd "github.com/minio/md5-simd"
)

// The MD5 of a large body (its ETag) is the largest CPU cost of a large
// PUT: 60 % of the server's samples for 4 MiB PUTs at 16 in parallel
// (docs/bench/profiles/s3-put-4m-p16-before.*), about 8 ms of a core per
// 4 MiB with crypto/md5, which is sequential by nature. When several large
// bodies are hashed at once, github.com/minio/md5-simd computes up to 8
// independent sums in the lanes of one AVX2 core (a measured ~2-3x less CPU
// per byte at 16 streams on this machine, scripts/bench/md5par); for one
// stream alone it is several times slower than crypto/md5 (its blocks go
// through a server goroutine), so a body starts on it only while at least
// simdMinStreams large bodies are being hashed, counting itself. The sum is
// the same MD5 either way (TestBodyHashSameSum).

const (
	// simdMinBody: smaller bodies (and bodies of unknown size) keep
	// crypto/md5; the lanes pay off on long runs of 32 KiB blocks.
	simdMinBody = 1 << 20
	// simdMinStreams: large bodies hashed at once, this one included,
	// before a new one goes to the lanes.
	simdMinStreams = 3
)

var (
	largeHashes atomic.Int64 // large bodies being hashed now
	simdOnce    sync.Once
	simdServer  md5simd.Server
)

// hookBodyHashSIMD, set only by tests, is told which hash a body got.
var hookBodyHashSIMD func(simd bool)

// bodyHash returns the MD5 hash for a body of size bytes (-1: unknown) and
// the function to call when the sum has been taken (it releases the lanes).
func bodyHash(size int64) (hash.Hash, func()) {
	if size < simdMinBody {
		if hookBodyHashSIMD != nil {
			hookBodyHashSIMD(false)
		}
		return md5.New(), func() {}
	}
	n := largeHashes.Add(1)
	if n < simdMinStreams {
		if hookBodyHashSIMD != nil {
			hookBodyHashSIMD(false)
		}
		return md5.New(), func() { largeHashes.Add(-1) }
	}
	simdOnce.Do(func() { simdServer = md5simd.NewServer() })
	if hookBodyHashSIMD != nil {
		hookBodyHashSIMD(true)
	}
	h := simdServer.NewHash()
	return h, func() { h.Close(); largeHashes.Add(-1) }
}

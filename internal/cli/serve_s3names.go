package cli

import (
	"log/slog"
	"strconv"
	"strings"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// maxNamesLogged bounds how many names the not-a-bucket warning lists; the
// total is always given.
const maxNamesLogged = 10

// notBucketer is the posix backend's NotBuckets (other stores have no tree
// to adopt).
type notBucketer interface {
	NotBuckets() (dirs, files []string, err error)
}

// warnNotBuckets says once, at start, which top-level directories S3 will
// not show because their names cannot be bucket names (`b`, `My Photos`,
// `UPPER`), and how many top-level files it cannot show, with the rule: a
// user who serves an existing tree then knows why part of it is missing
// over S3 while NFS shows it.
func warnNotBuckets(log *slog.Logger, st store.Store) {
	nb, ok := st.(notBucketer)
	if !ok {
		return
	}
	dirs, files, err := nb.NotBuckets()
	if err != nil {
		log.Warn("s3: could not list the top level of the tree", "err", err)
		return
	}
	if len(dirs) > 0 {
		log.Warn("s3: top-level directories whose names are not valid bucket names are not visible over S3 (NFS shows them); rename them to make them buckets",
			"count", len(dirs), "names", firstN(dirs, maxNamesLogged), "rule", posix.BucketNameRule)
	}
	if len(files) > 0 {
		log.Warn("s3: top-level files are not visible over S3 (an object needs a bucket; NFS shows them)",
			"count", len(files), "names", firstN(files, maxNamesLogged))
	}
}

// firstN formats at most n names, each quoted (names may hold spaces),
// with "..." after them when some were left out.
func firstN(names []string, n int) string {
	more := ""
	if len(names) > n {
		names, more = names[:n], " ..."
	}
	q := make([]string, len(names))
	for i, s := range names {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, " ") + more
}

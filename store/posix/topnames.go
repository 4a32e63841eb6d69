package posix

import (
	"os"
	"sort"
	"strings"

	"github.com/tristore/tristore/store"
)

// BucketNameRule is validBucket's rule in one line, for messages that tell
// a user why a directory is not a bucket.
const BucketNameRule = "3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit, no '..', '.-' or '-.', not an IPv4 address"

// NotBuckets lists what the top level of the tree holds besides buckets:
// directories whose names are not valid bucket names, and everything that
// is not a directory (files, links).
// NFS shows them, S3 cannot (an object needs a bucket), so `tristore
// serve` names them at start instead of leaving part of an adopted tree
// silently missing. The system directory (store.ReservedPrefix...) and an
// ext4 root's lost+found are not listed. Both lists are sorted.
func (b *Backend) NotBuckets() (dirs, files []string, err error) {
	ents, err := os.ReadDir(b.root)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, store.ReservedPrefix) || name == "lost+found" {
			continue
		}
		if e.IsDir() {
			if validBucket(name) != nil {
				dirs = append(dirs, name)
			}
			continue
		}
		files = append(files, name)
	}
	sort.Strings(dirs)
	sort.Strings(files)
	return dirs, files, nil
}

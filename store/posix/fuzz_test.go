package posix

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzKeyPath: any key validKey accepts maps to a path strictly inside the
// bucket directory, in canonical form (no "..", no "//"), whose components
// never use the reserved prefix except the directory-marker file.
func FuzzKeyPath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "a/", "../x", "a/../b", "a//b", "/a", ".", "..", "a\x00b",
		".tristore", "x/.tristore-tmp-1", "é/名前", "a/./b", strings.Repeat("z", 300), "a\\..\\b", "..a/b.."} {
		f.Add(s)
	}
	b := &Backend{root: "/data", sys: "/data/.tristore"}
	f.Fuzz(func(t *testing.T, key string) {
		if validKey(key) != nil {
			return
		}
		p := b.objPath("bkt", key)
		if filepath.Clean(p) != p {
			t.Fatalf("key %q -> non-canonical path %q", key, p)
		}
		if !strings.HasPrefix(p, "/data/bkt/") {
			t.Fatalf("key %q -> path %q outside the bucket", key, p)
		}
		rel := strings.TrimPrefix(p, "/data/bkt/")
		parts := strings.Split(rel, "/")
		for i, c := range parts {
			if strings.HasPrefix(c, ".tristore") && !(i == len(parts)-1 && c == dirMarker && strings.HasSuffix(key, "/")) {
				t.Fatalf("key %q -> reserved component %q", key, c)
			}
		}
		if len(key) > 1024 {
			t.Fatalf("key of %d bytes accepted", len(key))
		}
	})
}

// FuzzBucketName: accepted names are safe single directory names.
func FuzzBucketName(f *testing.F) {
	for _, s := range []string{"abc", "a", "..", "a/b", "192.168.0.1", "A-b", "a..b", "x-", ".tristore"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if validBucket(name) != nil {
			return
		}
		if strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") || name != filepath.Clean(name) || len(name) < 3 || len(name) > 63 {
			t.Fatalf("unsafe bucket name %q accepted", name)
		}
	})
}

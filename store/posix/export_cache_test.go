package posix

// MayBeServed exposes mayBeServed (bucketcache_test.go).
func MayBeServed(b *Backend, p string) bool { return b.mayBeServed(p) }

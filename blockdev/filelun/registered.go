package filelun

import "context"

// Registered reports whether bucket/name is a registered volume, reading
// only the registry (no Stat of the object, which for a volume written in
// place would re-hash it). The S3 front end asks before storing an object
// encrypted at rest under a volume's name: ciphertext must never be served
// as blocks (docs/s3.md).
func Registered(ctx context.Context, st Store, bucket, name string) (bool, error) {
	reg, err := readRegistry(ctx, st, bucket)
	if err != nil {
		return false, err
	}
	_, ok := reg[name]
	return ok, nil
}

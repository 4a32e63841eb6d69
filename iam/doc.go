// Package iam keeps tristore's users and their S3 keys under
// DATA/.tristore/iam. Secret keys must be recoverable to verify SigV4 (an
// HMAC needs the secret), so they are encrypted at rest (AES-GCM with a
// per-installation key file, mode 0600) rather than hashed; they are never
// logged.
//
// On disk (directory DATA/.tristore/iam, mode 0700; every file 0600):
//
//	master.key        32 random bytes, the AES-256-GCM key; losing it loses every secret
//	users.json        users with their secrets encrypted (AAD = access key); replaced
//	                  atomically (temp file, fsync, rename, fsync of the directory)
//	root-credentials  the keys EnsureRoot generated on first start, so the operator can
//	                  find them later (delete it once they are stored elsewhere)
//	lock              flock(2) target: `serve` and `tristore user` may run at once
//
// A running server notices changes made by another process with one
// stat(2) of users.json per lookup, so `tristore user add|remove` takes
// effect on the next request.
//
// CONTRACT (used by `serve`, `tristore user` and frontend/s3):
//
//	func Open(dataDir string) (*Store, error)
//	func (s *Store) SecretFor(ctx context.Context, accessKey string) (string, error) // sigv4.Credentials; ErrUnknownAccessKey
//	func (s *Store) UserByAccessKey(accessKey string) (User, error)
//	func (s *Store) Add(name string, admin bool) (User, string /*secret*/, error)
//	func (s *Store) AddWithKeys(name, accessKey, secret string, admin bool) (User, error)
//	func (s *Store) Remove(name string) error
//	func (s *Store) List() ([]User, error)
//	// EnsureRoot makes sure an admin user exists. With accessKey/secret given
//	// (TRISTORE_ACCESS_KEY / TRISTORE_SECRET_KEY or config) it sets them;
//	// otherwise, on first start only, it generates keys and returns
//	// created=true so `serve` prints them once.
//	func (s *Store) EnsureRoot(accessKey, secret string) (u User, secretOut string, created bool, err error)
//	type User struct { Name, AccessKey string; Admin bool; Created time.Time }
package iam

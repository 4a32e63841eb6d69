// Package iam keeps tristore's users and their S3 keys under
// DATA/.tristore/iam. Secret keys must be recoverable to verify SigV4 (an
// HMAC needs the secret), so they are encrypted at rest (AES-GCM with a
// per-installation key file, mode 0600) rather than hashed; they are never
// logged.
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

package iam

import (
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

const (
	accessKeyLen = 20
	secretLen    = 40
	akAlphabet   = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	// secrets use the base64 alphabet like AWS's (with '/' and '+').
	secretAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
)

// randomString draws n characters uniformly from alphabet (rejection
// sampling, so no modulo bias).
func randomString(n int, alphabet string) (string, error) {
	limit := 256 - 256%len(alphabet)
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for tries := 0; len(out) < n && tries < 64; tries++ {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("iam: random: %w", err)
		}
		for _, b := range buf {
			if int(b) < limit && len(out) < n {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}
	if len(out) < n {
		return "", errors.New("iam: random source exhausted")
	}
	return string(out), nil
}

// GenerateKeys returns a new access key (20 chars, A-Z 0-9) and secret key
// (40 chars).
func GenerateKeys() (accessKey, secret string, err error) {
	if accessKey, err = randomString(accessKeyLen, akAlphabet); err != nil {
		return "", "", err
	}
	if secret, err = randomString(secretLen, secretAlphabet); err != nil {
		return "", "", err
	}
	return accessKey, secret, nil
}

// ValidName checks a user name: 1-64 characters from A-Z a-z 0-9 and
// "_+=,.@-" (IAM's user name alphabet).
func ValidName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w: user name must be 1-64 characters", ErrInvalid)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_+=,.@-", c) >= 0) {
			return fmt.Errorf("%w: user name %q may only contain letters, digits and _+=,.@-", ErrInvalid, name)
		}
	}
	return nil
}

// validKeys accepts operator-chosen keys too (e.g. from the environment),
// so it is looser than GenerateKeys: an access key of 3-128 characters that
// can appear in a SigV4 credential (no '/', ',', '=', spaces), and a secret
// of 8-128 printable ASCII characters.
func validKeys(ak, secret string) error {
	if len(ak) < 3 || len(ak) > 128 {
		return fmt.Errorf("%w: access key must be 3-128 characters", ErrInvalid)
	}
	for i := 0; i < len(ak); i++ {
		c := ak[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("/,=;:", c) >= 0 {
			return fmt.Errorf("%w: access key contains an invalid character", ErrInvalid)
		}
	}
	if len(secret) < 8 || len(secret) > 128 {
		return fmt.Errorf("%w: secret key must be 8-128 characters", ErrInvalid)
	}
	for i := 0; i < len(secret); i++ {
		if c := secret[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: secret key contains an invalid character", ErrInvalid)
		}
	}
	return nil
}

// RootCredentialsPath is where EnsureRoot writes generated root keys
// (mode 0600) so the operator can find them after the first start.
func RootCredentialsPath(dataDir string) string {
	return filepath.Join(dataDir, dirName, rootCredsFile)
}

// EnsureRoot makes sure an admin user exists.
//
// With accessKey and secret given (TRISTORE_ACCESS_KEY /
// TRISTORE_SECRET_KEY or the config file) it makes them an admin's keys:
// the user holding that access key (made admin, secret updated), else the
// user "root" (keys replaced), else a new admin "root". It returns the
// secret given and created=false.
//
// With neither given it returns the first admin if there is one
// (secretOut "", created=false); on first start it generates keys for a new
// admin "root", writes them to root-credentials (0600, see
// RootCredentialsPath) and returns created=true so `serve` prints them once.
func (s *Store) EnsureRoot(accessKey, secret string) (u User, secretOut string, created bool, err error) {
	if (accessKey == "") != (secret == "") {
		return User{}, "", false, fmt.Errorf("%w: set both the access key and the secret key, or neither", ErrInvalid)
	}
	if accessKey != "" {
		if err := validKeys(accessKey, secret); err != nil {
			return User{}, "", false, err
		}
		err = s.update(func(users map[string]record) error {
			target := ""
			for n, r := range users {
				if r.AccessKey == accessKey {
					target = n
				}
			}
			if target == "" {
				if _, ok := users[RootName]; ok {
					target = RootName
				}
			}
			if r, ok := users[target]; ok && r.AccessKey == accessKey && r.Admin && s.secretOf(accessKey) == secret {
				u = r.User
				return errNoChange // a restart with the same keys writes nothing
			}
			enc, err := s.encrypt(secret, accessKey)
			if err != nil {
				return err
			}
			if target == "" {
				u = User{Name: RootName, AccessKey: accessKey, Admin: true, Created: nowUTC()}
			} else {
				u = users[target].User
				u.AccessKey, u.Admin = accessKey, true
			}
			users[u.Name] = record{User: u, Secret: enc}
			return nil
		})
		if err != nil {
			return User{}, "", false, err
		}
		return u, secret, false, nil
	}
	err = s.update(func(users map[string]record) error {
		var admins []User
		for _, r := range users {
			if r.Admin {
				admins = append(admins, r.User)
			}
		}
		if len(admins) > 0 {
			u = admins[0]
			for _, a := range admins[1:] {
				if a.Created.Before(u.Created) || (a.Created.Equal(u.Created) && a.Name < u.Name) {
					u = a
				}
			}
			return errNoChange
		}
		if _, ok := users[RootName]; ok {
			return fmt.Errorf("%w: a non-admin user %q exists; remove it or set TRISTORE_ACCESS_KEY/TRISTORE_SECRET_KEY", ErrInvalid, RootName)
		}
		ak, sec, err := GenerateKeys()
		if err != nil {
			return err
		}
		enc, err := s.encrypt(sec, ak)
		if err != nil {
			return err
		}
		u = User{Name: RootName, AccessKey: ak, Admin: true, Created: nowUTC()}
		users[RootName] = record{User: u, Secret: enc}
		creds := fmt.Sprintf("# tristore root credentials, generated %s\naccess_key = %s\nsecret_key = %s\n",
			u.Created.Format("2006-01-02T15:04:05Z"), ak, sec)
		if err := s.writeFileAtomic(rootCredsFile, []byte(creds)); err != nil {
			return err
		}
		secretOut, created = sec, true
		return nil
	})
	if err != nil {
		return User{}, "", false, err
	}
	return u, secretOut, created, nil
}

package iam

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var (
	akRE     = regexp.MustCompile(`^[A-Z0-9]{20}$`)
	secretRE = regexp.MustCompile(`^[A-Za-z0-9+/]{40}$`)
)

func TestAddListRemove(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, secret, err := s.Add("alice", false)
	if err != nil {
		t.Fatal(err)
	}
	if !akRE.MatchString(u.AccessKey) || !secretRE.MatchString(secret) || u.Admin || u.Created.IsZero() {
		t.Fatalf("user %+v secret %q", u, secret)
	}
	if got, err := s.SecretFor(context.Background(), u.AccessKey); err != nil || got != secret {
		t.Fatalf("SecretFor: %q %v", got, err)
	}
	if got, err := s.UserByAccessKey(u.AccessKey); err != nil || got != u {
		t.Fatalf("UserByAccessKey: %+v %v", got, err)
	}
	if _, _, err := s.Add("alice", true); !errors.Is(err, ErrUserExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := s.AddWithKeys("bob", u.AccessKey, "somesecret1", false); !errors.Is(err, ErrAccessKeyInUse) {
		t.Fatalf("duplicate key: %v", err)
	}
	for _, bad := range []string{"", "has space", "slash/name", strings.Repeat("x", 65)} {
		if _, _, err := s.Add(bad, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
	if _, err := s.AddWithKeys("carol", "CAROLKEY", "carolsecret", true); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || len(list) != 2 || list[0].Name != "alice" || list[1].Name != "carol" || !list[1].Admin {
		t.Fatalf("list %+v %v", list, err)
	}
	// Secrets are not stored in clear.
	raw, _ := os.ReadFile(filepath.Join(dir, dirName, usersFile))
	if strings.Contains(string(raw), secret) || strings.Contains(string(raw), "carolsecret") {
		t.Fatal("users.json holds a clear-text secret")
	}
	// File modes.
	for name, mode := range map[string]os.FileMode{"": 0o700, usersFile: 0o600, masterKeyFile: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, dirName, name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%q: mode %v %v, want %v", name, fi.Mode().Perm(), err, mode)
		}
	}
	if err := s.Remove("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SecretFor(context.Background(), u.AccessKey); !errors.Is(err, ErrUnknownAccessKey) {
		t.Fatalf("removed user's key: %v", err)
	}
	if err := s.Remove("alice"); !errors.Is(err, ErrNoSuchUser) {
		t.Fatalf("remove twice: %v", err)
	}
	if err := s.Remove("carol"); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("remove last admin: %v", err)
	}
	// Reopen: everything persisted and decrypts with master.key.
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s2.SecretFor(context.Background(), "CAROLKEY"); err != nil || got != "carolsecret" {
		t.Fatalf("after reopen: %q %v", got, err)
	}
	// The unknown-key error is recognisable without importing iam.
	_, err = s2.SecretFor(context.Background(), "NOPE")
	var u2 interface{ UnknownAccessKey() bool }
	if !errors.As(err, &u2) || !u2.UnknownAccessKey() {
		t.Fatalf("unknown key error %v", err)
	}
}

// TestReloadAcrossStores: a second Store on the same directory (what
// `tristore user add` is while serve runs) is seen by the first.
func TestReloadAcrossStores(t *testing.T) {
	dir := t.TempDir()
	serve, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := serve.List(); err != nil {
		t.Fatal(err)
	}
	cli, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, secret, err := cli.Add("dave", false)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := serve.SecretFor(context.Background(), u.AccessKey); err != nil || got != secret {
		t.Fatalf("serve did not see the new user: %v", err)
	}
	if err := cli.Remove("dave"); err != nil {
		t.Fatal(err)
	}
	if _, err := serve.UserByAccessKey(u.AccessKey); !errors.Is(err, ErrUnknownAccessKey) {
		t.Fatalf("serve still knows the removed user: %v", err)
	}
}

func TestConcurrentAdds(t *testing.T) {
	dir := t.TempDir()
	a, _ := Open(dir)
	b, _ := Open(dir)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 20; i++ {
		for j, s := range []*Store{a, b} {
			wg.Add(1)
			go func(i, j int, s *Store) {
				defer wg.Done()
				_, _, err := s.Add(strings.Repeat("u", 1)+string(rune('a'+j))+"-"+itoaTest(i), false)
				errs <- err
				s.SecretFor(context.Background(), "X")
			}(i, j, s)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	list, err := a.List()
	if err != nil || len(list) != 40 {
		t.Fatalf("%d users, %v", len(list), err)
	}
}

func itoaTest(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

func TestEnsureRoot(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	u, secret, created, err := s.EnsureRoot("", "")
	if err != nil || !created || u.Name != RootName || !u.Admin || secret == "" {
		t.Fatalf("first start: %+v %v %v", u, created, err)
	}
	creds, err := os.ReadFile(RootCredentialsPath(dir))
	if err != nil || !strings.Contains(string(creds), u.AccessKey) || !strings.Contains(string(creds), secret) {
		t.Fatalf("root-credentials: %q %v", creds, err)
	}
	if fi, _ := os.Stat(RootCredentialsPath(dir)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("root-credentials mode %v", fi.Mode())
	}
	// Second start: same user, nothing printed.
	u2, secret2, created2, err := s.EnsureRoot("", "")
	if err != nil || created2 || secret2 != "" || u2 != u {
		t.Fatalf("second start: %+v %q %v %v", u2, secret2, created2, err)
	}
	// Keys from the environment replace root's.
	u3, secret3, created3, err := s.EnsureRoot("ENVACCESSKEY", "envsecretkey")
	if err != nil || created3 || u3.Name != RootName || u3.AccessKey != "ENVACCESSKEY" || secret3 != "envsecretkey" {
		t.Fatalf("env keys: %+v %v %v", u3, created3, err)
	}
	if got, _ := s.SecretFor(context.Background(), "ENVACCESSKEY"); got != "envsecretkey" {
		t.Fatal("env secret not stored")
	}
	if _, err := s.SecretFor(context.Background(), u.AccessKey); err == nil {
		t.Fatal("old root key still works")
	}
	if _, _, _, err := s.EnsureRoot("ONLYKEY", ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("half keys: %v", err)
	}
	// Fresh dir with env keys: root created with them, no credentials file.
	dir2 := t.TempDir()
	s2, _ := Open(dir2)
	if u, _, created, err := s2.EnsureRoot("minioadmin", "minioadmin"); err != nil || created || !u.Admin {
		t.Fatalf("fresh with env keys: %+v %v %v", u, created, err)
	}
	if _, err := os.Stat(RootCredentialsPath(dir2)); err == nil {
		t.Fatal("root-credentials written for operator-chosen keys")
	}
}

func TestCorruptMasterKey(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	s.Add("eve", false)
	os.WriteFile(filepath.Join(dir, dirName, masterKeyFile), []byte("short"), 0o600)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "master.key") {
		t.Fatalf("corrupt key: %v", err)
	}
	key := make([]byte, 32)
	os.WriteFile(filepath.Join(dir, dirName, masterKeyFile), key, 0o600)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "decrypt") {
		t.Fatalf("wrong key: %v", err)
	}
}

package iam

import (
	"context"
	"errors"
	"testing"

	"github.com/tristore/tristore/internal/reqmemo"
)

// TestOneCheckPerRequest: within one request (a reqmemo context) the
// secret lookup for the signature and the user lookup for the identity
// check users.json once, not twice; a user removed by another process
// (another Store on the same directory, as `tristore user remove`) is
// gone for the next request, while the request that already looked keeps
// the state it saw.
func TestOneCheckPerRequest(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, secret, err := s.Add("alice", false)
	if err != nil {
		t.Fatal(err)
	}
	req := reqmemo.With(context.Background())
	c0 := s.checks.Load()
	if got, err := s.SecretFor(req, u.AccessKey); err != nil || got != secret {
		t.Fatalf("SecretFor: %q %v", got, err)
	}
	if got, err := s.UserFor(req, u.AccessKey); err != nil || got.Name != "alice" {
		t.Fatalf("UserFor: %+v %v", got, err)
	}
	if n := s.checks.Load() - c0; n != 1 {
		t.Fatalf("one request checked users.json %d times, want 1", n)
	}
	// Without a request memo every lookup checks.
	c0 = s.checks.Load()
	s.SecretFor(context.Background(), u.AccessKey)
	s.UserByAccessKey(u.AccessKey)
	if n := s.checks.Load() - c0; n != 2 {
		t.Fatalf("two lookups outside a request checked %d times, want 2", n)
	}

	other, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Remove("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserFor(req, u.AccessKey); err != nil {
		t.Fatalf("the request that looked keeps its state: %v", err)
	}
	next := reqmemo.With(context.Background())
	if _, err := s.SecretFor(next, u.AccessKey); !errors.Is(err, ErrUnknownAccessKey) {
		t.Fatalf("next request after the removal: %v", err)
	}
}

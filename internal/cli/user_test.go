package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/tristore/tristore/iam"
)

// runCLI runs one tristore command line in-process and returns its stdout.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

var keyLine = regexp.MustCompile(`(?m)^(access|secret) key: (\S+)$`)

func TestUserCommands(t *testing.T) {
	data := t.TempDir()
	out, err := runCLI(t, "user", "add", "alice", "--data", data)
	if err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	m := keyLine.FindAllStringSubmatch(out, -1)
	if len(m) != 2 || len(m[0][2]) != 20 || len(m[1][2]) != 40 {
		t.Fatalf("user add output:\n%s", out)
	}
	ak, secret := m[0][2], m[1][2]
	if _, err := runCLI(t, "user", "add", "root2", "--admin", "--data", data); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "user", "add", "alice", "--data", data); err == nil {
		t.Fatal("duplicate user accepted")
	}
	out, err = runCLI(t, "user", "list", "--data", data)
	if err != nil || !strings.Contains(out, "alice") || !strings.Contains(out, ak) || strings.Contains(out, secret) {
		t.Fatalf("user list: %v\n%s", err, out)
	}
	out, err = runCLI(t, "user", "list", "--json", "--data", data)
	var users []iam.User
	if err != nil || json.Unmarshal([]byte(out), &users) != nil || len(users) != 2 || strings.Contains(out, secret) {
		t.Fatalf("user list --json: %v\n%s", err, out)
	}
	if users[1].Name != "root2" || !users[1].Admin {
		t.Fatalf("users %+v", users)
	}
	// The secret is stored encrypted: it appears in no file of the tree.
	filepath.Walk(data, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the clear secret", p)
			}
		}
		return nil
	})
	if out, err := runCLI(t, "user", "remove", "alice", "--data", data); err != nil || !strings.Contains(out, "removed") {
		t.Fatalf("user remove: %v %s", err, out)
	}
	if _, err := runCLI(t, "user", "remove", "alice", "--data", data); err == nil || !strings.Contains(err.Error(), "no such user") {
		t.Fatalf("remove missing user: %v", err)
	}
	missing := filepath.Join(data, "no-such-dir")
	if _, err := runCLI(t, "user", "list", "--data", missing); err == nil {
		t.Fatal("list on a missing data directory succeeded")
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("list created the missing data directory")
	}
	if _, err := runCLI(t, "user", "add", "bad name", "--data", data); err == nil {
		t.Fatal("invalid name accepted")
	}
}

// TestUserAddWhileServing: users added or removed while serve runs take
// effect on the next request, without a restart.
func TestUserAddWhileServing(t *testing.T) {
	data := t.TempDir()
	args := []string{"--data", data, "--admin-addr", "off"}
	for _, s := range frontendSpecs {
		addr := "off"
		if s.Name == "s3" {
			addr = "127.0.0.1:0"
		}
		args = append(args, "--"+s.Name+"-addr", addr)
	}
	addrs := startServe(t, "s3", 60*time.Second, args...)
	ctx := context.Background()
	// The root credentials were generated and saved.
	if b, err := os.ReadFile(iam.RootCredentialsPath(data)); err != nil || !strings.Contains(string(b), "secret_key") {
		t.Fatalf("root-credentials: %v", err)
	}
	users, err := iam.Open(data) // what a concurrent `tristore user add` does
	if err != nil {
		t.Fatal(err)
	}
	u, secret, err := users.Add("erin", false)
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+addrs["s3"]+path, nil)
		req.Header.Set("X-Amz-Content-Sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
		s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		if err := s.SignHTTP(ctx, aws.Credentials{AccessKeyID: u.AccessKey, SecretAccessKey: secret}, req,
			"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "s3", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if st, body := call("PUT", "/erins-bucket"); st != 200 {
		t.Fatalf("new user CreateBucket: %d %s", st, body)
	}
	if err := users.Remove("erin"); err != nil {
		t.Fatal(err)
	}
	if st, body := call("GET", "/erins-bucket"); st != 403 || !strings.Contains(body, "InvalidAccessKeyId") {
		t.Fatalf("removed user: %d %s", st, body)
	}
}

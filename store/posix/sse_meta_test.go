package posix

import (
	"context"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
)

// TestUpdateMetaKeepsEncryption: a metadata-only update (tags, ACL,
// retention) that does not carry the encryption envelope keeps the stored
// one; losing it would make the sealed content unreadable.
func TestUpdateMetaKeepsEncryption(t *testing.T) {
	ctx := context.Background()
	b, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"mode": "S3", "wk": "x"}
	if _, err := b.Put(ctx, "bkt", "k", strings.NewReader("sealed"), 6, store.ObjectMeta{Encryption: env}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpdateMeta(ctx, "bkt", "k", store.ObjectMeta{Tags: map[string]string{"a": "b"}}); err != nil {
		t.Fatal(err)
	}
	oi, err := b.Stat(ctx, "bkt", "k")
	if err != nil || oi.Meta.Encryption["wk"] != "x" || oi.Meta.Tags["a"] != "b" {
		t.Fatalf("after UpdateMeta: %v %+v", err, oi.Meta)
	}
	if err := b.SetBucketConfig(ctx, "bkt", store.VersioningConfig, store.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	o2, err := b.Put(ctx, "bkt", "v", strings.NewReader("sealed"), 6, store.ObjectMeta{Encryption: env})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpdateVersionMeta(ctx, "bkt", "v", o2.VersionID, store.ObjectMeta{LegalHold: true}); err != nil {
		t.Fatal(err)
	}
	if oi, err := b.StatVersion(ctx, "bkt", "v", o2.VersionID); err != nil || oi.Meta.Encryption["wk"] != "x" || !oi.Meta.LegalHold {
		t.Fatalf("after UpdateVersionMeta: %v %+v", err, oi.Meta)
	}
}

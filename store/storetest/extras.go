package storetest

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
)

func testMetaUpdater(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	mu, ok := s.(store.MetaUpdater)
	if !ok {
		t.Skip("store does not implement store.MetaUpdater")
	}
	data := pattern(5, 777)
	orig := put(t, s, ctx, "bkt", "m/obj", data)
	nm := store.ObjectMeta{ContentType: "image/png", UserMeta: map[string]string{"k": "v"}, ACL: "private", Owner: "o2", Tags: map[string]string{"t": "1"}}
	oi, err := mu.UpdateMeta(ctx, "bkt", "m/obj", nm)
	if err != nil {
		t.Fatal(err)
	}
	if oi.ETag != orig.ETag || oi.Size != orig.Size {
		t.Fatalf("UpdateMeta changed ETag/size: %+v vs %+v", oi, orig)
	}
	got, gi := get(t, s, ctx, "bkt", "m/obj", 0, -1)
	if !bytes.Equal(got, data) || gi.ETag != orig.ETag {
		t.Fatal("UpdateMeta changed the content")
	}
	checkMeta(t, "after UpdateMeta", gi, nm)
	_, err = mu.UpdateMeta(ctx, "bkt", "m/none", nm)
	wantErr(t, "UpdateMeta missing key", err, store.ErrNoSuchKey)
	_, err = mu.UpdateMeta(ctx, "nobucket", "m/obj", nm)
	wantErr(t, "UpdateMeta missing bucket", err, store.ErrNoSuchBucket)
}

func testBucketConfig(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	bc, ok := s.(store.BucketConfigurer)
	if !ok {
		t.Skip("store does not implement store.BucketConfigurer")
	}
	v, err := bc.GetBucketConfig(ctx, "bkt", "policy")
	if err != nil || v != "" {
		t.Fatalf("unset config = %q, %v; want \"\", nil", v, err)
	}
	doc := `{"Version":"2012-10-17","Statement":[]}`
	if err := bc.SetBucketConfig(ctx, "bkt", "policy", doc); err != nil {
		t.Fatal(err)
	}
	if err := bc.SetBucketConfig(ctx, "bkt", "acl", "public-read"); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 20000) // beyond what some xattr implementations hold
	if err := bc.SetBucketConfig(ctx, "bkt", "big", big); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"policy": doc, "acl": "public-read", "big": big} {
		if v, err := bc.GetBucketConfig(ctx, "bkt", name); err != nil || v != want {
			t.Fatalf("config %s = %.40q, %v; want %.40q", name, v, err, want)
		}
	}
	if err := bc.SetBucketConfig(ctx, "bkt", "policy", ""); err != nil {
		t.Fatal(err)
	}
	if v, _ := bc.GetBucketConfig(ctx, "bkt", "policy"); v != "" {
		t.Fatalf("deleted config reads %q", v)
	}
	if v, _ := bc.GetBucketConfig(ctx, "bkt", "acl"); v != "public-read" {
		t.Fatalf("other config lost: %q", v)
	}
	_, err = bc.GetBucketConfig(ctx, "nobucket", "acl")
	wantErr(t, "GetBucketConfig missing bucket", err, store.ErrNoSuchBucket)
	wantErr(t, "SetBucketConfig missing bucket", bc.SetBucketConfig(ctx, "nobucket", "acl", "x"), store.ErrNoSuchBucket)
	// Config does not make a bucket non-empty, and does not outlive it.
	if err := s.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBucket(ctx, "bkt", "o"); err != nil {
		t.Fatal(err)
	}
	if v, _ := bc.GetBucketConfig(ctx, "bkt", "acl"); v != "" {
		t.Fatalf("config survived bucket deletion: %q", v)
	}
}

// multipartETag is hex(md5(concat(binary part md5s)))-N.
func multipartETag(parts ...[]byte) string {
	h := md5.New()
	for _, p := range parts {
		s := md5.Sum(p)
		h.Write(s[:])
	}
	return fmt.Sprintf("%s-%d", hex.EncodeToString(h.Sum(nil)), len(parts))
}

func testMultipart(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	mp, ok := s.(store.Multiparter)
	if !ok {
		t.Skip("store does not implement store.Multiparter")
	}
	meta := store.ObjectMeta{ContentType: "video/mp4", UserMeta: map[string]string{"a": "b"}, Tags: map[string]string{"mp": "yes"}}
	id, err := mp.CreateMultipart(ctx, "bkt", "big/file", meta)
	if err != nil {
		t.Fatal(err)
	}
	if id == "" || strings.ContainsAny(id, "/?&#% +") {
		t.Fatalf("upload ID %q is not URL-safe", id)
	}
	p1 := pattern(21, store.MinPartSize)
	p2 := pattern(22, store.MinPartSize+3)
	p3 := pattern(23, 1000)
	// Part 2 is first uploaded with other content and then replaced.
	if _, err := mp.PutPart(ctx, "bkt", "big/file", id, 2, bytes.NewReader(p3), int64(len(p3))); err != nil {
		t.Fatal(err)
	}
	for i, p := range [][]byte{p1, p2, p3} {
		pi, err := mp.PutPart(ctx, "bkt", "big/file", id, i+1, bytes.NewReader(p), int64(len(p)))
		if err != nil {
			t.Fatal(err)
		}
		if pi.Number != i+1 || pi.Size != int64(len(p)) || pi.ETag != md5hex(p) {
			t.Fatalf("PutPart %d = %+v", i+1, pi)
		}
	}
	_, err = mp.PutPart(ctx, "bkt", "big/file", id, 4, strings.NewReader("short"), 10)
	wantErr(t, "PutPart short body", err, store.ErrIncompleteBody)
	parts, up, err := mp.ListParts(ctx, "bkt", "big/file", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 || parts[1].ETag != md5hex(p2) || parts[2].Size != 1000 || up.Key != "big/file" || up.UploadID != id || up.Meta.ContentType != "video/mp4" {
		t.Fatalf("ListParts = %+v, %+v", parts, up)
	}
	ups, err := mp.ListMultipartUploads(ctx, "bkt", "big/")
	if err != nil || len(ups) != 1 || ups[0].UploadID != id {
		t.Fatalf("ListMultipartUploads = %+v, %v", ups, err)
	}
	if ups, _ := mp.ListMultipartUploads(ctx, "bkt", "other"); len(ups) != 0 {
		t.Fatalf("prefix filter: %+v", ups)
	}
	// The upload is not an object until completed.
	_, err = s.Stat(ctx, "bkt", "big/file")
	wantErr(t, "Stat before Complete", err, store.ErrNoSuchKey)

	oi, err := mp.CompleteMultipart(ctx, "bkt", "big/file", id, []store.CompletePart{cp(1, md5hex(p1)), cp(2, `"`+md5hex(p2)+`"`), cp(3, md5hex(p3))})
	if err != nil {
		t.Fatal(err)
	}
	want := multipartETag(p1, p2, p3)
	all := bytes.Join([][]byte{p1, p2, p3}, nil)
	if oi.ETag != want || oi.Size != int64(len(all)) {
		t.Fatalf("Complete = ETag %s size %d, want %s %d", oi.ETag, oi.Size, want, len(all))
	}
	got, gi := get(t, s, ctx, "bkt", "big/file", 0, -1)
	if !bytes.Equal(got, all) || gi.ETag != want {
		t.Fatal("completed object content or ETag wrong")
	}
	checkMeta(t, "completed object", gi, meta)
	si, err := s.Stat(ctx, "bkt", "big/file")
	if err != nil {
		t.Fatal(err)
	}
	if len(si.Parts) != 3 || si.Parts[0].Size != int64(len(p1)) || si.Parts[1].ETag != md5hex(p2) || si.Parts[2].Number != 3 {
		t.Fatalf("completed object parts = %+v", si.Parts)
	}
	// Ranged read of part 2 as GET ?partNumber=2 would do it.
	got, _ = get(t, s, ctx, "bkt", "big/file", si.Parts[0].Size, si.Parts[1].Size)
	if !bytes.Equal(got, p2) {
		t.Fatal("range of part 2 wrong")
	}
	// A retried Complete (its reply was lost) answers with the object it
	// published; a different part list for the gone upload does not.
	again, err := mp.CompleteMultipart(ctx, "bkt", "big/file", id, []store.CompletePart{cp(1, md5hex(p1)), cp(2, md5hex(p2)), cp(3, md5hex(p3))})
	if err != nil || again.ETag != want || again.Size != int64(len(all)) {
		t.Fatalf("retried Complete = %+v, %v; want the published object", again, err)
	}
	_, err = mp.CompleteMultipart(ctx, "bkt", "big/file", id, []store.CompletePart{cp(1, md5hex(p1)), cp(2, md5hex(p2))})
	wantErr(t, "Complete of a gone upload with other parts", err, store.ErrNoSuchUpload)
	_, _, err = mp.ListParts(ctx, "bkt", "big/file", id)
	wantErr(t, "ListParts after Complete", err, store.ErrNoSuchUpload)
	if ups, _ := mp.ListMultipartUploads(ctx, "bkt", ""); len(ups) != 0 {
		t.Fatalf("uploads after Complete: %+v", ups)
	}
	// A single (small) part is fine, and a plain Put over a multipart
	// object drops its part list.
	id2, _ := mp.CreateMultipart(ctx, "bkt", "one", store.ObjectMeta{})
	if _, err := mp.PutPart(ctx, "bkt", "one", id2, 7, bytes.NewReader(p3), int64(len(p3))); err != nil {
		t.Fatal(err)
	}
	oi, err = mp.CompleteMultipart(ctx, "bkt", "one", id2, []store.CompletePart{cp(7, md5hex(p3))})
	if err != nil || oi.ETag != multipartETag(p3) {
		t.Fatalf("single-part Complete = %+v, %v", oi, err)
	}
	put(t, s, ctx, "bkt", "big/file", []byte("plain"))
	if si, _ := s.Stat(ctx, "bkt", "big/file"); si.Parts != nil || si.ETag != md5hex([]byte("plain")) {
		t.Fatalf("plain Put over multipart object: %+v", si)
	}
}

func testMultipartErrors(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	mp, ok := s.(store.Multiparter)
	if !ok {
		t.Skip("store does not implement store.Multiparter")
	}
	_, err := mp.CreateMultipart(ctx, "nobucket", "k", store.ObjectMeta{})
	wantErr(t, "CreateMultipart missing bucket", err, store.ErrNoSuchBucket)
	_, err = mp.CreateMultipart(ctx, "bkt", strings.Repeat("k", store.MaxKeyLen+1), store.ObjectMeta{})
	wantErr(t, "CreateMultipart invalid key", err, store.ErrInvalidKey)
	for _, bad := range []string{"nonexistent", "../../etc", "", strings.Repeat("0", 32)} {
		_, err = mp.PutPart(ctx, "bkt", "k", bad, 1, strings.NewReader("x"), 1)
		wantErr(t, "PutPart unknown upload "+bad, err, store.ErrNoSuchUpload)
		_, _, err = mp.ListParts(ctx, "bkt", "k", bad)
		wantErr(t, "ListParts unknown upload", err, store.ErrNoSuchUpload)
		_, err = mp.CompleteMultipart(ctx, "bkt", "k", bad, []store.CompletePart{cp(1, "x")})
		wantErr(t, "Complete unknown upload", err, store.ErrNoSuchUpload)
		wantErr(t, "Abort unknown upload", mp.AbortMultipart(ctx, "bkt", "k", bad), store.ErrNoSuchUpload)
	}
	id, err := mp.CreateMultipart(ctx, "bkt", "k", store.ObjectMeta{})
	if err != nil {
		t.Fatal(err)
	}
	// The upload belongs to bkt/k only.
	_, err = mp.PutPart(ctx, "bkt", "other", id, 1, strings.NewReader("x"), 1)
	wantErr(t, "PutPart for another key", err, store.ErrNoSuchUpload)
	big := pattern(31, store.MinPartSize)
	small := pattern(32, 100)
	mustPart := func(n int, d []byte) {
		if _, err := mp.PutPart(ctx, "bkt", "k", id, n, bytes.NewReader(d), int64(len(d))); err != nil {
			t.Fatal(err)
		}
	}
	mustPart(1, small)
	mustPart(2, big)
	mustPart(3, small)
	_, err = mp.PutPart(ctx, "bkt", "k", id, 0, strings.NewReader("x"), 1)
	wantErr(t, "PutPart number 0", err, store.ErrInvalidPart)
	_, err = mp.PutPart(ctx, "bkt", "k", id, 10001, strings.NewReader("x"), 1)
	wantErr(t, "PutPart number 10001", err, store.ErrInvalidPart)
	complete := func(ps ...store.CompletePart) error {
		_, err := mp.CompleteMultipart(ctx, "bkt", "k", id, ps)
		return err
	}
	wantErr(t, "Complete out of order", complete(cp(2, md5hex(big)), cp(1, md5hex(small))), store.ErrInvalidPartOrder)
	wantErr(t, "Complete duplicate part", complete(cp(2, md5hex(big)), cp(2, md5hex(big))), store.ErrInvalidPartOrder)
	wantErr(t, "Complete missing part", complete(cp(2, md5hex(big)), cp(5, md5hex(small))), store.ErrInvalidPart)
	wantErr(t, "Complete wrong ETag", complete(cp(2, md5hex(small))), store.ErrInvalidPart)
	wantErr(t, "Complete no parts", complete(), store.ErrInvalidPart)
	wantErr(t, "Complete small non-last part", complete(cp(1, md5hex(small)), cp(2, md5hex(big))), store.ErrEntityTooSmall)
	// Failed Completes leave the upload intact and publish nothing.
	_, err = s.Stat(ctx, "bkt", "k")
	wantErr(t, "Stat after failed Completes", err, store.ErrNoSuchKey)
	if ps, _, err := mp.ListParts(ctx, "bkt", "k", id); err != nil || len(ps) != 3 {
		t.Fatalf("parts after failed Completes: %d, %v", len(ps), err)
	}
	oi, err := mp.CompleteMultipart(ctx, "bkt", "k", id, []store.CompletePart{cp(2, md5hex(big)), cp(3, md5hex(small))})
	if err != nil || oi.ETag != multipartETag(big, small) {
		t.Fatalf("Complete with a subset of parts = %+v, %v", oi, err)
	}
	// Abort.
	id, _ = mp.CreateMultipart(ctx, "bkt", "k2", store.ObjectMeta{})
	mustPart2 := func() {
		if _, err := mp.PutPart(ctx, "bkt", "k2", id, 1, bytes.NewReader(small), 100); err != nil {
			t.Fatal(err)
		}
	}
	mustPart2()
	if err := mp.AbortMultipart(ctx, "bkt", "k2", id); err != nil {
		t.Fatal(err)
	}
	_, _, err = mp.ListParts(ctx, "bkt", "k2", id)
	wantErr(t, "ListParts after Abort", err, store.ErrNoSuchUpload)
	wantErr(t, "Abort twice", mp.AbortMultipart(ctx, "bkt", "k2", id), store.ErrNoSuchUpload)
	_, err = s.Stat(ctx, "bkt", "k2")
	wantErr(t, "Stat of aborted upload's key", err, store.ErrNoSuchKey)
	_, err = mp.ListMultipartUploads(ctx, "nobucket", "")
	wantErr(t, "ListMultipartUploads missing bucket", err, store.ErrNoSuchBucket)
}

func testFiler(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	fl, ok := s.(store.Filer)
	if !ok {
		t.Skip("store does not implement store.Filer")
	}
	_, err := fl.OpenFile(ctx, "bkt", "vol/none", os.O_RDWR, 0)
	wantErr(t, "OpenFile missing without O_CREATE", err, store.ErrNoSuchKey)
	_, err = fl.OpenFile(ctx, "nobucket", "vol/x", os.O_RDWR|os.O_CREATE, 0o644)
	wantErr(t, "OpenFile missing bucket", err, store.ErrNoSuchBucket)
	_, err = fl.OpenFile(ctx, "bkt", "", os.O_RDWR|os.O_CREATE, 0o644)
	wantErr(t, "OpenFile invalid key", err, store.ErrInvalidKey)

	f, err := fl.OpenFile(ctx, "bkt", "vol/lun0", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	const size = 4 << 20
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	blk := pattern(41, 4096)
	if _, err := f.WriteAt(blk, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Size(); err != nil || n != size {
		t.Fatalf("Size = %d, %v", n, err)
	}
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, 1<<20); err != nil || !bytes.Equal(buf, blk) {
		t.Fatalf("ReadAt after WriteAt: %v", err)
	}
	want := make([]byte, size)
	copy(want[1<<20:], blk)
	if hp, ok := f.(store.HolePuncher); ok {
		if err := hp.PunchHole(1<<20, 2048); err != nil {
			t.Fatal(err)
		}
		clear(want[1<<20 : 1<<20+2048])
		if _, err := f.ReadAt(buf, 1<<20); err != nil || !bytes.Equal(buf, want[1<<20:1<<20+4096]) {
			t.Fatalf("after PunchHole the range does not read as zeros: %v", err)
		}
		if n, _ := f.Size(); n != size {
			t.Fatalf("PunchHole changed the size to %d", n)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The volume is an object: its ETag follows the content.
	oi, err := s.Stat(ctx, "bkt", "vol/lun0")
	if err != nil || oi.Size != size || oi.ETag != md5hex(want) {
		t.Fatalf("Stat of volume = %+v, %v; want size %d ETag %s", oi, err, size, md5hex(want))
	}
	got, _ := get(t, s, ctx, "bkt", "vol/lun0", 1<<20, 4096)
	if !bytes.Equal(got, want[1<<20:1<<20+4096]) {
		t.Fatal("ranged Get of volume wrong")
	}
	// Writing through a File into a Put object updates its ETag (same size).
	data := pattern(42, 10000)
	put(t, s, ctx, "bkt", "obj", data)
	f, err = fl.OpenFile(ctx, "bkt", "obj", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("PATCH"), 100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	copy(data[100:], "PATCH")
	oi, err = s.Stat(ctx, "bkt", "obj")
	if err != nil || oi.ETag != md5hex(data) || oi.Meta.ContentType != "application/x-test" {
		t.Fatalf("after WriteAt Stat = %+v, %v; want ETag %s and the old content type", oi, err, md5hex(data))
	}
	res, err := s.List(ctx, "bkt", store.ListOptions{Prefix: "obj"})
	if err != nil || len(res.Objects) != 1 || res.Objects[0].ETag != md5hex(data) {
		t.Fatalf("List after WriteAt = %+v, %v", res.Objects, err)
	}
	g, gi := get(t, s, ctx, "bkt", "obj", 0, -1)
	if !bytes.Equal(g, data) || gi.ETag != md5hex(data) {
		t.Fatal("Get after WriteAt wrong")
	}
	// O_EXCL on an existing object fails.
	if _, err := fl.OpenFile(ctx, "bkt", "obj", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
		t.Fatal("O_EXCL on an existing object succeeded")
	}
}

func cp(n int, etag string) store.CompletePart { return store.CompletePart{Number: n, ETag: etag} }

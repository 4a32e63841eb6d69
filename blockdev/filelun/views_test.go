package filelun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
)

// A served volume cannot be replaced or deleted through the object view
// (S3 PUT, CopyObject, CompleteMultipartUpload, DELETE all end in these
// store calls); its data stays what the LUN wrote. Once the LUN is closed
// the volume is an ordinary object again (documented in docs/iscsi.md).
func TestServedVolumeRefusesObjectChanges(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	if _, err := Create(ctx, st, "vols", "disk", 1<<20); err != nil {
		t.Fatal(err)
	}
	l, _, err := Open(ctx, st, "vols", "disk")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data := bytes.Repeat([]byte("block da"), 64)
	if _, err := l.WriteAtFUA(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "vols", "disk", strings.NewReader("x\n"), 2, store.ObjectMeta{}); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("Put onto a served volume: %v", err)
	}
	if err := st.Delete(ctx, "vols", "disk"); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("Delete of a served volume: %v", err)
	}
	mp := st.(store.Multiparter)
	id, err := mp.CreateMultipart(ctx, "vols", "disk", store.ObjectMeta{})
	if err != nil {
		t.Fatal(err)
	}
	pi, err := mp.PutPart(ctx, "vols", "disk", id, 1, strings.NewReader("part"), 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mp.CompleteMultipart(ctx, "vols", "disk", id, []store.CompletePart{{Number: 1, ETag: pi.ETag}}); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("CompleteMultipart onto a served volume: %v", err)
	}
	if ep, ok := st.(store.ExclusivePutter); ok {
		if _, err := ep.PutIfAbsent(ctx, "vols", "disk", strings.NewReader("x"), 1, store.ObjectMeta{}); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Fatalf("PutIfAbsent onto a served volume: %v", err)
		}
	}
	// A second target cannot serve it too.
	if _, _, err := Open(ctx, st, "vols", "disk"); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: %v", err)
	}
	// The LUN's data is intact and still the object's content (a ranged
	// GET of a served volume is allowed).
	rc, oi, err := st.Get(ctx, "vols", "disk", 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) || oi.Size != 1<<20 {
		t.Fatalf("object after refused changes: size %d, data ok %v", oi.Size, bytes.Equal(got, data))
	}
	in, err := Get(ctx, st, "vols", "disk")
	if err != nil || !in.Served || in.State != StateOK {
		t.Fatalf("Get while served: %+v %v", in, err)
	}

	// Closed: an ordinary object again. A PUT replaces it (e.g. restoring
	// an image), and the volume keeps its registration and serial.
	l.Close()
	img := bytes.Repeat([]byte{7}, 2<<20)
	if _, err := st.Put(ctx, "vols", "disk", bytes.NewReader(img), int64(len(img)), store.ObjectMeta{}); err != nil {
		t.Fatalf("Put onto a volume not served: %v", err)
	}
	l2, in2, err := Open(ctx, st, "vols", "disk")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if in2.Size != 2<<20 || in2.Serial != in.Serial {
		t.Fatalf("reopened after restore: %+v (serial was %s)", in2, in.Serial)
	}
	buf := make([]byte, 512)
	if _, err := l2.ReadAt(ctx, buf, 1<<20); err != nil || buf[0] != 7 {
		t.Fatalf("restored image not served: %v %d", err, buf[0])
	}
}

// One volume whose object vanished (rm by hand, an S3 DELETE while it was
// not served) must not hide the others: List reports it as broken, the
// others stay listed and openable, and Delete removes the registration.
func TestBrokenVolumeDoesNotHideOthers(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	if err := st.CreateBucket(ctx, "more", ""); err != nil {
		t.Fatal(err)
	}
	for _, ref := range [][2]string{{"vols", "a"}, {"vols", "b"}, {"vols", "c"}, {"more", "d"}} {
		if _, err := Create(ctx, st, ref[0], ref[1], 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	root := st.(store.LocalPather).Root()
	if err := os.Remove(filepath.Join(root, "vols", "b")); err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []string{"", "vols"} {
		vs, err := List(ctx, st, bucket)
		if err != nil {
			t.Fatalf("List(%q) with one broken volume: %v", bucket, err)
		}
		states := map[string]string{}
		for _, v := range vs {
			states[v.Bucket+"/"+v.Name] = v.State
			if v.State == StateBroken && (v.Problem == "" || v.Size != -1) {
				t.Errorf("broken entry %+v: want a problem and size -1", v)
			}
		}
		want := map[string]string{"vols/a": StateOK, "vols/b": StateBroken, "vols/c": StateOK}
		if bucket == "" {
			want["more/d"] = StateOK
		}
		if len(states) != len(want) {
			t.Fatalf("List(%q) = %v, want %v", bucket, states, want)
		}
		for k, w := range want {
			if states[k] != w {
				t.Errorf("List(%q): %s is %q, want %q", bucket, k, states[k], w)
			}
		}
	}
	if l, _, err := Open(ctx, st, "vols", "c"); err != nil {
		t.Fatalf("a good volume next to a broken one: %v", err)
	} else {
		l.Close()
	}
	if _, _, err := Open(ctx, st, "vols", "b"); err == nil {
		t.Fatal("opened a broken volume")
	}
	if err := Delete(ctx, st, "vols", "b"); err != nil {
		t.Fatalf("Delete of a broken volume: %v", err)
	}
	if _, err := Get(ctx, st, "vols", "b"); !errors.Is(err, ErrNotVolume) {
		t.Fatalf("after delete: %v", err)
	}
	if vs, err := List(ctx, st, ""); err != nil || len(vs) != 3 {
		t.Fatalf("after delete: %+v %v", vs, err)
	}

	// A corrupt registry in one bucket hides only that bucket.
	if err := st.SetBucketConfig(ctx, "more", ConfigName, "{not json"); err != nil {
		t.Fatal(err)
	}
	vs, err := List(ctx, st, "")
	if err == nil || !strings.Contains(err.Error(), "more") || len(vs) != 2 {
		t.Fatalf("List with a corrupt registry: %+v %v", vs, err)
	}
}

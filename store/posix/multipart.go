package posix

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/newdir"
)

// Multipart uploads live in .tristore/multipart/<uploadID>/: info.json
// (bucket, key, metadata, initiation time) and one file part-NNNNN per
// part, each with the same metadata record as an object (its ETag). Parts
// are published like objects (temp file, fsync, rename), so an upload
// survives a restart. Complete copies the parts into a temp file in the
// target directory (copy_file_range where the kernel offers it) and
// publishes it like a Put.

const maxPartNumber = 10000

type uploadInfo struct {
	Bucket    string           `json:"bucket"`
	Key       string           `json:"key"`
	Meta      store.ObjectMeta `json:"meta"`
	Initiated time.Time        `json:"initiated"`
}

// validUploadID accepts only IDs this backend makes (32 hex digits), so an
// ID can never name a path outside the multipart directory.
func validUploadID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (b *Backend) uploadDir(id string) string { return filepath.Join(b.multipartDir(), id) }

func partName(n int) string { return fmt.Sprintf("part-%05d", n) }

// lockUpload serialises operations that change one upload's parts or end it.
func (b *Backend) lockUpload(id string) func() {
	b.uploadMu.Lock()
	l := b.uploadLocks[id]
	if l == nil {
		l = &uploadLock{}
		b.uploadLocks[id] = l
	}
	l.refs++
	b.uploadMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		b.uploadMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(b.uploadLocks, id)
		}
		b.uploadMu.Unlock()
	}
}

func (b *Backend) readUpload(id string) (uploadInfo, error) {
	var u uploadInfo
	if !validUploadID(id) {
		return u, fmt.Errorf("%w: %q", store.ErrNoSuchUpload, id)
	}
	data, err := os.ReadFile(filepath.Join(b.uploadDir(id), "info.json"))
	if err != nil {
		return u, fmt.Errorf("%w: %s", store.ErrNoSuchUpload, id)
	}
	if err := json.Unmarshal(data, &u); err != nil {
		return u, fmt.Errorf("%w: %s: corrupt info: %v", store.ErrNoSuchUpload, id, err)
	}
	return u, nil
}

// loadUpload returns the upload's info if it belongs to bucket/key.
func (b *Backend) loadUpload(bucket, key, id string) (uploadInfo, error) {
	if _, err := b.check(bucket, key); err != nil {
		return uploadInfo{}, err
	}
	u, err := b.readUpload(id)
	if err != nil {
		return u, err
	}
	if u.Bucket != bucket || u.Key != key {
		return u, fmt.Errorf("%w: %s is not an upload of %s/%s", store.ErrNoSuchUpload, id, bucket, key)
	}
	return u, nil
}

// CreateMultipart starts an upload and returns its ID (32 hex digits).
func (b *Backend) CreateMultipart(ctx context.Context, bucket, key string, meta store.ObjectMeta) (string, error) {
	if _, err := b.check(bucket, key); err != nil {
		return "", err
	}
	if err := b.bucketExists(bucket); err != nil {
		return "", err
	}
	id := randomHex(16)
	data, err := json.Marshal(uploadInfo{Bucket: bucket, Key: key, Meta: meta, Initiated: time.Now().UTC()})
	if err != nil {
		return "", err
	}
	if err := newdir.Mkdir(b.uploadDir(id), 0o755); err != nil {
		return "", fsErr(err)
	}
	if err := b.writeFileAtomic(filepath.Join(b.uploadDir(id), "info.json"), data, true); err != nil {
		b.removeAllRetired(b.uploadDir(id))
		return "", err
	}
	return id, fsyncDir(b.multipartDir())
}

// PutPart stores one part (replacing an earlier part with the same number).
func (b *Backend) PutPart(ctx context.Context, bucket, key, uploadID string, number int, r io.Reader, size int64) (store.PartInfo, error) {
	return b.PutPartChecksums(ctx, bucket, key, uploadID, number, r, size, nil)
}

// PutPartChecksums is PutPart that keeps the part's checksums (from sums,
// called after the body is read) in the part's record.
func (b *Backend) PutPartChecksums(ctx context.Context, bucket, key, uploadID string, number int, r io.Reader, size int64, sums func() map[string]string) (store.PartInfo, error) {
	if number < 1 || number > maxPartNumber {
		return store.PartInfo{}, fmt.Errorf("%w: part number %d not in 1..%d", store.ErrInvalidPart, number, maxPartNumber)
	}
	if _, err := b.loadUpload(bucket, key, uploadID); err != nil {
		return store.PartInfo{}, err
	}
	dir := b.uploadDir(uploadID)
	f, err := os.OpenFile(b.tempPath(dir), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return store.PartInfo{}, fmt.Errorf("%w: %s", store.ErrNoSuchUpload, uploadID)
		}
		return store.PartInfo{}, fsErr(err)
	}
	h, release := bodyHash(size)
	if _, err := fill(ctx, f, r, size, h); err != nil {
		release()
		b.dropTemp(f)
		return store.PartInfo{}, err
	}
	rec := &record{ETag: hex.EncodeToString(h.Sum(nil))}
	release()
	if sums != nil {
		rec.Sums = sums()
	}
	unlock := b.lockUpload(uploadID)
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, "info.json")); err != nil {
		b.dropTemp(f)
		return store.PartInfo{}, fmt.Errorf("%w: %s", store.ErrNoSuchUpload, uploadID)
	}
	st, err := b.publish(f, filepath.Join(dir, partName(number)), nil, rec)
	if err != nil {
		return store.PartInfo{}, err
	}
	return store.PartInfo{Number: number, Size: st.Size, ETag: rec.ETag, ModTime: time.Unix(st.Mtim.Unix()).UTC(), Checksums: rec.Sums}, nil
}

// parts lists the stored parts of an upload, sorted by number.
func (b *Backend) parts(ctx context.Context, id string) ([]store.PartInfo, error) {
	dir := b.uploadDir(id)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", store.ErrNoSuchUpload, id)
	}
	var out []store.PartInfo
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "part-") || strings.HasSuffix(name, ".json") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(name, "part-"))
		if err != nil {
			continue
		}
		p := filepath.Join(dir, name)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			continue
		}
		orig := b.readRecord(p, nil, st.Ino)
		fresh := orig.fresh(&st)
		rec, err := b.refresh(ctx, p, nil, &st, orig)
		if err != nil {
			continue
		}
		pi := store.PartInfo{Number: n, Size: st.Size, ETag: rec.ETag, ModTime: time.Unix(st.Mtim.Unix()).UTC()}
		if fresh {
			pi.Checksums = rec.Sums // a part changed behind our back keeps no stale checksum
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}

// ListParts returns the upload's parts and description.
func (b *Backend) ListParts(ctx context.Context, bucket, key, uploadID string) ([]store.PartInfo, store.Upload, error) {
	u, err := b.loadUpload(bucket, key, uploadID)
	if err != nil {
		return nil, store.Upload{}, err
	}
	ps, err := b.parts(ctx, uploadID)
	if err != nil {
		return nil, store.Upload{}, err
	}
	return ps, store.Upload{Bucket: u.Bucket, Key: u.Key, UploadID: uploadID, Initiated: u.Initiated, Meta: u.Meta}, nil
}

// CompleteMultipart validates the part list, concatenates the parts into
// the object and publishes it atomically and durably, then removes the upload.
func (b *Backend) CompleteMultipart(ctx context.Context, bucket, key, uploadID string, parts []store.CompletePart) (store.ObjectInfo, error) {
	return b.complete(ctx, bucket, key, uploadID, parts, false)
}

// complete is CompleteMultipart and, with noReplace, CompleteMultipartIfAbsent.
func (b *Backend) complete(ctx context.Context, bucket, key, uploadID string, parts []store.CompletePart, noReplace bool) (store.ObjectInfo, error) {
	return b.completeChecked(ctx, bucket, key, uploadID, parts, nil, noReplace)
}

// completeChecked is complete that first checks the client's checksums
// (checksum_full.go).
func (b *Backend) completeChecked(ctx context.Context, bucket, key, uploadID string, parts []store.CompletePart, want map[string]string, noReplace bool) (store.ObjectInfo, error) {
	unlock := b.lockUpload(uploadID)
	defer unlock()
	u, err := b.loadUpload(bucket, key, uploadID)
	if err != nil {
		if errors.Is(err, store.ErrNoSuchUpload) {
			if oi, ok := b.completedBefore(ctx, bucket, key, parts); ok {
				return oi, nil
			}
		}
		return store.ObjectInfo{}, err
	}
	if len(parts) == 0 {
		return store.ObjectInfo{}, fmt.Errorf("%w: no parts given", store.ErrInvalidPart)
	}
	have, err := b.parts(ctx, uploadID)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	byNum := make(map[int]store.PartInfo, len(have))
	for _, p := range have {
		byNum[p.Number] = p
	}
	chosen := make([]store.PartInfo, len(parts))
	for i, cp := range parts {
		if i > 0 && cp.Number <= parts[i-1].Number {
			return store.ObjectInfo{}, fmt.Errorf("%w: part %d after part %d", store.ErrInvalidPartOrder, cp.Number, parts[i-1].Number)
		}
		p, ok := byNum[cp.Number]
		if !ok {
			return store.ObjectInfo{}, fmt.Errorf("%w: part %d was not uploaded", store.ErrInvalidPart, cp.Number)
		}
		if want := strings.Trim(cp.ETag, `"`); want != p.ETag {
			return store.ObjectInfo{}, fmt.Errorf("%w: part %d has ETag %s, not %s", store.ErrInvalidPart, cp.Number, p.ETag, want)
		}
		chosen[i] = p
	}
	for i, p := range chosen[:len(chosen)-1] {
		if p.Size < store.MinPartSize {
			return store.ObjectInfo{}, fmt.Errorf("%w: part %d (#%d of %d) is %d bytes, under %d", store.ErrEntityTooSmall, p.Number, i+1, len(chosen), p.Size, store.MinPartSize)
		}
	}
	cs := uploadChecksums(u.Meta.ChecksumType, plainParts(u.Meta, chosen)) // upload_info.go
	if err := checkCompleteChecksums(parts, chosen, cs, want); err != nil {
		return store.ObjectInfo{}, err
	}
	loc, err := b.check(bucket, key)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	// Before concatenating the parts: plain or hidden target, served volume.
	f, changed, hidden, err := b.tempForKey(loc)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	sums := md5.New()
	rec := &record{Parts: make([]partRec, len(chosen))}
	for i, p := range chosen {
		if err := b.appendPart(ctx, f, uploadID, p); err != nil {
			b.dropTemp(f)
			return store.ObjectInfo{}, err
		}
		raw, _ := hex.DecodeString(p.ETag)
		sums.Write(raw)
		rec.Parts[i] = partRec{N: p.Number, S: p.Size, E: p.ETag, C: objectAlgs(p.Checksums, cs)}
	}
	rec.ETag = fmt.Sprintf("%s-%d", hex.EncodeToString(sums.Sum(nil)), len(chosen))
	rec.setMeta(u.Meta)
	if cs != nil {
		rec.Sums = cs
	}
	st, err := b.publishKey(ctx, f, loc, hidden, changed, rec, noReplace)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	b.removeAllRetired(b.uploadDir(uploadID))
	return rec.info(bucket, key, &st), nil
}

// completedBefore makes a retried Complete idempotent: a Complete whose
// object was published but whose reply was lost (a crash, a dropped
// connection) is retried by SDKs, and by then the upload is gone. If the
// key's current object was made from exactly the parts asked for (numbers
// and ETags, as recorded at publish), this Complete already happened: answer
// with that object instead of NoSuchUpload. Found by the soak (test/soak):
// kill -9 between publish and reply made aws-sdk-go-v2's retry fail although
// the object was there.
func (b *Backend) completedBefore(ctx context.Context, bucket, key string, parts []store.CompletePart) (store.ObjectInfo, bool) {
	if len(parts) == 0 {
		return store.ObjectInfo{}, false
	}
	f, _, st, rec, err := b.openObject(ctx, bucket, key)
	if err != nil {
		return store.ObjectInfo{}, false
	}
	f.Close()
	if len(rec.Parts) != len(parts) {
		return store.ObjectInfo{}, false
	}
	for i, cp := range parts {
		if rec.Parts[i].N != cp.Number || rec.Parts[i].E != strings.Trim(cp.ETag, `"`) {
			return store.ObjectInfo{}, false
		}
	}
	return rec.info(bucket, key, &st), true
}

// appendPart copies one part to the end of f, checking its size.
func (b *Backend) appendPart(ctx context.Context, f *os.File, id string, p store.PartInfo) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pf, err := os.Open(filepath.Join(b.uploadDir(id), partName(p.Number)))
	if err != nil {
		return fmt.Errorf("%w: part %d: %v", store.ErrInvalidPart, p.Number, err)
	}
	defer pf.Close()
	n, err := io.Copy(f, pf)
	if err != nil {
		return fsErr(err)
	}
	if n != p.Size {
		return fmt.Errorf("%w: part %d changed while completing", store.ErrInvalidPart, p.Number)
	}
	return nil
}

// AbortMultipart discards the upload and its parts.
func (b *Backend) AbortMultipart(ctx context.Context, bucket, key, uploadID string) error {
	unlock := b.lockUpload(uploadID)
	defer unlock()
	if _, err := b.loadUpload(bucket, key, uploadID); err != nil {
		return err
	}
	if err := b.removeAllRetired(b.uploadDir(uploadID)); err != nil {
		return fsErr(err)
	}
	return nil
}

// allUploads reads every upload's info (unreadable ones are skipped).
func (b *Backend) allUploads() ([]store.Upload, error) {
	ents, err := os.ReadDir(b.multipartDir())
	if err != nil {
		return nil, err
	}
	var out []store.Upload
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		u, err := b.readUpload(e.Name())
		if err != nil {
			continue
		}
		out = append(out, store.Upload{Bucket: u.Bucket, Key: u.Key, UploadID: e.Name(), Initiated: u.Initiated, Meta: u.Meta})
	}
	return out, nil
}

// ListMultipartUploads lists the bucket's uploads whose key starts with
// prefix, ordered by key and then initiation time.
func (b *Backend) ListMultipartUploads(ctx context.Context, bucket, prefix string) ([]store.Upload, error) {
	if err := validBucket(bucket); err != nil {
		return nil, noSuchBucketIfInvalid(err)
	}
	if err := b.bucketExists(bucket); err != nil {
		return nil, err
	}
	all, err := b.allUploads()
	if err != nil {
		return nil, err
	}
	var out []store.Upload
	for _, u := range all {
		if u.Bucket == bucket && strings.HasPrefix(u.Key, prefix) {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		if !out[i].Initiated.Equal(out[j].Initiated) {
			return out[i].Initiated.Before(out[j].Initiated)
		}
		return out[i].UploadID < out[j].UploadID
	})
	return out, nil
}

// abortUploadsOf removes every upload of a deleted bucket.
func (b *Backend) abortUploadsOf(bucket string) {
	all, err := b.allUploads()
	if err != nil {
		return
	}
	for _, u := range all {
		if u.Bucket == bucket {
			unlock := b.lockUpload(u.UploadID)
			b.removeAllRetired(b.uploadDir(u.UploadID))
			unlock()
		}
	}
}

var _ store.Multiparter = (*Backend)(nil)

// compositeHashes are the algorithms S3 combines into COMPOSITE checksums
// (CRC64NVME has only full-object checksums in S3).
var compositeHashes = map[string]func() hash.Hash{
	"CRC32":  func() hash.Hash { return crc32.NewIEEE() },
	"CRC32C": func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"SHA1":   sha1.New,
	"SHA256": sha256.New,
}

// compositeChecksums computes S3's checksum-of-checksums for every
// algorithm all parts have: base64(H(digest1 || ... || digestN)) + "-N".
func compositeChecksums(parts []store.PartInfo) map[string]string {
	var out map[string]string
	for alg, mk := range compositeHashes {
		h := mk()
		ok := true
		for _, p := range parts {
			raw, err := base64.StdEncoding.DecodeString(p.Checksums[alg])
			if err != nil || len(raw) == 0 {
				ok = false
				break
			}
			h.Write(raw)
		}
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[alg] = fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(h.Sum(nil)), len(parts))
	}
	return out
}

var _ store.PartChecksummer = (*Backend)(nil)

// objectAlgs are a part's checksums of the algorithms the completed
// object has a checksum of (nil if none): kept with the object's parts.
func objectAlgs(part, object map[string]string) map[string]string {
	var out map[string]string
	for alg := range object {
		if v := part[alg]; v != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[alg] = v
		}
	}
	return out
}

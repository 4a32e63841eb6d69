package s3

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Resumable uploads
//
// An interrupted multipart upload (a crash, Ctrl-C, a server that stayed
// down longer than the retries) is left on the server instead of aborted.
// The next upload of the same key finds it with ListMultipartUploads (the
// upload recorded in the local state file first, then the newest for the
// key), lists its parts, and keeps every part whose size and checksum
// (CRC32C when the server lists it, else the part's MD5 ETag) match the
// bytes the local file has there now; only the rest is sent. A part that
// cannot be verified is simply sent again, so a wrong guess costs bandwidth,
// never correctness.
//
// The state file (one small JSON per local file and key, in StateDir)
// records the upload ID, the chunk size and the file's size and mtime, so
// that a run finds its own upload first; it is removed when the upload
// completes or is aborted, and state files older than a week are pruned
// whenever a new one is written.

// maxResumeCandidates bounds how many earlier uploads of a key are listed.
const maxResumeCandidates = 4

// maxListPages bounds any paginated listing the resumer runs.
const maxListPages = 20

// resumeState is what the state file holds.
type resumeState struct {
	Endpoint  string    `json:"endpoint"`
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	MTimeNs   int64     `json:"mtime_ns"`
	ChunkSize int64     `json:"chunk_size"`
	UploadID  string    `json:"upload_id"`
	Started   time.Time `json:"started"`
}

// resumer finds and records resumable multipart uploads of one local file.
type resumer struct {
	statePath string // "": no state file
	state     resumeState
	reusedN   atomic.Int64 // bytes kept from an earlier attempt
}

func newResumer(stateDir, endpoint, bucket, key, path string, size int64, mtime time.Time) *resumer {
	r := &resumer{state: resumeState{Endpoint: endpoint, Bucket: bucket, Key: key, Path: path, Size: size, MTimeNs: mtime.UnixNano()}}
	if stateDir != "" {
		h := sha256.Sum256([]byte(endpoint + "\x00" + bucket + "\x00" + key + "\x00" + path))
		r.statePath = filepath.Join(stateDir, hex.EncodeToString(h[:16])+".json")
	}
	return r
}

// find returns an earlier upload of bucket/key whose parts fit this
// file's layout (size, chunk), with the parts it already holds; "" when
// there is none (listing errors included: a fresh upload is always safe).
func (r *resumer) find(ctx context.Context, e *Engine, st *stats, bucket, key string, size, chunk int64) (string, map[int32]types.Part) {
	var ids []string
	if r.statePath != "" {
		var s resumeState
		if b, err := os.ReadFile(r.statePath); err == nil && json.Unmarshal(b, &s) == nil &&
			s.Bucket == bucket && s.Key == key && s.Size == size && s.ChunkSize == chunk && s.UploadID != "" {
			ids = append(ids, s.UploadID)
		}
	}
	var ups []types.MultipartUpload
	var keyMarker, idMarker *string
	for range maxListPages {
		var out *awss3.ListMultipartUploadsOutput
		err := e.do(ctx, st, func(ctx context.Context) error {
			var err error
			out, err = e.api.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{
				Bucket: &bucket, Prefix: &key, KeyMarker: keyMarker, UploadIdMarker: idMarker})
			return err
		})
		if err != nil {
			break
		}
		for _, u := range out.Uploads {
			if aws.ToString(u.Key) == key {
				ups = append(ups, u)
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		keyMarker, idMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
	listed := map[string]bool{}
	sort.SliceStable(ups, func(i, j int) bool { return aws.ToTime(ups[i].Initiated).After(aws.ToTime(ups[j].Initiated)) })
	for _, u := range ups {
		listed[aws.ToString(u.UploadId)] = true
	}
	// The recorded upload counts only if the server still lists it.
	if len(ids) == 1 && !listed[ids[0]] {
		ids = nil
	}
	for _, u := range ups {
		if id := aws.ToString(u.UploadId); len(ids) == 0 || id != ids[0] {
			ids = append(ids, id)
		}
	}
	nparts := int32((size + chunk - 1) / chunk)
	for _, id := range ids[:min(len(ids), maxResumeCandidates)] {
		parts, ok := r.listParts(ctx, e, st, bucket, key, id, size, chunk, nparts)
		if ok {
			r.state.UploadID, r.state.ChunkSize = id, chunk
			return id, parts
		}
	}
	return "", nil
}

// listParts lists an upload's parts and says whether all of them fit
// this file's layout: part n covers [(n-1)·chunk, n·chunk) of size bytes.
func (r *resumer) listParts(ctx context.Context, e *Engine, st *stats, bucket, key, id string, size, chunk int64, nparts int32) (map[int32]types.Part, bool) {
	parts := map[int32]types.Part{}
	var marker *string
	for range maxListPages {
		var out *awss3.ListPartsOutput
		err := e.do(ctx, st, func(ctx context.Context) error {
			var err error
			out, err = e.api.ListParts(ctx, &awss3.ListPartsInput{Bucket: &bucket, Key: &key, UploadId: &id, PartNumberMarker: marker})
			return err
		})
		if err != nil {
			return nil, false
		}
		for _, p := range out.Parts {
			pn := aws.ToInt32(p.PartNumber)
			if pn < 1 || pn > nparts {
				return nil, false
			}
			want := min(chunk, size-int64(pn-1)*chunk)
			if aws.ToInt64(p.Size) != want {
				return nil, false // another chunk size: not ours to continue
			}
			parts[pn] = p
		}
		if !aws.ToBool(out.IsTruncated) {
			return parts, true
		}
		marker = out.NextPartNumberMarker
	}
	return nil, false
}

// partMatches says whether a listed part holds exactly b: its size, and
// its CRC32C when listed, else its ETag when that is the bytes' MD5.
func partMatches(p types.Part, b []byte, crc string) bool {
	if aws.ToInt64(p.Size) != int64(len(b)) {
		return false
	}
	if c := aws.ToString(p.ChecksumCRC32C); c != "" {
		return c == crc
	}
	etag := strings.Trim(aws.ToString(p.ETag), `"`)
	if len(etag) != 32 {
		return false
	}
	sum := md5.Sum(b)
	return strings.EqualFold(etag, hex.EncodeToString(sum[:]))
}

// started records a new upload so the next run finds it first.
func (r *resumer) started(id string, size, chunk int64) {
	r.state.UploadID, r.state.Size, r.state.ChunkSize, r.state.Started = id, size, chunk, time.Now().UTC()
	if r.statePath == "" {
		return
	}
	// Best effort: without the file the upload is still found by listing.
	if err := os.MkdirAll(filepath.Dir(r.statePath), 0o700); err != nil {
		return
	}
	b, _ := json.MarshalIndent(r.state, "", "  ")
	tmp := r.statePath + ".tmp"
	if os.WriteFile(tmp, b, 0o600) == nil {
		os.Rename(tmp, r.statePath)
	}
	pruneResumeState(filepath.Dir(r.statePath), time.Now().Add(-staleResumeAge))
}

// staleResumeAge is how long a state file of an upload that never
// finished is kept. Dropping one loses nothing: the upload is still found
// by listing when the same file is uploaded again.
const staleResumeAge = 7 * 24 * time.Hour

// maxPrune bounds the entries one prune looks at.
const maxPrune = 4096

// pruneResumeState removes state files (and temp files of interrupted
// writes) last written before cutoff, so a directory of uploads that were
// given up does not grow forever.
func pruneResumeState(dir string, cutoff time.Time) {
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	defer f.Close()
	ents, _ := f.ReadDir(maxPrune)
	for _, ent := range ents {
		n := ent.Name()
		if !strings.HasSuffix(n, ".json") && !strings.HasSuffix(n, ".json.tmp") {
			continue
		}
		if fi, err := ent.Info(); err == nil && fi.Mode().IsRegular() && fi.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(dir, n))
		}
	}
}

func (r *resumer) reused(n int64) { r.reusedN.Add(n) }

// finished forgets the upload (completed or aborted).
func (r *resumer) finished() {
	if r.statePath != "" {
		os.Remove(r.statePath) // absent already is fine
	}
}

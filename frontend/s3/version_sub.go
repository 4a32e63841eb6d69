package s3

import (
	"context"
	"net/http"

	"github.com/tristore/tristore/store"
)

// The versionId parameter of the object sub-resources tagging, acl and
// attributes (GetObjectTagging, PutObjectTagging, DeleteObjectTagging,
// GetObjectAcl, PutObjectAcl, GetObjectAttributes). As the S3 API
// reference describes them: the request acts on that version; a version
// the key does not have is 404 NoSuchVersion, a malformed ID 400
// InvalidArgument; a delete marker named by ID is 405 MethodNotAllowed
// with x-amz-delete-marker (a marker has no tags and no ACL), a key whose
// latest version is a delete marker 404 NoSuchKey with the same header;
// the answer carries x-amz-version-id. The tags and ACL live in the
// version's metadata record, which stays with the version when it
// becomes noncurrent (store/posix preserve copies the record).

// subVersionActions is the IAM action S3 requires, besides the
// operation's own, when the request names a version.
var subVersionActions = map[string]string{
	"GetObjectTagging":    "s3:GetObjectVersionTagging",
	"PutObjectTagging":    "s3:PutObjectVersionTagging",
	"DeleteObjectTagging": "s3:DeleteObjectVersionTagging",
	"GetObjectAcl":        "s3:GetObjectVersionAcl",
	"PutObjectAcl":        "s3:PutObjectVersionAcl",
	"GetObjectAttributes": "s3:GetObjectVersionAttributes",
}

// subTarget resolves the version a sub-resource request is about and sets
// x-amz-version-id on the answer. vid is the versionId asked for ("" for
// the latest).
func (s *Server) subTarget(ctx context.Context, w http.ResponseWriter, r *http.Request, rc *reqCtx, op string) (vid string, oi store.ObjectInfo, err error) {
	vid, err = versionParam(r)
	if err != nil {
		return "", oi, err
	}
	if err := s.authorizeVersion(ctx, rc, subVersionActions[op], rc.bucket, rc.key, vid); err != nil {
		return "", oi, err
	}
	oi, err = s.statObject(ctx, w, rc.bucket, rc.key, vid)
	if err != nil {
		return "", oi, err
	}
	setVersionHeader(w.Header(), oi, vid)
	return vid, oi, nil
}

// updateSubMeta stores meta for the version the request named (or the
// current object when it named none), fsynced before the answer.
func (s *Server) updateSubMeta(ctx context.Context, rc *reqCtx, vid string, oi store.ObjectInfo, meta store.ObjectMeta) error {
	if vid != "" {
		if v, ok := s.st.(store.Versioner); ok {
			_, err := v.UpdateVersionMeta(ctx, rc.bucket, rc.key, wireVersion(oi), meta)
			return err
		}
	}
	mu, err := s.metaUpdater()
	if err != nil {
		return err
	}
	_, err = mu.UpdateMeta(ctx, rc.bucket, rc.key, meta)
	return err
}

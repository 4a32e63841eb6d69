# Power-loss tests (test/powerloss): the FUSE model needs fuse3; the kernel
# rig (kernel_test.go) puts a real ext4 image on it through a loop device:
# mkfs.ext4 and e2fsck (e2fsprogs), losetup, mount and umount (mount).
APT_PKGS+=(fuse3 e2fsprogs mount)

# NFS v3 client and FUSE mount (client/nfs, fusefs/nfstree, test/nfsclient):
# nfs-ganesha (VFS FSAL) + rpcbind as the peer server, run inside a network
# namespace the tests create; postmark and tar run through the FUSE mount;
# libnfs-utils for cross-checks and the benchmark.
APT_PKGS+=(nfs-ganesha nfs-ganesha-vfs rpcbind postmark tar fuse3 iproute2 util-linux libnfs-utils)

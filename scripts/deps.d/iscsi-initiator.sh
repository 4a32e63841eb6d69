# iSCSI initiator + block FUSE mount (client/iscsi, fusefs/blockfile,
# test/iscsiblock): tgt is the peer target the initiator is tested and
# benchmarked against; libiscsi-bin's iscsi-perf is the peer initiator in
# the benchmark; fuse3, e2fsprogs and util-linux (losetup, mount) carry the
# ext4-over-FUSE+loop test; xfsprogs the XFS half of the fstrim test.
APT_PKGS+=(tgt libiscsi-bin fuse3 e2fsprogs util-linux xfsprogs)

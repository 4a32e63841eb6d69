# iSCSI target peers: libiscsi tools (iscsi-inq, iscsi-ls, iscsi-readcapacity16,
# iscsi-perf, iscsi-test-cu), tgt for comparison, qemu-img on iscsi:// URLs.
APT_PKGS+=(libiscsi-bin tgt qemu-utils qemu-block-extra)

# NFS v3 server (frontend/nfs, test/nfspeers): libnfs-utils provides the
# peer clients nfs-ls, nfs-cp and nfs-cat that the peer tests drive.
APT_PKGS+=(libnfs-utils)

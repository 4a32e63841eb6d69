# test/soak: the programs it runs through the mounts (and its checkers' self-tests).
APT_PKGS+=(git sqlite3 tar e2fsprogs util-linux fuse3 iproute2)

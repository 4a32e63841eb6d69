# The workbench (bench/, `tristore bench`): fio runs the same POSIX job as
# `tristore bench units` in bench's TestUnitsAgreesWithFio, which checks
# that the two measure the same throughput (issue 9's first check).
APT_PKGS+=(fio)

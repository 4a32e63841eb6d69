#!/usr/bin/env bash
# The soak (docs/soak.md): git, tar and sqlite3 through the NFS FUSE mount,
# ext4 + an fsx-style model checker through the iSCSI FUSE mount, an S3
# model loop and cross-view checks, all on one `tristore serve` that a
# chaos loop kill -9s, restarts and stalls. Root only (FUSE, loop devices,
# mount).
#
#   scripts/soak.sh DURATION [go test flags]      e.g. scripts/soak.sh 10m
#
# DURATION is how long the workloads run (h/m/s units: 90s, 10m, 1h30m);
# setup and the final checks add a few minutes. Settings pass through the
# environment: TRISTORE_SOAK_SEED, TRISTORE_SOAK_CHAOS (kill9,stop | none),
# TRISTORE_SOAK_EVERY (8s-20s), TRISTORE_SOAK_NETEM ("--delay 3ms --loss 0.5%").
# The summary (what ran, how long, op counts, outages, failures) is written
# to results/soak-<time>.txt (+ .json, the test log and the server's and
# mounts' logs) and printed. Exit status: 0 only if the soak passed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: scripts/soak.sh DURATION [go test flags]   (e.g. scripts/soak.sh 10m)" >&2
  exit 2
fi
dur=$1
shift
secs() { # a Go duration in whole h/m/s units -> seconds
  local d=$1 t=0
  while [[ $d =~ ^([0-9]+)([hms])(.*)$ ]]; do
    case ${BASH_REMATCH[2]} in
      h) t=$((t + BASH_REMATCH[1] * 3600)) ;;
      m) t=$((t + BASH_REMATCH[1] * 60)) ;;
      s) t=$((t + BASH_REMATCH[1])) ;;
    esac
    d=${BASH_REMATCH[3]}
  done
  [ -z "$d" ] && [ "$t" -gt 0 ] && echo "$t"
}
if ! s=$(secs "$dur"); then
  echo "soak: bad DURATION $dur (want e.g. 90s, 10m, 1h30m)" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "soak: needs root (FUSE mounts, loop devices, mount)" >&2
  exit 2
fi
mkdir -p results
out=$PWD/results/soak-$(date -u +%Y%m%dT%H%M%SZ)
echo "soak: $dur of workloads; log $out.log"
set +e
TRISTORE_SOAK=$dur TRISTORE_SOAK_REPORT=$out.txt \
  go test -count=1 -v -timeout "$((s + 1800))s" -run '^TestSoak$' ./test/soak/ "$@" >"$out.log" 2>&1
rc=$?
set -e
echo
if [ -f "$out.txt" ]; then
  cat "$out.txt"
else
  tail -40 "$out.log"
  echo "soak: no summary written (the setup failed?); the whole log is $out.log"
fi
echo "soak: exit $rc; summary $out.txt (+ .json), log $out.log, server and mount logs $out.txt.logs/"
exit $rc

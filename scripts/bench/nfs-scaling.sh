#!/usr/bin/env bash
# NFS metadata cost as a directory grows (issue 14's scaling page):
# tristore's server vs nfs-ganesha (VFS FSAL), same disk, same run,
# interleaved rounds, one client (`tristore nfs bench-meta`).
#
#   sudo scripts/bench/nfs-scaling.sh [ROUNDS] [SECONDS] [SIZES]
#        # defaults: 3 rounds, 3 s per timed op, sizes "1000 100000"
#
# For each size N both exports get a directory of N empty files, made
# directly on disk before the servers are asked anything. Per round, per
# size, per server (the order rotates by one per round), bench-meta lists
# the directory with READDIRPLUS (entries/s), then LOOKUPs random names and
# GETATTRs random handles one at a time for SECONDS each (ops/s and p99).
# A cost that grows with the directory shows as a falling row from N=1000
# to N=100000. Raw rounds: docs/bench/raw/nfs-scaling-<time>.jsonl.
set -euo pipefail
BENCH_NAME=nfs-scaling
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-3}
SECS=${2:-3}
SIZES=${3:-"1000 100000"}
SERVE_PID=""
WORK=""
NS="tsnfsscale-$$"
cleanup() {
  if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
  if [ -n "$WORK" ]; then
    scripts/bench/nfs-ganesha.sh stop "$NS" "$WORK/ganesha" || true
    rm -rf "$WORK"
  fi
}
bench_need_root "network namespace, ganesha"
bench_need_cmd ganesha.nfsd "apt-get install nfs-ganesha nfs-ganesha-vfs"
bench_need_cmd rpcbind "apt-get install rpcbind"
bench_need_cmd python3 "apt-get install python3"
for c in ip unshare; do bench_need_cmd "$c" "apt-get install iproute2 util-linux"; done

WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-nfs-scaling.XXXXXX")
bench_start "$WORK"
BIN="$WORK/tristore"
mkdir -p "$WORK/data/bench" "$WORK/ganesha/export"
for n in $SIZES; do
  for d in "$WORK/data/bench/d$n" "$WORK/ganesha/export/d$n"; do
    python3 - "$d" "$n" <<'PY' || bench_fail "cannot fill $d"
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d)
for i in range(n):
    os.close(os.open(os.path.join(d, "f%07d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
PY
  done
done
sync
scripts/bench/nfs-ganesha.sh start "$NS" "$WORK/ganesha" >/dev/null || bench_fail "ganesha did not start"
ip netns exec "$NS" "$BIN" serve --data "$WORK/data" --nfs-addr 127.0.0.1:2050 --s3-addr off \
  --admin-addr off --iscsi-addr off --ready-file "$WORK/ready.json" --log-level warn >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 1 300); do [ -s "$WORK/ready.json" ] && break; sleep 0.1; done
[ -s "$WORK/ready.json" ] || bench_fail "tristore serve did not start: $(tail -3 "$WORK/serve.log")"

url() { # side size
  case $1 in
  tristore) echo "nfs://127.0.0.1:2050/bench/d$2" ;;
  ganesha) echo "nfs://127.0.0.1:2049$WORK/ganesha/export/d$2?mountport=20048" ;;
  esac
}
ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
bench_machine "sudo scripts/bench/nfs-scaling.sh $ROUNDS $SECS \"$SIZES\"" \
  -peer "ganesha=$(ver nfs-ganesha) (VFS FSAL)" \
  -note "Directories of $(echo $SIZES | sed 's/ /, /g') empty files made on disk before the run, both exports on one $(findmnt -no FSTYPE -T "$WORK") file system, one network namespace, loopback TCP. Client: tristore nfs bench-meta (this commit): READDIRPLUS of the whole directory, then LOOKUP and GETATTR one at a time for $SECS s each."

for r in $(seq 1 "$ROUNDS"); do
  for n in $SIZES; do
    for s in $(bench_order "$r" tristore ganesha); do
      echo "round $r: $n entries, $s" >&2
      lb=$(bench_load)
      ip netns exec "$NS" "$BIN" nfs bench-meta --json --duration "${SECS}s" "$(url "$s" "$n")" >"$WORK/out.json" ||
        bench_fail "bench-meta against $s ($n entries) failed in round $r"
      bench_record "$r" "$s" "$lb" -json "$WORK/out.json" \
        -f "READDIRPLUS entries/s, $n-entry directory=readdirplus_entries_per_sec" \
        -f "LOOKUP ops/s, $n-entry directory=lookup.ops_per_sec" \
        -f "LOOKUP p99 ms, $n-entry directory=lookup.p99_ms" \
        -f "GETATTR ops/s, $n-entry directory=getattr.ops_per_sec" \
        -f "GETATTR p99 ms, $n-entry directory=getattr.p99_ms"
    done
  done
done
bench_table

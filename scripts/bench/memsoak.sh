#!/usr/bin/env bash
# Issue 14's memory soak (bench/memsoak): one `tristore serve` under a mixed
# S3 + NFS (v3, v4.1) + iSCSI load of CLIENTS clients for DURATION, each its
# own connection or session, half of them reconnecting every 5-60
# operations (one reconnect in four without a goodbye). The server's RSS
# (/proc/PID/status VmRSS), open descriptors (/proc/PID/fd) and goroutines
# (go_goroutines on its /metrics) are sampled every SAMPLE. Then the clients
# stop and the idle server must come back to its goroutines and descriptors
# of before the load (within 2 each), and RSS over the second half of the
# load must not grow by more than 10 % (bench/memsoak/judge.go says how).
#
#   scripts/bench/memsoak.sh [DURATION] [CLIENTS] [SAMPLE]   # defaults: 30m 64 10s
#   flock /tmp/bench.lock scripts/bench/memsoak.sh 30m
#
# tristore and the load command are built from `git archive BENCH_REV`
# (default HEAD; see lib.sh). Writes docs/bench/raw/memsoak-<time>.jsonl
# (the samples and the result; kept also when a check fails: a failed soak
# is a result), docs/bench/memsoak-<time>.svg (the plot) and
# docs/bench/profiles/memsoak-<time>-heap-end.pb.gz (the idle server's heap
# profile at the end, after a forced GC), prints the
# summary table (BENCH_RAW_DIR moves both); exit 1 if a check failed. Extra flags of the command
# (scripts/bench/memsoak/main.go: -think, -churn-min, ...) pass through
# MEMSOAK_FLAGS. No root needed, no peer: no other server serves S3, NFS
# and iSCSI from one process.
set -euo pipefail
BENCH_NAME=memsoak
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
DURATION=${1:-30m}
CLIENTS=${2:-64}
SAMPLE=${3:-10s}
WORK=""
cleanup() {
  [ -n "$WORK" ] && rm -rf "$WORK"
}
WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-memsoak.XXXXXX")
bench_start "$WORK"
(cd "$SRC" && go build -o "$WORK/memsoak" ./scripts/bench/memsoak) || bench_fail "go build of the memsoak command failed"
stamp=$(basename "$RAW_NEXT" .jsonl)
out=${BENCH_RAW_DIR:-$BENCH_ROOT/docs/bench/raw}/$stamp.jsonl
plot=$BENCH_ROOT/docs/bench/$stamp.svg
heap=$BENCH_ROOT/docs/bench/profiles/$stamp-heap-end.pb.gz
if [ -n "${BENCH_RAW_DIR:-}" ]; then # a trial run: all elsewhere
  plot=$BENCH_RAW_DIR/$stamp.svg
  heap=$BENCH_RAW_DIR/$stamp-heap-end.pb.gz
fi
mkdir -p "$WORK/run"
# shellcheck disable=SC2086 # MEMSOAK_FLAGS is a list of flags
"$WORK/memsoak" -tristore "$WORK/tristore" -work "$WORK/run" -clients "$CLIENTS" -duration "$DURATION" \
  -sample "$SAMPLE" -raw "$out" -plot "$plot" -heap "$heap" -commit "$COMMIT" \
  -command "scripts/bench/memsoak.sh $DURATION $CLIENTS $SAMPLE${MEMSOAK_FLAGS:+ (MEMSOAK_FLAGS=$MEMSOAK_FLAGS)}" \
  ${MEMSOAK_FLAGS:-}

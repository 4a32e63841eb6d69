#!/usr/bin/env bash
# CPU profile of tristore's S3 LIST on a big bucket (issue 14: profile
# first), on the buckets scripts/bench/s3-scaling.sh left under $BENCH_DIR
# (run it with REUSE=1 first).
#
#   BENCH_REV=<commit> [LAYOUT=flat|nested] [KIND=afterput|first|middle|delim] \
#     scripts/bench/s3-list-profile.sh LABEL [KEYS] [SECONDS]
#        # defaults: LAYOUT flat, KIND afterput, KEYS 1000000, SECONDS 20
#
# Starts tristore (built from BENCH_REV, default HEAD) on the filled data
# with --pprof, then for SECONDS takes a CPU profile while s3load lists
# 1,000-key pages of LAYOUT-KEYS one at a time (s3load -scale-list KIND:
# afterput is the middle page, each right after a PUT overwriting one of
# its keys; delim the middle leaf directory of the nested layout with
# delimiter "/"). Writes docs/bench/profiles/s3-list-<KEYS>-LABEL.pprof
# and .top.txt (flat afterput; else s3-list-<LAYOUT>-<KEYS>-<KIND>-LABEL.*:
# go tool pprof -top), with the pages' times and the load in the header.
set -euo pipefail
BENCH_NAME=s3-list-profile
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
LABEL=${1:?label (e.g. before, after)}
KEYS=${2:-1000000}
SECS=${3:-20}
LAYOUT=${LAYOUT:-flat}
KIND=${KIND:-afterput}
BENCH_DIR=${BENCH_DIR:-/var/tmp/tristore-s3scale}
AK=benchaccesskey
SK=benchsecretkey123
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
}
[ -e "$BENCH_DIR/filled-$LAYOUT-$KEYS" ] || bench_fail "no filled $LAYOUT-$KEYS bucket under $BENCH_DIR: run REUSE=1 scripts/bench/s3-scaling.sh with that size first"
W="$BENCH_DIR/prof-$LABEL"
rm -rf "$W"
mkdir -p "$W"
bench_start "$W"
(cd "$SRC" && go build -o "$W/s3load" ./scripts/bench/s3load) || bench_fail "cannot build s3load"
TRISTORE_ACCESS_KEY=$AK TRISTORE_SECRET_KEY=$SK "$W/tristore" serve --data "$BENCH_DIR/tristore-data" \
  --s3-addr 127.0.0.1:19120 --nfs-addr off --iscsi-addr off --admin-addr 127.0.0.1:19121 --pprof \
  --log-level warn >"$W/serve.log" 2>&1 &
PID=$!
for _ in $(seq 1 450); do curl -s -o /dev/null -m 2 http://127.0.0.1:19120/ && break; sleep 0.2; done
curl -s -o /dev/null -m 2 http://127.0.0.1:19120/ || bench_fail "tristore did not start: $(tail -3 "$W/serve.log")"
OUT="docs/bench/profiles/s3-list-$KEYS-$LABEL"
[ "$LAYOUT-$KIND" = flat-afterput ] || OUT="docs/bench/profiles/s3-list-$LAYOUT-$KEYS-$KIND-$LABEL"
LB=$(bench_load)
curl -s -o "$OUT.pprof" "http://127.0.0.1:19121/debug/pprof/profile?seconds=$SECS" &
CURL=$!
sleep 1
# Batches of 3 pages until the profile's time is nearly up (100 batches at most).
end=$((SECONDS + SECS - 3))
for _ in $(seq 1 100); do
  [ "$SECONDS" -lt "$end" ] || break
  "$W/s3load" -endpoint http://127.0.0.1:19120 -access $AK -secret $SK -label tristore \
    -bucket "$LAYOUT-$KEYS" -keys "$KEYS" -layout "$LAYOUT" -scale-list "$KIND" -repeat 3 >>"$W/pages.txt" 2>&1 ||
    bench_fail "s3load failed: $(tail -3 "$W/pages.txt")"
done
wait "$CURL" || bench_fail "profile fetch failed"
LA=$(bench_load)
{
  echo "# tristore $COMMIT, $LABEL: 1,000-key pages of $LAYOUT-$KEYS (s3load -scale-list $KIND; afterput: the middle page, each right after a PUT into the bucket; delim: the middle leaf directory with delimiter /), one at a time, for $SECS s"
  echo "# load before: $LB; after: $LA"
  echo "# s3load, one line per batch of 3 pages (p50/p99 of the batch):"
  sed 's/^/# /' "$W/pages.txt"
  go tool pprof -top -nodecount=40 "$W/tristore" "$OUT.pprof" 2>/dev/null
} >"$OUT.top.txt"
echo "wrote $OUT.pprof and $OUT.top.txt"

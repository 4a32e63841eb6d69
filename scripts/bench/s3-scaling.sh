#!/usr/bin/env bash
# S3 cost as a bucket grows (issue 14's scaling page): tristore vs
# versitygw (posix backend), same disk, same run, interleaved rounds, one
# client (scripts/bench/s3load, scaling mode: scale.go).
#
#   scripts/bench/s3-scaling.sh [ROUNDS] [SECONDS] [SIZES]
#        # defaults: 3 rounds, 2 s per operation, sizes "1000 100000"
#   PAR=4 (parallel requests for PUT/GET/HEAD), REPEAT=5 (requests per LIST page kind)
#   BENCH_REV: the tristore measured (lib.sh); LOAD_REV (default HEAD): the
#            commit s3load is built from, the same for a before/after pair
#   REUSE=1: keep the filled buckets under $BENCH_DIR after the run and use
#            them again in the next run (a 1,000,000-key fill takes many
#            minutes here); without it the directory is made afresh and
#            removed after a successful run.
#   FILL_ONLY=1 (with REUSE=1): fill the buckets not filled yet, then stop
#            (no rounds, no raw file), so a long fill can be its own run.
#
# For each size N each server gets two buckets, flat-N (keys o0000000...)
# and nested-N (a0/b0/c0/o0000000...: 1,000 keys per leaf directory), made
# through S3 and then filled with N empty objects directly on disk (both
# servers keep an object as a plain file; the metadata xattrs are copied
# from a probe object each server wrote itself: s3load -scale-fill). The
# two servers share each bucket's directory (see below). Per
# round, per size, per layout, per server (the order rotates by one per
# round) s3load first times 1,000-key ListObjectsV2 pages REPEAT times
# each -- the first page, a page from the middle of the key space
# (start-after; for versitygw also as the continuation token, since v1.8.0
# ignores start-after alone), the same page each time right after a PUT
# overwriting one of its keys (the first page after a change to its
# directory; the PUT is not timed), for nested keys the middle leaf
# directory with delimiter "/", and last the middle page's bytes served by
# a memory-only handler inside s3load (the client's own cost of a page:
# the floor under both servers' LIST rows) -- then PUTs new keys (each in the directory
# of a random existing key), GETs and HEADs random existing keys, PAR in
# parallel, SECONDS each, and DELETEs the keys it PUT (all of them, so the
# bucket is back to N keys). A cost that grows with the
# bucket shows as a row that moves from one N to the next.
# Raw rounds: docs/bench/raw/s3-scaling-<time>.jsonl.
set -euo pipefail
BENCH_NAME=s3-scaling
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-3}
SECS=${2:-2}
SIZES=${3:-"1000 100000"}
PAR=${PAR:-4}
REPEAT=${REPEAT:-5}
REUSE=${REUSE:-0}
BENCH_DIR=${BENCH_DIR:-/var/tmp/tristore-s3scale}
SERVERS=(tristore versitygw)
AK=benchaccesskey
SK=benchsecretkey123
declare -A PORT=([tristore]=19110 [versitygw]=19210)
declare -A DATA=([tristore]=tristore-data [versitygw]=vgw-data)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$p" 2>/dev/null || true
  done
  PIDS=()
}
PATH="$PATH:$(go env GOPATH)/bin"
bench_need_cmd versitygw "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"
bench_need_cmd curl "apt-get install curl"
bench_need_cmd python3 "apt-get install python3"

[ "$REUSE" = 1 ] || rm -rf "$BENCH_DIR"
rm -rf "$BENCH_DIR/bin"
mkdir -p "$BENCH_DIR/bin"
bench_start "$BENCH_DIR/bin"
# The client is built from LOAD_REV (default HEAD), not BENCH_REV, so a
# before/after pair of runs measures two servers with one client.
LOAD_REV=${LOAD_REV:-HEAD}
LOAD_COMMIT=$(git -C "$BENCH_ROOT" rev-parse --short=12 "$LOAD_REV^{commit}") || bench_fail "LOAD_REV=$LOAD_REV is not a commit"
mkdir -p "$BENCH_DIR/bin/loadsrc"
git -C "$BENCH_ROOT" archive "$LOAD_COMMIT" | tar -x -C "$BENCH_DIR/bin/loadsrc" || bench_fail "git archive $LOAD_COMMIT failed"
(cd "$BENCH_DIR/bin/loadsrc" && go build -o "$BENCH_DIR/bin/s3load" ./scripts/bench/s3load) || bench_fail "cannot build s3load"

for s in "${SERVERS[@]}"; do
  LOG="$BENCH_DIR/$s.log"
  mkdir -p "$BENCH_DIR/${DATA[$s]}"
  bench_s3_serve "$s" "$BENCH_DIR/${DATA[$s]}" ${PORT[$s]} "$LOG"
  PIDS+=($!)
  bench_wait_http "http://127.0.0.1:${PORT[$s]}/" $! "$LOG"
done

load() { # server args...
  local s=$1
  shift
  "$BENCH_DIR/bin/s3load" -endpoint "http://127.0.0.1:${PORT[$s]}" -access "$AK" -secret "$SK" -label "$s" "$@"
}

# Both servers serve the same files: versitygw's bucket directory is a
# symlink to tristore's (tristore refuses symlinks in its tree; versitygw
# follows them), which carries both servers' bucket xattrs, and every
# object file carries both servers' object xattrs. That halves the fill
# (a million files take many minutes here) and makes "same disk" literal.
# One stamp per filled bucket: with REUSE=1 a fill cut off (or done by an
# earlier FILL_ONLY=1 run) goes on where it stopped.
for n in $SIZES; do
  for lay in flat nested; do
    b=$lay-$n
    [ -e "$BENCH_DIR/filled-$b" ] && continue
    for s in "${SERVERS[@]}"; do
      load "$s" -bucket "$b" -scale-create || bench_fail "$s: cannot create bucket $b"
    done
    python3 - "$BENCH_DIR/${DATA[tristore]}/$b" "$BENCH_DIR/${DATA[versitygw]}/$b" <<'PY' || bench_fail "cannot share bucket $b"
import os, sys
t, v = sys.argv[1], sys.argv[2]
if not os.path.islink(v):
    for a in os.listxattr(v):
        os.setxattr(t, a, os.getxattr(v, a))
    os.rmdir(v)
    os.symlink(t, v)
PY
    nice -n 10 "$BENCH_DIR/bin/s3load" -endpoint "http://127.0.0.1:${PORT[tristore]}" -access "$AK" -secret "$SK" \
      -bucket "$b" -keys "$n" -layout "$lay" -scale-fill "$BENCH_DIR/${DATA[tristore]}/$b" \
      -scale-fill-also "http://127.0.0.1:${PORT[versitygw]}" >&2 ||
      bench_fail "filling $b failed (server logs: $BENCH_DIR/*.log)"
    sync
    touch "$BENCH_DIR/filled-$b"
  done
done
if [ "${FILL_ONLY:-0}" = 1 ]; then
  echo "$BENCH_NAME: buckets of $SIZES filled under $BENCH_DIR (FILL_ONLY=1: no rounds)" >&2
  exit 0
fi

VGW_VERSION=$(go version -m "$(command -v versitygw)" 2>/dev/null | awk '$1 == "mod" { print $3 }')
bench_machine "PAR=$PAR REPEAT=$REPEAT scripts/bench/s3-scaling.sh $ROUNDS $SECS \"$SIZES\"" \
  -peer "versitygw=${VGW_VERSION:-unknown} (posix, no fsync)" \
  -note "Buckets of $(echo $SIZES | sed 's/ /, /g') empty objects, flat keys (o0000123) and nested keys (a0/b1/c2/o0000123, 1,000 per leaf directory), made on disk before the rounds with both servers' metadata xattrs on every file, one directory tree served by both (versitygw's bucket directory is a symlink to tristore's; an object one server overwrites loses the other's xattrs: tristore recomputes the MD5 of such a file once, versitygw shows a default ETag) on $(findmnt -no FSTYPE -T "$BENCH_DIR"); loopback; client scripts/bench/s3load (aws-sdk-go-v2) of commit $LOAD_COMMIT. Per measurement: $REPEAT requests of each kind of 1,000-key ListObjectsV2 page (median ms; first page, a page from the middle of the key space by start-after, the same page right after an untimed PUT overwriting one of its keys, for nested keys the middle leaf directory with delimiter /, and the middle page's bytes from a memory-only handler in the client: the client's floor), then PUT of new keys (each in the directory of a random existing key), GET and HEAD of random existing keys, $PAR in parallel, $SECS s each (ops/s, p99 ms), then DELETE of the keys PUT (ops/s)."

for r in $(seq 1 "$ROUNDS"); do
  for n in $SIZES; do
    for lay in flat nested; do
      kinds=first,middle,afterput,canned
      [ "$lay" = nested ] && kinds=first,middle,afterput,delim,canned
      for s in $(bench_order "$r" "${SERVERS[@]}"); do
        echo "round $r: $lay-$n, $s" >&2
        tok=()
        [ "$s" = versitygw ] && tok=(-token-is-key)
        lb=$(bench_load)
        load "$s" -bucket "$lay-$n" -keys "$n" -layout "$lay" -scale-list "$kinds" -repeat "$REPEAT" "${tok[@]}" \
          -scale-ops put,get,head,delete -par "$PAR" -duration "${SECS}s" -json >"$BENCH_DIR/out.json" ||
          bench_fail "$s failed on $lay-$n in round $r (server log: $BENCH_DIR/$s.log)"
        f=(-f "LIST first 1,000-key page ms, $n $lay=0.p50_ms" -f "LIST middle 1,000-key page ms, $n $lay=1.p50_ms"
          -f "LIST middle page right after a PUT into it ms, $n $lay=2.p50_ms")
        i=3
        if [ "$lay" = nested ]; then
          f+=(-f "LIST middle leaf with delimiter / ms, $n $lay=3.p50_ms")
          i=4
        fi
        f+=(-f "LIST middle page's bytes from a memory-only handler (client floor) ms, $n $lay=$i.p50_ms")
        i=$((i + 1))
        for op in PUT GET HEAD; do
          f+=(-f "$op ops/s, $n $lay=$i.ops_per_s" -f "$op p99 ms, $n $lay=$i.p99_ms")
          i=$((i + 1))
        done
        f+=(-f "DELETE ops/s, $n $lay=$i.ops_per_s")
        bench_record "$r" "$s" "$lb" -json "$BENCH_DIR/out.json" "${f[@]}"
      done
    done
  done
done
cleanup
bench_table
[ "$REUSE" = 1 ] || rm -rf "$BENCH_DIR" # kept when the run fails, for the servers' logs

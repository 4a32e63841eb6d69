#!/usr/bin/env bash
# iSCSI benchmark: tristore's target vs tgt (`--bstype rdwr`), both serving
# the SAME fully written backing file, in the same run, measured in
# interleaved rounds, with two initiators: tristore's own
# (`tristore iscsi bench`, client/iscsi) and libiscsi's iscsi-perf (C; reads
# only).
#
#   sudo scripts/bench/iscsi-initiator.sh [ROUNDS] [SECONDS]   # defaults 3 rounds, 5 s per figure
#
# Per round, each target (the order rotates by one per round):
#   tristore iscsi bench: 4 KiB random read and write at QD 1 and 32,
#                         1 MiB sequential read and write at QD 4;
#   iscsi-perf:           4 KiB random read at QD 1 and 32, 1 MiB sequential
#                         read at QD 4.
# The backing file is a tristore volume of BENCH_SIZE (default 1GiB) in
# BENCH_DIR (default /var/tmp), filled with zeros (no holes); both targets
# use buffered I/O on it, so reads are mostly page-cache hits on both: the
# figures compare protocol and target overhead, not the disk.
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
  if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
  [ -n "$WORK" ] && rm -rf "$WORK"
}
bench_need_root "tgtd"
for c in tgtd tgtadm iscsi-perf; do bench_need_cmd "$c" "apt-get install tgt libiscsi-bin"; done
bench_need_cmd python3 "apt-get install python3"

WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-iscsi-bench.XXXXXX")
bench_start "$WORK"
BIN="$WORK/tristore"
# free ports on 127.0.0.1 and a free tgtd control socket number
read -r OURS_PORT TGT_PORT < <(python3 -c '
import socket
ss=[socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1",0))
print(*[s.getsockname()[1] for s in ss])')
CTL=$((1000 + TGT_PORT % 31000))
while [ -e "/var/run/tgtd/socket.$CTL" ]; do CTL=$((CTL + 1)); done

DATA="$WORK/data"
"$BIN" volume create --data "$DATA" vols/bench "$SIZE" >/dev/null
FILE="$DATA/vols/bench"
BYTES=$(stat -c %s "$FILE")
dd if=/dev/zero of="$FILE" bs=1M count=$((BYTES >> 20)) conv=notrunc,fsync status=none

"$BIN" serve --data "$DATA" --iscsi-addr "127.0.0.1:$OURS_PORT" --s3-addr off --nfs-addr off --admin-addr off \
  --ready-file "$WORK/ready.json" --log-level warn >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
tgtd -f --iscsi "portal=127.0.0.1:$TGT_PORT" -C "$CTL" >"$WORK/tgtd.log" 2>&1 &
TGT_PID=$!
up=0
for _ in $(seq 1 100); do
  if [ -s "$WORK/ready.json" ] && tgtadm -C "$CTL" --op show --mode target >/dev/null 2>&1; then up=1; break; fi
  sleep 0.1
done
[ "$up" = 1 ] || bench_fail "targets did not start: $(tail -3 "$WORK/serve.log" "$WORK/tgtd.log")"
TGT_IQN=iqn.2026-11.org.tristore.bench:tgt
tgtadm -C "$CTL" --lld iscsi --op new --mode target --tid 1 -T "$TGT_IQN"
tgtadm -C "$CTL" --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$FILE" --bstype rdwr
tgtadm -C "$CTL" --lld iscsi --op bind --mode target --tid 1 -I ALL
declare -A URL=(
  [tristore]="iscsi://127.0.0.1:$OURS_PORT/iqn.2026-11.io.tristore:vols:bench/0"
  [tgt]="iscsi://127.0.0.1:$TGT_PORT/$TGT_IQN/1"
)

ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
bench_machine "sudo scripts/bench/iscsi-initiator.sh $ROUNDS $SECS" \
  -peer "tgt=$(ver tgt) (--bstype rdwr, same file)" \
  -note "One $SIZE volume filled with zeros ($(findmnt -no FSTYPE -T "$WORK")), served by both targets; loopback; ${SECS} s per figure; MB/s = 10^6 bytes/s. Initiators: tristore iscsi bench (this commit) and iscsi-perf (libiscsi-bin $(ver libiscsi-bin))."

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
  for t in $(bench_order "$r" tristore tgt); do
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

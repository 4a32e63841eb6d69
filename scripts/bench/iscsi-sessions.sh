#!/usr/bin/env bash
# iSCSI cost as initiators are added (issue 14's scaling page): tristore's
# target vs tgt (`--bstype rdwr`), same run, interleaved rounds, each
# target on its OWN copies of the backing files (same disk, same size,
# filled the same way): with shared files the two targets share one page
# cache, and on ext4 with large folios the cache's shape, which the other
# target made, sets the cost of a 4 KiB write (scripts/bench/foliocost). S initiator processes (`tristore iscsi bench`), each
# with its own session to its own LUN, run at once; their IOPS are summed.
#
#   sudo scripts/bench/iscsi-sessions.sh [ROUNDS] [SECONDS] [SESSIONS]
#        # defaults: 3 rounds, 5 s per figure, sessions "1 4 8"
#
# Eight volumes of BENCH_SIZE (default 256MiB) in BENCH_DIR (default
# /var/tmp), filled with zeros; tristore serves each as its own target
# (LUN 0); tgt gets copies made the same way, one target per file (LUN 1);
# all buffered. Per round,
# per session count, per target (order rotating): 4 KiB random reads and
# then random writes at QD 32 per session. Raw rounds:
# docs/bench/raw/iscsi-sessions-<time>.jsonl.
set -euo pipefail
BENCH_NAME=iscsi-sessions
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-3}
SECS=${2:-5}
SESSIONS=${3:-"1 4 8"}
SIZE=${BENCH_SIZE:-256MiB}
NVOL=8
SERVE_PID=""
TGT_PID=""
WORK=""
cleanup() {
  if [ -n "$TGT_PID" ]; then
    for t in $(seq 1 "$NVOL"); do
      tgtadm -C "$CTL" --lld iscsi --op delete --mode target --tid "$t" --force >/dev/null 2>&1 || true
    done
    tgtadm -C "$CTL" --op delete --mode system >/dev/null 2>&1 || true
    for _ in $(seq 50); do kill -0 "$TGT_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$TGT_PID" 2>/dev/null || true
    wait "$TGT_PID" 2>/dev/null || true
  fi
  if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
  [ -n "$WORK" ] && rm -rf "$WORK"
}
bench_need_root "tgtd"
for c in tgtd tgtadm; do bench_need_cmd "$c" "apt-get install tgt"; done
bench_need_cmd python3 "apt-get install python3"

WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-iscsi-sessions.XXXXXX")
bench_start "$WORK"
BIN="$WORK/tristore"
read -r OURS_PORT TGT_PORT < <(python3 -c '
import socket
ss=[socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1",0))
print(*[s.getsockname()[1] for s in ss])')
CTL=$((1000 + TGT_PORT % 31000))
while [ -e "/var/run/tgtd/socket.$CTL" ]; do CTL=$((CTL + 1)); done

DATA="$WORK/data"
TGTDIR="$WORK/tgt"
mkdir -p "$TGTDIR"
fill() { dd if=/dev/zero of="$1" bs=1M count=$(($(stat -c %s "$1") >> 20)) conv=notrunc,fsync status=none; }
for v in $(seq 1 "$NVOL"); do
  "$BIN" volume create --data "$DATA" "vols/b$v" "$SIZE" >/dev/null
  fill "$DATA/vols/b$v"
  truncate -s "$(stat -c %s "$DATA/vols/b$v")" "$TGTDIR/b$v"
  fill "$TGTDIR/b$v"
done
# Neither target starts with the other's cache: drop what the fills left.
sync
echo 1 >/proc/sys/vm/drop_caches

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
for v in $(seq 1 "$NVOL"); do
  tgtadm -C "$CTL" --lld iscsi --op new --mode target --tid "$v" -T "iqn.2026-11.org.tristore.bench:tgt$v"
  tgtadm -C "$CTL" --lld iscsi --op new --mode logicalunit --tid "$v" --lun 1 -b "$TGTDIR/b$v" --bstype rdwr
  tgtadm -C "$CTL" --lld iscsi --op bind --mode target --tid "$v" -I ALL
done
url() { # target volume
  case $1 in
  tristore) echo "iscsi://127.0.0.1:$OURS_PORT/iqn.2026-11.io.tristore:vols:b$2/0" ;;
  tgt) echo "iscsi://127.0.0.1:$TGT_PORT/iqn.2026-11.org.tristore.bench:tgt$2/1" ;;
  esac
}

ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
bench_machine "sudo scripts/bench/iscsi-sessions.sh $ROUNDS $SECS \"$SESSIONS\"" \
  -peer "tgt=$(ver tgt) (--bstype rdwr, its own copies of the files, one target per file)" \
  -note "$NVOL volumes of $SIZE filled with zeros ($(findmnt -no FSTYPE -T "$WORK")), each side its own copies (page cache dropped after the fill), each its own target on both sides; loopback; ${SECS} s per figure. Initiators: S processes of tristore iscsi bench (this commit), one session each, each to its own LUN, QD 32 each; IOPS summed."

# run ROUND TARGET LOAD SESSIONS PATTERN LABEL
run() {
  local pids=() i
  for i in $(seq 1 "$4"); do
    "$BIN" iscsi bench -q --json --pattern "$5" --bs 4KiB --queue-depth 32 --duration "${SECS}s" "$(url "$2" "$i")" >"$WORK/out$i.json" &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || bench_fail "tristore iscsi bench $5 (session $((i + 1)) of $4) against $2 failed in round $1"
  done
  local total
  total=$(python3 -c '
import json, sys
print(sum(json.load(open(f))[0]["iops"] for f in sys.argv[1:]))' $(for i in $(seq 1 "$4"); do echo "$WORK/out$i.json"; done)) ||
    bench_fail "cannot read the bench outputs of round $1"
  bench_record "$1" "$2" "$3" -v "$6=$total"
}

for r in $(seq 1 "$ROUNDS"); do
  for s in $SESSIONS; do
    for t in $(bench_order "$r" tristore tgt); do
      echo "round $r: $s session(s), $t" >&2
      lb=$(bench_load); run "$r" "$t" "$lb" "$s" randread "4 KiB random read, QD 32 each, $s session(s), total IOPS"
      lb=$(bench_load); run "$r" "$t" "$lb" "$s" randwrite "4 KiB random write, QD 32 each, $s session(s), total IOPS"
    done
  done
done
bench_table

#!/usr/bin/env bash
# Benchmark: tristore's iSCSI target vs tgt, same machine, same run, same
# kind of backing file (fully written, not sparse, on the same file system).
# Reads only, with libiscsi's iscsi-perf:
#   4 KiB random reads at queue depth 1 and 32, 1 MiB sequential reads (QD 4).
# Usage: scripts/bench/iscsi-target.sh [SIZE_MiB (1024)] [SECONDS per run (10)]
# Needs root (tgtd), iscsi-perf (libiscsi-bin), tgt. Prints a Markdown table.
# The backing files are read once before the runs, so both targets are
# measured with the data in the page cache (the machine has far more RAM
# than the files); the figures are protocol/target overhead, not disk speed.
set -euo pipefail
SIZE=${1:-1024}
SECS=${2:-10}
cd "$(dirname "$0")/../.."
for c in iscsi-perf tgtd tgtadm go; do
  command -v "$c" >/dev/null || { echo "missing $c (scripts/deps.sh installs it)" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "tgtd needs root" >&2; exit 1; }

WORK=$(mktemp -d /var/tmp/iscsi-bench.XXXXXX)
BIN=$WORK/tristore
SERVE_PID=""; TGT_PID=""; CTL=$(( 200 + RANDOM % 700 ))
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null || true
  if [ -n "$TGT_PID" ]; then
    tgtadm -C "$CTL" --lld iscsi --op delete --mode target --tid 1 --force >/dev/null 2>&1 || true
    tgtadm -C "$CTL" --op delete --mode system >/dev/null 2>&1 || true
    for _ in $(seq 50); do kill -0 "$TGT_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$TGT_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P1=$(freeport); P2=$(freeport)

go build -o "$BIN" ./cmd/tristore
"$BIN" volume create --data "$WORK/data" vols/bench "${SIZE}Mi" >/dev/null
dd if=/dev/urandom of="$WORK/data/vols/bench" bs=1M count="$SIZE" conv=notrunc,fsync status=none
dd if="$WORK/data/vols/bench" of="$WORK/tgt.img" bs=1M conv=fsync status=none
cat "$WORK/data/vols/bench" "$WORK/tgt.img" >/dev/null   # same cache state for both

OFF=(--s3-addr off --admin-addr off)
"$BIN" serve --help 2>&1 | grep -q -- '--nfs-addr' && OFF+=(--nfs-addr off)
"$BIN" serve --data "$WORK/data" "${OFF[@]}" --iscsi-addr "127.0.0.1:$P1" --log-level warn >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
tgtd -f -C "$CTL" --iscsi "portal=127.0.0.1:$P2" >"$WORK/tgtd.log" 2>&1 &
TGT_PID=$!
disown "$TGT_PID" 2>/dev/null || true
for _ in $(seq 100); do tgtadm -C "$CTL" --lld iscsi --op new --mode target --tid 1 -T iqn.2026-11.io.tristore.bench:tgt 2>/dev/null && break; sleep 0.1; done
tgtadm -C "$CTL" --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$WORK/tgt.img" --bstype rdwr
tgtadm -C "$CTL" --lld iscsi --op bind --mode target --tid 1 -I ALL
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$P1) 2>/dev/null && break; sleep 0.1; done

OURS="iscsi://127.0.0.1:$P1/iqn.2026-11.io.tristore:vols:bench/0"
TGT="iscsi://127.0.0.1:$P2/iqn.2026-11.io.tristore.bench:tgt/1"

# perf URL QD BLOCKS [-r] -> "IOPS MBps"
perf() {
  local out
  out=$(timeout $((SECS + 30)) iscsi-perf -m "$2" -b "$3" -t "$SECS" ${4:-} "$1" 2>&1 | tr '\r' '\n' | grep -E '^iops average' | tail -1)
  [ -n "$out" ] || { echo "iscsi-perf failed on $1" >&2; exit 1; }
  echo "$out" | sed -E 's/iops average ([0-9]+) \(([0-9]+) MB\/s\).*/\1 \2/'
}

echo "| workload | tristore | tgt (rdwr) | tristore / tgt |"
echo "|---|---|---|---|"
row() { # name qd blocks flag unit(iops|mbps)
  read -r oi om < <(perf "$OURS" "$2" "$3" "$4")
  read -r ti tm < <(perf "$TGT" "$2" "$3" "$4")
  if [ "$5" = iops ]; then a=$oi; b=$ti; u=IOPS; else a=$om; b=$tm; u=MB/s; fi
  r=$(python3 -c "print(f'{$a/$b:.2f}' if $b else 'inf')")
  echo "| $1 | $a $u | $b $u | $r |"
}
row "4 KiB random read, QD 1" 1 8 -r iops
row "4 KiB random read, QD 32" 32 8 -r iops
row "1 MiB sequential read, QD 4" 4 2048 "" mbps

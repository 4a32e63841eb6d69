#!/usr/bin/env bash
# iSCSI benchmark (issue 3): `tristore iscsi bench` (our userspace
# initiator) against tristore's target and against tgt, both serving the
# SAME non-sparse backing file, in the same run, measured alternately.
# libiscsi's iscsi-perf (a C initiator; reads only) is run against both
# targets as a second, independent initiator.
#
#   sudo scripts/bench/iscsi-initiator.sh [ROUNDS] [SECONDS]   # defaults 2 rounds, 10 s per figure
#
# Per round and target: 4 KiB random read and write at queue depth 1 and
# 32, 1 MiB sequential read and write at queue depth 4, then iscsi-perf
# 4 KiB random read at QD 32. Prints one line per figure, then the means.
# The backing file is 1 GiB (BENCH_SIZE) in BENCH_DIR (default /var/tmp),
# filled with zeros so neither target reads holes; both targets use
# buffered I/O on it, so random reads are mostly page-cache hits on both.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-2}
SECS=${2:-10}
SIZE=${BENCH_SIZE:-1GiB}
[ "$(id -u)" -eq 0 ] || { echo "iscsi-initiator.sh: needs root (tgtd)" >&2; exit 1; }
for c in tgtd tgtadm iscsi-perf python3 go dd; do
  command -v "$c" >/dev/null || { echo "iscsi-initiator.sh: $c missing (run scripts/deps.sh)" >&2; exit 1; }
done
WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-iscsi-bench.XXXXXX")
BIN="$WORK/tristore"
SERVE_PID=""
TGT_PID=""
# free ports on 127.0.0.1 and a free tgtd control socket number
read -r OURS_PORT TGT_PORT < <(python3 - <<'EOF'
import socket
ss=[socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1",0))
print(*[s.getsockname()[1] for s in ss])
EOF
)
CTL=$(( 1000 + TGT_PORT % 31000 ))
while [ -e "/var/run/tgtd/socket.$CTL" ]; do CTL=$(( CTL + 1 )); done
cleanup() {
  if [ -n "$TGT_PID" ]; then
    tgtadm -C "$CTL" --lld iscsi --op delete --mode target --tid 1 --force >/dev/null 2>&1 || true
    tgtadm -C "$CTL" --op delete --mode system >/dev/null 2>&1 || true
    sleep 1; kill -9 "$TGT_PID" 2>/dev/null || true; wait "$TGT_PID" 2>/dev/null || true
  fi
  if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

go build -o "$BIN" ./cmd/tristore
DATA="$WORK/data"
"$BIN" volume create --data "$DATA" vols/bench "$SIZE" >/dev/null
FILE="$DATA/vols/bench"
BYTES=$(stat -c %s "$FILE")
dd if=/dev/zero of="$FILE" bs=1M count=$(( BYTES >> 20 )) conv=notrunc,fsync status=none
echo "# backing file $FILE: $(du -h "$FILE" | cut -f1) allocated of $BYTES bytes"

"$BIN" serve --data "$DATA" --iscsi-addr "127.0.0.1:$OURS_PORT" --s3-addr off --nfs-addr off --admin-addr off \
  --ready-file "$WORK/ready.json" --log-level warn &
SERVE_PID=$!
tgtd -f --iscsi "portal=127.0.0.1:$TGT_PORT" -C "$CTL" >"$WORK/tgtd.log" 2>&1 &
TGT_PID=$!
for _ in $(seq 1 100); do
  [ -s "$WORK/ready.json" ] && tgtadm -C "$CTL" --op show --mode target >/dev/null 2>&1 && break
  sleep 0.1
done
TGT_IQN=iqn.2026-11.org.tristore.bench:tgt
tgtadm -C "$CTL" --lld iscsi --op new --mode target --tid 1 -T "$TGT_IQN"
tgtadm -C "$CTL" --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$FILE" --bstype rdwr
tgtadm -C "$CTL" --lld iscsi --op bind --mode target --tid 1 -I ALL
OURS_URL="iscsi://127.0.0.1:$OURS_PORT/iqn.2026-11.io.tristore:vols:bench/0"
TGT_URL="iscsi://127.0.0.1:$TGT_PORT/$TGT_IQN/1"

RES="$WORK/results.txt"
: >"$RES"
bench() { # name url pattern bs qd
  local out
  out=$("$BIN" iscsi bench -q --json --pattern "$3" --bs "$4" --queue-depth "$5" --duration "${SECS}s" "$2")
  python3 - "$1" "$3" "$4" "$5" <<EOF | tee -a "$RES"
import json,sys
r=json.loads('''$out''')[0]
print(f"{sys.argv[1]:5} tristore-bench {sys.argv[2]:9} bs={sys.argv[3]:5} qd={sys.argv[4]:2}  {r['iops']:9.0f} IOPS {r['mb_per_s']:8.1f} MB/s  p50 {r['lat_p50_us']:7.0f} us  p99 {r['lat_p99_us']:7.0f} us")
EOF
}
perf() { # name url
  local out iops
  out=$(timeout $(( SECS + 20 )) iscsi-perf -m 32 -b 8 -r -t "$SECS" "$2" 2>&1 | tr '\r' '\n' || true)
  iops=$(echo "$out" | sed -n 's/^iops average \([0-9]*\).*/\1/p' | tail -1)
  printf "%-5s iscsi-perf     %-9s bs=%-5s qd=%-2s  %9s IOPS\n" "$1" randread 4KiB 32 "${iops:-?}" | tee -a "$RES"
}
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); ${SECS}s per figure; $ROUNDS rounds"
for r in $(seq 1 "$ROUNDS"); do
  for t in ours tgt; do
    url=$OURS_URL; [ "$t" = tgt ] && url=$TGT_URL
    bench "$t" "$url" randread 4KiB 1
    bench "$t" "$url" randread 4KiB 32
    bench "$t" "$url" randwrite 4KiB 1
    bench "$t" "$url" randwrite 4KiB 32
    bench "$t" "$url" read 1MiB 4
    bench "$t" "$url" write 1MiB 4
    perf "$t" "$url"
  done
done
echo "# means over $ROUNDS rounds (ours/tgt ratio)"
python3 - "$RES" <<'EOF'
import re,sys,collections
acc=collections.defaultdict(list)
for line in open(sys.argv[1]):
    f=line.split()
    key=(f[1],f[2],f[3],f[4])
    m=re.search(r'([\d.]+) IOPS',line); mb=re.search(r'([\d.]+) MB/s',line)
    if not m: continue
    acc[(f[0],)+key].append((float(m.group(1)), float(mb.group(1)) if mb else 0))
keys=sorted({k[1:] for k in acc})
for k in keys:
    o=acc.get(('ours',)+k,[]); t=acc.get(('tgt',)+k,[])
    if not o or not t: continue
    oi=sum(x[0] for x in o)/len(o); ti=sum(x[0] for x in t)/len(t)
    om=sum(x[1] for x in o)/len(o); tm=sum(x[1] for x in t)/len(t)
    val = f"{oi:9.0f} vs {ti:9.0f} IOPS" if k[2]!='bs=1MiB' else f"{om:8.1f} vs {tm:8.1f} MB/s"
    print(f"{k[0]:14} {k[1]:9} {k[2]:9} {k[3]:5}  ours vs tgt: {val}   ratio {oi/ti if ti else 0:5.2f}")
EOF

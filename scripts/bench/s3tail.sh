#!/usr/bin/env bash
# One large object over an emulated link: how close do tristore's uploads
# and downloads come to the link, and what does iperf3 with many flows get
# on the same link (the ceiling TCP leaves)? For the tail of a large
# transfer (issue 11's 95 %-of-the-link aim on 16 MiB+ files). Root only.
#
#   sudo scripts/bench/s3tail.sh
#   ROUNDS=3 PRESET=realistic SIZE=128MiB SIDES="iperf-16 up-5MiB-26 down-8MiB-16" sudo scripts/bench/s3tail.sh
#
# Sides (each round runs them in an order rotating by one, uploads first,
# then iperf3, then downloads; a download reads the object the round's
# last upload wrote):
#   up-C-P       tristore s3 cp FILE s3://… --chunk-size C --parallel P
#   down-C-P     tristore s3 cp s3://… FILE --chunk-size C --parallel P
#   up-auto      tristore s3 cp FILE s3://… --auto (profile from one
#                `s3 tune` per round in that direction, outside the times)
#   down-auto    the same for the download
#   iperf-N      iperf3 -P N for IPERF_SECS seconds, client to server
#   iperfR-N     the same, server to client (-R)
#   SIDE+F+G     a tristore side with --F --G added (e.g.
#                down-8MiB-16+tail-split=false)
# OURS (default: the first side) is the side the ratios compare with.
# Rows: payload MiB/s (bytes / wall seconds from start to exit; iperf3:
# its receiver's bytes / seconds), and the share of the link's rate (12.5
# MiB/s on realistic: LINK_MIBS). Raw rounds: docs/bench/raw/s3tail-*.jsonl.
set -euo pipefail
BENCH_NAME=s3tail
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${ROUNDS:-2}
PRESET=${PRESET:-realistic}
SIZE=${SIZE:-128MiB}
SIDES=${SIDES:-"iperf-16 iperf-32 up-5MiB-16 up-5MiB-26 down-8MiB-16 down-4MiB-32"}
IPERF_SECS=${IPERF_SECS:-10}
LINK_MIBS=${LINK_MIBS:-12.5}
WORK=""
cleanup() {
  [ -n "$WORK" ] && [ -s "$WORK/iperf.pid" ] && kill "$(cat "$WORK/iperf.pid")" 2>/dev/null
  [ -n "$WORK" ] && rm -rf "$WORK"
}
bench_need_root "network namespaces, TUN"
bench_need_cmd iperf3 "apt-get install iperf3"
bench_need_cmd python3 "apt-get install python3"
WORK=$(mktemp -d /var/tmp/tristore-s3tail.XXXXXX)
bench_start "$WORK"
python3 - "$WORK/big.bin" "$SIZE" <<'EOF'
import os, sys
units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
s = sys.argv[2]
n = next((int(s[:-3]) * m for u, m in units.items() if s.endswith(u)), None) or int(s)
with open(sys.argv[1], "wb") as f:
    while n:
        k = min(n, 8 << 20)
        f.write(os.urandom(k))
        n -= k
EOF
BYTES=$(stat -c %s "$WORK/big.bin")
AK=benchs3tailkey0001
SK=benchs3tailsecret0123456789

cat >"$WORK/client.sh" <<'EOS'
#!/usr/bin/env bash
# Client namespace. Env: WORK OUT ORDER AK SK IPERF_SECS
set -euo pipefail
EP=http://192.0.2.2:9000
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_REGION=us-east-1
T="$WORK/tristore"
"$T" s3 mb s3://bench --endpoint $EP >/dev/null
tuned_up="" tuned_down=""
obj=""
run() { # side
  local s=$1 t0 t1 extra=()
  if [ "${s#*+}" != "$s" ]; then # side+flag+flag: --flag --flag
    local f
    IFS=+ read -ra fl <<<"${s#*+}"
    for f in "${fl[@]}"; do extra+=("--$f"); done
    s=${s%%+*}
  fi
  case $s in
  up-auto | down-auto)
    local d=${s%-auto}
    if [ "$d" = up ] && [ -z "$tuned_up" ]; then
      timeout 300 "$T" s3 tune s3://bench/tune/ --endpoint $EP --tune-dir "$WORK/tune" --resample --direction up -q >/dev/null; tuned_up=1
    fi
    if [ "$d" = down ] && [ -z "$tuned_down" ]; then
      timeout 300 "$T" s3 tune s3://bench/tune/ --endpoint $EP --tune-dir "$WORK/tune" --resample --direction down -q >/dev/null; tuned_down=1
    fi
    flags=(--auto --tune-dir "$WORK/tune") ;;
  up-* | down-*)
    local rest=${s#*-}
    flags=(--chunk-size "${rest%-*}" --parallel "${rest##*-}") ;;
  esac
  flags+=("${extra[@]}")
  t0=$(date +%s.%N)
  case $s in
  up-*)
    timeout 900 "$T" s3 cp "$WORK/big.bin" "s3://bench/$s" --endpoint $EP --json "${flags[@]}" >"$WORK/j.json" 2>"$WORK/err.txt" || { cat "$WORK/err.txt" >&2; exit 1; }
    obj=$s ;;
  down-*)
    rm -f "$WORK/down.bin"
    timeout 900 "$T" s3 cp "s3://bench/$obj" "$WORK/down.bin" --endpoint $EP --json "${flags[@]}" >"$WORK/j.json" 2>"$WORK/err.txt" || { cat "$WORK/err.txt" >&2; exit 1; }
    cmp -s "$WORK/big.bin" "$WORK/down.bin" || { echo "$s: downloaded bytes differ" >&2; exit 1; } ;;
  iperf-* | iperfR-*)
    local rev=""
    [ "${s%%-*}" = iperfR ] && rev=-R
    timeout 120 iperf3 -c 192.0.2.2 -P "${s#*-}" -t "$IPERF_SECS" $rev --json >"$WORK/j.json" ;;
  esac
  t1=$(date +%s.%N)
  case $s in
  # (JSON through a file: iperf3's for 32 flows is over the 128 KiB an
  # argument may hold)
  iperf*) python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["end"]["sum_received"]; print(sys.argv[2], e["bytes"], e["seconds"], 0)' "$WORK/j.json" "$1" >>"$OUT" ;;
  *) python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], d["bytes"], float(sys.argv[3]) - float(sys.argv[4]), d.get("latency_p99_ms", 0))' "$WORK/j.json" "$1" "$t1" "$t0" >>"$OUT" ;;
  esac
}
for s in $ORDER; do case $s in up-*) run "$s" ;; esac; done
[ -n "$obj" ] || { obj=up-init; "$T" s3 cp "$WORK/big.bin" "s3://bench/$obj" --endpoint $EP -q --chunk-size 5MiB --parallel 26; }
for s in $ORDER; do case $s in iperf*) run "$s" ;; esac; done
for s in $ORDER; do case $s in down-*) run "$s" ;; esac; done
EOS
chmod +x "$WORK/client.sh"

OURS=${OURS:-${SIDES%% *}}
bench_machine "ROUNDS=$ROUNDS PRESET=$PRESET SIZE=$SIZE SIDES=\"$SIDES\" OURS=$OURS sudo scripts/bench/s3tail.sh" -ours "$OURS" \
  -peer "iperf3=$(iperf3 --version 2>/dev/null | awk 'NR == 1 { print $2 }')" \
  -note "One object of $SIZE through tristore netem run --preset $PRESET to tristore serve in the server namespace (iperf3 -s beside it). MiB/s: payload bytes / wall seconds from start to exit of the command (iperf3: receiver bytes / seconds, no HTTP). % of link: of $LINK_MIBS MiB/s."
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r" >&2
  rm -rf "$WORK/tune"
  OUT="$WORK/out-$r.txt"
  : >"$OUT"
  lb=$(bench_load)
  ORDER=$(bench_order "$r" $SIDES)
  WORK=$WORK OUT=$OUT AK=$AK SK=$SK ORDER=$ORDER IPERF_SECS=$IPERF_SECS \
    bench_netem_s3 "$PRESET" "$WORK/srv" "$WORK/run.log" "iperf3 -s -D -B 192.0.2.2 -I $WORK/iperf.pid; " -- "$WORK/client.sh" ||
    bench_fail "round $r failed: $(tail -5 "$WORK/run.log")"
  [ -s "$WORK/iperf.pid" ] && kill "$(cat "$WORK/iperf.pid")" 2>/dev/null || true
  rm -f "$WORK/iperf.pid"
  while read -r s bytes secs p99; do
    mibs=$(python3 -c "print($bytes / 2**20 / $secs)")
    pct=$(python3 -c "print(100 * $bytes / 2**20 / $secs / $LINK_MIBS)")
    args=(-v "$PRESET, $SIZE: MiB/s=$mibs" -v "$PRESET, $SIZE: % of link=$pct")
    [ "$p99" != 0 ] && args+=(-v "$PRESET, $SIZE: request p99, ms=$p99")
    bench_record "$r" "$s" "$lb" "${args[@]}"
  done <"$OUT"
done
bench_table

#!/usr/bin/env bash
# Forwarder benchmark: the TCP goodput through an emulated link on this
# machine and the forwarder's CPU per Gbit/s, with iperf3 (one TCP stream,
# kernel TCP in both namespaces) as the traffic source, on five links; then
# the in-process Go benchmark (sender and receiver in the same process, no
# iperf3 scheduling noise). There is no peer forwarder in this run: the
# figures are the forwarder's own cost, nothing is compared. Root only.
#
#   sudo scripts/bench/netem.sh [ROUNDS] [SECONDS]   # defaults: 3 rounds, 5 s per iperf3 run
#
# Per round, each link (the order rotates by one per round) runs
# `tristore netem run LINK --server-cmd "iperf3 -s" -- client.sh`, where
# client.sh runs `iperf3 -c -t SECONDS -J` and reads the forwarder's CPU
# (utime+stime of the `tristore netem run` process only; iperf3 runs in
# child processes) from /proc/<pid>/stat around it. Any failed run fails
# the whole benchmark. Raw rounds: docs/bench/raw/netem-<time>.jsonl.
set -euo pipefail
BENCH_NAME=netem
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-3}
DUR=${2:-5}
WORK=""
cleanup() { [ -n "$WORK" ] && rm -rf "$WORK"; }
bench_need_root "network namespaces, TUN"
bench_need_cmd iperf3 "apt-get install iperf3"
bench_need_cmd python3 "apt-get install python3"
WORK=$(mktemp -d)
bench_start "$WORK"
(cd "$SRC" && go test -c -o "$WORK/netem.test" ./netem) || bench_fail "cannot build the netem test binary"

# client.sh runs in the client namespace; its parent is the tristore process.
cat >"$WORK/client.sh" <<'EOS'
#!/bin/sh
set -e
p=$PPID
# Wait for the server (a probe connection would confuse iperf3's control
# channel, so no --server-ready): bounded retries.
ok=0
for i in $(seq 1 50); do
  if timeout 5 iperf3 -c 192.0.2.2 -n 1K >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.2
done
[ "$ok" = 1 ] || { echo "iperf3 server not reachable through the link" >&2; exit 1; }
sleep 0.5
a=$(awk '{print $14+$15}' /proc/$p/stat)
t0=$(date +%s.%N)
timeout $((DUR + 30)) iperf3 -c 192.0.2.2 -t "$DUR" -J >"$OUT"
t1=$(date +%s.%N)
b=$(awk '{print $14+$15}' /proc/$p/stat)
echo "$a $b $(getconf CLK_TCK) $t0 $t1" >"$OUT.cpu"
EOS
chmod +x "$WORK/client.sh"

declare -A LINK=(
  [unlimited-0ms]="--rate 0"
  [unlimited-1ms]="--rate 0 --delay 1ms"
  [lan]="--preset lan"
  [100mbit-25ms]="--rate 100mbit --delay 25ms --jitter 10ms --loss 0.1%"
  [realistic]="--preset realistic"
  [unlimited-1ms-pkt]="--rate 0 --delay 1ms --offload=false"
  [100mbit-25ms-pkt]="--rate 100mbit --delay 25ms --jitter 10ms --loss 0.1% --offload=false"
  [realistic-pkt]="--preset realistic --offload=false"
)
declare -A LABEL=(
  [unlimited-0ms]="unlimited rate, 0 ms"
  [unlimited-1ms]="unlimited rate, 1 ms one way"
  [lan]="lan preset (1 Gbit/s, 0.1 ms one way)"
  [100mbit-25ms]="100 Mbit/s, 25 ms one way, σ 10 ms, 0.1 % loss"
  [realistic]="realistic preset"
  [unlimited-1ms-pkt]="unlimited rate, 1 ms one way, --offload=false"
  [100mbit-25ms-pkt]="100 Mbit/s, 25 ms one way, σ 10 ms, 0.1 % loss, --offload=false"
  [realistic-pkt]="realistic preset, --offload=false"
)
# The -pkt links forward packet by packet (no TUN offloads), for the
# before/after of the offload within one run.
ORDER=(unlimited-0ms unlimited-1ms lan 100mbit-25ms realistic unlimited-1ms-pkt 100mbit-25ms-pkt realistic-pkt)

bench_machine "sudo scripts/bench/netem.sh $ROUNDS $DUR" -ours forwarder \
  -peer "iperf3=$(iperf3 --version 2>&1 | awk 'NR == 1 { print $2 }') (traffic source only)" \
  -note "No peer forwarder was run: the rows are the forwarder's own goodput and CPU (one core = 100 %). One TCP stream, MTU 1500, ${DUR} s per iperf3 run. Go benchmark: go test -run '^\$' -bench LinkTCP -benchtime 20000x ./netem."

for r in $(seq 1 "$ROUNDS"); do
  for l in $(bench_order "$r" "${ORDER[@]}"); do
    echo "round $r: $l" >&2
    lb=$(bench_load)
    rm -f "$WORK/iperf.json" "$WORK/iperf.json.cpu"
    # shellcheck disable=SC2086
    DUR=$DUR OUT="$WORK/iperf.json" "$WORK/tristore" netem run ${LINK[$l]} \
      --server-cmd "iperf3 -s -B 192.0.2.2 >/dev/null 2>&1" --counters-file "$WORK/counters.txt" \
      -- "$WORK/client.sh" >"$WORK/run.log" 2>&1 || bench_fail "link $l failed in round $r: $(tail -3 "$WORK/run.log")"
    read -r a b hz t0 t1 <"$WORK/iperf.json.cpu"
    read -r mbit cpu cpg < <(python3 -c '
import json, sys
bps = json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]
a, b, hz, t0, t1 = map(float, sys.argv[2:])
cpu = (b - a) / hz / (t1 - t0)
print(bps / 1e6, cpu * 100, cpu / (bps / 1e9))' "$WORK/iperf.json" "$a" "$b" "$hz" "$t0" "$t1")
    bench_record "$r" forwarder "$lb" -json "$WORK/iperf.json" \
      -v "${LABEL[$l]}: iperf3 goodput, Mbit/s=$mbit" \
      -v "${LABEL[$l]}: forwarder CPU, %=$cpu" \
      -v "${LABEL[$l]}: cores per Gbit/s=$cpg"
  done
  # In-process benchmark: unlimited rate at 0 and 1 ms.
  for d in 0 1ms; do
    lb=$(bench_load)
    out=$(NETEM_BENCH_DELAY=$([ "$d" = 0 ] && echo "" || echo "$d") "$WORK/netem.test" -test.run '^$' \
      -test.bench LinkTCP -test.benchtime 20000x 2>&1) || bench_fail "Go benchmark (delay $d) failed: $(echo "$out" | tail -3)"
    line=$(echo "$out" | grep '^BenchmarkLinkTCP' | tail -1)
    gbps=$(echo "$line" | awk '{for (i = 2; i <= NF; i++) if ($i == "Gbit/s") print $(i-1)}')
    cpg=$(echo "$line" | awk '{for (i = 2; i <= NF; i++) if ($i == "cores/Gbit/s") print $(i-1)}')
    [ -n "$gbps" ] && [ -n "$cpg" ] || bench_fail "Go benchmark printed no Gbit/s: $line"
    dl="0 ms"
    [ "$d" = 1ms ] && dl="1 ms one way"
    bench_record "$r" forwarder "$lb" -v "Go benchmark, unlimited, $dl: Gbit/s=$gbps" -v "Go benchmark, unlimited, $dl: cores per Gbit/s=$cpg"
  done
done
bench_table

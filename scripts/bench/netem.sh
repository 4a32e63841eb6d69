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
# Environment:
#   NETEM_LINKS="100mbit-25ms unlimited-1ms-pin ..."  only these links (names
#                in ORDER below; default all)
#   NETEM_BEFORE=REV   also build tristore at REV (git archive) and run every
#                link with it too, side "before", interleaved with the
#                commit under test (side "forwarder"; the order of the two
#                rotates per round): a before/after in one run
#   NETEM_GOBENCH=0    skip the in-process Go benchmark
#
# The -pin link runs the forwarder under `taskset -c 1` (its every thread:
# one CPU) and both iperf3 ends under `taskset -c 0`, so "on one core" is
# measured: the forwarder's CPU there includes the receiving namespace's
# TCP input, which the kernel runs in the forwarder's TUN writes.
#
# Per round, each link (the order rotates by one per round) runs
# `tristore netem run LINK --server-cmd "iperf3 -s" -- client.sh`, where
# client.sh runs `iperf3 -c -t SECONDS -J` and reads the forwarder's CPU
# (utime+stime of the `tristore netem run` process only; iperf3 runs in
# child processes) from /proc/<pid>/stat around it. Any failed run fails
# the whole benchmark. Raw rounds: docs/bench/raw/netem-<time>.jsonl.
#
# Slow rounds are reported, not hidden (docs/netem.md, "Jitter without
# reordering"): on a jittered link one BBR stream's goodput follows the
# min_rtt BBR measured at the start, so a round may stay at 5-50 Mbit/s
# and then costs less CPU. Per round the script also records the sender's
# BBR min_rtt (`ss -tin` in the client namespace one second before the
# end), the share of the forwarder's writes more than 2 ms late (its
# lateness counters, from tristore builds that have them), and, on links
# with a rate, the CPU once more as "in rounds at >= 80 % of the rate":
# that row has only the rounds that carried the load the goal names, so
# a side cannot look cheaper by having carried less.
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
GOBENCH=${NETEM_GOBENCH:-1}
if [ "$GOBENCH" != 0 ]; then
  (cd "$SRC" && go test -c -o "$WORK/netem.test" ./netem) || bench_fail "cannot build the netem test binary"
fi
SIDES=(forwarder)
declare -A BIN=([forwarder]="$WORK/tristore")
BEFORE_COMMIT=""
if [ -n "${NETEM_BEFORE:-}" ]; then
  BEFORE_COMMIT=$(git -C "$BENCH_ROOT" rev-parse --short=12 "$NETEM_BEFORE^{commit}") || bench_fail "NETEM_BEFORE=$NETEM_BEFORE is not a commit"
  mkdir -p "$WORK/before"
  git -C "$BENCH_ROOT" archive "$BEFORE_COMMIT" | tar -x -C "$WORK/before" || bench_fail "git archive $BEFORE_COMMIT failed"
  (cd "$WORK/before" && go build -o "$WORK/tristore-before" ./cmd/tristore) || bench_fail "go build of $BEFORE_COMMIT failed"
  SIDES=(forwarder before)
  BIN[before]="$WORK/tristore-before"
fi

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
# BBR's state one second before the end (the data connection: the one that sent the most).
(sleep $((DUR > 1 ? DUR - 1 : 1)); ss -tin dst 192.0.2.2 >"$OUT.ss" 2>/dev/null) &
timeout $((DUR + 30)) $IPERF_PIN iperf3 -c 192.0.2.2 -t "$DUR" -J >"$OUT"
wait
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
  [unlimited-1ms-pin]="--rate 0 --delay 1ms"
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
  [unlimited-1ms-pin]="unlimited rate, 1 ms one way, forwarder on CPU 1 only, iperf3 on CPU 0"
)
# Links run pinned: forwarder CPU list and iperf3 CPU list for taskset.
declare -A PIN=([unlimited-1ms-pin]="1 0")
# Links with a rate (Mbit/s): their CPU is recorded once more for rounds
# at >= 80 % of it. (realistic never gets there: one stream on a
# reordering link.)
declare -A RATE=([lan]=1000 [100mbit-25ms]=100 [100mbit-25ms-pkt]=100)
# The -pkt links forward packet by packet (no TUN offloads), for the
# before/after of the offload within one run.
ORDER=(unlimited-0ms unlimited-1ms lan 100mbit-25ms realistic unlimited-1ms-pkt 100mbit-25ms-pkt realistic-pkt unlimited-1ms-pin)
if [ -n "${NETEM_LINKS:-}" ]; then
  for l in $NETEM_LINKS; do [ -n "${LINK[$l]:-}" ] || bench_fail "NETEM_LINKS: no link $l (have ${ORDER[*]})"; done
  read -r -a ORDER <<<"$NETEM_LINKS"
fi
[ "$(nproc)" -ge 2 ] || [[ " ${ORDER[*]} " != *-pin* ]] || bench_fail "the -pin link needs 2 CPUs"
ENVNOTE=""
[ -n "${NETEM_LINKS:-}" ] && ENVNOTE="NETEM_LINKS=\"$NETEM_LINKS\" "
[ -n "$BEFORE_COMMIT" ] && ENVNOTE="${ENVNOTE}NETEM_BEFORE=$BEFORE_COMMIT "
[ "$GOBENCH" = 0 ] && ENVNOTE="${ENVNOTE}NETEM_GOBENCH=0 "
PEERS=(-peer "iperf3=$(iperf3 --version 2>&1 | awk 'NR == 1 { print $2 }') (traffic source only)")
[ -n "$BEFORE_COMMIT" ] && PEERS+=(-peer "before=tristore $BEFORE_COMMIT (the same forwarder before the change under test)")

bench_machine "sudo ${ENVNOTE}scripts/bench/netem.sh $ROUNDS $DUR" -ours forwarder "${PEERS[@]}" \
  -note "No peer forwarder was run: the rows are the forwarder's own goodput and CPU (one core = 100 %). One TCP stream, MTU 1500, ${DUR} s per iperf3 run. Go benchmark: go test -run '^\$' -bench LinkTCP -benchtime 20000x ./netem."

for r in $(seq 1 "$ROUNDS"); do
  for l in $(bench_order "$r" "${ORDER[@]}"); do
   for side in $(bench_order "$r" "${SIDES[@]}"); do
    echo "round $r: $l ($side)" >&2
    lb=$(bench_load)
    rm -f "$WORK/iperf.json" "$WORK/iperf.json.cpu" "$WORK/iperf.json.ss" "$WORK/counters.json"
    fpin="" ipin=""
    if [ -n "${PIN[$l]:-}" ]; then
      read -r fc ic <<<"${PIN[$l]}"
      fpin="taskset -c $fc" ipin="taskset -c $ic"
    fi
    # shellcheck disable=SC2086
    DUR=$DUR OUT="$WORK/iperf.json" IPERF_PIN="$ipin" $fpin "${BIN[$side]}" netem run ${LINK[$l]} \
      --server-cmd "$ipin iperf3 -s -B 192.0.2.2 >/dev/null 2>&1" --json --counters-file "$WORK/counters.json" \
      -- "$WORK/client.sh" >"$WORK/run.log" 2>&1 || bench_fail "link $l ($side) failed in round $r: $(tail -3 "$WORK/run.log")"
    read -r a b hz t0 t1 <"$WORK/iperf.json.cpu"
    read -r mbit cpu cpg mrtt late < <(python3 -c '
import json, re, sys
bps = json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]
a, b, hz, t0, t1 = map(float, sys.argv[2:7])
cpu = (b - a) / hz / (t1 - t0)
mrtt, most = "-", -1
try:  # ss -tin: one line per socket, then its info line
    for info in open(sys.argv[7]).read().split("\n"):
        m, s = re.search(r"bbr:\(.*mrtt:([0-9.]+)", info), re.search(r"bytes_sent:(\d+)", info)
        if m and s and int(s.group(1)) > most:
            mrtt, most = m.group(1), int(s.group(1))
except OSError:
    pass
late = "-"
try:
    c = json.load(open(sys.argv[8]))
    if "late_hist" in c["up"]:  # builds with lateness counters; buckets <=50,250,1000,2000,5000 us, more
        w = sum(sum(c[d]["late_hist"]) for d in ("up", "down"))
        over = sum(sum(c[d]["late_hist"][4:]) for d in ("up", "down"))
        late = 100 * over / w if w else 0
except (OSError, ValueError, KeyError):
    pass
print(bps / 1e6, cpu * 100, cpu / (bps / 1e9), mrtt, late)' "$WORK/iperf.json" "$a" "$b" "$hz" "$t0" "$t1" "$WORK/iperf.json.ss" "$WORK/counters.json")
    extra=()
    [ "$mrtt" != - ] && extra+=(-v "${LABEL[$l]}: sender's BBR min_rtt, ms=$mrtt")
    [ "$late" != - ] && extra+=(-v "${LABEL[$l]}: forwarder writes > 2 ms late, %=$late")
    if [ -n "${RATE[$l]:-}" ] && python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 0.8 * float(sys.argv[2]) else 1)' "$mbit" "${RATE[$l]}"; then
      extra+=(-v "${LABEL[$l]}: forwarder CPU in rounds at >= 80 % of the rate, %=$cpu")
    fi
    bench_record "$r" "$side" "$lb" -json "$WORK/iperf.json" \
      -v "${LABEL[$l]}: iperf3 goodput, Mbit/s=$mbit" \
      -v "${LABEL[$l]}: forwarder CPU, %=$cpu" \
      -v "${LABEL[$l]}: cores per Gbit/s=$cpg" "${extra[@]}"
   done
  done
  # In-process benchmark: unlimited rate at 0 and 1 ms (the commit under
  # test only).
  [ "$GOBENCH" = 0 ] && continue
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

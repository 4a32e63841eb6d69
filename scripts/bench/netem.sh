#!/usr/bin/env bash
# Forwarder benchmark: the highest TCP rate through an emulated link on this
# machine and the forwarder's CPU per Gbit/s, with iperf3 (the peer) as the
# traffic source, unlimited rate at 0 and 1 ms one-way delay, and the 1 Gbit/s
# `lan` preset; then the in-process Go benchmark (sender/receiver in the same
# realtime process, no iperf3 scheduling noise). Root only.
#
#   scripts/bench/netem.sh            # DUR=5 seconds per iperf3 run
#
# Forwarder CPU is read from /proc/<tristore pid>/stat (utime+stime of the
# `tristore netem run` process only: iperf3 runs in child processes).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "netem bench: needs root" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "netem bench: iperf3 missing (scripts/deps.sh)" >&2; exit 1; }
DUR=${DUR:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/tristore" ./cmd/tristore

# client.sh runs in the client namespace; its parent is the tristore process.
cat > "$tmp/client.sh" <<'EOS'
#!/bin/sh
p=$PPID
hz=$(getconf CLK_TCK)
# Wait for the server (a probe connection would confuse iperf3's control
# channel, so no --server-ready): bounded retries.
for i in $(seq 1 50); do timeout 5 iperf3 -c 192.0.2.2 -n 1K >/dev/null 2>&1 && break; sleep 0.2; done
sleep 0.5
a=$(awk '{print $14+$15}' /proc/$p/stat)
t0=$(date +%s.%N)
timeout $((DUR + 30)) iperf3 -c 192.0.2.2 -t "$DUR" -J > "$OUT" || { echo "| $LABEL | iperf3 failed | | |"; exit 0; }
t1=$(date +%s.%N)
b=$(awk '{print $14+$15}' /proc/$p/stat)
python3 - "$OUT" "$a" "$b" "$hz" "$t0" "$t1" "$LABEL" <<'EOP'
import json, sys
out, a, b, hz, t0, t1, label = sys.argv[1:]
j = json.load(open(out))
bps = j['end']['sum_received']['bits_per_second']
cpu = (float(b) - float(a)) / float(hz) / (float(t1) - float(t0))
print('| %s | %.0f Mbit/s | %.0f %% | %.2f |' % (label, bps / 1e6, cpu * 100, cpu / (bps / 1e9)))
EOP
EOS
chmod +x "$tmp/client.sh"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
echo
echo "| link | iperf3 goodput | forwarder CPU (one core = 100 %) | cores per Gbit/s |"
echo "|---|---|---|---|"
run() {
  label=$1; shift
  DUR=$DUR OUT="$tmp/iperf.json" LABEL="$label" "$tmp/tristore" netem run "$@" \
    --server-cmd "iperf3 -s -B 192.0.2.2 >/dev/null 2>&1" \
    --counters-file "$tmp/counters.txt" -- "$tmp/client.sh" 2>"$tmp/err.txt" | grep '^|' ||
    { echo "| $label | run failed: $(tail -1 "$tmp/err.txt") | | |"; }
}
run "unlimited, 0 ms" --rate 0
run "unlimited, 1 ms one-way" --rate 0 --delay 1ms
run "lan preset (1 Gbit/s, 0.1 ms one-way)" --preset lan
run "Python prototype's setting (100 Mbit/s, 25 ms, σ 10 ms, 0.1 % loss)" --rate 100mbit --delay 25ms --jitter 10ms --loss 0.1%
run "realistic preset (12.5 MiB/s, 25 ms, 0.1 % loss, jitter, reordering)" --preset realistic
echo
echo "Go benchmark (in-process TCP stream through the forwarder):"
go test -run '^$' -bench LinkTCP -benchtime 20000x ./netem | grep Benchmark
NETEM_BENCH_DELAY=1ms go test -run '^$' -bench LinkTCP -benchtime 20000x ./netem | grep Benchmark | sed 's/^/(1 ms one-way) /'
NETEM_BENCH_RATE=100mbit NETEM_BENCH_DELAY=25ms go test -run '^$' -bench LinkTCP -benchtime 1000x ./netem | grep Benchmark | sed 's/^/(100 Mbit\/s, 25 ms one-way) /'

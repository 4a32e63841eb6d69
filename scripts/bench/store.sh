#!/usr/bin/env bash
# Store benchmark: store/posix's durable Put and its Get against the floor on
# the same disk in the same run: the same durable steps with nothing else
# (BenchmarkRawDurableWrite: create a temp file, write, fsync, rename, fsync
# the directory) and a plain open + read + close (BenchmarkRawRead), 4 KiB
# and 4 MiB, one writer/reader.
#
#   scripts/bench/store.sh [ROUNDS] [BENCHTIME]     # defaults: 3 rounds, 1s
#
# Per round the store's benchmarks and the floor's run one after the other
# (the order rotates by one per round), each as
# `posix.test -test.run '^$' -test.bench 'X/(4KiB|4MiB)/p1$' -test.benchtime BENCHTIME`
# with its temporary directories under BENCH_DIR (default /var/tmp). Recorded per row: wall time and process CPU
# (user + system) per operation, in µs; lower is better, so a ratio above 1
# means the store costs more than the floor. Raw rounds:
# docs/bench/raw/store-<time>.jsonl; the table is printed at the end.
set -euo pipefail
BENCH_NAME=store
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-3}
BT_TIME=${2:-1s}
WORK=""
cleanup() { [ -n "$WORK" ] && rm -rf "$WORK"; }
WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-store-bench.XXXXXX")
bench_start "$WORK"
(cd "$SRC" && go test -c -o "$WORK/posix.test" ./store/posix) || bench_fail "cannot build the store/posix test binary"
bench_machine "scripts/bench/store.sh $ROUNDS $BT_TIME" -ours store -peer "floor=raw syscalls (same test binary)" \
  -note "Temporary directories on $(findmnt -no FSTYPE -T "$WORK") ($(dirname "$WORK")); µs per operation, lower is better: the ratio is store / floor."

declare -A PATTERN=([store]='^Benchmark(Put|Get)$/(4KiB|4MiB)/p1$' [floor]='^Benchmark(RawDurableWrite|RawRead)$/(4KiB|4MiB)/p1$')
for r in $(seq 1 "$ROUNDS"); do
  for s in $(bench_order "$r" store floor); do
    echo "round $r: $s" >&2
    lb=$(bench_load)
    out=$(TMPDIR=$WORK "$WORK/posix.test" -test.run '^$' -test.bench "${PATTERN[$s]}" -test.benchtime "$BT_TIME" 2>&1) ||
      bench_fail "$s benchmarks failed in round $r: $(echo "$out" | tail -5)"
    # BenchmarkPut/4KiB/p1-2  1234  921000 ns/op  4.45 MB/s  1100000 cpu-ns/op
    args=()
    while IFS='|' read -r name ns cpu; do
      args+=(-v "$name, wall µs/op=$ns" -v "$name, CPU µs/op=$cpu")
    done < <(echo "$out" | awk '/^Benchmark/ {
      split($1, p, "/"); op = (p[1] ~ /Put|RawDurableWrite/) ? "durable write" : "read"
      size = p[2]; sub(/KiB/, " KiB", size); sub(/MiB/, " MiB", size)
      ns = ""; cpu = ""
      for (i = 3; i <= NF; i++) { if ($i == "ns/op") ns = $(i-1); if ($i == "cpu-ns/op") cpu = $(i-1) }
      if (ns != "" && cpu != "") printf "%s %s|%.1f|%.1f\n", op, size, ns / 1000, cpu / 1000 }')
    [ ${#args[@]} -eq 16 ] || bench_fail "$s: expected 4 benchmark lines in round $r, got: $out"
    bench_record "$r" "$s" "$lb" "${args[@]}"
  done
done
bench_table

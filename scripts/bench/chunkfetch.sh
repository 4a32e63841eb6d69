#!/usr/bin/env bash
# What a chunk cache miss of `tristore mount s3://` waits for on an
# emulated link (issue 12: 1 MiB chunks read slower than 64 KiB ones and
# than rclone mount): a GET of a whole SIZE object, the same object as N
# ranged GETs in parallel (partsN), the first 64 KiB of it alone
# (first64k: what a ranged read of only the needed bytes would wait for)
# and a whole 64 KiB object (small64k: a 64 KiB chunk's miss). Client:
# scripts/bench/chunkfetch (the engine's S3 client, a fresh object per
# trial after an idle gap, modes rotating); server: tristore serve in the
# link's server namespace. Rows: mean and median ms per mode over TRIALS
# trials, one record per mode and round. Root only (netns, TUN).
#
#   sudo scripts/bench/chunkfetch.sh [ROUNDS]        (default 2)
#   PRESET=realistic SIZE=1048576 TRIALS=8 GAP=500ms MODES=whole,parts4,... 
set -euo pipefail
BENCH_NAME=chunkfetch
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-2}
PRESET=${PRESET:-realistic}
SIZE=${SIZE:-1048576}
TRIALS=${TRIALS:-8}
GAP=${GAP:-500ms}
MODES=${MODES:-whole,first64k,parts4,parts8,parts16,small64k}
WORK=""
cleanup() { [ -n "$WORK" ] && rm -rf "$WORK"; }
bench_need_root "network namespaces, TUN"
WORK=$(mktemp -d /tmp/chunkfetch-bench.XXXXXX)
bench_start "$WORK"
(cd "$SRC" && go build -o "$WORK/chunkfetch" ./scripts/bench/chunkfetch) || bench_fail "cannot build chunkfetch"
AK=BENCHCHUNKFETCH00001
SK=bench-chunkfetch-secret-0001
bench_machine "sudo PRESET=$PRESET SIZE=$SIZE TRIALS=$TRIALS GAP=$GAP MODES=$MODES scripts/bench/chunkfetch.sh $ROUNDS" \
  -ours whole -note "Link: netem preset $PRESET. Server: tristore serve in the server namespace. Each trial GETs a fresh object of $SIZE bytes (small64k: 65536) after an idle gap of $GAP; partsN: N ranged GETs of SIZE/N in parallel; first64k: bytes 0-65535 only. $TRIALS trials per mode and round, modes rotating."
IFS=, read -r -a MS <<<"$MODES"
for r in $(seq 1 "$ROUNDS"); do
  lb=$(bench_load)
  AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK timeout -k 10 600 "$WORK/tristore" netem run --preset "$PRESET" \
    --server-cmd "$WORK/tristore serve --data $WORK/srv-$r --s3-addr 192.0.2.2:9000 --nfs-addr off --iscsi-addr off --admin-addr off --access-key $AK --secret-key $SK" \
    --server-ready 192.0.2.2:9000 -- "$WORK/chunkfetch" -size "$SIZE" -trials "$TRIALS" -gap "$GAP" -modes "$MODES" >"$WORK/out-$r.txt" 2>"$WORK/err-$r.txt" ||
    bench_fail "round $r failed: $(tail -5 "$WORK/err-$r.txt")"
  for m in "${MS[@]}"; do
    grep "\"mode\":\"$m\"" "$WORK/out-$r.txt" >"$WORK/m.json" || bench_fail "no result for $m in round $r"
    bench_record "$r" "$m" "$lb" -json "$WORK/m.json" -f "mean ms=mean_ms" -f "median ms=median_ms" -f "max ms=max_ms"
  done
  echo "round $r: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
bench_table

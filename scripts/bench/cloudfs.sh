#!/usr/bin/env bash
# Seed 001 §6.3 through the mount: a file-access trace (scripts/bench/
# cloudfs-replay: long-tailed file sizes, Zipf popularity, sequential runs,
# 64 KiB reads and writes) replayed against `tristore mount s3://` on the
# `realistic` emulated link (12.5 MiB/s, 50 ms, 0.1 % loss, ±10 ms jitter)
# for chunk sizes 64 KiB .. 16 MiB with and without prefetching, and against
# s3fs and rclone mount (--vfs-cache-mode full) on the same trace, same link,
# same S3 server (tristore serve in the link's server namespace), in the
# same run. Every side gets a fresh server, loads the files first (through
# its own mount for tristore, whose format is chunks; as plain objects with
# rclone copy for the peers), then mounts again with an empty cache of
# CACHE bytes and replays the trace. Reported: average read and write
# latency as the application sees it, and for tristore the chunk cache hit
# ratio (demand reads served from the cache / all chunk reads).
#
# Usage: sudo scripts/bench/cloudfs.sh [ROUNDS] [REQUESTS]
#        (ONLY="tristore-1MiB s3fs" runs some sides only: a trial)
# Peers: s3fs (apt s3fs), rclone (apt rclone); scripts/deps.sh --bench.
set -euo pipefail
BENCH_NAME=cloudfs
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-1}
REQUESTS=${2:-400}
FILES=${FILES:-30}
CACHE=${CACHE:-32MiB}
WORK=""
cleanup() {
  [ -n "$WORK" ] || return 0
  for m in "$WORK"/mnt*; do mountpoint -q "$m" 2>/dev/null && umount -l "$m"; done
  rm -rf "$WORK"
}
bench_need_root "network namespaces, TUN, FUSE"
bench_need_cmd s3fs "apt-get install s3fs"
bench_need_cmd rclone "apt-get install rclone"
WORK=$(mktemp -d)
bench_start "$WORK"
(cd "$SRC" && go build -o "$WORK/replay" ./scripts/bench/cloudfs-replay) || bench_fail "cannot build cloudfs-replay"

AK=BENCHCLOUDFS00000001
SK=bench-cloudfs-secret-000001
cat >"$WORK/client.sh" <<'EOS'
#!/usr/bin/env bash
# Runs in the client namespace: SIDE, WORK, REQUESTS, FILES, CACHE, AK, SK set.
set -euo pipefail
EP=http://192.0.2.2:9000
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK
unset AWS_CA_BUNDLE # the endpoint is plain HTTP; rclone refuses a CA bundle it cannot apply
T=$WORK/tristore
M=$WORK/mnt-$SIDE
mkdir -p "$M"
"$T" s3 mb s3://trace --endpoint $EP >/dev/null
waitmount() {
  for i in $(seq 1 300); do mountpoint -q "$1" && return 0; sleep 0.1; done
  echo "no mount at $1" >&2; tail -5 "$WORK"/mount*.log >&2; return 1
}
PIDS=()
# Whatever fails, no mount process or mount outlives this script.
trap 'for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; sleep 1; mountpoint -q "$M" && umount -l "$M" || true' EXIT
stopmount() { # PID DIR
  kill -TERM "$1" 2>/dev/null || true
  for i in $(seq 1 1200); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  mountpoint -q "$2" && umount -l "$2" || true
  wait "$1" 2>/dev/null || true
}
REPLAY=("$WORK/replay" -dir "$M" -files "$FILES" -requests "$REQUESTS")
case $SIDE in
tristore-*)
  cs=${SIDE#tristore-}; pf=0
  case $cs in *-nopf) cs=${cs%-nopf}; pf=-1 ;; esac
  common=(--s3-endpoint $EP --s3-chunk-size "$cs" --s3-prefetch $pf --cache-size "$CACHE")
  "$T" mount s3://trace/fs "$M" "${common[@]}" --cache "$WORK/cache-load-$SIDE" >"$WORK/mount-load.log" 2>&1 &
  pid=$!; PIDS+=("$pid"); waitmount "$M"
  "${REPLAY[@]}" -setup
  stopmount $pid "$M"
  wait $pid 2>/dev/null || true
  "$T" mount s3://trace/fs "$M" "${common[@]}" --cache "$WORK/cache-$SIDE" --s3-stats-file "$WORK/stats.json" >"$WORK/mount.log" 2>&1 &
  pid=$!; PIDS+=("$pid"); waitmount "$M"
  "${REPLAY[@]}" >"$WORK/replay.json" || { grep -v "lease renewal" "$WORK/mount.log" | tail -20 >&2; exit 1; }
  stopmount $pid "$M"
  ;;
rclone|s3fs)
  mkdir -p "$WORK/local-$SIDE"
  "$WORK/replay" -dir "$WORK/local-$SIDE" -files "$FILES" -setup
  export RCLONE_CONFIG_T_TYPE=s3 RCLONE_CONFIG_T_PROVIDER=Other RCLONE_CONFIG_T_ENDPOINT=$EP \
    RCLONE_CONFIG_T_ACCESS_KEY_ID=$AK RCLONE_CONFIG_T_SECRET_ACCESS_KEY=$SK RCLONE_CONFIG_T_FORCE_PATH_STYLE=true
  rclone copy "$WORK/local-$SIDE" t:trace >"$WORK/copy.log" 2>&1 || { tail -5 "$WORK/copy.log" >&2; exit 1; }
  if [ "$SIDE" = rclone ]; then
    rclone mount t:trace "$M" --vfs-cache-mode full --vfs-cache-max-size "$CACHE" --cache-dir "$WORK/cache-$SIDE" \
      --allow-other >"$WORK/mount.log" 2>&1 &
  else
    echo "$AK:$SK" >"$WORK/s3fs.pass"; chmod 600 "$WORK/s3fs.pass"
    mkdir -p "$WORK/cache-$SIDE"
    s3fs trace "$M" -f -o url=$EP,use_path_request_style,passwd_file="$WORK/s3fs.pass",use_cache="$WORK/cache-$SIDE",ensure_diskfree=100,allow_other \
      >"$WORK/mount.log" 2>&1 &
  fi
  pid=$!; PIDS+=("$pid"); waitmount "$M"
  "${REPLAY[@]}" >"$WORK/replay.json" || { grep -v "lease renewal" "$WORK/mount.log" | tail -20 >&2; exit 1; }
  stopmount $pid "$M"
  ;;
esac
EOS
chmod +x "$WORK/client.sh"

SIDES=()
for cs in 64KiB 1MiB 4MiB 8MiB 16MiB; do SIDES+=("tristore-$cs" "tristore-$cs-nopf"); done
SIDES+=(rclone s3fs)
if [ -n "${ONLY:-}" ]; then read -r -a SIDES <<<"$ONLY"; fi # a trial of some sides (not for BENCHMARKS.md)

bench_machine "sudo scripts/bench/cloudfs.sh $ROUNDS $REQUESTS" -ours tristore-1MiB \
  -peer "s3fs=$(s3fs --version 2>&1 | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^V[0-9]/) { print $i; exit } }')" \
  -peer "rclone=$(rclone version 2>&1 | awk 'NR == 1 { print $2 }') (mount --vfs-cache-mode full)" \
  -note "Link: netem preset realistic. Server: tristore serve in the server namespace. Trace: $FILES files (log-uniform 16 KiB..8 MiB), $REQUESTS accesses of 64 KiB (25 % writes, 70 % sequential runs, Zipf 1.2 popularity), seed 1; cache $CACHE, empty at the start of the replay. tristore-SIZE: chunk size SIZE with the adaptive prefetch window; -nopf: prefetching off. Latency: each pread/pwrite as the application sees it (kernel page cache included, for every side)."

for r in $(seq 1 "$ROUNDS"); do
  for s in $(bench_order "$r" "${SIDES[@]}"); do
    echo "round $r: $s" >&2
    rm -f "$WORK/replay.json" "$WORK/stats.json"
    lb=$(bench_load)
    # Bounded: a side that hangs (a link that stopped carrying new
    # connections was seen once under heavy machine load) fails the run.
    SIDE=$s WORK=$WORK REQUESTS=$REQUESTS FILES=$FILES CACHE=$CACHE AK=$AK SK=$SK timeout -k 10 ${SIDE_TIMEOUT:-900} "$WORK/tristore" netem run --preset realistic \
      --server-cmd "$WORK/tristore serve --data $WORK/srv-$s-$r --s3-addr 192.0.2.2:9000 --nfs-addr off --iscsi-addr off --admin-addr off --access-key $AK --secret-key $SK" \
      --server-ready 192.0.2.2:9000 --counters-file "$WORK/counters.txt" -- "$WORK/client.sh" >"$WORK/run.log" 2>&1 ||
      bench_fail "$s failed in round $r: $(grep -v '^up \|^down \|^RTT ' "$WORK/run.log" | tail -25)"
    read -r rd wr < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["read_avg_ms"], d["write_avg_ms"])' "$WORK/replay.json")
    args=(-json "$WORK/replay.json" -v "average read latency, ms=$rd" -v "average write latency, ms=$wr")
    if [ -e "$WORK/stats.json" ]; then
      hit=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(100*d["Hits"]/max(1,d["Hits"]+d["Misses"]))' "$WORK/stats.json")
      args+=(-v "chunk cache hit ratio, %=$hit")
    fi
    bench_record "$r" "$s" "$lb" "${args[@]}"
    rm -rf "$WORK/srv-$s-$r" "$WORK"/cache-* "$WORK"/local-*
  done
done
bench_table

#!/usr/bin/env bash
# NFS v3 benchmark: tristore's server vs nfs-ganesha (VFS FSAL), same disk,
# same run, interleaved rounds, with two clients: tristore's userspace client
# (`tristore nfs bench`, client/nfs) and libnfs's nfs-cp.
#
#   sudo scripts/bench/nfs.sh [ROUNDS] [FILES]      # defaults: 3 rounds, 1000 files
#
# Sides: tristore (its default `sync` export: CREATE/REMOVE fsync the
# directory before the reply, as RFC 1813 asks), tristore-async (the same
# server, an `async` export of another bucket: data still synced at
# FILE_SYNC/COMMIT, names not; ganesha's VFS FSAL makes the same promise,
# so this is the same-durability comparison), ganesha, and ganesha-rsize1m
# (the same ganesha, our client asking for 1 MiB READs instead of its
# default 4 MiB: ganesha's CPU per byte does not fall with larger READs, so
# this shows it at the other size; its nfs-cp rows are ganesha's again,
# libnfs reads 1 MiB either way).
#   BEFORE_REV=<commit> adds the sides "tristore-before" and
#   "tristore-before-async": tristore built from that commit, a second
#   server with the same two exports on its own data directory, measured in
#   the same interleaved rounds (a before/after in one run).
#   BEFORE_CLIENT=1 (with BEFORE_REV): the before sides are also read and
#   written by that commit's `tristore nfs bench` (client and server before
#   against both after), and the side "ganesha-before-client" adds ganesha
#   measured with that client.
#
# CPU=1 (default) adds the row "server CPU ms per 64 MiB download (nfs-cp)":
# the CPU time of the side's server process (all threads, from
# /proc/PID/task/*/schedstat) during the timed download, which a shared
# machine's load moves much less than MB/s. Lower is better. The two
# tristore sides of one build share a process (measured one at a time).
# CPU=0 leaves it out.
#
# Before the rounds, one untimed nfs-cp upload + download per side (warm-up).
# Per round, each side (the order rotates by one per round):
#   tristore nfs bench: creates/s of FILES files of 4 KiB, each CREATE + WRITE
#                       (+ COMMIT) durable before the next; one 64 MiB file
#                       written with parallel UNSTABLE WRITEs + COMMIT, and
#                       read back with parallel READs (verified);
#   nfs-cp:             a 64 MiB random file uploaded to a new file and
#                       downloaded back (checked by sha256).
# Both servers run in one private network namespace (ganesha needs rpcbind,
# which listens everywhere; scripts/bench/nfs-ganesha.sh sets it up) and
# export directories under one work directory on the same file system
# (BENCH_DIR, default /var/tmp). tristore's export is the default (sync:
# namespace changes are on disk before the reply). Any failed measurement
# fails the run. Raw rounds: docs/bench/raw/nfs-<time>.jsonl; the table is
# printed at the end.
set -euo pipefail
BENCH_NAME=nfs
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-3}
FILES=${2:-1000}
SERVE_PID=""
BEFORE_PID=""
WORK=""
NS="tsnfsbench-$$"
cleanup() {
  for p in $SERVE_PID $BEFORE_PID; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ -n "$WORK" ]; then
    scripts/bench/nfs-ganesha.sh stop "$NS" "$WORK/ganesha" || true
    rm -rf "$WORK"
  fi
}
bench_need_root "network namespace, ganesha"
bench_need_cmd ganesha.nfsd "apt-get install nfs-ganesha nfs-ganesha-vfs"
bench_need_cmd rpcbind "apt-get install rpcbind"
bench_need_cmd nfs-cp "apt-get install libnfs-utils"
for c in ip unshare sha256sum; do bench_need_cmd "$c" "apt-get install iproute2 util-linux coreutils"; done

WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-nfs-bench.XXXXXX")
bench_start "$WORK"
BIN="$WORK/tristore"
BEFORE_REV=${BEFORE_REV:-}
BEFORE_COMMIT=""
SIDES=(tristore tristore-async ganesha ganesha-rsize1m)
if [ -n "$BEFORE_REV" ]; then
  BEFORE_COMMIT=$(git rev-parse --short=12 "$BEFORE_REV^{commit}") || bench_fail "BEFORE_REV=$BEFORE_REV is not a commit"
  mkdir -p "$WORK/before-src"
  git archive "$BEFORE_COMMIT" | tar -x -C "$WORK/before-src" || bench_fail "git archive $BEFORE_COMMIT failed"
  (cd "$WORK/before-src" && go build -o "$WORK/tristore-before" ./cmd/tristore) || bench_fail "go build of $BEFORE_COMMIT failed"
  SIDES=(tristore tristore-before tristore-async tristore-before-async ganesha ganesha-rsize1m)
  [ -n "${BEFORE_CLIENT:-}" ] && SIDES+=(ganesha-before-client)
fi
# client SIDE: the tristore binary whose `nfs bench` measures SIDE.
client() {
  case $1 in
  tristore-before | tristore-before-async | ganesha-before-client) [ -n "${BEFORE_CLIENT:-}" ] && { echo "$WORK/tristore-before"; return; } ;;
  esac
  echo "$BIN"
}
scripts/bench/nfs-ganesha.sh start "$NS" "$WORK/ganesha" >/dev/null || bench_fail "ganesha did not start"
# serve BINARY DATADIR PORT: one tristore server with the sync export "/"
# and the async export "/benchasync"; prints its pid.
serve() {
  mkdir -p "$2/bench" "$2/benchasync"
  ip netns exec "$NS" "$1" serve --data "$2" --nfs-addr "127.0.0.1:$3" --s3-addr off \
    --nfs-export "/=rw,sync,clients=127.0.0.0/8,no_root_squash" \
    --nfs-export "/benchasync=rw,async,clients=127.0.0.0/8,no_root_squash" \
    --admin-addr off --iscsi-addr off --ready-file "$2.ready.json" --log-level warn >"$2.log" 2>&1 &
  echo $!
}
waitready() {
  for _ in $(seq 1 300); do [ -s "$1.ready.json" ] && return 0; sleep 0.1; done
  bench_fail "tristore serve ($1) did not start: $(tail -3 "$1.log")"
}
SERVE_PID=$(serve "$BIN" "$WORK/data" 2050)
waitready "$WORK/data"
if [ -n "$BEFORE_REV" ]; then
  BEFORE_PID=$(serve "$WORK/tristore-before" "$WORK/data-before" 2052)
  waitready "$WORK/data-before"
fi

declare -A URL=(
  [tristore]="nfs://127.0.0.1:2050/bench"
  [tristore-async]="nfs://127.0.0.1:2050/benchasync"
  [tristore-before]="nfs://127.0.0.1:2052/bench"
  [tristore-before-async]="nfs://127.0.0.1:2052/benchasync"
  [ganesha]="nfs://127.0.0.1:2049$WORK/ganesha/export?mountport=20048"
  [ganesha-rsize1m]="nfs://127.0.0.1:2049$WORK/ganesha/export?mountport=20048&rsize=1048576"
  [ganesha-before-client]="nfs://127.0.0.1:2049$WORK/ganesha/export?mountport=20048"
)
cpurl() { # server file: the URL form libnfs's nfs-cp wants
  case $1 in
  tristore) echo "nfs://127.0.0.1/bench/$2?nfsport=2050&mountport=2050&version=3" ;;
  tristore-async) echo "nfs://127.0.0.1/benchasync/$2?nfsport=2050&mountport=2050&version=3" ;;
  tristore-before) echo "nfs://127.0.0.1/bench/$2?nfsport=2052&mountport=2052&version=3" ;;
  tristore-before-async) echo "nfs://127.0.0.1/benchasync/$2?nfsport=2052&mountport=2052&version=3" ;;
  ganesha | ganesha-rsize1m | ganesha-before-client) echo "nfs://127.0.0.1$WORK/ganesha/export/$2?nfsport=2049&mountport=20048&version=3" ;;
  esac
}
head -c $((64 << 20)) /dev/urandom >"$WORK/src.bin"
SUM=$(sha256sum <"$WORK/src.bin" | cut -d' ' -f1)

ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
PEERS=(-peer "ganesha=$(ver nfs-ganesha) (VFS FSAL)" -peer "ganesha-rsize1m=the same ganesha, client rsize=1048576")
[ -n "$BEFORE_REV" ] && PEERS+=(-peer "tristore-before=commit $BEFORE_COMMIT (same exports, own data directory)${BEFORE_CLIENT:+, read and written by the client of that commit}")
[ -n "$BEFORE_REV" ] && [ -n "${BEFORE_CLIENT:-}" ] && PEERS+=(-peer "ganesha-before-client=the same ganesha, read and written by the client of commit $BEFORE_COMMIT")
bench_machine "sudo ${BEFORE_REV:+BEFORE_REV=$BEFORE_COMMIT }${BEFORE_CLIENT:+BEFORE_CLIENT=1 }scripts/bench/nfs.sh $ROUNDS $FILES" \
  "${PEERS[@]}" \
  -note "All exports on one $(findmnt -no FSTYPE -T "$WORK") file system (tristore-async: the same server, an async export${BEFORE_REV:+; tristore-before(-async): a second server built from $BEFORE_COMMIT}), one network namespace, loopback TCP; MB/s = 10^6 bytes/s. Clients: tristore nfs bench (this commit${BEFORE_CLIENT:+; for tristore-before(-async) and ganesha-before-client that of $BEFORE_COMMIT}; $FILES files of 4 KiB, 64 MiB file) and nfs-cp (libnfs-utils $(ver libnfs-utils), 64 MiB file)."

# Warm-up, untimed: one nfs-cp upload and download per side before the
# rounds. The first download of a run writes its 64 MiB into page-cache
# pages this machine has not touched yet (on this VM that cost 2-4x: the
# first side of round 1, always tristore, downloaded at 184-227 MB/s in
# three runs where the others' rounds were 400-1,100).
for s in "${SIDES[@]}"; do
  ip netns exec "$NS" nfs-cp "$WORK/src.bin" "$(cpurl "$s" "warm-$s.bin")" >/dev/null || bench_fail "nfs-cp warm-up upload to $s failed"
  rm -f "$WORK/dl.bin"
  ip netns exec "$NS" nfs-cp "$(cpurl "$s" "warm-$s.bin")" "$WORK/dl.bin" >/dev/null || bench_fail "nfs-cp warm-up download from $s failed"
done

now() { date +%s.%N; }
# srvpid SIDE: the server process of SIDE; cpuns PID: its CPU time so far (ns).
srvpid() {
  case $1 in
  tristore | tristore-async) echo "$SERVE_PID" ;;
  tristore-before | tristore-before-async) echo "$BEFORE_PID" ;;
  *) cat "$WORK/ganesha/ganesha.pid" ;;
  esac
}
cpuns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }
CPU=${CPU:-1}
mbps() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", 67.108864 / (b - a) }'; }
for r in $(seq 1 "$ROUNDS"); do
  for s in $(bench_order "$r" "${SIDES[@]}"); do
    echo "round $r: $s" >&2
    lb=$(bench_load)
    ip netns exec "$NS" "$(client "$s")" nfs bench --json --files "$FILES" --file-size 4096 --seq-size $((64 << 20)) "${URL[$s]}" >"$WORK/out.json" ||
      bench_fail "tristore nfs bench against $s failed in round $r"
    bench_record "$r" "$s" "$lb" -json "$WORK/out.json" \
      -f "creates/s, 4 KiB files, durable (tristore client)=creates_per_sec" \
      -f "64 MiB sequential write, MB/s (tristore client)=write_mb_per_sec" \
      -f "64 MiB sequential read, MB/s (tristore client)=read_mb_per_sec"

    lb=$(bench_load)
    t0=$(now)
    ip netns exec "$NS" nfs-cp "$WORK/src.bin" "$(cpurl "$s" "$s-r$r.bin")" >/dev/null || bench_fail "nfs-cp upload to $s failed in round $r"
    t1=$(now)
    rm -f "$WORK/dl.bin"
    pid=$(srvpid "$s")
    c2=$(cpuns "$pid")
    t2=$(now)
    ip netns exec "$NS" nfs-cp "$(cpurl "$s" "$s-r$r.bin")" "$WORK/dl.bin" >/dev/null || bench_fail "nfs-cp download from $s failed in round $r"
    t3=$(now)
    c3=$(cpuns "$pid")
    CPUV=()
    [ "$CPU" = 1 ] && CPUV=(-v "server CPU ms per 64 MiB download (nfs-cp)=$(awk -v a="$c2" -v b="$c3" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')")
    [ "$(sha256sum <"$WORK/dl.bin" | cut -d' ' -f1)" = "$SUM" ] || bench_fail "$s round $r: downloaded file differs"
    bench_record "$r" "$s" "$lb" -v "64 MiB upload, MB/s (nfs-cp)=$(mbps "$t0" "$t1")" \
      -v "64 MiB download, MB/s (nfs-cp)=$(mbps "$t2" "$t3")" "${CPUV[@]}"
  done
done
bench_table

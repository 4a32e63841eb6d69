#!/usr/bin/env bash
# Seed 001 §6.3 through the mount: a file-access trace (scripts/bench/
# cloudfs-replay: long-tailed file sizes, Zipf popularity, sequential runs,
# 64 KiB reads and writes) replayed against `tristore mount s3://` on the
# `realistic` emulated link (12.5 MiB/s, 50 ms, 0.1 % loss, ±10 ms jitter)
# for chunk sizes 64 KiB .. 16 MiB with and without prefetching, and against
# s3fs and rclone mount (--vfs-cache-mode full) on the same trace, same link,
# same S3 server (tristore serve in the link's server namespace), in the
# same run. Reported: average read and write latency as the application
# sees it, and for tristore the chunk cache hit ratio (demand reads served
# from the cache / all chunk reads).
#
# Each side, in each round, has two phases, each its own emulated link and
# its own time bound, with the same server data directory:
#   load    (preset lan, LOAD_TIMEOUT s): the files are written, through
#           tristore's own mount for tristore (its format is chunks of the
#           side's size), as plain objects with rclone copy for the peers;
#           not measured, so it need not crawl over the slow link.
#   replay  (preset realistic, REPLAY_TIMEOUT s): a fresh mount with an
#           empty cache of CACHE bytes replays the trace, then unmounts
#           (which uploads what is still dirty).
# Progress is printed every 15 s. On any exit (failure, timeout, Ctrl-C)
# the running phase is stopped by its PID, any process still running from
# this run's work directory is killed by PID, its mounts are unmounted and
# the work directory removed; a failed run keeps no raw file.
#
# Usage: sudo scripts/bench/cloudfs.sh [ROUNDS] [REQUESTS]   (default 1 150)
#   SIDES="tristore-1MiB tristore-4MiB-nopf s3fs rclone"  the sides (default: all 12)
#   FILES=20 MAX_SIZE=4194304 CACHE=16MiB                 the data set (~14 MiB) and cache
#   LOAD_TIMEOUT=180 REPLAY_TIMEOUT=240                   bounds per phase, seconds
#   BUDGET=0                                              replay time budget, s (0: none)
#   side names: tristore-SIZE[-nopf][-ra0][-pN][-gcN][-before] (-nopf: no prefetching, -ra0: --s3-read-ahead 0,
#     -pN, -gcN: the replay's mount runs with GOMAXPROCS=N, GOGC=N,
#     -before: tristore built from BEFORE_REV, for its load and its replay; the server is always HEAD's)
#   BEFORE_REV=<commit>                                   with SIDES naming tristore-SIZE-before sides
#   PROFILE_DIR=DIR                                       tristore replays run with --s3-pprof; goroutine dumps
#                                                         every 10 s, a CPU profile of the first PROFILE_CPU_SECONDS (10)
#                                                         of the replay and the block profile at the end go to DIR;
#                                                         every side's replay (peers too) also leaves its per-access
#                                                         trace.txt and a kernel trace, ftrace.txt (FUSE requests and the
#                                                         replay's pread/pwrite; scripts/bench/cloudfs-ftrace.py splits it)
#   PROFILE_PPROF=0                                       with PROFILE_DIR: the kernel traces only (the same for every side)
# The default scale is what a shared 2-core machine runs in about 12
# minutes for all 12 sides (one round): the 16 MiB sides replay 150
# accesses in ~100 s, the 64 KiB side and the peers in ~10 s.
# Peers: s3fs (apt s3fs), rclone (apt rclone): scripts/deps.sh --bench.
set -euo pipefail
BENCH_NAME=cloudfs
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-1}
REQUESTS=${2:-150}
FILES=${FILES:-20}
MAX_SIZE=${MAX_SIZE:-4194304}
CACHE=${CACHE:-16MiB}
LOAD_TIMEOUT=${LOAD_TIMEOUT:-180}
REPLAY_TIMEOUT=${REPLAY_TIMEOUT:-240}
# BUDGET: a replay stops after this many seconds (0: never) and reports
# the accesses it did ("accesses replayed"), so one slow side cannot
# fail the whole run; a side cut short replayed only a prefix of the trace.
BUDGET=${BUDGET:-0}
BEFORE_REV=${BEFORE_REV:-}
PROFILE_DIR=${PROFILE_DIR:-}
PROFILE_CPU_SECONDS=${PROFILE_CPU_SECONDS:-10}
PROFILE_PPROF=${PROFILE_PPROF:-1}
WORK=""
PHASE_PID=""
# stop_phase: the running phase (timeout -> netem run -> client, server)
# gets SIGTERM, which netem run passes on to its process groups; SIGKILL
# after 30 s.
stop_phase() {
  [ -n "$PHASE_PID" ] || return 0
  kill -TERM "$PHASE_PID" 2>/dev/null || true
  for _ in $(seq 1 300); do kill -0 "$PHASE_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$PHASE_PID" 2>/dev/null || true
  wait "$PHASE_PID" 2>/dev/null || true
  PHASE_PID=""
}
# kill_work_procs: every process whose command line names this run's work
# directory (the mounts, servers, replays and netem runs it started; the
# directory is a fresh mktemp name, so nothing else matches).
kill_work_procs() {
  local p cmd left=""
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    cmd=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) || continue
    case $cmd in *"$WORK/"*) left="$left $p" ;; esac
  done
  [ -n "$left" ] || return 0
  echo "cloudfs: killing leftover processes:$left" >&2
  kill -KILL $left 2>/dev/null || true
}
cleanup() {
  [ -n "$WORK" ] || return 0
  stop_phase
  kill_work_procs
  local m
  for m in "$WORK"/mnt-*; do
    [ -e "$m" ] || continue
    mountpoint -q "$m" 2>/dev/null && umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
bench_need_root "network namespaces, TUN, FUSE"
bench_need_cmd s3fs "apt-get install s3fs"
bench_need_cmd rclone "apt-get install rclone"
bench_need_cmd fusermount3 "apt-get install fuse3"
WORK=$(mktemp -d /tmp/cloudfs-bench.XXXXXX)
trap 'exit 130' INT
trap 'exit 143' TERM
bench_start "$WORK"
(cd "$SRC" && go build -o "$WORK/replay" ./scripts/bench/cloudfs-replay) || bench_fail "cannot build cloudfs-replay"
BEFORE_COMMIT=""
if [ -n "$BEFORE_REV" ]; then
  BEFORE_COMMIT=$(git -C "$BENCH_ROOT" rev-parse --short=12 "$BEFORE_REV^{commit}") || bench_fail "BEFORE_REV=$BEFORE_REV is not a commit"
  mkdir -p "$WORK/src-before"
  git -C "$BENCH_ROOT" archive "$BEFORE_COMMIT" | tar -x -C "$WORK/src-before" || bench_fail "git archive $BEFORE_COMMIT failed"
  (cd "$WORK/src-before" && go build -o "$WORK/tristore-before" ./cmd/tristore) || bench_fail "go build of $BEFORE_COMMIT failed"
fi
[ -z "$PROFILE_DIR" ] || { mkdir -p "$PROFILE_DIR"; PROFILE_DIR=$(cd "$PROFILE_DIR" && pwd); }

AK=BENCHCLOUDFS00000001
SK=bench-cloudfs-secret-000001
cat >"$WORK/client.sh" <<'EOS'
#!/usr/bin/env bash
# Runs in the client namespace: PHASE (load|replay), SIDE, WORK, REQUESTS,
# FILES, MAX_SIZE, CACHE, BUDGET, AK, SK set.
set -euo pipefail
EP=http://192.0.2.2:9000
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK
unset AWS_CA_BUNDLE # the endpoint is plain HTTP; rclone refuses a CA bundle it cannot apply
T=$WORK/tristore
M=$WORK/mnt-$SIDE
mkdir -p "$M"
say() { echo "$(date -u +%T) $PHASE $SIDE: $*" >&2; }
waitmount() {
  for _ in $(seq 1 300); do mountpoint -q "$1" && return 0; sleep 0.1; done
  echo "no mount at $1" >&2; tail -5 "$WORK"/mount*.log >&2; return 1
}
PIDS=()
# Whatever fails, no mount process or mount outlives this script.
trap '[ -d "${TR:-/nonexistent}" ] && { echo 0 >"$TR/events/enable"; rmdir "$TR"; }; for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; sleep 1; for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; mountpoint -q "$M" && umount -l "$M" || true' EXIT
stopmount() { # PID DIR: unmount (dirty data is uploaded first), at most 120 s
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 1 1200); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$1" 2>/dev/null && { say "mount $1 did not stop in 120 s"; return 1; }
  mountpoint -q "$2" && umount -l "$2" || true
  wait "$1" 2>/dev/null || true
}
if [[ $SIDE == *-before ]]; then T=$WORK/tristore-before; fi
# With PROFILE_DIR, the replay of every side runs under a kernel trace
# (a tracefs instance of its own): the replay's pread64/pwrite64 calls
# and every FUSE request sent and answered, so a write's time splits
# into the kernel before its WRITE is sent (page locks held by read-ahead
# READs, i_rwsem), the file system's answer, and after
# (scripts/bench/cloudfs-ftrace.py reads it).
TR=/sys/kernel/tracing/instances/cloudfs-bench-$$
ftrace_start() {
  [ -n "$PROFILE_DIR" ] && [ -d /sys/kernel/tracing/events/fuse ] || return 0
  mkdir "$TR" || return 0
  echo 65536 >"$TR/buffer_size_kb"
  echo mono >"$TR/trace_clock"
  echo 1 >"$TR/events/fuse/enable"
  local e
  for e in sys_enter_pwrite64 sys_exit_pwrite64 sys_enter_pread64 sys_exit_pread64; do
    echo 'comm == "replay"' >"$TR/events/syscalls/$e/filter"
    echo 1 >"$TR/events/syscalls/$e/enable"
  done
  # Which thread answers a request and when it got a CPU (the daemon's
  # dispatch: waiting for a reader thread, for a CPU, then its own work).
  echo 'comm == "tristore" || comm == "s3fs" || comm == "rclone" || comm == "replay"' >"$TR/events/sched/sched_wakeup/filter"
  echo 'next_comm == "tristore" || next_comm == "s3fs" || next_comm == "rclone" || next_comm == "replay" || prev_comm == "replay"' >"$TR/events/sched/sched_switch/filter"
  echo 1 >"$TR/events/sched/sched_wakeup/enable"
  echo 1 >"$TR/events/sched/sched_switch/enable"
  echo 1 >"$TR/tracing_on"
}
ftrace_stop() { # DEST
  [ -d "$TR" ] || return 0
  echo 0 >"$TR/tracing_on"
  cat "$TR/trace" >"$1" || true
  echo 0 >"$TR/events/enable" || true
  rmdir "$TR" || true
}
REPLAY=("$WORK/replay" -dir "$M" -files "$FILES" -max-size "$MAX_SIZE" -requests "$REQUESTS" -max-seconds "$BUDGET")
export RCLONE_CONFIG_T_TYPE=s3 RCLONE_CONFIG_T_PROVIDER=Other RCLONE_CONFIG_T_ENDPOINT=$EP \
  RCLONE_CONFIG_T_ACCESS_KEY_ID=$AK RCLONE_CONFIG_T_SECRET_ACCESS_KEY=$SK RCLONE_CONFIG_T_FORCE_PATH_STYLE=true
case $SIDE in
tristore-*)
  cs=${SIDE#tristore-}; pf=0; ra=()
  case $cs in *-before) cs=${cs%-before} ;; esac
  gmp=(env)
  case $cs in *-gc[0-9]*) gmp+=("GOGC=${cs##*-gc}"); cs=${cs%-gc*} ;; esac
  case $cs in *-p[0-9]*) gmp+=("GOMAXPROCS=${cs##*-p}"); cs=${cs%-p*} ;; esac
  case $cs in *-ra0) cs=${cs%-ra0}; ra=(--s3-read-ahead 0) ;; esac
  case $cs in *-nopf) cs=${cs%-nopf}; pf=-1 ;; esac
  common=(--s3-endpoint $EP --s3-chunk-size "$cs" --s3-prefetch $pf --cache-size "$CACHE" "${ra[@]}")
  if [ "$PHASE" = load ]; then
    "$T" s3 mb s3://trace --endpoint $EP >/dev/null
    "$T" mount s3://trace/fs "$M" "${common[@]}" --cache "$WORK/cache-load-$SIDE" >"$WORK/mount-load.log" 2>&1 &
    pid=$!; PIDS+=("$pid"); waitmount "$M"
    say "writing the files"
    "${REPLAY[@]}" -setup
    say "unmounting (uploads the chunks)"
    stopmount $pid "$M"
  else
    prof=()
    [ -z "$PROFILE_DIR" ] || [ "$PROFILE_PPROF" = 0 ] || prof=(--s3-pprof 127.0.0.1:6061)
    "${gmp[@]}" "$T" mount s3://trace/fs "$M" "${common[@]}" "${prof[@]}" --cache "$WORK/cache-$SIDE" --s3-stats-file "$WORK/stats.json" >"$WORK/mount.log" 2>&1 &
    pid=$!; PIDS+=("$pid"); waitmount "$M"
    ppid_=""
    [ -z "$PROFILE_DIR" ] || { P=$PROFILE_DIR/$SIDE-r$ROUND; mkdir -p "$P"; }
    if [ -n "${prof[*]}" ]; then
      cp "$T" "$P/tristore"
      (for k in $(seq 1 60); do sleep 10; curl -s -m 5 -o "$P/goroutine-$k.txt" "http://127.0.0.1:6061/debug/pprof/goroutine?debug=1" || break; done) &
      ppid_=$!; PIDS+=("$ppid_")
      # A CPU profile of the first PROFILE_CPU_SECONDS of the replay.
      curl -s -m $((PROFILE_CPU_SECONDS + 10)) -o "$P/cpu.pb.gz" "http://127.0.0.1:6061/debug/pprof/profile?seconds=$PROFILE_CPU_SECONDS" &
      cpid_=$!; PIDS+=("$cpid_")
    fi
    say "replaying $REQUESTS accesses"
    ftrace_start
    "${REPLAY[@]}" -trace "$WORK/trace.txt" >"$WORK/replay.json" || { grep -v "lease renewal" "$WORK/mount.log" | tail -20 >&2; exit 1; }
    [ -z "$PROFILE_DIR" ] || ftrace_stop "$P/ftrace.txt"
    if [ -n "$ppid_" ]; then
      kill "$ppid_" 2>/dev/null || true
      wait "$cpid_" 2>/dev/null || true
      curl -s -m 10 -o "$P/block.pb.gz" http://127.0.0.1:6061/debug/pprof/block || true
      curl -s -m 10 -o "$P/mutex.pb.gz" http://127.0.0.1:6061/debug/pprof/mutex || true
    fi
    [ -z "$PROFILE_DIR" ] || cp "$WORK/trace.txt" "$P/trace.txt"
    say "unmounting (uploads what is dirty)"
    stopmount $pid "$M"
    if [ -n "$PROFILE_DIR" ] && [ -e "$WORK/stats.json" ]; then cp "$WORK/stats.json" "$P/stats.json"; fi
  fi
  ;;
rclone|s3fs)
  if [ "$PHASE" = load ]; then
    "$T" s3 mb s3://trace --endpoint $EP >/dev/null
    mkdir -p "$WORK/local-$SIDE"
    "$WORK/replay" -dir "$WORK/local-$SIDE" -files "$FILES" -max-size "$MAX_SIZE" -setup
    say "rclone copy of the files as plain objects"
    rclone copy "$WORK/local-$SIDE" t:trace >"$WORK/copy.log" 2>&1 || { tail -5 "$WORK/copy.log" >&2; exit 1; }
    rm -rf "$WORK/local-$SIDE"
  else
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
    say "replaying $REQUESTS accesses"
    trace=()
    if [ -n "$PROFILE_DIR" ]; then P=$PROFILE_DIR/$SIDE-r$ROUND; mkdir -p "$P"; trace=(-trace "$P/trace.txt"); fi
    ftrace_start
    "${REPLAY[@]}" "${trace[@]}" >"$WORK/replay.json" || { tail -20 "$WORK/mount.log" >&2; exit 1; }
    [ -z "$PROFILE_DIR" ] || ftrace_stop "$P/ftrace.txt"
    say "unmounting"
    stopmount $pid "$M"
  fi
  ;;
esac
say "done"
EOS
chmod +x "$WORK/client.sh"

# phase NAME PRESET TIMEOUT SIDE R: one phase of one side over its own
# emulated link, bounded by TIMEOUT seconds, with a progress line every
# 15 s (the client's last line: the replay prints its own progress).
phase() {
  local name=$1 preset=$2 tmo=$3 s=$4 r=$5 t0=$SECONDS rc=0
  : >"$WORK/run.log"
  PHASE=$name SIDE=$s ROUND=$r PROFILE_DIR=$PROFILE_DIR PROFILE_PPROF=$PROFILE_PPROF PROFILE_CPU_SECONDS=$PROFILE_CPU_SECONDS WORK=$WORK REQUESTS=$REQUESTS FILES=$FILES MAX_SIZE=$MAX_SIZE CACHE=$CACHE BUDGET=$BUDGET AK=$AK SK=$SK \
    timeout -k 15 "$tmo" "$WORK/tristore" netem run --preset "$preset" \
    --server-cmd "$WORK/tristore serve --data $WORK/srv-$s-$r --s3-addr 192.0.2.2:9000 --nfs-addr off --iscsi-addr off --admin-addr off --access-key $AK --secret-key $SK" \
    --server-ready 192.0.2.2:9000 --counters-file "$WORK/counters-$name.txt" -- "$WORK/client.sh" >"$WORK/run.log" 2>&1 &
  PHASE_PID=$!
  while kill -0 "$PHASE_PID" 2>/dev/null; do
    for _ in $(seq 1 150); do kill -0 "$PHASE_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$PHASE_PID" 2>/dev/null || break
    echo "  $(date -u +%T) $name $s: $((SECONDS - t0)) s of at most $tmo; $(grep -E '^(replay|setup):|^[0-9:]+ ' "$WORK/run.log" | tail -1); load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  done
  wait "$PHASE_PID" || rc=$?
  PHASE_PID=""
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && echo "cloudfs: $name of $s in round $r overran its $tmo s bound" >&2
    bench_fail "$name of $s failed in round $r (exit $rc): $(grep -v '^up \|^down \|^RTT ' "$WORK/run.log" | tail -25)"
  fi
  echo "  $name $s: $((SECONDS - t0)) s" >&2
}

ALL=()
for cs in 64KiB 1MiB 4MiB 8MiB 16MiB; do ALL+=("tristore-$cs" "tristore-$cs-nopf"); done
ALL+=(rclone s3fs)
read -r -a SIDES <<<"${SIDES:-${ALL[*]}}"
# ONLY= (the older name for a trial with some sides) still works.
if [ -n "${ONLY:-}" ]; then read -r -a SIDES <<<"$ONLY"; fi
for s in "${SIDES[@]}"; do
  [[ $s != *-before ]] || [ -n "$BEFORE_REV" ] || bench_fail "side $s needs BEFORE_REV=<commit>"
done
n=$((ROUNDS * ${#SIDES[@]}))
# The table's ratios are against tristore-1MiB (the default chunk size)
# when it ran, else against the first tristore side.
OURS=""
for s in "${SIDES[@]}"; do
  case $s in tristore-1MiB) OURS=$s; break ;; tristore-*) [ -n "$OURS" ] || OURS=$s ;; esac
done
[ -n "$OURS" ] || bench_fail "SIDES names no tristore side"
echo "cloudfs: $ROUNDS round(s) x ${#SIDES[@]} sides (${SIDES[*]}), $REQUESTS accesses, $FILES files <= $MAX_SIZE B, cache $CACHE;" \
  "at most $((n * (LOAD_TIMEOUT + REPLAY_TIMEOUT + 30) / 60)) min; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

budget_note=""
[ "$BUDGET" = 0 ] || budget_note=" Each replay stops after $BUDGET s (accesses replayed: how many it did)."
before_peer=()
[ -z "$BEFORE_COMMIT" ] || before_peer=(-peer "tristore-*-before=commit $BEFORE_COMMIT")
bench_machine "sudo ${BEFORE_COMMIT:+BEFORE_REV=$BEFORE_COMMIT }SIDES='${SIDES[*]}' FILES=$FILES MAX_SIZE=$MAX_SIZE CACHE=$CACHE BUDGET=$BUDGET scripts/bench/cloudfs.sh $ROUNDS $REQUESTS" -ours "$OURS" \
  -peer "s3fs=$(s3fs --version 2>&1 | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^V[0-9]/) { print $i; exit } }') (use_cache)" \
  -peer "rclone=$(rclone version 2>&1 | awk 'NR == 1 { print $2 }') (mount --vfs-cache-mode full)" "${before_peer[@]}" \
  -note "Link: netem preset realistic for the replay (the files are loaded first over a lan link, not measured). Server: tristore serve in the server namespace. Trace: $FILES files (log-uniform 16 KiB..$MAX_SIZE B), $REQUESTS accesses of 64 KiB (25 % writes, 70 % sequential runs, Zipf 1.2 popularity), seed 1; cache $CACHE, empty at the start of the replay. tristore-SIZE: chunk size SIZE with the adaptive prefetch window; -nopf: prefetching off; -ra0: kernel read-ahead off; -pN, -gcN: the mount with GOMAXPROCS=N, GOGC=N; -before: built from BEFORE_REV. Latency: each pread/pwrite call alone, as the application sees it (kernel page cache included), the same for every side: the replay opens every file before the first access and closes them after the last, timed apart ("closing all files"); s3fs uploads what was written at that close, tristore (--s3-flush-on-close) its dirty chunks, rclone after it (untimed), tristore uploads dirty chunks in the background during the replay (write-back of chunks older than 30 s, or early once dirty data passes half the cache), sharing the link with the reads.$budget_note"

T0=$SECONDS
i=0
for r in $(seq 1 "$ROUNDS"); do
  for s in $(bench_order "$r" "${SIDES[@]}"); do
    i=$((i + 1))
    echo "$(date -u +%T) round $r: $s ($i of $n, $(((SECONDS - T0) / 60)) min so far)" >&2
    rm -rf "$WORK/replay.json" "$WORK/stats.json" "$WORK"/cache-* "$WORK"/local-*
    phase load lan "$LOAD_TIMEOUT" "$s" "$r"
    lb=$(bench_load)
    phase replay realistic "$REPLAY_TIMEOUT" "$s" "$r"
    read -r rd wr secs acc cl < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["read_avg_ms"], d["write_avg_ms"], d["seconds"], d["reads"] + d["writes"], d["close_seconds"])' "$WORK/replay.json")
    args=(-json "$WORK/replay.json" -v "average read latency, ms=$rd" -v "average write latency, ms=$wr" -v "closing all files after the replay, s=$cl")
    [ "$BUDGET" = 0 ] || args+=(-v "accesses replayed=$acc")
    if [ -e "$WORK/stats.json" ]; then
      hit=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(100*d["Hits"]/max(1,d["Hits"]+d["Misses"]))' "$WORK/stats.json")
      args+=(-v "chunk cache hit ratio, %=$hit")
      # The store's own share of a write (WriteAt, without FUSE and the
      # kernel's waits); absent from builds before it was counted.
      wst=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["WriteNanos"]/1e6/d["Writes"] if d.get("Writes") else "")' "$WORK/stats.json")
      [ -z "$wst" ] || args+=(-v "store time per write, ms=$wst")
      # Of it: making a chunk dirty (per write that did), the journal record (per write).
      read -r wnew wjr < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n=d.get("NewChunks"); print(d["NewChunkNanos"]/1e6/n if n else "-", d["JournalNanos"]/1e6/d["Writes"] if n else "-")' "$WORK/stats.json")
      [ "$wnew" = - ] || args+=(-v "store time making a chunk dirty, ms per such write=$wnew" -v "store time journaling, ms per write=$wjr")
    fi
    echo "  $s: read $rd ms, write $wr ms ($acc accesses in $secs s; closing the files $cl s)" >&2
    bench_record "$r" "$s" "$lb" "${args[@]}"
    rm -rf "$WORK/srv-$s-$r" "$WORK"/cache-* "$WORK"/local-*
  done
done
echo "cloudfs: done in $(((SECONDS - T0) / 60)) min" >&2
bench_table

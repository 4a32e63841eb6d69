#!/usr/bin/env bash
# Profiles tristore's iSCSI target under one `tristore iscsi bench` load
# (issue 14: profile first). Not a comparison: no peer, no raw rounds; the
# profiles go to OUT (docs/bench/profiles/ for the ones the docs cite).
#
#   flock /tmp/bench.lock scripts/bench/iscsi-profile.sh BIN OUTPREFIX [PATTERN] [QD] [SECONDS]
#        # defaults: randwrite, QD 32, 10 s
#
# BIN is a tristore binary (build it from a commit with `git archive`).
# One 1GiB volume (BENCH_SIZE) in BENCH_DIR (default /var/tmp), filled with
# zeros as in iscsi-initiator.sh, served with `serve --pprof`. Three loads
# of SECONDS each, one after the other on the same server:
#   1. CPU profile (OUTPREFIX.cpu.pprof, top in OUTPREFIX.top.txt), with the
#      bench's own figures;
#   2. block and mutex profiles over the run (delta, rate 10 µs, fraction 10);
#   3. `strace -c -f` of the server (OUTPREFIX.strace.txt); strace slows the
#      server down, so its IOPS are not a figure, only the calls per I/O;
#   4. with PERF=1, `perf record -g -p` of the server, kernel included
#      (OUTPREFIX.perf.txt: perf report --children, top 60 symbols).
# The first load (a 2 s warm-up of PATTERN) starts right after the
# initiator's first login, while the LUN's open-time cache drop may still
# be running (blockdev/filelun/cache.go). READ_FIRST=N puts N seconds of
# 4 KiB random reads at QD 1 and 3 s of quiet before it, so the drop is
# over when PATTERN starts.
set -euo pipefail
BIN=$(realpath "$1")
OUT=$2
PATTERN=${3:-randwrite}
QD=${4:-32}
SECS=${5:-10}
SIZE=${BENCH_SIZE:-1GiB}
WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-iscsi-prof.XXXXXX")
PID=""
cleanup() {
  [ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
  rm -rf "$WORK"
}
trap cleanup EXIT
read -r PORT APORT < <(python3 -c '
import socket
ss=[socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1",0))
print(*[s.getsockname()[1] for s in ss])')
DATA=$WORK/data
"$BIN" volume create --data "$DATA" vols/bench "$SIZE" >/dev/null
F=$DATA/vols/bench
dd if=/dev/zero of="$F" bs=1M count=$(($(stat -c %s "$F") >> 20)) conv=notrunc,fsync status=none
"$BIN" serve --data "$DATA" --iscsi-addr "127.0.0.1:$PORT" --s3-addr off --nfs-addr off \
  --admin-addr "127.0.0.1:$APORT" --pprof --pprof-block-rate 10000 --pprof-mutex-fraction 10 \
  --ready-file "$WORK/ready.json" --log-level warn >"$WORK/serve.log" 2>&1 &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/ready.json" ] && break; sleep 0.1; done
[ -s "$WORK/ready.json" ] || { tail "$WORK/serve.log"; exit 1; }
URL="iscsi://127.0.0.1:$PORT/iqn.2026-11.io.tristore:vols:bench/0"
PP="http://127.0.0.1:$APORT/debug/pprof"
# bench DURATION: one load; prints "ops N iops N p50_us N p99_us N
# target_cpu_us_per_op N initiator_cpu_us_per_op N" (CPU: user+system time
# of the server process from /proc, of the initiator from its rusage; with
# a profiler attached the target's includes the profiler's cost).
bench() {
  local t0 t1
  t0=$(awk '{print $14+$15}' "/proc/$PID/stat")
  python3 - "$t0" "$PID" "$BIN" iscsi bench -q --json --pattern "$PATTERN" --bs 4KiB --queue-depth "$QD" --duration "$1" "$URL" <<'PY'
import json, os, resource, subprocess, sys
t0, pid, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
out = subprocess.run(cmd, check=True, capture_output=True).stdout
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open("/proc/%s/stat" % pid) as f:
    fl = f.read().rsplit(")", 1)[1].split()
t1 = int(fl[11]) + int(fl[12])
r = json.loads(out)[0]
tck = os.sysconf("SC_CLK_TCK")
print("ops %d iops %.0f p50_us %.0f p99_us %.0f target_cpu_us_per_op %.1f initiator_cpu_us_per_op %.1f" % (
    r["ops"], r["iops"], r["lat_p50_us"], r["lat_p99_us"],
    (t1 - t0) / tck / r["ops"] * 1e6, (ru.ru_utime + ru.ru_stime) / r["ops"] * 1e6))
PY
}
hdr() {
  echo "# iSCSI 4 KiB $PATTERN QD $QD, $1, $(date -u +%FT%TZ)"
  echo "# binary: $BIN ($("$BIN" --version 2>/dev/null | tr '\n' ' ' || true))"
  echo "# load: tristore iscsi bench --pattern $PATTERN --bs 4KiB --queue-depth $QD (same host, loopback); $SECS s${READ_FIRST:+; READ_FIRST=$READ_FIRST}"
}
if [ "${READ_FIRST:-0}" != 0 ]; then
  "$BIN" iscsi bench -q --json --pattern randread --bs 4KiB --queue-depth 1 --duration "${READ_FIRST}s" "$URL" >/dev/null
  sleep 3
fi
bench 2s >/dev/null # warm up
l0=$(cut -d' ' -f1 /proc/loadavg)
curl -sf -o "$OUT.cpu.pprof" "$PP/profile?seconds=$SECS" &
cp=$!
sleep 0.2
res=$(bench "$((SECS - 1))s")
wait "$cp"
l1=$(cut -d' ' -f1 /proc/loadavg)
{
  hdr "CPU profile"
  echo "# 1-minute load average before/after: $l0 / $l1 (2 cores, other work running)"
  echo "$res" | sed 's/^/# bench: /'
  echo "# go tool pprof -top -nodecount=45"
  go tool pprof -top -nodecount=45 "$BIN" "$OUT.cpu.pprof" 2>/dev/null
} >"$OUT.top.txt"
curl -sf -o "$OUT.block.pprof" "$PP/block?seconds=$SECS" &
b=$!
curl -sf -o "$OUT.mutex.pprof" "$PP/mutex?seconds=$SECS" &
m=$!
sleep 0.2
res=$(bench "$((SECS - 1))s")
wait "$b" "$m"
{
  hdr "block and mutex profiles (delta over the run)"
  echo "$res" | sed 's/^/# bench: /'
  echo "# go tool pprof -top -nodecount=25 (block)"
  go tool pprof -top -nodecount=25 "$BIN" "$OUT.block.pprof" 2>/dev/null
  echo "# go tool pprof -top -nodecount=25 (mutex)"
  go tool pprof -top -nodecount=25 "$BIN" "$OUT.mutex.pprof" 2>/dev/null
} >"$OUT.blockmutex.txt"
timeout $((SECS + 5)) strace -c -f -p "$PID" -o "$OUT.strace.raw" &
st=$!
sleep 0.5
res=$(bench "$((SECS - 1))s")
kill -INT "$st" 2>/dev/null || true
wait "$st" 2>/dev/null || true
{
  hdr "strace -c -f of the server (slowed down by strace)"
  echo "$res" | sed 's/^/# bench: /'
  cat "$OUT.strace.raw"
} >"$OUT.strace.txt"
rm -f "$OUT.strace.raw"
if [ "${PERF:-0}" = 1 ]; then
  perf record -q -g -o "$WORK/perf.data" -p "$PID" -- sleep "$((SECS - 1))" 2>/dev/null &
  pp=$!
  res=$(bench "$((SECS - 1))s")
  wait "$pp" || true
  {
    hdr "perf record -g -p of the server"
    echo "$res" | sed 's/^/# bench: /'
    echo "# perf report --children --sort sym (top 60)"
    perf report -i "$WORK/perf.data" --children --sort sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -60 || true # head closes the pipe early (pipefail)
  } >"$OUT.perf.txt"
fi
echo "profiles: $OUT.{cpu.pprof,top.txt,block.pprof,mutex.pprof,blockmutex.txt,strace.txt}"

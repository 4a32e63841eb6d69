#!/usr/bin/env bash
# Time from `tristore serve` start to its first HTTP answer on a big data
# tree, with a cold page cache: the tree scripts/bench/s3-scaling.sh left
# under $BENCH_DIR (run it with REUSE=1 and size 1000000 first; about a
# million objects). Two builds, the same tree, interleaved rounds.
#
#   sudo BEFORE_REV=<commit> [BENCH_REV=<commit>] scripts/bench/startup.sh [ROUNDS]
#        # default 3 rounds; sides: tristore (BENCH_REV, default HEAD) and
#        # tristore-before (BEFORE_REV)
#
# Per round, per side (order rotated each round): sync, drop the page
# cache (echo 3 > /proc/sys/vm/drop_caches: root, and it disturbs any
# other benchmark, so the script takes /tmp/bench.lock itself, without
# waiting, after building; LOCK=none if the caller holds it), start `tristore serve
# --data $BENCH_DIR/tristore-data` (S3 only, log level info) and poll the
# S3 port every 5 ms (python3 http.client); the figure is the time from
# the start of the process to the first HTTP response of any status.
# Then, for a side whose start-up leaves the temp-file walk to the
# background, the script waits (at most 300 s) for that walk's log line
# (store/posix CleanupDoneLog) and prints its duration, so no round
# starts while the previous one's walk still reads the disk; then SIGTERM.
# The servers only open the tree (no request but the probe GET /), as
# s3-scaling.sh does; tristore writes .tristore/incarnation there.
# Raw rounds: docs/bench/raw/startup-<time>.jsonl.
set -euo pipefail
BENCH_NAME=startup
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-3}
BENCH_DIR=${BENCH_DIR:-/var/tmp/tristore-s3scale}
BEFORE_REV=${BEFORE_REV:-}
DATA=$BENCH_DIR/tristore-data
PORT=19130
AK=benchaccesskey
SK=benchsecretkey123
PID=""
WORK=""
# stop_server: SIGTERM, wait (bounded: 30 s), SIGKILL. The server is not
# this shell's child (python3 started it), so wait(1) cannot be used.
stop_server() {
  [ -n "$PID" ] || return 0
  kill "$PID" 2>/dev/null || true
  for _ in $(seq 1 150); do kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$PID" 2>/dev/null || true
  PID=""
}
cleanup() {
  stop_server
  [ -z "$WORK" ] || rm -rf "$WORK"
}
bench_need_root "drops the page cache"
bench_need_cmd python3 "apt-get install python3"
[ -n "$BEFORE_REV" ] || bench_fail "BEFORE_REV=<commit> is required (the build to compare with)"
[ -e "$BENCH_DIR/filled-flat-1000000" ] && [ -d "$DATA" ] ||
  bench_fail "no filled 1,000,000-key tree under $BENCH_DIR: run REUSE=1 scripts/bench/s3-scaling.sh 1 2 1000000 first"
WORK=$(mktemp -d /tmp/startup-bench.XXXXXX)
bench_start "$WORK"
BEFORE_COMMIT=$(git -C "$BENCH_ROOT" rev-parse --short=12 "$BEFORE_REV^{commit}") || bench_fail "BEFORE_REV=$BEFORE_REV is not a commit"
mkdir -p "$WORK/src-before"
git -C "$BENCH_ROOT" archive "$BEFORE_COMMIT" | tar -x -C "$WORK/src-before" || bench_fail "git archive $BEFORE_COMMIT failed"
(cd "$WORK/src-before" && go build -o "$WORK/tristore-before" ./cmd/tristore) || bench_fail "go build of $BEFORE_COMMIT failed"
declare -A BIN=([tristore]="$BENCH_BIN/tristore" [tristore-before]="$WORK/tristore-before")

OBJS=$(find "$DATA" -xdev -type f | wc -l)
# The bench lock is taken here, after the builds (never hold it while
# building); LOCK=none when the caller already holds it.
LOCK=${LOCK:-/tmp/bench.lock}
if [ "$LOCK" != none ]; then
  exec 9>"$LOCK"
  flock -n 9 || bench_fail "$LOCK is held by another benchmark; try again later"
fi
bench_machine "sudo BEFORE_REV=$BEFORE_COMMIT ${BENCH_REV:+BENCH_REV=$COMMIT }scripts/bench/startup.sh $ROUNDS" \
  -peer "tristore-before=commit $BEFORE_COMMIT" \
  -note "Data: $DATA ($OBJS files, $(du -sh --apparent-size "$DATA" 2>/dev/null | cut -f1) apparent, $(findmnt -no FSTYPE -T "$DATA")), the buckets of scripts/bench/s3-scaling.sh (flat and nested, 1,000 to 1,000,000 keys). Per measurement: sync, drop_caches 3, start tristore serve (S3 only), poll it every 5 ms; ms from the process start to the first HTTP response. tristore-before removes leftover temp files with a walk of the whole tree before it listens; tristore leaves that walk to the background."

# first_answer SIDE LOG: starts SIDE's server, prints the ms to its first
# HTTP answer; leaves the PID in $PID.
first_answer() {
  local s=$1 log=$2
  python3 - "${BIN[$s]}" "$DATA" "$PORT" "$log" "$AK" "$SK" <<'PY'
import http.client, os, subprocess, sys, time
binp, data, port, log, ak, sk = sys.argv[1:]
env = dict(os.environ, TRISTORE_ACCESS_KEY=ak, TRISTORE_SECRET_KEY=sk)
out = open(log, "w")
t0 = time.monotonic()
p = subprocess.Popen([binp, "serve", "--data", data, "--s3-addr", "127.0.0.1:" + port, "--nfs-addr", "off",
                      "--iscsi-addr", "off", "--admin-addr", "off", "--log-level", "info"],
                     stdout=out, stderr=out, env=env, start_new_session=True)
# The PID goes out first (fd 3), so the shell can stop the server whatever happens.
os.write(3, (str(p.pid) + "\n").encode())
deadline = t0 + 300
while True:
    if p.poll() is not None:
        sys.exit("server exited: status %d" % p.returncode)
    if time.monotonic() > deadline:
        sys.exit("no HTTP answer in 300 s")
    try:
        c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=2)
        c.request("GET", "/")
        c.getresponse().read()
        c.close()
        break
    except (OSError, http.client.HTTPException):
        time.sleep(0.005)
print("%.1f" % ((time.monotonic() - t0) * 1000))
PY
}

for r in $(seq 1 "$ROUNDS"); do
  for s in $(bench_order "$r" tristore tristore-before); do
    log="$WORK/$s-$r.log"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    lb=$(bench_load)
    ms=$(first_answer "$s" "$log" 3>"$WORK/pid") || { PID=$(cat "$WORK/pid" 2>/dev/null || true); bench_fail "$s round $r: $(tail -3 "$log")"; }
    PID=$(cat "$WORK/pid")
    walk=""
    if [ "$s" = tristore ]; then
      for _ in $(seq 1 1500); do
        grep -q "leftover temp file removal done" "$log" && break
        sleep 0.2
      done
      walk=$(grep -o 'leftover temp file removal done.*' "$log" | head -1)
      [ -n "$walk" ] || bench_fail "$s round $r: no end of the background walk in 300 s: $(tail -3 "$log")"
    fi
    echo "round $r: $s first answer after $ms ms ${walk:+(background: $walk)}" >&2
    stop_server
    bench_record "$r" "$s" "$lb" -v "ms to first HTTP answer (cold cache)=$ms"
  done
done
stop_server
bench_table

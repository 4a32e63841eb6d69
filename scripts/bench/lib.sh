# Shared by every scripts/bench/*.sh (sourced, not run). One run of a
# benchmark script writes one raw file, docs/bench/raw/<bench>-<UTC time>.jsonl
# (override the directory with BENCH_RAW_DIR): first the machine record, then
# one record per measurement with the load average read just before and just
# after it. The table is printed from that file by internal/benchtable, the
# same code for every benchmark, so a figure in BENCHMARKS.md traces to a
# raw file and the command recorded in it. A run that fails removes its raw
# file (half a run is not a result) and exits non-zero.
#
# What is measured is a commit, not a working tree that several people edit
# at once: tristore, benchtable and any test binary are built from
# `git archive BENCH_REV` (default HEAD) unpacked under the work directory
# ($SRC), and the commit is recorded. BENCH_REV=worktree builds the working
# tree instead and records the commit as <HEAD>+dirty when it has changes.
#
# A script sets BENCH_NAME, defines cleanup(), then calls:
#   bench_need_root WHY; bench_need_cmd CMD HINT    fail clearly if missing
#   bench_start WORKDIR                             sets SRC, builds tristore + benchtable, names RAW
#   bench_machine "CMD LINE" [benchtable machine flags]
#   for r in rounds: for s in $(bench_order $r A B ...): lb=$(bench_load); ...; bench_record $r $s "$lb" ...
#   bench_table

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RAW=""
BT=""
BENCH_BIN=""
SRC=""
COMMIT=""

bench_fail() {
  echo "$BENCH_NAME: $*" >&2
  exit 1
}

bench_need_root() {
  [ "$(id -u)" -eq 0 ] || bench_fail "needs root ($1)"
}

# bench_need_cmd CMD HINT: a missing peer or tool fails the run, never skips it.
bench_need_cmd() {
  command -v "$1" >/dev/null || bench_fail "$1 not found: $2 (benchmark peers: scripts/deps.sh --bench)"
}

# bench_exit runs the script's cleanup and, when the run failed, removes
# the partial raw file.
bench_exit() {
  local rc=$?
  cleanup || true
  if [ "$rc" -ne 0 ]; then
    [ -n "$BENCH_ERR" ] && echo "$BENCH_NAME: command failed: $BENCH_ERR" >&2
    if [ -n "$RAW" ] && [ -e "$RAW" ]; then
      rm -f "$RAW"
      echo "$BENCH_NAME: partial raw file $RAW removed" >&2
    fi
    echo "$BENCH_NAME: FAILED (exit $rc)" >&2
  fi
  exit "$rc"
}
# set -e exits on a failing command without a word; say which one.
BENCH_ERR=""
trap 'BENCH_ERR="line $LINENO: $BASH_COMMAND"' ERR
set -E
trap bench_exit EXIT

# bench_start WORKDIR: unpacks the source into WORKDIR/src (SRC), builds
# tristore and benchtable into WORKDIR and names the raw file of this run.
bench_start() {
  local work=$1 dir=${BENCH_RAW_DIR:-$BENCH_ROOT/docs/bench/raw} rev=${BENCH_REV:-HEAD}
  if [ "$rev" = worktree ]; then
    SRC=$BENCH_ROOT
    COMMIT=$(git -C "$BENCH_ROOT" rev-parse --short=12 HEAD)
    git -C "$BENCH_ROOT" diff --quiet HEAD || COMMIT="$COMMIT+dirty"
  else
    COMMIT=$(git -C "$BENCH_ROOT" rev-parse --short=12 "$rev^{commit}") || bench_fail "BENCH_REV=$rev is not a commit"
    SRC="$work/src"
    mkdir -p "$SRC"
    git -C "$BENCH_ROOT" archive "$COMMIT" | tar -x -C "$SRC" || bench_fail "git archive $COMMIT failed"
  fi
  (cd "$SRC" && go build -o "$work/tristore" ./cmd/tristore && go build -o "$work/benchtable" ./internal/benchtable) ||
    bench_fail "go build of $COMMIT failed"
  BT="$work/benchtable"
  BENCH_BIN=$work
  mkdir -p "$dir"
  RAW_NEXT="$dir/$BENCH_NAME-$(date -u +%Y%m%dT%H%M%SZ).jsonl"
}

# bench_machine CMDLINE [flags]: writes the machine record (creates RAW).
bench_machine() {
  local cmdline=$1
  shift
  (cd "$BENCH_ROOT" && "$BT" machine -o "$RAW_NEXT" -bench "$BENCH_NAME" -command "$cmdline" -commit "$COMMIT" "$@") ||
    bench_fail "cannot write $RAW_NEXT"
  RAW=$RAW_NEXT
}

# bench_order ROUND SIDE...: the sides rotated by one per round (round 1:
# A B C, round 2: B C A, ...), so no side always runs first after the
# others warmed the page cache or the CPU.
bench_order() {
  local r=$1
  shift
  local n=$# i
  local sides=("$@")
  for ((i = 0; i < n; i++)); do
    printf '%s ' "${sides[$(((r - 1 + i) % n))]}"
  done
}

bench_load() { cat /proc/loadavg; }

# bench_record ROUND SIDE LOAD_BEFORE [benchtable record flags]
bench_record() {
  local r=$1 s=$2 lb=$3
  shift 3
  "$BT" record -o "$RAW" -round "$r" -side "$s" -load-before "$lb" "$@" || bench_fail "cannot record round $r of $s"
}

bench_table() {
  echo
  (cd "$BENCH_ROOT" && "$BT" table "${RAW#"$BENCH_ROOT"/}")
}

# bench_wait_http URL PID LOG: until the endpoint answers HTTP at all
# (bounded: 90 s); fails the run when the server PID exits first.
bench_wait_http() {
  for _ in $(seq 1 450); do
    if curl -s -o /dev/null -m 2 "$1"; then return 0; fi
    kill -0 "$2" 2>/dev/null || bench_fail "server exited; log $3: $(tail -5 "$3")"
    sleep 0.2
  done
  bench_fail "timeout waiting for $1"
}

# bench_s3_serve SERVER DATADIR PORT LOG: starts tristore (the binary
# bench_start built, S3 only) or versitygw (posix backend) in the
# background on 127.0.0.1:PORT serving DATADIR with the credentials $AK/$SK,
# output to LOG. $! is the server's PID afterwards (the caller adds it to
# its PIDS and waits with bench_wait_http).
bench_s3_serve() {
  local s=$1 data=$2 port=$3 log=$4
  case $s in
  tristore)
    TRISTORE_ACCESS_KEY=$AK TRISTORE_SECRET_KEY=$SK "$BENCH_BIN/tristore" serve --data "$data" \
      --s3-addr 127.0.0.1:$port --nfs-addr off --iscsi-addr off --admin-addr off --log-level warn >"$log" 2>&1 &
    ;;
  versitygw)
    versitygw --access $AK --secret $SK --port 127.0.0.1:$port --quiet posix "$data" >"$log" 2>&1 &
    ;;
  *) bench_fail "bench_s3_serve: unknown server $s" ;;
  esac
}

# bench_netem_s3 PRESET DATADIR LOG PRE [NETEM FLAGS...] -- CMD [ARGS...]:
# one `tristore netem run --preset PRESET` whose server namespace runs a
# fresh, empty tristore serve (S3 only, on 192.0.2.2:9000, store DATADIR,
# credentials $AK/$SK) after the shell text PRE (empty, or e.g. an iperf3
# daemon to start beside it, ending in "; "), and whose client namespace
# runs CMD; everything printed goes to LOG. Returns netem run's status
# (the caller fails the run with its own message). For s3client.sh and
# s3tail.sh.
bench_netem_s3() {
  local preset=$1 data=$2 log=$3 pre=$4
  shift 4
  rm -rf "$data"
  mkdir -p "$data"
  "$BENCH_BIN/tristore" netem run --preset "$preset" \
    --server-cmd "${pre}TRISTORE_ACCESS_KEY=$AK TRISTORE_SECRET_KEY=$SK exec $BENCH_BIN/tristore serve --data $data --s3-addr 192.0.2.2:9000 --nfs-addr off --iscsi-addr off --admin-addr off --log-level warn" \
    --server-ready 192.0.2.2:9000 "$@" >"$log" 2>&1
}

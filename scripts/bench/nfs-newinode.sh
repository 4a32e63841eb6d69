#!/usr/bin/env bash
# The cost of making new inodes durable on a sync NFS export, before/after a
# change (e.g. the fsync of a new empty file and the syncfs after SYMLINK
# that vfs adds on a file system without a journal, vfs/newinode.go):
#
#   sudo BEFORE_REV=<commit> scripts/bench/nfs-newinode.sh [ROUNDS] [FILES]   # defaults: 5 rounds, 200 files
#
# Two servers, tristore (BENCH_REV, default HEAD) and tristore-before
# (BEFORE_REV), each with the sync export "/" of its own data directory
# under one work directory (BENCH_DIR, default /var/tmp: the disk the
# other NFS benchmarks use), on 127.0.0.1. Per round and side (order
# rotating), scripts/bench/nfsnewinode: FILES empty CREATEs, FILES CREATE +
# WRITE FILE_SYNC of 4 KiB, FILES/4 SYMLINKs, one call at a time, ms per
# operation. A short microbenchmark (under a minute at the defaults).
set -euo pipefail
BENCH_NAME=nfs-newinode
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${1:-5}
FILES=${2:-200}
PIDS=()
WORK=""
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [ -n "$WORK" ] && rm -rf "$WORK"
}
[ -n "${BEFORE_REV:-}" ] || bench_fail "set BEFORE_REV to the commit to compare with"
bench_need_cmd python3 "apt-get install python3"
WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-newinode-bench.XXXXXX")
bench_start "$WORK"
BEFORE_COMMIT=$(git rev-parse --short=12 "$BEFORE_REV^{commit}") || bench_fail "BEFORE_REV=$BEFORE_REV is not a commit"
mkdir -p "$WORK/before-src"
git archive "$BEFORE_COMMIT" | tar -x -C "$WORK/before-src" || bench_fail "git archive $BEFORE_COMMIT failed"
(cd "$WORK/before-src" && go build -o "$WORK/tristore-before" ./cmd/tristore) || bench_fail "go build of $BEFORE_COMMIT failed"
(cd "$SRC" && go build -o "$WORK/nfsnewinode" ./scripts/bench/nfsnewinode) || bench_fail "go build of nfsnewinode failed"

declare -A ADDR
# serve SIDE BINARY: one server on 127.0.0.1 (port from its ready file).
serve() {
  local d=$WORK/side-$1
  mkdir -p "$d/data" "$d/cfg"
  XDG_CONFIG_HOME=$d/cfg TRISTORE_ACCESS_KEY=AKIANEWINODEBENCH000 TRISTORE_SECRET_KEY=newinode-bench-secret-key-000 \
    "$2" serve --data "$d/data" --nfs-addr 127.0.0.1:0 --s3-addr off --admin-addr off --iscsi-addr off \
    --nfs-export "/=rw,sync,clients=127.0.0.0/8,no_root_squash" --ready-file "$d/ready.json" --log-level warn >"$d/log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 300); do
    if [ -s "$d/ready.json" ]; then
      ADDR[$1]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nfs"])' "$d/ready.json")
      return 0
    fi
    sleep 0.1
  done
  bench_fail "$1 not ready: $(tail -5 "$d/log")"
}
serve tristore "$WORK/tristore"
serve tristore-before "$WORK/tristore-before"
bench_machine "sudo BEFORE_REV=$BEFORE_COMMIT scripts/bench/nfs-newinode.sh $ROUNDS $FILES" \
  -peer "tristore-before=commit $BEFORE_COMMIT" \
  -note "Both servers export directories on one $(findmnt -no FSTYPE -T "$WORK") file system ($(findmnt -no SOURCE -T "$WORK"), jbd2 journal: $(ls /proc/fs/jbd2 2>/dev/null | grep -q "^$(basename "$(findmnt -no SOURCE -T "$WORK")")-" && echo yes || echo none)), loopback TCP, one call at a time; ms per operation, lower is better."
for r in $(seq 1 "$ROUNDS"); do
  for s in $(bench_order "$r" tristore tristore-before); do
    echo "round $r: $s" >&2
    lb=$(bench_load)
    "$WORK/nfsnewinode" -addr "${ADDR[$s]}" -n "$FILES" >"$WORK/out.json" || bench_fail "nfsnewinode against $s failed in round $r"
    bench_record "$r" "$s" "$lb" -json "$WORK/out.json" \
      -f "empty CREATE, ms=create_empty_ms" \
      -f "CREATE + WRITE FILE_SYNC 4 KiB, ms=create_write_ms" \
      -f "SYMLINK, ms=symlink_ms"
  done
done
bench_table

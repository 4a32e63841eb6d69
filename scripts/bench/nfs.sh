#!/usr/bin/env bash
# NFS v3 benchmark (issue 4): tristore's userspace client against tristore's
# server and against nfs-ganesha (VFS FSAL), same disk, same run.
#
#   sudo scripts/bench/nfs.sh [ROUNDS] [FILES]      # defaults: 3 rounds, 1000 files
#
# Per round and server, `tristore nfs bench` measures
#   creates/s  FILES files of 4 KiB, each CREATE + WRITE + COMMIT (durable)
#   write MB/s one 64 MiB file, parallel UNSTABLE WRITEs + COMMIT
#   read MB/s  the same file read back with parallel READs (verified)
# Both servers run in one private network namespace (ganesha needs rpcbind,
# which listens everywhere) and export directories under one work directory
# on the same file system (BENCH_DIR, default /var/tmp). The servers are
# measured alternately, so background load hits both alike. Output: one JSON
# line per measurement in $OUT (default ./nfs-bench.jsonl) and a median
# summary on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
FILES=${2:-1000}
OUT=${OUT:-$PWD/nfs-bench.jsonl}
[ "$(id -u)" -eq 0 ] || { echo "nfs.sh: needs root (network namespace, ganesha)" >&2; exit 1; }
for c in ganesha.nfsd rpcbind ip unshare python3; do
  command -v "$c" >/dev/null || { echo "nfs.sh: $c missing (run scripts/deps.sh)" >&2; exit 1; }
done

WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-nfs-bench.XXXXXX")
NS="tsnfsbench-$$"
BIN="$WORK/tristore"
SERVE_PID=""
cleanup() {
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null || true
  scripts/bench/nfs-ganesha.sh stop "$NS" "$WORK/ganesha" || true
  rm -rf "$WORK"
}
trap cleanup EXIT

go build -o "$BIN" ./cmd/tristore
scripts/bench/nfs-ganesha.sh start "$NS" "$WORK/ganesha"
mkdir -p "$WORK/data/bench"
extra=()
"$BIN" serve --help 2>&1 | grep -q -- '--iscsi-addr' && extra+=(--iscsi-addr off)
ip netns exec "$NS" "$BIN" serve --data "$WORK/data" --nfs-addr 127.0.0.1:2050 --s3-addr off \
  --admin-addr off "${extra[@]}" --ready-file "$WORK/ready.json" --log-level warn &
SERVE_PID=$!
for i in $(seq 1 300); do [ -s "$WORK/ready.json" ] && break; sleep 0.1; done
[ -s "$WORK/ready.json" ] || { echo "tristore serve did not start" >&2; exit 1; }

declare -A URL=(
  [tristore]="nfs://127.0.0.1:2050/bench"
  [ganesha]="nfs://127.0.0.1:2049$WORK/ganesha/export?mountport=20048"
)
: >"$OUT"
echo "machine: $(nproc) cores, $(uname -r), $(df -h "$WORK" | awk 'NR==2{print $1}') ($(findmnt -no FSTYPE -T "$WORK"))"
for r in $(seq 1 "$ROUNDS"); do
  for s in tristore ganesha; do
    ip netns exec "$NS" "$BIN" nfs bench --json --files "$FILES" --file-size 4096 --seq-size $((64 << 20)) "${URL[$s]}" |
      python3 -c "import json,sys; d=json.load(sys.stdin); d['server_name']='$s'; d['round']=$r; print(json.dumps(d))" >>"$OUT"
    tail -1 "$OUT"
  done
done
python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = {}
for s in ("tristore", "ganesha"):
    rs = [r for r in rows if r["server_name"] == s]
    med[s] = {k: statistics.median(r[k] for r in rs) for k in ("creates_per_sec", "write_mb_per_sec", "read_mb_per_sec")}
print("\nmedian of %d rounds              tristore    ganesha   ratio" % len([r for r in rows if r["server_name"] == "tristore"]))
for k, label in (("creates_per_sec", "creates/s (4 KiB, durable)"), ("write_mb_per_sec", "seq write 64 MiB (MB/s)"), ("read_mb_per_sec", "seq read 64 MiB (MB/s)")):
    a, b = med["tristore"][k], med["ganesha"][k]
    print("%-30s %9.1f %10.1f %7.2fx" % (label, a, b, a / b if b else float("nan")))
EOF

#!/usr/bin/env bash
# NFS v3 server benchmark (issue 4, server side): one third-party client,
# libnfs's nfs-cp, against tristore's server and against nfs-ganesha (VFS
# FSAL), same disk, same run, measured alternately.
#
#   sudo scripts/bench/nfs-server.sh [ROUNDS]       # default 5 rounds
#
# Per round and server:
#   upload   nfs-cp of a 64 MiB random file to a new file on the server
#   download nfs-cp of that file back to local disk (verified by sha256)
# Both servers run in one private network namespace (ganesha needs rpcbind;
# scripts/bench/nfs-ganesha.sh sets it up) and export directories under one
# work directory (BENCH_DIR, default /var/tmp). Prints one line per
# measurement and the medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
[ "$(id -u)" -eq 0 ] || { echo "nfs-server.sh: needs root (network namespace, ganesha)" >&2; exit 1; }
for c in ganesha.nfsd rpcbind ip nfs-cp sha256sum python3; do
  command -v "$c" >/dev/null || { echo "nfs-server.sh: $c missing (run scripts/deps.sh)" >&2; exit 1; }
done
WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-nfs-server-bench.XXXXXX")
NS="tsnfssrv-$$"
BIN="$WORK/tristore"
SERVE_PID=""
cleanup() {
  if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
  scripts/bench/nfs-ganesha.sh stop "$NS" "$WORK/ganesha" || true
  rm -rf "$WORK"
}
trap cleanup EXIT

go build -o "$BIN" ./cmd/tristore
scripts/bench/nfs-ganesha.sh start "$NS" "$WORK/ganesha" >/dev/null
mkdir -p "$WORK/data/bench"
extra=()
"$BIN" serve --help 2>&1 | grep -q -- '--iscsi-addr' && extra+=(--iscsi-addr off)
ip netns exec "$NS" "$BIN" serve --data "$WORK/data" --nfs-addr 127.0.0.1:2050 --s3-addr off \
  --admin-addr off "${extra[@]}" --ready-file "$WORK/ready.json" --log-level warn &
SERVE_PID=$!
for i in $(seq 1 300); do [ -s "$WORK/ready.json" ] && break; sleep 0.1; done
[ -s "$WORK/ready.json" ] || { echo "tristore serve did not start" >&2; exit 1; }

head -c $((64 << 20)) /dev/urandom >"$WORK/src.bin"
SUM=$(sha256sum <"$WORK/src.bin" | cut -d' ' -f1)
url() { # server file
  case $1 in
  tristore) echo "nfs://127.0.0.1/bench/$2?nfsport=2050&mountport=2050&version=3" ;;
  ganesha) echo "nfs://127.0.0.1$WORK/ganesha/export/$2?nfsport=2049&mountport=20048&version=3" ;;
  esac
}
now() { date +%s.%N; }
mbps() { python3 -c "print(f'{64/($2-$1):.1f}')" ; }
RES="$WORK/results"
: >"$RES"
echo "machine: $(nproc) cores, $(uname -r), $(findmnt -no FSTYPE -T "$WORK") at $(findmnt -no TARGET -T "$WORK"); file 64 MiB; nfs-cp from $(dpkg-query -W -f='libnfs-utils ${Version}' libnfs-utils 2>/dev/null)"
for r in $(seq 1 "$ROUNDS"); do
  for s in tristore ganesha; do
    t0=$(now); ip netns exec "$NS" nfs-cp "$WORK/src.bin" "$(url $s r$r.bin)" >/dev/null; t1=$(now)
    rm -f "$WORK/dl.bin"
    t2=$(now); ip netns exec "$NS" nfs-cp "$(url $s r$r.bin)" "$WORK/dl.bin" >/dev/null; t3=$(now)
    [ "$(sha256sum <"$WORK/dl.bin" | cut -d' ' -f1)" = "$SUM" ] || { echo "$s round $r: download differs" >&2; exit 1; }
    up=$(mbps "$t0" "$t1"); down=$(mbps "$t2" "$t3")
    echo "round $r $s upload_MBps $up download_MBps $down"
    echo "$s $up $down" >>"$RES"
  done
done
python3 - "$RES" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for s in ("tristore", "ganesha"):
    up = [float(r[1]) for r in rows if r[0] == s]
    dn = [float(r[2]) for r in rows if r[0] == s]
    med[s] = (statistics.median(up), statistics.median(dn))
    print(f"median {s:8s} upload {med[s][0]:7.1f} MB/s  download {med[s][1]:7.1f} MB/s")
t, g = med["tristore"], med["ganesha"]
print(f"ratio tristore/ganesha: upload {t[0]/g[0]:.2f}x  download {t[1]/g[1]:.2f}x")
PY

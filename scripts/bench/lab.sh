#!/usr/bin/env bash
# The reproduction table's data (docs/reproduction.md): one `tristore lab`
# run, saved under docs/bench/lab/lab-<UTC time>/ (override the parent with
# LAB_DIR): lab.json (what ran, link kind, partial or not), runs/*/ (each
# run's run.json + ops.jsonl.gz, as `tristore bench` saves them),
# summary.csv, and lab.txt (the command, the commit, the load average
# before and after). The HTML report is not kept (redraw it with
# `tristore report docs/bench/lab/lab-<time>/runs`).
#
#   sudo scripts/bench/lab.sh [SCALE] [PRESETS]     # defaults: 0.05 ideal,lan,realistic
#
# Root gives netns links (loss included) and ext4 on the LUN; without root
# the lab falls back to the proxy link and skips ext4 (it says so).
# tristore is built from `git archive HEAD` (the commit is recorded), as
# the other scripts/bench scripts do.
set -euo pipefail
SCALE=${1:-0.05}
PRESETS=${2:-ideal,lan,realistic}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
WORK=$(mktemp -d /var/tmp/lab-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
COMMIT=$(git rev-parse --short=12 HEAD)
git archive HEAD | tar -x -C "$WORK"
(cd "$WORK" && go build -o "$WORK/tristore" ./cmd/tristore)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${LAB_DIR:-docs/bench/lab}/lab-$STAMP
mkdir -p "$(dirname "$OUT")"
LOAD_BEFORE=$(cat /proc/loadavg)
rc=0
"$WORK/tristore" lab --scale "$SCALE" --presets "$PRESETS" --out "$WORK/out" --progress=false || rc=$?
LOAD_AFTER=$(cat /proc/loadavg)
mkdir -p "$OUT"
cp -r "$WORK/out/lab.json" "$WORK/out/runs" "$OUT/"
[ -e "$WORK/out/summary.csv" ] && cp "$WORK/out/summary.csv" "$OUT/"
cat >"$OUT/lab.txt" <<TXT
command: sudo scripts/bench/lab.sh $SCALE $PRESETS
tristore lab --scale $SCALE --presets $PRESETS (exit $rc)
commit: $COMMIT
nproc: $(nproc)
load before: $LOAD_BEFORE
load after: $LOAD_AFTER
TXT
echo "saved $OUT (exit $rc)"
echo "table: go run ./internal/reprotable table $OUT"
exit "$rc"

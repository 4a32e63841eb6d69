#!/usr/bin/env bash
# Runs every fuzz target of the repository (or of the given packages) for a
# fixed time each, one after the other (go test -fuzz takes one target per
# run). `go test` alone only replays the seed corpora; this explores.
#
#   scripts/fuzz.sh                      # every target, 30s each
#   scripts/fuzz.sh 2m ./proto/...       # the targets under proto/, 2 minutes each
#   FUZZ_MATCH=CDB scripts/fuzz.sh 5m    # only targets whose name contains CDB
#   FUZZ_LIST=1 scripts/fuzz.sh          # list the targets, run nothing
#
# Give each target at least ~10s: go counts the time to replay the corpus.
#
# A failure does not stop the run: go writes the failing input to
# PKG/testdata/fuzz/FuzzX/ (commit it: it becomes a seed that `go test`
# replays), and the script exits 1 at the end with the list of failures.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${1:-30s}
[ $# -gt 0 ] && shift
dirs=("$@")
[ ${#dirs[@]} -eq 0 ] && dirs=(.)

for d in "${dirs[@]}"; do
  [ -d "${d%/...}" ] || { echo "fuzz.sh: no directory ${d%/...}" >&2; exit 2; }
done
# target list: "DIR NAME" for every func FuzzX(f *testing.F) in a _test.go file
targets=$(
  for d in "${dirs[@]}"; do
    d=${d%/...}
    grep -rE --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]*)\(f \*testing\.F\)' "$d" || true
  done | sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' | { grep -F -- "${FUZZ_MATCH:-Fuzz}" || true; } | sort -u
)
if [ -z "$targets" ]; then
  echo "fuzz.sh: no fuzz targets under ${dirs[*]}" >&2
  exit 2
fi
n=$(wc -l <<<"$targets")
if [ -n "${FUZZ_LIST:-}" ]; then
  echo "$targets"
  exit 0
fi
echo "fuzz.sh: $n targets, $fuzztime each"
failed=()
while read -r dir name; do
  pkg=./${dir#./}
  echo "=== $name ($pkg)"
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
    failed+=("$name ($pkg)")
  fi
done <<<"$targets"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'fuzz.sh: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz.sh: all $n targets ran $fuzztime without a failure"

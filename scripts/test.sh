#!/usr/bin/env bash
# The whole test suite, from a fresh checkout: installs what the tests need
# (scripts/deps.sh: apt packages, Python tools in .venv, Go modules), checks
# that go.mod is tidy, vets, then runs every package's tests, including each fuzz target's seed corpus.
#
#   scripts/test.sh                       # every package
#   scripts/test.sh ./proto/... ./vfs     # only these packages
#   TEST_FLAGS='-run TestX' scripts/test.sh ./vfs   # extra go test flags
#
# Results are visible and strict: internal/testsummary prints each package
# as it finishes (and the output of every failed test), saves go test's raw
# JSON to results/test.json, and ends with a summary — per package passed/
# failed/skipped, every skipped test with its reason, every failure — whose
# last line is "N passed, N failed, N skipped". The exit status is non-zero
# on any failure. Under CI (CI=true) a test that needs something missing
# (root, /dev/fuse, TUN, tmpfs, xattrs, a peer tool) fails instead of
# skipping: see internal/testutil. Root-only tests skip with a reason when
# this is run as another user outside CI.
#
# Long soaks, benchmarks and fuzzing campaigns are separate: see
# BENCHMARKS.md and docs/DEVELOPING.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# Python peer tools (aws, boto3) live in the repository's virtual
# environment, which scripts/deps.sh creates; Go-installed tools in GOPATH/bin.
export PATH="$PWD/.venv/bin:$PATH:$(go env GOPATH)/bin"
scripts/deps.sh
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
# go.mod and go.sum must be exactly what the code imports: no module that
# nothing uses, direct dependencies not marked indirect (run `go mod tidy`).
if ! go mod tidy -diff; then
  echo "test.sh: go.mod/go.sum are not tidy (the diff above); run go mod tidy and commit them" >&2
  exit 1
fi
go vet "${pkgs[@]}"
mkdir -p results
go build -o results/testsummary ./internal/testsummary
[ "${CI:-}" = true ] && echo "CI=true: a skip for a missing capability or tool is a failure"
# -p 2: two packages at a time on this 2-core machine; the timeout bounds a
# hung package (its running tests are then reported as not finished).
# shellcheck disable=SC2086 # TEST_FLAGS is split on purpose
exec results/testsummary -o results/test.json -- \
  go test -json -count=1 -p 2 -timeout 20m ${TEST_FLAGS:-} "${pkgs[@]}"

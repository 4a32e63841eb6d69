#!/usr/bin/env bash
# The whole test suite, from a fresh checkout: installs what the tests need
# (scripts/deps.sh), vets, then runs every package's tests, including each
# fuzz target's seed corpus. Root-only tests (namespaces, TUN, FUSE, loop
# devices) run when this is run as root and skip with a message otherwise.
# Long soaks, benchmarks and fuzzing campaigns are separate: see BENCHMARKS.md
# and scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:$(go env GOPATH)/bin"
scripts/deps.sh
go vet ./...
# -p 2: two packages at a time on this 2-core machine; the timeout bounds a hung test.
go test -count=1 -p 2 -timeout 20m "$@" ./...

#!/usr/bin/env bash
# Installs everything tristore's tests need on a fresh Debian machine: the
# peer tools each protocol is tested against (apt, as root or through sudo),
# Python tools (pip) in a virtual environment inside the repository, .venv,
# and Go modules. Idempotent: a second run installs nothing new.
#
#   scripts/deps.sh           # what the tests need (scripts/test.sh runs this)
#   scripts/deps.sh --bench   # also the benchmark-only peers
#
# Each part of the tree adds its needs in scripts/deps.d/<part>.sh (sourced
# here, in name order) to these arrays:
#   APT_PKGS        Debian packages the tests use
#   PIP_PKGS        Python packages the tests use (installed into .venv)
#   BENCH_APT_PKGS  Debian packages only the benchmarks use   (--bench)
#   BENCH_PIP_PKGS  Python packages only the benchmarks use   (--bench)
#   GO_TOOLS        Go peers only the benchmarks use, built with go install (--bench)
#
# Python tools never go into the system Python: Debian marks it externally
# managed (PEP 668), so pip refuses there. The virtual environment is made
# with Debian's own /usr/bin/python3 (python3-venv), not whichever python3
# comes first on PATH, so this behaves the same on every Debian machine.
# Tests find it through scripts/test.sh, which puts .venv/bin first on PATH,
# and through internal/testutil (NeedCmd, NeedPython), which look in .venv/bin.
set -euo pipefail
BENCH=0
[ "${1:-}" = "--bench" ] && BENCH=1
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

APT_PKGS=()
PIP_PKGS=()
BENCH_APT_PKGS=()
BENCH_PIP_PKGS=()
GO_TOOLS=()
for f in scripts/deps.d/*.sh; do
  [ -e "$f" ] && . "$f"
done
if [ "$BENCH" = 1 ]; then
  APT_PKGS+=("${BENCH_APT_PKGS[@]}")
  PIP_PKGS+=("${BENCH_PIP_PKGS[@]}")
else
  GO_TOOLS=()
fi
if [ ${#PIP_PKGS[@]} -gt 0 ]; then
  APT_PKGS+=(python3 python3-venv)
fi

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  # Sorted and de-duplicated: several parts of the tree name the same package.
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "deps: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ${#PIP_PKGS[@]} -gt 0 ]; then
  VENV=.venv
  # A venv whose interpreter no longer runs (Python upgraded, copied from
  # elsewhere) is made again.
  if ! "$VENV/bin/python3" -c 'import sys' 2>/dev/null; then
    echo "deps: python venv in $VENV (/usr/bin/python3 -m venv)"
    rm -rf "$VENV"
    /usr/bin/python3 -m venv "$VENV"
  fi
  # Installed packages are recorded in .venv/.tristore-pip, so a second run
  # does not even start pip (a new venv starts a new record).
  stamp="$VENV/.tristore-pip"
  need=()
  for p in "${PIP_PKGS[@]}"; do
    grep -qxF "$p" "$stamp" 2>/dev/null || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
    echo "deps: pip install into $VENV: ${need[*]}"
    "$VENV/bin/python3" -m pip install -q --disable-pip-version-check "${need[@]}"
    printf '%s\n' "${need[@]}" >>"$stamp"
  fi
fi

for t in "${GO_TOOLS[@]}"; do
  name=$(basename "${t%@*}")
  command -v "$name" >/dev/null || command -v "$(go env GOPATH)/bin/$name" >/dev/null || go install "$t"
done
go mod download
echo "deps: ok"

#!/usr/bin/env bash
# Installs everything tristore's tests need on a fresh Debian machine (root):
# the peer tools each protocol is tested against, and Go modules.
# Idempotent: a second run installs nothing new. Each part of the tree adds
# its own needs in scripts/deps.d/<part>.sh (sourced here, in name order).
# GO_TOOLS (peer servers only the benchmarks use, built from source) are
# installed only with --bench, so the test command stays quick on a fresh
# machine: `scripts/deps.sh --bench`.
set -euo pipefail
BENCH=0
[ "${1:-}" = "--bench" ] && BENCH=1
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

APT_PKGS=()
PIP_PKGS=()
GO_TOOLS=()
for f in scripts/deps.d/*.sh; do
  [ -e "$f" ] && . "$f"
done

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ${#PIP_PKGS[@]} -gt 0 ]; then
  python3 -m pip install -q --disable-pip-version-check "${PIP_PKGS[@]}"
fi
[ "$BENCH" = 1 ] || GO_TOOLS=()
for t in "${GO_TOOLS[@]}"; do
  name=$(basename "${t%@*}")
  command -v "$name" >/dev/null || command -v "$(go env GOPATH)/bin/$name" >/dev/null || go install "$t"
done
go mod download
echo "deps: ok"

#!/usr/bin/env bash
# scripts/setup.sh -- installs the Debian packages kvfleet needs, only those missing.
# Uses sudo when not root. Set KVF_SETUP_SKIP=1 to skip (e.g. a machine without apt).
set -euo pipefail
[ "${KVF_SETUP_SKIP:-0}" = 1 ] && exit 0
pkgs=(build-essential cmake pkg-config sqlite3 libsqlite3-dev libcsv-dev libyaml-dev
      libjansson-dev check libsubunit-dev libopenblas-dev gnuplot-nox
      libopenmpi-dev openmpi-bin chromium clang libclang-rt-dev clang-format jq)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "setup: missing packages ${missing[*]} and no apt-get; install them by hand" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# Install what building and testing specdec needs on a fresh Debian 12 machine:
# Debian packages (compiler, CMake, cJSON, PCRE2, utf8proc, libmicrohttpd for `specdec serve`,
# clang for the fuzzers) and
# the Python packages of tests/requirements.txt. (tools/train_pair.py needs more:
# bible-kjv and tools/requirements-train.txt; the suite does not.)
# Safe to run repeatedly; skips apt when everything is already there.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
pkgs="build-essential cmake pkg-config libcjson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev clang libclang-rt-14-dev python3-pip"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -r "$here/tests/requirements.txt" 2>&1 | grep -v -i "running pip as the 'root' user" || true
# Fail loudly if a test dependency did not install.
python3 -c "import numpy, tokenizers, safetensors, openai, transformers, jinja2" || { echo "deps.sh: Python test packages missing" >&2; exit 1; }

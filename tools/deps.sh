#!/usr/bin/env bash
# tools/deps.sh — install what specdec needs on Debian 12 (or a derivative).
#
#   bash tools/deps.sh          the build: Debian packages only (compiler, CMake, pkg-config, cJSON,
#                               PCRE2, utf8proc, libmicrohttpd for `specdec serve`). No Python at all:
#                               this is everything the README's main job needs.
#   bash tools/deps.sh --test   also what the test suite needs: clang + compiler-rt (the libFuzzer
#                               targets), python3 + python3-venv, curl and git (the README's
#                               commands, the fresh-clone stage), and the Python packages of
#                               tests/requirements.txt in the test virtual environment (below).
#
# The test virtual environment is <repo>/build/venv — a stable path: the CMake tests (through
# SPECDEC_PYTHON's default, tests/CMakeLists.txt), tests/run_all.sh and the Python package's
# tests all run build/venv/bin/python3. Packages never go into the system interpreter (Debian's
# python3 is "externally managed", PEP 668, and refuses them). The venv is made by the first
# `python3` on PATH (SPECDEC_VENV_PYTHON=/path/to/python3 picks another) with
# --system-site-packages, so what that interpreter already has at the required versions is
# reused instead of downloaded; it is made again when tests/requirements.txt changes (stamp:
# build/venv/.requirements.sha256) or its interpreter no longer runs. Remove build/venv to
# start over. (tools/train_pair.py needs more: bible-kjv and tools/requirements-train.txt.)
#
# Safe to run repeatedly: apt runs only for missing packages, pip only when the stamp differs.
# Every failure stops the script with its message (exit 1); a bad argument exits 2.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
test_deps=0
for a in "$@"; do
  case "$a" in
    --test) test_deps=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "deps.sh: unknown argument '$a' (use --test for the test suite's dependencies)" >&2; exit 2 ;;
  esac
done

pkgs="build-essential cmake pkg-config libcjson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev"
[ "$test_deps" = 1 ] && pkgs="$pkgs clang libclang-rt-14-dev python3 python3-venv curl git"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if ! command -v apt-get >/dev/null; then
    echo "deps.sh: not a Debian system (no apt-get); install the equivalents of:$missing" >&2; exit 1
  fi
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "deps.sh: installing Debian packages:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
[ "$test_deps" = 1 ] || exit 0

venv="$here/build/venv"
req="$here/tests/requirements.txt"
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$venv/bin/python3" -c "" 2>/dev/null; then
  exit 0
fi
py=${SPECDEC_VENV_PYTHON:-python3}
echo "deps.sh: creating the test virtual environment $venv with $(command -v "$py") ($("$py" --version 2>&1))"
rm -rf "$venv"
mkdir -p "$here/build"
if ! "$py" -m venv --system-site-packages "$venv"; then
  echo "deps.sh: '$py -m venv' failed (on Debian it needs the python3-venv package)" >&2; exit 1
fi
"$venv/bin/python3" -m pip install -q --disable-pip-version-check -r "$req"
if ! out=$("$venv/bin/python3" -c "import numpy, tokenizers, safetensors, openai, transformers, jinja2" 2>&1); then
  echo "$out" >&2; echo "deps.sh: the test packages do not import in $venv" >&2; exit 1
fi
echo "$want" > "$stamp"

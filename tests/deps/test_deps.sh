#!/usr/bin/env bash
# test_deps.sh SOURCE_DIR WORK_DIR — tools/deps.sh keeps its promises (issue 26):
# - `bash tools/deps.sh` (the main job's) never runs Python or pip: it succeeds with
#   python3, python, pip and pip3 on PATH replaced by stubs that record being called;
# - a bad argument exits 2 naming it; --help prints the header;
# - `--test` makes the venv with SPECDEC_VENV_PYTHON and stops with its message and exit 1
#   when that fails (a scratch copy of the script, so no real venv is touched; the stub
#   interpreter fails as Debian's python3 without python3-venv does).
# Skips (77) where the Debian packages are not all installed: it must not run apt-get.
set -uo pipefail
src=$1; work=$2
rm -rf "$work"; mkdir -p "$work/bin" "$work/repo/tools" "$work/repo/tests"
for p in build-essential cmake pkg-config libcjson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev clang \
         libclang-rt-14-dev python3 python3-venv curl git; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || {
    echo "skipped: Debian package $p not installed (this test must not run apt-get)"; exit 77; }
done
fail=0
check() { if "$@"; then :; else echo "FAIL: $*"; fail=1; fi; }
for stub in python3 python pip pip3; do
  printf '#!/bin/sh\necho "%s $*" >> "%s/called"\nexit 99\n' "$stub" "$work" > "$work/bin/$stub"
  chmod +x "$work/bin/$stub"
done
out=$(PATH="$work/bin:$PATH" bash "$src/tools/deps.sh" 2>&1); rc=$?
check test "$rc" = 0
check test ! -e "$work/called"
[ -e "$work/called" ] && echo "deps.sh called: $(cat "$work/called")"
out=$(bash "$src/tools/deps.sh" --bogus 2>&1); rc=$?
check test "$rc" = 2
check grep -q -- "--bogus" <<<"$out"
check bash -c "bash '$src/tools/deps.sh' --help | grep -q 'tools/deps.sh'"
cp "$src/tools/deps.sh" "$work/repo/tools/" && cp "$src/tests/requirements.txt" "$work/repo/tests/"
out=$(SPECDEC_VENV_PYTHON="$work/bin/python3" bash "$work/repo/tools/deps.sh" --test 2>&1); rc=$?
check test "$rc" = 1
check grep -q "python3-venv" <<<"$out"
check test ! -e "$work/repo/build/venv/.requirements.sha256"
[ "$fail" = 0 ] && echo "deps.sh: ok" || echo "$out"
exit "$fail"

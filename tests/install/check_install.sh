#!/usr/bin/env bash
# check_install.sh BUILD_DIR CONSUMER_SRC WORK_DIR — see CMakeLists.txt.
#
# Installs BUILD_DIR into WORK_DIR/prefix, then checks as a user of the package would:
# - the files, the versioned soname (libspecdec.so.MAJOR.MINOR while 0.x), only specdec_*
#   symbols exported;
# - the installed program runs from its prefix with no LD_LIBRARY_PATH (RUNPATH
#   $ORIGIN/../lib) and finds the installed bundled pair beside it, also after the whole
#   prefix is moved elsewhere;
# - a C program (and a C++ one) builds and runs through find_package(specdec), against
#   specdec::specdec and specdec::specdec_static, and a C program through pkg-config,
#   shared (`pkg-config --libs`) and static (`pkg-config --static --libs`, libspecdec.a):
#   linked by the C compiler, the static library must bring the C++ and CUDA runtime
#   libraries of a CUDA build with it.
set -euo pipefail
build=$1; src=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
fail=0; pass=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
libdir=$(ls -d "$prefix"/lib* | head -n1)
libname=$(basename "$libdir")
major=$(sed -n 's/^#define SPECDEC_VERSION_MAJOR \([0-9]*\)$/\1/p' "$prefix/include/specdec.h")
minor=$(sed -n 's/^#define SPECDEC_VERSION_MINOR \([0-9]*\)$/\1/p' "$prefix/include/specdec.h")
soname="libspecdec.so.$major"; [ "$major" = 0 ] && soname="libspecdec.so.0.$minor"
models="$prefix/share/specdec/models"
check test -f "$prefix/include/specdec.h"
check test -f "$libdir/libspecdec.a"
check test -L "$libdir/$soname"
check test -f "$libdir/pkgconfig/specdec.pc"
check test -f "$libdir/cmake/specdec/specdecConfig.cmake"
check test -x "$prefix/bin/specdec"
check test -f "$models/kjv-target/model.safetensors"
check bash -c "objdump -p '$libdir/libspecdec.so' | grep -q 'SONAME *$soname\$'"
# only specdec_* symbols are exported
check bash -c "! nm -D --defined-only '$libdir/libspecdec.so' | awk '{print \$3}' | grep -v '^specdec_' | grep -v '^_' | grep -q ."

# The installed program: its RUNPATH, and runs from the prefix (and a moved prefix) with
# nothing in LD_LIBRARY_PATH, on the bundled pair installed beside it.
check bash -c "readelf -d '$prefix/bin/specdec' | grep -E 'R(UN)?PATH' | grep -qF '\$ORIGIN/../$libname'"
run_installed() { # PREFIX: generate 4 tokens from / and check it used PREFIX's library and models
  local p=$1 out
  out=$(cd / && env -u LD_LIBRARY_PATH "$p/bin/specdec" generate -p "And God said" -n 4 --temp 0 --json 2>&1) || {
    echo "installed specdec in $p failed: $out"; return 1; }
  echo "$out" | grep -qF "\"model\":\"$p/share/specdec/models/kjv-target\"" || {
    echo "installed specdec in $p did not use its own models: $out"; return 1; }
  local lib
  lib=$(cd / && env -u LD_LIBRARY_PATH ldd "$p/bin/specdec" | awk -v so="$soname" '$1 == so {print $3}')
  [ -n "$lib" ] && [ "$(realpath "$lib")" = "$(realpath "$p/$libname/$soname")" ] || {
    echo "installed specdec in $p loads '$lib', not its own $p/$libname/$soname"; return 1; }
}
check run_installed "$prefix"
mv "$prefix" "$work/moved"
check run_installed "$work/moved"
mv "$work/moved" "$prefix"

# C and C++ consumers through find_package, shared and static
for kind in shared static; do
  cmake -S "$src" -B "$work/cmake-$kind" -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_LINK="$kind" >"$work/cmake-$kind.log" 2>&1 \
    && cmake --build "$work/cmake-$kind" >>"$work/cmake-$kind.log" 2>&1 \
    && pass=$((pass+1)) || { echo "FAIL: find_package consumers ($kind) did not build:"; tail -n 30 "$work/cmake-$kind.log"; fail=$((fail+1)); continue; }
  check env LD_LIBRARY_PATH="$libdir" "$work/cmake-$kind/consumer_c" "$models"
  check env LD_LIBRARY_PATH="$libdir" "$work/cmake-$kind/consumer_cxx"
done
check bash -c "! ldd '$work/cmake-static/consumer_c' | grep -q libspecdec"

# C consumer through pkg-config: shared, then static (libspecdec.a by name, with what
# `pkg-config --static` adds after it)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
check cc -std=c11 -Wall -Werror "$src/main.c" -o "$work/pc_shared" $(pkg-config --cflags --libs specdec)
check env LD_LIBRARY_PATH="$libdir" "$work/pc_shared" "$models"
static_libs=$(pkg-config --static --libs specdec | sed 's/-lspecdec\b/-l:libspecdec.a/')
check cc -std=c11 -Wall -Werror "$src/main.c" -o "$work/pc_static" $(pkg-config --cflags specdec) $static_libs
check "$work/pc_static" "$models"
check bash -c "! ldd '$work/pc_static' | grep -q libspecdec"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

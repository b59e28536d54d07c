#!/usr/bin/env bash
# check_install.sh BUILD_DIR CONSUMER_SRC WORK_DIR — see CMakeLists.txt.
set -euo pipefail
build=$1; src=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
fail=0; pass=0
check() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
libdir=$(ls -d "$prefix"/lib* | head -n1)
check test -f "$prefix/include/specdec.h"
check test -f "$libdir/libspecdec.a"
check test -L "$libdir/libspecdec.so.0"
check test -f "$libdir/pkgconfig/specdec.pc"
check test -f "$libdir/cmake/specdec/specdecConfig.cmake"
check test -x "$prefix/bin/specdec"
# soname is versioned
check bash -c "objdump -p '$libdir/libspecdec.so' | grep -q 'SONAME.*libspecdec.so.0'"
# only specdec_* symbols are exported
check bash -c "! nm -D --defined-only '$libdir/libspecdec.so' | awk '{print \$3}' | grep -v '^specdec_' | grep -v '^_' | grep -q ."

# C++ consumer through find_package, shared and static
for kind in shared static; do
  cmake -S "$src" -B "$work/cxx-$kind" -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_LINK="$kind" >"$work/cxx-$kind.log" 2>&1 \
    && cmake --build "$work/cxx-$kind" >>"$work/cxx-$kind.log" 2>&1 \
    && pass=$((pass+1)) || { echo "FAIL: C++ consumer ($kind) did not build:"; cat "$work/cxx-$kind.log"; fail=$((fail+1)); continue; }
  check env LD_LIBRARY_PATH="$libdir" "$work/cxx-$kind/consumer"
done

# C consumer through pkg-config
cat > "$work/c_consumer.c" <<'C'
#include <specdec.h>
#include <stdio.h>
int main(void) {
    if (specdec_version_number() != SPECDEC_VERSION_NUMBER) return 1;
    specdec_model *m = NULL;
    if (specdec_model_load("/nonexistent-dir", NULL, &m) == SPECDEC_OK || m != NULL) return 1;
    printf("C consumer: %s; load error: %s\n", specdec_version_string(), specdec_last_error());
    specdec_model_free(NULL);
    return 0;
}
C
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs specdec)
check cc -std=c11 -Wall -Werror "$work/c_consumer.c" -o "$work/c_consumer" $flags
check env LD_LIBRARY_PATH="$libdir" "$work/c_consumer"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs dependencies, builds the Release
# configuration (with the CUDA backend when the toolkit is present) and runs every
# test, then builds the Debug + ASan + UBSan configuration and runs the tests again
# under the sanitizers. GPU tests report "skipped" on machines without a device.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/deps.sh
jobs=$(nproc)

echo "== Release build =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSPECDEC_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")

echo "== Debug + ASan + UBSan build (CPU backend) =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSPECDEC_SANITIZE=ON -DSPECDEC_CUDA=OFF -DSPECDEC_WERROR=ON \
      -DSPECDEC_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -j"$jobs" -LE no_asan)

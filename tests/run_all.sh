#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs dependencies, builds the Release
# configuration (with the CUDA backend when the toolkit is present) and runs every
# test, builds the libFuzzer targets with clang and runs each briefly from its seeds,
# then builds the Debug + ASan + UBSan configuration and runs the tests again under
# the sanitizers, and last a ThreadSanitizer configuration (CPU backend) that builds
# and runs only the concurrency tests (label tsan). GPU tests report "skipped" on
# machines without a device.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/deps.sh
jobs=$(nproc)

echo "== Release build =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSPECDEC_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")

echo "== libFuzzer targets (clang, ASan + UBSan): build, then a short run from the seeds =="
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DSPECDEC_FUZZ=ON -DSPECDEC_CUDA=OFF \
      -DSPECDEC_BUILD_BENCH=OFF -DSPECDEC_WERROR=ON >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_safetensors fuzz_config fuzz_tokenizer
for t in safetensors config tokenizer; do
  corpus=$(mktemp -d)
  cp tests/fuzz/seeds/$t/* "$corpus"/
  if ! build-fuzz/tests/fuzz/fuzz_$t "$corpus" -max_total_time=${SPECDEC_FUZZ_SECONDS:-20} -print_final_stats=1 \
       >build-fuzz/fuzz_$t.log 2>&1; then
    tail -n 40 build-fuzz/fuzz_$t.log
    echo "fuzz_$t: FAILED (crash input saved in the working directory)"; exit 1
  fi
  echo "fuzz_$t: $(grep -E '^stat::number_of_executed_units' build-fuzz/fuzz_$t.log | awk '{print $2}') runs, no finding"
  rm -rf "$corpus"
done

echo "== Debug + ASan + UBSan build (CPU backend) =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSPECDEC_SANITIZE=ON -DSPECDEC_CUDA=OFF -DSPECDEC_WERROR=ON \
      -DSPECDEC_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -j"$jobs" -LE no_asan)

echo "== ThreadSanitizer build (CPU backend): the tests labelled tsan =="
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECDEC_TSAN=ON -DSPECDEC_CUDA=OFF -DSPECDEC_WERROR=ON \
      -DSPECDEC_BUILD_BENCH=OFF >/dev/null
cmake --build build-tsan -j"$jobs" --target tsan_tests
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --output-on-failure -j"$jobs" -L tsan)

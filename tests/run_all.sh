#!/usr/bin/env bash
# The whole test suite, on a fresh machine (README.md, "Whole test suite", lists the stages):
# 1. dependencies: tools/deps.sh --test (Debian packages; the tests' Python packages in the
#    virtual environment build/venv, whose python3 every CMake configuration below uses);
# 2. the Release configuration (the CUDA backend compiled whenever nvcc is found, even
#    without a GPU) built completely, and every test;
# 3. a fresh clone of the commit: the README's main job and install commands as written,
#    with Debian's python3 first on PATH (tests/docs/test_readme.py fresh-clone);
# 4. the libFuzzer targets built with clang and each run briefly from its seeds and the
#    committed corpus;
# 5. the Debug + ASan + UBSan configuration, the tests again under the sanitizers;
# 6. a ThreadSanitizer configuration (CPU backend) running the concurrency tests (label tsan).
# GPU tests report "skipped" on machines without a device. A failing stage stops the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Each stage's wall time, printed at the end (and when a stage fails), so a slow stage is visible.
stage_names=(); stage_secs=(); stage_t0=$SECONDS; stage_cur="dependencies"
stage() {
  stage_names+=("$stage_cur"); stage_secs+=($((SECONDS - stage_t0)))
  stage_cur=$1; stage_t0=$SECONDS; echo "== $1 =="
}
stage_report() {  # the EXIT trap: never fails itself, and keeps the run's exit status
  local rc=$? i sfx=""
  set +e
  if [ $rc -ne 0 ]; then sfx=" (failed, exit $rc)"; fi
  stage_names+=("$stage_cur$sfx"); stage_secs+=($((SECONDS - stage_t0)))
  echo "== stage times (total ${SECONDS} s) =="
  for i in "${!stage_names[@]}"; do printf '%6d s  %s\n' "${stage_secs[$i]}" "${stage_names[$i]}"; done
  exit $rc
}
trap stage_report EXIT
bash tools/deps.sh --test
py="$root/build/venv/bin/python3"
jobs=$(nproc)
cuda=AUTO
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then cuda=ON; fi

stage "Release build (CUDA backend $cuda)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSPECDEC_WERROR=ON -DSPECDEC_CUDA=$cuda -DSPECDEC_PYTHON="$py" >/dev/null
cmake --build build -j"$jobs"
# label sanitizer_variant: a reduced copy of a test this stage runs in full (engine_dist_quick beside
# engine_dist, ...); only the sanitizer stages need it
(cd build && ctest --output-on-failure -j"$jobs" -LE sanitizer_variant)

stage "Fresh clone: the README's main job and install commands, Debian's python3 first on PATH"
"$py" tests/docs/test_readme.py fresh-clone README.md "$root"

stage "libFuzzer targets (clang, ASan + UBSan): build, then a short run from the seeds and the corpus"
# Targets: tests/fuzz/targets.txt. Each runs ${SPECDEC_FUZZ_SECONDS:-16} s from tests/fuzz/seeds/<t> and the
# minimised corpus tests/fuzz/corpus/<t> of the last campaign (tests/fuzz/campaign.sh); new inputs go
# to a scratch directory. Exit 77 = the target's inputs are absent (tokenizer_real without ../shared);
# -error_exitcode=1 because libFuzzer's default exit code for a finding is 77 as well.
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DSPECDEC_FUZZ=ON -DSPECDEC_CUDA=OFF \
      -DSPECDEC_BUILD_BENCH=OFF -DSPECDEC_WERROR=ON -DSPECDEC_PYTHON="$py" >/dev/null
mapfile -t fuzz_targets < <(grep -E '^[a-z_0-9]+$' tests/fuzz/targets.txt)
cmake --build build-fuzz -j"$jobs" --target "${fuzz_targets[@]/#/fuzz_}"
# The targets run $jobs at a time (each libFuzzer process uses one core); results print in order.
fuzz_one() {  # target -> build-fuzz/fuzz_<t>.log and build-fuzz/fuzz_<t>.rc
  local t=$1 scratch inputs rc
  scratch=$(mktemp -d)
  inputs=(tests/fuzz/seeds/$t)
  [ -d tests/fuzz/corpus/$t ] && inputs+=(tests/fuzz/corpus/$t)
  rc=0
  build-fuzz/tests/fuzz/fuzz_$t "$scratch" "${inputs[@]}" -max_total_time=${SPECDEC_FUZZ_SECONDS:-16} -timeout=60 \
    -error_exitcode=1 -print_final_stats=1 -artifact_prefix=build-fuzz/fuzz_$t- >build-fuzz/fuzz_$t.log 2>&1 || rc=$?
  rm -rf "$scratch"
  echo $rc >build-fuzz/fuzz_$t.rc
}
fuzz_report() {  # target -> 0, or 1 after printing the failure
  local t=$1 rc
  rc=$(cat build-fuzz/fuzz_$t.rc 2>/dev/null || echo 1)
  if [ "$rc" -eq 77 ]; then
    echo "fuzz_$t: skipped ($(grep -m1 -i skipped build-fuzz/fuzz_$t.log || echo 'inputs absent'))"
  elif [ "$rc" -ne 0 ]; then
    tail -n 40 build-fuzz/fuzz_$t.log
    echo "fuzz_$t: FAILED, exit $rc (crash input saved as build-fuzz/fuzz_$t-*)"; return 1
  else
    echo "fuzz_$t: $(grep -E '^stat::number_of_executed_units' build-fuzz/fuzz_$t.log | awk '{print $2}') runs, no finding"
  fi
}
fuzz_failed=0
for ((i = 0; i < ${#fuzz_targets[@]}; i += jobs)); do
  batch=("${fuzz_targets[@]:i:jobs}")
  for t in "${batch[@]}"; do fuzz_one "$t" & done
  wait
  for t in "${batch[@]}"; do fuzz_report "$t" || fuzz_failed=1; done
done
[ $fuzz_failed -eq 0 ]

stage "Debug (-O1) + ASan + UBSan build (CPU backend)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSPECDEC_SANITIZE=ON -DSPECDEC_CUDA=OFF -DSPECDEC_WERROR=ON \
      -DSPECDEC_BUILD_BENCH=OFF -DSPECDEC_PYTHON="$py" >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -j"$jobs" -LE no_asan)

stage "ThreadSanitizer build (CPU backend): the tests labelled tsan"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECDEC_TSAN=ON -DSPECDEC_CUDA=OFF -DSPECDEC_WERROR=ON \
      -DSPECDEC_BUILD_BENCH=OFF -DSPECDEC_PYTHON="$py" >/dev/null
cmake --build build-tsan -j"$jobs" --target tsan_tests
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --output-on-failure -j"$jobs" -L tsan)

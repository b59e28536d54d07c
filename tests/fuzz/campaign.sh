#!/usr/bin/env bash
# campaign.sh — a fuzzing campaign: every target (or the ones named) for SECONDS each,
# one process at a time under nice, from the seeds and the committed corpus; then the
# corpus is minimised (libFuzzer -set_cover_merge=1) back into tests/fuzz/corpus/<target>/ and
# the runs, coverage, corpus size and findings of each target are printed.
#
#   tests/fuzz/campaign.sh SECONDS [target ...]        (targets: tests/fuzz/targets.txt)
#
# Environment: SPECDEC_FUZZ_BUILD (default build-fuzz: configured and built here with
# clang if needed), SPECDEC_FUZZ_RUNS (stop a target after this many runs instead),
# SPECDEC_FUZZ_NICE (default 19), SPECDEC_SHARED_DIR (for tokenizer_real),
# SPECDEC_FUZZ_OUT (default $SPECDEC_FUZZ_BUILD/campaign: give campaigns that run side by
# side from one build their own), SPECDEC_FUZZ_MERGE (set_cover_merge, the default: the
# greedy set cover, fewer files for the same features; or merge: libFuzzer's classic
# minimisation, which keeps more files).
# Findings (crash-*, leak-*, timeout-*, oom-* files) stay in
# $SPECDEC_FUZZ_BUILD/campaign/<target>/artifacts; the script exits 1 when there is one.
# A machine-readable summary (one JSON object per target) goes to
# $SPECDEC_FUZZ_OUT/results.jsonl.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 SECONDS [target ...]" >&2
  exit 2
fi
secs=$1
shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && mapfile -t targets < <(grep -E '^[a-z_0-9]+$' tests/fuzz/targets.txt)
build=${SPECDEC_FUZZ_BUILD:-build-fuzz}
nice_level=${SPECDEC_FUZZ_NICE:-19}
merge_flag=${SPECDEC_FUZZ_MERGE:-set_cover_merge}
case "$merge_flag" in set_cover_merge | merge) ;; *) echo "SPECDEC_FUZZ_MERGE must be set_cover_merge or merge, not $merge_flag" >&2; exit 2 ;; esac
out=${SPECDEC_FUZZ_OUT:-$build/campaign}
mkdir -p "$out"

if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DSPECDEC_FUZZ=ON -DSPECDEC_CUDA=OFF \
        -DSPECDEC_BUILD_BENCH=OFF -DSPECDEC_WERROR=ON >/dev/null
fi
nice -n "$nice_level" cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}" >/dev/null

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit+dirty"
results="$out/results.jsonl"
: >"$results"
found=0
printf '%-16s %12s %9s %8s %8s %10s %10s %9s  %s\n' target runs exec/s cov ft corpus bytes findings status
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/fuzz_$t"
  dir="$out/$t"
  rm -rf "$dir"
  mkdir -p "$dir/new" "$dir/artifacts" "$dir/merged" "tests/fuzz/corpus/$t"
  extra=()
  [ -n "${SPECDEC_FUZZ_RUNS:-}" ] && extra+=("-runs=$SPECDEC_FUZZ_RUNS")
  start=$(date +%s)
  set +e
  # new inputs go to $dir/new; the committed corpus and the seeds are read only.
  # -error_exitcode=1: libFuzzer's default for a finding is 77, our "skipped".
  nice -n "$nice_level" "$bin" "$dir/new" "tests/fuzz/corpus/$t" "tests/fuzz/seeds/$t" \
    -max_total_time="$secs" -print_final_stats=1 -timeout=60 -error_exitcode=1 -artifact_prefix="$dir/artifacts/" \
    "${extra[@]}" >"$dir/fuzz.log" 2>&1
  rc=$?
  set -e
  elapsed=$(( $(date +%s) - start ))
  status=ok
  [ $rc -eq 77 ] && status=skipped
  n_find=$(find "$dir/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then status="FAILED(rc=$rc)"; [ "$n_find" -eq 0 ] && n_find=1; fi
  [ "$n_find" -gt 0 ] && found=1
  runs=$(awk '/^stat::number_of_executed_units/ {print $2}' "$dir/fuzz.log" | tail -n 1)
  eps=$(awk '/^stat::average_exec_per_sec/ {print $2}' "$dir/fuzz.log" | tail -n 1)
  cov=0 ft=0 nfiles=0 nbytes=0
  if [ "$status" != skipped ]; then
    # minimise: the committed corpus plus what this run found, into a fresh directory
    nice -n "$nice_level" "$bin" "-$merge_flag=1" "$dir/merged" "tests/fuzz/corpus/$t" "$dir/new" >"$dir/merge.log" 2>&1 || true
    if [ -n "$(ls -A "$dir/merged")" ]; then
      find "tests/fuzz/corpus/$t" -type f -delete
      cp "$dir/merged"/* "tests/fuzz/corpus/$t/"
    fi
    # coverage of seeds + minimised corpus (what the CI's short run starts from)
    nice -n "$nice_level" "$bin" -runs=0 "tests/fuzz/corpus/$t" "tests/fuzz/seeds/$t" >"$dir/cov.log" 2>&1 || true
    line=$(grep -E 'INITED|DONE' "$dir/cov.log" | tail -n 1 || true)
    cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$line")
    ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$line")
    nfiles=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
    nbytes=$(find "tests/fuzz/corpus/$t" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  fi
  printf '%-16s %12s %9s %8s %8s %10s %10s %9s  %s\n' "$t" "${runs:-0}" "${eps:-0}" "${cov:-0}" "${ft:-0}" \
    "$nfiles" "$nbytes" "$n_find" "$status"
  printf '{"target": "%s", "seconds": %d, "runs": %s, "exec_per_sec": %s, "cov": %s, "ft": %s, "corpus_files": %s, "corpus_bytes": %s, "findings": %s, "status": "%s", "commit": "%s", "date": "%s"}\n' \
    "$t" "$elapsed" "${runs:-0}" "${eps:-0}" "${cov:-0}" "${ft:-0}" "$nfiles" "$nbytes" "$n_find" "$status" "$commit" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$results"
  if [ "$n_find" -gt 0 ]; then
    tail -n 30 "$dir/fuzz.log"
    echo "fuzz_$t: finding(s) in $dir/artifacts"
  fi
done
echo "summary: $results (commit $commit)"
exit $found

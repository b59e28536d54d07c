#!/usr/bin/env bash
# gpu_check.sh — everything that needs a GPU, in one command, for a machine with a
# CUDA device (run from the repo root; logs and JSON go to $OUT, default ./out):
#   1. build (Release, sm_90, tests + benchmarks) — Debian dev packages may come as
#      unpacked .deb files: if .deb/ holds *.deb (libcjson-dev libcjson1 libpcre2-dev
#      libpcre2-8-0 libutf8proc-dev libutf8proc2 ...), they are unpacked into
#      .deb/root and pkg-config/CMake/the loader are pointed there;
#   2. the GPU tests (ctest -L gpu);
#   3. compute-sanitizer memcheck, racecheck, initcheck and synccheck with
#      --error-exitcode=1 over every GPU test except the planted-fault one (label
#      gpu_fault), the four tools in parallel under one deadline (SAN_BUDGET_S,
#      default 540 s: the stage fits one 10-minute call), with SD_CUDA_TEST_QUICK=1
#      (memcheck, synccheck) or 2 (racecheck, initcheck): fewer cases; a missing
#      compute-sanitizer is a failure;
#   4. the benchmarks (bench/cuda/bench_cuda, the verify kernel, the device-resident
#      round bench/cuda_round with its transformers peer, bench/tree on CUDA), JSON to
#      $OUT and bench/results/ (the 1B-shape ones need a tokenizer in .peers/tok and run
#      separately: bench/decode/run_decode_vs_llamacpp.sh, bench/batch/run_batch_gpu.sh);
#   5. a short table of stage results, printed last.
# Usage: bash bench/gpu_check.sh [all|build|test|sanitize|bench]...  (default: all)
# Exit status: 0 when every stage run passed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-$root/out}
mkdir -p "$OUT"
stages=${*:-all}
want() { [[ " $stages " == *" all "* || " $stages " == *" $1 "* ]]; }
jobs=$(nproc 2>/dev/null || echo 4)
bdir=$root/build-gpu
declare -a summary=()
rc_all=0
note() { summary+=("$(printf '%-28s %s' "$1" "$2")"); [ "$2" = PASS ] || [ "$2" = SKIP ] || rc_all=1; }

{
  echo "== machine =="
  nvidia-smi -L 2>&1 || true
  nvcc --version 2>&1 | tail -1 || true
  command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo "compute-sanitizer: not found"
} 2>&1 | tee "$OUT/machine.txt"
export PATH=$PATH:/usr/local/cuda/bin

# ---- dependencies from unpacked .deb files (no network on the GPU machine) --------
if compgen -G ".deb/*.deb" >/dev/null; then
  mkdir -p .deb/root
  for f in .deb/*.deb; do dpkg -x "$f" .deb/root; done
  dr=$root/.deb/root
  # The .pc files say prefix=/usr: point them at the unpacked tree.
  for pc in "$dr"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$dr"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i -E "s#^([A-Za-z_]+=)/usr#\1$dr/usr#" "$pc"
  done
  export PKG_CONFIG_PATH=$dr/usr/lib/x86_64-linux-gnu/pkgconfig:$dr/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}
  export CMAKE_PREFIX_PATH=$dr/usr:${CMAKE_PREFIX_PATH:-}
  export LD_LIBRARY_PATH=$dr/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export LIBRARY_PATH=$dr/usr/lib/x86_64-linux-gnu:${LIBRARY_PATH:-}
fi

# ---- 1. build ------------------------------------------------------------------
if want build || want all || [ ! -x "$bdir/bench/bench_cuda" ]; then
  if cmake -S . -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DSPECDEC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        >"$OUT/build.log" 2>&1 && cmake --build "$bdir" -j"$jobs" >>"$OUT/build.log" 2>&1; then
    note build PASS
  else
    note build FAIL; tail -40 "$OUT/build.log"
  fi
fi

# ---- 2. GPU tests ----------------------------------------------------------------
if want test; then
  if (cd "$bdir" && ctest -L gpu --output-on-failure --timeout 900) >"$OUT/ctest_gpu.log" 2>&1; then
    note "ctest -L gpu" PASS
  else
    note "ctest -L gpu" FAIL; tail -60 "$OUT/ctest_gpu.log"
  fi
  grep -E "tests passed|Skipped|Failed|\*\*\*" "$OUT/ctest_gpu.log" | tail -15
fi

# ---- 3. compute-sanitizer ----------------------------------------------------------
if want sanitize; then
  if ! command -v compute-sanitizer >/dev/null; then
    note compute-sanitizer "FAIL (not installed)"
  else
    # The fixtures (checkpoints) must exist: run the setup tests once.
    (cd "$bdir" && ctest -L python --timeout 300 >/dev/null 2>&1) || true
    # Each GPU test's command line and directory, from CTest.
    (cd "$bdir" && ctest -L gpu -LE gpu_fault --show-only=json-v1) >"$OUT/gpu_tests.json" 2>/dev/null
    python3 - "$OUT/gpu_tests.json" >"$OUT/gpu_tests.txt" <<'PY'
import json, sys, shlex
d = json.load(open(sys.argv[1]))
for t in d.get("tests", []):
    cmd = t.get("command")
    if not cmd or "python" in cmd[0]:
        continue
    wd = next((p["value"] for p in t.get("properties", []) if p["name"] == "WORKING_DIRECTORY"), ".")
    print(wd + "\t" + " ".join(shlex.quote(c) for c in cmd))
PY
    # The four tools run side by side (each is CPU-bound host-side instrumentation;
    # the machine has 16 cores), each over every test in turn, all under one deadline
    # (SAN_BUDGET_S, default 540 s) so the stage fits one 10-minute call. The tests
    # honour SD_CUDA_TEST_QUICK: 1 = a few representative cases; 2 (racecheck and
    # initcheck, the slowest tools) = fewer still. A test cut by the deadline FAILs.
    deadline=$(( $(date +%s) + ${SAN_BUDGET_S:-540} ))
    san_tool() {
      local tool=$1 quick=1 extra="" ok=1 wd cmd name left r
      [ "$tool" = memcheck ] && extra="--leak-check full"
      { [ "$tool" = racecheck ] || [ "$tool" = initcheck ]; } && quick=2
      while IFS=$'\t' read -r wd cmd; do
        [ -z "$cmd" ] && continue
        name=$(basename "$(echo "$cmd" | awk '{print $1}')")
        left=$(( deadline - $(date +%s) ))
        [ $left -lt 5 ] && left=5
        local t0=$(date +%s)
        (cd "$wd" && SD_CUDA_TEST_QUICK=$quick eval timeout $left compute-sanitizer --tool "$tool" $extra \
            --error-exitcode=1 "$cmd") >"$OUT/san_${tool}_${name}.log" 2>&1
        r=$?
        echo "$tool $name: exit $r in $(( $(date +%s) - t0 )) s" >>"$OUT/san_${tool}_times.txt"
        if [ $r -ne 0 ]; then
          ok=0; echo "compute-sanitizer $tool $name: exit $r$([ $r = 124 ] && echo ' (deadline)')"
          tail -30 "$OUT/san_${tool}_${name}.log"
        fi
      done <"$OUT/gpu_tests.txt"
      [ $ok = 1 ]
    }
    declare -A san_pid=()
    for tool in memcheck racecheck initcheck synccheck; do
      san_tool "$tool" >"$OUT/san_${tool}_summary.txt" 2>&1 &
      san_pid[$tool]=$!
    done
    for tool in memcheck racecheck initcheck synccheck; do
      if wait "${san_pid[$tool]}"; then note "sanitizer $tool" PASS; else note "sanitizer $tool" FAIL; fi
      cat "$OUT/san_${tool}_summary.txt" "$OUT/san_${tool}_times.txt" 2>/dev/null
    done
    # Keep what comes back small: one file per tool.
    for tool in memcheck racecheck initcheck synccheck; do
      cat "$OUT"/san_${tool}_*.log "$OUT/san_${tool}_times.txt" >"$OUT/sanitizer_${tool}.log" 2>/dev/null
      rm -f "$OUT"/san_${tool}_*.log "$OUT/san_${tool}_summary.txt" "$OUT/san_${tool}_times.txt"
    done
  fi
fi

# ---- 4. benchmark --------------------------------------------------------------------
if want bench; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '_' | tr -cd 'A-Za-z0-9_.-')
  stamp=$(date -u +%Y-%m-%d)
  if "$bdir/bench/bench_cuda" --out "$OUT/bench_cuda.json" >"$OUT/bench.log" 2>&1; then
    note bench PASS
    mkdir -p bench/results && cp "$OUT/bench_cuda.json" "bench/results/bench_cuda_${gpu:-gpu}_${stamp}.json"
  else
    note bench FAIL
  fi
  tail -45 "$OUT/bench.log"
  if "$bdir/bench/cuda_verify/bench_cuda_verify" "$OUT/bench_cuda_verify.json" >"$OUT/bench_verify.log" 2>&1; then
    note "bench verify kernel" PASS
    cp "$OUT/bench_cuda_verify.json" "bench/results/bench_cuda_verify_${gpu:-gpu}_${stamp}.json"
  else
    note "bench verify kernel" FAIL
  fi
  tail -20 "$OUT/bench_verify.log"
  # Device-resident round: the bundled pair end to end (+ the transformers
  # assisted-generation peer when torch is installed) and the synthetic large shapes.
  peer=""
  if python3 bench/cuda_round/hf_assisted.py models/kjv-target models/kjv-draft "$OUT/hf_assisted.json" \
       >"$OUT/hf_assisted.log" 2>&1; then
    peer="$OUT/hf_assisted.json"; note "bench hf assisted peer" PASS
  else
    note "bench hf assisted peer" SKIP; tail -3 "$OUT/hf_assisted.log"
  fi
  if "$bdir/bench/cuda_round/bench_cuda_round" models/kjv-target models/kjv-draft "$OUT/bench_cuda_round.json" $peer \
       >"$OUT/bench_round.log" 2>&1; then
    note "bench device round" PASS
    cp "$OUT/bench_cuda_round.json" "bench/results/bench_cuda_round_${gpu:-gpu}_${stamp}.json"
  else
    note "bench device round" FAIL
  fi
  tail -30 "$OUT/bench_round.log"
  # trees vs chains of the same node budget on the GPU, and the target pass cost vs nodes
  if "$bdir/bench/tree/bench_tree" models "$OUT/bench_tree.json" --backend cuda --reps 3 --n 128 \
       >"$OUT/bench_tree.log" 2>&1; then
    note "bench tree (cuda)" PASS
    cp "$OUT/bench_tree.json" "bench/results/tree_${gpu:-gpu}_${stamp}.json"
  else
    note "bench tree (cuda)" FAIL
  fi
  tail -25 "$OUT/bench_tree.log"
fi

echo
echo "== gpu_check summary ($(date -u +%Y-%m-%dT%H:%MZ)) =="
for l in "${summary[@]}"; do echo "$l"; done
exit $rc_all

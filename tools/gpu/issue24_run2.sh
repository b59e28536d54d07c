#!/usr/bin/env bash
# issue24_run2.sh — the short follow-up of issue 24's 15-minute GPU session, on the machine
# run 1 (tools/gpu/issue24_run1.sh) left WARM: it builds nothing and reuses run 1's build tree,
# unpacked libraries and the EAGLE-3 target + head run 1 wrote in /tmp. Issue it at once after
# run 1's reply (the machine goes back 30 s after a call), with the time status has left
# (docs/GPU_FIRST_RUN.md "The 15-minute plan"). In order:
#   A. compute-sanitizer racecheck and synccheck over RACE_TESTS (the multi-block verifier,
#      paged attention, the M-looped GEMM), both tools side by side, every process cut at
#      SAN2_S seconds (SD_CUDA_TEST_QUICK=2 racecheck, 1 synccheck, as bench/gpu_check.sh);
#      a cut run is INCOMPLETE, yet its log holds every hazard found until then;
#   B. the EAGLE-3 GPU benchmark (bench/eagle3/bench_eagle3_gpu.py: target-pass cost ratios,
#      head costs, rounds end to end, predicted tok/s) on run 1's random 8B-shape target and
#      head, with what is left; skipped when they are absent and there is no time to write them.
# At most 3 files under $OUT: summary.txt, eagle3_cuda_<date>.json, run2_logs.tgz.
# On a fresh (not warm) machine it stops at once: there is no build to reuse and no time to
# make one. Nothing here changes GPU settings; every process is bounded by `timeout`.
#
# Knobs (defaults): CALL_BUDGET_S [150] (pass timeout_s >= CALL_BUDGET_S + 20), SAN2_S [50],
#   RACE_TESTS [below], SAN2_TOOLS [racecheck synccheck; initcheck may join, same deadline],
#   SKIP_SAN/SKIP_BENCH [0], BUILD_DIR [$PROJ/build-gpu], PYTHON [python3],
#   E3_WORK [/tmp/specdec-eagle3], E3_SHAPE [llama-3.1-8b], E3_TOKENIZER [$PROJ/.peers/tok],
#   E3_NEED_S [100] (the benchmark once target + head exist), E3_WRITE_S [110] (writing them),
#   E3_BACKEND [cuda], E3_ARGS [] (more bench_eagle3_gpu.py arguments), DEB_ROOT
#   [/tmp/specdec-debroot], RUN1_STATE [/tmp/specdec-run1].
# The plan: B runs unless eagle3_cuda FAILED in run 1 (not run or cut: B's own validation decides)
# and when its time fits; A gets what B leaves
# (at most SAN2_S when B runs, all the rest when it does not).
# Every test and program name below is checked in CI by tests/tools/check_gpu_plan.py.
set -uo pipefail
T0=$(date +%s)
BUDGET=${CALL_BUDGET_S:-150}
now() { date +%s; }
left() { echo $(( BUDGET - ($(now) - T0) )); }
el() { echo $(( $(now) - T0 )); }

RACE_TESTS=${RACE_TESTS:-"cuda_sample_verify cuda_paged cuda_gemm_batch"}
SAN2_TOOLS=${SAN2_TOOLS:-racecheck synccheck}

if [ -n "${PROJ:-}" ]; then :
elif [ -f proj/CMakeLists.txt ]; then PROJ=$PWD/proj
else PROJ=$PWD; fi
PROJ=$(cd "$PROJ" && pwd)
grep -q 'project(specdec' "$PROJ/CMakeLists.txt" 2>/dev/null || { echo "PROJ=$PROJ is not the specdec tree"; exit 2; }
OUT=${OUT:-$PROJ/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/issue24_run2.XXXXXX")
LOG=$WORK/run2_logs
mkdir -p "$LOG"
BDIR=${BUILD_DIR:-$PROJ/build-gpu}
export PATH=$PATH:/usr/local/cuda/bin
PY=${PYTHON:-$(command -v python3 || echo python3)}
declare -a SUMMARY=()
finish() { printf '%s\n' "== issue24_run2 summary ($(el) s of $BUDGET) ==" "${SUMMARY[@]}" >"$OUT/summary.txt"; }
note() { SUMMARY+=("$(printf '%-30s %s' "$1" "$2")"); echo "[$(el)s] $1: $2"; finish; }
done_() { finish; cat "$LOG/san_status.txt" >>"$OUT/summary.txt" 2>/dev/null; tar -czf "$OUT/run2_logs.tgz" -C "$WORK" run2_logs 2>/dev/null; rm -rf "$WORK"; ls -la "$OUT"; cat "$OUT/summary.txt"; exit "$1"; }

E3_SHAPE=${E3_SHAPE:-llama-3.1-8b}
E3_BIN=$BDIR/bench/eagle3/bench_eagle3_cost
if [ ! -f "$BDIR/CTestTestfile.cmake" ] || [ ! -x "$E3_BIN" ]; then
  note "run 1's build" "ABSENT at $BDIR: not the warm machine of run 1; nothing done (do not retry)"
  done_ 3
fi
# Run 1's libraries (the programs' RPATH points there); unpacked again only if gone.
dr=${DEB_ROOT:-/tmp/specdec-debroot}
if [ ! -d "$dr/usr" ] && compgen -G "$PROJ/.deb/*.deb" >/dev/null; then
  mkdir -p "$dr"; for f in "$PROJ"/.deb/*.deb; do dpkg -x "$f" "$dr"; done
fi
export LD_LIBRARY_PATH=$dr/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"

# ---- the plan: which of A and B fit, and how long A may take ---------------------------------------
E3_WORK=${E3_WORK:-/tmp/specdec-eagle3}
E3_TOK=${E3_TOKENIZER:-$PROJ/.peers/tok}
E3_NEED=${E3_NEED_S:-100}   # load + validate + measure, the target and head written (run 1)
STATE=${RUN1_STATE:-/tmp/specdec-run1}
ready=0
[ -f "$E3_WORK/target-$E3_SHAPE/config.json" ] && [ -f "$E3_WORK/head-$E3_SHAPE/config.json" ] && ready=1
# eagle3_cuda's result in run 1 (its junit): the benchmark validates the same path, so a failure
# there makes the benchmark a waste of the call.
e3_run1=$("$PY" - "$STATE/ctest_gpu.xml" <<'PY' 2>/dev/null || echo unknown
import sys, xml.etree.ElementTree as ET
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    if tc.get("name") == "eagle3_cuda":
        st = tc.get("status") or ""
        print("failed" if tc.find("failure") is not None or st == "fail" else
              "skipped" if tc.find("skipped") is not None else "passed" if st == "run" else st or "unknown")
        break
else:
    print("not-run")
PY
)
bench=1
if [ "${SKIP_BENCH:-0}" = 1 ]; then bench=0; why="SKIP_BENCH=1"
elif [ "$e3_run1" = failed ]; then
  bench=0; why="eagle3_cuda in run 1: $e3_run1 (fix it first)"
elif [ $ready = 0 ] && [ "$(left)" -lt $(( E3_NEED + ${E3_WRITE_S:-110} + 10 )) ]; then
  bench=0; why="no target + head from run 1 in $E3_WORK and $(left) s left is too little to write them"
elif [ "$(left)" -lt $(( E3_NEED + 10 )) ]; then bench=0; why="$(left) s left < $E3_NEED s + 10"; fi
need=0
[ $bench = 1 ] && need=$(( E3_NEED + 10 )) && [ $ready = 0 ] && need=$(( need + ${E3_WRITE_S:-110} ))
san_s=$(( $(left) - need - 10 ))
[ "$san_s" -gt "${SAN2_S:-50}" ] && [ $bench = 1 ] && san_s=${SAN2_S:-50}
[ $bench = 0 ] && note "bench_eagle3_gpu" "SKIP ($why)"
echo "plan: sanitizers ${san_s} s, EAGLE-3 benchmark $([ $bench = 1 ] && echo "yes (target+head ready: $ready)" || echo no); eagle3_cuda in run 1: $e3_run1"

# ---- A. racecheck + synccheck --------------------------------------------------------------
if [ "$san_s" -lt 20 ]; then
  note "racecheck, synccheck" "SKIP (${san_s} s left for them)"
elif [ "${SKIP_SAN:-0}" != 1 ] && command -v compute-sanitizer >/dev/null; then
  (cd "$BDIR" && ctest -L gpu --show-only=json-v1) >"$LOG/gpu_tests.json" 2>/dev/null
  "$PY" - "$LOG/gpu_tests.json" >"$LOG/gpu_tests.tsv" <<'PY'
import json, shlex, sys
for t in json.load(open(sys.argv[1])).get("tests", []):
    if t.get("command"):
        wd = next((p["value"] for p in t.get("properties", []) if p["name"] == "WORKING_DIRECTORY"), ".")
        print(t["name"] + "\t" + wd + "\t" + " ".join(shlex.quote(c) for c in t["command"]))
PY
  san_end=$(( $(now) + san_s ))
  san_one() {  # tool test
    local line wd cmd q=1 r t1 lim
    { [ "$1" = racecheck ] || [ "$1" = initcheck ]; } && q=2
    line=$(awk -F'\t' -v n="$2" '$1 == n' "$LOG/gpu_tests.tsv")
    [ -z "$line" ] && { echo "$1 $2 rc=NOTREG"; return; }
    wd=$(printf '%s' "$line" | cut -f2); cmd=$(printf '%s' "$line" | cut -f3-)
    lim=$(( san_end - $(now) )); [ "$lim" -lt 5 ] && lim=5
    t1=$(now)
    (cd "$wd" && SD_CUDA_TEST_QUICK=$q eval timeout -k 5 "$lim" compute-sanitizer --tool "$1" --print-limit 30 \
       --error-exitcode 99 "$cmd") >"$LOG/$1_$2.log" 2>&1
    r=$?
    echo "$1 $2 rc=$r $(( $(now) - t1 ))s limit=${lim}s"
  }
  for tool in $SAN2_TOOLS; do
    for n in $RACE_TESTS; do san_one "$tool" "$n" >>"$LOG/san_status.txt" & done
  done
  wait
  for tool in $SAN2_TOOLS; do grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$LOG/$tool"_*.log; done >>"$LOG/san_status.txt" 2>/dev/null
  for tool in $SAN2_TOOLS; do
    v=$(awk -v t="$tool" '$1 == t && $3 ~ /^rc=/ { sub("rc=", "", $3);
               if ($3 == "0") c++; else if ($3 == "99") e++; else if ($3 == "77") k++;
               else if ($3 == "124" || $3 == "137") i++; else f++ }
             END { printf "%d clean, %d sanitizer-errors, %d test-fail, %d incomplete, %d skipped", c, e, f, i, k }' \
          "$LOG/san_status.txt")
    case "$v" in "0 clean"*", 0 sanitizer-errors, 0 test-fail, 0 incomplete"*) note "$tool" "NO VERDICT (nothing ran): $v" ;;
                 *" 0 sanitizer-errors, 0 test-fail, 0 incomplete"*) note "$tool" "PASS: $v" ;;
                 *" 0 sanitizer-errors, 0 test-fail"*) note "$tool" "INCOMPLETE: $v" ;;
                 *) note "$tool" "FAIL: $v" ;; esac
  done
else
  note "racecheck, synccheck" "SKIP (compute-sanitizer missing or SKIP_SAN=1)"
fi

# ---- B. the EAGLE-3 GPU benchmark ---------------------------------------------------------------
if [ $bench = 1 ]; then
  rm -rf "$E3_WORK/target-$E3_SHAPE.part" "$E3_WORK/head-$E3_SHAPE.part"
  tiny=(); [ "$E3_SHAPE" = tiny ] && tiny=(--tiny)
  res=$OUT/eagle3_${E3_BACKEND:-cuda}_$(date -u +%F).json
  lim=$(( $(left) - 10 )); [ "$lim" -lt 10 ] && lim=10
  # shellcheck disable=SC2086  # E3_ARGS: words on purpose (e.g. "--reps 2")
  PYTHONUNBUFFERED=1 timeout -k 5 "$lim" "$PY" "$PROJ/bench/eagle3/bench_eagle3_gpu.py" "${tiny[@]}" \
    --backend "${E3_BACKEND:-cuda}" --build "$BDIR" --work "$E3_WORK" --tokenizer "$E3_TOK" --out "$res" ${E3_ARGS:-} \
    >"$LOG/bench_eagle3_gpu.log" 2>&1
  rc=$?
  note "bench_eagle3_gpu" "$([ $rc = 0 ] && echo "PASS ($(el) s): $(basename "$res")" || echo "FAIL/TIMEOUT (rc $rc, limit $lim s, target+head from run 1: $ready)")"
  tail -25 "$LOG/bench_eagle3_gpu.log"
fi
done_ 0

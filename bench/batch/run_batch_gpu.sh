#!/usr/bin/env bash
# run_batch_gpu.sh — issue 14's GPU benchmark: aggregate tokens/s of the scheduler against
# concurrency (1, 2, 4, 8, 16, 32, 64) on a random-weight BF16 checkpoint of the
# Llama-3.2-1B shape, speculative and plain in the same run (bench/batch/batch_throughput.py:
# greedy, outputs checked equal), with two drafts:
#   self   the target drafts for itself (acceptance 1: the upper bound of what drafting buys)
#   small  a random 81M-parameter draft of the same vocabulary (tools/make_random_checkpoint.py
#          --shape draft-1b-small; random weights, so acceptance is near 0: the cost side)
# The ratios that matter are inside one run: tokens/s at C over tokens/s at 1 (target: 32
# sequences >= 12x one), and speculative over plain at each C (where speculation stops paying).
#
# Prepare on the development machine (needs ../shared):
#   mkdir -p .peers/tok && cp ../shared/tokenizers/llama-3-8b/tokenizer*.json .peers/tok/
# On the GPU machine (device run with carry [".peers", ".deb"], after bench/gpu_check.sh build):
#   bash bench/batch/run_batch_gpu.sh BUILD_DIR [self|small ...]      (default: self small)
# Writes $OUT/batch_gpu_<draft>.json and .png, copied to bench/results/batch_<gpu>_<date>_<draft>.*;
# checkpoints go to /tmp (2.5 GB and 0.15 GB, written at disk speed).
# Environment: BATCH_PROMPTS (64), BATCH_N (64), BATCH_CONCURRENCY (1,2,4,8,16,32,64), BATCH_DRAFT_MAX (4).
set -euo pipefail
bdir=${1:?BUILD_DIR}; shift
drafts=${*:-self small}
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$root/out}
mkdir -p "$OUT" "$root/bench/results"
tok=${SPECDEC_BENCH_TOKENIZER:-$root/.peers/tok}
[ -f "$tok/tokenizer.json" ] || { echo "no tokenizer.json in $tok (see the header)"; exit 1; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '_' | tr -cd 'A-Za-z0-9_.-')
stamp=$(date -u +%Y-%m-%d)
ck=/tmp/ckpt-llama-3.2-1b
[ -f "$ck/config.json" ] || python3 "$root/tools/make_random_checkpoint.py" --shape llama-3.2-1b --out "$ck" --tokenizer "$tok" >&2
for d in $drafts; do
  case $d in
    self) dk=$ck ;;
    small)
      dk=/tmp/ckpt-draft-1b-small
      [ -f "$dk/config.json" ] || python3 "$root/tools/make_random_checkpoint.py" --shape draft-1b-small --out "$dk" \
        --tokenizer "$tok" --seed 2 >&2 ;;
    *) echo "unknown draft '$d' (self or small)"; exit 2 ;;
  esac
  res="$OUT/batch_gpu_$d.json"
  python3 "$root/bench/batch/batch_throughput.py" --specdec "$bdir/specdec" --backend cuda --model "$ck" --draft "$dk" \
    --prompts "${BATCH_PROMPTS:-64}" -n "${BATCH_N:-64}" --concurrency "${BATCH_CONCURRENCY:-1,2,4,8,16,32,64}" \
    --draft-max "${BATCH_DRAFT_MAX:-4}" --out "$res" --note "random-weight llama-3.2-1b shape, draft: $d" >&2
  cp "$res" "$root/bench/results/batch_${gpu:-gpu}_${stamp}_$d.json"
  python3 "$root/bench/batch/plot_batch.py" "$res" "$OUT/batch_gpu_$d.png" >&2 2>/dev/null &&
    cp "$OUT/batch_gpu_$d.png" "$root/bench/results/batch_${gpu:-gpu}_${stamp}_$d.png" || echo "plot skipped (matplotlib?)" >&2
done

#!/usr/bin/env bash
# run_decode_vs_llamacpp.sh — plain decoding, specdec vs llama.cpp, on the SAME random-weight
# BF16 checkpoints of the Llama-3.2-1B and Llama-3.1-8B shapes, on one GPU, in one run.
#
# Prepare on the development machine (needs PyPI and ../shared):
#   bash ../shared/peers/llamacpp.sh prepare          # -> .peers/ (add to .git/info/exclude)
#   mkdir -p .peers/tok && cp ../shared/tokenizers/llama-3-8b/tokenizer*.json .peers/tok/
# On the GPU machine (device run with carry [".peers", ".deb"], after bench/gpu_check.sh build):
#   bash bench/decode/run_decode_vs_llamacpp.sh BUILD_DIR [SHAPES...]    (default: llama-3.2-1b llama-3.1-8b)
# Writes $OUT/decode_vs_llamacpp.json (and bench/results/decode_vs_llamacpp_<gpu>_<date>.json) with,
# per shape: specdec tokens/s (median of 3 after a warm-up, 128 generated after a 32-token prompt),
# llama.cpp tg128 tokens/s (llama-bench, 3 repetitions), and their ratio. Checkpoints are written
# to /tmp (2.5 GB and 16 GB; about a minute each at disk speed).
set -euo pipefail
bdir=${1:?BUILD_DIR}; shift
shapes=${*:-llama-3.2-1b llama-3.1-8b}
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$root/out}
mkdir -p "$OUT" "$root/bench/results"
tok=${SPECDEC_BENCH_TOKENIZER:-$root/.peers/tok}
[ -f "$tok/tokenizer.json" ] || { echo "no tokenizer.json in $tok (see the header)"; exit 1; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '_' || echo gpu)
stamp=$(date -u +%Y-%m-%d)
res="$OUT/decode_vs_llamacpp.json"
echo "{\"date\":\"$stamp\",\"gpu\":\"$gpu\",\"commit\":\"$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo none)\",\"shapes\":[" >"$res"
first=1
for s in $shapes; do
  ck=/tmp/ckpt-$s
  [ -f "$ck/config.json" ] || python3 "$root/tools/make_random_checkpoint.py" --shape "$s" --out "$ck" --tokenizer "$tok" >&2
  sd=$("$bdir/bench/decode/bench_decode" -m "$ck" --backend cuda -n 128 --prompt-tokens 32 --reps 3 --label "$s")
  lc=$(bash "$root/.peers/llamacpp.sh" bench "$ck" 128 | tail -1)
  [ $first = 1 ] || echo "," >>"$res"; first=0
  python3 - "$sd" "$lc" "$s" >>"$res" <<'PY'
import json, sys
sd, lc, s = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
print(json.dumps({"shape": s, "specdec": sd, "llama.cpp": lc,
                  "ratio_specdec_over_llamacpp": sd["tokens_per_s"] / lc["tg_tokens_per_s"]}), end="")
PY
  echo "$s: specdec $(echo "$sd" | python3 -c 'import json,sys;print(json.load(sys.stdin)["tokens_per_s"])') tok/s," \
       "llama.cpp $(echo "$lc" | python3 -c 'import json,sys;print(json.load(sys.stdin)["tg_tokens_per_s"])') tok/s" >&2
done
echo "]}" >>"$res"
cp "$res" "$root/bench/results/decode_vs_llamacpp_${gpu}_${stamp}.json"
python3 -c "
import json; d=json.load(open('$res'))
print('%-14s %12s %12s %8s' % ('shape','specdec t/s','llama.cpp','ratio'))
for r in d['shapes']: print('%-14s %12.1f %12.1f %8.3f' % (r['shape'], r['specdec']['tokens_per_s'], r['llama.cpp']['tg_tokens_per_s'], r['ratio_specdec_over_llamacpp']))"

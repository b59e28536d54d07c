#!/usr/bin/env bash
# bench_mla_cache.sh — DeepSeek latent attention on the CPU backend: the KV cache holding the latent
# (kv_b absorbed, since bbcf5b2) against the expanded keys and values (before it), in one run.
#
#   bench_mla_cache.sh NEW_SPECDEC OLD_SPECDEC CHECKPOINT_DIR [PROMPT_TOKENS]
#
# CHECKPOINT_DIR: bench/mla/make_mla_checkpoint.py's (DeepSeek-V2-Lite's attention: 16 heads,
# kv_lora_rank 512, qk_rope 64, qk_nope 128, v 128; 4 layers). Each binary: one greedy generation,
# a prompt of PROMPT_TOKENS (default 1500) single-character tokens, 64 decoded tokens, --ctx 4096
# (the cache is allocated for the whole context), one thread; prints prefill and decode tokens/s and
# the peak resident memory (/usr/bin/time), then the ratios new / old. Outputs must be identical
# (the token ids are compared: greedy, the two computations differ only in rounding).
set -euo pipefail
new=$1 old=$2 ckpt=$3 n=${4:-1500}
prompt=$(python3 -c "import sys; s='And the earth was without form, and void; and darkness was upon the face of the deep. '; print((s * (int(sys.argv[1]) // len(s) + 1))[:int(sys.argv[1])])" "$n")
run() {
    /usr/bin/time -f "RSS_KB %M" "$1" generate -m "$ckpt" -p "$prompt" -n 64 --temp 0 --ignore-eos --backend cpu \
        --drafter none --ctx 4096 -t 1 --json 2>&1
}
declare -A pre dec rss toks
for which in new old; do
    bin=${!which}
    out=$(run "$bin")
    json=$(printf '%s\n' "$out" | grep '^{')
    rss[$which]=$(printf '%s\n' "$out" | awk '/^RSS_KB/ {print $2}')
    pre[$which]=$(printf '%s' "$json" | python3 -c "import json,sys; s=json.load(sys.stdin)['stats']; print(f\"{s['n_prompt']/s['t_prefill_s']:.2f}\")")
    dec[$which]=$(printf '%s' "$json" | python3 -c "import json,sys; s=json.load(sys.stdin)['stats']; print(f\"{(s['n_generated']-1)/(s['t_total_s']-s['t_first_token_s']):.2f}\")")
    toks[$which]=$(printf '%s' "$json" | python3 -c "import json,sys; print(json.load(sys.stdin)['tokens'])")
done
echo "prompt $n tokens, 64 decoded, --ctx 4096, 1 thread"
printf '%-8s %14s %14s %14s\n' cache "prefill tok/s" "decode tok/s" "peak RSS MiB"
printf '%-8s %14s %14s %14d\n' latent "${pre[new]}" "${dec[new]}" $((rss[new] / 1024))
printf '%-8s %14s %14s %14d\n' expanded "${pre[old]}" "${dec[old]}" $((rss[old] / 1024))
python3 -c "import sys; a=[float(x) for x in sys.argv[1:]]; print(f'latent / expanded: prefill {a[0]/a[1]:.2f}x, decode {a[2]/a[3]:.2f}x, peak RSS {a[4]/a[5]:.2f}x')" \
    "${pre[new]}" "${pre[old]}" "${dec[new]}" "${dec[old]}" "${rss[new]}" "${rss[old]}"
[ "${toks[new]}" = "${toks[old]}" ] && echo "outputs: identical token ids" || echo "outputs: DIFFER"

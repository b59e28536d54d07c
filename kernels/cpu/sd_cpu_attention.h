/* sd_cpu_attention.h — causal grouped-query attention of ONE query token.
 *
 * Shapes: q [n_heads, d] (after RoPE); the layer's caches K, V [n_ctx, n_kv_heads, d]
 * (row j = the token at absolute position j, K after RoPE); n_keys = p + 1 where p
 * is the query's position (causal: it sees keys 0..p, its own included);
 * out [n_heads, d]. Query head h reads kv head h / (n_heads / n_kv_heads) (HF
 * repeat_kv). With scale = 1/sqrt(d), in double:
 *     s_j = scale * sd_cpu_dot(q_h, K[j, g])            j = 0..p
 *     w_j = exp(s_j - max_j s_j);  Z = sum_j w_j        (j ascending)
 *     out_h[c] = (float)( (sum_j w_j * V[j, g, c]) / Z ) (j ascending)
 * The result for a query depends only on q and cache rows 0..p, so it is the same
 * whether its token came alone or inside a batch (batch invariance).
 * Scratch: scores [n_keys] doubles, acc [d] doubles. */
#ifndef SD_CPU_ATTENTION_H
#define SD_CPU_ATTENTION_H

#include <stdint.h>

void sd_cpu_attention(const float *q, const float *k_cache, const float *v_cache, int32_t n_keys, int32_t n_heads,
                      int32_t n_kv_heads, int32_t head_dim, double *scores, double *acc, float *out);

/* The same computation over an explicit key sequence: key j is cache row keys[j]
 * (keys NULL: row j). Keys are visited in that order with exactly the arithmetic
 * above, so the output is bitwise that of sd_cpu_attention over the same key vectors
 * stored contiguously in that order. This is how the CPU runner serves a paged cache
 * (a sequence's rows scattered over blocks, core/sd_kv.h) and tree nodes (the cache,
 * then the node's ancestors root-first and itself, docs/TREE.md): either way a token
 * sees the keys plain decoding of its sequence would, in the same order.
 * sd_cpu_attention(n_keys) is this with keys NULL. Scratch: scores [n_keys]. */
void sd_cpu_attention_keys(const float *q, const float *k_cache, const float *v_cache, const int64_t *keys,
                           int32_t n_keys, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, double *scores,
                           double *acc, float *out);

/* Score options of a model's attention. scale 0 means 1/sqrt(head_dim); softcap > 0
 * caps each scaled score as softcap * tanh(s / softcap) (Gemma 2) before the softmax.
 * sinks (GPT-OSS; NULL: none): head h's logit sinks[h] joins its softmax and is dropped,
 * so with m = max(max_j s_j, sinks[h]) the weights become
 *     w_j = exp(s_j - m),  Z = exp(sinks[h] - m) + sum_j w_j   (the sink's term first). */
typedef struct sd_cpu_attn_opts {
    double scale;
    double softcap;
    const float *sinks; /* [n_heads] or NULL */
} sd_cpu_attn_opts;

/* sd_cpu_attention_keys with those options (NULL: the defaults, bitwise the same). A
 * sliding window is the caller's choice of keys: a query at position p over keys of
 * positions > p - window (the tail of its key sequence). */
void sd_cpu_attention_keys_opt(const float *q, const float *k_cache, const float *v_cache, const int64_t *keys,
                               int32_t n_keys, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                               const sd_cpu_attn_opts *opt, double *scores, double *acc, float *out);

/* Heads h0, h0 + h_step, ... (< h1) of sd_cpu_attention_keys_opt (h_step >= 1), each head with
 * exactly its arithmetic: the threaded CPU runner hands different heads of one token to different
 * threads (backends/cpu/sd_cpu_runner.c cpu_attend_all) and the output is bitwise the same. */
void sd_cpu_attention_heads(const float *q, const float *k_cache, const float *v_cache, const int64_t *keys,
                            int32_t n_keys, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                            const sd_cpu_attn_opts *opt, int32_t h0, int32_t h1, int32_t h_step, double *scores,
                            double *acc, float *out);

#endif

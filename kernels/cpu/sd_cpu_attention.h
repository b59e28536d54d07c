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

/* Tree attention (docs/TREE.md): the same computation over the key sequence
 *     rows 0 .. n_prefix - 1, then rows[0], ..., rows[n_rows - 1]
 * (a tree node: the cache, then its ancestors root-first and itself). Keys are visited
 * in that order with exactly the arithmetic above, so a node's output is bitwise the
 * output of sd_cpu_attention for the same key vectors stored contiguously — the chain
 * plain decoding of its path builds. sd_cpu_attention(n_keys) is this with
 * n_prefix = n_keys and no rows. Scratch: scores [n_prefix + n_rows]. */
void sd_cpu_attention_rows(const float *q, const float *k_cache, const float *v_cache, int32_t n_prefix,
                           const int32_t *rows, int32_t n_rows, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                           double *scores, double *acc, float *out);

#endif

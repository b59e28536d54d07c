/* sd_eagle3_cpu.h — the CPU reference forward of an EAGLE-3 draft head with its own draft KV
 * cache (docs/EAGLE3.md §5-7). Inputs are rows of hidden states already captured from the
 * target; the drafter (a later layer) decides which rows to run and wires the outputs.
 *
 * One row = (token x in the TARGET vocabulary, hidden g [H], RoPE position pos):
 *     e   = RMSNorm(E[x]; input_layernorm)         E = the head's embed_tokens or the target's
 *     hn  = RMSNorm(g; hidden_norm)
 *     u   = [e ; hn]                               (2H, embedding first)
 *     q,k,v = u Wq^T, u Wk^T, u Wv^T; RoPE(q, k) at pos with the head's own RoPE; k, v cached
 *     a   = causal GQA attention over the row's keys (below)
 *     h1  = (norm_before_residual ? hn : g) + a Wo^T
 *     h   = h1 + Wdown (silu(RMSNorm(h1) Wgate^T) * (RMSNorm(h1) Wup^T))
 *     hN  = RMSNorm(h; norm);  logits = hN lm_head^T  ([Vd], draft vocabulary)
 *     g_next = norm_output ? hN : h               (the hidden of the next draft step)
 * Target features enter through sd_eagle3_cpu_fuse: g = fc(aux) (+ fc.bias), aux = the concat
 * of the three captured states (low, mid, high layer) after the optional fc_norm / input_norm.
 *
 * The draft KV cache holds rows 0..n_cached-1, each with its k, v and parent. A row's keys:
 *   - chain rows (parents == NULL): every earlier cache row and itself (plain causal);
 *   - tree rows (parents != NULL): cache rows [0, n_shared), then its ancestors root-first
 *     (following parents through rows >= n_shared), then itself — an EAGLE-2 tree node sees
 *     the verified prefix and its own path.
 * Rollback = sd_eagle3_cpu_truncate(n): keep rows 0..n-1 (the verified prefix, §7).
 * Numerics as the target's CPU forward (kernels/cpu: fp32 activations, double accumulation);
 * every output row depends only on its inputs and its keys (batch invariance). */
#ifndef SD_EAGLE3_CPU_H
#define SD_EAGLE3_CPU_H

#include <stdint.h>

#include "sd_eagle3.h"

typedef struct sd_eagle3_cpu sd_eagle3_cpu;

/* The weights every CPU forward over one head reads (core/sd_eagle3.h sd_eagle3_shared, one
 * reference returned): hw validated (sd_eagle3_validate runs here), its F16/BF16 matrices (fc,
 * q/k/v/o, gate/up/down, lm_head) widened once to one F32 copy when they total at most 64 Mi
 * floats (256 MiB; beyond that, or when that allocation fails, the forward converts rows per
 * call with the same results). Norms, fc.bias, the embedding and d2t stay views of hw (borrowed,
 * it must outlive the object). Errors: the head's (FORMAT, MODEL_MISMATCH), OUT_OF_MEMORY. */
specdec_status sd_eagle3_cpu_shared_create(const sd_eagle3_weights *hw, sd_eagle3_shared **out, sd_errbuf *eb);
/* The weights a forward over sh reads (the widened copy, or sh->hw); NULL when sh is not a CPU
 * head's. */
const sd_eagle3_weights *sd_eagle3_cpu_shared_weights(const sd_eagle3_shared *sh);

/* A forward over the shared weights sh (it takes its own reference). `embed` [V, H] is the
 * embedding to use: the head's own (hw->embed) or, when it has none, the target's; borrowed, it
 * must outlive the object. n_ctx: draft-cache rows; max_rows: most rows one call runs. The
 * cache and buffers are this object's (allocated here, none per call). INVALID_ARGUMENT for bad
 * sizes or an sh of another backend, MODEL_MISMATCH for an embedding of the wrong shape,
 * OUT_OF_MEMORY. */
specdec_status sd_eagle3_cpu_create_shared(sd_eagle3_shared *sh, const sd_tensor *embed, int32_t n_ctx,
                                           int32_t max_rows, sd_eagle3_cpu **out, sd_errbuf *eb);
/* The same over weights of its own (sd_eagle3_cpu_shared_create for this object alone). */
specdec_status sd_eagle3_cpu_create(const sd_eagle3_weights *hw, const sd_tensor *embed, int32_t n_ctx,
                                    int32_t max_rows, sd_eagle3_cpu **out, sd_errbuf *eb);
void sd_eagle3_cpu_destroy(sd_eagle3_cpu *e);

/* g[t] = fc(aux[t]) for t < n: aux [n, 3·tH] fp32 (captured states low|mid|high), g [n, H].
 * INVALID_ARGUMENT when n is outside [1, max_rows]. */
specdec_status sd_eagle3_cpu_fuse(sd_eagle3_cpu *e, const float *aux, int32_t n, float *g);

/* Run n rows appended at cache rows n_cached .. n_cached+n-1: tokens [n] (target ids), g [n, H]
 * (fused target features or earlier g_next), pos [n]. parents NULL: chain rows; else parents[i]
 * is the cache row of row i's parent (-1 or a row < n_shared: directly on the prefix) and
 * n_shared the prefix every tree row sees. Outputs (either may be NULL): logits [n, Vd],
 * g_next [n, H]; g_next may alias g; both NULL: the rows only enter the cache (k, v; no
 * attention, MLP or LM head are computed). On error nothing changes: INVALID_ARGUMENT (n, token,
 * position, parent out of range), CONTEXT_FULL (the cache would exceed n_ctx). */
specdec_status sd_eagle3_cpu_step(sd_eagle3_cpu *e, const int32_t *tokens, const float *g, const int32_t *pos,
                                  int32_t n, const int32_t *parents, int32_t n_shared, float *logits, float *g_next);

/* Keep cache rows [0, n): n in [0, n_cached], else INVALID_ARGUMENT. */
specdec_status sd_eagle3_cpu_truncate(sd_eagle3_cpu *e, int32_t n);
int32_t sd_eagle3_cpu_n_cached(const sd_eagle3_cpu *e);

/* A head runner (core/sd_eagle3.h) over this forward, drafting for `target` (a CPU runner
 * of target_cfg: its group is set to capture the head's three states): the shared weights sh
 * (sd_eagle3_cpu_shared_create; the runner takes its own reference, so the runners of one
 * scheduler read one copy), its own draft cache of n_ctx rows and buffers of `rows` rows (at
 * least SD_RUNNER_TREE_MAX, at most n_ctx). embed as for sd_eagle3_cpu_create_shared. Errors:
 * the head does not fit the target (MODEL_MISMATCH naming both numbers), OUT_OF_MEMORY;
 * nothing is left allocated (sh keeps only the caller's references). */
specdec_status sd_eagle3_cpu_runner_create(sd_eagle3_shared *sh, const sd_tensor *embed, sd_runner *target,
                                           const sd_config *target_cfg, int32_t n_ctx, int32_t rows, sd_runner **out,
                                           sd_errbuf *eb);
/* The weights the forward of a CPU head runner reads (tests: the runners over one sh read the
 * same matrices); NULL when r is not a CPU head runner. */
const sd_eagle3_weights *sd_eagle3_cpu_runner_weights(sd_runner *r);

/* The last error's detail. */
const char *sd_eagle3_cpu_last_error(const sd_eagle3_cpu *e);

#endif

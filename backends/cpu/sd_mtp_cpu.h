/* sd_mtp_cpu.h — a checkpoint's multi-token-prediction layer (GLM-4.5, DeepSeek-V3: model.layers.
 * <num_hidden_layers>.*) as a draft head runner (core/sd_eagle3.h sd_eagle3_runner) on the CPU
 * backend: what the "mtp" drafter (core/sd_drafter_eagle3.c) drafts with, vLLM's "mtp" /
 * "deepseek_mtp" speculative method (docs/DRAFTERS.md "MTP").
 *
 * The layer is loaded as a one-layer model (specdec_model_params.mtp; core/sd_weights.h "An MTP
 * layer run as a draft model") and runs on a CPU runner of its own (its own KV cache of n_ctx
 * rows): head cache row p = (token t_{p+1}, g_p, position p) where g_p is the target's hidden state
 * at p after its final norm (the target group captures hs[n_layers + 1]; fuse copies it) for a
 * verified row, or the previous draft row's MTP output (the layer's residual stream before
 * shared_head.norm: g_next, captured as the inner runner's hs[1]) for a draft row — vLLM's
 * chaining. Chains and EAGLE-2 trees (tree rows: the inner runner's tree over the verified
 * prefix). The logits cover the whole target vocabulary (d2t is the identity). The layer's
 * linear layers and attention run on the inner runner's threads (as many as the target's). */
#ifndef SD_MTP_CPU_H
#define SD_MTP_CPU_H

#include <stdint.h>

#include "sd_eagle3.h"
#include "sd_weights.h"

/* The MTP layer (config mtp) fits the target: the same hidden size and vocabulary (MODEL_MISMATCH naming
 * both, prefixed by `what`, otherwise). */
specdec_status sd_mtp_check_target(const sd_config *mtp, const sd_config *target, const char *what, sd_errbuf *eb);

/* A head runner over the MTP layer mtp (borrowed: it must outlive the runner) drafting for
 * `target` (a CPU runner of target_cfg, whose group is set to capture hs[n_layers + 1]). The
 * layer must fit the target: the same hidden size and vocabulary (MODEL_MISMATCH naming both
 * numbers otherwise). rows: buffers and the most rows one step runs (>= SD_RUNNER_TREE_MAX).
 * Errors: MODEL_MISMATCH, UNSUPPORTED (a target runner that captures nothing), OUT_OF_MEMORY. */
specdec_status sd_mtp_cpu_runner_create(const sd_weights *mtp, sd_runner *target, const sd_config *target_cfg,
                                        int32_t n_ctx, int32_t rows, sd_runner **out, sd_errbuf *eb);

/* The MTP layer's own CPU runner inside a head runner made above (NULL for any other runner):
 * tests read its cache length. */
sd_runner *sd_mtp_cpu_inner(sd_runner *head);

#endif

/* sd_cuda_backend.h — what the rest of specdec sees of the CUDA backend: the runner
 * and the device-resident executors, created from plain C. Free of CUDA types, so the
 * engine includes it in every build; without the toolkit the functions are stubs
 * (backends/cuda/sd_cuda_absent.c) that report SPECDEC_ERR_BACKEND_UNAVAILABLE. */
#ifndef SD_CUDA_BACKEND_H
#define SD_CUDA_BACKEND_H

#include <stdint.h>

#include "specdec.h"
#include "sd_eagle3.h"
#include "sd_error.h"
#include "sd_round.h"
#include "sd_runner.h"
#include "sd_weights.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A standalone CUDA runner of validated weights on `device` (weights converted to BF16
 * when F32 unless keep_f32): a private group of ceil(n_ctx / 16) blocks whose one
 * sequence it is. BACKEND_UNAVAILABLE when CUDA is not built in or no device is
 * usable; UNSUPPORTED for shapes the kernels do not serve (head_dim > 256). On failure
 * *out = NULL and the detail is in eb. */
specdec_status sd_cuda_runner_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t device,
                                     int32_t keep_f32, sd_runner **out, sd_errbuf *eb);

/* A runner group (core/sd_runner.h "Groups and batches": one copy of the weights on
 * `device`, a paged KV pool of n_blocks blocks of block_tokens rows, sequences added
 * with sd_runner_group_add, batched forwards with sd_runner_forward_batch, native tree
 * forwards and compaction). max_batch: most tokens per pass (0 or > n_ctx: n_ctx).
 * Errors as sd_cuda_runner_create, plus INVALID_ARGUMENT for an empty pool. Its
 * runners are driven by the batched device executor (sd_cuda_batch_exec_create) or the
 * host round; the single-sequence device round takes standalone runners only. Batch invariance on the GPU: docs/GPU_FORWARD.md "Runner groups". */
specdec_status sd_cuda_group_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t n_blocks,
                                    int32_t block_tokens, int32_t device, int32_t keep_f32, sd_runner_group **out,
                                    sd_errbuf *eb);

/* The device-resident EXECUTOR (core/sd_round.h; backends/cuda/sd_cuda_round.cu) over
 * two standalone CUDA runners (draft may be NULL: no model drafter) on the same device;
 * the runners are borrowed and must outlive it. It takes one sequence's chains (model
 * drafts with a lag of 1 or 2, deterministic drafts, plain steps) and runs the whole
 * round on the GPU; trees and sequences whose verify pass captures hidden states (an
 * EAGLE-3 head's, sd_round_slot.aux) go to the round's fallback executor. UNSUPPORTED when the
 * vocabulary is beyond the GPU sampler, the runners disagree (device, vocabulary) or one
 * belongs to a group (sd_cuda_group_create). use_graphs: replay each round shape from a
 * CUDA graph captured on first use (1) or enqueue the kernels one by one (0); same
 * results. */
specdec_status sd_cuda_exec_create(sd_runner *target, sd_runner *draft, int use_graphs, sd_exec **out,
                                   sd_errbuf *eb);
/* Switch a device executor between graph replay and direct launches. */
void sd_cuda_exec_use_graphs(sd_exec *ex, int use_graphs);

/* The device-resident BATCHED executor ("cuda-batch", backends/cuda/sd_cuda_batch_round.cu):
 * up to max_seqs (1..SD_ROUND_MAX_SEQS) sequences per wave, each on runners of these
 * groups (sd_round_seq.target of `target`, .draft of `draft`; draft may be NULL: no
 * model drafter), both made by sd_cuda_group_create on one device and borrowed (they
 * must outlive it). Chains, plain steps included, run on the device (logits, sampling
 * and verification there, token ids read back); trees and EAGLE-3 sequences go to the round's fallback
 * executor (a host executor on the same runners); every result is the host executor's,
 * bit for bit. A sequence on other runners: INVALID_ARGUMENT (nothing run). Create:
 * INVALID_ARGUMENT for groups that are not CUDA groups, UNSUPPORTED for two devices or a
 * vocabulary beyond the GPU sampler (use the host executor then), MODEL_MISMATCH for two
 * vocabularies; device memory of about 20 * V bytes per row of max_seqs *
 * (SPECDEC_MAX_DRAFT + 1) rows, capped near 1 GiB (beyond it the protocol runs waves).
 * On failure *out = NULL and the detail is in eb. */
specdec_status sd_cuda_batch_exec_create(sd_runner_group *target, sd_runner_group *draft, int32_t max_seqs,
                                         sd_exec **out, sd_errbuf *eb);

/* An EAGLE-3 head runner on the GPU (backends/cuda/sd_eagle3_cuda.cu; core/sd_eagle3.h): the
 * head's weights uploaded to the target's device (F16/BF16 kept, F32 converted to BF16
 * unless the target's group kept F32 weights; here for this runner alone,
 * sd_cuda_eagle3_shared_create + sd_cuda_eagle3_runner_create_shared share them), its own draft KV cache of n_ctx rows, buffers
 * of `rows` rows (at least SD_RUNNER_TREE_MAX, at most n_ctx), drafting for `target` (a CUDA
 * runner, standalone or grouped, of target_cfg; borrowed: its group is set to capture the
 * head's three states into the head's aux, which is DEVICE memory). A head without its own
 * embedding reads the target group's device embedding. The ops are the CPU head's
 * (backends/cpu/sd_eagle3_cpu.h) with the captured rows on the GPU and g, logits, g_next and
 * q on the host. Errors: the head does not fit the target (MODEL_MISMATCH, sd_eagle3_runner_init),
 * a target that is not a CUDA runner (INVALID_ARGUMENT), head_dim beyond the attention kernel
 * (UNSUPPORTED), OUT_OF_MEMORY; BACKEND_UNAVAILABLE without the toolkit. Nothing is left
 * allocated on failure. */
specdec_status sd_cuda_eagle3_runner_create(const sd_eagle3_weights *hw, sd_runner *target,
                                            const sd_config *target_cfg, int32_t n_ctx, int32_t rows,
                                            sd_runner **out, sd_errbuf *eb);
/* The read-only part of CUDA head runners, made once and shared by every runner over it
 * (core/sd_eagle3.h sd_eagle3_shared; one reference returned): one device arena on the
 * target runner's device holding the weights as above (the head's own embedding too, when it
 * ships one) and the RoPE tables for positions < n_ctx + SD_RUNNER_TREE_MAX. `target` (a
 * CUDA runner of target_cfg) fixes the device and the weight dtype. Errors as
 * sd_cuda_eagle3_runner_create's; nothing is left allocated on failure. */
specdec_status sd_cuda_eagle3_shared_create(const sd_eagle3_weights *hw, sd_runner *target,
                                            const sd_config *target_cfg, int32_t n_ctx, sd_eagle3_shared **out,
                                            sd_errbuf *eb);
/* sd_cuda_eagle3_runner_create over shared weights (the runner takes its own reference): the
 * runner allocates only its own stream, draft KV cache, activations, captured rows and
 * staging. INVALID_ARGUMENT when sh is not a CUDA head's, or was made for another device,
 * weight dtype or n_ctx than this target and n_ctx; else as sd_cuda_eagle3_runner_create. */
specdec_status sd_cuda_eagle3_runner_create_shared(sd_eagle3_shared *sh, sd_runner *target,
                                                   const sd_config *target_cfg, int32_t n_ctx, int32_t rows,
                                                   sd_runner **out, sd_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif

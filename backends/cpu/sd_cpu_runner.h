/* sd_cpu_runner.h — the CPU reference runner (backends/cpu/sd_cpu_runner.c): one
 * model's fp32 paged KV cache and the plain-C forward pass, the oracle the CUDA
 * backend is checked against. */
#ifndef SD_CPU_RUNNER_H
#define SD_CPU_RUNNER_H

#include <stdint.h>

#include "sd_runner.h"
#include "sd_weights.h"

/* A runner over validated weights (sd_weights_validate runs here: MODEL_MISMATCH /
 * FORMAT / UNSUPPORTED naming the fault), n_ctx >= 1 positions, forward calls of at
 * most max_batch in [1, n_ctx] tokens. The weights are borrowed and must outlive the
 * runner. On failure *out = NULL and the detail is in eb. */
specdec_status sd_cpu_runner_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, sd_runner **out,
                                    sd_errbuf *eb);

/* A model instance shared by many sequences (core/sd_runner.h "Groups and batches"):
 * the weights (borrowed), a paged KV pool of n_blocks blocks of block_tokens rows, and
 * activations for passes of max_batch in [1, n_ctx] tokens; sequences of up to n_ctx
 * rows are added with sd_runner_group_add. sd_cpu_runner_create is a private group of
 * ceil(n_ctx / SD_KV_DEFAULT_BLOCK_TOKENS) blocks with one runner, which owns it. On
 * failure *out = NULL and the detail is in eb. */
specdec_status sd_cpu_group_create(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t n_blocks,
                                   int32_t block_tokens, sd_runner_group **out, sd_errbuf *eb);

/* Run the group's passes on n_threads threads (the calling one included; kernels/cpu/
 * sd_cpu_pool.h): n_threads <= 1 stops its workers, more than SD_CPU_POOL_MAX_THREADS are
 * clamped. Results are bitwise the same for every count. Never fails: threads that cannot be
 * started are done without (sd_cpu_group_threads says how many run). Not during a pass. */
void sd_cpu_group_set_threads(sd_runner_group *g, int32_t n_threads);
int32_t sd_cpu_group_threads(const sd_runner_group *g);
struct sd_cpu_pool;
/* Run the group's passes on another group's pool (NULL: one thread), borrowed: it must outlive the
 * group's passes and is never destroyed by it (a draft head's layer on its target's threads: the two
 * never run at once). Its own workers, if any, are stopped. Results are bitwise the same. */
void sd_cpu_group_use_pool(sd_runner_group *g, struct sd_cpu_pool *pool);
/* Its pool (NULL: one thread), for tests and benchmarks (sd_cpu_pool_set_min_work, _jobs). */
struct sd_cpu_pool *sd_cpu_group_pool(sd_runner_group *g);
/* Whether a pass's attention is split over the pool's threads (1, the default, when the pool has
 * workers; 0: on the calling thread alone, the benchmark's baseline: bench/cpu/bench_cpu_forward
 * --ctx). The results are bitwise the same either way. Set it between passes. */
void sd_cpu_group_set_attn_split(sd_runner_group *g, int on);
/* Floats the group's KV cache holds per token and layer (keys and values together): 2 x n_kv_heads x
 * head_dim, or for DeepSeek's latent attention (cfg.mla) kv_lora_rank + rope_dim, its one row serving
 * as key and value. */
int64_t sd_cpu_group_kv_floats(const sd_runner_group *g);
/* The group of a CPU runner (its private one for sd_cpu_runner_create's). */
sd_runner_group *sd_cpu_runner_group(sd_runner *r);
/* The thread pool of a CPU runner's group; NULL for one thread, and for a runner that is not a
 * CPU runner (the EAGLE-3 head runner binds its target's pool for its own linear layers). */
struct sd_cpu_pool *sd_cpu_runner_pool(sd_runner *r);

#endif

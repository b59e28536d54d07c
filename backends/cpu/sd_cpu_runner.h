/* sd_cpu_runner.h — the CPU reference runner (backends/cpu/sd_cpu_runner.c): one
 * model's fp32 KV cache and the plain-C forward pass, the oracle the CUDA backend is
 * checked against. */
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

#endif

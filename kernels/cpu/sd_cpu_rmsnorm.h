/* sd_cpu_rmsnorm.h — RMSNorm as in Hugging Face LlamaRMSNorm.
 *
 * For each of the n rows x[t, 0..dim):
 *     ms  = (1/dim) * sum_c x[t,c]^2            (sum in double, c ascending)
 *     r   = 1 / sqrt(ms + eps)                   (double)
 *     out[t,c] = (float)(x[t,c] * r * w[c])      (double products, rounded once)
 * w is [dim] in any weight dtype. out may alias x. Rows are independent, so a row's
 * result never depends on n (batch invariance). */
#ifndef SD_CPU_RMSNORM_H
#define SD_CPU_RMSNORM_H

#include <stdint.h>
#include "sd_weights.h"

void sd_cpu_rmsnorm(const float *x, const sd_tensor *w, int32_t n, int32_t dim, double eps, float *out);

/* The same with the weight used as (offset + w[c]) in double (Gemma's (1 + w) norms:
 * offset 1); offset 0 is exactly sd_cpu_rmsnorm. */
void sd_cpu_rmsnorm_off(const float *x, const sd_tensor *w, double offset, int32_t n, int32_t dim, double eps,
                        float *out);

#endif

/* sd_cpu_swiglu.c — SiLU-gated MLP activation and the residual add (see sd_cpu_swiglu.h). */
#include "sd_cpu_swiglu.h"
#include "sd_math.h"

void sd_cpu_swiglu(const float *gate, const float *up, int64_t m, float *out) {
    for (int64_t i = 0; i < m; i++) out[i] = (float)(sd_silu((double)gate[i]) * (double)up[i]);
}

void sd_cpu_add(float *x, const float *y, int64_t m) {
    for (int64_t i = 0; i < m; i++) x[i] += y[i];
}

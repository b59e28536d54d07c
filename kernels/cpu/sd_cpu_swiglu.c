/* sd_cpu_swiglu.c — SiLU-gated MLP activation and the residual add (see sd_cpu_swiglu.h). */
#include "sd_cpu_swiglu.h"
#include "sd_math.h"

void sd_cpu_swiglu(const float *gate, const float *up, int64_t m, float *out) {
    for (int64_t i = 0; i < m; i++) out[i] = (float)(sd_silu((double)gate[i]) * (double)up[i]);
}

void sd_cpu_glu(int32_t act, const float *gate, const float *up, int64_t m, float *out) {
    if (act == 0) {
        sd_cpu_swiglu(gate, up, m, out);
        return;
    }
    for (int64_t i = 0; i < m; i++) out[i] = (float)(sd_act_eval(act, (double)gate[i]) * (double)up[i]);
}

void sd_cpu_softcap(float *x, int64_t m, double cap) {
    for (int64_t i = 0; i < m; i++) x[i] = (float)sd_softcap((double)x[i], cap);
}

void sd_cpu_scale(float *x, int64_t m, float s) {
    for (int64_t i = 0; i < m; i++) x[i] *= s;
}

void sd_cpu_div(float *x, int64_t m, float d) {
    for (int64_t i = 0; i < m; i++) x[i] /= d;
}

void sd_cpu_clamp(float *x, int64_t m, float lim) {
    for (int64_t i = 0; i < m; i++) x[i] = x[i] < -lim ? -lim : (x[i] > lim ? lim : x[i]);
}

void sd_cpu_add(float *x, const float *y, int64_t m) {
    for (int64_t i = 0; i < m; i++) x[i] += y[i];
}

void sd_cpu_swiglu_clamped(const float *gu, int64_t m, double alpha, double limit, float *out) {
    for (int64_t i = 0; i < m; i++) {
        double g = (double)gu[2 * i], u = (double)gu[2 * i + 1];
        if (g > limit) g = limit;
        if (u > limit) u = limit;
        if (u < -limit) u = -limit;
        out[i] = (float)((u + 1.0) * g / (1.0 + exp(-alpha * g)));
    }
}

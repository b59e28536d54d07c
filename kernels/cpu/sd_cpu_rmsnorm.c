/* sd_cpu_rmsnorm.c — RMSNorm (see sd_cpu_rmsnorm.h). */
#include <math.h>

#include "sd_cpu_rmsnorm.h"
#include "sd_cpu_dequant.h"

void sd_cpu_rmsnorm_off(const float *x, const sd_tensor *w, double offset, int32_t n, int32_t dim, double eps,
                        float *out) {
    for (int32_t t = 0; t < n; t++) {
        const float *xr = x + (int64_t)t * dim;
        float *yr = out + (int64_t)t * dim;
        double ss = 0.0;
        for (int32_t c = 0; c < dim; c++) ss += (double)xr[c] * (double)xr[c];
        double r = 1.0 / sqrt(ss / (double)dim + eps);
        for (int32_t c = 0; c < dim; c++) {
            double wc = (double)sd_cpu_elem(w, c);
            if (offset != 0.0) wc += offset; /* no offset: the weight's own bits (-0 stays -0) */
            yr[c] = (float)((double)xr[c] * r * wc);
        }
    }
}

void sd_cpu_rmsnorm(const float *x, const sd_tensor *w, int32_t n, int32_t dim, double eps, float *out) {
    sd_cpu_rmsnorm_off(x, w, 0.0, n, dim, eps, out);
}

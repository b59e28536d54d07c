/* cuda_test_util.h — helpers shared by the GPU tests (header-only, plain C): a seeded
 * RNG, dtype packing with the sd_math.h conversions, device buffers that abort the
 * test cleanly, and a tolerance comparison that prints the first mismatches and the
 * max error. NaN never passes a comparison; device outputs are poisoned with 0xFF
 * bytes (NaN in every float dtype) before each run so unwritten elements fail. */
#ifndef CUDA_TEST_UTIL_H
#define CUDA_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "sd_math.h"
#include "sd_model.h"
#include "sd_test.h"
#include "sd_test_util.h"

typedef struct { uint64_t s; } ct_rng;
static inline uint64_t ct_next(ct_rng *r) { return sd_test_splitmix64(&r->s); }
/* Uniform in [-a, a). */
static inline float ct_unif(ct_rng *r, float a) { return (float)(((double)(ct_next(r) >> 11) / 9007199254740992.0 * 2.0 - 1.0) * a); }

/* SD_CUDA_TEST_QUICK set (bench/gpu_check.sh under compute-sanitizer, where every
 * launch is 10-100x slower): tests run a few representative cases instead of all. */
static inline int ct_quick(void) { return getenv("SD_CUDA_TEST_QUICK") != NULL; }

static inline size_t ct_dsize(sd_dtype dt) { return dt == SD_F32 ? 4 : 2; }
static inline const char *ct_dname(sd_dtype dt) { return dt == SD_F32 ? "F32" : dt == SD_F16 ? "F16" : "BF16"; }

/* Pack fp32 values into dt (rounded), and read them back (exact) into vals, so the
 * reference sees exactly the stored values. */
static inline void ct_pack(sd_dtype dt, float *vals, void *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (dt == SD_BF16) {
            uint16_t b = sd_f32_to_bf16(vals[i]);
            ((uint16_t *)out)[i] = b;
            vals[i] = sd_bf16_to_f32(b);
        } else if (dt == SD_F16) {
            uint16_t h = sd_f32_to_f16(vals[i]);
            ((uint16_t *)out)[i] = h;
            vals[i] = sd_f16_to_f32(h);
        } else {
            ((float *)out)[i] = vals[i];
        }
    }
}

static inline int ct_cuda_ok(cudaError_t e, const char *what, int line) {
    if (e == cudaSuccess) return 1;
    fprintf(stderr, "CUDA error at line %d: %s: %s\n", line, what, cudaGetErrorString(e));
    return 0;
}
#define CT_CUDA(stmt) SD_CHECK(ct_cuda_ok((stmt), #stmt, __LINE__), "CUDA call failed")

static inline void *ct_dev_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", bytes);
        exit(1);
    }
    cudaMemset(p, 0xFF, bytes ? bytes : 1); /* poison: NaN in F32/F16/BF16 */
    return p;
}
static inline void *ct_dev_upload(const void *h, size_t bytes) {
    void *d = ct_dev_alloc(bytes);
    cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}
static inline void ct_poison(void *d, size_t bytes) { cudaMemset(d, 0xFF, bytes); }

/* |got - ref| <= atol + rtol * |ref| elementwise, plus ||got - ref|| / ||ref|| <= rel_norm
 * (rel_norm < 0 skips). Prints the first 5 mismatches and the max error. Returns 1 ok. */
static inline int ct_compare(const char *what, const float *got, const float *ref, size_t n, double atol, double rtol,
                      double rel_norm) {
    size_t bad = 0;
    double max_abs = 0.0, num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        int ok = d <= atol + rtol * fabs((double)ref[i]); /* false for NaN */
        if (!ok) {
            if (bad < 5) fprintf(stderr, "  %s: [%zu] got %.9g ref %.9g (diff %.3g)\n", what, i, got[i], ref[i], d);
            bad++;
        }
        if (d > max_abs || d != d) max_abs = d;
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    int ok = bad == 0 && (rel_norm < 0 || rel <= rel_norm) && rel == rel;
    printf("%-52s n=%-8zu max_abs=%.3g rel_norm=%.3g %s\n", what, n, max_abs, rel, ok ? "ok" : "FAIL");
    if (bad) fprintf(stderr, "  %s: %zu of %zu elements outside tolerance\n", what, bad, n);
    return ok;
}

#endif

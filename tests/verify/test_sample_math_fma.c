/* test_sample_math_fma.c — core/sd_sample_rules.h compiled a second time with
 * floating-point contraction forced on (-ffp-contract=fast, plus -mfma on x86-64 so
 * fused multiply-adds actually exist): test_sample_math checks that sd_rule_exp and
 * the fixed-point helpers give the same bits as in the default build, i.e. the spec
 * does not depend on how the compiler treats a * b + c (nvcc fuses by default). */
#include "sd_sample_rules.h"

double sd_test_exp_contracted(double x);
uint64_t sd_test_fix_norm_contracted(double w, uint64_t s_hi, uint64_t s_lo, float *norm);

double sd_test_exp_contracted(double x) { return sd_rule_exp(x); }

uint64_t sd_test_fix_norm_contracted(double w, uint64_t s_hi, uint64_t s_lo, float *norm) {
    sd_u128 s = ((sd_u128)s_hi << 64) | s_lo;
    *norm = sd_rule_norm(w, s);
    return sd_rule_fix(w);
}

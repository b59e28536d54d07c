/* test_sample_math.c — the shared sampling math of core/sd_sample_rules.h (the spec
 * the CPU reference and the CUDA kernels both compute):
 *  - sd_rule_exp against the x87 long double expl (64-bit mantissa, used as the true
 *    value) over 2.2M inputs (uniform over the whole domain, dense over [-40, 0] where
 *    softmax weights live, tiny |x|, near k ln2 reduction boundaries, the subnormal
 *    range): max error <= MAX_ULPS double ulps; the count of bitwise differences from
 *    glibc's exp is printed (it is not the spec any more);
 *  - edge cases: exp(±0) == 1 exactly, -inf -> +0, +inf -> inf, NaN -> NaN, overflow
 *    and underflow thresholds, subnormal results;
 *  - the same functions compiled with contraction forced on (test_sample_math_fma.c,
 *    -ffp-contract=fast -mfma) give identical bits;
 *  - sd_rule_u_target (ceil(u * D), exact) against three independent oracles: long
 *    double for small D, sd_rule_scaled_target on the 2^-32 grid of the RNG, and
 *    ceil(u * 2^62) in double for D = 2^62.
 * Deterministic (fixed seeds); no statistics. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sd_sample_rules.h"
#include "sd_test.h"
#include "sd_test_util.h"

#define MAX_ULPS 2.0

double sd_test_exp_contracted(double x);
uint64_t sd_test_fix_norm_contracted(double w, uint64_t s_hi, uint64_t s_lo, float *norm);

static uint64_t rs = 0x5eed5eedull;
static uint64_t next_u64(void) { return sd_test_splitmix64(&rs); }
static double unit(void) { return (double)(next_u64() >> 11) * 0x1.0p-53; }

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* error of y against the true value t, in ulps of the double nearest t */
static double ulp_err(double y, long double t) {
    if (t == 0.0L) return y == 0.0 ? 0.0 : INFINITY;
    int e;
    frexpl(t, &e);
    int ue = e - 53; /* ulp of a double in [2^(e-1), 2^e) */
    if (ue < -1074) ue = -1074; /* subnormal spacing */
    return (double)(fabsl((long double)y - t) / ldexpl(1.0L, ue));
}

static double max_err;
static double max_err_x;
static long n_checked, n_glibc_diff, n_contract_diff, n_bad;

static void check_exp(double x) {
    double y = sd_rule_exp(x);
    long double t = expl((long double)x);
    double err = ulp_err(y, t);
    n_checked++;
    if (err > max_err) {
        max_err = err;
        max_err_x = x;
    }
    if (!(err <= MAX_ULPS) && n_bad++ < 5) fprintf(stderr, "  exp(%a) = %a, true %La: %.3f ulps\n", x, y, t, err);
    if (!same_bits(y, exp(x))) n_glibc_diff++;
#if defined(SD_TEST_HAVE_FMA_VARIANT)
    if (__builtin_cpu_supports("fma") && !same_bits(y, sd_test_exp_contracted(x)) && n_contract_diff++ < 5)
        fprintf(stderr, "  exp(%a): contracted build %a vs %a\n", x, sd_test_exp_contracted(x), y);
#endif
}

static void test_exp_accuracy(void) {
    for (int i = 0; i < 500000; i++) check_exp(-746.0 + unit() * (709.78 + 746.0));
    for (int i = 0; i < 1000000; i++) check_exp(-40.0 * unit());
    for (int i = 0; i < 200000; i++) check_exp((unit() - 0.5) * 1e-3);
    for (int i = 0; i < 200000; i++) { /* around the reduction boundaries (k + 1/2) ln2 */
        int k = (int)(next_u64() % 2000) - 1050;
        check_exp(((double)k + 0.5) * 0.6931471805599453 + (unit() - 0.5) * 1e-12);
    }
    for (int i = 0; i < 100000; i++) check_exp(-708.5 - unit() * 37.0); /* subnormal results */
    for (int i = 0; i < 200000; i++) check_exp(-unit() * 0x1p-30);
    printf("sd_rule_exp: %ld inputs, max error %.3f ulp at %a; %ld differ from glibc exp in some bit\n", n_checked,
           max_err, max_err_x, n_glibc_diff);
    SD_CHECK(n_bad == 0, "%ld inputs beyond %.1f ulps", n_bad, MAX_ULPS);
#if defined(SD_TEST_HAVE_FMA_VARIANT)
    if (__builtin_cpu_supports("fma")) {
        printf("contracted (-ffp-contract=fast -mfma) build: %ld of %ld differ\n", n_contract_diff, n_checked);
        SD_CHECK(n_contract_diff == 0, "%ld exp results depend on contraction", n_contract_diff);
    } else {
        printf("contracted build not checked: the CPU has no FMA\n");
    }
#endif
}

static void test_exp_edges(void) {
    SD_CHECK(same_bits(sd_rule_exp(0.0), 1.0) && same_bits(sd_rule_exp(-0.0), 1.0), "exp(±0) must be exactly 1");
    SD_CHECK(same_bits(sd_rule_exp(-INFINITY), 0.0), "exp(-inf) = +0");
    SD_CHECK(sd_rule_exp(INFINITY) == INFINITY, "exp(+inf) = inf");
    SD_CHECK(isnan(sd_rule_exp(NAN)) && isnan(sd_rule_exp(-NAN)), "exp(NaN) = NaN");
    SD_CHECK(isfinite(sd_rule_exp(709.78)) && sd_rule_exp(709.78) > 1.7e308, "exp(709.78) finite, near DBL_MAX");
    SD_CHECK(isfinite(sd_rule_exp(709.782712893383)), "exp just below ln(DBL_MAX) finite");
    SD_CHECK(sd_rule_exp(709.79) == INFINITY && sd_rule_exp(1e300) == INFINITY, "overflow -> inf");
    SD_CHECK(sd_rule_exp(-745.0) > 0 && sd_rule_exp(-745.0) < DBL_MIN, "exp(-745) subnormal, not 0");
    SD_CHECK(same_bits(sd_rule_exp(-745.2), 0.0) && same_bits(sd_rule_exp(-800.0), 0.0) &&
                 same_bits(sd_rule_exp(-1e300), 0.0), "underflow -> +0");
    SD_CHECK(same_bits(sd_rule_exp(-745.1), 0x1p-1074), "exp(-745.1) = the smallest subnormal");
    SD_CHECK(same_bits(sd_rule_exp(1.0), 2.718281828459045) || ulp_err(sd_rule_exp(1.0), expl(1.0L)) <= 1.0, "exp(1)");
    /* ln2 multiples: exact powers of two up to the polynomial's rounding */
    for (int k = -1000; k <= 1000; k += 7) {
        double x = (double)k * 0.6931471805599453;
        SD_CHECK(ulp_err(sd_rule_exp(x), expl((long double)x)) <= MAX_ULPS, "exp(%d ln2)", k);
    }
    /* the softmax weights are monotone in practice: sweep [-40, 0] finely */
    long nonmono = 0;
    double prev = 0.0;
    for (int i = 0; i <= 400000; i++) {
        double y = sd_rule_exp(-40.0 + i * 1e-4);
        if (y < prev) nonmono++;
        prev = y;
    }
    printf("monotonicity sweep: %ld decreases in 400001 steps\n", nonmono);
    SD_CHECK(nonmono == 0, "sd_rule_exp decreases %ld times along [-40, 0]", nonmono);
}

static void test_fixed_contracted(void) {
#if defined(SD_TEST_HAVE_FMA_VARIANT)
    if (!__builtin_cpu_supports("fma")) return;
    long bad = 0;
    for (int i = 0; i < 200000; i++) {
        double w = unit();
        uint64_t lo = next_u64() | ((uint64_t)1 << 62), hi = next_u64() % 4;
        float n2;
        uint64_t f2 = sd_test_fix_norm_contracted(w, hi, lo, &n2);
        float n1 = sd_rule_norm(w, ((sd_u128)hi << 64) | lo);
        bad += f2 != sd_rule_fix(w) || memcmp(&n1, &n2, 4) != 0;
    }
    SD_CHECK(bad == 0, "%ld fixed-point results depend on contraction", bad);
#endif
}

static double rand_u(void) { /* (0, 1]: grid, arbitrary, tiny, subnormal, 1 */
    switch (next_u64() % 6) {
    case 0: return 1.0;
    case 1: return ldexp(unit() + 0x1p-53, -(int)(next_u64() % 1100));
    case 2: return (double)((next_u64() >> 32) + 1) * 0x1p-32;
    default: return unit() + 0x1p-53;
    }
}

static void test_u_target(void) {
    long bad_small = 0, bad_grid = 0, bad_62 = 0;
    for (int i = 0; i < 300000; i++) {
        double u = rand_u();
        /* small D: u * D exact in long double (53 + 11 bits) */
        uint64_t ds = 1 + next_u64() % 2047;
        long double exact = (long double)u * (long double)ds;
        sd_u128 t = sd_rule_u_target(u, ds);
        bad_small += (long double)(uint64_t)t != ceill(exact);
        /* the RNG grid: agrees with the word form */
        uint32_t x = (uint32_t)next_u64();
        sd_u128 D = ((sd_u128)(next_u64() % (1u << 20)) << 64) | next_u64();
        if (D == 0) D = 1;
        bad_grid += sd_rule_u_target(((double)x + 1.0) * 0x1p-32, D) != sd_rule_scaled_target(x, D);
        /* D = 2^62: ceil(u 2^62) is exact in double */
        sd_u128 t62 = sd_rule_u_target(u, (sd_u128)1 << 62);
        bad_62 += t62 != (sd_u128)ceil(u * 0x1p62);
    }
    SD_CHECK(bad_small == 0, "%ld u_target mismatches against long double", bad_small);
    SD_CHECK(bad_grid == 0, "%ld u_target mismatches against sd_rule_scaled_target", bad_grid);
    SD_CHECK(bad_62 == 0, "%ld u_target mismatches against ceil(u 2^62)", bad_62);
    SD_CHECK(sd_rule_u_target(0.0, 100) == 0 && sd_rule_u_target(-1.0, 100) == 0 && sd_rule_u_target(NAN, 100) == 0,
             "u <= 0 / NaN -> 0");
    SD_CHECK(sd_rule_u_target(1.5, 100) == 101 && sd_rule_u_target(1.0, 100) == 100, "u > 1 -> D + 1, u = 1 -> D");
    SD_CHECK(sd_rule_u_target(0x1p-1074, 100) == 1 && sd_rule_u_target(0.5, 101) == 51, "tiny u, halves");
    SD_CHECK(sd_rule_cdf_target(0xffffffffu) == ((sd_u128)1 << 62), "u = 1 reaches the whole row");
}

int main(void) {
    test_exp_edges();
    test_exp_accuracy();
    test_fixed_contracted();
    test_u_target();
    return sd_test_done();
}

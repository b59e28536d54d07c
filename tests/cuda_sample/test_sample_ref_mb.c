/* test_sample_ref_mb.c — the multi-block kernels' host emulation (sample_ref_mb.h: per-chunk
 * partial sums, per-pass radix histograms, the combine and crossing-chunk steps, for any
 * block count) against the CPU reference (kernels/cpu/sd_cpu_sample.c, sd_cpu_verify.c:
 * heap ranking and sequential scans), BIT FOR BIT. Runs without a GPU (also under ASan).
 *  (1) processed rows: V in {4096, 32000, 128256, 151936}, every logit kind of
 *      cs_common.h (NaN / Inf / all -inf / ties / colliding weights), the parameter grid
 *      (greedy, T = 0.5 / 1 / 2, top-k 1 / 5 / 50 / 1000, top-p 0.3 / 0.5 / 0.9 / 0.95,
 *      min-p, combinations), block counts 1, 64 and random ones in between: every
 *      probability bitwise equal, same argmax; 16 inverse-CDF samples per row equal;
 *  (2) the draft step (REJECTION / MATCH / GREEDY, Philox words of the right purpose):
 *      q row and token equal sd_sampling_process + sd_verify_draft_sample;
 *  (3) the verifier from target logits, gamma 1..8, all three modes: (n, tokens) equal
 *      sd_verify on CPU-processed rows with the same uniforms;
 *  (4) mutants (a float normaliser sum, a radix pass reading the wrong digit, a crossing
 *      chunk that forgets the chunks before it) must each be caught.
 * Fixed seeds, no statistics. */
#include <stdio.h>
#include <stdlib.h>

#include "cs_common.h"
#include "sd_cpu_verify.h"
#include "sd_rng.h"
#include "sd_test.h"
#include "sample_ref_mb.h"

static const int32_t mb_Vs[4] = {4096, 32000, 128256, 151936};

typedef struct {
    float *l, *pc, *pm, *q, *P, *Pc, *Q, *L;
    double *w;
    void *scratch;
    size_t ss;
} bufs;

static void bufs_init(bufs *b, int32_t V) {
    const size_t R = SPECDEC_MAX_DRAFT + 1;
    b->l = malloc(sizeof(float) * V);
    b->pc = malloc(sizeof(float) * V);
    b->pm = malloc(sizeof(float) * V);
    b->q = malloc(sizeof(float) * V);
    b->P = malloc(sizeof(float) * R * V);
    b->Pc = malloc(sizeof(float) * R * V);
    b->Q = malloc(sizeof(float) * R * V);
    b->L = malloc(sizeof(float) * R * V);
    b->w = malloc(sizeof(double) * V);
    b->ss = sd_sampling_scratch_size(V);
    b->scratch = malloc(b->ss);
}
static void bufs_free(bufs *b) {
    free(b->l); free(b->pc); free(b->pm); free(b->q); free(b->P); free(b->Pc); free(b->Q); free(b->L);
    free(b->w); free(b->scratch);
}

static int32_t pick_nb(cs_rng *r, int k) { return k == 0 ? 1 : k == 1 ? SD_MB_MAX_BLOCKS : 2 + (int32_t)(cs_next(r) % 62); }

/* (1): one row against the CPU for several block counts; returns the number of
 * mismatching (row, nb) pairs + samples. */
static long check_row(bufs *b, int32_t V, int kind, const sd_sampling_params *sp, int n_nb, cs_rng *r) {
    long bad = 0;
    cs_logits(r, kind, b->l, V);
    sd_sampling_process(b->l, V, sp, b->scratch, b->ss, b->pc, NULL);
    for (int k = 0; k < n_nb; k++) {
        const int32_t nb = pick_nb(r, k);
        const int32_t am = srm_process(b->l, V, sp, nb, b->w, b->pm);
        const int rb = memcmp(b->pc, b->pm, sizeof(float) * (size_t)V) != 0 || am != sd_sample_argmax(b->pc, V);
        if (rb && bad < 3 && srm_mutant == SRM_NONE)
            fprintf(stderr, "  row V=%d %s T=%g k=%d p=%g minp=%g nb=%d differs\n", V, cs_kind_name[kind],
                    sp->temperature, sp->top_k, sp->top_p, sp->min_p, nb);
        bad += rb;
        for (int s = 0; s < 16; s++) {
            uint32_t x = (uint32_t)cs_next(r);
            if (s == 0) x = 0xffffffffu;
            if (s == 1) x = 0;
            bad += srm_sample(b->pc, V, nb, x) != sd_sample_inverse_cdf(b->pc, V, sd_rng_u32_to_uniform_double(x));
        }
    }
    return bad;
}

/* (2): the draft step. */
static long check_draft(bufs *b, int32_t V, const sd_sampling_params *sp, specdec_verify_mode mode, cs_rng *r) {
    const uint64_t seed = cs_next(r), seq = cs_next(r) % 100;
    const int64_t pos = (int64_t)(cs_next(r) % 5000);
    const int purpose = sd_rule_draft_purpose(mode);
    const uint32_t x = purpose >= 0 ? sd_rng_u32_at(seed, seq, pos, purpose) : 0u;
    cs_logits(r, (int)(cs_next(r) % CS_KINDS), b->l, V);
    const int32_t nb = pick_nb(r, (int)(cs_next(r) % 3));
    const int32_t tm = srm_draft(mode, b->l, V, sp, nb, x, b->w, b->pm);
    sd_sampling_process(b->l, V, sp, b->scratch, b->ss, b->pc, NULL);
    const int32_t tc = sd_verify_draft_sample(mode, b->pc, V, seed, seq, pos);
    return tm != tc || memcmp(b->pc, b->pm, sizeof(float) * (size_t)V) != 0;
}

/* (3): one verifier round of gamma g. */
static long check_round(bufs *b, int32_t V, int32_t g, specdec_verify_mode mode, const sd_sampling_params *sp,
                        cs_rng *r) {
    int32_t draft[SPECDEC_MAX_DRAFT], om[SPECDEC_MAX_DRAFT + 1], oc[SPECDEC_MAX_DRAFT + 1], nc = -1;
    uint32_t wa[SPECDEC_MAX_DRAFT] = {0}, wsm[SPECDEC_MAX_DRAFT + 1];
    sd_verify_uniforms u;
    for (int32_t i = 0; i <= g; i++) {
        float *Li = b->L + (size_t)i * V, *Pi = b->Pc + (size_t)i * V, *Qi = b->Q + (size_t)i * V;
        cs_logits(r, (cs_next(r) % 4) ? CS_NOISY : (int)(cs_next(r) % CS_KINDS), Li, V);
        sd_sampling_process(Li, V, sp, b->scratch, b->ss, Pi, NULL);
        for (int32_t j = 0; j < V; j++) b->l[j] = 0.8f * Li[j] + (float)cs_normal(r);
        sd_sampling_process(b->l, V, sp, b->scratch, b->ss, Qi, NULL);
        wsm[i] = (uint32_t)cs_next(r);
        u.sample[i] = sd_rng_u32_to_uniform_double(wsm[i]);
        if (i == g) break;
        wa[i] = (uint32_t)cs_next(r);
        u.accept[i] = sd_rng_u32_to_uniform_double(wa[i]);
        const uint32_t c = (uint32_t)(cs_next(r) % 4);
        draft[i] = sd_sample_inverse_cdf(c ? Pi : Qi, V, sd_rng_u32_to_uniform_double((uint32_t)cs_next(r)));
        if (c && mode == SPECDEC_VERIFY_GREEDY) draft[i] = sd_sample_argmax(Pi, V);
        if (c && mode == SPECDEC_VERIFY_MATCH) draft[i] = sd_sample_inverse_cdf(Pi, V, u.sample[i]);
    }
    const int32_t nb = pick_nb(r, (int)(cs_next(r) % 3));
    const int32_t nm = srm_verify(mode, g, V, nb, b->L, sp, b->Q, draft, wa, wsm, b->w, b->P, om);
    sd_verify(mode, g, V, b->Pc, b->Q, draft, &u, oc, &nc, NULL);
    int bad = nm != nc || memcmp(b->P, b->Pc, sizeof(float) * (size_t)(g + 1) * V) != 0;
    for (int32_t i = 0; !bad && i <= nc; i++) bad = om[i] != oc[i];
    if (bad && srm_mutant == SRM_NONE)
        fprintf(stderr, "  round V=%d g=%d mode %d nb=%d: model n=%d, cpu n=%d\n", V, g, mode, nb, nm, nc);
    return bad;
}

static const specdec_verify_mode mb_modes[3] = {SPECDEC_VERIFY_REJECTION, SPECDEC_VERIFY_GREEDY, SPECDEC_VERIFY_MATCH};

/* The whole grid at a given effort; returns mismatches. */
static long run_grid(int n_v, int rows_small, int rounds, int *n_rows, int *n_rounds, uint64_t seed) {
    cs_rng r = {seed};
    long bad = 0;
    for (int vi = 0; vi < n_v; vi++) {
        const int32_t V = mb_Vs[vi];
        bufs b;
        bufs_init(&b, V);
        const int reps = V > 100000 ? 1 : rows_small;
        for (int pi = 0; pi < CS_NPARAMS; pi++)
            for (int k = 0; k < CS_KINDS; k++)
                for (int rep = 0; rep < reps; rep++) {
                    if (V > 100000 && (k + pi) % 3 != 0 && k != CS_TIES) continue;
                    bad += check_row(&b, V, k, &cs_params[pi], V > 100000 ? 2 : 3, &r);
                    (*n_rows)++;
                }
        for (int t = 0; t < 3 * rounds; t++) {
            const specdec_verify_mode mode = mb_modes[t % 3];
            const sd_sampling_params *sp = mode == SPECDEC_VERIFY_GREEDY ? &cs_params[10] : &cs_params[(t / 3) % 10];
            bad += check_draft(&b, V, sp, mode, &r);
            if (V > 100000 && t % 4 != 0) continue;
            bad += check_round(&b, V, 1 + (int32_t)(cs_next(&r) % 8), mode, sp, &r);
            (*n_rounds)++;
        }
        bufs_free(&b);
    }
    return bad;
}

int main(void) {
    int n_rows = 0, n_rounds = 0;
    const long bad = run_grid(4, 1, 8, &n_rows, &n_rounds, 0x5eed);
    printf("multi-block model vs CPU: %d (row, params) cases x block counts, %d verifier rounds: %ld mismatches\n",
           n_rows, n_rounds, bad);
    SD_CHECK(bad == 0, "%ld multi-block emulation results differ from the CPU reference", bad);
    static const char *const names[SRM_NMUT] = {"", "float sum", "radix shift", "cross base"};
    for (int m = 1; m < SRM_NMUT; m++) {
        srm_mutant = m;
        int nr = 0, nv = 0;
        const long mb = run_grid(2, 1, 1, &nr, &nv, 0xbad0 + (uint64_t)m);
        srm_mutant = SRM_NONE;
        printf("mutant '%s': %ld mismatches\n", names[m], mb);
        SD_CHECK(mb > 0, "mutant '%s' not caught", names[m]);
    }
    return sd_test_done();
}

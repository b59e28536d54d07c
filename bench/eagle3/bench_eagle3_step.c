/* bench_eagle3_step.c — the cost of one EAGLE-3 head step against one target step on the CPU
 * (issue 22 item 6: a head step should cost <= 1/L of a target step plus the LM head over the
 * draft vocabulary), and the other per-step costs a speculative round is made of.
 *
 * Loads MODELS/kjv-target, MODELS/kjv-draft and each HEAD directory (default MODELS/kjv-eagle3),
 * fills every KV cache with CTX rows, then times, interleaved, REPS rounds of ITERS calls each:
 *   target 1 row     sd_runner_forward of one row (a plain decode step, LM head over V)
 *   target 5 rows    the verify pass of a gamma = 4 chain
 *   draft 1 row      kjv-draft, one row (a draft-model chain step)
 *   head step        sd_eagle3_cpu_step of one row with logits and g_next (a chain step)
 *   head no-LM       the same row with g_next only (no LM head): LM head = step - no-LM
 *   head fuse        sd_eagle3_cpu_fuse of one row (fc: 3 tH -> H; once per verified row)
 *   head kv-only     a row that only enters the draft cache (the rows of an extend but the last)
 * Every timed call runs at cache position CTX (the row it writes is truncated / rewritten), so
 * the context is the same for all. Prints medians (and min/max) in microseconds and the item-6
 * ratio (head step - head LM head) / (target step / L), which must be <= 1, and writes JSON
 * when OUT is given. A benchmark, not a test: it checks only that the calls succeed.
 *
 * Run: build/bench/eagle3/bench_eagle3_step MODELS [OUT.json] [--head DIR]... [--reps N] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "sd_test.h"
#include "sd_cpu_runner.h"
#include "sd_eagle3_cpu.h"
#include "sd_eagle3.h"
#include "sd_eagle3_load.h"
#include "sd_model.h"

#define CTX 64
#define ITERS 40
#define MAX_HEADS 4
#define N_KINDS 7

static const char *kind_name[N_KINDS] = {"target_1row", "target_5rows", "draft_1row", "head_step",
                                         "head_no_lm_head", "head_fuse_1row", "head_kv_only_1row"};

typedef struct {
    specdec_model *m;
    sd_eagle3_cpu *e;
    float aux[CTX * 3 * 1024], g[CTX * 1024], gn[1024];
    double t[N_KINDS][64];
} head_run;

static specdec_model *load(const char *dir, const char *name) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    specdec_model *m = NULL;
    SD_CHECK(specdec_model_load(p, NULL, &m) == SPECDEC_OK, "load %s: %s", p, specdec_last_error());
    return m;
}

static sd_runner *runner(specdec_model *m, int32_t *tok) {
    sd_runner *r = NULL;
    sd_errbuf eb = {{0}};
    SD_CHECK(sd_cpu_runner_create(&m->w, CTX + 16, CTX, &r, &eb) == SPECDEC_OK, "runner: %s", eb.msg);
    float *lg = malloc(sizeof(float) * CTX * (size_t)m->w.cfg.vocab_size);
    if (r && lg) SD_CHECK(sd_runner_forward(r, tok, CTX, 0, lg) == SPECDEC_OK, "prefill: %s", r->err.msg);
    free(lg);
    return r;
}

/* Fills the head's cache with CTX rows of synthetic features (the cost does not depend on them). */
static int head_prepare(head_run *h, const specdec_model *target, const int32_t *tok) {
    const sd_eagle3_weights *hw = &h->m->eagle3->w;
    int32_t tH = hw->cfg.target_hidden, H = hw->cfg.layer.hidden_size, pos[CTX];
    if (tH > 1024 || H > 1024) return 0;
    const sd_tensor *embed = hw->embed.data ? &hw->embed : &target->w.tok_embd;
    if (sd_eagle3_cpu_create(hw, embed, CTX + 16, CTX, &h->e, NULL) != SPECDEC_OK) return 0;
    for (int i = 0; i < CTX * 3 * tH; i++) h->aux[i] = (float)((i * 37) % 11 - 5) * 0.3f;
    for (int i = 0; i < CTX; i++) pos[i] = i;
    return sd_eagle3_cpu_fuse(h->e, h->aux, CTX, h->g) == SPECDEC_OK &&
           sd_eagle3_cpu_step(h->e, tok, h->g, pos, CTX, NULL, 0, NULL, NULL) == SPECDEC_OK;
}

/* One timed block of ITERS calls of `kind` on head h; returns seconds per call. */
static double head_block(head_run *h, int kind, float *logits) {
    int32_t tok = 52, pos = CTX;
    int ok = 1;
    double a = bench_now_s();
    for (int i = 0; i < ITERS && ok; i++) {
        if (kind == 3) ok = sd_eagle3_cpu_step(h->e, &tok, h->g, &pos, 1, NULL, 0, logits, h->gn) == SPECDEC_OK;
        if (kind == 4) ok = sd_eagle3_cpu_step(h->e, &tok, h->g, &pos, 1, NULL, 0, NULL, h->gn) == SPECDEC_OK;
        if (kind == 5) ok = sd_eagle3_cpu_fuse(h->e, h->aux, 1, h->gn) == SPECDEC_OK;
        if (kind == 6) ok = sd_eagle3_cpu_step(h->e, &tok, h->g, &pos, 1, NULL, 0, NULL, NULL) == SPECDEC_OK;
        if (kind != 5) ok = ok && sd_eagle3_cpu_truncate(h->e, CTX) == SPECDEC_OK;
    }
    SD_CHECK(ok, "head call %s failed", kind_name[kind]);
    return (bench_now_s() - a) / ITERS;
}

static double runner_block(sd_runner *r, const int32_t *tok, int32_t n, float *lg) {
    int ok = 1;
    double a = bench_now_s();
    for (int i = 0; i < ITERS && ok; i++) ok = sd_runner_forward(r, tok, n, CTX, lg) == SPECDEC_OK;
    SD_CHECK(ok, "forward of %d rows: %s", n, r->err.msg);
    return (bench_now_s() - a) / ITERS;
}

typedef struct {
    double med, lo, hi;
} stat3;

static stat3 stats(double *t, int n) {
    double s[64];
    memcpy(s, t, sizeof(double) * (size_t)n);
    const double med = bench_median(s, n); /* sorts s: s[0] and s[n - 1] after it */
    stat3 r = {med, s[0], s[n - 1]};
    return r;
}

static void report(FILE *js, const char *name, const head_run *h0, head_run *heads, int n_heads, int reps,
                   int32_t L) {
    stat3 tg = stats((double *)h0->t[0], reps);
    if (js) fprintf(js, "{\n \"benchmark\": \"EAGLE-3 head step vs target step (CPU)\",\n \"ctx\": %d,\n "
                        "\"iters_per_block\": %d,\n \"reps\": %d,\n \"target_layers\": %d,\n \"unit\": \"us per call\",\n",
                    CTX, ITERS, reps, L);
    for (int k = 0; k < 3; k++) {
        stat3 s = stats((double *)h0->t[k], reps);
        printf("%-22s median %8.1f us  (min %.1f, max %.1f)\n", kind_name[k], 1e6 * s.med, 1e6 * s.lo, 1e6 * s.hi);
        if (js) fprintf(js, " \"%s\": {\"median\": %.1f, \"min\": %.1f, \"max\": %.1f},\n", kind_name[k], 1e6 * s.med,
                        1e6 * s.lo, 1e6 * s.hi);
    }
    if (js) fprintf(js, " \"heads\": {\n");
    for (int i = 0; i < n_heads; i++) {
        head_run *h = &heads[i];
        printf("%s (%s):\n", h->m->path, name);
        if (js) fprintf(js, "  \"%s\": {\n", h->m->path);
        for (int k = 3; k < N_KINDS; k++) {
            stat3 s = stats(h->t[k], reps);
            printf("  %-20s median %8.1f us  (min %.1f, max %.1f)\n", kind_name[k], 1e6 * s.med, 1e6 * s.lo,
                   1e6 * s.hi);
            if (js) fprintf(js, "   \"%s\": {\"median\": %.1f, \"min\": %.1f, \"max\": %.1f},\n", kind_name[k],
                            1e6 * s.med, 1e6 * s.lo, 1e6 * s.hi);
        }
        double step = stats(h->t[3], reps).med, nolm = stats(h->t[4], reps).med;
        double lm = step - nolm, ratio = (step - lm) / (tg.med / L);
        printf("  item 6: head step %.1f us <= target step / L (%.1f / %d = %.1f) + LM head %.1f = %.1f us: %s "
               "(ratio (step - LM head) / (target step / L) = %.3f)\n",
               1e6 * step, 1e6 * tg.med, L, 1e6 * tg.med / L, 1e6 * lm, 1e6 * (tg.med / L + lm),
               step <= tg.med / L + lm ? "yes" : "NO", ratio);
        if (js) fprintf(js, "   \"lm_head_us\": %.1f,\n   \"bound_us\": %.1f,\n   \"ratio\": %.3f,\n   \"meets_bound\": %s\n  }%s\n",
                        1e6 * lm, 1e6 * (tg.med / L + lm), ratio, step <= tg.med / L + lm ? "true" : "false",
                        i + 1 < n_heads ? "," : "");
    }
    if (js) fprintf(js, " }\n}\n");
}

static int parse_args(int argc, char **argv, const char **out, const char **heads, int *n_heads, int *reps) {
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--head") && i + 1 < argc && *n_heads < MAX_HEADS) heads[(*n_heads)++] = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) *reps = atoi(argv[++i]);
        else if (argv[i][0] != '-') *out = argv[i];
        else return 0;
    }
    return *reps >= 1 && *reps <= 64;
}

int main(int argc, char **argv) {
    static head_run heads[MAX_HEADS], base;
    const char *out = NULL, *hdirs[MAX_HEADS], *models = argc > 1 ? argv[1] : "models";
    int n_heads = 0, reps = 15;
    if (argc < 2 || !parse_args(argc, argv, &out, hdirs, &n_heads, &reps)) {
        fprintf(stderr, "usage: bench_eagle3_step MODELS [OUT.json] [--head DIR]... [--reps N<=64]\n");
        return 2;
    }
    specdec_model *t = load(models, "kjv-target"), *d = load(models, "kjv-draft");
    char def[4096];
    snprintf(def, sizeof def, "%s/kjv-eagle3", models);
    if (!n_heads) hdirs[n_heads++] = def;
    int32_t tok[CTX];
    for (int i = 0; i < CTX; i++) tok[i] = (int32_t)(3 + (i * 97) % 2000);
    sd_runner *rt = t ? runner(t, tok) : NULL, *rd = d ? runner(d, tok) : NULL;
    for (int i = 0; i < n_heads; i++) {
        heads[i].m = NULL;
        SD_CHECK(specdec_model_load(hdirs[i], NULL, &heads[i].m) == SPECDEC_OK && heads[i].m->eagle3, "head %s: %s",
                 hdirs[i], specdec_last_error());
        SD_CHECK(heads[i].m && t && head_prepare(&heads[i], t, tok), "head %s: prepare failed", hdirs[i]);
    }
    float *lg = malloc(sizeof(float) * 8 * 4096);
    if (!rt || !rd || !lg || sd_test_fail_count) return sd_test_done();
    for (int rep = 0; rep < reps; rep++) { /* interleaved: load drift hits every kind alike */
        base.t[0][rep] = runner_block(rt, tok, 1, lg);
        base.t[1][rep] = runner_block(rt, tok, 5, lg);
        base.t[2][rep] = runner_block(rd, tok, 1, lg);
        for (int i = 0; i < n_heads; i++)
            for (int k = 3; k < N_KINDS; k++) heads[i].t[k][rep] = head_block(&heads[i], k, lg);
    }
    FILE *js = out ? fopen(out, "w") : NULL;
    report(js, "CPU", &base, heads, n_heads, reps, t->w.cfg.n_layers);
    if (js) fclose(js);
    for (int i = 0; i < n_heads; i++) {
        sd_eagle3_cpu_destroy(heads[i].e);
        specdec_model_free(heads[i].m);
    }
    free(lg);
    sd_runner_destroy(rt);
    sd_runner_destroy(rd);
    specdec_model_free(t);
    specdec_model_free(d);
    return sd_test_done();
}

/* e3_script.h — run a head forward through make_heads.py's scripted drafter life (script.bin:
 * a 12-row prefix, a chain of 3, a rollback, a 3-row re-extend, a chain of 2, a rollback, two
 * tree levels) and compare every op's logits, g_next and q with the float64 reference
 * (eagle3_ref.py). Shared by test_eagle3.c (the CPU forward, tolerance 1e-5) and
 * test_eagle3_cuda.c (the CUDA head, the GPU forward's tolerances). Header-only, static. */
#ifndef E3_SCRIPT_H
#define E3_SCRIPT_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_eagle3.h"
#include "sd_eagle3_load.h"
#include "sd_model.h"
#include "sd_test.h"

/* The forward under test: fuse, step and truncate of one head (ctx). */
typedef struct e3s_head {
    void *ctx;
    specdec_status (*fuse)(void *ctx, const float *aux, int32_t n, float *g);
    specdec_status (*step)(void *ctx, const int32_t *tok, const float *g, const int32_t *pos, int32_t n,
                           const int32_t *par, int32_t n_shared, float *logits, float *g_next);
    /* keep rows [0, n); returns the rows kept */
    int32_t (*truncate)(void *ctx, int32_t n);
    const char *(*error)(void *ctx);
} e3s_head;

typedef struct e3s_tol {
    double logits, g, q; /* relative L2 error of each op's rows */
    double margin;       /* the draft argmax must equal the reference's where the reference's top
                            q exceeds its second by more than this (0: always) */
} e3s_tol;

typedef struct e3s_result {
    int32_t n_ops, n_out, argmax_checked;
    double worst_logits, worst_g, worst_q;
} e3s_result;

/* ||a - ref|| / ||ref|| over n values */
static double e3s_rel_err(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

typedef struct e3s_reader {
    const unsigned char *p, *end;
} e3s_reader;

static int e3s_rd(e3s_reader *s, void *dst, size_t bytes) {
    if ((size_t)(s->end - s->p) < bytes) return 0;
    memcpy(dst, s->p, bytes);
    s->p += bytes;
    return 1;
}

/* The reference's argmax row and whether its top-2 gap clears the margin. */
static int e3s_argmax_ref(const double *rq, int32_t V, double margin, int32_t *top) {
    int32_t a = 0, b = -1;
    for (int32_t t = 1; t < V; t++) {
        if (rq[t] > rq[a]) b = a, a = t;
        else if (b < 0 || rq[t] > rq[b]) b = t;
    }
    *top = a;
    return margin <= 0 || b < 0 || rq[a] - rq[b] > margin;
}

typedef struct e3s_state {
    const e3s_head *h;
    const sd_eagle3_weights *hw;
    const e3s_tol *tol;
    float *all_g; /* every output row's g_next, in order */
    e3s_result *res;
} e3s_state;

/* Compare one op's outputs (n rows) with the reference. */
static void e3s_compare(e3s_state *R, const char *name, int op, int32_t n, const float *logits, const float *g,
                        const double *rl, const double *rg, const double *rq, float *q) {
    const sd_eagle3_weights *hw = R->hw;
    const int32_t H = hw->cfg.layer.hidden_size, Vd = hw->cfg.draft_vocab, V = hw->cfg.layer.vocab_size;
    double el = e3s_rel_err(logits, rl, (size_t)n * Vd), eg = e3s_rel_err(g, rg, (size_t)n * H), eq = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t top = sd_eagle3_q(hw, logits + (size_t)i * Vd, q);
        const double e1 = e3s_rel_err(q, rq + (size_t)i * V, (size_t)V);
        eq = e1 > eq ? e1 : eq;
        int32_t rtop;
        if (!e3s_argmax_ref(rq + (size_t)i * V, V, R->tol->margin, &rtop)) continue;
        R->res->argmax_checked++;
        SD_CHECK(top == rtop, "%s: row %d: draft argmax maps to target id %d, reference %d", name, (int)i, (int)top,
                 (int)rtop);
    }
    SD_CHECK(el < R->tol->logits && eg < R->tol->g && eq < R->tol->q,
             "%s: op %d n %d: rel err logits %.3g g %.3g q %.3g (tolerances %.3g %.3g %.3g)", name, op, (int)n, el, eg,
             eq, R->tol->logits, R->tol->g, R->tol->q);
    e3s_result *res = R->res;
    res->worst_logits = fmax(res->worst_logits, el), res->worst_g = fmax(res->worst_g, eg);
    res->worst_q = fmax(res->worst_q, eq);
}

/* One op 1/2 record: rows in, outputs compared with the reference. */
static int e3s_rows(e3s_state *R, e3s_reader *s, int op, int32_t n, int32_t n_shared, const char *name) {
    const sd_eagle3_weights *hw = R->hw;
    const int32_t H = hw->cfg.layer.hidden_size, Vd = hw->cfg.draft_vocab, V = hw->cfg.layer.vocab_size;
    const int32_t w3 = 3 * hw->cfg.target_hidden;
    int32_t tok[64], pos[64], par[64], src[64];
    if (n < 1 || n > 64 || !e3s_rd(s, tok, 4u * n) || !e3s_rd(s, pos, 4u * n)) return 0;
    if (n_shared >= 0 && !e3s_rd(s, par, 4u * n)) return 0;
    float *g = malloc((size_t)n * H * sizeof(float)), *logits = malloc((size_t)n * Vd * sizeof(float));
    float *q = malloc((size_t)V * sizeof(float)), *aux = malloc((size_t)n * w3 * sizeof(float));
    double *rl = malloc((size_t)n * Vd * 8), *rg = malloc((size_t)n * H * 8), *rq = malloc((size_t)n * V * 8);
    int ok = g && logits && q && aux && rl && rg && rq;
    if (ok && op == 1) {
        ok = e3s_rd(s, aux, (size_t)n * w3 * 4) && R->h->fuse(R->h->ctx, aux, n, g) == SPECDEC_OK;
    } else if (ok) {
        ok = e3s_rd(s, src, 4u * n);
        for (int32_t i = 0; ok && i < n; i++)
            if ((ok = src[i] >= 0 && src[i] < R->res->n_out))
                memcpy(g + (size_t)i * H, R->all_g + (size_t)src[i] * H, (size_t)H * sizeof(float));
    }
    ok = ok && e3s_rd(s, rl, (size_t)n * Vd * 8) && e3s_rd(s, rg, (size_t)n * H * 8) && e3s_rd(s, rq, (size_t)n * V * 8);
    specdec_status st = ok ? R->h->step(R->h->ctx, tok, g, pos, n, n_shared >= 0 ? par : NULL,
                                        n_shared >= 0 ? n_shared : 0, logits, g)
                           : SPECDEC_ERR_INTERNAL;
    SD_CHECK(st == SPECDEC_OK, "%s: step of %d rows: %s", name, (int)n, R->h->error(R->h->ctx));
    if (st == SPECDEC_OK) {
        e3s_compare(R, name, op, n, logits, g, rl, rg, rq, q);
        memcpy(R->all_g + (size_t)R->res->n_out * H, g, (size_t)n * H * sizeof(float));
        R->res->n_out += n;
    }
    free(g), free(logits), free(q), free(aux), free(rl), free(rg), free(rq);
    return ok;
}

/* Run dir/script.bin through head h (fresh, empty cache); every op must succeed and compare
 * within tol. Prints one summary line. */
static void e3s_run(const char *name, const char *dir, const sd_eagle3_weights *hw, const e3s_head *h,
                    const e3s_tol *tol, e3s_result *res) {
    char p[1100];
    memset(res, 0, sizeof *res);
    snprintf(p, sizeof p, "%s/script.bin", dir);
    FILE *f = fopen(p, "rb");
    SD_CHECK(f != NULL, "%s: no script.bin", name);
    if (!f) return;
    static unsigned char buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    e3s_state R = {h, hw, tol, malloc((size_t)256 * hw->cfg.layer.hidden_size * sizeof(float)), res};
    e3s_reader s = {buf, buf + len};
    int32_t hdr[3];
    while (R.all_g && s.p < s.end && e3s_rd(&s, hdr, sizeof hdr)) {
        int ok = 1;
        if (hdr[0] == 3) ok = h->truncate(h->ctx, hdr[1]) == hdr[1];
        else ok = e3s_rows(&R, &s, hdr[0], hdr[1], hdr[2], name);
        SD_CHECK(ok, "%s: script op %d (kind %d) failed", name, (int)res->n_ops, (int)hdr[0]);
        if (!ok) break;
        res->n_ops++;
    }
    SD_CHECK(res->n_ops == 11, "%s: ran %d script ops, expected 11", name, (int)res->n_ops);
    printf("%-28s %d ops, %d rows: max rel err logits %.2e, g_next %.2e, q %.2e; %d argmax rows checked\n", name,
           (int)res->n_ops, (int)res->n_out, res->worst_logits, res->worst_g, res->worst_q, (int)res->argmax_checked);
    free(R.all_g);
}

/* fn(name, dir, head, ctx) for every good head of FIXTURE_DIR/manifest.txt, loaded (a failed
 * load is a failed check); returns the heads run. */
typedef void (*e3s_head_fn)(const char *name, const char *dir, const specdec_model *head, void *ctx);
static int e3s_each_head(const char *fixtures, e3s_head_fn fn, void *ctx) {
    char mpath[1024], name[128], dir[900];
    snprintf(mpath, sizeof mpath, "%s/manifest.txt", fixtures);
    FILE *mf = fopen(mpath, "r");
    SD_CHECK(mf != NULL, "no manifest %s", mpath);
    int n = 0;
    while (mf && fscanf(mf, "%127s %899s", name, dir) == 2) {
        specdec_model *h = NULL;
        const specdec_status st = specdec_model_load(dir, NULL, &h);
        SD_CHECK(st == SPECDEC_OK && h && h->eagle3, "%s: load: %s", name, specdec_last_error());
        if (h && h->eagle3) fn(name, dir, h, ctx), n++;
        specdec_model_free(h);
    }
    if (mf) fclose(mf);
    return n;
}

#endif

/* lp_common.h — shared by the log-probability tests (tests/logprobs, docs/LOGPROBS.md):
 * a recorder for logprob_callback + callback that checks the calling contract as it goes,
 * and the float64 reference: the target runner over the whole sequence in one forward,
 * log_softmax in double. Header-only, static. */
#ifndef LP_COMMON_H
#define LP_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "specdec.h"

#define LP_MAX 512

/* Every logprob_callback and callback of one generation. */
typedef struct lp_rec {
    int32_t n;             /* logprob_callback calls */
    int32_t n_tok;         /* callback calls with a token (>= 0) */
    int32_t bad_order;     /* contract breaches: a token without its logprob call just before, two
                              logprob calls in a row, the token or the position out of order */
    int32_t pending;       /* a logprob call waits for its token */
    int64_t next_pos;      /* the position the next token must have (-1: not checked) */
    int32_t stop_at;       /* logprob_callback returns 1 at this call index (-1: never) */
    int32_t off;           /* logprobs off: tokens come without logprob calls */
    int64_t prompt_end;    /* prompt_logprobs: records at positions < prompt_end are prompt tokens'; */
    struct lp_rec *prompt; /* they go to *prompt (positions 1, 2, ..., before any other call) */
    int32_t tok[LP_MAX], rank[LP_MAX], n_top[LP_MAX];
    float lp[LP_MAX];
    int64_t pos[LP_MAX];
    int32_t top[LP_MAX][SPECDEC_MAX_TOP_LOGPROBS];
    float top_lp[LP_MAX][SPECDEC_MAX_TOP_LOGPROBS];
} lp_rec;

static inline void lp_rec_init(lp_rec *r, int64_t first_pos) {
    memset(r, 0, sizeof *r);
    r->next_pos = first_pos;
    r->stop_at = -1;
}

/* Store v as r's next record; its index, or -1 when r is full. */
static inline int32_t lp_store(lp_rec *r, const specdec_token_logprobs *v) {
    const int32_t i = r->n++;
    if (i >= LP_MAX) return -1;
    r->tok[i] = v->token;
    r->lp[i] = v->logprob;
    r->rank[i] = v->rank;
    r->n_top[i] = v->n_top;
    r->pos[i] = v->position;
    for (int32_t k = 0; k < v->n_top && k < SPECDEC_MAX_TOP_LOGPROBS; k++) {
        r->top[i][k] = v->top_tokens[k];
        r->top_lp[i][k] = v->top_logprobs[k];
    }
    return i;
}

static inline int lp_on_logprob(void *u, const specdec_token_logprobs *v) {
    lp_rec *r = u;
    if (v->n_top < 0 || v->n_top > SPECDEC_MAX_TOP_LOGPROBS) r->bad_order++;
    if (r->prompt && v->position < r->prompt_end) { /* a prompt token: in order from 1, before the rest */
        lp_rec *p = r->prompt;
        if (r->n > 0 || r->n_tok > 0 || v->position != (int64_t)p->n + 1) p->bad_order++;
        const int32_t i = lp_store(p, v);
        return i < 0 || i == p->stop_at;
    }
    if (r->pending || (r->next_pos >= 0 && v->position != r->next_pos)) r->bad_order++;
    if (r->next_pos >= 0) r->next_pos = v->position + 1;
    r->pending = 1;
    const int32_t i = lp_store(r, v);
    return i < 0 || i == r->stop_at;
}

/* r records prompt tokens' records (positions 1..n_prompt-1) into p as well. */
static inline void lp_rec_prompt(lp_rec *r, lp_rec *p, int32_t n_prompt) {
    lp_rec_init(p, 1);
    r->prompt = p;
    r->prompt_end = n_prompt;
}

static inline int lp_on_token(void *u, int32_t token, const char *piece, size_t len) {
    (void)piece;
    (void)len;
    lp_rec *r = u;
    if (token < 0) return 0; /* the flush: no logprob call */
    if (r->off ? r->n != 0 : !r->pending || r->n < 1 || (r->n <= LP_MAX && r->tok[r->n - 1] != token)) r->bad_order++;
    r->pending = 0;
    r->n_tok++;
    return 0;
}

/* 1 if a and b hold the same records, bitwise (values compared as bits). */
static inline int lp_same_records(const lp_rec *a, const lp_rec *b) {
    if (a->n != b->n) return 0;
    for (int32_t i = 0; i < a->n && i < LP_MAX; i++) {
        if (a->tok[i] != b->tok[i] || memcmp(&a->lp[i], &b->lp[i], sizeof(float)) || a->rank[i] != b->rank[i] ||
            a->n_top[i] != b->n_top[i] || a->pos[i] != b->pos[i])
            return 0;
        for (int32_t k = 0; k < a->n_top[i]; k++)
            if (a->top[i][k] != b->top[i][k] || memcmp(&a->top_lp[i][k], &b->top_lp[i][k], sizeof(float))) return 0;
    }
    return 1;
}

/* 1 if a[0..n) == b[0..n). */
static inline int sc_same_tokens(const int32_t *a, const int32_t *b, int32_t n) {
    return n <= 0 || memcmp(a, b, (size_t)n * sizeof(int32_t)) == 0;
}

/* params with logprobs on, recording into r. */
static inline void lp_attach(specdec_generate_params *gp, lp_rec *r, int32_t top) {
    gp->logprobs = 1;
    gp->top_logprobs = top;
    gp->logprob_callback = lp_on_logprob;
    gp->logprob_user_data = r;
    gp->callback = lp_on_token;
    gp->user_data = r;
}

/* The bundled target, draft and EAGLE-3 head (argv[1..3]) and the target's tokenizer;
 * 0, or 1 after printing why. lp_free_models frees what was loaded. */
typedef struct lp_models {
    specdec_model *tm, *dm, *hm;
    specdec_tokenizer *tok;
} lp_models;

static inline int lp_load_models(lp_models *m, char **argv) {
    memset(m, 0, sizeof *m);
    if (specdec_model_load(argv[1], NULL, &m->tm) || specdec_model_load(argv[2], NULL, &m->dm) ||
        specdec_model_load(argv[3], NULL, &m->hm) || specdec_tokenizer_load(argv[1], &m->tok)) {
        fprintf(stderr, "loading the bundled models: %s\n", specdec_last_error());
        return 1;
    }
    return 0;
}

static inline void lp_free_models(lp_models *m) {
    specdec_tokenizer_free(m->tok);
    specdec_model_free(m->hm);
    specdec_model_free(m->dm);
    specdec_model_free(m->tm);
}

/* A CPU engine over target t and draft d (NULL: none) with n_ctx positions; NULL on failure. */
static inline specdec_engine *lp_make_engine(const specdec_model *t, const specdec_model *d, int32_t n_ctx) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = n_ctx;
    specdec_engine *e = NULL;
    SD_CHECK(specdec_engine_create(t, d, &ep, &e) == SPECDEC_OK, "engine: %s", specdec_last_error());
    return e;
}

/* The float64 reference of the sequence seq[0..n_prompt + n_out): log_softmax (in double)
 * of the target's rows from ONE forward of seq[0..n_prompt + n_out - 1) through runner
 * `forward` (the test's choice, see the caller); row p - 1 scores the token at position p. */
typedef int (*lp_forward_fn)(void *ctx, const int32_t *tokens, int32_t n, float *logits);

typedef struct lp_ref {
    int32_t V, n_rows;
    float *logits;      /* [n_rows][V] */
    double *m, *log_sum; /* [n_rows] lp_i = (x_i - m) - log_sum (in double) */
} lp_ref;

static inline int lp_ref_build(lp_ref *ref, lp_forward_fn fwd, void *ctx, int32_t V, const int32_t *seq, int32_t n) {
    ref->V = V;
    ref->n_rows = n;
    ref->logits = malloc((size_t)n * (size_t)V * sizeof(float));
    ref->m = malloc((size_t)n * sizeof(double));
    ref->log_sum = malloc((size_t)n * sizeof(double));
    if (!ref->logits || !ref->m || !ref->log_sum || fwd(ctx, seq, n, ref->logits) != 0) return 1;
    for (int32_t r = 0; r < n; r++) {
        const float *x = ref->logits + (size_t)r * (size_t)V;
        double m = -INFINITY, s = 0.0;
        for (int32_t i = 0; i < V; i++) m = x[i] > m ? x[i] : m;
        for (int32_t i = 0; i < V; i++) s += exp((double)x[i] - m);
        ref->m[r] = m;
        ref->log_sum[r] = log(s);
    }
    return 0;
}

static inline void lp_ref_free(lp_ref *ref) {
    free(ref->logits);
    free(ref->m);
    free(ref->log_sum);
}

static inline double lp_ref_lp(const lp_ref *ref, int32_t row, int32_t tok) {
    return ((double)ref->logits[(size_t)row * (size_t)ref->V + (size_t)tok] - ref->m[row]) - ref->log_sum[row];
}

/* Brute force: rank of tok in row (1 + ids with a strictly larger float logprob, the
 * values rounded as the library reports them) and the top list (sorted by value, ties to
 * the lower id), n_top entries. */
static inline int32_t lp_ref_rank_top(const lp_ref *ref, int32_t row, int32_t tok, int32_t n_top, int32_t *top) {
    const int32_t V = ref->V;
    float vt = (float)lp_ref_lp(ref, row, tok);
    int32_t rank = 1;
    for (int32_t i = 0; i < V; i++) rank += (float)lp_ref_lp(ref, row, i) > vt;
    for (int32_t k = 0; k < n_top; k++) { /* selection: the k-th best not yet taken */
        int32_t best = -1;
        float bv = 0;
        for (int32_t i = 0; i < V; i++) {
            int taken = 0;
            for (int32_t j = 0; j < k; j++) taken |= top[j] == i;
            const float v = (float)lp_ref_lp(ref, row, i);
            if (!taken && (best < 0 || v > bv)) best = i, bv = v;
        }
        top[k] = best;
    }
    return rank;
}

/* One record, index i of r, against row `row` of ref for token tok at position pos: token,
 * position, |logprob - ref| <= tol (max diff into *max_diff), rank and the top list exact, top
 * values within tol. 1 if it agrees; else 0, printed while *bad < 3 (what: "token", ...). */
static inline int lp_record_vs_ref(const char *name, const char *what, const lp_rec *r, int32_t i, const lp_ref *ref,
                                   int32_t row, int32_t tok, int64_t pos, int32_t n_top, double tol, double *max_diff,
                                   int *bad) {
    const double d = fabs((double)r->lp[i] - lp_ref_lp(ref, row, tok));
    if (d > *max_diff) *max_diff = d;
    int32_t top[SPECDEC_MAX_TOP_LOGPROBS];
    const int32_t rank = lp_ref_rank_top(ref, row, tok, n_top, top);
    int ok = r->tok[i] == tok && r->pos[i] == pos && d <= tol && r->rank[i] == rank && r->n_top[i] == n_top;
    for (int32_t k = 0; ok && k < n_top; k++)
        ok = r->top[i][k] == top[k] && fabs((double)r->top_lp[i][k] - lp_ref_lp(ref, row, top[k])) <= tol;
    if (!ok && (*bad)++ < 3)
        fprintf(stderr, "%s: %s %d (id %d, pos %lld): logprob %.9g ref %.9g, rank %d ref %d, top[0] %d ref %d\n",
                name, what, (int)i, (int)r->tok[i], (long long)r->pos[i], (double)r->lp[i], lp_ref_lp(ref, row, tok),
                (int)r->rank[i], (int)rank, n_top ? (int)r->top[i][0] : -1, n_top ? (int)top[0] : -1);
    return ok;
}

/* Check r against the reference of its own sequence (tokens out[0..n_out) after a prompt of
 * n_prompt): every record as lp_record_vs_ref (row n_prompt + i - 1 scores out[i]). Returns the
 * number of failed tokens. */
static inline int lp_check_ref(const char *name, const lp_rec *r, const lp_ref *ref, int32_t n_prompt, const int32_t *out,
                               int32_t n_out, int32_t n_top, double tol, double *max_diff) {
    int bad = 0;
    SD_CHECK(r->n == n_out && r->n_tok == n_out && r->bad_order == 0,
             "%s: %d logprob calls, %d token calls, %d emitted, %d contract breaches", name, (int)r->n, (int)r->n_tok,
             (int)n_out, (int)r->bad_order);
    for (int32_t i = 0; i < n_out && i < r->n && i < LP_MAX; i++)
        lp_record_vs_ref(name, "token", r, i, ref, n_prompt + i - 1, out[i], n_prompt + i, n_top, tol, max_diff, &bad);
    SD_CHECK(bad == 0, "%s: %d tokens disagree with the float64 reference", name, bad);
    return bad;
}

/* Check the prompt records p (positions 1..n_prompt-1 of prompt) against ref (a reference
 * whose rows 0..n_prompt-2 are the prompt's; row i scores prompt[i + 1]): as lp_check_ref.
 * Returns the failed count. */
static inline int lp_check_prompt_ref(const char *name, const lp_rec *p, const lp_ref *ref, const int32_t *prompt,
                                      int32_t n_prompt, int32_t n_top, double tol, double *max_diff) {
    int bad = 0;
    SD_CHECK(p->n == n_prompt - 1 && p->bad_order == 0, "%s: %d prompt records for %d prompt tokens, %d breaches",
             name, (int)p->n, (int)n_prompt, (int)p->bad_order);
    for (int32_t i = 0; i < p->n && i < n_prompt - 1 && i < LP_MAX; i++)
        lp_record_vs_ref(name, "prompt record", p, i, ref, i, prompt[i + 1], i + 1, n_top, tol, max_diff, &bad);
    SD_CHECK(bad == 0, "%s: %d prompt tokens disagree with the float64 reference", name, bad);
    return bad;
}

#endif

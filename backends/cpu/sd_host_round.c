/* sd_host_round.c — the round interface on the host (see sd_host_round.h and
 * core/sd_round.h for the round's steps).
 *
 * A chain round of γ drafts for a sequence of length L (tokens[L-1] pending; the draft
 * has seen tokens[0 .. dkv), dkv = L - n_pend, n_pend = 1 after a rejection or the
 * prefill, 2 after a round that accepted everything):
 *   1. draft: forward tokens[dkv .. L) (n_pend tokens) -> q_1 from its last row; x_1 ~ q_1;
 *      then forward x_i at L + i - 1 -> q_{i+1}, x_{i+1} ~ q_{i+1} (i = 1..γ-1);
 *   2. target: ONE forward of [tokens[L-1], x_1..x_γ] at L - 1 -> p_1..p_{γ+1};
 *   3. verifier (kernels/cpu/sd_cpu_verify.h) with the round's uniforms;
 *   4. target cache -> L + n, draft cache -> min(its length, L + n).
 * A plain step (γ = 0): target forward of tokens[L-1] at L - 1, one token sampled with
 * the target-side sampler, so match mode reproduces plain decoding bit for bit.
 * Any other shape is a tree round (sd_host_tree.c). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime(CLOCK_MONOTONIC) under -std=c11 */
#include "sd_host_round_impl.h"

#include <string.h>
#include <time.h>

#include "sd_alloc.h"
#include "sd_cpu_sample.h"
#include "sd_cpu_verify.h"

double sd_host_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

specdec_status sd_host_runner_fail(sd_host_round *h, sd_runner *r, specdec_status st, const char *what) {
    if (st == SPECDEC_ERR_DEVICE_LOST) h->base.device_lost = 1;
    return sd_fail(&h->base.err, st, "%s forward: %s", what, r->err.msg);
}

specdec_status sd_host_forward(sd_host_round *h, sd_runner *r, const char *what, const int32_t *tokens, int32_t n,
                               int32_t pos, float *logits) {
    specdec_status st = sd_runner_forward_chunked(r, tokens, n, pos, logits);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_host_runner_fail(h, r, st, what);
}

/* Greedy needs only the argmax, which processing preserves, so it skips the work. */
specdec_status sd_host_process(sd_host_round *h, const sd_round_seq *s, float *row) {
    if (s->mode == SPECDEC_VERIFY_GREEDY) return SPECDEC_OK;
    return sd_sampling_process(row, h->V, &s->sp, h->scratch, h->scratch_size, row, &h->base.err);
}

static specdec_status host_begin(sd_round *rd, sd_round_seq *s) {
    sd_host_round *h = (sd_host_round *)rd;
    if (rd->device_lost) return sd_fail(&rd->err, SPECDEC_ERR_DEVICE_LOST, "host round: the device was lost earlier");
    if (s->length < 1) return sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "host round: empty sequence");
    sd_runner_truncate(h->t, 0);
    if (h->d) sd_runner_truncate(h->d, 0);
    if (s->length == 1) return SPECDEC_OK;
    specdec_status st = sd_host_forward(h, h->t, "target prefill", s->tokens, s->length - 1, 0, NULL);
    if (st == SPECDEC_OK && h->d && s->uses_draft)
        st = sd_host_forward(h, h->d, "draft prefill", s->tokens, s->length - 1, 0, NULL);
    return st;
}

/* A plain step: feed tokens[L-1] to the target, sample the token at L. */
static specdec_status host_plain_step(sd_host_round *h, sd_round_seq *s) {
    const int32_t L = s->length;
    double t0 = sd_host_now();
    specdec_status st = sd_host_forward(h, h->t, "target", s->tokens + L - 1, 1, L - 1, h->p_rows);
    double t1 = sd_host_now();
    if (st == SPECDEC_OK) st = sd_host_process(h, s, h->p_rows);
    if (st != SPECDEC_OK) return st;
    s->out[0] = sd_verify_target_sample(s->mode, h->p_rows, h->V, s->seed, s->sequence_id, L);
    s->n_accepted = 0;
    s->n_drafted = 0;
    s->t.draft = 0;
    s->t.target = t1 - t0;
    s->t.verify = sd_host_now() - t1;
    return SPECDEC_OK;
}

specdec_status sd_host_draft_catch_up(sd_host_round *h, sd_round_seq *s) {
    const size_t V = (size_t)h->V;
    const int32_t L = s->length, dkv = sd_runner_kv_len(h->d), n_pend = L - dkv;
    if (n_pend < 1 || n_pend > h->n_prows) /* p_rows holds the catch-up rows */
        return sd_fail(&h->base.err, SPECDEC_ERR_INTERNAL, "host round at length %d: draft cache holds %d tokens",
                       (int)L, (int)dkv);
    specdec_status st = sd_host_forward(h, h->d, "draft", s->tokens + dkv, n_pend, dkv, h->p_rows);
    if (st != SPECDEC_OK) return st;
    memcpy(h->q_rows, h->p_rows + (size_t)(n_pend - 1) * V, V * sizeof(float));
    return sd_host_process(h, s, h->q_rows);
}

/* Step 1: the draft catches up and proposes gamma tokens into vtok[1..gamma]. */
static specdec_status host_draft(sd_host_round *h, sd_round_seq *s, int32_t gamma) {
    const size_t V = (size_t)h->V;
    const int32_t L = s->length;
    specdec_status st = sd_host_draft_catch_up(h, s);
    if (st != SPECDEC_OK) return st;
    for (int32_t i = 0; i < gamma; i++) {
        float *q = h->q_rows + (size_t)i * V;
        if (i > 0) {
            if ((st = sd_host_forward(h, h->d, "draft", h->vtok + i, 1, L + i - 1, q)) != SPECDEC_OK) return st;
            if ((st = sd_host_process(h, s, q)) != SPECDEC_OK) return st;
        }
        h->vtok[1 + i] = sd_verify_draft_sample(s->mode, q, h->V, s->seed, s->sequence_id, L + i);
    }
    return SPECDEC_OK;
}

/* One chain round with gamma >= 1 drafts (see the top of this file). */
static specdec_status host_chain_round(sd_host_round *h, sd_round_seq *s, int32_t gamma) {
    const size_t V = (size_t)h->V;
    const int32_t L = s->length;
    if (sd_runner_kv_len(h->t) != L - 1)
        return sd_fail(&h->base.err, SPECDEC_ERR_INTERNAL, "host round at length %d: target cache holds %d tokens",
                       (int)L, (int)sd_runner_kv_len(h->t));
    double t0 = sd_host_now();
    specdec_status st = host_draft(h, s, gamma);
    if (st != SPECDEC_OK) return st;
    double t1 = sd_host_now();
    h->vtok[0] = s->tokens[L - 1];
    if ((st = sd_host_forward(h, h->t, "target", h->vtok, gamma + 1, L - 1, h->p_rows)) != SPECDEC_OK) return st;
    double t2 = sd_host_now();
    for (int32_t i = 0; i <= gamma; i++)
        if ((st = sd_host_process(h, s, h->p_rows + (size_t)i * V)) != SPECDEC_OK) return st;
    sd_verify_uniforms u;
    sd_verify_fetch_uniforms(s->seed, s->sequence_id, L, gamma, &u);
    st = sd_verify(s->mode, gamma, h->V, h->p_rows, h->q_rows, h->vtok + 1, &u, s->out, &s->n_accepted,
                   &h->base.err);
    if (st != SPECDEC_OK) return st;
    s->n_drafted = gamma;
    s->t.draft = t1 - t0;
    s->t.target = t2 - t1;
    s->t.verify = sd_host_now() - t2;
    /* 4. roll back: the emitted token is pending, the draft keeps the accepted path */
    sd_runner_truncate(h->t, L + s->n_accepted);
    sd_runner_truncate(h->d, L + s->n_accepted);
    return SPECDEC_OK;
}

static specdec_status host_run(sd_round *rd, sd_round_seq *const *seqs, int32_t n_seqs) {
    sd_host_round *h = (sd_host_round *)rd;
    if (rd->device_lost) return sd_fail(&rd->err, SPECDEC_ERR_DEVICE_LOST, "host round: the device was lost earlier");
    if (n_seqs != 1 || !seqs || !seqs[0])
        return sd_fail(&rd->err, n_seqs > 1 ? SPECDEC_ERR_UNSUPPORTED : SPECDEC_ERR_INVALID_ARGUMENT,
                       "host round: %d sequences (one per engine)", (int)n_seqs);
    sd_round_seq *s = seqs[0];
    const int32_t gamma = s->shape.depth;
    if (gamma < 0 || gamma > SPECDEC_MAX_DRAFT || (gamma > 0 && !h->d) || s->length < 1)
        return sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "host round: depth %d, length %d, %s draft",
                       (int)gamma, (int)s->length, h->d ? "with" : "no");
    if (gamma == 0) return host_plain_step(h, s);
    return sd_draft_is_chain(&s->shape) ? host_chain_round(h, s, gamma) : sd_host_tree_round(h, s);
}

static specdec_status host_settle(sd_round *rd, sd_round_seq *s, int32_t length) {
    sd_host_round *h = (sd_host_round *)rd;
    sd_runner_truncate(h->t, length - 1);
    if (h->d) sd_runner_truncate(h->d, length - 1);
    (void)s;
    return SPECDEC_OK;
}

static void host_destroy(sd_round *rd) {
    sd_host_round *h = (sd_host_round *)rd;
    if (!h) return;
    sd_free(h->p_rows);
    sd_free(h->q_rows);
    sd_free(h->vtok);
    sd_free(h->vpar);
    sd_free(h->scratch);
    sd_free(h->pool);
    sd_free(h->tree);
    sd_free(h);
}

static const sd_round_ops sd_host_round_ops = {"host", host_begin, host_run, host_settle, host_destroy};

specdec_status sd_host_round_create(sd_runner *target, sd_runner *draft, sd_round **out, sd_errbuf *eb) {
    if (!out || !target) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "host round: NULL target or out");
    *out = NULL;
    if (target->n_vocab <= 0 || (draft && draft->n_vocab != target->n_vocab))
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "host round: vocabularies %d (target) and %d (draft)",
                       (int)target->n_vocab, draft ? (int)draft->n_vocab : 0);
    sd_host_round *h = sd_calloc(1, sizeof *h);
    if (!h) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "host round: out of memory");
    h->base.ops = &sd_host_round_ops;
    h->t = target;
    h->d = draft;
    h->V = target->n_vocab;
    const size_t V = (size_t)h->V;
    /* with a draft: a whole tree's rows (2 * 65 * V floats, docs/TREE.md) */
    h->n_prows = draft ? SD_RUNNER_TREE_MAX : SPECDEC_MAX_DRAFT + 1;
    h->n_qrows = draft ? SD_RUNNER_TREE_MAX : SPECDEC_MAX_DRAFT;
    h->p_rows = sd_malloc((size_t)h->n_prows * V * sizeof(float));
    h->q_rows = sd_malloc((size_t)h->n_qrows * V * sizeof(float));
    h->vtok = sd_malloc(SD_RUNNER_TREE_MAX * sizeof(int32_t));
    h->vpar = sd_malloc(SD_RUNNER_TREE_MAX * sizeof(int32_t));
    h->scratch_size = sd_sampling_scratch_size(h->V);
    h->scratch = sd_malloc(h->scratch_size);
    int fail = !h->p_rows || !h->q_rows || !h->vtok || !h->vpar || !h->scratch;
    if (draft && !fail) {
        h->pool = sd_malloc(sizeof *h->pool);
        h->tree = sd_malloc(sizeof *h->tree);
        fail = !h->pool || !h->tree;
    }
    if (fail) {
        host_destroy(&h->base);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "host round: allocating round buffers for vocab %d", (int)V);
    }
    *out = &h->base;
    return SPECDEC_OK;
}

/* sd_host_round.c — the round interface on the host (see sd_host_round.h,
 * sd_host_round_impl.h and core/sd_round.h for the round's steps).
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
 * Any other shape is a tree round (sd_host_tree.c).
 * Several sequences: every forward of a step above is one batched forward over all the
 * sequences of a wave (sd_host_round_impl.h); each sequence's decisions use only its
 * own rows and uniforms, so its result is the one it gets alone. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime(CLOCK_MONOTONIC) under -std=c11 */
#include "sd_host_round_impl.h"

#include <string.h>
#include <time.h>

#include "sd_alloc.h"
#include "sd_cpu_sample.h"
#include "sd_cpu_verify.h"

/* Rows of V floats the shared buffers may take (each of p_rows and q_rows) beyond
 * what one sequence's largest round needs. */
#define SD_HOST_ROW_BYTES ((size_t)64 << 20)
/* Tree states of a shared round (a tree sequence beyond them waits for the next wave). */
#define SD_HOST_MAX_TREE_SLOTS 8

double sd_host_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

specdec_status sd_host_batch_fail(sd_host_round *h, specdec_status st, const char *what, const sd_errbuf *eb) {
    if (st == SPECDEC_ERR_DEVICE_LOST) h->base.device_lost = 1;
    return sd_fail(&h->base.err, st, "%s forward: %s", what, eb->msg);
}

specdec_status sd_host_forward_segs(sd_host_round *h, int32_t n, const char *what) {
    if (n == 0) return SPECDEC_OK;
    sd_errbuf eb;
    sd_err_clear(&eb);
    specdec_status st = sd_runner_forward_batch(h->segs, n, &eb);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_host_batch_fail(h, st, what, &eb);
}

/* Greedy needs only the argmax, which processing preserves, so it skips the work. */
specdec_status sd_host_process(sd_host_round *h, const sd_round_seq *s, float *row) {
    if (s->mode == SPECDEC_VERIFY_GREEDY) return SPECDEC_OK;
    return sd_sampling_process(row, h->V, &s->sp, h->scratch, h->scratch_size, row, &h->base.err);
}

/* The sequence's runners: its own, or the round's (an engine). */
static sd_runner *seq_target(const sd_host_round *h, const sd_round_seq *s) { return s->target ? s->target : h->t; }
static sd_runner *seq_draft(const sd_host_round *h, const sd_round_seq *s) { return s->target ? s->draft : h->d; }

static specdec_status host_prefill(sd_host_round *h, sd_runner *r, const char *what, const sd_round_seq *s) {
    specdec_status st = sd_runner_forward_chunked(r, s->tokens, s->length - 1, 0, NULL);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_host_batch_fail(h, st, what, &r->err);
}

static specdec_status host_begin(sd_round *rd, sd_round_seq *s) {
    sd_host_round *h = (sd_host_round *)rd;
    if (rd->device_lost) return sd_fail(&rd->err, SPECDEC_ERR_DEVICE_LOST, "host round: the device was lost earlier");
    sd_runner *t = seq_target(h, s), *d = seq_draft(h, s);
    if (s->length < 1 || !t || !s->tokens)
        return sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "host round: %s", t ? "empty sequence" : "no target runner");
    if (s->uses_draft && (!d || !h->has_draft))
        return sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "host round: a drafting sequence without a draft runner");
    sd_runner_truncate(t, 0);
    if (d) sd_runner_truncate(d, 0);
    if (s->length == 1) return SPECDEC_OK;
    specdec_status st = host_prefill(h, t, "target prefill", s);
    if (st == SPECDEC_OK && d && s->uses_draft) st = host_prefill(h, d, "draft prefill", s);
    return st;
}

static specdec_status host_settle(sd_round *rd, sd_round_seq *s, int32_t length) {
    sd_host_round *h = (sd_host_round *)rd;
    sd_runner *t = seq_target(h, s), *d = seq_draft(h, s);
    if (t) sd_runner_truncate(t, length - 1);
    if (d) sd_runner_truncate(d, length - 1);
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* one wave                                                                   */
/* ------------------------------------------------------------------------- */
static int slot_drafts(const sd_host_slot *sl) { return sl->tree || sl->gamma > 0; }

/* Step 1a: every drafting sequence's draft catches up on tokens[its kv_len .. L) in
 * one batched forward (rows staged in p_rows); q row 0 = its processed last row. */
static specdec_status wave_catch_up(sd_host_round *h, sd_host_slot *sl, int32_t k) {
    const size_t V = (size_t)h->V;
    int32_t n = 0, rows = 0;
    for (int32_t i = 0; i < k; i++) {
        if (!slot_drafts(&sl[i])) continue;
        const sd_round_seq *s = sl[i].s;
        const int32_t L = s->length, dkv = sd_runner_kv_len(sl[i].d);
        if (L - dkv < 1 || rows + (L - dkv) > h->n_prows)
            return sd_fail(&h->base.err, SPECDEC_ERR_INTERNAL, "host round at length %d: draft cache holds %d tokens",
                           (int)L, (int)dkv);
        h->segs[n] = (sd_runner_seg){sl[i].d, s->tokens + dkv, L - dkv, dkv, NULL, 0, h->p_rows + (size_t)rows * V};
        h->slot_of[n++] = i;
        rows += L - dkv;
    }
    specdec_status st = sd_host_forward_segs(h, n, "draft");
    for (int32_t j = 0; j < n && st == SPECDEC_OK; j++) {
        sd_host_slot *x = &sl[h->slot_of[j]];
        memcpy(x->q, h->segs[j].logits + (size_t)(h->segs[j].n - 1) * V, V * sizeof(float));
        st = sd_host_process(h, x->s, x->q);
    }
    return st;
}

/* Step 1b: the chains draft step by step, every step one batched draft forward. */
static specdec_status wave_chain_draft(sd_host_round *h, sd_host_slot *sl, int32_t k) {
    const size_t V = (size_t)h->V;
    int32_t steps = 0;
    for (int32_t i = 0; i < k; i++)
        if (!sl[i].tree && sl[i].gamma > steps) steps = sl[i].gamma;
    specdec_status st = SPECDEC_OK;
    for (int32_t step = 0; step < steps && st == SPECDEC_OK; step++) {
        int32_t n = 0;
        for (int32_t i = 0; i < k; i++) {
            sd_host_slot *x = &sl[i];
            if (x->tree || x->gamma <= step) continue;
            const sd_round_seq *s = x->s;
            const int32_t L = s->length;
            x->vtok[1 + step] = sd_verify_draft_sample(s->mode, x->q + (size_t)step * V, h->V, s->seed, s->sequence_id,
                                                       L + step);
            if (step + 1 >= x->gamma) continue;
            h->segs[n] = (sd_runner_seg){x->d, x->vtok + 1 + step, 1, L + step, NULL, 0, x->q + (size_t)(step + 1) * V};
            h->slot_of[n++] = i;
        }
        st = sd_host_forward_segs(h, n, "draft");
        for (int32_t j = 0; j < n && st == SPECDEC_OK; j++)
            st = sd_host_process(h, sl[h->slot_of[j]].s, h->segs[j].logits);
    }
    return st;
}

/* Step 2: ONE batched target forward over every sequence's verify pass. */
static specdec_status wave_target(sd_host_round *h, sd_host_slot *sl, int32_t k) {
    for (int32_t i = 0; i < k; i++) {
        sd_host_slot *x = &sl[i];
        const int32_t L = x->s->length;
        if (sd_runner_kv_len(x->t) != L - 1)
            return sd_fail(&h->base.err, SPECDEC_ERR_INTERNAL, "host round at length %d: target cache holds %d tokens",
                           (int)L, (int)sd_runner_kv_len(x->t));
        if (x->tree) {
            const int32_t n = sd_host_tree_pass(x);
            h->segs[i] = (sd_runner_seg){x->t, x->vtok, n, L - 1, x->vpar, 0, x->p};
        } else {
            x->vtok[0] = x->s->tokens[L - 1];
            h->segs[i] = (sd_runner_seg){x->t, x->vtok, x->gamma + 1, L - 1, NULL, 0, x->p};
        }
    }
    return sd_host_forward_segs(h, k, "target");
}

/* Steps 3-4 of a chain or plain step: the verifier, then the rollback. */
static specdec_status slot_finish_chain(sd_host_round *h, sd_host_slot *x) {
    sd_round_seq *s = x->s;
    const size_t V = (size_t)h->V;
    const int32_t L = s->length, gamma = x->gamma;
    specdec_status st = SPECDEC_OK;
    for (int32_t i = 0; i <= gamma && st == SPECDEC_OK; i++) st = sd_host_process(h, s, x->p + (size_t)i * V);
    if (st != SPECDEC_OK) return st;
    s->n_drafted = gamma;
    if (gamma == 0) {
        s->out[0] = sd_verify_target_sample(s->mode, x->p, h->V, s->seed, s->sequence_id, L);
        s->n_accepted = 0;
        return SPECDEC_OK;
    }
    sd_verify_uniforms u;
    sd_verify_fetch_uniforms(s->seed, s->sequence_id, L, gamma, &u);
    st = sd_verify(s->mode, gamma, h->V, x->p, x->q, x->vtok + 1, &u, s->out, &s->n_accepted, &h->base.err);
    if (st != SPECDEC_OK) return st;
    /* the emitted token is pending, the draft keeps the accepted path */
    sd_runner_truncate(x->t, L + s->n_accepted);
    sd_runner_truncate(x->d, L + s->n_accepted);
    return SPECDEC_OK;
}

/* Steps 1-4 for the k sequences of a wave. */
static specdec_status run_wave(sd_host_round *h, sd_host_slot *sl, int32_t k) {
    sd_host_slot *trees[SD_HOST_MAX_TREE_SLOTS];
    int32_t n_trees = 0;
    const double t0 = sd_host_now();
    specdec_status st = wave_catch_up(h, sl, k);
    if (st == SPECDEC_OK) st = wave_chain_draft(h, sl, k);
    for (int32_t i = 0; i < k; i++)
        if (sl[i].tree) trees[n_trees++] = &sl[i];
    if (st == SPECDEC_OK && n_trees > 0) st = sd_host_tree_grow(h, trees, n_trees);
    const double t1 = sd_host_now();
    if (st == SPECDEC_OK) st = wave_target(h, sl, k);
    const double t2 = sd_host_now();
    for (int32_t i = 0; i < k && st == SPECDEC_OK; i++)
        st = sl[i].tree ? sd_host_tree_finish(h, &sl[i]) : slot_finish_chain(h, &sl[i]);
    const double t3 = sd_host_now();
    for (int32_t i = 0; i < k; i++) {
        sl[i].s->status = st;
        sl[i].s->t.draft = t1 - t0;
        sl[i].s->t.target = t2 - t1;
        sl[i].s->t.verify = t3 - t2;
    }
    return st;
}

/* ------------------------------------------------------------------------- */
/* run: check, pack into waves                                                */
/* ------------------------------------------------------------------------- */
/* Resolve sequence s into slot x and check it; its row needs in *need_p / *need_q. */
static specdec_status slot_init(sd_host_round *h, sd_host_slot *x, sd_round_seq *s, int32_t *need_p,
                                int32_t *need_q) {
    memset(x, 0, offsetof(sd_host_slot, vtok));
    x->s = s;
    x->t = seq_target(h, s);
    x->d = seq_draft(h, s);
    x->gamma = s->shape.depth;
    s->status = SPECDEC_ERR_INTERNAL; /* until its wave ran */
    if (x->gamma < 0 || x->gamma > SPECDEC_MAX_DRAFT || s->length < 1 || !x->t || !s->tokens ||
        (x->gamma > 0 && (!x->d || !h->has_draft)))
        return sd_fail(&h->base.err, SPECDEC_ERR_INVALID_ARGUMENT, "host round: depth %d, length %d, %s draft",
                       (int)x->gamma, (int)s->length, x->d ? "with" : "no");
    x->tree = x->gamma > 0 && !sd_draft_is_chain(&s->shape);
    *need_q = x->gamma;
    x->n_p = x->gamma + 1;
    if (x->tree) {
        specdec_status st = sd_host_tree_check(h, x);
        if (st != SPECDEC_OK) return st;
        x->n_p = 1 + x->budget;
        /* the draft may expand more nodes than the tree keeps (a later level can push an
         * expanded node out of the best `budget`): up to SPECDEC_MAX_TREE_NODES rows */
        *need_q = SD_RUNNER_TREE_MAX;
    }
    const int32_t n_pend = slot_drafts(x) ? s->length - sd_runner_kv_len(x->d) : 0;
    *need_p = x->n_p > n_pend ? x->n_p : n_pend;
    return SPECDEC_OK;
}

/* The sequences from i on that fit one wave's buffers: their count. */
static int32_t pack_wave(sd_host_round *h, sd_host_slot *sl, const int32_t *np, const int32_t *nq, int32_t i,
                         int32_t n) {
    int32_t k = 0, p = 0, q = 0, t = 0;
    while (i + k < n && p + np[i + k] <= h->n_prows && q + nq[i + k] <= h->n_qrows && (!sl[i + k].tree || t < h->n_trees)) {
        sd_host_slot *x = &sl[i + k];
        x->p = h->p_rows + (size_t)p * (size_t)h->V;
        x->q = h->q_rows ? h->q_rows + (size_t)q * (size_t)h->V : NULL; /* none without a draft */
        if (x->tree) x->ts = &h->trees[t++];
        p += np[i + k];
        q += nq[i + k];
        k++;
    }
    return k;
}

static specdec_status host_run(sd_round *rd, sd_round_seq *const *seqs, int32_t n_seqs) {
    sd_host_round *h = (sd_host_round *)rd;
    if (rd->device_lost) return sd_fail(&rd->err, SPECDEC_ERR_DEVICE_LOST, "host round: the device was lost earlier");
    if (!seqs || n_seqs < 1 || n_seqs > h->max_seqs)
        return sd_fail(&rd->err, n_seqs > h->max_seqs ? SPECDEC_ERR_UNSUPPORTED : SPECDEC_ERR_INVALID_ARGUMENT,
                       "host round: %d sequences (1..%d)", (int)n_seqs, (int)h->max_seqs);
    int32_t np[SD_HOST_MAX_SEQS], nq[SD_HOST_MAX_SEQS];
    for (int32_t i = 0; i < n_seqs; i++) {
        if (!seqs[i]) return sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "host round: sequence %d is NULL", (int)i);
        specdec_status st = slot_init(h, &h->slots[i], seqs[i], &np[i], &nq[i]);
        if (st == SPECDEC_OK && (np[i] > h->n_prows || nq[i] > h->n_qrows))
            st = sd_fail(&rd->err, SPECDEC_ERR_INVALID_ARGUMENT, "host round: a round of %d rows does not fit", (int)np[i]);
        if (st != SPECDEC_OK) return st;
    }
    specdec_status first_fail = SPECDEC_OK;
    for (int32_t i = 0; i < n_seqs;) {
        const int32_t k = pack_wave(h, h->slots, np, nq, i, n_seqs);
        specdec_status st = run_wave(h, h->slots + i, k);
        if (st != SPECDEC_OK && first_fail == SPECDEC_OK) first_fail = st;
        if (rd->device_lost) break;
        i += k;
    }
    return first_fail;
}

/* ------------------------------------------------------------------------- */
/* create / destroy                                                           */
/* ------------------------------------------------------------------------- */
static void host_destroy(sd_round *rd) {
    sd_host_round *h = (sd_host_round *)rd;
    if (!h) return;
    sd_free(h->p_rows);
    sd_free(h->q_rows);
    sd_free(h->scratch);
    sd_free(h->slots);
    sd_free(h->segs);
    sd_free(h->slot_of);
    sd_free(h->trees);
    sd_free(h);
}

static const sd_round_ops sd_host_round_ops = {"host", host_begin, host_run, host_settle, host_destroy};

/* Rows of each buffer: one sequence's largest round, more for several (up to
 * SD_HOST_ROW_BYTES each). */
static void host_size(sd_host_round *h) {
    const int32_t one_p = h->has_draft ? SD_RUNNER_TREE_MAX : SPECDEC_MAX_DRAFT + 1;
    const int32_t one_q = h->has_draft ? SD_RUNNER_TREE_MAX : 0;
    h->n_trees = !h->has_draft ? 0 : h->max_seqs < SD_HOST_MAX_TREE_SLOTS ? h->max_seqs : SD_HOST_MAX_TREE_SLOTS;
    const int64_t cap = (int64_t)(SD_HOST_ROW_BYTES / ((size_t)h->V * sizeof(float)));
    /* every sequence a full chain, and every tree slot a full tree */
    int64_t want_p = (int64_t)h->max_seqs * (SPECDEC_MAX_DRAFT + 1) + (int64_t)h->n_trees * SD_RUNNER_TREE_MAX;
    int64_t want_q = (int64_t)h->max_seqs * SPECDEC_MAX_DRAFT + (int64_t)h->n_trees * SD_RUNNER_TREE_MAX;
    if (want_p > cap) want_p = cap;
    if (want_q > cap) want_q = cap;
    h->n_prows = h->max_seqs > 1 && want_p > one_p ? (int32_t)want_p : one_p;
    h->n_qrows = !h->has_draft ? 0 : h->max_seqs > 1 && want_q > one_q ? (int32_t)want_q : one_q;
}

specdec_status sd_host_round_create_shared(int32_t n_vocab, int has_draft, int32_t max_seqs, sd_round **out,
                                           sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "host round: out is NULL");
    *out = NULL;
    if (n_vocab <= 0 || max_seqs < 1 || max_seqs > SD_HOST_MAX_SEQS)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "host round: vocabulary %d, %d sequences (1..%d)", (int)n_vocab,
                       (int)max_seqs, SD_HOST_MAX_SEQS);
    sd_host_round *h = sd_calloc(1, sizeof *h);
    if (!h) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "host round: out of memory");
    h->base.ops = &sd_host_round_ops;
    h->has_draft = has_draft != 0;
    h->V = n_vocab;
    h->max_seqs = max_seqs;
    host_size(h);
    const size_t V = (size_t)h->V;
    h->p_rows = sd_malloc((size_t)h->n_prows * V * sizeof(float));
    h->q_rows = h->n_qrows ? sd_malloc((size_t)h->n_qrows * V * sizeof(float)) : NULL;
    h->scratch_size = sd_sampling_scratch_size(h->V);
    h->scratch = sd_malloc(h->scratch_size);
    h->slots = sd_malloc((size_t)max_seqs * sizeof *h->slots);
    h->segs = sd_malloc((size_t)max_seqs * sizeof *h->segs);
    h->slot_of = sd_malloc((size_t)max_seqs * sizeof *h->slot_of);
    h->trees = h->n_trees ? sd_malloc((size_t)h->n_trees * sizeof *h->trees) : NULL;
    if (!h->p_rows || (h->n_qrows && !h->q_rows) || !h->scratch || !h->slots || !h->segs || !h->slot_of ||
        (h->n_trees && !h->trees)) {
        host_destroy(&h->base);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "host round: allocating round buffers for vocab %d", (int)V);
    }
    *out = &h->base;
    return SPECDEC_OK;
}

specdec_status sd_host_round_create(sd_runner *target, sd_runner *draft, sd_round **out, sd_errbuf *eb) {
    if (!out || !target) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "host round: NULL target or out");
    *out = NULL;
    if (target->n_vocab <= 0 || (draft && draft->n_vocab != target->n_vocab))
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "host round: vocabularies %d (target) and %d (draft)",
                       (int)target->n_vocab, draft ? (int)draft->n_vocab : 0);
    specdec_status st = sd_host_round_create_shared(target->n_vocab, draft != NULL, 1, out, eb);
    if (st != SPECDEC_OK) return st;
    sd_host_round *h = (sd_host_round *)*out;
    h->t = target;
    h->d = draft;
    return SPECDEC_OK;
}

/* sd_host_round.c — the host executor (sd_host_round.h; the stages' order and meaning
 * are the protocol's, core/sd_round.h and core/sd_round.c).
 *
 * For a slot of length L (tokens[L-1] pending):
 *   draft_forward(0)  the draft runner's catch-up: tokens[L - lag .. L) at L - lag, the
 *                     rows staged in the slot's p rows, the last one processed into q
 *                     row 0; draft_forward(i): x_i at L + i - 1 -> q row i, processed;
 *   draft_sample(i)   x_{i+1} = sd_verify_draft_sample(q row i) at position L + i;
 *   verify_pass       ONE batched target forward: [tokens[L-1], x_1..x_γ] at L - 1, or
 *                     the tree (root and nodes, sd_runner_forward_tree semantics);
 *   verify            every p row processed (kernels/cpu/sd_cpu_sample.c), then
 *                     sd_verify (dense q), sd_verify_det (deterministic drafts) or
 *                     sd_tree_verify with the round's uniforms; a plain step (depth 0)
 *                     samples one token with the target-side sampler, so match mode
 *                     reproduces plain decoding bit for bit.
 * Every forward is one batched forward over the wave's slots; each slot's decisions
 * use only its own rows and uniforms, so its result is the one it gets alone. */
#include "sd_host_round_impl.h"

#include <string.h>

#include "sd_alloc.h"
#include "sd_cpu_logits_proc.h"
#include "sd_cpu_logprobs.h"
#include "sd_cpu_sample.h"
#include "sd_cpu_verify.h"

/* Rows of V floats the shared buffers may take (each of p_rows and q_rows) beyond
 * what one sequence's largest round needs. */
#define SD_HOST_ROW_BYTES ((size_t)64 << 20)
/* Tree pools of a shared executor (a runner-drafter tree beyond them waits for the next wave). */
#define SD_HOST_MAX_TREE_SLOTS 8

specdec_status sd_host_batch_fail(sd_host_exec *h, specdec_status st, const char *what, const sd_errbuf *eb) {
    if (st == SPECDEC_ERR_DEVICE_LOST) h->base.device_lost = 1;
    return sd_fail(&h->base.err, st, "%s forward: %s", what, eb->msg);
}

specdec_status sd_host_forward_segs(sd_host_exec *h, int32_t n, const char *what) {
    if (n == 0) return SPECDEC_OK;
    sd_errbuf eb;
    sd_err_clear(&eb);
    specdec_status st = sd_runner_forward_batch(h->segs, n, &eb);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_host_batch_fail(h, st, what, &eb);
}

/* Greedy needs only the argmax, which processing preserves, so it skips the work. */
specdec_status sd_host_process(sd_host_exec *h, const sd_round_seq *s, float *row) {
    if (s->mode == SPECDEC_VERIFY_GREEDY) return SPECDEC_OK;
    return sd_sampling_process(row, h->V, &s->sp, h->scratch, h->scratch_size, row, &h->base.err);
}

specdec_status sd_host_process_at(sd_host_exec *h, const sd_round_seq *s, float *row, const int32_t *path,
                                  int32_t n_path) {
    if (s->proc) {
        const sd_logits_proc *lp = s->proc;
        sd_logits_proc no_ban;
        int only_end = 0;
        if (lp->grammar) {
            const specdec_status st =
                sd_cpu_logits_grammar(lp, row, h->V, s->tokens, s->length, path, n_path, &only_end, &h->base.err);
            if (st != SPECDEC_OK) return st;
        }
        if (only_end) { /* the grammar is complete: its end tokens may come before min_tokens */
            no_ban = *lp;
            no_ban.min_tokens = 0;
            lp = &no_ban;
        }
        sd_cpu_logits_proc(lp, row, h->V, s->tokens, s->length, path, n_path, h->proc_counts, h->proc_list);
    }
    return sd_host_process(h, s, row);
}

/* The history of tree node j's row (the tokens after tokens[0..length)): its ancestors below
 * the root, root-first, then j itself; their count. */
static int32_t host_tree_path(const sd_tree *tr, int32_t j, int32_t *path) {
    int32_t n = 0;
    for (int32_t a = j; a > 0; a = tr->parent[a]) n++;
    for (int32_t a = j, i = n; a > 0; a = tr->parent[a]) path[--i] = tr->token[a];
    return n;
}

/* ------------------------------------------------------------------------- */
/* waves                                                                      */
/* ------------------------------------------------------------------------- */
static int host_model_tree(const sd_round_slot *x) { return x->tree && !x->det; }

/* Rows of slot x: target rows of its verify pass (or its catch-up, if more) and q rows. */
static void host_needs(const sd_round_slot *x, int32_t *need_p, int32_t *need_q) {
    const int32_t n_p = x->tree ? 1 + (host_model_tree(x) ? x->budget : x->tr.n - 1) : x->depth + 1;
    *need_p = n_p > x->lag ? n_p : x->lag;
    /* a runner drafter may expand more tree nodes than it keeps: up to SD_RUNNER_TREE_MAX rows */
    *need_q = !x->dr || x->det ? 0 : x->tree ? SD_RUNNER_TREE_MAX : x->depth;
}

static specdec_status host_check(sd_exec *ex, const sd_round_slot *x) {
    sd_host_exec *h = (sd_host_exec *)ex;
    int32_t np, nq;
    host_needs(x, &np, &nq);
    if ((x->d && !h->has_draft) || np > h->n_prows || nq > h->n_qrows || (host_model_tree(x) && h->n_trees < 1))
        return sd_fail(&ex->err, SPECDEC_ERR_INVALID_ARGUMENT, "host round: a round of %d rows does not fit%s", (int)np,
                       x->d && !h->has_draft ? " (no draft model)" : "");
    return SPECDEC_OK;
}

/* The slots from xs[0] on that fit one wave's buffers: their count, their rows. */
static int32_t host_pack(sd_exec *ex, sd_round_slot **xs, int32_t n) {
    sd_host_exec *h = (sd_host_exec *)ex;
    int32_t k = 0, p = 0, q = 0, t = 0;
    while (k < n && k < h->max_seqs) {
        sd_round_slot *x = xs[k];
        int32_t np, nq;
        host_needs(x, &np, &nq);
        if (p + np > h->n_prows || q + nq > h->n_qrows || (host_model_tree(x) && t >= h->n_trees)) break;
        x->j = k;
        x->p = h->p_rows + (size_t)p * (size_t)h->V;
        x->q = nq ? h->q_rows + (size_t)q * (size_t)h->V : NULL;
        x->xstate = host_model_tree(x) ? &h->trees[t++] : NULL;
        p += np;
        q += nq;
        k++;
    }
    return k;
}

/* ------------------------------------------------------------------------- */
/* the draft primitives                                                       */
/* ------------------------------------------------------------------------- */
static specdec_status host_draft_forward(sd_exec *ex, sd_round_slot *const *xs, int32_t n, int32_t step) {
    sd_host_exec *h = (sd_host_exec *)ex;
    const size_t V = (size_t)h->V;
    for (int32_t i = 0; i < n; i++) {
        sd_round_slot *x = xs[i];
        const int32_t L = x->s->length, dkv = L - x->lag;
        if (step == 0 && sd_runner_kv_len(x->d) != dkv)
            return sd_fail(&ex->err, SPECDEC_ERR_INTERNAL, "host round at length %d: draft cache holds %d tokens",
                           (int)L, (int)sd_runner_kv_len(x->d));
        h->segs[i] = step == 0 ? (sd_runner_seg){x->d, x->s->tokens + dkv, x->lag, dkv, NULL, 0, x->p, NULL, NULL}
                               : (sd_runner_seg){x->d, x->vtok + step, 1, L + step - 1, NULL, 0, x->q + (size_t)step * V, NULL, NULL};
    }
    specdec_status st = sd_host_forward_segs(h, n, "draft");
    for (int32_t i = 0; i < n && st == SPECDEC_OK; i++) {
        sd_round_slot *x = xs[i];
        if (step == 0) memcpy(x->q, x->p + (size_t)(x->lag - 1) * V, V * sizeof(float));
        st = sd_host_process_at(h, x->s, x->q + (size_t)step * V, x->vtok + 1, step);
    }
    return st;
}

static specdec_status host_draft_sample(sd_exec *ex, sd_round_slot *const *xs, int32_t n, int32_t step) {
    sd_host_exec *h = (sd_host_exec *)ex;
    for (int32_t i = 0; i < n; i++) {
        sd_round_slot *x = xs[i];
        const sd_round_seq *s = x->s;
        x->vtok[1 + step] = sd_verify_draft_sample(s->mode, x->q + (size_t)step * (size_t)h->V, h->V, s->seed,
                                                   s->sequence_id, (int64_t)s->length + step);
    }
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* the verify pass and the verifier                                           */
/* ------------------------------------------------------------------------- */
static specdec_status host_verify_pass(sd_exec *ex, sd_round_slot *const *xs, int32_t k) {
    sd_host_exec *h = (sd_host_exec *)ex;
    for (int32_t i = 0; i < k; i++) {
        sd_round_slot *x = xs[i];
        const int32_t L = x->s->length;
        if (sd_runner_kv_len(x->t) != L - 1)
            return sd_fail(&ex->err, SPECDEC_ERR_INTERNAL, "host round at length %d: target cache holds %d tokens",
                           (int)L, (int)sd_runner_kv_len(x->t));
        if (x->tree) {
            for (int32_t j = 0; j < x->tr.n; j++) {
                x->vtok[j] = x->tr.token[j];
                x->vpar[j] = x->tr.parent[j];
            }
            h->segs[i] = (sd_runner_seg){x->t, x->vtok, x->tr.n, L - 1, x->vpar, 0, x->p, x->aux, NULL};
        } else {
            h->segs[i] = (sd_runner_seg){x->t, x->vtok, x->depth + 1, L - 1, NULL, 0, x->p, x->aux, NULL};
        }
    }
    return sd_host_forward_segs(h, k, "target");
}

/* The log-probabilities of the emitted tokens out[0..n_accepted] from the raw target rows
 * (raw: the slot's rows before processing): out[0] is scored by row 0 (the pending
 * token's), out[i] by the row of the i-th accepted node (a chain: row i; a tree: node
 * path[i-1]'s row). */
static void host_logprobs(const sd_host_exec *h, const sd_round_slot *x, const float *raw) {
    sd_round_seq *s = x->s;
    for (int32_t i = 0; i <= s->n_accepted; i++) {
        const int32_t row = i == 0 ? 0 : x->tree ? x->path[i - 1] : i;
        sd_cpu_logprobs(raw + (size_t)row * (size_t)h->V, h->V, s->out[i], s->top_logprobs, &s->lp[i]);
    }
}

/* The slot's verifier proper: the chain, tree or plain-step rule over processed rows. */
static specdec_status host_verify_rule(sd_host_exec *h, sd_round_slot *x) {
    sd_round_seq *s = x->s;
    const int32_t L = s->length;
    if (x->depth == 0) {
        s->out[0] = sd_verify_target_sample(s->mode, x->p, h->V, s->seed, s->sequence_id, L);
        s->n_accepted = 0;
        return SPECDEC_OK;
    }
    sd_verify_uniforms u;
    sd_verify_fetch_uniforms(s->seed, s->sequence_id, L, x->depth, &u);
    if (x->tree)
        return sd_tree_verify(s->mode, &x->tr, h->V, x->p, x->det ? NULL : x->q, &u, x->path, s->out, &s->n_accepted,
                              &h->base.err);
    if (x->det) return sd_verify_det(s->mode, x->depth, h->V, x->p, x->vtok + 1, &u, s->out, &s->n_accepted, &h->base.err);
    return sd_verify(s->mode, x->depth, h->V, x->p, x->q, x->vtok + 1, &u, s->out, &s->n_accepted, &h->base.err);
}

/* One slot's verifier: its rows processed (the raw rows kept first when it reports
 * log-probabilities and processing changes them), the rule, the log-probabilities. */
static specdec_status host_verify_slot(sd_host_exec *h, sd_round_slot *x) {
    sd_round_seq *s = x->s;
    const size_t V = (size_t)h->V;
    const int32_t rows = x->tree ? x->tr.n : x->depth + 1;
    /* greedy leaves rows raw unless processors change them */
    const int keep_raw = s->logprobs && (s->mode != SPECDEC_VERIFY_GREEDY || s->proc);
    if (keep_raw && !h->raw_rows) { /* the first such sequence: kept for the executor's life */
        h->raw_rows = sd_malloc((size_t)SD_RUNNER_TREE_MAX * V * sizeof(float));
        if (!h->raw_rows)
            return sd_fail(&h->base.err, SPECDEC_ERR_OUT_OF_MEMORY,
                           "host round: allocating the raw rows for log-probabilities (%d x vocab %d)",
                           (int)SD_RUNNER_TREE_MAX, (int)h->V);
    }
    if (keep_raw) memcpy(h->raw_rows, x->p, (size_t)rows * V * sizeof(float));
    specdec_status st = SPECDEC_OK;
    for (int32_t i = 0; i < rows && st == SPECDEC_OK; i++) {
        int32_t path[SPECDEC_MAX_DRAFT + 1];
        const int32_t n_path = !s->proc ? 0 : x->tree ? host_tree_path(&x->tr, i, path) : i;
        st = sd_host_process_at(h, s, x->p + (size_t)i * V, x->tree ? path : x->vtok + 1, n_path);
    }
    if (st == SPECDEC_OK) st = host_verify_rule(h, x);
    if (st == SPECDEC_OK && s->logprobs) host_logprobs(h, x, keep_raw ? h->raw_rows : x->p);
    return st;
}

static specdec_status host_verify(sd_exec *ex, sd_round_slot *const *xs, int32_t k) {
    specdec_status st = SPECDEC_OK;
    for (int32_t i = 0; i < k && st == SPECDEC_OK; i++) st = host_verify_slot((sd_host_exec *)ex, xs[i]);
    return st;
}

/* ------------------------------------------------------------------------- */
/* create / destroy                                                           */
/* ------------------------------------------------------------------------- */
static void host_destroy(sd_exec *ex) {
    sd_host_exec *h = (sd_host_exec *)ex;
    if (!h) return;
    sd_free(h->p_rows);
    sd_free(h->q_rows);
    sd_free(h->raw_rows);
    sd_free(h->scratch);
    sd_free(h->proc_counts);
    sd_free(h->proc_list);
    sd_free(h->segs);
    sd_free(h->slot_of);
    sd_free(h->trees);
    sd_free(h);
}

static const sd_exec_ops sd_host_exec_ops = {
    .name = "host",
    .check = host_check,
    .pack = host_pack,
    .draft_forward = host_draft_forward,
    .draft_sample = host_draft_sample,
    .tree_grow = sd_host_tree_grow,
    .tree_keep = sd_host_tree_keep,
    .verify_pass = host_verify_pass,
    .verify = host_verify,
    .destroy = host_destroy,
};

/* Rows of each buffer: one sequence's largest round, more for several (up to
 * SD_HOST_ROW_BYTES each). */
static void host_size(sd_host_exec *h) {
    const int32_t one_p = SD_RUNNER_TREE_MAX;
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

specdec_status sd_host_exec_create(int32_t n_vocab, int has_draft, int32_t max_seqs, sd_exec **out, sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "host round: out is NULL");
    *out = NULL;
    if (n_vocab <= 0 || max_seqs < 1 || max_seqs > SD_HOST_MAX_SEQS)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "host round: vocabulary %d, %d sequences (1..%d)", (int)n_vocab,
                       (int)max_seqs, SD_HOST_MAX_SEQS);
    sd_host_exec *h = sd_calloc(1, sizeof *h);
    if (!h) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "host round: out of memory");
    h->base.ops = &sd_host_exec_ops;
    h->has_draft = has_draft != 0;
    h->V = n_vocab;
    h->max_seqs = max_seqs;
    host_size(h);
    const size_t V = (size_t)h->V;
    h->p_rows = sd_malloc((size_t)h->n_prows * V * sizeof(float));
    h->q_rows = h->n_qrows ? sd_malloc((size_t)h->n_qrows * V * sizeof(float)) : NULL;
    h->scratch_size = sd_sampling_scratch_size(h->V);
    h->scratch = sd_malloc(h->scratch_size);
    h->proc_counts = sd_calloc(V, sizeof(int32_t));
    h->proc_list = sd_malloc(V * sizeof(int32_t));
    h->segs = sd_malloc((size_t)max_seqs * sizeof *h->segs);
    h->slot_of = sd_malloc((size_t)max_seqs * sizeof *h->slot_of);
    h->trees = h->n_trees ? sd_malloc((size_t)h->n_trees * sizeof *h->trees) : NULL;
    if (!h->p_rows || (h->n_qrows && !h->q_rows) || !h->scratch || !h->proc_counts || !h->proc_list || !h->segs ||
        !h->slot_of ||
        (h->n_trees && !h->trees)) {
        host_destroy(&h->base);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "host round: allocating round buffers for vocab %d", (int)V);
    }
    *out = &h->base;
    return SPECDEC_OK;
}

/* sd_mtp_cpu.c — an MTP layer as a CPU draft head runner (backends/cpu/sd_mtp_cpu.h). */
#include "sd_mtp_cpu.h"

#include <math.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_cpu_runner.h"
#include "sd_cpu_sample.h"

typedef struct mtp_runner {
    sd_eagle3_runner r;   /* must be first */
    sd_runner *inner;     /* the layer's CPU runner (its private group captures hs[1]) */
    int32_t *ident;       /* [V] the identity d2t */
    int32_t *node_par;    /* [rows] tree rows: parents as the inner runner's tree nodes */
    void *scratch;        /* sd_sampling_process scratch */
    size_t scratch_size;
} mtp_runner;

static specdec_status mtp_fuse(sd_eagle3_runner *r, const float *aux, int32_t n, float *g) {
    if (n < 1 || n > r->rows)
        return sd_fail(&r->base.err, SPECDEC_ERR_INVALID_ARGUMENT, "MTP head: fuse of %d rows (1..%d)", (int)n,
                       (int)r->rows);
    memcpy(g, aux, (size_t)n * (size_t)r->hid * sizeof(float)); /* the layer's hnorm reads the state as is */
    return SPECDEC_OK;
}

/* Rows at head cache rows kv_len .. kv_len + n - 1 (core/sd_eagle3.h ops.step): a chain at
 * positions kv_len + i, or tree rows over the prefix [0, n_shared) (the inner runner's tree based
 * there, node = cache row - n_shared, at position n_shared + its depth). */
static specdec_status mtp_step(sd_eagle3_runner *r, const int32_t *tokens, const float *g, const int32_t *pos,
                               int32_t n, const int32_t *parents, int32_t n_shared, float *logits, float *g_next) {
    mtp_runner *m = (mtp_runner *)r;
    const int32_t base = r->base.kv_len;
    const specdec_status ck = sd_eagle3_check_rows(n, r->rows, base, r->base.n_ctx, r->base.n_vocab, 0, tokens, pos,
                                                   parents, n_shared, &r->base.err);
    if (ck != SPECDEC_OK) return ck;
    sd_runner_seg seg = {m->inner, tokens, n, base, NULL, 0, logits, g_next, g};
    if (!parents) {
        for (int32_t i = 0; i < n; i++)
            if (pos[i] != base + i)
                return sd_fail(&r->base.err, SPECDEC_ERR_INVALID_ARGUMENT,
                               "MTP head: chain row %d at position %d, not its cache row %d", (int)i, (int)pos[i],
                               (int)(base + i));
    } else {
        const sd_runner_tree *tr = &m->inner->tree;
        const int32_t first = base - n_shared;
        if (first > 0 && (tr->n != first || tr->base != n_shared))
            return sd_fail(&r->base.err, SPECDEC_ERR_INVALID_ARGUMENT,
                           "MTP head: tree rows at cache row %d, but the layer's tree holds %d rows over %d", (int)base,
                           (int)tr->n, (int)tr->base);
        for (int32_t i = 0; i < n; i++) {
            const int32_t p = parents[i] < n_shared ? -1 : parents[i] - n_shared;
            const int32_t depth = p < 0 ? 0 : 1 + (p < first ? tr->depth[p] : -1);
            if (p >= first || pos[i] != n_shared + depth) /* p >= first: a parent in this call (never asked) */
                return sd_fail(&r->base.err, SPECDEC_ERR_INVALID_ARGUMENT,
                               "MTP head: tree row %d (parent %d) at position %d, not %d", (int)i, (int)parents[i],
                               (int)pos[i], (int)(n_shared + depth));
            m->node_par[i] = p;
        }
        seg.pos = n_shared;
        seg.parent = m->node_par;
        seg.first = first;
    }
    sd_errbuf eb;
    sd_err_clear(&eb);
    const specdec_status st = sd_runner_forward_batch(&seg, 1, &eb);
    if (st != SPECDEC_OK) return sd_fail(&r->base.err, st, "MTP head: %s", eb.msg);
    r->base.kv_len = base + n;
    return SPECDEC_OK;
}

/* q over the whole vocabulary: greedy, the plain softmax (only its argmax matters); else the
 * logits processed exactly like the target's rows. */
static specdec_status mtp_q(sd_eagle3_runner *r, const float *logits, const sd_sampling_params *sp, int greedy,
                            float *q) {
    mtp_runner *m = (mtp_runner *)r;
    const int32_t V = r->base.n_vocab;
    if (!greedy) return sd_sampling_process(logits, V, sp, m->scratch, m->scratch_size, q, &r->base.err);
    const int32_t best = sd_sample_argmax(logits, V);
    const double mx = (double)logits[best];
    double z = 0.0;
    for (int32_t t = 0; t < V; t++) z += exp((double)logits[t] - mx);
    for (int32_t t = 0; t < V; t++) q[t] = (float)(exp((double)logits[t] - mx) / z);
    return SPECDEC_OK;
}

static void mtp_destroy(sd_eagle3_runner *r) {
    mtp_runner *m = (mtp_runner *)r;
    sd_eagle3_runner_fini(r);
    sd_runner_destroy(m->inner);
    sd_free(m->ident);
    sd_free(m->node_par);
    sd_free(m->scratch);
    sd_free(m);
}

static const sd_eagle3_runner_ops mtp_ops = {mtp_fuse, mtp_step, mtp_q, mtp_destroy};

specdec_status sd_mtp_check_target(const sd_config *mtp, const sd_config *target, const char *what, sd_errbuf *eb) {
    if (mtp->hidden_size == target->hidden_size && mtp->vocab_size == target->vocab_size) return SPECDEC_OK;
    return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH,
                   "%s: hidden size %d and vocabulary %d, but the target has %d and %d (an MTP layer drafts for the "
                   "model of its own checkpoint)",
                   what, (int)mtp->hidden_size, (int)mtp->vocab_size, (int)target->hidden_size,
                   (int)target->vocab_size);
}

specdec_status sd_mtp_cpu_runner_create(const sd_weights *mtp, sd_runner *target, const sd_config *target_cfg,
                                        int32_t n_ctx, int32_t rows, sd_runner **out, sd_errbuf *eb) {
    *out = NULL;
    if (!mtp || !mtp->mtp_eh_proj.data)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "MTP head: the draft is not an MTP layer");
    const sd_config *c = &mtp->cfg;
    const specdec_status fit = sd_mtp_check_target(c, target_cfg, "MTP layer", eb);
    if (fit != SPECDEC_OK) return fit;
    if (rows < SD_RUNNER_TREE_MAX) rows = SD_RUNNER_TREE_MAX;
    if (rows > n_ctx) rows = n_ctx;
    mtp_runner *m = sd_calloc(1, sizeof *m);
    if (!m) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "MTP head: out of memory");
    m->r.ops = &mtp_ops;
    m->r.mtp = 1;
    m->r.base.vt = &sd_eagle3_runner_vtbl;
    const int32_t V = c->vocab_size, after_norm = target_cfg->n_layers + 1, layer_out = 1;
    specdec_status st = sd_cpu_runner_create(mtp, n_ctx, rows, &m->inner, eb);
    if (st == SPECDEC_OK) {
        sd_cpu_group_use_pool(sd_cpu_runner_group(m->inner), sd_cpu_runner_pool(target));
        st = sd_runner_group_set_capture(sd_cpu_runner_group(m->inner), &layer_out, 1, eb);
    }
    if (st == SPECDEC_OK) {
        m->ident = sd_malloc((size_t)V * sizeof(int32_t));
        m->node_par = sd_malloc((size_t)rows * sizeof(int32_t));
        m->scratch_size = sd_sampling_scratch_size(V);
        m->scratch = sd_malloc(m->scratch_size);
        if (!m->ident || !m->node_par || !m->scratch) st = sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "MTP head: buffers");
    }
    for (int32_t t = 0; st == SPECDEC_OK && t < V; t++) m->ident[t] = t;
    if (st == SPECDEC_OK)
        st = sd_head_runner_init(&m->r, target, &after_norm, 1, V, c->hidden_size, c->hidden_size, V, m->ident, n_ctx,
                                 rows, eb);
    if (st != SPECDEC_OK) {
        mtp_destroy(&m->r);
        return st;
    }
    *out = &m->r.base;
    return SPECDEC_OK;
}

sd_runner *sd_mtp_cpu_inner(sd_runner *head) {
    sd_eagle3_runner *h = sd_eagle3_runner_of(head);
    return h && h->ops == &mtp_ops ? ((mtp_runner *)h)->inner : NULL;
}

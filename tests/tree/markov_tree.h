/* markov_tree.h — tree-capable synthetic runners for the tree tests: the Markov-chain
 * runners of tests/engine/markov.h with native tree operations (core/sd_runner.h
 * "Trees"), or without them (tree_ops NULL: sd_runner.c emulates trees with forward()).
 *
 * A node's logits are the chain's row for its own context: order 1 table[token],
 * order 2 table[prev * V + token] with prev = its parent's token, or the last cached
 * token for a node without a parent. A runner whose tree forward reads the wrong
 * context would therefore sample from wrong rows, which the tests detect.
 * mutant_mask: test of the tests: prev = the previous node in call order (a chain
 * mask instead of the tree mask). */
#ifndef MARKOV_TREE_H
#define MARKOV_TREE_H

#include "../engine/markov.h"

/* test-wide switches and counters (the tests are single-threaded) */
static int mkt_mutant_mask;   /* see the top of this file */
static long mkt_tree_calls;   /* native forward_tree calls */
static long mkt_tree_nodes;   /* nodes they forwarded */

static specdec_status mkt_forward_tree(sd_runner *r, int32_t first, int32_t n, float *logits) {
    mk_runner *m = (mk_runner *)r;
    const sd_runner_tree *t = &r->tree;
    const int32_t V = r->n_vocab, base = t->base;
    if (base + first + n > r->n_ctx || (first == 0 && base > r->kv_len) || (first > 0 && r->kv_len != base + first)) {
        m->violations++;
        return sd_fail(&r->err, SPECDEC_ERR_INTERNAL, "markov tree: bad call base %d first %d n %d kv %d", (int)base,
                       (int)first, (int)n, (int)r->kv_len);
    }
    mkt_tree_calls++;
    mkt_tree_nodes += n;
    for (int32_t i = 0; i < n; i++) {
        const int32_t v = first + i, tok = t->token[v];
        m->hist[base + v] = tok;
        int32_t prev;
        if (mkt_mutant_mask) prev = v > 0 ? t->token[v - 1] : base > 0 ? m->hist[base - 1] : 0;
        else prev = t->parent[v] >= 0 ? t->token[t->parent[v]] : base > 0 ? m->hist[base - 1] : 0;
        if (logits) {
            const float *row = m->order == 1 ? m->table + (size_t)tok * (size_t)V
                                             : m->table + ((size_t)prev * (size_t)V + (size_t)tok) * (size_t)V;
            memcpy(logits + (size_t)i * (size_t)V, row, (size_t)V * sizeof(float));
        }
    }
    m->tokens += n;
    r->kv_len = base + first + n;
    if (r->kv_len > m->high_water) m->high_water = r->kv_len;
    return SPECDEC_OK;
}

static specdec_status mkt_compact(sd_runner *r, const int32_t *keep, int32_t n_keep) {
    mk_runner *m = (mk_runner *)r;
    const int32_t base = r->tree.base;
    for (int32_t j = 0; j < n_keep; j++) m->hist[base + j] = m->hist[base + keep[j]];
    r->kv_len = base + n_keep;
    return SPECDEC_OK;
}

static const sd_runner_tree_ops mkt_tree_ops = {mkt_forward_tree, mkt_compact};

/* A Markov runner (markov.h) with native tree operations (native 1) or emulated ones. */
static mk_runner *mkt_runner_new(int order, const float *table, int32_t V, int32_t n_ctx, int32_t max_batch,
                                 int native) {
    mk_runner *m = mk_runner_new(order, table, V, n_ctx, max_batch);
    if (m) m->base.tree_ops = native ? &mkt_tree_ops : NULL;
    return m;
}

#endif

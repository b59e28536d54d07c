/* sd_cpu_tree_verify.c — the CPU reference tree verifier (rules in sd_cpu_tree.h; the
 * exactness argument in docs/TREE.md). Alone in its file so that tests can link
 * deliberately broken verifiers in its place. */
#include "sd_cpu_tree.h"

#include "sd_cpu_sample.h"
#include "sd_sample_rules.h"

/* Inverse CDF of norm(max(0, p - q)) with uniform u (exact fixed point, as the chain
 * verifier's residual); p itself when the residual has no mass. */
static int32_t tree_residual(const float *p, const float *q, int32_t V, double u) {
    sd_u128 D = 0;
    int pos;
    for (int32_t j = 0; j < V; j++) D += sd_rule_residual(p[j], q[j], &pos);
    if (D == 0) return sd_sample_inverse_cdf(p, V, u);
    sd_u128 target = sd_rule_u_target(u, D);
    if (target == 0) target = 1;
    sd_u128 c = 0;
    int32_t last = -1;
    for (int32_t j = 0; j < V; j++) {
        const uint64_t m = sd_rule_residual(p[j], q[j], &pos);
        if (!pos) continue;
        c += m;
        last = j;
        if (c >= target) return j;
    }
    return last;
}

static specdec_status tree_check(specdec_verify_mode mode, const sd_tree *t, int32_t V, const float *p,
                                 const float *q, const sd_verify_uniforms *u, sd_errbuf *eb) {
    if (mode != SPECDEC_VERIFY_REJECTION && mode != SPECDEC_VERIFY_GREEDY && mode != SPECDEC_VERIFY_MATCH)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "tree verify: mode %d is not REJECTION, GREEDY or MATCH",
                       (int)mode);
    if (!t || !p || V <= 0 || t->n < 1 || t->n > SD_RUNNER_TREE_MAX || (mode != SPECDEC_VERIFY_GREEDY && !u))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "tree verify: NULL tree, rows or uniforms, or bad size");
    for (int32_t i = 0; i < t->n; i++) {
        const int32_t c0 = t->child0[i], nc = t->n_child[i];
        if (t->token[i] < 0 || t->token[i] >= V || t->depth[i] < 0 || t->depth[i] > SPECDEC_MAX_DRAFT ||
            (i > 0 && (t->parent[i] < 0 || t->parent[i] >= i || t->depth[i] != t->depth[t->parent[i]] + 1)))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "tree verify: node %d is malformed", (int)i);
        if (nc < 0 || (nc > 0 && (c0 <= i || c0 + nc > t->n)))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "tree verify: node %d has children %d..+%d", (int)i,
                           (int)c0, (int)nc);
        for (int32_t c = c0; c < c0 + nc; c++)
            if (t->parent[c] != i)
                return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "tree verify: child %d of %d has parent %d", (int)c,
                               (int)i, (int)t->parent[c]);
        if (mode == SPECDEC_VERIFY_REJECTION && nc > 0 && t->sampled[i] && (!q || t->qrow[i] < 0))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "tree verify: node %d has a sampled child but no q row",
                           (int)i);
    }
    return SPECDEC_OK;
}

/* The child of x (from index `from` on) whose token is tok, or -1. */
static int32_t tree_find_child(const sd_tree *t, int32_t x, int32_t from, int32_t tok) {
    for (int32_t c = t->child0[x] + from; c < t->child0[x] + t->n_child[x]; c++)
        if (t->token[c] == tok) return c;
    return -1;
}

/* One node of a REJECTION walk: the accepted child (*next) or the emitted token. */
static int32_t tree_reject_step(const sd_tree *t, int32_t x, int32_t V, const float *px, const float *q,
                                const sd_verify_uniforms *u, int32_t *next) {
    const int32_t d = t->depth[x];
    *next = -1;
    if (t->n_child[x] == 0) return sd_sample_inverse_cdf(px, V, u->sample[d]); /* bonus */
    int32_t tok;
    if (t->sampled[x]) {
        const float *qx = q + (size_t)t->qrow[x] * (size_t)V;
        const int32_t c = t->child0[x], ct = t->token[c];
        if (sd_rule_accept(u->accept[d], px[ct], qx[ct])) {
            *next = c;
            return ct;
        }
        tok = tree_residual(px, qx, V, u->sample[d]);
    } else {
        tok = sd_sample_inverse_cdf(px, V, u->sample[d]);
    }
    *next = tree_find_child(t, x, t->sampled[x] ? 1 : 0, tok);
    return tok;
}

specdec_status sd_tree_verify(specdec_verify_mode mode, const sd_tree *t, int32_t n_vocab, const float *p,
                              const float *q, const sd_verify_uniforms *u, int32_t *path, int32_t *out_tokens,
                              int32_t *n_accepted, sd_errbuf *eb) {
    if (!path || !out_tokens || !n_accepted)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "tree verify: NULL output pointer");
    specdec_status st = tree_check(mode, t, n_vocab, p, q, u, eb);
    if (st != SPECDEC_OK) return st;
    int32_t x = 0, n = 0, tok = 0;
    for (;;) {
        const float *px = p + (size_t)x * (size_t)n_vocab;
        int32_t next;
        if (mode == SPECDEC_VERIFY_REJECTION) {
            tok = tree_reject_step(t, x, n_vocab, px, q, u, &next);
        } else {
            tok = mode == SPECDEC_VERIFY_GREEDY ? sd_sample_argmax(px, n_vocab)
                                                : sd_sample_inverse_cdf(px, n_vocab, u->sample[t->depth[x]]);
            next = tree_find_child(t, x, 0, tok);
        }
        if (next < 0) break;
        path[n] = next;
        out_tokens[n++] = tok;
        x = next;
    }
    out_tokens[n] = tok;
    *n_accepted = n;
    return SPECDEC_OK;
}

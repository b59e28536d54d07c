/* tree_mutants.c — deliberately broken tree verifiers, linked INSTEAD of the library's
 * sd_tree_verify (kernels/cpu/sd_cpu_tree_verify.c, alone in its object file) into the
 * tree_dist_mutant_N executables, to prove that test_tree_dist.c catches real bugs.
 * Built only for the tests; the library never contains a mutant.
 *   1 the seed's naive scheme: every child is compared with its own independently
 *     sampled target token (inverse CDF of p with a fresh uniform), the first match
 *     wins; no match: the target's own token. q is never looked at.
 *   2 residual not renormalised: after the sampled child's rejection, the
 *     deterministic children are tried in order, each accepted with probability r(c),
 *     r = max(0, p - q) NOT divided by its mass (and not renormalised after earlier
 *     rejections); none accepted: a token from the normalised residual.
 *   3 q of the wrong sibling: a node's sampled child is verified (acceptance test and
 *     residual) with the q row of the node's next (or previous) sibling.
 * Everything else is the reference rule (sd_cpu_tree.h). */
#include "sd_cpu_sample.h"
#include "sd_cpu_tree.h"
#include "sd_sample_rules.h"

#ifndef SD_TREE_MUTANT
#error "build with -DSD_TREE_MUTANT=1..3"
#endif

/* a uniform for child c at depth d, independent in practice of the round's others */
static double mut_u(const sd_verify_uniforms *u, int32_t d, int32_t c) {
    uint64_t z = (uint64_t)(u->sample[d] * 0x1p52) ^ ((uint64_t)(u->accept[d < SPECDEC_MAX_DRAFT ? d : 0] * 0x1p52) << 7);
    z += 0x9E3779B97F4A7C15ull * (uint64_t)(c + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 1.0) * 0x1.0p-53;
}

static int32_t mut_residual(const float *p, const float *q, int32_t V, double u) {
    sd_u128 D = 0, c = 0;
    int pos;
    for (int32_t j = 0; j < V; j++) D += sd_rule_residual(p[j], q[j], &pos);
    if (D == 0) return sd_sample_inverse_cdf(p, V, u);
    sd_u128 target = sd_rule_u_target(u, D);
    int32_t last = 0;
    for (int32_t j = 0; j < V; j++) {
        c += sd_rule_residual(p[j], q[j], &pos);
        if (pos) last = j;
        if (pos && c >= (target ? target : 1)) return j;
    }
    return last;
}

static int32_t find_child(const sd_tree *t, int32_t x, int32_t from, int32_t tok) {
    for (int32_t c = t->child0[x] + from; c < t->child0[x] + t->n_child[x]; c++)
        if (t->token[c] == tok) return c;
    return -1;
}

/* the q row a node's children are verified with (mutant 3: a sibling's) */
static const float *q_of(const sd_tree *t, int32_t x, const float *q, int32_t V) {
    int32_t r = t->qrow[x];
    if (SD_TREE_MUTANT == 3 && x > 0) {
        for (int32_t s = x + 1; s < t->n && t->parent[s] == t->parent[x]; s++)
            if (t->qrow[s] >= 0) { r = t->qrow[s]; break; }
        if (r == t->qrow[x] && x - 1 > 0 && t->parent[x - 1] == t->parent[x] && t->qrow[x - 1] >= 0) r = t->qrow[x - 1];
    }
    return q + (size_t)r * (size_t)V;
}

static int32_t reject_step(const sd_tree *t, int32_t x, int32_t V, const float *px, const float *q,
                           const sd_verify_uniforms *u, int32_t *next) {
    const int32_t d = t->depth[x];
    *next = -1;
    if (t->n_child[x] == 0) return sd_sample_inverse_cdf(px, V, u->sample[d]);
    if (SD_TREE_MUTANT == 1) {
        for (int32_t c = t->child0[x]; c < t->child0[x] + t->n_child[x]; c++)
            if (sd_sample_inverse_cdf(px, V, mut_u(u, d, c)) == t->token[c]) {
                *next = c;
                return t->token[c];
            }
        return sd_sample_inverse_cdf(px, V, u->sample[d]);
    }
    const float *qx = t->sampled[x] ? q_of(t, x, q, V) : NULL;
    if (t->sampled[x]) {
        const int32_t c = t->child0[x], ct = t->token[c];
        if (sd_rule_accept(u->accept[d], px[ct], qx[ct])) {
            *next = c;
            return ct;
        }
    }
    if (SD_TREE_MUTANT == 2 && t->sampled[x])
        for (int32_t c = t->child0[x] + 1; c < t->child0[x] + t->n_child[x]; c++) {
            const double r = (double)px[t->token[c]] - (double)qx[t->token[c]];
            if (r > 0 && mut_u(u, d, c) < r) {
                *next = c;
                return t->token[c];
            }
        }
    int32_t tok = t->sampled[x] ? mut_residual(px, qx, V, u->sample[d]) : sd_sample_inverse_cdf(px, V, u->sample[d]);
    *next = SD_TREE_MUTANT == 2 ? -1 : find_child(t, x, t->sampled[x] ? 1 : 0, tok);
    if (SD_TREE_MUTANT == 2 && !t->sampled[x]) *next = find_child(t, x, 0, tok);
    return tok;
}

specdec_status sd_tree_verify(specdec_verify_mode mode, const sd_tree *t, int32_t n_vocab, const float *p,
                              const float *q, const sd_verify_uniforms *u, int32_t *path, int32_t *out_tokens,
                              int32_t *n_accepted, sd_errbuf *eb) {
    (void)eb;
    int32_t x = 0, n = 0, tok = 0;
    for (;;) {
        const float *px = p + (size_t)x * (size_t)n_vocab;
        int32_t next;
        if (mode == SPECDEC_VERIFY_REJECTION) {
            tok = reject_step(t, x, n_vocab, px, q, u, &next);
        } else {
            tok = mode == SPECDEC_VERIFY_GREEDY ? sd_sample_argmax(px, n_vocab)
                                                : sd_sample_inverse_cdf(px, n_vocab, u->sample[t->depth[x]]);
            next = find_child(t, x, 0, tok);
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

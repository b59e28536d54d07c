/* test_cuda_group.c — CUDA runner groups, the paged KV cache and native trees on the
 * GPU (backends/cuda/sd_cuda_runner.cu; the CPU twin is tests/forward/
 * test_runner_batch.c). Synthetic models (tests/forward/fwd_common.h), GQA 2 and 8.
 *   - random schedules: 5 sequences of one CUDA group (blocks of 4 rows scattered over
 *     the pool) take random chain and tree segments in one sd_runner_forward_batch;
 *     every row is compared with standalone CUDA runners fed the same calls one by one:
 *     BITWISE for every segment whose pass took the batch-invariant GEMM (every pass
 *     of several segments, every pass with a tree, every pass of <= 17 tokens:
 *     docs/GPU_FORWARD.md "Runner groups") when its reference call did too (every call
 *     of <= 17 tokens, every tree) — i.e. everything but chain segments longer than 17
 *     tokens (a prefill's shape: cuBLAS alone, and also in the batch when the pass is
 *     that one segment; the schedule with segments of up to 40 tokens makes them),
 *     compared within the CPU tolerance and their rows tracked as tainted; and with
 *     standalone CPU runners at
 *     the tolerance of tests/cuda/test_cuda_runner.c (BF16 3e-2, F16 1e-2, F32 kept
 *     1e-4, relative L2 per row); kv_len, trees, compaction in between;
 *   - block accounting after every step, every block back after destroy;
 *   - tree nodes (trees of up to 65 nodes, forwarded whole or level by level, on a
 *     standalone and on a grouped runner) vs plain decoding of their paths: bitwise;
 *     compaction of a random path, then the next token == plain decoding: bitwise;
 *   - pool exhaustion: CONTEXT_FULL, nothing changed; trimming makes room again;
 *   - a standalone runner's block table stays the identity; the device round refuses
 *     grouped runners.
 * Skips without a device. */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include "cuda_test_util.h"
#include "fwd_common.h"
#include "fwd_pool_check.h"
#include "sd_cpu_runner.h"
#include "sd_cuda_backend.h"
#include "sd_cuda_ops.h"
#include "sd_cuda_runner.h"
#include "sd_kv.h"
#include "sd_runner.h"

#define N_SEQ 5
#define N_CTX 64
#define BT 4

typedef struct sched {
    sd_runner *g_r[N_SEQ];   /* grouped (CUDA) */
    sd_runner *ref[N_SEQ];   /* standalone CUDA */
    sd_runner *cpu[N_SEQ];   /* standalone CPU */
    int32_t V, max_batch, max_seg;
    double tol;
    float *lg, *lr, *lc;     /* [N_SEQ][max_seg][V] */
    int32_t taint[N_SEQ];    /* first cache row that may differ from the CUDA reference's
                                (written by a cuBLAS pass); INT32_MAX: none */
    int64_t exact_rows, tol_rows;
} sched;

static uint64_t rng_state = 424242;
static int32_t rnd(int32_t n) { return (int32_t)(fwd_rng_next(&rng_state) % (uint64_t)n); }

static sd_config cfg_gqa8(void) {
    sd_config c = fwd_small_config();
    c.n_heads = 16;
    c.n_kv_heads = 2;
    c.head_dim = 16;
    return c;
}

/* Pick a segment for runner r (as tests/forward/test_runner_batch.c). */
static void pick_seg(const sd_runner *r, sd_runner_seg *s, int32_t *tok, int32_t *par, int32_t V, int32_t max_seg) {
    memset(s, 0, sizeof *s);
    const int32_t kv = r->kv_len;
    const int tree = kv >= 1 && rnd(3) == 0;
    if (tree && r->tree.n > 0 && rnd(2) == 0 && r->tree.n < 40) {
        s->pos = r->tree.base;
        s->first = r->tree.n;
    } else if (tree) {
        s->pos = kv - rnd(kv < 3 ? kv + 1 : 3);
    } else {
        s->pos = rnd(4) == 0 ? rnd(kv + 1) : kv - rnd(kv < 2 ? kv + 1 : 2);
    }
    const int32_t used = tree ? s->pos + s->first : s->pos;
    int32_t room = N_CTX - used;
    if (room > max_seg) room = max_seg;
    if (tree && room > SD_RUNNER_TREE_MAX - s->first) room = SD_RUNNER_TREE_MAX - s->first;
    s->n = room < 1 ? 0 : 1 + rnd(room);
    for (int32_t k = 0; k < s->n; k++) {
        tok[k] = rnd(V);
        par[k] = (s->first + k == 0 || rnd(4) == 0) ? -1 : rnd(s->first + k);
    }
    s->tokens = tok;
    s->parent = tree ? par : NULL;
}

/* Which segments are comparable bitwise with their standalone references: those core's
 * packing (passes of <= max_batch tokens, in order) puts on the batch-invariant path —
 * all but a pass of one chain segment of more than 17 tokens (cuBLAS) — and whose
 * reference call took it too: a chain of more than 17 tokens alone is a cuBLAS call
 * (a prefill's path), so it is compared within tolerance even inside a batch. */
static void mark_exact(const sd_runner_seg *segs, int32_t n, int32_t max_batch, int *exact) {
    for (int32_t done = 0; done < n;) {
        int32_t k = 0, tokens = 0, tree = 0;
        while (done + k < n && tokens + segs[done + k].n <= max_batch) {
            tree |= segs[done + k].parent != NULL;
            tokens += segs[done + k++].n;
        }
        const int ok = k > 1 || tree || tokens <= SD_CUDA_SKINNY_MAX_M;
        for (int32_t j = done; j < done + k; j++) exact[j] = ok && (segs[j].parent || segs[j].n <= SD_CUDA_SKINNY_MAX_M);
        done += k;
    }
}

static void check_accounting(const sched *c, const char *when) {
    const sd_runner_group *g = c->g_r[0]->group;
    int32_t held = 0;
    for (int i = 0; i < N_SEQ; i++) {
        const sd_runner *r = c->g_r[i];
        const int32_t need = sd_kv_blocks_for(r->tree.n > 0 ? r->tree.base + r->tree.n : r->kv_len, BT);
        SD_CHECK(r->kv.n == need, "%s: seq %d holds %d blocks, needs %d", when, i, (int)r->kv.n, (int)need);
        held += r->kv.n;
    }
    SD_CHECK(sd_kv_pool_used(&g->pool) == held, "%s: pool says %d used, sequences hold %d", when,
             (int)sd_kv_pool_used(&g->pool), (int)held);
}

static specdec_status run_one(const sd_runner_seg *s) {
    return s->parent ? sd_runner_forward_tree(s->r, s->tokens, s->n, s->pos, s->first, s->parent, s->logits)
                     : sd_runner_forward(s->r, s->tokens, s->n, s->pos, s->logits);
}

/* Segment j of a step against its CUDA and CPU references. */
static void compare_seg(sched *c, int step, int32_t j, const sd_runner_seg *g, const sd_runner_seg *ref,
                        const sd_runner_seg *cpu, int exact) {
    const int64_t n = (int64_t)g->n * c->V;
    if (exact) {
        const int64_t d = fwd_first_diff(g->logits, ref->logits, n);
        SD_CHECK(d < 0, "step %d: segment %d (%s, %d tokens at %d) differs bitwise at row %lld", step, (int)j,
                 g->parent ? "tree" : "chain", (int)g->n, (int)g->pos, (long long)(d / c->V));
        c->exact_rows += g->n;
    } else {
        c->tol_rows += g->n;
    }
    for (int32_t r = 0; r < g->n; r++) {
        const float *row = g->logits + (size_t)r * c->V;
        const double e_ref = fwd_rel_l2(row, ref->logits + (size_t)r * c->V, c->V);
        const double e_cpu = fwd_rel_l2(row, cpu->logits + (size_t)r * c->V, c->V);
        SD_CHECK(e_ref <= c->tol && e_cpu <= c->tol, "step %d: segment %d row %d: rel %.3g vs CUDA, %.3g vs CPU (tol %.0e)",
                 step, (int)j, (int)r, e_ref, e_cpu, c->tol);
    }
    SD_CHECK(g->r->kv_len == ref->r->kv_len && g->r->tree.n == ref->r->tree.n && cpu->r->kv_len == ref->r->kv_len,
             "step %d: kv_len %d / tree %d vs reference %d / %d", step, (int)g->r->kv_len, (int)g->r->tree.n,
             (int)ref->r->kv_len, (int)ref->r->tree.n);
}

/* Rows a segment starts writing at (it reads everything below). */
static int32_t seg_start(const sd_runner_seg *s) { return s->parent ? s->pos + s->first : s->pos; }

/* After segment s of sequence i: its rows are clean iff it was exact on clean keys. */
static void update_taint(sched *c, int i, const sd_runner_seg *s, int exact) {
    const int32_t start = seg_start(s);
    if (!exact) c->taint[i] = c->taint[i] < start ? c->taint[i] : start;
    else if (c->taint[i] >= start) c->taint[i] = INT32_MAX;
}

/* One random step: a random subset of sequences in random order, one batch. */
static void random_step(sched *c, int step) {
    int32_t order[N_SEQ], n = 0;
    for (int i = 0; i < N_SEQ; i++) order[i] = i;
    for (int i = N_SEQ - 1; i > 0; i--) {
        int j = rnd(i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    const int32_t k = 1 + rnd(N_SEQ);
    sd_runner_seg segs[N_SEQ], refs[N_SEQ], cpus[N_SEQ];
    int32_t tok[N_SEQ][SD_RUNNER_TREE_MAX], par[N_SEQ][SD_RUNNER_TREE_MAX];
    int exact[N_SEQ], seq[N_SEQ];
    for (int32_t j = 0; j < k; j++) {
        const int i = order[j];
        pick_seg(c->g_r[i], &segs[n], tok[n], par[n], c->V, c->max_seg);
        if (segs[n].n == 0) continue;
        const size_t off = (size_t)n * (size_t)c->max_seg * (size_t)c->V;
        segs[n].r = c->g_r[i];
        segs[n].logits = c->lg + off;
        seq[n] = i;
        refs[n] = cpus[n] = segs[n];
        refs[n].r = c->ref[i];
        refs[n].logits = c->lr + off;
        cpus[n].r = c->cpu[i];
        cpus[n].logits = c->lc + off;
        n++;
    }
    if (n == 0) return;
    mark_exact(segs, n, c->max_batch, exact);
    for (int32_t j = 0; j < n; j++) { /* a clean pass over tainted keys is not comparable bitwise */
        if (c->taint[seq[j]] < seg_start(&segs[j])) exact[j] = 0;
        update_taint(c, seq[j], &segs[j], exact[j]);
    }
    sd_errbuf eb = {{0}};
    SD_CHECK(sd_runner_forward_batch(segs, n, &eb) == SPECDEC_OK, "step %d: batch of %d: %s", step, (int)n, eb.msg);
    for (int32_t j = 0; j < n; j++) {
        SD_CHECK(run_one(&refs[j]) == SPECDEC_OK, "step %d: CUDA reference: %s", step, refs[j].r->err.msg);
        SD_CHECK(run_one(&cpus[j]) == SPECDEC_OK, "step %d: CPU reference: %s", step, cpus[j].r->err.msg);
        compare_seg(c, step, j, &segs[j], &refs[j], &cpus[j], exact[j]);
    }
}

/* Compact a random path of every sequence that holds a tree (all three runners). */
static void random_compact(sched *c, int step) {
    for (int i = 0; i < N_SEQ; i++) {
        sd_runner *r = c->g_r[i];
        if (r->tree.n <= 0 || rnd(2)) continue;
        int32_t up[SD_RUNNER_TREE_MAX], m = 0, path[SD_RUNNER_TREE_MAX];
        for (int32_t a = rnd(r->tree.n); a >= 0; a = r->tree.parent[a]) up[m++] = a;
        const int32_t take = rnd(m + 1);
        for (int32_t j = 0; j < take; j++) path[j] = up[m - 1 - j];
        if (c->taint[i] != INT32_MAX && c->taint[i] >= r->tree.base) c->taint[i] = r->tree.base;
        sd_runner *all[3] = {r, c->ref[i], c->cpu[i]};
        for (int k = 0; k < 3; k++)
            SD_CHECK(sd_runner_compact(all[k], path, take) == SPECDEC_OK, "step %d: compact %d: %s", step, k,
                     all[k]->err.msg);
    }
}

static void run_schedule(const char *name, const sd_config *cfg, sd_dtype dt, int keep_f32, int32_t max_batch,
                         int32_t max_seg, int steps) {
    struct specdec_model *m = fwd_model_make(cfg, dt, 77);
    sd_errbuf eb = {{0}};
    sd_runner_group *g = NULL;
    sched c;
    memset(&c, 0, sizeof c);
    c.V = cfg->vocab_size;
    c.max_batch = max_batch;
    c.max_seg = max_seg;
    c.tol = dt == SD_F32 ? (keep_f32 ? 1e-4 : 6e-2) : dt == SD_F16 ? 1e-2 : 3e-2;
    for (int i = 0; i < N_SEQ; i++) c.taint[i] = INT32_MAX;
    SD_CHECK(sd_cuda_group_create(&m->w, N_CTX, max_batch, N_SEQ * (N_CTX / BT), BT, 0, keep_f32, &g, &eb) == SPECDEC_OK,
             "%s: group: %s", name, eb.msg);
    for (int i = 0; g && i < N_SEQ; i++) {
        SD_CHECK(sd_runner_group_add(g, &c.g_r[i], &eb) == SPECDEC_OK, "add %d: %s", i, eb.msg);
        SD_CHECK(sd_cuda_runner_create(&m->w, N_CTX, N_CTX, 0, keep_f32, &c.ref[i], &eb) == SPECDEC_OK, "ref: %s", eb.msg);
        SD_CHECK(sd_cpu_runner_create(&m->w, N_CTX, N_CTX, &c.cpu[i], &eb) == SPECDEC_OK, "cpu: %s", eb.msg);
    }
    const size_t rows = (size_t)N_SEQ * (size_t)max_seg * (size_t)c.V;
    c.lg = malloc(sizeof(float) * rows);
    c.lr = malloc(sizeof(float) * rows);
    c.lc = malloc(sizeof(float) * rows);
    for (int step = 0; g && step < steps; step++) {
        random_step(&c, step);
        if (step % 3 == 2) random_compact(&c, step);
        check_accounting(&c, "after a step");
        if (step % 40 == 39)
            for (int i = 0; i < N_SEQ; i++)
                if (rnd(2)) {
                    c.taint[i] = INT32_MAX;
                    sd_runner_truncate(c.g_r[i], 0);
                    sd_runner_truncate(c.ref[i], 0);
                    sd_runner_truncate(c.cpu[i], 0);
                }
    }
    printf("%-40s %lld rows bitwise vs standalone CUDA runners, %lld within %.0e (single-chain cuBLAS passes)\n", name,
           (long long)c.exact_rows, (long long)c.tol_rows, c.tol);
    for (int i = 0; i < N_SEQ; i++) {
        sd_runner_destroy(c.g_r[i]);
        sd_runner_destroy(c.ref[i]);
        sd_runner_destroy(c.cpu[i]);
    }
    SD_CHECK(!g || (g->pool.n_free == g->pool.n_blocks && g->n_runners == 0), "%s: blocks not all returned: %d of %d",
             name, g ? (int)g->pool.n_free : 0, g ? (int)g->pool.n_blocks : 0);
    sd_runner_group_destroy(g);
    free(c.lg);
    free(c.lr);
    free(c.lc);
    fwd_model_free(m);
}

/* Plain decoding of toks[0..n) at pos on p in random chunks of 1..16 tokens (the skinny
 * path, batch invariant); the last row's logits to last. */
static void plain_decode(sd_runner *p, const int32_t *toks, int32_t n, int32_t pos, float *last, float *scratch,
                         int32_t V) {
    for (int32_t off = 0; off < n;) {
        int32_t k = 1 + rnd(16);
        if (k > n - off) k = n - off;
        SD_CHECK(sd_runner_forward(p, toks + off, k, pos + off, scratch) == SPECDEC_OK, "plain: %s", p->err.msg);
        off += k;
        if (off == n) memcpy(last, scratch + (size_t)(k - 1) * V, sizeof(float) * (size_t)V);
    }
}

/* A random tree of n nodes (depth < 16, several roots now and then). */
static void make_tree(int32_t n, int32_t V, int32_t *tok, int32_t *par, int32_t *depth) {
    for (int32_t v = 0; v < n; v++) {
        tok[v] = rnd(V);
        par[v] = v == 0 || rnd(8) == 0 ? -1 : rnd(v);
        if (par[v] >= 0 && depth[par[v]] >= 15) par[v] = -1;
        depth[v] = par[v] < 0 ? 0 : depth[par[v]] + 1;
    }
}

static int32_t path_of(const int32_t *par, const int32_t *tok, int32_t v, int32_t *keep, int32_t *ptok) {
    int32_t up[SD_RUNNER_TREE_MAX], k = 0;
    for (int32_t a = v; a >= 0; a = par[a]) up[k++] = a;
    for (int32_t j = 0; j < k; j++) {
        keep[j] = up[k - 1 - j];
        ptok[j] = tok[keep[j]];
    }
    return k;
}

/* Tree nodes of runner t vs plain decoding of their paths on p (bitwise), then
 * compaction of a random path and the next tokens (bitwise). other: a runner of t's
 * group whose forwards interleave with t's (scattered blocks), or NULL. */
static void check_tree_plain(const char *name, sd_runner *t, sd_runner *p, sd_runner *other, int32_t V, int rounds) {
    int32_t prefix[48], tok[SD_RUNNER_TREE_MAX], par[SD_RUNNER_TREE_MAX], depth[SD_RUNNER_TREE_MAX];
    int32_t keep[SD_RUNNER_TREE_MAX], ptok[SD_RUNNER_TREE_MAX + 4];
    float *tl = malloc(sizeof(float) * SD_RUNNER_TREE_MAX * (size_t)V), *scratch = malloc(sizeof(float) * 16 * (size_t)V);
    float *one = malloc(sizeof(float) * (size_t)V), *a = malloc(sizeof(float) * (size_t)V);
    int bad = 0, nodes = 0;
    for (int round = 0; round < rounds; round++) {
        const int32_t L = 5 + rnd(40), n = 1 + rnd(SD_RUNNER_TREE_MAX);
        for (int32_t i = 0; i < L; i++) prefix[i] = rnd(V);
        for (int32_t off = 0; off < L; off += 4) { /* the same calls on t and p; interleaved with `other` */
            const int32_t k = L - off < 4 ? L - off : 4;
            SD_CHECK(sd_runner_forward(t, prefix + off, k, off, NULL) == SPECDEC_OK, "%s prefix: %s", name, t->err.msg);
            SD_CHECK(sd_runner_forward(p, prefix + off, k, off, NULL) == SPECDEC_OK, "%s prefix: %s", name, p->err.msg);
            if (other && other->kv_len + 4 <= 32)
                SD_CHECK(sd_runner_forward(other, prefix, 4, other->kv_len, NULL) == SPECDEC_OK, "other: %s", other->err.msg);
        }
        if (other && rnd(2)) sd_runner_truncate(other, 0);
        make_tree(n, V, tok, par, depth);
        for (int32_t first = 0; first < n;) { /* whole, or in random pieces */
            const int32_t k = rnd(2) ? n - first : 1 + rnd(n - first);
            SD_CHECK(sd_runner_forward_tree(t, tok + first, k, L, first, par + first, tl + (size_t)first * V) == SPECDEC_OK,
                     "%s tree: %s", name, t->err.msg);
            first += k;
        }
        for (int32_t v = 0; v < n; v++, nodes++) {
            const int32_t k = path_of(par, tok, v, keep, ptok);
            plain_decode(p, ptok, k, L, one, scratch, V);
            if (fwd_first_diff(one, tl + (size_t)v * V, V) >= 0 && bad++ < 5)
                fprintf(stderr, "  %s round %d: node %d (depth %d of a %d-node tree at %d) differs from its path\n", name,
                        round, (int)v, (int)depth[v], (int)n, (int)L);
        }
        const int32_t v = rnd(n), k = path_of(par, tok, v, keep, ptok);
        SD_CHECK(sd_runner_compact(t, keep, k) == SPECDEC_OK && t->kv_len == L + k, "%s compact: %s", name, t->err.msg);
        for (int32_t j = 0; j < 3; j++) ptok[k + j] = rnd(V);
        plain_decode(p, ptok, k + 3, L, one, scratch, V);
        SD_CHECK(sd_runner_forward(t, ptok + k, 3, L + k, scratch) == SPECDEC_OK, "%s continue: %s", name, t->err.msg);
        memcpy(a, scratch + 2 * (size_t)V, sizeof(float) * (size_t)V);
        SD_CHECK(fwd_first_diff(a, one, V) < 0, "%s round %d: continuation after compaction differs", name, round);
    }
    SD_CHECK(bad == 0, "%s: %d of %d tree nodes differ from plain decoding", name, bad, nodes);
    printf("%-40s %d tree nodes == plain decoding of their paths (bitwise), compaction + continuation ok\n", name, nodes);
    free(tl);
    free(scratch);
    free(one);
    free(a);
}

static void check_trees(const sd_config *cfg, sd_dtype dt, int rounds) {
    struct specdec_model *m = fwd_model_make(cfg, dt, 91);
    sd_errbuf eb = {{0}};
    sd_runner *t = NULL, *p = NULL, *a = NULL, *b = NULL;
    sd_runner_group *g = NULL;
    const int32_t V = cfg->vocab_size, n_ctx = 128;
    SD_CHECK(sd_cuda_runner_create(&m->w, n_ctx, 80, 0, 0, &t, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_cuda_runner_create(&m->w, n_ctx, 80, 0, 0, &p, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_cuda_group_create(&m->w, n_ctx, 80, 2 * n_ctx / BT, BT, 0, 0, &g, &eb) == SPECDEC_OK, "%s", eb.msg);
    if (g) {
        SD_CHECK(sd_runner_group_add(g, &a, &eb) == SPECDEC_OK && sd_runner_group_add(g, &b, &eb) == SPECDEC_OK, "%s",
                 eb.msg);
    }
    if (t && p) check_tree_plain("trees, standalone runner", t, p, NULL, V, rounds);
    if (a && b && p) check_tree_plain("trees, grouped runner (scattered blocks)", a, p, b, V, rounds);
    if (t) /* the private pool hands blocks out in order: the table stays the identity */
        for (int32_t i = 0; i < t->kv.n; i++) SD_CHECK(t->kv.blocks[i] == i, "standalone table[%d] = %d", i, t->kv.blocks[i]);
    sd_exec *rd = NULL;
    if (a) {
        SD_CHECK(sd_cuda_exec_create(a, NULL, 1, &rd, &eb) == SPECDEC_ERR_UNSUPPORTED && !rd,
                 "device executor over a grouped runner not refused");
        SD_CHECK(sd_cuda_exec_create(t, a, 1, &rd, &eb) == SPECDEC_ERR_UNSUPPORTED && !rd,
                 "device executor with a grouped draft not refused");
    }
    if (a && t) SD_CHECK(!sd_cuda_runner_standalone(a) && sd_cuda_runner_standalone(t), "standalone flags");
    sd_runner_destroy(t);
    sd_runner_destroy(p);
    sd_runner_destroy(a);
    sd_runner_destroy(b);
    SD_CHECK(!g || g->pool.n_free == g->pool.n_blocks, "blocks returned");
    sd_runner_group_destroy(g);
    fwd_model_free(m);
}

/* A pool of 4 blocks of 4 rows: a batch that needs more blocks than are free fails
 * with CONTEXT_FULL before computing anything. */
static void check_pool_exhaustion(void) {
    sd_config cfg = fwd_small_config();
    struct specdec_model *m = fwd_model_make(&cfg, SD_BF16, 3);
    sd_errbuf eb = {{0}};
    sd_runner_group *g = NULL;
    SD_CHECK(sd_cuda_group_create(&m->w, 16, 16, 4, 4, 0, 0, &g, &eb) == SPECDEC_OK, "%s", eb.msg);
    if (g) fwd_check_pool_exhaustion(g, &cfg);
    fwd_model_free(m);
}

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    const sd_config c2 = fwd_small_config(), c8 = cfg_gqa8();
    /* SD_CUDA_TEST_QUICK (compute-sanitizer runs): 1 = fewer steps, 2 = fewer still */
    const char *qe = getenv("SD_CUDA_TEST_QUICK");
    const int q = qe ? (atoi(qe) > 1 ? 2 : 1) : 0;
    run_schedule("BF16 GQA 8, max_batch 40", &c8, SD_BF16, 0, 40, 12, q == 2 ? 10 : q ? 30 : 150);
    /* passes of up to 200 tokens (the M-looped GEMM's 64 / 128 / 256-row configurations)
     * and single chain segments above 17 tokens (cuBLAS) */
    if (q < 2) run_schedule("BF16 GQA 8, max_batch 200, segments <= 40", &c8, SD_BF16, 0, 200, 40, q ? 20 : 100);
    if (q < 2) run_schedule("BF16 GQA 2, max_batch 9", &c2, SD_BF16, 0, 9, 6, q ? 30 : 150);
    if (!q) {
        run_schedule("F16 GQA 2, max_batch 17", &c2, SD_F16, 0, 17, 8, 80);
        run_schedule("F32 kept GQA 8, max_batch 9", &c8, SD_F32, 1, 9, 6, 60);
    }
    check_trees(&c8, SD_BF16, q == 2 ? 1 : q ? 2 : 8);
    if (!q) check_trees(&c2, SD_F16, 6);
    check_pool_exhaustion();
    return sd_test_done();
}
#endif

/* test_runner_batch.c — runner groups, the paged KV cache and batched forwards
 * (core/sd_runner.h "Groups and batches", core/sd_kv.h, backends/cpu/sd_cpu_runner.c):
 *   - random schedules: several sequences of one group take random chain and tree
 *     segments in one sd_runner_forward_batch (packed into passes of max_batch tokens,
 *     blocks of 4 rows scattered over the pool); every logit row and kv_len equals a
 *     standalone runner fed the same calls one by one, bitwise; compaction in between;
 *   - block accounting after every step: each sequence holds exactly the blocks of its
 *     rows, the pool's used count is their sum, and destroying the runners returns all;
 *   - the pool running dry: CONTEXT_FULL, nothing computed, the others unchanged;
 *   - bad segments (shared runner, too long, pos past kv_len, bad ids) change nothing;
 *   - runners of different groups (or standalone) fall back to one call per segment
 *     with the same results;
 *   - a pass failing mid-batch: the segments that never ran end at their start with
 *     their blocks given back;
 *   - a batched forward allocates nothing; allocation failure at every k of group and
 *     runner creation leaks nothing (ASan's leak checker runs this too);
 *   - sd_kv pool/table units. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "sd_alloc.h"
#include "sd_cpu_runner.h"
#include "sd_kv.h"
#include "fwd_common.h"
#include "fwd_pool_check.h"

#define N_SEQ 5
#define N_CTX 40
#define MAX_BATCH 9
#define BT 4
#define MAX_SEG 6

typedef struct case_state {
    sd_runner *g_r[N_SEQ];   /* grouped */
    sd_runner *ref[N_SEQ];   /* standalone references */
    int32_t V;
    float *lg, *lr;          /* [N_SEQ][MAX_SEG][V] logits of the batch, of the references */
} case_state;

static uint64_t rng_state = 12345;
static int32_t rnd(int32_t n) { return (int32_t)(fwd_rng_next(&rng_state) % (uint64_t)n); }

/* Pick a segment for runner i: a chain at a position <= kv_len, or a tree (new or
 * extending the current one). */
static void pick_seg(const sd_runner *r, sd_runner_seg *s, int32_t *tok, int32_t *par, int32_t V) {
    memset(s, 0, sizeof *s);
    const int32_t kv = r->kv_len;
    const int tree = kv >= 1 && rnd(3) == 0;
    if (tree && r->tree.n > 0 && rnd(2) == 0 && r->tree.n < 30) { /* extend */
        s->pos = r->tree.base;
        s->first = r->tree.n;
    } else if (tree) {
        s->pos = kv - rnd(kv < 3 ? kv + 1 : 3);
        s->first = 0;
    } else {
        s->pos = rnd(4) == 0 ? rnd(kv + 1) : kv - rnd(kv < 2 ? kv + 1 : 2);
    }
    const int32_t used = tree ? s->pos + s->first : s->pos;
    int32_t room = N_CTX - used;
    if (room > MAX_SEG) room = MAX_SEG;
    s->n = room < 1 ? 0 : 1 + rnd(room);
    for (int32_t k = 0; k < s->n; k++) {
        tok[k] = rnd(V);
        par[k] = (s->first + k == 0 || rnd(4) == 0) ? -1 : rnd(s->first + k);
    }
    s->tokens = tok;
    s->parent = tree ? par : NULL;
}

static void check_accounting(case_state *c, const char *when) {
    const sd_runner_group *g = c->g_r[0]->group;
    int32_t held = 0;
    for (int i = 0; i < N_SEQ; i++) {
        const sd_runner *r = c->g_r[i];
        SD_CHECK(r->kv.n == sd_kv_blocks_for(r->kv_len, BT), "%s: seq %d holds %d blocks for %d rows", when, i,
                 (int)r->kv.n, (int)r->kv_len);
        held += r->kv.n;
    }
    SD_CHECK(sd_kv_pool_used(&g->pool) == held, "%s: pool says %d used, sequences hold %d", when,
             (int)sd_kv_pool_used(&g->pool), (int)held);
}

/* One random step: a random subset of sequences in random order, one batch. */
static void random_step(case_state *c, int step) {
    int32_t order[N_SEQ], n = 0;
    for (int i = 0; i < N_SEQ; i++) order[i] = i;
    for (int i = N_SEQ - 1; i > 0; i--) {
        int j = rnd(i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    const int32_t k = 1 + rnd(N_SEQ);
    sd_runner_seg segs[N_SEQ], refs[N_SEQ];
    int32_t tok[N_SEQ][MAX_SEG], par[N_SEQ][MAX_SEG];
    for (int32_t j = 0; j < k; j++) {
        const int i = order[j];
        pick_seg(c->g_r[i], &segs[n], tok[n], par[n], c->V);
        if (segs[n].n == 0) continue;
        segs[n].r = c->g_r[i];
        segs[n].logits = c->lg + (size_t)n * MAX_SEG * c->V;
        refs[n] = segs[n];
        refs[n].r = c->ref[i];
        refs[n].logits = c->lr + (size_t)n * MAX_SEG * c->V;
        n++;
    }
    if (n == 0) return;
    sd_errbuf eb = {{0}};
    specdec_status st = sd_runner_forward_batch(segs, n, &eb);
    SD_CHECK(st == SPECDEC_OK, "step %d: batch of %d: %s", step, (int)n, eb.msg);
    for (int32_t j = 0; j < n; j++) {
        const sd_runner_seg *s = &refs[j];
        specdec_status rs = s->parent ? sd_runner_forward_tree(s->r, s->tokens, s->n, s->pos, s->first, s->parent, s->logits)
                                      : sd_runner_forward(s->r, s->tokens, s->n, s->pos, s->logits);
        SD_CHECK(rs == SPECDEC_OK, "step %d: reference: %s", step, s->r->err.msg);
        const int64_t d = fwd_first_diff(segs[j].logits, s->logits, (int64_t)s->n * c->V);
        SD_CHECK(d < 0, "step %d: segment %d (%s, %d tokens at %d) differs at row %lld", step, (int)j,
                 s->parent ? "tree" : "chain", (int)s->n, (int)s->pos, (long long)(d / c->V));
        SD_CHECK(segs[j].r->kv_len == s->r->kv_len && segs[j].r->tree.n == s->r->tree.n,
                 "step %d: kv_len %d / tree %d vs reference %d / %d", step, (int)segs[j].r->kv_len,
                 (int)segs[j].r->tree.n, (int)s->r->kv_len, (int)s->r->tree.n);
    }
}

/* Compact a random path of every sequence that holds a tree (grouped and reference). */
static void random_compact(case_state *c, int step) {
    for (int i = 0; i < N_SEQ; i++) {
        sd_runner *r = c->g_r[i];
        if (r->tree.n <= 0 || rnd(2)) continue;
        int32_t keep[SD_RUNNER_TREE_MAX], m = 0, v = rnd(r->tree.n);
        for (int32_t a = v; a >= 0; a = r->tree.parent[a]) keep[m++] = a;
        const int32_t take = rnd(m + 1);
        int32_t path[SD_RUNNER_TREE_MAX];
        for (int32_t j = 0; j < take; j++) path[j] = keep[m - 1 - j];
        SD_CHECK(sd_runner_compact(r, path, take) == SPECDEC_OK, "step %d: compact: %s", step, r->err.msg);
        SD_CHECK(sd_runner_compact(c->ref[i], path, take) == SPECDEC_OK, "step %d: ref compact: %s", step,
                 c->ref[i]->err.msg);
    }
}

static void check_random_schedules(void) {
    sd_config cfg = fwd_small_config();
    struct specdec_model *m = fwd_model_make(&cfg, SD_BF16, 21);
    sd_errbuf eb = {{0}};
    sd_runner_group *g = NULL;
    case_state c;
    memset(&c, 0, sizeof c);
    c.V = cfg.vocab_size;
    /* enough blocks for every sequence's whole context, no more */
    SD_CHECK(sd_cpu_group_create(&m->w, N_CTX, MAX_BATCH, N_SEQ * (N_CTX / BT), BT, &g, &eb) == SPECDEC_OK, "%s",
             eb.msg);
    for (int i = 0; g && i < N_SEQ; i++) {
        SD_CHECK(sd_runner_group_add(g, &c.g_r[i], &eb) == SPECDEC_OK, "add %d: %s", i, eb.msg);
        SD_CHECK(sd_cpu_runner_create(&m->w, N_CTX, N_CTX, &c.ref[i], &eb) == SPECDEC_OK, "ref %d: %s", i, eb.msg);
    }
    c.lg = malloc(sizeof(float) * N_SEQ * MAX_SEG * (size_t)c.V);
    c.lr = malloc(sizeof(float) * N_SEQ * MAX_SEG * (size_t)c.V);
    for (int step = 0; g && step < 300; step++) {
        random_step(&c, step);
        if (step % 3 == 2) random_compact(&c, step);
        check_accounting(&c, "after a step");
        if (step % 50 == 49) /* a finished sequence starts over */
            for (int i = 0; i < N_SEQ; i++)
                if (rnd(2)) {
                    sd_runner_truncate(c.g_r[i], 0);
                    sd_runner_truncate(c.ref[i], 0);
                }
    }
    /* no allocation in a batched forward */
    int32_t t1[2] = {3, 4}, t2[1] = {5};
    sd_runner_seg s2[2] = {{c.g_r[0], t1, 2, 0, NULL, 0, c.lg, NULL, NULL}, {c.g_r[1], t2, 1, 0, NULL, 0, NULL, NULL, NULL}};
    sd_alloc_fail_after(-1);
    SD_CHECK(sd_runner_forward_batch(s2, 2, &eb) == SPECDEC_OK && sd_alloc_count() == 0,
             "batched forward allocated %ld times (%s)", sd_alloc_count(), eb.msg);
    for (int i = 0; i < N_SEQ; i++) {
        sd_runner_destroy(c.g_r[i]);
        sd_runner_destroy(c.ref[i]);
    }
    SD_CHECK(!g || (g->pool.n_free == g->pool.n_blocks && g->n_runners == 0), "blocks not all returned: %d of %d free",
             g ? (int)g->pool.n_free : 0, g ? (int)g->pool.n_blocks : 0);
    sd_runner_group_destroy(g);
    free(c.lg);
    free(c.lr);
    fwd_model_free(m);
}

/* A pool of 4 blocks of 4 rows: a batch that needs more blocks than are free fails
 * with CONTEXT_FULL before computing anything. */
static void check_pool_exhaustion(void) {
    sd_config cfg = fwd_small_config();
    struct specdec_model *m = fwd_model_make(&cfg, SD_F32, 3);
    sd_errbuf eb = {{0}};
    sd_runner_group *g = NULL;
    SD_CHECK(sd_cpu_group_create(&m->w, 16, 16, 4, 4, &g, &eb) == SPECDEC_OK, "%s", eb.msg);
    if (g) fwd_check_pool_exhaustion(g, &cfg);
    fwd_model_free(m);
}

/* Bad segments change nothing; mixed groups are emulated with the same results. */
static void check_bad_and_mixed(void) {
    sd_config cfg = fwd_small_config();
    struct specdec_model *m = fwd_model_make(&cfg, SD_F32, 4);
    sd_errbuf eb = {{0}};
    sd_runner_group *g = NULL;
    sd_runner *a = NULL, *b = NULL, *solo = NULL, *ref = NULL;
    SD_CHECK(sd_cpu_group_create(&m->w, 16, 4, 8, 4, &g, &eb) == SPECDEC_OK, "%s", eb.msg);
    if (!g) return;
    SD_CHECK(sd_runner_group_add(g, &a, &eb) == SPECDEC_OK && sd_runner_group_add(g, &b, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_cpu_runner_create(&m->w, 16, 4, &solo, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_cpu_runner_create(&m->w, 16, 4, &ref, &eb) == SPECDEC_OK, "%s", eb.msg);
    const int32_t V = cfg.vocab_size;
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8}, bad[2] = {1, V};
    float *l1 = malloc(sizeof(float) * 8 * (size_t)V), *l2 = malloc(sizeof(float) * 8 * (size_t)V);
    SD_CHECK(sd_runner_forward(a, tok, 3, 0, NULL) == SPECDEC_OK, "%s", a->err.msg);
    struct {
        const char *what;
        sd_runner_seg s[2];
        int n;
    } cases[] = {
        {"shared runner", {{a, tok, 1, 3, NULL, 0, NULL, NULL, NULL}, {a, tok, 1, 3, NULL, 0, NULL, NULL, NULL}}, 2},
        {"too long", {{a, tok, 5, 3, NULL, 0, NULL, NULL, NULL}, {b, tok, 1, 0, NULL, 0, NULL, NULL, NULL}}, 2},
        {"pos past kv_len", {{b, tok, 1, 0, NULL, 0, NULL, NULL, NULL}, {a, tok, 1, 4, NULL, 0, NULL, NULL, NULL}}, 2},
        {"bad id", {{b, bad, 2, 0, NULL, 0, NULL, NULL, NULL}}, 1},
        {"no runner", {{NULL, tok, 1, 0, NULL, 0, NULL, NULL, NULL}}, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eb.msg[0] = 0;
        SD_CHECK(sd_runner_forward_batch(cases[i].s, cases[i].n, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && eb.msg[0],
                 "%s: not refused", cases[i].what);
        SD_CHECK(a->kv_len == 3 && b->kv_len == 0 && sd_kv_pool_used(&g->pool) == 1, "%s: state changed",
                 cases[i].what);
    }
    SD_CHECK(sd_runner_forward_batch(NULL, 1, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL segments");
    /* mixed: a grouped and a standalone runner -> one call each, same logits */
    sd_runner_seg mix[2] = {{b, tok, 4, 0, NULL, 0, l1, NULL, NULL}, {solo, tok, 4, 0, NULL, 0, l2, NULL, NULL}};
    SD_CHECK(sd_runner_forward_batch(mix, 2, &eb) == SPECDEC_OK, "mixed: %s", eb.msg);
    SD_CHECK(sd_runner_forward(ref, tok, 4, 0, NULL) == SPECDEC_OK, "%s", ref->err.msg);
    SD_CHECK(fwd_first_diff(l1, l2, 4 * (int64_t)V) < 0, "mixed batch: grouped and standalone rows differ");
    SD_CHECK(b->kv_len == 4 && solo->kv_len == 4, "mixed kv_len %d %d", (int)b->kv_len, (int)solo->kv_len);
    sd_runner_destroy(a);
    sd_runner_destroy(b);
    sd_runner_destroy(solo);
    sd_runner_destroy(ref);
    sd_runner_group_destroy(g);
    free(l1);
    free(l2);
    fwd_model_free(m);
}

/* Fail the k-th allocation of group + 2 runners for every k: OUT_OF_MEMORY, no leak. */
static void check_alloc_failures(void) {
    sd_config cfg = fwd_small_config();
    struct specdec_model *m = fwd_model_make(&cfg, SD_BF16, 9);
    long k = 0;
    for (; k < 1000; k++) {
        sd_errbuf eb = {{0}};
        sd_runner_group *g = NULL;
        sd_runner *r[2] = {NULL, NULL};
        sd_alloc_fail_after(k);
        specdec_status st = sd_cpu_group_create(&m->w, 32, 8, 16, 4, &g, &eb);
        for (int i = 0; i < 2 && st == SPECDEC_OK; i++) st = sd_runner_group_add(g, &r[i], &eb);
        sd_alloc_fail_after(-1);
        for (int i = 0; i < 2; i++) sd_runner_destroy(r[i]);
        sd_runner_group_destroy(g);
        if (st == SPECDEC_OK) break;
        SD_CHECK(st == SPECDEC_ERR_OUT_OF_MEMORY && strstr(eb.msg, "out of memory"), "k=%ld: status %d '%s'", k, (int)st,
                 eb.msg);
    }
    SD_CHECK(k > 20 && k < 1000, "creation made %ld allocations", k);
    printf("allocation failure injected at each of %ld allocations of a group and two runners\n", k);
    fwd_model_free(m);
}

/* A synthetic group whose passes fail from the k-th on (a device error mid-batch): the
 * segments that never ran give their blocks back and end at their start. */
typedef struct fail_group {
    sd_runner_group base;
    int calls, fail_at;
} fail_group;
static specdec_status fg_forward(sd_runner *r, const int32_t *t, int32_t n, int32_t pos, float *lg) {
    (void)t;
    (void)lg;
    r->kv_len = pos + n;
    return SPECDEC_OK;
}
static void fg_destroy(sd_runner *r) {
    sd_runner_group_detach(r);
    free(r);
}
static const sd_runner_vtbl fg_vt = {fg_forward, fg_destroy};
static specdec_status fg_add(sd_runner_group *g, sd_runner **out, sd_errbuf *eb) {
    sd_runner *r = calloc(1, sizeof *r);
    r->vt = &fg_vt;
    specdec_status st = sd_runner_group_attach(g, r, eb);
    if (st != SPECDEC_OK) free(r);
    *out = st == SPECDEC_OK ? r : NULL;
    return st;
}
static specdec_status fg_batch(sd_runner_group *gb, const sd_runner_seg *segs, int32_t n) {
    fail_group *g = (fail_group *)gb;
    if (++g->calls >= g->fail_at) return sd_fail(&gb->err, SPECDEC_ERR_DEVICE_LOST, "injected pass failure");
    for (int32_t i = 0; i < n; i++) segs[i].r->kv_len = segs[i].parent ? segs[i].pos + segs[i].first + segs[i].n
                                                                        : segs[i].pos + segs[i].n;
    return SPECDEC_OK;
}
static void fg_gdestroy(sd_runner_group *g) { sd_kv_pool_free(&g->pool); }
static const sd_runner_group_vtbl fg_gvt = {fg_add, fg_batch, fg_gdestroy};

static void check_failed_pass(void) {
    fail_group fg;
    memset(&fg, 0, sizeof fg);
    fg.base.vt = &fg_gvt;
    fg.base.n_vocab = 10;
    fg.base.n_ctx = 32;
    fg.base.max_batch = 5;
    fg.fail_at = 2;
    sd_errbuf eb = {{0}};
    SD_CHECK(sd_kv_pool_init(&fg.base.pool, 16, 4, &eb) == SPECDEC_OK, "%s", eb.msg);
    sd_runner *r[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) SD_CHECK(sd_runner_group_add(&fg.base, &r[i], &eb) == SPECDEC_OK, "add %d", i);
    int32_t tok[4] = {1, 2, 3, 4}, par[2] = {-1, 0};
    /* three segments of 3 + 2 + 4 tokens: passes {0, 1} then {2}; the second pass fails */
    sd_runner_seg segs[3] = {{r[0], tok, 3, 0, NULL, 0, NULL, NULL, NULL}, {r[1], tok, 2, 0, NULL, 0, NULL, NULL, NULL},
                             {r[2], tok, 4, 0, NULL, 0, NULL, NULL, NULL}};
    SD_CHECK(sd_runner_forward_batch(segs, 3, &eb) == SPECDEC_ERR_DEVICE_LOST, "the failure is reported: %s", eb.msg);
    SD_CHECK(strstr(eb.msg, "injected") != NULL, "detail: %s", eb.msg);
    SD_CHECK(r[0]->kv_len == 3 && r[1]->kv_len == 2 && r[2]->kv_len == 0, "kv_len %d %d %d", (int)r[0]->kv_len,
             (int)r[1]->kv_len, (int)r[2]->kv_len);
    SD_CHECK(r[2]->kv.n == 0 && sd_kv_pool_used(&fg.base.pool) == 2, "blocks of the segment that never ran: %d held, "
             "%d used", (int)r[2]->kv.n, (int)sd_kv_pool_used(&fg.base.pool));
    /* a tree segment that never ran ends its tree at its start */
    fg.calls = 0;
    sd_runner_seg t2[2] = {{r[0], tok, 4, 3, NULL, 0, NULL, NULL, NULL}, {r[1], tok, 2, 2, par, 0, NULL, NULL, NULL}};
    t2[0].n = 1;
    fg.base.max_batch = 2;
    SD_CHECK(sd_runner_forward_batch(t2, 2, &eb) == SPECDEC_ERR_DEVICE_LOST, "tree batch failure reported");
    SD_CHECK(r[1]->kv_len == 2 && r[1]->tree.n == 0 && r[1]->kv.n == 1, "tree segment: kv_len %d tree %d blocks %d",
             (int)r[1]->kv_len, (int)r[1]->tree.n, (int)r[1]->kv.n);
    for (int i = 0; i < 3; i++) sd_runner_destroy(r[i]);
    SD_CHECK(fg.base.pool.n_free == 16 && fg.base.n_runners == 0, "all blocks back");
    sd_runner_group_destroy(&fg.base);
}

static void check_kv_units(void) {
    sd_kv_pool p;
    sd_kv_table t1, t2;
    sd_errbuf eb = {{0}};
    SD_CHECK(sd_kv_pool_init(&p, 0, 4, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "0 blocks");
    SD_CHECK(sd_kv_pool_init(&p, 5, 3, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_kv_table_init(&t1, 10, 3, &eb) == SPECDEC_OK && t1.cap == 4, "cap %d", (int)t1.cap);
    SD_CHECK(sd_kv_table_init(&t2, 10, 3, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_kv_hold(&t1, &p, 7, &eb) == SPECDEC_OK && t1.n == 3 && p.n_free == 2, "hold 7 rows");
    SD_CHECK(t1.blocks[0] == 0 && t1.blocks[1] == 1 && t1.blocks[2] == 2, "blocks taken in order");
    SD_CHECK(sd_kv_row(&t1, 3, 7) == 2 * 3 + 1, "row 7 -> physical %lld", (long long)sd_kv_row(&t1, 3, 7));
    SD_CHECK(sd_kv_hold(&t2, &p, 9, &eb) == SPECDEC_ERR_CONTEXT_FULL && t2.n == 0 && p.n_free == 2, "dry pool");
    SD_CHECK(sd_kv_hold(&t1, &p, 13, &eb) == SPECDEC_ERR_CONTEXT_FULL && t1.n == 3, "past the table's capacity");
    sd_kv_trim(&t1, &p, 4);
    SD_CHECK(t1.n == 2 && p.n_free == 3, "trim to 4 rows keeps 2 blocks");
    SD_CHECK(sd_kv_hold(&t2, &p, 9, &eb) == SPECDEC_OK && t2.blocks[0] == 2, "the freed block is reused first");
    sd_kv_trim(&t1, &p, 0);
    sd_kv_trim(&t2, &p, 0);
    SD_CHECK(p.n_free == 5 && sd_kv_pool_used(&p) == 0, "all back");
    sd_kv_table_free(&t1);
    sd_kv_table_free(&t2);
    sd_kv_pool_free(&p);
}

int main(void) {
    check_kv_units();
    check_random_schedules();
    check_pool_exhaustion();
    check_bad_and_mixed();
    check_alloc_failures();
    check_failed_pass();
    return sd_test_done();
}

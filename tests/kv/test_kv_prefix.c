/* test_kv_prefix.c — the prefix cache of a KV pool (core/sd_kv.h "Prefix cache") and
 * of runner groups (core/sd_runner.h "Prefix cache"), below the scheduler:
 *   1. bookkeeping, step by step: publish, attach (whole blocks only, the longest
 *      matching run), reference counts, cached blocks counted free, eviction least
 *      recently given back first (a sequence's tail before its head), salts kept apart,
 *      equal rows
 *      published twice end up in one block, and a block whose parent was evicted and
 *      reused never matches again (the generation check);
 *   2. a fixed-seed random walk of 6 tables over a pool of 20 blocks with prompts drawn
 *      from a few shared stems and a 3-token alphabet (so prefixes collide often): after
 *      every step every block's reference count is the number of tables holding it, the
 *      free count is the free stack plus the unheld cached blocks, the index holds
 *      exactly the cached blocks, attached blocks carry the table's salt (a quarter of
 *      the sequences salted), and — against a model of what every physical row was
 *      last written with — every attached block holds exactly the rows of the tokens
 *      asked for, and no table ever writes a block another table holds;
 *   3. runners of a group with a prefix cache on the Llama fixture: a runner that takes
 *      another's cached rows and forwards the rest gives logits bitwise equal to a
 *      standalone runner forwarding everything; truncations and forwards below its
 *      shared rows fail with INVALID_ARGUMENT naming the prefix cache and change
 *      nothing; a windowed group refuses a prefix cache (UNSUPPORTED).
 * Usage: test_kv_prefix FIXTURES_DIR (tests/models/fixtures). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "sd_test_util.h"
#include "sd_engine.h"
#include "sd_kv.h"
#include "sd_runner.h"

static int32_t rint_(uint64_t *s, int32_t lo, int32_t hi) {
    return lo + (int32_t)(sd_test_splitmix64(s) % (uint64_t)(hi - lo + 1));
}

/* ---- 1. bookkeeping ------------------------------------------------------------------ */
#define BT1 4

/* Move cached, unheld block b to the head of the LRU list (white box: makes it the next
 * eviction, which the protocol alone never does to a parent before its children). */
static void lru_to_head(sd_kv_prefix *px, int32_t b) {
    const int32_t p = px->prev[b], n = px->next[b];
    if (p < 0) return;
    px->next[p] = n;
    if (n >= 0) px->prev[n] = p;
    else px->lru_tail = p;
    px->prev[b] = -1;
    px->next[b] = px->lru_head;
    px->prev[px->lru_head] = b;
    px->lru_head = b;
}

static void bookkeeping(void) {
    sd_kv_pool pool;
    sd_kv_table a, b, c;
    sd_errbuf eb = {{0}};
    const int32_t T[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    int32_t U[12];
    memcpy(U, T, sizeof U);
    U[5] = 99; /* differs in block 1 */
    SD_CHECK(sd_kv_pool_init(&pool, 8, BT1, &eb) == SPECDEC_OK && sd_kv_table_init(&a, 32, BT1, &eb) == SPECDEC_OK &&
                 sd_kv_table_init(&b, 32, BT1, &eb) == SPECDEC_OK && sd_kv_table_init(&c, 32, BT1, &eb) == SPECDEC_OK,
             "init: %s", eb.msg);
    SD_CHECK(sd_kv_prefix_attach(&a, &pool, T, 12, 0) == 0 && sd_kv_prefix_publish(&a, &pool, T, 12, 0) == 0,
             "no prefix cache: attach and publish do nothing");
    SD_CHECK(sd_kv_hold(&a, &pool, 5, &eb) == SPECDEC_OK, "hold");
    SD_CHECK(sd_kv_prefix_enable(&pool, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && !pool.prefix,
             "enable with blocks held: refused");
    sd_kv_trim(&a, &pool, 0);
    SD_CHECK(sd_kv_prefix_enable(&pool, &eb) == SPECDEC_OK && pool.prefix, "enable: %s", eb.msg);

    /* a computes 3 blocks (10 rows: 2 full) and publishes */
    SD_CHECK(sd_kv_hold(&a, &pool, 10, &eb) == SPECDEC_OK && a.n == 3, "a holds 3 blocks");
    const int32_t a0 = a.blocks[0], a1 = a.blocks[1], a2 = a.blocks[2];
    SD_CHECK(sd_kv_prefix_publish(&a, &pool, T, 10, 0) == 2 && a.shared == 2, "10 rows: 2 full blocks cached (%d)",
             a.shared);
    SD_CHECK(sd_kv_hold(&a, &pool, 12, &eb) == SPECDEC_OK && sd_kv_prefix_publish(&a, &pool, T, 12, 0) == 3,
             "12 rows: the third block too");
    /* the key only picks the bucket: a block whose stored ids differ never matches (white
     * box: one id changed as if two token runs had the same 64-bit key) */
    pool.prefix->tokens[a0 * BT1 + 3] = 77;
    SD_CHECK(sd_kv_prefix_attach(&b, &pool, T, 12, 0) == 0, "equal keys, different ids: no match");
    pool.prefix->tokens[a0 * BT1 + 3] = T[3];
    /* b attaches: whole blocks within the rows asked */
    SD_CHECK(sd_kv_prefix_attach(&b, &pool, T, 11, 0) == 8 && b.n == 2 && b.shared == 2 && b.blocks[0] == a0 &&
                 b.blocks[1] == a1,
             "attach 11 rows: a's first 2 blocks (n %d)", b.n);
    SD_CHECK(pool.prefix->ref[a0] == 2 && pool.prefix->ref[a2] == 1 && pool.n_free == 5, "refs %d/%d, free %d",
             pool.prefix->ref[a0], pool.prefix->ref[a2], pool.n_free);
    sd_kv_trim(&b, &pool, 0);
    SD_CHECK(sd_kv_prefix_attach(&b, &pool, U, 12, 0) == 4 && b.blocks[0] == a0, "a different block 1: 1 block");
    sd_kv_trim(&b, &pool, 0);
    SD_CHECK(sd_kv_prefix_attach(&b, &pool, T, 3, 0) == 0 && b.n == 0, "fewer rows than a block: none");
    /* a is done: its blocks stay cached, counted free */
    sd_kv_trim(&a, &pool, 0);
    SD_CHECK(pool.n_free == 8 && sd_kv_cached(&pool) == 3 && pool.n_stack == 5, "free %d cached %d stack %d",
             pool.n_free, sd_kv_cached(&pool), pool.n_stack);
    /* c takes the 5 stack blocks, then evicts: a's tail (a2) first */
    SD_CHECK(sd_kv_hold(&c, &pool, 24, &eb) == SPECDEC_OK && sd_kv_cached(&pool) == 2 && !pool.prefix->cached[a2],
             "6 blocks: the stack, then a2 evicted");
    SD_CHECK(sd_kv_prefix_attach(&b, &pool, T, 12, 0) == 8, "T now matches 2 blocks");
    SD_CHECK(sd_kv_hold(&c, &pool, 32, &eb) == SPECDEC_ERR_CONTEXT_FULL, "a held cached block is not evictable");
    sd_kv_trim(&b, &pool, 0);
    sd_kv_trim(&c, &pool, 0);

    /* equal rows published twice: the second table's copy is swapped for the cached one */
    SD_CHECK(sd_kv_hold(&c, &pool, 8, &eb) == SPECDEC_OK, "c holds 2 blocks");
    const int32_t c0 = c.blocks[0];
    const int32_t free_before = pool.n_free;
    SD_CHECK(sd_kv_prefix_publish(&c, &pool, T, 8, 0) == 2 && c.blocks[0] == a0 && c.blocks[1] == a1 &&
                 pool.prefix->ref[a0] == 1 && pool.n_free == free_before,
             "publish of cached rows: shares a0/a1 (c0 %d back; free %d -> %d)", c0, free_before, pool.n_free);
    sd_kv_trim(&c, &pool, 0);

    /* generations: evict a0 (white box: first in line), reuse it for other rows; a1,
     * whose parent it was, must not match after the new a0 */
    lru_to_head(pool.prefix, a0);
    SD_CHECK(sd_kv_hold(&b, &pool, pool.n_stack * BT1, &eb) == SPECDEC_OK && pool.n_stack == 0, "b takes the stack");
    SD_CHECK(sd_kv_hold(&c, &pool, BT1, &eb) == SPECDEC_OK && c.blocks[0] == a0 && !pool.prefix->cached[a0],
             "c's block is a0, evicted (%d)", c.blocks[0]);
    const int32_t V[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* T's first two blocks */
    SD_CHECK(sd_kv_prefix_publish(&c, &pool, V, 4, 0) == 1, "c publishes V's block 0 in a0 again");
    sd_kv_trim(&c, &pool, 0);
    sd_kv_trim(&b, &pool, 0);
    SD_CHECK(pool.prefix->cached[a1] && pool.prefix->parent[a1] == a0, "a1 still cached, its parent id a0");
    SD_CHECK(sd_kv_prefix_attach(&b, &pool, V, 8, 0) == 4 && b.blocks[0] == a0,
             "V matches its first block only: a1 followed an older a0 (got %d rows)", b.n * BT1);
    sd_kv_trim(&b, &pool, 0);
    /* salts: another salt finds nothing, and its own copy is kept apart */
    SD_CHECK(sd_kv_hold(&c, &pool, 8, &eb) == SPECDEC_OK && sd_kv_prefix_publish(&c, &pool, T, 8, 0) == 2, "T unsalted");
    const int32_t u0 = c.blocks[0];
    sd_kv_trim(&c, &pool, 0);
    SD_CHECK(sd_kv_prefix_attach(&b, &pool, T, 12, 7) == 0, "salt 7 does not find unsalted rows");
    SD_CHECK(sd_kv_hold(&b, &pool, 8, &eb) == SPECDEC_OK && sd_kv_prefix_publish(&b, &pool, T, 8, 7) == 2 &&
                 b.blocks[0] != u0,
             "salt 7 publishes its own copy");
    const int32_t s0 = b.blocks[0];
    sd_kv_trim(&b, &pool, 0);
    SD_CHECK(sd_kv_prefix_attach(&b, &pool, T, 12, 7) == 8 && b.blocks[0] == s0, "salt 7 finds its own copy");
    sd_kv_trim(&b, &pool, 0);
    SD_CHECK(sd_kv_prefix_attach(&b, &pool, T, 12, 0) == 8 && b.blocks[0] == u0, "unsalted: the unsalted copy");
    sd_kv_trim(&b, &pool, 0);
    SD_CHECK(pool.n_free == pool.n_blocks, "all free at the end");
    sd_kv_table_free(&a);
    sd_kv_table_free(&b);
    sd_kv_table_free(&c);
    sd_kv_pool_free(&pool);
}

/* ---- 2. random walk against a model of the rows ------------------------------------- */
#define BT2 4
#define NB2 20
#define NT2 6
#define CAP2 40
#define STEPS 20000

typedef struct walk_tab {
    sd_kv_table t;
    int32_t seq[CAP2];
    int32_t len;  /* tokens of its sequence */
    int32_t rows; /* rows computed (written or attached) */
    uint64_t salt; /* its sequence's cache salt (0 or 1) */
} walk_tab;

typedef struct walk {
    sd_kv_pool pool;
    walk_tab tab[NT2];
    int32_t row_tok[NB2 * BT2]; /* what each physical row was last written with (-1: never) */
    int64_t attached, evicted_before, steps_with_sharing;
} walk;

static void walk_check(walk *w, int step) {
    const sd_kv_prefix *px = w->pool.prefix;
    int32_t ref[NB2] = {0};
    for (int i = 0; i < NT2; i++)
        for (int32_t j = w->tab[i].t.lo; j < w->tab[i].t.n; j++) ref[w->tab[i].t.blocks[j]]++;
    int32_t lru = 0, stack_ok = 1, idx = 0;
    for (int32_t b = 0; b < NB2; b++) SD_CHECK(ref[b] == px->ref[b], "step %d: block %d ref %d, counted %d", step, b,
                                                px->ref[b], ref[b]);
    for (int32_t b = px->lru_head; b >= 0; b = px->next[b]) {
        lru++;
        SD_CHECK(px->cached[b] && px->ref[b] == 0, "step %d: LRU block %d cached %d ref %d", step, b, px->cached[b],
                 px->ref[b]);
    }
    for (int32_t k = 0; k < w->pool.n_stack; k++) {
        const int32_t b = w->pool.free_ids[k];
        if (px->cached[b] || px->ref[b] != 0) stack_ok = 0;
    }
    for (uint32_t h = 0; h <= px->mask; h++)
        for (int32_t b = px->bucket[h]; b >= 0; b = px->hnext[b]) {
            idx++;
            SD_CHECK(px->cached[b] && (px->key[b] & px->mask) == h, "step %d: index entry %d", step, b);
        }
    int32_t n_cached = 0;
    for (int32_t b = 0; b < NB2; b++) {
        if (!px->cached[b]) continue;
        n_cached++;
        /* a cached block holds the rows its tokens say */
        SD_CHECK(memcmp(w->row_tok + b * BT2, px->tokens + b * BT2, BT2 * sizeof(int32_t)) == 0,
                 "step %d: cached block %d's rows were overwritten", step, b);
    }
    SD_CHECK(lru == px->n_lru && stack_ok && idx == n_cached && w->pool.n_free == w->pool.n_stack + px->n_lru,
             "step %d: lru %d/%d, stack %d, index %d/%d, free %d = %d + %d", step, lru, px->n_lru, stack_ok, idx,
             n_cached, w->pool.n_free, w->pool.n_stack, px->n_lru);
}

/* A new sequence for table i: a stem, then random tokens; attach what the cache has. */
static void walk_start(walk *w, walk_tab *x, uint64_t *s) {
    static const int32_t stems[3][12] = {{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2},
                                         {0, 1, 2, 0, 2, 2, 2, 1, 0, 0, 1, 1},
                                         {1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2, 2}};
    sd_kv_trim(&x->t, &w->pool, 0);
    const int k = rint_(s, 0, 3), stem = k < 3 ? rint_(s, 0, 12) : 0;
    x->len = rint_(s, 1, CAP2);
    for (int32_t j = 0; j < x->len; j++) x->seq[j] = j < stem ? stems[k][j] : rint_(s, 0, 2);
    const int32_t ask = rint_(s, 0, x->len);
    x->salt = rint_(s, 0, 3) == 0; /* a quarter of the sequences salted: shared only among them */
    x->rows = sd_kv_prefix_attach(&x->t, &w->pool, x->seq, ask, x->salt);
    for (int32_t j = 0; j < x->t.n; j++)
        SD_CHECK(w->pool.prefix->salt[x->t.blocks[j]] == x->salt, "attached block %d has another salt", j);
    SD_CHECK(x->rows % BT2 == 0 && x->rows <= ask && x->t.shared == x->t.n, "attach %d of %d rows", x->rows, ask);
    w->attached += x->rows / BT2;
    for (int32_t j = 0; j < x->rows; j++)
        SD_CHECK(w->row_tok[x->t.blocks[j / BT2] * BT2 + j % BT2] == x->seq[j],
                 "attached row %d holds token %d, wanted %d", j, w->row_tok[x->t.blocks[j / BT2] * BT2 + j % BT2],
                 x->seq[j]);
}

/* Table x computes rows [rows, to): hold, then write (never into a held-elsewhere block). */
static void walk_compute(walk *w, walk_tab *x, int32_t to) {
    sd_errbuf eb = {{0}};
    if (sd_kv_hold(&x->t, &w->pool, to, &eb) != SPECDEC_OK) return; /* pool dry: fine, nothing taken */
    for (int32_t j = x->rows; j < to; j++) {
        const int32_t b = x->t.blocks[j / BT2];
        SD_CHECK(j / BT2 >= x->t.shared && w->pool.prefix->ref[b] == 1 && !w->pool.prefix->cached[b],
                 "row %d: writing block %d (shared %d, ref %d, cached %d)", j, b, x->t.shared, w->pool.prefix->ref[b],
                 w->pool.prefix->cached[b]);
        w->row_tok[b * BT2 + j % BT2] = x->seq[j];
    }
    x->rows = to;
}

static void random_walk(void) {
    walk *w = calloc(1, sizeof *w);
    sd_errbuf eb = {{0}};
    if (!w) return;
    SD_CHECK(sd_kv_pool_init(&w->pool, NB2, BT2, &eb) == SPECDEC_OK && sd_kv_prefix_enable(&w->pool, &eb) == SPECDEC_OK,
             "pool: %s", eb.msg);
    for (int i = 0; i < NT2; i++) SD_CHECK(sd_kv_table_init(&w->tab[i].t, CAP2, BT2, &eb) == SPECDEC_OK, "table");
    for (int32_t j = 0; j < NB2 * BT2; j++) w->row_tok[j] = -1;
    uint64_t s = 0xC0FFEE;
    int64_t evictions = 0;
    for (int step = 0; step < STEPS; step++) {
        walk_tab *x = &w->tab[rint_(&s, 0, NT2 - 1)];
        const int op = rint_(&s, 0, 9);
        const int32_t cached_before = sd_kv_cached(&w->pool), stack_before = w->pool.n_stack;
        if (op < 3 || x->len == 0) walk_start(w, x, &s);
        else if (op < 7) walk_compute(w, x, rint_(&s, x->rows, x->len));
        else if (op < 9) (void)sd_kv_prefix_publish(&x->t, &w->pool, x->seq, x->rows, x->salt);
        else { /* roll back, never into shared rows */
            const int32_t to = rint_(&s, x->t.shared * BT2, x->rows);
            sd_kv_trim(&x->t, &w->pool, to);
            x->rows = to == 0 ? 0 : to;
            if (to == 0) x->len = 0;
        }
        if (sd_kv_cached(&w->pool) < cached_before && stack_before == 0) evictions++;
        walk_check(w, step);
        if (sd_test_fail_count > 20) break;
    }
    printf("random walk: %lld blocks attached, %lld evictions over %d steps\n", (long long)w->attached,
           (long long)evictions, STEPS);
    SD_CHECK(w->attached > 1000 && evictions > 100, "the walk exercised sharing (%lld) and eviction (%lld)",
             (long long)w->attached, (long long)evictions);
    for (int i = 0; i < NT2; i++) {
        sd_kv_trim(&w->tab[i].t, &w->pool, 0);
        sd_kv_table_free(&w->tab[i].t);
    }
    SD_CHECK(w->pool.n_free == NB2, "all blocks back");
    sd_kv_pool_free(&w->pool);
    free(w);
}

/* ---- 3. runners ------------------------------------------------------------------------ */
#define N_CTX3 96
#define BT3 8
#define N3 40

static void runners(const char *fx) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/llama_bias", fx);
    specdec_model *m = NULL;
    if (specdec_model_load(dir, NULL, &m) != SPECDEC_OK) {
        SD_CHECK(0, "load %s: %s", dir, specdec_last_error());
        return;
    }
    specdec_engine_params ep = specdec_engine_default_params();
    sd_errbuf eb = {{0}};
    sd_runner_group *g = NULL;
    sd_runner *a = NULL, *b = NULL, *solo = NULL;
    SD_CHECK(sd_engine_make_group(m, SPECDEC_BACKEND_CPU, &ep, N_CTX3, 32, 24, BT3, &g, &eb) == SPECDEC_OK, "group: %s",
             eb.msg);
    SD_CHECK(g && sd_runner_group_enable_prefix(g, &eb) == SPECDEC_OK, "enable: %s", eb.msg);
    SD_CHECK(g && sd_runner_group_add(g, &a, &eb) == SPECDEC_OK && sd_runner_group_add(g, &b, &eb) == SPECDEC_OK,
             "runners: %s", eb.msg);
    SD_CHECK(g && sd_runner_group_enable_prefix(g, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "enable after runners");
    SD_CHECK(sd_engine_make_runner(m, SPECDEC_BACKEND_CPU, &ep, N_CTX3, 32, &solo, &eb) == SPECDEC_OK, "solo: %s",
             eb.msg);
    if (!a || !b || !solo) goto out;
    const int32_t V = a->n_vocab;
    int32_t tok[N3];
    for (int32_t i = 0; i < N3; i++) tok[i] = (i * 7 + 3) % V;
    float *ref = malloc((size_t)N3 * V * sizeof(float)), *got = malloc((size_t)N3 * V * sizeof(float));
    if (!ref || !got) goto done;
    SD_CHECK(sd_runner_forward_chunked(solo, tok, N3, 0, ref) == SPECDEC_OK, "solo forward: %s", solo->err.msg);
    SD_CHECK(sd_runner_forward_chunked(a, tok, 30, 0, NULL) == SPECDEC_OK, "a: %s", a->err.msg);
    sd_runner_prefix_publish(a, tok, 30, 0); /* 3 full blocks */
    SD_CHECK(a->kv.shared == 3, "a published 3 blocks (%d)", a->kv.shared);
    SD_CHECK(sd_runner_truncate(a, 0) == SPECDEC_OK && a->kv.shared == 0, "a starts over");
    SD_CHECK(sd_runner_prefix_attach(b, tok, N3 - 1, 0) == 24 && sd_runner_kv_len(b) == 24, "b takes 24 rows (%d)",
             sd_runner_kv_len(b));
    SD_CHECK(sd_runner_truncate(b, 20) == SPECDEC_ERR_INVALID_ARGUMENT && sd_runner_kv_len(b) == 24 &&
                 strstr(b->err.msg, "prefix cache"),
             "truncate into shared rows refused: %s", b->err.msg);
    SD_CHECK(sd_runner_forward(b, tok + 10, 4, 10, NULL) == SPECDEC_ERR_INVALID_ARGUMENT && sd_runner_kv_len(b) == 24,
             "forward into shared rows refused");
    SD_CHECK(sd_runner_forward_chunked(b, tok + 24, N3 - 24, 24, got + (size_t)24 * V) == SPECDEC_OK, "b: %s",
             b->err.msg);
    SD_CHECK(memcmp(ref + (size_t)24 * V, got + (size_t)24 * V, (size_t)(N3 - 24) * V * sizeof(float)) == 0,
             "rows 24..39 after cached rows: bitwise those of one standalone forward");
    SD_CHECK(sd_runner_truncate(b, 24) == SPECDEC_OK && sd_runner_truncate(b, 0) == SPECDEC_OK, "back to 24, then 0");
done:
    free(ref);
    free(got);
out:
    sd_runner_destroy(a);
    sd_runner_destroy(b);
    sd_runner_destroy(solo);
    SD_CHECK(!g || g->pool.n_free == g->pool.n_blocks, "blocks back");
    sd_runner_group_destroy(g);
    specdec_model_free(m);

    /* a model whose every layer slides: no prefix cache */
    snprintf(dir, sizeof dir, "%s/mistral_window", fx);
    m = NULL;
    g = NULL;
    if (specdec_model_load(dir, NULL, &m) == SPECDEC_OK &&
        sd_engine_make_group(m, SPECDEC_BACKEND_CPU, &ep, 48, 32, 12, BT3, &g, &eb) == SPECDEC_OK)
        SD_CHECK(g->kv_window > 0 && sd_runner_group_enable_prefix(g, &eb) == SPECDEC_ERR_UNSUPPORTED,
                 "windowed group refuses: %s", eb.msg);
    else SD_CHECK(0, "mistral_window: %s %s", specdec_last_error(), eb.msg);
    sd_runner_group_destroy(g);
    specdec_model_free(m);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_kv_prefix FIXTURES_DIR\n");
        return 2;
    }
    bookkeeping();
    random_walk();
    runners(argv[1]);
    return sd_test_done();
}

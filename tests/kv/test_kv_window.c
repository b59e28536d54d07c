/* test_kv_window.c — sliding-window release of paged KV blocks (core/sd_kv.h "Sliding
 * windows", core/sd_runner.h "Sliding-window release"), below the scheduler:
 *   1. table bookkeeping: sd_kv_release gives blocks back with SD_KV_RELEASED in their
 *      place, the pool's count stays exact, a trim to 0 starts the table over;
 *   2. which models release (sd_cfg_release_window through sd_engine_make_group): the
 *      all-sliding fixtures (Mistral, Phi-3 with a window, Qwen2 with every layer
 *      sliding) do, the mixed local/global ones (Gemma 2, Gemma 3, Qwen2 with
 *      max_window_layers > 0) and windows >= n_ctx do not — and a mixed model's runner
 *      keeps every block over a long sequence;
 *   3. two grouped runners of the Mistral-window fixture sharing a pool far smaller than
 *      their sequences (so released blocks are reused by the other one) against two
 *      standalone runners (no release): a fixed-seed random walk of chains, trees,
 *      compactions, batched forwards and rollbacks of up to SD_RUNNER_WINDOW_MARGIN rows
 *      gives bitwise equal logits at every step, never holds more than
 *      sd_kv_window_blocks, and going below the kept rows (truncate, forward, tree
 *      base, batch segment) is INVALID_ARGUMENT naming the window with nothing changed;
 *   4. the CUDA attention kernel's tile walk (kernels/cuda/sd_cuda_keymap.h, the
 *      functions the kernel calls) emulated on the host over a released table: for
 *      chains and trees at any position the protocol allows, every row it loads
 *      resolves to a held block (a released block would give a negative row);
 *   5. sd_kv_window_blocks bounds the blocks held at once in a simulation of calls and
 *      rollbacks.
 * Usage: test_kv_window FIXTURES_DIR (tests/models/fixtures). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sd_test.h"
#include "sd_config.h"
#include "sd_cuda_keymap.h"
#include "sd_engine.h"
#include "sd_kv.h"
#include "sd_runner.h"
#include "sd_weights.h"

static uint64_t rng(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int32_t rint_(uint64_t *s, int32_t lo, int32_t hi) { return lo + (int32_t)(rng(s) % (uint64_t)(hi - lo + 1)); }

/* ---- 1. bookkeeping ------------------------------------------------------------------ */
static void kv_ops(void) {
    sd_kv_pool pool;
    sd_kv_table t;
    sd_errbuf eb = {{0}};
    SD_CHECK(sd_kv_pool_init(&pool, 10, 4, &eb) == SPECDEC_OK && sd_kv_table_init(&t, 64, 4, &eb) == SPECDEC_OK,
             "init: %s", eb.msg);
    SD_CHECK(sd_kv_hold(&t, &pool, 30, &eb) == SPECDEC_OK && t.n == 8 && pool.n_free == 2, "hold 30 rows");
    SD_CHECK(sd_kv_release(&t, &pool, 13) == 3 && t.lo == 3 && sd_kv_held(&t) == 5 && pool.n_free == 5,
             "release below 13: blocks 0..2 (lo %d, free %d)", t.lo, pool.n_free);
    for (int32_t b = 0; b < 3; b++) SD_CHECK(t.blocks[b] == SD_KV_RELEASED, "block %d holds the sentinel", b);
    SD_CHECK(sd_kv_release(&t, &pool, 12) == 0 && sd_kv_release(&t, &pool, 1000) == 4 && t.lo == 7,
             "release is monotone and keeps the last block (lo %d)", t.lo);
    SD_CHECK(sd_kv_first_row(&t, 4) == 28 && pool.n_free == 9, "first row %d", sd_kv_first_row(&t, 4));
    SD_CHECK(sd_kv_hold(&t, &pool, 64, &eb) == SPECDEC_OK && t.n == 16 && sd_kv_held(&t) == 9 && pool.n_free == 1,
             "a released table grows at its end (%s)", eb.msg);
    SD_CHECK(sd_kv_hold(&t, &pool, 65, &eb) == SPECDEC_ERR_CONTEXT_FULL, "past its capacity");
    sd_kv_trim(&t, &pool, 40);
    SD_CHECK(t.n == 10 && t.lo == 7 && pool.n_free == 7, "trim to 40 rows (n %d, free %d)", t.n, pool.n_free);
    sd_kv_trim(&t, &pool, 0);
    SD_CHECK(t.n == 0 && t.lo == 0 && pool.n_free == 10, "trim to 0 starts over (n %d lo %d)", t.n, t.lo);
    /* window arithmetic */
    SD_CHECK(sd_kv_window_keep(100, 5, 10) == 64 && sd_kv_window_keep(40, 5, 10) == 0, "keep %d",
             sd_kv_window_keep(100, 5, 10));
    SD_CHECK(sd_kv_window_min_len(0, 5) == 0 && sd_kv_window_min_len(64, 5) == 68 && sd_kv_window_min_len(60, 5) == 68,
             "min len %d", sd_kv_window_min_len(60, 5));
    SD_CHECK(SD_KV_WINDOW_ALIGN % SD_KEYMAP_TILE == 0 && SD_CUDA_ATTN_SPLIT % SD_KEYMAP_TILE == 0,
             "the release point is aligned to the CUDA kernel's tiles");
    sd_kv_table_free(&t);
    sd_kv_pool_free(&pool);
}

/* ---- 2. which models release ----------------------------------------------------------- */
#define N_CTX 512
#define BT 8
#define MAX_BATCH 80

static specdec_status make_group(const specdec_model *m, int32_t n_ctx, int32_t n_blocks, sd_runner_group **g,
                                 sd_errbuf *eb) {
    specdec_engine_params ep = specdec_engine_default_params();
    return sd_engine_make_group(m, SPECDEC_BACKEND_CPU, &ep, n_ctx, n_ctx < MAX_BATCH ? n_ctx : MAX_BATCH, n_blocks, BT,
                                g, eb);
}

static specdec_model *load_fixture(const char *fx, const char *name) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", fx, name);
    specdec_model *m = NULL;
    specdec_status st = specdec_model_load(dir, NULL, &m);
    SD_CHECK(st == SPECDEC_OK, "load %s: %s", dir, specdec_last_error());
    return st == SPECDEC_OK ? m : NULL;
}

static int32_t group_window(const char *fx, const char *name, int32_t n_ctx) {
    specdec_model *m = load_fixture(fx, name);
    if (!m) return -1;
    sd_runner_group *g = NULL;
    sd_errbuf eb = {{0}};
    specdec_status st = make_group(m, n_ctx, 8, &g, &eb);
    SD_CHECK(st == SPECDEC_OK, "%s: group: %s", name, eb.msg);
    const int32_t w = st == SPECDEC_OK ? g->kv_window : -1;
    sd_runner_group_destroy(g);
    specdec_model_free(m);
    return w;
}

static int32_t cfg_window(const char *arch, const char *extra, int32_t n_ctx) {
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"architectures\": [\"%s\"], \"vocab_size\": 64, \"hidden_size\": 32, \"intermediate_size\": 48, "
             "\"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, %s}",
             arch, extra);
    sd_config c;
    sd_errbuf eb = {{0}};
    specdec_status st = sd_config_parse(buf, strlen(buf), "config.json", &c, &eb);
    SD_CHECK(st == SPECDEC_OK, "%s %s: %s", arch, extra, eb.msg);
    return st == SPECDEC_OK ? sd_cfg_release_window(&c, n_ctx) : -1;
}

static void which_release(const char *fx) {
    SD_CHECK(group_window(fx, "mistral_window", N_CTX) == 5, "Mistral, window 5 on every layer: releases");
    SD_CHECK(group_window(fx, "mistral_window", 5) == 0, "a window >= n_ctx never binds: no release");
    const char *mixed[] = {"qwen2_window", "gemma2", "gemma3"};
    for (int i = 0; i < 3; i++) SD_CHECK(group_window(fx, mixed[i], N_CTX) == 0, "%s (local + global): none", mixed[i]);
    const int32_t phi = group_window(fx, "phi3_window", N_CTX);
    SD_CHECK(phi > 0, "Phi-3 with a window on every layer releases (%d)", phi);
    SD_CHECK(cfg_window("Qwen2ForCausalLM", "\"use_sliding_window\": true, \"sliding_window\": 8, "
                        "\"max_window_layers\": 0", N_CTX) == 8, "Qwen2, max_window_layers 0: every layer slides");
    SD_CHECK(cfg_window("Qwen2ForCausalLM", "\"use_sliding_window\": true, \"sliding_window\": 8, "
                        "\"max_window_layers\": 2", N_CTX) == 0, "Qwen2, max_window_layers 2: mixed");
    SD_CHECK(cfg_window("MistralForCausalLM", "\"sliding_window\": null", N_CTX) == 0, "no window");

    /* a mixed model's sequence keeps every block over a long sequence */
    specdec_model *m = load_fixture(fx, "qwen2_window");
    sd_runner_group *g = NULL;
    sd_runner *r = NULL;
    sd_errbuf eb = {{0}};
    if (m && make_group(m, N_CTX, N_CTX / BT, &g, &eb) == SPECDEC_OK && sd_runner_group_add(g, &r, &eb) == SPECDEC_OK) {
        int32_t tok[64];
        for (int32_t i = 0; i < 64; i++) tok[i] = (i * 7 + 3) % 80;
        specdec_status st = SPECDEC_OK;
        for (int32_t pos = 0; pos + 64 <= 320 && st == SPECDEC_OK; pos += 64) st = sd_runner_forward(r, tok, 64, pos, NULL);
        SD_CHECK(st == SPECDEC_OK && r->kv.lo == 0 && sd_kv_held(&r->kv) == 320 / BT, "mixed: %s, lo %d, held %d",
                 r->err.msg, r->kv.lo, sd_kv_held(&r->kv));
        SD_CHECK(sd_runner_truncate(r, 3) == SPECDEC_OK && sd_runner_kv_len(r) == 3, "mixed: any truncation");
    } else {
        SD_CHECK(0, "mixed group: %s", eb.msg);
    }
    sd_runner_destroy(r);
    sd_runner_group_destroy(g);
    specdec_model_free(m);
}

/* ---- 3. grouped + released vs standalone ----------------------------------------------- */
#define NSEQ 2
#define V 80
typedef struct walk {
    sd_runner *a[NSEQ], *ref[NSEQ];
    int32_t K[NSEQ]; /* the largest kv_len a call left (releases are monotone) */
    float la[NSEQ * SD_RUNNER_TREE_MAX * V], lr[SD_RUNNER_TREE_MAX * V]; /* la: row block per sequence */
    int32_t peak_held;
    uint64_t seed;
} walk;

static int same_logits(const float *a, const float *b, int32_t rows) {
    return memcmp(a, b, (size_t)rows * V * sizeof(float)) == 0;
}

/* Sequence i's next call: a chain or a new tree at a position the protocol allows
 * (>= K - margin), run at once unless batched (then by the caller, in one batch). */
static void walk_step(walk *w, int32_t i, sd_runner_seg *seg, int batched) {
    static int32_t tok[NSEQ][SD_RUNNER_TREE_MAX], parent[NSEQ][SD_RUNNER_TREE_MAX];
    sd_runner *a = w->a[i];
    const int32_t kv = sd_runner_kv_len(a);
    int32_t lo = w->K[i] - SD_RUNNER_WINDOW_MARGIN;
    if (lo < 0) lo = 0;
    if (lo > kv) lo = kv;
    const int back = rint_(&w->seed, 0, 7) == 0; /* mostly at the end, sometimes back to K - margin */
    const int32_t pos = kv >= N_CTX - 80 || back ? rint_(&w->seed, lo, kv) : kv;
    const int tree = rint_(&w->seed, 0, 3) == 0;
    int32_t n = tree ? rint_(&w->seed, 1, batched ? MAX_BATCH / NSEQ : SD_RUNNER_TREE_MAX) : rint_(&w->seed, 1, 9);
    if (pos + n > N_CTX) n = N_CTX - pos;
    for (int32_t j = 0; j < n; j++) tok[i][j] = rint_(&w->seed, 3, V - 1);
    parent[i][0] = -1;
    for (int32_t j = 1; j < n; j++) parent[i][j] = rint_(&w->seed, -1, j - 1);
    memset(seg, 0, sizeof *seg);
    seg->r = a;
    seg->tokens = tok[i];
    seg->n = n;
    seg->pos = pos;
    seg->parent = tree ? parent[i] : NULL;
    seg->logits = w->la + (size_t)i * SD_RUNNER_TREE_MAX * V;
    if (batched || n < 1) return;
    specdec_status st = tree ? sd_runner_forward_tree(a, tok[i], n, pos, 0, parent[i], seg->logits)
                             : sd_runner_forward(a, tok[i], n, pos, seg->logits);
    SD_CHECK(st == SPECDEC_OK, "seq %d %s at %d (+%d, K %d): %s", (int)i, tree ? "tree" : "chain", (int)pos, (int)n,
             (int)w->K[i], a->err.msg);
}

/* The reference runs the same call; logits compared; a tree is compacted to a random
 * root-first path (both); sometimes a rollback of up to the margin follows. */
static void walk_finish(walk *w, int32_t i, const sd_runner_seg *seg) {
    sd_runner *a = w->a[i], *ref = w->ref[i];
    if (sd_runner_kv_len(a) > w->K[i]) w->K[i] = sd_runner_kv_len(a); /* the call's end (a tree's too) */
    specdec_status rs = seg->parent ? sd_runner_forward_tree(ref, seg->tokens, seg->n, seg->pos, 0, seg->parent, w->lr)
                                    : sd_runner_forward(ref, seg->tokens, seg->n, seg->pos, w->lr);
    SD_CHECK(rs == SPECDEC_OK, "reference: %s", ref->err.msg);
    SD_CHECK(same_logits(seg->logits, w->lr, seg->n), "seq %d: logits at %d (+%d) differ from the reference", i,
             seg->pos, seg->n);
    if (seg->parent) { /* compact a root-first path of the nodes forwarded */
        int32_t keep[SD_RUNNER_TREE_MAX], path[SD_RUNNER_TREE_MAX], k = 0;
        for (int32_t v = (int32_t)(rng(&w->seed) % (uint64_t)seg->n); v >= 0; v = seg->parent[v]) path[k++] = v;
        for (int32_t j = 0; j < k; j++) keep[j] = path[k - 1 - j];
        SD_CHECK(sd_runner_compact(a, keep, k) == SPECDEC_OK && sd_runner_compact(ref, keep, k) == SPECDEC_OK,
                 "compact: %s / %s", a->err.msg, ref->err.msg);
    }
    if (sd_runner_kv_len(a) != sd_runner_kv_len(ref))
        SD_CHECK(0, "seq %d: kv_len %d vs %d", i, sd_runner_kv_len(a), sd_runner_kv_len(ref));
    if (sd_kv_held(&a->kv) > w->peak_held) w->peak_held = sd_kv_held(&a->kv);
    /* sometimes roll back within the round margin, as a verifier does */
    if (rint_(&w->seed, 0, 7) == 0) {
        int32_t to = w->K[i] - rint_(&w->seed, 0, SD_RUNNER_WINDOW_MARGIN);
        if (to < 1) to = 1;
        if (to <= w->K[i]) {
            SD_CHECK(sd_runner_truncate(a, to) == SPECDEC_OK, "rollback to %d (K %d): %s", to, w->K[i], a->err.msg);
            (void)sd_runner_truncate(ref, to);
        }
    }
}

/* Going below what was kept: every entry point refuses, naming the window; nothing changes. */
static void below_window(sd_runner *a) {
    const int32_t kv = sd_runner_kv_len(a), min = sd_runner_min_len(a), held = sd_kv_held(&a->kv);
    SD_CHECK(min > 1 && min <= kv, "the walk released rows (min len %d, kv %d)", min, kv);
    if (min <= 1) return;
    const int32_t tok[2] = {5, 6}, parent[2] = {-1, 0};
    SD_CHECK(sd_runner_truncate(a, min - 1) == SPECDEC_ERR_INVALID_ARGUMENT && strstr(a->err.msg, "sliding window"),
             "truncate below the kept rows: %s", a->err.msg);
    SD_CHECK(sd_runner_forward(a, tok, 2, min - 1, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "forward below: %s",
             a->err.msg);
    SD_CHECK(sd_runner_forward_tree(a, tok, 2, 1, 0, parent, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "tree below: %s",
             a->err.msg);
    sd_runner_seg seg = {a, tok, 2, min - 1, NULL, 0, NULL, NULL, NULL};
    sd_errbuf eb = {{0}};
    SD_CHECK(sd_runner_forward_batch(&seg, 1, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && strstr(eb.msg, "sliding window"),
             "batch segment below: %s", eb.msg);
    SD_CHECK(sd_runner_kv_len(a) == kv && sd_kv_held(&a->kv) == held, "refusals change nothing");
    SD_CHECK(sd_runner_truncate(a, min) == SPECDEC_OK && sd_runner_kv_len(a) == min, "truncate to min len: %s",
             a->err.msg);
}

static void release_walk(const char *fx) {
    specdec_model *m = load_fixture(fx, "mistral_window");
    if (!m) return;
    const int32_t bound = sd_kv_window_blocks(5, SD_RUNNER_WINDOW_MARGIN, SD_RUNNER_TREE_MAX, BT);
    const int32_t n_blocks = NSEQ * bound; /* each sequence alone would need N_CTX / BT = 64 */
    sd_runner_group *g = NULL;
    sd_errbuf eb = {{0}};
    walk w;
    memset(&w, 0, sizeof w);
    w.seed = 0x5eed;
    specdec_engine_params ep = specdec_engine_default_params();
    specdec_status st = make_group(m, N_CTX, n_blocks, &g, &eb);
    for (int i = 0; i < NSEQ && st == SPECDEC_OK; i++) {
        st = sd_runner_group_add(g, &w.a[i], &eb);
        if (st == SPECDEC_OK) st = sd_engine_make_runner(m, SPECDEC_BACKEND_CPU, &ep, N_CTX, MAX_BATCH, &w.ref[i], &eb);
    }
    SD_CHECK(st == SPECDEC_OK && g->kv_window == 5, "setup: %s", eb.msg);
    int32_t steps = 0;
    while (st == SPECDEC_OK && steps < 2000 && (w.K[0] < N_CTX - 80 || w.K[1] < N_CTX - 80)) {
        const int batched = rint_(&w.seed, 0, 1);
        sd_runner_seg segs[NSEQ];
        for (int32_t i = 0; i < NSEQ; i++) walk_step(&w, i, &segs[i], batched);
        if (batched) {
            sd_errbuf be = {{0}};
            st = sd_runner_forward_batch(segs, NSEQ, &be);
            SD_CHECK(st == SPECDEC_OK, "batch: %s", be.msg);
        }
        for (int32_t i = 0; i < NSEQ && st == SPECDEC_OK; i++)
            if (segs[i].n > 0) walk_finish(&w, i, &segs[i]);
        SD_CHECK(g->pool.n_free + sd_kv_held(&w.a[0]->kv) + sd_kv_held(&w.a[1]->kv) == n_blocks, "pool count");
        steps++;
    }
    SD_CHECK(w.K[0] >= N_CTX - 80 && w.K[1] >= N_CTX - 80, "both sequences ran long (%d, %d rows; pool of %d rows)",
             w.K[0], w.K[1], n_blocks * BT);
    SD_CHECK(w.peak_held <= bound, "held at most %d blocks (bound %d)", w.peak_held, bound);
    printf("release walk: %d steps, sequences of %d and %d rows in a pool of %d rows, peak %d blocks (bound %d)\n",
           steps, w.K[0], w.K[1], n_blocks * BT, w.peak_held, bound);
    if (st == SPECDEC_OK) {
        for (int32_t b = 0; b < w.a[0]->kv.lo; b++)
            if (w.a[0]->kv.blocks[b] != SD_KV_RELEASED) SD_CHECK(0, "block %d: no sentinel", b);
        below_window(w.a[0]);
        /* back to 0 always works, and the sequence starts over bitwise */
        const int32_t tok[3] = {1, 9, 17};
        SD_CHECK(sd_runner_truncate(w.a[0], 0) == SPECDEC_OK && w.a[0]->kv.lo == 0 && sd_kv_held(&w.a[0]->kv) == 0,
                 "truncate to 0");
        SD_CHECK(sd_runner_forward(w.a[0], tok, 3, 0, w.la) == SPECDEC_OK &&
                     sd_runner_forward(w.ref[0], tok, 3, 0, w.lr) == SPECDEC_OK && same_logits(w.la, w.lr, 3),
                 "restart from 0");
    }
    for (int i = 0; i < NSEQ; i++) {
        sd_runner_destroy(w.a[i]);
        sd_runner_destroy(w.ref[i]);
    }
    SD_CHECK(!g || g->pool.n_free == n_blocks, "every block back");
    sd_runner_group_destroy(g);
    specdec_model_free(m);
}

/* ---- 4. the CUDA kernel's tile walk over a released table ------------------------------- */
static int32_t tile_walk(const sd_cuda_keymap *map, int32_t n, int32_t window) {
    const sd_cuda_attunit u = sd_keymap_unit(map, n, 1, 0);
    int32_t kv_end = 0, shared_end = 0, bad = 0, first = INT32_MAX;
    sd_keymap_block_keys(map, &u, 0, &kv_end, &shared_end);
    for (int32_t m = u.m_first; m <= u.m_last; m++) {
        const int32_t f = sd_keymap_first_key(sd_keymap_tok(map, m, 0).nkeys, window);
        if (f < first) first = f;
    }
    const sd_cuda_tok t0tok = sd_keymap_tok(map, u.m_first, 0);
    for (int32_t sb = 0; sb < kv_end; sb += SD_CUDA_ATTN_SPLIT) { /* as sd_att_block + the split kernel */
        const int32_t s_end = sb + SD_CUDA_ATTN_SPLIT < kv_end ? sb + SD_CUDA_ATTN_SPLIT : kv_end;
        if (first >= s_end) continue;
        for (int32_t t0 = sd_keymap_tile_begin(sb, first); t0 < s_end; t0 += SD_KEYMAP_TILE) {
            if (sd_keymap_tile_shared(t0, shared_end)) {
                for (int32_t r = 0; r < SD_KEYMAP_TILE; r++)
                    if (t0 + r < s_end && sd_keymap_tile_row(NULL, t0tok.table, map->block_tokens, t0, r, s_end) < 0)
                        bad++;
                continue;
            }
            for (int32_t m = u.m_first; m <= u.m_last; m++) {
                const sd_cuda_tok tk = sd_keymap_tok(map, m, 0);
                const int32_t kend = tk.nkeys < s_end ? tk.nkeys : s_end;
                for (int32_t r = 0; r < SD_KEYMAP_TILE && t0 < kend; r++)
                    if (t0 + r < kend && sd_keymap_tile_row(&tk, NULL, map->block_tokens, t0, r, kend) < 0) bad++;
            }
        }
    }
    return bad;
}

static void keymap_released(void) {
    enum { CAP = 2400, MAXBT = 64 };
    static int32_t table[CAP];
    uint64_t s = 42;
    int32_t cases = 0, bad = 0;
    for (int iter = 0; iter < 3000; iter++) {
        const int32_t bts[] = {1, 3, 8, 16, 32, MAXBT};
        const int32_t bt = bts[rint_(&s, 0, 5)], W = rint_(&s, 1, 300), M = SD_RUNNER_WINDOW_MARGIN;
        const int32_t K = rint_(&s, 0, 2000);
        const int32_t keep = sd_kv_window_keep(K, W, M), lo = keep / bt;
        for (int32_t b = 0; b < CAP; b++) table[b] = b < lo ? SD_KV_RELEASED : CAP - b;
        int32_t pmin = K - M > 0 ? K - M : 0;
        const int32_t base = rint_(&s, pmin, K);
        sd_cuda_tokmap tok[SD_KEYMAP_PAIRS];
        int32_t ext[SD_KEYMAP_PAIRS * SD_KEYMAP_PAIRS], parent[SD_KEYMAP_PAIRS], depth[SD_KEYMAP_PAIRS];
        const int tree = rint_(&s, 0, 1);
        const int32_t n = rint_(&s, 1, SD_KEYMAP_PAIRS);
        int32_t n_ext = 0;
        for (int32_t m = 0; m < n; m++) {
            memset(&tok[m], 0, sizeof tok[m]);
            tok[m].table = table;
            if (!tree) { /* a chain at base + m */
                tok[m].pos = tok[m].wrow = base + m;
                tok[m].kpre = base + m + 1;
                continue;
            }
            parent[m] = m == 0 ? -1 : rint_(&s, -1, m - 1);
            depth[m] = parent[m] < 0 ? 0 : depth[parent[m]] + 1;
            int32_t anc[SD_KEYMAP_PAIRS], k = 0;
            for (int32_t v = m; v >= 0; v = parent[v]) anc[k++] = v;
            tok[m].pos = base + depth[m];
            tok[m].wrow = base + m;
            tok[m].kpre = base;
            tok[m].next = k;
            tok[m].ext_off = n_ext;
            for (int32_t j = 0; j < k; j++) ext[n_ext++] = base + anc[k - 1 - j];
        }
        sd_cuda_attblk blk = {0, n, 0};
        sd_cuda_keymap map;
        memset(&map, 0, sizeof map);
        map.block_tokens = bt;
        map.tok = tok;
        map.ext = ext;
        map.blk = &blk;
        map.n_blk = 1;
        bad += tile_walk(&map, n, W);
        cases++;
    }
    SD_CHECK(bad == 0, "%d tile rows of released blocks loaded in %d cases", bad, cases);
}

/* ---- 5. sd_kv_window_blocks in a simulation -------------------------------------------- */
static void window_bound(void) {
    uint64_t s = 7;
    for (int iter = 0; iter < 200; iter++) {
        const int32_t bt = rint_(&s, 1, 40), W = rint_(&s, 1, 200), M = rint_(&s, 0, 70), chunk = rint_(&s, 1, 100);
        const int32_t n_ctx = 3000, bound = sd_kv_window_blocks(W, M, chunk, bt);
        sd_kv_pool pool;
        sd_kv_table t;
        sd_errbuf eb = {{0}};
        if (sd_kv_pool_init(&pool, sd_kv_blocks_for(n_ctx, bt), bt, &eb) || sd_kv_table_init(&t, n_ctx, bt, &eb)) {
            SD_CHECK(0, "init: %s", eb.msg);
            return;
        }
        int32_t len = 0, K = 0, peak = 0;
        for (int step = 0; step < 400 && len + chunk <= n_ctx; step++) {
            int32_t pos = rint_(&s, 0, 3) ? len : len - rint_(&s, 0, M);
            if (pos < K - M) pos = K - M;
            if (pos < 0) pos = 0;
            const int32_t n = rint_(&s, 1, chunk);
            sd_kv_trim(&t, &pool, pos);
            if (sd_kv_hold(&t, &pool, pos + n, &eb) != SPECDEC_OK) break;
            if (sd_kv_held(&t) > peak) peak = sd_kv_held(&t);
            len = pos + n;
            if (len > K) K = len;
            sd_kv_release(&t, &pool, sd_kv_window_keep(K, W, M));
        }
        SD_CHECK(peak <= bound, "bt %d W %d M %d chunk %d: held %d blocks, bound %d", bt, W, M, chunk, peak, bound);
        sd_kv_table_free(&t);
        sd_kv_pool_free(&pool);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_kv_window FIXTURES_DIR\n");
        return 2;
    }
    kv_ops();
    which_release(argv[1]);
    release_walk(argv[1]);
    keymap_released();
    window_bound();
    return sd_test_done();
}

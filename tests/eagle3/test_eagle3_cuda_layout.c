/* test_eagle3_cuda_layout.c — the CUDA EAGLE-3 head's index arithmetic, emulated on the CPU
 * (no GPU needed; runs in every build).
 *
 * The CUDA head (backends/cuda/sd_eagle3_cuda.cu) lays each step's rows out with
 * backends/cuda/sd_eagle3_cuda_layout.h as GENERAL-mode key maps and lets the target's RoPE
 * and attention kernels run them. This test drives random head lives — chain extends of 1..40
 * rows, chain steps, EAGLE-2 tree levels over a shared prefix (parents -1, rows below
 * n_shared, or earlier tree rows, several levels deep), truncations — through the layout
 * functions and replays the split kernel's loop structure over every launch
 * (tests/cuda/keymap_emu.h). For every (row, head) the (virtual key, cache row, split, tile)
 * sequence it consumes must equal the CPU reference's key list (backends/cpu/
 * sd_eagle3_cpu.c: a chain row sees rows 0..r, a tree row rows [0, n_shared), its ancestors
 * at or above n_shared root-first, then itself), rewritten here from that definition; its
 * RoPE position and K/V write row must be its own; the extra-row count must match what the
 * runner checks against its capacity; launches must cover the rows in order within the
 * attention scratch's rows. A mutant layout (ancestors leaf-first) must be caught. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "sd_test_util.h"
#include "sd_eagle3_cuda_layout.h"

#define N_CTX 300
#define MAX_TOK 48
#define MAX_KEYS N_CTX
#define MAX_HEADS 32
#include "../cuda/keymap_emu.h"

static uint64_t g_rng = 0xea63c0dau;
static int32_t rnd(int32_t n) { return (int32_t)(sd_test_splitmix64(&g_rng) % (uint64_t)n); }

/* The reference: the CPU head's parent array and key lists. */
typedef struct head_ref {
    int32_t parent[N_CTX];
    int32_t n_cached;
} head_ref;

static int32_t ref_keys(const head_ref *h, int32_t r, int tree, int32_t n_shared, int32_t *keys) {
    if (!tree) {
        for (int32_t j = 0; j <= r; j++) keys[j] = j;
        return r + 1;
    }
    int32_t n = 0, chain[N_CTX], nc = 0;
    for (int32_t j = 0; j < n_shared; j++) keys[n++] = j;
    for (int32_t a = h->parent[r]; a >= n_shared; a = h->parent[a]) chain[nc++] = a;
    while (nc > 0) keys[n++] = chain[--nc];
    keys[n++] = r;
    return n;
}

typedef struct call {
    int32_t tok[MAX_TOK], pos[MAX_TOK], par[MAX_TOK];
    int32_t n, n_shared, tree;
} call;

/* A random call as the drafter makes them (and some it does not). */
static void make_call(const head_ref *h, call *c, int32_t *tree_lo) {
    memset(c, 0, sizeof *c);
    const int32_t room = N_CTX - h->n_cached;
    c->tree = h->n_cached > 0 && rnd(2) == 0;
    if (!c->tree) {
        const int32_t want = rnd(4) == 0 ? 1 + rnd(40) : 1 + rnd(3);
        c->n = want < room ? want : room;
        for (int32_t i = 0; i < c->n; i++) c->tok[i] = rnd(1000), c->pos[i] = h->n_cached + i;
        *tree_lo = -1;
        return;
    }
    /* a tree level: over a prefix n_shared (the drafter's N), parents in the earlier levels */
    if (*tree_lo < 0 || rnd(4) == 0) *tree_lo = rnd(h->n_cached + 1);
    c->n_shared = *tree_lo;
    const int32_t want = 1 + rnd(12);
    c->n = want < room ? want : room;
    for (int32_t i = 0; i < c->n; i++) {
        const int32_t r = h->n_cached + i, above = r - c->n_shared;
        const int kind = rnd(4);
        c->par[i] = kind == 0 || above == 0 ? -1 : kind == 1 && c->n_shared > 0 ? rnd(c->n_shared)
                                                                                : c->n_shared + rnd(above);
        c->tok[i] = rnd(1000);
        c->pos[i] = c->n_shared + rnd(20);
    }
}

typedef struct bufs {
    int32_t tokens[MAX_TOK], tseg[MAX_TOK];
    sd_cuda_tokmap tok[MAX_TOK];
    int32_t ext[MAX_TOK * N_CTX];
    sd_cuda_attblk blk[4096];
    sd_cuda_att_launch launch[MAX_TOK];
} bufs;

/* Lay the call out (mutant: each tree row's ancestors reversed). Returns the extra-row need. */
static int64_t layout(int32_t *parent, const head_ref *h, const call *c, bufs *b, sd_cuda_layout *lo, int32_t nH,
                      int32_t nKV, int32_t att_rows, int mutant) {
    memset(lo, 0, sizeof *lo);
    lo->n_heads = nH;
    lo->n_kv = nKV;
    lo->act_rows = MAX_TOK;
    lo->att_rows = att_rows;
    lo->tokens = b->tokens;
    lo->tok = b->tok;
    lo->ext = b->ext;
    lo->blk = b->blk;
    lo->tseg = b->tseg;
    lo->launch = b->launch;
    const int64_t need = sd_e3_layout_parents(parent, h->n_cached, c->n, c->tree ? c->par : NULL, c->n_shared);
    sd_e3_layout_rows(lo, parent, h->n_cached, c->tok, c->pos, c->n, c->tree, c->n_shared);
    for (int32_t t = 0; mutant && t < lo->n; t++) {
        int32_t *x = lo->ext + lo->tok[t].ext_off;
        for (int32_t i = 0, j = lo->tok[t].next - 2; i < j; i++, j--) {
            const int32_t v = x[i];
            x[i] = x[j], x[j] = v;
        }
    }
    sd_cuda_layout_blocks(lo);
    return need;
}

/* Replay every launch and compare each row's consumption with the reference. */
static int32_t check_call(emu *e, const head_ref *h, const call *c, const sd_cuda_layout *lo, int32_t nH, int32_t nKV,
                          int32_t att_rows, int quiet) {
    int32_t bad = 0, next_tok = 0;
    for (int32_t li = 0; li < lo->n_launch; li++) {
        const sd_cuda_att_launch *L = &lo->launch[li];
        bad += L->tok0 != next_tok || L->n < 1 || L->n > att_rows;
        next_tok = L->tok0 + L->n;
        const sd_cuda_keymap map = sd_cuda_layout_map(L, lo->tok, lo->ext, lo->blk, 16);
        e->bad = 0;
        emu_launch(e, &map, L->n, nH, nKV, 16);
        bad += e->bad;
        for (int32_t m = 0; m < L->n; m++) {
            const int32_t t = L->tok0 + m, r = h->n_cached + t;
            int32_t keys[N_CTX];
            const int32_t nk = ref_keys(h, r, c->tree, c->n_shared, keys);
            int ok = lo->tok[t].pos == c->pos[t] && lo->tok[t].wrow == r && lo->tokens[t] == c->tok[t];
            for (int32_t hh = 0; hh < nH && ok; hh++) {
                const size_t at = (size_t)m * MAX_HEADS + (size_t)hh;
                ok = e->n_got[at] == nk;
                for (int32_t j = 0; ok && j < nk; j++) {
                    const rec *x = &e->got[at * MAX_KEYS + (size_t)j];
                    ok = x->j == j && x->row == keys[j] && x->split == j / SD_CUDA_ATTN_SPLIT &&
                         x->tile == j / SD_KEYMAP_TILE * SD_KEYMAP_TILE;
                }
            }
            if (!ok && !quiet)
                fprintf(stderr, "  row %d (%s, n_shared %d): consumption differs from the reference\n", (int)r,
                        c->tree ? "tree" : "chain", (int)c->n_shared);
            bad += !ok;
        }
    }
    return bad + (next_tok != c->n);
}

int main(void) {
    static const int32_t heads[][2] = {{4, 2}, {8, 8}, {32, 8}, {12, 4}, {4, 1}};
    emu e;
    memset(&e, 0, sizeof e);
    e.got = malloc(sizeof(rec) * MAX_TOK * MAX_HEADS * MAX_KEYS);
    e.n_got = malloc(sizeof(int32_t) * MAX_TOK * MAX_HEADS);
    e.stored = malloc((size_t)MAX_TOK * MAX_HEADS * ((MAX_KEYS + SD_CUDA_ATTN_SPLIT - 1) / SD_CUDA_ATTN_SPLIT));
    bufs *b = malloc(sizeof *b);
    head_ref *h = malloc(sizeof *h);
    int32_t *par_layout = malloc(sizeof(int32_t) * N_CTX);
    if (!e.got || !e.n_got || !e.stored || !b || !h || !par_layout) return 1;
    int64_t calls = 0, tree_calls = 0, deep = 0, caught = 0, mutable_calls = 0;
    for (int life = 0; life < 40; life++) {
        const int32_t nH = heads[life % 5][0], nKV = heads[life % 5][1], att_rows = 1 + rnd(MAX_TOK);
        memset(h, 0, sizeof *h);
        int32_t tree_lo = -1;
        for (int step = 0; step < 60; step++) {
            if (h->n_cached > 0 && rnd(6) == 0) { /* rollback (truncate) */
                h->n_cached = rnd(h->n_cached + 1);
                tree_lo = -1;
                continue;
            }
            if (h->n_cached >= N_CTX) break;
            call c;
            make_call(h, &c, &tree_lo);
            memcpy(par_layout, h->parent, sizeof(int32_t) * N_CTX);
            sd_cuda_layout lo;
            const int64_t need = layout(par_layout, h, &c, b, &lo, nH, nKV, att_rows, 0);
            SD_CHECK(need == lo.n_ext && lo.has_tree == c.tree, "life %d step %d: extra rows %lld, laid out %d", life,
                     step, (long long)need, (int)lo.n_ext);
            SD_CHECK(lo.n_blk <= sd_cuda_layout_blk_cap(c.n, nH, nKV), "blocks %d over the capacity", (int)lo.n_blk);
            /* the reference appends the rows (parents as the CPU records them) */
            for (int32_t i = 0; i < c.n; i++)
                h->parent[h->n_cached + i] = c.tree ? c.par[i] : h->n_cached + i - 1;
            SD_CHECK(!memcmp(par_layout, h->parent, sizeof(int32_t) * (size_t)(h->n_cached + c.n)),
                     "life %d step %d: parents recorded differently", life, step);
            const int32_t bad = check_call(&e, h, &c, &lo, nH, nKV, att_rows, 0);
            SD_CHECK(bad == 0, "life %d step %d (%s of %d rows at %d, heads %d/%d, att %d): %d mismatches", life, step,
                     c.tree ? "tree" : "chain", (int)c.n, (int)h->n_cached, (int)nH, (int)nKV, (int)att_rows, (int)bad);
            calls++;
            tree_calls += c.tree;
            for (int32_t t = 0; t < lo.n; t++) deep += lo.tok[t].next > 2;
            if (c.tree && need > c.n) { /* some row has an ancestor: the mutant must differ */
                mutable_calls++;
                memcpy(par_layout, h->parent, sizeof(int32_t) * N_CTX);
                layout(par_layout, h, &c, b, &lo, nH, nKV, att_rows, 1);
                int any = 0;
                for (int32_t t = 0; t < lo.n; t++) any |= lo.tok[t].next > 2;
                if (any && check_call(&e, h, &c, &lo, nH, nKV, att_rows, 1) > 0) caught++;
                else if (!any) mutable_calls--;
            }
            h->n_cached += c.n;
        }
    }
    printf("%lld head calls (%lld tree levels, %lld rows with >= 2 ancestors): key maps == the CPU head's keys\n",
           (long long)calls, (long long)tree_calls, (long long)deep);
    printf("mutant (ancestors leaf-first) caught in %lld of %lld calls where it changes a key list\n", (long long)caught,
           (long long)mutable_calls);
    SD_CHECK(tree_calls > calls / 4 && deep > 100, "too few tree cases (%lld calls, %lld deep rows)",
             (long long)tree_calls, (long long)deep);
    SD_CHECK(mutable_calls > 20 && caught == mutable_calls, "mutant caught in %lld of %lld", (long long)caught,
             (long long)mutable_calls);
    free(e.got);
    free(e.n_got);
    free(e.stored);
    free(b);
    free(h);
    free(par_layout);
    return sd_test_done();
}

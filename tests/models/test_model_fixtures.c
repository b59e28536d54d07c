/* test_model_fixtures.c — every model family against transformers' own fp32 logits.
 *
 * Fixtures (tests/models/fixtures, written by tools/gen_model_fixtures.py with torch +
 * transformers, committed): per variant a tiny random checkpoint saved by transformers
 * (config.json + model.safetensors, fp32), T token ids and transformers' logits
 * [T, V] for them; manifest.txt lists "<name> <T> <V> <n_ctx>".
 * Per fixture, on the backend of argv[2] (cpu, or cuda: F32 weights kept; skipped
 * without a device), every logits row is checked against transformers' row
 * (||d|| / ||ref|| < 1e-4) and its argmax must be identical, for:
 *   1. the whole sequence in one call;
 *   2. two chunks (the second reads the first's keys and values from the cache);
 *   3. token by token;
 *   4. a paged batch: the sequence and another one in the same group (blocks of 4
 *      rows), two passes with both sequences' segments (a segment of the other
 *      sequence checked against its own one-call run);
 *   5. a tree: 6 tokens as a path inside an 8-node tree with side branches, after a
 *      cached prefix; then the path compacted and the last two tokens decoded after it.
 * On the CPU 2-5 must also be bitwise the one-call logits (batch invariance, trees ==
 * plain decoding). On CUDA the tree rows must be bitwise the token-by-token rows (both
 * take the batch-invariant GEMM). Mixture-of-experts fixtures (Mixtral, Qwen2/3-MoE, GPT-OSS plain
 * and MXFP4, OLMoE) and OLMo-2, Granite and SmolLM3 run on the CPU; the CUDA backend must refuse
 * them with UNSUPPORTED (sd_cfg_cpu_only). GGUF fixtures (tools/gen_gguf_fixtures.py: DIR/<name>/model.gguf,
 * listed in gguf_manifest.txt; tools/gen_gguf_twin_fixtures.py: gguf_twin_manifest.txt) run the same checks; their block-quantized weights are CPU-only.
 * argv[1] = fixture directory, argv[2] = cpu | cuda, argv[3] (optional) = the manifest's name (default
 * manifest.txt: at least 29 fixtures; another: at least 3). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "specdec.h"
#include "sd_cpu_runner.h"
#include "sd_model.h"
#include "sd_runner.h"
#ifdef SPECDEC_WITH_CUDA
#include "sd_cuda_backend.h"
#endif

#define REL_TOL 1e-4
#define MAX_T 256
#define TREE_N 8

typedef struct fx_case {
    char name[96];
    char dir[4096];
    int32_t T, V, n_ctx;
    int32_t ids[MAX_T];
    float *ref;              /* [T, V] transformers */
    const sd_weights *w;
} fx_case;

/* The backend under test. */
typedef struct fx_backend {
    const char *name;
    int bitwise; /* CPU: every path bitwise the one-call logits */
    specdec_status (*runner)(const sd_weights *w, int32_t n_ctx, int32_t max_batch, sd_runner **out, sd_errbuf *eb);
    specdec_status (*group)(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t n_blocks, int32_t bt,
                            sd_runner_group **out, sd_errbuf *eb);
} fx_backend;

static double fx_worst; /* largest row error seen (printed) */

static int32_t argmax(const float *x, int32_t n) {
    int32_t a = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[a]) a = i;
    return a;
}

/* Rows [r0, r0 + n) of got vs the reference rows r0.. : relative error and argmax. */
static void fx_compare(const fx_case *c, const char *what, const float *got, int32_t r0, int32_t n) {
    const int32_t V = c->V;
    double worst = 0;
    int bad_arg = 0;
    for (int32_t t = 0; t < n; t++) {
        const float *g = got + (int64_t)t * V, *r = c->ref + (int64_t)(r0 + t) * V;
        double num = 0, den = 0;
        for (int32_t v = 0; v < V; v++) {
            double d = (double)g[v] - (double)r[v];
            num += d * d;
            den += (double)r[v] * r[v];
        }
        double rel = sqrt(num / (den > 0 ? den : 1e-300));
        if (!(rel <= worst)) worst = rel; /* NaN sticks */
        if (argmax(g, V) != argmax(r, V)) bad_arg++;
    }
    if (!(worst <= fx_worst)) fx_worst = worst;
    SD_CHECK(worst < REL_TOL, "%s: %s: rows %d..%d: relative error %.3g vs transformers (tol %g)", c->name, what,
             (int)r0, (int)(r0 + n - 1), worst, REL_TOL);
    SD_CHECK(bad_arg == 0, "%s: %s: argmax differs from transformers at %d rows", c->name, what, bad_arg);
}

static void fx_same_bits(const fx_case *c, const char *what, const float *a, const float *b, int32_t rows) {
    SD_CHECK(memcmp(a, b, sizeof(float) * (size_t)rows * (size_t)c->V) == 0,
             "%s: %s: not bitwise the one-call logits", c->name, what);
}

/* 1-3: one call, two chunks, token by token. Leaves the one-call logits in whole and
 * the token-by-token ones in single. */
static void fx_chains(const fx_backend *be, const fx_case *c, float *whole, float *single, float *tmp) {
    const int32_t T = c->T, V = c->V, k = T / 2;
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    specdec_status st = be->runner(c->w, c->n_ctx, T, &r, &eb);
    SD_CHECK(st == SPECDEC_OK, "%s: runner: %s", c->name, eb.msg);
    if (!r) return;
    SD_CHECK(sd_runner_forward(r, c->ids, T, 0, whole) == SPECDEC_OK, "%s: one call: %s", c->name, r->err.msg);
    fx_compare(c, "one call", whole, 0, T);
    sd_runner_truncate(r, 0);
    SD_CHECK(sd_runner_forward(r, c->ids, k, 0, tmp) == SPECDEC_OK, "%s: chunk 1: %s", c->name, r->err.msg);
    SD_CHECK(sd_runner_forward(r, c->ids + k, T - k, k, tmp + (int64_t)k * V) == SPECDEC_OK, "%s: chunk 2: %s",
             c->name, r->err.msg);
    fx_compare(c, "two chunks", tmp, 0, T);
    if (be->bitwise) fx_same_bits(c, "two chunks", tmp, whole, T);
    sd_runner_truncate(r, 0);
    for (int32_t t = 0; t < T; t++)
        SD_CHECK(sd_runner_forward(r, c->ids + t, 1, t, single + (int64_t)t * V) == SPECDEC_OK, "%s: token %d: %s",
                 c->name, (int)t, r->err.msg);
    fx_compare(c, "token by token", single, 0, T);
    if (be->bitwise) fx_same_bits(c, "token by token", single, whole, T);
    sd_runner_destroy(r);
}

/* 4: the sequence and another in one group of blocks of 4 rows, two batched passes. */
static void fx_batch(const fx_backend *be, const fx_case *c, const float *whole, float *tmp) {
    const int32_t T = c->T, V = c->V, bt = 4, ka = 9, kb = 5, nb = 12;
    int32_t other[MAX_T];
    for (int32_t i = 0; i < T; i++) other[i] = c->ids[T - 1 - i];
    sd_errbuf eb = {{0}};
    sd_runner_group *g = NULL;
    sd_runner *a = NULL, *b = NULL, *solo = NULL;
    specdec_status st = be->group(c->w, c->n_ctx, T, 2 * ((T + bt - 1) / bt) + 2, bt, &g, &eb);
    SD_CHECK(st == SPECDEC_OK, "%s: group: %s", c->name, eb.msg);
    if (!g) return;
    SD_CHECK(sd_runner_group_add(g, &b, &eb) == SPECDEC_OK, "%s: add: %s", c->name, eb.msg);
    SD_CHECK(sd_runner_group_add(g, &a, &eb) == SPECDEC_OK, "%s: add: %s", c->name, eb.msg);
    float *bl = malloc(sizeof(float) * (size_t)(nb * V)), *bref = malloc(sizeof(float) * (size_t)(nb * V));
    if (a && b) {
        sd_runner_seg s1[2] = {{b, other, kb, 0, NULL, 0, bl, NULL, NULL}, {a, c->ids, ka, 0, NULL, 0, tmp, NULL, NULL}};
        SD_CHECK(sd_runner_forward_batch(s1, 2, &eb) == SPECDEC_OK, "%s: batch pass 1: %s", c->name, eb.msg);
        sd_runner_seg s2[2] = {{a, c->ids + ka, T - ka, ka, NULL, 0, tmp + (int64_t)ka * V, NULL, NULL},
                               {b, other + kb, nb - kb, kb, NULL, 0, bl + (int64_t)kb * V, NULL, NULL}};
        SD_CHECK(sd_runner_forward_batch(s2, 2, &eb) == SPECDEC_OK, "%s: batch pass 2: %s", c->name, eb.msg);
        fx_compare(c, "paged batch", tmp, 0, T);
        if (be->bitwise) fx_same_bits(c, "paged batch", tmp, whole, T);
        /* the other sequence == its own run: bitwise on the CPU, else within the tolerance */
        if (be->runner(c->w, c->n_ctx, T, &solo, &eb) == SPECDEC_OK &&
            sd_runner_forward(solo, other, nb, 0, bref) == SPECDEC_OK) {
            double num = 0, den = 0;
            for (int64_t i = 0; i < (int64_t)nb * V; i++) {
                num += ((double)bl[i] - bref[i]) * ((double)bl[i] - bref[i]);
                den += (double)bref[i] * bref[i];
            }
            SD_CHECK(sqrt(num / den) < REL_TOL, "%s: the batch's other sequence differs from its own run", c->name);
            if (be->bitwise)
                SD_CHECK(memcmp(bl, bref, sizeof(float) * (size_t)(nb * V)) == 0,
                         "%s: the batch's other sequence is not bitwise its own run", c->name);
        }
        sd_runner_destroy(solo);
    }
    free(bl);
    free(bref);
    sd_runner_destroy(a);
    sd_runner_destroy(b);
    SD_CHECK(g->pool.n_free == g->pool.n_blocks, "%s: blocks not all back", c->name);
    sd_runner_group_destroy(g);
}

/* 5: after the cached prefix [0, T - 8), tokens T-8 .. T-3 as the path 0-1-3-4-6-7 of
 * an 8-node tree with side branches 2 and 5 (rows T-8 .. T-1: the context stays T);
 * then the path compacted and the last two tokens decoded after it. */
static void fx_tree(const fx_backend *be, const fx_case *c, const float *whole, const float *single) {
    const int32_t T = c->T, V = c->V, base = T - TREE_N;
    const int32_t *tail = c->ids + base;
    const int32_t tok[TREE_N] = {tail[0], tail[1], (tail[1] + 7) % V, tail[2], tail[3], (tail[3] + 5) % V, tail[4],
                                 tail[5]};
    const int32_t parent[TREE_N] = {-1, 0, 0, 1, 3, 3, 4, 6};
    const int32_t path[6] = {0, 1, 3, 4, 6, 7};
    const float *cmp = be->bitwise ? whole : single; /* what the tree rows must equal bitwise */
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    SD_CHECK(be->runner(c->w, c->n_ctx, T, &r, &eb) == SPECDEC_OK, "%s: runner: %s", c->name, eb.msg);
    if (!r) return;
    float *lg = malloc(sizeof(float) * (size_t)(TREE_N * V)), *rows = malloc(sizeof(float) * (size_t)(6 * V));
    SD_CHECK(sd_runner_forward(r, c->ids, base, 0, NULL) == SPECDEC_OK, "%s: prefix: %s", c->name, r->err.msg);
    /* two calls: nodes 0..2, then 3..7 (a tree extended) */
    SD_CHECK(sd_runner_forward_tree(r, tok, 3, base, 0, parent, lg) == SPECDEC_OK, "%s: tree: %s", c->name,
             r->err.msg);
    SD_CHECK(sd_runner_forward_tree(r, tok + 3, TREE_N - 3, base, 3, parent + 3, lg + 3 * V) == SPECDEC_OK,
             "%s: tree (extend): %s", c->name, r->err.msg);
    for (int32_t i = 0; i < 6; i++) memcpy(rows + (int64_t)i * V, lg + (int64_t)path[i] * V, sizeof(float) * (size_t)V);
    fx_compare(c, "tree path", rows, base, 6);
    SD_CHECK(memcmp(rows, cmp + (int64_t)base * V, sizeof(float) * (size_t)(6 * V)) == 0,
             "%s: tree path rows are not bitwise plain decoding", c->name);
    SD_CHECK(sd_runner_compact(r, path, 6) == SPECDEC_OK, "%s: compact: %s", c->name, r->err.msg);
    SD_CHECK(r->kv_len == T - 2, "%s: kv_len %d after compact", c->name, r->kv_len);
    for (int32_t t = T - 2; t < T; t++)
        SD_CHECK(sd_runner_forward(r, c->ids + t, 1, t, rows + (int64_t)(t - T + 2) * V) == SPECDEC_OK,
                 "%s: after compact: %s", c->name, r->err.msg);
    fx_compare(c, "after compaction", rows, T - 2, 2);
    SD_CHECK(memcmp(rows, single + (int64_t)(T - 2) * V, sizeof(float) * (size_t)(2 * V)) == 0,
             "%s: the tokens after compaction are not bitwise plain decoding", c->name);
    free(lg);
    free(rows);
    sd_runner_destroy(r);
}

static void *fx_read(const char *dir, const char *name, size_t bytes) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    void *buf = malloc(bytes + 1);
    size_t got = fread(buf, 1, bytes + 1, f);
    fclose(f);
    if (got != bytes) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int fx_load_ids(fx_case *c) {
    char p[4200];
    snprintf(p, sizeof p, "%s/ids.txt", c->dir);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    int32_t n = 0;
    while (n < c->T && fscanf(f, "%d", &c->ids[n]) == 1) n++;
    fclose(f);
    return n == c->T;
}

/* A backend without kernels for some feature of the model (CUDA: mixtures of experts, OLMo-2's
 * and OLMoE's whole-projection q/k norms and post-norms, Granite's multipliers, SmolLM3's layers
 * without rope; core/sd_weights.h sd_cfg_cpu_only) must refuse it with UNSUPPORTED, never run
 * it wrongly: 1 when c is such a case (checked and reported). */
static int fx_cpu_only_refused(const fx_backend *be, const fx_case *c, const sd_weights *w) {
    const char *why = sd_cfg_cpu_only(&w->cfg);
    if (!why && w->cfg.q_pos_beta > 0.0f && c->n_ctx > w->cfg.q_pos_orig) /* Ministral 3 past its original context */
        why = "queries scaled by position (a context past rope_parameters.original_max_position_embeddings)";
    if (be->bitwise || !why) return 0;
    sd_runner *r = NULL;
    sd_errbuf eb = {{0}};
    specdec_status st = be->runner(w, c->n_ctx, c->T, &r, &eb);
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && !r, "%s: the %s backend must refuse a model with %s with UNSUPPORTED "
             "(got %d)", c->name, be->name, why, (int)st);
    if (r) sd_runner_destroy(r);
    printf("%-24s %-18s not run on %s: %s are CPU-only (refused: %s)\n", c->name, w->cfg.architecture, be->name, why,
           eb.msg);
    return 1;
}

static void fx_run(const fx_backend *be, fx_case *c) {
    specdec_model *m = NULL;
    char gguf[4200]; /* a GGUF fixture (tools/gen_gguf_fixtures.py): DIR/model.gguf is the model */
    snprintf(gguf, sizeof gguf, "%s/model.gguf", c->dir);
    FILE *gf = fopen(gguf, "rb");
    if (gf) fclose(gf);
    specdec_status st = specdec_model_load(gf ? gguf : c->dir, NULL, &m);
    SD_CHECK(st == SPECDEC_OK, "%s: load: %s", c->name, specdec_last_error());
    if (m && fx_cpu_only_refused(be, c, &m->w)) {
        specdec_model_free(m);
        return;
    }
    c->ref = fx_read(c->dir, "logits.f32", sizeof(float) * (size_t)c->T * (size_t)c->V);
    SD_CHECK(c->ref && fx_load_ids(c), "%s: ids.txt / logits.f32 missing or short", c->name);
    if (m && c->ref && m->w.cfg.vocab_size == c->V) {
        c->w = &m->w;
        size_t sz = sizeof(float) * (size_t)c->T * (size_t)c->V;
        float *whole = calloc(1, sz), *single = calloc(1, sz), *tmp = calloc(1, sz);
        fx_worst = 0;
        fx_chains(be, c, whole, single, tmp);
        fx_batch(be, c, whole, tmp);
        fx_tree(be, c, whole, single);
        printf("%-24s %-18s T=%d: max row error vs transformers %.2e\n", c->name, m->w.cfg.architecture, (int)c->T,
               fx_worst);
        free(whole);
        free(single);
        free(tmp);
    }
    free(c->ref);
    specdec_model_free(m);
}

static specdec_status fx_cpu_runner(const sd_weights *w, int32_t n_ctx, int32_t max_batch, sd_runner **out,
                                    sd_errbuf *eb) {
    return sd_cpu_runner_create(w, n_ctx, max_batch, out, eb);
}

#ifdef SPECDEC_WITH_CUDA
static specdec_status fx_cuda_runner(const sd_weights *w, int32_t n_ctx, int32_t max_batch, sd_runner **out,
                                     sd_errbuf *eb) {
    return sd_cuda_runner_create(w, n_ctx, max_batch, 0, 1, out, eb);
}
static specdec_status fx_cuda_group(const sd_weights *w, int32_t n_ctx, int32_t max_batch, int32_t n_blocks,
                                    int32_t bt, sd_runner_group **out, sd_errbuf *eb) {
    return sd_cuda_group_create(w, n_ctx, max_batch, n_blocks, bt, 0, 1, out, eb);
}
#endif

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s FIXTURE_DIR cpu|cuda [MANIFEST]\n", argv[0]);
        return 2;
    }
    const char *manifest = argc == 4 ? argv[3] : "manifest.txt";
    const int min_n = argc == 4 ? 3 : 29;
    fx_backend be = {"cpu", 1, fx_cpu_runner, sd_cpu_group_create};
    if (!strcmp(argv[2], "cuda")) {
#ifdef SPECDEC_WITH_CUDA
        if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
        be = (fx_backend){"cuda", 0, fx_cuda_runner, fx_cuda_group};
#else
        return sd_test_skip("no CUDA device");
#endif
    }
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", argv[1], manifest);
    FILE *f = fopen(p, "r");
    SD_CHECK(f != NULL, "cannot open %s", p);
    if (!f) return sd_test_done();
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        fx_case c;
        memset(&c, 0, sizeof c);
        if (line[0] == '#' || sscanf(line, "%95s %d %d %d", c.name, &c.T, &c.V, &c.n_ctx) != 4) continue;
        SD_CHECK(c.T >= 8 && c.T <= MAX_T && c.n_ctx >= c.T, "%s: T %d, n_ctx %d", c.name, (int)c.T, (int)c.n_ctx);
        if (c.T < 8 || c.T > MAX_T || c.n_ctx < c.T) continue;
        snprintf(c.dir, sizeof c.dir, "%s/%s", argv[1], c.name);
        fx_run(&be, &c);
        n++;
    }
    fclose(f);
    SD_CHECK(n >= min_n, "only %d fixtures in %s", n, manifest);
    return sd_test_done();
}

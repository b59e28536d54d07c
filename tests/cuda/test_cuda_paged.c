/* test_cuda_paged.c — the paged-KV kernels on the GPU against their CPU references:
 *   - attention in GENERAL mode (kernels/cuda/sd_cuda_keymap.h): one launch over chain
 *     tokens and tree nodes of three sequences whose block tables scatter their rows
 *     over a shared pool (block sizes 1, 4, 16), laid out by the runner's own code
 *     (backends/cuda/sd_cuda_layout.h), vs sd_cpu_attention_keys over each token's key
 *     list (tolerance of test_cuda_kernels' attention); then, BITWISE, each token alone
 *     (a one-token GENERAL launch) and each token's keys copied into a contiguous cache
 *     and attended in CHAIN mode at the last position (paged == contiguous, tree node ==
 *     plain decoding of its path);
 *   - RoPE + KV append in GENERAL mode: each token's K/V land in the physical row of its
 *     write row, rotated at its own position (vs sd_cpu_rope), nothing else written;
 *   - the compaction copy (sd_cuda_kv_copy) vs moving the rows on the host in order.
 * Skips without a device. */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include "cuda_test_util.h"
#include "sd_cpu_attention.h"
#include "sd_cpu_rope.h"
#include "sd_cuda_layout.h"
#include "sd_cuda_ops.h"

#define N_SEQ 3
#define MAX_TOK 40

typedef struct pcase {
    int nh, nkv, hd, bt, n_ctx;
    sd_dtype dt;
} pcase;

/* The pass: sequence tables (host and device), segments, layout, device copies. */
typedef struct pass {
    int32_t cap, n_blocks, rows;              /* blocks per table, pool blocks, pool rows */
    int32_t *tab[N_SEQ], *d_tab[N_SEQ];
    sd_runner r[N_SEQ];
    sd_runner_seg segs[N_SEQ];
    int32_t tok[N_SEQ][SD_RUNNER_TREE_MAX], par[N_SEQ][SD_RUNNER_TREE_MAX];
    sd_cuda_layout lo;
    int32_t tokens[MAX_TOK], tseg[MAX_TOK], seg_of[MAX_TOK], idx_of[MAX_TOK];
    sd_cuda_tokmap tm[MAX_TOK];
    int32_t ext[MAX_TOK * SD_RUNNER_TREE_MAX];
    sd_cuda_attblk blk[4 * MAX_TOK];
    sd_cuda_att_launch launch[MAX_TOK];
    sd_cuda_tokmap *d_tm;
    int32_t *d_ext;
    sd_cuda_attblk *d_blk;
} pass;

static size_t g_part_floats; /* floats of the split scratch (sd_cuda_attention_args.part_floats) */
static int32_t rnd(ct_rng *r, int32_t n) { return (int32_t)(ct_next(r) % (uint64_t)n); }

/* Three sequences: a chain near the end of a split, a tree mid-context, a short chain. */
static void make_pass(ct_rng *rng, const pcase *c, pass *p) {
    memset(p, 0, sizeof *p);
    p->cap = sd_kv_blocks_for(c->n_ctx, c->bt);
    p->n_blocks = N_SEQ * p->cap;
    p->rows = p->n_blocks * c->bt;
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)p->n_blocks);
    for (int32_t b = 0; b < p->n_blocks; b++) perm[b] = b;
    for (int32_t b = p->n_blocks - 1; b > 0; b--) {
        const int32_t k = rnd(rng, b + 1), t = perm[b];
        perm[b] = perm[k];
        perm[k] = t;
    }
    for (int i = 0; i < N_SEQ; i++) {
        p->tab[i] = malloc(sizeof(int32_t) * (size_t)p->cap);
        memcpy(p->tab[i], perm + (size_t)i * p->cap, sizeof(int32_t) * (size_t)p->cap);
        p->d_tab[i] = ct_dev_upload(p->tab[i], sizeof(int32_t) * (size_t)p->cap);
        p->segs[i].r = &p->r[i];
        p->segs[i].tokens = p->tok[i];
    }
    free(perm);
    p->segs[0].pos = 123; /* crosses a tile and a split boundary */
    p->segs[0].n = 9;
    sd_runner_tree *t = &p->r[1].tree;
    t->base = c->n_ctx / 3 + rnd(rng, 8); /* mid-tile: shared prefix tiles, then per-node ones */
    t->n = 20;
    for (int32_t v = 0; v < t->n; v++) {
        t->parent[v] = v == 0 || rnd(rng, 6) == 0 ? -1 : rnd(rng, v);
        t->depth[v] = t->parent[v] < 0 ? 0 : t->depth[t->parent[v]] + 1;
        p->par[1][v] = t->parent[v];
    }
    p->segs[1].pos = t->base;
    p->segs[1].n = t->n;
    p->segs[1].parent = p->par[1];
    p->segs[2].pos = c->n_ctx - 5;
    p->segs[2].n = 3;
}

static void layout_pass(const pcase *c, pass *p, int32_t att_rows) {
    sd_cuda_layout *lo = &p->lo;
    lo->n_heads = c->nh;
    lo->n_kv = c->nkv;
    lo->act_rows = MAX_TOK;
    lo->att_rows = att_rows;
    lo->tokens = p->tokens;
    lo->tok = p->tm;
    lo->ext = p->ext;
    lo->tseg = p->tseg;
    lo->launch = p->launch;
    for (int i = 0; i < N_SEQ; i++) {
        const int32_t t0 = lo->n;
        sd_cuda_layout_seg(lo, &p->segs[i], p->d_tab[i], i);
        for (int32_t t = t0; t < lo->n; t++) {
            p->seg_of[t] = i;
            p->idx_of[t] = t - t0;
        }
    }
    lo->blk = p->blk;
    sd_cuda_layout_blocks(lo);
    p->d_tm = ct_dev_upload(p->tm, sizeof(sd_cuda_tokmap) * (size_t)lo->n);
    p->d_ext = ct_dev_upload(p->ext, sizeof(int32_t) * (size_t)(lo->n_ext ? lo->n_ext : 1));
    p->d_blk = ct_dev_upload(p->blk, sizeof(sd_cuda_attblk) * (size_t)lo->n_blk);
}

/* Physical key rows of pass token t (its logical keys through its table). */
static int32_t token_keys(const pass *p, int32_t bt, int32_t t, int64_t *keys) {
    const sd_cuda_tokmap *e = &p->tm[t];
    const int32_t *tab = p->tab[p->seg_of[t]];
    int32_t n = 0;
    for (int32_t j = 0; j < e->kpre; j++) keys[n++] = (int64_t)tab[j / bt] * bt + j % bt;
    for (int32_t j = 0; j < e->next; j++) {
        const int32_t l = p->ext[e->ext_off + j];
        keys[n++] = (int64_t)tab[l / bt] * bt + l % bt;
    }
    return n;
}

static void free_pass(pass *p) {
    for (int i = 0; i < N_SEQ; i++) {
        free(p->tab[i]);
        cudaFree(p->d_tab[i]);
    }
    cudaFree(p->d_tm);
    cudaFree(p->d_ext);
    cudaFree(p->d_blk);
}

/* Device cache [nkv][rows][hd] of random values (packed to dt) and its CPU view
 * [rows][nkv][hd] with the stored values. */
static void *make_cache(ct_rng *rng, const pcase *c, int32_t rows, float scale, float **cpu) {
    const size_t ce = (size_t)c->nkv * rows * c->hd;
    float *v = malloc(ce * 4);
    void *packed = malloc(ce * ct_dsize(c->dt));
    for (size_t i = 0; i < ce; i++) v[i] = ct_unif(rng, scale);
    ct_pack(c->dt, v, packed, ce);
    *cpu = malloc(ce * 4);
    for (int32_t j = 0; j < rows; j++)
        for (int g = 0; g < c->nkv; g++)
            memcpy(*cpu + ((size_t)j * c->nkv + g) * c->hd, v + ((size_t)g * rows + j) * c->hd, sizeof(float) * c->hd);
    void *d = ct_dev_upload(packed, ce * ct_dsize(c->dt));
    free(v);
    free(packed);
    return d;
}

/* The keys of one token copied into a contiguous cache (row j = its key j) and attended
 * in CHAIN mode at position nk - 1: must equal its paged row bitwise. */
static int contiguous_equal(const pcase *c, const float *kc, const float *vc, const int64_t *keys, int32_t nk,
                            const float *d_q, float *d_part, float *d_o, const float *row) {
    const size_t ce = (size_t)c->nkv * nk * c->hd;
    float *kv = malloc(ce * 4), *vv = malloc(ce * 4), *one = malloc(sizeof(float) * c->nh * c->hd);
    void *kp = malloc(ce * ct_dsize(c->dt)), *vp = malloc(ce * ct_dsize(c->dt));
    for (int32_t j = 0; j < nk; j++)
        for (int g = 0; g < c->nkv; g++)
            for (int d = 0; d < c->hd; d++) {
                kv[((size_t)g * nk + j) * c->hd + d] = kc[((size_t)keys[j] * c->nkv + g) * c->hd + d];
                vv[((size_t)g * nk + j) * c->hd + d] = vc[((size_t)keys[j] * c->nkv + g) * c->hd + d];
            }
    ct_pack(c->dt, kv, kp, ce); /* exact: the values already are of dtype dt */
    ct_pack(c->dt, vv, vp, ce);
    void *d_k = ct_dev_upload(kp, ce * ct_dsize(c->dt)), *d_v = ct_dev_upload(vp, ce * ct_dsize(c->dt));
    sd_errbuf eb;
    sd_cuda_attention_args aa = {.q = d_q, .ldq = c->nh * c->hd, .k_cache = d_k, .v_cache = d_v, .kv_dt = c->dt,
                                 .cache_rows = nk, .n_ctx = c->n_ctx + SD_RUNNER_TREE_MAX, .n = 1,
                                 .map = {.pos0 = nk - 1, .block_tokens = 1}, .n_heads = c->nh, .n_kv = c->nkv,
                                 .hd = c->hd, .part = d_part, .part_floats = g_part_floats, .out = d_o, .ldo = c->nh * c->hd};
    ct_poison(d_o, sizeof(float) * c->nh * c->hd);
    SD_CHECK(sd_cuda_attention(&aa, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    CT_CUDA(cudaMemcpy(one, d_o, sizeof(float) * c->nh * c->hd, cudaMemcpyDeviceToHost));
    const int same = memcmp(one, row, sizeof(float) * c->nh * c->hd) == 0;
    cudaFree(d_k); cudaFree(d_v);
    free(kv); free(vv); free(kp); free(vp); free(one);
    return same;
}

/* Token t alone: a one-token GENERAL launch over the same key map. */
static int alone_equal(const pcase *c, const pass *p, int32_t t, const void *d_k, const void *d_v, const float *d_q,
                       float *d_part, float *d_o, const float *row) {
    const int32_t G = c->nh / c->nkv, nb = (G + SD_KEYMAP_PAIRS - 1) / SD_KEYMAP_PAIRS;
    sd_cuda_attblk blk[4];
    for (int32_t z = 0; z < nb; z++) {
        blk[z].m0 = 0;
        blk[z].n_tok = 1;
        blk[z].pair0 = z * SD_KEYMAP_PAIRS;
    }
    sd_cuda_attblk *d_blk = ct_dev_upload(blk, sizeof(sd_cuda_attblk) * (size_t)nb);
    float *one = malloc(sizeof(float) * c->nh * c->hd);
    sd_errbuf eb;
    sd_cuda_attention_args aa = {.q = d_q + (size_t)t * c->nh * c->hd, .ldq = c->nh * c->hd, .k_cache = d_k,
                                 .v_cache = d_v, .kv_dt = c->dt, .cache_rows = p->rows,
                                 .n_ctx = c->n_ctx + SD_RUNNER_TREE_MAX, .n = 1, .n_heads = c->nh, .n_kv = c->nkv,
                                 .hd = c->hd, .part = d_part, .part_floats = g_part_floats, .out = d_o, .ldo = c->nh * c->hd};
    aa.map.block_tokens = c->bt;
    aa.map.tok = p->d_tm + t;
    aa.map.ext = p->d_ext;
    aa.map.blk = d_blk;
    aa.map.n_blk = nb;
    aa.map.max_keys = p->tm[t].kpre + p->tm[t].next;
    ct_poison(d_o, sizeof(float) * c->nh * c->hd);
    SD_CHECK(sd_cuda_attention(&aa, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    CT_CUDA(cudaMemcpy(one, d_o, sizeof(float) * c->nh * c->hd, cudaMemcpyDeviceToHost));
    const int same = memcmp(one, row, sizeof(float) * c->nh * c->hd) == 0;
    cudaFree(d_blk);
    free(one);
    return same;
}

static void test_attention_paged(ct_rng *rng, const pcase *c) {
    pass *p = malloc(sizeof *p);
    make_pass(rng, c, p);
    layout_pass(c, p, 7); /* several launches, units cut at launch edges */
    const int32_t n = p->lo.n, qd = c->nh * c->hd;
    float *kc, *vc;
    void *d_k = make_cache(rng, c, p->rows, 2.0f, &kc), *d_v = make_cache(rng, c, p->rows, 1.0f, &vc);
    float *q = malloc(sizeof(float) * n * qd), *ref = malloc(sizeof(float) * n * qd), *got = malloc(sizeof(float) * n * qd);
    for (int32_t i = 0; i < n * qd; i++) q[i] = ct_unif(rng, 3.0f);
    int64_t *keys = malloc(sizeof(int64_t) * (size_t)(c->n_ctx + SD_RUNNER_TREE_MAX));
    double *scores = malloc(sizeof(double) * (size_t)(c->n_ctx + SD_RUNNER_TREE_MAX)), *acc = malloc(sizeof(double) * c->hd);
    for (int32_t t = 0; t < n; t++) {
        const int32_t nk = token_keys(p, c->bt, t, keys);
        sd_cpu_attention_keys(q + (size_t)t * qd, kc, vc, keys, nk, c->nh, c->nkv, c->hd, scores, acc, ref + (size_t)t * qd);
    }
    float *d_q = ct_dev_upload(q, sizeof(float) * n * qd), *d_o = ct_dev_alloc(sizeof(float) * n * qd);
    g_part_floats = sd_cuda_attention_part_floats(n, c->nh, c->hd, c->n_ctx + SD_RUNNER_TREE_MAX);
    float *d_part = ct_dev_alloc(sizeof(float) * g_part_floats);
    sd_errbuf eb;
    for (int32_t k = 0; k < p->lo.n_launch; k++) {
        const sd_cuda_att_launch *L = &p->launch[k];
        sd_cuda_attention_args aa = {.q = d_q + (size_t)L->tok0 * qd, .ldq = qd, .k_cache = d_k, .v_cache = d_v,
                                     .kv_dt = c->dt, .cache_rows = p->rows, .n_ctx = c->n_ctx + SD_RUNNER_TREE_MAX,
                                     .n = L->n, .n_heads = c->nh, .n_kv = c->nkv, .hd = c->hd, .part = d_part, .part_floats = g_part_floats,
                                     .out = d_o + (size_t)L->tok0 * qd, .ldo = qd};
        aa.map = sd_cuda_layout_map(L, p->d_tm, p->d_ext, p->d_blk, c->bt);
        SD_CHECK(sd_cuda_attention(&aa, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    }
    CT_CUDA(cudaMemcpy(got, d_o, sizeof(float) * n * qd, cudaMemcpyDeviceToHost));
    char what[128];
    snprintf(what, sizeof what, "paged attention %s nh=%d nkv=%d hd=%d bt=%d, %d tokens", ct_dname(c->dt), c->nh, c->nkv,
             c->hd, c->bt, (int)n);
    SD_CHECK(ct_compare(what, got, ref, (size_t)n * qd, 1e-5, 1e-4, 1e-5), "paged attention vs CPU");
    int alone = 0, contig = 0;
    for (int32_t t = 0; t < n; t++) {
        const int32_t nk = token_keys(p, c->bt, t, keys);
        alone += alone_equal(c, p, t, d_k, d_v, d_q, d_part, d_o, got + (size_t)t * qd);
        contig += contiguous_equal(c, kc, vc, keys, nk, d_q + (size_t)t * qd, d_part, d_o, got + (size_t)t * qd);
    }
    SD_CHECK(alone == n, "%s: %d of %d tokens alone differ from their batch rows", what, (int)(n - alone), (int)n);
    SD_CHECK(contig == n, "%s: %d of %d tokens differ from their keys in a contiguous cache (plain decoding)", what,
             (int)(n - contig), (int)n);
    printf("%-52s alone == batched, paged == contiguous: %s\n", what, alone == n && contig == n ? "bitwise ok" : "FAIL");
    cudaFree(d_k); cudaFree(d_v); cudaFree(d_q); cudaFree(d_o); cudaFree(d_part);
    free(kc); free(vc); free(q); free(ref); free(got); free(keys); free(scores); free(acc);
    free_pass(p);
    free(p);
}

/* RoPE + KV append in GENERAL mode (F32 cache, so the stored values are exact): each
 * token's k and v in the physical row of its write row, rotated at its position; no
 * other row written (the cache is poisoned with NaN first). */
static void test_rope_paged(ct_rng *rng, const pcase *c) {
    pass *p = malloc(sizeof *p);
    make_pass(rng, c, p);
    layout_pass(c, p, MAX_TOK);
    const int32_t n = p->lo.n, hd = c->hd, half = hd / 2, ld = (c->nh + 2 * c->nkv) * hd;
    const int32_t n_ctx = c->n_ctx + SD_RUNNER_TREE_MAX;
    sd_rope_params rp = {hd, 10000.0, 0, 8.0, 1.0, 4.0, 64.0};
    double *inv = malloc(sizeof(double) * half);
    float *cs = malloc(sizeof(float) * n_ctx * half), *sn = malloc(sizeof(float) * n_ctx * half);
    sd_cpu_rope_inv_freq(&rp, inv);
    for (int32_t q = 0; q < n_ctx; q++) sd_cpu_rope_table(inv, half, q, cs + (size_t)q * half, sn + (size_t)q * half);
    float *qkv = malloc(sizeof(float) * n * ld), *ref = malloc(sizeof(float) * n * ld);
    for (int32_t i = 0; i < n * ld; i++) qkv[i] = ct_unif(rng, 2.0f);
    memcpy(ref, qkv, sizeof(float) * n * ld);
    for (int32_t t = 0; t < n; t++) {
        const int32_t pos = p->tm[t].pos;
        sd_cpu_rope(ref + (size_t)t * ld, c->nh + c->nkv, hd, cs + (size_t)pos * half, sn + (size_t)pos * half);
    }
    const size_t ce = (size_t)c->nkv * p->rows * hd;
    float *d_cs = ct_dev_upload(cs, sizeof(float) * n_ctx * half), *d_sn = ct_dev_upload(sn, sizeof(float) * n_ctx * half);
    float *d_qkv = ct_dev_upload(qkv, sizeof(float) * n * ld), *d_kc = ct_dev_alloc(ce * 4), *d_vc = ct_dev_alloc(ce * 4);
    sd_errbuf eb;
    sd_cuda_rope_args ra = {.qkv = d_qkv, .ldqkv = ld, .n = n, .n_heads = c->nh, .n_kv = c->nkv, .hd = hd,
                            .cos_t = d_cs, .sin_t = d_sn, .k_cache = d_kc, .v_cache = d_vc, .kv_dt = SD_F32,
                            .n_ctx = n_ctx, .cache_rows = p->rows};
    ra.map.block_tokens = c->bt;
    ra.map.tok = p->d_tm;
    ra.map.ext = p->d_ext;
    SD_CHECK(sd_cuda_rope_kv(&ra, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    float *got = malloc(sizeof(float) * n * ld), *kc = malloc(ce * 4), *vc = malloc(ce * 4);
    CT_CUDA(cudaMemcpy(got, d_qkv, sizeof(float) * n * ld, cudaMemcpyDeviceToHost));
    CT_CUDA(cudaMemcpy(kc, d_kc, ce * 4, cudaMemcpyDeviceToHost));
    CT_CUDA(cudaMemcpy(vc, d_vc, ce * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    size_t written = 0;
    for (int32_t t = 0; t < n; t++) {
        bad += memcmp(got + (size_t)t * ld, ref + (size_t)t * ld, sizeof(float) * c->nh * hd) != 0;
        const int32_t *tab = p->tab[p->seg_of[t]], w = p->tm[t].wrow;
        const int64_t row = (int64_t)tab[w / c->bt] * c->bt + w % c->bt;
        for (int g = 0; g < c->nkv; g++) {
            const float *rk = ref + (size_t)t * ld + (size_t)(c->nh + g) * hd;
            const float *rv = qkv + (size_t)t * ld + (size_t)(c->nh + c->nkv + g) * hd;
            bad += memcmp(kc + ((size_t)g * p->rows + row) * hd, rk, sizeof(float) * hd) != 0;
            bad += memcmp(vc + ((size_t)g * p->rows + row) * hd, rv, sizeof(float) * hd) != 0;
        }
    }
    for (size_t i = 0; i < ce; i++) written += kc[i] == kc[i];
    SD_CHECK(bad == 0, "paged rope / KV append: %d rows differ", bad);
    SD_CHECK(written == (size_t)n * c->nkv * hd, "paged KV append wrote %zu elements, expected %zu", written,
             (size_t)n * c->nkv * hd);
    printf("%-52s %s\n", "paged rope + KV append (GENERAL mode)", bad == 0 ? "bitwise ok" : "FAIL");
    cudaFree(d_cs); cudaFree(d_sn); cudaFree(d_qkv); cudaFree(d_kc); cudaFree(d_vc);
    free(inv); free(cs); free(sn); free(qkv); free(ref); free(got); free(kc); free(vc);
    free_pass(p);
    free(p);
}

/* sd_cuda_kv_copy vs the same moves applied in order on the host (compaction moves
 * keep[j] -> j, keep increasing, so later moves read rows earlier ones wrote). */
static void test_kv_copy(ct_rng *rng) {
    const int32_t n_mats = 4, nkv = 3, hd = 24, rows = 64;
    const size_t mat = (size_t)nkv * rows * hd + 8, total = mat * n_mats; /* padded stride */
    for (int di = 0; di < 2; di++) {
        const sd_dtype dt = di ? SD_BF16 : SD_F32;
        float *v = malloc(total * 4);
        void *h = malloc(total * ct_dsize(dt)), *back = malloc(total * ct_dsize(dt));
        for (size_t i = 0; i < total; i++) v[i] = ct_unif(rng, 1.0f);
        ct_pack(dt, v, h, total);
        int32_t moves[2 * 12], nm = 0, base = 20;
        for (int32_t j = 0, k = 0; j < 12; j++) { /* keep[] increasing with gaps */
            k += 1 + rnd(rng, 2);
            if (k == j) continue;
            moves[2 * nm] = base + k;
            moves[2 * nm + 1] = base + j;
            nm++;
        }
        void *d = ct_dev_upload(h, total * ct_dsize(dt));
        int32_t *d_mv = ct_dev_upload(moves, sizeof moves);
        const size_t es = ct_dsize(dt);
        for (int32_t i = 0; i < nm; i++) /* the host reference, in order */
            for (int32_t m = 0; m < n_mats; m++)
                for (int32_t g = 0; g < nkv; g++)
                    memcpy((char *)h + (m * mat + ((size_t)g * rows + moves[2 * i + 1]) * hd) * es,
                           (char *)h + (m * mat + ((size_t)g * rows + moves[2 * i]) * hd) * es, hd * es);
        sd_cuda_kv_copy_args a = {.cache = d, .mat_stride = mat, .n_mats = n_mats, .n_kv = nkv, .hd = hd,
                                  .cache_rows = rows, .kv_dt = dt, .moves = d_mv, .n_moves = nm};
        sd_errbuf eb;
        SD_CHECK(sd_cuda_kv_copy(&a, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
        CT_CUDA(cudaMemcpy(back, d, total * es, cudaMemcpyDeviceToHost));
        SD_CHECK(memcmp(back, h, total * es) == 0, "kv copy %s: %d moves differ from the host reference", ct_dname(dt),
                 (int)nm);
        printf("%-52s %d moves %s\n", dt == SD_F32 ? "kv copy F32" : "kv copy BF16", (int)nm, "checked");
        cudaFree(d); cudaFree(d_mv);
        free(v); free(h); free(back);
    }
}

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    ct_rng rng = {0x9a6ed};
    const pcase cases[] = {{8, 2, 64, 4, 300, SD_BF16}, {16, 1, 128, 16, 300, SD_F16}, {4, 4, 32, 1, 300, SD_F32},
                           {40, 1, 64, 4, 300, SD_BF16}};
    const int n_cases = ct_quick() ? 1 : (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n_cases; i++) {
        test_attention_paged(&rng, &cases[i]);
        test_rope_paged(&rng, &cases[i]);
    }
    test_kv_copy(&rng);
    CT_CUDA(cudaDeviceSynchronize());
    return sd_test_done();
}
#endif

/* test_cpu_runner.c — the CPU runner on synthetic in-memory models (no loader):
 * batch invariance (bitwise, chunks k = 1..16 and full prefill), rollback by
 * truncation, logits == NULL, no allocation in forward, argument checks that leave
 * the state unchanged, model checks in create, and allocation-failure injection
 * over create (every k) without leaks (ASan's leak checker runs this too); the
 * sliding window's receptive field (check_window). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "sd_alloc.h"
#include "sd_cpu_runner.h"
#include "fwd_common.h"

#define T_SEQ 37
#define N_CTX 48

static void make_tokens(int32_t *tok, int32_t n, int32_t vocab, uint64_t seed) {
    uint64_t s = seed;
    for (int32_t i = 0; i < n; i++) tok[i] = (int32_t)(fwd_rng_next(&s) % (uint64_t)vocab);
}

static void check_model_invariance(const char *name, const sd_config *cfg, sd_dtype dt) {
    struct specdec_model *m = fwd_model_make(cfg, dt, 42);
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    specdec_status st = sd_cpu_runner_create(&m->w, N_CTX, N_CTX, &r, &eb);
    SD_CHECK(st == SPECDEC_OK && r, "%s: create: %s", name, eb.msg);
    if (!r) {
        fwd_model_free(m);
        return;
    }
    const int32_t V = cfg->vocab_size;
    int32_t tok[T_SEQ];
    make_tokens(tok, T_SEQ, V, 7);
    size_t sz = (size_t)T_SEQ * (size_t)V;
    float *single = malloc(sz * sizeof(float)), *other = malloc(sz * sizeof(float));

    SD_CHECK(fwd_run_chunked(r, tok, T_SEQ, 1, single) == SPECDEC_OK, "%s: 1-token decode: %s", name, r->err.msg);
    SD_CHECK(r->kv_len == T_SEQ, "%s: kv_len %d after decode", name, r->kv_len);
    /* The logits must be finite and not all the same (a broken model could still be
     * "batch invariant"). */
    int finite = 1;
    double spread = 0;
    for (size_t i = 0; i < sz; i++) {
        if (!isfinite(single[i])) finite = 0;
        spread = fmax(spread, fabs((double)single[i] - single[0]));
    }
    SD_CHECK(finite && spread > 0.1, "%s: logits degenerate (finite %d, spread %g)", name, finite, spread);

    /* Batch invariance: position j inside a k-token call == its 1-token call, bitwise. */
    for (int32_t k = 2; k <= T_SEQ; k = (k == 16 ? T_SEQ : k + 1)) {
        memset(other, 0, sz * sizeof(float));
        st = fwd_run_chunked(r, tok, T_SEQ, k, other);
        int64_t d = fwd_first_diff(other, single, (int64_t)sz);
        SD_CHECK(st == SPECDEC_OK && d < 0, "%s: chunks of %d differ from 1-token decode at position %lld vocab %lld "
                 "(%.9g vs %.9g)", name, k, (long long)(d / V), (long long)(d % V), d >= 0 ? other[d] : 0.0,
                 d >= 0 ? single[d] : 0.0);
    }

    /* Rollback: full sequence, then rewrite from position m with different tokens
     * (implicit truncation by pos, and explicit kv_len lowering) == a fresh run. */
    int32_t alt[T_SEQ];
    memcpy(alt, tok, sizeof tok);
    make_tokens(alt + 20, T_SEQ - 20, V, 99);
    float *fresh = malloc(sz * sizeof(float));
    sd_runner *r2 = NULL;
    SD_CHECK(sd_cpu_runner_create(&m->w, N_CTX, N_CTX, &r2, &eb) == SPECDEC_OK, "%s: create 2: %s", name, eb.msg);
    if (r2) {
        SD_CHECK(sd_runner_forward(r2, alt, 20, 0, NULL) == SPECDEC_OK, "%s", r2->err.msg);
        SD_CHECK(sd_runner_forward(r2, alt + 20, T_SEQ - 20, 20, fresh) == SPECDEC_OK, "%s", r2->err.msg);
        sd_runner_destroy(r2);
    }
    for (int variant = 0; variant < 2; variant++) {
        SD_CHECK(sd_runner_forward(r, tok, T_SEQ, 0, NULL) == SPECDEC_OK, "%s", r->err.msg);
        if (variant == 1) r->kv_len = 20; /* the engine's O(1) truncation */
        st = sd_runner_forward(r, alt + 20, T_SEQ - 20, 20, other);
        int64_t d = fwd_first_diff(other, fresh, (int64_t)(T_SEQ - 20) * V);
        SD_CHECK(st == SPECDEC_OK && d < 0, "%s: rollback (variant %d) differs from a fresh run at %lld", name,
                 variant, (long long)d);
        SD_CHECK(r->kv_len == T_SEQ, "%s: kv_len %d after rollback", name, r->kv_len);
    }

    /* The decode loop allocates nothing. */
    sd_alloc_fail_after(-1); /* resets the counter, no injection */
    st = sd_runner_forward(r, tok, 5, 0, other);
    st = st ? st : sd_runner_forward(r, tok + 5, 1, 5, other);
    SD_CHECK(st == SPECDEC_OK && sd_alloc_count() == 0, "%s: forward allocated %ld times", name, sd_alloc_count());

    free(fresh);
    free(single);
    free(other);
    sd_runner_destroy(r);
    fwd_model_free(m);
}

/* Every bad argument returns its status with a message and changes nothing. */
/* Sliding window W over L layers: the logits at position p depend on the tokens at
 * positions > p - L (W - 1) only (each layer reaches W - 1 positions further back).
 * Rewriting every token before that leaves them bitwise unchanged; rewriting the first
 * one inside it changes them; without the window (W = 0) the far tokens matter too.
 * Also a tree node (the path decoded as a tree chain) == the plain decode. */
static void check_window(void) {
    sd_config c = fwd_small_config();
    c.arch = SD_ARCH_MISTRAL;
    c.sliding_window = 4;
    for (int32_t l = 0; l < c.n_layers; l++) c.layer_sliding[l] = 1;
    const int32_t reach = c.n_layers * (c.sliding_window - 1), T = 20, p = T - 1, V = c.vocab_size;
    struct specdec_model *m = fwd_model_make(&c, SD_F32, 11);
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    SD_CHECK(sd_cpu_runner_create(&m->w, N_CTX, N_CTX, &r, &eb) == SPECDEC_OK, "window: create: %s", eb.msg);
    if (!r) {
        fwd_model_free(m);
        return;
    }
    int32_t tok[20], alt[20];
    make_tokens(tok, T, V, 3);
    float *a = malloc(sizeof(float) * (size_t)(T * V)), *b = malloc(sizeof(float) * (size_t)(T * V));
    SD_CHECK(sd_runner_forward(r, tok, T, 0, a) == SPECDEC_OK, "window: %s", r->err.msg);
    memcpy(alt, tok, sizeof tok);
    for (int32_t i = 0; i < p - reach; i++) alt[i] = (tok[i] + 1 + i) % V;
    SD_CHECK(sd_runner_forward(r, alt, T, 0, b) == SPECDEC_OK, "window: %s", r->err.msg);
    SD_CHECK(fwd_first_diff(b + (int64_t)p * V, a + (int64_t)p * V, V) < 0,
             "window: tokens before p - L (W - 1) changed the logits at p");
    alt[p - reach] = (tok[p - reach] + 1) % V;
    SD_CHECK(sd_runner_forward(r, alt, T, 0, b) == SPECDEC_OK, "window: %s", r->err.msg);
    SD_CHECK(fwd_first_diff(b + (int64_t)p * V, a + (int64_t)p * V, V) >= 0,
             "window: the token at p - L (W - 1) did not change the logits at p");
    /* a tree over the last 5 positions (a chain of parents) == the plain decode */
    int32_t par[5] = {-1, 0, 1, 2, 3};
    sd_runner_truncate(r, 0);
    SD_CHECK(sd_runner_forward(r, tok, T - 5, 0, NULL) == SPECDEC_OK, "window: %s", r->err.msg);
    SD_CHECK(sd_runner_forward_tree(r, tok + T - 5, 5, T - 5, 0, par, b) == SPECDEC_OK, "window tree: %s", r->err.msg);
    SD_CHECK(fwd_first_diff(b, a + (int64_t)(T - 5) * V, 5 * V) < 0, "window: tree logits differ from the chain's");
    sd_runner_destroy(r);
    /* without the window the far tokens matter */
    m->w.cfg.sliding_window = 0;
    memset(m->w.cfg.layer_sliding, 0, sizeof m->w.cfg.layer_sliding);
    r = NULL;
    SD_CHECK(sd_cpu_runner_create(&m->w, N_CTX, N_CTX, &r, &eb) == SPECDEC_OK, "no window: create: %s", eb.msg);
    if (r) {
        for (int32_t i = 0; i < p - reach; i++) alt[i] = (tok[i] + 1 + i) % V;
        alt[p - reach] = tok[p - reach];
        SD_CHECK(sd_runner_forward(r, alt, T, 0, b) == SPECDEC_OK, "no window: %s", r->err.msg);
        SD_CHECK(sd_runner_forward(r, tok, T, 0, a) == SPECDEC_OK, "no window: %s", r->err.msg);
        SD_CHECK(fwd_first_diff(b + (int64_t)p * V, a + (int64_t)p * V, V) >= 0,
                 "no window: far tokens did not change the logits (the check cannot fail)");
        sd_runner_destroy(r);
    }
    free(a);
    free(b);
    fwd_model_free(m);
}

static void check_bad_args(void) {
    sd_config cfg = fwd_small_config();
    struct specdec_model *m = fwd_model_make(&cfg, SD_F32, 5);
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    SD_CHECK(sd_cpu_runner_create(&m->w, 16, 4, &r, &eb) == SPECDEC_OK && r, "create: %s", eb.msg);
    if (!r) {
        fwd_model_free(m);
        return;
    }
    const int32_t V = cfg.vocab_size;
    int32_t tok[16];
    make_tokens(tok, 16, V, 3);
    float *want = malloc(sizeof(float) * 16 * (size_t)V), *got = malloc(sizeof(float) * 16 * (size_t)V);
    /* Reference: 3 tokens, then the 4th. */
    SD_CHECK(sd_runner_forward(r, tok, 3, 0, NULL) == SPECDEC_OK, "%s", r->err.msg);
    SD_CHECK(sd_runner_forward(r, tok + 3, 1, 3, want) == SPECDEC_OK, "%s", r->err.msg);
    SD_CHECK(sd_runner_forward(r, tok, 3, 0, NULL) == SPECDEC_OK, "%s", r->err.msg);

    int32_t bad_lo[2] = {1, -1}, bad_hi[2] = {V, 1};
    struct {
        const char *what;
        const int32_t *tokens;
        int32_t n, pos;
        specdec_status want;
    } cases[] = {
        {"NULL tokens", NULL, 1, 3, SPECDEC_ERR_INVALID_ARGUMENT},
        {"n = 0", tok, 0, 3, SPECDEC_ERR_INVALID_ARGUMENT},
        {"n < 0", tok, -2, 3, SPECDEC_ERR_INVALID_ARGUMENT},
        {"n > max_batch", tok, 5, 3, SPECDEC_ERR_INVALID_ARGUMENT},
        {"pos < 0", tok, 1, -1, SPECDEC_ERR_INVALID_ARGUMENT},
        {"pos > kv_len", tok, 1, 4, SPECDEC_ERR_INVALID_ARGUMENT},
        {"token -1", bad_lo, 2, 3, SPECDEC_ERR_INVALID_ARGUMENT},
        {"token V", bad_hi, 2, 3, SPECDEC_ERR_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r->err.msg[0] = 0;
        specdec_status st = sd_runner_forward(r, cases[i].tokens, cases[i].n, cases[i].pos, got);
        SD_CHECK(st == cases[i].want, "%s: status %d, want %d", cases[i].what, (int)st, (int)cases[i].want);
        SD_CHECK(r->err.msg[0] != 0, "%s: no error detail", cases[i].what);
        SD_CHECK(r->kv_len == 3, "%s: kv_len changed to %d", cases[i].what, r->kv_len);
    }
    /* Context full: fill to 14, then 3 more (14 + 3 > 16). */
    SD_CHECK(fwd_run_chunked(r, tok, 14, 4, got) == SPECDEC_OK, "%s", r->err.msg);
    SD_CHECK(sd_runner_forward(r, tok, 3, 14, got) == SPECDEC_ERR_CONTEXT_FULL, "context full not reported");
    SD_CHECK(r->kv_len == 14, "kv_len %d after CONTEXT_FULL", r->kv_len);
    SD_CHECK(sd_runner_forward(r, tok, 2, 14, got) == SPECDEC_OK, "exactly full: %s", r->err.msg);
    /* State intact after all the failures: same logits as before. */
    SD_CHECK(sd_runner_forward(r, tok + 3, 1, 3, got) == SPECDEC_OK, "%s", r->err.msg);
    SD_CHECK(fwd_first_diff(got, want, V) < 0, "logits changed after rejected calls");

    /* create's own checks */
    sd_runner *r2 = (sd_runner *)&eb; /* must be overwritten with NULL */
    SD_CHECK(sd_cpu_runner_create(NULL, 16, 4, &r2, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && !r2, "NULL model");
    SD_CHECK(sd_cpu_runner_create(&m->w, 0, 1, &r2, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && !r2, "n_ctx 0");
    SD_CHECK(sd_cpu_runner_create(&m->w, 16, 0, &r2, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && !r2, "max_batch 0");
    SD_CHECK(sd_cpu_runner_create(&m->w, 16, 17, &r2, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && !r2, "max_batch > n_ctx");
    SD_CHECK(sd_cpu_runner_create(&m->w, 16, 4, NULL, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL out");
    /* model inconsistencies */
    int64_t saved = m->w.layers[1].wk.shape[0];
    m->w.layers[1].wk.shape[0] = saved + 1;
    SD_CHECK(sd_cpu_runner_create(&m->w, 16, 4, &r2, &eb) == SPECDEC_ERR_MODEL_MISMATCH && !r2, "wrong wk shape");
    SD_CHECK(strstr(eb.msg, "k_proj") != NULL, "detail names the tensor: %s", eb.msg);
    m->w.layers[1].wk.shape[0] = saved;
    const void *saved_p = m->w.layers[0].w_up.data;
    m->w.layers[0].w_up.data = NULL;
    SD_CHECK(sd_cpu_runner_create(&m->w, 16, 4, &r2, &eb) == SPECDEC_ERR_MODEL_MISMATCH && !r2, "missing w_up");
    m->w.layers[0].w_up.data = saved_p;
    m->w.cfg.n_kv_heads = 3;
    SD_CHECK(sd_cpu_runner_create(&m->w, 16, 4, &r2, &eb) == SPECDEC_ERR_FORMAT && !r2, "heads %% kv_heads (the one config validation: FORMAT)");
    m->w.cfg.n_kv_heads = 2;

    free(want);
    free(got);
    sd_runner_destroy(r);
    sd_runner_destroy(NULL);
    fwd_model_free(m);
}

/* Fail the k-th allocation of create for every k: OUT_OF_MEMORY, *out NULL, no leak. */
static void check_alloc_failures(void) {
    sd_config cfg = fwd_small_config();
    struct specdec_model *m = fwd_model_make(&cfg, SD_BF16, 9);
    int n_fail = 0;
    for (long k = 0; k < 1000; k++) {
        sd_errbuf eb = {{0}};
        sd_runner *r = (sd_runner *)&eb;
        sd_alloc_fail_after(k);
        specdec_status st = sd_cpu_runner_create(&m->w, 32, 8, &r, &eb);
        long used = sd_alloc_count();
        sd_alloc_fail_after(-1);
        if (st == SPECDEC_OK) {
            SD_CHECK(used <= k, "create succeeded although allocation %ld failed", k);
            int32_t tok[3] = {1, 2, 3};
            float *lg = malloc(sizeof(float) * 3 * (size_t)cfg.vocab_size);
            SD_CHECK(sd_runner_forward(r, tok, 3, 0, lg) == SPECDEC_OK, "forward after injection run");
            free(lg);
            sd_runner_destroy(r);
            SD_CHECK(n_fail == k && k > 5, "create made only %ld allocations", k);
            break;
        }
        n_fail++;
        SD_CHECK(st == SPECDEC_ERR_OUT_OF_MEMORY, "k=%ld: status %d", k, (int)st);
        SD_CHECK(r == NULL, "k=%ld: *out not NULL", k);
        SD_CHECK(strstr(eb.msg, "out of memory") != NULL, "k=%ld: detail '%s'", k, eb.msg);
    }
    printf("allocation failure injected at each of %d allocations of create\n", n_fail);
    fwd_model_free(m);
}

int main(void) {
    sd_config c = fwd_small_config();
    check_model_invariance("llama gqa f32", &c, SD_F32);

    sd_config q = fwd_small_config();
    q.arch = SD_ARCH_QWEN2;
    q.attention_bias = 1;
    q.tie_word_embeddings = 1;
    q.n_heads = 6;
    q.n_kv_heads = 1;
    q.head_dim = 10;
    q.hidden_size = 50;
    q.vocab_size = 101;
    check_model_invariance("qwen2 mqa bias tied bf16", &q, SD_BF16);

    sd_config l3 = fwd_small_config();
    l3.rope_type = SD_ROPE_LLAMA3;
    l3.rope_theta = 500000.0f;
    l3.rope_factor = 8.0f;
    l3.rope_low_freq_factor = 1.0f;
    l3.rope_high_freq_factor = 4.0f;
    l3.rope_original_max_pos = 16;
    l3.head_dim = 24;
    l3.n_kv_heads = 4;
    l3.attention_bias = 1; /* Llama attention_bias: q/k/v/o biases */
    l3.o_bias = 1;
    check_model_invariance("llama3 rope mha bias f16", &l3, SD_F16);

    check_window();
    check_bad_args();
    check_alloc_failures();
    return sd_test_done();
}

/* test_engine_real.c — the engine on real (tiny, random) checkpoints through the CPU
 * runner: greedy speculative == greedy plain; match speculative == plain with the same
 * seed for γ = 1..8 and several seeds; same seed -> same output; the target as its own
 * draft accepts everything in greedy; mismatched drafts refused; stop strings with the
 * tokenizer; allocation failures over specdec_engine_create (every k).
 * argv[1]: directory written by make_pair.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_test.h"
#include "specdec.h"

static char g_dir[4096];

/* First occurrence of needle[0..nl) in hay[0..hl) (text may hold NUL bytes), or -1. */
static long mem_find(const char *hay, size_t hl, const char *needle, size_t nl) {
    for (size_t i = 0; i + nl <= hl; i++)
        if (!memcmp(hay + i, needle, nl)) return (long)i;
    return -1;
}

static int no_nul4(const char *p) { return p[0] && p[1] && p[2] && p[3]; }

static specdec_model *load(const char *name) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    specdec_model *m = NULL;
    specdec_status st = specdec_model_load(p, NULL, &m);
    SD_CHECK(st == SPECDEC_OK, "load %s: %s", p, specdec_last_error());
    return m;
}

static specdec_engine *engine(const specdec_model *t, const specdec_model *d, int32_t n_ctx) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = n_ctx;
    specdec_engine *e = NULL;
    specdec_status st = specdec_engine_create(t, d, &ep, &e);
    SD_CHECK(st == SPECDEC_OK, "engine: %s", specdec_last_error());
    return e;
}

static int gen(specdec_engine *e, const specdec_generate_params *gp, const int32_t *prompt, int32_t np, int32_t *out,
               specdec_stats *stats) {
    int32_t n = -1;
    specdec_status st = specdec_generate(e, prompt, np, gp, out, 256, &n, stats);
    SD_CHECK(st == SPECDEC_OK, "generate: %s: %s", specdec_status_string(st), specdec_engine_last_error(e));
    return n;
}

typedef struct text_acc {
    char buf[8192];
    size_t len;
    size_t last_start; /* where the last non-empty piece began */
    int calls;
} text_acc;

static int text_cb(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)tok;
    text_acc *t = ud;
    SD_CHECK(piece != NULL, "no piece with a tokenizer");
    if (piece && len > 0 && t->len + len < sizeof t->buf) {
        t->last_start = t->len;
        memcpy(t->buf + t->len, piece, len);
        t->len += len;
        t->buf[t->len] = '\0';
    }
    t->calls++;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_engine_real PAIR_DIR\n");
        return 2;
    }
    snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
    specdec_model *target = load("target"), *draft = load("draft");
    if (!target || !draft) return sd_test_done();

    specdec_engine *plain = engine(target, NULL, 256);
    specdec_engine *spec = engine(target, draft, 256);
    specdec_engine *self = engine(target, target, 256);
    if (!plain || !spec || !self) return sd_test_done();
    const int32_t prompt[6] = {1, 273, 278, 294, 67, 285};
    int32_t ref[256], got[256];
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 40;
    gp.ignore_eos = 1;
    specdec_stats st;

    /* greedy */
    gp.temperature = 0.0f;
    int nr = gen(plain, &gp, prompt, 6, ref, NULL);
    SD_CHECK(nr == 40, "plain greedy: %d tokens", nr);
    for (int32_t g = 1; g <= 8; g++) {
        gp.n_draft = g;
        int n = gen(spec, &gp, prompt, 6, got, &st);
        SD_CHECK(n == nr && !memcmp(ref, got, sizeof(int32_t) * (size_t)n), "greedy γ=%d differs from plain", (int)g);
        SD_CHECK(st.n_drafted > 0, "γ=%d: nothing drafted", (int)g);
        n = gen(self, &gp, prompt, 6, got, &st);
        SD_CHECK(n == nr && !memcmp(ref, got, sizeof(int32_t) * (size_t)n), "self-draft greedy γ=%d differs", (int)g);
        SD_CHECK(st.n_accepted == st.n_drafted && st.n_drafted > 0,
                 "self-draft greedy γ=%d: accepted %lld of %lld", (int)g, (long long)st.n_accepted,
                 (long long)st.n_drafted);
    }
    gp.adaptive_draft = 1;
    gp.n_draft = 2;
    int n = gen(spec, &gp, prompt, 6, got, &st);
    SD_CHECK(n == nr && !memcmp(ref, got, sizeof(int32_t) * (size_t)n), "adaptive greedy differs from plain");
    gp.adaptive_draft = 0;

    /* match: equal to plain sampling with the same seed */
    gp.verify = SPECDEC_VERIFY_MATCH;
    gp.temperature = 1.0f;
    gp.top_k = 0;
    gp.top_p = 0.95f;
    gp.min_p = 0.0f;
    long accepted = 0, drafted = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        gp.seed = seed;
        gp.n_draft = 0;
        nr = gen(plain, &gp, prompt, 6, ref, NULL);
        for (int32_t g = 1; g <= 8; g++) {
            gp.n_draft = g;
            n = gen(spec, &gp, prompt, 6, got, &st);
            SD_CHECK(n == nr && !memcmp(ref, got, sizeof(int32_t) * (size_t)n),
                     "match seed %llu γ=%d differs from plain", (unsigned long long)seed, (int)g);
            accepted += st.n_accepted;
            drafted += st.n_drafted;
        }
    }
    printf("match mode: acceptance %.3f over %ld drafts\n", drafted ? (double)accepted / (double)drafted : 0.0, drafted);

    /* rejection: same seed -> same output */
    gp.verify = SPECDEC_VERIFY_REJECTION;
    gp.seed = 42;
    gp.n_draft = 4;
    nr = gen(spec, &gp, prompt, 6, ref, &st);
    n = gen(spec, &gp, prompt, 6, got, NULL);
    SD_CHECK(n == nr && !memcmp(ref, got, sizeof(int32_t) * (size_t)n), "same seed, different output");
    printf("rejection γ=4: %lld rounds, acceptance %.3f, %.2f tokens/round\n", (long long)st.n_rounds,
           st.acceptance_rate, st.tokens_per_round);

    /* stop strings through the tokenizer */
    specdec_tokenizer *tok = NULL;
    char tdir[4200];
    snprintf(tdir, sizeof tdir, "%s/target", g_dir);
    specdec_status s = specdec_tokenizer_load(tdir, &tok);
    SD_CHECK(s == SPECDEC_OK, "tokenizer: %s", specdec_last_error());
    if (tok) {
        text_acc ta;
        memset(&ta, 0, sizeof ta);
        gp.tokenizer = tok;
        gp.callback = text_cb;
        gp.user_data = &ta;
        gp.n_predict = 60;
        nr = gen(spec, &gp, prompt, 6, ref, NULL);
        SD_CHECK(ta.calls >= nr, "callback calls %d < tokens %d", ta.calls, nr);
        /* decode must agree with the pieces */
        char dec[8192];
        size_t dl = 0;
        s = specdec_detokenize(tok, ref, nr, 1, dec, sizeof dec, &dl);
        SD_CHECK(s == SPECDEC_OK && dl == ta.len && !memcmp(dec, ta.buf, dl), "pieces != detokenize");
        long at = (long)ta.len / 2; /* mid-text: the stop comes well before n_predict */
        while (at >= 0 && !no_nul4(ta.buf + at)) at--;
        if (at >= 0) {
            /* a stop string taken from the text (4 bytes without NUL: random models emit
             * NULs): output stops at the token completing its first occurrence */
            char stop[5];
            memcpy(stop, ta.buf + at, 4);
            stop[4] = '\0';
            size_t end_at = (size_t)mem_find(ta.buf, ta.len, stop, 4) + 4;
            const char *stops[1] = {stop};
            gp.stop_strings = stops;
            gp.n_stop_strings = 1;
            text_acc tb;
            memset(&tb, 0, sizeof tb);
            gp.user_data = &tb;
            n = gen(spec, &gp, prompt, 6, got, &st);
            SD_CHECK(st.stop_reason == SPECDEC_STOP_STRING, "stop reason %d", (int)st.stop_reason);
            SD_CHECK(n <= nr && !memcmp(got, ref, sizeof(int32_t) * (size_t)n), "stop string changed the tokens");
            SD_CHECK(tb.len >= end_at && !memcmp(tb.buf, ta.buf, tb.len), "text with the stop string differs");
            /* the last token's text completed it: it was not in the text before */
            SD_CHECK(tb.last_start < end_at, "generation went on after the stop string '%s'", stop);
            printf("stop string stopped after %d of %d tokens (%zu of %zu bytes)\n", n, nr, tb.len, ta.len);
            gp.stop_strings = NULL;
            gp.n_stop_strings = 0;
        }
        gp.tokenizer = NULL;
        gp.callback = NULL;
        specdec_tokenizer_free(tok);
    }
    specdec_engine_free(plain);
    specdec_engine_free(spec);
    specdec_engine_free(self);

    /* refused pairs */
    specdec_model *bad_v = load("draft_badvocab"), *bad_e = load("draft_badeos");
    specdec_engine *e = NULL;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    s = specdec_engine_create(target, bad_v, &ep, &e);
    SD_CHECK(s == SPECDEC_ERR_MODEL_MISMATCH && e == NULL, "bad vocab: %s", specdec_status_string(s));
    printf("refused: %s\n", specdec_last_error());
    s = specdec_engine_create(target, bad_e, &ep, &e);
    SD_CHECK(s == SPECDEC_ERR_MODEL_MISMATCH && e == NULL, "bad eos: %s", specdec_status_string(s));
    printf("refused: %s\n", specdec_last_error());
    specdec_model_free(bad_v);
    specdec_model_free(bad_e);
    /* CUDA explicitly requested without CUDA: unavailable, not a crash */
    if (specdec_cuda_device_count() == 0) {
        ep.backend = SPECDEC_BACKEND_CUDA;
        s = specdec_engine_create(target, draft, &ep, &e);
        SD_CHECK(s == SPECDEC_ERR_BACKEND_UNAVAILABLE && e == NULL, "cuda without device: %s",
                 specdec_status_string(s));
        ep.backend = SPECDEC_BACKEND_AUTO;
        s = specdec_engine_create(target, draft, &ep, &e);
        SD_CHECK(s == SPECDEC_OK && specdec_engine_backend(e) == SPECDEC_BACKEND_CPU, "AUTO falls back to CPU");
        specdec_engine_free(e);
        ep.backend = SPECDEC_BACKEND_CPU;
    }

    /* allocation failures over engine creation: every k */
    int ok = 0;
    long k;
    for (k = 0; k < 10000 && !ok; k++) {
        e = NULL;
        sd_alloc_fail_after(k);
        s = specdec_engine_create(target, draft, &ep, &e);
        sd_alloc_fail_after(-1);
        if (s == SPECDEC_OK) {
            ok = 1;
            gp = specdec_generate_default_params();
            gp.n_predict = 8;
            int32_t n8 = 0;
            SD_CHECK(specdec_generate(e, prompt, 6, &gp, got, 256, &n8, NULL) == SPECDEC_OK && n8 == 8,
                     "generate after injection k=%ld", k);
            specdec_engine_free(e);
        } else {
            SD_CHECK(s == SPECDEC_ERR_OUT_OF_MEMORY && e == NULL, "k=%ld: %s (%s)", k, specdec_status_string(s),
                     specdec_last_error());
        }
    }
    SD_CHECK(ok, "engine creation never succeeded");
    printf("allocation failure injected at each of %ld allocations of engine creation\n", k - 1);

    specdec_model_free(draft);
    specdec_model_free(target);
    return sd_test_done();
}

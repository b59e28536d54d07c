/* bench_ngram_corpus.c — the n-gram drafter's cross-request corpus (docs/DRAFTERS.md "Across requests"):
 *   1. what a scan costs: sd_ngram_corpus_scan (the index) and sd_ngram_corpus_scan_linear (every token) of an
 *      8-token suffix (lookup 1..4, 64 candidates, depth 8) in corpora of 4,096 / 65,536 / 1,048,576 tokens of
 *      entries of 600 tokens (random ids in 32,000: few matches) and of a repetitive text (the bundled target's
 *      own outputs repeated: every suffix matches thousands of times), median of 7 runs of 1,000 scans;
 *   2. what it buys: the bundled target alone (CPU), each of 6 prompts generated twice (greedy, 64 tokens,
 *      n-gram chains γ 8, ngram_cost OFF), with and without a corpus of 65,536 tokens, in one run: rounds and
 *      tokens per second of the second generations (prefill excluded), and their ratio. The outputs must
 *      be equal (else the benchmark fails).
 * usage: bench_ngram_corpus MODELS_DIR [--reps R]   (prints a table; not run by ctest) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench_util.h"
#include "sd_drafter.h"
#include "specdec.h"

static const char *const PROMPTS[] = {"And God said", "In the beginning God created", "Blessed are they that",
                                      "And the LORD spake unto Moses, saying,", "Then answered Jesus and said unto them,",
                                      "And it came to pass, when the king"};

typedef int32_t (*scan_fn)(sd_ngram_corpus *, const int32_t *, int32_t, int32_t, int32_t, int32_t, int32_t,
                           sd_ngram_found *);

static double scan_us(int64_t cap, const int32_t *text, int32_t n_text, scan_fn scan) {
    sd_ngram_corpus *c = NULL;
    if (sd_ngram_corpus_create(cap, &c, NULL) != SPECDEC_OK) return -1;
    int32_t t[600];
    unsigned s = 7;
    for (int64_t added = 0; added < cap; added += 600) {
        for (int i = 0; i < 600; i++) {
            s = s * 1103515245u + 12345u;
            t[i] = text ? text[(added + i) % n_text] : (int32_t)((s >> 16) % 32000);
        }
        sd_ngram_corpus_add(c, t, 0, 600);
    }
    sd_ngram_found f[64];
    double runs[7];
    for (int r = 0; r < 7; r++) {
        const double t0 = bench_now_s();
        for (int k = 0; k < 1000; k++) (void)scan(c, t + (k % 500), 8, 1, 4, 8, 64, f);
        runs[r] = (bench_now_s() - t0) * 1e3; /* us per scan */
    }
    sd_ngram_corpus_free(c);
    return bench_median(runs, 7);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODELS_DIR [--reps R]\n", argv[0]);
        return 2;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/kjv-target", argv[1]);
    specdec_model *m = NULL;
    specdec_tokenizer *tok = NULL;
    if (specdec_model_load(dir, NULL, &m) || specdec_tokenizer_load(dir, &tok)) {
        fprintf(stderr, "loading %s: %s\n", dir, specdec_last_error());
        return 1;
    }
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    specdec_engine *plain = NULL, *with = NULL;
    specdec_engine_create(m, NULL, &ep, &plain);
    ep.ngram_corpus_tokens = 65536;
    specdec_engine_create(m, NULL, &ep, &with);
    if (!plain || !with) return fprintf(stderr, "engine: %s\n", specdec_last_error()), 1;
    specdec_generate_params gp = specdec_generate_default_params();
    gp.temperature = 0.0f;
    gp.verify = SPECDEC_VERIFY_GREEDY;
    gp.n_predict = 64;
    gp.ignore_eos = 1;
    gp.n_draft = 8;
    gp.draft_method = SPECDEC_DRAFT_NGRAM;
    gp.ngram_cost = SPECDEC_NGRAM_COST_OFF;
    int32_t text[64 * 6], n_text = 0;
    double rounds[2] = {0, 0}, tps[2] = {0, 0};
    printf("%-42s %8s %8s %10s %10s\n", "prompt (second generation)", "rounds", "+corpus", "tok/s", "+corpus");
    for (int i = 0; i < 6; i++) {
        int32_t ids[64], n = 0, out[2][64], no[2];
        specdec_tokenize(tok, PROMPTS[i], strlen(PROMPTS[i]), 1, ids, 64, &n);
        specdec_stats st[2];
        for (int e = 0; e < 2; e++)
            for (int k = 0; k < 2; k++) /* the second generation of each is the one reported */
                if (specdec_generate(e ? with : plain, ids, n, &gp, out[e], 64, &no[e], &st[e]) != SPECDEC_OK)
                    return fprintf(stderr, "generate: %s\n", specdec_last_error()), 1;
        if (no[0] != no[1] || memcmp(out[0], out[1], sizeof(int32_t) * (size_t)no[0]))
            return fprintf(stderr, "prompt %d: the corpus changed the output\n", i), 1;
        memcpy(text + n_text, out[0], sizeof(int32_t) * (size_t)no[0]);
        n_text += no[0];
        for (int e = 0; e < 2; e++) rounds[e] += (double)st[e].n_rounds, tps[e] += st[e].tokens_per_second;
        printf("%-42s %8lld %8lld %10.0f %10.0f\n", PROMPTS[i], (long long)st[0].n_rounds, (long long)st[1].n_rounds,
               st[0].tokens_per_second, st[1].tokens_per_second);
    }
    printf("mean: rounds %.1f -> %.1f, tokens/s %.0f -> %.0f (x%.2f)\n", rounds[0] / 6, rounds[1] / 6, tps[0] / 6,
           tps[1] / 6, tps[1] / tps[0]);
    printf("\n%-10s %14s %14s %16s %16s   (us per scan: the index / every token)\n", "corpus", "random ids",
           "linear", "repetitive text", "linear");
    for (int64_t cap = 4096; cap <= (1 << 20); cap *= 16)
        printf("%-10lld %14.2f %14.1f %16.2f %16.1f\n", (long long)cap, scan_us(cap, NULL, 0, sd_ngram_corpus_scan),
               scan_us(cap, NULL, 0, sd_ngram_corpus_scan_linear), scan_us(cap, text, n_text, sd_ngram_corpus_scan),
               scan_us(cap, text, n_text, sd_ngram_corpus_scan_linear));
    specdec_engine_free(plain);
    specdec_engine_free(with);
    specdec_tokenizer_free(tok);
    specdec_model_free(m);
    return 0;
}

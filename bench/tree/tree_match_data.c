/* tree_match_data.c — the data the MATCH-mode children rule and acceptance estimates
 * are fitted on (docs/TREE.md "Scores", bench/tree/fit_match.py).
 *
 * A MATCH tree can only gain at nodes on the plain-decoding path (a node's children are
 * verified only when the node itself was accepted), so what matters is, at every
 * position P of plain decoding: the draft's processed row q (after the plain prefix),
 * the target's processed row p, the SAMPLE uniform u of P and the token t the target
 * emits there (= inverse CDF of p at u). This tool decodes plainly (MATCH, T = 0.8, the
 * library's default filters) from its own prompts and seeds — neither the benchmark's
 * prompts nor its seeds 101..106 — forwards both models over the result and writes one
 * line per position:
 *   P u t | q: id:prob ... | p: id:prob ... | r: id:prob ...
 * q and p: every token with mass, in id order; r: the draft's tempered softmax without
 * filters, its 64 largest entries (id order). It also checks t == inverse CDF of p at u.
 *
 * usage: tree_match_data MODELS_DIR OUT.txt [--seeds S] [--n TOKENS] */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "specdec.h"
#include "sd_cpu_sample.h"
#include "sd_rng.h"

static const char *const PROMPTS[] = {
    "And the LORD spake unto Moses, saying",
    "Blessed are the poor in spirit",
    "Now the serpent was more subtil",
    "And David said to Saul",
    "Hear, O Israel",
    "Then Peter opened his mouth, and said",
    "My son, forget not my law",
    "And the angel of the LORD appeared",
    "Woe unto you, scribes and Pharisees",
    "And when they were come to the place",
    "I will lift up mine eyes unto the hills",
    "Paul, a servant of Jesus Christ",
};
#define N_PROMPTS (int)(sizeof PROMPTS / sizeof PROMPTS[0])
#define SEED0 1001 /* seeds SEED0 .. SEED0 + S - 1: far from the benchmark's 101..106 */
#define MAXT 512

static void put_row(FILE *f, const char *tag, const float *x, int32_t V) {
    fprintf(f, " | %s", tag);
    for (int32_t i = 0; i < V; i++)
        if (x[i] > 0.0f) fprintf(f, " %d:%.9g", (int)i, (double)x[i]);
}

/* the draft's tempered softmax without filters, its 64 largest entries */
static void put_raw(FILE *f, const float *logit, int32_t V, double T) {
    static double w[4096];
    static char keep[4096];
    double mx = -INFINITY, z = 0.0;
    for (int32_t i = 0; i < V; i++)
        if (logit[i] > mx) mx = logit[i];
    for (int32_t i = 0; i < V; i++) z += (w[i] = exp(((double)logit[i] - mx) / T));
    memset(keep, 0, (size_t)V);
    for (int k = 0; k < 64; k++) {
        int32_t b = -1;
        for (int32_t i = 0; i < V; i++)
            if (!keep[i] && (b < 0 || w[i] > w[b])) b = i;
        keep[b] = 1;
    }
    fprintf(f, " | r:");
    for (int32_t i = 0; i < V; i++)
        if (keep[i]) fprintf(f, " %d:%.9g", (int)i, w[i] / z);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tree_match_data MODELS_DIR OUT.txt [--seeds S] [--n TOKENS]\n");
        return 2;
    }
    int n_seeds = 5, n_predict = 128;
    for (int i = 3; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--seeds")) n_seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n")) n_predict = atoi(argv[++i]);
    }
    if (n_seeds < 1 || n_predict < 1 || n_predict > 400) return 2;
    char tdir[4096], ddir[4096];
    snprintf(tdir, sizeof tdir, "%s/kjv-target", argv[1]);
    snprintf(ddir, sizeof ddir, "%s/kjv-draft", argv[1]);
    specdec_model *mt = NULL, *md = NULL;
    specdec_tokenizer *tok = NULL;
    specdec_engine *e = NULL;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    if (specdec_model_load(tdir, NULL, &mt) || specdec_model_load(ddir, NULL, &md) ||
        specdec_tokenizer_load(tdir, &tok) || specdec_engine_create(mt, md, &ep, &e)) {
        fprintf(stderr, "tree_match_data: setup: %s\n", specdec_last_error());
        return 1;
    }
    FILE *f = fopen(argv[2], "w");
    if (!f) return 1;
    const int32_t V = 4096;
    static float tl[MAXT * 4096], dl[MAXT * 4096], p[4096], q[4096];
    static unsigned char scratch[4096 * 16 + 64];
    long bad = 0, rows = 0;
    for (int pi = 0; pi < N_PROMPTS; pi++)
        for (int si = 0; si < n_seeds; si++) {
            int32_t toks[MAXT], np = 0, n = 0;
            specdec_tokenize(tok, PROMPTS[pi], strlen(PROMPTS[pi]), 1, toks, 64, &np);
            specdec_generate_params gp = specdec_generate_default_params();
            gp.n_predict = n_predict;
            gp.temperature = 0.8f;
            gp.verify = SPECDEC_VERIFY_MATCH;
            gp.ignore_eos = 1;
            gp.n_draft = 0;
            gp.seed = SEED0 + (uint64_t)si;
            if (specdec_generate(e, toks, np, &gp, toks + np, MAXT - np, &n, NULL) != SPECDEC_OK) return 1;
            const int32_t L = np + n;
            if (specdec_engine_forward(e, SPECDEC_ROLE_TARGET, toks, L, 0, tl) ||
                specdec_engine_forward(e, SPECDEC_ROLE_DRAFT, toks, L, 0, dl))
                return 1;
            const sd_sampling_params sp = sd_sampling_params_from(&gp);
            for (int32_t P = np; P < L; P++) {
                const float *trow = tl + (size_t)(P - 1) * V, *drow = dl + (size_t)(P - 1) * V;
                if (sd_sampling_process(trow, V, &sp, scratch, sizeof scratch, p, NULL) ||
                    sd_sampling_process(drow, V, &sp, scratch, sizeof scratch, q, NULL))
                    return 1;
                const double u = sd_rng_uniform_at(gp.seed, 0, P, SD_RNG_PURPOSE_SAMPLE);
                bad += sd_sample_inverse_cdf(p, V, u) != toks[P];
                rows++;
                fprintf(f, "%d %.17g %d", (int)P, u, (int)toks[P]);
                put_row(f, "q:", q, V);
                put_row(f, "p:", p, V);
                put_raw(f, drow, V, gp.temperature);
                fputc('\n', f);
            }
        }
    fclose(f);
    printf("%ld positions, %ld where the target's inverse CDF differs from plain decoding\n", rows, bad);
    specdec_engine_free(e);
    specdec_tokenizer_free(tok);
    specdec_model_free(md);
    specdec_model_free(mt);
    return bad ? 1 : 0;
}

/* bench_decode.c — plain (or speculative) decoding through the public C API, the number
 * a user of specdec sees: load a Hugging Face directory, create an engine, generate N
 * tokens greedily after a P-token prompt, report tokens/s (generation only, prefill
 * excluded: specdec_stats.tokens_per_second) as the median of R runs after one warm-up.
 * This is the same quantity llama-bench's "tg N" reports (bench/decode/run_decode_vs_llamacpp.sh
 * runs both on the same checkpoint in one session).
 *
 * usage: bench_decode -m DIR [-md DIR] [--backend auto|cpu|cuda] [-n N] [--prompt-tokens P]
 *                     [--reps R] [--ctx C] [--n-draft G] [--verify greedy|match] [--label NAME]
 * prints one JSON line: {"bench":"decode", "label", "model", "draft", "backend", "n_gen",
 *                        "prompt_tokens", "n_draft", "tokens_per_s" (median), "runs" [...],
 *                        "acceptance", "tokens_per_round"} */
#define _POSIX_C_SOURCE 200809L /* bench_util.h: clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "specdec.h"

typedef struct bench_opts {
    const char *model, *draft, *label, *backend;
    int n, prompt, reps, ctx, n_draft;
    specdec_verify_mode verify;
} bench_opts;

static int parse(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->backend = "auto";
    o->label = "";
    o->n = 128;
    o->prompt = 32;
    o->reps = 3;
    o->ctx = 2048;
    o->verify = SPECDEC_VERIFY_GREEDY;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return -1;
        if (!strcmp(a, "-m")) o->model = v;
        else if (!strcmp(a, "-md")) o->draft = v;
        else if (!strcmp(a, "--backend")) o->backend = v;
        else if (!strcmp(a, "-n")) o->n = atoi(v);
        else if (!strcmp(a, "--prompt-tokens")) o->prompt = atoi(v);
        else if (!strcmp(a, "--reps")) o->reps = atoi(v);
        else if (!strcmp(a, "--ctx")) o->ctx = atoi(v);
        else if (!strcmp(a, "--n-draft")) o->n_draft = atoi(v);
        else if (!strcmp(a, "--label")) o->label = v;
        else if (!strcmp(a, "--verify")) o->verify = !strcmp(v, "match") ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_GREEDY;
        else return -1;
        i++;
    }
    if (!o->model || o->n < 1 || o->prompt < 1 || o->reps < 1 || o->reps > 64 || o->prompt + o->n > o->ctx) return -1;
    return 0;
}

int main(int argc, char **argv) {
    bench_opts o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: bench_decode -m DIR [-md DIR] [--backend auto|cpu|cuda] [-n N] [--prompt-tokens P] "
                        "[--reps R] [--ctx C] [--n-draft G] [--verify greedy|match] [--label NAME]\n");
        return 2;
    }
    specdec_model *tm = NULL, *dm = NULL;
    if (specdec_model_load(o.model, NULL, &tm) || (o.draft && specdec_model_load(o.draft, NULL, &dm))) {
        fprintf(stderr, "load: %s\n", specdec_last_error());
        return 1;
    }
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = !strcmp(o.backend, "cpu") ? SPECDEC_BACKEND_CPU
                 : !strcmp(o.backend, "cuda") ? SPECDEC_BACKEND_CUDA : SPECDEC_BACKEND_AUTO;
    ep.n_ctx = o.ctx;
    specdec_engine *e = NULL;
    if (specdec_engine_create(tm, dm, &ep, &e)) {
        fprintf(stderr, "engine: %s\n", specdec_last_error());
        return 1;
    }
    specdec_model_info mi;
    specdec_model_get_info(tm, &mi);
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)o.prompt), *out = malloc(sizeof(int32_t) * (size_t)o.n);
    uint64_t s = 42;
    for (int i = 0; i < o.prompt; i++) { /* fixed pseudo-random ids, away from the special ones */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        prompt[i] = (int32_t)(100 + (s >> 33) % (uint64_t)(mi.vocab_size > 1100 ? 1000 : mi.vocab_size - 100));
    }
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = o.n;
    gp.temperature = o.verify == SPECDEC_VERIFY_GREEDY ? 0.0f : 0.8f;
    gp.verify = o.verify;
    gp.n_draft = o.n_draft;
    gp.ignore_eos = 1;
    double runs[64];
    specdec_stats st;
    int32_t n_out = 0;
    int rc = 0;
    for (int r = -1; r < o.reps && !rc; r++) { /* r = -1: warm-up (allocations, graphs, caches) */
        if (specdec_generate(e, prompt, o.prompt, &gp, out, o.n, &n_out, &st) || n_out != o.n) {
            fprintf(stderr, "generate: %s (%d tokens)\n", specdec_engine_last_error(e), (int)n_out);
            rc = 1;
        } else if (r >= 0) {
            runs[r] = st.tokens_per_second;
        }
    }
    if (!rc) {
        double sorted[64];
        memcpy(sorted, runs, sizeof(double) * (size_t)o.reps);
        bench_sort(sorted, o.reps);
        printf("{\"bench\":\"decode\",\"label\":\"%s\",\"model\":\"%s\",\"draft\":\"%s\",\"backend\":\"%s\","
               "\"n_gen\":%d,\"prompt_tokens\":%d,\"n_draft\":%d,\"tokens_per_s\":%.3f,\"runs\":[",
               o.label, o.model, o.draft ? o.draft : "", specdec_engine_backend(e) == SPECDEC_BACKEND_CUDA ? "cuda" : "cpu",
               o.n, o.prompt, o.n_draft, sorted[o.reps / 2]);
        for (int r = 0; r < o.reps; r++) printf("%s%.3f", r ? "," : "", runs[r]);
        printf("],\"acceptance\":%.4f,\"tokens_per_round\":%.4f}\n", st.acceptance_rate, st.tokens_per_round);
    }
    free(prompt);
    free(out);
    specdec_engine_free(e);
    specdec_model_free(dm);
    specdec_model_free(tm);
    return rc;
}

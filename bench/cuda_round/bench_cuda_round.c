/* bench_cuda_round.c — end-to-end speculative decoding on the GPU with the
 * device-resident round (backends/cuda/sd_cuda_round.cu).
 *
 * Part 1, the bundled pair (models/kjv-*), greedy, prompt of 8 ids, 256 new tokens:
 *   validate first (speculative == plain output for every γ, else exit 1), warm up,
 *   then the median of 5 runs of: plain target-only decoding (n_draft 0), draft-only
 *   decoding (cost ratio c = t_draft_token / t_target_token), speculative γ = 1..8:
 *   tokens/s, acceptance α, tokens per round, measured speedup vs the predicted
 *   (1 - α^(γ+1)) / ((1 - α)(γ c + 1)) (Leviathan et al.; verify pass ≈ one target
 *   step) and their ratio (goal >= 0.9). An optional peer JSON (hf_assisted.py) turns
 *   into specdec / transformers ratios.
 * Part 2, synthetic large shapes with random weights (BF16; target 32 layers x 4096
 *   hidden, GQA 32/8, vocab 32000 ~ Llama-2-7B; draft 22 layers x 2048 ~ TinyLlama
 *   1.1B): per-round cost breakdown for γ = 1..8 from CUDA events (draft steps,
 *   verify pass, verifier, host sync = wall − device), graph-replay round time, and
 *   the projected speedup at α = 0.6 and 0.8: E(γ) · t_plain / t_round(γ).
 * Usage: bench_cuda_round TARGET_DIR DRAFT_DIR OUT.json [PEER.json] [--no-large]
 * Writes OUT.json and prints a table. Times are medians; device times from events. */
#define _POSIX_C_SOURCE 200809L /* bench_util.h: clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "sd_cuda_backend.h"
#include "sd_cuda_round.h"
#include "sd_cuda_runner.h"
#include "sd_engine.h"
#include "sd_model.h"
#include "specdec.h"

#define N_NEW 256
#define REPS 5
#define GMAX 8

static const int32_t k_prompt[8] = {12, 85, 301, 7, 44, 1021, 9, 530};

/* Median tokens/s of REPS greedy generations; fills out/n and the last stats. */
static double gen_tps(specdec_engine *e, int32_t n_draft, int32_t *out, int32_t *n, specdec_stats *st) {
    specdec_generate_params p = specdec_generate_default_params();
    p.temperature = 0.0f;
    p.verify = SPECDEC_VERIFY_GREEDY;
    p.n_predict = N_NEW;
    p.n_draft = n_draft;
    p.ignore_eos = 1;
    double v[REPS];
    for (int r = -1; r < REPS; r++) { /* r = -1: warm-up (graph capture) */
        if (specdec_generate(e, k_prompt, 8, &p, out, N_NEW, n, st) != SPECDEC_OK) {
            fprintf(stderr, "generate: %s\n", specdec_engine_last_error(e));
            exit(1);
        }
        if (r >= 0) v[r] = st->tokens_per_second;
    }
    return bench_median(v, REPS);
}

static double peer_value(const char *json, const char *key) {
    if (!json) return 0;
    const char *k = strstr(json, key);
    if (!k) return 0;
    k = strchr(k, ':');
    return k ? atof(k + 1) : 0;
}

int main(int argc, char **argv) {
    if (specdec_cuda_device_count() <= 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR OUT.json [PEER.json] [--no-large]\n", argv[0]);
        return 2;
    }
    const char *peer_path = argc > 4 && strcmp(argv[4], "--no-large") ? argv[4] : NULL;
    int large = 1;
    for (int i = 4; i < argc; i++) large &= strcmp(argv[i], "--no-large") != 0;
    char *peer = NULL;
    if (peer_path) {
        FILE *f = fopen(peer_path, "rb");
        if (f) {
            peer = calloc(1, 1 << 16);
            if (peer) (void)!fread(peer, 1, (1 << 16) - 1, f);
            fclose(f);
        }
    }
    FILE *js = fopen(argv[3], "w");
    if (!js) {
        perror(argv[3]);
        return 1;
    }
    specdec_model *tm = NULL, *dm = NULL;
    if (specdec_model_load(argv[1], NULL, &tm) != SPECDEC_OK || specdec_model_load(argv[2], NULL, &dm) != SPECDEC_OK) {
        fprintf(stderr, "load: %s\n", specdec_last_error());
        return 1;
    }
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CUDA;
    ep.n_ctx = 512;
    specdec_engine *e = NULL, *ed = NULL;
    if (specdec_engine_create(tm, dm, &ep, &e) != SPECDEC_OK || specdec_engine_create(dm, NULL, &ep, &ed) != SPECDEC_OK) {
        fprintf(stderr, "engine: %s\n", specdec_last_error());
        return 1;
    }
    int32_t ref[N_NEW], out[N_NEW], n_ref = 0, n = 0;
    specdec_stats st;
    const double tps_plain = gen_tps(e, 0, ref, &n_ref, &st);
    const double tps_draft = gen_tps(ed, 0, out, &n, &st);
    const double c = tps_plain / tps_draft; /* draft token cost / target token cost */
    fprintf(js, "{\n  \"pair\": {\"n_new\": %d, \"plain_tps\": %.2f, \"draft_only_tps\": %.2f, \"cost_ratio\": %.4f,\n"
                "    \"spec\": [\n", N_NEW, tps_plain, tps_draft, c);
    printf("bundled pair, greedy, %d new tokens: plain %.1f tok/s, draft-only %.1f tok/s, c = %.3f\n", N_NEW,
           tps_plain, tps_draft, c);
    printf("%5s %10s %8s %8s %9s %9s %7s\n", "gamma", "tok/s", "alpha", "tok/rnd", "speedup", "predicted", "ratio");
    double best_tps = 0;
    for (int g = 1; g <= GMAX; g++) {
        const double tps = gen_tps(e, g, out, &n, &st);
        if (n != n_ref || memcmp(out, ref, (size_t)n * sizeof(int32_t))) {
            fprintf(stderr, "VALIDATION FAILED: gamma %d speculative output != plain\n", g);
            return 1;
        }
        const double a = st.acceptance_rate;
        const double pred = a < 1 ? (1 - pow(a, g + 1)) / ((1 - a) * (g * c + 1)) : (g + 1) / (g * c + 1);
        const double sp = tps / tps_plain;
        if (tps > best_tps) best_tps = tps;
        printf("%5d %10.1f %8.3f %8.2f %9.2f %9.2f %7.2f\n", g, tps, a, st.tokens_per_round, sp, pred, sp / pred);
        fprintf(js, "      {\"gamma\": %d, \"tps\": %.2f, \"acceptance\": %.4f, \"tokens_per_round\": %.3f, "
                    "\"speedup\": %.3f, \"predicted\": %.3f, \"ratio\": %.3f}%s\n",
                g, tps, a, st.tokens_per_round, sp, pred, sp / pred, g < GMAX ? "," : "");
    }
    fprintf(js, "    ]");
    const double hf_plain = peer_value(peer, "\"plain_tps\""), hf_spec = peer_value(peer, "\"assisted_tps\"");
    if (hf_plain > 0 && hf_spec > 0) {
        printf("transformers on this GPU: plain %.1f tok/s, assisted %.1f tok/s; specdec/transformers: plain %.2fx, "
               "speculative (best gamma) %.2fx\n", hf_plain, hf_spec, tps_plain / hf_plain, best_tps / hf_spec);
        fprintf(js, ",\n    \"peer\": {\"hf_plain_tps\": %.2f, \"hf_assisted_tps\": %.2f, \"ratio_plain\": %.3f, "
                    "\"ratio_spec\": %.3f}", hf_plain, hf_spec, tps_plain / hf_plain, best_tps / hf_spec);
    }
    fprintf(js, "\n  }");
    specdec_engine_free(e);
    specdec_engine_free(ed);

    if (large) {
        /* synthetic shapes: Llama-2-7B-like target, TinyLlama-like draft */
        sd_config tc;
        memset(&tc, 0, sizeof tc);
        tc.vocab_size = 32000;
        tc.hidden_size = 4096;
        tc.intermediate_size = 11008;
        tc.n_layers = 32;
        tc.n_heads = 32;
        tc.n_kv_heads = 8;
        tc.head_dim = 128;
        tc.rms_norm_eps = 1e-5f;
        tc.rope_theta = 10000.0f;
        tc.max_position_embeddings = 4096;
        sd_config dc = tc;
        dc.hidden_size = 2048;
        dc.intermediate_size = 5632;
        dc.n_layers = 22;
        dc.n_heads = 32;
        dc.n_kv_heads = 4;
        dc.head_dim = 64;
        const int32_t n_ctx = 2048, L0 = 512;
        sd_errbuf eb;
        sd_err_clear(&eb);
        sd_runner *rt = NULL, *rd = NULL;
        sd_exec *ex = NULL;
        sd_round *round = NULL;
        if (sd_cuda_runner_create_synthetic(&tc, SD_BF16, n_ctx, 64, 0, 1, &rt, &eb) != SPECDEC_OK ||
            sd_cuda_runner_create_synthetic(&dc, SD_BF16, n_ctx, 64, 0, 2, &rd, &eb) != SPECDEC_OK ||
            sd_cuda_exec_create(rt, rd, 1, &ex, &eb) != SPECDEC_OK ||
            sd_round_create(ex, NULL, rt, rd, 1, &round, &eb) != SPECDEC_OK) {
            fprintf(stderr, "synthetic models: %s\n", eb.msg);
            return 1;
        }
        static int32_t ones[2048];
        for (int i = 0; i < L0; i++) ones[i] = 1;
        sd_round_seq seq;
        memset(&seq, 0, sizeof seq);
        seq.mode = SPECDEC_VERIFY_GREEDY;
        seq.sp = (sd_sampling_params){0.0f, 0, 1.0f, 0.0f};
        seq.seed = 1;
        seq.drafter = sd_drafter_model();
        seq.tokens = ones;
        sd_round_seq *one = &seq;
        printf("\nsynthetic 7B-like target + 1.1B-like draft (BF16, random weights, context %d):\n", L0);
        printf("%5s %9s %9s %9s %9s %9s %10s %9s %9s\n", "gamma", "draft_ms", "verify_ms", "verif_ms", "sync_ms",
               "round_ms", "graph_ms", "x@a=0.6", "x@a=0.8");
        fprintf(js, ",\n  \"large\": {\"context\": %d, \"rounds\": [\n", L0);
        double t_plain = 0;
        for (int g = 0; g <= GMAX; g++) {
            double vd[20], vt[20], vv[20], vs[20], vw[20], vg[20];
            for (int pass = 0; pass < 2; pass++) { /* 0: direct launches (stages), 1: graph replay */
                sd_cuda_exec_use_graphs(ex, pass);
                for (int r = -2; r < 20; r++) {
                    sd_cuda_round_timing t;
                    /* restart at L0 each time (the executor uploads its state again): the
                     * same positions for every γ, the draft one token behind */
                    sd_cuda_runner_note_kv(rt, L0 - 1);
                    sd_cuda_runner_note_kv(rd, L0 - 1);
                    seq.length = L0;
                    seq.shape = sd_draft_chain(g);
                    if (sd_round_run(round, &one, 1) != SPECDEC_OK) {
                        fprintf(stderr, "round gamma %d: %s\n", g, sd_round_err(round));
                        return 1;
                    }
                    sd_cuda_exec_last_timing(ex, &t);
                    if (r < 0) continue;
                    if (pass == 0) {
                        vd[r] = t.t_draft;
                        vt[r] = t.t_target;
                        vv[r] = t.t_verify;
                        vs[r] = t.t_wall - t.t_gpu;
                        vw[r] = t.t_wall;
                    } else {
                        vg[r] = t.t_wall;
                    }
                }
            }
            const double md = bench_median(vd, 20), mt = bench_median(vt, 20), mv = bench_median(vv, 20);
            const double ms = bench_median(vs, 20), mw = bench_median(vw, 20), mg = bench_median(vg, 20);
            if (g == 0) t_plain = mg;
            const double x6 = (1 - pow(0.6, g + 1)) / 0.4 * t_plain / mg;
            const double x8 = (1 - pow(0.8, g + 1)) / 0.2 * t_plain / mg;
            printf("%5d %9.3f %9.3f %9.3f %9.3f %9.3f %10.3f %9.2f %9.2f\n", g, 1e3 * md, 1e3 * mt, 1e3 * mv, 1e3 * ms,
                   1e3 * mw, 1e3 * mg, x6, x8);
            fprintf(js, "    {\"gamma\": %d, \"draft_s\": %.6g, \"verify_pass_s\": %.6g, \"verifier_s\": %.6g, "
                        "\"host_sync_s\": %.6g, \"round_direct_s\": %.6g, \"round_graph_s\": %.6g, "
                        "\"projected_speedup_a06\": %.3f, \"projected_speedup_a08\": %.3f}%s\n",
                    g, md, mt, mv, ms, mw, mg, x6, x8, g < GMAX ? "," : "");
        }
        fprintf(js, "  ]}");
        sd_round_destroy(round);
        sd_exec_destroy(ex);
        sd_runner_destroy(rt);
        sd_runner_destroy(rd);
    }
    fprintf(js, "\n}\n");
    fclose(js);
    free(peer);
    specdec_model_free(tm);
    specdec_model_free(dm);
    return 0;
}

/* bench_eagle3_cost.c — what an EAGLE-3 round costs on this machine, and the tok/s it would give at
 * the published acceptance lengths (issue 22 item 6; driven by bench/eagle3/bench_eagle3_gpu.py on a
 * random-weight Llama-3.1-8B-shape target and a random head of that shape).
 *
 * Random weights accept (almost) nothing, so speedups cannot be measured; what is measured is every
 * cost a round pays, and the speedup is PREDICTED from them at an acceptance length tau (tokens per
 * round, the emitted extra token included): 3.1 for chains (vLLM's Llama-3.1-8B EAGLE-3 chain),
 * 4.0 for EAGLE-2 trees (sglang's), overridable.
 *
 *   1. validate: greedy output with the head (a chain and a tree) equals plain decoding (else exit 1);
 *   2. plain decoding end to end (specdec_generate, n_draft 0: on CUDA the device-graph round): the
 *      baseline per-token time t_plain, and tok/s;
 *   3. target passes at position ctx with hidden-state capture and logits to the host, as the
 *      eagle3 verify pass runs them (the host executor): M = 1, M = gamma + 1 for each gamma, and tree
 *      passes of 1 + N nodes (a random EAGLE-2-like tree of the round's depth and width) -> the cost
 *      ratios t(M) / t(1) and t(M) / t_plain;
 *   4. the head (sd_eagle3_runner ops, the engine's own head runner): one chain step, one tree level
 *      of K rows, the extend of n = 1..8 verified rows (fuse + k/v rows + the root row), q of a row;
 *   5. eagle3 rounds end to end (specdec_generate with the head, greedy; a chain per gamma and each
 *      tree): t_round = decode time / rounds (about one token per round here);
 *   6. prediction: tok/s(tau) = tau / (t_round + t_extend(ceil tau) - t_extend(measured rows)), the
 *      speedup over plain decoding, and the component model tau / (t(M) + head steps + q +
 *      t_extend(tau)) that a round would cost without the host's per-round overheads.
 * Times are medians of --reps runs (wall clock around synchronous calls: every runner call ends
 * with a stream synchronisation), after one warm-up.
 *
 * usage: bench_eagle3_cost TARGET_DIR HEAD_DIR OUT.json [--backend cpu|cuda] [--ctx N] [--predict N]
 *                          [--reps R] [--gammas 3,5,7] [--tau-chain 3.1] [--tau-tree 4.0]
 * Writes OUT.json and prints a table. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "sd_eagle3.h"
#include "sd_engine.h"
#include "sd_runner.h"
#include "specdec.h"
#ifdef SPECDEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAX_G 8
#define N_TREES 3
#define MAX_EXT 8

typedef struct tree_cfg {
    int32_t depth, k, nodes;
} tree_cfg;
/* EAGLE-2 trees: sglang's Llama-3.1-8B setting (topk 8, 64 draft tokens), a smaller budget, and
 * the docs' example shape (5 steps, topk 4, 16 nodes) */
static const tree_cfg k_trees[N_TREES] = {{6, 8, 64}, {6, 8, 32}, {5, 4, 16}};

typedef struct opts {
    const char *target, *head, *out, *backend;
    int32_t ctx, predict, reps, n_g, gammas[MAX_G];
    double tau_chain, tau_tree;
} opts;

typedef struct results {
    double t_plain, tps_plain;                       /* plain decoding, per token */
    double t_pass1, t_pass[MAX_G], t_tree[N_TREES];  /* target passes with capture */
    double t_head_step, t_head_level[N_TREES], t_extend[MAX_EXT + 1], t_q;
    double t_round[MAX_G], rows_round[MAX_G], t_round_tree[N_TREES], rows_round_tree[N_TREES];
} results;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "bench_eagle3_cost: %s: %s\n", what, detail);
    exit(1);
}
#define TRY(what, stmt, detail)                        \
    do {                                               \
        if ((stmt) != SPECDEC_OK) die((what), (detail)); \
    } while (0)

static int32_t *g_prompt; /* [ctx + predict + MAX tree] token ids */

/* ---- end to end ---------------------------------------------------------------------- */

static specdec_generate_params gen_params(const opts *o, int32_t gamma, const tree_cfg *tr) {
    specdec_generate_params p = specdec_generate_default_params();
    p.temperature = 0.0f;
    p.verify = SPECDEC_VERIFY_GREEDY;
    p.n_predict = o->predict;
    p.ignore_eos = 1;
    p.n_draft = gamma;
    if (tr) { /* depth levels of up to k children (widths k, 1, 1, ...), the node budget best-first */
        int32_t w[SPECDEC_MAX_DRAFT];
        for (int32_t d = 0; d < tr->depth; d++) w[d] = d == 0 ? tr->k : 1;
        if (specdec_generate_params_set_tree(&p, w, tr->depth) != SPECDEC_OK) die("tree", specdec_last_error());
        p.draft_nodes = tr->nodes;
    }
    return p;
}

/* Median decode time per round (plain: per token) and the rows each round verified. */
static double e2e(specdec_engine *e, const opts *o, const specdec_generate_params *p, int32_t *out, double *rows) {
    double v[32];
    int32_t n = 0;
    specdec_stats st;
    for (int r = -1; r < o->reps; r++) {
        TRY("generate", specdec_generate(e, g_prompt, o->ctx, p, out, o->predict, &n, &st), specdec_engine_last_error(e));
        if (r >= 0) v[r] = (st.t_total_s - st.t_prefill_s) / (double)(st.n_rounds > 0 ? st.n_rounds : 1);
    }
    if (rows) *rows = st.n_rounds ? (double)st.n_generated / (double)st.n_rounds : 1.0;
    return bench_median(v, o->reps);
}

static void validate(specdec_engine *e, const opts *o, int32_t *plain, int32_t *spec) {
    specdec_generate_params p = gen_params(o, 0, NULL);
    int32_t n0 = 0, n1 = 0;
    specdec_stats st;
    TRY("plain", specdec_generate(e, g_prompt, o->ctx, &p, plain, o->predict, &n0, &st), specdec_engine_last_error(e));
    for (int k = 0; k < 2; k++) {
        p = gen_params(o, o->gammas[0], k ? &k_trees[0] : NULL);
        TRY("eagle3", specdec_generate(e, g_prompt, o->ctx, &p, spec, o->predict, &n1, &st), specdec_engine_last_error(e));
        if (n1 != n0 || memcmp(plain, spec, sizeof(int32_t) * (size_t)n0) || st.draft_method != SPECDEC_DRAFT_EAGLE3)
            die("validation", k ? "tree output differs from plain decoding" : "chain output differs from plain decoding");
    }
    printf("validated: greedy eagle3 chain and tree output == plain decoding (%d tokens)\n", (int)n0);
}

/* ---- components ---------------------------------------------------------------------- */

/* One target pass at position ctx: a chain of m tokens, or a tree (par set). */
static double t_target(sd_runner *t, sd_eagle3_runner *h, const opts *o, int32_t m, const int32_t *par, float *lg) {
    double v[64];
    const sd_runner_seg s = {t, g_prompt + o->ctx, m, o->ctx, par, 0, lg, h->aux, NULL};
    sd_errbuf eb;
    for (int r = -1; r < o->reps * 4 && r < 63; r++) {
        const double t0 = bench_now_s();
        TRY("target pass", sd_runner_forward_batch(&s, 1, &eb), eb.msg);
        if (r >= 0) v[r] = bench_now_s() - t0;
    }
    return bench_median(v, o->reps * 4 < 63 ? o->reps * 4 : 63);
}

/* A tree of 1 + nodes nodes: the root, then levels of up to k nodes below the previous level's
 * best node (EAGLE-2 keeps a few paths), depth <= depth. */
static void make_tree(const tree_cfg *tc, int32_t *par) {
    int32_t n = 1, first = 0, level_end = 1;
    par[0] = -1;
    for (int32_t d = 1; d <= tc->depth && n < 1 + tc->nodes; d++) {
        for (int32_t i = 0; i < tc->k && n < 1 + tc->nodes; i++) par[n++] = first + (i % (level_end - first));
        first = level_end;
        level_end = n;
    }
    for (int32_t p = 1; n < 1 + tc->nodes; n++, p++) par[n] = p; /* the rest: leaves spread over the tree */
}

/* The head's cache at ctx rows: the target prefills with capture, the head extends (as begin does). */
static void head_prefill(sd_runner *t, sd_eagle3_runner *h, const opts *o) {
    sd_errbuf eb;
    sd_runner_truncate(&h->base, 0);
    for (int32_t kv = 0; kv < o->ctx;) {
        const int32_t n = o->ctx - kv < h->rows ? o->ctx - kv : h->rows;
        const sd_runner_seg s = {t, g_prompt + kv, n, kv, NULL, 0, NULL, h->aux, NULL};
        TRY("prefill", sd_runner_forward_batch(&s, 1, &eb), eb.msg);
        TRY("fuse", h->ops->fuse(h, h->aux, n, h->g), h->base.err.msg);
        for (int32_t i = 0; i < n; i++) h->pos[i] = kv + i;
        TRY("extend", h->ops->step(h, g_prompt + kv + 1, h->g, h->pos, n, NULL, 0, NULL, NULL), h->base.err.msg);
        kv += n;
    }
}

/* Head call kinds: 0 chain step, 1 tree level of n rows, 2 extend of n rows, 3 q */
static double t_head(sd_eagle3_runner *h, const opts *o, int kind, int32_t n, float *q) {
    double v[64];
    const int32_t H = h->hw->cfg.layer.hidden_size, N = o->ctx;
    const sd_sampling_params sp = {0};
    int32_t par[SD_RUNNER_TREE_MAX];
    for (int32_t i = 0; i < n && i < SD_RUNNER_TREE_MAX; i++) par[i] = -1, h->pos[i] = N + i;
    for (int r = -1; r < o->reps * 4 && r < 63; r++) {
        const double t0 = bench_now_s();
        if (kind == 0) {
            h->pos[0] = N;
            TRY("head step", h->ops->step(h, g_prompt + N, h->g, h->pos, 1, NULL, 0, h->logits, h->gnext), h->base.err.msg);
        } else if (kind == 1) {
            for (int32_t i = 0; i < n; i++) h->pos[i] = N;
            TRY("head level", h->ops->step(h, g_prompt + N, h->g, h->pos, n, par, N, h->logits, h->gnext),
                h->base.err.msg);
        } else if (kind == 2) {
            TRY("fuse", h->ops->fuse(h, h->aux, n, h->g), h->base.err.msg);
            if (n > 1) TRY("extend", h->ops->step(h, g_prompt + N, h->g, h->pos, n - 1, NULL, 0, NULL, NULL), h->base.err.msg);
            TRY("extend root", h->ops->step(h, g_prompt + N + n - 1, h->g + (size_t)(n - 1) * H, h->pos + n - 1, 1, NULL, 0,
                                            h->root, h->groot),
                h->base.err.msg);
        } else {
            TRY("q", h->ops->q(h, h->logits, &sp, 1, q), h->base.err.msg);
        }
        if (r >= 0) v[r] = bench_now_s() - t0;
        sd_runner_truncate(&h->base, N);
    }
    return bench_median(v, o->reps * 4 < 63 ? o->reps * 4 : 63);
}

/* ---- prediction, output -------------------------------------------------------------- */

/* The extend of the rows a round at acceptance length tau adds, instead of the rows measured. */
static double extend_delta(const results *r, double tau, double measured_rows) {
    int32_t a = (int32_t)ceil(tau), b = (int32_t)lround(measured_rows);
    a = a < 1 ? 1 : a > MAX_EXT ? MAX_EXT : a;
    b = b < 1 ? 1 : b > MAX_EXT ? MAX_EXT : b;
    return r->t_extend[a] - r->t_extend[b];
}

static const char *device_name(const char *backend) {
#ifdef SPECDEC_WITH_CUDA
    static struct cudaDeviceProp prop;
    if (!strcmp(backend, "cuda") && cudaGetDeviceProperties(&prop, 0) == cudaSuccess) return prop.name;
#endif
    (void)backend;
    return "CPU";
}

static void write_json(const opts *o, const results *r, const specdec_model_info *ti, const specdec_model_info *hi) {
    FILE *f = fopen(o->out, "w");
    if (!f) die("open", o->out);
    fprintf(f, "{\n  \"bench\": \"eagle3_cost\", \"backend\": \"%s\", \"device\": \"%s\",\n", o->backend,
            device_name(o->backend));
    fprintf(f, "  \"target\": {\"layers\": %d, \"hidden\": %d, \"vocab\": %d}, \"head_draft_vocab\": %d,\n",
            (int)ti->n_layers, (int)ti->hidden_size, (int)ti->vocab_size, (int)hi->eagle3_draft_vocab);
    fprintf(f, "  \"ctx\": %d, \"predict\": %d, \"reps\": %d, \"tau_chain\": %.3f, \"tau_tree\": %.3f,\n", (int)o->ctx,
            (int)o->predict, (int)o->reps, o->tau_chain, o->tau_tree);
    fprintf(f, "  \"plain\": {\"t_token_ms\": %.4f, \"tok_s\": %.2f},\n", 1e3 * r->t_plain, r->tps_plain);
    fprintf(f, "  \"target_pass_ms\": {\"M1\": %.4f", 1e3 * r->t_pass1);
    for (int i = 0; i < o->n_g; i++) fprintf(f, ", \"M%d\": %.4f", (int)o->gammas[i] + 1, 1e3 * r->t_pass[i]);
    for (int i = 0; i < N_TREES; i++) fprintf(f, ", \"tree%d\": %.4f", (int)k_trees[i].nodes + 1, 1e3 * r->t_tree[i]);
    fprintf(f, "},\n  \"head_ms\": {\"chain_step\": %.4f, \"q\": %.4f", 1e3 * r->t_head_step, 1e3 * r->t_q);
    for (int i = 0; i < N_TREES; i++)
        fprintf(f, ", \"level_%d_rows_tree%d\": %.4f", (int)k_trees[i].k, (int)k_trees[i].nodes + 1, 1e3 * r->t_head_level[i]);
    for (int n = 1; n <= MAX_EXT; n++) fprintf(f, ", \"extend_%d\": %.4f", n, 1e3 * r->t_extend[n]);
    fprintf(f, "},\n  \"chains\": [");
    for (int i = 0; i < o->n_g; i++) {
        const int32_t g = o->gammas[i];
        const double tr = r->t_round[i] + extend_delta(r, o->tau_chain, r->rows_round[i]);
        const double model = r->t_pass[i] + (g - 1) * r->t_head_step + g * r->t_q +
                             r->t_extend[(int)fmin(MAX_EXT, ceil(o->tau_chain))];
        fprintf(f, "%s\n    {\"gamma\": %d, \"pass_ratio_vs_M1\": %.4f, \"pass_ratio_vs_plain\": %.4f, "
                   "\"t_round_ms\": %.4f, \"rows_per_round_measured\": %.3f, \"break_even_tau\": %.3f, "
                   "\"predicted_tok_s\": %.2f, \"predicted_speedup\": %.3f, \"model_tok_s\": %.2f}",
                i ? "," : "", (int)g, r->t_pass[i] / r->t_pass1, r->t_pass[i] / r->t_plain, 1e3 * r->t_round[i],
                r->rows_round[i], r->t_round[i] / r->t_plain, o->tau_chain / tr, o->tau_chain / tr * r->t_plain,
                o->tau_chain / model);
    }
    fprintf(f, "\n  ],\n  \"trees\": [");
    for (int i = 0; i < N_TREES; i++) {
        const tree_cfg *tc = &k_trees[i];
        const double tr = r->t_round_tree[i] + extend_delta(r, o->tau_tree, r->rows_round_tree[i]);
        const double model = r->t_tree[i] + (tc->depth - 1) * r->t_head_level[i] +
                             r->t_extend[(int)fmin(MAX_EXT, ceil(o->tau_tree))];
        fprintf(f, "%s\n    {\"depth\": %d, \"k\": %d, \"nodes\": %d, \"pass_ratio_vs_M1\": %.4f, "
                   "\"pass_ratio_vs_plain\": %.4f, \"t_round_ms\": %.4f, \"rows_per_round_measured\": %.3f, "
                   "\"break_even_tau\": %.3f, \"predicted_tok_s\": %.2f, \"predicted_speedup\": %.3f, "
                   "\"model_tok_s\": %.2f}",
                i ? "," : "", (int)tc->depth, (int)tc->k, (int)tc->nodes, r->t_tree[i] / r->t_pass1,
                r->t_tree[i] / r->t_plain, 1e3 * r->t_round_tree[i], r->rows_round_tree[i],
                r->t_round_tree[i] / r->t_plain, o->tau_tree / tr, o->tau_tree / tr * r->t_plain, o->tau_tree / model);
    }
    fprintf(f, "\n  ]\n}\n");
    fclose(f);
}

static void print_table(const opts *o, const results *r) {
    printf("\nplain decoding: %.3f ms/token (%.1f tok/s); target pass M=1 with capture, logits to host: %.3f ms\n",
           1e3 * r->t_plain, r->tps_plain, 1e3 * r->t_pass1);
    printf("head: chain step %.3f ms, q %.3f ms, extend of 1/%d rows %.3f/%.3f ms\n", 1e3 * r->t_head_step,
           1e3 * r->t_q, MAX_EXT, 1e3 * r->t_extend[1], 1e3 * r->t_extend[MAX_EXT]);
    printf("%-22s %9s %9s %10s %10s %12s\n", "round", "t(M)/t(1)", "t(M)/plain", "round ms", "break-even",
           "pred tok/s");
    for (int i = 0; i < o->n_g; i++) {
        const double tr = r->t_round[i] + extend_delta(r, o->tau_chain, r->rows_round[i]);
        printf("chain gamma %-10d %9.3f %9.3f %10.3f %10.2f %12.1f\n", (int)o->gammas[i], r->t_pass[i] / r->t_pass1,
               r->t_pass[i] / r->t_plain, 1e3 * r->t_round[i], r->t_round[i] / r->t_plain, o->tau_chain / tr);
    }
    for (int i = 0; i < N_TREES; i++) {
        const double tr = r->t_round_tree[i] + extend_delta(r, o->tau_tree, r->rows_round_tree[i]);
        printf("tree d%d k%d n%-10d %9.3f %9.3f %10.3f %10.2f %12.1f\n", (int)k_trees[i].depth, (int)k_trees[i].k,
               (int)k_trees[i].nodes, r->t_tree[i] / r->t_pass1, r->t_tree[i] / r->t_plain, 1e3 * r->t_round_tree[i],
               r->t_round_tree[i] / r->t_plain, o->tau_tree / tr);
    }
    printf("(predicted at tau = %.2f (chains), %.2f (trees); break-even: the tau at which a round pays for itself)\n",
           o->tau_chain, o->tau_tree);
}

/* ---- main ---------------------------------------------------------------------------- */

static void parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    if (argc < 4) {
        fprintf(stderr, "usage: bench_eagle3_cost TARGET_DIR HEAD_DIR OUT.json [--backend cpu|cuda] [--ctx N] "
                        "[--predict N] [--reps R] [--gammas 3,5,7] [--tau-chain 3.1] [--tau-tree 4.0]\n");
        exit(2);
    }
    o->target = argv[1], o->head = argv[2], o->out = argv[3], o->backend = "cuda";
    o->ctx = 1024, o->predict = 128, o->reps = 3, o->tau_chain = 3.1, o->tau_tree = 4.0;
    o->n_g = 3, o->gammas[0] = 3, o->gammas[1] = 5, o->gammas[2] = 7;
    for (int i = 4; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--backend")) o->backend = v;
        else if (!strcmp(k, "--ctx")) o->ctx = atoi(v);
        else if (!strcmp(k, "--predict")) o->predict = atoi(v);
        else if (!strcmp(k, "--reps")) o->reps = atoi(v);
        else if (!strcmp(k, "--tau-chain")) o->tau_chain = atof(v);
        else if (!strcmp(k, "--tau-tree")) o->tau_tree = atof(v);
        else if (!strcmp(k, "--gammas")) {
            o->n_g = 0;
            for (const char *p = v; *p && o->n_g < MAX_G; p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p))
                o->gammas[o->n_g++] = atoi(p);
        } else die("unknown option", k);
    }
    if (o->ctx < 8 || o->predict < 4 || o->reps < 1 || o->reps > 15 || o->n_g < 1) die("options", "out of range");
    for (int i = 0; i < o->n_g; i++)
        if (o->gammas[i] < 1 || o->gammas[i] > SPECDEC_MAX_DRAFT) die("--gammas", "each in 1..16");
}

static void measure(specdec_engine *e, const opts *o, results *r, int32_t *out, float *lg, float *q) {
    sd_runner *t = e->target;
    sd_eagle3_runner *h = sd_eagle3_runner_of(e->draft);
    specdec_generate_params p = gen_params(o, 0, NULL);
    r->t_plain = e2e(e, o, &p, out, NULL);
    r->tps_plain = 1.0 / r->t_plain;
    head_prefill(t, h, o);
    r->t_pass1 = t_target(t, h, o, 1, NULL, lg);
    for (int i = 0; i < o->n_g; i++) r->t_pass[i] = t_target(t, h, o, o->gammas[i] + 1, NULL, lg);
    int32_t par[SD_RUNNER_TREE_MAX];
    for (int i = 0; i < N_TREES; i++) {
        make_tree(&k_trees[i], par);
        r->t_tree[i] = t_target(t, h, o, 1 + k_trees[i].nodes, par, lg);
    }
    t_target(t, h, o, MAX_EXT, NULL, lg); /* aux rows for the extends */
    sd_runner_truncate(t, o->ctx);
    r->t_head_step = t_head(h, o, 0, 1, q);
    r->t_q = t_head(h, o, 3, 1, q);
    for (int i = 0; i < N_TREES; i++) r->t_head_level[i] = t_head(h, o, 1, k_trees[i].k, q);
    for (int n = 1; n <= MAX_EXT; n++) r->t_extend[n] = t_head(h, o, 2, n, q);
    for (int i = 0; i < o->n_g; i++) {
        p = gen_params(o, o->gammas[i], NULL);
        r->t_round[i] = e2e(e, o, &p, out, &r->rows_round[i]);
    }
    for (int i = 0; i < N_TREES; i++) {
        p = gen_params(o, 0, &k_trees[i]);
        r->t_round_tree[i] = e2e(e, o, &p, out, &r->rows_round_tree[i]);
    }
}

int main(int argc, char **argv) {
    opts o;
    parse(argc, argv, &o);
    specdec_model *tm = NULL, *hm = NULL;
    const double t0 = bench_now_s();
    TRY("target", specdec_model_load(o.target, NULL, &tm), specdec_last_error());
    TRY("head", specdec_model_load(o.head, NULL, &hm), specdec_last_error());
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = !strcmp(o.backend, "cpu") ? SPECDEC_BACKEND_CPU : SPECDEC_BACKEND_CUDA;
    ep.n_ctx = o.ctx + o.predict + SD_RUNNER_TREE_MAX + 8;
    specdec_engine *e = NULL;
    TRY("engine", specdec_engine_create(tm, hm, &ep, &e), specdec_last_error());
    specdec_model_info ti, hi;
    specdec_model_get_info(tm, &ti);
    specdec_model_get_info(hm, &hi);
    printf("loaded %s (%d layers, hidden %d, vocab %d) and the head in %.1f s on %s\n", o.target, (int)ti.n_layers,
           (int)ti.hidden_size, (int)ti.vocab_size, bench_now_s() - t0, device_name(o.backend));
    g_prompt = malloc(sizeof(int32_t) * (size_t)(o.ctx + o.predict + SD_RUNNER_TREE_MAX));
    int32_t *a = malloc(sizeof(int32_t) * (size_t)o.predict), *b = malloc(sizeof(int32_t) * (size_t)o.predict);
    float *lg = malloc(sizeof(float) * (size_t)SD_RUNNER_TREE_MAX * (size_t)ti.vocab_size);
    float *q = malloc(sizeof(float) * (size_t)ti.vocab_size);
    if (!g_prompt || !a || !b || !lg || !q) die("malloc", "out of memory");
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int32_t i = 0; i < o.ctx + o.predict + SD_RUNNER_TREE_MAX; i++) { /* ids away from the special ones */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        g_prompt[i] = 16 + (int32_t)(x % (uint64_t)(ti.vocab_size - 32));
    }
    validate(e, &o, a, b);
    results r;
    memset(&r, 0, sizeof r);
    measure(e, &o, &r, a, lg, q);
    print_table(&o, &r);
    write_json(&o, &r, &ti, &hi);
    printf("wrote %s (%.1f s in all)\n", o.out, bench_now_s() - t0);
    free(g_prompt), free(a), free(b), free(lg), free(q);
    specdec_engine_free(e);
    specdec_model_free(hm);
    specdec_model_free(tm);
    return 0;
}

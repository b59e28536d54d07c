/* bench_tree.c — tree speculation against chains on the bundled pair, through the
 * public API (docs/TREE.md "Benchmark").
 *
 * For node budgets 8, 16 and 32: chains of γ = 1 .. min(budget, 16) drafts, fixed trees
 * of at most `budget` nodes and the best-first tree of `budget` nodes (--draft-nodes),
 * in MATCH mode at T = 0.8 (the library's default top-k 40 / top-p 0.95 / min-p 0.05),
 * over a fixed prompt set and seeds (not the ones the MATCH scores were fitted on).
 * Every configuration is first validated: its tokens must equal plain decoding's with
 * the same seed (else the benchmark fails). Reported per configuration: tokens per
 * round (deterministic), tokens per second (median over --reps passes of the whole
 * prompt set, prefill excluded), nodes verified per round, mean accepted length. Also
 * the target pass cost vs tokens per call (median of 9 calls of specdec_engine_forward
 * of n tokens after the prompt: what a tree of n - 1 nodes costs the target).
 *
 * usage: bench_tree MODELS_DIR OUT.json [--backend cpu|cuda] [--reps R] [--n TOKENS] [--quick]
 * Prints a table; writes JSON with the date and the machine. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "specdec.h"

static const char *const PROMPTS[] = {
    "And Jesus said unto them",  "The LORD is my shepherd",       "For God so loved the world",
    "And it came to pass, when", "Thus saith the LORD of hosts",  "In the beginning was the Word",
};
#define N_PROMPTS (int)(sizeof PROMPTS / sizeof PROMPTS[0])
#define SEED0 101

typedef struct cfg {
    char name[48];
    int32_t budget;        /* the node budget this configuration belongs to */
    int32_t gamma;         /* chain: γ; 0 = tree */
    int32_t w[SPECDEC_MAX_DRAFT], depth, nodes;
    /* results */
    double tok_per_round, tok_per_s, nodes_per_round, mean_acc;
    int valid;
} cfg;

typedef struct bench {
    specdec_engine *e;
    specdec_tokenizer *tok;
    int32_t prompt[N_PROMPTS][64], np[N_PROMPTS];
    int32_t plain[N_PROMPTS][512], n_plain[N_PROMPTS];
    int32_t n_predict, reps;
} bench;

static specdec_generate_params params_of(const bench *b, const cfg *c) {
    specdec_generate_params p = specdec_generate_default_params();
    p.n_predict = b->n_predict;
    p.temperature = 0.8f;
    p.verify = SPECDEC_VERIFY_MATCH;
    p.ignore_eos = 1;
    p.n_draft = c ? c->gamma : 0;
    if (c && c->gamma == 0) {
        if (specdec_generate_params_set_tree(&p, c->w, c->depth) != SPECDEC_OK)
            fprintf(stderr, "bench_tree: shape %s: %s\n", c->name, specdec_last_error());
        p.draft_nodes = c->nodes;
    }
    return p;
}

/* One pass over the prompts: validates against plain decoding (when plain is set)
 * and accumulates the counters; returns the generation seconds (prefill excluded). */
static double run_pass(bench *b, cfg *c, int record_plain) {
    double secs = 0, gen = 0, rounds = 0, draft_rounds = 0, nodes = 0, acc = 0;
    int ok = 1;
    for (int i = 0; i < N_PROMPTS; i++) {
        specdec_generate_params p = params_of(b, record_plain ? NULL : c);
        p.seed = SEED0 + (uint64_t)i;
        int32_t out[512], n = 0;
        specdec_stats st;
        if (specdec_generate(b->e, b->prompt[i], b->np[i], &p, out, 512, &n, &st) != SPECDEC_OK) {
            fprintf(stderr, "bench_tree: %s: %s\n", c ? c->name : "plain", specdec_engine_last_error(b->e));
            ok = 0;
            continue;
        }
        if (record_plain) {
            memcpy(b->plain[i], out, (size_t)n * sizeof *out);
            b->n_plain[i] = n;
        } else if (n != b->n_plain[i] || memcmp(out, b->plain[i], (size_t)n * sizeof *out)) {
            ok = 0;
        }
        secs += st.t_total_s - st.t_prefill_s;
        gen += (double)st.n_generated;
        rounds += (double)st.n_rounds;
        draft_rounds += (double)st.n_draft_rounds;
        nodes += (double)st.n_drafted;
        acc += (double)st.n_accepted;
    }
    if (c) {
        c->valid = ok;
        c->tok_per_round = rounds > 0 ? gen / rounds : 0;
        c->nodes_per_round = draft_rounds > 0 ? nodes / draft_rounds : 0;
        c->mean_acc = draft_rounds > 0 ? acc / draft_rounds : 0;
    }
    return secs > 0 ? gen / secs : 0;
}

static void run_cfg(bench *b, cfg *c) {
    double tps[16];
    int r;
    for (r = 0; r < b->reps && r < 16; r++) tps[r] = run_pass(b, c, 0);
    bench_sort(tps, r);
    c->tok_per_s = tps[r / 2];
    printf("%-8d %-26s %8.3f %9.1f %8.2f %8.2f %s\n", (int)c->budget, c->name, c->tok_per_round, c->tok_per_s,
           c->nodes_per_round, c->mean_acc, c->valid ? "" : "INVALID (differs from plain decoding)");
    fflush(stdout);
}

/* the configurations: chains, fixed trees, best-first, per budget */
static int make_cfgs(cfg *cs, int quick) {
    static const struct {
        int32_t budget;
        const char *shape;
    } trees[] = {{8, "2,1,1,1"}, {8, "4,1"}, {8, "2,3"}, {8, "8"},
                 {16, "4,1,1,1"}, {16, "2,1,1,1,1,1,1,1"}, {16, "4,3"}, {16, "3,2,1"}, {16, "2,2,1,1"},
                 {32, "4,2,1,1"}, {32, "4,2,2"}, {32, "2,2,2,1,1"}, {32, "4,1,1,1,1,1,1,1"}, {32, "8,3"},
                 {32, "3,2,1,1,1,1"}};
    static const int32_t budgets[3] = {8, 16, 32};
    int n = 0;
    for (int bi = 0; bi < 3; bi++) {
        const int32_t B = budgets[bi];
        for (int32_t g = 1; g <= (B < SPECDEC_MAX_DRAFT ? B : SPECDEC_MAX_DRAFT); g++) {
            if (quick && g != 4 && g != B && g != SPECDEC_MAX_DRAFT) continue;
            if (g < B / 2 && B > 8 && g != 4) continue; /* shorter chains were measured under smaller budgets */
            memset(&cs[n], 0, sizeof cs[n]);
            snprintf(cs[n].name, sizeof cs[n].name, "chain %d", (int)g);
            cs[n].budget = B;
            cs[n++].gamma = g;
        }
        for (size_t t = 0; t < sizeof trees / sizeof trees[0]; t++) {
            if (trees[t].budget != B || (quick && strcmp(trees[t].shape, "4,2,1,1"))) continue;
            memset(&cs[n], 0, sizeof cs[n]);
            snprintf(cs[n].name, sizeof cs[n].name, "tree %s", trees[t].shape);
            cs[n].budget = B;
            for (const char *s = trees[t].shape; *s; s++)
                if (*s != ',') cs[n].w[cs[n].depth++] = *s - '0';
            n++;
        }
        memset(&cs[n], 0, sizeof cs[n]);
        snprintf(cs[n].name, sizeof cs[n].name, "best-first %d", (int)B);
        cs[n].budget = B;
        cs[n++].nodes = B;
    }
    return n;
}

/* best chain vs best tree per budget (tokens per round), and 4,2,1,1 vs chain 4 */
static void summary(const cfg *cs, int n) {
    static const int32_t budgets[3] = {8, 16, 32};
    const cfg *c4 = NULL, *t4211 = NULL;
    for (int bi = 0; bi < 3; bi++) {
        const cfg *bc = NULL, *bt = NULL;
        for (int i = 0; i < n; i++) {
            if (cs[i].budget != budgets[bi]) continue;
            const cfg **best = cs[i].gamma > 0 ? &bc : &bt;
            if (!*best || cs[i].tok_per_round > (*best)->tok_per_round) *best = &cs[i];
            if (cs[i].gamma == 4) c4 = &cs[i];
            if (!strcmp(cs[i].name, "tree 4,2,1,1")) t4211 = &cs[i];
        }
        if (bc && bt)
            printf("budget %2d: best tree %-22s %.3f tok/round = %.3fx best chain (%s, %.3f); tok/s %.1f vs %.1f\n",
                   (int)budgets[bi], bt->name, bt->tok_per_round, bt->tok_per_round / bc->tok_per_round, bc->name,
                   bc->tok_per_round, bt->tok_per_s, bc->tok_per_s);
    }
    if (c4 && t4211)
        printf("tree 4,2,1,1 vs chain 4: %.3f / %.3f = %.3fx tokens per round\n", t4211->tok_per_round,
               c4->tok_per_round, t4211->tok_per_round / c4->tok_per_round);
}

/* target pass seconds for n tokens after the first prompt (median of 9) */
static double target_cost(bench *b, int32_t n) {
    static float logits[65 * 4096];
    int32_t toks[65];
    double t[9];
    for (int i = 0; i < 65; i++) toks[i] = b->prompt[0][i % b->np[0]];
    for (int r = 0; r < 9; r++) {
        specdec_engine_forward(b->e, SPECDEC_ROLE_TARGET, b->prompt[0], b->np[0], 0, NULL);
        const double t0 = bench_now_s();
        specdec_engine_forward(b->e, SPECDEC_ROLE_TARGET, toks, n, b->np[0], logits);
        t[r] = bench_now_s() - t0;
    }
    bench_sort(t, 9);
    return t[4];
}

static void machine(char *buf, size_t cap) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    snprintf(buf, cap, "unknown CPU");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *v = strchr(line, ':');
            if (v) snprintf(buf, cap, "%s", v + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
    size_t l = strlen(buf);
    snprintf(buf + l, cap - l, ", %ld cores online", sysconf(_SC_NPROCESSORS_ONLN));
}

static void write_json(const char *path, const bench *b, const cfg *cs, int n, const double *cost, const char *be) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_tree: cannot write %s\n", path);
        return;
    }
    char date[32], mach[256];
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    machine(mach, sizeof mach);
    fprintf(f, "{\n \"benchmark\": \"tree speculation vs chains, bundled pair, MATCH T=0.8\",\n");
    fprintf(f, " \"date\": \"%s\",\n \"machine\": \"%s\",\n \"backend\": \"%s\",\n", date, mach, be);
    fprintf(f, " \"prompts\": %d, \"n_predict\": %d, \"reps\": %d, \"seeds\": \"%d..%d\",\n", N_PROMPTS,
            (int)b->n_predict, (int)b->reps, SEED0, SEED0 + N_PROMPTS - 1);
    fprintf(f, " \"target_pass_seconds_by_tokens\": {");
    for (int i = 0; i < 7; i++) fprintf(f, "%s\"%d\": %.6f", i ? ", " : "", 1 << i, cost[i]);
    fprintf(f, ", \"65\": %.6f},\n \"configs\": [\n", cost[7]);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "  {\"budget\": %d, \"name\": \"%s\", \"tokens_per_round\": %.4f, \"tokens_per_second\": %.2f, "
                "\"nodes_per_round\": %.3f, \"mean_accepted_length\": %.3f, \"valid\": %s}%s\n",
                (int)cs[i].budget, cs[i].name, cs[i].tok_per_round, cs[i].tok_per_s, cs[i].nodes_per_round,
                cs[i].mean_acc, cs[i].valid ? "true" : "false", i + 1 < n ? "," : "");
    fprintf(f, " ]\n}\n");
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tree MODELS_DIR OUT.json [--backend cpu|cuda] [--reps R] [--n TOKENS] [--quick]\n");
        return 2;
    }
    static bench b;
    static cfg cs[96];
    b.n_predict = 128;
    b.reps = 3;
    int quick = 0;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) b.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) b.n_predict = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            ep.backend = !strcmp(argv[++i], "cuda") ? SPECDEC_BACKEND_CUDA : SPECDEC_BACKEND_CPU;
    }
    if (b.n_predict < 1 || b.n_predict > 400 || b.reps < 1) return 2;
    char tdir[4096], ddir[4096];
    snprintf(tdir, sizeof tdir, "%s/kjv-target", argv[1]);
    snprintf(ddir, sizeof ddir, "%s/kjv-draft", argv[1]);
    specdec_model *mt = NULL, *md = NULL;
    if (specdec_model_load(tdir, NULL, &mt) || specdec_model_load(ddir, NULL, &md) ||
        specdec_tokenizer_load(tdir, &b.tok) || specdec_engine_create(mt, md, &ep, &b.e)) {
        fprintf(stderr, "bench_tree: setup: %s\n", specdec_last_error());
        return 1;
    }
    for (int i = 0; i < N_PROMPTS; i++)
        specdec_tokenize(b.tok, PROMPTS[i], strlen(PROMPTS[i]), 1, b.prompt[i], 64, &b.np[i]);
    run_pass(&b, NULL, 1);
    const int n = make_cfgs(cs, quick);
    printf("%-8s %-26s %8s %9s %8s %8s\n", "budget", "configuration", "tok/rnd", "tok/s", "nodes", "accepted");
    int invalid = 0;
    for (int i = 0; i < n; i++) {
        int done = 0;
        for (int j = 0; j < i && !done; j++)
            if (cs[i].gamma > 0 && cs[j].gamma == cs[i].gamma) { /* the same chain under a smaller budget */
                const int32_t budget = cs[i].budget;
                cs[i] = cs[j];
                cs[i].budget = budget;
                done = 1;
            }
        if (!done) run_cfg(&b, &cs[i]);
        invalid += !cs[i].valid;
    }
    summary(cs, n);
    double cost[8];
    for (int i = 0; i < 7; i++) cost[i] = target_cost(&b, 1 << i);
    cost[7] = target_cost(&b, 65);
    printf("target pass seconds by tokens per call:");
    for (int i = 0; i < 7; i++) printf(" %d:%.5f", 1 << i, cost[i]);
    printf(" 65:%.5f\n", cost[7]);
    write_json(argv[2], &b, cs, n, cost, specdec_engine_backend(b.e) == SPECDEC_BACKEND_CUDA ? "cuda" : "cpu");
    specdec_engine_free(b.e);
    specdec_tokenizer_free(b.tok);
    specdec_model_free(md);
    specdec_model_free(mt);
    return invalid ? 1 : 0;
}

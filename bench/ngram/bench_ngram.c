/* bench_ngram.c — the n-gram drafter (prompt lookup, docs/DRAFTERS.md "Benchmark") against
 * plain decoding on the bundled target alone (no draft model), through the public API.
 *
 * Two prompt sets:
 *   quoting   a passage followed by the start of the same passage (or a list whose
 *             entries repeat a pattern): the output quotes the input. GREEDY;
 *   no-match  short prompts that do not repeat themselves, MATCH at T = 0.8 (the
 *             library's default filters).
 * Configurations: plain decoding; n-gram chains γ = 4 and 8 and a tree 2,1,1,1,1,1 (two
 * candidate continuations of depth 6) with the defaults (lookup 1..4, ngram_cost
 * MEASURED: what pays by the measured round times); a chain γ = 4 with FIXED 0.4 (a draft
 * token costs 0.4 plain steps, about this CPU's); the same chain with ngram_cost OFF
 * (every match proposed: the defaults before the gate), with 4-grams only (ngram_min =
 * ngram_max = 4, OFF: the best configuration before the gate), and with 64-grams only
 * (nothing can match: every round is the lookup and a plain step, what a drafter with
 * nothing to propose costs). Every configuration is validated first: its tokens must
 * equal plain decoding's (GREEDY and MATCH are exact), else the benchmark fails. Reported
 * per set and configuration: tokens per round, drafted and accepted tokens (per pass), the share of
 * rounds that proposed something (counted over the timed passes: with MEASURED the
 * proposals follow the timings), and tokens per second (prefill excluded):
 * the median over --reps passes of the whole set, the configurations interleaved with
 * plain decoding in every pass, and the speedup = the median of the per-pass ratios to
 * plain decoding of the same pass (the VM is shared: ratios of neighbouring runs drift
 * less than absolute rates).
 *
 * usage: bench_ngram MODELS_DIR OUT.json [--backend cpu|cuda] [--reps R] [--n TOKENS] [--quick]
 * Prints a table; writes JSON with the date, the machine and the load average. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "specdec.h"

static const char *const QUOTING[] = {
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness "
    "was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God said, Let there "
    "be light: and there was light. In the beginning God created the heaven",
    "The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures: he leadeth me beside the "
    "still waters. He restoreth my soul: he leadeth me in the paths of righteousness for his name's sake. The LORD is "
    "my shepherd; I shall",
    "For God so loved the world, that he gave his only begotten Son, that whosoever believeth in him should not "
    "perish, but have everlasting life. For God sent not his Son into the world to condemn the world; but that the "
    "world through him might be saved. For God so loved the world, that he",
    "Our Father which art in heaven, Hallowed be thy name. Thy kingdom come. Thy will be done in earth, as it is in "
    "heaven. Give us this day our daily bread. And forgive us our debts, as we forgive our debtors. Our Father which "
    "art in heaven, Hallowed",
    "To every thing there is a season, and a time to every purpose under the heaven: A time to be born, and a time to "
    "die; a time to plant, and a time to pluck up that which is planted; A time to kill, and a time to heal; a time "
    "to break down, and a time to build up; A time to",
    "And the sons of Gershon; Libni, and Shimei. And the sons of Kohath; Amram, and Izhar, and Hebron, and Uzziel. And "
    "the sons of Merari; Mahli, and Mushi. And the sons of Gershon; Libni, and",
};
static const char *const NOMATCH[] = {
    "Then Peter answered", "Now the word of the LORD came unto Jonah", "Blessed are the meek: for they",
    "And the LORD spake unto Moses, saying,",
};
#define N_Q (int)(sizeof QUOTING / sizeof QUOTING[0])
#define N_N (int)(sizeof NOMATCH / sizeof NOMATCH[0])
#define MAX_PROMPTS 8
#define SEED0 301

typedef struct cfg {
    const char *name;
    specdec_draft_method method;
    int32_t gamma, nmin, nmax, tree; /* tree: 1 = the 2,1,1,1,1,1 shape */
    specdec_ngram_cost cost;
    float token_cost;
} cfg;

#define MEAS SPECDEC_NGRAM_COST_MEASURED
#define OFF SPECDEC_NGRAM_COST_OFF
static const cfg CFGS[] = {
    {"plain", SPECDEC_DRAFT_NONE, 0, 1, 4, 0, MEAS, 0},
    {"chain 4 (defaults)", SPECDEC_DRAFT_NGRAM, 4, 1, 4, 0, MEAS, 0},
    {"chain 8", SPECDEC_DRAFT_NGRAM, 8, 1, 4, 0, MEAS, 0},
    {"tree 2,1,1,1,1,1", SPECDEC_DRAFT_NGRAM, 4, 1, 4, 1, MEAS, 0},
    {"chain 4, fixed 0.4", SPECDEC_DRAFT_NGRAM, 4, 1, 4, 0, SPECDEC_NGRAM_COST_FIXED, 0.4f},
    {"chain 4, cost off", SPECDEC_DRAFT_NGRAM, 4, 1, 4, 0, OFF, 0},
    {"chain 4, 4-grams, off", SPECDEC_DRAFT_NGRAM, 4, 4, 4, 0, OFF, 0},
    {"chain 4, 64-grams, off", SPECDEC_DRAFT_NGRAM, 4, 64, 64, 0, OFF, 0},
};
#define N_CFG (int)(sizeof CFGS / sizeof CFGS[0])

typedef struct result {
    double tok_per_round, proposing, acceptance, tok_s, speedup;
    long drafted, accepted, rounds, draft_rounds, tokens;
} result;

typedef struct set {
    const char *name;
    const char *const *text;
    int n;
    specdec_verify_mode mode;
    float temperature;
    int32_t ids[MAX_PROMPTS][256], n_ids[MAX_PROMPTS];
    int32_t plain[MAX_PROMPTS][512], n_plain[MAX_PROMPTS];
    result r[N_CFG];
} set;

static specdec_engine *g_e;
static int32_t g_n = 128, g_reps = 5;

static specdec_generate_params params(const set *s, const cfg *c, int prompt) {
    specdec_generate_params p = specdec_generate_default_params();
    p.n_predict = g_n;
    p.temperature = s->temperature;
    p.verify = s->mode;
    p.seed = SEED0 + (uint64_t)prompt;
    p.ignore_eos = 1;
    p.draft_method = c->method;
    p.n_draft = c->gamma;
    p.ngram_min = c->nmin;
    p.ngram_max = c->nmax;
    p.ngram_cost = c->cost;
    p.ngram_token_cost = c->token_cost;
    if (c->tree) {
        const int32_t w[6] = {2, 1, 1, 1, 1, 1};
        specdec_generate_params_set_tree(&p, w, 6);
    }
    return p;
}

/* One pass of configuration c over set s: tokens per second (prefill excluded); the
 * counts into r; the tokens checked against plain decoding's. -1 on a failure. */
static double run_pass(set *s, int ci, result *r) {
    double tokens = 0, secs = 0;
    for (int i = 0; i < s->n; i++) {
        specdec_generate_params p = params(s, &CFGS[ci], i);
        int32_t out[512], n = 0;
        specdec_stats st;
        if (specdec_generate(g_e, s->ids[i], s->n_ids[i], &p, out, 512, &n, &st) != SPECDEC_OK) {
            fprintf(stderr, "%s / %s: %s\n", s->name, CFGS[ci].name, specdec_engine_last_error(g_e));
            return -1;
        }
        if (ci == 0) {
            memcpy(s->plain[i], out, (size_t)n * sizeof *out);
            s->n_plain[i] = n;
        } else if (n != s->n_plain[i] || memcmp(out, s->plain[i], (size_t)n * sizeof *out)) {
            fprintf(stderr, "INVALID: %s / %s prompt %d differs from plain decoding\n", s->name, CFGS[ci].name, i);
            return -1;
        }
        tokens += (double)st.n_generated;
        secs += st.t_total_s - st.t_prefill_s;
        r->tokens += st.n_generated;
        r->rounds += st.n_rounds;
        r->draft_rounds += st.n_draft_rounds;
        r->drafted += st.n_drafted;
        r->accepted += st.n_accepted;
    }
    return secs > 0 ? tokens / secs : 0;
}

/* Validation pass (plain first), then --reps timed passes with every configuration
 * interleaved; the counts are the timed passes' sums. */
static int run_set(set *s) {
    double rate[N_CFG][32], ratio[N_CFG][32];
    result tmp;
    for (int c = 0; c < N_CFG; c++)
        if (run_pass(s, c, &tmp) < 0) return 1;
    memset(s->r, 0, sizeof s->r);
    for (int k = 0; k < g_reps; k++)
        for (int c = 0; c < N_CFG; c++) {
            rate[c][k] = run_pass(s, c, &s->r[c]);
            if (rate[c][k] < 0) return 1;
        }
    /* every pass's ratio to the same pass's plain rate first: bench_median sorts its row in place */
    for (int c = 0; c < N_CFG; c++)
        for (int k = 0; k < g_reps; k++) ratio[c][k] = rate[c][k] / rate[0][k];
    for (int c = 0; c < N_CFG; c++) {
        result *r = &s->r[c];
        r->tok_per_round = r->rounds ? (double)r->tokens / (double)r->rounds : 0;
        r->proposing = r->rounds ? (double)r->draft_rounds / (double)r->rounds : 0;
        r->acceptance = r->drafted ? (double)r->accepted / (double)r->drafted : 0;
        s->r[c].tok_s = bench_median(rate[c], g_reps);
        s->r[c].speedup = bench_median(ratio[c], g_reps);
    }
    return 0;
}

static void print_set(const set *s) {
    printf("\n%s (%d prompts, %d tokens each, %s):\n", s->name, s->n, (int)g_n,
           s->mode == SPECDEC_VERIFY_GREEDY ? "greedy" : "match T=0.8");
    printf("%-24s %10s %10s %9s %9s %10s %9s\n", "configuration", "tok/round", "proposing", "drafted", "accepted",
           "tok/s", "speedup");
    for (int c = 0; c < N_CFG; c++) {
        const result *r = &s->r[c];
        printf("%-24s %10.3f %9.1f%% %9ld %9ld %10.2f %8.3fx\n", CFGS[c].name, r->tok_per_round, 100 * r->proposing,
               r->drafted / g_reps, r->accepted / g_reps, r->tok_s, r->speedup);
    }
}

static void machine(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    int cores = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10) && cores++ == 0) {
            char *c = strchr(line, ':');
            if (c) snprintf(buf, cap, "%s", c + 2);
        }
    }
    if (f) fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    const size_t n = strlen(buf);
    snprintf(buf + n, cap - n, ", %d cores", cores);
}

static double loadavg(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &l) != 1) l = -1;
    if (f) fclose(f);
    return l;
}

static void write_json(FILE *f, set *const *sets, int n_sets, const char *be, double load0, double load1) {
    char date[32], mach[256];
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", localtime(&t));
    machine(mach, sizeof mach);
    fprintf(f, "{\n \"date\": \"%s\",\n \"machine\": \"%s\",\n \"backend\": \"%s\",\n", date, mach, be);
    fprintf(f, " \"load_average_start\": %.2f,\n \"load_average_end\": %.2f,\n \"n_predict\": %d,\n \"reps\": %d,\n",
            load0, load1, (int)g_n, (int)g_reps);
    fprintf(f, " \"sets\": [\n");
    for (int i = 0; i < n_sets; i++) {
        const set *s = sets[i];
        fprintf(f, "  {\"name\": \"%s\", \"prompts\": %d, \"verify\": \"%s\", \"configs\": [\n", s->name, s->n,
                s->mode == SPECDEC_VERIFY_GREEDY ? "greedy" : "match");
        for (int c = 0; c < N_CFG; c++) {
            const result *r = &s->r[c];
            fprintf(f,
                    "   {\"name\": \"%s\", \"tokens_per_round\": %.4f, \"proposing_rounds\": %.4f, \"drafted\": %ld, "
                    "\"accepted\": %ld, \"tokens_per_second\": %.3f, \"speedup\": %.4f}%s\n",
                    CFGS[c].name, r->tok_per_round, r->proposing, r->drafted / g_reps, r->accepted / g_reps, r->tok_s,
                    r->speedup,
                    c + 1 < N_CFG ? "," : "");
        }
        fprintf(f, "  ]}%s\n", i + 1 < n_sets ? "," : "");
    }
    fprintf(f, " ]\n}\n");
}

static int load_set(set *s, const specdec_tokenizer *tok) {
    for (int i = 0; i < s->n; i++)
        if (specdec_tokenize(tok, s->text[i], strlen(s->text[i]), 1, s->ids[i], 256, &s->n_ids[i]) != SPECDEC_OK) {
            fprintf(stderr, "tokenize: %s\n", specdec_last_error());
            return 1;
        }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODELS_DIR OUT.json [--backend cpu|cuda] [--reps R] [--n TOKENS] [--quick]\n", argv[0]);
        return 2;
    }
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            ep.backend = !strcmp(argv[++i], "cuda") ? SPECDEC_BACKEND_CUDA : SPECDEC_BACKEND_CPU;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) g_n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) g_reps = 1, g_n = 32;
    }
    if (g_reps < 1 || g_reps > 32 || g_n < 1 || g_n > 256) return 2;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/kjv-target", argv[1]);
    specdec_model *m = NULL;
    specdec_tokenizer *tok = NULL;
    if (specdec_model_load(dir, NULL, &m) || specdec_tokenizer_load(dir, &tok) ||
        specdec_engine_create(m, NULL, &ep, &g_e)) {
        fprintf(stderr, "setup: %s\n", specdec_last_error());
        return 1;
    }
    static set q = {"quoting", QUOTING, N_Q, SPECDEC_VERIFY_GREEDY, 0.0f, {{0}}, {0}, {{0}}, {0}, {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}};
    static set nm = {"no-match", NOMATCH, N_N, SPECDEC_VERIFY_MATCH, 0.8f, {{0}}, {0}, {{0}}, {0}, {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}};
    set *sets[2] = {&q, &nm};
    const double load0 = loadavg();
    int rc = load_set(&q, tok) || load_set(&nm, tok) || run_set(&q) || run_set(&nm);
    const double load1 = loadavg();
    if (!rc) {
        print_set(&q);
        print_set(&nm);
        FILE *f = fopen(argv[2], "w");
        if (f) {
            write_json(f, sets, 2, ep.backend == SPECDEC_BACKEND_CUDA ? "cuda" : "cpu", load0, load1);
            fclose(f);
        }
        rc = !f;
    }
    specdec_engine_free(g_e);
    specdec_tokenizer_free(tok);
    specdec_model_free(m);
    return rc;
}

/* test_golden.c — behaviour lock for refactors: the CPU outputs of the bundled pair
 * (models/kjv-target + models/kjv-draft) for a fixed set of prompts, verify modes,
 * seeds and draft lengths, compared with tests/golden/golden_cpu.txt, which was
 * recorded on main 6569354 before the layered restructure (issue 10).
 *
 * Every case records the emitted token ids and the round structure (rounds, drafted,
 * accepted, stop reason): with a fixed γ all of them are deterministic on the CPU
 * backend (fp32 reference, counter-based RNG), in all three verify modes. A change
 * of any id or count is a behaviour change and fails the test, naming the case.
 *
 * Usage: test_golden TARGET_DIR DRAFT_DIR GOLDEN_FILE          compare every line
 *        test_golden TARGET_DIR DRAFT_DIR GOLDEN_FILE --quick   compare the first prompt of
 *                                                               each case (sanitizer builds)
 *        test_golden TARGET_DIR DRAFT_DIR GOLDEN_FILE --record  (re)write the file */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "specdec.h"

#define N_PREDICT 40
#define MAX_IDS 256
#define LINE_CAP 8192

static const char *const PROMPTS[] = {
    "And God said",
    "In the beginning God created the heaven",
    "And the LORD spake unto Moses, saying,",
    "Blessed are the meek: for they",
    "Then Peter answered",
    "Now the word of the LORD came unto Jonah",
};
#define N_PROMPTS (int)(sizeof(PROMPTS) / sizeof(PROMPTS[0]))

typedef struct golden_case {
    const char *name;
    specdec_verify_mode verify;
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
    int32_t n_draft; /* 0 = plain decoding */
    int32_t adaptive;
    uint64_t seed;
} golden_case;

/* Adaptive γ is deterministic in GREEDY and MATCH output only; its round counts
 * depend on timings, so adaptive cases record the tokens alone. */
static const golden_case CASES[] = {
    {"greedy_g4", SPECDEC_VERIFY_GREEDY, 0.0f, 0, 1.0f, 0.0f, 4, 0, 0},
    {"greedy_g1", SPECDEC_VERIFY_GREEDY, 0.0f, 0, 1.0f, 0.0f, 1, 0, 0},
    {"greedy_plain", SPECDEC_VERIFY_GREEDY, 0.0f, 0, 1.0f, 0.0f, 0, 0, 0},
    {"match_g3_t08", SPECDEC_VERIFY_MATCH, 0.8f, 0, 1.0f, 0.0f, 3, 0, 7},
    {"match_g6_t1_topk", SPECDEC_VERIFY_MATCH, 1.0f, 20, 0.9f, 0.0f, 6, 0, 3},
    {"match_plain_t08", SPECDEC_VERIFY_MATCH, 0.8f, 0, 1.0f, 0.0f, 0, 0, 7},
    {"match_adaptive_t08", SPECDEC_VERIFY_MATCH, 0.8f, 0, 1.0f, 0.0f, 2, 1, 7},
    {"rejection_g4_t1", SPECDEC_VERIFY_REJECTION, 1.0f, 0, 1.0f, 0.0f, 4, 0, 11},
    {"rejection_g2_t07_filters", SPECDEC_VERIFY_REJECTION, 0.7f, 40, 0.95f, 0.05f, 2, 0, 12345},
    {"rejection_g8_t15", SPECDEC_VERIFY_REJECTION, 1.5f, 0, 1.0f, 0.0f, 8, 0, 99},
};
#define N_CASES (int)(sizeof(CASES) / sizeof(CASES[0]))

/* One result line: "<case> <prompt#> rounds=R drafted=D accepted=A stop=S ids=a,b,c". */
static int run_case(specdec_engine *eng, const specdec_tokenizer *tok, const golden_case *c, int pi, char *line,
                    size_t cap) {
    int32_t prompt[MAX_IDS], n_prompt = 0, out[MAX_IDS], n_out = 0;
    specdec_status st = specdec_tokenize(tok, PROMPTS[pi], strlen(PROMPTS[pi]), 1, prompt, MAX_IDS, &n_prompt);
    if (st != SPECDEC_OK) {
        fprintf(stderr, "tokenize: %s\n", specdec_status_string(st));
        return -1;
    }
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = N_PREDICT;
    gp.verify = c->verify;
    gp.temperature = c->temperature;
    gp.top_k = c->top_k;
    gp.top_p = c->top_p;
    gp.min_p = c->min_p;
    gp.n_draft = c->n_draft;
    gp.adaptive_draft = c->adaptive;
    gp.seed = c->seed;
    gp.ignore_eos = 1;
    specdec_stats stats;
    st = specdec_generate(eng, prompt, n_prompt, &gp, out, MAX_IDS, &n_out, &stats);
    if (st != SPECDEC_OK) {
        fprintf(stderr, "%s prompt %d: generate: %s: %s\n", c->name, pi, specdec_status_string(st),
                specdec_engine_last_error(eng));
        return -1;
    }
    size_t o = 0;
    if (c->adaptive)
        o += (size_t)snprintf(line + o, cap - o, "%s %d stop=%d ids=", c->name, pi, (int)stats.stop_reason);
    else
        o += (size_t)snprintf(line + o, cap - o, "%s %d rounds=%lld drafted=%lld accepted=%lld stop=%d ids=", c->name,
                              pi, (long long)stats.n_rounds, (long long)stats.n_drafted, (long long)stats.n_accepted,
                              (int)stats.stop_reason);
    for (int32_t i = 0; i < n_out && o < cap; i++) o += (size_t)snprintf(line + o, cap - o, "%s%d", i ? "," : "", out[i]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && (!strcmp(argv[4], "--record") || !strcmp(argv[4], "--quick")))) {
        fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR GOLDEN_FILE [--record | --quick]\n", argv[0]);
        return 2;
    }
    const int record = argc == 5 && !strcmp(argv[4], "--record");
    const int quick = argc == 5 && !strcmp(argv[4], "--quick");
    specdec_model *tm = NULL, *dm = NULL;
    specdec_tokenizer *tok = NULL;
    specdec_engine *eng = NULL;
    if (specdec_model_load(argv[1], NULL, &tm) != SPECDEC_OK || specdec_model_load(argv[2], NULL, &dm) != SPECDEC_OK ||
        specdec_tokenizer_load(argv[1], &tok) != SPECDEC_OK) {
        fprintf(stderr, "loading the bundled pair: %s\n", specdec_last_error());
        return 1;
    }
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 256;
    if (specdec_engine_create(tm, dm, &ep, &eng) != SPECDEC_OK) {
        fprintf(stderr, "engine: %s\n", specdec_last_error());
        return 1;
    }

    FILE *f = fopen(argv[3], record ? "w" : "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", argv[3]);
        return 1;
    }
    if (record) fprintf(f, "# specdec golden CPU outputs (tests/golden/test_golden.c); n_predict %d\n", N_PREDICT);
    static char got[LINE_CAP], want[LINE_CAP];
    int n_lines = 0;
    for (int ci = 0; ci < N_CASES; ci++) {
        for (int pi = 0; pi < N_PROMPTS; pi++) {
            if (quick && pi > 0) { /* skip this line of the file */
                do {
                    if (!fgets(want, sizeof want, f)) want[0] = 0;
                } while (want[0] == '#');
                continue;
            }
            int rc = run_case(eng, tok, &CASES[ci], pi, got, sizeof got);
            SD_CHECK(rc == 0, "case %s prompt %d failed to run", CASES[ci].name, pi);
            if (rc != 0) continue;
            n_lines++;
            if (record) {
                fprintf(f, "%s\n", got);
                continue;
            }
            /* skip comments */
            do {
                if (!fgets(want, sizeof want, f)) want[0] = 0;
            } while (want[0] == '#');
            want[strcspn(want, "\n")] = 0;
            SD_CHECK(!strcmp(got, want), "behaviour changed\n  golden: %s\n  now:    %s", want, got);
        }
    }
    if (!record) {
        SD_CHECK(!fgets(want, sizeof want, f), "golden file has more lines than the %d cases", n_lines);
    }
    fclose(f);
    printf("%s %d lines (%d cases x %d prompts%s)\n", record ? "recorded" : "compared", n_lines, N_CASES,
           quick ? 1 : N_PROMPTS, quick ? ", quick" : "");
    specdec_engine_free(eng);
    specdec_tokenizer_free(tok);
    specdec_model_free(dm);
    specdec_model_free(tm);
    return sd_test_done();
}

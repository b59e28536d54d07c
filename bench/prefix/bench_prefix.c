/* bench_prefix.c — what the scheduler's prefix cache (specdec_prefix_cache, docs/
 * BATCHING.md "Prefix cache") buys, measured against the same scheduler with the cache
 * OFF in the same run, on a target + draft pair (the bundled kjv pair by default).
 *
 * Workloads (greedy or fixed-seed match sampling, outputs checked equal between the two
 * settings, so both did the same work):
 *   system  — 16 requests: one long shared system text (~350 tokens) + a different
 *             question each, 16 new tokens, max_active 4;
 *   choices — one ~350-token prompt, 8 sampled continuations (OpenAI's n = 8: 8 requests),
 *             16 new tokens, max_active 8;
 *   chat    — 6 turns of one conversation, each turn's prompt = the previous prompt + its
 *             answer + a new question, 24 new tokens, one request at a time.
 * For each: wall time, mean time to first token (stats t_first_token_s), and prompt tokens
 * prefilled (n_prompt - n_cached_prompt summed), medians over repeats, the two settings
 * alternated (OFF, AUTO, AUTO, OFF, ...) so drifting machine load hits both alike.
 * Prints a Markdown report.
 * Usage: bench_prefix TARGET_DIR DRAFT_DIR [repeats (default 3)] */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "specdec.h"

#define MAXP 480
#define MAXR 16
#define MAXOUT 32

static const char *const SYSTEM_TEXT =
    "And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them, When any man of you "
    "bring an offering unto the LORD, ye shall bring your offering of the cattle, even of the herd, and of the flock. "
    "If his offering be a burnt sacrifice of the herd, let him offer a male without blemish: he shall offer it of his "
    "own voluntary will at the door of the tabernacle of the congregation before the LORD. And he shall put his hand "
    "upon the head of the burnt offering; and it shall be accepted for him to make atonement for him. And he shall "
    "kill the bullock before the LORD: and the priests, Aaron's sons, shall bring the blood, and sprinkle the blood "
    "round about upon the altar that is by the door of the tabernacle of the congregation. And he shall flay the "
    "burnt offering, and cut it into his pieces. And the sons of Aaron the priest shall put fire upon the altar, and "
    "lay the wood in order upon the fire. ";
static const char *const QUESTIONS[MAXR] = {
    "And God said", "In the beginning God created", "Blessed are they that", "Then answered Jesus and said",
    "And it came to pass, when the king", "And Moses said unto the LORD", "The LORD is my shepherd",
    "And the angel of the LORD", "Hear, O Israel", "And David said", "For God so loved", "And Jacob said",
    "Now the serpent was", "And Abraham rose up", "And the word of the LORD came", "Thus saith the LORD"};

typedef struct run_result {
    double wall, ttft, prefilled;
    int32_t out[MAXR][MAXOUT], n_out[MAXR];
} run_result;

typedef struct bench {
    specdec_model *t, *d;
    specdec_tokenizer *tok;
} bench;

static int32_t encode(const bench *b, const char *text, int bos, int32_t *ids, int32_t cap) {
    int32_t n = 0;
    return specdec_tokenize(b->tok, text, strlen(text), bos, ids, cap, &n) == SPECDEC_OK ? n : -1;
}

static specdec_scheduler *make(const bench *b, int32_t prefix, int32_t max_active) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = max_active;
    sp.prefix_cache = prefix;
    specdec_scheduler *s = NULL;
    if (specdec_scheduler_create(b->t, b->d, &ep, &sp, &s) != SPECDEC_OK)
        fprintf(stderr, "scheduler: %s\n", specdec_last_error());
    return s;
}

/* n requests (prompts[i], params gp[i]) submitted at once; results into r. */
static int run_batch(specdec_scheduler *s, int32_t (*prompts)[MAXP], const int32_t *np, specdec_generate_params *gp,
                     int n, run_result *r, int offset) {
    specdec_request_id id[MAXR];
    for (int i = 0; i < n; i++)
        if (specdec_scheduler_submit(s, prompts[i], np[i], &gp[i], &id[i]) != SPECDEC_OK) {
            fprintf(stderr, "submit: %s\n", specdec_scheduler_last_error(s));
            return 1;
        }
    for (int i = 0; i < n; i++) {
        specdec_stats st;
        specdec_status outcome;
        if (specdec_scheduler_wait(s, id[i], -1, r->out[offset + i], MAXOUT, &r->n_out[offset + i], &st, &outcome) !=
                SPECDEC_OK ||
            outcome != SPECDEC_OK) {
            fprintf(stderr, "wait: %s\n", specdec_scheduler_last_error(s));
            return 1;
        }
        r->ttft += st.t_first_token_s;
        r->prefilled += (double)(st.n_prompt - st.n_cached_prompt);
    }
    return 0;
}

/* One workload with one setting: a fresh scheduler (empty cache). */
static int run_workload(const bench *b, int kind, int32_t prefix, run_result *r) {
    static int32_t prompts[MAXR][MAXP];
    int32_t np[MAXR];
    specdec_generate_params gp[MAXR];
    memset(r, 0, sizeof *r);
    int n = kind == 2 ? 6 : kind == 1 ? 8 : 16;
    specdec_scheduler *s = make(b, prefix, kind == 0 ? 4 : kind == 1 ? 8 : 1);
    if (!s) return 1;
    const double t0 = bench_now_s();
    int rc = 0;
    for (int i = 0; i < n; i++) {
        gp[i] = specdec_generate_default_params();
        gp[i].n_predict = kind == 2 ? 24 : 16;
        gp[i].n_draft = 4;
        gp[i].temperature = 0.0f;
        gp[i].verify = SPECDEC_VERIFY_GREEDY;
        if (kind == 1) { /* sampled choices, reproducible: match mode, seed per choice */
            gp[i].temperature = 0.8f;
            gp[i].verify = SPECDEC_VERIFY_MATCH;
            gp[i].seed = 1000 + (uint64_t)i;
        }
    }
    if (kind == 0 || kind == 1) {
        char text[4096];
        for (int i = 0; i < n; i++) {
            snprintf(text, sizeof text, "%s%s", SYSTEM_TEXT, kind == 0 ? QUESTIONS[i] : QUESTIONS[0]);
            np[i] = encode(b, text, 1, prompts[i], MAXP);
            if (np[i] <= 0) rc = 1;
        }
        if (!rc) rc = run_batch(s, prompts, np, gp, n, r, 0);
    } else { /* chat: each turn after the previous one's answer */
        int32_t len = encode(b, SYSTEM_TEXT, 1, prompts[0], MAXP);
        for (int turn = 0; turn < n && !rc; turn++) {
            int32_t q = encode(b, QUESTIONS[turn + 1], 0, prompts[0] + len, MAXP - len);
            if (q <= 0 || len + q + MAXOUT >= MAXP) {
                rc = 1;
                break;
            }
            np[0] = len + q;
            rc = run_batch(s, prompts, np, gp, 1, r, turn);
            memcpy(prompts[0] + np[0], r->out[turn], (size_t)r->n_out[turn] * sizeof(int32_t));
            len = np[0] + r->n_out[turn];
        }
    }
    r->wall = bench_now_s() - t0;
    r->ttft /= n;
    specdec_scheduler_free(s);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_prefix TARGET_DIR DRAFT_DIR [repeats]\n");
        return 2;
    }
    const int reps = argc > 3 ? atoi(argv[3]) : 3;
    if (reps < 1 || reps > 50) return 2;
    bench b = {0};
    if (specdec_model_load(argv[1], NULL, &b.t) || specdec_model_load(argv[2], NULL, &b.d) ||
        specdec_tokenizer_load(argv[1], &b.tok)) {
        fprintf(stderr, "load: %s\n", specdec_last_error());
        return 1;
    }
    static const char *const names[3] = {"system (16 requests, shared system text)",
                                          "choices (1 prompt, n = 8 sampled)", "chat (6 turns, one at a time)"};
    printf("| workload | prefilled tokens OFF | AUTO | wall s OFF | AUTO | wall AUTO/OFF | mean TTFT ms OFF | AUTO "
           "| TTFT AUTO/OFF |\n|---|---|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (int kind = 0; kind < 3; kind++) {
        double w[2][50], f[2][50], p[2] = {0, 0};
        static run_result r[2];
        for (int k = 0; k < reps; k++)
            for (int j = 0; j < 2; j++) {
                const int which = (k % 2 == 0) ? j : 1 - j; /* OFF first on even repeats */
                if (run_workload(&b, kind, which ? SPECDEC_PREFIX_CACHE_AUTO : SPECDEC_PREFIX_CACHE_OFF, &r[which]))
                    return 1;
                w[which][k] = r[which].wall;
                f[which][k] = r[which].ttft;
                p[which] = r[which].prefilled;
            }
        for (int i = 0; i < MAXR; i++)
            if (r[0].n_out[i] != r[1].n_out[i] ||
                memcmp(r[0].out[i], r[1].out[i], (size_t)r[0].n_out[i] * sizeof(int32_t)) != 0)
                bad = 1;
        const double w0 = bench_median(w[0], reps), w1 = bench_median(w[1], reps), f0 = bench_median(f[0], reps),
                     f1 = bench_median(f[1], reps);
        printf("| %s | %.0f | %.0f | %.3f | %.3f | %.2f | %.1f | %.1f | %.2f |\n", names[kind], p[0], p[1], w0, w1,
               w1 / w0, 1e3 * f0, 1e3 * f1, f1 / f0);
        fflush(stdout);
    }
    printf("\nOutputs with the cache equal those without: %s. Medians of %d repeats per setting, alternated.\n",
           bad ? "NO (a bug)" : "yes", reps);
    specdec_tokenizer_free(b.tok);
    specdec_model_free(b.d);
    specdec_model_free(b.t);
    return bad;
}

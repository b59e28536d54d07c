/* test_logprobs_alloc.c — the host executor's raw-row buffer (backends/cpu/sd_host_round.c,
 * docs/LOGPROBS.md "Where it is computed"): SD_RUNNER_TREE_MAX x V floats, allocated on the
 * first sequence that reports log-probabilities outside greedy mode and kept for the
 * executor's life.
 *   1. an engine that ran no such request has not allocated it: after create, after a
 *      rejection-mode generation without logprobs, after a greedy one with logprobs;
 *   2. a rejection-mode generation with logprobs under fault injection (core/sd_alloc.h:
 *      every allocation index k in turn fails): each run ends OK or with a clean
 *      SPECDEC_ERR_OUT_OF_MEMORY, the raw-row allocation's failure among them (its message
 *      names it), and the buffer stays absent after that failure;
 *   3. afterwards the same engine generates, the buffer now present, tokens and records
 *      bitwise equal to a fresh engine's;
 *   4. the round's prompt-row buffer (prompt_logprobs, core/sd_round.c) the same way: every
 *      allocation index in turn fails, exactly one failure is that buffer's (its message
 *      names it), and afterwards the prompt and generated records equal a fresh engine's.
 * Usage: test_logprobs_alloc TARGET DRAFT */
#include <stdio.h>
#include <string.h>

#include "lp_common.h"
#include "sd_alloc.h"
#include "sd_engine.h"
#include "sd_host_round_impl.h"

#define N_PREDICT 12

static const float *raw_rows(const specdec_engine *e) { return ((const sd_host_exec *)e->host_exec)->raw_rows; }

static specdec_generate_params params(int sampled, int logprobs, lp_rec *r) {
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = N_PREDICT;
    gp.ignore_eos = 1;
    gp.seed = 11;
    gp.temperature = sampled ? 0.8f : 0.0f;
    gp.verify = sampled ? SPECDEC_VERIFY_REJECTION : SPECDEC_VERIFY_GREEDY;
    gp.n_draft = 4;
    lp_rec_init(r, -1);
    if (logprobs) lp_attach(&gp, r, 5);
    return gp;
}

static specdec_status gen(specdec_engine *e, const specdec_generate_params *gp, int32_t *out, int32_t *n) {
    static const int32_t prompt[] = {1, 17, 42, 9, 5};
    *n = 0;
    return specdec_generate(e, prompt, 5, gp, out, LP_MAX, n, NULL);
}

/* Rejection mode with logprobs (top 5) and prompt logprobs (top 4) of gen()'s 5-token prompt into p. */
static specdec_generate_params prompt_params(lp_rec *r, lp_rec *p) {
    specdec_generate_params gp = params(1, 1, r);
    gp.prompt_logprobs = 1;
    gp.prompt_top_logprobs = 4;
    lp_rec_prompt(r, p, 5);
    return gp;
}

static lp_rec g_inj, g_inj_p; /* the injected runs' records (not checked) */
static specdec_generate_params mk_raw(void) { return params(1, 1, &g_inj); }
static specdec_generate_params mk_prompt(void) { return prompt_params(&g_inj, &g_inj_p); }

/* Run mk()'s request on e with allocation k failing, k = 0, 1, ... until a run no longer
 * reaches it: each run must end OK or OUT_OF_MEMORY (*other counts the rest, *n_oom every
 * OUT_OF_MEMORY); returns how many OUT_OF_MEMORY messages name `what`. After a raw-row
 * failure the raw-row buffer must still be absent. */
static int inject_each(specdec_engine *e, specdec_generate_params (*mk)(void), const char *what, int *n_oom,
                       int *other) {
    int named = 0;
    int32_t out[LP_MAX], n = 0;
    for (long k = 0; k < 10000; k++) {
        specdec_generate_params gp = mk();
        sd_alloc_fail_after(k);
        const specdec_status st = gen(e, &gp, out, &n);
        const long used = sd_alloc_count();
        sd_alloc_fail_after(-1);
        if (st == SPECDEC_ERR_OUT_OF_MEMORY) {
            ++*n_oom;
            if (strstr(specdec_engine_last_error(e), what)) {
                named++;
                if (!strcmp(what, "raw rows")) SD_CHECK(raw_rows(e) == NULL, "buffer present after its allocation failed");
            }
        } else if (st != SPECDEC_OK) {
            ++*other;
            fprintf(stderr, "%s, k %ld: %s: %s\n", what, k, specdec_status_string(st), specdec_engine_last_error(e));
        }
        if (used <= k) break; /* the injected failure was never reached: done */
    }
    return named;
}

/* 4. the prompt-row buffer under fault injection, then the records against a fresh engine's. */
static void check_prompt_buffer(specdec_engine *e, specdec_engine *fresh) {
    static lp_rec r, p, want, want_p;
    int32_t out[LP_MAX], want_out[LP_MAX], n = 0, want_n = 0;
    specdec_generate_params gp = prompt_params(&want, &want_p);
    SD_CHECK(gen(fresh, &gp, want_out, &want_n) == SPECDEC_OK && want_p.n == 4 && want.n == want_n,
             "fresh engine, prompt logprobs: %s", specdec_engine_last_error(fresh));
    int n_oom = 0, other = 0;
    const int buf_oom = inject_each(e, mk_prompt, "prompt log-probabilities", &n_oom, &other);
    printf("prompt buffer: %d runs out of memory, %d of them at the prompt rows\n", n_oom, buf_oom);
    SD_CHECK(buf_oom == 1 && other == 0, "prompt-row failures %d (want 1), other errors %d", buf_oom, other);
    gp = prompt_params(&r, &p);
    SD_CHECK(gen(e, &gp, out, &n) == SPECDEC_OK, "after injection: %s", specdec_engine_last_error(e));
    SD_CHECK(n == want_n && sc_same_tokens(out, want_out, n) && p.n == want_p.n && !memcmp(p.lp, want_p.lp, sizeof p.lp) &&
                 !memcmp(p.top, want_p.top, sizeof p.top) && !memcmp(r.lp, want.lp, sizeof r.lp),
             "after injection: %d tokens / %d prompt records differ from a fresh engine's", (int)n, (int)p.n);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TARGET DRAFT\n", argv[0]);
        return 2;
    }
    specdec_model *tm = NULL, *dm = NULL;
    if (specdec_model_load(argv[1], NULL, &tm) || specdec_model_load(argv[2], NULL, &dm)) {
        fprintf(stderr, "loading the bundled models: %s\n", specdec_last_error());
        return 1;
    }
    specdec_engine *e = lp_make_engine(tm, dm, 256), *fresh = lp_make_engine(tm, dm, 256);
    static lp_rec r, want;
    int32_t out[LP_MAX], want_out[LP_MAX], n = 0, want_n = 0;
    if (e && fresh) {
        /* 1. no request that needs it: not allocated */
        SD_CHECK(raw_rows(e) == NULL, "allocated at create");
        specdec_generate_params gp = params(1, 0, &r);
        SD_CHECK(gen(e, &gp, out, &n) == SPECDEC_OK && n == N_PREDICT, "rejection, no logprobs: %s",
                 specdec_engine_last_error(e));
        SD_CHECK(raw_rows(e) == NULL, "allocated by a generation without logprobs");
        gp = params(0, 1, &r);
        SD_CHECK(gen(e, &gp, out, &n) == SPECDEC_OK && r.n == N_PREDICT, "greedy with logprobs: %s",
                 specdec_engine_last_error(e));
        SD_CHECK(raw_rows(e) == NULL, "allocated by a greedy generation (rows are read in place)");

        /* the expected result: a fresh engine, no injection */
        gp = params(1, 1, &want);
        SD_CHECK(gen(fresh, &gp, want_out, &want_n) == SPECDEC_OK && want.n == want_n && want_n == N_PREDICT,
                 "fresh engine: %s", specdec_engine_last_error(fresh));
        SD_CHECK(raw_rows(fresh) != NULL, "not allocated by a rejection-mode generation with logprobs");

        /* 2. every allocation of the run fails in turn */
        int n_oom = 0, other = 0;
        const int raw_oom = inject_each(e, mk_raw, "raw rows", &n_oom, &other);
        printf("fault injection: %d runs out of memory, %d of them at the raw rows\n", n_oom, raw_oom);
        SD_CHECK(raw_oom == 1 && other == 0, "raw-row failures %d (want 1), other errors %d", raw_oom, other);

        /* 3. the engine recovers; the buffer is kept */
        gp = params(1, 1, &r);
        SD_CHECK(gen(e, &gp, out, &n) == SPECDEC_OK && raw_rows(e) != NULL, "after injection: %s",
                 specdec_engine_last_error(e));
        SD_CHECK(n == want_n && r.n == want.n && sc_same_tokens(out, want_out, n) &&
                     !memcmp(r.lp, want.lp, sizeof r.lp) && !memcmp(r.rank, want.rank, sizeof r.rank) &&
                     !memcmp(r.top, want.top, sizeof r.top) && !memcmp(r.top_lp, want.top_lp, sizeof r.top_lp),
                 "after injection: %d tokens / %d records differ from a fresh engine's", (int)n, (int)r.n);
        const float *kept = raw_rows(e);
        gp = params(1, 0, &r);
        SD_CHECK(gen(e, &gp, out, &n) == SPECDEC_OK && raw_rows(e) == kept, "the buffer is kept for the executor's life");
        check_prompt_buffer(e, fresh);
    }
    specdec_engine_free(fresh);
    specdec_engine_free(e);
    specdec_model_free(dm);
    specdec_model_free(tm);
    return sd_test_done();
}

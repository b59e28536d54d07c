/* test_logprobs_sched.c — log-probabilities through the scheduler (docs/LOGPROBS.md):
 * N_REQ requests submitted at once to a scheduler of 4 active sequences (so rounds hold
 * several requests), drafters mixed (the draft model's chains and a tree, n-gram, plain),
 * verify modes mixed (greedy, match, rejection; fixed γ and ngram_cost OFF: the uniforms
 * are addressed by (seed, sequence, position), so batching changes no decision), and
 * logprobs on and off in the same rounds (top_logprobs 0, 5, 20). Each request's tokens and
 * records (token, logprob, rank, top ids and values, position) equal those of
 * specdec_generate alone with the same params, bitwise; a request without logprobs gets no
 * call. Every fourth request also asks for prompt log-probabilities (prompt_top_logprobs 0 or
 * 20, with and without generated-token logprobs): its prompt records, computed by the
 * scheduler's prefill, equal the engine's bitwise too. specdec_scheduler_submit refuses bad
 * log-probability fields naming them.
 * Usage: test_logprobs_sched TARGET_DIR DRAFT_DIR N_REQUESTS N_PREDICT */
#include "../scheduler/sched_common.h"
#include "lp_common.h"

#define MAX_REQ 24

typedef struct lreq {
    int32_t prompt[128], n_prompt;
    specdec_generate_params gp;
    lp_rec rec, ref_rec, prec, ref_prec; /* generated-token and prompt records */
    int32_t out[LP_MAX], ref[LP_MAX], n_out, n_ref;
    specdec_request_id id;
} lreq;

static void make_req(sc_env *env, lreq *r, int i, int32_t np) {
    const int32_t n = sc_encode(env, SC_PROMPTS[i % SC_N_PROMPTS], r->prompt, 128);
    r->n_prompt = n;
    r->gp = sc_params(i % 3 == 0 ? 0 : 1, 100 + (uint64_t)i, np, 4);
    if (i % 3 == 2) r->gp.verify = SPECDEC_VERIFY_REJECTION;
    switch (i % 4) {
    case 1: r->gp.draft_method = SPECDEC_DRAFT_NGRAM, r->gp.ngram_cost = SPECDEC_NGRAM_COST_OFF; break;
    case 2: r->gp.draft_method = SPECDEC_DRAFT_NONE; break;
    case 3: {
        const int32_t w[2] = {2, 2};
        SD_CHECK(specdec_generate_params_set_tree(&r->gp, w, 2) == SPECDEC_OK, "tree");
        break;
    }
    default: break;
    }
    r->gp.ignore_eos = 1;
    r->gp.sequence_id = (uint64_t)i;
}

/* logprobs on (top from i) for 2 of every 3 requests, off for the rest; prompt logprobs for
 * every fourth (top 20 or 0), recorded into prec */
static void attach(lreq *r, int i, lp_rec *rec, lp_rec *prec) {
    lp_rec_init(rec, r->n_prompt);
    lp_rec_init(prec, 1);
    if (i % 3 == 1) {
        r->gp.logprobs = 0, r->gp.top_logprobs = 0, r->gp.logprob_callback = NULL;
        r->gp.callback = lp_on_token, r->gp.user_data = rec, rec->off = 1;
    } else {
        lp_attach(&r->gp, rec, i % 2 ? 5 : i % 5 ? SPECDEC_MAX_TOP_LOGPROBS : 0);
    }
    if (i % 4 == 0) {
        r->gp.prompt_logprobs = 1;
        r->gp.prompt_top_logprobs = i % 8 ? 0 : SPECDEC_MAX_TOP_LOGPROBS;
        r->gp.logprob_callback = lp_on_logprob;
        r->gp.logprob_user_data = rec;
        lp_rec_prompt(rec, prec, r->n_prompt);
    }
}

static void check_submit_validation(specdec_scheduler *s, const lreq *r) {
    static lp_rec rec;
    static const struct {
        int32_t logprobs, top;
        int cb;
        const char *expect;
        int32_t prompt; /* prompt_logprobs, and top -> prompt_top_logprobs */
    } bad[] = {{3, 0, 1, "logprobs 3", 0}, {1, 99, 1, "top_logprobs 99", 0}, {0, 1, 1, "top_logprobs 1", 0},
               {1, 0, 0, "logprob_callback", 0}, {0, 0, 1, "prompt_logprobs 2", 2},
               {0, 21, 1, "prompt_top_logprobs 21", 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        specdec_generate_params gp = r->gp;
        lp_attach(&gp, &rec, 0);
        gp.logprobs = bad[i].logprobs;
        gp.top_logprobs = bad[i].prompt ? 0 : bad[i].top;
        gp.prompt_logprobs = bad[i].prompt;
        gp.prompt_top_logprobs = bad[i].prompt ? bad[i].top : 0;
        if (!bad[i].cb) gp.logprob_callback = NULL;
        specdec_request_id id = 0;
        const specdec_status st = specdec_scheduler_submit(s, r->prompt, r->n_prompt, &gp, &id);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && id == 0 && strstr(specdec_scheduler_last_error(s), bad[i].expect),
                 "submit case %zu: %s: %s", i, specdec_status_string(st), specdec_scheduler_last_error(s));
    }
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR N_REQUESTS N_PREDICT\n", argv[0]);
        return 2;
    }
    const int n_req = atoi(argv[3]) < MAX_REQ ? atoi(argv[3]) : MAX_REQ;
    const int32_t np = atoi(argv[4]);
    sc_env env;
    if (sc_env_load(&env, argv[1], argv[2])) return 1;
    static lreq reqs[MAX_REQ];
    for (int i = 0; i < n_req; i++) {
        lreq *r = &reqs[i];
        make_req(&env, r, i, np);
        attach(r, i, &r->ref_rec, &r->ref_prec);
        r->n_ref = sc_reference(&env, r->prompt, r->n_prompt, &r->gp, r->ref, LP_MAX, NULL);
        attach(r, i, &r->rec, &r->prec);
    }
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 4;
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(env.tm, env.dm, &ep, &sp, &s) == SPECDEC_OK, "scheduler: %s",
             specdec_last_error());
    if (!s) return sd_test_done();
    check_submit_validation(s, &reqs[0]);
    for (int i = 0; i < n_req; i++)
        SD_CHECK(specdec_scheduler_submit(s, reqs[i].prompt, reqs[i].n_prompt, &reqs[i].gp, &reqs[i].id) == SPECDEC_OK,
                 "submit %d: %s", i, specdec_scheduler_last_error(s));
    int n_on = 0, n_equal = 0, n_prompt_on = 0;
    for (int i = 0; i < n_req; i++) {
        lreq *r = &reqs[i];
        specdec_status outcome = SPECDEC_OK;
        specdec_stats st;
        const specdec_status ws = specdec_scheduler_wait(s, r->id, -1, r->out, LP_MAX, &r->n_out, &st, &outcome);
        SD_CHECK(ws == SPECDEC_OK && outcome == SPECDEC_OK, "wait %d: %s", i, specdec_status_string(outcome));
        const int on = r->gp.logprobs == 1;
        n_on += on;
        const int pon = r->gp.prompt_logprobs == 1;
        n_prompt_on += pon;
        const int eq = r->n_out == r->n_ref && sc_same_tokens(r->out, r->ref, r->n_out) &&
                       lp_same_records(&r->rec, &r->ref_rec) && lp_same_records(&r->prec, &r->ref_prec);
        SD_CHECK(r->prec.n == (pon ? r->n_prompt - 1 : 0) && r->prec.bad_order == 0,
                 "request %d: %d prompt records for %d prompt tokens (prompt_logprobs %d), %d breaches", i,
                 (int)r->prec.n, (int)r->n_prompt, pon, (int)r->prec.bad_order);
        n_equal += eq;
        SD_CHECK(eq, "request %d (drafter %s, verify %s, logprobs %d): %d tokens / %d records vs engine %d / %d", i,
                 specdec_draft_method_name(st.draft_method), specdec_verify_mode_name(st.verify), on, (int)r->n_out,
                 (int)r->rec.n, (int)r->n_ref, (int)r->ref_rec.n);
        SD_CHECK(r->rec.n_tok == r->n_out && r->rec.bad_order == 0 && r->rec.n == (on ? r->n_out : 0),
                 "request %d: %d token calls, %d logprob calls, %d breaches, %d tokens", i, (int)r->rec.n_tok,
                 (int)r->rec.n, (int)r->rec.bad_order, (int)r->n_out);
    }
    printf("%d requests (%d with logprobs, %d with prompt logprobs) through 4 slots: %d equal specdec_generate "
           "(tokens and records, bitwise)\n",
           n_req, n_on, n_prompt_on, n_equal);
    specdec_scheduler_free(s);
    sc_env_free(&env);
    return sd_test_done();
}

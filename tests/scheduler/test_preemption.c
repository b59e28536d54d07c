/* test_preemption.c — specdec_kv_admission OPTIMISTIC (runtime/sd_sched_loop.c
 * sched_make_room): requests claim their prompt and one round of the KV pool, the newest is
 * preempted when the running ones' growth does not fit, and resumes by recomputing its rows.
 * On the bundled pair, four long requests in a pool that holds the largest one alone:
 *   1. greedy chain (draft model), seeded rejection chain (draft model), match-mode n-gram
 *      chain, greedy tree: with the prefix cache on and off, and with chunked prefill, more start
 *      together than RESERVE lets (all four with the default N_PREDICT), preemptions happen, and every output and its round statistics are
 *      specdec_generate's alone; n_preemptions add up to the metric; the pool is never
 *      exceeded (sampled from the token callback); nothing is held at the end;
 *   2. RESERVE on the same pool (run first): no preemption, fewer at once, the same outputs;
 *   3. the newest request cancelled while requests are preempted: it ends CANCELLED, the
 *      others complete as the reference, nothing is held or parked at the end;
 *   4. shutdown while requests are preempted: it returns, every request ends OK or CANCELLED;
 *   5. create: kv_admission outside the enum is INVALID_ARGUMENT naming it;
 *   6. the state a resume must keep besides the tokens: a JSON-schema grammar (its cursor), a
 *      presence penalty and repetition penalty (the output's history), top-2 logprobs (every
 *      record bitwise), a stop string (the text window) and min_tokens: four such requests
 *      preempted and resumed give specdec_generate's tokens, records and stop reasons;
 *   7. scheduling_policy PRIORITY: one slot, a running request and four queued ones of priorities
 *      5, 1, 3, 1 start in the order 1, 1 (by arrival), 3, 5; under FCFS a priority other than 0
 *      is INVALID_ARGUMENT naming it, as is a policy outside the enum; in the tight pool, a
 *      priority-0 request submitted while three of priority 5 fill it is never preempted (they
 *      are, for it and for each other) and every output is still the reference's.
 * Usage: test_preemption TARGET_DIR DRAFT_DIR [N_PREDICT (16..160)] */
#define _POSIX_C_SOURCE 200809L
#include "sched_common.h"

#define N_REQ 4
#define MAX_PREDICT 160
#define BT 8
static int32_t N_PREDICT = 96;

typedef struct req {
    int32_t prompt[64], n_prompt;
    specdec_generate_params gp;
    int32_t ref[MAX_PREDICT], n_ref;
    specdec_stats ref_stats;
    int32_t out[MAX_PREDICT], n_out;
    specdec_stats stats;
    specdec_status outcome;
    specdec_request_id id;
} req;

/* What the token callback sees of the scheduler's metrics. */
typedef struct monitor {
    specdec_scheduler *s;
    int32_t max_running, over;
    int64_t max_preempted;
} monitor;

static int on_token(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)tok;
    (void)piece;
    (void)len;
    monitor *m = ud;
    specdec_scheduler_metrics mt;
    if (specdec_scheduler_get_metrics(m->s, &mt) != SPECDEC_OK) return 0;
    if (mt.active - mt.preempted > m->max_running) m->max_running = (int32_t)(mt.active - mt.preempted);
    if (mt.preempted > m->max_preempted) m->max_preempted = mt.preempted;
    if (mt.kv_blocks_used > mt.kv_blocks_total || mt.draft_kv_blocks_used > mt.draft_kv_blocks_total) m->over++;
    return 0;
}

static int prepare(sc_env *e, req *r) {
    static const char *const what[N_REQ] = {"greedy chain", "rejection chain", "n-gram match", "greedy tree"};
    for (int i = 0; i < N_REQ; i++) {
        r[i].n_prompt = sc_encode(e, SC_PROMPTS[i % SC_N_PROMPTS], r[i].prompt, 64);
        if (r[i].n_prompt < 1) return 1;
        specdec_generate_params gp = sc_params(i == 2, 5 + (uint64_t)i, N_PREDICT, 4);
        gp.ignore_eos = 1;
        if (i == 1) { /* rejection sampling, fixed seed: the draft model's proposals decide with the uniforms */
            gp.temperature = 0.9f;
            gp.verify = SPECDEC_VERIFY_REJECTION;
            gp.n_draft = 3;
        } else if (i == 2) {
            gp.draft_method = SPECDEC_DRAFT_NGRAM;
            gp.ngram_cost = SPECDEC_NGRAM_COST_FIXED;
        } else if (i == 3) {
            const int32_t widths[3] = {2, 2, 2};
            if (specdec_generate_params_set_tree(&gp, widths, 3) != SPECDEC_OK) return 1;
        }
        r[i].gp = gp;
        r[i].n_ref = sc_reference(e, r[i].prompt, r[i].n_prompt, &gp, r[i].ref, MAX_PREDICT, &r[i].ref_stats);
        SD_CHECK(r[i].n_ref == N_PREDICT, "%s: reference of %d tokens", what[i], (int)r[i].n_ref);
        if (r[i].n_ref < 0) return 1;
    }
    return 0;
}

/* The pool: what the largest request (the tree: its nodes on top) may hold alone. */
static int32_t pool_blocks(const req *r) {
    int32_t most = 0;
    for (int i = 0; i < N_REQ; i++) {
        const int32_t rows = r[i].n_prompt + N_PREDICT + (i == 3 ? SPECDEC_MAX_TREE_NODES : 0);
        const int32_t b = (rows + BT - 1) / BT;
        if (b > most) most = b;
    }
    return most;
}

static specdec_scheduler *make(sc_env *e, const req *r, specdec_kv_admission adm, specdec_prefix_cache pc,
                               int32_t chunk) {
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = N_REQ;
    sp.kv_block_tokens = BT;
    sp.kv_pool_blocks = pool_blocks(r);
    sp.kv_admission = adm;
    sp.prefix_cache = pc;
    sp.prefill_chunk = chunk;
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_OK, "create: %s", specdec_last_error());
    return s;
}

static void submit_all(specdec_scheduler *s, req *r, monitor *mon) {
    memset(mon, 0, sizeof *mon);
    mon->s = s;
    for (int i = 0; i < N_REQ; i++) {
        specdec_generate_params gp = r[i].gp;
        gp.callback = on_token;
        gp.user_data = mon;
        r[i].id = 0;
        SD_CHECK(specdec_scheduler_submit(s, r[i].prompt, r[i].n_prompt, &gp, &r[i].id) == SPECDEC_OK, "submit %d: %s",
                 i, specdec_last_error());
    }
}

static void wait_all(specdec_scheduler *s, req *r) {
    for (int i = 0; i < N_REQ; i++) {
        r[i].n_out = 0;
        r[i].outcome = SPECDEC_ERR_INTERNAL;
        if (!r[i].id) continue;
        SD_CHECK(specdec_scheduler_wait(s, r[i].id, -1, r[i].out, MAX_PREDICT, &r[i].n_out, &r[i].stats,
                                        &r[i].outcome) == SPECDEC_OK,
                 "wait %d: %s", i, specdec_last_error());
    }
}

/* Every request's tokens and round statistics are the reference's. */
static void same_as_reference(const req *r, const char *what) {
    for (int i = 0; i < N_REQ; i++) {
        SD_CHECK(r[i].outcome == SPECDEC_OK && r[i].n_out == r[i].n_ref && sc_same(r[i].out, r[i].ref, r[i].n_ref),
                 "%s, request %d: outcome %s, %d tokens vs %d, identical %d", what, i, specdec_status_string(r[i].outcome),
                 (int)r[i].n_out, (int)r[i].n_ref, r[i].n_out == r[i].n_ref && sc_same(r[i].out, r[i].ref, r[i].n_ref));
        SD_CHECK(r[i].stats.n_rounds == r[i].ref_stats.n_rounds && r[i].stats.n_drafted == r[i].ref_stats.n_drafted &&
                     r[i].stats.n_accepted == r[i].ref_stats.n_accepted,
                 "%s, request %d: rounds/drafted/accepted %lld/%lld/%lld vs %lld/%lld/%lld", what, i,
                 (long long)r[i].stats.n_rounds, (long long)r[i].stats.n_drafted, (long long)r[i].stats.n_accepted,
                 (long long)r[i].ref_stats.n_rounds, (long long)r[i].ref_stats.n_drafted,
                 (long long)r[i].ref_stats.n_accepted);
    }
}

/* At the end: nothing queued, active, preempted or held; the preemptions add up. Returns them. */
static int64_t check_end(specdec_scheduler *s, const req *r, const char *what) {
    specdec_scheduler_metrics m;
    SD_CHECK(specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK, "metrics");
    int64_t n = 0;
    for (int i = 0; i < N_REQ; i++) n += r[i].stats.n_preemptions;
    SD_CHECK(m.queued == 0 && m.active == 0 && m.preempted == 0 && m.kv_blocks_used == 0 && m.draft_kv_blocks_used == 0,
             "%s: at the end queued %d active %d preempted %lld used %d/%d", what, (int)m.queued, (int)m.active,
             (long long)m.preempted, (int)m.kv_blocks_used, (int)m.draft_kv_blocks_used);
    SD_CHECK(m.preemptions == n, "%s: metric %lld preemptions, the requests' sum %lld", what, (long long)m.preemptions,
             (long long)n);
    return n;
}

static void equal_runs(sc_env *e, req *r) {
    specdec_scheduler *s = make(e, r, SPECDEC_KV_ADMISSION_RESERVE, SPECDEC_PREFIX_CACHE_AUTO, 0);
    if (!s) return;
    monitor mon;
    submit_all(s, r, &mon);
    wait_all(s, r);
    same_as_reference(r, "reserve");
    const int32_t reserve_running = mon.max_running;
    SD_CHECK(check_end(s, r, "reserve") == 0 && mon.max_preempted == 0 && mon.max_running < N_REQ && mon.over == 0,
             "reserve: no preemption, fewer than %d at once (%d), pool exceeded %d times", N_REQ, (int)mon.max_running,
             mon.over);
    printf("reserve: %d running at once, no preemption\n", (int)mon.max_running);
    specdec_scheduler_free(s);
    static const struct {
        const char *what;
        specdec_prefix_cache pc;
        int32_t chunk;
    } cases[] = {{"optimistic, prefix cache on", SPECDEC_PREFIX_CACHE_ON, 0},
                 {"optimistic, prefix cache off", SPECDEC_PREFIX_CACHE_OFF, 0},
                 {"optimistic, chunked prefill 8", SPECDEC_PREFIX_CACHE_AUTO, 8}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (!(s = make(e, r, SPECDEC_KV_ADMISSION_AUTO, cases[c].pc, cases[c].chunk))) return;
        submit_all(s, r, &mon);
        wait_all(s, r);
        same_as_reference(r, cases[c].what);
        const int64_t n = check_end(s, r, cases[c].what);
        SD_CHECK(n > 0 && mon.max_running > reserve_running && mon.over == 0,
                 "%s: %lld preemptions (want > 0), %d running at once (want more than reserve's %d), pool exceeded %d "
                 "times",
                 cases[c].what, (long long)n, (int)mon.max_running, (int)reserve_running, mon.over);
        printf("%s: pool %d blocks of %d, %d running at once, %lld preemptions, up to %lld preempted at once\n",
               cases[c].what, (int)pool_blocks(r), BT, (int)mon.max_running, (long long)n,
               (long long)mon.max_preempted);
        specdec_scheduler_free(s);
    }
}

/* Wait (up to 60 s) until a request is preempted; 1 if one was. */
static int wait_preempted(specdec_scheduler *s) {
    for (int k = 0; k < 60000; k++) {
        specdec_scheduler_metrics m;
        if (specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK && m.preempted > 0) return 1;
        if (m.active == 0 && m.queued == 0) return 0;
        sc_sleep_us(1000);
    }
    return 0;
}

static void cancel_parked(sc_env *e, req *r) {
    specdec_scheduler *s = make(e, r, SPECDEC_KV_ADMISSION_OPTIMISTIC, SPECDEC_PREFIX_CACHE_AUTO, 0);
    if (!s) return;
    monitor mon;
    submit_all(s, r, &mon);
    const int seen = wait_preempted(s);
    SD_CHECK(seen, "cancel: no request was preempted");
    /* the newest is the first one preempted; it may have resumed by now, either way it stops */
    SD_CHECK(specdec_scheduler_cancel(s, r[N_REQ - 1].id) == SPECDEC_OK, "cancel: %s", specdec_last_error());
    wait_all(s, r);
    SD_CHECK(r[N_REQ - 1].outcome == SPECDEC_ERR_CANCELLED && r[N_REQ - 1].n_out < N_PREDICT &&
                 sc_same(r[N_REQ - 1].out, r[N_REQ - 1].ref, r[N_REQ - 1].n_out),
             "cancel: the newest request %s with %d tokens (a prefix of the reference's)",
             specdec_status_string(r[N_REQ - 1].outcome), (int)r[N_REQ - 1].n_out);
    for (int i = 0; i < N_REQ - 1; i++)
        SD_CHECK(r[i].outcome == SPECDEC_OK && r[i].n_out == r[i].n_ref && sc_same(r[i].out, r[i].ref, r[i].n_ref),
                 "cancel: request %d %s, %d tokens, as the reference: %d", i, specdec_status_string(r[i].outcome),
                 (int)r[i].n_out, r[i].n_out == r[i].n_ref && sc_same(r[i].out, r[i].ref, r[i].n_ref));
    (void)check_end(s, r, "cancel");
    specdec_scheduler_metrics m;
    SD_CHECK(specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK && m.cancelled == 1 && m.finished == N_REQ - 1,
             "cancel: %lld cancelled, %lld finished", (long long)m.cancelled, (long long)m.finished);
    printf("cancel while preempted: the newest request cancelled after %d tokens (preempted %lld times)\n",
           (int)r[N_REQ - 1].n_out, (long long)r[N_REQ - 1].stats.n_preemptions);
    specdec_scheduler_free(s);
}

static void shutdown_parked(sc_env *e, req *r) {
    specdec_scheduler *s = make(e, r, SPECDEC_KV_ADMISSION_OPTIMISTIC, SPECDEC_PREFIX_CACHE_AUTO, 0);
    if (!s) return;
    monitor mon;
    submit_all(s, r, &mon);
    SD_CHECK(wait_preempted(s), "shutdown: no request was preempted");
    specdec_scheduler_shutdown(s);
    wait_all(s, r);
    int cancelled = 0;
    for (int i = 0; i < N_REQ; i++) {
        SD_CHECK(r[i].outcome == SPECDEC_OK || r[i].outcome == SPECDEC_ERR_CANCELLED, "shutdown: request %d %s", i,
                 specdec_status_string(r[i].outcome));
        SD_CHECK(sc_same(r[i].out, r[i].ref, r[i].n_out), "shutdown: request %d's %d tokens a prefix of the reference",
                 i, (int)r[i].n_out);
        cancelled += r[i].outcome == SPECDEC_ERR_CANCELLED;
    }
    SD_CHECK(cancelled > 0, "shutdown: nothing was cancelled");
    (void)check_end(s, r, "shutdown");
    printf("shutdown while preempted: %d of %d cancelled\n", cancelled, N_REQ);
    specdec_scheduler_free(s);
}

static void bad_create(sc_env *e) {
    specdec_engine_params ep = sc_engine_params();
    for (int v = -1; v <= 3; v += 4) {
        specdec_scheduler_params sp = specdec_scheduler_default_params();
        sp.kv_admission = v;
        specdec_scheduler *s = NULL;
        const specdec_status st = specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && !s && strstr(specdec_last_error(), "kv_admission"),
                 "kv_admission %d: %s (%s)", v, specdec_status_string(st), specdec_last_error());
        specdec_scheduler_free(s);
    }
}

/* ---- 6. grammar, penalties, logprobs, stop strings across a resume ---- */
#define MAX_LP (MAX_PREDICT + 1)
typedef struct lp_rec {
    int32_t n;
    int32_t tok[MAX_LP], top[MAX_LP][2];
    float lp[MAX_LP], top_lp[MAX_LP][2];
} lp_rec;

static int on_logprob(void *ud, const specdec_token_logprobs *t) {
    lp_rec *r = ud;
    if (r->n >= MAX_LP) return 0;
    r->tok[r->n] = t->token;
    r->lp[r->n] = t->logprob;
    for (int k = 0; k < 2; k++) {
        r->top[r->n][k] = k < t->n_top ? t->top_tokens[k] : -1;
        r->top_lp[r->n][k] = k < t->n_top ? t->top_logprobs[k] : 0.0f;
    }
    r->n++;
    return 0;
}

static void feature_mix(sc_env *e) {
    static const char schema[] = "{\"type\": \"object\", \"properties\": {\"verse\": {\"type\": \"string\"}, "
                                 "\"n\": {\"type\": \"integer\"}}, \"required\": [\"verse\", \"n\"]}";
    specdec_grammar *gr = NULL;
    SD_CHECK(specdec_grammar_compile(e->tok, SPECDEC_GRAMMAR_JSON_SCHEMA, schema, strlen(schema), &gr) == SPECDEC_OK,
             "grammar: %s", specdec_last_error());
    if (!gr) return;
    static req r[N_REQ];
    static lp_rec ref_lp[N_REQ], got_lp[N_REQ];
    const char *stop[1] = {"LORD"};
    for (int i = 0; i < N_REQ; i++) {
        r[i].n_prompt = sc_encode(e, SC_PROMPTS[(i + 1) % SC_N_PROMPTS], r[i].prompt, 64);
        specdec_generate_params gp = sc_params(1, 40 + (uint64_t)i, N_PREDICT, 4); /* match mode, T 0.8 */
        gp.ignore_eos = i != 0;
        if (i == 0) gp.grammar = gr;
        if (i == 1) gp.presence_penalty = 0.8f, gp.repetition_penalty = 1.3f, gp.draft_method = SPECDEC_DRAFT_NGRAM;
        if (i == 2) gp.logprobs = 1, gp.top_logprobs = 2, gp.logprob_callback = on_logprob;
        if (i == 3) gp.stop_strings = stop, gp.n_stop_strings = 1, gp.min_tokens = 30, gp.tokenizer = e->tok;
        memset(&ref_lp[i], 0, sizeof ref_lp[i]);
        gp.logprob_user_data = &ref_lp[i];
        r[i].gp = gp;
        r[i].n_ref = sc_reference(e, r[i].prompt, r[i].n_prompt, &gp, r[i].ref, MAX_PREDICT, &r[i].ref_stats);
        SD_CHECK(r[i].n_ref >= 0, "feature mix: reference %d failed", i);
        if (r[i].n_ref < 0) {
            specdec_grammar_free(gr);
            return;
        }
    }
    specdec_scheduler *s = make(e, r, SPECDEC_KV_ADMISSION_OPTIMISTIC, SPECDEC_PREFIX_CACHE_AUTO, 0);
    if (s) {
        monitor mon;
        for (int i = 0; i < N_REQ; i++) {
            memset(&got_lp[i], 0, sizeof got_lp[i]);
            r[i].gp.logprob_user_data = &got_lp[i];
        }
        submit_all(s, r, &mon);
        wait_all(s, r);
        int64_t n_pre = 0;
        for (int i = 0; i < N_REQ; i++) {
            n_pre += r[i].stats.n_preemptions;
            SD_CHECK(r[i].outcome == SPECDEC_OK && r[i].n_out == r[i].n_ref && sc_same(r[i].out, r[i].ref, r[i].n_ref) &&
                         r[i].stats.stop_reason == r[i].ref_stats.stop_reason,
                     "feature mix, request %d: %d tokens vs %d, stop %d vs %d", i, (int)r[i].n_out, (int)r[i].n_ref,
                     (int)r[i].stats.stop_reason, (int)r[i].ref_stats.stop_reason);
        }
        SD_CHECK(got_lp[2].n == ref_lp[2].n && ref_lp[2].n == r[2].n_ref &&
                     memcmp(&got_lp[2], &ref_lp[2], sizeof got_lp[2]) == 0,
                 "feature mix: %d logprob records vs the reference's %d, bitwise equal: %d", got_lp[2].n, ref_lp[2].n,
                 memcmp(&got_lp[2], &ref_lp[2], sizeof got_lp[2]) == 0);
        SD_CHECK(n_pre > 0 && r[3].ref_stats.stop_reason == SPECDEC_STOP_STRING,
                 "feature mix: %lld preemptions (want > 0); the stop string's reference stops on it (%d)",
                 (long long)n_pre, (int)r[3].ref_stats.stop_reason);
        (void)check_end(s, r, "feature mix");
        printf("feature mix (grammar, penalties, logprobs, stop string): %lld preemptions, outputs identical\n",
               (long long)n_pre);
        specdec_scheduler_free(s);
    }
    specdec_grammar_free(gr);
}

/* ---- 7. priority ---- */
typedef struct order_rec {
    int first[8];   /* request index by the order of its first token */
    int n_first;
    int seen[8];
} order_rec;

typedef struct order_ud {
    order_rec *rec;
    int idx;
} order_ud;

static int on_first(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)tok, (void)piece, (void)len;
    order_ud *u = ud;
    if (!u->rec->seen[u->idx]) {
        u->rec->seen[u->idx] = 1;
        u->rec->first[u->rec->n_first++] = u->idx;
    }
    return 0;
}

static void priority_order(sc_env *e) {
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 1;
    sp.scheduling_policy = SPECDEC_SCHEDULING_PRIORITY;
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_OK, "priority create: %s",
             specdec_last_error());
    if (!s) return;
    static order_rec rec;
    memset(&rec, 0, sizeof rec);
    order_ud ud[5];
    static const int32_t prio[5] = {0, 5, 1, 3, 1};
    specdec_request_id id[5] = {0};
    int32_t prompt[64];
    const int32_t n = sc_encode(e, SC_PROMPTS[0], prompt, 64);
    for (int i = 0; i < 5; i++) {
        specdec_generate_params gp = sc_params(0, 1, i == 0 ? N_PREDICT : 4, 3);
        gp.ignore_eos = 1;
        gp.priority = prio[i];
        ud[i] = (order_ud){&rec, i};
        gp.callback = on_first;
        gp.user_data = &ud[i];
        SD_CHECK(specdec_scheduler_submit(s, prompt, n, &gp, &id[i]) == SPECDEC_OK, "priority submit %d: %s", i,
                 specdec_last_error());
        if (i == 0) /* the first one runs before the others queue */
            for (int k = 0; k < 60000; k++) {
                specdec_scheduler_metrics m;
                if (specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK && m.active == 1 && m.queued == 0) break;
                sc_sleep_us(1000);
            }
    }
    for (int i = 0; i < 5; i++) {
        int32_t out[MAX_PREDICT], n_out = 0;
        specdec_status oc = SPECDEC_OK;
        SD_CHECK(id[i] && specdec_scheduler_wait(s, id[i], -1, out, MAX_PREDICT, &n_out, NULL, &oc) == SPECDEC_OK &&
                     oc == SPECDEC_OK,
                 "priority wait %d", i);
    }
    static const int want[5] = {0, 2, 4, 3, 1};
    SD_CHECK(rec.n_first == 5 && memcmp(rec.first, want, sizeof want) == 0,
             "priority: started in the order %d %d %d %d %d (want 0 2 4 3 1)", rec.first[0], rec.first[1], rec.first[2],
             rec.first[3], rec.first[4]);
    specdec_scheduler_free(s);
    /* FCFS refuses priorities; a policy outside the enum is refused at create */
    sp.scheduling_policy = SPECDEC_SCHEDULING_FCFS;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_OK, "fcfs create");
    specdec_generate_params gp = sc_params(0, 1, 4, 3);
    gp.priority = -2;
    specdec_request_id rid = 0;
    SD_CHECK(s && specdec_scheduler_submit(s, prompt, n, &gp, &rid) == SPECDEC_ERR_INVALID_ARGUMENT && rid == 0 &&
                 strstr(specdec_last_error(), "priority"),
             "FCFS with priority -2: %s", specdec_last_error());
    specdec_scheduler_free(s);
    s = NULL;
    sp.scheduling_policy = 2;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_ERR_INVALID_ARGUMENT && !s &&
                 strstr(specdec_last_error(), "scheduling_policy"),
             "scheduling_policy 2: %s", specdec_last_error());
    printf("priority: started in the order 0 2 4 3 1 (priorities 0, then 1 1 3 5); FCFS refuses a priority\n");
}

static void priority_preemption(sc_env *e, req *r) {
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = N_REQ;
    sp.kv_block_tokens = BT;
    sp.kv_pool_blocks = pool_blocks(r);
    sp.scheduling_policy = SPECDEC_SCHEDULING_PRIORITY;
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_OK, "create: %s", specdec_last_error());
    if (!s) return;
    monitor mon;
    memset(&mon, 0, sizeof mon);
    mon.s = s;
    for (int i = 0; i < N_REQ; i++) { /* three of priority 5; the last, priority 0, once they have filled the pool */
        specdec_generate_params gp = r[i].gp;
        gp.callback = on_token;
        gp.user_data = &mon;
        gp.priority = i == N_REQ - 1 ? 0 : 5;
        if (i == N_REQ - 1)
            for (int k = 0; k < 60000; k++) {
                specdec_scheduler_metrics m;
                if (specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK &&
                    (m.kv_blocks_used * 2 >= m.kv_blocks_total || m.active == 0))
                    break;
                sc_sleep_us(1000);
            }
        r[i].id = 0;
        SD_CHECK(specdec_scheduler_submit(s, r[i].prompt, r[i].n_prompt, &gp, &r[i].id) == SPECDEC_OK, "submit %d: %s",
                 i, specdec_last_error());
    }
    wait_all(s, r);
    same_as_reference(r, "priority preemption");
    const int64_t n = check_end(s, r, "priority preemption");
    SD_CHECK(n > 0 && r[N_REQ - 1].stats.n_preemptions == 0,
             "priority preemption: %lld preemptions (want > 0), the priority-0 request preempted %lld times (want 0)",
             (long long)n, (long long)r[N_REQ - 1].stats.n_preemptions);
    printf("priority preemption: %lld preemptions, none of the priority-0 request\n", (long long)n);
    specdec_scheduler_free(s);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR [N_PREDICT]\n", argv[0]);
        return 2;
    }
    if (argc > 3) N_PREDICT = atoi(argv[3]);
    if (N_PREDICT < 16 || N_PREDICT > MAX_PREDICT) N_PREDICT = 96;
    sc_env e;
    if (sc_env_load(&e, argv[1], argv[2])) return 1;
    static req r[N_REQ];
    if (prepare(&e, r) == 0) {
        equal_runs(&e, r);
        cancel_parked(&e, r);
        shutdown_parked(&e, r);
        bad_create(&e);
    }
    feature_mix(&e);
    priority_order(&e);
    if (prepare(&e, r) == 0) priority_preemption(&e, r);
    sc_env_free(&e);
    return sd_test_done();
}

/* test_scheduler_equal.c — many requests submitted concurrently through a scheduler give
 * exactly what specdec_generate alone gives for the same prompt and params: tokens,
 * streamed text, stop reason and the speculative statistics (rounds, drafted,
 * accepted), in greedy, match and rejection mode (fixed γ: the uniforms are addressed
 * by (seed, sequence, position), so batching cannot change a decision), with varying γ
 * (including plain decoding, γ = 0), draft trees (a fixed shape, a node budget) and
 * different drafters in the same rounds (the draft model, n-gram chains and a tree,
 * draft_method NONE) on the bundled pair. Every round runs all active sequences through one batched target
 * pass. DRAFT_DIR may be an EAGLE-3 head (ctest scheduler_equal_eagle3: kjv-target + kjv-eagle3):
 * then the "draft model" requests draft with the head (draft_method AUTO picks eagle3; each slot
 * has its own head runner, reset when a request takes the slot), sharing rounds with the n-gram
 * and plain ones; the draft KV metrics are 0 (a head's cache is in no pool); a request asking
 * for the other drafter (MODEL with a head, EAGLE3 with a draft model) is refused at submit
 * with INVALID_ARGUMENT. Three submitter threads each submit their share and wait for it, twice:
 *   1. 4 sequences at a time, the default KV pool;
 *   2. 6 at a time on a pool of 24 blocks of 8 tokens, smaller than 6 requests'
 *      reservations, admission RESERVE: requests wait for blocks (admission control) and a
 *      monitor thread checks every few milliseconds that the pool is never exceeded;
 *   3. the same pool with admission OPTIMISTIC (the default): more requests start, the
 *      newest are preempted when a round's growth does not fit and resume by recomputing
 *      their rows (at least one preemption with the full N_PREDICT 24, n_preemptions summing
 *      to the metric), and every output, text and statistic is still the reference's
 *      (tests/scheduler/test_preemption.c forces preemptions in every configuration).
 * With --cuda (ctest scheduler_equal_cuda, label gpu) the schedulers and the reference
 * engine run on CUDA: the scheduler's runner groups with the batched device round
 * (backends/cuda/sd_cuda_batch_round.cu) against specdec_generate on a CUDA engine (the
 * single-sequence device round, trees on its host round); skipped without a device.
 * Usage: test_scheduler_equal [--cuda] TARGET_DIR DRAFT_DIR [N_REQUESTS (<= 18) [N_PREDICT (<= 24)]] */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "sched_common.h"

#define MAX_REQ 18
static int N_REQ = MAX_REQ;
static int HEAD; /* DRAFT_DIR is an EAGLE-3 head */
#define N_THREADS 3
#define MAX_PREDICT 24
static int32_t N_PREDICT = MAX_PREDICT;
#define TEXT_CAP 4096

typedef struct req {
    int32_t prompt[128], n_prompt;
    specdec_generate_params gp;
    int32_t ref[MAX_PREDICT], n_ref;
    specdec_stats ref_stats;
    char ref_text[TEXT_CAP];
    int32_t out[MAX_PREDICT], n_out;
    specdec_stats stats;
    specdec_status submit_st, wait_st, outcome;
    char text[TEXT_CAP]; /* filled by the token callback on a scheduler thread */
    size_t text_len;
    int text_overflow;
} req;

typedef struct job {
    specdec_scheduler *s;
    req *reqs;
    int first, step;
} job;

static int on_piece(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)tok;
    req *r = ud;
    if (r->text_len + len >= TEXT_CAP) {
        r->text_overflow = 1;
        return 0;
    }
    memcpy(r->text + r->text_len, piece, len);
    r->text_len += len;
    r->text[r->text_len] = '\0';
    return 0;
}

static void *submitter(void *arg) {
    job *j = arg;
    specdec_request_id ids[MAX_REQ];
    for (int i = j->first; i < N_REQ; i += j->step) {
        req *r = &j->reqs[i];
        r->submit_st = specdec_scheduler_submit(j->s, r->prompt, r->n_prompt, &r->gp, &ids[i]);
    }
    for (int i = j->first; i < N_REQ; i += j->step) {
        req *r = &j->reqs[i];
        if (r->submit_st != SPECDEC_OK) continue;
        r->wait_st = specdec_scheduler_wait(j->s, ids[i], -1, r->out, N_PREDICT, &r->n_out, &r->stats, &r->outcome);
    }
    return NULL;
}

static int prepare(sc_env *e, req *reqs) {
    int runner_drafted = 0; /* requests the draft model / head drafted for */
    for (int i = 0; i < N_REQ; i++) {
        req *r = &reqs[i];
        memset(r, 0, sizeof *r);
        r->n_prompt = sc_encode(e, SC_PROMPTS[i % SC_N_PROMPTS], r->prompt, 128);
        if (r->n_prompt <= 0) return 1;
        r->gp = sc_params(i % 4 == 0 ? 0 : 1, 100 + (uint64_t)i, N_PREDICT, i % 7); /* γ 0..6 */
        if (i % 4 == 2) r->gp.verify = SPECDEC_VERIFY_REJECTION;
        if (i % 8 == 3) { /* a fixed tree shape */
            const int32_t shape[3] = {3, 2, 1};
            specdec_generate_params_set_tree(&r->gp, shape, 3);
        }
        if (i % 8 == 7) r->gp.draft_nodes = 12; /* a best-first node budget */
        /* different drafters in one round: the n-gram drafter (a chain, and the tree at
         * i = 11), plain decoding by draft_method NONE, the draft model for the rest */
        if (i % 6 == 5) { /* the cost gate FIXED: MEASURED's proposals follow timings, the counts would differ */
            r->gp.draft_method = SPECDEC_DRAFT_NGRAM;
            r->gp.ngram_cost = SPECDEC_NGRAM_COST_FIXED;
            r->gp.ngram_token_cost = 0.25f;
        }
        if (i % 9 == 4) r->gp.draft_method = SPECDEC_DRAFT_NONE;
        r->gp.tokenizer = e->tok;
        r->n_ref = sc_reference(e, r->prompt, r->n_prompt, &r->gp, r->ref, N_PREDICT, &r->ref_stats);
        if (r->n_ref < 0) return 1;
        runner_drafted += r->ref_stats.n_drafted > 0 &&
                          r->ref_stats.draft_method == (HEAD ? SPECDEC_DRAFT_EAGLE3 : SPECDEC_DRAFT_MODEL);
        size_t len = 0;
        if (specdec_detokenize(e->tok, r->ref, r->n_ref, 1, r->ref_text, TEXT_CAP, &len) != SPECDEC_OK) return 1;
        r->gp.callback = on_piece; /* set after the reference: the reference needs no text */
        r->gp.user_data = r;
    }
    SD_CHECK(runner_drafted >= N_REQ / 3, "only %d of %d requests drafted with the %s", runner_drafted, N_REQ,
             HEAD ? "EAGLE-3 head" : "draft model");
    return 0;
}

/* The drafter the loaded draft is not (MODEL with a head, EAGLE3 with a draft model) is
 * refused at submit, naming it. */
static void check_other_method(sc_env *e, specdec_scheduler *s) {
    specdec_generate_params gp = sc_params(0, 1, 4, 3);
    gp.draft_method = HEAD ? SPECDEC_DRAFT_MODEL : SPECDEC_DRAFT_EAGLE3;
    int32_t prompt[64];
    const int32_t n = sc_encode(e, SC_PROMPTS[0], prompt, 64);
    specdec_request_id id = 0;
    const specdec_status st = specdec_scheduler_submit(s, prompt, n, &gp, &id);
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && id == 0 && strstr(specdec_last_error(), HEAD ? "MODEL" : "EAGLE3") &&
                 strstr(specdec_last_error(), "EAGLE-3 head"),
             "draft_method %s on a scheduler with %s: %s (%s)", HEAD ? "MODEL" : "EAGLE3",
             HEAD ? "a head" : "a draft model", specdec_status_string(st), specdec_last_error());
}

static void check(const req *reqs) {
    for (int i = 0; i < N_REQ; i++) {
        const req *r = &reqs[i];
        SD_CHECK(r->submit_st == SPECDEC_OK && r->wait_st == SPECDEC_OK && r->outcome == SPECDEC_OK,
                 "request %d: submit %d wait %d outcome %d", i, r->submit_st, r->wait_st, r->outcome);
        SD_CHECK(r->n_out == r->n_ref && sc_same(r->out, r->ref, r->n_ref), "request %d (mode %d, γ %d): %d tokens vs %d",
                 i, (int)r->gp.verify, (int)r->gp.n_draft, (int)r->n_out, (int)r->n_ref);
        SD_CHECK(!r->text_overflow && strcmp(r->text, r->ref_text) == 0, "request %d: text '%s' vs '%s'", i, r->text,
                 r->ref_text);
        SD_CHECK(r->stats.stop_reason == r->ref_stats.stop_reason && r->stats.n_rounds == r->ref_stats.n_rounds &&
                     r->stats.n_drafted == r->ref_stats.n_drafted && r->stats.n_accepted == r->ref_stats.n_accepted &&
                     r->stats.n_prompt == r->ref_stats.n_prompt && r->stats.draft_method == r->ref_stats.draft_method,
                 "request %d: stats differ (rounds %lld/%lld drafted %lld/%lld accepted %lld/%lld)", i,
                 (long long)r->stats.n_rounds, (long long)r->ref_stats.n_rounds, (long long)r->stats.n_drafted,
                 (long long)r->ref_stats.n_drafted, (long long)r->stats.n_accepted,
                 (long long)r->ref_stats.n_accepted);
    }
}

static void check_metrics(specdec_scheduler *s, const req *reqs, int32_t pool) {
    specdec_scheduler_metrics m;
    SD_CHECK(specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK, "metrics");
    int64_t tokens = 0, rounds = 0, drafted = 0, accepted = 0;
    for (int i = 0; i < N_REQ; i++) {
        tokens += reqs[i].ref_stats.n_generated;
        rounds += reqs[i].ref_stats.n_rounds;
        drafted += reqs[i].ref_stats.n_drafted;
        accepted += reqs[i].ref_stats.n_accepted;
    }
    SD_CHECK(m.submitted == N_REQ && m.finished == N_REQ && m.cancelled == 0 && m.failed == 0 && m.rejected == 0,
             "counts: submitted %lld finished %lld cancelled %lld failed %lld rejected %lld", (long long)m.submitted,
             (long long)m.finished, (long long)m.cancelled, (long long)m.failed, (long long)m.rejected);
    SD_CHECK(m.queued == 0 && m.active == 0, "queued %d active %d at the end", (int)m.queued, (int)m.active);
    SD_CHECK(m.tokens_generated == tokens && m.rounds == rounds && m.drafted == drafted && m.accepted == accepted,
             "totals: tokens %lld/%lld rounds %lld/%lld drafted %lld/%lld accepted %lld/%lld",
             (long long)m.tokens_generated, (long long)tokens, (long long)m.rounds, (long long)rounds,
             (long long)m.drafted, (long long)drafted, (long long)m.accepted, (long long)accepted);
    SD_CHECK(m.kv_blocks_total == pool && m.draft_kv_blocks_total == (HEAD ? 0 : pool) && m.kv_blocks_used == 0 &&
                 m.draft_kv_blocks_used == 0,
             "kv metrics: total %d / %d (want %d), used %d / %d at the end", (int)m.kv_blocks_total,
             (int)m.draft_kv_blocks_total, (int)pool, (int)m.kv_blocks_used, (int)m.draft_kv_blocks_used);
}

/* Samples the metrics while the requests run: the pool is never exceeded. */
typedef struct monitor {
    specdec_scheduler *s;
    int stop, samples, over, max_used, max_active, max_queued, max_preempted;
    pthread_mutex_t mu;
} monitor;

static void *monitor_run(void *arg) {
    monitor *mo = arg;
    for (;;) {
        pthread_mutex_lock(&mo->mu);
        int stop = mo->stop;
        pthread_mutex_unlock(&mo->mu);
        if (stop) break;
        specdec_scheduler_metrics m;
        if (specdec_scheduler_get_metrics(mo->s, &m) == SPECDEC_OK) {
            mo->samples++;
            if (m.kv_blocks_used > m.kv_blocks_total || m.draft_kv_blocks_used > m.draft_kv_blocks_total) mo->over++;
            if (m.kv_blocks_used > mo->max_used) mo->max_used = m.kv_blocks_used;
            if (m.active > mo->max_active) mo->max_active = m.active;
            if (m.queued > mo->max_queued) mo->max_queued = m.queued;
            if (m.preempted > mo->max_preempted) mo->max_preempted = (int)m.preempted;
        }
        sc_sleep_us(2000);
    }
    return NULL;
}

/* One scheduler over every request (see the top of the file). */
static void run_case(sc_env *e, req *reqs, int32_t max_active, int32_t block_tokens, int32_t pool_blocks,
                     specdec_kv_admission adm) {
    for (int i = 0; i < N_REQ; i++) {
        reqs[i].text_len = 0;
        reqs[i].text[0] = '\0';
        reqs[i].n_out = 0;
    }
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = max_active;
    sp.kv_block_tokens = block_tokens;
    sp.kv_pool_blocks = pool_blocks;
    sp.kv_admission = adm;
    specdec_scheduler *s = NULL;
    specdec_status st = specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s);
    SD_CHECK(st == SPECDEC_OK, "create: %s", specdec_last_error());
    if (st != SPECDEC_OK) return;
    monitor mo = {s, 0, 0, 0, 0, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t mt, th[N_THREADS];
    pthread_create(&mt, NULL, monitor_run, &mo);
    job jobs[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        jobs[t] = (job){s, reqs, t, N_THREADS};
        pthread_create(&th[t], NULL, submitter, &jobs[t]);
    }
    for (int t = 0; t < N_THREADS; t++) pthread_join(th[t], NULL);
    pthread_mutex_lock(&mo.mu);
    mo.stop = 1;
    pthread_mutex_unlock(&mo.mu);
    pthread_join(mt, NULL);
    check(reqs);
    const int32_t pool = pool_blocks > 0 ? pool_blocks : max_active * ((specdec_scheduler_n_ctx(s) + block_tokens - 1) / block_tokens);
    check_metrics(s, reqs, pool);
    check_other_method(e, s);
    specdec_scheduler_metrics m;
    int64_t n_pre = 0;
    for (int i = 0; i < N_REQ; i++) n_pre += reqs[i].stats.n_preemptions;
    SD_CHECK(specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK && m.preemptions == n_pre && m.preempted == 0,
             "preemptions: the metric %lld, the requests' sum %lld, %lld preempted at the end", (long long)m.preemptions,
             (long long)n_pre, (long long)m.preempted);
    if (adm == SPECDEC_KV_ADMISSION_RESERVE) SD_CHECK(n_pre == 0, "RESERVE preempts nothing (%lld)", (long long)n_pre);
    if (adm == SPECDEC_KV_ADMISSION_OPTIMISTIC && N_PREDICT == MAX_PREDICT) /* shorter outputs never outgrow their claim */
        SD_CHECK(n_pre > 0, "OPTIMISTIC in a pool of %d blocks preempted nothing: the case tests nothing", (int)pool_blocks);
    SD_CHECK(mo.over == 0 && mo.max_active <= max_active, "pool exceeded in %d of %d samples (max used %d of %d), "
             "active up to %d", mo.over, mo.samples, mo.max_used, (int)pool, mo.max_active);
    static const char *const adm_names[] = {"auto", "reserve", "optimistic"};
    printf("max_active %d, pool %d blocks of %d, admission %s: %d samples, up to %d blocks used, %d active, %d queued, "
           "%d preempted at once, %lld preemptions\n",
           (int)max_active, (int)pool, (int)block_tokens, adm_names[adm], mo.samples, mo.max_used, mo.max_active,
           mo.max_queued, mo.max_preempted, (long long)n_pre);
    specdec_scheduler_free(s);
}

int main(int argc, char **argv) {
    const int cuda = sc_backend_arg(argc, argv);
    if (cuda < 0) return sd_test_skip("no CUDA device");
    argc -= cuda;
    argv += cuda;
    if (argc < 3) {
        fprintf(stderr, "usage: %s [--cuda] TARGET_DIR DRAFT_DIR [N_REQUESTS [N_PREDICT]]\n", argv[0]);
        return 2;
    }
    if (argc > 3) N_REQ = atoi(argv[3]);
    if (N_REQ < N_THREADS || N_REQ > MAX_REQ) N_REQ = MAX_REQ;
    if (argc > 4) N_PREDICT = atoi(argv[4]);
    if (N_PREDICT < 1 || N_PREDICT > MAX_PREDICT) N_PREDICT = MAX_PREDICT;
    sc_env e;
    if (sc_env_load(&e, argv[1], argv[2])) return 1;
    specdec_model_info info;
    HEAD = specdec_model_get_info(e.dm, &info) == SPECDEC_OK && info.model_kind == SPECDEC_DRAFT_EAGLE3;
    static req reqs[MAX_REQ];
    if (prepare(&e, reqs)) {
        sc_env_free(&e);
        return 1;
    }
    run_case(&e, reqs, 4, 16, 0, SPECDEC_KV_ADMISSION_AUTO);
    /* each request reserves min(n_ctx, prompt + n_predict (+ 64 with a tree)) rows: with
     * 24 blocks of 8 tokens only a few run at once although 6 slots are free */
    run_case(&e, reqs, 6, 8, 24, SPECDEC_KV_ADMISSION_RESERVE);
    /* each claims its prompt and one round (+ 18 rows, + 66 with a tree): more start, and
     * the pool runs short as they grow */
    run_case(&e, reqs, 6, 8, 24, SPECDEC_KV_ADMISSION_OPTIMISTIC);
    sc_env_free(&e);
    return sd_test_done();
}

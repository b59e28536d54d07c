/* test_eagle3_sched.c — EAGLE-3 heads in the batching scheduler (runtime/sd_scheduler.c,
 * docs/BATCHING.md): every slot drafts with its own head runner (its own draft cache, bound to
 * the slot's target runner in the target group, which captures the head's states).
 *
 * For each of the four fixture heads (make_heads.py: every layout) on the random 8-layer target:
 *   1. twelve requests of different prompt lengths and budgets on 3 slots (slots are reused as
 *      requests finish): eagle3 chains (γ 1..5) and EAGLE-2 trees (a fixed shape, a node budget)
 *      in greedy, match and rejection mode with fixed seeds, n-gram chains, plain requests
 *      (draft_method NONE, n_draft 0). Each request's tokens and statistics (rounds, drafted,
 *      accepted, drafter, stop reason) equal specdec_generate's on an engine with the same head,
 *      bitwise. The round callbacks prove that eagle3, n-gram and plain sequences shared
 *      scheduler rounds (every callback of one scheduler round sees the same metrics.rounds,
 *      which only the loop changes between rounds);
 *   2. one slot, four requests in turn (the slot's head is reset when the next takes it): a
 *      greedy eagle3 chain stopped by its token callback after 5 tokens, an eagle3 rejection
 *      tree, an n-gram chain, an eagle3 match chain — each equal to specdec_generate;
 *   3. what is refused: draft_method MODEL with a head (INVALID_ARGUMENT at submit, naming it),
 *      and, on CUDA without a device, BACKEND_UNAVAILABLE (with one, the scheduler is made);
 *   4. the head's weights are made once per scheduler: with the F16 and the BF16 head on 4
 *      slots every slot's head runner holds the same shared object and its forward reads the
 *      same widened F32 matrices (one copy, not four), while each has its own buffers; the
 *      runners of two schedulers do not share;
 *   5. the head's linear layers and attention (split over the heads) run on its target's threads: a
 *      head runner bound to a CPU target
 *      runner of 3 threads (the pool's threshold at 0, so every layer of >= 32 rows splits) fuses
 *      and steps (logits and g_next) bitwise as one bound to a 1-thread target, and the pool's
 *      workers were used by those calls alone.
 *
 *     test_eagle3_sched FIXTURE_DIR [MAX_PREDICT]   (MAX_PREDICT: the largest n_predict, default 40) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e3_test.h"
#include "sd_cpu_pool.h"
#include "sd_cpu_runner.h"
#include "sd_engine.h"
#include "sd_eagle3_cpu.h"
#include "sd_eagle3_load.h"
#include "sd_model.h"
#include "sd_sched_impl.h"
#include "sd_test.h"
#include "specdec.h"

#define N_REQ 12
#define CAP 64
#define N_CTX 128
#define MAX_KEYS 4096

static int32_t MAX_PREDICT = 40;

typedef enum kind { K_EAGLE3, K_NGRAM, K_PLAIN } kind;

typedef struct req {
    int32_t prompt[32], n_prompt;
    specdec_generate_params gp;
    kind k;
    int stop_after;                  /* > 0: the token callback stops the request after this many */
    int32_t n_cb;
    int32_t ref[CAP], n_ref;
    specdec_stats ref_stats;
    int32_t out[CAP], n_out;
    specdec_stats stats;
    specdec_status submit_st, wait_st, outcome;
} req;

/* (scheduler round, kind) of every round callback: written on the loop thread only, read
 * after the waits (which synchronise through the scheduler's lock). */
static struct {
    specdec_scheduler *s;
    int64_t key[MAX_KEYS];
    kind k[MAX_KEYS];
    int n;
} g_rounds;

static void on_round(void *u, const specdec_round_info *in) {
    (void)in;
    const req *r = u;
    specdec_scheduler_metrics m;
    if (!g_rounds.s || g_rounds.n >= MAX_KEYS || specdec_scheduler_get_metrics(g_rounds.s, &m) != SPECDEC_OK) return;
    g_rounds.key[g_rounds.n] = m.rounds;
    g_rounds.k[g_rounds.n++] = r->k;
}

static int on_token(void *u, int32_t tok, const char *piece, size_t len) {
    (void)tok, (void)piece, (void)len;
    req *r = u;
    return r->stop_after > 0 && ++r->n_cb >= r->stop_after;
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static specdec_engine_params cpu_params(void) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = N_CTX;
    return ep;
}

/* Request i of case 1 (see the top): its prompt, mode, drafter and shape. */
static void make_req(req *r, int i, uint64_t *rng, int32_t vocab) {
    static const int32_t shape[3] = {3, 2, 1}, shape2[3] = {2, 2, 2};
    memset(r, 0, sizeof *r);
    r->n_prompt = 2 + (i * 5) % 17;
    for (int32_t j = 0; j < r->n_prompt; j++) /* the n-gram request repeats itself: its lookup finds matches */
        r->prompt[j] = i == 1 ? 7 + j % 3 : (int32_t)(rng_next(rng) % (uint64_t)vocab);
    specdec_generate_params *gp = &r->gp;
    *gp = specdec_generate_default_params();
    /* the first runs longest: the n-gram and plain requests right behind it join its rounds */
    gp->n_predict = i == 0 ? MAX_PREDICT : 12 + (i * 7) % (MAX_PREDICT - 11);
    gp->ignore_eos = i % 2;
    gp->seed = 1000 + (uint64_t)i;
    const int mode = i % 3; /* greedy, match, rejection */
    gp->verify = mode == 0 ? SPECDEC_VERIFY_GREEDY : mode == 1 ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_REJECTION;
    gp->temperature = mode == 0 ? 0.0f : 0.9f;
    if (mode == 2 && i % 4 == 2) gp->top_k = 50;
    if (i == 11) gp->top_p = 0.9f;
    gp->n_draft = 1 + i % 5;
    r->k = K_EAGLE3;
    if (i == 3) specdec_generate_params_set_tree(gp, shape, 3);
    if (i == 7) specdec_generate_params_set_tree(gp, shape2, 3);
    if (i == 4 || i == 10) gp->draft_nodes = i == 4 ? 10 : 6;
    if (i == 8) gp->draft_method = SPECDEC_DRAFT_EAGLE3; /* asked for, not AUTO */
    if (i == 1) { /* the cost gate FIXED: MEASURED's proposals follow timings */
        gp->draft_method = SPECDEC_DRAFT_NGRAM;
        gp->ngram_cost = SPECDEC_NGRAM_COST_FIXED;
        gp->ngram_token_cost = 0.25f;
        r->k = K_NGRAM;
    }
    if (i == 2) gp->draft_method = SPECDEC_DRAFT_NONE, r->k = K_PLAIN;
    if (i == 9) gp->n_draft = 0, r->k = K_PLAIN;
}

static int reference(specdec_engine *e, req *r) {
    r->n_cb = 0;
    r->gp.callback = r->stop_after > 0 ? on_token : NULL;
    r->gp.user_data = r;
    const specdec_status st = specdec_generate(e, r->prompt, r->n_prompt, &r->gp, r->ref, CAP, &r->n_ref, &r->ref_stats);
    SD_CHECK(st == SPECDEC_OK, "reference: %s", specdec_engine_last_error(e));
    r->n_cb = 0;
    return st == SPECDEC_OK ? 0 : -1;
}

/* Submit every request at once, wait for each, compare with its reference. */
static void run_sched(const char *name, specdec_scheduler *s, req *reqs, int n) {
    specdec_request_id ids[N_REQ];
    for (int i = 0; i < n; i++) {
        reqs[i].gp.round_callback = on_round;
        reqs[i].gp.round_user_data = &reqs[i];
        reqs[i].submit_st = specdec_scheduler_submit(s, reqs[i].prompt, reqs[i].n_prompt, &reqs[i].gp, &ids[i]);
    }
    for (int i = 0; i < n; i++) {
        req *r = &reqs[i];
        if (r->submit_st == SPECDEC_OK)
            r->wait_st = specdec_scheduler_wait(s, ids[i], -1, r->out, CAP, &r->n_out, &r->stats, &r->outcome);
        SD_CHECK(r->submit_st == SPECDEC_OK && r->wait_st == SPECDEC_OK && r->outcome == SPECDEC_OK,
                 "%s request %d: submit %s, wait %s, outcome %s (%s)", name, i, specdec_status_string(r->submit_st),
                 specdec_status_string(r->wait_st), specdec_status_string(r->outcome), specdec_last_error());
        SD_CHECK(r->n_out == r->n_ref && !memcmp(r->out, r->ref, sizeof(int32_t) * (size_t)r->n_ref),
                 "%s request %d (verify %d, γ %d): %d tokens differ from specdec_generate's %d", name, i,
                 (int)r->gp.verify, (int)r->gp.n_draft, (int)r->n_out, (int)r->n_ref);
        const specdec_stats *a = &r->stats, *b = &r->ref_stats;
        SD_CHECK(a->n_rounds == b->n_rounds && a->n_drafted == b->n_drafted && a->n_accepted == b->n_accepted &&
                     a->draft_method == b->draft_method && a->stop_reason == b->stop_reason,
                 "%s request %d: stats (rounds %lld/%lld drafted %lld/%lld accepted %lld/%lld method %d/%d stop %d/%d)",
                 name, i, (long long)a->n_rounds, (long long)b->n_rounds, (long long)a->n_drafted,
                 (long long)b->n_drafted, (long long)a->n_accepted, (long long)b->n_accepted, (int)a->draft_method,
                 (int)b->draft_method, (int)a->stop_reason, (int)b->stop_reason);
    }
}

/* 1. twelve mixed requests on three slots */
static void check_mixed(const char *name, const specdec_model *t, const specdec_model *h, specdec_engine *e) {
    static req reqs[N_REQ];
    uint64_t rng = 0x5eed0000u + (uint64_t)strlen(name);
    int64_t e3_drafted = 0;
    for (int i = 0; i < N_REQ; i++) {
        make_req(&reqs[i], i, &rng, 200);
        if (reference(e, &reqs[i])) return;
        if (reqs[i].k == K_EAGLE3) {
            SD_CHECK(reqs[i].ref_stats.draft_method == SPECDEC_DRAFT_EAGLE3, "%s request %d: drafter %d", name, i,
                     (int)reqs[i].ref_stats.draft_method);
            e3_drafted += reqs[i].ref_stats.n_drafted;
        }
    }
    SD_CHECK(e3_drafted > 0, "%s: the head drafted nothing", name);
    specdec_engine_params ep = cpu_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 3;
    sp.kv_block_tokens = 8;
    specdec_scheduler *s = NULL;
    specdec_status st = specdec_scheduler_create(t, h, &ep, &sp, &s);
    SD_CHECK(st == SPECDEC_OK && s, "%s: scheduler with a head: %s (%s)", name, specdec_status_string(st),
             specdec_last_error());
    if (!s) return;
    g_rounds.s = s;
    g_rounds.n = 0;
    run_sched(name, s, reqs, N_REQ);
    g_rounds.s = NULL;
    /* a scheduler round where an eagle3, an n-gram and a plain sequence all ran */
    int mixed = 0;
    for (int i = 0; i < g_rounds.n && !mixed; i++) {
        int seen[3] = {0, 0, 0};
        for (int j = 0; j < g_rounds.n; j++)
            if (g_rounds.key[j] == g_rounds.key[i]) seen[g_rounds.k[j]] = 1;
        mixed = seen[K_EAGLE3] && seen[K_NGRAM] && seen[K_PLAIN];
    }
    SD_CHECK(mixed, "%s: no scheduler round held eagle3, n-gram and plain sequences (%d callbacks)", name, g_rounds.n);
    specdec_scheduler_metrics m;
    SD_CHECK(specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK && m.finished == N_REQ && m.failed == 0 &&
                 m.kv_blocks_used == 0 && m.draft_kv_blocks_total == 0 && m.draft_kv_blocks_used == 0,
             "%s: metrics finished %lld failed %lld kv used %d, draft kv %d/%d", name, (long long)m.finished,
             (long long)m.failed, (int)m.kv_blocks_used, (int)m.draft_kv_blocks_used, (int)m.draft_kv_blocks_total);
    /* 3. the drafter the head is not: refused at submit, naming it */
    specdec_generate_params gp = specdec_generate_default_params();
    gp.draft_method = SPECDEC_DRAFT_MODEL;
    specdec_request_id id = 0;
    st = specdec_scheduler_submit(s, reqs[0].prompt, reqs[0].n_prompt, &gp, &id);
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && id == 0 && strstr(specdec_last_error(), "EAGLE-3 head"),
             "%s: draft_method MODEL with a head: %s (%s)", name, specdec_status_string(st), specdec_last_error());
    specdec_scheduler_free(s);
    printf("%-28s 12 requests on 3 slots equal specdec_generate (%lld eagle3 drafts); %d round callbacks\n", name,
           (long long)e3_drafted, g_rounds.n);
}

/* 2. one slot, four requests in turn */
static void check_one_slot(const char *name, const specdec_model *t, const specdec_model *h, specdec_engine *e) {
    static req reqs[4];
    static const int32_t shape[2] = {3, 2};
    static const int src[4] = {0, 5, 1, 8}; /* greedy eagle3, rejection eagle3, n-gram, rejection eagle3 */
    uint64_t rng = 77;
    for (int i = 0; i < 4; i++) {
        make_req(&reqs[i], src[i], &rng, 200);
        reqs[i].gp.n_draft = 3;
    }
    reqs[0].stop_after = 5; /* cut by the callback after 5 tokens: the head's rows left behind */
    specdec_generate_params_set_tree(&reqs[1].gp, shape, 2);
    reqs[3].gp.verify = SPECDEC_VERIFY_MATCH; /* a match chain */
    specdec_request_id ids[4];
    for (int i = 0; i < 4; i++)
        if (reference(e, &reqs[i])) return;
    SD_CHECK(reqs[0].n_ref == 5 && reqs[0].ref_stats.stop_reason == SPECDEC_STOP_CALLBACK, "%s: callback stop: %d",
             name, (int)reqs[0].n_ref);
    specdec_engine_params ep = cpu_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 1;
    specdec_scheduler *s = NULL;
    const specdec_status st = specdec_scheduler_create(t, h, &ep, &sp, &s);
    SD_CHECK(st == SPECDEC_OK && s, "%s: one-slot scheduler: %s", name, specdec_last_error());
    if (!s) return;
    for (int i = 0; i < 4; i++) {
        reqs[i].gp.callback = reqs[i].stop_after > 0 ? on_token : NULL;
        reqs[i].gp.user_data = &reqs[i];
        reqs[i].submit_st = specdec_scheduler_submit(s, reqs[i].prompt, reqs[i].n_prompt, &reqs[i].gp, &ids[i]);
    }
    for (int i = 0; i < 4; i++) {
        req *r = &reqs[i];
        if (r->submit_st == SPECDEC_OK)
            r->wait_st = specdec_scheduler_wait(s, ids[i], -1, r->out, CAP, &r->n_out, &r->stats, &r->outcome);
        SD_CHECK(r->submit_st == SPECDEC_OK && r->wait_st == SPECDEC_OK && r->outcome == SPECDEC_OK &&
                     r->n_out == r->n_ref && !memcmp(r->out, r->ref, sizeof(int32_t) * (size_t)r->n_ref) &&
                     r->stats.n_rounds == r->ref_stats.n_rounds && r->stats.n_accepted == r->ref_stats.n_accepted,
                 "%s: one slot, request %d: %d tokens vs %d (outcome %s)", name, i, (int)r->n_out, (int)r->n_ref,
                 specdec_status_string(r->outcome));
    }
    specdec_scheduler_free(s);
}

/* On CUDA: a scheduler with a head runs where a device exists (its CUDA head runners:
 * tests/eagle3/test_eagle3_cuda.c checks their outputs); without one, the backend's named
 * absence, never a crash. */
static void check_cuda_scheduler(const specdec_model *t, const specdec_model *h) {
    specdec_engine_params ep = cpu_params();
    ep.backend = SPECDEC_BACKEND_CUDA;
    specdec_scheduler *s = NULL;
    const specdec_status st = specdec_scheduler_create(t, h, &ep, NULL, &s);
    if (specdec_cuda_device_count() > 0)
        SD_CHECK(st == SPECDEC_OK && s, "scheduler with a head on CUDA: %s (%s)", specdec_status_string(st),
                 specdec_last_error());
    else
        SD_CHECK(st == SPECDEC_ERR_BACKEND_UNAVAILABLE && !s, "scheduler with a head on CUDA without a device: %s (%s)",
                 specdec_status_string(st), specdec_last_error());
    specdec_scheduler_free(s);
}

/* 4. one copy of the head's weights per scheduler (see the top) */
static void check_shared_weights(const char *name, const specdec_model *t, const specdec_model *h) {
    specdec_engine_params ep = cpu_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 4;
    specdec_scheduler *s = NULL, *s2 = NULL;
    const int failed_before = sd_test_fail_count;
    specdec_status st = specdec_scheduler_create(t, h, &ep, &sp, &s);
    if (st == SPECDEC_OK) st = specdec_scheduler_create(t, h, &ep, &sp, &s2);
    SD_CHECK(st == SPECDEC_OK && s && s2, "%s: schedulers on 4 slots: %s", name, specdec_last_error());
    if (s && s2) {
        const sd_eagle3_weights *loaded = &h->eagle3->w;
        sd_eagle3_runner *r0 = sd_eagle3_runner_of(s->seqs[0].d);
        const sd_eagle3_weights *w0 = sd_eagle3_cpu_runner_weights(s->seqs[0].d);
        SD_CHECK(r0 && r0->shared && w0 && w0->dtype == SD_F32 && w0->wq.dtype == SD_F32 &&
                     w0->wq.data != loaded->wq.data && w0->lm_head.data != loaded->lm_head.data,
                 "%s: slot 0's forward does not read a widened F32 copy (dtype %d)", name, w0 ? (int)w0->dtype : -1);
        for (int32_t i = 1; r0 && w0 && i < sp.max_active; i++) {
            sd_eagle3_runner *ri = sd_eagle3_runner_of(s->seqs[i].d);
            const sd_eagle3_weights *wi = sd_eagle3_cpu_runner_weights(s->seqs[i].d);
            SD_CHECK(ri && ri != r0 && ri->shared == r0->shared && wi && wi->fc.data == w0->fc.data &&
                         wi->wq.data == w0->wq.data && wi->w_down.data == w0->w_down.data &&
                         wi->lm_head.data == w0->lm_head.data,
                     "%s: slot %d reads weights at %p, slot 0 at %p (shared %p / %p): a copy per slot", name, (int)i,
                     wi ? wi->wq.data : NULL, w0->wq.data, ri ? (void *)ri->shared : NULL, (void *)r0->shared);
            SD_CHECK(ri && ri->g != r0->g && ri->logits != r0->logits && ri->aux != r0->aux,
                     "%s: slot %d shares its buffers with slot 0", name, (int)i);
        }
        const sd_eagle3_weights *o0 = sd_eagle3_cpu_runner_weights(s2->seqs[0].d);
        SD_CHECK(o0 && w0 && o0->wq.data != w0->wq.data && sd_eagle3_runner_of(s2->seqs[0].d)->shared != r0->shared,
                 "%s: two schedulers read one copy", name);
    }
    specdec_scheduler_free(s2);
    specdec_scheduler_free(s);
    if (sd_test_fail_count == failed_before) printf("%-28s 4 slots read one F32 copy of the head's matrices\n", name);
}

/* 5. fuse + one step of a fresh head runner over target runner tr: g [H], logits [Vd], g_next [H] */
static int head_calls(const specdec_model *t, const specdec_model *h, sd_runner *tr, float *g, float *logits,
                      float *gnext, uint64_t *jobs) {
    sd_errbuf eb = {{0}};
    sd_runner *hr = NULL;
    specdec_status st = sd_engine_make_head(t, h, SPECDEC_BACKEND_CPU, tr, N_CTX, NULL, &hr, &eb);
    SD_CHECK(st == SPECDEC_OK && hr, "head runner: %s", eb.msg);
    if (!hr) return 1;
    sd_eagle3_runner *r = sd_eagle3_runner_of(hr);
    const int32_t tH = h->eagle3->w.cfg.target_hidden;
    float *aux = calloc((size_t)3 * tH, sizeof(float));
    for (int32_t i = 0; aux && i < 3 * tH; i++) aux[i] = (float)((i * 37 % 101) - 50) / 25.0f;
    const uint64_t before = sd_cpu_pool_jobs(sd_cpu_runner_pool(tr));
    int32_t tok[2] = {5, 6}, pos[2] = {0, 1};
    st = aux ? r->ops->fuse(r, aux, 1, g) : SPECDEC_ERR_OUT_OF_MEMORY;
    /* a cache row first (no output), then a row that attends to two keys over every head */
    if (st == SPECDEC_OK) st = r->ops->step(r, &tok[0], g, &pos[0], 1, NULL, 0, NULL, NULL);
    if (st == SPECDEC_OK) st = r->ops->step(r, &tok[1], g, &pos[1], 1, NULL, 0, logits, gnext);
    *jobs = sd_cpu_pool_jobs(sd_cpu_runner_pool(tr)) - before;
    SD_CHECK(st == SPECDEC_OK, "head fuse + step: %s (%s)", specdec_status_string(st), hr->err.msg);
    free(aux);
    sd_runner_destroy(hr);
    return st != SPECDEC_OK;
}

static void check_head_threads(const char *name, const specdec_model *t, const specdec_model *h) {
    sd_errbuf eb = {{0}};
    sd_runner *t1 = NULL, *t3 = NULL;
    specdec_status st = sd_cpu_runner_create(&t->w, N_CTX, 16, &t1, &eb);
    if (st == SPECDEC_OK) st = sd_cpu_runner_create(&t->w, N_CTX, 16, &t3, &eb);
    SD_CHECK(st == SPECDEC_OK, "%s: target runners: %s", name, eb.msg);
    const int32_t H = h->eagle3->w.cfg.layer.hidden_size, Vd = h->eagle3->w.cfg.draft_vocab;
    float *buf = calloc((size_t)2 * (2 * H + Vd), sizeof(float));
    if (st == SPECDEC_OK && buf) {
        sd_cpu_group_set_threads(sd_cpu_runner_group(t1), 1);
        sd_cpu_group_set_threads(sd_cpu_runner_group(t3), 3);
        sd_cpu_pool *pool = sd_cpu_runner_pool(t3);
        SD_CHECK(pool && sd_cpu_pool_threads(pool) == 3, "%s: a 3-thread target pool", name);
        if (pool) sd_cpu_pool_set_min_work(pool, 0);
        float *a = buf, *b = buf + 2 * H + Vd;
        uint64_t jobs1 = 0, jobs3 = 0;
        /* the threaded run first: its attention scratch is fresh memory, not the 1-thread run's freed buffers */
        if (!head_calls(t, h, t3, b, b + H, b + H + Vd, &jobs3) && !head_calls(t, h, t1, a, a + H, a + H + Vd, &jobs1)) {
            SD_CHECK(memcmp(a, b, (size_t)(2 * H + Vd) * sizeof(float)) == 0,
                     "%s: the head on 3 threads differs from 1 thread", name);
            SD_CHECK(jobs3 > 0 && jobs1 == 0, "%s: pool jobs during the head's calls: %llu (3 threads), %llu (1)", name,
                     (unsigned long long)jobs3, (unsigned long long)jobs1);
            if (jobs3 > 0)
                printf("%-28s the head's fuse + step on the target's 3 threads: bitwise, %llu pool jobs\n", name,
                       (unsigned long long)jobs3);
        }
    }
    free(buf);
    sd_runner_destroy(t3);
    sd_runner_destroy(t1);
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: test_eagle3_sched FIXTURE_DIR [MAX_PREDICT]\n");
        return 2;
    }
    if (argc == 3) MAX_PREDICT = atoi(argv[2]);
    if (MAX_PREDICT < 13 || MAX_PREDICT > CAP) MAX_PREDICT = 40;
    specdec_model *t = e3_load(argv[1], "target");
    int n_shared_checked = 0;
    static const char *heads[] = {"flat_f32_d2t", "flat_bf16_embed_bias", "speculators_f16_t2d",
                                  "speculators_f32_fullvocab"};
    for (size_t i = 0; t && i < sizeof heads / sizeof heads[0]; i++) {
        specdec_model *h = e3_load(argv[1], heads[i]);
        specdec_engine_params ep = cpu_params();
        specdec_engine *e = NULL;
        if (h) SD_CHECK(specdec_engine_create(t, h, &ep, &e) == SPECDEC_OK, "engine: %s", specdec_last_error());
        if (e) check_mixed(heads[i], t, h, e);
        if (e) check_one_slot(heads[i], t, h, e);
        if (h && i == 0) check_cuda_scheduler(t, h);
        if (h) check_head_threads(heads[i], t, h);
        if (h && h->eagle3->w.dtype != SD_F32) {
            check_shared_weights(heads[i], t, h);
            n_shared_checked++;
        }
        specdec_engine_free(e);
        specdec_model_free(h);
    }
    SD_CHECK(!t || n_shared_checked == 2, "the sharing check ran for %d heads, not the F16 and the BF16 one",
             n_shared_checked);
    specdec_model_free(t);
    return sd_test_done();
}

/* sd_scheduler.c — specdec_scheduler_*: many requests on one model pair, decoded
 * together (see sd_sched_impl.h for the model, sd_sched_loop.c for the loop thread).
 * This file holds the public calls: creation (the models as runner groups, the
 * sequence slots, the round: the batched CUDA device round on CUDA groups, else the shared
 * host round), requests (validation shared with
 * specdec_generate, copies, the KV reservation), the FIFO queue and the id table,
 * cancel, wait, metrics, shutdown and free. Allocation happens only in create and
 * submit (through sd_alloc, so tests can fail each allocation). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "specdec.h"
#include "sd_alloc.h"
#include "sd_cuda_backend.h"
#include "sd_engine.h"
#include "sd_grammar.h"
#include "sd_error.h"
#include "sd_host_round.h"
#include "sd_math.h"
#include "sd_model.h"
#include "sd_sched_impl.h"
#include "sd_tree_shape.h"

_Thread_local const specdec_scheduler *sd_sched_self;

/* ------------------------------------------------------------------------- */
/* requests: id table, queue, allocation                                      */
/* ------------------------------------------------------------------------- */
static sd_req **sd_sched_slot(specdec_scheduler *s, specdec_request_id id) {
    sd_req **pp = &s->buckets[(size_t)id & (s->n_buckets - 1)];
    while (*pp && (*pp)->id != id) pp = &(*pp)->hnext;
    return pp;
}

static sd_req *sd_sched_find(specdec_scheduler *s, specdec_request_id id) {
    return id > 0 ? *sd_sched_slot(s, id) : NULL;
}

static void sd_sched_unlink_id(specdec_scheduler *s, sd_req *r) {
    sd_req **pp = sd_sched_slot(s, r->id);
    if (*pp == r) *pp = r->hnext;
}

/* FCFS: at the tail. PRIORITY: before the first queued request of a later (priority, id) (its id
 * is the newest, so after every one of its priority): the queue stays in sd_req_before order. */
static void sd_queue_push(specdec_scheduler *s, sd_req *r) {
    sd_req *next = NULL;
    if (s->p.scheduling_policy == SPECDEC_SCHEDULING_PRIORITY)
        for (next = s->q_head; next && !sd_req_before(r, next);) next = next->qnext;
    r->qnext = next;
    r->qprev = next ? next->qprev : s->q_tail;
    if (r->qprev) r->qprev->qnext = r;
    else s->q_head = r;
    if (next) next->qprev = r;
    else s->q_tail = r;
    s->m.queued++;
}

void sd_queue_remove(specdec_scheduler *s, sd_req *r) {
    if (r->qprev) r->qprev->qnext = r->qnext;
    else s->q_head = r->qnext;
    if (r->qnext) r->qnext->qprev = r->qprev;
    else s->q_tail = r->qprev;
    r->qprev = r->qnext = NULL;
    s->m.queued--;
}

static void sd_req_free(sd_req *r) {
    if (!r) return;
    sd_free(r->prompt);
    sd_free(r->stop_block);
    sd_free(r->proc_block);
    sd_grammar_release(r->gp.grammar); /* the request's reference (sd_req_new) */
    sd_free(r->text_win);
    specdec_detok_stream_free(r->ds);
    sd_free(r);
}

/* Copy the stop strings into one block: pointers first, then the bytes. */
static specdec_status sd_req_copy_stops(sd_req *r, const specdec_generate_params *p) {
    if (p->n_stop_strings <= 0) {
        r->gp.stop_strings = NULL;
        r->gp.n_stop_strings = 0;
        return SPECDEC_OK;
    }
    size_t n = (size_t)p->n_stop_strings, bytes = n * sizeof(char *);
    for (size_t i = 0; i < n; i++) bytes += strlen(p->stop_strings[i]) + 1;
    r->stop_block = sd_malloc(bytes);
    if (!r->stop_block)
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_submit: %zu bytes of stop strings", bytes);
    char **ptrs = (char **)(void *)r->stop_block;
    char *dst = r->stop_block + n * sizeof(char *);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(p->stop_strings[i]) + 1;
        memcpy(dst, p->stop_strings[i], len);
        ptrs[i] = dst;
        dst += len;
    }
    r->gp.stop_strings = (const char *const *)ptrs;
    return SPECDEC_OK;
}

/* Copy the logits processors' arrays (logit_bias, stop_token_ids, allowed_token_ids,
 * bad_words_ids, bad_words_offsets; since 0.5.4 grammar_after_tokens) into one block. */
static specdec_status sd_req_copy_proc(sd_req *r, const specdec_generate_params *p) {
    const size_t nb = p->n_logit_bias > 0 ? (size_t)p->n_logit_bias : 0;
    const size_t ns = p->n_stop_token_ids > 0 ? (size_t)p->n_stop_token_ids : 0;
    const size_t na = p->n_allowed_token_ids > 0 ? (size_t)p->n_allowed_token_ids : 0;
    const size_t nw = p->n_bad_words > 0 ? (size_t)p->n_bad_words : 0;
    const size_t nwi = nw ? (size_t)p->bad_words_offsets[nw] : 0; /* checked by the caller */
    const size_t ng = p->n_grammar_after_tokens > 0 ? (size_t)p->n_grammar_after_tokens : 0;
    r->gp.logit_bias = NULL;
    r->gp.stop_token_ids = NULL;
    r->gp.allowed_token_ids = r->gp.bad_words_ids = r->gp.bad_words_offsets = r->gp.grammar_after_tokens = NULL;
    const size_t n_ids = ns + na + nwi + (nw ? nw + 1 : 0) + ng;
    if (nb + n_ids == 0) return SPECDEC_OK;
    const size_t bytes = nb * sizeof(specdec_logit_bias) + n_ids * sizeof(int32_t);
    if (!(r->proc_block = sd_malloc(bytes)))
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY,
                       "specdec_scheduler_submit: %zu bytes of logit_bias, stop_token_ids, allowed_token_ids and bad_words",
                       bytes);
    specdec_logit_bias *b = r->proc_block;
    int32_t *ids = (int32_t *)(void *)(b + nb);
    if (nb) memcpy(b, p->logit_bias, nb * sizeof *b);
    r->gp.logit_bias = nb ? b : NULL;
    if (ns) memcpy(ids, p->stop_token_ids, ns * sizeof *ids);
    r->gp.stop_token_ids = ns ? ids : NULL;
    ids += ns;
    if (na) memcpy(ids, p->allowed_token_ids, na * sizeof *ids);
    r->gp.allowed_token_ids = na ? ids : NULL;
    ids += na;
    if (nw) {
        memcpy(ids, p->bad_words_ids, nwi * sizeof *ids);
        memcpy(ids + nwi, p->bad_words_offsets, (nw + 1) * sizeof *ids);
        r->gp.bad_words_ids = ids;
        r->gp.bad_words_offsets = ids + nwi;
        ids += nwi + nw + 1;
    }
    if (ng) memcpy(ids, p->grammar_after_tokens, ng * sizeof *ids);
    r->gp.grammar_after_tokens = ng ? ids : NULL;
    return SPECDEC_OK;
}

/* A request holding copies of the prompt and params and room for its output. */
static specdec_status sd_req_new(const specdec_scheduler *s, const int32_t *prompt, int32_t n_prompt,
                                 const specdec_generate_params *p, sd_req **out) {
    *out = NULL;
    sd_req *r = sd_calloc(1, sizeof *r);
    if (!r) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_submit: request record");
    int32_t room = s->n_ctx - n_prompt;
    r->n_prompt = n_prompt;
    r->cap = p->n_predict < room ? p->n_predict : room;
    r->gp = *p;
    if (r->gp.grammar) sd_grammar_retain(r->gp.grammar); /* the caller may free it after submit */
    atomic_init(&r->cancel, 0);
    r->prompt = sd_malloc(((size_t)n_prompt + (size_t)r->cap) * sizeof(int32_t));
    if (!r->prompt) {
        int32_t cap = r->cap;
        sd_req_free(r);
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_submit: prompt of %d tokens + output of %d",
                       (int)n_prompt, (int)cap);
    }
    memcpy(r->prompt, prompt, (size_t)n_prompt * sizeof(int32_t));
    r->out = r->prompt + n_prompt;
    specdec_status st = sd_req_copy_stops(r, p);
    if (st == SPECDEC_OK) st = sd_req_copy_proc(r, p);
    if (st == SPECDEC_OK && p->n_stop_strings > 0 && !(r->text_win = sd_malloc(SD_GEN_TEXT_WIN)))
        st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_submit: the stop strings' text window");
    if (st == SPECDEC_OK && p->tokenizer && (st = specdec_detok_stream_create(p->tokenizer, 1, &r->ds)) != SPECDEC_OK)
        st = sd_fail(NULL, st, "specdec_scheduler_submit: the streaming detokenizer: %s", specdec_last_error());
    if (st != SPECDEC_OK) {
        sd_req_free(r);
        return st;
    }
    *out = r;
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* validation (specdec_generate's, plus the KV pool)                          */
/* ------------------------------------------------------------------------- */
/* The blocks one model's cache of a request holds at most: those of `rows` rows, or,
 * when its group gives blocks behind a sliding window back, what such a sequence holds
 * at once (core/sd_kv.h sd_kv_window_blocks) if that is less: no call appends more than
 * one prefill chunk (min(max_batch, n_prompt) rows) or one round (<= SD_RUNNER_TREE_MAX). */
static int32_t sd_sched_model_blocks(const specdec_scheduler *s, const sd_runner_group *g, int32_t rows,
                                     int32_t n_prompt) {
    const int32_t full = sd_kv_blocks_for(rows, s->p.kv_block_tokens);
    if (!g || g->kv_window <= 0) return full;
    int32_t chunk = g->max_batch < n_prompt ? g->max_batch : n_prompt;
    if (chunk < SD_RUNNER_TREE_MAX) chunk = SD_RUNNER_TREE_MAX;
    const int32_t win = sd_kv_window_blocks(g->kv_window, SD_RUNNER_WINDOW_MARGIN, chunk, s->p.kv_block_tokens);
    return win < full ? win : full;
}

/* KV blocks per model a request reserves (see sd_sched_impl.h "Admission control"): the
 * most either model's cache of it can ever hold (an EAGLE-3 head's cache is not in a pool:
 * the target's alone). */
static int32_t sd_sched_need_blocks(const specdec_scheduler *s, int32_t n_prompt, const specdec_generate_params *p) {
    sd_draft_shape req;
    int tree = 0;
    (void)sd_tree_request(p, 1, &req, &tree, NULL); /* the request was checked */
    int64_t rows = (int64_t)n_prompt + p->n_predict + (tree ? SPECDEC_MAX_TREE_NODES : 0);
    if (rows > s->n_ctx) rows = s->n_ctx;
    const int32_t t = sd_sched_model_blocks(s, s->gt, (int32_t)rows, n_prompt);
    const int32_t d = s->has_draft && !s->head ? sd_sched_model_blocks(s, s->gd, (int32_t)rows, n_prompt) : 0;
    return t > d ? t : d;
}

/* Most rows one round of the request adds beyond its kv length (OPTIMISTIC admission's step,
 * sd_sched_impl.h): the pending token and a tree's nodes, or a chain's (or jump-forward's)
 * tokens, + 1 of margin. */
static int32_t sd_sched_round_rows(const specdec_generate_params *p) {
    sd_draft_shape req;
    int tree = 0;
    (void)sd_tree_request(p, 1, &req, &tree, NULL); /* the request was checked */
    return 2 + (tree ? SPECDEC_MAX_TREE_NODES : SPECDEC_MAX_DRAFT);
}

static specdec_status sd_sched_check_request(const specdec_scheduler *s, const int32_t *prompt, int32_t n_prompt,
                                             const specdec_generate_params *p) {
    const char *fn = "specdec_scheduler_submit";
    specdec_status st = sd_gen_check_prompt(&s->env, prompt, n_prompt, fn, NULL);
    if (st == SPECDEC_OK) st = sd_gen_check_params(&s->env, p, fn, NULL);
    if (st != SPECDEC_OK) return st;
    if (p->priority != 0 && s->p.scheduling_policy != SPECDEC_SCHEDULING_PRIORITY)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                       "%s: priority %d needs a scheduler created with scheduling_policy PRIORITY (this one serves "
                       "first come, first served)", fn, (int)p->priority);
    const int32_t blocks = sd_sched_need_blocks(s, n_prompt, p);
    if (blocks > s->pool_blocks)
        return sd_fail(NULL, SPECDEC_ERR_CONTEXT_FULL,
                       "%s: %d prompt tokens + n_predict %d need %d KV blocks of %d tokens; the pool has %d", fn,
                       (int)n_prompt, (int)p->n_predict, (int)blocks, (int)s->p.kv_block_tokens, (int)s->pool_blocks);
    return SPECDEC_OK;
}

static specdec_status sd_sched_check_create(const specdec_scheduler_params *p) {
    const char *fn = "specdec_scheduler_create";
    if (p->max_active < 1 || p->max_active > SD_SCHED_MAX_ACTIVE)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: max_active %d outside [1, %d]", fn,
                       (int)p->max_active, SD_SCHED_MAX_ACTIVE);
    if (p->max_queued < 1 || p->max_queued > SD_SCHED_MAX_QUEUED)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: max_queued %d outside [1, %d]", fn,
                       (int)p->max_queued, SD_SCHED_MAX_QUEUED);
    if (p->kv_block_tokens < 1 || p->kv_block_tokens > SD_SCHED_MAX_BLOCK_TOKENS)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: kv_block_tokens %d outside [1, %d]", fn,
                       (int)p->kv_block_tokens, SD_SCHED_MAX_BLOCK_TOKENS);
    if (p->kv_pool_blocks < 0)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: kv_pool_blocks %d < 0", fn, (int)p->kv_pool_blocks);
    if (p->prefill_chunk < 0)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: prefill_chunk %d < 0", fn, (int)p->prefill_chunk);
    if (p->prefix_cache < SPECDEC_PREFIX_CACHE_AUTO || p->prefix_cache > SPECDEC_PREFIX_CACHE_ON)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: prefix_cache %d is not a specdec_prefix_cache (0..2)", fn,
                       (int)p->prefix_cache);
    if (p->scheduling_policy != SPECDEC_SCHEDULING_FCFS && p->scheduling_policy != SPECDEC_SCHEDULING_PRIORITY)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                       "%s: scheduling_policy %d is not a specdec_scheduling_policy (0..1)", fn,
                       (int)p->scheduling_policy);
    if (p->kv_admission < SPECDEC_KV_ADMISSION_AUTO || p->kv_admission > SPECDEC_KV_ADMISSION_OPTIMISTIC)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: kv_admission %d is not a specdec_kv_admission (0..2)",
                       fn, (int)p->kv_admission);
    for (size_t i = 0; i < sizeof p->reserved_i / sizeof p->reserved_i[0]; i++)
        if (p->reserved_i[i]) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: reserved_i[%zu] != 0", fn, i);
    for (size_t i = 0; i < sizeof p->reserved / sizeof p->reserved[0]; i++)
        if (p->reserved[i]) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: reserved[%zu] != 0", fn, i);
    return SPECDEC_OK;
}

/* Under the lock: mark r done and count it (its tokens and rounds were counted by the
 * loop as they happened). */
void sd_sched_done(specdec_scheduler *s, sd_req *r) {
    r->state = SD_REQ_DONE;
    r->dnext = NULL; /* the finished list's tail, for specdec_scheduler_wait_any */
    r->dprev = s->d_tail;
    if (s->d_tail) s->d_tail->dnext = r;
    else s->d_head = r;
    s->d_tail = r;
    r->in_done_list = 1;
    if (r->outcome == SPECDEC_OK) s->m.finished++;
    else if (r->outcome == SPECDEC_ERR_CANCELLED) s->m.cancelled++;
    else s->m.failed++;
    pthread_cond_broadcast(&s->done_cv);
}

/* Under the lock: take r off the finished list (reported by wait_any, or collected). */
static void sd_done_list_remove(specdec_scheduler *s, sd_req *r) {
    if (!r->in_done_list) return;
    if (r->dprev) r->dprev->dnext = r->dnext;
    else s->d_head = r->dnext;
    if (r->dnext) r->dnext->dprev = r->dprev;
    else s->d_tail = r->dprev;
    r->dprev = r->dnext = NULL;
    r->in_done_list = 0;
}

/* ------------------------------------------------------------------------- */
/* create / shutdown / free                                                   */
/* ------------------------------------------------------------------------- */
specdec_scheduler_params specdec_scheduler_default_params(void) {
    specdec_scheduler_params p;
    memset(&p, 0, sizeof p);
    p.max_active = 8;
    p.max_queued = 1024;
    p.kv_block_tokens = 16;
    p.kv_pool_blocks = 0;
    return p;
}

static specdec_status sd_sched_init_sync(specdec_scheduler *s) {
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc != 0)
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_create: pthread_condattr_init: %s",
                       strerror(rc));
    int stage = 0; /* how many of mutex, work_cv, done_cv exist */
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* waits immune to wall-clock jumps */
    if (rc == 0 && (rc = pthread_mutex_init(&s->mu, NULL)) == 0) stage = 1;
    if (stage == 1 && (rc = pthread_cond_init(&s->work_cv, &ca)) == 0) stage = 2;
    if (stage == 2 && (rc = pthread_cond_init(&s->done_cv, &ca)) == 0) stage = 3;
    pthread_condattr_destroy(&ca);
    if (stage == 3) {
        s->sync_ready = 1;
        return SPECDEC_OK;
    }
    if (stage >= 2) pthread_cond_destroy(&s->work_cv);
    if (stage >= 1) pthread_mutex_destroy(&s->mu);
    return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_create: mutex/condition init: %s",
                   strerror(rc));
}

static specdec_status sd_sched_alloc(specdec_scheduler *s) {
    size_t want = 2 * ((size_t)s->p.max_queued + (size_t)s->p.max_active), n = 64;
    while (n < want && n < ((size_t)1 << 16)) n *= 2; /* chains stay short; finished ones wait in them too */
    s->n_buckets = n;
    s->buckets = sd_calloc(n, sizeof *s->buckets);
    const size_t k = (size_t)s->p.max_active;
    s->seqs = sd_calloc(k, sizeof *s->seqs);
    s->gens = sd_calloc(k, sizeof *s->gens);
    s->batch_of = sd_calloc(k, sizeof *s->batch_of);
    if (!s->buckets || !s->seqs || !s->gens || !s->batch_of)
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_create: id table of %zu / %d sequence slots",
                       n, (int)s->p.max_active);
    return SPECDEC_OK;
}

/* The prefix cache of one model's group g (NULL: per-slot runners) as p.prefix_cache asks
 * (specdec_prefix_cache): AUTO where the group can cache, ON or UNSUPPORTED, OFF never. */
static specdec_status sd_sched_prefix(specdec_scheduler *s, sd_runner_group *g, int draft, sd_errbuf *eb) {
    if (s->p.prefix_cache == SPECDEC_PREFIX_CACHE_OFF) return SPECDEC_OK;
    specdec_status st = g ? sd_runner_group_enable_prefix(g, eb)
                          : sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "no prefix cache without runner groups");
    if (st == SPECDEC_ERR_UNSUPPORTED && (s->p.prefix_cache == SPECDEC_PREFIX_CACHE_AUTO || draft)) {
        sd_err_clear(eb); /* AUTO: off here; a draft model without one only prefills its whole prompt */
        return SPECDEC_OK;
    }
    return st;
}

/* One model's caches for every slot: runners of one group (*g), or where the backend
 * has no groups (CUDA for now) a runner of its own per slot (*g NULL). */
static specdec_status sd_sched_make_model(specdec_scheduler *s, const specdec_model *m, const sd_engine_plan *plan,
                                          specdec_backend *be, sd_runner_group **g, int draft) {
    sd_errbuf eb;
    sd_err_clear(&eb);
    specdec_status st = sd_engine_make_group(m, *be, &plan->params, plan->n_ctx, plan->max_batch, s->pool_blocks,
                                             s->p.kv_block_tokens, g, &eb);
    if (st == SPECDEC_ERR_BACKEND_UNAVAILABLE && plan->params.backend == SPECDEC_BACKEND_AUTO && !draft) {
        *be = SPECDEC_BACKEND_CPU; /* AUTO: CUDA built in but not usable after all */
        st = sd_engine_make_group(m, *be, &plan->params, plan->n_ctx, plan->max_batch, s->pool_blocks,
                                  s->p.kv_block_tokens, g, &eb);
    }
    const int per_slot = st == SPECDEC_ERR_UNSUPPORTED;
    if (per_slot) st = SPECDEC_OK;
    if (st == SPECDEC_OK) st = sd_sched_prefix(s, per_slot ? NULL : *g, draft, &eb);
    for (int32_t i = 0; i < s->p.max_active && st == SPECDEC_OK; i++) {
        sd_runner **r = draft ? &s->seqs[i].d : &s->seqs[i].t;
        st = per_slot ? sd_engine_make_runner(m, *be, &plan->params, plan->n_ctx, plan->max_batch, r, &eb)
                      : sd_runner_group_add(*g, r, &eb);
    }
    if (st != SPECDEC_OK)
        return sd_fail(NULL, st, "specdec_scheduler_create: %s model %s: %s", draft ? "draft" : "target", m->path, eb.msg);
    return SPECDEC_OK;
}

/* The executors and the round: on CUDA runner groups the batched device executor
 * (logits stay on the GPU) with the host executor for trees, else (the CPU, per-slot
 * runners, a vocabulary beyond the GPU sampler, an EAGLE-3 head: no draft group) the host
 * executor alone; the driver. */
static specdec_status sd_sched_make_round(specdec_scheduler *s, specdec_backend be, int has_draft, sd_errbuf *eb) {
    const int32_t n = s->p.max_active;
    specdec_status st = sd_host_exec_create(s->n_vocab, has_draft, n, &s->host_exec, eb);
    if (st != SPECDEC_OK) return st;
    if (be == SPECDEC_BACKEND_CUDA && s->gt && (!has_draft || s->gd)) {
        st = sd_cuda_batch_exec_create(s->gt, s->gd, n, &s->dev_exec, eb);
        if (st == SPECDEC_ERR_UNSUPPORTED) sd_err_clear(eb);
        else if (st != SPECDEC_OK) return st;
    }
    sd_exec *main = s->dev_exec ? s->dev_exec : s->host_exec, *fb = s->dev_exec ? s->host_exec : NULL;
    st = sd_round_create(main, fb, NULL, NULL, n, &s->round, eb);
    return st == SPECDEC_OK ? sd_driver_init(&s->driver, s->round, n, eb) : st;
}

/* An EAGLE-3 head: the head's weights once (sd_engine_make_head_shared, over slot 0's target
 * runner: every slot's is on the same device), then each slot's own head runner reading them
 * (its own draft cache of n_ctx rows and buffers) over that slot's target runner, whose group
 * then captures the head's states (sd_engine_make_head, the engine's). The runners hold the
 * references: the weights are freed with the last runner. */
static specdec_status sd_sched_make_heads(specdec_scheduler *s, const specdec_model *target, const specdec_model *head,
                                          const sd_engine_plan *plan, specdec_backend be) {
    sd_errbuf eb;
    sd_err_clear(&eb);
    sd_eagle3_shared *sh = NULL;
    specdec_status st = sd_engine_make_head_shared(target, head, be, s->seqs[0].t, plan->n_ctx, &sh, &eb);
    for (int32_t i = 0; i < s->p.max_active && st == SPECDEC_OK; i++)
        st = sd_engine_make_head(target, head, be, s->seqs[i].t, plan->n_ctx, sh, &s->seqs[i].d, &eb);
    sd_eagle3_shared_unref(sh);
    if (st != SPECDEC_OK)
        return sd_fail(NULL, st, "specdec_scheduler_create: %s %s: %s", head->eagle3 ? "EAGLE-3 head" : "MTP layer",
                       head->path, eb.msg);
    s->head = 1;
    return SPECDEC_OK;
}

static specdec_status sd_sched_make_models(specdec_scheduler *s, const specdec_model *target,
                                           const specdec_model *draft, const specdec_engine_params *ep) {
    sd_engine_plan plan;
    specdec_status st = sd_engine_plan_params(target, draft, ep, &plan);
    if (st != SPECDEC_OK) return st;
    s->n_ctx = plan.n_ctx;
    s->n_vocab = target->w.cfg.vocab_size;
    s->has_draft = draft != NULL;
    const int32_t per_seq = sd_kv_blocks_for(s->n_ctx, s->p.kv_block_tokens);
    s->pool_blocks = s->p.kv_pool_blocks > 0 ? s->p.kv_pool_blocks : s->p.max_active * per_seq;
    specdec_backend be = sd_engine_pick_backend(plan.params.backend);
    st = sd_sched_make_model(s, target, &plan, &be, &s->gt, 0);
    if (st == SPECDEC_OK && draft)
        st = sd_model_is_head(draft) ? sd_sched_make_heads(s, target, draft, &plan, be)
                           : sd_sched_make_model(s, draft, &plan, &be, &s->gd, 1);
    sd_errbuf eb;
    sd_err_clear(&eb);
    if (st == SPECDEC_OK && (st = sd_sched_make_round(s, be, draft != NULL, &eb)) != SPECDEC_OK)
        return sd_fail(NULL, st, "specdec_scheduler_create: %s", eb.msg);
    if (st != SPECDEC_OK) return st;
    s->env.n_ctx = s->n_ctx;
    s->env.n_vocab = s->n_vocab;
    s->env.has_draft = s->has_draft;
    s->env.has_eagle3 = s->head;
    s->env.has_mtp = s->head && sd_model_is_mtp(draft);
    /* one call of each model: the root and the nodes (as the engine: a head's rows bound it) */
    const int32_t d_rows = draft ? s->seqs[0].d->max_batch : 0;
    s->env.tree_fit = draft ? sd_min_i32(plan.max_batch - 1, d_rows) : 0;
    s->env.tree_fit_solo = plan.max_batch - 1;
    s->prefill_budget = s->p.prefill_chunk > 0 ? s->p.prefill_chunk : INT32_MAX; /* 0: whole prompts (0.4.0's way) */
    s->env.special = plan.special;
    /* KV admission (specdec_kv_admission): OPTIMISTIC needs the target's paged pool */
    if (s->p.kv_admission == SPECDEC_KV_ADMISSION_OPTIMISTIC && !s->gt)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED,
                       "specdec_scheduler_create: kv_admission OPTIMISTIC needs runner groups (a paged KV pool); "
                       "this backend has a cache per slot");
    s->optimistic = s->gt && s->p.kv_admission != SPECDEC_KV_ADMISSION_RESERVE;
    s->m.kv_blocks_total = s->pool_blocks;
    s->m.draft_kv_blocks_total = draft && !s->head ? s->pool_blocks : 0; /* a head's cache is per slot */
    return SPECDEC_OK;
}

static specdec_status sd_sched_start(specdec_scheduler *s) {
    int rc = pthread_create(&s->thread, NULL, sd_sched_loop, s);
    if (rc != 0)
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_create: starting the loop thread: %s",
                       strerror(rc));
    s->started = 1;
    return SPECDEC_OK;
}

/* Under the lock: end every queued request as CANCELLED and flag the running ones. */
static void sd_sched_cancel_all(specdec_scheduler *s) {
    while (s->q_head) {
        sd_req *r = s->q_head;
        sd_queue_remove(s, r);
        r->outcome = SPECDEC_ERR_CANCELLED;
        sd_sched_done(s, r);
    }
    for (int32_t i = 0; s->seqs && i < s->p.max_active; i++)
        if (s->seqs[i].req) atomic_store_explicit(&s->seqs[i].req->cancel, 1, memory_order_release);
}

void specdec_scheduler_shutdown(specdec_scheduler *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    if (!s->stopping) {
        s->stopping = 1;
        sd_sched_cancel_all(s);
        pthread_cond_broadcast(&s->work_cv);
    }
    if (sd_sched_self == s) { /* from a token callback: the loop cannot join itself */
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (!s->join_claimed) {
        s->join_claimed = 1;
        pthread_mutex_unlock(&s->mu);
        if (s->started) pthread_join(s->thread, NULL);
        pthread_mutex_lock(&s->mu);
        s->joined = 1;
        pthread_cond_broadcast(&s->done_cv);
    }
    while (!s->joined) pthread_cond_wait(&s->done_cv, &s->mu); /* another thread is joining */
    pthread_mutex_unlock(&s->mu);
}

/* Free everything; the loop must have stopped (or never started). */
static void sd_sched_destroy(specdec_scheduler *s) {
    if (s->buckets)
        for (size_t b = 0; b < s->n_buckets; b++)
            while (s->buckets[b]) {
                sd_req *r = s->buckets[b];
                s->buckets[b] = r->hnext;
                sd_req_free(r);
            }
    sd_driver_free(&s->driver);
    sd_round_destroy(s->round); /* the round and the executors borrow the runners: first */
    sd_exec_destroy(s->dev_exec);
    sd_exec_destroy(s->host_exec);
    for (int32_t i = 0; s->seqs && i < s->p.max_active; i++) {
        sd_runner_destroy(s->seqs[i].t);
        sd_runner_destroy(s->seqs[i].d);
    }
    sd_runner_group_destroy(s->gt);
    sd_runner_group_destroy(s->gd);
    sd_free(s->buckets);
    sd_free(s->seqs);
    sd_free(s->gens);
    sd_ngram_corpus_free(s->env.corpus);
    sd_free(s->batch_of);
    if (s->sync_ready) {
        pthread_cond_destroy(&s->done_cv);
        pthread_cond_destroy(&s->work_cv);
        pthread_mutex_destroy(&s->mu);
    }
    sd_free(s);
}

void specdec_scheduler_free(specdec_scheduler *s) {
    if (!s) return;
    if (sd_sched_self == s) { /* misuse: freeing from a token callback would free the running loop */
        (void)sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                      "specdec_scheduler_free called from a token callback: ignored");
        return;
    }
    specdec_scheduler_shutdown(s);
    sd_sched_destroy(s);
}

specdec_status specdec_scheduler_create(const specdec_model *target, const specdec_model *draft,
                                        const specdec_engine_params *engine_params,
                                        const specdec_scheduler_params *params, specdec_scheduler **out) {
    if (out) *out = NULL;
    if (!out || !target)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_create: %s is NULL",
                       !out ? "out" : "target");
    specdec_scheduler_params p = params ? *params : specdec_scheduler_default_params();
    specdec_status st = sd_sched_check_create(&p);
    if (st != SPECDEC_OK) return st;
    const double t0 = sd_gen_now();
    specdec_scheduler *s = sd_calloc(1, sizeof *s);
    if (!s) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_scheduler_create: scheduler record");
    s->p = p;
    st = sd_sched_init_sync(s);
    if (st == SPECDEC_OK) st = sd_sched_alloc(s);
    if (st == SPECDEC_OK) st = sd_sched_make_models(s, target, draft, engine_params);
    if (st == SPECDEC_OK && engine_params && engine_params->ngram_corpus_tokens > 0)
        st = sd_ngram_corpus_create(engine_params->ngram_corpus_tokens, &s->env.corpus, NULL);
    s->env.t_load_s = sd_engine_models_load_s(target, draft) + sd_gen_now() - t0;
    if (st == SPECDEC_OK) st = sd_sched_start(s);
    if (st != SPECDEC_OK) {
        sd_errbuf keep; /* shutting down may not touch the detail, but keep it safe */
        sd_err_copy(&keep, NULL);
        if (s->sync_ready) specdec_scheduler_shutdown(s); /* joins the threads that did start */
        sd_sched_destroy(s);
        sd_err_copy(NULL, &keep);
        return st;
    }
    *out = s;
    return SPECDEC_OK;
}

int32_t specdec_scheduler_n_ctx(const specdec_scheduler *s) { return s ? s->n_ctx : 0; }

const char *specdec_scheduler_last_error(const specdec_scheduler *s) {
    (void)s;
    return specdec_last_error();
}

/* ------------------------------------------------------------------------- */
/* submit / cancel / wait / metrics                                           */
/* ------------------------------------------------------------------------- */
specdec_status specdec_scheduler_submit(specdec_scheduler *s, const int32_t *prompt, int32_t n_prompt,
                                        const specdec_generate_params *params, specdec_request_id *out_id) {
    if (out_id) *out_id = 0;
    if (!s) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_submit: scheduler is NULL");
    specdec_generate_params defaults;
    if (!params) {
        defaults = specdec_generate_default_params();
        params = &defaults;
    }
    specdec_status st = SPECDEC_OK;
    if (!out_id) st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_submit: out_id is NULL");
    if (st == SPECDEC_OK) st = sd_sched_check_request(s, prompt, n_prompt, params);
    sd_req *r = NULL;
    if (st == SPECDEC_OK) st = sd_req_new(s, prompt, n_prompt, params, &r);
    pthread_mutex_lock(&s->mu);
    if (st == SPECDEC_OK && s->dead)
        st = sd_fail(NULL, SPECDEC_ERR_DEVICE_LOST, "specdec_scheduler_submit: the scheduler lost its device");
    if (st == SPECDEC_OK && s->stopping)
        st = sd_fail(NULL, SPECDEC_ERR_SHUT_DOWN, "specdec_scheduler_submit: the scheduler is shut down");
    if (st == SPECDEC_OK && s->m.queued >= s->p.max_queued)
        st = sd_fail(NULL, SPECDEC_ERR_QUEUE_FULL, "specdec_scheduler_submit: %d requests already queued",
                     (int)s->m.queued);
    if (st != SPECDEC_OK) {
        s->m.rejected++;
        pthread_mutex_unlock(&s->mu);
        sd_req_free(r);
        return st;
    }
    r->id = ++s->last_id;
    r->state = SD_REQ_QUEUED;
    r->need_blocks = sd_sched_need_blocks(s, n_prompt, params);
    r->round_rows = sd_sched_round_rows(params);
    r->hnext = *sd_sched_slot(s, r->id); /* NULL: ids are new */
    *sd_sched_slot(s, r->id) = r;
    sd_queue_push(s, r);
    s->m.submitted++;
    pthread_cond_signal(&s->work_cv);
    const specdec_request_id id = r->id; /* once unlocked r may finish and be collected (wait_any) */
    pthread_mutex_unlock(&s->mu);
    *out_id = id;
    return SPECDEC_OK;
}

specdec_status specdec_scheduler_cancel(specdec_scheduler *s, specdec_request_id id) {
    if (!s) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_cancel: scheduler is NULL");
    pthread_mutex_lock(&s->mu);
    sd_req *r = sd_sched_find(s, id);
    if (!r) {
        pthread_mutex_unlock(&s->mu);
        return sd_fail(NULL, SPECDEC_ERR_NOT_FOUND, "specdec_scheduler_cancel: no request %lld", (long long)id);
    }
    if (r->state == SD_REQ_QUEUED) {
        sd_queue_remove(s, r);
        r->outcome = SPECDEC_ERR_CANCELLED;
        sd_sched_done(s, r);
    } else if (r->state == SD_REQ_RUNNING) {
        atomic_store_explicit(&r->cancel, 1, memory_order_release);
    }
    pthread_mutex_unlock(&s->mu);
    return SPECDEC_OK;
}

/* Absolute CLOCK_MONOTONIC time timeout_ms from now. */
static struct timespec sd_deadline(int32_t timeout_ms) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += timeout_ms / 1000;
    t.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Under the lock: the request once it is done, NULL with *st set otherwise. */
static sd_req *sd_sched_wait_done(specdec_scheduler *s, specdec_request_id id, int32_t timeout_ms,
                                  specdec_status *st) {
    struct timespec dl = sd_deadline(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        sd_req *r = sd_sched_find(s, id); /* again after every wake-up: another waiter may collect it */
        if (!r) {
            *st = sd_fail(NULL, SPECDEC_ERR_NOT_FOUND, "specdec_scheduler_wait: no request %lld", (long long)id);
            return NULL;
        }
        if (r->state == SD_REQ_DONE) return r;
        int rc = 0;
        if (timeout_ms < 0) pthread_cond_wait(&s->done_cv, &s->mu);
        else if (timeout_ms > 0) rc = pthread_cond_timedwait(&s->done_cv, &s->mu, &dl);
        if (timeout_ms == 0 || rc == ETIMEDOUT) {
            r = sd_sched_find(s, id);
            if (r && r->state == SD_REQ_DONE) return r;
            *st = r ? sd_fail(NULL, SPECDEC_ERR_TIMEOUT, "specdec_scheduler_wait: request %lld still running",
                              (long long)id)
                    : sd_fail(NULL, SPECDEC_ERR_NOT_FOUND, "specdec_scheduler_wait: no request %lld", (long long)id);
            return NULL;
        }
    }
}

specdec_status specdec_scheduler_wait(specdec_scheduler *s, specdec_request_id id, int32_t timeout_ms,
                                      int32_t *out_tokens, int32_t capacity, int32_t *n_out, specdec_stats *stats,
                                      specdec_status *request_status) {
    if (!s || !n_out || !request_status || capacity < 0 || (capacity > 0 && !out_tokens))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                       "specdec_scheduler_wait: %s", !s ? "scheduler is NULL" : !n_out ? "n_out is NULL"
                       : !request_status ? "request_status is NULL" : "bad out_tokens / capacity");
    specdec_status st = SPECDEC_OK;
    pthread_mutex_lock(&s->mu);
    sd_req *r = sd_sched_wait_done(s, id, timeout_ms, &st);
    if (r && r->n_out > capacity) {
        const int32_t n = r->n_out; /* r stays uncollected: once unlocked another thread may collect it */
        *n_out = n;
        pthread_mutex_unlock(&s->mu);
        return sd_fail(NULL, SPECDEC_ERR_BUFFER_TOO_SMALL, "specdec_scheduler_wait: %d tokens, capacity %d", (int)n,
                       (int)capacity);
    }
    if (r) {
        sd_sched_unlink_id(s, r);
        sd_done_list_remove(s, r);
    }
    pthread_mutex_unlock(&s->mu);
    if (!r) return st;
    if (r->n_out > 0) memcpy(out_tokens, r->out, (size_t)r->n_out * sizeof(int32_t));
    *n_out = r->n_out;
    if (stats) *stats = r->stats;
    *request_status = r->outcome;
    sd_req_free(r);
    return SPECDEC_OK;
}

specdec_status specdec_scheduler_wait_any(specdec_scheduler *s, int32_t timeout_ms, specdec_request_id *out_id) {
    if (out_id) *out_id = 0;
    if (!s || !out_id)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_wait_any: %s is NULL",
                       !s ? "scheduler" : "out_id");
    const struct timespec dl = sd_deadline(timeout_ms > 0 ? timeout_ms : 0);
    specdec_status st = SPECDEC_OK;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        sd_req *r = s->d_head;
        if (r) {
            sd_done_list_remove(s, r);
            *out_id = r->id;
            break;
        }
        if ((s->stopping || s->dead) && s->m.queued == 0 && s->m.active == 0) { /* nothing can finish any more */
            st = s->stopping ? sd_fail(NULL, SPECDEC_ERR_SHUT_DOWN,
                                       "specdec_scheduler_wait_any: shut down, every finished request reported")
                             : sd_fail(NULL, SPECDEC_ERR_DEVICE_LOST,
                                       "specdec_scheduler_wait_any: the device was lost, every request reported");
            break;
        }
        int rc = 0;
        if (timeout_ms < 0) pthread_cond_wait(&s->done_cv, &s->mu);
        else if (timeout_ms > 0) rc = pthread_cond_timedwait(&s->done_cv, &s->mu, &dl);
        if (timeout_ms == 0 || rc == ETIMEDOUT) {
            if ((r = s->d_head) != NULL) {
                sd_done_list_remove(s, r);
                *out_id = r->id;
            } else {
                st = sd_fail(NULL, SPECDEC_ERR_TIMEOUT, "specdec_scheduler_wait_any: no request finished within %d ms",
                             (int)timeout_ms);
            }
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

specdec_status specdec_scheduler_get_metrics(const specdec_scheduler *s, specdec_scheduler_metrics *m) {
    if (!s || !m)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_scheduler_get_metrics: %s is NULL",
                       !s ? "scheduler" : "metrics");
    specdec_scheduler *ms = (specdec_scheduler *)s; /* the lock is the only thing changed */
    pthread_mutex_lock(&ms->mu);
    *m = s->m;
    pthread_mutex_unlock(&ms->mu);
    return SPECDEC_OK;
}

specdec_status specdec_scheduler_get_acceptance(const specdec_scheduler *s, int64_t *draft_rounds,
                                                int64_t *accepted_at, int32_t capacity) {
    if (!s || !draft_rounds || capacity < 0 || (capacity > 0 && !accepted_at))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                       "specdec_scheduler_get_acceptance: NULL scheduler, draft_rounds or accepted_at, or capacity < 0");
    specdec_scheduler *ms = (specdec_scheduler *)s;
    pthread_mutex_lock(&ms->mu);
    *draft_rounds = s->draft_rounds;
    for (int32_t i = 0; i < capacity; i++) accepted_at[i] = i < SPECDEC_MAX_DRAFT ? s->accepted_at[i] : 0;
    pthread_mutex_unlock(&ms->mu);
    return SPECDEC_OK;
}

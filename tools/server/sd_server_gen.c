/* sd_server_gen.c — one generation request: parse and validate the body, build the
 * prompt ids (the chat template via specdec_chat_tokenize, the tokenizer, or given ids),
 * submit to the scheduler (a "tree" passed through to tree speculation), then
 * either wait and answer with one JSON body, or stream server-sent events.
 *
 * Text comes from the generate callback's pieces (never a split UTF-8 sequence) and
 * goes through the stop filter (sd_stopper) under the job's lock: the token callback
 * runs on a scheduler thread, the connection's thread reads. While waiting, the
 * connection thread watches for a client that hung up, the per-request timeout and
 * server shutdown; each cancels the request (its KV cache is freed when it ends). A
 * job is freed only after its request was collected from the scheduler, so no
 * callback can touch it afterwards. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sd_server_internal.h"

#define SD_POLL_MS 20 /* how often a waiting connection checks its client and its deadline */

enum { PH_ROLE, PH_TEXT, PH_FINAL, PH_END };

typedef struct sd_job {
    sd_server *srv;
    struct MHD_Connection *conn;   /* valid until the response is done (not in the free callback) */
    int chat, stream, include_usage;
    char id[48];
    long created;
    specdec_request_id rid;
    long serial;                   /* this server's request number */
    int32_t n_prompt, cap, n_draft;
    sd_spec_resolved spec;         /* its drafter (speculative_config over the server's) */
    int32_t tree[SD_API_MAX_TREE];  /* the request's draft tree (n_tree 0: a chain of n_draft) */
    int n_tree;
    int32_t draft_nodes;
    int32_t *tokens;               /* [cap] the collected output ids */
    specdec_verify_mode verify;
    char *stops[SD_API_MAX_STOP];  /* owned, taken from the request */
    int n_stop;
    /* shared with the token callback, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sd_buf text;                   /* everything generated */
    sd_stopper stopper;
    int32_t n_emitted;
    sd_lp_entry *lp;               /* [lp_cap] the emitted tokens' logprobs (logprobs asked for) */
    int32_t n_lp, lp_cap;
    int32_t lp_resolved;           /* lp[0..lp_resolved) know where their text ends */
    int lp_oom;                    /* no room for an entry: the request stopped */
    double t_first;
    double t_last_step;            /* when the last round that emitted tokens for it emitted them */
    int64_t last_step;             /* the scheduler's round count seen then (rounds tell steps apart) */
    /* the connection thread's */
    double t_arrival, t_submit, deadline;
    int cancelled, timed_out, disconnected, done;
    specdec_status outcome;
    specdec_stats stats;
    int32_t n_out;
    size_t sent;                   /* text bytes already streamed */
    int logprobs;                  /* the request asked for logprobs */
    int32_t lp_sent;               /* entries already streamed */
    sd_cp_cursor cur;              /* text_offset's count so far */
    sd_lp_span span;               /* what the result's lp points to */
    int phase;
    sd_buf out;                    /* SSE bytes not yet handed to libmicrohttpd */
    size_t out_pos;
} sd_job;

/* ------------------------------------------------------------------------- */
/* job lifetime                                                               */
/* ------------------------------------------------------------------------- */
static sd_job *sd_job_new(sd_server *srv, struct MHD_Connection *c, sd_api_request *req) {
    sd_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    if (pthread_mutex_init(&j->mu, NULL) != 0) {
        free(j);
        return NULL;
    }
    if (pthread_cond_init(&j->cv, NULL) != 0) {
        pthread_mutex_destroy(&j->mu);
        free(j);
        return NULL;
    }
    j->srv = srv;
    j->conn = c;
    j->chat = req->chat;
    j->stream = req->stream;
    j->include_usage = req->include_usage;
    j->logprobs = req->logprobs;
    j->created = (long)time(NULL);
    j->serial = atomic_fetch_add(&srv->next_id, 1);
    snprintf(j->id, sizeof j->id, "%s-%lx%04lx", req->chat ? "chatcmpl" : "cmpl", (unsigned long)j->created,
             (unsigned long)j->serial);
    for (int i = 0; i < req->n_stop; i++) j->stops[i] = req->stop[i]; /* moved */
    j->n_stop = req->n_stop;
    req->n_stop = 0;
    sd_stop_init(&j->stopper, j->stops, j->n_stop);
    return j;
}

static sd_outcome sd_job_outcome(const sd_job *j);

/* Collect the request if it is still with the scheduler (cancelling it first), count how
 * it ended, then free. */
static void sd_job_free(sd_job *j) {
    if (!j) return;
    if (j->rid && !j->done) {
        specdec_scheduler_cancel(j->srv->sched, j->rid);
        int32_t n;
        specdec_status os;
        specdec_scheduler_wait(j->srv->sched, j->rid, -1, j->tokens, j->cap, &n, NULL, &os);
        sd_metrics_finish(&j->srv->metrics, SD_FIN_ABORT, sd_now() - j->t_arrival, 0, 0); /* left mid-stream */
    }
    if (j->rid) {
        sd_metrics_outcome(&j->srv->metrics, j->chat, j->stream, sd_job_outcome(j));
        atomic_fetch_sub(&j->srv->active_jobs, 1);
    }
    for (int i = 0; i < j->n_stop; i++) free(j->stops[i]);
    free(j->tokens);
    free(j->lp);
    sd_buf_free(&j->text);
    sd_buf_free(&j->out);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* vLLM's time to first token (from arrival) and inter-token latency (between the engine
 * steps that emit tokens for a request: a speculative round emits several at once). The
 * scheduler's round count only moves between rounds, so tokens of one round see one
 * value. Scheduler thread, outside the scheduler's lock (get_metrics may be called). */
static void sd_job_step(sd_job *j) {
    specdec_scheduler_metrics m;
    if (specdec_scheduler_get_metrics(j->srv->sched, &m) != SPECDEC_OK) return;
    double now = sd_now();
    if (j->t_last_step == 0) sd_metrics_observe(&j->srv->metrics, SD_H_TTFT, now - j->t_arrival);
    else if (m.rounds != j->last_step) sd_metrics_observe(&j->srv->metrics, SD_H_ITL, now - j->t_last_step);
    else return;
    j->t_last_step = now;
    j->last_step = m.rounds;
}

/* Under mu: the entries whose token's text has come end where the text ends now. */
static void sd_job_resolve(sd_job *j) {
    for (; j->lp_resolved < j->n_lp; j->lp_resolved++) j->lp[j->lp_resolved].end = j->text.len;
}

/* The scheduler thread's side, called just before sd_job_on_token for the same token:
 * keep the token's logprobs. */
static int sd_job_on_logprob(void *ud, const specdec_token_logprobs *lp) {
    sd_job *j = ud;
    pthread_mutex_lock(&j->mu);
    if (j->n_lp == j->lp_cap) {
        int32_t cap = j->lp_cap ? 2 * j->lp_cap : 64;
        sd_lp_entry *p = j->lp_cap < INT32_MAX / 2 ? realloc(j->lp, (size_t)cap * sizeof *p) : NULL;
        if (p) j->lp = p, j->lp_cap = cap;
        else j->lp_oom = 1;
    }
    if (!j->lp_oom) {
        sd_lp_entry *e = &j->lp[j->n_lp++];
        int32_t n = lp->n_top < 0 ? 0 : lp->n_top > SPECDEC_MAX_TOP_LOGPROBS ? SPECDEC_MAX_TOP_LOGPROBS : lp->n_top;
        e->token = lp->token;
        e->logprob = lp->logprob;
        e->n_top = n;
        if (n) memcpy(e->top_tokens, lp->top_tokens, (size_t)n * sizeof(int32_t));
        if (n) memcpy(e->top_logprobs, lp->top_logprobs, (size_t)n * sizeof(float));
        e->end = (size_t)-1;
    }
    int stop = j->lp_oom;
    pthread_mutex_unlock(&j->mu);
    return stop;
}

/* The scheduler thread's side: append the piece, find stop sequences, wake the reader. */
static int sd_job_on_token(void *ud, int32_t tok, const char *piece, size_t len) {
    sd_job *j = ud;
    if (tok >= 0) sd_job_step(j);
    pthread_mutex_lock(&j->mu);
    if (tok >= 0 && j->n_emitted++ == 0) j->t_first = sd_now();
    if (len && j->stopper.stop_at == (size_t)-1) {
        size_t old = j->text.len;
        if (sd_buf_append(&j->text, piece, len) == 0) sd_stop_scan(&j->stopper, j->text.p, old, j->text.len);
        if (j->text.len > old) sd_job_resolve(j);
    }
    int stop = j->text.oom || j->lp_oom || j->stopper.stop_at != (size_t)-1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return stop;
}

/* ------------------------------------------------------------------------- */
/* prompt and parameters                                                      */
/* ------------------------------------------------------------------------- */
static int sd_gen_tokenize(sd_server *srv, const char *text, size_t len, int32_t **ids, int32_t *n,
                           sd_api_error *e) {
    int32_t cap = srv->n_ctx + 8; /* a prompt that does not fit here is refused: its count is enough */
    *ids = malloc((size_t)cap * sizeof(int32_t));
    if (!*ids) return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory for the prompt ids");
    specdec_status st = specdec_tokenize(srv->tok, text, len, 1, *ids, cap, n);
    if (st == SPECDEC_OK) return 0;
    free(*ids);
    *ids = NULL;
    if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) return 0; /* *n is the count: sd_gen_budget refuses it */
    return sd_api_fail(e, 500, "server_error", NULL, NULL, "tokenizing the prompt: %s",
                       specdec_tokenizer_last_error(srv->tok));
}

/* The chat prompt's ids: the conversation rendered with the server's chat family (the
 * model's own template, or --chat-template) and tokenized as that family needs. */
static int sd_gen_chat_ids(sd_server *srv, const sd_api_request *req, int32_t **ids, int32_t *n, sd_api_error *e) {
    if (!srv->chat_family)
        return sd_api_fail(e, 400, "invalid_request_error", "chat_template_unsupported", "messages",
                           "%s: this server cannot render chat prompts for its model (start it with --chat-template "
                           "NAME); /v1/completions works", srv->chat_problem);
    specdec_chat_message *m = malloc((size_t)req->n_messages * sizeof *m);
    if (!m) return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory for the conversation");
    for (int i = 0; i < req->n_messages; i++) {
        m[i].role = req->messages[i].role;
        m[i].content = req->messages[i].content;
    }
    int32_t cap = srv->n_ctx + 8; /* as sd_gen_tokenize: beyond the context the count is enough */
    specdec_status st = SPECDEC_ERR_OUT_OF_MEMORY;
    if ((*ids = malloc((size_t)cap * sizeof(int32_t))))
        st = specdec_chat_tokenize(srv->tok, srv->cfg.chat_template, m, req->n_messages, 1, *ids, cap, n);
    free(m);
    if (st == SPECDEC_OK) return 0;
    if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) {
        free(*ids);
        *ids = NULL;
        return 0;
    }
    free(*ids);
    *ids = NULL;
    *n = 0;
    if (st == SPECDEC_ERR_INVALID_ARGUMENT) /* the template refuses the conversation (its own message) */
        return sd_api_fail(e, 400, "invalid_request_error", NULL, "messages", "%s", specdec_last_error());
    if (st == SPECDEC_ERR_UNSUPPORTED)
        return sd_api_fail(e, 400, "invalid_request_error", "chat_template_unsupported", "messages", "%s",
                           specdec_last_error());
    return sd_api_fail(e, 500, "server_error", NULL, NULL, "rendering the chat prompt: %s: %s",
                       specdec_status_string(st), specdec_last_error());
}

static int sd_gen_prompt(sd_server *srv, const sd_api_request *req, int32_t **ids, int32_t *n, sd_api_error *e) {
    *ids = NULL;
    *n = 0;
    if (!req->chat && req->prompt_ids) {
        for (int32_t i = 0; i < req->n_prompt_ids; i++)
            if (req->prompt_ids[i] >= srv->n_vocab)
                return sd_api_fail(e, 400, "invalid_request_error", NULL, "prompt",
                                   "prompt token %d is %d, outside the vocabulary of %d", (int)i,
                                   (int)req->prompt_ids[i], (int)srv->n_vocab);
        *ids = malloc((size_t)req->n_prompt_ids * sizeof(int32_t));
        if (!*ids) return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        memcpy(*ids, req->prompt_ids, (size_t)req->n_prompt_ids * sizeof(int32_t));
        *n = req->n_prompt_ids;
        return 0;
    }
    /* the cost before the work: bytes, then a running count against the context */
    sd_bound b = {srv->n_ctx - (req->max_tokens > 0 ? req->max_tokens : 1), 0, 0};
    int rc = 0;
    if (!req->chat) {
        if ((rc = sd_prep_bytes(srv, req->prompt_len, "prompt", e)) ||
            (rc = sd_prep_bound(srv, &b, req->prompt, req->prompt_len, "prompt", e)))
            return rc;
        return sd_gen_tokenize(srv, req->prompt, req->prompt_len, ids, n, e);
    }
    size_t bytes = 0;
    for (int i = 0; i < req->n_messages; i++) bytes += strlen(req->messages[i].content);
    if ((rc = sd_prep_bytes(srv, bytes, "messages", e))) return rc;
    for (int i = 0; i < req->n_messages; i++)
        if ((rc = sd_prep_bound(srv, &b, req->messages[i].content, strlen(req->messages[i].content), "messages", e)))
            return rc;
    return sd_gen_chat_ids(srv, req, ids, n, e);
}

/* max_tokens against the context; the default when absent (16 for completions as
 * OpenAI, the rest of the context for chat). */
static int sd_gen_budget(const sd_server *srv, const sd_api_request *req, int32_t n_prompt, int32_t *n_predict,
                         sd_api_error *e) {
    const char *param = req->chat ? "messages" : "prompt";
    if (n_prompt == 0)
        return sd_api_fail(e, 400, "invalid_request_error", NULL, param, "the prompt is empty (0 tokens)");
    int32_t room = srv->n_ctx - n_prompt;
    if (room <= 0)
        return sd_api_fail(e, 400, "invalid_request_error", "context_length_exceeded", param,
                           "This model's maximum context length is %d tokens; the prompt has %d", (int)srv->n_ctx,
                           (int)n_prompt);
    if (req->max_tokens > room)
        return sd_api_fail(e, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                           "This model's maximum context length is %d tokens; the prompt has %d and max_tokens is %d",
                           (int)srv->n_ctx, (int)n_prompt, (int)req->max_tokens);
    *n_predict = req->max_tokens > 0 ? req->max_tokens : req->chat ? room : (room < 16 ? room : 16);
    return 0;
}

static uint64_t sd_mix64(uint64_t x) { /* splitmix64 finaliser: a seed when none is given */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static specdec_generate_params sd_gen_params(sd_job *j, const sd_api_request *req, int32_t n_predict) {
    const sd_server *srv = j->srv;
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = n_predict;
    gp.temperature = req->temperature;
    gp.top_p = req->top_p;
    gp.top_k = req->top_k;
    gp.min_p = req->min_p;
    gp.ignore_eos = req->ignore_eos;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t entropy = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 30) ^ (uint64_t)j->serial;
    gp.seed = req->has_seed ? req->seed : sd_mix64(entropy);
    gp.verify = req->verify;
    j->verify = req->verify != SPECDEC_VERIFY_AUTO ? req->verify
                : req->temperature == 0.0f    ? SPECDEC_VERIFY_GREEDY
                                              : SPECDEC_VERIFY_REJECTION; /* as the engine resolves AUTO */
    j->n_draft = j->spec.n_draft;
    gp.n_draft = j->n_draft;
    gp.draft_method = j->spec.method;
    gp.ngram_min = j->spec.ngram_min;
    gp.ngram_max = j->spec.ngram_max;
    if (req->n_tree > 0 || req->draft_nodes > 0) { /* the library ignores n_draft then */
        specdec_generate_params_set_tree(&gp, req->tree, req->n_tree); /* the parser checked the shape */
        gp.draft_nodes = req->draft_nodes;
        memcpy(j->tree, req->tree, sizeof j->tree);
        j->n_tree = req->n_tree;
        j->draft_nodes = req->draft_nodes;
        j->n_draft = 0;
    }
    gp.stop_strings = (const char *const *)j->stops;
    gp.n_stop_strings = j->n_stop;
    gp.tokenizer = srv->tok;
    gp.callback = sd_job_on_token;
    gp.user_data = j;
    if (req->logprobs) {
        gp.logprobs = 1;
        gp.top_logprobs = req->top_logprobs;
        gp.logprob_callback = sd_job_on_logprob;
        gp.logprob_user_data = j;
    }
    return gp;
}

static int sd_gen_submit_error(specdec_status st, sd_api_error *e) {
    const char *d = specdec_scheduler_last_error(NULL);
    switch (st) {
    case SPECDEC_ERR_QUEUE_FULL:
        return sd_api_fail(e, 429, "requests", "rate_limit_exceeded", NULL, "the server is busy: queue full, retry");
    case SPECDEC_ERR_SHUT_DOWN: return sd_api_fail(e, 503, "server_error", NULL, NULL, "the server is shutting down");
    case SPECDEC_ERR_INVALID_ARGUMENT: return sd_api_fail(e, 400, "invalid_request_error", NULL, NULL, "%s", d);
    case SPECDEC_ERR_CONTEXT_FULL:
        return sd_api_fail(e, 400, "invalid_request_error", "context_length_exceeded", NULL, "%s", d);
    default: return sd_api_fail(e, 500, "server_error", NULL, NULL, "%s: %s", specdec_status_string(st), d);
    }
}

/* The work before the scheduler, run on the prep pool (bounded): parse the body, check
 * and build the prompt, check the budget. */
typedef struct sd_gen_prep {
    sd_server *srv;
    int chat;
    const char *body;
    size_t len;
    sd_api_request req;  /* parsed when rc is 0 (or past parsing) */
    int parsed;
    int32_t *ids, n, n_predict;
    sd_spec_resolved spec; /* its drafter (speculative_config over the server's) */
    sd_api_error e;
    int rc;
} sd_gen_prep;

static void sd_gen_prep_run(void *arg) {
    sd_gen_prep *p = arg;
    sd_server *srv = p->srv;
    if (sd_api_parse(p->body, p->len, p->chat, srv->model_id, &p->req, &p->e) != 200) {
        p->rc = p->e.http;
        return;
    }
    p->parsed = 1;
    p->rc = sd_spec_resolve(&srv->spec, &p->req.spec, srv->draft ? srv->cfg.draft_dir : NULL, srv->draft_head,
                            srv->cfg.n_draft, p->req.n_draft, p->req.n_tree > 0 || p->req.draft_nodes > 0, &p->spec, &p->e);
    if (!p->rc) p->rc = sd_gen_prompt(srv, &p->req, &p->ids, &p->n, &p->e);
    if (!p->rc) p->rc = sd_gen_budget(srv, &p->req, p->n, &p->n_predict, &p->e);
}

/* Prepare (on the pool), submit. 0, or the HTTP status with *e set. */
static int sd_gen_start(sd_server *srv, struct MHD_Connection *c, int chat, const char *body, size_t len,
                        double t_arrival, sd_job **out, sd_api_error *e) {
    *out = NULL;
    sd_gen_prep p = {.srv = srv, .chat = chat, .body = body, .len = len};
    sd_prep_run(srv->prep, len, sd_gen_prep_run, &p);
    if (p.rc) {
        *e = p.e;
        free(p.ids);
        if (p.parsed) sd_api_request_free(&p.req);
        return p.rc;
    }
    sd_api_request req = p.req;
    int32_t *ids = p.ids, n = p.n, n_predict = p.n_predict;
    sd_job *j = sd_job_new(srv, c, &req);
    int rc = j ? 0 : sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    if (!rc) j->spec = p.spec;
    if (!rc) {
        j->t_arrival = t_arrival;
        j->n_prompt = n;
        j->cap = n_predict < srv->n_ctx - n ? n_predict : srv->n_ctx - n;
        j->tokens = malloc((size_t)j->cap * sizeof(int32_t));
        if (!j->tokens) rc = sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (!rc) {
        specdec_generate_params gp = sd_gen_params(j, &req, n_predict);
        j->t_submit = sd_now();
        j->deadline = j->t_submit + srv->cfg.timeout_s;
        specdec_status st = specdec_scheduler_submit(srv->sched, ids, n, &gp, &j->rid);
        if (st != SPECDEC_OK) rc = sd_gen_submit_error(st, e);
        else atomic_fetch_add(&srv->active_jobs, 1);
    }
    free(ids);
    sd_api_request_free(&req);
    if (rc) {
        sd_job_free(j);
        return rc;
    }
    *out = j;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* waiting                                                                    */
/* ------------------------------------------------------------------------- */
/* Cancel once when the client left, the time is up or the server stops. */
static void sd_job_watch(sd_job *j) {
    if (j->cancelled) return;
    int gone = j->conn && sd_http_client_gone(j->conn);
    int late = sd_now() > j->deadline;
    if (!gone && !late && !atomic_load(&j->srv->cancel_all)) return; /* draining: it may finish */
    specdec_scheduler_cancel(j->srv->sched, j->rid);
    j->cancelled = 1;
    j->disconnected = gone;
    j->timed_out = late && !gone;
    sd_metrics_event(&j->srv->metrics, gone, j->timed_out);
}

/* 1 when the engine ended it by EOS or a stop string (the text filter included). */
static int sd_job_stopped(const sd_job *j) {
    specdec_stop_reason sr = j->stats.stop_reason;
    return sr == SPECDEC_STOP_EOS || sr == SPECDEC_STOP_STRING || j->stopper.stop_at != (size_t)-1;
}

/* How it ended, as vLLM's finish reasons: a cancelled request (client gone, timeout,
 * shutdown) is "abort", never "length". */
static sd_finish sd_job_finish_kind(const sd_job *j) {
    if (j->outcome == SPECDEC_ERR_CANCELLED) return SD_FIN_ABORT;
    if (j->outcome != SPECDEC_OK || j->text.oom || j->lp_oom) return SD_FIN_ERROR;
    return sd_job_stopped(j) ? SD_FIN_STOP : SD_FIN_LENGTH;
}

/* The outcome label: a request never collected (its stream's connection ended first) or
 * whose client left is a disconnect unless the drain's time was up. */
static sd_outcome sd_job_outcome(const sd_job *j) {
    if (!j->done || j->disconnected) return atomic_load(&j->srv->cancel_all) && !j->disconnected ? SD_OUT_SHUTDOWN
                                                                                                   : SD_OUT_DISCONNECT;
    switch (sd_job_finish_kind(j)) {
    case SD_FIN_STOP: return SD_OUT_STOP;
    case SD_FIN_LENGTH: return SD_OUT_LENGTH;
    case SD_FIN_ABORT: return j->timed_out ? SD_OUT_TIMEOUT : SD_OUT_SHUTDOWN;
    default: return SD_OUT_ERROR;
    }
}

/* One wait of at most ms; 1 once the request is collected. */
static int sd_job_poll(sd_job *j, int32_t ms) {
    specdec_status os = SPECDEC_OK;
    int32_t n = 0;
    specdec_status st = specdec_scheduler_wait(j->srv->sched, j->rid, ms, j->tokens, j->cap, &n, &j->stats, &os);
    if (st == SPECDEC_ERR_TIMEOUT) return 0;
    j->done = 1;
    j->n_out = n;
    j->outcome = st == SPECDEC_OK ? os : SPECDEC_ERR_INTERNAL;
    pthread_mutex_lock(&j->mu);
    sd_stop_finish(&j->stopper, j->text.len);
    sd_job_resolve(j); /* tokens whose text never came (held back, after a stop) end here */
    pthread_mutex_unlock(&j->mu);
    double now = sd_now(), queued = now - j->t_submit - j->stats.t_total_s; /* t_total_s: from admission */
    sd_metrics_finish(&j->srv->metrics, sd_job_finish_kind(j), now - j->t_arrival, queued > 0 ? queued : 0,
                      (int32_t)j->stats.n_prompt);
    return 1;
}

static void sd_job_wait(sd_job *j) {
    while (!sd_job_poll(j, SD_POLL_MS * 2)) sd_job_watch(j);
}

/* The entries [from, to) with the first len bytes of the text, in j->span. */
static const sd_lp_span *sd_job_span(sd_job *j, int32_t from, int32_t to, size_t len) {
    j->span.e = j->lp ? j->lp + from : NULL;
    j->span.n = to - from;
    j->span.start = from > 0 ? j->lp[from - 1].end : 0;
    j->span.text = j->text.p ? j->text.p : "";
    j->span.len = len;
    j->span.cur = &j->cur;
    return &j->span;
}

/* The outcome as a result for the response writers; NULL with *e set for a failure. */
static const sd_gen_result *sd_job_result(sd_job *j, sd_gen_result *r, sd_api_error *e) {
    if (j->text.oom || j->lp_oom || (j->outcome != SPECDEC_OK && j->outcome != SPECDEC_ERR_CANCELLED)) {
        sd_api_fail(e, 500, "server_error", NULL, NULL, "generation failed: %s",
                    j->text.oom ? "out of memory for the text"
                    : j->lp_oom ? "out of memory for the logprobs"
                                : specdec_status_string(j->outcome));
        return NULL;
    }
    static const char *const reasons[] = {"none", "length", "eos", "stop_string", "callback", "context_full"};
    static const char *const finishes[] = {"stop", "length", "abort", "error"};
    specdec_stop_reason sr = j->stats.stop_reason;
    memset(r, 0, sizeof *r);
    r->text = j->text.p ? j->text.p : "";
    r->len = j->stopper.safe;
    r->finish = finishes[sd_job_finish_kind(j)];
    r->stop_detail = j->outcome != SPECDEC_ERR_CANCELLED ? ((unsigned)sr < 6 ? reasons[sr] : "none")
                     : j->timed_out                      ? "timeout"
                     : j->disconnected                   ? "disconnect"
                                                         : "shutdown"; /* the scheduler's shutdown cancels the rest */
    r->n_prompt = j->n_prompt;
    r->n_completion = j->n_out;
    r->stats = &j->stats;
    r->n_draft = j->n_draft;
    r->tree = j->tree;
    r->n_tree = j->n_tree;
    r->draft_nodes = j->draft_nodes;
    r->verify = j->verify;
    r->lp = j->logprobs ? sd_job_span(j, j->lp_sent, j->n_lp, r->len) : NULL; /* what is not streamed yet */
    return r;
}

/* ------------------------------------------------------------------------- */
/* non-streamed answer                                                        */
/* ------------------------------------------------------------------------- */
static enum MHD_Result sd_gen_answer(sd_job *j) {
    sd_server *srv = j->srv;
    sd_endpoint ep = j->chat ? SD_EP_CHAT : SD_EP_COMPLETIONS;
    sd_job_wait(j);
    if (j->disconnected) return MHD_NO; /* nobody to answer */
    sd_gen_result r;
    sd_api_error e;
    if (!sd_job_result(j, &r, &e)) return sd_http_reply_error(srv, j->conn, ep, &e);
    sd_metrics_usage(&srv->metrics, r.n_prompt, r.n_completion, j->n_emitted ? j->t_first - j->t_submit : -1);
    sd_buf b = {0};
    sd_resp_completion(&b, srv, j->chat, j->id, j->created, &r);
    enum MHD_Result ok = b.oom ? MHD_NO : sd_http_reply(srv, j->conn, ep, 200, "application/json", b.p, b.len);
    sd_buf_free(&b);
    return ok;
}

/* ------------------------------------------------------------------------- */
/* streamed answer                                                            */
/* ------------------------------------------------------------------------- */
/* Under mu: format the text released since the last chunk, with the logprobs of the
 * tokens whose text ends in it. 1 if a chunk was made. */
static int sd_job_take_text(sd_job *j) {
    if (j->stopper.safe <= j->sent) return 0;
    int32_t k = j->lp_sent;
    while (k < j->lp_resolved && j->lp[k].end <= j->stopper.safe) k++;
    sd_resp_chunk(&j->out, j->srv, j->chat, j->id, j->created, j->text.p + j->sent, j->stopper.safe - j->sent, 0,
                  NULL, j->logprobs ? sd_job_span(j, j->lp_sent, k, j->stopper.safe) : NULL);
    j->lp_sent = k;
    j->sent = j->stopper.safe;
    return 1;
}

/* Block until there is text to send or the request ended. 0, or -1 when the client left. */
static int sd_job_next_text(sd_job *j) {
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int got = sd_job_take_text(j);
        pthread_mutex_unlock(&j->mu);
        if (got) return 0;
        if (j->done) {
            j->phase = PH_FINAL;
            return 0;
        }
        if (sd_job_poll(j, 0)) continue; /* ended: send what the stop filter released */
        sd_job_watch(j);
        if (j->disconnected) return -1;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += SD_POLL_MS * 1000000L;
        if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
        pthread_mutex_lock(&j->mu);
        if (j->stopper.safe <= j->sent) pthread_cond_timedwait(&j->cv, &j->mu, &dl);
        pthread_mutex_unlock(&j->mu);
    }
}

static void sd_job_final_events(sd_job *j) {
    sd_gen_result r;
    sd_api_error e;
    if (!sd_job_result(j, &r, &e)) {
        sd_buf_puts(&j->out, "data: ");
        sd_resp_error_json(&j->out, &e);
        sd_buf_puts(&j->out, "\n\n");
    } else {
        sd_resp_chunk(&j->out, j->srv, j->chat, j->id, j->created, "", 0, 0, &r, r.lp && r.lp->n ? r.lp : NULL);
        j->lp_sent = j->n_lp;
        if (j->include_usage) sd_resp_usage_chunk(&j->out, j->srv, j->chat, j->id, j->created, &r);
        sd_metrics_usage(&j->srv->metrics, r.n_prompt, r.n_completion, j->n_emitted ? j->t_first - j->t_submit : -1);
    }
    sd_buf_puts(&j->out, "data: [DONE]\n\n");
    j->phase = PH_END;
}

static ssize_t sd_job_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    sd_job *j = cls;
    while (j->out_pos == j->out.len) {
        if (j->phase == PH_END) return MHD_CONTENT_READER_END_OF_STREAM;
        j->out.len = 0;
        j->out_pos = 0;
        if (j->phase == PH_ROLE) {
            sd_resp_chunk(&j->out, j->srv, 1, j->id, j->created, "", 0, 1, NULL, NULL);
            j->phase = PH_TEXT;
        } else if (j->phase == PH_TEXT) {
            if (sd_job_next_text(j)) return MHD_CONTENT_READER_END_WITH_ERROR;
        } else {
            sd_job_final_events(j);
        }
        if (j->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = j->out.len - j->out_pos < max ? j->out.len - j->out_pos : max;
    memcpy(buf, j->out.p + j->out_pos, n);
    j->out_pos += n;
    return (ssize_t)n;
}

static void sd_job_stream_done(void *cls) {
    sd_job *j = cls;
    if (j->rid && !j->done && !j->cancelled) sd_metrics_event(&j->srv->metrics, 1, 0); /* left mid-stream */
    sd_job_free(j);
}

static enum MHD_Result sd_gen_stream(sd_job *j) {
    sd_server *srv = j->srv;
    j->phase = j->chat ? PH_ROLE : PH_TEXT;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sd_job_read, j,
                                                               sd_job_stream_done);
    if (!r) {
        sd_job_free(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ok = MHD_queue_response(j->conn, 200, r);
    sd_metrics_http(&srv->metrics, j->chat ? SD_EP_CHAT : SD_EP_COMPLETIONS, 200);
    MHD_destroy_response(r); /* frees the job through sd_job_stream_done when the stream ends */
    return ok;
}

enum MHD_Result sd_gen_handle(sd_server *srv, struct MHD_Connection *c, int chat, const char *body, size_t len) {
    sd_endpoint ep = chat ? SD_EP_CHAT : SD_EP_COMPLETIONS;
    sd_api_error e;
    sd_job *j = NULL;
    if (sd_gen_start(srv, c, chat, body, len, sd_now(), &j, &e)) return sd_http_reply_error(srv, c, ep, &e);
    /* the idle timeout guards uploads; while the answer is generated the connection may be
     * quiet for long: allow the request's own limit (then a client that stopped reading is
     * still dropped eventually) */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned int)(srv->cfg.timeout_s + srv->cfg.body_timeout_s + 1));
    if (j->stream) return sd_gen_stream(j);
    enum MHD_Result ok = sd_gen_answer(j);
    sd_job_free(j);
    return ok;
}

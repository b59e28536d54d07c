/* sd_server_gen.c — one generation request: parse and validate the body, build the
 * prompt ids (the chat template via specdec_chat_tokenize, the tokenizer, or given ids),
 * submit to the scheduler (a "tree" passed through to tree speculation), then
 * either wait and answer with one JSON body, or stream server-sent events.
 *
 * A request is a group (sd_group) of choices: "n" samples of each prompt of a batch, each
 * its own scheduler request (sd_job), submitted together so they share batched rounds.
 * Admission is all-or-nothing (one refused: the others are cancelled, the error answered
 * once); a client that leaves, the timeout and the drain cancel every choice. Choice
 * k = prompt p x n + sample s runs with the request's seed and RNG stream s
 * (sequence_id), so sample 0 is what a single-choice request gives.
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

#include <cjson/cJSON.h>

#include "sd_server_internal.h"

#define SD_POLL_MS 20 /* how often a waiting connection checks its client and its deadline */

enum { PH_ROLE, PH_TEXT, PH_FINAL, PH_END };

typedef struct sd_group sd_group;

/* One choice: a scheduler request. */
typedef struct sd_job {
    sd_server *srv;
    sd_group *g;                   /* its request (woken on each token) */
    int chat, stream;
    int index;                     /* the choice's index: prompt x n + sample */
    specdec_request_id rid;
    int32_t n_prompt, cap, n_draft;
    int first_of_prompt;           /* sample 0 of its prompt: its prompt counts in usage */
    sd_spec_resolved spec;         /* its drafter (speculative_config over the server's) */
    int32_t tree[SD_API_MAX_TREE];  /* the request's draft tree (n_tree 0: a chain of n_draft) */
    int n_tree;
    int32_t draft_nodes;
    int32_t *tokens;               /* [cap] the collected output ids */
    specdec_verify_mode verify;
    /* shared with the token callback, under mu */
    pthread_mutex_t mu;
    sd_buf text;                   /* everything generated */
    sd_stopper stopper;
    int32_t n_emitted;
    int text_done;                 /* a stop_token_ids id came without include_stop: no more text */
    sd_lp_entry *lp;               /* [lp_cap] the emitted tokens' logprobs (logprobs asked for) */
    int32_t n_lp, lp_cap;
    int32_t lp_resolved;           /* lp[0..lp_resolved) know where their text ends */
    int lp_oom;                    /* no room for an entry: the request stopped */
    double t_first;
    double t_last_step;            /* when the last round that emitted tokens for it emitted them */
    int64_t last_step;             /* the scheduler's round count seen then (rounds tell steps apart) */
    /* the connection thread's */
    double t_arrival, t_submit;
    int cancelled, timed_out, disconnected, done;
    specdec_status outcome;
    specdec_stats stats;
    int32_t n_out;
    size_t sent;                   /* text bytes already streamed */
    int logprobs;                  /* the request asked for logprobs */
    int32_t lp_sent;               /* entries already streamed */
    int final_sent;                /* its last chunk (finish_reason) is streamed */
    sd_cp_cursor cur;              /* text_offset's count so far */
    sd_lp_span span;               /* what the result's lp points to */
    /* the prompt (echo, prompt_logprobs) */
    int echo;                      /* completions' echo */
    int32_t echo_top;              /* echo with logprobs: the prompt tokens' top count; -1: no logprobs */
    int32_t plp_top;               /* prompt_logprobs: the top count; -1: not asked for */
    int32_t *prompt_ids;           /* [n_prompt] (echo or prompt_logprobs) */
    int prompt_as_ids;             /* the prompt came as ids (echo: their decoding, special tokens kept) */
    char *echo_text;               /* the prompt's text (echo) */
    size_t echo_len;
    sd_lp_entry *plp;              /* [n_prompt - 1] prompt tokens 1.. (under mu: the scheduler fills them) */
    int32_t n_plp;
    size_t *echo_off;              /* [n_prompt] text_offset of the prompt tokens (made once, when shown) */
    int echo_sent;                 /* streamed: the prompt went out in the choice's first chunk */
    sd_tool_out tools;             /* chat with tool_choice other than "none": its output's parser */
    sd_reasoning rsn;              /* chat with --reasoning-parser: the split (streaming: its state) */
    size_t *tok_at;                /* chat with --reasoning-parser: [cap] where each token's text begins in
                                      text (under mu; sd_job_reasoning_tokens) */
    sd_lp_echo echo_span;
    sd_prompt_lp prompt_lp;
} sd_job;

/* One HTTP request: its choices, answered together. */
struct sd_group {
    sd_server *srv;
    struct MHD_Connection *conn;   /* valid until the response is done (not in the free callback) */
    int chat, stream, include_usage;
    char id[48];
    long created;
    long serial;                   /* this server's request number */
    char *stops[SD_API_MAX_STOP];  /* owned, taken from the request; each job's stopper borrows them */
    int n_stop;
    int include_stop;              /* vLLM's include_stop_str_in_output */
    int32_t stop_ids[SPECDEC_MAX_STOP_TOKEN_IDS]; /* the request's stop_token_ids (their text is */
    int n_stop_ids;                /* dropped unless include_stop: vLLM's) */
    int32_t n;                     /* choices per prompt */
    int tool_choice;               /* sd_tool_choice of the request (SD_TC_NONE: text only) */
    char *tool_named;              /* owned: SD_TC_NAMED's function */
    cJSON *tool_defs;              /* owned, NULL = not needed: the request's tools (glm45 / qwen3_coder read
                                      their types) */
    sd_job **jobs;                 /* [n_jobs], by index */
    int n_jobs;
    int refused;                   /* admission failed: its submitted jobs are withdrawn, not counted */
    /* woken by every job's token callback */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long events;
    /* the connection thread's */
    double deadline;
    int cancelled, disconnected, failed;
    int32_t usage_prompt, usage_completion; /* summed as the choices end (streaming) */
    int32_t usage_cached;          /* prompt tokens from the prefix cache, counted with usage_prompt */
    int32_t usage_reasoning;       /* chat with --reasoning-parser: reasoning_tokens, summed as usage_completion */
    int phase;
    sd_buf out;                    /* SSE bytes not yet handed to libmicrohttpd */
    size_t out_pos;
};

/* ------------------------------------------------------------------------- */
/* job and group lifetime                                                     */
/* ------------------------------------------------------------------------- */
static sd_job *sd_job_new(sd_group *g, int index) {
    sd_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    if (pthread_mutex_init(&j->mu, NULL) != 0) {
        free(j);
        return NULL;
    }
    j->srv = g->srv;
    j->g = g;
    j->chat = g->chat;
    j->stream = g->stream;
    j->index = index;
    j->first_of_prompt = index % g->n == 0;
    sd_stop_init(&j->stopper, g->stops, g->n_stop, g->include_stop);
    sd_tools_out_init(&j->tools, (sd_tool_choice)g->tool_choice, g->srv->tool_parser, g->tool_named);
    j->tools.tools = g->tool_defs;
    return j;
}

static sd_group *sd_group_new(sd_server *srv, struct MHD_Connection *c, sd_api_request *req, int n_jobs) {
    sd_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->jobs = calloc((size_t)n_jobs, sizeof *g->jobs);
    if (!g->jobs || pthread_mutex_init(&g->mu, NULL) != 0) {
        free(g->jobs);
        free(g);
        return NULL;
    }
    if (pthread_cond_init(&g->cv, NULL) != 0) {
        pthread_mutex_destroy(&g->mu);
        free(g->jobs);
        free(g);
        return NULL;
    }
    g->srv = srv;
    g->conn = c;
    g->chat = req->chat;
    g->stream = req->stream;
    g->include_usage = req->include_usage;
    g->n = req->n;
    g->tool_choice = req->tool_choice;
    const int typed = req->tool_choice == SD_TC_AUTO && req->tools_json &&
                      (srv->tool_parser == SD_TP_GLM45 || srv->tool_parser == SD_TP_QWEN3_CODER);
    if ((req->tool_choice == SD_TC_NAMED && !(g->tool_named = strdup(req->tool_names[req->tool_named]))) ||
        (typed && !(g->tool_defs = cJSON_Parse(req->tools_json)))) {
        free(g->tool_named);
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free(g->jobs);
        free(g);
        return NULL;
    }
    g->created = (long)time(NULL);
    g->serial = atomic_fetch_add(&srv->next_id, 1);
    snprintf(g->id, sizeof g->id, "%s-%lx%04lx", req->chat ? "chatcmpl" : "cmpl", (unsigned long)g->created,
             (unsigned long)g->serial);
    for (int i = 0; i < req->n_stop; i++) g->stops[i] = req->stop[i]; /* moved */
    g->n_stop = req->n_stop;
    req->n_stop = 0;
    g->include_stop = req->include_stop_str_in_output;
    g->n_stop_ids = req->n_stop_token_ids;
    if (g->n_stop_ids) memcpy(g->stop_ids, req->stop_token_ids, (size_t)g->n_stop_ids * sizeof(int32_t));
    return g;
}

static sd_outcome sd_job_outcome(const sd_job *j);

/* Collect the request if it is still with the scheduler (cancelling it first), count how
 * it ended (unless counted is 0: withdrawn because another choice was refused), then free. */
static void sd_job_free(sd_job *j, int counted) {
    if (!j) return;
    if (j->rid && !j->done) {
        specdec_scheduler_cancel(j->srv->sched, j->rid);
        int32_t n;
        specdec_status os;
        specdec_scheduler_wait(j->srv->sched, j->rid, -1, j->tokens, j->cap, &n, NULL, &os);
        if (counted) sd_metrics_finish(&j->srv->metrics, SD_FIN_ABORT, sd_now() - j->t_arrival, 0, 0, 0);
    }
    if (j->rid) {
        if (counted) sd_metrics_outcome(&j->srv->metrics, j->chat, j->stream, sd_job_outcome(j));
        atomic_fetch_sub(&j->srv->active_jobs, 1);
    }
    free(j->tokens);
    free(j->tok_at);
    free(j->lp);
    free(j->prompt_ids);
    free(j->echo_text);
    free(j->plp);
    free(j->echo_off);
    sd_buf_free(&j->text);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void sd_group_free(sd_group *g) {
    if (!g) return;
    for (int i = 0; i < g->n_jobs; i++) sd_job_free(g->jobs[i], !g->refused);
    for (int i = 0; i < g->n_stop; i++) free(g->stops[i]);
    free(g->tool_named);
    cJSON_Delete(g->tool_defs);
    free(g->jobs);
    sd_buf_free(&g->out);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static void sd_group_wake(sd_group *g) {
    pthread_mutex_lock(&g->mu);
    g->events++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
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

static void sd_lp_copy(sd_lp_entry *e, const specdec_token_logprobs *lp) {
    int32_t n = lp->n_top < 0 ? 0 : lp->n_top > SPECDEC_MAX_TOP_LOGPROBS ? SPECDEC_MAX_TOP_LOGPROBS : lp->n_top;
    e->token = lp->token;
    e->logprob = lp->logprob;
    e->rank = lp->rank;
    e->n_top = n;
    if (n) memcpy(e->top_tokens, lp->top_tokens, (size_t)n * sizeof(int32_t));
    if (n) memcpy(e->top_logprobs, lp->top_logprobs, (size_t)n * sizeof(float));
    e->end = (size_t)-1;
}

/* The scheduler thread's side: a prompt token's record (position < n_prompt, all before the
 * first generated token, into plp sized at submit), or just before sd_job_on_token for the same
 * token: keep the token's logprobs. */
static int sd_job_on_logprob(void *ud, const specdec_token_logprobs *lp) {
    sd_job *j = ud;
    pthread_mutex_lock(&j->mu);
    if (lp->position < j->n_prompt) {
        if (j->plp && lp->position == j->n_plp + 1) sd_lp_copy(&j->plp[j->n_plp++], lp);
        pthread_mutex_unlock(&j->mu);
        return 0;
    }
    if (j->n_lp == j->lp_cap) {
        int32_t cap = j->lp_cap ? 2 * j->lp_cap : 64;
        sd_lp_entry *p = j->lp_cap < INT32_MAX / 2 ? realloc(j->lp, (size_t)cap * sizeof *p) : NULL;
        if (p) j->lp = p, j->lp_cap = cap;
        else j->lp_oom = 1;
    }
    if (!j->lp_oom) sd_lp_copy(&j->lp[j->n_lp++], lp);
    int stop = j->lp_oom;
    pthread_mutex_unlock(&j->mu);
    return stop;
}

/* The scheduler thread's side: append the piece, find stop sequences, wake the reader. */
static int sd_job_on_token(void *ud, int32_t tok, const char *piece, size_t len) {
    sd_job *j = ud;
    if (tok >= 0) sd_job_step(j);
    pthread_mutex_lock(&j->mu);
    if (tok >= 0 && j->tok_at && j->n_emitted < j->cap) j->tok_at[j->n_emitted] = j->text.len; /* its text starts */
    if (tok >= 0 && j->n_emitted++ == 0) j->t_first = sd_now();
    for (int i = 0; tok >= 0 && !j->g->include_stop && i < j->g->n_stop_ids; i++)
        j->text_done |= tok == j->g->stop_ids[i]; /* vLLM leaves the stop id's text out */
    if (len && !j->text_done && j->stopper.stop_at == (size_t)-1) {
        size_t old = j->text.len;
        if (sd_buf_append(&j->text, piece, len) == 0) sd_stop_scan(&j->stopper, j->text.p, old, j->text.len);
        if (j->text.len > old) sd_job_resolve(j);
    }
    int stop = j->text.oom || j->lp_oom || j->stopper.stop_at != (size_t)-1;
    pthread_mutex_unlock(&j->mu);
    sd_group_wake(j->g);
    return stop;
}

/* ------------------------------------------------------------------------- */
/* prompt and parameters                                                      */
/* ------------------------------------------------------------------------- */
static int sd_gen_tokenize_as(sd_server *srv, const char *text, size_t len, int add_special, int32_t **ids,
                              int32_t *n, sd_api_error *e) {
    int32_t cap = srv->n_ctx + 8; /* a prompt that does not fit here is refused: its count is enough */
    *ids = malloc((size_t)cap * sizeof(int32_t));
    if (!*ids) return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory for the prompt ids");
    specdec_status st = specdec_tokenize(srv->tok, text, len, add_special, *ids, cap, n);
    if (st == SPECDEC_OK) return 0;
    free(*ids);
    *ids = NULL;
    if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) return 0; /* *n is the count: sd_gen_budget refuses it */
    return sd_api_fail(e, 500, "server_error", NULL, NULL, "tokenizing the prompt: %s",
                       specdec_tokenizer_last_error(srv->tok));
}

/* The chat prompt's ids: the conversation (messages as given, tools, chat_template_kwargs)
 * rendered with the server's chat family (the model's own template, or --chat-template) by
 * specdec_chat_apply_json, its bytes and running token count bounded, then tokenized as that
 * family needs. */
static int sd_gen_chat_ids(sd_server *srv, const sd_api_request *req, int32_t **ids, int32_t *n, int *rs_ended,
                           sd_api_error *e) {
    if (!srv->chat_family)
        return sd_api_fail(e, 400, "invalid_request_error", "chat_template_unsupported", "messages",
                           "%s: this server cannot render chat prompts for its model (start it with --chat-template "
                           "NAME); /v1/completions works", srv->chat_problem);
    size_t cap = 65536, len = 0;
    char *text = malloc(cap);
    specdec_status st = text ? specdec_chat_apply_json(srv->tok, srv->cfg.chat_template, req->messages_json, req->tools_json,
                                                       req->kwargs_json, req->add_generation_prompt, text, cap, &len)
                             : SPECDEC_ERR_OUT_OF_MEMORY;
    if (st == SPECDEC_ERR_BUFFER_TOO_SMALL && len <= srv->max_prompt_bytes) { /* else refused below, unrendered */
        free(text);
        cap = len + 1;
        text = malloc(cap);
        st = text ? specdec_chat_apply_json(srv->tok, srv->cfg.chat_template, req->messages_json, req->tools_json,
                                            req->kwargs_json, req->add_generation_prompt, text, cap, &len)
                  : SPECDEC_ERR_OUT_OF_MEMORY;
    }
    int rc = 0;
    if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) rc = sd_prep_bytes(srv, len, "messages", e);
    else if (st == SPECDEC_ERR_INVALID_ARGUMENT) /* the template refuses the conversation (its own message) */
        rc = sd_api_fail(e, 400, "invalid_request_error", NULL,
                         strstr(specdec_last_error(), "chat_template_kwargs") ? "chat_template_kwargs" : "messages", "%s",
                         specdec_last_error());
    else if (st == SPECDEC_ERR_UNSUPPORTED)
        rc = sd_api_fail(e, 400, "invalid_request_error", "chat_template_unsupported", "messages", "%s",
                         specdec_last_error());
    else if (st)
        rc = sd_api_fail(e, 500, "server_error", NULL, NULL, "rendering the chat prompt: %s: %s", specdec_status_string(st),
                         specdec_last_error());
    sd_bound b = {srv->n_ctx - (req->max_tokens > 0 ? req->max_tokens : 1), 0, 0};
    if (!rc) rc = sd_prep_bytes(srv, len, "messages", e);
    if (!rc) rc = sd_api_continue_final(req, text, &len, e);
    if (!rc) rc = sd_prep_bound(srv, &b, text, len, "messages", e);
    int add_special = 0;
    if (!rc && (st = specdec_chat_add_special(srv->tok, srv->cfg.chat_template, &add_special)))
        rc = sd_api_fail(e, 500, "server_error", NULL, NULL, "chat template: %s", specdec_last_error());
    if (!rc) rc = sd_gen_tokenize_as(srv, text, len, add_special, ids, n, e);
    if (!rc && srv->reasoning != SD_RP_NONE) { /* the template closed the thinking (enable_thinking false) */
        sd_reasoning r;
        sd_reasoning_init(&r, srv->reasoning, srv->rs_start, srv->rs_end, 0, 0);
        *rs_ended = sd_reasoning_prompt_ended(&r, text, len);
    }
    free(text);
    return rc;
}

/* The ids of prompt k (chat: the conversation, k = 0). */
static int sd_gen_prompt(sd_server *srv, const sd_api_request *req, int k, int32_t **ids, int32_t *n, int *rs_ended,
                         sd_api_error *e) {
    *ids = NULL;
    *n = 0;
    const sd_api_prompt *pr = req->chat ? NULL : &req->prompts[k];
    if (pr && pr->ids) {
        for (int32_t i = 0; i < pr->n_ids; i++)
            if (pr->ids[i] >= srv->n_vocab)
                return sd_api_fail(e, 400, "invalid_request_error", NULL, "prompt",
                                   "prompt %d token %d is %d, outside the vocabulary of %d", k, (int)i,
                                   (int)pr->ids[i], (int)srv->n_vocab);
        *ids = malloc((size_t)pr->n_ids * sizeof(int32_t));
        if (!*ids) return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        memcpy(*ids, pr->ids, (size_t)pr->n_ids * sizeof(int32_t));
        *n = pr->n_ids;
        return 0;
    }
    /* the cost before the work: bytes, then a running count against the context */
    sd_bound b = {srv->n_ctx - (req->max_tokens > 0 ? req->max_tokens : 1), 0, 0};
    int rc = 0;
    if (pr) {
        if ((rc = sd_prep_bytes(srv, pr->len, "prompt", e)) ||
            (rc = sd_prep_bound(srv, &b, pr->text, pr->len, "prompt", e)))
            return rc;
        return sd_gen_tokenize_as(srv, pr->text, pr->len, 1, ids, n, e);
    }
    size_t bytes = 0;
    for (int i = 0; i < req->n_messages; i++) bytes += strlen(req->messages[i].content);
    if ((rc = sd_prep_bytes(srv, bytes, "messages", e))) return rc;
    for (int i = 0; i < req->n_messages; i++)
        if ((rc = sd_prep_bound(srv, &b, req->messages[i].content, strlen(req->messages[i].content), "messages", e)))
            return rc;
    return sd_gen_chat_ids(srv, req, ids, n, rs_ended, e);
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
    *n_predict = req->max_tokens >= 0 ? req->max_tokens : req->chat ? room : (room < 16 ? room : 16);
    return 0;
}

static uint64_t sd_mix64(uint64_t x) { /* splitmix64 finaliser: a seed when none is given */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Choice j's parameters: the request's seed (one per request when none is given) and the
 * RNG stream of its sample number (vLLM gives sample s the seed + s). */
static specdec_generate_params sd_gen_params(sd_job *j, const sd_api_request *req, int32_t n_predict,
                                             uint64_t seed) {
    const sd_server *srv = j->srv;
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = n_predict;
    gp.temperature = req->temperature;
    gp.top_p = req->top_p;
    gp.top_k = req->top_k;
    gp.min_p = req->min_p;
    gp.ignore_eos = req->ignore_eos;
    gp.priority = req->priority;
    gp.seed = seed;
    gp.sequence_id = (uint64_t)(j->index % j->g->n);
    gp.cache_salt = req->cache_salt;
    gp.verify = req->verify;
    /* the arrays are the request's, which outlives the submit (sd_gen_start frees it after
       every choice is submitted); the scheduler copies them at submit */
    gp.logit_bias = req->logit_bias;
    gp.n_logit_bias = req->n_logit_bias;
    gp.min_tokens = req->min_tokens;
    gp.stop_token_ids = req->stop_token_ids;
    gp.n_stop_token_ids = req->n_stop_token_ids;
    gp.presence_penalty = req->presence_penalty;
    gp.frequency_penalty = req->frequency_penalty;
    gp.repetition_penalty = req->repetition_penalty;
    gp.allowed_token_ids = req->allowed_token_ids;
    gp.n_allowed_token_ids = req->n_allowed_token_ids;
    gp.bad_words_ids = req->n_bad_seqs ? req->bad_words_ids : NULL;
    gp.bad_words_offsets = req->n_bad_seqs ? req->bad_words_offsets : NULL;
    gp.n_bad_words = req->n_bad_seqs;
    j->logprobs = req->logprobs;
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
    gp.stop_strings = (const char *const *)j->g->stops;
    gp.n_stop_strings = j->g->n_stop;
    gp.tokenizer = srv->tok;
    gp.callback = sd_job_on_token;
    gp.user_data = j;
    if (req->logprobs) {
        gp.logprobs = 1;
        gp.top_logprobs = req->top_logprobs;
        gp.logprob_callback = sd_job_on_logprob;
        gp.logprob_user_data = j;
    }
    if (j->plp || gp.n_predict == 0) { /* the prompt's records: for echo's logprobs and / or prompt_logprobs;
                                          max_tokens 0 (echo alone) runs as the library's scoring call */
        gp.prompt_logprobs = 1;
        int32_t top = j->echo_top > j->plp_top ? j->echo_top : j->plp_top; /* what either shows; -1: neither */
        gp.prompt_top_logprobs = top > 0 ? top : 0;
        gp.logprob_callback = sd_job_on_logprob;
        gp.logprob_user_data = j;
    }
    return gp;
}

/* What the job keeps of prompt k for echo and prompt_logprobs: its ids, its text (echo: as
 * given, or the ids decoded with special tokens, as vLLM), room for its records. */
static int sd_job_prompt(sd_job *j, const sd_api_request *req, int k, const int32_t *ids, sd_api_error *e) {
    j->echo = req->echo;
    j->echo_top = req->echo && req->logprobs ? req->top_logprobs : -1;
    j->plp_top = req->prompt_logprobs;
    if (!j->echo && j->plp_top < 0) return 0;
    const sd_api_prompt *pr = req->chat ? NULL : &req->prompts[k];
    j->prompt_ids = malloc((size_t)j->n_prompt * sizeof *j->prompt_ids);
    if (!j->prompt_ids) return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory for the prompt");
    memcpy(j->prompt_ids, ids, (size_t)j->n_prompt * sizeof *ids);
    if ((j->echo_top >= 0 || j->plp_top >= 0) && j->n_prompt > 1 &&
        !(j->plp = malloc((size_t)(j->n_prompt - 1) * sizeof *j->plp)))
        return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory for the prompt's logprobs");
    if (!j->echo) return 0;
    j->prompt_as_ids = pr->ids != NULL;
    if (!pr->ids) {
        if (!(j->echo_text = malloc(pr->len + 1)))
            return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory for the prompt");
        memcpy(j->echo_text, pr->text, pr->len);
        j->echo_len = pr->len;
        return 0;
    }
    size_t cap = (size_t)j->n_prompt * 16 + 64, need = 0;
    for (int tries = 0; tries < 2; tries++) { /* a guess, then the size the first try reported */
        char *t = realloc(j->echo_text, cap);
        if (!t) return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory for the prompt");
        j->echo_text = t;
        specdec_status st = specdec_detokenize(j->srv->tok, ids, j->n_prompt, 0, t, cap, &need);
        if (st == SPECDEC_OK) break;
        if (st != SPECDEC_ERR_BUFFER_TOO_SMALL || tries)
            return sd_api_fail(e, 500, "server_error", NULL, NULL, "decoding the prompt: %s",
                               specdec_tokenizer_last_error(j->srv->tok));
        cap = need + 1;
    }
    j->echo_len = need;
    return 0;
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
 * and build each prompt, check each budget. */
typedef struct sd_gen_prep {
    sd_server *srv;
    int chat;
    const char *body;
    size_t len;
    sd_api_request req;  /* parsed when rc is 0 (or past parsing) */
    int parsed;
    int n_prompts;       /* chat: 1 */
    int32_t **ids, *n, *n_predict; /* [n_prompts] */
    sd_spec_resolved spec; /* its drafter (speculative_config over the server's) */
    sd_gentry *grammar;  /* structured output: the compiled constraint (a reference), or NULL */
    int rs_ended;        /* chat with --reasoning-parser: the prompt closed the thinking */
    int rs_off;          /* chat_template_kwargs.enable_thinking is false */
    sd_api_error e;
    int rc;
} sd_gen_prep;

static void sd_gen_prep_free(sd_gen_prep *p) {
    for (int k = 0; p->ids && k < p->n_prompts; k++) free(p->ids[k]);
    free(p->ids);
    free(p->n);
    free(p->n_predict);
    sd_gcache_put(p->srv->grammars, p->grammar); /* the submitted choices hold their own references */
    if (p->parsed) sd_api_request_free(&p->req);
}

/* More choices than the scheduler queues (--queue) could never be admitted together: a
 * request's choices are all queued before the scheduler starts any. */
static int sd_gen_choices_fit(const sd_server *srv, int choices, sd_api_error *e) {
    if (choices <= srv->cfg.queue) return 0;
    return sd_api_fail(e, 400, "invalid_request_error", NULL, "n",
                       "%d choices (prompts x 'n') are more than this server queues at once (--queue %d)", choices,
                       srv->cfg.queue);
}

/* The token ids of logit_bias and stop_token_ids against the model's vocabulary (the parser
 * checked their form), so a bad one is a 400 naming its field before anything is queued. */
static int sd_gen_check_ids(const sd_server *srv, const sd_api_request *req, sd_api_error *e) {
    for (int32_t i = 0; i < req->n_logit_bias; i++)
        if (req->logit_bias[i].token >= srv->n_vocab)
            return sd_api_fail(e, 400, "invalid_request_error", NULL, "logit_bias",
                               "'logit_bias' token %d is outside the vocabulary of %d", (int)req->logit_bias[i].token,
                               (int)srv->n_vocab);
    for (int32_t i = 0; i < req->n_stop_token_ids; i++)
        if (req->stop_token_ids[i] >= srv->n_vocab)
            return sd_api_fail(e, 400, "invalid_request_error", NULL, "stop_token_ids",
                               "'stop_token_ids'[%d] = %d is outside the vocabulary of %d", (int)i,
                               (int)req->stop_token_ids[i], (int)srv->n_vocab);
    for (int32_t i = 0; i < req->n_allowed_token_ids; i++)
        if (req->allowed_token_ids[i] >= srv->n_vocab)
            return sd_api_fail(e, 400, "invalid_request_error", NULL, "allowed_token_ids",
                               "'allowed_token_ids'[%d] = %d is outside the vocabulary of %d", (int)i,
                               (int)req->allowed_token_ids[i], (int)srv->n_vocab);
    return 0;
}

/* vLLM's bad_words -> token sequences (specdec_tokenize_bad_words: vLLM's tokenization). */
static int sd_gen_bad_words(const sd_server *srv, sd_api_request *req, sd_api_error *e) {
    if (req->n_bad_words == 0) return 0;
    req->bad_words_ids = malloc(SPECDEC_MAX_BAD_WORDS_TOKENS * sizeof(int32_t));
    req->bad_words_offsets = malloc((SPECDEC_MAX_BAD_WORDS + 1) * sizeof(int32_t));
    if (!req->bad_words_ids || !req->bad_words_offsets)
        return sd_api_fail(e, 500, "server_error", NULL, "bad_words", "out of memory for 'bad_words'");
    const specdec_status st = specdec_tokenize_bad_words(srv->tok, (const char *const *)req->bad_words, req->n_bad_words,
                                                         req->bad_words_ids, req->bad_words_offsets, &req->n_bad_seqs);
    if (st == SPECDEC_OK) return 0;
    if (st == SPECDEC_ERR_INVALID_ARGUMENT)
        return sd_api_fail(e, 400, "invalid_request_error", NULL, "bad_words", "'bad_words': %s", specdec_last_error());
    return sd_api_fail(e, 500, "server_error", NULL, "bad_words", "tokenizing 'bad_words': %s", specdec_last_error());
}

static void sd_gen_prep_run(void *arg) {
    sd_gen_prep *p = arg;
    sd_server *srv = p->srv;
    if (sd_api_parse(p->body, p->len, p->chat, srv->model_id, &p->req, &p->e) != 200) {
        p->rc = p->e.http;
        return;
    }
    p->parsed = 1;
    p->n_prompts = p->chat ? 1 : p->req.n_prompts;
    p->rc = sd_gen_choices_fit(srv, p->n_prompts * p->req.n, &p->e);
    if (!p->rc && p->req.tool_choice == SD_TC_AUTO && srv->tool_parser == SD_TP_NONE) /* vLLM's answer */
        p->rc = sd_api_fail(&p->e, 400, "invalid_request_error", NULL, "tool_choice",
                            "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
    if (!p->rc && p->req.priority != 0 && srv->cfg.scheduling_policy != SPECDEC_SCHEDULING_PRIORITY) /* vLLM's */
        p->rc = sd_api_fail(&p->e, 400, "invalid_request_error", NULL, "priority",
                            "Got priority %d but priority scheduling is not enabled (start the server with "
                            "--scheduling-policy priority)", (int)p->req.priority);
    if (!p->rc) p->rc = sd_gen_check_ids(srv, &p->req, &p->e);
    if (!p->rc) p->rc = sd_gen_bad_words(srv, &p->req, &p->e);
    if (!p->rc)
        p->rc = sd_spec_resolve(&srv->spec, &p->req.spec, srv->draft ? srv->cfg.draft_dir : NULL, srv->draft_head,
                                srv->cfg.n_draft, p->req.n_draft, p->req.n_tree > 0 || p->req.draft_nodes > 0,
                                srv->cfg.ngram_corpus_tokens > 0, &p->spec, &p->e);
    if (p->rc) return;
    p->ids = calloc((size_t)p->n_prompts, sizeof *p->ids);
    p->n = calloc((size_t)p->n_prompts, sizeof *p->n);
    p->n_predict = calloc((size_t)p->n_prompts, sizeof *p->n_predict);
    if (!p->ids || !p->n || !p->n_predict) {
        p->rc = sd_api_fail(&p->e, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    for (int k = 0; k < p->n_prompts && !p->rc; k++) {
        p->rc = sd_gen_prompt(srv, &p->req, k, &p->ids[k], &p->n[k], &p->rs_ended, &p->e);
        if (!p->rc) p->rc = sd_gen_budget(srv, &p->req, p->n[k], &p->n_predict[k], &p->e);
    }
    if (!p->rc && p->chat && p->req.kwargs_json) { /* qwen3's switch (the template also sees it) */
        cJSON *kw = cJSON_Parse(p->req.kwargs_json);
        p->rs_off = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking"));
        cJSON_Delete(kw);
    }
    if (!p->rc && p->req.guided.kind) /* last: the prompts' checks cost less than a compile */
        p->rc = sd_gcache_get(srv->grammars, srv->tok, &p->req.guided, &p->grammar, &p->e);
}

/* Make and submit choice index of prompt k. 0, or the HTTP status with *e set. */
static int sd_gen_submit_one(sd_group *g, const sd_gen_prep *p, int k, int index, uint64_t seed, double t_arrival,
                             sd_api_error *e) {
    sd_server *srv = g->srv;
    sd_job *j = sd_job_new(g, index);
    if (!j) return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    g->jobs[g->n_jobs++] = j;
    j->spec = p->spec;
    j->t_arrival = t_arrival;
    j->n_prompt = p->n[k];
    j->cap = p->n_predict[k] < srv->n_ctx - j->n_prompt ? p->n_predict[k] : srv->n_ctx - j->n_prompt;
    j->tokens = malloc((size_t)j->cap * sizeof(int32_t));
    if (j->chat && srv->reasoning != SD_RP_NONE) j->tok_at = malloc((size_t)(j->cap > 0 ? j->cap : 1) * sizeof(size_t));
    if (!j->tokens || (j->chat && srv->reasoning != SD_RP_NONE && !j->tok_at))
        return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    int rc = sd_job_prompt(j, &p->req, k, p->ids[k], e);
    if (rc) return rc;
    specdec_generate_params gp = sd_gen_params(j, &p->req, p->n_predict[k], seed);
    gp.grammar = sd_gentry_grammar(p->grammar); /* the scheduler takes its own reference */
    if (j->chat && srv->reasoning != SD_RP_NONE) {
        sd_reasoning_init(&j->rsn, srv->reasoning, srv->rs_start, srv->rs_end, p->rs_off, p->rs_ended);
        if (gp.grammar && !p->rs_ended) { /* vLLM: the constraint applies after the thinking */
            gp.grammar_after_tokens = srv->rs_marker;
            gp.n_grammar_after_tokens = srv->n_rs_marker;
        }
    }
    j->t_submit = sd_now();
    specdec_status st = specdec_scheduler_submit(srv->sched, p->ids[k], j->n_prompt, &gp, &j->rid);
    if (st != SPECDEC_OK) return sd_gen_submit_error(st, e);
    atomic_fetch_add(&srv->active_jobs, 1);
    return 0;
}

/* Prepare (on the pool), submit every choice (all or none). 0, or the HTTP status with *e set. */
static int sd_gen_start(sd_server *srv, struct MHD_Connection *c, int chat, const char *body, size_t len,
                        double t_arrival, sd_group **out, sd_api_error *e) {
    *out = NULL;
    sd_gen_prep p = {.srv = srv, .chat = chat, .body = body, .len = len};
    sd_prep_run(srv->prep, len, sd_gen_prep_run, &p);
    if (p.rc) {
        *e = p.e;
        sd_gen_prep_free(&p);
        return p.rc;
    }
    sd_group *g = sd_group_new(srv, c, &p.req, p.n_prompts * p.req.n);
    int rc = g ? 0 : sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    if (!rc) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        uint64_t entropy = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 30) ^ (uint64_t)g->serial;
        uint64_t seed = p.req.has_seed ? p.req.seed : sd_mix64(entropy);
        g->deadline = sd_now() + srv->cfg.timeout_s;
        for (int k = 0; k < p.n_prompts && !rc; k++)
            for (int s = 0; s < g->n && !rc; s++) rc = sd_gen_submit_one(g, &p, k, k * g->n + s, seed, t_arrival, e);
    }
    sd_gen_prep_free(&p);
    if (rc) {
        if (g) g->refused = 1; /* the choices already admitted are withdrawn */
        sd_group_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* waiting                                                                    */
/* ------------------------------------------------------------------------- */
/* Cancel every choice not yet ended, once, when the client left, the time is up or the
 * server stops. Each choice cancelled counts (metrics), as a request of its own would. */
static void sd_group_watch(sd_group *g) {
    if (g->cancelled) return;
    int gone = g->conn && sd_http_client_gone(g->conn);
    int late = sd_now() > g->deadline;
    if (!gone && !late && !atomic_load(&g->srv->cancel_all)) return; /* draining: it may finish */
    g->cancelled = 1;
    g->disconnected = gone;
    for (int i = 0; i < g->n_jobs; i++) {
        sd_job *j = g->jobs[i];
        if (j->done) continue; /* collected: it keeps its outcome */
        specdec_scheduler_cancel(g->srv->sched, j->rid);
        j->cancelled = 1;
        j->disconnected = gone;
        j->timed_out = late && !gone;
        sd_metrics_event(&g->srv->metrics, gone, j->timed_out);
    }
}

/* 1 when the engine ended it by EOS, a stop string (the text filter included) or one of
 * stop_token_ids: finish_reason "stop" (every other reason is "length"). */
static int sd_job_stopped(const sd_job *j) {
    specdec_stop_reason sr = j->stats.stop_reason;
    return sr == SPECDEC_STOP_EOS || sr == SPECDEC_STOP_STRING || sr == SPECDEC_STOP_TOKEN_ID ||
           j->stopper.stop_at != (size_t)-1;
}

/* vLLM's "stop_reason" of a choice that stopped: the stop_token_ids id (the output's last
 * token), or the stop string the text was cut at (the first of "stop" found there); else
 * none (EOS, length: null). */
static void sd_job_stop_reason(const sd_job *j, sd_gen_result *r) {
    r->stop_by_token = 0;
    r->stop_str = NULL;
    if (j->outcome != SPECDEC_OK) return;
    if (j->stats.stop_reason == SPECDEC_STOP_TOKEN_ID && j->n_out > 0 && j->stopper.stop_at == (size_t)-1) {
        r->stop_by_token = 1;
        r->stop_token = j->tokens[j->n_out - 1];
        return;
    }
    const size_t at = j->stopper.stop_at;
    if (at == (size_t)-1 || !j->text.p) return;
    for (int i = 0; i < j->g->n_stop && !r->stop_str; i++) {
        const size_t n = strlen(j->g->stops[i]);
        if (n <= j->text.len - at && !memcmp(j->text.p + at, j->g->stops[i], n)) r->stop_str = j->g->stops[i];
    }
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
                      (int32_t)j->stats.n_prompt, (int32_t)j->stats.n_cached_prompt);
    return 1;
}

/* Poll every choice not yet collected: the first for at most ms, the others without
 * waiting. 1 once all are collected. */
static int sd_group_poll(sd_group *g, int32_t ms) {
    int all = 1;
    for (int i = 0; i < g->n_jobs; i++) {
        sd_job *j = g->jobs[i];
        if (j->done) continue;
        if (!sd_job_poll(j, all ? ms : 0)) all = 0;
    }
    return all;
}

static void sd_group_wait(sd_group *g) {
    while (!sd_group_poll(g, SD_POLL_MS * 2)) sd_group_watch(g);
}

/* The entries [from, to) with the first len bytes of the text, in j->span. */
static const sd_lp_span *sd_job_span(sd_job *j, int32_t from, int32_t to, size_t len) {
    j->span.e = j->lp ? j->lp + from : NULL;
    j->span.n = to - from;
    j->span.start = from > 0 ? j->lp[from - 1].end : 0;
    j->span.text = j->text.p ? j->text.p : "";
    j->span.len = len;
    j->span.cur = &j->cur;
    j->span.echo = NULL;
    j->span.base = j->echo ? j->echo_span.text_cps : 0; /* known: sd_job_echo ran first */
    return &j->span;
}

/* text_offset of the prompt's tokens: code points of the echoed text before each, from the
 * ids decoded in order (special tokens as the echoed text has them: kept for a prompt of ids,
 * skipped for a text), at most the text's length and on a character boundary. */
static int sd_job_echo_offsets(sd_job *j) {
    if (j->echo_off) return 0;
    specdec_detok_stream *ds = NULL;
    if (specdec_detok_stream_create(j->srv->tok, !j->prompt_as_ids, &ds) != SPECDEC_OK) return -1;
    if (!(j->echo_off = malloc((size_t)j->n_prompt * sizeof *j->echo_off))) {
        specdec_detok_stream_free(ds);
        return -1;
    }
    size_t bytes = 0, at = 0, cps = 0;
    for (int32_t k = 0; k < j->n_prompt; k++) {
        size_t pos = bytes < j->echo_len ? bytes : j->echo_len;
        while (pos > 0 && pos < j->echo_len && ((unsigned char)j->echo_text[pos] & 0xC0) == 0x80) pos--;
        for (; at < pos; at++) cps += ((unsigned char)j->echo_text[at] & 0xC0) != 0x80;
        j->echo_off[k] = cps;
        const char *t;
        size_t n = 0;
        if (specdec_detok_stream_push(ds, j->prompt_ids[k], &t, &n) == SPECDEC_OK) bytes += n;
    }
    for (; at < j->echo_len; at++) cps += ((unsigned char)j->echo_text[at] & 0xC0) != 0x80;
    j->echo_span.text_cps = cps;
    specdec_detok_stream_free(ds);
    return 0;
}

/* The prompt's part of "logprobs" (echo with logprobs; NULL: none or out of memory) and of
 * prompt_logprobs, as far as the records came (all, unless the request was cut in its prefill). */
static const sd_lp_echo *sd_job_echo(sd_job *j) {
    j->prompt_lp = (sd_prompt_lp){j->prompt_ids, 1 + j->n_plp, j->plp, j->plp_top};
    if (j->echo_top < 0 || sd_job_echo_offsets(j)) return NULL;
    j->echo_span.ids = j->prompt_ids;
    j->echo_span.n = 1 + j->n_plp;
    j->echo_span.e = j->plp;
    j->echo_span.n_top = j->echo_top;
    j->echo_span.offset = j->echo_off;
    return &j->echo_span;
}

/* usage.completion_tokens_details.reasoning_tokens of a finished chat choice with a reasoning parser:
 * the tokens whose text begins before the content (sd_reasoning_whole's split of the returned text),
 * so the start tag, the thinking and the end tag count, and a token that ends the thinking and
 * begins the content counts as reasoning; without content (no end tag, or nothing after it) every
 * token; without reasoning (the prompt closed the thinking; qwen3 with enable_thinking false and no
 * end tag) none. */
static int32_t sd_job_reasoning_tokens(const sd_job *j, size_t len) {
    sd_reasoning_split s;
    sd_reasoning_whole(&j->rsn, j->text.p ? j->text.p : "", len, &s);
    if (!s.has_r) return 0;
    const int32_t n = j->n_emitted < j->cap ? j->n_emitted : j->cap;
    if (!s.has_c) return n;
    int32_t k = 0;
    while (k < n && j->tok_at[k] < s.c_off) k++;
    return k;
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
    static const char *const finishes[] = {"stop", "length", "abort", "error"};
    specdec_stop_reason sr = j->stats.stop_reason;
    memset(r, 0, sizeof *r);
    r->text = j->text.p ? j->text.p : "";
    r->len = j->stopper.safe;
    r->finish = finishes[sd_job_finish_kind(j)];
    sd_job_stop_reason(j, r);
    r->stop_detail = j->outcome != SPECDEC_ERR_CANCELLED ? specdec_stop_reason_name(sr)
                     : j->timed_out                      ? "timeout"
                     : j->disconnected                   ? "disconnect"
                                                         : "shutdown"; /* the scheduler's shutdown cancels the rest */
    r->n_prompt = j->n_prompt;
    r->n_completion = j->n_out;
    r->n_cached = (int32_t)j->stats.n_cached_prompt;
    r->stats = &j->stats;
    r->n_draft = j->n_draft;
    r->tree = j->tree;
    r->n_tree = j->n_tree;
    r->draft_nodes = j->draft_nodes;
    r->verify = j->verify;
    const sd_lp_echo *ec = j->prompt_ids ? sd_job_echo(j) : NULL;
    r->lp = j->logprobs ? sd_job_span(j, j->lp_sent, j->n_lp, r->len) : NULL; /* what is not streamed yet */
    if (j->echo && !j->echo_sent) { /* not streamed: the prompt comes first */
        r->echo = j->echo_text;
        r->echo_len = j->echo_len;
        if (r->lp) j->span.echo = ec;
    }
    if (j->plp_top >= 0) r->prompt_lp = &j->prompt_lp;
    if (j->tools.choice != SD_TC_NONE) r->tools = &j->tools;
    if (j->rsn.parser != SD_RP_NONE) r->rsn = &j->rsn;
    if (j->tok_at) {
        r->has_reasoning = 1;
        r->n_reasoning = sd_job_reasoning_tokens(j, r->len);
    }
    return r;
}

/* ------------------------------------------------------------------------- */
/* non-streamed answer                                                        */
/* ------------------------------------------------------------------------- */
/* The usage of a choice that ended, added to the request's: every choice's completion,
 * each prompt once (vLLM's and OpenAI's count), and with it the cached tokens of the choice
 * it is counted with, the prompt's first (sample 0): cached_tokens is a part of
 * prompt_tokens, so it never exceeds it; the other samples of a prompt usually find its
 * blocks cached by the first and are not reported. */
static void sd_group_add_usage(sd_group *g, const sd_job *j, const sd_gen_result *r) {
    if (j->first_of_prompt) g->usage_prompt += r->n_prompt, g->usage_cached += r->n_cached;
    g->usage_completion += r->n_completion;
    g->usage_reasoning += r->n_reasoning;
    sd_metrics_usage(&g->srv->metrics, r->n_prompt, r->n_completion, j->n_emitted ? j->t_first - j->t_submit : -1);
}

static enum MHD_Result sd_gen_answer(sd_group *g) {
    sd_server *srv = g->srv;
    sd_endpoint ep = g->chat ? SD_EP_CHAT : SD_EP_COMPLETIONS;
    sd_group_wait(g);
    if (g->disconnected) return MHD_NO; /* nobody to answer */
    sd_api_error e;
    sd_gen_result *r = calloc((size_t)g->n_jobs, sizeof *r);
    if (!r) {
        sd_api_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        return sd_http_reply_error(srv, g->conn, ep, &e);
    }
    for (int i = 0; i < g->n_jobs; i++)
        if (!sd_job_result(g->jobs[i], &r[i], &e)) {
            free(r);
            return sd_http_reply_error(srv, g->conn, ep, &e); /* one failed: the request did */
        }
    for (int i = 0; i < g->n_jobs; i++) sd_group_add_usage(g, g->jobs[i], &r[i]);
    sd_gen_result usage = {.n_prompt = g->usage_prompt, .n_completion = g->usage_completion,
                           .n_cached = g->usage_cached, .has_reasoning = r[0].has_reasoning,
                           .n_reasoning = g->usage_reasoning};
    sd_buf b = {0};
    sd_resp_completion(&b, srv, g->chat, g->id, g->created, r, g->n_jobs, &usage);
    free(r);
    enum MHD_Result ok = b.oom ? MHD_NO : sd_http_reply(srv, g->conn, ep, 200, "application/json", b.p, b.len);
    sd_buf_free(&b);
    return ok;
}

/* ------------------------------------------------------------------------- */
/* streamed answer                                                            */
/* ------------------------------------------------------------------------- */
/* Tool calling: the deltas of the text released so far (final: the whole text, it ended), one
 * chunk each; the logprobs of tokens up to entry k go with the first (none made: they wait for
 * a later chunk or the last one). 1 if a chunk was made. */
static int sd_job_tool_chunks(sd_job *j, sd_buf *out, int final, int32_t k, size_t base) {
    sd_buf d = {0};
    sd_tools_feed(&j->tools, (j->text.p ? j->text.p : "") + base, j->stopper.safe - base, final, &d); /* base: where
                                                                        the content begins (reasoning) */
    int made = 0;
    for (size_t at = 0; at < d.len && !d.oom;) {
        const char *nl = memchr(d.p + at, '\n', d.len - at);
        size_t end = nl ? (size_t)(nl - d.p) : d.len;
        const sd_lp_span *lp = !made && j->logprobs && k > j->lp_sent ? sd_job_span(j, j->lp_sent, k, j->stopper.safe) : NULL;
        sd_resp_delta_chunk(out, j->srv, j->g->id, j->g->created, j->index, d.p + at, end - at, lp);
        if (lp) j->lp_sent = k;
        made = 1;
        at = end + 1;
    }
    if (d.oom) out->oom = 1;
    sd_buf_free(&d);
    return made;
}

/* With --reasoning-parser (under j->mu, or after the job ended; final: it did): the text released
 * so far split (sd_reasoning_feed) into a {"reasoning", "reasoning_content"} delta and then
 * content deltas (through the tool parser when tools are on), never a tag in either; the
 * logprobs of tokens up to entry k go with the first chunk. 1 if a chunk was made. */
static int sd_job_take_reasoning(sd_job *j, sd_buf *out, int final, int32_t k) {
    const char *text = j->text.p ? j->text.p : "";
    size_t ra, rb, ca, cb;
    sd_reasoning_feed(&j->rsn, text, j->stopper.safe, final, &ra, &rb, &ca, &cb);
    int made = 0;
    if (rb > ra) {
        sd_buf d = {0};
        for (int f = 0; f < 2; f++) {
            sd_buf_puts(&d, f ? ",\"reasoning_content\":" : "{\"reasoning\":");
            sd_buf_json_str(&d, text + ra, rb - ra);
        }
        sd_buf_puts(&d, "}");
        const sd_lp_span *lp = j->logprobs && k > j->lp_sent ? sd_job_span(j, j->lp_sent, k, j->stopper.safe) : NULL;
        sd_resp_delta_chunk(out, j->srv, j->g->id, j->g->created, j->index, d.p ? d.p : "{}", d.len ? d.len : 2, lp);
        if (d.oom) out->oom = 1;
        sd_buf_free(&d);
        if (lp) j->lp_sent = k;
        made = 1;
    }
    if (j->rsn.phase == 2 && j->tools.choice != SD_TC_NONE) {
        made |= sd_job_tool_chunks(j, out, final, k, j->rsn.content_at);
    } else if (cb > ca) {
        sd_resp_chunk(out, j->srv, 1, j->g->id, j->g->created, j->index, text + ca, cb - ca, 0, NULL,
                      j->logprobs && k > j->lp_sent ? sd_job_span(j, j->lp_sent, k, j->stopper.safe) : NULL);
        if (k > j->lp_sent) j->lp_sent = k;
        made = 1;
    }
    j->sent = j->stopper.safe;
    return made;
}

/* Under j->mu: format the text released since the last chunk, with the logprobs of the
 * tokens whose text ends in it. 1 if a chunk was made. */
static int sd_job_take_text(sd_job *j, sd_buf *out) {
    if (j->echo && !j->echo_sent) return 0; /* the prompt goes first (sd_job_echo_chunk) */
    if (j->stopper.safe <= j->sent) return 0;
    int32_t k = j->lp_sent;
    while (k < j->lp_resolved && j->lp[k].end <= j->stopper.safe) k++;
    sd_group *g = j->g;
    if (j->rsn.parser != SD_RP_NONE) return sd_job_take_reasoning(j, out, 0, k);
    if (j->tools.choice != SD_TC_NONE) {
        int made = sd_job_tool_chunks(j, out, 0, k, 0);
        j->sent = j->stopper.safe;
        return made;
    }
    sd_resp_chunk(out, j->srv, j->chat, g->id, g->created, j->index, j->text.p + j->sent, j->stopper.safe - j->sent,
                  0, NULL, j->logprobs ? sd_job_span(j, j->lp_sent, k, j->stopper.safe) : NULL);
    j->lp_sent = k;
    j->sent = j->stopper.safe;
    return 1;
}

/* Under j->mu: echo's first chunk can go (its prompt records are all in, or it ended): from
 * then on nothing writes what it shows, so it is formatted outside the lock (sd_job_echo_chunk)
 * and a long prompt does not hold up the scheduler thread's callbacks. */
static int sd_job_echo_ready(const sd_job *j) {
    return j->echo && !j->echo_sent && (j->echo_top < 0 || j->n_plp >= j->n_prompt - 1 || j->done);
}

/* The prompt as the choice's first chunk (vLLM and OpenAI stream it first), with its tokens'
 * entries when logprobs are asked for. */
static void sd_job_echo_chunk(sd_job *j) {
    sd_group *g = j->g;
    const sd_lp_echo *ec = sd_job_echo(j);
    /* no generated entries: nothing the scheduler thread writes (lp, text) is read here */
    sd_lp_span sp = {NULL, 0, 0, "", 0, &j->cur, ec, ec ? ec->text_cps : 0};
    sd_resp_chunk(&g->out, j->srv, 0, g->id, g->created, j->index, j->echo_text, j->echo_len, 0, NULL,
                  j->logprobs ? &sp : NULL);
    j->echo_sent = 1;
}

/* A collected choice's last chunk (finish_reason, its speculative statistics). A failed
 * choice ends the stream with an error event: the others are cancelled. */
static void sd_job_final_chunk(sd_job *j) {
    sd_group *g = j->g;
    sd_gen_result r;
    sd_api_error e;
    j->final_sent = 1;
    if (!sd_job_result(j, &r, &e)) {
        sd_buf_puts(&g->out, "data: ");
        sd_resp_error_json(&g->out, &e);
        sd_buf_puts(&g->out, "\n\n");
        g->failed = 1;
        return;
    }
    /* what the reasoning split (a tag's first bytes) and the tool parser held back */
    if (j->rsn.parser != SD_RP_NONE) sd_job_take_reasoning(j, &g->out, 1, j->lp_sent);
    else if (j->tools.choice != SD_TC_NONE) sd_job_tool_chunks(j, &g->out, 1, j->lp_sent, 0);
    if (j->tools.choice != SD_TC_NONE && j->tools.n_calls > 0 &&
        (j->tools.choice == SD_TC_AUTO || j->tools.choice == SD_TC_REQUIRED)) /* "tool_calls" when calls went out */
        r.finish = "tool_calls";
    if (j->rsn.parser != SD_RP_NONE || j->tools.choice != SD_TC_NONE)
        r.lp = j->logprobs ? sd_job_span(j, j->lp_sent, j->n_lp, r.len) : NULL;
    sd_resp_chunk(&g->out, j->srv, j->chat, g->id, g->created, j->index, "", 0, 0, &r, r.lp && r.lp->n ? r.lp : NULL);
    j->lp_sent = j->n_lp;
    sd_group_add_usage(g, j, &r);
}

/* One pass over the choices: their new text, then the last chunk of those collected.
 * 1 when it wrote something; sets PH_FINAL once every choice has ended. */
static int sd_group_take(sd_group *g) {
    int any = 0, all = 1;
    for (int i = 0; i < g->n_jobs && !g->failed; i++) {
        sd_job *j = g->jobs[i];
        pthread_mutex_lock(&j->mu);
        const int echo = sd_job_echo_ready(j);
        int got = sd_job_take_text(j, &g->out);
        pthread_mutex_unlock(&j->mu);
        if (echo) sd_job_echo_chunk(j), got = 1;
        else if (!got && j->done && !j->final_sent && (!j->echo || j->echo_sent)) sd_job_final_chunk(j), got = 1;
        any |= got;
        all &= j->final_sent;
    }
    if (all || g->failed) g->phase = PH_FINAL;
    return any;
}

/* Block until there is something to send or every choice ended. 0, or -1 when the client left. */
static int sd_group_next(sd_group *g) {
    for (;;) {
        pthread_mutex_lock(&g->mu);
        long seen = g->events;
        pthread_mutex_unlock(&g->mu);
        if (sd_group_take(g) || g->phase == PH_FINAL) return 0;
        int ended = 0;
        for (int i = 0; i < g->n_jobs; i++)
            if (!g->jobs[i]->done && sd_job_poll(g->jobs[i], 0)) ended = 1;
        if (ended) continue; /* send what the stop filter released, and its last chunk */
        sd_group_watch(g);
        if (g->disconnected) return -1;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += SD_POLL_MS * 1000000L;
        if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
        pthread_mutex_lock(&g->mu);
        if (g->events == seen) pthread_cond_timedwait(&g->cv, &g->mu, &dl);
        pthread_mutex_unlock(&g->mu);
    }
}

/* The usage chunk (summed over the choices, asked for and nothing failed), then [DONE]. */
static void sd_group_final_events(sd_group *g) {
    if (g->include_usage && !g->failed) {
        sd_gen_result usage = {.n_prompt = g->usage_prompt, .n_completion = g->usage_completion,
                               .n_cached = g->usage_cached, .n_reasoning = g->usage_reasoning,
                               .has_reasoning = g->chat && g->srv->reasoning != SD_RP_NONE};
        sd_resp_usage_chunk(&g->out, g->srv, g->chat, g->id, g->created, &usage);
    }
    sd_buf_puts(&g->out, "data: [DONE]\n\n");
    g->phase = PH_END;
}

static ssize_t sd_group_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    sd_group *g = cls;
    while (g->out_pos == g->out.len) {
        if (g->phase == PH_END) return MHD_CONTENT_READER_END_OF_STREAM;
        g->out.len = 0;
        g->out_pos = 0;
        if (g->phase == PH_ROLE) { /* chat: each choice's first chunk announces the role (as vLLM) */
            for (int i = 0; i < g->n_jobs; i++)
                sd_resp_chunk(&g->out, g->srv, 1, g->id, g->created, i, "", 0, 1, NULL, NULL);
            g->phase = PH_TEXT;
        } else if (g->phase == PH_TEXT) {
            if (sd_group_next(g)) return MHD_CONTENT_READER_END_WITH_ERROR;
        } else {
            sd_group_final_events(g);
        }
        if (g->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = g->out.len - g->out_pos < max ? g->out.len - g->out_pos : max;
    memcpy(buf, g->out.p + g->out_pos, n);
    g->out_pos += n;
    return (ssize_t)n;
}

static void sd_group_stream_done(void *cls) {
    sd_group *g = cls;
    for (int i = 0; i < g->n_jobs; i++) {
        sd_job *j = g->jobs[i];
        if (j->rid && !j->done && !j->cancelled) sd_metrics_event(&g->srv->metrics, 1, 0); /* left mid-stream */
    }
    sd_group_free(g);
}

static enum MHD_Result sd_gen_stream(sd_group *g) {
    sd_server *srv = g->srv;
    g->phase = g->chat ? PH_ROLE : PH_TEXT;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sd_group_read, g,
                                                               sd_group_stream_done);
    if (!r) {
        sd_group_free(g);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ok = MHD_queue_response(g->conn, 200, r);
    sd_metrics_http(&srv->metrics, g->chat ? SD_EP_CHAT : SD_EP_COMPLETIONS, 200);
    MHD_destroy_response(r); /* frees the group through sd_group_stream_done when the stream ends */
    return ok;
}

enum MHD_Result sd_gen_handle(sd_server *srv, struct MHD_Connection *c, int chat, const char *body, size_t len) {
    sd_endpoint ep = chat ? SD_EP_CHAT : SD_EP_COMPLETIONS;
    sd_api_error e;
    sd_group *g = NULL;
    if (sd_gen_start(srv, c, chat, body, len, sd_now(), &g, &e)) return sd_http_reply_error(srv, c, ep, &e);
    /* the idle timeout guards uploads; while the answer is generated the connection may be
     * quiet for long: allow the request's own limit (then a client that stopped reading is
     * still dropped eventually) */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned int)(srv->cfg.timeout_s + srv->cfg.body_timeout_s + 1));
    if (g->stream) return sd_gen_stream(g);
    enum MHD_Result ok = sd_gen_answer(g);
    sd_group_free(g);
    return ok;
}

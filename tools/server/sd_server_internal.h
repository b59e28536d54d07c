/* sd_server_internal.h — what the server's files share: the server state, the metrics
 * counters, and the functions each file offers the others. */
#ifndef SD_SERVER_INTERNAL_H
#define SD_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "specdec.h"
#include "sd_server.h"
#include "sd_server_request.h"
#include "sd_server_text.h"

#define SD_METRICS_CODES 12 /* distinct status codes tracked per endpoint */

typedef struct sd_server_metrics {
    pthread_mutex_t mu;
    int codes[SD_METRICS_CODES];                 /* status codes seen, 0 = free slot */
    long http[SD_EP_COUNT][SD_METRICS_CODES];    /* responses by endpoint and code */
    long prompt_tokens, completion_tokens;       /* usage of answered generation requests */
    long disconnects, timeouts;                  /* requests cancelled for these reasons */
    double ttft_sum;                             /* seconds from submit to the first token */
    long ttft_count;
} sd_server_metrics;

typedef struct sd_server {
    sd_server_config cfg;
    sd_spec_config spec;               /* --speculative-config (cfg.draft_dir may come from its "model") */
    char model_id[256];                /* the id served in /v1/models and matched in "model" */
    specdec_model *target, *draft;
    specdec_tokenizer *tok;
    specdec_scheduler *sched;
    int32_t n_ctx, n_vocab;
    const char *backend_name;          /* "cpu" / "cuda" */
    /* chat prompts: rendered by specdec_chat_tokenize with cfg.chat_template (NULL = the
     * tokenizer's own family). chat_family: the family used ("plain" for a tokenizer with
     * no template), NULL when the model's template is of no family specdec renders:
     * then chat requests get 400 chat_template_unsupported with chat_problem. */
    const char *chat_family;
    char chat_problem[256];
    struct MHD_Daemon *daemon;
    atomic_int stopping;               /* set at shutdown: waits give up, new requests get 503 */
    atomic_long next_id;               /* response ids */
    atomic_int active_jobs;            /* generation requests not yet answered (drained at shutdown) */
    sd_server_metrics metrics;
} sd_server;

/* sd_server_http.c: replies (each counted in the metrics under ep). */
enum MHD_Result sd_http_reply(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep, int code,
                              const char *content_type, const char *body, size_t len);
enum MHD_Result sd_http_reply_error(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep,
                                    const sd_api_error *e);
int sd_http_start(sd_server *srv);  /* 0 or -1 (message printed) */
void sd_http_stop(sd_server *srv);
/* 1 if the client of c has closed its end (checked without blocking). */
int sd_http_client_gone(struct MHD_Connection *c);
double sd_now(void);

/* sd_server_gen.c: a POST to /v1/completions or /v1/chat/completions, body complete. */
enum MHD_Result sd_gen_handle(sd_server *srv, struct MHD_Connection *c, int chat, const char *body, size_t len);

/* sd_server_response.c */
typedef struct sd_gen_result {
    const char *text;          /* the returned text (stop sequence cut off) */
    size_t len;
    const char *finish;        /* "stop" or "length" */
    const char *stop_detail;   /* the engine's stop reason, or "timeout" / "cancelled" */
    int32_t n_prompt, n_completion;
    const specdec_stats *stats;
    int32_t n_draft;           /* γ of a chain (0 without a draft, or with a tree) */
    const int32_t *tree;       /* the draft tree's widths, n_tree of them (0: none) */
    int n_tree;
    int32_t draft_nodes;       /* the tree's node budget (0: none) */
    specdec_verify_mode verify;
} sd_gen_result;
/* Whole (non-streamed) response body. */
int sd_resp_completion(sd_buf *b, const sd_server *srv, int chat, const char *id, long created,
                       const sd_gen_result *r);
/* One SSE event "data: {...}\n\n": a text delta (text may be empty), or the final chunk
 * with finish_reason and the speculative statistics when r is not NULL. chat_role: the
 * chat stream's first chunk announcing the assistant role. */
int sd_resp_chunk(sd_buf *b, const sd_server *srv, int chat, const char *id, long created, const char *text,
                  size_t len, int chat_role, const sd_gen_result *r);
int sd_resp_usage_chunk(sd_buf *b, const sd_server *srv, int chat, const char *id, long created,
                        const sd_gen_result *r);
int sd_resp_error_json(sd_buf *b, const sd_api_error *e);
int sd_resp_models(sd_buf *b, const sd_server *srv);

/* sd_server_metrics.c */
int sd_metrics_init(sd_server_metrics *m);
void sd_metrics_destroy(sd_server_metrics *m);
void sd_metrics_http(sd_server_metrics *m, sd_endpoint ep, int code);
void sd_metrics_usage(sd_server_metrics *m, int32_t n_prompt, int32_t n_completion, double ttft_s);
void sd_metrics_event(sd_server_metrics *m, int disconnect, int timeout);
int sd_metrics_render(sd_buf *b, sd_server *srv);

#endif

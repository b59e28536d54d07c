/* sd_server_internal.h — what the server's files share: the server state, the metrics
 * counters, and the functions each file offers the others. */
#ifndef SD_SERVER_INTERNAL_H
#define SD_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <microhttpd.h>

#include "specdec.h"
#include "sd_server.h"
#include "sd_server_request.h"
#include "sd_server_text.h"
#include "sd_server_reasoning.h"
#include "sd_server_tools.h"

#define SD_METRICS_CODES 32 /* distinct status codes tracked (this server answers 15, libmicrohttpd 1 more) */
#define SD_HIST_MAX 24      /* buckets of a histogram (+Inf not included) */
#define SD_MAX_HOSTS 16     /* Host names accepted on a loopback bind */

/* A Prometheus histogram with vLLM's bucket bounds (sd_server_metrics.c). */
typedef enum sd_hist_kind { SD_H_TTFT, SD_H_ITL, SD_H_E2E, SD_H_QUEUE, SD_H_COUNT } sd_hist_kind;
typedef struct sd_hist {
    long bucket[SD_HIST_MAX]; /* observations <= each bound (not cumulative here) */
    long count;
    double sum;
} sd_hist;

/* How a generation request ended, as vLLM's finished_reason label. */
typedef enum sd_finish { SD_FIN_STOP, SD_FIN_LENGTH, SD_FIN_ABORT, SD_FIN_ERROR, SD_FIN_COUNT } sd_finish;
/* How a generation request admitted to the scheduler ended, abort split by its cause
 * (the outcome label of specdec_generation_outcomes_total). */
typedef enum sd_outcome {
    SD_OUT_STOP,       /* ran to its end: EOS or a stop string */
    SD_OUT_LENGTH,     /* ran to its end: max_tokens or the context */
    SD_OUT_TIMEOUT,    /* cut by --timeout (queued or running) */
    SD_OUT_DISCONNECT, /* cut because the client left */
    SD_OUT_SHUTDOWN,   /* cut by the drain */
    SD_OUT_ERROR,      /* failed */
    SD_OUT_COUNT
} sd_outcome;

typedef struct sd_server_metrics {
    pthread_mutex_t mu;
    int codes[SD_METRICS_CODES];                 /* status codes seen, 0 = free slot */
    long http[SD_EP_COUNT][SD_METRICS_CODES];    /* responses by endpoint and code */
    long library[SD_METRICS_CODES];              /* of those, answers libmicrohttpd wrote itself, by code */
    long outcomes[2][2][SD_OUT_COUNT];           /* [chat][stream][outcome] of admitted generation requests */
    long prompt_tokens, completion_tokens;       /* usage of answered generation requests */
    long prefill_tokens;                         /* prompt tokens of every request that was prefilled */
    long cached_tokens;                          /* of them, those whose KV came from the prefix cache */
    long disconnects, timeouts;                  /* requests cancelled for these reasons */
    long over_limit, deadline_closes;            /* connections refused (503) / cut by the arrival deadline */
    long finished[SD_FIN_COUNT];                 /* generation requests by how they ended */
    double ttft_sum;                             /* seconds from submit to the first token */
    long ttft_count;
    sd_hist hist[SD_H_COUNT];
} sd_server_metrics;

enum { SD_STATE_LOADING, SD_STATE_READY, SD_STATE_DRAINING };

typedef struct sd_track sd_track; /* a connection's arrival deadline (sd_server_conn.c) */
typedef struct sd_gcache sd_gcache; /* compiled grammars of structured output (sd_server_grammar.c) */
typedef struct sd_prep sd_prep;   /* the bounded pool that parses and tokenizes (sd_server_prep.c) */

typedef struct sd_server {
    sd_server_config cfg;
    sd_spec_config spec;               /* --speculative-config (cfg.draft_dir may come from its "model") */
    char model_id[256];                /* the id served in /v1/models and matched in "model" */
    specdec_model *target, *draft;
    int draft_head;                    /* the draft is a head: SPECDEC_DRAFT_EAGLE3 (the eagle3 drafter) or
                                          SPECDEC_DRAFT_MTP (the target's MTP layer); 0: a draft model or none */
    specdec_tokenizer *tok;
    specdec_scheduler *sched;
    int32_t n_ctx, n_vocab;
    const char *backend_name;          /* "cpu" / "cuda" */
    /* chat prompts: rendered by specdec_chat_tokenize with cfg.chat_template (NULL = the
     * tokenizer's own). chat_family: the template name used ("jinja" for the model's own
     * template, "plain" for a tokenizer with none, or the name forced), NULL when the model's
     * template is outside what specdec's Jinja interpreter runs: then chat requests get 400
     * chat_template_unsupported with chat_problem. */
    const char *chat_family;
    char chat_problem[256];
    sd_tool_parser tool_parser;        /* --enable-auto-tool-choice --tool-call-parser: "auto"'s parser (NONE: "auto" is 400) */
    sd_reasoning_parser reasoning;     /* --reasoning-parser (NONE: chat outputs are all content) */
    char rs_start[SD_REASONING_TAG_MAX + 1], rs_end[SD_REASONING_TAG_MAX + 1]; /* its tags */
    int32_t rs_marker[SPECDEC_MAX_GRAMMAR_AFTER_TOKENS]; /* the end tag's ids: a grammar acts after them */
    int32_t n_rs_marker;
    struct MHD_Daemon *daemon;
    int listen_fd;                     /* bound by us (exact errors), handed to libmicrohttpd */
    atomic_int state;                  /* SD_STATE_*: loading and draining answer 503 */
    atomic_int cancel_all;             /* the drain's time is up: waits cancel their requests */
    atomic_long next_id;               /* response ids */
    atomic_int active_jobs;            /* generation requests not yet answered (drained at shutdown) */
    atomic_int open_requests;          /* HTTP requests begun and not completed: a job's answer may still
                                          be on its way out after the job ended (drained at shutdown) */
    /* connections: each tracked from accept to close (sd_server_conn.c), under conn_mu */
    pthread_mutex_t conn_mu;
    sd_track *tracks;
    int n_open;
    int trim_pending;                  /* memory was freed: give it back once idle */
    /* Host names accepted when bound to loopback (n_hosts 0: bound elsewhere, no check) */
    const char *hosts[SD_MAX_HOSTS];
    int n_hosts;
    char hosts_buf[1024];
    size_t max_prompt_bytes;           /* effective limit (config, or derived from the vocabulary) */
    sd_prep *prep;
    sd_gcache *grammars;               /* NULL until loaded (then never: creation failing stops the start) */
    sd_server_metrics metrics;
} sd_server;

/* The server is loaded and not draining (acquire: its models may be used). */
static inline int sd_ready(sd_server *srv) { return atomic_load(&srv->state) == SD_STATE_READY; }

/* sd_server_http.c: replies (each counted in the metrics under ep). */
enum MHD_Result sd_http_reply(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep, int code,
                              const char *content_type, const char *body, size_t len);
enum MHD_Result sd_http_reply_error(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep,
                                    const sd_api_error *e);
int sd_http_start(sd_server *srv);  /* bind, listen, start the daemon: 0 or -1 (message printed) */
void sd_http_stop(sd_server *srv);
/* 1 if the client of c has closed its end (checked without blocking). */
int sd_http_client_gone(struct MHD_Connection *c);
double sd_now(void);

/* sd_server_conn.c: connection tracking (MHD_OPTION_NOTIFY_CONNECTION), the arrival
 * deadline of each request, the connection limit, and the sweep that enforces them. */
void sd_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                    enum MHD_ConnectionNotificationCode code);
int sd_conn_over_limit(struct MHD_Connection *c);     /* 1: accepted beyond --max-connections */
void sd_conn_arrived(sd_server *srv, struct MHD_Connection *c); /* the request is in: no deadline */
void sd_conn_idle(sd_server *srv, struct MHD_Connection *c);    /* answered: the next one's deadline */
void sd_conn_sweep(sd_server *srv);                   /* close connections past their deadline */
int sd_conn_init(sd_server *srv);
void sd_conn_destroy(sd_server *srv);

/* sd_server_prep.c: a fixed pool of threads for the work done before a request reaches
 * the scheduler (parsing, prompt checks, tokenizing), so that at most `threads` such
 * jobs run at once however many connections deliver bodies. sd_prep_run queues fn(arg)
 * for a body of `bytes` and waits for it: FIFO within two lanes, bodies of up to 64 KiB
 * before bigger ones; with no pool (NULL) it runs fn here. */
sd_prep *sd_prep_create(int threads);
void sd_prep_free(sd_prep *p);
void sd_prep_run(sd_prep *p, size_t bytes, void (*fn)(void *), void *arg);
int sd_prep_pending(sd_prep *p); /* jobs queued and not yet taken (tests) */
/* Prompt cost before work. sd_prep_bytes: 0, or 400 context_length_exceeded when a prompt
 * text of len bytes is over srv->max_prompt_bytes. sd_prep_bound: a running token count of
 * text added to *b (pieces of 16 KiB cut at spaces, tokenized one by one, so memory stays
 * bounded), stopping at the first piece that takes it past b->limit (beyond a slack of a few
 * tokens per cut): then 400 context_length_exceeded. Texts of one piece are not counted
 * (the exact tokenization that follows costs no more). */
typedef struct sd_bound {
    int32_t limit; /* tokens the prompt may have */
    long count;    /* counted so far */
    int cuts;      /* pieces cut so far */
} sd_bound;
int sd_prep_bytes(const sd_server *srv, size_t len, const char *param, sd_api_error *e);
int sd_prep_bound(sd_server *srv, sd_bound *b, const char *text, size_t len, const char *param, sd_api_error *e);
/* The default byte limit: 2 x n_ctx x the longest token's text (a prompt longer than
 * n_ctx x that cannot fit; the factor covers normalizers that shrink text). */
size_t sd_prep_default_bytes(const sd_server *srv);

/* sd_server_grammar.c: the compiled grammars of structured output, an LRU cache of at most
 * capacity entries keyed by (kind, the spec's exact bytes); thread-safe. sd_gcache_get hands
 * out an entry holding a reference (cached, or compiled now against tok and cached): 0, or the
 * HTTP status with *e set (400 naming g->param with the library's message for a spec it
 * refuses). The request returns it with sd_gcache_put once its choices are submitted (the
 * scheduler keeps its own references). sd_gcache_free: at shutdown, after every request. */
typedef struct sd_gentry sd_gentry;
sd_gcache *sd_gcache_create(int capacity); /* NULL: out of memory; capacity 0: compile every time */
void sd_gcache_free(sd_gcache *c);
int sd_gcache_get(sd_gcache *c, const specdec_tokenizer *tok, const sd_api_guided *g, sd_gentry **out,
                  sd_api_error *e);
const specdec_grammar *sd_gentry_grammar(const sd_gentry *x);
void sd_gcache_put(sd_gcache *c, sd_gentry *x);
void sd_gcache_stats(sd_gcache *c, long *hits, long *misses, int *entries);

/* sd_server_gen.c: a POST to /v1/completions or /v1/chat/completions, body complete. */
enum MHD_Result sd_gen_handle(sd_server *srv, struct MHD_Connection *c, int chat, const char *body, size_t len);
/* vLLM's continue_final_message on a rendered chat prompt (sd_server_gen.c): *len cut. 0 or a 400. */
/* POST /tokenize and /detokenize (sd_server_tokenize.c): vLLM's forms and answers. */
enum MHD_Result sd_tok_handle(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep, const char *body, size_t len);

/* sd_server_response.c */
/* One emitted token's log-probabilities (the library's specdec_token_logprobs, copied). */
typedef struct sd_lp_entry {
    int32_t token;
    float logprob;
    int32_t rank;  /* 1 + the ids with a larger value */
    int32_t n_top;
    int32_t top_tokens[SPECDEC_MAX_TOP_LOGPROBS];
    float top_logprobs[SPECDEC_MAX_TOP_LOGPROBS];
    size_t end; /* bytes of the generated text up to the end of this token's text; (size_t)-1 until
                   known (a token whose bytes the detokenizer holds back ends with the later text) */
} sd_lp_entry;
/* Code points counted in text[0..bytes): text_offset, counted once however many chunks ask. */
typedef struct sd_cp_cursor {
    size_t bytes, cps;
} sd_cp_cursor;
/* The prompt's tokens before the completion's in "logprobs" (echo): token 0 has no entry
 * (null logprob and top list), token k > 0 entry e[k - 1]. */
typedef struct sd_lp_echo {
    const int32_t *ids;   /* [n] the prompt's ids */
    int32_t n;            /* tokens shown: 1 + the entries received (all but a cancelled prefill's) */
    const sd_lp_entry *e; /* [n - 1] */
    int32_t n_top;        /* the top list's length shown (the entries may hold more) */
    const size_t *offset; /* [n] code points of the echoed text before each token */
    size_t text_cps;      /* code points of the echoed prompt (sd_lp_span.base) */
} sd_lp_echo;
/* The entries a response or a chunk carries. */
typedef struct sd_lp_span {
    const sd_lp_entry *e; /* [n] */
    int32_t n;
    size_t start;         /* where e[0]'s text starts in the generated text */
    const char *text;     /* the generated text, len bytes of it returned (a stop sequence cut off) */
    size_t len;
    sd_cp_cursor *cur;    /* advanced (monotone) by the writer */
    const sd_lp_echo *echo; /* NULL, or the prompt's tokens first (echo) */
    size_t base;          /* added to the generated tokens' text_offset: the echoed prompt's code points */
} sd_lp_span;
/* vLLM's "prompt_logprobs": null, then per prompt token {"<id>": {logprob, rank,
 * decoded_token}} holding the token and the top n_top (shape of sd_lp_echo's ids / e / n). */
typedef struct sd_prompt_lp {
    const int32_t *ids;
    int32_t n;
    const sd_lp_entry *e;
    int32_t n_top;
} sd_prompt_lp;
typedef struct sd_gen_result {
    const char *text;          /* the returned text (stop sequence cut off) */
    size_t len;
    const char *finish;        /* "stop", "length", or "abort" (cancelled: see stop_detail) */
    const char *stop_detail;   /* the engine's stop reason, or why it was cancelled: "timeout",
                                  "shutdown", "disconnect" */
    int stop_by_token;         /* vLLM's choice "stop_reason": 1: stop_token, the stop_token_ids id */
    int32_t stop_token;        /* it stopped on; else stop_str, the stop string ("stop") the text */
    const char *stop_str;      /* was cut at; else (NULL) null */
    int32_t n_prompt, n_completion;
    int32_t n_cached;          /* prompt tokens whose KV came from the prefix cache (stats' n_cached_prompt;
                                  usage: each prompt's first choice's, summed by the caller) */
    const specdec_stats *stats;
    int32_t n_draft;           /* γ of a chain (0 without a draft, or with a tree) */
    const int32_t *tree;       /* the draft tree's widths, n_tree of them (0: none) */
    int n_tree;
    int32_t draft_nodes;       /* the tree's node budget (0: none) */
    specdec_verify_mode verify;
    const sd_lp_span *lp;      /* the tokens' logprobs (NULL: not asked for) */
    const char *echo;          /* completions' echo: the prompt text before text (NULL: none) */
    const sd_tool_out *tools;  /* chat with tool calling: the text becomes content + tool_calls (NULL: text) */
    const sd_reasoning *rsn;   /* chat with --reasoning-parser: the text splits into reasoning + content */
    size_t echo_len;
    const sd_prompt_lp *prompt_lp; /* vLLM's prompt_logprobs (NULL: not asked for) */
    int has_reasoning;         /* chat with --reasoning-parser: usage.completion_tokens_details is written */
    int32_t n_reasoning;       /* ... its reasoning_tokens (sd_job_reasoning_tokens; summed by the caller) */
} sd_gen_result;
/* Whole (non-streamed) response body: choices r[0..n_choices), choice i with "index" i
 * (completions: text = echo + text, "prompt_logprobs" per choice; chat: r[0]'s at the top);
 * usage: n_prompt / n_completion / n_cached for "usage" (summed by the caller; n_cached as
 * "prompt_tokens_details": {"cached_tokens"}, OpenAI's field). The "speculative"
 * statistics: at the top level with one choice (the single-choice shape), inside each
 * choice with several. */
int sd_resp_completion(sd_buf *b, const sd_server *srv, int chat, const char *id, long created,
                       const sd_gen_result *r, int n_choices, const sd_gen_result *usage);
/* One SSE event "data: {...}\n\n" for choice index: a text delta (text may be empty), or
 * the choice's final chunk with finish_reason and its speculative statistics (top level:
 * a chunk carries one choice) when r is not NULL. chat_role: the chat stream's first
 * chunk announcing the assistant role. lp: the logprobs of the tokens whose text this
 * chunk carries (NULL: "logprobs": null). */
int sd_resp_chunk(sd_buf *b, const sd_server *srv, int chat, const char *id, long created, int index,
                  const char *text, size_t len, int chat_role, const sd_gen_result *r, const sd_lp_span *lp);
/* A chat chunk whose "delta" is the JSON object delta[0..n) (tool calling's deltas). */
int sd_resp_delta_chunk(sd_buf *b, const sd_server *srv, const char *id, long created, int index, const char *delta,
                        size_t n, const sd_lp_span *lp);
/* The "logprobs" value of a choice: chat {"content": [{token, logprob, bytes, top_logprobs}]},
 * completions {tokens, token_logprobs, top_logprobs, text_offset} (OpenAI's shapes). */
int sd_resp_logprobs(sd_buf *b, const sd_server *srv, int chat, const sd_lp_span *lp);
/* A token as a response shows it: its text alone (the tokenizer's decode of [id], special
 * tokens kept) and its raw bytes (differing where the token is part of a UTF-8 sequence:
 * the text then has U+FFFD). Either may be cut to its capacity. */
void sd_resp_token_text(const specdec_tokenizer *tok, int32_t id, char *text, size_t text_cap, size_t *text_len,
                        unsigned char *bytes, size_t bytes_cap, size_t *bytes_len);
/* The usage chunk ("choices": []): r's n_prompt / n_completion / n_cached (summed over the choices). */
int sd_resp_usage_chunk(sd_buf *b, const sd_server *srv, int chat, const char *id, long created,
                        const sd_gen_result *r);
int sd_resp_error_json(sd_buf *b, const sd_api_error *e);
int sd_resp_models(sd_buf *b, const sd_server *srv);

/* sd_server_metrics.c */
int sd_metrics_init(sd_server_metrics *m);
void sd_metrics_destroy(sd_server_metrics *m);
void sd_metrics_http(sd_server_metrics *m, sd_endpoint ep, int code);
/* An answer libmicrohttpd gave by itself (malformed HTTP): counted as sd_metrics_http, and apart. */
void sd_metrics_http_library(sd_server_metrics *m, sd_endpoint ep, int code);
void sd_metrics_outcome(sd_server_metrics *m, int chat, int stream, sd_outcome o);
/* One line on f: the outcomes so far (printed when the server stops). */
void sd_metrics_summary(sd_server_metrics *m, FILE *f);
void sd_metrics_usage(sd_server_metrics *m, int32_t n_prompt, int32_t n_completion, double ttft_s);
void sd_metrics_event(sd_server_metrics *m, int disconnect, int timeout);
void sd_metrics_observe(sd_server_metrics *m, sd_hist_kind h, double seconds);
/* A generation request ended (submitted to the scheduler): how, its end-to-end latency
 * from arrival and its time queued, the prompt tokens it prefilled (0: none) and of them
 * those whose KV came from the prefix cache. */
void sd_metrics_finish(sd_server_metrics *m, sd_finish f, double e2e_s, double queue_s, int32_t prefilled,
                       int32_t cached);
void sd_metrics_count(sd_server_metrics *m, long *counter); /* ++*counter under the lock */
int sd_metrics_render(sd_buf *b, sd_server *srv);

#endif

/* sd_server.h — `specdec serve`: an OpenAI-compatible HTTP server (libmicrohttpd) on top
 * of the request scheduler (specdec_scheduler_*).
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions (stream false, or true as
 * server-sent events ending with `data: [DONE]`), GET /v1/models, GET /health,
 * GET /metrics (Prometheus text).
 *
 * Files, by concern:
 *   sd_server.c           lifecycle: load models, scheduler, daemon, signals
 *   sd_server_http.c      libmicrohttpd plumbing: routing, auth, body limits, replies
 *   sd_server_request.c   request heads and bodies: parsing and validation (cJSON), fuzz entry
 *   sd_server_conn.c      connections: the arrival deadline of each request, the limit
 *   sd_server_prep.c      the bounded pool that parses and tokenizes, the prompt's cost
 *   sd_server_grammar.c   structured output: the cache of compiled grammars
 *   sd_server_gen.c       a generation request: chat prompt (specdec_chat_tokenize: the
 *                         model's Jinja template or a named one) or tokenize, submit, wait
 *                         or stream
 *   sd_server_response.c  JSON bodies and SSE chunks
 *   sd_server_text.c      output text: stop strings held back and cut, UTF-8, a byte buffer
 *   sd_server_metrics.c   counters and the Prometheus text */
#ifndef SD_SERVER_H
#define SD_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "specdec.h"

#define SD_SERVER_GRAMMAR_CACHE 16 /* default of sd_server_config.grammar_cache */
#define SD_SERVER_GRAMMAR_CACHE_MAX 4096

typedef struct sd_server_config {
    const char *target_dir;      /* borrowed; required */
    const char *draft_dir;       /* borrowed; NULL = plain decoding */
    const char *tokenizer_path;  /* borrowed; NULL = the target's (--tokenizer: a tokenizer.json, its directory, a .gguf) */
    const char *host;            /* bind address; default "127.0.0.1" (loopback only) */
    int port;                    /* 0 = any free port (printed); default 8080 */
    const char *api_key;         /* NULL = no authentication; else "Authorization: Bearer KEY" */
    int parallel;                /* requests decoded at once (scheduler max_active); default 4 */
    int queue;                   /* requests waiting beyond those (429 when full); default 64 */
    specdec_backend backend;     /* default AUTO */
    int n_ctx;                   /* 0 = from the model */
    int cpu_threads;             /* CPU backend threads per model (specdec_engine_params.cpu_threads);
                                    0 = default */
    int n_draft;                 /* default γ of a request (its "n_draft" overrides); default 4 */
    int ngram_corpus_tokens;     /* specdec_engine_params.ngram_corpus_tokens; 0 = none */
    size_t max_body;             /* request body limit in bytes (413 beyond); default 2 MiB */
    double timeout_s;            /* per-request limit from submit to the end; default 600 */
    double body_timeout_s;       /* a request (headers + body) must arrive in full within this many
                                    seconds of the connection's accept or of its previous response
                                    (else the connection is closed); default 30 */
    double idle_timeout_s;       /* a connection silent this long is closed (restored after every
                                    response); whole seconds, rounded up; default 5 */
    double shutdown_timeout_s;   /* SIGTERM: running and queued requests get this long to finish
                                    before they are cancelled (finish_reason "abort"); default 30 */
    int max_connections;         /* simultaneous connections (each a thread); more are answered 503
                                    with Retry-After and closed, up to a slack of max(16, this / 4)
                                    beyond it; libmicrohttpd closes any further one unanswered at
                                    accept (sd_http_start); default 256 */
    const char *allowed_hosts;   /* comma-separated Host names accepted besides localhost, 127.0.0.1,
                                    [::1] and --host when bound to loopback ("*": any); NULL = none */
    size_t max_prompt_bytes;     /* prompt text (or all chat contents) longer than this is refused
                                    before tokenizing; 0 = 2 x n_ctx x the longest token's bytes */
    int prep_threads;            /* threads that parse and tokenize requests (bounded work before the
                                    scheduler); 0 = half the CPUs, 1..4 */
    const char *chat_template;   /* how chat prompts are rendered: a specdec_chat_template_name
                                    ("jinja": the model's own Jinja template, run by specdec's
                                    interpreter as transformers' apply_chat_template; "plain";
                                    a built-in published template: llama3, chatml, llama2, mistral,
                                    zephyr, phi3); NULL = the model's own (specdec_chat_template_detect:
                                    "jinja" when its tokenizer directory has a template, else "plain") */
    const char *model_alias;     /* served model id; NULL = the target directory's name */
    int enable_auto_tool_choice; /* vLLM's --enable-auto-tool-choice: tool_choice "auto" parses calls
                                    with tool_call_parser (required then); 0: "auto" answers 400 */
    const char *tool_call_parser; /* one of SD_TOOL_PARSER_NAMES (sd_server_tools.h); NULL = none */
    const char *reasoning_parser; /* vLLM's --reasoning-parser: SD_REASONING_PARSER_NAMES (chat outputs split
                                     into reasoning and content; response_format / tool_choice grammars
                                     act after the thinking); NULL = none */
    const char *reasoning_tags;   /* the thinking's start and end tags, separated by one space;
                                     NULL = "<think> </think>" (SPECDEC_REASONING_TAGS in the
                                     environment sets it for `specdec serve`) */
    const char *speculative_config; /* vLLM's speculative_config JSON: the requests' default drafter
                                       (sd_server_spec.h); NULL = the draft model if any */
    specdec_prefix_cache prefix_cache; /* automatic prefix caching (include/specdec.h specdec_prefix_cache;
                                          vLLM's --enable-prefix-caching / --no-enable-prefix-caching):
                                          AUTO (default: on where the model and backend can cache), ON
                                          (the start fails where they cannot), OFF */
    int32_t prefill_chunk;       /* prompt tokens prefilled between two rounds (chunked prefill; the
                                    scheduler's prefill_chunk): 0 (default) = no limit */
    int32_t kv_pool_blocks;      /* the scheduler's kv_pool_blocks: 0 (default) = every slot's full context */
    int32_t kv_block_tokens;     /* the scheduler's kv_block_tokens: 0 (default) = its default (16) */
    int32_t kv_admission;        /* a specdec_kv_admission: AUTO (default), RESERVE, OPTIMISTIC */
    int32_t scheduling_policy;   /* a specdec_scheduling_policy: FCFS (default) or PRIORITY (vLLM's
                                    --scheduling-policy; requests' "priority" needs it) */
    int grammar_cache;           /* compiled structured-output grammars kept for reuse (LRU, keyed by
                                    kind and exact spec; each holds its automaton and up to 16 MiB of
                                    token masks): 0 = none; default SD_SERVER_GRAMMAR_CACHE */
    int verbose;                 /* 1: log each request to stderr */
    /* Test hook: called once on the main thread after the daemon listens and before the
     * models load (/health answers 503 "loading" meanwhile), so that a test can hold the
     * server in that state for as long as it needs. NULL in every production path: the
     * CLI (tools/cli/cmd_serve.c) never sets it and no option or environment variable
     * does; only a C program that links specdec_server and fills this struct can
     * (tests/server/serve_load_gate.c). */
    void (*before_load)(void *arg);
    void *before_load_arg;       /* borrowed; passed to before_load */
} sd_server_config;

void sd_server_config_default(sd_server_config *c);

/* 1 if name is a chat template family the library renders (specdec_chat_template_name). */
int sd_server_chat_template_known(const char *name);
/* The family names joined by ", " into buf (for messages). */
void sd_server_chat_template_list(char *buf, size_t cap);

/* Listen, print "listening on http://HOST:PORT", load (/health answers 503 "loading"
 * meanwhile), serve until SIGINT or SIGTERM, then drain: new requests get 503, /health
 * 503 "draining", running and queued requests get shutdown_timeout_s to finish (a second
 * signal ends the wait), the rest are cancelled. Returns the process exit code: 0 after a
 * signal, 1 when the server could not start (port in use: "address already in use"), 2
 * for an unknown chat_template or an empty api_key. */
int sd_server_run(const sd_server_config *c);

#endif

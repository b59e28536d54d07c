/* sd_server_request.h — what a request says, checked before any model work: its head
 * (method, path, API key, declared length: sd_api_check_head) and its body (an OpenAI
 * completions or chat completions request -> sd_api_request: sd_api_parse). Pure: no
 * model, no sockets, no libmicrohttpd, so tests/fuzz/fuzz_server.c fuzzes both. Every
 * failure is an HTTP status with an OpenAI-style error (message, type, param, code). */
#ifndef SD_SERVER_REQUEST_H
#define SD_SERVER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "specdec.h"
#include "sd_server_spec.h"

#define SD_API_MAX_STOP 4        /* OpenAI's limit on "stop" */
#define SD_API_MAX_STOP_LEN 512  /* bytes, the engine's limit */
#define SD_API_MAX_TREE SPECDEC_MAX_DRAFT /* depth of a "tree" (the library's limit) */
/* Several choices per request: "n" samples of each of the prompts of a completions batch.
 * Each choice is its own scheduler request, so one small body must not queue thousands:
 * n <= SD_API_MAX_N, prompts <= SD_API_MAX_PROMPTS, and prompts x n <= SD_API_MAX_CHOICES
 * (also refused when more than the server's --queue: a request's choices are queued together). */
#define SD_API_MAX_N 64
#define SD_API_MAX_PROMPTS 64
#define SD_API_MAX_CHOICES 64
/* Structured output: the most bytes of one constraint's spec (a regex, a JSON schema as text, a
 * choice list as JSON), refused before anything compiles: compile time and the grammar cache's
 * memory grow with it (the library's own limit is 1 MiB). */
#define SD_API_MAX_GUIDED_BYTES ((size_t)64 << 10)

/* Endpoints (also the metrics' rows). */
typedef enum sd_endpoint {
    SD_EP_COMPLETIONS,
    SD_EP_CHAT,
    SD_EP_MODELS,
    SD_EP_HEALTH,
    SD_EP_METRICS,
    SD_EP_TOKENIZE,   /* vLLM's utility endpoints (sd_server_tokenize.c) */
    SD_EP_DETOKENIZE,
    SD_EP_VERSION,
    SD_EP_PING,       /* as /health (vLLM's SageMaker-style alias), GET or POST */
    SD_EP_OTHER,
    SD_EP_COUNT
} sd_endpoint;

typedef struct sd_api_message {
    char *role;    /* "system", "developer", "user", "assistant" or "tool" */
    char *content; /* text (parts joined by "\n", as vLLM joins them); "" for a null assistant content */
} sd_api_message;

/* One prompt of /v1/completions: text, or token ids (exactly one of the two). */
typedef struct sd_api_prompt {
    char *text;     /* NULL when given as ids */
    size_t len;
    int32_t *ids;   /* NULL when given as text */
    int32_t n_ids;
} sd_api_prompt;

/* A request's structured output constraint (docs/STRUCTURED.md; OpenAI's response_format,
 * vLLM's guided_* fields and structured_outputs): at most one per request. */
typedef struct sd_api_guided {
    specdec_grammar_kind kind; /* 0: none */
    char *spec;                /* owned, NUL-terminated, len bytes: the regex, the JSON schema or the
                                  choice list as JSON text; NULL for SPECDEC_GRAMMAR_JSON_OBJECT */
    size_t len;
    char param[48];            /* the field it came from, for errors ("guided_regex",
                                  "response_format", "structured_outputs.json") */
} sd_api_guided;

typedef struct sd_api_request {
    int chat;                      /* 1: /v1/chat/completions */
    char *model;                   /* NULL when absent */
    int add_generation_prompt;     /* chat: vLLM's "add_generation_prompt" (default true), given to the template */
    int continue_final_message;    /* chat: vLLM's "continue_final_message": the rendered prompt ends right after
                                      the last message's content (sd_api_continue_final) */
    sd_api_prompt *prompts;        /* completions: [n_prompts] (a batch: a list of several) */
    int n_prompts;                 /* completions: 1..SD_API_MAX_PROMPTS; chat: 0 */
    int32_t n;                     /* choices per prompt, 1..SD_API_MAX_N (prompts x n <= SD_API_MAX_CHOICES) */
    sd_api_message *messages;      /* chat */
    int n_messages;
    int32_t max_tokens;            /* -1: absent */
    float temperature, top_p, min_p;
    int32_t top_k;
    int has_seed;
    uint64_t seed;
    char *stop[SD_API_MAX_STOP];
    int n_stop;
    int stream, include_usage;
    int ignore_eos;                /* vLLM's "ignore_eos": 1 = do not stop at the model's EOS */
    int32_t priority;              /* vLLM's "priority" (any int32; lower first): needs the server's
                                      --scheduling-policy priority unless 0 (sd_server_gen.c) */
    int logprobs;                  /* 1: report the emitted tokens' logprobs ("logprobs" given) */
    int32_t top_logprobs;          /* 0..SPECDEC_MAX_TOP_LOGPROBS alternatives per token */
    int echo;                      /* completions "echo": the prompt before the completion (and its
                                      tokens first in "logprobs"); chat refuses it (unsupported_value) */
    int32_t prompt_logprobs;       /* vLLM's "prompt_logprobs": -1 (absent / null) or the top count
                                      0..SPECDEC_MAX_TOP_LOGPROBS; refused with "stream" (as vLLM) */
    uint64_t cache_salt;           /* vLLM's "cache_salt" hashed (never 0), or 0 when absent / null:
                                      the prefix cache shares rows only among equal salts */
    /* the logits processors (specdec_generate_params, docs/SAMPLING.md "Logits processors") */
    float presence_penalty;        /* OpenAI's, -2..2 (0: off) */
    float frequency_penalty;       /* OpenAI's, -2..2 (0: off) */
    float repetition_penalty;      /* vLLM's, (0, 100] (1: off, the default) */
    specdec_logit_bias *logit_bias; /* OpenAI's: [n_logit_bias] owned, each token once (ids < the
                                      vocabulary are the server's check: sd_server_gen.c) */
    int32_t n_logit_bias;          /* 0..SPECDEC_MAX_LOGIT_BIAS */
    int32_t min_tokens;            /* vLLM's, >= 0 (and <= max_tokens when that is given) */
    int32_t *stop_token_ids;       /* vLLM's: [n_stop_token_ids] owned ids >= 0 */
    int32_t n_stop_token_ids;      /* 0..SPECDEC_MAX_STOP_TOKEN_IDS */
    /* vLLM's masks and include_stop_str_in_output (docs/SAMPLING.md) */
    int32_t *allowed_token_ids;    /* [n_allowed_token_ids] owned ids >= 0 (vocabulary: sd_server_gen.c) */
    int32_t n_allowed_token_ids;   /* 0 (absent / null) or 1..SPECDEC_MAX_ALLOWED_TOKEN_IDS */
    char **bad_words;              /* [n_bad_words] owned strings; the server tokenizes them */
    int32_t n_bad_words;           /* 0..SPECDEC_MAX_BAD_WORDS */
    int include_stop_str_in_output; /* 1: the matched stop string (and a stop id's text) stays in the text */
    int32_t *bad_words_ids;        /* the words' token sequences (sd_server_gen.c, as vLLM tokenizes them), */
    int32_t *bad_words_offsets;    /* owned: sequence i is bad_words_ids[offsets[i] .. offsets[i+1]) */
    int32_t n_bad_seqs;            /* 0..SPECDEC_MAX_BAD_WORDS */
    int32_t n_draft;               /* -1: the server's default */
    specdec_verify_mode verify;
    int32_t tree[SD_API_MAX_TREE]; /* extension "tree": children per node at each depth, a shape
                                      specdec_generate_params_set_tree accepts */
    int n_tree;                    /* 0: no "tree" */
    int32_t draft_nodes;           /* extension "draft_nodes": 0 (absent) or 1..SPECDEC_MAX_TREE_NODES */
    sd_spec_config spec;           /* extension "speculative_config" (vLLM's keys; sd_server_spec.h) */
    sd_api_guided guided;          /* structured output (kind 0: none); compiled by the server */
    /* chat: tool calling and template variables (sd_server_tools.h) */
    char *messages_json;           /* the "messages" list re-printed (specdec_chat_apply_json renders it) */
    char *tools_json;              /* NULL (no "tools") or the tools as vLLM hands them to the template */
    char *kwargs_json;             /* "chat_template_kwargs": NULL or a JSON object's text */
    char **tool_names;             /* [n_tools] owned */
    int n_tools;                   /* 0..SD_API_MAX_TOOLS */
    int tool_choice;               /* sd_tool_choice: NONE, AUTO (the default with tools), REQUIRED, NAMED */
    int tool_named;                /* NAMED: the index of the function in tool_names */
} sd_api_request;

typedef struct sd_api_error {
    int http;             /* status code */
    int close;            /* 1: close the connection after this answer (framing errors, refusals at the door) */
    const char *type;     /* "invalid_request_error", "authentication_error", "server_error", ... */
    const char *code;     /* NULL or "model_not_found", "context_length_exceeded", ... */
    char param[64];       /* "" or the offending field (e.g. "speculative_config.prompt_lookup_min") */
    char message[256];
} sd_api_error;

/* Fill *e and return e->http. The message is cut to fit and made valid UTF-8 (a byte
 * that is not part of a well-formed sequence becomes '?'), so it can go into JSON. */
int sd_api_fail(sd_api_error *e, int http, const char *type, const char *code, const char *param, const char *fmt,
                ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

/* Parse body[0..len) (any bytes). chat selects the endpoint's schema. A NUL anywhere
 * (a raw byte, or the escape \u0000 inside a string) is refused with 400: C strings
 * would silently cut the text there. model_id: the
 * served model ("model" must equal it when given), NULL = accept any. Returns 200 with
 * *out filled (free with sd_api_request_free), or the HTTP status of the failure with
 * *err filled and *out empty. Never reads past len; body need not be NUL-terminated. */
int sd_api_parse(const char *body, size_t len, int chat, const char *model_id, sd_api_request *out,
                 sd_api_error *err);
void sd_api_request_free(sd_api_request *r);
/* 1 if the JSON text s[0..n) has a NUL: a raw byte, or the escape \u0000 (sd_api_parse refuses it). */
int sd_api_has_nul(const char *s, size_t n);

/* struct cJSON, for the functions below (callers include <cjson/cJSON.h>). */
struct cJSON;
/* vLLM's tokenize request models: of the object root, only the fields of TokenizeChatRequest
 * (chat: model, messages, add_generation_prompt, continue_final_message, add_special_tokens,
 * chat_template, chat_template_kwargs, tools, return_token_strs) or of TokenizeCompletionRequest
 * (model, prompt, add_special_tokens, return_token_strs), as JSON text for sd_api_parse (cJSON_free
 * it; NULL: out of memory). sd_api_parse then checks exactly those fields, and any other ("n",
 * "temperature", "max_tokens", "stream", ...) is ignored whatever its value, as vLLM ignores it.
 * POST /tokenize and `specdec tokenize --chat` both read a conversation through it, so both see
 * the same messages, tools (sd_tools_parse: vLLM's model_dump) and template arguments. */
char *sd_api_tokenize_body(const struct cJSON *root, int chat);
/* vLLM's continue_final_message (transformers' apply_chat_template): the rendered text[0..*len) is
 * cut right after the last occurrence of the last message's content with its ASCII white space
 * stripped (Python's str.strip also strips other Unicode white space), so the model continues that
 * message; a content that is empty after stripping cuts nothing; one the template does not write is
 * a 400 (the ValueError transformers raises). Nothing when req->continue_final_message is 0. 0 or
 * the HTTP status with *e set. */
int sd_api_continue_final(const sd_api_request *req, const char *text, size_t *len, sd_api_error *e);

/* The request line and headers that decide a request before its body arrives. */
typedef struct sd_api_head {
    const char *method, *url;      /* as libmicrohttpd gives them */
    const char *authorization;     /* the Authorization header, NULL when absent */
    const char *content_length;    /* the Content-Length header, NULL when absent */
    const char *content_type;      /* the Content-Type header, NULL when absent */
    const char *host;              /* the Host header, NULL when absent */
    const char *const *allowed_hosts; /* n_allowed_hosts names the Host may carry (any port); 0 = no check */
    int n_allowed_hosts;
    const char *version;           /* "HTTP/1.1", "HTTP/1.0"; NULL: not checked */
} sd_api_head;

/* Route and admit a request: *ep is its endpoint (SD_EP_OTHER when none). Returns 0,
 * or with *err filled: 400 for an HTTP/1.1 request without Host (RFC 9112 3.2); 403
 * when n_allowed_hosts > 0 and a Host header names none of them (DNS rebinding; an
 * HTTP/1.0 request without Host passes); 401 when
 * api_key is set (non-empty) and the request is not for /health and does not carry
 * "Bearer <api_key>" (scheme case-insensitive); 404 for an unknown path; 405 for a
 * known path with another method; 415 for a POST whose Content-Type is not
 * application/json (absent included: no CORS "simple request" can run a completion);
 * 413 when a declared Content-Length (decimal) exceeds max_body. Checked in that
 * order. The key is compared in constant time. */
int sd_api_check_head(const sd_api_head *h, const char *api_key, size_t max_body, sd_endpoint *ep,
                      sd_api_error *err);

/* The endpoint a request target names by its path alone (up to '?'; any method):
 * how answers given before the method is known are counted. */
sd_endpoint sd_api_endpoint_of(const char *target);

/* 1 if host (a Host header: name or address, optional ":port", IPv6 in brackets)
 * names one of allowed[0..n) (case-insensitive; "*" allows any). */
int sd_api_host_allowed(const char *host, const char *const *allowed, int n);

/* Message framing of a request, from every Content-Length (cl[0..n_cl)) and
 * Transfer-Encoding (te[0..n_te)) header it carries: 0, or with *err filled and
 * err->close set: 400 for both kinds together, Content-Lengths that differ, or
 * "chunked" given twice; 501 for a transfer coding other than "chunked". */
int sd_api_check_framing(const char *const *cl, int n_cl, const char *const *te, int n_te, sd_api_error *err);

/* Fuzz entry point: parse + validate + free; returns the HTTP status (200 = valid).
 * A libFuzzer target is: LLVMFuzzerTestOneInput(d, n) { sd_server_parse_body(d, n, n & 1); return 0; } */
int sd_server_parse_body(const uint8_t *data, size_t size, int chat);

/* 1 if s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF). */
int sd_api_utf8_valid(const char *s, size_t n);

#endif

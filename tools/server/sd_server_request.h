/* sd_server_request.h — parsing and validating an OpenAI request body (completions or
 * chat completions) into an sd_api_request. Pure: no model, no I/O, so it can be
 * fuzzed on its own (sd_server_parse_body). Every failure is an HTTP status with an
 * OpenAI-style error (message, type, param, code). */
#ifndef SD_SERVER_REQUEST_H
#define SD_SERVER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "specdec.h"

#define SD_API_MAX_STOP 4        /* OpenAI's limit on "stop" */
#define SD_API_MAX_STOP_LEN 512  /* bytes, the engine's limit */
#define SD_API_MAX_TREE 16

typedef struct sd_api_message {
    char *role;    /* "system", "developer", "user", "assistant" or "tool" */
    char *content; /* text (parts concatenated); "" for a null assistant content */
} sd_api_message;

typedef struct sd_api_request {
    int chat;                      /* 1: /v1/chat/completions */
    char *model;                   /* NULL when absent */
    char *prompt;                  /* completions: text prompt, NULL when given as ids */
    size_t prompt_len;
    int32_t *prompt_ids;           /* completions: prompt as token ids */
    int32_t n_prompt_ids;
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
    int32_t n_draft;               /* -1: the server's default */
    specdec_verify_mode verify;
    int32_t tree[SD_API_MAX_TREE]; /* extension "tree": branching per depth (validated, not supported yet) */
    int n_tree;
} sd_api_request;

typedef struct sd_api_error {
    int http;             /* status code */
    const char *type;     /* "invalid_request_error", "authentication_error", "server_error", ... */
    const char *code;     /* NULL or "model_not_found", "context_length_exceeded", ... */
    char param[32];       /* "" or the offending field */
    char message[256];
} sd_api_error;

/* Fill *e and return e->http. */
int sd_api_fail(sd_api_error *e, int http, const char *type, const char *code, const char *param, const char *fmt,
                ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

/* Parse body[0..len) (any bytes). chat selects the endpoint's schema. model_id: the
 * served model ("model" must equal it when given), NULL = accept any. Returns 200 with
 * *out filled (free with sd_api_request_free), or the HTTP status of the failure with
 * *err filled and *out empty. Never reads past len; body need not be NUL-terminated. */
int sd_api_parse(const char *body, size_t len, int chat, const char *model_id, sd_api_request *out,
                 sd_api_error *err);
void sd_api_request_free(sd_api_request *r);

/* Fuzz entry point: parse + validate + free; returns the HTTP status (200 = valid).
 * A libFuzzer target is: LLVMFuzzerTestOneInput(d, n) { sd_server_parse_body(d, n, n & 1); return 0; } */
int sd_server_parse_body(const uint8_t *data, size_t size, int chat);

/* 1 if s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF). */
int sd_utf8_valid(const char *s, size_t n);

#endif

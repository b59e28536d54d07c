/* sd_server_request.c — request heads (route, API key, declared length) and OpenAI
 * request bodies -> sd_api_request, with every field
 * checked (type, range, UTF-8). Known fields: model, prompt | messages, max_tokens
 * (max_completion_tokens for chat), temperature, top_p, seed, stop, stream,
 * stream_options.include_usage, n (1..SD_API_MAX_N), logprobs / top_logprobs, vLLM's ignore_eos,
 * echo (completions), vLLM's prompt_logprobs, the logits processors (presence_penalty,
 * frequency_penalty, logit_bias; vLLM's repetition_penalty, min_tokens, stop_token_ids,
 * allowed_token_ids, bad_words, include_stop_str_in_output), and the
 * extensions top_k, min_p, n_draft, verify, tree, draft_nodes, and structured output (OpenAI's
 * response_format; vLLM's guided_json / guided_regex / guided_choice / guided_grammar and
 * structured_outputs; llama.cpp server's grammar:
 * parse_guided), and for chat tools / tool_choice / chat_template_kwargs (sd_server_tools.c). Fields
 * of the OpenAI and vLLM APIs that would change the output but are not implemented (the legacy
 * functions / function_call, best_of, echo on chat, use_beam_search, ...) are refused unless they carry
 * their default (sd_nf_fields); any other field is ignored. Defaults follow OpenAI:
 * temperature 1, top_p 1, no top-k, no min-p. */
#include "sd_server_request.h"
#include "sd_server_tools.h"

#include <math.h>
#include <stdarg.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define INVALID "invalid_request_error"

/* Replace every byte of s that is not part of a well-formed UTF-8 sequence with '?'
 * (a message cut by vsnprintf may end inside a character; quoted input may be bad). */
static void sd_utf8_repair(char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (k && k <= n - i && sd_api_utf8_valid(s + i, k)) {
            i += k;
        } else {
            s[i++] = '?';
        }
    }
}

int sd_api_fail(sd_api_error *e, int http, const char *type, const char *code, const char *param, const char *fmt,
                ...) {
    e->http = http;
    e->close = 0;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    sd_utf8_repair(e->message);
    return http;
}

int sd_api_utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i], cp, min;
        size_t k;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0) k = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) k = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) k = 3, cp = c & 0x07, min = 0x10000;
        else return 0;
        if (n - i <= k) return 0; /* truncated sequence */
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += k + 1;
    }
    return 1;
}

void sd_api_request_free(sd_api_request *r) {
    if (!r) return;
    free(r->model);
    for (int i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    for (int i = 0; i < r->n_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
    }
    free(r->messages);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->guided.spec);
    free(r->logit_bias);
    free(r->stop_token_ids);
    free(r->allowed_token_ids);
    for (int32_t i = 0; i < r->n_bad_words; i++) free(r->bad_words[i]);
    free(r->bad_words);
    free(r->bad_words_ids);
    free(r->bad_words_offsets);
    free(r->messages_json);
    free(r->tools_json);
    free(r->kwargs_json);
    for (int i = 0; i < r->n_tools; i++) free(r->tool_names[i]);
    free(r->tool_names);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------------------- */
/* field helpers: each returns 0 or the HTTP status of the failure            */
/* ------------------------------------------------------------------------- */
static const cJSON *field(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL; /* null == absent */
}

static int dup_text(const char *s, const char *param, char **out, size_t *len_out, sd_api_error *e) {
    size_t n = strlen(s);
    if (!sd_api_utf8_valid(s, n)) return sd_api_fail(e, 400, INVALID, NULL, param, "'%s' is not valid UTF-8", param);
    *out = malloc(n + 1);
    if (!*out) return sd_api_fail(e, 500, "server_error", NULL, param, "out of memory copying '%s'", param);
    memcpy(*out, s, n + 1);
    if (len_out) *len_out = n;
    return 0;
}

static int get_int(const cJSON *o, const char *key, double lo, double hi, int64_t *out, int *present,
                   sd_api_error *e) {
    const cJSON *v = field(o, key);
    *present = v != NULL;
    if (!v) return 0;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!cJSON_IsNumber(v) || !isfinite(d) || d != floor(d) || d < lo || d > hi)
        return sd_api_fail(e, 400, INVALID, NULL, key, "'%s' must be an integer in [%.0f, %.0f]", key, lo, hi);
    *out = (int64_t)d;
    return 0;
}

/* A number in [lo, hi] (lo excluded when lo_open). */
static int get_num(const cJSON *o, const char *key, double lo, int lo_open, double hi, float *out,
                   sd_api_error *e) {
    const cJSON *v = field(o, key);
    if (!v) return 0;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!cJSON_IsNumber(v) || !isfinite(d) || d < lo || (lo_open && d == lo) || d > hi)
        return sd_api_fail(e, 400, INVALID, NULL, key, "'%s' must be a number in %s%g, %g]", key, lo_open ? "(" : "[",
                           lo, hi);
    *out = (float)d;
    return 0;
}

static int get_bool(const cJSON *o, const char *key, int *out, sd_api_error *e) {
    const cJSON *v = field(o, key);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return sd_api_fail(e, 400, INVALID, NULL, key, "'%s' must be a boolean", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* prompt, messages, stop, extensions                                         */
/* ------------------------------------------------------------------------- */
static int parse_prompt_ids(const cJSON *arr, int at, sd_api_prompt *out, sd_api_error *e) {
    int n = cJSON_GetArraySize(arr);
    if (n <= 0)
        return at < 0 ? sd_api_fail(e, 400, INVALID, NULL, "prompt", "'prompt' is an empty list of token ids")
                      : sd_api_fail(e, 400, INVALID, NULL, "prompt", "'prompt'[%d] is an empty list of token ids", at);
    out->ids = malloc((size_t)n * sizeof(int32_t));
    if (!out->ids) return sd_api_fail(e, 500, "server_error", NULL, "prompt", "out of memory");
    int i = 0;
    for (const cJSON *t = arr->child; t; t = t->next, i++) {
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!cJSON_IsNumber(t) || d != floor(d) || d < 0 || d > INT32_MAX)
            return at < 0 ? sd_api_fail(e, 400, INVALID, NULL, "prompt",
                                        "'prompt' token %d is not a non-negative integer", i)
                          : sd_api_fail(e, 400, INVALID, NULL, "prompt",
                                        "'prompt'[%d] token %d is not a non-negative integer", at, i);
        out->ids[i] = (int32_t)d;
    }
    out->n_ids = n;
    return 0;
}

/* A batch: a list of strings or a list of token-id lists (not mixed), 1..SD_API_MAX_PROMPTS
 * of them; each is one prompt (OpenAI's and vLLM's shapes). */
static int parse_prompt_batch(const cJSON *p, sd_api_request *r, sd_api_error *e) {
    int n = cJSON_GetArraySize(p), rc = 0;
    if (n > SD_API_MAX_PROMPTS)
        return sd_api_fail(e, 400, INVALID, NULL, "prompt", "'prompt' has %d prompts; at most %d per request", n,
                           SD_API_MAX_PROMPTS);
    r->prompts = calloc((size_t)n, sizeof *r->prompts);
    if (!r->prompts) return sd_api_fail(e, 500, "server_error", NULL, "prompt", "out of memory");
    r->n_prompts = n;
    const int text = cJSON_IsString(p->child);
    int i = 0;
    for (const cJSON *q = p->child; q && !rc; q = q->next, i++) {
        if (text ? !cJSON_IsString(q) : !cJSON_IsArray(q))
            return sd_api_fail(e, 400, INVALID, NULL, "prompt",
                               "'prompt'[%d] must be %s like 'prompt'[0] (a batch is not mixed)", i,
                               text ? "a string" : "a list of token ids");
        rc = text ? dup_text(q->valuestring, "prompt", &r->prompts[i].text, &r->prompts[i].len, e)
                  : parse_prompt_ids(q, n > 1 ? i : -1, &r->prompts[i], e);
    }
    return rc;
}

/* prompt: a string, a list of token ids, or a batch (a list of strings or of token-id lists). */
static int parse_prompt(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    const cJSON *p = field(root, "prompt");
    if (!p) return sd_api_fail(e, 400, INVALID, NULL, "prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && p->child && (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
        return parse_prompt_batch(p, r, e);
    if (!cJSON_IsString(p) && !cJSON_IsArray(p))
        return sd_api_fail(e, 400, INVALID, NULL, "prompt",
                           "'prompt' must be a string, a list of token ids, or a list of either");
    r->prompts = calloc(1, sizeof *r->prompts);
    if (!r->prompts) return sd_api_fail(e, 500, "server_error", NULL, "prompt", "out of memory");
    r->n_prompts = 1;
    if (cJSON_IsString(p)) return dup_text(p->valuestring, "prompt", &r->prompts[0].text, &r->prompts[0].len, e);
    return parse_prompt_ids(p, -1, &r->prompts[0], e);
}

static int valid_role(const char *s) {
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (!strcmp(s, roles[i])) return 1;
    return 0;
}

/* content: a string, null (assistant), or a list of {"type": "text", "text": ...} parts. */
static int parse_content(const cJSON *c, int i, sd_api_message *m, sd_api_error *e) {
    if (!c || cJSON_IsNull(c)) {
        if (strcmp(m->role, "assistant") != 0)
            return sd_api_fail(e, 400, INVALID, NULL, "messages", "messages[%d].content is required", i);
        return dup_text("", "messages", &m->content, NULL, e);
    }
    if (cJSON_IsString(c)) return dup_text(c->valuestring, "messages", &m->content, NULL, e);
    if (!cJSON_IsArray(c))
        return sd_api_fail(e, 400, INVALID, NULL, "messages", "messages[%d].content must be a string or a list", i);
    size_t total = 0, k = 0;
    for (const cJSON *part = c->child; part; part = part->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 || !cJSON_IsString(text))
            return sd_api_fail(e, 400, INVALID, NULL, "messages", "messages[%d].content: only text parts are supported",
                               i);
        total += strlen(text->valuestring) + (k > 0);
    }
    m->content = malloc(total + 1);
    if (!m->content) return sd_api_fail(e, 500, "server_error", NULL, "messages", "out of memory");
    size_t off = 0;
    for (const cJSON *part = c->child; part; part = part->next) {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        if (part != c->child) m->content[off++] = '\n'; /* vLLM's "string" content format */
        memcpy(m->content + off, t, strlen(t));
        off += strlen(t);
    }
    m->content[off] = '\0';
    if (!sd_api_utf8_valid(m->content, off))
        return sd_api_fail(e, 400, INVALID, NULL, "messages", "messages[%d].content is not valid UTF-8", i);
    return 0;
}

/* An assistant's tool_calls (a list of {"id", "type", "function": {"name", "arguments"}}); a tool
 * result's tool_call_id. vLLM renders them with the template (arguments given as a string are
 * parsed there: specdec_chat_apply_json). */
static int parse_tool_calls(const cJSON *m, int i, sd_api_error *e) {
    const cJSON *tc = field(m, "tool_calls"), *id = field(m, "tool_call_id");
    if (id && !cJSON_IsString(id))
        return sd_api_fail(e, 400, INVALID, NULL, "messages", "messages[%d].tool_call_id must be a string", i);
    if (!tc) return 0;
    if (!cJSON_IsArray(tc)) return sd_api_fail(e, 400, INVALID, NULL, "messages", "messages[%d].tool_calls must be a list", i);
    int k = 0;
    for (const cJSON *c = tc->child; c; c = c->next, k++) {
        const cJSON *f = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "function") : NULL;
        const cJSON *nm = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "name") : NULL;
        const cJSON *a = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "arguments") : NULL;
        if (!cJSON_IsString(nm) || (a && !cJSON_IsString(a) && !cJSON_IsObject(a) && !cJSON_IsNull(a)))
            return sd_api_fail(e, 400, INVALID, NULL, "messages",
                               "messages[%d].tool_calls[%d] needs function.name (a string) and function.arguments (a "
                               "JSON string)", i, k);
    }
    return 0;
}

static int parse_messages(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    const cJSON *ms = field(root, "messages");
    if (!ms) return sd_api_fail(e, 400, INVALID, NULL, "messages", "'messages' is required");
    if (!cJSON_IsArray(ms)) return sd_api_fail(e, 400, INVALID, NULL, "messages", "'messages' must be a list");
    int n = cJSON_GetArraySize(ms);
    if (n == 0) return sd_api_fail(e, 400, INVALID, NULL, "messages", "'messages' is empty");
    r->messages = calloc((size_t)n, sizeof *r->messages);
    if (!r->messages) return sd_api_fail(e, 500, "server_error", NULL, "messages", "out of memory");
    int i = 0;
    for (const cJSON *m = ms->child; m; m = m->next, i++) {
        r->n_messages = i + 1; /* so that free sees what was filled */
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role) || !valid_role(role->valuestring))
            return sd_api_fail(e, 400, INVALID, NULL, "messages",
                               "messages[%d] needs a role of system, developer, user, assistant or tool", i);
        int rc = dup_text(role->valuestring, "messages", &r->messages[i].role, NULL, e);
        if (!rc) rc = parse_content(cJSON_GetObjectItemCaseSensitive(m, "content"), i, &r->messages[i], e);
        if (!rc) rc = parse_tool_calls(m, i, e);
        if (rc) return rc;
    }
    if (!(r->messages_json = cJSON_PrintUnformatted(ms)))
        return sd_api_fail(e, 500, "server_error", NULL, "messages", "out of memory");
    return 0;
}

static int parse_stop(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    const cJSON *s = field(root, "stop");
    if (!s) return 0;
    const cJSON *one = cJSON_IsString(s) ? s : NULL;
    if (!one && (!cJSON_IsArray(s) || cJSON_GetArraySize(s) > SD_API_MAX_STOP))
        return sd_api_fail(e, 400, INVALID, NULL, "stop", "'stop' must be a string or a list of up to %d strings",
                           SD_API_MAX_STOP);
    for (const cJSON *t = one ? one : s->child; t; t = one ? NULL : t->next) {
        size_t n = cJSON_IsString(t) ? strlen(t->valuestring) : 0;
        if (n == 0 || n > SD_API_MAX_STOP_LEN)
            return sd_api_fail(e, 400, INVALID, NULL, "stop", "each stop sequence must be a string of 1..%d bytes",
                               SD_API_MAX_STOP_LEN);
        int rc = dup_text(t->valuestring, "stop", &r->stop[r->n_stop], NULL, e);
        if (rc) return rc;
        r->n_stop++;
    }
    return 0;
}

static int parse_verify(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    const cJSON *v = field(root, "verify");
    if (!v) return 0;
    static const char *const names[] = {"auto", "rejection", "greedy", "match"};
    for (int i = 0; i < 4; i++)
        if (cJSON_IsString(v) && !strcmp(v->valuestring, names[i])) {
            r->verify = (specdec_verify_mode)i;
            return 0;
        }
    return sd_api_fail(e, 400, INVALID, NULL, "verify", "'verify' must be auto, rejection, greedy or match");
}

/* "tree": children per node at each depth (docs/TREE.md); the shape is the library's to
 * judge (specdec_generate_params_set_tree, its message in the error). "draft_nodes": the
 * node budget of a best-first tree. */
static int parse_tree(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    int64_t v = 0;
    int have = 0;
    int rc = get_int(root, "draft_nodes", 0, SPECDEC_MAX_TREE_NODES, &v, &have, e);
    if (rc) return rc;
    r->draft_nodes = (int32_t)v;
    const cJSON *t = field(root, "tree");
    if (!t) return 0;
    int n = cJSON_IsArray(t) ? cJSON_GetArraySize(t) : 0;
    if (n < 1 || n > SD_API_MAX_TREE)
        return sd_api_fail(e, 400, INVALID, NULL, "tree", "'tree' must be a list of 1..%d integers (widths per depth)",
                           SD_API_MAX_TREE);
    for (const cJSON *x = t->child; x; x = x->next) {
        double d = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        if (!cJSON_IsNumber(x) || !isfinite(d) || d != floor(d) || d < INT32_MIN || d > INT32_MAX)
            return sd_api_fail(e, 400, INVALID, NULL, "tree", "'tree' entries must be integers");
        r->tree[r->n_tree++] = (int32_t)d;
    }
    specdec_generate_params gp = specdec_generate_default_params();
    if (specdec_generate_params_set_tree(&gp, r->tree, r->n_tree) != SPECDEC_OK)
        return sd_api_fail(e, 400, INVALID, NULL, "tree", "'tree': %s", specdec_last_error());
    return 0;
}

/* ------------------------------------------------------------------------- */
/* the logits processors                                                      */
/* ------------------------------------------------------------------------- */
/* A logit_bias key: a token id in decimal digits ("0", "50256"; as OpenAI's keys), at most
 * INT32_MAX. 0 when it is anything else (a sign, spaces, an empty string, a word). */
static int sd_token_key(const char *k, int32_t *id) {
    int64_t v = 0;
    if (!k || !*k) return 0;
    for (const char *c = k; *c; c++) {
        if (*c < '0' || *c > '9') return 0;
        v = v * 10 + (*c - '0');
        if (v > INT32_MAX) return 0;
    }
    *id = (int32_t)v;
    return 1;
}

/* OpenAI's "logit_bias": {"<token id>": bias in [-100, 100], ...}, at most
 * SPECDEC_MAX_LOGIT_BIAS entries, each token once (JSON allows a key twice; the library would
 * add both, Python's json keeps the last: refused rather than guessed). {} and null: none. */
static int parse_logit_bias(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    const cJSON *o = field(root, "logit_bias");
    if (!o) return 0;
    if (!cJSON_IsObject(o))
        return sd_api_fail(e, 400, INVALID, NULL, "logit_bias",
                           "'logit_bias' must be an object of token ids (decimal strings) to numbers in [-100, 100]");
    const int n = cJSON_GetArraySize(o);
    if (n > SPECDEC_MAX_LOGIT_BIAS)
        return sd_api_fail(e, 400, INVALID, NULL, "logit_bias", "'logit_bias' has %d entries; at most %d", n,
                           SPECDEC_MAX_LOGIT_BIAS);
    if (n == 0) return 0;
    if (!(r->logit_bias = malloc((size_t)n * sizeof *r->logit_bias)))
        return sd_api_fail(e, 500, "server_error", NULL, "logit_bias", "out of memory copying 'logit_bias'");
    for (const cJSON *x = o->child; x; x = x->next) {
        int32_t id = 0;
        if (!sd_token_key(x->string, &id))
            return sd_api_fail(e, 400, INVALID, NULL, "logit_bias",
                               "'logit_bias' key \"%.40s\" is not a token id (a non-negative integer in decimal)",
                               x->string ? x->string : "");
        double d = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        if (!isfinite(d) || d < -100 || d > 100)
            return sd_api_fail(e, 400, INVALID, NULL, "logit_bias",
                               "'logit_bias'[\"%d\"] must be a number in [-100, 100]", (int)id);
        for (int32_t k = 0; k < r->n_logit_bias; k++)
            if (r->logit_bias[k].token == id)
                return sd_api_fail(e, 400, INVALID, NULL, "logit_bias", "'logit_bias' gives token %d twice", (int)id);
        r->logit_bias[r->n_logit_bias].token = id;
        r->logit_bias[r->n_logit_bias++].bias = (float)d;
    }
    return 0;
}

/* A list of lo..hi token ids (integers >= 0) under key: into a new *out, *n of them; null or
 * absent: none. */
static int parse_id_list(const cJSON *root, const char *key, int lo, int hi, int32_t **out, int32_t *n,
                         sd_api_error *e) {
    const cJSON *a = field(root, key);
    if (!a) return 0;
    const int count = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    if (count < lo || count > hi)
        return sd_api_fail(e, 400, INVALID, NULL, key, "'%s' must be null or a list of %d to %d token ids", key, lo, hi);
    if (count == 0) return 0;
    if (!(*out = malloc((size_t)count * sizeof **out)))
        return sd_api_fail(e, 500, "server_error", NULL, key, "out of memory copying '%s'", key);
    for (const cJSON *x = a->child; x; x = x->next) {
        double d = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        if (!isfinite(d) || d != floor(d) || d < 0 || d > INT32_MAX)
            return sd_api_fail(e, 400, INVALID, NULL, key, "'%s'[%d] must be a token id (an integer >= 0)", key, (int)*n);
        (*out)[(*n)++] = (int32_t)d;
    }
    return 0;
}

/* vLLM's "bad_words": null or a list of at most SPECDEC_MAX_BAD_WORDS non-empty strings (the
 * server tokenizes them: sd_server_gen.c); "include_stop_str_in_output": a boolean. */
static int parse_bad_words(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    int rc = get_bool(root, "include_stop_str_in_output", &r->include_stop_str_in_output, e);
    if (rc) return rc;
    const cJSON *a = field(root, "bad_words");
    if (!a) return 0;
    const int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    if (n < 0 || n > SPECDEC_MAX_BAD_WORDS)
        return sd_api_fail(e, 400, INVALID, NULL, "bad_words", "'bad_words' must be a list of at most %d strings",
                           SPECDEC_MAX_BAD_WORDS);
    if (n == 0) return 0;
    if (!(r->bad_words = calloc((size_t)n, sizeof *r->bad_words)))
        return sd_api_fail(e, 500, "server_error", NULL, "bad_words", "out of memory copying 'bad_words'");
    for (const cJSON *x = a->child; x; x = x->next) {
        const char *w = cJSON_IsString(x) ? x->valuestring : NULL;
        if (!w || !w[strspn(w, " \t\n\r\f\v")])
            return sd_api_fail(e, 400, INVALID, NULL, "bad_words",
                               "'bad_words'[%d] must be a string, not empty or only white space", (int)r->n_bad_words);
        if ((rc = dup_text(w, "bad_words", &r->bad_words[r->n_bad_words], NULL, e))) return rc;
        r->n_bad_words++;
    }
    return 0;
}

/* The logits processors (specdec_generate_params; applied in the order of docs/SAMPLING.md
 * "Logits processors"): OpenAI's penalties in [-2, 2] and logit_bias, vLLM's repetition_penalty
 * in (0, 100] (1: off), min_tokens (>= 0, at most max_tokens when given, as vLLM) and
 * stop_token_ids. Token ids against the vocabulary: sd_gen_check_ids (the model's size). */
static int parse_procs(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    int64_t v = 0;
    int have = 0, rc;
    if ((rc = get_num(root, "presence_penalty", -2, 0, 2, &r->presence_penalty, e))) return rc;
    if ((rc = get_num(root, "frequency_penalty", -2, 0, 2, &r->frequency_penalty, e))) return rc;
    if ((rc = get_num(root, "repetition_penalty", 0, 1, 100, &r->repetition_penalty, e))) return rc;
    if ((rc = get_int(root, "min_tokens", 0, INT32_MAX, &v, &have, e))) return rc;
    if (have && r->max_tokens >= 0 && v > r->max_tokens)
        return sd_api_fail(e, 400, INVALID, NULL, "min_tokens", "'min_tokens' %lld is more than 'max_tokens' %d",
                           (long long)v, (int)r->max_tokens);
    r->min_tokens = (int32_t)v;
    if ((rc = parse_logit_bias(root, r, e))) return rc;
    /* vLLM's "allowed_token_ids" (an empty list refused, as vLLM) and "stop_token_ids" ([]: none) */
    if ((rc = parse_id_list(root, "allowed_token_ids", 1, SPECDEC_MAX_ALLOWED_TOKEN_IDS, &r->allowed_token_ids,
                            &r->n_allowed_token_ids, e)))
        return rc;
    if ((rc = parse_bad_words(root, r, e))) return rc;
    return parse_id_list(root, "stop_token_ids", 0, SPECDEC_MAX_STOP_TOKEN_IDS, &r->stop_token_ids,
                         &r->n_stop_token_ids, e);
}

/* ------------------------------------------------------------------------- */
/* fields of the OpenAI / vLLM APIs that specdec does not implement           */
/* ------------------------------------------------------------------------- */
/* Each changes the output when given a value other than its default, so such a value is
 * refused (400, code "unsupported_value", as OpenAI answers a value a model does not
 * support) rather than silently ignored; the default (and null) is accepted, since
 * clients and UIs send it. A value of the wrong type is a 400 as well. The last kinds are
 * harmless fields (no effect on the text), only type-checked. */
typedef enum sd_nf_kind {
    SD_NF_INT_1,      /* an integer >= 1: only 1 */
    SD_NF_FALSE,      /* a boolean: only false */
    SD_NF_LIST_EMPTY, /* a list: only [] */
    SD_NF_STR_EMPTY,  /* a string: only "" */
    SD_NF_NULL,       /* only null (any value asks for the feature) */
    SD_NF_CHOICE,     /* "none" | "auto" | "required" | an object: only "none" or "auto" */
    SD_NF_STRING,     /* harmless: a string */
    SD_NF_OBJECT,     /* harmless: an object */
    SD_NF_BOOL,       /* harmless: a boolean */
    SD_NF_COUNT
} sd_nf_kind;

static const struct { const char *name; sd_nf_kind kind; } sd_nf_fields[] = {
    /* OpenAI */
    {"functions", SD_NF_LIST_EMPTY}, {"function_call", SD_NF_CHOICE}, {"best_of", SD_NF_INT_1},
    {"echo", SD_NF_FALSE}, {"suffix", SD_NF_STR_EMPTY},
    /* vLLM's sampling extensions */
    {"use_beam_search", SD_NF_FALSE},
    /* vLLM's chat extension this server does not offer (refused, never ignored): a request's own Jinja
     * template */
    {"chat_template", SD_NF_NULL},
    /* harmless: no effect on the text */
    {"user", SD_NF_STRING}, {"metadata", SD_NF_OBJECT}, {"store", SD_NF_BOOL}, {"service_tier", SD_NF_STRING},
    {"parallel_tool_calls", SD_NF_BOOL},
};

/* What each kind must be, and the one value of it that is accepted (NULL: any). */
static const char *const sd_nf_type[SD_NF_COUNT] = {
    "an integer >= 1", "a boolean", "a list", "a string", NULL,
    "\"none\", \"auto\", \"required\" or an object", "a string", "an object", "a boolean"};
static const char *const sd_nf_default[SD_NF_COUNT] = {
    "1", "false", "[]", "\"\"", "null", "\"none\" or \"auto\"", NULL, NULL, NULL};

static int sd_nf_is_int(const cJSON *v, double lo) {
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble) &&
           v->valuedouble >= lo;
}

/* 1: v has the kind's type; *dflt: it is the accepted value. */
static int sd_nf_typed(const cJSON *v, sd_nf_kind k, int *dflt) {
    *dflt = 1;
    switch (k) {
    case SD_NF_INT_1: return sd_nf_is_int(v, 1) && ((*dflt = v->valuedouble == 1), 1);
    case SD_NF_FALSE: return cJSON_IsBool(v) && ((*dflt = cJSON_IsFalse(v)), 1);
    case SD_NF_LIST_EMPTY: return cJSON_IsArray(v) && ((*dflt = v->child == NULL), 1);
    case SD_NF_STR_EMPTY: return cJSON_IsString(v) && ((*dflt = v->valuestring[0] == '\0'), 1);
    case SD_NF_NULL: return (*dflt = 0), 1;
    case SD_NF_CHOICE:
        if (cJSON_IsObject(v)) return (*dflt = 0), 1;
        if (!cJSON_IsString(v)) return 0;
        *dflt = !strcmp(v->valuestring, "none") || !strcmp(v->valuestring, "auto");
        return *dflt || !strcmp(v->valuestring, "required");
    case SD_NF_STRING: return cJSON_IsString(v);
    case SD_NF_OBJECT: return cJSON_IsObject(v);
    case SD_NF_BOOL: return cJSON_IsBool(v);
    default: return 0;
    }
}

/* "echo" is implemented for completions (parse_echo), refused here for chat only. */
static int sd_parse_unsupported(const cJSON *root, int chat, sd_api_error *e) {
    for (size_t i = 0; i < sizeof sd_nf_fields / sizeof sd_nf_fields[0]; i++) {
        const char *name = sd_nf_fields[i].name;
        const sd_nf_kind k = sd_nf_fields[i].kind;
        const cJSON *v = field(root, name);
        int dflt = 1;
        if (!v || (!chat && !strcmp(name, "echo"))) continue;
        if (!sd_nf_typed(v, k, &dflt))
            return sd_api_fail(e, 400, INVALID, NULL, name, "'%s' must be %s", name, sd_nf_type[k]);
        if (dflt) continue;
        char *text = cJSON_PrintUnformatted(v);
        int rc = sd_api_fail(e, 400, INVALID, "unsupported_value", name,
                             "Unsupported value: '%s' = %.48s%s is not supported by this server; only %s (the "
                             "default) is accepted",
                             name, text ? text : "?", text && strlen(text) > 48 ? "..." : "", sd_nf_default[k]);
        cJSON_free(text);
        return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* structured output (docs/STRUCTURED.md)                                     */
/* ------------------------------------------------------------------------- */
/* The request's constraint from field param: (kind, text[0..len)) copied. A second one is
 * refused naming both (vLLM refuses several kinds at once as well). */
static int guided_set(sd_api_guided *g, specdec_grammar_kind kind, const char *text, size_t len, const char *param,
                      sd_api_error *e) {
    if (g->kind)
        return sd_api_fail(e, 400, INVALID, NULL, param,
                           "'%s' and '%s' both constrain the output: give at most one structured output constraint "
                           "per request", g->param, param);
    if (len > SD_API_MAX_GUIDED_BYTES)
        return sd_api_fail(e, 400, INVALID, NULL, param, "'%s' is %zu bytes long; at most %zu", param, len,
                           SD_API_MAX_GUIDED_BYTES);
    if (text) {
        if (!(g->spec = malloc(len + 1)))
            return sd_api_fail(e, 500, "server_error", NULL, param, "out of memory copying '%s'", param);
        memcpy(g->spec, text, len);
        g->spec[len] = '\0';
    }
    g->kind = kind;
    g->len = len;
    snprintf(g->param, sizeof g->param, "%s", param);
    return 0;
}

/* v serialised without whitespace (a schema object, a choice list) as the constraint. */
static int guided_print(const cJSON *v, specdec_grammar_kind kind, const char *param, sd_api_guided *g,
                        sd_api_error *e) {
    char *t = cJSON_PrintUnformatted(v);
    if (!t) return sd_api_fail(e, 500, "server_error", NULL, param, "out of memory serialising '%s'", param);
    int rc = guided_set(g, kind, t, strlen(t), param, e);
    cJSON_free(t);
    return rc;
}

static int guided_unsupported(sd_api_error *e, const char *param, const char *why) {
    return sd_api_fail(e, 400, INVALID, "unsupported_value", param, "'%s' is not supported by this server: %s", param,
                       why);
}

/* A JSON schema: an object (serialised), or a string holding one (passed as given). */
static int guided_json(const cJSON *v, const char *param, sd_api_guided *g, sd_api_error *e) {
    if (cJSON_IsString(v))
        return guided_set(g, SPECDEC_GRAMMAR_JSON_SCHEMA, v->valuestring, strlen(v->valuestring), param, e);
    if (!cJSON_IsObject(v))
        return sd_api_fail(e, 400, INVALID, NULL, param, "'%s' must be a JSON schema: an object, or a string holding one",
                           param);
    return guided_print(v, SPECDEC_GRAMMAR_JSON_SCHEMA, param, g, e);
}

static int guided_regex(const cJSON *v, const char *param, sd_api_guided *g, sd_api_error *e) {
    if (!cJSON_IsString(v))
        return sd_api_fail(e, 400, INVALID, NULL, param, "'%s' must be a string (a regular expression)", param);
    return guided_set(g, SPECDEC_GRAMMAR_REGEX, v->valuestring, strlen(v->valuestring), param, e);
}

/* A context-free grammar (GBNF / xgrammar EBNF: core/sd_gbnf.h) as a string. */
static int guided_grammar(const cJSON *v, const char *param, sd_api_guided *g, sd_api_error *e) {
    if (!cJSON_IsString(v))
        return sd_api_fail(e, 400, INVALID, NULL, param, "'%s' must be a string (a GBNF grammar: root ::= ...)", param);
    return guided_set(g, SPECDEC_GRAMMAR_GBNF, v->valuestring, strlen(v->valuestring), param, e);
}

/* A non-empty list of strings, passed on as its JSON text. */
static int guided_choice(const cJSON *v, const char *param, sd_api_guided *g, sd_api_error *e) {
    if (!cJSON_IsArray(v) || !v->child)
        return sd_api_fail(e, 400, INVALID, NULL, param, "'%s' must be a non-empty list of strings", param);
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++)
        if (!cJSON_IsString(c))
            return sd_api_fail(e, 400, INVALID, NULL, param, "'%s'[%d] must be a string", param, i);
    return guided_print(v, SPECDEC_GRAMMAR_CHOICE, param, g, e);
}

/* OpenAI's response_format: {"type": "text"} (no constraint), {"type": "json_object"}, or
 * {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}}. */
static int guided_response_format(const cJSON *root, sd_api_guided *g, sd_api_error *e) {
    static const char P[] = "response_format";
    const cJSON *rf = field(root, P);
    if (!rf) return 0;
    const cJSON *t = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
    if (!cJSON_IsString(t))
        return sd_api_fail(e, 400, INVALID, NULL, P,
                           "'response_format' must be an object with a string \"type\": text, json_object or "
                           "json_schema");
    if (!strcmp(t->valuestring, "text")) return 0;
    if (!strcmp(t->valuestring, "json_object")) return guided_set(g, SPECDEC_GRAMMAR_JSON_OBJECT, NULL, 0, P, e);
    if (!strcmp(t->valuestring, "structural_tag"))
        return guided_unsupported(e, P, "type \"structural_tag\" (tool-call tags) is not implemented");
    if (strcmp(t->valuestring, "json_schema") != 0)
        return sd_api_fail(e, 400, INVALID, NULL, P,
                           "'response_format' type \"%.40s\" is not one of text, json_object, json_schema",
                           t->valuestring);
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    const cJSON *name = cJSON_IsObject(js) ? field(js, "name") : NULL, *strict = js ? field(js, "strict") : NULL;
    const cJSON *schema = cJSON_IsObject(js) ? cJSON_GetObjectItemCaseSensitive(js, "schema") : NULL;
    if (!cJSON_IsObject(js))
        return sd_api_fail(e, 400, INVALID, NULL, P,
                           "'response_format' of type json_schema needs \"json_schema\": {\"name\": ..., \"schema\": "
                           "{...}}");
    if ((name && !cJSON_IsString(name)) || (strict && !cJSON_IsBool(strict)))
        return sd_api_fail(e, 400, INVALID, NULL, P,
                           "'response_format'.json_schema: \"name\" must be a string and \"strict\" a boolean");
    if (!cJSON_IsObject(schema))
        return sd_api_fail(e, 400, INVALID, NULL, P,
                           "'response_format'.json_schema.schema must be an object (a JSON schema)");
    return guided_print(schema, SPECDEC_GRAMMAR_JSON_SCHEMA, P, g, e);
}

/* vLLM's guided decoding fields (before 0.10): guided_json, guided_regex, guided_choice,
 * guided_grammar (GBNF / EBNF); a whitespace pattern refused; guided_decoding_backend only picks vLLM's
 * implementation, so any string is accepted (specdec has one). */
static int guided_vllm(const cJSON *root, sd_api_guided *g, sd_api_error *e) {
    const cJSON *v;
    int rc = 0;
    if ((v = field(root, "guided_json")) && (rc = guided_json(v, "guided_json", g, e))) return rc;
    if ((v = field(root, "guided_regex")) && (rc = guided_regex(v, "guided_regex", g, e))) return rc;
    if ((v = field(root, "guided_choice")) && (rc = guided_choice(v, "guided_choice", g, e))) return rc;
    if ((v = field(root, "guided_grammar")) && (rc = guided_grammar(v, "guided_grammar", g, e))) return rc;
    if ((v = field(root, "guided_decoding_backend")) && !cJSON_IsString(v))
        return sd_api_fail(e, 400, INVALID, NULL, "guided_decoding_backend", "'guided_decoding_backend' must be a string");
    if ((v = field(root, "guided_whitespace_pattern")))
        return cJSON_IsString(v) ? guided_unsupported(e, "guided_whitespace_pattern",
                                                      "the JSON form is fixed (at most one space after ':' "
                                                      "and ',', docs/STRUCTURED.md); only null is accepted")
                                 : sd_api_fail(e, 400, INVALID, NULL, "guided_whitespace_pattern",
                                               "'guided_whitespace_pattern' must be a string or null");
    return 0;
}

/* vLLM's structured_outputs (0.10 and later): an object with one of json, regex, choice, grammar
 * or json_object: true; structural_tag and whitespace_pattern are refused; its other
 * keys (options of vLLM's backends) are ignored. */
static int guided_structured(const cJSON *root, sd_api_guided *g, sd_api_error *e) {
    const cJSON *so = field(root, "structured_outputs"), *v;
    if (!so) return 0;
    if (!cJSON_IsObject(so))
        return sd_api_fail(e, 400, INVALID, NULL, "structured_outputs",
                           "'structured_outputs' must be an object with one of json, regex, choice, grammar, "
                           "json_object");
    if (field(so, "structural_tag"))
        return guided_unsupported(e, "structured_outputs.structural_tag", "structural tags are not implemented");
    if (field(so, "whitespace_pattern"))
        return guided_unsupported(e, "structured_outputs.whitespace_pattern", "only null is accepted");
    const specdec_grammar_kind before = g->kind;
    int rc = 0;
    if ((v = field(so, "json")) && (rc = guided_json(v, "structured_outputs.json", g, e))) return rc;
    if ((v = field(so, "regex")) && (rc = guided_regex(v, "structured_outputs.regex", g, e))) return rc;
    if ((v = field(so, "choice")) && (rc = guided_choice(v, "structured_outputs.choice", g, e))) return rc;
    if ((v = field(so, "grammar")) && (rc = guided_grammar(v, "structured_outputs.grammar", g, e))) return rc;
    if ((v = field(so, "json_object"))) {
        if (!cJSON_IsBool(v))
            return sd_api_fail(e, 400, INVALID, NULL, "structured_outputs.json_object",
                               "'structured_outputs.json_object' must be a boolean");
        if (cJSON_IsTrue(v) && (rc = guided_set(g, SPECDEC_GRAMMAR_JSON_OBJECT, NULL, 0,
                                                "structured_outputs.json_object", e)))
            return rc;
    }
    if (g->kind == before)
        return sd_api_fail(e, 400, INVALID, NULL, "structured_outputs",
                           "'structured_outputs' gives no constraint: one of json, regex, choice, grammar or "
                           "json_object: true");
    return 0;
}

/* At most one constraint among all these fields (llama.cpp server's top-level "grammar" string
 * too); none is no structured output. */
static int parse_guided(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    const cJSON *v = field(root, "grammar");
    int rc = guided_response_format(root, &r->guided, e);
    if (!rc) rc = guided_vllm(root, &r->guided, e);
    if (!rc) rc = guided_structured(root, &r->guided, e);
    if (!rc && v) rc = guided_grammar(v, "grammar", &r->guided, e);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* the request                                                                */
/* ------------------------------------------------------------------------- */
static int parse_model(const cJSON *root, const char *model_id, sd_api_request *r, sd_api_error *e) {
    const cJSON *m = field(root, "model");
    if (!m) return 0;
    if (!cJSON_IsString(m)) return sd_api_fail(e, 400, INVALID, NULL, "model", "'model' must be a string");
    int rc = dup_text(m->valuestring, "model", &r->model, NULL, e);
    if (rc) return rc;
    if (model_id && strcmp(r->model, model_id) != 0)
        return sd_api_fail(e, 404, INVALID, "model_not_found", "model",
                           "The model '%.120s' does not exist; this server has '%.80s'", r->model, model_id);
    return 0;
}

/* Any integer in [-2^63, 2^64): negative seeds wrap as int64 -> uint64 does. */
static int parse_seed(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    const cJSON *s = field(root, "seed");
    if (!s) return 0;
    double d = cJSON_IsNumber(s) ? s->valuedouble : NAN;
    if (!cJSON_IsNumber(s) || !isfinite(d) || d != floor(d) || d < -9223372036854775808.0 ||
        d >= 18446744073709551616.0)
        return sd_api_fail(e, 400, INVALID, NULL, "seed", "'seed' must be an integer");
    r->seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
    r->has_seed = 1;
    return 0;
}

static int parse_sampling(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    int64_t v = 0;
    int have = 0, rc;
    const char *mt = r->chat && field(root, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if ((rc = get_int(root, mt, r->chat ? 1 : 0, INT32_MAX, &v, &have, e))) return rc; /* 0: with echo */
    if (have) r->max_tokens = (int32_t)v;
    if ((rc = get_num(root, "temperature", 0, 0, 2, &r->temperature, e))) return rc;
    if ((rc = get_num(root, "top_p", 0, 1, 1, &r->top_p, e))) return rc;
    if ((rc = get_num(root, "min_p", 0, 0, 1, &r->min_p, e))) return rc;
    if ((rc = get_int(root, "top_k", 0, INT32_MAX, &v, &have, e))) return rc;
    if (have) r->top_k = (int32_t)v;
    if ((rc = parse_seed(root, r, e))) return rc;
    if ((rc = get_int(root, "n_draft", 0, SPECDEC_MAX_DRAFT, &v, &have, e))) return rc;
    if (have) r->n_draft = (int32_t)v;
    if ((rc = get_int(root, "n", 1, SD_API_MAX_N, &v, &have, e))) return rc;
    if (have) r->n = (int32_t)v;
    if ((rc = get_int(root, "priority", INT32_MIN, INT32_MAX, &v, &have, e))) return rc; /* vLLM's extension */
    if (have) r->priority = (int32_t)v;
    return 0;
}

/* logprobs: completions an integer 0..SPECDEC_MAX_TOP_LOGPROBS (the number of most likely
 * alternatives per token; vLLM's limit, OpenAI's is 5); chat a boolean and top_logprobs
 * 0..SPECDEC_MAX_TOP_LOGPROBS, which needs logprobs true (as OpenAI). */
static int parse_logprobs(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    int64_t v = 0;
    int have = 0, rc;
    if (!r->chat) {
        if ((rc = get_int(root, "logprobs", 0, SPECDEC_MAX_TOP_LOGPROBS, &v, &have, e))) return rc;
        r->logprobs = have;
        r->top_logprobs = (int32_t)v;
    } else {
        if ((rc = get_bool(root, "logprobs", &r->logprobs, e))) return rc;
        if ((rc = get_int(root, "top_logprobs", 0, SPECDEC_MAX_TOP_LOGPROBS, &v, &have, e))) return rc;
        r->top_logprobs = (int32_t)v;
        if (r->top_logprobs > 0 && !r->logprobs)
            return sd_api_fail(e, 400, INVALID, NULL, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    }
    return 0;
}

/* Completions "echo" (a boolean; chat: sd_parse_unsupported) and vLLM's "prompt_logprobs"
 * (an integer 0..SPECDEC_MAX_TOP_LOGPROBS, null = off), which vLLM refuses with "stream". */
static int parse_echo(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    int64_t v = 0;
    int have = 0, rc;
    if (!r->chat && (rc = get_bool(root, "echo", &r->echo, e))) return rc;
    if ((rc = get_int(root, "prompt_logprobs", 0, SPECDEC_MAX_TOP_LOGPROBS, &v, &have, e))) return rc;
    r->prompt_logprobs = have ? (int32_t)v : -1;
    if (have && r->stream)
        return sd_api_fail(e, 400, INVALID, NULL, "prompt_logprobs",
                           "'prompt_logprobs' is not available with 'stream': true (as vLLM)");
    if (r->max_tokens == 0 && !r->echo) /* OpenAI / vLLM: max_tokens 0 echoes the prompt, generates nothing */
        return sd_api_fail(e, 400, INVALID, NULL, "max_tokens", "'max_tokens' 0 needs 'echo': true (it returns the "
                                                                 "prompt alone); otherwise it must be >= 1");
    return 0;
}

/* vLLM's "cache_salt": a non-empty string confining prefix-cache sharing to the requests that
 * give the same one; absent or null: 0 (shared with every unsalted request). Hashed to 64 bits
 * (FNV-1a, then mixed; never 0). */
static int parse_cache_salt(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    const cJSON *s = field(root, "cache_salt");
    r->cache_salt = 0;
    if (!s || cJSON_IsNull(s)) return 0;
    if (!cJSON_IsString(s) || !s->valuestring[0])
        return sd_api_fail(e, 400, INVALID, NULL, "cache_salt", "'cache_salt' must be a non-empty string");
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)s->valuestring; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    r->cache_salt = h ? h : 1;
    return 0;
}

static int parse_stream(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    int rc = get_bool(root, "stream", &r->stream, e);
    if (rc) return rc;
    const cJSON *so = field(root, "stream_options");
    if (!so) return 0;
    if (!cJSON_IsObject(so))
        return sd_api_fail(e, 400, INVALID, NULL, "stream_options", "'stream_options' must be an object");
    return get_bool(so, "include_usage", &r->include_usage, e);
}

static int parse_root(const cJSON *root, int chat, const char *model_id, sd_api_request *r, sd_api_error *e) {
    if (!cJSON_IsObject(root)) return sd_api_fail(e, 400, INVALID, NULL, NULL, "the body must be a JSON object");
    int rc = parse_model(root, model_id, r, e);
    if (!rc) rc = sd_spec_parse(field(root, "speculative_config"), &r->spec, e);
    if (!rc) rc = chat ? parse_messages(root, r, e) : parse_prompt(root, r, e);
    if (!rc) rc = parse_sampling(root, r, e);
    if (!rc) rc = parse_stop(root, r, e);
    if (!rc) rc = parse_stream(root, r, e);
    if (!rc) rc = parse_verify(root, r, e);
    if (!rc) rc = parse_tree(root, r, e);
    if (!rc) rc = get_bool(root, "ignore_eos", &r->ignore_eos, e);
    if (!rc) rc = parse_logprobs(root, r, e);
    if (!rc) rc = parse_echo(root, r, e);
    if (!rc) rc = parse_cache_salt(root, r, e);
    if (!rc) rc = parse_procs(root, r, e);
    if (!rc) rc = parse_guided(root, r, e);
    if (!rc && chat) rc = sd_tools_parse(root, r, e);
    if (!rc && chat) rc = get_bool(root, "add_generation_prompt", &r->add_generation_prompt, e); /* vLLM's */
    if (!rc && chat) rc = get_bool(root, "continue_final_message", &r->continue_final_message, e);
    if (!rc && r->continue_final_message && r->add_generation_prompt) /* vLLM's check */
        rc = sd_api_fail(e, 400, INVALID, NULL, "continue_final_message",
                         "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
    if (!rc) rc = sd_parse_unsupported(root, chat, e);
    if (!rc && (r->n_prompts > 1 ? r->n_prompts : 1) * r->n > SD_API_MAX_CHOICES)
        rc = sd_api_fail(e, 400, INVALID, NULL, "n",
                         "%d prompts x 'n' = %d makes %d choices; at most %d choices per request", r->n_prompts,
                         (int)r->n, r->n_prompts * (int)r->n, SD_API_MAX_CHOICES);
    return rc;
}

/* 1 if the JSON text has a NUL: a raw byte, or the escape \u0000 (a backslash outside
 * strings is no valid JSON, so every backslash starts an escape of one string). */
int sd_api_has_nul(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\0') return 1;
        if (s[i] != '\\' || i + 1 >= n) continue;
        if (s[i + 1] == 'u' && n - i >= 6 && !memcmp(s + i + 2, "0000", 4)) return 1;
        i++; /* the escaped character (a backslash or quote included) */
    }
    return 0;
}

char *sd_api_tokenize_body(const cJSON *root, int chat) {
    static const char *const completion[] = {"model", "prompt", "add_special_tokens", "return_token_strs"};
    static const char *const conversation[] = {"model", "messages", "add_generation_prompt", "continue_final_message",
                                               "add_special_tokens", "chat_template", "chat_template_kwargs", "tools",
                                               "return_token_strs"};
    const char *const *keep = chat ? conversation : completion;
    const size_t n_keep = chat ? sizeof conversation / sizeof *conversation : sizeof completion / sizeof *completion;
    cJSON *o = cJSON_CreateObject();
    int bad = !o;
    for (size_t i = 0; i < n_keep && !bad; i++) {
        const cJSON *v = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, keep[i]) : NULL;
        if (v) bad = !cJSON_AddItemReferenceToObject(o, keep[i], (cJSON *)v);
    }
    char *text = bad ? NULL : cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

int sd_api_continue_final(const sd_api_request *req, const char *text, size_t *len, sd_api_error *e) {
    if (!req->continue_final_message || req->n_messages < 1) return 0;
    const char *c = req->messages[req->n_messages - 1].content;
    size_t a = 0, b = strlen(c);
    while (a < b && strchr(" \t\n\r\f\v", c[a])) a++;
    while (b > a && strchr(" \t\n\r\f\v", c[b - 1])) b--;
    const size_t n = b - a;
    if (n == 0) return 0;
    for (size_t i = *len >= n ? *len - n + 1 : 0; i-- > 0;)
        if (!memcmp(text + i, c + a, n)) {
            *len = i + n;
            return 0;
        }
    return sd_api_fail(e, 400, INVALID, NULL, "continue_final_message",
                       "continue_final_message is set but the final message does not appear in the chat after "
                       "applying the chat template");
}

int sd_api_parse(const char *body, size_t len, int chat, const char *model_id, sd_api_request *out,
                 sd_api_error *err) {
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    out->chat = chat;
    out->max_tokens = -1;
    out->temperature = 1.0f;
    out->top_p = 1.0f;
    out->repetition_penalty = 1.0f;
    out->n_draft = -1;
    out->prompt_logprobs = -1;
    out->n = 1;
    out->verify = SPECDEC_VERIFY_AUTO;
    out->add_generation_prompt = 1;
    if (!body || len == 0) return sd_api_fail(err, 400, INVALID, NULL, NULL, "the request body is empty");
    if (!sd_api_utf8_valid(body, len)) return sd_api_fail(err, 400, INVALID, NULL, NULL, "the body is not valid UTF-8");
    if (sd_api_has_nul(body, len))
        return sd_api_fail(err, 400, INVALID, NULL, NULL, "the body contains a NUL character (raw or \\u0000)");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) return sd_api_fail(err, 400, INVALID, NULL, NULL, "the body is not valid JSON (near byte %zu)",
                                  end && end >= body ? (size_t)(end - body) : (size_t)0);
    while (end && (size_t)(end - body) < len && *end && strchr(" \t\r\n", *end)) end++;
    int rc = end && (size_t)(end - body) < len
                 ? sd_api_fail(err, 400, INVALID, NULL, NULL, "trailing bytes after the JSON value")
                 : parse_root(root, chat, model_id, out, err);
    cJSON_Delete(root);
    if (rc) {
        sd_api_request_free(out);
        return rc;
    }
    return 200;
}

int sd_server_parse_body(const uint8_t *data, size_t size, int chat) {
    sd_api_request r;
    sd_api_error e;
    int code = sd_api_parse((const char *)data, size, chat, "model", &r, &e);
    sd_api_request_free(&r);
    return code;
}

/* ------------------------------------------------------------------------- */
/* the head: route, API key, declared length                                  */
/* ------------------------------------------------------------------------- */
/* The endpoint of (method, url); *code 404 / 405 when there is none. OpenAI clients
 * use base_url + path, so the paths are accepted with and without the /v1 prefix. */
static const struct { const char *path; const char *method; sd_endpoint ep; } sd_routes[] = {
    {"/v1/completions", "POST", SD_EP_COMPLETIONS}, {"/completions", "POST", SD_EP_COMPLETIONS},
    {"/v1/chat/completions", "POST", SD_EP_CHAT},   {"/chat/completions", "POST", SD_EP_CHAT},
    {"/v1/models", "GET", SD_EP_MODELS},            {"/models", "GET", SD_EP_MODELS},
    {"/health", "GET", SD_EP_HEALTH},               {"/metrics", "GET", SD_EP_METRICS},
    {"/tokenize", "POST", SD_EP_TOKENIZE},          {"/v1/tokenize", "POST", SD_EP_TOKENIZE},
    {"/detokenize", "POST", SD_EP_DETOKENIZE},      {"/v1/detokenize", "POST", SD_EP_DETOKENIZE},
    {"/version", "GET", SD_EP_VERSION},             {"/ping", "GET", SD_EP_PING},
    {"/ping", "POST", SD_EP_PING},
};

sd_endpoint sd_api_endpoint_of(const char *target) {
    size_t n = strcspn(target, "?");
    for (size_t i = 0; i < sizeof sd_routes / sizeof sd_routes[0]; i++)
        if (strlen(sd_routes[i].path) == n && !strncmp(target, sd_routes[i].path, n)) return sd_routes[i].ep;
    return SD_EP_OTHER;
}

static sd_endpoint sd_route(const char *url, const char *method, int *code) {
    *code = 404;
    for (size_t i = 0; i < sizeof sd_routes / sizeof sd_routes[0]; i++) {
        if (strcmp(url, sd_routes[i].path) != 0) continue;
        if (!strcmp(method, sd_routes[i].method)) {
            *code = 0;
            return sd_routes[i].ep;
        }
        *code = 405;
    }
    return SD_EP_OTHER;
}

/* Constant-time comparison of the Bearer token with the key (no early exit on the
 * first differing byte, so response times do not reveal a prefix of the key). */
static int sd_auth_ok(const char *key, const char *header) {
    if (!key || !*key) return 1;
    if (!header || strncasecmp(header, "Bearer ", 7) != 0) return 0; /* RFC 9110: the scheme is case-insensitive */
    const char *tok = header + 7;
    while (*tok == ' ') tok++;
    size_t n = strlen(key), m = strlen(tok);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(key[i] ^ (i < m ? tok[i] : 0));
    return diff == 0;
}

/* A Content-Length over max: decimal digits only (libmicrohttpd refuses other forms
 * before we see them); a value too long to represent is over any limit. */
static int sd_length_over(const char *cl, size_t max) {
    uint64_t v = 0;
    for (const char *p = cl; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10) return 1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    return v > (uint64_t)max;
}

/* application/json, any case, parameters allowed ("; charset=utf-8"). */
static int sd_json_type(const char *ct) {
    if (!ct) return 0;
    while (*ct == ' ' || *ct == '\t') ct++;
    if (strncasecmp(ct, "application/json", 16) != 0) return 0;
    char c = ct[16];
    return c == '\0' || c == ';' || c == ' ' || c == '\t';
}

int sd_api_host_allowed(const char *host, const char *const *allowed, int n) {
    if (!host) return 0;
    size_t len = strlen(host);
    if (host[0] == '[') { /* [v6]:port -> [v6] */
        const char *rb = strchr(host, ']');
        if (rb) len = (size_t)(rb - host) + 1;
    } else {
        const char *colon = strchr(host, ':');
        if (colon && !strchr(colon + 1, ':')) len = (size_t)(colon - host);
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(allowed[i], "*") || (strlen(allowed[i]) == len && !strncasecmp(allowed[i], host, len)))
            return 1;
    return 0;
}

/* "chunked", any case, surrounded by optional whitespace. */
static int sd_is_chunked(const char *v) {
    while (*v == ' ' || *v == '\t') v++;
    if (strncasecmp(v, "chunked", 7) != 0) return 0;
    for (v += 7; *v == ' ' || *v == '\t'; v++) {}
    return *v == '\0';
}

int sd_api_check_framing(const char *const *cl, int n_cl, const char *const *te, int n_te, sd_api_error *e) {
    int rc = 0;
    if (n_cl > 0 && n_te > 0)
        rc = sd_api_fail(e, 400, INVALID, NULL, NULL, "both Content-Length and Transfer-Encoding (RFC 9112 6.3)");
    for (int i = 1; !rc && i < n_cl; i++)
        if (strcmp(cl[i], cl[0]) != 0)
            rc = sd_api_fail(e, 400, INVALID, NULL, NULL, "Content-Length headers that differ");
    for (int i = 0; !rc && i < n_te; i++)
        if (!sd_is_chunked(te[i]))
            rc = sd_api_fail(e, 501, INVALID, NULL, NULL, "unsupported transfer coding (only chunked)");
    if (!rc && n_te > 1) rc = sd_api_fail(e, 400, INVALID, NULL, NULL, "chunked given more than once");
    if (rc) e->close = 1;
    return rc;
}

int sd_api_check_head(const sd_api_head *h, const char *api_key, size_t max_body, sd_endpoint *ep,
                      sd_api_error *e) {
    memset(e, 0, sizeof *e);
    int code = 0;
    *ep = sd_route(h->url ? h->url : "", h->method ? h->method : "", &code);
    if (!h->host && h->version && !strcmp(h->version, "HTTP/1.1"))
        return sd_api_fail(e, 400, INVALID, NULL, NULL, "an HTTP/1.1 request needs a Host header");
    if (h->n_allowed_hosts > 0 && h->host && !sd_api_host_allowed(h->host, h->allowed_hosts, h->n_allowed_hosts))
        return sd_api_fail(e, 403, INVALID, "host_not_allowed", NULL,
                           "Host header not allowed on this loopback server (see --allowed-hosts)");
    if (*ep != SD_EP_HEALTH && *ep != SD_EP_PING && !sd_auth_ok(api_key, h->authorization))
        return sd_api_fail(e, 401, "authentication_error", "invalid_api_key", NULL,
                           "missing or incorrect API key (Bearer token)");
    if (code == 404) return sd_api_fail(e, 404, INVALID, NULL, NULL, "no such endpoint");
    if (code == 405) return sd_api_fail(e, 405, INVALID, NULL, NULL, "method not allowed here");
    if (h->method && !strcmp(h->method, "POST") && *ep != SD_EP_PING && !sd_json_type(h->content_type))
        return sd_api_fail(e, 415, INVALID, NULL, NULL, "Content-Type must be application/json");
    if (h->content_length && sd_length_over(h->content_length, max_body))
        return sd_api_fail(e, 413, INVALID, NULL, NULL, "request body over the limit of %zu bytes", max_body);
    return 0;
}

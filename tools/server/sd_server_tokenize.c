/* sd_server_tokenize.c — vLLM's utility endpoints: POST /tokenize, POST /detokenize (also
 * under /v1/), GET /version and GET|POST /ping.
 *
 * /tokenize takes vLLM's two forms (entrypoints/openai/protocol.py):
 *   completion: {"model", "prompt": "text", "add_special_tokens": true, "return_token_strs"}
 *   chat:       {"model", "messages": [...], "add_generation_prompt": true, "tools", "chat_template_kwargs",
 *                "add_special_tokens", "return_token_strs"} (a body with "messages" is the chat form)
 * and answers {"count", "max_model_len", "tokens", "token_strs"} (token_strs: the vocabulary strings,
 * as vLLM's convert_ids_to_tokens, with "return_token_strs": true; else null). The body goes through
 * the generation endpoints' own parser and prompt path (sd_api_parse; the chat form rendered by
 * specdec_chat_apply_json with the server's template), so the ids are exactly those a generation
 * request with the same fields gets, and the same refusals apply (model, messages, tools, kwargs).
 * "add_generation_prompt" (default true) and "continue_final_message" are read as for
 * /v1/chat/completions, and a request "chat_template" is refused (unsupported_value) there too. Differences from generation, vLLM's: "add_special_tokens" defaults to true for a prompt and,
 * for chat, to what the template needs (specdec_chat_add_special, as generation); no context limit
 * applies (a count may exceed max_model_len: that is what a client asks /tokenize for), only the
 * server's prompt byte limit. Only the fields of vLLM's two request models are read (sd_api_tokenize_body):
 * any other ("n", "temperature", "stream", ...) is ignored, whatever its value, as vLLM does.
 * /detokenize: {"model", "tokens": [ids]} -> {"prompt": text} (special tokens kept, as vLLM's
 * tokenizer.decode); an id outside the vocabulary is a 400 naming "tokens".
 * Both run on the preparation pool (sd_prep_run), as generation's parsing does: bounded memory. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sd_server_internal.h"

#define INVALID "invalid_request_error"

typedef struct sd_tok_job {
    sd_server *srv;
    int detok;
    const char *body;
    size_t len;
    sd_buf out;
    sd_api_error e;
    int rc; /* 200 or the error's HTTP status */
} sd_tok_job;

/* An optional boolean field: absent / null -> dflt. 0, or 400 naming it. */
static int tok_bool(const cJSON *root, const char *name, int dflt, int *out, sd_api_error *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = dflt;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return sd_api_fail(e, 400, INVALID, NULL, name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* ids of text (capacity grown as needed: no context limit here). 0 or the error. */
static int tok_ids(sd_server *srv, const char *text, size_t len, int add_special, int32_t **ids, int32_t *n,
                   sd_api_error *e) {
    int32_t cap = len < (size_t)INT32_MAX - 64 ? (int32_t)len + 64 : INT32_MAX;
    for (int tries = 0; tries < 2; tries++) {
        *ids = malloc((size_t)cap * sizeof(int32_t));
        if (!*ids) return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory for the token ids");
        specdec_status st = specdec_tokenize(srv->tok, text, len, add_special, *ids, cap, n);
        if (st == SPECDEC_OK) return 0;
        free(*ids);
        *ids = NULL;
        if (st != SPECDEC_ERR_BUFFER_TOO_SMALL || *n <= cap)
            return sd_api_fail(e, st == SPECDEC_ERR_UNSUPPORTED ? 400 : 500,
                               st == SPECDEC_ERR_UNSUPPORTED ? INVALID : "server_error", NULL, NULL, "tokenizing: %s",
                               specdec_tokenizer_last_error(srv->tok));
        cap = *n;
    }
    return sd_api_fail(e, 500, "server_error", NULL, NULL, "tokenizing: the count kept growing");
}

/* The chat form's text: the conversation rendered as generation renders it, with
 * add_generation_prompt. *text malloc'd. */
static int tok_chat_text(sd_server *srv, const sd_api_request *req, int agp, char **text, size_t *len,
                         sd_api_error *e) {
    *text = NULL;
    if (!srv->chat_family)
        return sd_api_fail(e, 400, INVALID, "chat_template_unsupported", "messages",
                           "%s: this server cannot render chat prompts for its model (start it with --chat-template "
                           "NAME)", srv->chat_problem);
    size_t cap = 65536;
    specdec_status st = SPECDEC_ERR_BUFFER_TOO_SMALL;
    for (int tries = 0; tries < 2 && st == SPECDEC_ERR_BUFFER_TOO_SMALL; tries++) {
        free(*text);
        if (!(*text = malloc(cap))) return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        st = specdec_chat_apply_json(srv->tok, srv->cfg.chat_template, req->messages_json, req->tools_json,
                                     req->kwargs_json, agp, *text, cap, len);
        if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) {
            int rc = sd_prep_bytes(srv, *len, "messages", e); /* the server's prompt byte limit */
            if (rc) {
                free(*text);
                *text = NULL;
                return rc;
            }
            cap = *len + 1;
        }
    }
    if (st == SPECDEC_OK) {
        int rc = sd_prep_bytes(srv, *len, "messages", e);
        if (!rc) rc = sd_api_continue_final(req, *text, len, e);
        if (rc) {
            free(*text);
            *text = NULL;
        }
        return rc;
    }
    free(*text);
    *text = NULL;
    if (st == SPECDEC_ERR_INVALID_ARGUMENT)
        return sd_api_fail(e, 400, INVALID, NULL,
                           strstr(specdec_last_error(), "chat_template_kwargs") ? "chat_template_kwargs" : "messages",
                           "%s", specdec_last_error());
    if (st == SPECDEC_ERR_UNSUPPORTED)
        return sd_api_fail(e, 400, INVALID, "chat_template_unsupported", "messages", "%s", specdec_last_error());
    return sd_api_fail(e, 500, "server_error", NULL, NULL, "rendering the chat prompt: %s", specdec_last_error());
}

/* {"count", "max_model_len", "tokens", "token_strs"} */
static int tok_answer(sd_server *srv, const int32_t *ids, int32_t n, int strs, sd_buf *b, sd_api_error *e) {
    sd_buf_printf(b, "{\"count\":%d,\"max_model_len\":%d,\"tokens\":[", (int)n, (int)srv->n_ctx);
    for (int32_t i = 0; i < n; i++) sd_buf_printf(b, i ? ",%d" : "%d", (int)ids[i]);
    sd_buf_puts(b, "],\"token_strs\":");
    if (!strs) {
        sd_buf_puts(b, "null}");
    } else {
        char piece[1024];
        sd_buf_puts(b, "[");
        for (int32_t i = 0; i < n && !b->oom; i++) {
            size_t len = 0;
            specdec_status st = specdec_token_to_piece(srv->tok, ids[i], piece, sizeof piece, &len);
            if (st != SPECDEC_OK) /* an added token longer than the buffer: never in published vocabularies */
                return sd_api_fail(e, 500, "server_error", NULL, NULL, "token %d: %s", (int)ids[i],
                                   specdec_tokenizer_last_error(srv->tok));
            if (i) sd_buf_puts(b, ",");
            sd_buf_json_str(b, piece, len);
        }
        sd_buf_puts(b, "]}");
    }
    return b->oom ? sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory for the answer") : 0;
}

static int tok_tokenize(sd_tok_job *j, const cJSON *root) {
    sd_server *srv = j->srv;
    const int chat = cJSON_GetObjectItemCaseSensitive(root, "messages") != NULL;
    int strs = 0, add_special = -1, rc;
    const cJSON *as = cJSON_GetObjectItemCaseSensitive(root, "add_special_tokens");
    if (as && !cJSON_IsNull(as)) {
        if (!cJSON_IsBool(as))
            return sd_api_fail(&j->e, 400, INVALID, NULL, "add_special_tokens", "'add_special_tokens' must be a boolean");
        add_special = cJSON_IsTrue(as);
    }
    if ((rc = tok_bool(root, "return_token_strs", 0, &strs, &j->e))) return rc;
    /* add_generation_prompt, and the refusals of continue_final_message true and a request's own
     * chat_template: the generation parser's (sd_api_parse), as for /v1/chat/completions */
    sd_api_request req;
    char *fields = sd_api_tokenize_body(root, chat);
    if (!fields) return sd_api_fail(&j->e, 500, "server_error", NULL, NULL, "out of memory");
    rc = sd_api_parse(fields, strlen(fields), chat, srv->model_id, &req, &j->e);
    cJSON_free(fields);
    if (rc != 200) return rc;
    int32_t *ids = NULL, n = 0;
    rc = 0;
    if (chat) {
        char *text = NULL;
        size_t len = 0;
        rc = tok_chat_text(srv, &req, req.add_generation_prompt, &text, &len, &j->e);
        if (!rc && add_special < 0 && specdec_chat_add_special(srv->tok, srv->cfg.chat_template, &add_special))
            rc = sd_api_fail(&j->e, 500, "server_error", NULL, NULL, "chat template: %s", specdec_last_error());
        if (!rc) rc = tok_ids(srv, text, len, add_special, &ids, &n, &j->e);
        free(text);
    } else if (req.n_prompts != 1 || req.prompts[0].ids) {
        rc = sd_api_fail(&j->e, 400, INVALID, NULL, "prompt", "'prompt' must be one string");
    } else {
        const sd_api_prompt *pr = &req.prompts[0];
        rc = sd_prep_bytes(srv, pr->len, "prompt", &j->e);
        if (!rc) rc = tok_ids(srv, pr->text, pr->len, add_special < 0 ? 1 : add_special, &ids, &n, &j->e);
    }
    if (!rc) rc = tok_answer(srv, ids, n, strs, &j->out, &j->e);
    free(ids);
    sd_api_request_free(&req);
    return rc ? rc : 200;
}

static int tok_detokenize(sd_tok_job *j, const cJSON *root) {
    sd_server *srv = j->srv;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (m && !cJSON_IsNull(m)) {
        if (!cJSON_IsString(m)) return sd_api_fail(&j->e, 400, INVALID, NULL, "model", "'model' must be a string");
        if (strcmp(m->valuestring, srv->model_id) != 0)
            return sd_api_fail(&j->e, 404, INVALID, "model_not_found", "model",
                               "The model '%.120s' does not exist; this server has '%.80s'", m->valuestring,
                               srv->model_id);
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!cJSON_IsArray(t)) return sd_api_fail(&j->e, 400, INVALID, NULL, "tokens", "'tokens' must be a list of token ids");
    const int n = cJSON_GetArraySize(t);
    int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (!ids) return sd_api_fail(&j->e, 500, "server_error", NULL, NULL, "out of memory");
    int i = 0, rc = 0;
    for (const cJSON *v = t->child; v && !rc; v = v->next, i++) {
        const double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (!cJSON_IsNumber(v) || !isfinite(d) || d != floor(d) || d < 0 || d >= srv->n_vocab)
            rc = sd_api_fail(&j->e, 400, INVALID, NULL, "tokens",
                             "'tokens'[%d] must be a token id in [0, %d)", i, (int)srv->n_vocab);
        else
            ids[i] = (int32_t)d;
    }
    char *text = NULL;
    size_t len = 0, cap = (size_t)n * 16 + 64;
    specdec_status st = SPECDEC_ERR_BUFFER_TOO_SMALL;
    for (int tries = 0; !rc && tries < 2 && st == SPECDEC_ERR_BUFFER_TOO_SMALL; tries++) {
        free(text);
        if (!(text = malloc(cap))) {
            rc = sd_api_fail(&j->e, 500, "server_error", NULL, NULL, "out of memory");
            break;
        }
        st = specdec_detokenize(srv->tok, ids, n, 0, text, cap, &len);
        if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) cap = len + 1;
    }
    if (!rc && st != SPECDEC_OK)
        rc = sd_api_fail(&j->e, st == SPECDEC_ERR_UNSUPPORTED ? 400 : 500,
                         st == SPECDEC_ERR_UNSUPPORTED ? INVALID : "server_error", NULL, "tokens", "detokenizing: %s",
                         specdec_tokenizer_last_error(srv->tok));
    if (!rc) {
        sd_buf_puts(&j->out, "{\"prompt\":");
        sd_buf_json_str(&j->out, text, len);
        sd_buf_puts(&j->out, "}");
        if (j->out.oom) rc = sd_api_fail(&j->e, 500, "server_error", NULL, NULL, "out of memory for the answer");
    }
    free(text);
    free(ids);
    return rc ? rc : 200;
}

static void tok_run(void *arg) {
    sd_tok_job *j = arg;
    /* the generation parser's checks of the raw body first: UTF-8, NUL, JSON, one object */
    if (!j->body || j->len == 0) {
        j->rc = sd_api_fail(&j->e, 400, INVALID, NULL, NULL, "the request body is empty");
        return;
    }
    if (!sd_api_utf8_valid(j->body, j->len)) {
        j->rc = sd_api_fail(&j->e, 400, INVALID, NULL, NULL, "the body is not valid UTF-8");
        return;
    }
    if (!j->detok && sd_api_has_nul(j->body, j->len)) { /* before sd_api_tokenize_body re-prints what it keeps */
        j->rc = sd_api_fail(&j->e, 400, INVALID, NULL, NULL, "the body contains a NUL character (raw or \\u0000)");
        return;
    }
    cJSON *root = cJSON_ParseWithLength(j->body, j->len);
    if (!cJSON_IsObject(root)) {
        j->rc = sd_api_fail(&j->e, 400, INVALID, NULL, NULL, root ? "the body must be a JSON object"
                                                                  : "the body is not valid JSON");
        cJSON_Delete(root);
        return;
    }
    j->rc = j->detok ? tok_detokenize(j, root) : tok_tokenize(j, root);
    cJSON_Delete(root);
}

enum MHD_Result sd_tok_handle(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep, const char *body, size_t len) {
    sd_tok_job j = {.srv = srv, .detok = ep == SD_EP_DETOKENIZE, .body = body, .len = len};
    memset(&j.e, 0, sizeof j.e);
    sd_prep_run(srv->prep, len, tok_run, &j);
    enum MHD_Result r = j.rc == 200 ? sd_http_reply(srv, c, ep, 200, "application/json", j.out.p, j.out.len)
                                    : sd_http_reply_error(srv, c, ep, &j.e);
    sd_buf_free(&j.out);
    return r;
}

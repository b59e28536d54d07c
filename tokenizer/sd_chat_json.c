/* sd_chat_json.c — specdec_chat_apply_json: an OpenAI-format conversation given as JSON text,
 * normalised as vLLM normalises /v1/chat/completions messages (vllm/entrypoints/chat_utils.py:
 * content parts joined in the "string" content format, string tool-call arguments parsed, only the
 * fields vLLM keeps), then as transformers' render_jinja_template (reasoning aliased), and rendered
 * with tools and extra template variables (chat_template_kwargs). specdec.h documents the rules. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sd_alloc.h"
#include "sd_chat_template.h"
#include "sd_utf8.h"

#define SD_CHAT_MAX_KWARGS 256
#define FN "specdec_chat_apply_json"

static specdec_status sd_cj_oom(void) { return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, FN ": out of memory"); }

/* Parse text (NUL-terminated) as JSON after checking it is UTF-8. */
static specdec_status sd_cj_parse(const char *text, const char *what, cJSON **out) {
    size_t n = strlen(text);
    *out = NULL;
    if (!sd_utf8_valid((const unsigned char *)text, n))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": %s is not valid UTF-8", what);
    const char *end = NULL;
    *out = cJSON_ParseWithOpts(text, &end, 1);
    if (!*out)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": %s is not JSON (error near byte %zu)", what,
                       end && end >= text ? (size_t)(end - text) : (size_t)0);
    return SPECDEC_OK;
}

/* vLLM's "string" content format: null -> "", a string as is, parts -> their texts joined by "\n". */
static specdec_status sd_cj_content(const cJSON *c, int i, cJSON *msg) {
    if (!c || cJSON_IsNull(c)) return cJSON_AddStringToObject(msg, "content", "") ? SPECDEC_OK : sd_cj_oom();
    if (cJSON_IsString(c)) return cJSON_AddStringToObject(msg, "content", c->valuestring) ? SPECDEC_OK : sd_cj_oom();
    if (!cJSON_IsArray(c))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": messages[%d].content is neither a string, null nor a list", i);
    sd_tok_buf b = {0};
    int k = 0, first = 1;
    specdec_status st = SPECDEC_OK;
    for (const cJSON *p = c->child; p && !st; p = p->next, k++) {
        const cJSON *t = NULL;
        if (cJSON_IsString(p)) t = p;
        else if (!cJSON_IsObject(p)) {
            st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": messages[%d].content[%d] is not a part object", i, k);
            break;
        } else {
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
            const char *key = NULL;
            if (!cJSON_IsString(ty)) {
                st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": messages[%d].content[%d] has no \"type\"", i, k);
                break;
            }
            const char *tn = ty->valuestring;
            if (!strcmp(tn, "text") || !strcmp(tn, "input_text") || !strcmp(tn, "output_text")) key = "text";
            else if (!strcmp(tn, "refusal")) key = "refusal";
            else if (!strcmp(tn, "thinking")) key = "thinking";
            else {
                st = sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, FN ": messages[%d].content[%d]: part type \"%.40s\" is not "
                             "supported (text only)", i, k, tn);
                break;
            }
            t = cJSON_GetObjectItemCaseSensitive(p, key);
            if (!t || cJSON_IsNull(t)) continue; /* vLLM skips a text part without text */
            if (!cJSON_IsString(t)) {
                st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": messages[%d].content[%d].%s is not a string", i, k, key);
                break;
            }
        }
        if ((!first && sd_tok_buf_put(&b, "\n", 1)) || sd_tok_buf_put(&b, t->valuestring, strlen(t->valuestring)))
            st = sd_cj_oom();
        first = 0;
    }
    if (!st) {
        char *s = sd_malloc(b.len + 1);
        if (!s) st = sd_cj_oom();
        else {
            if (b.len) memcpy(s, b.p, b.len);
            s[b.len] = '\0';
            if (!cJSON_AddStringToObject(msg, "content", s)) st = sd_cj_oom();
            sd_free(s);
        }
    }
    sd_tok_buf_free(&b);
    return st;
}

/* Copy src[key] into dst under the same key. */
static specdec_status sd_cj_copy(cJSON *dst, const char *key, const cJSON *v) {
    cJSON *d = cJSON_Duplicate(v, 1);
    if (!d || !cJSON_AddItemToObject(dst, key, d)) {
        cJSON_Delete(d);
        return sd_cj_oom();
    }
    return SPECDEC_OK;
}

/* An assistant's tool_calls as vLLM keeps them: arguments that are a string parsed as JSON
 * (invalid or empty: {}), anything else that is not a dict or list -> {}. */
static specdec_status sd_cj_tool_calls(const cJSON *tc, int i, cJSON *msg) {
    if (!tc || cJSON_IsNull(tc)) return SPECDEC_OK;
    if (!cJSON_IsArray(tc))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": messages[%d].tool_calls is not a list", i);
    if (!tc->child) return SPECDEC_OK; /* vLLM drops an empty list: the template's plain assistant path */
    cJSON *d = cJSON_Duplicate(tc, 1);
    if (!d) return sd_cj_oom();
    int k = 0;
    for (cJSON *call = d->child; call; call = call->next, k++) {
        cJSON *f = cJSON_IsObject(call) ? cJSON_GetObjectItemCaseSensitive(call, "function") : NULL;
        if (!cJSON_IsObject(f)) {
            cJSON_Delete(d);
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": messages[%d].tool_calls[%d].function is not an object",
                           i, k);
        }
        cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        if (a && (cJSON_IsObject(a) || cJSON_IsArray(a))) continue;
        cJSON *parsed = NULL;
        if (cJSON_IsString(a)) {
            parsed = cJSON_ParseWithOpts(a->valuestring, NULL, 1); /* json.loads: any JSON value, nothing after it */
        }
        if (!parsed) parsed = cJSON_CreateObject();
        if (!parsed) {
            cJSON_Delete(d);
            return sd_cj_oom();
        }
        if (a) cJSON_ReplaceItemInObjectCaseSensitive(f, "arguments", parsed);
        else cJSON_AddItemToObject(f, "arguments", parsed);
    }
    cJSON_AddItemToObject(msg, "tool_calls", d);
    return SPECDEC_OK;
}

/* One message as vLLM's _parse_chat_message_content + transformers' reasoning aliases leave it. */
static specdec_status sd_cj_message(const cJSON *m, int i, cJSON **out) {
    *out = NULL;
    if (!cJSON_IsObject(m)) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": messages[%d] is not an object", i);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(role) || !role->valuestring[0])
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": messages[%d].role is not a non-empty string", i);
    const char *r = role->valuestring;
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(m, "reasoning");
    if (!reasoning || cJSON_IsNull(reasoning)) reasoning = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
    if (reasoning && cJSON_IsNull(reasoning)) reasoning = NULL;
    if (reasoning && !cJSON_IsString(reasoning))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": messages[%d].reasoning is not a string", i);
    const int assistant = !strcmp(r, "assistant");
    if (!assistant) reasoning = NULL;
    cJSON *msg = cJSON_CreateObject();
    if (!msg) return sd_cj_oom();
    specdec_status st = SPECDEC_OK;
    /* transformers: {"thinking": reasoning, **message, "reasoning_content": reasoning} */
    if (reasoning && !cJSON_AddStringToObject(msg, "thinking", reasoning->valuestring)) st = sd_cj_oom();
    if (!st && !cJSON_AddStringToObject(msg, "role", r)) st = sd_cj_oom();
    if (!st) st = sd_cj_content(cJSON_GetObjectItemCaseSensitive(m, "content"), i, msg);
    if (!st && assistant) st = sd_cj_tool_calls(cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), i, msg);
    if (!st && reasoning &&
        (!cJSON_AddStringToObject(msg, "reasoning", reasoning->valuestring) ||
         !cJSON_AddStringToObject(msg, "reasoning_content", reasoning->valuestring)))
        st = sd_cj_oom();
    const cJSON *v;
    if (!st && !strcmp(r, "tool") && (v = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id")))
        st = sd_cj_copy(msg, "tool_call_id", v);
    if (!st && cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(m, "name"))) st = sd_cj_copy(msg, "name", v);
    if (!st && cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(m, "task"))) st = sd_cj_copy(msg, "task", v);
    if (!st && !strcmp(r, "developer")) {
        v = cJSON_GetObjectItemCaseSensitive(m, "tools");
        if (v) st = sd_cj_copy(msg, "tools", v);
        else if (!cJSON_AddNullToObject(msg, "tools")) st = sd_cj_oom();
    }
    if (st) {
        cJSON_Delete(msg);
        return st;
    }
    *out = msg;
    return SPECDEC_OK;
}

/* The normalised conversation. */
static specdec_status sd_cj_conversation(const char *messages_json, cJSON **conv) {
    cJSON *in = NULL;
    *conv = NULL;
    specdec_status st = sd_cj_parse(messages_json, "messages", &in);
    if (st) return st;
    if (!cJSON_IsArray(in) || !in->child) {
        cJSON_Delete(in);
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": messages is not a non-empty JSON list");
    }
    cJSON *out = cJSON_CreateArray();
    if (!out) st = sd_cj_oom();
    int i = 0;
    for (const cJSON *m = in->child; m && !st; m = m->next, i++) {
        cJSON *msg = NULL;
        if (!(st = sd_cj_message(m, i, &msg))) cJSON_AddItemToArray(out, msg);
    }
    cJSON_Delete(in);
    if (st) {
        cJSON_Delete(out);
        return st;
    }
    *conv = out;
    return SPECDEC_OK;
}

static const char *const sd_cj_refused[] = {"messages", "conversation", "chat_template", "tokenize"};

static specdec_status sd_cj_kwargs(const char *kwargs_json, cJSON **kw) {
    *kw = NULL;
    if (!kwargs_json) return SPECDEC_OK;
    specdec_status st = sd_cj_parse(kwargs_json, "chat_template_kwargs", kw);
    if (st) return st;
    if (!cJSON_IsObject(*kw)) st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": chat_template_kwargs is not a JSON object");
    int n = 0;
    for (const cJSON *e = st ? NULL : (*kw)->child; e && !st; e = e->next, n++) {
        if (n >= SD_CHAT_MAX_KWARGS)
            st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": chat_template_kwargs has more than %d keys",
                         SD_CHAT_MAX_KWARGS);
        for (size_t k = 0; !st && k < sizeof sd_cj_refused / sizeof sd_cj_refused[0]; k++)
            if (!strcmp(e->string, sd_cj_refused[k]))
                st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": chat_template_kwargs may not set \"%s\"", e->string);
        if (!st && !strcmp(e->string, "continue_final_message"))
            st = sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, FN ": chat_template_kwargs: continue_final_message is not supported");
    }
    if (st) {
        cJSON_Delete(*kw);
        *kw = NULL;
    }
    return st;
}

/* The plain format over the normalised messages. */
static specdec_status sd_cj_plain(const cJSON *conv, int agp, sd_tok_buf *out) {
    int n = cJSON_GetArraySize(conv), i = 0;
    specdec_chat_message *m = sd_malloc((size_t)n * sizeof *m);
    if (!m) return sd_cj_oom();
    for (const cJSON *e = conv->child; e; e = e->next, i++) {
        m[i].role = cJSON_GetObjectItemCaseSensitive(e, "role")->valuestring;
        m[i].content = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
    }
    specdec_status st = sd_chat_render_plain(m, n, agp, out);
    sd_free(m);
    return st;
}

static specdec_status sd_cj_render(const specdec_tokenizer *tok, const char *name, const cJSON *conv, const cJSON *tools,
                                   const cJSON *kw, int agp, sd_tok_buf *out) {
    int which = 0;
    specdec_status st = sd_chat_resolve_name(tok, name, &which);
    if (st) return st;
    if (which == SD_CHAT_FORMAT_PLAIN) { /* a template that reads role and content only */
        const cJSON *a = kw ? cJSON_GetObjectItemCaseSensitive(kw, "add_generation_prompt") : NULL;
        if (a) agp = cJSON_IsTrue(a) || (cJSON_IsNumber(a) && a->valuedouble != 0) ||
                     (cJSON_IsString(a) && a->valuestring[0]) || (cJSON_IsArray(a) && a->child) ||
                     (cJSON_IsObject(a) && a->child);
        return sd_cj_plain(conv, agp, out);
    }
    size_t cap = 1 + SD_CHAT_CONTEXT_VARS + (size_t)cJSON_GetArraySize(kw);
    sd_jinja_var *v = sd_malloc(cap * sizeof *v);
    if (!v) return sd_cj_oom();
    memset(v, 0, cap * sizeof *v);
    v[0].name = "messages";
    v[0].kind = SD_JINJA_JSON;
    v[0].json = conv;
    size_t nv = 1 + sd_chat_context_vars(tok, agp, tools, v + 1);
    for (const cJSON *e = kw ? kw->child : NULL; e; e = e->next) { /* kwargs update the defaults, as in vLLM */
        size_t k = 0;
        while (k < nv && strcmp(v[k].name, e->string)) k++;
        if (k == nv) nv++;
        memset(&v[k], 0, sizeof v[k]);
        v[k].name = e->string;
        v[k].kind = SD_JINJA_JSON;
        v[k].json = e;
    }
    const sd_jinja_tmpl *t = NULL;
    sd_jinja_tmpl *own = NULL;
    st = sd_chat_template_of(tok, which, &t, &own);
    if (!st) st = sd_jinja_render(t, v, nv, SD_JINJA_NOW_SYSTEM, NULL, out);
    sd_jinja_free(own);
    sd_free(v);
    return st;
}

specdec_status specdec_chat_apply_json(const specdec_tokenizer *tok, const char *template_name, const char *messages_json,
                                       const char *tools_json, const char *kwargs_json, int add_generation_prompt,
                                       char *text, size_t capacity, size_t *len) {
    if (len) *len = 0;
    if (text && capacity) text[0] = '\0';
    if (!tok || !len || !messages_json || (!text && capacity))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": NULL argument");
    cJSON *conv = NULL, *tools = NULL, *kw = NULL;
    specdec_status st = sd_cj_conversation(messages_json, &conv);
    if (!st && tools_json) {
        st = sd_cj_parse(tools_json, "tools", &tools);
        if (!st && !cJSON_IsArray(tools) && !cJSON_IsNull(tools))
            st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, FN ": tools is neither a JSON list nor null");
        if (!st && cJSON_IsNull(tools)) {
            cJSON_Delete(tools);
            tools = NULL;
        }
    }
    if (!st) st = sd_cj_kwargs(kwargs_json, &kw);
    sd_tok_buf out = {0};
    if (!st) st = sd_cj_render(tok, template_name, conv, tools, kw, add_generation_prompt, &out);
    if (!st) st = sd_chat_copy_out(&out, text, capacity, len, FN);
    sd_tok_buf_free(&out);
    cJSON_Delete(conv);
    cJSON_Delete(tools);
    cJSON_Delete(kw);
    return st;
}

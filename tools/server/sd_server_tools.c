/* sd_server_tools.c — tools / tool_choice / chat_template_kwargs of a chat request, and the
 * output parsers that turn generated text into tool_calls (sd_server_tools.h). */
#define _GNU_SOURCE
#include "sd_server_tools.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <cjson/cJSON.h>

#define INVALID "invalid_request_error"

sd_tool_parser sd_tools_parser_named(const char *name) {
    if (!name) return SD_TP_NONE;
    if (!strcmp(name, "hermes")) return SD_TP_HERMES;
    if (!strcmp(name, "llama3_json")) return SD_TP_LLAMA3_JSON;
    if (!strcmp(name, "mistral")) return SD_TP_MISTRAL;
    if (!strcmp(name, "glm45")) return SD_TP_GLM45;
    if (!strcmp(name, "qwen3_coder")) return SD_TP_QWEN3_CODER;
    if (!strcmp(name, "deepseek_v3")) return SD_TP_DEEPSEEK_V3;
    return SD_TP_NONE;
}

/* ------------------------------------------------------------------------- */
/* request side                                                               */
/* ------------------------------------------------------------------------- */
static int sd_depth(const cJSON *v, int lim) {
    int d = 0;
    for (const cJSON *c = v->child; c && d <= lim; c = c->next) {
        int k = (cJSON_IsObject(c) || cJSON_IsArray(c)) ? sd_depth(c, lim - 1) : 0;
        if (k > d) d = k;
    }
    return d + 1;
}

static int sd_oom(sd_api_error *e, const char *param) {
    return sd_api_fail(e, 500, "server_error", NULL, param, "out of memory");
}

/* One tool checked and added to out as vLLM's model_dump writes it. */
static int sd_tool_one(const cJSON *t, int i, cJSON *out, sd_api_request *r, sd_api_error *e) {
    if (!cJSON_IsObject(t)) return sd_api_fail(e, 400, INVALID, NULL, "tools", "tools[%d] must be an object", i);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
    if (type && !(cJSON_IsString(type) && !strcmp(type->valuestring, "function")))
        return sd_api_fail(e, 400, INVALID, NULL, "tools", "tools[%d].type must be \"function\"", i);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
    if (!cJSON_IsObject(f)) return sd_api_fail(e, 400, INVALID, NULL, "tools", "tools[%d].function must be an object", i);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(f, "description");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(f, "parameters");
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(f, "strict");
    if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) > SD_API_MAX_TOOL_NAME)
        return sd_api_fail(e, 400, INVALID, NULL, "tools", "tools[%d].function.name must be a string of 1 to %d bytes", i,
                           SD_API_MAX_TOOL_NAME);
    if (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc))
        return sd_api_fail(e, 400, INVALID, NULL, "tools", "tools[%d].function.description must be a string", i);
    if (par && !cJSON_IsNull(par) && !cJSON_IsObject(par))
        return sd_api_fail(e, 400, INVALID, NULL, "tools", "tools[%d].function.parameters must be an object (a JSON Schema)",
                           i);
    if (strict && !cJSON_IsNull(strict) && !cJSON_IsBool(strict))
        return sd_api_fail(e, 400, INVALID, NULL, "tools", "tools[%d].function.strict must be a boolean", i);
    if (cJSON_IsObject(par) && sd_depth(par, SD_API_MAX_SCHEMA_DEPTH) > SD_API_MAX_SCHEMA_DEPTH)
        return sd_api_fail(e, 400, INVALID, NULL, "tools", "tools[%d].function.parameters nests deeper than %d levels", i,
                           SD_API_MAX_SCHEMA_DEPTH);
    for (int k = 0; k < r->n_tools; k++)
        if (!strcmp(r->tool_names[k], name->valuestring))
            return sd_api_fail(e, 400, INVALID, NULL, "tools", "tools[%d]: a second function named \"%.64s\"", i,
                               name->valuestring);
    if (!(r->tool_names[r->n_tools] = strdup(name->valuestring))) return sd_oom(e, "tools");
    r->n_tools++;
    /* model_dump: the declared fields (None when absent), then the extra keys as given */
    cJSON *o = cJSON_CreateObject(), *fo = cJSON_CreateObject();
    if (!o || !fo || !cJSON_AddStringToObject(o, "type", "function")) {
        cJSON_Delete(o);
        cJSON_Delete(fo);
        return sd_oom(e, "tools");
    }
    cJSON_AddItemToObject(o, "function", fo);
    cJSON_AddItemToArray(out, o);
    int bad = !cJSON_AddStringToObject(fo, "name", name->valuestring);
    bad |= !cJSON_AddItemToObject(fo, "description", desc ? cJSON_Duplicate(desc, 1) : cJSON_CreateNull());
    bad |= !cJSON_AddItemToObject(fo, "parameters", par ? cJSON_Duplicate(par, 1) : cJSON_CreateNull());
    for (const cJSON *x = f->child; x && !bad; x = x->next)
        if (strcmp(x->string, "name") && strcmp(x->string, "description") && strcmp(x->string, "parameters"))
            bad |= !cJSON_AddItemToObject(fo, x->string, cJSON_Duplicate(x, 1));
    for (const cJSON *x = t->child; x && !bad; x = x->next)
        if (strcmp(x->string, "type") && strcmp(x->string, "function"))
            bad |= !cJSON_AddItemToObject(o, x->string, cJSON_Duplicate(x, 1));
    return bad ? sd_oom(e, "tools") : 0;
}

/* A tool's parameters as a schema (the empty-object schema vLLM uses for none or {}); with defs,
 * its "$defs" are moved there ("required" merges them at the top of its schema). */
static cJSON *sd_params_schema(const cJSON *par, cJSON *defs, int *conflict) {
    if (!cJSON_IsObject(par) || !par->child) {
        cJSON *s = cJSON_CreateObject();
        if (s) cJSON_AddStringToObject(s, "type", "object"), cJSON_AddItemToObject(s, "properties", cJSON_CreateObject());
        return s;
    }
    cJSON *s = cJSON_Duplicate(par, 1);
    cJSON *d = s && defs ? cJSON_DetachItemFromObjectCaseSensitive(s, "$defs") : NULL; /* named: kept in place */
    for (cJSON *x = d && defs ? d->child : NULL; x; x = x->next) { /* vLLM merges every tool's $defs */
        const cJSON *have = cJSON_GetObjectItemCaseSensitive(defs, x->string);
        if (have && !cJSON_Compare(have, x, 1)) *conflict = 1;
        else if (!have) cJSON_AddItemToObject(defs, x->string, cJSON_Duplicate(x, 1));
    }
    cJSON_Delete(d);
    return s;
}

/* vLLM's get_json_schema_from_tools for "required" (its items' "type": "object" moved into each
 * anyOf branch, where specdec's schema compiler takes it; the same set of instances). */
static int sd_required_schema(const cJSON *tools, sd_api_request *r, sd_api_error *e) {
    cJSON *s = cJSON_CreateObject(), *defs = cJSON_CreateObject(), *any = cJSON_CreateArray(), *items = cJSON_CreateObject();
    int conflict = 0, bad = !s || !defs || !any || !items;
    if (!bad) {
        cJSON_AddStringToObject(s, "type", "array");
        cJSON_AddNumberToObject(s, "minItems", 1);
        cJSON_AddItemToObject(s, "items", items);
        cJSON_AddItemToObject(items, "anyOf", any);
        items = any = NULL;
    }
    for (const cJSON *t = bad ? NULL : tools->child; t && !bad; t = t->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *name = cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring;
        cJSON *br = cJSON_CreateObject(), *props = cJSON_CreateObject(), *nm = cJSON_CreateObject(), *en = cJSON_CreateArray();
        cJSON *req = cJSON_CreateArray(), *ps = sd_params_schema(cJSON_GetObjectItemCaseSensitive(f, "parameters"), defs,
                                                                  &conflict);
        bad = !br || !props || !nm || !en || !req || !ps;
        if (bad) {
            cJSON_Delete(br), cJSON_Delete(props), cJSON_Delete(nm), cJSON_Delete(en), cJSON_Delete(req), cJSON_Delete(ps);
            break;
        }
        cJSON_AddStringToObject(nm, "type", "string");
        cJSON_AddItemToArray(en, cJSON_CreateString(name));
        cJSON_AddItemToObject(nm, "enum", en);
        cJSON_AddItemToObject(props, "name", nm);
        cJSON_AddItemToObject(props, "parameters", ps);
        cJSON_AddStringToObject(br, "type", "object");
        cJSON_AddItemToObject(br, "properties", props);
        cJSON_AddItemToArray(req, cJSON_CreateString("name"));
        cJSON_AddItemToArray(req, cJSON_CreateString("parameters"));
        cJSON_AddItemToObject(br, "required", req);
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "items"), "anyOf"), br);
    }
    if (!bad && defs->child) {
        cJSON_AddItemToObject(s, "$defs", defs);
        defs = NULL;
    }
    char *text = bad || conflict ? NULL : cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    cJSON_Delete(defs);
    cJSON_Delete(items);
    cJSON_Delete(any);
    if (conflict)
        return sd_api_fail(e, 400, INVALID, NULL, "tools",
                           "Tool definitions share a $defs name with different schemas, which is not supported");
    if (!text) return sd_oom(e, "tool_choice");
    r->guided.kind = SPECDEC_GRAMMAR_JSON_SCHEMA;
    r->guided.spec = text;
    r->guided.len = strlen(text);
    snprintf(r->guided.param, sizeof r->guided.param, "tool_choice");
    return 0;
}

static int sd_named_schema(const cJSON *tools, int k, sd_api_request *r, sd_api_error *e) {
    const cJSON *t = cJSON_GetArrayItem(tools, k);
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "parameters");
    int unused = 0;
    cJSON *s = sd_params_schema(par, NULL, &unused);
    char *text = s ? cJSON_PrintUnformatted(s) : NULL;
    cJSON_Delete(s);
    if (!text) return sd_oom(e, "tool_choice");
    r->guided.kind = SPECDEC_GRAMMAR_JSON_SCHEMA;
    r->guided.spec = text;
    r->guided.len = strlen(text);
    snprintf(r->guided.param, sizeof r->guided.param, "tool_choice");
    return 0;
}

static int sd_parse_choice(const cJSON *root, const cJSON *tools, sd_api_request *r, sd_api_error *e) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    const int have_tools = tools && tools->child;
    if (!tc || cJSON_IsNull(tc)) { /* vLLM: "auto" when tools are given, else "none" */
        r->tool_choice = have_tools ? SD_TC_AUTO : SD_TC_NONE;
        return 0;
    }
    if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "none")) {
        r->tool_choice = SD_TC_NONE;
        return 0;
    }
    if (!tools) return sd_api_fail(e, 400, INVALID, NULL, "tool_choice", "When using `tool_choice`, `tools` must be set.");
    if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "auto")) {
        r->tool_choice = SD_TC_AUTO;
        return 0;
    }
    if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "required")) {
        r->tool_choice = have_tools ? SD_TC_REQUIRED : SD_TC_NONE; /* OpenAI: "required" without tools is "none" */
        return 0;
    }
    const char *usage = "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`";
    if (!cJSON_IsObject(tc))
        return sd_api_fail(e, 400, INVALID, NULL, "tool_choice",
                           "Invalid value for `tool_choice`! Only named tools, \"none\", \"auto\" or \"required\" are "
                           "supported.");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *name = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "name") : NULL;
    if ((type && !(cJSON_IsString(type) && !strcmp(type->valuestring, "function"))) || !cJSON_IsString(name) ||
        !name->valuestring[0])
        return sd_api_fail(e, 400, INVALID, NULL, "tool_choice", "Invalid value for `tool_choice`! %s", usage);
    for (int k = 0; k < r->n_tools; k++)
        if (!strcmp(r->tool_names[k], name->valuestring)) {
            r->tool_choice = SD_TC_NAMED;
            r->tool_named = k;
            return 0;
        }
    return sd_api_fail(e, 400, INVALID, NULL, "tool_choice",
                       "The tool specified in `tool_choice` (\"%.64s\") does not match any of the specified `tools`",
                       name->valuestring);
}

int sd_tools_parse(const cJSON *root, sd_api_request *r, sd_api_error *e) {
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    if (kw && !cJSON_IsNull(kw)) {
        if (!cJSON_IsObject(kw))
            return sd_api_fail(e, 400, INVALID, NULL, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
        if (!(r->kwargs_json = cJSON_PrintUnformatted(kw))) return sd_oom(e, "chat_template_kwargs");
        if (strlen(r->kwargs_json) > SD_API_MAX_KWARGS_BYTES)
            return sd_api_fail(e, 400, INVALID, NULL, "chat_template_kwargs", "'chat_template_kwargs' is longer than %zu bytes",
                               SD_API_MAX_KWARGS_BYTES);
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (tools && cJSON_IsNull(tools)) tools = NULL;
    if (tools && !cJSON_IsArray(tools)) return sd_api_fail(e, 400, INVALID, NULL, "tools", "'tools' must be a list");
    int n = tools ? cJSON_GetArraySize(tools) : 0;
    if (n > SD_API_MAX_TOOLS)
        return sd_api_fail(e, 400, INVALID, NULL, "tools", "'tools' has %d entries, more than %d", n, SD_API_MAX_TOOLS);
    cJSON *norm = NULL;
    if (tools) {
        if (n && !(r->tool_names = calloc((size_t)n, sizeof *r->tool_names))) return sd_oom(e, "tools");
        if (!(norm = cJSON_CreateArray())) return sd_oom(e, "tools");
        int i = 0, rc = 0;
        for (const cJSON *t = tools->child; t && !rc; t = t->next, i++) rc = sd_tool_one(t, i, norm, r, e);
        if (!rc && !(r->tools_json = cJSON_PrintUnformatted(norm))) rc = sd_oom(e, "tools");
        if (rc) {
            cJSON_Delete(norm);
            return rc;
        }
    }
    int rc = sd_parse_choice(root, norm, r, e);
    if (!rc && (r->tool_choice == SD_TC_REQUIRED || r->tool_choice == SD_TC_NAMED)) {
        if (r->guided.kind)
            rc = sd_api_fail(e, 400, INVALID, NULL, "tool_choice",
                             "tool_choice \"required\" or a named function constrains the output itself: it cannot be "
                             "combined with '%s'", r->guided.param);
        else rc = r->tool_choice == SD_TC_REQUIRED ? sd_required_schema(norm, r, e) : sd_named_schema(norm, r->tool_named, r, e);
        if (!rc && r->guided.len > SD_API_MAX_GUIDED_BYTES)
            rc = sd_api_fail(e, 400, INVALID, NULL, "tools",
                             "the tools' parameters make a constraint of %zu bytes, more than %zu", r->guided.len,
                             SD_API_MAX_GUIDED_BYTES);
    }
    cJSON_Delete(norm);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Python's json.dumps                                                        */
/* ------------------------------------------------------------------------- */
void sd_tools_pystr(sd_buf *b, const char *s, size_t n) {
    sd_buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s, *e = p + n; p < e; p++) {
        switch (*p) {
        case '"': sd_buf_puts(b, "\\\""); break;
        case '\\': sd_buf_puts(b, "\\\\"); break;
        case '\n': sd_buf_puts(b, "\\n"); break;
        case '\r': sd_buf_puts(b, "\\r"); break;
        case '\t': sd_buf_puts(b, "\\t"); break;
        case '\b': sd_buf_puts(b, "\\b"); break;
        case '\f': sd_buf_puts(b, "\\f"); break;
        default:
            if (*p < 0x20) sd_buf_printf(b, "\\u%04x", *p);
            else sd_buf_append(b, p, 1);
        }
    }
    sd_buf_puts(b, "\"");
}

static void sd_py_num(sd_buf *b, double x) {
    if (x != x) { sd_buf_puts(b, "NaN"); return; }
    if (x > 1.7976931348623157e308) { sd_buf_puts(b, "Infinity"); return; }
    if (x < -1.7976931348623157e308) { sd_buf_puts(b, "-Infinity"); return; }
    if (x == (double)(int64_t)x && x > -9007199254740992.0 && x < 9007199254740992.0) {
        sd_buf_printf(b, "%lld", (long long)x);
        return;
    }
    char s[40];
    for (int prec = 15; prec <= 17; prec++) { /* the shortest that reads back, as repr() */
        snprintf(s, sizeof s, "%.*g", prec, x);
        if (strtod(s, NULL) == x) break;
    }
    sd_buf_puts(b, s);
}

void sd_tools_pydump(sd_buf *b, const cJSON *v) {
    if (cJSON_IsNull(v)) sd_buf_puts(b, "null");
    else if (cJSON_IsTrue(v)) sd_buf_puts(b, "true");
    else if (cJSON_IsFalse(v)) sd_buf_puts(b, "false");
    else if (cJSON_IsNumber(v)) sd_py_num(b, v->valuedouble);
    else if (cJSON_IsString(v)) sd_tools_pystr(b, v->valuestring, strlen(v->valuestring));
    else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        const int obj = cJSON_IsObject(v);
        sd_buf_puts(b, obj ? "{" : "[");
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) sd_buf_puts(b, ", ");
            if (obj) sd_tools_pystr(b, c->string, strlen(c->string)), sd_buf_puts(b, ": ");
            sd_tools_pydump(b, c);
        }
        sd_buf_puts(b, obj ? "}" : "]");
    } else sd_buf_puts(b, "null");
}

/* ------------------------------------------------------------------------- */
/* response side                                                              */
/* ------------------------------------------------------------------------- */
static void sd_random_bytes(unsigned char *p, size_t n) {
    if (getrandom(p, n, GRND_NONBLOCK) == (ssize_t)n) return;
    static uint64_t ctr; /* no entropy at hand: a clock-and-counter mix (ids need only be unique) */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (__atomic_add_fetch(&ctr, 1, __ATOMIC_RELAXED) << 48);
    for (size_t i = 0; i < n; i++) {
        x += 0x9e3779b97f4a7c15ULL;
        uint64_t z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        p[i] = (unsigned char)(z ^ (z >> 31));
    }
}

/* vLLM's ids: "chatcmpl-tool-" + a uuid4's hex; mistral's: 9 letters and digits. */
void sd_tools_new_id(char *id, size_t cap, int mistral) {
    unsigned char r[16];
    sd_random_bytes(r, sizeof r);
    if (mistral) {
        static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        for (int i = 0; i < 9; i++) id[i] = al[r[i] % 62];
        id[9] = '\0';
        return;
    }
    int off = snprintf(id, cap, "chatcmpl-tool-");
    for (int i = 0; i < 16 && off + 3 <= (int)cap; i++) off += snprintf(id + off, cap - (size_t)off, "%02x", r[i]);
}

void sd_tools_out_init(sd_tool_out *o, sd_tool_choice choice, sd_tool_parser parser, const char *named) {
    memset(o, 0, sizeof *o);
    o->choice = choice;
    o->parser = choice == SD_TC_AUTO ? parser : SD_TP_NONE;
    o->named = named;
    if (choice == SD_TC_NAMED) sd_tools_new_id(o->named_id, sizeof o->named_id, 0);
}

void sd_tools_calls_free(sd_tool_call *calls, int n) {
    for (int i = 0; i < n; i++) {
        free(calls[i].name);
        free(calls[i].args);
    }
}

const char *sd_tools_find(const char *s, size_t n, const char *pat) {
    size_t m = strlen(pat);
    for (size_t i = 0; i + m <= n; i++)
        if (s[i] == pat[0] && !memcmp(s + i, pat, m)) return s + i;
    return NULL;
}

/* Parse s[0..n) as one JSON value (a NUL-terminated copy; nothing after it but whitespace). */
static cJSON *sd_parse_n(const char *s, size_t n) {
    char *c = malloc(n + 1);
    if (!c) return NULL;
    memcpy(c, s, n);
    c[n] = '\0';
    cJSON *v = memchr(s, '\0', n) ? NULL : cJSON_ParseWithOpts(c, NULL, 1);
    free(c);
    return v;
}

/* A call from a parsed object: obj[name_key] a string, its arguments obj[args_key] (or, when
 * absent, obj[alt_key]) written with json.dumps. 0 when it is not such an object. */
static int sd_call_from(const cJSON *obj, const char *args_key, const char *alt_key, int mistral, sd_tool_call *c) {
    const cJSON *name = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, "name") : NULL;
    const cJSON *a = name ? cJSON_GetObjectItemCaseSensitive(obj, args_key) : NULL;
    if (!a && alt_key && name) a = cJSON_GetObjectItemCaseSensitive(obj, alt_key);
    if (!cJSON_IsString(name) || !a) return 0;
    sd_buf b = {0};
    sd_tools_pydump(&b, a);
    char *nm = strdup(name->valuestring);
    if (b.oom || !nm) {
        sd_buf_free(&b);
        free(nm);
        return 0;
    }
    sd_tools_new_id(c->id, sizeof c->id, mistral);
    c->name = nm;
    c->args = b.p ? b.p : strdup("");
    return c->args != NULL;
}

/* Calls from v (taken and freed), a JSON list of call objects (sd_call_from with args_key):
 * appended to calls[*nc..]; 0 when v is not such a list or holds more than SD_TOOLS_MAX_CALLS. */
static int sd_calls_from_list(cJSON *v, const char *args_key, int mistral, sd_tool_call *calls, int *nc) {
    int ok = cJSON_IsArray(v);
    for (const cJSON *x = ok ? v->child : NULL; x && ok; x = x->next) {
        ok = *nc < SD_TOOLS_MAX_CALLS && sd_call_from(x, args_key, NULL, mistral, &calls[*nc]);
        if (ok) (*nc)++;
    }
    cJSON_Delete(v);
    return ok;
}

/* hermes: every <tool_call>...</tool_call> block (the last may be unterminated) holds
 * {"name", "arguments"}; all or nothing (vLLM: one that fails makes the whole output content). */
static int sd_hermes_all(const char *t, size_t n, sd_tool_call *calls, int *nc) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    const char *p = t, *end = t + n;
    *nc = 0;
    for (const char *s; (s = sd_tools_find(p, (size_t)(end - p), open));) {
        s += sizeof open - 1;
        const char *c = sd_tools_find(s, (size_t)(end - s), close);
        const char *stop = c ? c : end;
        cJSON *v = sd_parse_n(s, (size_t)(stop - s));
        int ok = v && *nc < SD_TOOLS_MAX_CALLS && sd_call_from(v, "arguments", NULL, 0, &calls[*nc]);
        cJSON_Delete(v);
        if (!ok) return 0;
        (*nc)++;
        p = c ? c + sizeof close - 1 : end;
    }
    return 1;
}

/* llama3_json: the output starts with <|python_tag|> or "{"; objects separated by "; ". */
static int sd_llama3_all(const char *t, size_t n, sd_tool_call *calls, int *nc) {
    static const char tag[] = "<|python_tag|>";
    size_t i = n >= sizeof tag - 1 && !memcmp(t, tag, sizeof tag - 1) ? sizeof tag - 1 : 0;
    *nc = 0;
    if (!i && (n == 0 || t[0] != '{')) return 0;
    char *c = malloc(n + 1);
    if (!c) return 0;
    memcpy(c, t, n);
    c[n] = '\0';
    int ok = !memchr(t, '\0', n);
    while (ok && i < n) {
        const char *e = NULL;
        /* raw_decode: a value must start right here (no leading whitespace) */
        cJSON *v = strchr(" \t\r\n", c[i]) ? NULL : cJSON_ParseWithOpts(c + i, &e, 0);
        ok = v && *nc < SD_TOOLS_MAX_CALLS && sd_call_from(v, "arguments", "parameters", 0, &calls[*nc]);
        cJSON_Delete(v);
        if (!ok) break;
        (*nc)++;
        i = (size_t)(e - c) + 2; /* vLLM skips len("; ") after each object */
    }
    free(c);
    return ok;
}

static int sd_is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }

/* mistral: the text without every [TOOL_CALLS], stripped, is a JSON list of {"name",
 * "arguments"} (else its first "[{" ... last "}]"). The tool text is returned in *tc. */
static int sd_mistral_all(const char *t, size_t n, sd_tool_call *calls, int *nc, char **tc, size_t *tc_len) {
    static const char bot[] = "[TOOL_CALLS]";
    *nc = 0;
    char *c = malloc(n + 1);
    if (!c) return 0;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        if (i + sizeof bot - 1 <= n && !memcmp(t + i, bot, sizeof bot - 1)) i += sizeof bot - 1;
        else c[m++] = t[i++];
    }
    size_t a = 0;
    while (a < m && sd_is_space(c[a])) a++;
    while (m > a && sd_is_space(c[m - 1])) m--;
    memmove(c, c + a, m - a);
    m -= a;
    c[m] = '\0';
    *tc = c;
    *tc_len = m;
    cJSON *v = memchr(c, '\0', m) ? NULL : cJSON_ParseWithOpts(c, NULL, 1);
    if (!v) { /* the regex \[{.*}\] (greedy, across lines) */
        const char *s = sd_tools_find(c, m, "[{");
        const char *e = NULL;
        for (const char *q = s; q && (q = sd_tools_find(q, m - (size_t)(q - c), "}]")); q++) e = q;
        if (s && e && e >= s) v = sd_parse_n(s, (size_t)(e + 2 - s));
    }
    return sd_calls_from_list(v, "arguments", 1, calls, nc);
}

/* "required": the output is a JSON list of {"name", "parameters"}. */
static int sd_required_all(const char *t, size_t n, sd_tool_call *calls, int *nc) {
    *nc = 0;
    return sd_calls_from_list(sd_parse_n(t, n), "parameters", 0, calls, nc);
}

void sd_tools_result_free(sd_tool_result *r) {
    sd_tools_calls_free(r->calls, r->n_calls);
    free(r->own);
    memset(r, 0, sizeof *r);
}

void sd_tools_final(const sd_tool_out *o, const char *text, size_t n, sd_tool_result *r) {
    memset(r, 0, sizeof *r);
    r->content = text;
    r->content_len = n;
    int ok = 0;
    if (o->choice == SD_TC_NAMED) {
        char *nm = strdup(o->named), *a = malloc(n + 1);
        if (nm && a) {
            memcpy(a, text, n);
            a[n] = '\0';
            memcpy(r->calls[0].id, o->named_id, sizeof r->calls[0].id);
            r->calls[0].name = nm;
            r->calls[0].args = a;
            r->n_calls = 1;
            r->content_len = 0; /* vLLM: content "" beside a named call; finish_reason stays */
            return;
        }
        free(nm);
        free(a);
        return;
    }
    if (o->choice == SD_TC_REQUIRED) {
        ok = sd_required_all(text, n, r->calls, &r->n_calls);
        if (ok) r->content_len = 0;
    } else if (o->choice == SD_TC_AUTO && o->parser == SD_TP_HERMES) {
        const char *s = sd_tools_find(text, n, "<tool_call>");
        if (!s) return;
        if ((ok = sd_hermes_all(text, n, r->calls, &r->n_calls))) {
            r->content_len = (size_t)(s - text);
            if (!r->content_len) r->content = NULL;
        }
    } else if (o->choice == SD_TC_AUTO && o->parser == SD_TP_LLAMA3_JSON) {
        if ((ok = sd_llama3_all(text, n, r->calls, &r->n_calls))) r->content = NULL, r->content_len = 0;
    } else if (o->choice == SD_TC_AUTO && o->parser == SD_TP_GLM45) {
        ok = sd_tools_glm45_final(o, text, n, r);
    } else if (o->choice == SD_TC_AUTO && o->parser == SD_TP_QWEN3_CODER) {
        ok = sd_tools_qwen3_coder_final(o, text, n, r);
    } else if (o->choice == SD_TC_AUTO && o->parser == SD_TP_DEEPSEEK_V3) {
        ok = sd_tools_deepseek_v3_final(o, text, n, r);
    } else if (o->choice == SD_TC_AUTO && o->parser == SD_TP_MISTRAL) {
        const char *s = sd_tools_find(text, n, "[TOOL_CALLS]");
        if (!s) return;
        size_t tl = 0;
        if ((ok = sd_mistral_all(text, n, r->calls, &r->n_calls, &r->own, &tl))) {
            r->content_len = (size_t)(s - text);
            if (!r->content_len) r->content = NULL;
        } else if (r->own) { /* vLLM: the tool text (markers removed, stripped) as content */
            r->content = r->own;
            r->content_len = tl;
        }
    }
    if (ok) r->called = 1;
    else {
        sd_tools_calls_free(r->calls, r->n_calls);
        r->n_calls = 0;
    }
}

/* ------------------------------------------------------------------------- */
/* streaming                                                                  */
/* ------------------------------------------------------------------------- */
void sd_tools_delta_content(sd_buf *out, const char *s, size_t n) {
    if (!n) return;
    sd_buf_puts(out, "{\"content\":");
    sd_buf_json_str(out, s, n);
    sd_buf_puts(out, "}\n");
}

/* A call's first delta (index, id, type, name, the arguments so far). */
static void sd_delta_call(sd_buf *out, int index, const char *id, const char *name, const char *args, size_t n) {
    sd_buf_printf(out, "{\"tool_calls\":[{\"index\":%d,\"id\":", index);
    sd_buf_json_str(out, id, strlen(id));
    sd_buf_puts(out, ",\"type\":\"function\",\"function\":{\"name\":");
    sd_buf_json_str(out, name, strlen(name));
    sd_buf_puts(out, ",\"arguments\":");
    sd_buf_json_str(out, args, n);
    sd_buf_puts(out, "}}]}\n");
}

static void sd_delta_args(sd_buf *out, int index, const char *args, size_t n) {
    sd_buf_printf(out, "{\"tool_calls\":[{\"index\":%d,\"function\":{\"arguments\":", index);
    sd_buf_json_str(out, args, n);
    sd_buf_puts(out, "}}]}\n");
}

void sd_tools_delta_calls(sd_tool_out *o, sd_tool_call *c, int nc, sd_buf *out) {
    for (int i = 0; i < nc; i++, o->n_calls++)
        sd_delta_call(out, o->n_calls, c[i].id, c[i].name, c[i].args, strlen(c[i].args));
    sd_tools_calls_free(c, nc);
}

/* The bytes at the end of t[from..n) that could begin marker (held back until the next text). */
size_t sd_tools_partial(const char *t, size_t from, size_t n, const char *marker) {
    size_t m = strlen(marker);
    for (size_t k = m - 1 < n - from ? m - 1 : n - from; k > 0; k--)
        if (!memcmp(t + n - k, marker, k)) return k;
    return 0;
}

/* Content up to a marker (sent while no call started; dropped after, as vLLM keeps only the text
 * before the first call), holding back what could begin it. 1 when the marker was found (o->pos
 * is then at it). */
static int sd_feed_until(sd_tool_out *o, const char *t, size_t n, int final, const char *marker, sd_buf *out) {
    const char *s = sd_tools_find(t + o->pos, n - o->pos, marker);
    size_t end = s ? (size_t)(s - t) : final ? n : n - sd_tools_partial(t, o->pos, n, marker);
    if (!o->n_calls) sd_tools_delta_content(out, t + o->pos, end - o->pos);
    o->pos = end;
    return s != NULL;
}

static void sd_feed_hermes(sd_tool_out *o, const char *t, size_t n, int final, sd_buf *out) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    for (;;) {
        if (!o->in_block) {
            if (!sd_feed_until(o, t, n, final, open, out)) return;
            o->pos += sizeof open - 1;
            o->in_block = 1;
        }
        const char *c = sd_tools_find(t + o->pos, n - o->pos, close);
        if (!c && !final) return; /* the block is read whole */
        size_t end = c ? (size_t)(c - t) : n;
        sd_tool_call call;
        memset(&call, 0, sizeof call);
        cJSON *v = sd_parse_n(t + o->pos, end - o->pos);
        if (v && o->n_calls < SD_TOOLS_MAX_CALLS && sd_call_from(v, "arguments", NULL, 0, &call)) sd_tools_delta_calls(o, &call, 1, out);
        else { /* not a call: the block stays text */
            sd_buf_puts(out, "{\"content\":\"");
            sd_buf_json_chars(out, open, sizeof open - 1);
            sd_buf_json_chars(out, t + o->pos, end - o->pos);
            if (c) sd_buf_json_chars(out, close, sizeof close - 1);
            sd_buf_puts(out, "\"}\n");
        }
        cJSON_Delete(v);
        o->pos = c ? end + sizeof close - 1 : n;
        o->in_block = 0;
        if (!c) return;
    }
}

/* llama3_json and mistral: once a call may have started, the rest is held and parsed at the end. */
static void sd_feed_held(sd_tool_out *o, const char *t, size_t n, int final, sd_buf *out) {
    if (o->parser == SD_TP_LLAMA3_JSON && !o->plain && !o->in_block) {
        static const char tag[] = "<|python_tag|>";
        if (n == 0 && !final) return;
        if (n && (t[0] == '{' || (n >= sizeof tag - 1 && !memcmp(t, tag, sizeof tag - 1)))) o->in_block = 1;
        else if (!final && n < sizeof tag - 1 && !memcmp(t, tag, n)) return;
        else o->plain = 1;
    }
    if (o->parser == SD_TP_LLAMA3_JSON && o->plain) {
        sd_tools_delta_content(out, t + o->pos, n - o->pos);
        o->pos = n;
        return;
    }
    if (o->parser == SD_TP_MISTRAL && !o->in_block) {
        if (!sd_feed_until(o, t, n, final, "[TOOL_CALLS]", out)) return;
        o->in_block = 1;
    }
    if (!final) return;
    sd_tool_result r;
    sd_tool_out whole = *o;
    whole.choice = SD_TC_AUTO;
    sd_tools_final(&whole, t + o->pos, n - o->pos, &r);
    if (r.called) {
        sd_tools_delta_calls(o, r.calls, r.n_calls, out);
        r.n_calls = 0;
    } else if (r.content) {
        sd_tools_delta_content(out, r.content, r.content_len);
    }
    sd_tools_result_free(&r);
    o->pos = n;
}

/* "required": the JSON list scanned as it comes; each element, once closed, is a call. */
static void sd_feed_required(sd_tool_out *o, const char *t, size_t n, sd_buf *out) {
    for (size_t i = o->pos; i < n; i++) {
        char ch = t[i];
        if (o->in_str) {
            if (o->esc) o->esc = 0;
            else if (ch == '\\') o->esc = 1;
            else if (ch == '"') o->in_str = 0;
            continue;
        }
        if (ch == '"') o->in_str = 1;
        else if (ch == '{' || ch == '[') {
            if (o->depth == 1) o->elem = i;
            o->depth++;
        } else if (ch == '}' || ch == ']') {
            o->depth--;
            if (o->depth == 1 && ch == '}') {
                sd_tool_call call;
                memset(&call, 0, sizeof call);
                cJSON *v = sd_parse_n(t + o->elem, i + 1 - o->elem);
                if (v && o->n_calls < SD_TOOLS_MAX_CALLS && sd_call_from(v, "parameters", NULL, 0, &call))
                    sd_tools_delta_calls(o, &call, 1, out);
                cJSON_Delete(v);
            }
        }
    }
    o->pos = n;
}

void sd_tools_feed(sd_tool_out *o, const char *t, size_t n, int final, sd_buf *out) {
    if (n < o->pos) return;
    switch (o->choice) {
    case SD_TC_NAMED:
        if (o->n_calls == 0 && (n > o->pos || final)) {
            sd_delta_call(out, 0, o->named_id, o->named, t + o->pos, n - o->pos);
            o->n_calls = 1;
        } else if (n > o->pos) {
            sd_delta_args(out, 0, t + o->pos, n - o->pos);
        }
        o->pos = n;
        return;
    case SD_TC_REQUIRED: sd_feed_required(o, t, n, out); return;
    case SD_TC_AUTO:
        if (o->parser == SD_TP_HERMES) sd_feed_hermes(o, t, n, final, out);
        else if (o->parser == SD_TP_LLAMA3_JSON || o->parser == SD_TP_MISTRAL) sd_feed_held(o, t, n, final, out);
        else if (o->parser == SD_TP_GLM45) sd_tools_glm45_feed(o, t, n, final, out);
        else if (o->parser == SD_TP_QWEN3_CODER) sd_tools_qwen3_coder_feed(o, t, n, final, out);
        else if (o->parser == SD_TP_DEEPSEEK_V3) sd_tools_deepseek_v3_feed(o, t, n, final, out);
        else sd_tools_delta_content(out, t + o->pos, n - o->pos), o->pos = n;
        return;
    default: sd_tools_delta_content(out, t + o->pos, n - o->pos); o->pos = n; return;
    }
}

/* sd_chat_template.c — loading a tokenizer's chat template and the public chat API (specdec.h,
 * "Chat templates"). The template is parsed once at load (sd_jinja_parse) and kept with the
 * tokenizer; a template outside the interpreter's subset is not an error at load, it makes
 * specdec_chat_template_detect and rendering answer UNSUPPORTED with the construct named. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sd_alloc.h"
#include "sd_chat_template.h"
#include "sd_utf8.h"

/* Index 7 ("jinja") is the tokenizer's own template; 6 is specdec's plain format. */
static const char *const sd_chat_names[] = {"llama3", "chatml", "llama2", "mistral", "zephyr", "phi3", "plain", "jinja"};
#define SD_CHAT_N_NAMES ((int32_t)(sizeof sd_chat_names / sizeof sd_chat_names[0]))
enum { SD_CHAT_PLAIN = SD_CHAT_FORMAT_PLAIN, SD_CHAT_JINJA = SD_CHAT_FORMAT_JINJA };

const char *const sd_chat_special_names[SD_CHAT_N_SPECIAL] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                              "pad_token", "cls_token", "mask_token"};

/* ---- loading --------------------------------------------------------------------------------------- */
static const char *sd_chat_cfg_text(const cJSON *cfg, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(j)) j = cJSON_GetObjectItemCaseSensitive(j, "content");
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

/* dir/chat_template.jinja: OK with *text NULL when absent; the file's bytes otherwise. */
static specdec_status sd_chat_read_jinja(const char *dir, char **text, size_t *len) {
    char path[4200];
    *text = NULL;
    *len = 0;
    if (snprintf(path, sizeof path, "%s/chat_template.jinja", dir) >= (int)sizeof path) return SPECDEC_OK;
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? SPECDEC_OK : sd_fail(NULL, SPECDEC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = sd_malloc(SD_CHAT_MAX_TEMPLATE + 2);
    if (!buf) { fclose(f); return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", path); }
    size_t n = fread(buf, 1, SD_CHAT_MAX_TEMPLATE + 1, f);
    int err = ferror(f);
    fclose(f);
    if (err) { sd_free(buf); return sd_fail(NULL, SPECDEC_ERR_IO, "%s: read error", path); }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return SPECDEC_OK;
}

static specdec_status sd_chat_problem(specdec_tokenizer *t, const char *why) {
    sd_free(t->chat_problem);
    t->chat_problem = sd_strdup(why);
    return t->chat_problem ? SPECDEC_OK : sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory");
}

/* Keep text[0..n) as the template and parse it; a template that cannot be used becomes the
 * chat problem. */
static specdec_status sd_chat_keep(specdec_tokenizer *t, const char *text, size_t n, const char *where) {
    char why[SD_ERRBUF_SIZE + 64];
    if (n > SD_CHAT_MAX_TEMPLATE || memchr(text, '\0', n)) {
        snprintf(why, sizeof why, "%s: chat template longer than %zu bytes or holding a NUL byte", where,
                 SD_CHAT_MAX_TEMPLATE);
        return sd_chat_problem(t, why);
    }
    if (!(t->chat_template = sd_malloc(n + 1))) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    memcpy(t->chat_template, text, n);
    t->chat_template[n] = '\0';
    specdec_status st = sd_jinja_parse(text, n, &t->chat_tmpl);
    if (st == SPECDEC_ERR_OUT_OF_MEMORY) return st;
    if (st) {
        snprintf(why, sizeof why, "%s: %s", where, specdec_last_error());
        return sd_chat_problem(t, why);
    }
    return SPECDEC_OK;
}

/* tokenizer_config.json "chat_template": a string, or [{"name","template"}...] of which
 * "default" is the one transformers uses without tools. */
static specdec_status sd_chat_from_config(specdec_tokenizer *t, const cJSON *cfg) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (!j || cJSON_IsNull(j)) return SPECDEC_OK;
    if (cJSON_IsString(j)) return sd_chat_keep(t, j->valuestring, strlen(j->valuestring), "tokenizer_config.json");
    if (!cJSON_IsArray(j))
        return sd_chat_problem(t, "tokenizer_config.json: chat_template is neither a string nor a list of named templates");
    const cJSON *e;
    cJSON_ArrayForEach(e, j) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name"), *tp = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (cJSON_IsString(nm) && cJSON_IsString(tp) && !strcmp(nm->valuestring, "default"))
            return sd_chat_keep(t, tp->valuestring, strlen(tp->valuestring), "tokenizer_config.json");
    }
    return sd_chat_problem(t, "tokenizer_config.json: chat_template is a list of named templates without one named "
                              "\"default\" (transformers needs a name too)");
}

specdec_status sd_chat_load(specdec_tokenizer *t, const cJSON *cfg, const char *dir) {
    for (int i = 0; cfg && i < SD_CHAT_N_SPECIAL; i++) {
        const char *s = sd_chat_cfg_text(cfg, sd_chat_special_names[i]);
        if (s && !(t->chat_special[i] = sd_strdup(s)))
            return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer_config.json: out of memory");
    }
    if (dir) { /* chat_template.jinja takes priority over the config, as in transformers */
        char *text;
        size_t n;
        specdec_status st = sd_chat_read_jinja(dir, &text, &n);
        if (st) return st;
        if (text) {
            st = sd_chat_keep(t, text, n, "chat_template.jinja");
            sd_free(text);
            return st;
        }
    }
    return cfg ? sd_chat_from_config(t, cfg) : SPECDEC_OK;
}

void sd_chat_free(specdec_tokenizer *t) {
    sd_free(t->chat_template);
    sd_free(t->chat_problem);
    for (int i = 0; i < SD_CHAT_N_SPECIAL; i++) sd_free(t->chat_special[i]);
    sd_jinja_free(t->chat_tmpl);
}

/* ---- rendering ------------------------------------------------------------------------------------------ */
size_t sd_chat_context_vars(const specdec_tokenizer *tok, int agp, const cJSON *tools, sd_jinja_var *v) {
    size_t nv = 0;
    memset(v, 0, SD_CHAT_CONTEXT_VARS * sizeof *v);
    v[nv].name = "add_generation_prompt";
    v[nv].kind = SD_JINJA_BOOL;
    v[nv++].b = agp != 0;
    v[nv].name = "tools";
    v[nv].kind = tools ? SD_JINJA_JSON : SD_JINJA_NONE;
    v[nv++].json = tools;
    v[nv].name = "documents";
    v[nv++].kind = SD_JINJA_NONE;
    for (int i = 0; i < SD_CHAT_N_SPECIAL; i++) {
        if (!tok->chat_special[i]) continue;
        v[nv].name = sd_chat_special_names[i];
        v[nv].kind = SD_JINJA_STR;
        v[nv++].s = tok->chat_special[i];
    }
    return nv;
}

specdec_status sd_chat_render_with(const specdec_tokenizer *tok, const sd_jinja_tmpl *tmpl, const specdec_chat_message *msgs,
                                   int32_t n, int agp, int64_t now, sd_tok_buf *out) {
    sd_jinja_var v[1 + SD_CHAT_CONTEXT_VARS];
    memset(v, 0, sizeof v[0]);
    v[0].name = "messages";
    v[0].kind = SD_JINJA_MESSAGES;
    v[0].msgs = msgs;
    v[0].n_msgs = n;
    const size_t nv = 1 + sd_chat_context_vars(tok, agp, NULL, v + 1);
    return sd_jinja_render(tmpl, v, nv, now, NULL, out);
}

specdec_status sd_chat_template_of(const specdec_tokenizer *tok, int which, const sd_jinja_tmpl **t, sd_jinja_tmpl **own) {
    *own = NULL;
    *t = tok->chat_tmpl;
    if (which == SD_CHAT_JINJA) return SPECDEC_OK;
    const char *text = which >= 0 && which < SD_CHAT_PLAIN ? sd_chat_builtin(sd_chat_names[which]) : NULL;
    if (!text) return sd_fail(NULL, SPECDEC_ERR_INTERNAL, "chat template: no built-in text for format %d", which);
    const specdec_status st = sd_jinja_parse(text, strlen(text), own); /* microseconds */
    *t = *own;
    return st;
}

specdec_status sd_chat_copy_out(const sd_tok_buf *out, char *text, size_t capacity, size_t *len, const char *fn) {
    *len = out->len;
    if (out->len + 1 > capacity)
        return sd_fail(NULL, SPECDEC_ERR_BUFFER_TOO_SMALL, "%s: %zu bytes + NUL do not fit in %zu", fn, out->len, capacity);
    if (out->len) memcpy(text, out->p, out->len);
    text[out->len] = '\0';
    return SPECDEC_OK;
}

/* specdec's plain format (documented in specdec.h). */
specdec_status sd_chat_render_plain(const specdec_chat_message *m, int32_t n, int agp, sd_tok_buf *o) {
    for (int32_t i = 0; i < n; i++) {
        if (strpbrk(m[i].role, "\r\n"))
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "chat template (plain): message %d: role contains a line break", i);
        char first = m[i].role[0];
        if (first >= 'a' && first <= 'z') first = (char)(first - 'a' + 'A');
        if (sd_tok_buf_put(o, &first, 1) || sd_tok_buf_put(o, m[i].role + 1, strlen(m[i].role + 1)) ||
            sd_tok_buf_put(o, ": ", 2) || sd_tok_buf_put(o, m[i].content, strlen(m[i].content)) || sd_tok_buf_put(o, "\n", 1))
            return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory rendering the conversation");
    }
    if (agp && sd_tok_buf_put(o, "Assistant:", 10))
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory rendering the conversation");
    return SPECDEC_OK;
}

/* ---- public API -------------------------------------------------------------------------------------------- */
const char *specdec_chat_template_name(int32_t i) { return i >= 0 && i < SD_CHAT_N_NAMES ? sd_chat_names[i] : NULL; }

const char *specdec_tokenizer_chat_template(const specdec_tokenizer *tok) { return tok ? tok->chat_template : NULL; }

/* Which template name resolves to: SD_CHAT_PLAIN, SD_CHAT_JINJA (the tokenizer's own), or a
 * family index (its built-in template). */
specdec_status sd_chat_resolve_name(const specdec_tokenizer *tok, const char *name, int *which) {
    int f = -1;
    if (name) {
        for (int i = 0; i < SD_CHAT_N_NAMES && f < 0; i++)
            if (!strcmp(name, sd_chat_names[i])) f = i;
        if (f < 0)
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                           "chat template: unknown name \"%.64s\" (known: llama3, chatml, llama2, mistral, zephyr, phi3, plain, "
                           "jinja)", name);
    }
    if (f < 0 || f == SD_CHAT_JINJA) { /* the tokenizer's own: its template, or plain without one */
        if (tok->chat_problem) return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s", tok->chat_problem);
        f = tok->chat_tmpl ? SD_CHAT_JINJA : SD_CHAT_PLAIN;
    }
    *which = f;
    return SPECDEC_OK;
}

specdec_status specdec_chat_template_detect(const specdec_tokenizer *tok, const char **name) {
    if (name) *name = NULL;
    if (!tok || !name) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_chat_template_detect: NULL argument");
    int f = SD_CHAT_PLAIN;
    specdec_status st = sd_chat_resolve_name(tok, NULL, &f);
    if (!st) *name = sd_chat_names[f];
    return st;
}

specdec_status specdec_chat_add_special(const specdec_tokenizer *tok, const char *template_name, int *add_special) {
    if (add_special) *add_special = 0;
    if (!tok || !add_special) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_chat_add_special: NULL argument");
    int f = SD_CHAT_PLAIN;
    specdec_status st = sd_chat_resolve_name(tok, template_name, &f);
    if (!st) *add_special = f == SD_CHAT_PLAIN;
    return st;
}

static specdec_status sd_chat_check(const specdec_chat_message *m, int32_t n, const char *fn) {
    if (n <= 0) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: empty conversation (n_msgs = %d)", fn, n);
    if (!m) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: msgs is NULL", fn);
    for (int32_t i = 0; i < n; i++) {
        if (!m[i].role || !m[i].content)
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: message %d: %s is NULL", fn, i, m[i].role ? "content" : "role");
        if (!m[i].role[0]) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: message %d: empty role", fn, i);
        const int role_ok = sd_utf8_valid((const unsigned char *)m[i].role, strlen(m[i].role));
        if (!role_ok || !sd_utf8_valid((const unsigned char *)m[i].content, strlen(m[i].content)))
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: message %d: %s is not valid UTF-8", fn, i,
                           role_ok ? "content" : "role");
    }
    return SPECDEC_OK;
}

/* Render into out; *plain says whether the format was "plain". */
static specdec_status sd_chat_render_tok(const specdec_tokenizer *tok, const char *name, const specdec_chat_message *m,
                                         int32_t n, int agp, sd_tok_buf *out, int *plain, const char *fn) {
    specdec_status st = sd_chat_check(m, n, fn);
    int f = SD_CHAT_PLAIN;
    if (st || (st = sd_chat_resolve_name(tok, name, &f))) return st;
    *plain = f == SD_CHAT_PLAIN;
    if (f == SD_CHAT_PLAIN) return sd_chat_render_plain(m, n, agp, out);
    const sd_jinja_tmpl *t = NULL;
    sd_jinja_tmpl *own = NULL;
    if (!(st = sd_chat_template_of(tok, f, &t, &own))) st = sd_chat_render_with(tok, t, m, n, agp, SD_JINJA_NOW_SYSTEM, out);
    sd_jinja_free(own);
    return st;
}

specdec_status specdec_chat_apply(const specdec_tokenizer *tok, const char *template_name, const specdec_chat_message *msgs,
                                  int32_t n_msgs, int add_generation_prompt, char *text, size_t capacity, size_t *len) {
    if (len) *len = 0;
    if (text && capacity) text[0] = '\0';
    if (!tok || !len || (!text && capacity))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_chat_apply: NULL argument");
    sd_tok_buf out = {0};
    int plain = 0;
    specdec_status st = sd_chat_render_tok(tok, template_name, msgs, n_msgs, add_generation_prompt, &out, &plain,
                                           "specdec_chat_apply");
    if (!st) st = sd_chat_copy_out(&out, text, capacity, len, "specdec_chat_apply");
    sd_tok_buf_free(&out);
    return st;
}

specdec_status specdec_chat_tokenize(const specdec_tokenizer *tok, const char *template_name, const specdec_chat_message *msgs,
                                     int32_t n_msgs, int add_generation_prompt, int32_t *ids, int32_t capacity,
                                     int32_t *n_ids) {
    if (n_ids) *n_ids = 0;
    if (!tok || !n_ids || capacity < 0 || (!ids && capacity))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_chat_tokenize: NULL argument or capacity < 0");
    sd_tok_buf out = {0};
    int plain = 0;
    specdec_status st = sd_chat_render_tok(tok, template_name, msgs, n_msgs, add_generation_prompt, &out, &plain,
                                           "specdec_chat_tokenize");
    if (!st) st = specdec_tokenize(tok, out.p ? out.p : "", out.len, plain, ids, capacity, n_ids);
    sd_tok_buf_free(&out);
    return st;
}

/* sd_chat_template.c — loading a tokenizer's chat template, recognising its family, and the
 * public chat API (specdec.h, "Chat templates").
 *
 * Recognition works on two views of the template text: a "compact" copy without whitespace
 * and with '"' turned into '\'' (so markers match however the template is laid out or quoted),
 * and the Jinja tags themselves, split by a small lexer that knows string literals. Mistral
 * templates differ in spacing and system handling from release to release, so their output
 * expressions ('[INST] ' + message['content'] + ' [/INST]', ...) are parsed into terms and the
 * literals taken from them; the other families differ only in a few switches read from the
 * compact text. A template that shows markers of no family, of several, or features whose
 * output is not reproduced (Llama 3.1's date header, Qwen3's <think>, unknown raise_exception
 * checks) is refused with UNSUPPORTED rather than rendered approximately. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sd_alloc.h"
#include "sd_chat_template.h"
#include "sd_utf8.h"

static const char *const sd_chat_names[SD_CHAT_N_FAMILIES] = {"llama3", "chatml", "llama2", "mistral",
                                                              "zephyr", "phi3",   "plain"};

/* ---- spec strings ----------------------------------------------------------------------- */
int sd_chat_spec_set(sd_chat_spec *sp, sd_chat_str *dst, const char *s, size_t n) {
    dst->off = sp->arena.len;
    dst->len = n;
    dst->set = 1;
    return n ? sd_tok_buf_put(&sp->arena, s, n) : 0;
}

static int sd_chat_spec_setz(sd_chat_spec *sp, sd_chat_str *dst, const char *s) {
    return sd_chat_spec_set(sp, dst, s, strlen(s));
}

void sd_chat_spec_free(sd_chat_spec *sp) {
    if (sp) sd_tok_buf_free(&sp->arena);
}

static const char sd_chat_alt_msg[] = "Conversation roles must alternate user/assistant/user/assistant/...";

int sd_chat_spec_reference(sd_chat_family f, sd_chat_spec *sp) {
    sd_tok_buf_free(&sp->arena);
    memset(sp, 0, sizeof *sp);
    sp->family = f;
    switch (f) {
    case SD_CHAT_LLAMA3: sp->bos = sp->trim = 1; return 0;
    case SD_CHAT_LLAMA2: return sd_chat_spec_setz(sp, &sp->err_alt, sd_chat_alt_msg);
    case SD_CHAT_MISTRAL: /* Mixtral-8x22B-Instruct-v0.1 "default" */
        sp->bos = 1;
        return sd_chat_spec_setz(sp, &sp->user_pre, " [INST] ") || sd_chat_spec_setz(sp, &sp->user_post, " [/INST]") ||
               sd_chat_spec_setz(sp, &sp->asst_pre, " ") || sd_chat_spec_setz(sp, &sp->asst_post, " ") ||
               sd_chat_spec_setz(sp, &sp->err_alt, sd_chat_alt_msg) ||
               sd_chat_spec_setz(sp, &sp->err_role, "Only user and assistant roles are supported!");
    case SD_CHAT_ZEPHYR: sp->nl = 1; return 0;
    case SD_CHAT_PHI3: sp->eos_end = 1; return 0;
    default: return 0;
    }
}

/* ---- template text scanning -------------------------------------------------------------- */
/* Whitespace removed, '"' -> '\''. NULL when out of memory. */
static char *sd_chat_compact(const char *s) {
    char *c = sd_malloc(strlen(s) + 1), *o = c;
    if (!c) return NULL;
    for (; *s; s++) {
        if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') continue;
        *o++ = *s == '"' ? '\'' : *s;
    }
    *o = '\0';
    return c;
}

/* End of the string literal opening at s[i] (index of its closing quote), or n. */
static size_t sd_chat_lit_end(const char *s, size_t n, size_t i) {
    char q = s[i];
    for (i++; i < n && s[i] != q; i += (s[i] == '\\' && i + 1 < n) ? 2 : 1) {
    }
    return i;
}

typedef struct sd_chat_tag {
    char kind;       /* 'E' {{ }}, 'S' {% %}, 'C' {# #} */
    size_t off, len; /* inner text, without the whitespace-control marks */
} sd_chat_tag;

/* Next tag at or after *pos: 1 found, 0 none left, -1 unterminated. */
static int sd_chat_next_tag(const char *s, size_t n, size_t *pos, sd_chat_tag *t) {
    for (size_t i = *pos; i + 1 < n; i++) {
        if (s[i] != '{' || (s[i + 1] != '{' && s[i + 1] != '%' && s[i + 1] != '#')) continue;
        char k = s[i + 1], close = k == '{' ? '}' : k;
        size_t j = i + 2;
        while (j + 1 < n && !(s[j] == close && s[j + 1] == '}')) {
            if (k != '#' && (s[j] == '\'' || s[j] == '"')) j = sd_chat_lit_end(s, n, j);
            j++;
        }
        if (j + 1 >= n) return -1;
        size_t a = i + 2, e = j;
        if (a < e && (s[a] == '-' || s[a] == '+')) a++;
        if (e > a && (s[e - 1] == '-' || s[e - 1] == '+')) e--;
        t->kind = k == '{' ? 'E' : k == '%' ? 'S' : 'C';
        t->off = a;
        t->len = e - a;
        *pos = j + 2;
        return 1;
    }
    return 0;
}

static int sd_chat_hex(const char *s, int nd, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < nd; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}

/* One backslash escape of a Jinja (Python) string literal at s[0..n) (s[0] is after the
 * backslash). Appends its value; returns the bytes consumed, 0 if not understood, -1 OOM. */
static int sd_chat_escape(const char *s, size_t n, sd_tok_buf *out) {
    static const char from[] = "ntr\\'\"abfv", to[] = "\n\t\r\\'\"\a\b\f\v"; /* no \0: a NUL would end the text */
    if (!n) return 0;
    if (s[0] == '\n') return 1; /* line continuation */
    const char *f = memchr(from, s[0], sizeof from - 1);
    if (f) return sd_tok_buf_put(out, &to[f - from], 1) ? -1 : 1;
    int nd = s[0] == 'x' ? 2 : s[0] == 'u' ? 4 : s[0] == 'U' ? 8 : 0;
    uint32_t cp;
    if (!nd || (size_t)nd + 1 > n || sd_chat_hex(s + 1, nd, &cp) || cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    char u[4];
    return sd_tok_buf_put(out, u, sd_utf8_put(u, (int32_t)cp)) ? -1 : nd + 1;
}

/* Value of the literal s[0..n) (quotes included) appended to out: 0 ok, 1 not understood, -1 OOM. */
static int sd_chat_unescape(const char *s, size_t n, sd_tok_buf *out) {
    for (size_t i = 1; i + 1 < n;) {
        if (s[i] != '\\') {
            if (sd_tok_buf_put(out, &s[i], 1)) return -1;
            i++;
            continue;
        }
        int k = sd_chat_escape(s + i + 1, n - 2 - i, out);
        if (k < 0) return -1;
        if (!k) return 1;
        i += 1 + (size_t)k;
    }
    return 0;
}

/* ---- expressions: '+'-separated terms ------------------------------------------------------- */
enum { SD_T_LIT, SD_T_CONTENT, SD_T_SYS, SD_T_EOS, SD_T_BOS, SD_T_OTHER };
#define SD_CHAT_MAX_TERMS 8

typedef struct sd_chat_term {
    int kind, trim;
    size_t off, len; /* literal value in the terms' buffer */
} sd_chat_term;

static int sd_chat_name_is(const char *c, size_t n, const char *name) { return strlen(name) == n && !memcmp(c, name, n); }

/* Classify the term s[0..n) (not a literal). */
static void sd_chat_classify(const char *s, size_t n, sd_chat_term *t) {
    char c[64];
    size_t m = 0;
    for (size_t i = 0; i < n && m < sizeof c; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') c[m++] = s[i] == '"' ? '\'' : s[i];
    t->kind = SD_T_OTHER;
    if (m == sizeof c) return;
    if (m > 5 && !memcmp(c + m - 5, "|trim", 5)) { t->trim = 1; m -= 5; }
    else if (m > 8 && !memcmp(c + m - 8, ".strip()", 8)) { t->trim = 1; m -= 8; }
    if (sd_chat_name_is(c, m, "message['content']") || sd_chat_name_is(c, m, "message.content")) t->kind = SD_T_CONTENT;
    else if (sd_chat_name_is(c, m, "system_message")) t->kind = SD_T_SYS;
    else if (sd_chat_name_is(c, m, "eos_token")) t->kind = SD_T_EOS;
    else if (sd_chat_name_is(c, m, "bos_token")) t->kind = SD_T_BOS;
}

static int sd_chat_parse_term(const char *s, size_t n, sd_tok_buf *lits, sd_chat_term *t) {
    while (n && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) { s++; n--; }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
    memset(t, 0, sizeof *t);
    if (n >= 2 && (s[0] == '\'' || s[0] == '"') && sd_chat_lit_end(s, n, 0) == n - 1) {
        t->kind = SD_T_LIT;
        t->off = lits->len;
        int r = sd_chat_unescape(s, n, lits);
        if (r < 0) return -1;
        if (r) t->kind = SD_T_OTHER;
        t->len = lits->len - t->off;
        return 0;
    }
    sd_chat_classify(s, n, t);
    return 0;
}

/* Split expression e[0..n) at top-level '+'. Returns the term count, 0 when there are too
 * many, -1 when out of memory. */
static int sd_chat_terms(const char *e, size_t n, sd_tok_buf *lits, sd_chat_term *t) {
    int nt = 0, depth = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && (e[i] == '\'' || e[i] == '"')) { i = sd_chat_lit_end(e, n, i); continue; }
        if (i < n && (e[i] == '(' || e[i] == '[' || e[i] == '{')) depth++;
        if (i < n && (e[i] == ')' || e[i] == ']' || e[i] == '}')) depth--;
        if (i < n && (e[i] != '+' || depth)) continue;
        if (nt == SD_CHAT_MAX_TERMS) return 0;
        if (sd_chat_parse_term(e + start, i - start, lits, &t[nt++])) return -1;
        start = i + 1;
    }
    return nt;
}

/* ---- raise_exception messages ------------------------------------------------------------ */
/* Store the template's raise_exception messages in the spec by what they are about. Returns
 * 0, 1 when a message is of an unknown kind (a check specdec does not model), -1 OOM. */
static int sd_chat_raises(const char *tmpl, sd_chat_spec *sp) {
    size_t pos = 0, n = strlen(tmpl);
    sd_chat_tag t;
    int unknown = 0;
    while (sd_chat_next_tag(tmpl, n, &pos, &t) == 1) {
        const char *s = tmpl + t.off;
        size_t len = t.len;
        while (len && (*s == ' ' || *s == '\n' || *s == '\t')) { s++; len--; }
        if (t.kind != 'E' || len < 17 || memcmp(s, "raise_exception(", 16)) continue;
        size_t q = 16;
        while (q < len && s[q] == ' ') q++;
        if (q >= len || (s[q] != '\'' && s[q] != '"')) { unknown = 1; continue; }
        size_t e = sd_chat_lit_end(s, len, q);
        sd_tok_buf msg = {0};
        int r = e < len ? sd_chat_unescape(s + q, e - q + 1, &msg) : 1;
        if (r == 0 && sd_tok_buf_put(&msg, "", 1)) r = -1; /* NUL-terminate for strstr */
        sd_chat_str *dst = NULL;
        if (r == 0) {
            dst = strstr(msg.p, "alternate") ? &sp->err_alt : strstr(msg.p, "Tool call") ? &sp->err_tool
                  : strstr(msg.p, "roles are supported") ? &sp->err_role : NULL;
            if (!dst) unknown = 1;
            else if (!dst->set && sd_chat_spec_set(sp, dst, msg.p, msg.len - 1)) r = -1;
        }
        sd_tok_buf_free(&msg);
        if (r < 0) return -1;
        if (r) unknown = 1;
    }
    return unknown;
}

/* ---- family switches ------------------------------------------------------------------------- */
static specdec_status sd_chat_unsup(const char *fmt, const char *a) {
    return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, fmt, a);
}

/* Does the template apply trim / .strip() to message['content']? */
static int sd_chat_content_trim(const char *c) {
    return strstr(c, "message['content']|trim") || strstr(c, "message.content|trim") ||
           strstr(c, "message['content'].strip()") || strstr(c, "message.content.strip()");
}

/* First occurrence of needle in h[0..n), or NULL. */
static const char *sd_chat_memstr(const char *h, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; m <= n && i <= n - m; i++)
        if (!memcmp(h + i, needle, m)) return h + i;
    return NULL;
}

/* Calls fn on every '{{ }}' expression of tmpl split into terms; stops at fn's first nonzero
 * return and returns it; -1 when out of memory. */
typedef int (*sd_chat_expr_fn)(sd_chat_spec *sp, const sd_chat_term *t, int nt, const char *lits, void *ctx);
static int sd_chat_each_expr(const char *tmpl, sd_chat_spec *sp, sd_chat_expr_fn fn, void *ctx) {
    size_t pos = 0, n = strlen(tmpl);
    sd_chat_tag t;
    sd_tok_buf lits = {0};
    int r = 0;
    while (!r && sd_chat_next_tag(tmpl, n, &pos, &t) == 1) {
        if (t.kind != 'E') continue;
        sd_chat_term tm[SD_CHAT_MAX_TERMS];
        lits.len = 0;
        int nt = sd_chat_terms(tmpl + t.off, t.len, &lits, tm);
        r = nt < 0 ? -1 : fn(sp, tm, nt, lits.p, ctx);
    }
    sd_tok_buf_free(&lits);
    return r;
}

/* chatml: a literal '<|im_start|>system\n...<|im_end|>' is the default system prompt (Qwen). */
static int sd_chat_sys_literal(sd_chat_spec *sp, const sd_chat_term *t, int nt, const char *lits, void *ctx) {
    static const char head[] = "<|im_start|>system\n";
    const size_t hl = sizeof head - 1;
    for (int i = 0; i < nt; i++) {
        const char *v = lits + t[i].off, *end;
        if (t[i].kind != SD_T_LIT || t[i].len <= hl || memcmp(v, head, hl)) continue;
        if (!(end = sd_chat_memstr(v + hl, t[i].len - hl, "<|im_end|>")) || end == v + hl) continue;
        if (sp->default_system.set) return 2; /* two different defaults: not a shape we know */
        if (sd_chat_spec_set(sp, &sp->default_system, v + hl, (size_t)(end - v - hl))) return -1;
    }
    return 0;
}

static specdec_status sd_chat_default_system(const char *tmpl, const char *compact, sd_chat_spec *sp) {
    int r = sd_chat_each_expr(tmpl, sp, sd_chat_sys_literal, NULL);
    if (r < 0) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    if (r || (sp->default_system.set && !strstr(compact, "messages[0]")))
        return sd_chat_unsup("chat template (%s): a system prompt written in a way specdec does not reproduce", "chatml");
    return SPECDEC_OK;
}

/* ---- mistral: the [INST] expressions -------------------------------------------------------- */
typedef struct sd_chat_mctx {
    int have_user, have_asst, have_sys_form;
} sd_chat_mctx;

/* Set dst to v, or check that it already holds v: 0 ok, 2 differs, -1 OOM. */
static int sd_chat_same(sd_chat_spec *sp, sd_chat_str *dst, const char *v, size_t n) {
    if (!dst->set) return sd_chat_spec_set(sp, dst, v, n) ? -1 : 0;
    return dst->len == n && (!n || !memcmp(sp->arena.p + dst->off, v, n)) ? 0 : 2;
}

static int sd_chat_has_lit(const sd_chat_term *t, int nt, const char *lits, const char *needle) {
    for (int i = 0; i < nt; i++)
        if (t[i].kind == SD_T_LIT && sd_chat_memstr(lits + t[i].off, t[i].len, needle)) return 1;
    return 0;
}

/* [LIT] CONTENT [LIT] EOS [LIT]: the assistant turn. */
static int sd_chat_mistral_asst_expr(sd_chat_spec *sp, const sd_chat_term *t, int nt, const char *lits) {
    int i = 0, r = 0;
    const char *pre = "", *post = "", *after = "";
    size_t lpre = 0, lpost = 0, lafter = 0;
    if (i < nt && t[i].kind == SD_T_LIT) { pre = lits + t[i].off; lpre = t[i].len; i++; }
    if (i >= nt || t[i].kind != SD_T_CONTENT) return 2;
    sp->asst_trim = t[i++].trim;
    if (i < nt && t[i].kind == SD_T_LIT) { post = lits + t[i].off; lpost = t[i].len; i++; }
    if (i >= nt || t[i++].kind != SD_T_EOS) return 2;
    if (i < nt && t[i].kind == SD_T_LIT) { after = lits + t[i].off; lafter = t[i].len; i++; }
    if (i != nt) return 2;
    if (!r) r = sd_chat_same(sp, &sp->asst_pre, pre, lpre);
    if (!r) r = sd_chat_same(sp, &sp->asst_post, post, lpost);
    if (!r) r = sd_chat_same(sp, &sp->asst_after, after, lafter);
    return r;
}

/* LIT CONTENT LIT, or LIT system_message LIT CONTENT LIT: the user turn. */
static int sd_chat_mistral_user_expr(sd_chat_spec *sp, const sd_chat_term *t, int nt, const char *lits,
                                     sd_chat_mctx *m) {
    int sys = nt == 5 && t[1].kind == SD_T_SYS && !t[1].trim && t[2].kind == SD_T_LIT;
    int c = sys ? 3 : 1;
    if ((nt != 3 && !sys) || t[0].kind != SD_T_LIT || t[c].kind != SD_T_CONTENT || t[c + 1].kind != SD_T_LIT)
        return 2;
    if (!sd_chat_memstr(lits + t[c + 1].off, t[c + 1].len, "[/INST]")) return 2;
    if ((m->have_user || m->have_sys_form) && sp->user_trim != t[c].trim) return 2;
    sp->user_trim = t[c].trim;
    int r = sd_chat_same(sp, &sp->user_pre, lits + t[0].off, t[0].len);
    if (!r) r = sd_chat_same(sp, &sp->user_post, lits + t[c + 1].off, t[c + 1].len);
    if (!r && sys) r = sd_chat_same(sp, &sp->sys_sep, lits + t[2].off, t[2].len);
    if (sys) m->have_sys_form = 1;
    else m->have_user = 1;
    return r;
}

static int sd_chat_mistral_expr(sd_chat_spec *sp, const sd_chat_term *t, int nt, const char *lits, void *ctx) {
    sd_chat_mctx *m = ctx;
    int has_content = 0, has_eos = 0;
    for (int i = 0; i < nt; i++) {
        has_content |= t[i].kind == SD_T_CONTENT;
        has_eos |= t[i].kind == SD_T_EOS;
    }
    if (sd_chat_has_lit(t, nt, lits, "[INST]")) return sd_chat_mistral_user_expr(sp, t, nt, lits, m);
    if (has_content && has_eos) {
        m->have_asst = 1;
        return sd_chat_mistral_asst_expr(sp, t, nt, lits);
    }
    if (nt == 1 && t[0].kind == SD_T_BOS) sp->bos = 1;
    return 0;
}

static specdec_status sd_chat_mistral_spec(const char *tmpl, const char *c, sd_chat_spec *sp) {
    sd_chat_mctx m = {0};
    sp->bos = 0;
    int r = sd_chat_each_expr(tmpl, sp, sd_chat_mistral_expr, &m);
    if (r < 0) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    if (r || !(m.have_user || m.have_sys_form) || !m.have_asst)
        return sd_chat_unsup("chat template (%s): [INST] template whose user/assistant expressions specdec does not "
                             "recognise", "mistral");
    if (m.have_sys_form && !m.have_user)
        return sd_chat_unsup("chat template (%s): no [INST] form without the system message", "mistral");
    sp->strip_system = strstr(c, "messages[1:]") && strstr(c, "system_message=messages[0]");
    if (m.have_sys_form) {
        if (!sp->strip_system) return sd_chat_unsup("chat template (%s): system_message not taken from messages[0]", "mistral");
        sp->sys_mode = strstr(c, "loop.lastandsystem_message") || strstr(c, "system_messageisdefinedandloop.last") ? SD_SYS_LAST
                       : strstr(c, "loop.firstandsystem_message") || strstr(c, "system_messageisdefinedandloop.first")
                           ? SD_SYS_FIRST
                           : SD_SYS_EVERY;
    }
    sp->prepass = strstr(c, "ns.index") != NULL;
    return SPECDEC_OK;
}

/* ---- detection -------------------------------------------------------------------------------- */
/* Features whose output specdec does not reproduce; matched on the compact text. */
static const char *const sd_chat_refused[][2] = {
    {"CuttingKnowledgeDate", "a Llama 3.1+ date header"}, {"date_string", "a date variable"},
    {"strftime_now", "the current date"},                 {"<|python_tag|>", "Llama 3.1 tool calls"},
    {"<think>", "<think> reasoning blocks"},              {"enable_thinking", "a thinking switch"},
    {"reasoning_content", "reasoning content"},           {"messages|length", "conversation-length rules"},
};

static int sd_chat_has(const char *c, const char *m) { return strstr(c, m) != NULL; }

/* Which family's markers the compact text shows: the family, -1 none, -2 several. */
static int sd_chat_family_markers(const char *c) {
    int inst = sd_chat_has(c, "[INST]") && sd_chat_has(c, "[/INST]");
    int turn = (sd_chat_has(c, "<|user|>") || sd_chat_has(c, "'<|'+message['role']+'|>'")) &&
               sd_chat_has(c, "<|assistant|>");
    int hit[SD_CHAT_N_FAMILIES] = {0};
    hit[SD_CHAT_LLAMA3] = sd_chat_has(c, "<|start_header_id|>") && sd_chat_has(c, "<|eot_id|>");
    hit[SD_CHAT_CHATML] = sd_chat_has(c, "<|im_start|>") && sd_chat_has(c, "<|im_end|>");
    hit[SD_CHAT_LLAMA2] = inst && sd_chat_has(c, "<<SYS>>");
    hit[SD_CHAT_MISTRAL] = inst && !hit[SD_CHAT_LLAMA2];
    hit[SD_CHAT_PHI3] = turn && sd_chat_has(c, "<|end|>");
    hit[SD_CHAT_ZEPHYR] = turn && !hit[SD_CHAT_PHI3];
    int f = -1;
    for (int i = 0; i < SD_CHAT_N_FAMILIES; i++)
        if (hit[i]) f = f == -1 ? i : -2;
    return f;
}

/* The switches of the families rendered with a fixed layout; each requires the expressions
 * its renderer writes, so a template laid out otherwise is refused, not misrendered. */
static specdec_status sd_chat_fixed_switches(const char *tmpl, const char *c, sd_chat_spec *sp) {
    const char *name = sd_chat_names[sp->family];
    int ok = 1;
    switch (sp->family) {
    case SD_CHAT_LLAMA3:
        ok = sd_chat_has(c, "+message['role']+'<|end_header_id|>") && !sd_chat_has(c, "messages[1:]");
        sp->trim = sd_chat_content_trim(c);
        sp->gen_always = !sd_chat_has(c, "add_generation_prompt");
        break;
    case SD_CHAT_CHATML:
        ok = (sd_chat_has(c, "'<|im_start|>'+message['role']+") || sd_chat_has(c, "'<|im_start|>'+message.role+")) &&
             sd_chat_has(c, "ifadd_generation_prompt");
        sp->trim = sd_chat_content_trim(c);
        sp->qwen_roles = sd_chat_has(c, "<tool_response>");
        break;
    case SD_CHAT_ZEPHYR:
        ok = sd_chat_has(c, "message['content']+eos_token") && sd_chat_has(c, "loop.lastandadd_generation_prompt");
        sp->nl = strstr(tmpl, "eos_token }}\n") || strstr(tmpl, "eos_token}}\n");
        break;
    default: /* phi3 */
        ok = sd_chat_has(c, "message['content']+'<|end|>") && sd_chat_has(c, "ifadd_generation_prompt");
        sp->any_role = sd_chat_has(c, "'<|'+message['role']+'|>'");
        sp->skip_empty_system = sd_chat_has(c, "=='system'andmessage['content']");
        sp->eos_end = sd_chat_has(c, "eos_token");
        if (sp->eos_end && !sd_chat_has(c, "{{eos_token}}") && !sd_chat_has(c, "{{-eos_token}}")) ok = 0;
        break;
    }
    if (!ok) return sd_chat_unsup("chat template (%s): laid out in a way specdec does not reproduce", name);
    if (sp->family == SD_CHAT_CHATML) return sd_chat_default_system(tmpl, c, sp);
    return SPECDEC_OK;
}

static specdec_status sd_chat_switches(const char *tmpl, const char *c, sd_chat_spec *sp) {
    const char *name = sd_chat_names[sp->family];
    int ur = sd_chat_raises(tmpl, sp);
    if (ur < 0) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    int any_raise = ur || sp->err_alt.set || sp->err_role.set || sp->err_tool.set;
    sp->bos = sd_chat_has(c, "bos_token");
    if (sp->family == SD_CHAT_MISTRAL) {
        if (ur) return sd_chat_unsup("chat template (%s): raise_exception checks specdec does not model", name);
        return sd_chat_mistral_spec(tmpl, c, sp);
    }
    if (sp->family == SD_CHAT_LLAMA2) {
        if (ur || sp->err_role.set || sp->err_tool.set)
            return sd_chat_unsup("chat template (%s): raise_exception checks specdec does not model", name);
        if (!sd_chat_has(c, "bos_token+'[INST]'") || !sd_chat_has(c, "'<<SYS>>\\n'+system_message+"))
            return sd_chat_unsup("chat template (%s): laid out in a way specdec does not reproduce", name);
        sp->sys_branch = sd_chat_has(c, "elifmessage['role']=='system'");
        return SPECDEC_OK;
    }
    if (any_raise) return sd_chat_unsup("chat template (%s): raise_exception checks specdec does not model", name);
    return sd_chat_fixed_switches(tmpl, c, sp);
}

specdec_status sd_chat_spec_detect(const char *tmpl, sd_chat_spec *sp) {
    char *c = sd_chat_compact(tmpl);
    if (!c) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    specdec_status st = SPECDEC_OK;
    for (size_t i = 0; i < sizeof sd_chat_refused / sizeof *sd_chat_refused && !st; i++)
        if (strstr(c, sd_chat_refused[i][0]))
            st = sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "chat template: uses %s (\"%s\"), which specdec does not reproduce",
                         sd_chat_refused[i][1], sd_chat_refused[i][0]);
    int f = st ? 0 : sd_chat_family_markers(c);
    if (!st && f == -1)
        st = sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED,
                     "chat template: not of a known family (no markers of llama3, chatml, llama2, mistral, zephyr or phi3)");
    else if (!st && f == -2)
        st = sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "chat template: shows the markers of several families");
    if (!st) {
        sp->family = (sd_chat_family)f;
        st = sd_chat_switches(tmpl, c, sp);
    }
    sd_free(c);
    return st;
}

/* ---- loading ------------------------------------------------------------------------------------- */
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

/* Keep text[0..n) as the template unless it is too long or holds a NUL byte. */
static specdec_status sd_chat_keep(specdec_tokenizer *t, const char *text, size_t n, const char *where) {
    char why[160];
    if (n > SD_CHAT_MAX_TEMPLATE || memchr(text, '\0', n)) {
        snprintf(why, sizeof why, "%s: chat template longer than %zu bytes or holding a NUL byte", where,
                 SD_CHAT_MAX_TEMPLATE);
        return sd_chat_problem(t, why);
    }
    if (!(t->chat_template = sd_malloc(n + 1))) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    memcpy(t->chat_template, text, n);
    t->chat_template[n] = '\0';
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
    const char *b = cfg ? sd_chat_cfg_text(cfg, "bos_token") : NULL, *e = cfg ? sd_chat_cfg_text(cfg, "eos_token") : NULL;
    if ((b && !(t->bos_text = sd_strdup(b))) || (e && !(t->eos_text = sd_strdup(e))))
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer_config.json: out of memory");
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

/* ---- public API ------------------------------------------------------------------------------------ */
const char *specdec_chat_template_name(int32_t i) {
    return i >= 0 && i < SD_CHAT_N_FAMILIES ? sd_chat_names[i] : NULL;
}

const char *specdec_tokenizer_chat_template(const specdec_tokenizer *tok) { return tok ? tok->chat_template : NULL; }

/* The spec to render with: the tokenizer's own template when name is NULL or names its
 * family, else the named family's reference variant. */
static specdec_status sd_chat_resolve(const specdec_tokenizer *tok, const char *name, sd_chat_spec *sp) {
    int f = -1;
    if (name) {
        for (int i = 0; i < SD_CHAT_N_FAMILIES && f < 0; i++)
            if (!strcmp(name, sd_chat_names[i])) f = i;
        if (f < 0)
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                           "chat template: unknown name \"%.64s\" (known: llama3, chatml, llama2, mistral, zephyr, phi3, plain)",
                           name);
    }
    if (tok->chat_template && !tok->chat_problem && f != SD_CHAT_PLAIN) {
        specdec_status st = sd_chat_spec_detect(tok->chat_template, sp);
        if (!name || st == SPECDEC_ERR_OUT_OF_MEMORY || (!st && (int)sp->family == f)) return st;
    } else if (!name && tok->chat_problem) {
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s", tok->chat_problem);
    }
    if (sd_chat_spec_reference(f < 0 ? SD_CHAT_PLAIN : (sd_chat_family)f, sp))
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    return SPECDEC_OK;
}

specdec_status specdec_chat_template_detect(const specdec_tokenizer *tok, const char **name) {
    if (name) *name = NULL;
    if (!tok || !name) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_chat_template_detect: NULL argument");
    sd_chat_spec sp = {0};
    specdec_status st = sd_chat_resolve(tok, NULL, &sp);
    if (!st) *name = sd_chat_names[sp.family];
    sd_chat_spec_free(&sp);
    return st;
}

specdec_status specdec_chat_add_special(const specdec_tokenizer *tok, const char *template_name, int *add_special) {
    if (add_special) *add_special = 0;
    if (!tok || !add_special) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_chat_add_special: NULL argument");
    sd_chat_spec sp = {0};
    specdec_status st = sd_chat_resolve(tok, template_name, &sp);
    if (!st) *add_special = sp.family == SD_CHAT_PLAIN;
    sd_chat_spec_free(&sp);
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

/* Render into out; *plain says whether the family was "plain". */
static specdec_status sd_chat_render_tok(const specdec_tokenizer *tok, const char *name, const specdec_chat_message *m,
                                         int32_t n, int agp, sd_tok_buf *out, int *plain, const char *fn) {
    specdec_status st = sd_chat_check(m, n, fn);
    if (st) return st;
    sd_chat_spec sp = {0};
    st = sd_chat_resolve(tok, name, &sp);
    if (!st) {
        *plain = sp.family == SD_CHAT_PLAIN;
        st = sd_chat_render(&sp, tok->bos_text ? tok->bos_text : "", tok->eos_text ? tok->eos_text : "", m, n, agp, out);
    }
    sd_chat_spec_free(&sp);
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
    if (!st) {
        *len = out.len;
        if (out.len + 1 > capacity)
            st = sd_fail(NULL, SPECDEC_ERR_BUFFER_TOO_SMALL, "specdec_chat_apply: %zu bytes + NUL do not fit in %zu", out.len,
                         capacity);
        else {
            if (out.len) memcpy(text, out.p, out.len);
            text[out.len] = '\0';
        }
    }
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

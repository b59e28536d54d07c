/* sd_chat_render.c — the chat template families rendered in C.
 *
 * Each renderer writes what the family's Jinja template writes under transformers'
 * environment (trim_blocks, lstrip_blocks), including its quirks: Llama-2 strips the system
 * block and the user text together, Mistral v0.3 repeats the system message in every user
 * turn, TinyLlama writes the generation prompt inside its loop, Qwen2.5 drops unknown roles.
 * The conversation is validated (non-NULL, UTF-8) before any of this runs. */
#include <string.h>

#include "sd_chat_template.h"

/* ---- Python whitespace and strip ------------------------------------------------------ */
int sd_chat_py_space(int32_t cp) {
    if ((cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0) return 1;
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A)) return 1;
    return cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

void sd_chat_py_strip(const char *s, size_t n, size_t *off, size_t *len) {
    size_t a = 0, b = n;
    while (a < b) {
        int32_t cp;
        size_t l = sd_utf8_next(s + a, b - a, &cp);
        if (!sd_chat_py_space(cp)) break;
        a += l;
    }
    while (b > a) {
        size_t j = b - 1;
        while (j > a && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
        int32_t cp;
        sd_utf8_next(s + j, b - j, &cp);
        if (!sd_chat_py_space(cp)) break;
        b = j;
    }
    *off = a;
    *len = b - a;
}

/* ---- output helpers: each returns 0, or -1 when out of memory ------------------------- */
static int sd_chat_puts(sd_tok_buf *b, const char *s) { return sd_tok_buf_put(b, s, strlen(s)); }

static int sd_chat_put_str(sd_tok_buf *b, const sd_chat_spec *sp, sd_chat_str s) {
    return s.set && s.len ? sd_tok_buf_put(b, sp->arena.p + s.off, s.len) : 0;
}

/* Content, optionally Python-stripped. */
static int sd_chat_put_content(sd_tok_buf *b, const char *c, int trim) {
    size_t off = 0, len = strlen(c);
    if (trim) sd_chat_py_strip(c, len, &off, &len);
    return sd_tok_buf_put(b, c + off, len);
}

static specdec_status sd_chat_oom(void) {
    return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory rendering the conversation");
}

/* The template's raise_exception(message): INVALID_ARGUMENT carrying message. */
static specdec_status sd_chat_raise(const sd_chat_spec *sp, sd_chat_str msg, const char *family) {
    return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "chat template (%s) rejects the conversation: %.*s", family,
                   (int)msg.len, sp->arena.p + msg.off);
}

static int sd_chat_is(const specdec_chat_message *m, const char *role) { return !strcmp(m->role, role); }

/* ---- llama3 --------------------------------------------------------------------------- */
static int sd_chat_llama3(const sd_chat_spec *sp, const char *bos, const specdec_chat_message *m, int32_t n, int agp,
                          sd_tok_buf *o) {
    for (int32_t i = 0; i < n; i++) {
        if (i == 0 && sp->bos && sd_chat_puts(o, bos)) return -1;
        if (sd_chat_puts(o, "<|start_header_id|>") || sd_chat_puts(o, m[i].role) ||
            sd_chat_puts(o, "<|end_header_id|>\n\n") || sd_chat_put_content(o, m[i].content, sp->trim) ||
            sd_chat_puts(o, "<|eot_id|>"))
            return -1;
    }
    if (agp || sp->gen_always) return sd_chat_puts(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return 0;
}

/* ---- chatml --------------------------------------------------------------------------- */
static int sd_chat_chatml_block(const sd_chat_spec *sp, const specdec_chat_message *m, sd_tok_buf *o) {
    return sd_chat_puts(o, "<|im_start|>") || sd_chat_puts(o, m->role) || sd_chat_puts(o, "\n") ||
           sd_chat_put_content(o, m->content, sp->trim) || sd_chat_puts(o, "<|im_end|>\n");
}

/* Qwen2.5: consecutive tool messages share one user turn of <tool_response> blocks. */
static int sd_chat_qwen_tool(const specdec_chat_message *m, int32_t i, int32_t n, sd_tok_buf *o) {
    if ((i == 0 || !sd_chat_is(&m[i - 1], "tool")) && sd_chat_puts(o, "<|im_start|>user")) return -1;
    if (sd_chat_puts(o, "\n<tool_response>\n") || sd_chat_puts(o, m[i].content) || sd_chat_puts(o, "\n</tool_response>"))
        return -1;
    if ((i == n - 1 || !sd_chat_is(&m[i + 1], "tool")) && sd_chat_puts(o, "<|im_end|>\n")) return -1;
    return 0;
}

static int sd_chat_chatml(const sd_chat_spec *sp, const char *bos, const specdec_chat_message *m, int32_t n, int agp,
                          sd_tok_buf *o) {
    if (sp->bos && sd_chat_puts(o, bos)) return -1;
    if (sp->default_system.set && !sd_chat_is(&m[0], "system")) {
        if (sd_chat_puts(o, "<|im_start|>system\n") || sd_chat_put_str(o, sp, sp->default_system) ||
            sd_chat_puts(o, "<|im_end|>\n"))
            return -1;
    }
    for (int32_t i = 0; i < n; i++) {
        int r = 0;
        if (!sp->qwen_roles || sd_chat_is(&m[i], "user") || sd_chat_is(&m[i], "system") || sd_chat_is(&m[i], "assistant"))
            r = sd_chat_chatml_block(sp, &m[i], o);
        else if (sd_chat_is(&m[i], "tool"))
            r = sd_chat_qwen_tool(m, i, n, o);
        if (r) return -1;
    }
    return agp ? sd_chat_puts(o, "<|im_start|>assistant\n") : 0;
}

/* ---- llama2 --------------------------------------------------------------------------- */
/* One message of Llama-2-chat; tmp is scratch for "<<SYS>>...<</SYS>>\n\n" + content, which
 * the template strips as a whole. */
static int sd_chat_llama2_msg(const sd_chat_spec *sp, const char *bos, const char *eos, const specdec_chat_message *m,
                              const char *sys, sd_tok_buf *tmp, sd_tok_buf *o) {
    tmp->len = 0;
    if (sys && (sd_chat_puts(tmp, "<<SYS>>\n") || sd_chat_puts(tmp, sys) || sd_chat_puts(tmp, "\n<</SYS>>\n\n")))
        return -1;
    if (sd_chat_puts(tmp, m->content)) return -1;
    size_t off, len;
    sd_chat_py_strip(tmp->p, tmp->len, &off, &len);
    /* tmp->p is still NULL when nothing was written (no system text, empty content) */
    const char *body = tmp->p ? tmp->p + off : "";
    if (sd_chat_is(m, "user"))
        return sd_chat_puts(o, bos) || sd_chat_puts(o, "[INST] ") || sd_tok_buf_put(o, body, len) ||
               sd_chat_puts(o, " [/INST]");
    if (sp->sys_branch && sd_chat_is(m, "system"))
        return sd_chat_puts(o, "<<SYS>>\n") || sd_tok_buf_put(o, body, len) || sd_chat_puts(o, "\n<</SYS>>\n\n");
    if (sd_chat_is(m, "assistant"))
        return sd_chat_puts(o, " ") || sd_tok_buf_put(o, body, len) || sd_chat_puts(o, " ") || sd_chat_puts(o, eos);
    return 0;
}

static specdec_status sd_chat_llama2(const sd_chat_spec *sp, const char *bos, const char *eos,
                                     const specdec_chat_message *m, int32_t n, sd_tok_buf *o) {
    int32_t start = sd_chat_is(&m[0], "system") ? 1 : 0;
    const char *sys = start ? m[0].content : NULL;
    sd_tok_buf tmp = {0};
    specdec_status st = SPECDEC_OK;
    for (int32_t i = start; i < n && !st; i++) {
        int32_t li = i - start;
        if (sp->err_alt.set && sd_chat_is(&m[i], "user") != (li % 2 == 0)) st = sd_chat_raise(sp, sp->err_alt, "llama2");
        else if (sd_chat_llama2_msg(sp, bos, eos, &m[i], li == 0 ? sys : NULL, &tmp, o)) st = sd_chat_oom();
    }
    sd_tok_buf_free(&tmp);
    return st;
}

/* ---- mistral -------------------------------------------------------------------------- */
static int sd_chat_is_tool(const specdec_chat_message *m) { return sd_chat_is(m, "tool") || sd_chat_is(m, "tool_results"); }

/* v0.3-style templates check the alternation of user/assistant turns (tool turns skipped)
 * in a loop of their own before writing anything. */
static specdec_status sd_chat_mistral_prepass(const sd_chat_spec *sp, const specdec_chat_message *m, int32_t start,
                                              int32_t n) {
    int32_t k = 0;
    for (int32_t i = start; i < n; i++) {
        if (sd_chat_is_tool(&m[i])) continue;
        if (sd_chat_is(&m[i], "user") != (k % 2 == 0)) return sd_chat_raise(sp, sp->err_alt, "mistral");
        k++;
    }
    return SPECDEC_OK;
}

static int sd_chat_mistral_user(const sd_chat_spec *sp, const char *sys, const char *c, sd_tok_buf *o) {
    if (sd_chat_put_str(o, sp, sp->user_pre)) return -1;
    if (sys && (sd_chat_puts(o, sys) || sd_chat_put_str(o, sp, sp->sys_sep))) return -1;
    return sd_chat_put_content(o, c, sp->user_trim) || sd_chat_put_str(o, sp, sp->user_post);
}

static int sd_chat_mistral_asst(const sd_chat_spec *sp, const char *eos, const char *c, sd_tok_buf *o) {
    return sd_chat_put_str(o, sp, sp->asst_pre) || sd_chat_put_content(o, c, sp->asst_trim) ||
           sd_chat_put_str(o, sp, sp->asst_post) || sd_chat_puts(o, eos) || sd_chat_put_str(o, sp, sp->asst_after);
}

/* Does user turn i (loop index li) carry the system message? */
static int sd_chat_mistral_sys_here(const sd_chat_spec *sp, int32_t li, int32_t i, int32_t n) {
    return sp->sys_mode == SD_SYS_EVERY || (sp->sys_mode == SD_SYS_FIRST && li == 0) ||
           (sp->sys_mode == SD_SYS_LAST && i == n - 1);
}

static specdec_status sd_chat_mistral(const sd_chat_spec *sp, const char *bos, const char *eos,
                                      const specdec_chat_message *m, int32_t n, sd_tok_buf *o) {
    int32_t start = sp->strip_system && sd_chat_is(&m[0], "system") ? 1 : 0;
    const char *sys = start ? m[0].content : NULL;
    specdec_status st = sp->prepass && sp->err_alt.set ? sd_chat_mistral_prepass(sp, m, start, n) : SPECDEC_OK;
    if (st) return st;
    if (sp->bos && sd_chat_puts(o, bos)) return sd_chat_oom();
    for (int32_t i = start; i < n; i++) {
        int32_t li = i - start;
        int r = 0;
        if (!sp->prepass && sp->err_alt.set && sd_chat_is(&m[i], "user") != (li % 2 == 0))
            return sd_chat_raise(sp, sp->err_alt, "mistral");
        if (sd_chat_is(&m[i], "user"))
            r = sd_chat_mistral_user(sp, sys && sd_chat_mistral_sys_here(sp, li, i, n) ? sys : NULL, m[i].content, o);
        else if (sd_chat_is(&m[i], "assistant"))
            r = sd_chat_mistral_asst(sp, eos, m[i].content, o);
        else if (sd_chat_is_tool(&m[i]) && sp->err_tool.set)
            return sd_chat_raise(sp, sp->err_tool, "mistral"); /* tool turns need call ids specdec does not carry */
        else if (sp->err_role.set)
            return sd_chat_raise(sp, sp->err_role, "mistral");
        if (r) return sd_chat_oom();
    }
    return SPECDEC_OK;
}

/* ---- zephyr / phi3 -------------------------------------------------------------------- */
static int sd_chat_known_role(const specdec_chat_message *m) {
    return sd_chat_is(m, "system") || sd_chat_is(m, "user") || sd_chat_is(m, "assistant");
}

static int sd_chat_zephyr(const sd_chat_spec *sp, const char *eos, const specdec_chat_message *m, int32_t n, int agp,
                          sd_tok_buf *o) {
    const char *nl = sp->nl ? "\n" : "";
    for (int32_t i = 0; i < n; i++) {
        if (sd_chat_known_role(&m[i]) && (sd_chat_puts(o, "<|") || sd_chat_puts(o, m[i].role) ||
                                          sd_chat_puts(o, "|>\n") || sd_chat_puts(o, m[i].content) ||
                                          sd_chat_puts(o, eos) || sd_chat_puts(o, nl)))
            return -1;
    }
    /* written inside the template's loop on its last pass, so only for a non-empty conversation */
    if (agp && n > 0) return sd_chat_puts(o, "<|assistant|>") || sd_chat_puts(o, nl);
    return 0;
}

static int sd_chat_phi3(const sd_chat_spec *sp, const char *bos, const char *eos, const specdec_chat_message *m,
                        int32_t n, int agp, sd_tok_buf *o) {
    if (sp->bos && sd_chat_puts(o, bos)) return -1;
    for (int32_t i = 0; i < n; i++) {
        int show = sp->any_role || sd_chat_known_role(&m[i]);
        if (sp->skip_empty_system && sd_chat_is(&m[i], "system") && !m[i].content[0]) show = 0;
        if (show && (sd_chat_puts(o, "<|") || sd_chat_puts(o, m[i].role) || sd_chat_puts(o, "|>\n") ||
                     sd_chat_puts(o, m[i].content) || sd_chat_puts(o, "<|end|>\n")))
            return -1;
    }
    if (agp) return sd_chat_puts(o, "<|assistant|>\n");
    return sp->eos_end ? sd_chat_puts(o, eos) : 0;
}

/* ---- plain (specdec's own format) ------------------------------------------------------- */
static specdec_status sd_chat_plain(const specdec_chat_message *m, int32_t n, int agp, sd_tok_buf *o) {
    for (int32_t i = 0; i < n; i++) {
        if (strpbrk(m[i].role, "\r\n"))
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "chat template (plain): message %d: role contains a line break", i);
        char first = m[i].role[0];
        if (first >= 'a' && first <= 'z') first = (char)(first - 'a' + 'A');
        if (sd_tok_buf_put(o, &first, 1) || sd_chat_puts(o, m[i].role + 1) || sd_chat_puts(o, ": ") ||
            sd_chat_puts(o, m[i].content) || sd_chat_puts(o, "\n"))
            return sd_chat_oom();
    }
    if (agp && sd_chat_puts(o, "Assistant:")) return sd_chat_oom();
    return SPECDEC_OK;
}

specdec_status sd_chat_render(const sd_chat_spec *sp, const char *bos, const char *eos, const specdec_chat_message *msgs,
                              int32_t n, int agp, sd_tok_buf *out) {
    int r = 0;
    switch (sp->family) {
    case SD_CHAT_LLAMA3: r = sd_chat_llama3(sp, bos, msgs, n, agp, out); break;
    case SD_CHAT_CHATML: r = sd_chat_chatml(sp, bos, msgs, n, agp, out); break;
    case SD_CHAT_LLAMA2: return sd_chat_llama2(sp, bos, eos, msgs, n, out);
    case SD_CHAT_MISTRAL: return sd_chat_mistral(sp, bos, eos, msgs, n, out);
    case SD_CHAT_ZEPHYR: r = sd_chat_zephyr(sp, eos, msgs, n, agp, out); break;
    case SD_CHAT_PHI3: r = sd_chat_phi3(sp, bos, eos, msgs, n, agp, out); break;
    case SD_CHAT_PLAIN: return sd_chat_plain(msgs, n, agp, out);
    default: return sd_fail(NULL, SPECDEC_ERR_INTERNAL, "chat template: unknown family %d", (int)sp->family);
    }
    return r ? sd_chat_oom() : SPECDEC_OK;
}

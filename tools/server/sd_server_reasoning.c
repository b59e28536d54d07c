/* sd_server_reasoning.c — the reasoning split of chat outputs (sd_server_reasoning.h). */
#include "sd_server_reasoning.h"

#include <string.h>

sd_reasoning_parser sd_reasoning_parser_named(const char *name) {
    if (!name) return SD_RP_NONE;
    if (!strcmp(name, "qwen3")) return SD_RP_QWEN3;
    if (!strcmp(name, "deepseek_r1")) return SD_RP_DEEPSEEK_R1;
    if (!strcmp(name, "glm45")) return SD_RP_GLM45;
    return SD_RP_NONE;
}

int sd_server_reasoning_tags(const char *spec, char *start, char *end) {
    const char *sp = strchr(spec, ' ');
    if (!sp || strchr(sp + 1, ' ')) return -1;
    const size_t a = (size_t)(sp - spec), b = strlen(sp + 1);
    if (a < 1 || a > SD_REASONING_TAG_MAX || b < 1 || b > SD_REASONING_TAG_MAX) return -1;
    if (start) memcpy(start, spec, a), start[a] = '\0';
    if (end) memcpy(end, sp + 1, b + 1);
    return 0;
}

static void sd_rs_tag(char *dst, const char *src, const char *dflt) {
    const size_t n = src ? strlen(src) : 0;
    if (n == 0 || n > SD_REASONING_TAG_MAX) src = dflt;
    strcpy(dst, src);
}

void sd_reasoning_init(sd_reasoning *r, sd_reasoning_parser parser, const char *start, const char *end,
                       int thinking_off, int prompt_ended) {
    memset(r, 0, sizeof *r);
    r->parser = parser;
    sd_rs_tag(r->start, start, "<think>");
    sd_rs_tag(r->end, end, "</think>");
    r->thinking_off = thinking_off;
    r->prompt_ended = prompt_ended;
}

/* The last occurrence of tag in s[0..n), or -1. */
static long sd_rs_last(const char *s, size_t n, const char *tag) {
    const size_t m = strlen(tag);
    for (size_t i = n >= m ? n - m + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, tag, m)) return (long)i;
    return -1;
}

int sd_reasoning_prompt_ended(const sd_reasoning *r, const char *text, size_t n) {
    const long e = sd_rs_last(text, n, r->end);
    const char *other = r->parser == SD_RP_GLM45 ? SD_REASONING_GLM_TURN : r->start;
    return e >= 0 && e > sd_rs_last(text, n, other);
}

/* The first occurrence of tag in s[from..n), or -1. */
static long sd_rs_first(const char *s, size_t from, size_t n, const char *tag) {
    const size_t m = strlen(tag);
    for (size_t i = from; i + m <= n; i++)
        if (!memcmp(s + i, tag, m)) return (long)i;
    return -1;
}

void sd_reasoning_feed(sd_reasoning *r, const char *text, size_t n, int final, size_t *ra, size_t *rb, size_t *ca,
                       size_t *cb) {
    *ra = *rb = *ca = *cb = r->pos;
    if (n < r->pos) return; /* never: the text only grows */
    if (r->parser == SD_RP_NONE || r->prompt_ended) r->phase = 2;
    if (r->phase == 0) { /* a leading start tag (the model opened the thinking itself) is dropped */
        size_t w = 0; /* glm45: after whitespace (GLM writes "\n<think>") */
        while (r->parser == SD_RP_GLM45 && w < n && text[w] && strchr(" \t\r\n", text[w])) w++;
        const size_t ls = strlen(r->start), k = n - w < ls ? n - w : ls;
        if (!memcmp(text + w, r->start, k) && k < ls && !final) return; /* may still become the tag */
        const int tag = k == ls && !memcmp(text + w, r->start, ls);
        r->pos = tag ? w + ls : 0;
        r->phase = !tag && r->parser == SD_RP_GLM45 ? 2 : 1; /* glm45 without it: all content */
        *ra = *rb = r->pos;
    }
    if (r->phase == 1) {
        const size_t le = strlen(r->end);
        for (size_t i = r->pos; i + le <= n; i++)
            if (!memcmp(text + i, r->end, le)) {
                *ra = r->pos, *rb = i;
                r->content_at = r->pos = i + le;
                r->phase = 2;
                break;
            }
        if (r->phase == 1) {
            size_t hold = 0; /* the longest tail that begins the end tag */
            for (size_t k = le - 1; !final && k > 0 && hold == 0; k--)
                if (k <= n - r->pos && !memcmp(text + n - k, r->end, k)) hold = k;
            *ra = r->pos, *rb = n - hold;
            r->pos = n - hold;
            return;
        }
    }
    *ca = r->pos > r->content_at ? r->pos : r->content_at;
    *cb = n;
    r->pos = n;
}

/* vLLM's glm4_moe extract_reasoning. */
static void sd_rs_glm_whole(const sd_reasoning *cfg, const char *text, size_t n, sd_reasoning_split *s) {
    const long st = sd_rs_first(text, 0, n, cfg->start);
    s->has_c = 1, s->c_len = n;
    if (st < 0 || sd_rs_first(text, 0, n, cfg->end) < 0) return; /* both tags, or all content */
    const size_t a = (size_t)st + strlen(cfg->start);
    const long e = sd_rs_first(text, a, n, cfg->end);
    s->c_off = a, s->c_len = n - a;
    if (e < 0) return; /* the end tag only before the start tag: the rest is content */
    s->has_r = 1, s->r_off = a, s->r_len = (size_t)e - a;
    s->c_off = (size_t)e + strlen(cfg->end), s->c_len = n - s->c_off;
    s->has_c = s->c_len > 0;
}

void sd_reasoning_whole(const sd_reasoning *cfg, const char *text, size_t n, sd_reasoning_split *s) {
    if (cfg->parser == SD_RP_GLM45 && !cfg->prompt_ended) {
        memset(s, 0, sizeof *s);
        sd_rs_glm_whole(cfg, text, n, s);
        return;
    }
    sd_reasoning r = *cfg;
    r.phase = 0, r.pos = 0, r.content_at = 0;
    size_t ra, rb, ca, cb;
    sd_reasoning_feed(&r, text, n, 1, &ra, &rb, &ca, &cb);
    memset(s, 0, sizeof *s);
    if (cfg->parser == SD_RP_NONE || cfg->prompt_ended) { /* all content */
        s->has_c = 1, s->c_len = n;
        return;
    }
    if (r.phase != 2 && cfg->parser == SD_RP_QWEN3 && cfg->thinking_off) { /* vLLM's qwen3: all content */
        s->has_c = 1, s->c_off = ra, s->c_len = n - ra;
        return;
    }
    s->has_r = 1, s->r_off = ra, s->r_len = rb - ra;
    if (r.phase == 2 && cb > ca) s->has_c = 1, s->c_off = ca, s->c_len = cb - ca;
}

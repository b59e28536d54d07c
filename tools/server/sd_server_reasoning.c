/* sd_server_reasoning.c — the reasoning split of chat outputs (sd_server_reasoning.h). */
#include "sd_server_reasoning.h"

#include <string.h>

sd_reasoning_parser sd_reasoning_parser_named(const char *name) {
    if (!name) return SD_RP_NONE;
    if (!strcmp(name, "qwen3")) return SD_RP_QWEN3;
    if (!strcmp(name, "deepseek_r1")) return SD_RP_DEEPSEEK_R1;
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
    return e >= 0 && e > sd_rs_last(text, n, r->start);
}

void sd_reasoning_feed(sd_reasoning *r, const char *text, size_t n, int final, size_t *ra, size_t *rb, size_t *ca,
                       size_t *cb) {
    *ra = *rb = *ca = *cb = r->pos;
    if (n < r->pos) return; /* never: the text only grows */
    if (r->parser == SD_RP_NONE || r->prompt_ended) r->phase = 2;
    if (r->phase == 0) { /* a leading start tag (the model opened the thinking itself) is dropped */
        const size_t ls = strlen(r->start), k = n < ls ? n : ls;
        if (!memcmp(text, r->start, k) && k < ls && !final) return; /* may still become the tag */
        r->pos = k == ls && !memcmp(text, r->start, ls) ? ls : 0;
        r->phase = 1;
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

void sd_reasoning_whole(const sd_reasoning *cfg, const char *text, size_t n, sd_reasoning_split *s) {
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

/* sd_server_text.c — byte buffer, JSON string escaping, stop-sequence filter. */
#include "sd_server_text.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sd_buf_reserve(sd_buf *b, size_t extra) {
    if (b->oom) return -1;
    if (extra > SIZE_MAX / 2 - b->len) goto fail;
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) goto fail;
    b->p = p;
    b->cap = cap;
    return 0;
fail:
    b->oom = 1;
    return -1;
}

int sd_buf_append(sd_buf *b, const void *s, size_t n) {
    if (sd_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int sd_buf_puts(sd_buf *b, const char *s) { return sd_buf_append(b, s, strlen(s)); }

int sd_buf_printf(sd_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || sd_buf_reserve(b, (size_t)n)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int sd_buf_json_chars(sd_buf *b, const char *s, size_t n) {
    if (sd_buf_reserve(b, n)) return -1;
    size_t run = 0; /* bytes copied as they are, flushed before each escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        sd_buf_append(b, s + i - run, run);
        run = 0;
        switch (c) {
        case '"': sd_buf_append(b, "\\\"", 2); break;
        case '\\': sd_buf_append(b, "\\\\", 2); break;
        case '\n': sd_buf_append(b, "\\n", 2); break;
        case '\r': sd_buf_append(b, "\\r", 2); break;
        case '\t': sd_buf_append(b, "\\t", 2); break;
        default: sd_buf_printf(b, "\\u%04x", c); break;
        }
    }
    return sd_buf_append(b, s + n - run, run);
}

int sd_buf_json_str(sd_buf *b, const char *s, size_t n) {
    if (sd_buf_append(b, "\"", 1) || sd_buf_json_chars(b, s, n)) return -1;
    return sd_buf_append(b, "\"", 1);
}

void sd_buf_free(sd_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

void sd_stop_init(sd_stopper *st, char *const *stops, int n, int include) {
    st->stops = stops;
    st->n = n;
    st->include = include;
    st->stop_end = 0;
    st->stop_at = (size_t)-1;
    st->safe = 0;
}

/* First occurrence of needle in hay[from..len), or (size_t)-1. */
static size_t sd_find(const char *hay, size_t from, size_t len, const char *needle, size_t nl) {
    for (size_t i = from; i + nl <= len; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, nl)) return i;
    return (size_t)-1;
}

void sd_stop_scan(sd_stopper *st, const char *text, size_t old_len, size_t len) {
    if (st->stop_at != (size_t)-1) return;
    size_t hold = 0;
    for (int i = 0; i < st->n; i++) {
        size_t nl = strlen(st->stops[i]);
        size_t from = old_len >= nl ? old_len - nl + 1 : 0; /* a new match must end in the new bytes */
        size_t at = sd_find(text, from, len, st->stops[i], nl);
        if (at < st->stop_at) st->stop_at = at, st->stop_end = at + nl;
        if (st->include) continue; /* what precedes a stop is released either way */
        for (size_t k = nl - 1 < len ? nl - 1 : len; k > hold; k--) /* longest tail that starts this stop */
            if (!memcmp(text + len - k, st->stops[i], k)) {
                hold = k;
                break;
            }
    }
    size_t safe = st->stop_at == (size_t)-1 ? len - hold : st->include ? st->stop_end : st->stop_at;
    if (safe > st->safe) st->safe = safe;
}

void sd_stop_finish(sd_stopper *st, size_t len) {
    st->safe = st->stop_at == (size_t)-1 ? len : st->include ? st->stop_end : st->stop_at;
}

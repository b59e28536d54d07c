/* sd_utf8.c — the UTF-8 validator and code-point helpers (sd_utf8.h). */
#include "sd_utf8.h"

size_t sd_utf8_seq_len(const unsigned char *s, size_t n, size_t *bad_len) {
    unsigned c = s[0];
    *bad_len = 1;
    if (c < 0x80) return 1;
    size_t need;
    unsigned lo = 0x80, hi = 0xBF; /* range of the first continuation byte */
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) { need = 2; lo = 0xA0; }
    else if (c == 0xED) { need = 2; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) need = 2;
    else if (c == 0xF0) { need = 3; lo = 0x90; }
    else if (c == 0xF4) { need = 3; hi = 0x8F; }
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else return 0;
    size_t k = 0;
    while (k < need && 1 + k < n) {
        unsigned d = s[1 + k];
        unsigned l = k == 0 ? lo : 0x80, h = k == 0 ? hi : 0xBF;
        if (d < l || d > h) break;
        k++;
    }
    if (k == need) return need + 1;
    *bad_len = 1 + k; /* maximal subpart of an ill-formed sequence */
    return 0;
}

int sd_utf8_valid(const unsigned char *s, size_t n) {
    size_t bad;
    for (size_t i = 0; i < n;) {
        const size_t l = sd_utf8_seq_len(s + i, n - i, &bad);
        if (!l) return 0;
        i += l;
    }
    return 1;
}

size_t sd_utf8_next(const char *s, size_t n, int32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0];
    if (c < 0x80 || n < 2) { *cp = (int32_t)c; return 1; }
    if (c < 0xE0) { *cp = (int32_t)(((c & 0x1F) << 6) | (u[1] & 0x3F)); return 2; }
    if (c < 0xF0 || n < 4) {
        if (n < 3) { *cp = (int32_t)c; return 1; }
        *cp = (int32_t)(((c & 0x0F) << 12) | ((u[1] & 0x3Fu) << 6) | (u[2] & 0x3F));
        return 3;
    }
    *cp = (int32_t)(((c & 0x07) << 18) | ((u[1] & 0x3Fu) << 12) | ((u[2] & 0x3Fu) << 6) | (u[3] & 0x3F));
    return 4;
}

size_t sd_utf8_put(char *d, int32_t cp) {
    uint32_t c = (uint32_t)cp;
    if (c < 0x80) { d[0] = (char)c; return 1; }
    if (c < 0x800) { d[0] = (char)(0xC0 | (c >> 6)); d[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        d[0] = (char)(0xE0 | (c >> 12)); d[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        d[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | (c >> 18)); d[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((c >> 6) & 0x3F)); d[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* sd_jinja_lex.c — the Jinja2 lexer as transformers configures it (trim_blocks, lstrip_blocks,
 * keep_trailing_newline off): the source's line breaks (\r\n, \r) become \n and one final \n is
 * dropped; "{%-"/"{{-"/"{#-" strip the whitespace before a tag, "-%}"/"-}}"/"-#}" the whitespace
 * after it; a block or comment tag alone on its line loses the indentation before it
 * (lstrip_blocks; "{%+" keeps it) and the newline after it (trim_blocks; "+%}" keeps it);
 * {% raw %} ... {% endraw %} is data. Inside tags: names, numbers (with _ separators, 0b/0o/0x),
 * string literals with Python's escapes, operators; an end tag inside open brackets is not an
 * end. Whitespace is Python's (str.isspace), as jinja2's regular expressions see it. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_jinja_int.h"
#include "sd_utf8.h"

#define SD_JL_MAX_BRACKETS 256

typedef struct sd_jlexer {
    sd_jarena *a;
    const char *s;
    size_t n, pos;
    size_t line_pos; /* line counted up to here */
    int line;
    int line_starting;
    sd_jtok *t;
    size_t nt, cap;
    char *err;
    size_t errcap;
    char br[SD_JL_MAX_BRACKETS];
    int depth;
} sd_jlexer;

static int sd_jl_line(sd_jlexer *L, size_t pos) {
    for (; L->line_pos < pos && L->line_pos < L->n; L->line_pos++)
        if (L->s[L->line_pos] == '\n') L->line++;
    return L->line;
}

static int sd_jl_fail(sd_jlexer *L, size_t pos, const char *fmt, const char *arg) {
    int line = sd_jl_line(L, pos);
    char what[200];
    snprintf(what, sizeof what, fmt, arg ? arg : "");
    snprintf(L->err, L->errcap, "line %d: %s", line, what);
    return -1;
}

static sd_jtok *sd_jl_push(sd_jlexer *L, int k, size_t pos) {
    if (L->nt == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        sd_jtok *t = sd_realloc(L->t, cap * sizeof *t);
        if (!t) {
            L->a->fail = 2;
            return NULL;
        }
        L->t = t;
        L->cap = cap;
    }
    sd_jtok *t = &L->t[L->nt++];
    memset(t, 0, sizeof *t);
    t->k = (uint8_t)k;
    t->line = sd_jl_line(L, pos);
    return t;
}

/* Code point at s[i] (valid UTF-8) and its length. */
static size_t sd_jl_cp(const char *s, size_t n, size_t i, int32_t *cp) {
    size_t k = sd_utf8_next(s + i, n - i, cp);
    return k ? k : 1;
}

/* Python whitespace at s[i]: its byte length, 0 if none. */
static size_t sd_jl_space_at(const char *s, size_t n, size_t i) {
    if (i >= n) return 0;
    int32_t cp;
    size_t k = sd_jl_cp(s, n, i, &cp);
    return sd_jpy_space(cp) ? k : 0;
}

static size_t sd_jl_skip_space(const char *s, size_t n, size_t i) {
    for (size_t k; (k = sd_jl_space_at(s, n, i)); i += k) {
    }
    return i;
}

/* Length of text[0..len) without trailing Python whitespace (str.rstrip()). */
static size_t sd_jl_rstrip(const char *t, size_t len) {
    while (len) {
        size_t b = len - 1;
        while (b && ((unsigned char)t[b] & 0xC0) == 0x80) b--;
        int32_t cp;
        sd_utf8_next(t + b, len - b, &cp);
        if (!sd_jpy_space(cp)) break;
        len = b;
    }
    return len;
}

/* The data before a tag opener with sign ('-', '+' or 0); block: not a {{ }} tag. Emits it. */
static int sd_jl_data(sd_jlexer *L, size_t from, size_t to, int sign, int block) {
    const char *t = L->s + from;
    size_t len = to - from;
    if (sign == '-') {
        len = sd_jl_rstrip(t, len);
    } else if (sign != '+' && block) {
        size_t l_pos = len;
        while (l_pos && t[l_pos - 1] != '\n') l_pos--;
        if ((l_pos > 0 || L->line_starting) && l_pos < len && sd_jl_skip_space(t, len, l_pos) == len) len = l_pos;
    }
    if (!len) return 0;
    sd_jtok *k = sd_jl_push(L, SD_JK_DATA, from);
    if (!k) return -1;
    k->p = t;
    k->n = len;
    return 0;
}

/* End of a block/comment tag at i ("+%}", "-%}" + whitespace, "%}" + one \n): the position
 * after it, or 0 when there is none at i. close: '%' or '#'. */
static size_t sd_jl_block_end(const sd_jlexer *L, size_t i, char close) {
    const char *s = L->s;
    size_t n = L->n;
    if (i + 2 < n + 0 && (s[i] == '+' || s[i] == '-') && s[i + 1] == close && s[i + 2] == '}')
        return s[i] == '-' ? sd_jl_skip_space(s, n, i + 3) : i + 3;
    if (i + 1 < n && s[i] == close && s[i + 1] == '}') return i + 2 < n && s[i + 2] == '\n' ? i + 3 : i + 2;
    return 0;
}

static size_t sd_jl_var_end(const sd_jlexer *L, size_t i) {
    const char *s = L->s;
    if (i + 2 < L->n && s[i] == '-' && s[i + 1] == '}' && s[i + 2] == '}') return sd_jl_skip_space(s, L->n, i + 3);
    if (i + 1 < L->n && s[i] == '}' && s[i + 1] == '}') return i + 2;
    return 0;
}

static int sd_jl_is_digit(char c) { return c >= '0' && c <= '9'; }
static int sd_jl_is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

/* Digits with single '_' separators ("1_000"); the end, or i when none. */
static size_t sd_jl_digits(const char *s, size_t n, size_t i, int (*is_d)(char)) {
    size_t j = i;
    while (j < n && is_d(s[j])) {
        j++;
        if (j + 1 < n && s[j] == '_' && is_d(s[j + 1])) j++;
    }
    return j;
}

static int sd_jl_dec(char c) { return sd_jl_is_digit(c); }
static int sd_jl_bin(char c) { return c == '0' || c == '1'; }
static int sd_jl_oct(char c) { return c >= '0' && c <= '7'; }
static int sd_jl_hex(char c) { return sd_jl_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* Copy s[i..j) without '_' into buf (NUL-terminated); -1 when it does not fit. */
static int sd_jl_strip_us(const char *s, size_t i, size_t j, char *buf, size_t cap) {
    size_t o = 0;
    for (; i < j; i++) {
        if (s[i] == '_') continue;
        if (o + 2 > cap) return -1;
        buf[o++] = s[i];
    }
    buf[o] = '\0';
    return 0;
}

static int sd_jl_number(sd_jlexer *L, size_t i, size_t *end) {
    const char *s = L->s;
    size_t n = L->n, j = sd_jl_digits(s, n, i, sd_jl_dec);
    char buf[400];
    int is_float = 0;
    if (i == 0 || s[i - 1] != '.') { /* float: digits (.digits)? e[+-]digits | digits .digits */
        size_t k = j;
        if (k + 1 < n && s[k] == '.' && sd_jl_is_digit(s[k + 1])) {
            k = sd_jl_digits(s, n, k + 1, sd_jl_dec);
            is_float = 1;
        }
        if (k < n && (s[k] == 'e' || s[k] == 'E')) {
            size_t e = k + 1;
            if (e < n && (s[e] == '+' || s[e] == '-')) e++;
            size_t f = sd_jl_digits(s, n, e, sd_jl_dec);
            if (f > e) {
                k = f;
                is_float = 1;
            }
        }
        if (is_float) j = k;
    }
    sd_jtok *t;
    if (is_float) {
        if (sd_jl_strip_us(s, i, j, buf, sizeof buf)) return sd_jl_fail(L, i, "number literal too long", NULL);
        const char *dp = localeconv()->decimal_point; /* strtod follows the locale */
        char *dot = strchr(buf, '.');
        if (dot && dp && dp[0] && dp[0] != '.' && !dp[1]) *dot = dp[0];
        if (!(t = sd_jl_push(L, SD_JK_FLOAT, i))) return -1;
        t->f = strtod(buf, NULL);
        *end = j;
        return 0;
    }
    int base = 10;
    size_t d0 = i;
    if (s[i] == '0' && i + 1 < n && (s[i + 1] == 'b' || s[i + 1] == 'B' || s[i + 1] == 'o' || s[i + 1] == 'O' ||
                                     s[i + 1] == 'x' || s[i + 1] == 'X')) {
        char p = (char)(s[i + 1] | 0x20);
        int (*is_d)(char) = p == 'b' ? sd_jl_bin : p == 'o' ? sd_jl_oct : sd_jl_hex;
        base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
        d0 = i + 2;
        if (d0 < n && s[d0] == '_') d0++;
        j = sd_jl_digits(s, n, d0, is_d);
        if (j == d0) return sd_jl_fail(L, i, "invalid number literal", NULL);
    } else if (s[i] == '0') { /* "0", "0_0": a leading zero takes no other digits */
        j = i + 1;
        while (j < n && (s[j] == '0' || (s[j] == '_' && j + 1 < n && s[j + 1] == '0'))) j++;
    }
    if (sd_jl_strip_us(s, d0, j, buf, sizeof buf)) return sd_jl_fail(L, i, "number literal too long", NULL);
    uint64_t v = 0;
    for (const char *p = buf; *p; p++) {
        int d = sd_jl_is_digit(*p) ? *p - '0' : (*p | 0x20) - 'a' + 10;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base || v * (uint64_t)base + (uint64_t)d > (uint64_t)INT64_MAX)
            return sd_jl_fail(L, i, "integer literal larger than 2^63-1", NULL);
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (!(t = sd_jl_push(L, SD_JK_INT, i))) return -1;
    t->i = (int64_t)v;
    *end = j;
    return 0;
}

static int sd_jl_hexval(const char *s, int nd, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < nd; k++) {
        if (!sd_jl_hex(s[k])) return -1;
        *v = *v * 16 + (uint32_t)(sd_jl_is_digit(s[k]) ? s[k] - '0' : (s[k] | 0x20) - 'a' + 10);
    }
    return 0;
}

/* One escape after a backslash at s[i] (i is the character after it), as Python's
 * unicode-escape decodes it: appends the value to o (*on bytes), returns the bytes consumed or
 * -1 (message set). */
static int sd_jl_escape(sd_jlexer *L, size_t i, size_t end, char *o, size_t *on) {
    const char *s = L->s;
    static const char from[] = "\\'\"abfnrtv", to[] = "\\'\"\a\b\f\n\r\t\v";
    char c = s[i];
    if (c == '\n') return 1;
    const char *f = memchr(from, c, sizeof from - 1);
    if (f) {
        o[(*on)++] = to[f - from];
        return 1;
    }
    uint32_t cp;
    int used;
    if (c >= '0' && c <= '7') {
        cp = 0;
        used = 0;
        while (used < 3 && i + (size_t)used < end && sd_jl_oct(s[i + used])) cp = cp * 8 + (uint32_t)(s[i + used++] - '0');
    } else if (c == 'x' || c == 'u' || c == 'U') {
        int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        if (i + 1 + (size_t)nd > end || sd_jl_hexval(s + i + 1, nd, &cp))
            return sd_jl_fail(L, i, "truncated \\%s escape in a string literal", c == 'x' ? "xXX" : c == 'u' ? "uXXXX" : "UXXXXXXXX");
        used = nd + 1;
    } else if (c == 'N') {
        return sd_jl_fail(L, i, "\\N{...} escapes in string literals are not supported", NULL);
    } else if ((unsigned char)c >= 0x80) {
        return sd_jl_fail(L, i, "a backslash before a non-ASCII character in a string literal is not supported", NULL);
    } else { /* unknown escapes stay as written */
        o[(*on)++] = '\\';
        o[(*on)++] = c;
        return 1;
    }
    if (cp == 0) return sd_jl_fail(L, i, "a NUL character in a string literal is not supported", NULL);
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return sd_jl_fail(L, i, "an escape of a surrogate or out-of-range code point in a string literal", NULL);
    *on += sd_utf8_put(o + *on, (int32_t)cp);
    return used;
}

static int sd_jl_string(sd_jlexer *L, size_t i, size_t *end) {
    const char *s = L->s;
    char q = s[i];
    size_t j = i + 1;
    while (j < L->n && s[j] != q) j += s[j] == '\\' && j + 1 < L->n ? 2 : 1;
    if (j >= L->n) return sd_jl_fail(L, i, "unterminated string literal", NULL);
    char *o = sd_ja_alloc(L->a, j - i + 1); /* escapes never lengthen the text */
    if (!o) return -1;
    size_t on = 0;
    for (size_t k = i + 1; k < j;) {
        if (s[k] != '\\') {
            o[on++] = s[k++];
            continue;
        }
        int used = sd_jl_escape(L, k + 1, j, o, &on);
        if (used < 0) return -1;
        k += 1 + (size_t)used;
    }
    sd_jtok *t = sd_jl_push(L, SD_JK_STRING, i);
    if (!t) return -1;
    t->p = o;
    t->n = on;
    *end = j + 1;
    return 0;
}

static int sd_jl_operator(sd_jlexer *L, size_t i, size_t *end) {
    const char *s = L->s;
    static const struct { char a, b; uint8_t op; } two[] = {{'/', '/', SD_JK_FLOORDIV}, {'*', '*', SD_JK_POW},
                                                           {'=', '=', SD_JK_EQ},       {'!', '=', SD_JK_NE},
                                                           {'<', '=', SD_JK_LE},       {'>', '=', SD_JK_GE}};
    for (size_t k = 0; k < sizeof two / sizeof two[0]; k++) {
        if (i + 1 < L->n && s[i] == two[k].a && s[i + 1] == two[k].b) {
            sd_jtok *t = sd_jl_push(L, SD_JK_OP, i);
            if (!t) return -1;
            t->op = two[k].op;
            *end = i + 2;
            return 0;
        }
    }
    char c = s[i];
    if (!strchr("+-*/%~[](){}><=.:|,;", c) || !c) {
        char ch[8];
        snprintf(ch, sizeof ch, (unsigned char)c < 0x80 && c >= 0x20 ? "%c" : "\\x%02x", (unsigned char)c);
        return sd_jl_fail(L, i, "unexpected character '%s' in a tag", ch);
    }
    if (c == '(' || c == '[' || c == '{') {
        if (L->depth == SD_JL_MAX_BRACKETS) return sd_jl_fail(L, i, "brackets nested too deep", NULL);
        L->br[L->depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
        char want[2] = {L->depth ? L->br[L->depth - 1] : 0, 0};
        if (!L->depth) return sd_jl_fail(L, i, "unexpected '%s'", c == ')' ? ")" : c == ']' ? "]" : "}");
        if (want[0] != c) return sd_jl_fail(L, i, "unbalanced brackets: expected '%s'", want);
        L->depth--;
    }
    sd_jtok *t = sd_jl_push(L, SD_JK_OP, i);
    if (!t) return -1;
    t->op = (uint8_t)c;
    *end = i + 1;
    return 0;
}

/* The inside of a {% %} (block) or {{ }} tag from *pos up to and including its end. */
static int sd_jl_tag(sd_jlexer *L, int block) {
    const char *s = L->s;
    size_t i = L->pos;
    L->depth = 0;
    for (;;) {
        if (!L->depth) {
            size_t e = block ? sd_jl_block_end(L, i, '%') : sd_jl_var_end(L, i);
            if (e) {
                if (!sd_jl_push(L, block ? SD_JK_BLOCK_END : SD_JK_VAR_END, i)) return -1;
                L->line_starting = s[e - 1] == '\n';
                L->pos = e;
                return 0;
            }
        }
        size_t w = sd_jl_skip_space(s, L->n, i);
        if (w > i) {
            i = w;
            continue;
        }
        if (i >= L->n) return sd_jl_fail(L, i, block ? "missing end of a block tag ('%%}')" : "missing end of a variable tag ('}}')", NULL);
        size_t e = 0;
        char c = s[i];
        int r;
        if (sd_jl_is_digit(c)) {
            r = sd_jl_number(L, i, &e);
        } else if (sd_jl_is_alpha(c)) {
            e = i;
            while (e < L->n && (sd_jl_is_alpha(s[e]) || sd_jl_is_digit(s[e]))) e++;
            sd_jtok *t = sd_jl_push(L, SD_JK_NAME, i);
            if (!t) return -1;
            t->p = s + i;
            t->n = e - i;
            r = 0;
        } else if (c == '\'' || c == '"') {
            r = sd_jl_string(L, i, &e);
        } else {
            r = sd_jl_operator(L, i, &e);
        }
        if (r) return -1;
        i = e;
    }
}

/* {% raw %}: the text up to {% endraw %} is data. i: after the raw begin tag. */
static int sd_jl_raw(sd_jlexer *L, size_t i) {
    const char *s = L->s;
    for (size_t p = i; p + 1 < L->n; p++) {
        if (s[p] != '{' || s[p + 1] != '%') continue;
        size_t q = p + 2;
        int sign = q < L->n && (s[q] == '-' || s[q] == '+') ? s[q++] : 0;
        q = sd_jl_skip_space(s, L->n, q);
        if (q + 6 > L->n || memcmp(s + q, "endraw", 6)) continue;
        size_t e = sd_jl_block_end(L, sd_jl_skip_space(s, L->n, q + 6), '%');
        if (!e) continue;
        if (sd_jl_data(L, i, p, sign, 1)) return -1;
        L->line_starting = s[e - 1] == '\n';
        L->pos = e;
        return 0;
    }
    return sd_jl_fail(L, i, "missing end of a raw block ('{%% endraw %%}')", NULL);
}

/* A raw begin tag at p ("{%", sign, whitespace, "raw", whitespace, "-%}"+ws or "%}"): the
 * position after it, 0 if it is not one. */
static size_t sd_jl_raw_begin(const sd_jlexer *L, size_t p) {
    const char *s = L->s;
    size_t q = p + 2;
    if (q < L->n && (s[q] == '-' || s[q] == '+')) q++;
    q = sd_jl_skip_space(s, L->n, q);
    if (q + 3 > L->n || memcmp(s + q, "raw", 3)) return 0;
    q = sd_jl_skip_space(s, L->n, q + 3);
    if (q + 2 < L->n && s[q] == '-' && s[q + 1] == '%' && s[q + 2] == '}') return sd_jl_skip_space(s, L->n, q + 3);
    if (q + 1 < L->n && s[q] == '%' && s[q + 1] == '}') return q + 2;
    return 0;
}

static int sd_jl_comment(sd_jlexer *L, size_t i) {
    for (size_t p = i; p < L->n; p++) {
        size_t e = sd_jl_block_end(L, p, '#');
        if (e) {
            L->line_starting = L->s[e - 1] == '\n';
            L->pos = e;
            return 0;
        }
    }
    return sd_jl_fail(L, i, "missing end of a comment ('#}')", NULL);
}

static int sd_jl_root(sd_jlexer *L) {
    const char *s = L->s;
    while (L->pos < L->n) {
        size_t p = L->pos;
        while (p + 1 < L->n && !(s[p] == '{' && (s[p + 1] == '{' || s[p + 1] == '%' || s[p + 1] == '#'))) p++;
        if (p + 1 >= L->n) { /* data to the end */
            sd_jtok *t = sd_jl_push(L, SD_JK_DATA, L->pos);
            if (!t) return -1;
            t->p = s + L->pos;
            t->n = L->n - L->pos;
            L->pos = L->n;
            break;
        }
        char kind = s[p + 1];
        int sign = p + 2 < L->n && (s[p + 2] == '-' || s[p + 2] == '+') ? s[p + 2] : 0;
        size_t raw = kind == '%' ? sd_jl_raw_begin(L, p) : 0;
        if (sd_jl_data(L, L->pos, p, sign, kind != '{')) return -1;
        L->line_starting = 0;
        size_t after = p + 2 + (sign ? 1 : 0);
        int r;
        if (raw) {
            r = sd_jl_raw(L, raw);
        } else if (kind == '#') {
            r = sd_jl_comment(L, after);
        } else {
            if (!sd_jl_push(L, kind == '%' ? SD_JK_BLOCK_BEGIN : SD_JK_VAR_BEGIN, p)) return -1;
            L->pos = after;
            r = sd_jl_tag(L, kind == '%');
        }
        if (r) return -1;
    }
    return sd_jl_push(L, SD_JK_EOF, L->n) ? 0 : -1;
}

int sd_jlex(sd_jarena *arena, const char *src, size_t n, sd_jtok **toks, size_t *ntok, char *err, size_t errcap) {
    sd_jlexer L = {0};
    L.a = arena;
    L.err = err;
    L.errcap = errcap;
    L.line = 1;
    L.line_starting = 1;
    char *s = sd_ja_alloc(arena, n + 1);
    if (!s) return -1;
    size_t m = 0; /* \r\n and \r -> \n */
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            s[m++] = src[i];
        }
    }
    if (m && s[m - 1] == '\n') m--; /* keep_trailing_newline=False */
    s[m] = '\0';
    L.s = s;
    L.n = m;
    int r = sd_jl_root(&L);
    if (r) {
        sd_free(L.t);
        return -1;
    }
    *toks = L.t;
    *ntok = L.nt;
    return 0;
}

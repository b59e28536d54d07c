/* sd_regex.c — a regular expression as a lazily built byte DFA (core/sd_regex.h):
 * parse (AST, bounded nesting) -> Thompson NFA over byte ranges (pruned to the states that can
 * reach acceptance) -> DFA states interned on demand. */
#include "sd_regex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_utf8.h"

#define RX_INF (-1)
#define RX_MAX_CP 0x10FFFFu
#define RX_UNKNOWN (-3) /* a transition not computed yet */

/* ------------------------------------------------------------------ AST */

enum { RX_EMPTY, RX_SET, RX_CAT, RX_ALT, RX_REP };

typedef struct rx_node {
    uint8_t kind;
    int32_t a, b;        /* SET: first range, range count; REP: min, max (RX_INF) */
    int32_t first, last; /* children of CAT, ALT, REP (one) */
    int32_t next, prev;  /* siblings */
    int32_t size;        /* NFA states it builds, saturated at SD_REGEX_MAX_NFA + 1 */
} rx_node;

typedef struct rx_range {
    uint32_t lo, hi;
} rx_range;

typedef struct rx_parser {
    const unsigned char *p;
    size_t n, i;
    rx_node *nodes;
    int32_t n_nodes, cap_nodes;
    rx_range *rg; /* the code-point ranges of every SET node */
    int32_t n_rg, cap_rg;
    rx_range *tmp; /* the class being collected */
    int32_t n_tmp, cap_tmp;
    int32_t depth;
    sd_errbuf *eb;
    specdec_status st;
} rx_parser;

/* Records the first error; returns -1 (no node). */
static int32_t rx_err(rx_parser *P, specdec_status st, const char *fmt, ...) SD_PRINTF(3, 4);
static int32_t rx_err(rx_parser *P, specdec_status st, const char *fmt, ...) {
    if (P->st == SPECDEC_OK) {
        char msg[SD_ERRBUF_SIZE];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        P->st = sd_fail(P->eb, st, "regex: %s", msg);
    }
    return -1;
}

static int rx_grow(void **p, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return 1;
    int32_t c = *cap ? *cap : 16;
    while (c < need) c = c > INT32_MAX / 2 ? INT32_MAX : 2 * c;
    void *q = sd_realloc(*p, (size_t)c * elem);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}

static int32_t rx_sat(int64_t v) { return v > SD_REGEX_MAX_NFA ? SD_REGEX_MAX_NFA + 1 : (int32_t)v; }

static int32_t rx_new(rx_parser *P, int kind) {
    if (!rx_grow((void **)&P->nodes, &P->cap_nodes, P->n_nodes + 1, sizeof(rx_node)))
        return rx_err(P, SPECDEC_ERR_OUT_OF_MEMORY, "out of memory for the syntax tree");
    rx_node *x = &P->nodes[P->n_nodes];
    memset(x, 0, sizeof *x);
    x->kind = (uint8_t)kind;
    x->first = x->last = x->next = x->prev = -1;
    return P->n_nodes++;
}

/* Checks the NFA size of node x (just completed) against the limit. */
static int32_t rx_check_size(rx_parser *P, int32_t x) {
    if (P->nodes[x].size > SD_REGEX_MAX_NFA)
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED,
                      "the pattern needs more than %d automaton states (counted repetitions expand) at byte %zu",
                      SD_REGEX_MAX_NFA, P->i);
    return x;
}

static void rx_append(rx_parser *P, int32_t parent, int32_t child) {
    rx_node *p = &P->nodes[parent], *c = &P->nodes[child];
    c->prev = p->last;
    if (p->last >= 0) P->nodes[p->last].next = child;
    else p->first = child;
    p->last = child;
}

/* ------------------------------------------------- code points -> UTF-8 byte ranges */

typedef struct rx_seq {
    uint8_t lo[4], hi[4];
    int n;
} rx_seq;

typedef int (*rx_emit_fn)(void *ctx, const rx_seq *q);

static int rx_cp_len(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

/* Calls emit for byte-range sequences whose products are exactly the UTF-8 encodings of the
 * code points [lo, hi] (no surrogates inside). Split first by encoded length, then until each
 * piece has, for every trailing byte, either equal prefixes or a full 0x80..0xBF span. */
static int rx_utf8_seqs(uint32_t lo, uint32_t hi, rx_emit_fn emit, void *ctx) {
    static const uint32_t len_max[3] = {0x7F, 0x7FF, 0xFFFF};
    rx_range stack[64];
    int sp = 0;
    stack[sp++] = (rx_range){lo, hi};
    while (sp > 0) {
        uint32_t a = stack[sp - 1].lo, b = stack[sp - 1].hi;
        sp--;
        int split = 0;
        for (int k = 0; k < 3 && !split; k++)
            if (a <= len_max[k] && b > len_max[k]) {
                stack[sp++] = (rx_range){len_max[k] + 1, b};
                stack[sp++] = (rx_range){a, len_max[k]};
                split = 1;
            }
        const int n = rx_cp_len(a);
        for (int i = 1; i < n && !split; i++) {
            const uint32_t m = ((uint32_t)1 << (6 * i)) - 1;
            if ((a & ~m) == (b & ~m)) continue;
            if ((a & m) != 0) {
                stack[sp++] = (rx_range){(a | m) + 1, b};
                stack[sp++] = (rx_range){a, a | m};
                split = 1;
            } else if ((b & m) != m) {
                stack[sp++] = (rx_range){b & ~m, b};
                stack[sp++] = (rx_range){a, (b & ~m) - 1};
                split = 1;
            }
        }
        if (split) continue;
        char ea[4], eb[4];
        rx_seq q;
        q.n = (int)sd_utf8_put(ea, (int32_t)a);
        (void)sd_utf8_put(eb, (int32_t)b);
        for (int j = 0; j < q.n; j++) {
            q.lo[j] = (uint8_t)ea[j];
            q.hi[j] = (uint8_t)eb[j];
        }
        if (emit(ctx, &q)) return 1;
    }
    return 0;
}

typedef struct rx_count {
    int64_t states, seqs;
} rx_count;

static int rx_count_emit(void *ctx, const rx_seq *q) {
    rx_count *c = ctx;
    c->states += q->n;
    c->seqs++;
    return 0;
}

/* NFA states of a set: its sequences' byte states plus the splits joining them; an empty
 * set is one state with no way out. */
static int32_t rx_set_size(const rx_range *r, int32_t n) {
    rx_count c = {0, 0};
    for (int32_t k = 0; k < n; k++) (void)rx_utf8_seqs(r[k].lo, r[k].hi, rx_count_emit, &c);
    return c.seqs ? rx_sat(c.states + c.seqs - 1) : 1;
}

/* ------------------------------------------------------------- classes */

static int rx_tmp_add(rx_parser *P, uint32_t lo, uint32_t hi) {
    if (!rx_grow((void **)&P->tmp, &P->cap_tmp, P->n_tmp + 1, sizeof(rx_range))) {
        rx_err(P, SPECDEC_ERR_OUT_OF_MEMORY, "out of memory for a class");
        return 0;
    }
    P->tmp[P->n_tmp++] = (rx_range){lo, hi};
    return 1;
}

/* Adds \d \s \w (ASCII, as re.ASCII) or, upper case, their complements. */
static int rx_tmp_add_class(rx_parser *P, char c) {
    static const rx_range d[] = {{0x30, 0x39}};
    static const rx_range s[] = {{0x09, 0x0D}, {0x20, 0x20}};
    static const rx_range w[] = {{0x30, 0x39}, {0x41, 0x5A}, {0x5F, 0x5F}, {0x61, 0x7A}};
    const char l = (char)(c | 0x20);
    const rx_range *r = l == 'd' ? d : l == 's' ? s : w;
    const int n = l == 'd' ? 1 : l == 's' ? 2 : 4;
    if (c == l) {
        for (int k = 0; k < n; k++)
            if (!rx_tmp_add(P, r[k].lo, r[k].hi)) return 0;
        return 1;
    }
    uint32_t from = 0;
    for (int k = 0; k < n; k++) {
        if (r[k].lo > from && !rx_tmp_add(P, from, r[k].lo - 1)) return 0;
        from = r[k].hi + 1;
    }
    return rx_tmp_add(P, from, RX_MAX_CP);
}

static int rx_range_cmp(const void *x, const void *y) {
    const rx_range *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Sorts and merges tmp, complements it when negate, removes the surrogates, and appends the
 * result to rg as a new SET node. */
static int32_t rx_set_node(rx_parser *P, int negate) {
    qsort(P->tmp, (size_t)P->n_tmp, sizeof(rx_range), rx_range_cmp);
    int32_t m = 0;
    for (int32_t k = 0; k < P->n_tmp; k++) {
        if (m > 0 && P->tmp[k].lo <= P->tmp[m - 1].hi + 1) {
            if (P->tmp[k].hi > P->tmp[m - 1].hi) P->tmp[m - 1].hi = P->tmp[k].hi;
        } else {
            P->tmp[m++] = P->tmp[k];
        }
    }
    /* worst case: every range split by the complement and by the surrogate gap */
    if (!rx_grow((void **)&P->rg, &P->cap_rg, P->n_rg + m + 2, sizeof(rx_range)))
        return rx_err(P, SPECDEC_ERR_OUT_OF_MEMORY, "out of memory for a class");
    const int32_t x = rx_new(P, RX_SET);
    if (x < 0) return -1;
    const int32_t first = P->n_rg;
    uint32_t from = 0;
    for (int32_t k = 0; k <= m; k++) {
        uint32_t lo, hi;
        if (negate) {
            if (k < m && P->tmp[k].lo == 0) {
                from = P->tmp[k].hi + 1;
                continue;
            }
            lo = from;
            hi = k < m ? P->tmp[k].lo - 1 : RX_MAX_CP;
            if (k < m) from = P->tmp[k].hi + 1;
            if (lo > hi || lo > RX_MAX_CP) continue;
        } else {
            if (k == m) break;
            lo = P->tmp[k].lo;
            hi = P->tmp[k].hi;
        }
        /* cut out U+D800..U+DFFF */
        if (lo < 0xD800 && hi >= 0xD800) P->rg[P->n_rg++] = (rx_range){lo, 0xD7FF};
        if (hi > 0xDFFF) P->rg[P->n_rg++] = (rx_range){lo > 0xE000 ? lo : 0xE000, hi};
        else if (hi < 0xD800) P->rg[P->n_rg++] = (rx_range){lo, hi};
    }
    P->n_tmp = 0;
    P->nodes[x].a = first;
    P->nodes[x].b = P->n_rg - first;
    P->nodes[x].size = rx_set_size(P->rg + first, P->nodes[x].b);
    return rx_check_size(P, x);
}

/* ------------------------------------------------------------- escapes */

typedef struct rx_esc {
    int cls;     /* 'd' 's' 'w' 'D' 'S' 'W', or 0 for a code point */
    uint32_t cp; /* the code point */
} rx_esc;

static int rx_hex(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int rx_is_oct(const rx_parser *P, size_t at) { return at < P->n && P->p[at] >= '0' && P->p[at] <= '7'; }

/* \xHH \uHHHH \UHHHHHHHH at P->i (just past the letter): exactly `digits` hex digits. */
static int rx_esc_hex(rx_parser *P, size_t at, int digits, rx_esc *e) {
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        const int h = P->i < P->n ? rx_hex(P->p[P->i]) : -1;
        if (h < 0) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "incomplete escape \\%c at byte %zu", P->p[at + 1], at);
        v = v * 16 + (uint32_t)h;
        P->i++;
    }
    if (v > RX_MAX_CP) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "bad escape (above U+10FFFF) at byte %zu", at);
    e->cp = v;
    return 0;
}

/* Octal: the digits at P->i (the first already known octal), at most `most` of them. */
static int rx_esc_oct(rx_parser *P, size_t at, int most, rx_esc *e) {
    uint32_t v = 0;
    for (int k = 0; k < most && rx_is_oct(P, P->i); k++) v = v * 8 + (uint32_t)(P->p[P->i++] - '0');
    if (v > 0377) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "octal escape value outside \\0-\\377 at byte %zu", at);
    e->cp = v;
    return 0;
}

/* The digit escapes: \0.. octal in and out of classes, \N.. octal in a class; outside one a
 * three-digit octal, else a backreference. */
static int rx_esc_digit(rx_parser *P, size_t at, int in_class, rx_esc *e) {
    const unsigned char c = P->p[P->i];
    if (c == '0') return rx_esc_oct(P, at, 3, e);
    if (in_class) {
        if (c >= '8') return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "bad escape \\%c at byte %zu", c, at);
        return rx_esc_oct(P, at, 3, e);
    }
    if (c <= '7' && rx_is_oct(P, P->i + 1) && rx_is_oct(P, P->i + 2)) return rx_esc_oct(P, at, 3, e);
    return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "backreferences (\\%c) are not supported (byte %zu)", c, at);
}

/* The escape at P->i (a backslash); leaves P->i past it. Returns 0 or -1 (error recorded). */
static int rx_escape(rx_parser *P, int in_class, rx_esc *e) {
    const size_t at = P->i++;
    e->cls = 0;
    if (P->i >= P->n) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "trailing backslash at byte %zu", at);
    const unsigned char c = P->p[P->i];
    if (c >= '0' && c <= '9') return rx_esc_digit(P, at, in_class, e);
    P->i++;
    switch (c) {
    case 'd': case 'D': case 's': case 'S': case 'w': case 'W': e->cls = c; return 0;
    case 'n': e->cp = '\n'; return 0;
    case 't': e->cp = '\t'; return 0;
    case 'r': e->cp = '\r'; return 0;
    case 'f': e->cp = '\f'; return 0;
    case 'v': e->cp = '\v'; return 0;
    case 'a': e->cp = 7; return 0;
    case 'x': return rx_esc_hex(P, at, 2, e);
    case 'u': return rx_esc_hex(P, at, 4, e);
    case 'U': return rx_esc_hex(P, at, 8, e);
    case 'N': return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "named characters \\N{...} are not supported (byte %zu)", at);
    default: break;
    }
    if (in_class && c == 'b') {
        e->cp = 8;
        return 0;
    }
    if (!in_class && (c == 'b' || c == 'B' || c == 'A' || c == 'Z'))
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "the anchor \\%c is not supported (byte %zu)", c, at);
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
        return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "bad escape \\%c at byte %zu", c, at);
    int32_t cp;
    P->i += sd_utf8_next((const char *)P->p + at + 1, P->n - at - 1, &cp) - 1;
    e->cp = (uint32_t)cp;
    return 0;
}

/* --------------------------------------------------------------- parser */

static int32_t rx_parse_alt(rx_parser *P);

/* One class member at P->i into *e (a code point or a predefined class). */
static int rx_class_member(rx_parser *P, rx_esc *e) {
    if (P->p[P->i] == '\\') return rx_escape(P, 1, e);
    int32_t cp;
    P->i += sd_utf8_next((const char *)P->p + P->i, P->n - P->i, &cp);
    e->cls = 0;
    e->cp = (uint32_t)cp;
    return 0;
}

/* [...] at P->i, Python's rules: ']' first is a literal, '-' before ']' is a literal, a range's
 * ends must be single characters in order. */
static int32_t rx_parse_class(rx_parser *P) {
    const size_t at = P->i++;
    int negate = 0;
    if (P->i < P->n && P->p[P->i] == '^') negate = 1, P->i++;
    const size_t first = P->i;
    P->n_tmp = 0;
    for (;;) {
        if (P->i >= P->n) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "unterminated character set at byte %zu", at);
        if (P->p[P->i] == ']' && P->i != first) break;
        const size_t m_at = P->i;
        rx_esc a, b;
        if (rx_class_member(P, &a)) return -1;
        if (P->i < P->n && P->p[P->i] == '-' && P->i + 1 < P->n && P->p[P->i + 1] != ']') {
            P->i++;
            if (rx_class_member(P, &b)) return -1;
            if (a.cls || b.cls || b.cp < a.cp)
                return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "bad character range at byte %zu", m_at);
            if (!rx_tmp_add(P, a.cp, b.cp)) return -1;
        } else if (P->i + 1 >= P->n && P->i < P->n && P->p[P->i] == '-') {
            return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "unterminated character set at byte %zu", at);
        } else if (a.cls ? !rx_tmp_add_class(P, (char)a.cls) : !rx_tmp_add(P, a.cp, a.cp)) {
            return -1;
        }
    }
    P->i++;
    return rx_set_node(P, negate);
}

/* A set of one code point, of a predefined class, or '.'. */
static int32_t rx_simple_set(rx_parser *P, const rx_esc *e, int dot) {
    P->n_tmp = 0;
    int ok = dot ? rx_tmp_add(P, 0, 9) && rx_tmp_add(P, 11, RX_MAX_CP)
                 : e->cls ? rx_tmp_add_class(P, (char)e->cls) : rx_tmp_add(P, e->cp, e->cp);
    return ok ? rx_set_node(P, 0) : -1;
}

/* The group name of (?P<name> or (?<name> at P->i; checks it is an identifier. */
static int rx_group_name(rx_parser *P, size_t at) {
    const size_t start = P->i;
    while (P->i < P->n && P->p[P->i] != '>') {
        const unsigned char c = P->p[P->i];
        const int ok = c >= 0x80 || c == '_' || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
                       (c >= '0' && c <= '9' && P->i > start);
        if (!ok) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "bad character in group name at byte %zu", P->i);
        P->i++;
    }
    if (P->i >= P->n) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "missing >, unterminated name at byte %zu", at);
    if (P->i == start) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "missing group name at byte %zu", at);
    P->i++;
    return 0;
}

/* After "(?" at P->i: the group kinds accepted (0: a plain group follows; 1: a comment,
 * skipped) or an error. */
static int rx_group_ext(rx_parser *P, size_t at) {
    const unsigned char c = P->i < P->n ? P->p[P->i] : 0;
    const unsigned char d = P->i + 1 < P->n ? P->p[P->i + 1] : 0;
    if (c == ':') return P->i++, 0;
    if (c == 'P' && d == '<') return P->i += 2, rx_group_name(P, at);
    if (c == 'P' && d == '=')
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "backreferences (?P=name) are not supported (byte %zu)", at);
    if (c == '<' && (d == '=' || d == '!'))
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "lookbehind (?<%c...) is not supported (byte %zu)", d, at);
    if (c == '<') return P->i++, rx_group_name(P, at);
    if (c == '=' || c == '!')
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "lookahead (?%c...) is not supported (byte %zu)", c, at);
    if (c == '>') return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "atomic groups (?>...) are not supported (byte %zu)", at);
    if (c == '(')
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "conditional groups (?(...)...) are not supported (byte %zu)", at);
    if (c == '#') {
        while (P->i < P->n && P->p[P->i] != ')') P->i++;
        if (P->i >= P->n) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "missing ), unterminated comment at byte %zu", at);
        P->i++;
        return 1;
    }
    if (c && strchr("aiLmsux-", c))
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "inline flags (?%c...) are not supported (byte %zu)", c, at);
    return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "unknown extension (?%c at byte %zu", c ? c : '?', at);
}

#define RX_ATOM_ANCHOR 1
#define RX_ATOM_COMMENT 2

/* A group at P->i ('('). *flags gets RX_ATOM_COMMENT for a comment (an EMPTY node). */
static int32_t rx_parse_group(rx_parser *P, int *flags) {
    const size_t at = P->i++;
    if (P->i < P->n && P->p[P->i] == '?') {
        P->i++;
        const int k = rx_group_ext(P, at);
        if (k < 0) return -1;
        if (k == 1) {
            *flags |= RX_ATOM_COMMENT;
            return rx_new(P, RX_EMPTY);
        }
    }
    if (P->depth >= SD_REGEX_MAX_DEPTH)
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "groups nested deeper than %d at byte %zu", SD_REGEX_MAX_DEPTH, at);
    P->depth++;
    const int32_t x = rx_parse_alt(P);
    P->depth--;
    if (x < 0) return -1;
    if (P->i >= P->n || P->p[P->i] != ')')
        return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "missing ), unterminated subpattern at byte %zu", at);
    P->i++;
    return x;
}

/* Reads the decimal digits at P->i, saturated. */
static int64_t rx_digits(rx_parser *P, int *any) {
    int64_t v = 0;
    *any = 0;
    while (P->i < P->n && P->p[P->i] >= '0' && P->p[P->i] <= '9') {
        v = v * 10 + (P->p[P->i++] - '0');
        if (v > INT32_MAX) v = INT32_MAX;
        *any = 1;
    }
    return v;
}

/* A quantifier at P->i: 1 (consumed; *lo, *hi set, hi RX_INF for none) or 0 (none, P->i
 * unchanged: a '{' that does not form {n}, {n,}, {,m}, {n,m} or {,} is a literal). */
static int rx_quant(rx_parser *P, int64_t *lo, int64_t *hi) {
    if (P->i >= P->n) return 0;
    const unsigned char c = P->p[P->i];
    if (c == '*' || c == '+' || c == '?') {
        *lo = c == '+';
        *hi = c == '?' ? 1 : RX_INF;
        P->i++;
        return 1;
    }
    if (c != '{') return 0;
    const size_t at = P->i++;
    int any_lo, any_hi = 0;
    *lo = rx_digits(P, &any_lo);
    *hi = *lo;
    if (P->i < P->n && P->p[P->i] == ',') {
        P->i++;
        *hi = rx_digits(P, &any_hi);
        if (!any_hi) *hi = RX_INF;
    } else if (!any_lo) {
        P->i = at;
        return 0;
    }
    if (P->i >= P->n || P->p[P->i] != '}') {
        P->i = at;
        return 0;
    }
    P->i++;
    return 1;
}

/* One atom at P->i (not '|', ')' or the end). */
static int32_t rx_parse_atom(rx_parser *P, int *flags) {
    const size_t at = P->i;
    const unsigned char c = P->p[at];
    int64_t lo, hi;
    rx_esc e = {0, 0};
    switch (c) {
    case '(': return rx_parse_group(P, flags);
    case '[': return rx_parse_class(P);
    case '.': P->i++; return rx_simple_set(P, &e, 1);
    case '^':
    case '$':
        if ((c == '^' && at != 0) || (c == '$' && at + 1 != P->n))
            return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "'%c' is supported only at the %s of the pattern (byte %zu)", c,
                          c == '^' ? "start" : "end", at);
        P->i++;
        *flags |= RX_ATOM_ANCHOR;
        return rx_new(P, RX_EMPTY);
    case '*':
    case '+':
    case '?':
    case '{':
        if (rx_quant(P, &lo, &hi)) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "nothing to repeat at byte %zu", at);
        break;
    case '\\':
        if (rx_escape(P, 0, &e)) return -1;
        return rx_simple_set(P, &e, 0);
    default: break;
    }
    int32_t cp;
    P->i += sd_utf8_next((const char *)P->p + at, P->n - at, &cp);
    e.cp = (uint32_t)cp;
    return rx_simple_set(P, &e, 0);
}

/* NFA states of x{lo,hi} (hi RX_INF: unbounded). */
static int32_t rx_rep_size(int32_t s, int64_t lo, int64_t hi) {
    const int64_t body = lo * s;
    return rx_sat(hi == RX_INF ? body + s + 1 : body + (hi - lo) * (s + 1));
}

/* An atom and its quantifier. */
static int32_t rx_parse_item(rx_parser *P) {
    int flags = 0;
    int32_t x = rx_parse_atom(P, &flags);
    if (x < 0) return -1;
    const size_t at = P->i;
    int64_t lo, hi;
    if (!rx_quant(P, &lo, &hi)) return x;
    if (flags & RX_ATOM_ANCHOR) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "nothing to repeat at byte %zu", at);
    if (flags & RX_ATOM_COMMENT)
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "a quantifier right after a comment (?#...) at byte %zu", at);
    if (hi != RX_INF && hi < lo)
        return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "min repeat greater than max repeat at byte %zu", at);
    if (lo > SD_REGEX_MAX_REPEAT || hi > SD_REGEX_MAX_REPEAT)
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "repeat count above %d at byte %zu", SD_REGEX_MAX_REPEAT, at);
    if (P->i < P->n && P->p[P->i] == '+')
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "possessive quantifiers are not supported (byte %zu)", P->i);
    if (P->i < P->n && P->p[P->i] == '?') P->i++; /* lazy: the same language */
    int64_t l2, h2;
    const size_t again = P->i;
    if (rx_quant(P, &l2, &h2)) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "multiple repeat at byte %zu", again);
    const int32_t r = rx_new(P, RX_REP);
    if (r < 0) return -1;
    P->nodes[r].a = (int32_t)lo;
    P->nodes[r].b = (int32_t)hi;
    P->nodes[r].size = rx_rep_size(P->nodes[x].size, lo, hi);
    rx_append(P, r, x);
    return rx_check_size(P, r);
}

/* A concatenation up to '|', ')' or the end. */
static int32_t rx_parse_cat(rx_parser *P) {
    int32_t cat = -1, only = -1;
    while (P->i < P->n && P->p[P->i] != '|' && P->p[P->i] != ')') {
        const int32_t x = rx_parse_item(P);
        if (x < 0) return -1;
        if (only < 0 && cat < 0) {
            only = x;
            continue;
        }
        if (cat < 0) {
            if ((cat = rx_new(P, RX_CAT)) < 0) return -1;
            rx_append(P, cat, only);
            P->nodes[cat].size = P->nodes[only].size;
        }
        rx_append(P, cat, x);
        P->nodes[cat].size = rx_sat((int64_t)P->nodes[cat].size + P->nodes[x].size);
        if (rx_check_size(P, cat) < 0) return -1;
    }
    if (cat >= 0) return cat;
    return only >= 0 ? only : rx_new(P, RX_EMPTY);
}

/* An alternation up to ')' or the end. */
static int32_t rx_parse_alt(rx_parser *P) {
    int32_t x = rx_parse_cat(P), alt = -1;
    if (x < 0) return -1;
    while (P->i < P->n && P->p[P->i] == '|') {
        P->i++;
        const int32_t y = rx_parse_cat(P);
        if (y < 0) return -1;
        if (alt < 0) {
            if ((alt = rx_new(P, RX_ALT)) < 0) return -1;
            rx_append(P, alt, x);
            P->nodes[alt].size = P->nodes[x].size;
        }
        rx_append(P, alt, y);
        P->nodes[alt].size = rx_sat((int64_t)P->nodes[alt].size + P->nodes[y].size + 1);
        if (rx_check_size(P, alt) < 0) return -1;
    }
    return alt >= 0 ? alt : x;
}

/* ------------------------------------------------------------------ NFA */

enum { RX_S_RANGE, RX_S_SPLIT, RX_S_MATCH, RX_S_FAIL };

typedef struct rx_state {
    uint8_t type, lo, hi; /* RANGE: bytes lo..hi -> out; SPLIT: epsilon to out and out2 */
    int32_t out, out2;
} rx_state;

typedef struct rx_nfa {
    rx_state *s;
    int32_t n, cap;
    uint8_t *live; /* 1: can reach MATCH */
    int32_t start;
} rx_nfa;

static int32_t rx_add_state(rx_nfa *N, int type, int lo, int hi, int32_t out, int32_t out2) {
    if (N->n >= N->cap) return -1; /* cannot happen: cap = the AST's exact size */
    N->s[N->n] = (rx_state){(uint8_t)type, (uint8_t)lo, (uint8_t)hi, out, out2};
    return N->n++;
}

typedef struct rx_set_build {
    rx_nfa *N;
    int32_t next, acc;
} rx_set_build;

static int rx_build_emit(void *ctx, const rx_seq *q) {
    rx_set_build *b = ctx;
    int32_t s = b->next;
    for (int j = q->n - 1; j >= 0 && s >= 0; j--) s = rx_add_state(b->N, RX_S_RANGE, q->lo[j], q->hi[j], s, -1);
    if (s >= 0 && b->acc >= 0) s = rx_add_state(b->N, RX_S_SPLIT, 0, 0, s, b->acc);
    b->acc = s;
    return s < 0;
}

/* The NFA of AST node x followed by state next; returns its entry state (-1: capacity). */
static int32_t rx_build(const rx_parser *P, rx_nfa *N, int32_t x, int32_t next) {
    const rx_node *d = &P->nodes[x];
    int32_t acc = next;
    if (d->kind == RX_SET) {
        rx_set_build b = {N, next, -1};
        for (int32_t k = 0; k < d->b; k++)
            if (rx_utf8_seqs(P->rg[d->a + k].lo, P->rg[d->a + k].hi, rx_build_emit, &b)) return -1;
        return b.acc >= 0 ? b.acc : rx_add_state(N, RX_S_FAIL, 0, 0, -1, -1);
    }
    if (d->kind == RX_CAT) {
        for (int32_t c = d->last; c >= 0 && acc >= 0; c = P->nodes[c].prev) acc = rx_build(P, N, c, acc);
        return acc;
    }
    if (d->kind == RX_ALT) {
        acc = rx_build(P, N, d->last, next);
        for (int32_t c = P->nodes[d->last].prev; c >= 0 && acc >= 0; c = P->nodes[c].prev) {
            const int32_t s = rx_build(P, N, c, next);
            acc = s < 0 ? -1 : rx_add_state(N, RX_S_SPLIT, 0, 0, s, acc);
        }
        return acc;
    }
    if (d->kind != RX_REP) return next; /* EMPTY */
    if (d->b == RX_INF) {
        const int32_t loop = rx_add_state(N, RX_S_SPLIT, 0, 0, -1, next);
        const int32_t body = loop < 0 ? -1 : rx_build(P, N, d->first, loop);
        if (body < 0) return -1;
        N->s[loop].out = body;
        acc = loop;
    }
    for (int32_t k = 0; d->b != RX_INF && k < d->b - d->a && acc >= 0; k++) {
        const int32_t opt = rx_add_state(N, RX_S_SPLIT, 0, 0, -1, next);
        const int32_t body = opt < 0 ? -1 : rx_build(P, N, d->first, acc);
        if (body < 0) return -1;
        N->s[opt].out = body;
        acc = opt;
    }
    for (int32_t k = 0; k < d->a && acc >= 0; k++) acc = rx_build(P, N, d->first, acc);
    return acc;
}

/* live[s] = 1 iff MATCH is reachable from s: a breadth-first search over reversed edges. */
static int rx_prune(rx_nfa *N) {
    const int32_t n = N->n;
    int32_t *deg = sd_calloc((size_t)n + 1, sizeof *deg);
    int32_t *src = sd_malloc(2 * (size_t)n * sizeof *src + 1);
    int32_t *queue = sd_malloc((size_t)n * sizeof *queue + 1);
    N->live = sd_calloc((size_t)n, 1);
    int ok = deg && src && queue && N->live;
    for (int32_t s = 0; ok && s < n; s++) {
        if (N->s[s].type == RX_S_RANGE || N->s[s].type == RX_S_SPLIT) deg[N->s[s].out + 1]++;
        if (N->s[s].type == RX_S_SPLIT) deg[N->s[s].out2 + 1]++;
    }
    for (int32_t s = 0; ok && s < n; s++) deg[s + 1] += deg[s]; /* deg[t] = first edge into t */
    for (int32_t s = 0; ok && s < n; s++) {
        if (N->s[s].type == RX_S_RANGE || N->s[s].type == RX_S_SPLIT) src[deg[N->s[s].out]++] = s;
        if (N->s[s].type == RX_S_SPLIT) src[deg[N->s[s].out2]++] = s;
    }
    /* deg[t] now = end of t's edges; t's start = deg[t - 1] (0 for t = 0) */
    int32_t qh = 0, qt = 0;
    for (int32_t s = 0; ok && s < n; s++)
        if (N->s[s].type == RX_S_MATCH) N->live[s] = 1, queue[qt++] = s;
    while (ok && qh < qt) {
        const int32_t t = queue[qh++];
        for (int32_t e = t ? deg[t - 1] : 0; e < deg[t]; e++)
            if (!N->live[src[e]]) N->live[src[e]] = 1, queue[qt++] = src[e];
    }
    sd_free(deg);
    sd_free(src);
    sd_free(queue);
    return ok;
}

/* ------------------------------------------------------------- lazy DFA */

typedef struct rx_fsm {
    sd_fsm base;
    rx_nfa nfa;
    uint8_t cls[256]; /* byte -> equivalence class */
    int32_t n_cls;
    int32_t max_states, n_states, cap_states;
    size_t *set_off;  /* per state: its NFA ids at pool[set_off .. set_off + set_len) */
    int32_t *set_len;
    uint8_t *accept;
    int32_t *trans;   /* per state n_cls entries: a state id, SD_FSM_DEAD or RX_UNKNOWN */
    int32_t *pool;
    size_t pool_len, pool_cap;
    int32_t *hash;    /* open addressing: state id + 1, 0 empty */
    size_t hash_cap;
    int32_t *stack, *buf; /* closure work space, n NFA states each */
    uint32_t *mark;
    uint32_t gen;
    size_t bytes; /* what the DFA holds, against SD_REGEX_MAX_DFA_BYTES */
} rx_fsm;

static uint64_t rx_hash_set(const int32_t *v, int32_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    for (int32_t k = 0; k < n; k++) {
        h ^= (uint64_t)(uint32_t)v[k];
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    return h;
}

static int rx_hash_insert(rx_fsm *f, int32_t id) {
    const size_t mask = f->hash_cap - 1;
    size_t h = (size_t)rx_hash_set(f->pool + f->set_off[id], f->set_len[id]) & mask;
    while (f->hash[h]) h = (h + 1) & mask;
    f->hash[h] = id + 1;
    return 1;
}

/* Doubles the hash table (load <= 1/2). 0 on failure (the old table kept). */
static int rx_hash_grow(rx_fsm *f) {
    const size_t cap = f->hash_cap ? 2 * f->hash_cap : 1024;
    const size_t add = cap * sizeof(int32_t);
    if (f->bytes + add > SD_REGEX_MAX_DFA_BYTES) return 0;
    int32_t *h = sd_calloc(cap, sizeof *h);
    if (!h) return 0;
    f->bytes += add - f->hash_cap * sizeof(int32_t);
    sd_free(f->hash);
    f->hash = h;
    f->hash_cap = cap;
    for (int32_t id = 0; id < f->n_states; id++) rx_hash_insert(f, id);
    return 1;
}

/* Room for one more state with a set of n ids. 0: no room (limit or memory). */
static int rx_reserve(rx_fsm *f, int32_t n) {
    const size_t per = sizeof(size_t) + sizeof(int32_t) + 1 + (size_t)f->n_cls * sizeof(int32_t);
    if (f->bytes + per + (size_t)n * sizeof(int32_t) > SD_REGEX_MAX_DFA_BYTES) return 0;
    if (2 * ((size_t)f->n_states + 1) > f->hash_cap && !rx_hash_grow(f)) return 0;
    if (f->n_states >= f->cap_states) {
        const int32_t c = f->cap_states ? 2 * f->cap_states : 64;
        size_t *o = sd_realloc(f->set_off, (size_t)c * sizeof *o);
        if (o) f->set_off = o;
        int32_t *l = o ? sd_realloc(f->set_len, (size_t)c * sizeof *l) : NULL;
        if (l) f->set_len = l;
        uint8_t *a = l ? sd_realloc(f->accept, (size_t)c) : NULL;
        if (a) f->accept = a;
        int32_t *t = a ? sd_realloc(f->trans, (size_t)c * (size_t)f->n_cls * sizeof *t) : NULL;
        if (!t) return 0;
        f->trans = t;
        f->cap_states = c;
    }
    if (f->pool_len + (size_t)n > f->pool_cap) {
        size_t c = f->pool_cap ? 2 * f->pool_cap : 4096;
        while (c < f->pool_len + (size_t)n) c *= 2;
        int32_t *p = sd_realloc(f->pool, c * sizeof *p);
        if (!p) return 0;
        f->pool = p;
        f->pool_cap = c;
    }
    f->bytes += per + (size_t)n * sizeof(int32_t);
    return 1;
}

/* The id of the state with the sorted set v[0..n), interned if new; SD_FSM_FULL when the
 * limits or memory refuse a new one. */
static int32_t rx_intern(rx_fsm *f, const int32_t *v, int32_t n) {
    if (f->hash_cap) {
        const size_t mask = f->hash_cap - 1;
        for (size_t h = (size_t)rx_hash_set(v, n) & mask; f->hash[h]; h = (h + 1) & mask) {
            const int32_t id = f->hash[h] - 1;
            if (f->set_len[id] == n && !memcmp(f->pool + f->set_off[id], v, (size_t)n * sizeof *v)) return id;
        }
    }
    if (f->n_states >= f->max_states || !rx_reserve(f, n)) return SD_FSM_FULL;
    const int32_t id = f->n_states++;
    f->set_off[id] = f->pool_len;
    f->set_len[id] = n;
    memcpy(f->pool + f->pool_len, v, (size_t)n * sizeof *v);
    f->pool_len += (size_t)n;
    f->accept[id] = 0;
    for (int32_t k = 0; k < n; k++) f->accept[id] |= f->nfa.s[v[k]].type == RX_S_MATCH;
    for (int32_t c = 0; c < f->n_cls; c++) f->trans[(size_t)id * (size_t)f->n_cls + (size_t)c] = RX_UNKNOWN;
    rx_hash_insert(f, id);
    return id;
}

static void rx_push(rx_fsm *f, int32_t *sp, int32_t s) {
    if (s < 0 || !f->nfa.live[s] || f->mark[s] == f->gen) return;
    f->mark[s] = f->gen;
    f->stack[(*sp)++] = s;
}

static int rx_id_cmp(const void *x, const void *y) {
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : a > b;
}

/* Epsilon closure of what is on the stack into buf (sorted); returns its size. */
static int32_t rx_closure(rx_fsm *f, int32_t sp) {
    int32_t n = 0;
    while (sp > 0) {
        const int32_t x = f->stack[--sp];
        const rx_state *st = &f->nfa.s[x];
        if (st->type == RX_S_SPLIT) {
            rx_push(f, &sp, st->out2);
            rx_push(f, &sp, st->out);
        } else {
            f->buf[n++] = x; /* RANGE or MATCH (FAIL states are never live) */
        }
    }
    qsort(f->buf, (size_t)n, sizeof *f->buf, rx_id_cmp);
    return n;
}

static void rx_new_gen(rx_fsm *f) {
    if (++f->gen == 0) {
        memset(f->mark, 0, (size_t)f->nfa.n * sizeof *f->mark);
        f->gen = 1;
    }
}

static int32_t rx_step(sd_fsm *base, int32_t s, uint8_t b) {
    rx_fsm *f = (rx_fsm *)base;
    if (s < 0 || s >= f->n_states) return SD_FSM_DEAD;
    const size_t slot = (size_t)s * (size_t)f->n_cls + f->cls[b];
    if (f->trans[slot] != RX_UNKNOWN) return f->trans[slot];
    rx_new_gen(f);
    int32_t sp = 0;
    const int32_t *set = f->pool + f->set_off[s];
    for (int32_t k = 0; k < f->set_len[s]; k++) {
        const rx_state *st = &f->nfa.s[set[k]];
        if (st->type == RX_S_RANGE && st->lo <= b && b <= st->hi) rx_push(f, &sp, st->out);
    }
    const int32_t n = rx_closure(f, sp);
    const int32_t t = n == 0 ? SD_FSM_DEAD : rx_intern(f, f->buf, n);
    if (t != SD_FSM_FULL) f->trans[slot] = t;
    return t;
}

static int rx_accepting(const sd_fsm *base, int32_t s) {
    const rx_fsm *f = (const rx_fsm *)base;
    return s >= 0 && s < f->n_states && f->accept[s];
}

static int32_t rx_n_states(const sd_fsm *base) { return ((const rx_fsm *)base)->n_states; }

static void rx_destroy(sd_fsm *base) {
    rx_fsm *f = (rx_fsm *)base;
    if (!f) return;
    sd_free(f->nfa.s);
    sd_free(f->nfa.live);
    sd_free(f->set_off);
    sd_free(f->set_len);
    sd_free(f->accept);
    sd_free(f->trans);
    sd_free(f->pool);
    sd_free(f->hash);
    sd_free(f->stack);
    sd_free(f->buf);
    sd_free(f->mark);
    sd_free(f);
}

static const sd_fsm_vtable RX_VT = {rx_step, rx_accepting, rx_n_states, rx_destroy};

/* Byte classes: bytes that no live NFA range separates share a class. */
static void rx_byte_classes(rx_fsm *f) {
    uint8_t cut[257] = {0};
    for (int32_t s = 0; s < f->nfa.n; s++) {
        const rx_state *st = &f->nfa.s[s];
        if (st->type != RX_S_RANGE || !f->nfa.live[s]) continue;
        cut[st->lo] = 1;
        cut[st->hi + 1] = 1;
    }
    int32_t c = 0;
    for (int b = 0; b < 256; b++) {
        if (b > 0 && cut[b]) c++;
        f->cls[b] = (uint8_t)c;
    }
    f->n_cls = c + 1;
}

/* ------------------------------------------------------------- creation */

static void rx_parser_free(rx_parser *P) {
    sd_free(P->nodes);
    sd_free(P->rg);
    sd_free(P->tmp);
}

/* Validates the pattern and parses it into P; the root node or -1. */
static int32_t rx_parse(rx_parser *P, const char *pattern, size_t len) {
    if (len > SD_REGEX_MAX_PATTERN)
        return rx_err(P, SPECDEC_ERR_UNSUPPORTED, "pattern of %zu bytes (at most %zu)", len, SD_REGEX_MAX_PATTERN);
    for (size_t i = 0; i < len;) {
        size_t bad = 0;
        const size_t k = sd_utf8_seq_len((const unsigned char *)pattern + i, len - i, &bad);
        if (!k) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "the pattern is not valid UTF-8 at byte %zu", i);
        i += k;
    }
    P->p = (const unsigned char *)pattern;
    P->n = len;
    const int32_t root = rx_parse_alt(P);
    if (root >= 0 && P->i < P->n) return rx_err(P, SPECDEC_ERR_INVALID_ARGUMENT, "unbalanced ')' at byte %zu", P->i);
    return root;
}

/* Builds f's NFA from the AST (+ MATCH), prunes it. */
static specdec_status rx_make_nfa(rx_fsm *f, const rx_parser *P, int32_t root, sd_errbuf *eb) {
    rx_nfa *N = &f->nfa;
    N->cap = P->nodes[root].size + 1;
    N->s = sd_malloc((size_t)N->cap * sizeof *N->s);
    if (!N->s) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "regex: out of memory for %d NFA states", N->cap);
    const int32_t match = rx_add_state(N, RX_S_MATCH, 0, 0, -1, -1);
    N->start = rx_build(P, N, root, match);
    if (N->start < 0) return sd_fail(eb, SPECDEC_ERR_INTERNAL, "regex: NFA size miscounted (%d states)", N->cap);
    if (!rx_prune(N)) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "regex: out of memory pruning the NFA");
    const size_t n = (size_t)N->n;
    f->stack = sd_malloc(n * sizeof *f->stack);
    f->buf = sd_malloc(n * sizeof *f->buf);
    f->mark = sd_calloc(n, sizeof *f->mark);
    if (!f->stack || !f->buf || !f->mark) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "regex: out of memory");
    return SPECDEC_OK;
}

/* Interns the start state (the closure of the NFA's start). */
static specdec_status rx_make_start(rx_fsm *f, sd_errbuf *eb) {
    rx_new_gen(f);
    int32_t sp = 0;
    rx_push(f, &sp, f->nfa.start);
    const int32_t n = rx_closure(f, sp);
    if (n == 0) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "regex: the pattern matches no string");
    f->base.start = rx_intern(f, f->buf, n);
    if (f->base.start < 0) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "regex: out of memory for the start state");
    return SPECDEC_OK;
}

specdec_status sd_regex_fsm_create(const char *pattern, size_t len, int32_t max_states, sd_fsm **out,
                                   sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!out || (!pattern && len))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_regex_fsm_create: NULL argument");
    if (max_states < 1)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_regex_fsm_create: max_states %d (at least 1)", (int)max_states);
    rx_parser P;
    memset(&P, 0, sizeof P);
    P.eb = eb;
    const int32_t root = rx_parse(&P, pattern ? pattern : "", len);
    if (root < 0) {
        rx_parser_free(&P);
        return P.st;
    }
    rx_fsm *f = sd_calloc(1, sizeof *f);
    if (!f) {
        rx_parser_free(&P);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "regex: out of memory");
    }
    f->base.vt = &RX_VT;
    f->max_states = max_states;
    specdec_status st = rx_make_nfa(f, &P, root, eb);
    rx_parser_free(&P);
    if (st == SPECDEC_OK) {
        rx_byte_classes(f);
        st = rx_make_start(f, eb);
    }
    if (st != SPECDEC_OK) {
        rx_destroy(&f->base);
        return st;
    }
    *out = &f->base;
    return SPECDEC_OK;
}

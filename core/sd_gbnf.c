/* sd_gbnf.c — GBNF text -> a byte automaton over sets of parser stacks (core/sd_gbnf.h).
 * Three parts: the parser (text -> rules of flat elements; groups and repetitions become
 * generated rules), the analysis (productive, nullable, left recursion, each position's least
 * completion depth), and the automaton (interned stack nodes and configurations). */
#include "sd_gbnf.h"

#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_utf8.h"

enum { GE_END, GE_REF, GE_CLASS };
#define GB_INF (SD_GBNF_MAX_DEPTH + 1)  /* a completion depth past the bound */
#define GB_UNKNOWN INT32_MIN            /* a transition not computed yet */
#define GB_SCALAR_MAX 0x10FFFFu
#define GB_ALL 16                       /* gb_state.rem flag */

/* A growable array of int32 (elements are pairs kind,arg in sequence buffers). */
typedef struct gb_vec {
    int32_t *v;
    size_t n, cap;
} gb_vec;

static int gb_vec_push(gb_vec *a, int32_t x) {
    if (a->n == a->cap) {
        const size_t cap = a->cap ? 2 * a->cap : 16;
        int32_t *v = sd_realloc(a->v, cap * sizeof(int32_t));
        if (!v) return 0;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 1;
}

/* A named rule (a symbol): where its name is in the text, its rule id, its first reference. */
typedef struct gb_sym {
    size_t off, len, ref_at;
    int32_t rule;
    int defined, referenced;
} gb_sym;

typedef struct gb_parse {
    const char *s;
    size_t n, i;
    sd_errbuf *eb;
    gb_vec el;        /* all elements, pairs (kind, arg); each alternative ends with GE_END */
    gb_vec alt;       /* pairs (rule, first element) */
    gb_vec owner;     /* per rule: the symbol it belongs to (generated rules: their named rule's) */
    gb_vec ranges;    /* class ranges, pairs (lo, hi) */
    gb_vec cls;       /* per class: its first range; one more at the end */
    gb_sym *syms;
    int32_t n_syms, cap_syms;
    int32_t *slots;   /* open-addressing table of symbol ids, -1 = empty */
    uint32_t cap_slots;
    int32_t cur;      /* the symbol whose rule is being parsed */
} gb_parse;

static specdec_status gb_oom(gb_parse *p) { return sd_fail(p->eb, SPECDEC_ERR_OUT_OF_MEMORY, "gbnf: out of memory"); }

/* ------------------------------------------------------------------ symbols */

static uint32_t gb_hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int gb_sym_rehash(gb_parse *p) {
    const uint32_t cap = p->cap_slots ? 2 * p->cap_slots : 64;
    int32_t *slots = sd_malloc((size_t)cap * sizeof(int32_t));
    if (!slots) return 0;
    memset(slots, 0xFF, (size_t)cap * sizeof(int32_t));
    for (int32_t k = 0; k < p->n_syms; k++) {
        uint32_t h = gb_hash_bytes(p->s + p->syms[k].off, p->syms[k].len) & (cap - 1);
        while (slots[h] >= 0) h = (h + 1) & (cap - 1);
        slots[h] = k;
    }
    sd_free(p->slots);
    p->slots = slots;
    p->cap_slots = cap;
    return 1;
}

static specdec_status gb_new_rule(gb_parse *p, int32_t owner, int32_t *rule) {
    if (p->owner.n >= SD_GBNF_MAX_RULES)
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "gbnf: more than %d rules (generated ones included) at byte %zu",
                       SD_GBNF_MAX_RULES, p->i);
    *rule = (int32_t)p->owner.n;
    return gb_vec_push(&p->owner, owner) ? SPECDEC_OK : gb_oom(p);
}

/* The symbol of the name at text[off, off + len), created if new (with a rule). */
static specdec_status gb_symbol(gb_parse *p, size_t off, size_t len, int32_t *sym) {
    if (p->cap_slots) {
        uint32_t h = gb_hash_bytes(p->s + off, len) & (p->cap_slots - 1);
        for (int32_t k; (k = p->slots[h]) >= 0; h = (h + 1) & (p->cap_slots - 1))
            if (p->syms[k].len == len && !memcmp(p->s + p->syms[k].off, p->s + off, len)) return *sym = k, SPECDEC_OK;
    }
    if (p->n_syms == p->cap_syms) {
        const int32_t cap = p->cap_syms ? 2 * p->cap_syms : 32;
        gb_sym *v = sd_realloc(p->syms, (size_t)cap * sizeof *v);
        if (!v) return gb_oom(p);
        p->syms = v;
        p->cap_syms = cap;
    }
    if ((uint32_t)(p->n_syms + 1) > p->cap_slots / 2 && !gb_sym_rehash(p)) return gb_oom(p);
    const int32_t k = p->n_syms;
    gb_sym *y = &p->syms[k];
    memset(y, 0, sizeof *y);
    y->off = off;
    y->len = len;
    specdec_status st = gb_new_rule(p, k, &y->rule);
    if (st != SPECDEC_OK) return st;
    p->n_syms++;
    uint32_t h = gb_hash_bytes(p->s + off, len) & (p->cap_slots - 1);
    while (p->slots[h] >= 0) h = (h + 1) & (p->cap_slots - 1);
    p->slots[h] = k;
    *sym = k;
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------ lexing */

static int gb_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static size_t gb_name_len(const gb_parse *p, size_t at) {
    size_t k = at;
    while (k < p->n && gb_name_char(p->s[k])) k++;
    return k - at;
}

/* Skips whitespace, newlines and comments from at; returns the next offset. */
static size_t gb_skip(const gb_parse *p, size_t at) {
    while (at < p->n) {
        const char c = p->s[at];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') at++;
        else if (c == '#')
            while (at < p->n && p->s[at] != '\n') at++;
        else break;
    }
    return at;
}

static int gb_at(const gb_parse *p, size_t at, const char *lit) {
    const size_t l = strlen(lit);
    return at + l <= p->n && !memcmp(p->s + at, lit, l);
}

/* 1 if a rule definition (name ::=) starts at at. */
static int gb_rule_starts(const gb_parse *p, size_t at) {
    const size_t l = gb_name_len(p, at);
    return l && gb_at(p, gb_skip(p, at + l), "::=");
}

static int gb_hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One code point of a literal or class at p->i (an escape or a UTF-8 character), advancing. */
static specdec_status gb_char(gb_parse *p, uint32_t *cp) {
    const size_t at = p->i;
    if (p->s[at] != '\\') {
        int32_t c;
        p->i += sd_utf8_next(p->s + at, p->n - at, &c);
        *cp = (uint32_t)c;
        return SPECDEC_OK;
    }
    if (at + 1 >= p->n) return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unterminated escape at byte %zu", at);
    const char e = p->s[at + 1];
    const char *simple = "nrt\\\"'[]-^/";
    const char *value = "\n\r\t\\\"'[]-^/";
    const char *hit = strchr(simple, e);
    if (e && hit) {
        *cp = (uint8_t)value[hit - simple];
        p->i += 2;
        return SPECDEC_OK;
    }
    const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (!digits) return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unknown escape '\\%c' at byte %zu", e, at);
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        const int h = at + 2 + (size_t)k < p->n ? gb_hex(p->s[at + 2 + (size_t)k]) : -1;
        if (h < 0) return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: bad hex digits in escape at byte %zu", at);
        if (v > (GB_SCALAR_MAX >> 4)) v = GB_SCALAR_MAX + 1; /* saturate: refused below */
        else v = v << 4 | (uint32_t)h;
    }
    if (v > GB_SCALAR_MAX)
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: code point above U+10FFFF at byte %zu", at);
    p->i = at + 2 + (size_t)digits;
    *cp = v;
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------ classes */

static int gb_cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Adds [lo, hi] minus the surrogates to the range list. */
static int gb_add_range(gb_vec *r, uint32_t lo, uint32_t hi) {
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800 && (!gb_vec_push(r, (int32_t)lo) || !gb_vec_push(r, 0xD7FF))) return 0;
        if (hi > 0xDFFF && (!gb_vec_push(r, 0xE000) || !gb_vec_push(r, (int32_t)hi))) return 0;
        return 1;
    }
    return gb_vec_push(r, (int32_t)lo) && gb_vec_push(r, (int32_t)hi);
}

/* Appends the class of the pairs in tmp (sorted, merged, complemented if negate) as a new class
 * and emits its element into seq. An empty class is refused. */
static specdec_status gb_emit_class(gb_parse *p, gb_vec *tmp, int negate, size_t at, gb_vec *seq) {
    const size_t n = tmp->n / 2;
    if (n > 1) qsort(tmp->v, n, 2 * sizeof(int32_t), gb_cmp_range);
    size_t m = 0; /* merged in place */
    for (size_t k = 0; k < n; k++) {
        const uint32_t lo = (uint32_t)tmp->v[2 * k], hi = (uint32_t)tmp->v[2 * k + 1];
        if (m && lo <= (uint32_t)tmp->v[2 * m - 1] + 1) {
            if (hi > (uint32_t)tmp->v[2 * m - 1]) tmp->v[2 * m - 1] = (int32_t)hi;
        } else {
            tmp->v[2 * m] = (int32_t)lo;
            tmp->v[2 * m + 1] = (int32_t)hi;
            m++;
        }
    }
    const size_t first = p->ranges.n;
    if (!negate) {
        for (size_t k = 0; k < 2 * m; k++)
            if (!gb_vec_push(&p->ranges, tmp->v[k])) return gb_oom(p);
    } else {
        uint32_t next = 0; /* the first code point not yet covered */
        for (size_t k = 0; k < m; k++) {
            if ((uint32_t)tmp->v[2 * k] > next && !gb_add_range(&p->ranges, next, (uint32_t)tmp->v[2 * k] - 1))
                return gb_oom(p);
            next = (uint32_t)tmp->v[2 * k + 1] + 1;
        }
        if (next <= GB_SCALAR_MAX && !gb_add_range(&p->ranges, next, GB_SCALAR_MAX)) return gb_oom(p);
    }
    if (p->ranges.n == first)
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: character class matches nothing at byte %zu", at);
    if (!gb_vec_push(&p->cls, (int32_t)(p->ranges.n / 2))) return gb_oom(p);
    const int32_t id = (int32_t)p->cls.n - 2;
    return gb_vec_push(seq, GE_CLASS) && gb_vec_push(seq, id) ? SPECDEC_OK : gb_oom(p);
}

/* [ ... ] or [^ ... ] at p->i. */
static specdec_status gb_class(gb_parse *p, gb_vec *seq) {
    const size_t at = p->i++;
    int negate = 0;
    if (p->i < p->n && p->s[p->i] == '^') negate = 1, p->i++;
    gb_vec tmp = {0};
    specdec_status st = SPECDEC_OK;
    while (st == SPECDEC_OK) {
        if (p->i >= p->n) {
            st = sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unterminated character class at byte %zu", at);
            break;
        }
        if (p->s[p->i] == ']') {
            p->i++;
            st = gb_emit_class(p, &tmp, negate, at, seq);
            break;
        }
        uint32_t lo, hi;
        if ((st = gb_char(p, &lo)) != SPECDEC_OK) break;
        hi = lo;
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            const size_t r = p->i++;
            if ((st = gb_char(p, &hi)) != SPECDEC_OK) break;
            if (hi < lo) {
                st = sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: bad character range at byte %zu", r);
                break;
            }
        }
        if (!gb_add_range(&tmp, lo, hi)) st = gb_oom(p);
    }
    sd_free(tmp.v);
    return st;
}

/* A class of one code point (a literal's character) into seq. */
static specdec_status gb_emit_char(gb_parse *p, uint32_t cp, size_t at, gb_vec *seq) {
    gb_vec tmp = {0};
    specdec_status st = gb_add_range(&tmp, cp, cp) ? gb_emit_class(p, &tmp, 0, at, seq) : gb_oom(p);
    sd_free(tmp.v);
    return st;
}

/* "..." at p->i: one element per code point. */
static specdec_status gb_literal(gb_parse *p, gb_vec *seq) {
    const size_t at = p->i++;
    for (;;) {
        if (p->i >= p->n) return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unterminated string at byte %zu", at);
        if (p->s[p->i] == '"') {
            p->i++;
            return SPECDEC_OK;
        }
        const size_t c_at = p->i;
        uint32_t cp;
        specdec_status st = gb_char(p, &cp);
        if (st == SPECDEC_OK) st = gb_emit_char(p, cp, c_at, seq);
        if (st != SPECDEC_OK) return st;
    }
}

/* ------------------------------------------------------------------ rules and sequences */

static specdec_status gb_too_big(gb_parse *p) {
    return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "gbnf: more than %d grammar elements (repetitions expanded) at byte %zu",
                   SD_GBNF_MAX_ELEMENTS, p->i);
}

/* Appends the sequence of pairs v[0, n) as an alternative of rule. */
static specdec_status gb_add_alt(gb_parse *p, int32_t rule, const int32_t *v, size_t n) {
    if (p->el.n / 2 + n / 2 + 1 > SD_GBNF_MAX_ELEMENTS) return gb_too_big(p);
    if (!gb_vec_push(&p->alt, rule) || !gb_vec_push(&p->alt, (int32_t)(p->el.n / 2))) return gb_oom(p);
    for (size_t k = 0; k < n; k++)
        if (!gb_vec_push(&p->el, v[k])) return gb_oom(p);
    return gb_vec_push(&p->el, GE_END) && gb_vec_push(&p->el, 0) ? SPECDEC_OK : gb_oom(p);
}

static int gb_push_el(gb_vec *seq, int32_t kind, int32_t arg) { return gb_vec_push(seq, kind) && gb_vec_push(seq, arg); }

/* A new rule with alternatives {a[0, na)} and, if empty_alt, the empty one. */
static specdec_status gb_gen_rule(gb_parse *p, const int32_t *a, size_t na, int empty_alt, int32_t *rule) {
    specdec_status st = gb_new_rule(p, p->cur, rule);
    if (st == SPECDEC_OK) st = gb_add_alt(p, *rule, a, na);
    if (st == SPECDEC_OK && empty_alt) st = gb_add_alt(p, *rule, NULL, 0);
    return st;
}

/* Replaces the one element e (a pair) at the end of seq by its repetition {m, n} (n < 0: no
 * upper bound): m copies, then x* (R ::= e R | "") or the chain R_k ::= e R_{k-1} | "". */
static specdec_status gb_repeat(gb_parse *p, gb_vec *seq, long m, long n) {
#ifdef SD_GBNF_MUTANT_STAR_AS_PLUS
    if (m == 0 && n < 0) m = 1; /* test_gbnf_diff's planted mutant: x* read as x+ (never in the library) */
#endif
    const int32_t e[2] = {seq->v[seq->n - 2], seq->v[seq->n - 1]};
    seq->n -= 2;
    if (p->el.n / 2 + seq->n / 2 + (size_t)m + 3 * (size_t)(n > m ? n - m : 1) > SD_GBNF_MAX_ELEMENTS) return gb_too_big(p);
    for (long k = 0; k < m; k++)
        if (!gb_push_el(seq, e[0], e[1])) return gb_oom(p);
    int32_t r = -1;
    specdec_status st = SPECDEC_OK;
    if (n < 0) {
        if ((st = gb_new_rule(p, p->cur, &r)) != SPECDEC_OK) return st;
        const int32_t a[4] = {e[0], e[1], GE_REF, r};
        if ((st = gb_add_alt(p, r, a, 4)) != SPECDEC_OK || (st = gb_add_alt(p, r, NULL, 0)) != SPECDEC_OK) return st;
    } else {
        for (long k = m; k < n && st == SPECDEC_OK; k++) {
            const int32_t a[4] = {e[0], e[1], GE_REF, r};
            st = gb_gen_rule(p, a, r < 0 ? 2 : 4, 1, &r);
        }
    }
    if (st == SPECDEC_OK && r >= 0 && !gb_push_el(seq, GE_REF, r)) st = gb_oom(p);
    return st;
}

/* A decimal count at p->i (at most SD_GBNF_MAX_REPEAT). */
static specdec_status gb_count(gb_parse *p, long *v) {
    const size_t at = p->i;
    long x = 0;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        x = x * 10 + (p->s[p->i++] - '0');
        if (x > SD_GBNF_MAX_REPEAT)
            return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "gbnf: repetition count above %d at byte %zu", SD_GBNF_MAX_REPEAT, at);
    }
    if (p->i == at) return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected a number at byte %zu", at);
    *v = x;
    return SPECDEC_OK;
}

/* {m} {m,} {m,n} at p->i -> m, n (-1: unbounded). */
static specdec_status gb_braces(gb_parse *p, long *m, long *n) {
    const size_t at = p->i++;
    p->i = gb_skip(p, p->i);
    specdec_status st = gb_count(p, m);
    if (st != SPECDEC_OK) return st;
    p->i = gb_skip(p, p->i);
    *n = *m;
    if (p->i < p->n && p->s[p->i] == ',') {
        p->i = gb_skip(p, p->i + 1);
        *n = -1;
        if (p->i < p->n && p->s[p->i] != '}' && (st = gb_count(p, n)) != SPECDEC_OK) return st;
        p->i = gb_skip(p, p->i);
    }
    if (p->i >= p->n || p->s[p->i] != '}')
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected '}' in the repetition at byte %zu", at);
    p->i++;
    if (*n >= 0 && *n < *m)
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: repetition {%ld,%ld} with max < min at byte %zu", *m, *n, at);
    return SPECDEC_OK;
}

/* Quantifiers after the atom whose elements are seq[atom, end). */
static specdec_status gb_quantifiers(gb_parse *p, gb_vec *seq, size_t atom) {
    for (;;) {
        const size_t q = gb_skip(p, p->i);
        const char c = q < p->n ? p->s[q] : 0;
        if (c != '*' && c != '+' && c != '?' && c != '{') return SPECDEC_OK;
        p->i = q;
        long m = 0, n = -1;
        specdec_status st = SPECDEC_OK;
        if (c == '{') st = gb_braces(p, &m, &n);
        else {
            p->i++;
            m = c == '+';
            n = c == '?' ? 1 : -1;
        }
        if (st != SPECDEC_OK) return st;
        if (seq->n - atom != 2) { /* group the atom's elements into one rule */
            int32_t r = -1;
            if ((st = gb_gen_rule(p, seq->v ? seq->v + atom : NULL, seq->n - atom, 0, &r)) != SPECDEC_OK) return st;
            seq->n = atom;
            if (!gb_push_el(seq, GE_REF, r)) return gb_oom(p);
        }
        if ((st = gb_repeat(p, seq, m, n)) != SPECDEC_OK) return st;
    }
}

static specdec_status gb_alternatives(gb_parse *p, int32_t rule, int depth);

/* ( alternatives ) at p->i: a new rule, referenced from seq. */
static specdec_status gb_group(gb_parse *p, gb_vec *seq, int depth) {
    const size_t at = p->i++;
    if (p->i < p->n && p->s[p->i] == '=')
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "gbnf: lookahead assertions (= ...) are not supported at byte %zu", at);
    if (depth >= SD_GBNF_MAX_NESTING)
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "gbnf: groups nested deeper than %d at byte %zu", SD_GBNF_MAX_NESTING, at);
    int32_t r = -1;
    specdec_status st = gb_new_rule(p, p->cur, &r);
    if (st == SPECDEC_OK) st = gb_alternatives(p, r, depth + 1);
    if (st != SPECDEC_OK) return st;
    if (p->i >= p->n || p->s[p->i] != ')')
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected ')' for the '(' at byte %zu, at byte %zu", at, p->i);
    p->i++;
    return gb_push_el(seq, GE_REF, r) ? SPECDEC_OK : gb_oom(p);
}

/* One atom at p->i into seq. */
static specdec_status gb_atom(gb_parse *p, gb_vec *seq, int depth) {
    const size_t at = p->i;
    const char c = p->s[at];
    if (c == '"') return gb_literal(p, seq);
    if (c == '[') return gb_class(p, seq);
    if (c == '(') return gb_group(p, seq, depth);
    if (c == '.') {
        p->i++;
        gb_vec tmp = {0};
        specdec_status st = gb_add_range(&tmp, 0, GB_SCALAR_MAX) ? gb_emit_class(p, &tmp, 0, at, seq) : gb_oom(p);
        sd_free(tmp.v);
        return st;
    }
    const size_t l = gb_name_len(p, at);
    if (l) {
        int32_t k;
        specdec_status st = gb_symbol(p, at, l, &k);
        if (st != SPECDEC_OK) return st;
        if (!p->syms[k].referenced) p->syms[k].referenced = 1, p->syms[k].ref_at = at;
        p->i += l;
        return gb_push_el(seq, GE_REF, p->syms[k].rule) ? SPECDEC_OK : gb_oom(p);
    }
    if (c == '<')
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "gbnf: token references <...> are not supported at byte %zu", at);
    if (c == '\'')
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: single-quoted strings are not supported (use \"...\") at byte %zu", at);
    if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7F)
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unexpected '%c' at byte %zu", c, at);
    return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unexpected byte 0x%02X at byte %zu", (unsigned)(uint8_t)c, at);
}

/* A sequence of terms up to '|', ')', the end, or the next rule's "name ::=". */
static specdec_status gb_sequence(gb_parse *p, gb_vec *seq, int depth) {
    for (;;) {
        p->i = gb_skip(p, p->i);
        if (p->i >= p->n) return SPECDEC_OK;
        const char c = p->s[p->i];
        if (c == '|' || c == ')' || gb_rule_starts(p, p->i)) return SPECDEC_OK;
        const size_t atom = seq->n;
        specdec_status st = gb_atom(p, seq, depth);
        if (st == SPECDEC_OK) st = gb_quantifiers(p, seq, atom);
        if (st != SPECDEC_OK) return st;
        if (seq->n / 2 + p->el.n / 2 > SD_GBNF_MAX_ELEMENTS) return gb_too_big(p);
    }
}

static specdec_status gb_alternatives(gb_parse *p, int32_t rule, int depth) {
    for (;;) {
        gb_vec seq = {0};
        specdec_status st = gb_sequence(p, &seq, depth);
        if (st == SPECDEC_OK) st = gb_add_alt(p, rule, seq.v, seq.n);
        sd_free(seq.v);
        if (st != SPECDEC_OK) return st;
        if (p->i >= p->n || p->s[p->i] != '|') return SPECDEC_OK;
        p->i++;
    }
}

/* name ::= alternatives, at p->i (after whitespace). */
static specdec_status gb_rule(gb_parse *p) {
    const size_t at = p->i, l = gb_name_len(p, at);
    if (!l) {
        const char c = p->s[at];
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7F)
            return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected a rule name, got '%c' at byte %zu", c, at);
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected a rule name at byte %zu", at);
    }
    const size_t op = gb_skip(p, at + l);
    if (!gb_at(p, op, "::=")) {
        if (op < p->n && p->s[op] == ':')
            return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT,
                           "gbnf: expected '::=' after the rule name at byte %zu (Lark grammars are not supported)", at);
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected '::=' after the rule name at byte %zu", at);
    }
    int32_t k;
    specdec_status st = gb_symbol(p, at, l, &k);
    if (st != SPECDEC_OK) return st;
    if (p->syms[k].defined)
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: rule '%.*s' defined twice, again at byte %zu", (int)l,
                       p->s + at, at);
    p->syms[k].defined = 1;
    p->cur = k;
    p->i = op + 3;
    st = gb_alternatives(p, p->syms[k].rule, 0);
    if (st != SPECDEC_OK) return st;
    if (p->i < p->n && p->s[p->i] == ')')
        return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unbalanced ')' at byte %zu", p->i);
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------ the compiled grammar */

typedef struct gb_state {
    int32_t off, n;   /* its stack nodes: pool[off, off + n), sorted */
    uint32_t lo, hi;  /* the code points a half-written one can still become (rem > 0) */
    int32_t rem;      /* continuation bytes still to come; | GB_ALL: every stack's class holds every
                         code point of [lo, hi], which is then kept relative to its 2^(6 rem) block */
    uint32_t hash;
    int32_t *trans;   /* [256] cached steps (GB_UNKNOWN: not yet), or NULL */
} gb_state;

typedef struct gb_node {
    int32_t parent, pos, h; /* the stack below, the top frame's element, the frame count */
    uint32_t hash;
} gb_node;

typedef struct gb_fsm {
    sd_fsm base;
    /* the grammar: element p is (el[2p], el[2p+1]) = (kind, arg); start_pos is [REF root, END] */
    int32_t *el, n_el, start_pos;
    int32_t n_rules, n_alts;
    int32_t *rule_alt;  /* [n_rules + 1]: rule r's alternatives are alt_start[rule_alt[r] ..] */
    int32_t *alt_start; /* [n_alts] first element, grouped by rule */
    int32_t *alt_rule;  /* [n_alts] */
    uint8_t *dfr;       /* [n_el] frames a stack top at p needs to complete (GB_INF: cannot) */
    int32_t *ranges;    /* class c: pairs (lo, hi) at ranges[2 * cls[c] .. 2 * cls[c + 1]) */
    int32_t *cls;
    /* the automaton */
    gb_node *nodes;     /* node 0: the empty stack */
    int32_t n_nodes, cap_nodes;
    int32_t *nd_slots;
    uint32_t cap_nd_slots;
    gb_state *st;
    int32_t n_states, cap_states, max_states;
    int32_t *st_slots;
    uint32_t cap_st_slots;
    int32_t *pool;
    size_t n_pool, cap_pool, bytes;
    /* one step's scratch: its result, its work list, the (node, position) items seen */
    int32_t *out, n_out;
    int accept;
    gb_vec work;
    uint64_t *seen_key;
    uint32_t *seen_gen, cap_seen, n_seen, gen, pushes;
} gb_fsm;

#define GB_KIND(f, p) ((f)->el[2 * (size_t)(p)])
#define GB_ARG(f, p) ((f)->el[2 * (size_t)(p) + 1])

/* ------------------------------------------------------------------ analysis */

/* Marks the rules with an alternative whose every element passes — a class if cls_ok, a
 * reference if its rule is marked — the least fixpoint, in time linear in the elements. 0 on
 * out of memory. */
static int gb_fix(const gb_fsm *f, int cls_ok, uint8_t *mark) {
    int32_t *need = sd_calloc((size_t)f->n_alts + 1, sizeof(int32_t));
    int32_t *off = sd_calloc((size_t)f->n_rules + 2, sizeof(int32_t));
    int32_t *occ = sd_malloc(((size_t)f->n_el + 1) * sizeof(int32_t));
    int32_t *queue = sd_malloc(((size_t)f->n_rules + 1) * sizeof(int32_t));
    int ok = need && off && occ && queue;
    for (int32_t a = 0; ok && a < f->n_alts; a++)
        for (int32_t p = f->alt_start[a]; GB_KIND(f, p) != GE_END; p++) {
            if (GB_KIND(f, p) == GE_REF) need[a]++, off[GB_ARG(f, p) + 2]++;
            else if (!cls_ok) need[a] |= 1 << 30; /* never reaches 0 */
        }
    for (int32_t r = 0; ok && r < f->n_rules; r++) off[r + 2] += off[r + 1];
    for (int32_t a = 0; ok && a < f->n_alts; a++)
        for (int32_t p = f->alt_start[a]; GB_KIND(f, p) != GE_END; p++)
            if (GB_KIND(f, p) == GE_REF) occ[off[GB_ARG(f, p) + 1]++] = a;
    int32_t qh = 0, qt = 0;
    for (int32_t a = 0; ok && a < f->n_alts; a++)
        if (need[a] == 0 && !mark[f->alt_rule[a]]) mark[f->alt_rule[a]] = 1, queue[qt++] = f->alt_rule[a];
    while (ok && qh < qt) { /* off[r] is now rule r's first occurrence, off[r + 1] its end */
        const int32_t r = queue[qh++];
        for (int32_t k = off[r]; k < off[r + 1]; k++) {
            const int32_t a = occ[k];
            if (--need[a] == 0 && !mark[f->alt_rule[a]]) mark[f->alt_rule[a]] = 1, queue[qt++] = f->alt_rule[a];
        }
    }
    sd_free(need);
    sd_free(off);
    sd_free(occ);
    sd_free(queue);
    return ok;
}

/* Least completion depth A[r] of every rule (frames above the caller's; GB_INF: more than the
 * bound), level by level: at level k an alternative fits if its classes fit (k >= 1), every
 * reference but a last one has A <= k - 1 and a last one A <= k (a tail call adds no frame). */
static int gb_levels(const gb_fsm *f, uint8_t *A) {
    int32_t *tail_off = sd_calloc((size_t)f->n_rules + 2, sizeof(int32_t));
    int32_t *tail = sd_malloc(((size_t)f->n_alts + 1) * sizeof(int32_t));
    int32_t *last = sd_malloc(((size_t)f->n_alts + 1) * sizeof(int32_t));
    uint8_t *base = sd_malloc((size_t)f->n_alts + 1);
    int32_t *queue = sd_malloc(((size_t)f->n_rules + 1) * sizeof(int32_t));
    const int ok = tail_off && tail && last && base && queue;
    for (int32_t a = 0; ok && a < f->n_alts; a++) {
        int32_t p = f->alt_start[a];
        while (GB_KIND(f, p) != GE_END) p++;
        last[a] = p > f->alt_start[a] && GB_KIND(f, p - 1) == GE_REF ? GB_ARG(f, p - 1) : -1;
        if (last[a] >= 0) tail_off[last[a] + 2]++;
    }
    for (int32_t r = 0; ok && r < f->n_rules; r++) tail_off[r + 2] += tail_off[r + 1];
    for (int32_t a = 0; ok && a < f->n_alts; a++)
        if (last[a] >= 0) tail[tail_off[last[a] + 1]++] = a;
    memset(A, GB_INF, (size_t)f->n_rules);
    for (int k = 0; ok && k <= SD_GBNF_MAX_DEPTH; k++) {
        int32_t qh = 0, qt = 0;
        for (int32_t a = 0; a < f->n_alts; a++) {
            int fits = 1;
            for (int32_t p = f->alt_start[a]; fits && GB_KIND(f, p) != GE_END; p++) {
                if (GB_KIND(f, p) == GE_CLASS) fits = k >= 1;
                else if (GB_KIND(f, p + 1) != GE_END) fits = A[GB_ARG(f, p)] + 1 <= k;
            }
            base[a] = (uint8_t)fits;
            const int32_t r = f->alt_rule[a];
            if (fits && A[r] > k && (last[a] < 0 || A[last[a]] <= k)) A[r] = (uint8_t)k, queue[qt++] = r;
        }
        while (qh < qt) {
            const int32_t r = queue[qh++];
            for (int32_t j = tail_off[r]; j < tail_off[r + 1]; j++) {
                const int32_t a = tail[j], q = f->alt_rule[a];
                if (base[a] && A[q] > k) A[q] = (uint8_t)k, queue[qt++] = q;
            }
        }
        if (k >= 1 && qt == 0) break; /* nothing new: no later level adds anything */
    }
    sd_free(tail_off);
    sd_free(tail);
    sd_free(last);
    sd_free(base);
    sd_free(queue);
    return ok;
}

/* dfr[p] for every position: max(1, frames the rest of p's alternative needs). */
static void gb_depths(gb_fsm *f, const uint8_t *A) {
    for (int32_t p = f->n_el - 1; p >= 0; p--) {
        int d = 0;
        if (GB_KIND(f, p) == GE_END) {
            f->dfr[p] = 0;
            continue;
        }
        const int next = GB_KIND(f, p + 1) == GE_END ? 0 : f->dfr[p + 1];
        if (GB_KIND(f, p) == GE_CLASS) d = next > 1 ? next : 1;
        else if (GB_KIND(f, p + 1) == GE_END) d = A[GB_ARG(f, p)];
        else d = A[GB_ARG(f, p)] + 1 > next ? A[GB_ARG(f, p)] + 1 : next;
        if (d < 1) d = 1;
        f->dfr[p] = (uint8_t)(d > GB_INF ? GB_INF : d);
    }
}

/* Left recursion: a cycle of references each reachable from its rule's alternatives through a
 * nullable prefix. Iterative depth-first search; *rule = a rule on a cycle, or -1. 0 on OOM. */
static int gb_left_recursion(const gb_fsm *f, const uint8_t *nullable, int32_t *rule) {
    int32_t *off = sd_calloc((size_t)f->n_rules + 2, sizeof(int32_t));
    int32_t *edge = sd_malloc(((size_t)f->n_el + 1) * sizeof(int32_t));
    int32_t *stk = sd_malloc(((size_t)f->n_rules + 1) * 2 * sizeof(int32_t));
    uint8_t *color = sd_calloc((size_t)f->n_rules + 1, 1);
    const int ok = off && edge && stk && color;
    *rule = -1;
    for (int pass = 0; ok && pass < 2; pass++) {
        for (int32_t a = 0; a < f->n_alts; a++)
            for (int32_t p = f->alt_start[a]; GB_KIND(f, p) == GE_REF; p++) {
                if (pass == 0) off[f->alt_rule[a] + 2]++;
                else edge[off[f->alt_rule[a] + 1]++] = GB_ARG(f, p);
                if (!nullable[GB_ARG(f, p)]) break;
            }
        for (int32_t r = 0; pass == 0 && r < f->n_rules; r++) off[r + 2] += off[r + 1];
    }
    for (int32_t r0 = 0; ok && r0 < f->n_rules && *rule < 0; r0++) {
        if (color[r0]) continue;
        int32_t sp = 0;
        stk[0] = r0, stk[1] = off[r0], color[r0] = 1;
        sp = 1;
        while (sp > 0 && *rule < 0) {
            const int32_t r = stk[2 * (sp - 1)];
            if (stk[2 * (sp - 1) + 1] == off[r + 1]) {
                color[r] = 2, sp--;
                continue;
            }
            const int32_t t = edge[stk[2 * (sp - 1) + 1]++];
            if (color[t] == 1) *rule = t;
            else if (!color[t]) stk[2 * sp] = t, stk[2 * sp + 1] = off[t], color[t] = 1, sp++;
        }
    }
    sd_free(off);
    sd_free(edge);
    sd_free(stk);
    sd_free(color);
    return ok;
}

/* ------------------------------------------------------------------ memory of the automaton */

/* Grows *v (elements of size sz, capacity *cap) to hold need, within SD_GBNF_MAX_BYTES. */
static int gb_grow(gb_fsm *f, void **v, size_t *cap, size_t need, size_t sz) {
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    if (f->bytes + (c - *cap) * sz > SD_GBNF_MAX_BYTES) return 0;
    void *n = sd_realloc(*v, c * sz);
    if (!n) return 0;
    f->bytes += (c - *cap) * sz;
    *v = n;
    *cap = c;
    return 1;
}

static int gb_grow32(gb_fsm *f, void **v, int32_t *cap, size_t need, size_t sz) {
    size_t c = (size_t)*cap;
    if (!gb_grow(f, v, &c, need, sz)) return 0;
    *cap = (int32_t)c;
    return 1;
}

static uint32_t gb_mix(uint32_t h, uint32_t x) {
    h ^= x + 0x9E3779B9u + (h << 6) + (h >> 2);
    return h;
}

/* Rebuilds the hash table of the nodes (states = 0) or the states (1) with twice the slots. */
static int gb_rehash(gb_fsm *f, int states) {
    int32_t **slots = states ? &f->st_slots : &f->nd_slots;
    uint32_t *cap = states ? &f->cap_st_slots : &f->cap_nd_slots;
    const int32_t n = states ? f->n_states : f->n_nodes;
    const uint32_t c = *cap ? 2 * *cap : 256;
    if (f->bytes + (size_t)(c - *cap) * sizeof(int32_t) > SD_GBNF_MAX_BYTES) return 0;
    int32_t *s = sd_malloc((size_t)c * sizeof(int32_t));
    if (!s) return 0;
    memset(s, 0xFF, (size_t)c * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) {
        uint32_t h = (states ? f->st[i].hash : f->nodes[i].hash) & (c - 1);
        while (s[h] >= 0) h = (h + 1) & (c - 1);
        s[h] = i;
    }
    f->bytes += (size_t)(c - *cap) * sizeof(int32_t);
    sd_free(*slots);
    *slots = s;
    *cap = c;
    return 1;
}

/* The node (parent, pos) if it can complete within the depth bound: its id, -1 if it cannot,
 * SD_FSM_FULL past the limits. */
static int32_t gb_node_get(gb_fsm *f, int32_t parent, int32_t pos) {
    const int32_t h = f->nodes[parent].h + 1;
    if (h - 1 + f->dfr[pos] > SD_GBNF_MAX_DEPTH) return -1;
    const uint32_t hash = gb_mix(gb_mix(0x51ED27u, (uint32_t)parent), (uint32_t)pos);
    for (uint32_t k = hash & (f->cap_nd_slots - 1);; k = (k + 1) & (f->cap_nd_slots - 1)) {
        const int32_t s = f->nd_slots[k];
        if (s < 0) break;
        if (f->nodes[s].parent == parent && f->nodes[s].pos == pos) return s;
    }
    if (f->n_nodes >= SD_GBNF_MAX_NODES || !gb_grow32(f, (void **)&f->nodes, &f->cap_nodes, (size_t)f->n_nodes + 1, sizeof(gb_node)))
        return SD_FSM_FULL;
    if ((uint32_t)f->n_nodes + 1 > f->cap_nd_slots / 2 &&
        !gb_rehash(f, 0))
        return SD_FSM_FULL;
    const int32_t id = f->n_nodes++;
    f->nodes[id] = (gb_node){parent, pos, h, hash};
    uint32_t k = hash & (f->cap_nd_slots - 1);
    while (f->nd_slots[k] >= 0) k = (k + 1) & (f->cap_nd_slots - 1);
    f->nd_slots[k] = id;
    return id;
}

/* The id of the configuration (nodes v[0, n) sorted, pending lo/hi/rem), interned if new. */
static int32_t gb_state_get(gb_fsm *f, const int32_t *v, int32_t n, uint32_t lo, uint32_t hi, int32_t rem) {
    uint32_t hash = gb_mix(gb_mix(gb_mix(0xC0FFEEu, lo), hi), (uint32_t)rem);
    for (int32_t k = 0; k < n; k++) hash = gb_mix(hash, (uint32_t)v[k]);
    if (f->cap_st_slots)
        for (uint32_t k = hash & (f->cap_st_slots - 1);; k = (k + 1) & (f->cap_st_slots - 1)) {
            const int32_t s = f->st_slots[k];
            if (s < 0) break;
            const gb_state *t = &f->st[s];
            if (t->hash == hash && t->n == n && t->lo == lo && t->hi == hi && t->rem == rem &&
                !memcmp(f->pool + t->off, v, (size_t)n * sizeof(int32_t)))
                return s;
        }
    if (f->n_states >= f->max_states ||
        !gb_grow32(f, (void **)&f->st, &f->cap_states, (size_t)f->n_states + 1, sizeof(gb_state)) ||
        !gb_grow(f, (void **)&f->pool, &f->cap_pool, f->n_pool + (size_t)n, sizeof(int32_t)))
        return SD_FSM_FULL;
    if ((uint32_t)f->n_states + 1 > f->cap_st_slots / 2 && !gb_rehash(f, 1)) return SD_FSM_FULL;
    const int32_t id = f->n_states++;
    f->st[id] = (gb_state){(int32_t)f->n_pool, n, lo, hi, rem, hash, NULL};
    memcpy(f->pool + f->n_pool, v, (size_t)n * sizeof(int32_t));
    f->n_pool += (size_t)n;
    uint32_t k = hash & (f->cap_st_slots - 1);
    while (f->st_slots[k] >= 0) k = (k + 1) & (f->cap_st_slots - 1);
    f->st_slots[k] = id;
    return id;
}

/* ------------------------------------------------------------------ one step */

/* 1 if class c holds a code point in [lo, hi]. */
static int gb_class_meets(const gb_fsm *f, int32_t c, uint32_t lo, uint32_t hi) {
    int32_t a = f->cls[c], b = f->cls[c + 1]; /* the first range whose end is >= lo */
    while (a < b) {
        const int32_t m = a + (b - a) / 2;
        if ((uint32_t)f->ranges[2 * (size_t)m + 1] < lo) a = m + 1;
        else b = m;
    }
    return a < f->cls[c + 1] && (uint32_t)f->ranges[2 * (size_t)a] <= hi;
}

/* The UTF-8 decoder: from the pending range [lo, hi] with rem bytes to come (rem = 0: none),
 * byte b gives the new range and count. 0 if b cannot continue well-formed UTF-8. */
static int gb_utf8(uint32_t *lo, uint32_t *hi, int32_t *rem, uint8_t b) {
    if (*rem == 0) {
        uint32_t a, z;
        if (b < 0x80) a = z = b, *rem = 0;
        else if (b >= 0xC2 && b <= 0xDF) a = (uint32_t)(b & 0x1F) << 6, z = a | 0x3F, *rem = 1;
        else if (b >= 0xE0 && b <= 0xEF) {
            a = (uint32_t)(b & 0x0F) << 12, z = a | 0xFFF, *rem = 2;
            if (b == 0xE0) a = 0x800;
            if (b == 0xED) z = 0xD7FF;
        } else if (b >= 0xF0 && b <= 0xF4) {
            a = (uint32_t)(b & 0x07) << 18, z = a | 0x3FFFF, *rem = 3;
            if (b == 0xF0) a = 0x10000;
            if (b == 0xF4) z = 0x10FFFF;
        } else return 0;
        *lo = a, *hi = z;
        return 1;
    }
    if (b < 0x80 || b > 0xBF) return 0;
    const int32_t r = *rem - 1;
    const uint32_t blk = (((*lo >> (6 * (r + 1))) << 6) | (b & 0x3Fu)) << (6 * r);
    const uint32_t end = blk + ((1u << (6 * r)) - 1);
    const uint32_t a = *lo > blk ? *lo : blk, z = *hi < end ? *hi : end;
    if (a > z) return 0;
    *lo = a, *hi = z, *rem = r;
    return 1;
}

/* 1 if the item (node, pos) is new in this step (and records it); -1 past the limits. */
static int gb_seen(gb_fsm *f, int32_t node, int32_t pos) {
    const uint64_t key = (uint64_t)(uint32_t)node << 32 | (uint32_t)pos;
    if (f->n_seen + 1 > f->cap_seen / 2) {
        const uint32_t c = f->cap_seen ? 2 * f->cap_seen : 1024;
        if (c > 2u * SD_GBNF_MAX_WORK) return -1; /* at most SD_GBNF_MAX_WORK items */
        uint64_t *k2 = sd_malloc((size_t)c * sizeof(uint64_t));
        uint32_t *g2 = sd_calloc((size_t)c, sizeof(uint32_t));
        if (!k2 || !g2) {
            sd_free(k2), sd_free(g2);
            return -1;
        }
        for (uint32_t i = 0; i < f->cap_seen; i++) {
            if (f->seen_gen[i] != f->gen) continue;
            uint32_t h = gb_mix(0, (uint32_t)(f->seen_key[i] >> 32) * 31u + (uint32_t)f->seen_key[i]) & (c - 1);
            while (g2[h] == f->gen) h = (h + 1) & (c - 1);
            k2[h] = f->seen_key[i], g2[h] = f->gen;
        }
        sd_free(f->seen_key), sd_free(f->seen_gen);
        f->seen_key = k2, f->seen_gen = g2, f->cap_seen = c;
    }
    uint32_t h = gb_mix(0, (uint32_t)node * 31u + (uint32_t)pos) & (f->cap_seen - 1);
    for (; f->seen_gen[h] == f->gen; h = (h + 1) & (f->cap_seen - 1))
        if (f->seen_key[h] == key) return 0;
    f->seen_key[h] = key, f->seen_gen[h] = f->gen;
    f->n_seen++;
    return 1;
}

/* Expands item (node, pos) — the stack node with element pos on top — into leaf stacks (a
 * class on top, or the empty stack) appended to f->out. SD_FSM_FULL past the limits, else 0. */
static int32_t gb_expand(gb_fsm *f, int32_t node, int32_t pos) {
    f->work.n = 0;
    if (!gb_vec_push(&f->work, node) || !gb_vec_push(&f->work, pos)) return SD_FSM_FULL;
    while (f->work.n) {
        pos = f->work.v[--f->work.n];
        node = f->work.v[--f->work.n];
        const int seen = gb_seen(f, node, pos);
        if (seen < 0) return SD_FSM_FULL;
        if (!seen) continue;
        const int32_t kind = GB_KIND(f, pos);
        if (kind == GE_END) { /* the frame ends: continue the one below */
            if (node == 0) f->accept = 1;
            else if (!gb_vec_push(&f->work, f->nodes[node].parent) || !gb_vec_push(&f->work, f->nodes[node].pos))
                return SD_FSM_FULL;
            continue;
        }
        int32_t nb = node;
        if (kind == GE_CLASS || GB_KIND(f, pos + 1) != GE_END) {
            nb = gb_node_get(f, node, kind == GE_CLASS ? pos : pos + 1);
            if (nb == SD_FSM_FULL) return SD_FSM_FULL;
            if (nb < 0) continue; /* cannot complete within the depth bound */
        }
        if (kind == GE_CLASS) {
            if (f->n_out >= SD_GBNF_MAX_STACKS) return SD_FSM_FULL;
            f->out[f->n_out++] = nb;
            continue;
        }
        const int32_t r = GB_ARG(f, pos);
        f->pushes += (uint32_t)(f->rule_alt[r + 1] - f->rule_alt[r]);
        if (f->pushes > 16u * SD_GBNF_MAX_WORK) return SD_FSM_FULL; /* bounded time per step */
        for (int32_t a = f->rule_alt[r]; a < f->rule_alt[r + 1]; a++)
            if (!gb_vec_push(&f->work, nb) || !gb_vec_push(&f->work, f->alt_start[a])) return SD_FSM_FULL;
        if (f->work.n > 8u * SD_GBNF_MAX_WORK) return SD_FSM_FULL;
    }
    return 0;
}

static int gb_cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* 1 if the class of every stack in v[0, n) holds every code point of [lo, hi]. */
static int gb_all_cover(const gb_fsm *f, const int32_t *v, int32_t n, uint32_t lo, uint32_t hi) {
    for (int32_t k = 0; k < n; k++) {
        const int32_t c = GB_ARG(f, f->nodes[v[k]].pos);
        int32_t a = f->cls[c], z = f->cls[c + 1]; /* the range holding lo, if any */
        while (a < z) {
            const int32_t m = a + (z - a) / 2;
            if ((uint32_t)f->ranges[2 * (size_t)m + 1] < lo) a = m + 1;
            else z = m;
        }
        if (a == f->cls[c + 1] || (uint32_t)f->ranges[2 * (size_t)a] > lo || (uint32_t)f->ranges[2 * (size_t)a + 1] < hi)
            return 0;
    }
    return 1;
}

/* Step of state s by byte b, not cached. Inside a character's encoding, a state whose stacks all
 * take every code point the character can still become forgets which one (GB_ALL): its range is
 * kept relative to its block, so the many prefixes of a vocabulary's characters share states. */
static int32_t gb_next(gb_fsm *f, int32_t s, uint8_t b) {
    uint32_t lo = f->st[s].lo, hi = f->st[s].hi;
    const int all = (f->st[s].rem & GB_ALL) != 0;
    int32_t rem = f->st[s].rem & ~GB_ALL;
    if (!gb_utf8(&lo, &hi, &rem, b)) return SD_FSM_DEAD;
    const int32_t off = f->st[s].off, n = f->st[s].n;
    f->n_out = 0;
    f->accept = 0;
    f->gen++;
    if (f->gen == 0) { /* the stamps wrapped: clear them */
        if (f->seen_gen) memset(f->seen_gen, 0, (size_t)f->cap_seen * sizeof(uint32_t));
        f->gen = 1;
    }
    f->n_seen = 0;
    f->pushes = 0;
    for (int32_t k = 0; k < n; k++) {
        const int32_t node = f->pool[off + k];
        if (node == 0) continue; /* the empty stack takes no byte */
        const int32_t pos = f->nodes[node].pos;
        if (!all && !gb_class_meets(f, GB_ARG(f, pos), lo, hi)) continue;
        if (rem > 0) f->out[f->n_out++] = node; /* still possible: keep it whole */
        else if (gb_expand(f, f->nodes[node].parent, pos + 1) == SD_FSM_FULL) return SD_FSM_FULL;
    }
    if (f->accept) {
        if (f->n_out >= SD_GBNF_MAX_STACKS) return SD_FSM_FULL;
        f->out[f->n_out++] = 0;
    }
    if (f->n_out == 0) return SD_FSM_DEAD;
    if (rem == 0) {
        qsort(f->out, (size_t)f->n_out, sizeof(int32_t), gb_cmp_i32);
        lo = hi = 0;
    } else if (all || gb_all_cover(f, f->out, f->n_out, lo, hi)) {
        const uint32_t base = (lo >> (6 * rem)) << (6 * rem); /* the known bits; 0 when already relative */
        lo -= base, hi -= base, rem |= GB_ALL;
    }
    return gb_state_get(f, f->out, f->n_out, lo, hi, rem);
}

/* ------------------------------------------------------------------ the sd_fsm interface */

static int32_t gb_step(sd_fsm *base, int32_t s, uint8_t b) {
    gb_fsm *f = (gb_fsm *)base;
    if (s < 0 || s >= f->n_states) return SD_FSM_DEAD;
    if (f->st[s].trans && f->st[s].trans[b] != GB_UNKNOWN) return f->st[s].trans[b];
    const int32_t t = gb_next(f, s, b);
    if (t == SD_FSM_FULL) return t;
    if (!f->st[s].trans && f->bytes + 256 * sizeof(int32_t) <= SD_GBNF_MAX_BYTES) {
        int32_t *tr = sd_malloc(256 * sizeof(int32_t));
        if (tr) {
            for (int k = 0; k < 256; k++) tr[k] = GB_UNKNOWN;
            f->bytes += 256 * sizeof(int32_t);
            f->st[s].trans = tr;
        }
    }
    if (f->st[s].trans) f->st[s].trans[b] = t;
    return t;
}

static int gb_accepting(const sd_fsm *base, int32_t s) {
    const gb_fsm *f = (const gb_fsm *)base;
    if (s < 0 || s >= f->n_states) return 0;
    return f->st[s].rem == 0 && f->st[s].n > 0 && f->pool[f->st[s].off] == 0;
}

static int32_t gb_n_states(const sd_fsm *base) { return ((const gb_fsm *)base)->n_states; }

static void gb_destroy(sd_fsm *base) {
    gb_fsm *f = (gb_fsm *)base;
    if (!f) return;
    for (int32_t s = 0; s < f->n_states; s++) sd_free(f->st[s].trans);
    sd_free(f->el), sd_free(f->rule_alt), sd_free(f->alt_start), sd_free(f->alt_rule), sd_free(f->dfr);
    sd_free(f->ranges), sd_free(f->cls), sd_free(f->nodes), sd_free(f->nd_slots), sd_free(f->st);
    sd_free(f->st_slots), sd_free(f->pool), sd_free(f->out), sd_free(f->work.v), sd_free(f->seen_key);
    sd_free(f->seen_gen);
    sd_free(f);
}

static const sd_fsm_vtable GB_VT = {gb_step, gb_accepting, gb_n_states, gb_destroy};

/* ------------------------------------------------------------------ compile */

/* The name of rule r for messages (a generated rule: the named rule it was written in). */
static void gb_rule_name(const gb_parse *p, int32_t r, const char **s, int *len) {
    const gb_sym *y = &p->syms[p->owner.v[r]];
    *s = p->s + y->off;
    *len = (int)(y->len > 200 ? 200 : y->len);
}

/* Parses the whole text; checks root and undefined references. */
static specdec_status gb_parse_text(gb_parse *p) {
    for (;;) {
        p->i = gb_skip(p, p->i);
        if (p->i >= p->n) break;
        specdec_status st = gb_rule(p);
        if (st != SPECDEC_OK) return st;
    }
    for (int32_t k = 0; k < p->n_syms; k++)
        if (!p->syms[k].defined)
            return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: undefined rule '%.*s' at byte %zu",
                           (int)(p->syms[k].len > 200 ? 200 : p->syms[k].len), p->s + p->syms[k].off, p->syms[k].ref_at);
    for (int32_t k = 0; k < p->n_syms; k++)
        if (p->syms[k].len == 4 && !memcmp(p->s + p->syms[k].off, "root", 4)) return SPECDEC_OK;
    return sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: no 'root' rule");
}

/* Moves the parsed grammar into f: elements (plus [REF root, END]), alternatives by rule. */
static specdec_status gb_build(gb_parse *p, gb_fsm *f) {
    int32_t root = -1;
    for (int32_t k = 0; k < p->n_syms; k++)
        if (p->syms[k].len == 4 && !memcmp(p->s + p->syms[k].off, "root", 4)) root = p->syms[k].rule;
    if (!gb_vec_push(&p->el, GE_REF) || !gb_vec_push(&p->el, root) || !gb_vec_push(&p->el, GE_END) ||
        !gb_vec_push(&p->el, 0))
        return gb_oom(p);
    f->el = p->el.v, p->el.v = NULL;
    f->n_el = (int32_t)(p->el.n / 2);
    f->start_pos = f->n_el - 2;
    f->ranges = p->ranges.v, p->ranges.v = NULL;
    f->cls = p->cls.v, p->cls.v = NULL;
    f->n_rules = (int32_t)p->owner.n;
    f->n_alts = (int32_t)(p->alt.n / 2);
    f->rule_alt = sd_calloc((size_t)f->n_rules + 2, sizeof(int32_t));
    f->alt_start = sd_malloc(((size_t)f->n_alts + 1) * sizeof(int32_t));
    f->alt_rule = sd_malloc(((size_t)f->n_alts + 1) * sizeof(int32_t));
    f->dfr = sd_malloc((size_t)f->n_el);
    if (!f->rule_alt || !f->alt_start || !f->alt_rule || !f->dfr) return gb_oom(p);
    for (int32_t a = 0; a < f->n_alts; a++) f->rule_alt[p->alt.v[2 * a] + 2]++;
    for (int32_t r = 0; r < f->n_rules; r++) f->rule_alt[r + 2] += f->rule_alt[r + 1];
    for (int32_t a = 0; a < f->n_alts; a++) { /* stable: a rule's alternatives keep their order */
        const int32_t j = f->rule_alt[p->alt.v[2 * a] + 1]++;
        f->alt_start[j] = p->alt.v[2 * a + 1];
        f->alt_rule[j] = p->alt.v[2 * a];
    }
    return SPECDEC_OK;
}

/* Productive, left recursion, completion depths; then the start state. */
static specdec_status gb_analyse(gb_parse *p, gb_fsm *f) {
    uint8_t *mark = sd_calloc((size_t)f->n_rules + 1, 1), *A = sd_malloc((size_t)f->n_rules + 1);
    specdec_status st = SPECDEC_OK;
    const char *nm;
    int nl;
    int32_t bad = -1;
    if (!mark || !A || !gb_fix(f, 1, mark)) st = gb_oom(p);
    for (int32_t r = 0; st == SPECDEC_OK && r < f->n_rules && bad < 0; r++)
        if (!mark[r]) bad = r;
    if (bad >= 0) {
        gb_rule_name(p, bad, &nm, &nl);
        st = sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: rule '%.*s' derives no finite string", nl, nm);
    }
    if (st == SPECDEC_OK) {
        memset(mark, 0, (size_t)f->n_rules);
        if (!gb_fix(f, 0, mark) || !gb_left_recursion(f, mark, &bad)) st = gb_oom(p);
        else if (bad >= 0) {
            gb_rule_name(p, bad, &nm, &nl);
            st = sd_fail(p->eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: rule '%.*s' is left-recursive%s", nl, nm,
                         p->syms[p->owner.v[bad]].rule == bad ? ""
                                                              : " (in a group or repetition: x* with an x that can be empty is)");
        }
    }
    if (st == SPECDEC_OK && !gb_levels(f, A)) st = gb_oom(p);
    if (st == SPECDEC_OK) {
        gb_depths(f, A);
        if (A[GB_ARG(f, f->start_pos)] > SD_GBNF_MAX_DEPTH)
            st = sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "gbnf: rule 'root' needs more than %d nested rules to complete",
                         SD_GBNF_MAX_DEPTH);
    }
    sd_free(mark);
    sd_free(A);
    return st;
}

/* The automaton's tables and its start state. */
static specdec_status gb_start(gb_parse *p, gb_fsm *f) {
    f->out = sd_malloc((SD_GBNF_MAX_STACKS + 1) * sizeof(int32_t));
    if (!f->out || !gb_grow32(f, (void **)&f->nodes, &f->cap_nodes, 1, sizeof(gb_node)) || !gb_rehash(f, 0))
        return gb_oom(p);
    f->nodes[0] = (gb_node){-1, -1, 0, 0};
    f->n_nodes = 1;
    f->gen = 1;
    f->n_out = 0;
    f->accept = 0;
    const int32_t r = gb_expand(f, 0, f->start_pos);
    if (r == SD_FSM_FULL)
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "gbnf: the start of 'root' passes the automaton's limits (%d stacks)",
                       SD_GBNF_MAX_STACKS);
    if (f->accept) f->out[f->n_out++] = 0;
    qsort(f->out, (size_t)f->n_out, sizeof(int32_t), gb_cmp_i32);
    f->base.start = gb_state_get(f, f->out, f->n_out, 0, 0, 0);
    if (f->base.start != 0) return gb_oom(p);
    return SPECDEC_OK;
}

specdec_status sd_gbnf_fsm_create(const char *text, size_t len, int32_t max_states, sd_fsm **out, sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_gbnf_fsm_create: out is NULL");
    *out = NULL;
    if (!text && len) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_gbnf_fsm_create: text is NULL");
    if (max_states < 1)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_gbnf_fsm_create: max_states %d (at least 1)", (int)max_states);
    if (len > SD_GBNF_MAX_TEXT)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "gbnf: grammar of %zu bytes (at most %zu)", len, SD_GBNF_MAX_TEXT);
    if (!sd_utf8_valid((const unsigned char *)text, len))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: the grammar is not valid UTF-8");
    gb_parse p;
    memset(&p, 0, sizeof p);
    p.s = text ? text : "";
    p.n = len;
    p.eb = eb;
    gb_fsm *f = sd_calloc(1, sizeof *f);
    specdec_status st = f ? SPECDEC_OK : gb_oom(&p);
    if (st == SPECDEC_OK && !gb_vec_push(&p.cls, 0)) st = gb_oom(&p);
    if (st == SPECDEC_OK) st = gb_parse_text(&p);
    if (st == SPECDEC_OK) {
        f->base.vt = &GB_VT;
        f->max_states = max_states;
        st = gb_build(&p, f);
    }
    if (st == SPECDEC_OK) st = gb_analyse(&p, f);
    if (st == SPECDEC_OK) st = gb_start(&p, f);
    sd_free(p.el.v), sd_free(p.alt.v), sd_free(p.owner.v), sd_free(p.ranges.v), sd_free(p.cls.v);
    sd_free(p.syms), sd_free(p.slots);
    if (st != SPECDEC_OK) {
        if (f) gb_destroy(&f->base);
        return st;
    }
    *out = &f->base;
    return SPECDEC_OK;
}

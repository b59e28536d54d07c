/* sd_jinja_value.c — the arena, error recording, and the values of the interpreter with Python's
 * semantics: truthiness, ==, <, str(), repr() (lists and dicts print as Python prints them),
 * float repr (shortest round-trip digits, exponent outside 1e-4 <= |x| < 1e16), json.dumps as
 * transformers' tojson calls it (ensure_ascii, indent, separators, sort_keys), iteration, and the
 * conversion of the JSON variables given to a render. */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "sd_alloc.h"
#include "sd_jinja_int.h"
#include "sd_utf8.h"

/* ---- arena ------------------------------------------------------------------------------------------ */
struct sd_jchunk {
    sd_jchunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

void *sd_ja_alloc(sd_jarena *a, size_t n) {
    if (a->fail) return NULL;
    if (n > ((size_t)1 << 40)) {
        a->fail = 1;
        return NULL;
    }
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    sd_jchunk *h = a->head;
    if (h && h->cap - h->used >= n) {
        void *p = h->data + h->used;
        h->used += n;
        return p;
    }
    size_t cap = (size_t)64 << 10;
    if (a->used / 4 > cap) cap = a->used / 4;
    if (n > cap / 2) cap = n; /* a big block gets a chunk of its own, behind the current one */
    if (a->limit && a->used + cap + sizeof(sd_jchunk) > a->limit) {
        a->fail = 1;
        return NULL;
    }
    sd_jchunk *k = sd_malloc(sizeof *k + cap);
    if (!k) {
        a->fail = 2;
        return NULL;
    }
    a->used += sizeof *k + cap;
    k->cap = cap;
    k->used = n;
    if (cap == n && h) {
        k->next = h->next;
        h->next = k;
    } else {
        k->next = h;
        a->head = k;
    }
    return k->data;
}

void sd_ja_free(sd_jarena *a) {
    for (sd_jchunk *k = a->head, *nx; k; k = nx) {
        nx = k->next;
        sd_free(k);
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- errors, limits ---------------------------------------------------------------------------------- */
int sd_jerr(sd_jctx *c, specdec_status st, const char *fmt, ...) {
    if (c->st != SPECDEC_OK) return -1;
    c->st = st;
    int k = snprintf(c->msg, sizeof c->msg, "line %d: ", c->line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg + (k > 0 && (size_t)k < sizeof c->msg ? k : 0), sizeof c->msg - (k > 0 ? (size_t)k : 0), fmt, ap);
    va_end(ap);
    return -1;
}

int sd_jtype_err(sd_jctx *c, const char *what, const sd_jv *a, const sd_jv *b) {
    if (a->t == SD_JT_UNDEF || (b && b->t == SD_JT_UNDEF)) {
        const sd_jv *u = a->t == SD_JT_UNDEF ? a : b;
        if (u->u.s.p) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "%.*s", (int)u->u.s.n, u->u.s.p);
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "an undefined value used in %s", what);
    }
    if (b)
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'",
                       what, sd_jv_typename(a), sd_jv_typename(b));
    return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: bad operand type for %s: '%s'", what, sd_jv_typename(a));
}

int sd_jstep(sd_jctx *c, uint64_t n) {
    c->steps += n;
    if (c->steps <= c->lim.max_steps) return 0;
    return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "the template took more than %llu evaluation steps (a loop without end?)",
                   (unsigned long long)c->lim.max_steps);
}

void *sd_jalloc(sd_jctx *c, size_t n) {
    void *p = sd_ja_alloc(&c->a, n);
    if (p) return p;
    if (c->a.fail == 2) sd_jerr(c, SPECDEC_ERR_OUT_OF_MEMORY, "out of memory");
    else sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "the template needs more than %zu MiB of memory", c->lim.max_memory >> 20);
    return NULL;
}

/* ---- buffers ---------------------------------------------------------------------------------------------- */
int sd_jbuf_put(sd_jctx *c, sd_jbuf *b, const char *s, size_t n) {
    if (!n) return 0;
    if (n > c->lim.max_bytes || c->bytes > c->lim.max_bytes - n)
        return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "the template builds more than %zu MiB of text", c->lim.max_bytes >> 20);
    c->bytes += n;
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) cap *= 2;
        char *p = sd_jalloc(c, cap);
        if (!p) return -1;
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

sd_jv sd_jbuf_val(const sd_jbuf *b) { return sd_jv_str(b->n ? b->p : "", b->n); }

int sd_jbuf_escape(sd_jctx *c, sd_jbuf *b, const char *s, size_t n) {
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const char *r = s[i] == '&' ? "&amp;" : s[i] == '<' ? "&lt;" : s[i] == '>' ? "&gt;" : s[i] == '"' ? "&#34;"
                      : s[i] == '\'' ? "&#39;" : NULL;
        if (!r) {
            run++;
            continue;
        }
        if (sd_jbuf_put(c, b, s + i - run, run) || sd_jbuf_puts(c, b, r)) return -1;
        run = 0;
    }
    return sd_jbuf_put(c, b, s + n - run, run);
}

/* ---- constructors --------------------------------------------------------------------------------------- */
sd_jv sd_jv_cstr(const char *s) { return sd_jv_str(s, strlen(s)); }

sd_jlist *sd_jlist_new(sd_jctx *c, size_t n) {
    if (n > ((size_t)1 << 32)) {
        sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "a list of %zu items", n);
        return NULL;
    }
    sd_jlist *l = sd_jalloc(c, sizeof *l + n * sizeof(sd_jv));
    if (l) {
        l->n = n;
        l->pos = 0;
    }
    return l;
}

sd_jv sd_jv_list(sd_jlist *l, int sub) {
    sd_jv v = {SD_JT_LIST, (uint8_t)sub, {.l = l}};
    return v;
}

sd_jdict *sd_jdict_new(sd_jctx *c, size_t cap) {
    sd_jdict *d = sd_jalloc(c, sizeof *d);
    if (!d) return NULL;
    d->n = 0;
    d->cap = cap ? cap : 4;
    d->k = sd_jalloc(c, d->cap * sizeof(sd_jv));
    d->v = sd_jalloc(c, d->cap * sizeof(sd_jv));
    return d->k && d->v ? d : NULL;
}

const sd_jv *sd_jdict_get(const sd_jdict *d, const sd_jv *k) {
    for (size_t i = 0; i < d->n; i++)
        if (sd_jv_eq(&d->k[i], k)) return &d->v[i];
    return NULL;
}

const sd_jv *sd_jdict_getz(const sd_jdict *d, const char *k, size_t kn) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == SD_JT_STR && d->k[i].u.s.n == kn && !memcmp(d->k[i].u.s.p, k, kn)) return &d->v[i];
    return NULL;
}

int sd_jdict_set(sd_jctx *c, sd_jdict *d, sd_jv k, sd_jv v) {
    for (size_t i = 0; i < d->n; i++) {
        if (sd_jv_eq(&d->k[i], &k)) {
            d->v[i] = v;
            return 0;
        }
    }
    if (sd_jstep(c, d->n / 16 + 1)) return -1; /* linear lookups: count them */
    if (d->n == d->cap) {
        size_t cap = 2 * d->cap;
        sd_jv *nk = sd_jalloc(c, cap * sizeof(sd_jv)), *nv = sd_jalloc(c, cap * sizeof(sd_jv));
        if (!nk || !nv) return -1;
        memcpy(nk, d->k, d->n * sizeof(sd_jv));
        memcpy(nv, d->v, d->n * sizeof(sd_jv));
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
    return 0;
}

/* ---- Python semantics ------------------------------------------------------------------------------------ */
int sd_jv_is_num(const sd_jv *v) { return v->t == SD_JT_INT || v->t == SD_JT_FLOAT || v->t == SD_JT_BOOL; }
double sd_jv_num(const sd_jv *v) { return v->t == SD_JT_FLOAT ? v->u.f : (double)v->u.i; }

int sd_jv_truthy(const sd_jv *v) {
    switch (v->t) {
    case SD_JT_UNDEF: case SD_JT_NONE: return 0;
    case SD_JT_BOOL: case SD_JT_INT: return v->u.i != 0;
    case SD_JT_FLOAT: return v->u.f != 0.0;
    case SD_JT_STR: return v->u.s.n != 0;
    case SD_JT_LIST: return v->sub == SD_JL_ITER || v->u.l->n != 0; /* a generator object is always true */
    case SD_JT_DICT: return v->u.d->n != 0;
    default: return 1;
    }
}

/* Python compares an int and a float exactly. */
static int sd_jv_num_cmp(const sd_jv *a, const sd_jv *b) {
    if (a->t != SD_JT_FLOAT && b->t != SD_JT_FLOAT) return a->u.i < b->u.i ? -1 : a->u.i > b->u.i;
    double x = sd_jv_num(a), y = sd_jv_num(b);
    if (a->t != SD_JT_FLOAT && fabs(y) < 9e15 && y == floor(y)) return a->u.i < (int64_t)y ? -1 : a->u.i > (int64_t)y;
    if (b->t != SD_JT_FLOAT && fabs(x) < 9e15 && x == floor(x)) return (int64_t)x < b->u.i ? -1 : (int64_t)x > b->u.i;
    if (x != x || y != y) return 2; /* NaN: unordered, unequal */
    return x < y ? -1 : x > y;
}

int sd_jv_eq(const sd_jv *a, const sd_jv *b) {
    if (sd_jv_is_num(a) && sd_jv_is_num(b)) return sd_jv_num_cmp(a, b) == 0;
    if (a->t != b->t) return 0;
    switch (a->t) {
    case SD_JT_UNDEF: case SD_JT_NONE: return 1;
    case SD_JT_STR: return a->u.s.n == b->u.s.n && !memcmp(a->u.s.p, b->u.s.p, a->u.s.n);
    case SD_JT_LIST:
        if (a->sub >= SD_JL_ITER || b->sub >= SD_JL_ITER) return a->u.l == b->u.l; /* identity */
        if (a->sub != b->sub || a->u.l->n != b->u.l->n) return 0;
        for (size_t i = 0; i < a->u.l->n; i++)
            if (!sd_jv_eq(&a->u.l->v[i], &b->u.l->v[i])) return 0;
        return 1;
    case SD_JT_DICT:
        if (a->u.d->n != b->u.d->n) return 0;
        for (size_t i = 0; i < a->u.d->n; i++) {
            const sd_jv *o = sd_jdict_get(b->u.d, &a->u.d->k[i]);
            if (!o || !sd_jv_eq(&a->u.d->v[i], o)) return 0;
        }
        return 1;
    case SD_JT_FUNC: return a->u.i == b->u.i;
    default: return a->u.d == b->u.d; /* identity */
    }
}

int sd_jv_lt(sd_jctx *c, const sd_jv *a, const sd_jv *b, int *lt) {
    if (sd_jv_is_num(a) && sd_jv_is_num(b)) {
        *lt = sd_jv_num_cmp(a, b) == -1;
        return 0;
    }
    if (a->t == SD_JT_STR && b->t == SD_JT_STR) {
        size_t m = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
        int r = memcmp(a->u.s.p, b->u.s.p, m);
        *lt = r < 0 || (r == 0 && a->u.s.n < b->u.s.n);
        return 0;
    }
    if (a->t == SD_JT_LIST && b->t == SD_JT_LIST && a->sub == b->sub && a->sub <= SD_JL_TUPLE) {
        size_t i = 0;
        while (i < a->u.l->n && i < b->u.l->n && sd_jv_eq(&a->u.l->v[i], &b->u.l->v[i])) i++;
        if (i < a->u.l->n && i < b->u.l->n) return sd_jv_lt(c, &a->u.l->v[i], &b->u.l->v[i], lt);
        *lt = a->u.l->n < b->u.l->n;
        return 0;
    }
    if (a->t == SD_JT_UNDEF || b->t == SD_JT_UNDEF) return sd_jtype_err(c, "'<'", a, b);
    return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: '<' not supported between instances of '%s' and '%s'",
                   sd_jv_typename(a), sd_jv_typename(b));
}

int sd_jv_hashable(const sd_jv *v) {
    if (v->t == SD_JT_DICT || v->t == SD_JT_NS || v->t == SD_JT_LOOP) return 0;
    if (v->t == SD_JT_LIST) {
        if (v->sub != SD_JL_TUPLE) return v->sub == SD_JL_ITER; /* generators hash by identity */
        for (size_t i = 0; i < v->u.l->n; i++)
            if (!sd_jv_hashable(&v->u.l->v[i])) return 0;
    }
    return 1;
}

const char *sd_jv_typename(const sd_jv *v) {
    switch (v->t) {
    case SD_JT_UNDEF: return "Undefined";
    case SD_JT_NONE: return "NoneType";
    case SD_JT_BOOL: return "bool";
    case SD_JT_INT: return "int";
    case SD_JT_FLOAT: return "float";
    case SD_JT_STR: return "str";
    case SD_JT_LIST: return v->sub == SD_JL_TUPLE ? "tuple" : v->sub == SD_JL_ITER ? "generator" : v->sub == SD_JL_VIEW ? "view" : "list";
    case SD_JT_DICT: return "dict";
    case SD_JT_NS: return "Namespace";
    case SD_JT_MACRO: return "Macro";
    case SD_JT_FUNC: return "builtin_function_or_method";
    case SD_JT_METHOD: return "method";
    default: return "LoopContext";
    }
}

/* ---- str(), repr() ---------------------------------------------------------------------------------------- */
/* Python's float repr: the shortest digits that read back to x. */
int sd_jv_write_float(sd_jctx *c, sd_jbuf *b, double f) {
    if (f != f) return sd_jbuf_puts(c, b, "nan");
    if (isinf(f)) return sd_jbuf_puts(c, b, f < 0 ? "-inf" : "inf");
    char tmp[64], digits[24];
    int exp10 = 0, nd = 0;
    if (f == 0.0) {
        return sd_jbuf_puts(c, b, signbit(f) ? "-0.0" : "0.0");
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f || prec == 17) break;
    }
    const char *p = tmp;
    if (*p == '-') p++;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < (int)sizeof digits - 1) digits[nd++] = *p;
    if (*p == 'e') exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    int decpt = exp10 + 1;
    char out[64];
    size_t o = 0;
    if (f < 0) out[o++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int k = 0; k < -decpt; k++) out[o++] = '0';
            for (int k = 0; k < nd; k++) out[o++] = digits[k];
        } else {
            for (int k = 0; k < decpt; k++) out[o++] = k < nd ? digits[k] : '0';
            out[o++] = '.';
            if (decpt >= nd) out[o++] = '0';
            for (int k = decpt; k < nd; k++) out[o++] = digits[k];
        }
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int k = 1; k < nd; k++) out[o++] = digits[k];
        }
        o += (size_t)snprintf(out + o, sizeof out - o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
    return sd_jbuf_put(c, b, out, o);
}

/* Python's str.isprintable() for a non-ASCII code point: not of the categories Cc, Cf, Cs, Co,
 * Cn, Zl, Zp, Zs (utf8proc's tables, Unicode 15; Python 3.11 has 14: characters new in 15 differ). */
static int sd_jv_printable(int32_t cp) {
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS: return 0;
    default: return 1;
    }
}

/* s[0..n) between quote characters q, each code point either copied or replaced by what esc
 * writes into e (its length; 0 = copy it). */
typedef int (*sd_jesc_fn)(int32_t cp, int arg, char e[16]);
static int sd_jv_write_quoted(sd_jctx *c, sd_jbuf *b, const char *s, size_t n, char q, sd_jesc_fn esc, int arg) {
    if (sd_jbuf_put(c, b, &q, 1)) return -1;
    size_t run = 0; /* bytes copied as they are, flushed before an escape */
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t k = sd_utf8_next(s + i, n - i, &cp);
        if (!k) k = 1;
        char e[16];
        int en = esc(cp, arg, e);
        if (en) {
            if (sd_jbuf_put(c, b, s + i - run, run) || sd_jbuf_put(c, b, e, (size_t)en)) return -1;
            run = 0;
        } else {
            run += k;
        }
        i += k;
    }
    if (sd_jbuf_put(c, b, s + n - run, run)) return -1;
    return sd_jbuf_put(c, b, &q, 1);
}

/* Python's repr() escapes inside quote q. */
static int sd_jesc_repr(int32_t cp, int q, char e[16]) {
    if (cp == q || cp == '\\') return snprintf(e, 16, "\\%c", (char)cp);
    if (cp == '\t') return snprintf(e, 16, "\\t");
    if (cp == '\n') return snprintf(e, 16, "\\n");
    if (cp == '\r') return snprintf(e, 16, "\\r");
    if (cp < 0x20 || cp == 0x7F) return snprintf(e, 16, "\\x%02x", (unsigned)cp);
    if (cp < 0x80 || sd_jv_printable(cp)) return 0;
    return cp <= 0xFF ? snprintf(e, 16, "\\x%02x", (unsigned)cp)
         : cp <= 0xFFFF ? snprintf(e, 16, "\\u%04x", (unsigned)cp) : snprintf(e, 16, "\\U%08x", (unsigned)cp);
}

static int sd_jv_write_str_repr(sd_jctx *c, sd_jbuf *b, const char *s, size_t n) {
    char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
    return sd_jv_write_quoted(c, b, s, n, q, sd_jesc_repr, q);
}

static int sd_jv_enter(sd_jctx *c) {
    if (++c->depth <= c->lim.max_depth) return 0;
    c->depth--;
    return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "values or calls nested deeper than %d levels", c->lim.max_depth);
}

static int sd_jv_write_dict_repr(sd_jctx *c, sd_jbuf *b, const sd_jdict *d) {
    if (sd_jbuf_puts(c, b, "{")) return -1;
    for (size_t i = 0; i < d->n; i++) {
        if ((i && sd_jbuf_puts(c, b, ", ")) || sd_jv_write_repr(c, b, &d->k[i]) || sd_jbuf_puts(c, b, ": ") ||
            sd_jv_write_repr(c, b, &d->v[i]))
            return -1;
    }
    return sd_jbuf_puts(c, b, "}");
}

int sd_jv_write_repr(sd_jctx *c, sd_jbuf *b, const sd_jv *v) {
    if (sd_jstep(c, 1)) return -1;
    switch (v->t) {
    case SD_JT_UNDEF: return sd_jbuf_puts(c, b, "Undefined");
    case SD_JT_STR:
        if (v->sub == SD_JS_MARKUP)
            return sd_jbuf_puts(c, b, "Markup(") || sd_jv_write_str_repr(c, b, v->u.s.p, v->u.s.n) || sd_jbuf_puts(c, b, ")");
        return sd_jv_write_str_repr(c, b, v->u.s.p, v->u.s.n);
    case SD_JT_LIST: {
        if (v->sub >= SD_JL_ITER)
            return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "printing a %s object is not supported", sd_jv_typename(v));
        if (sd_jv_enter(c)) return -1;
        int r = sd_jbuf_puts(c, b, v->sub ? "(" : "[");
        for (size_t i = 0; !r && i < v->u.l->n; i++)
            r = (i && sd_jbuf_puts(c, b, ", ")) || sd_jv_write_repr(c, b, &v->u.l->v[i]);
        if (!r && v->sub && v->u.l->n == 1) r = sd_jbuf_puts(c, b, ",");
        if (!r) r = sd_jbuf_puts(c, b, v->sub ? ")" : "]");
        c->depth--;
        return r ? -1 : 0;
    }
    case SD_JT_DICT:
    case SD_JT_NS: {
        if (sd_jv_enter(c)) return -1;
        int r = (v->t == SD_JT_NS && sd_jbuf_puts(c, b, "<Namespace ")) || sd_jv_write_dict_repr(c, b, v->u.d) ||
                (v->t == SD_JT_NS && sd_jbuf_puts(c, b, ">"));
        c->depth--;
        return r ? -1 : 0;
    }
    default: return sd_jv_write_str(c, b, v);
    }
}

int sd_jv_write_str(sd_jctx *c, sd_jbuf *b, const sd_jv *v) {
    char tmp[32];
    switch (v->t) {
    case SD_JT_UNDEF: return 0;
    case SD_JT_NONE: return sd_jbuf_puts(c, b, "None");
    case SD_JT_BOOL: return sd_jbuf_puts(c, b, v->u.i ? "True" : "False");
    case SD_JT_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i); return sd_jbuf_puts(c, b, tmp);
    case SD_JT_FLOAT: return sd_jv_write_float(c, b, v->u.f);
    case SD_JT_STR: return sd_jbuf_put(c, b, v->u.s.p, v->u.s.n);
    case SD_JT_LIST: case SD_JT_DICT: case SD_JT_NS: return sd_jv_write_repr(c, b, v);
    default:
        return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "printing a %s object is not supported", sd_jv_typename(v));
    }
}

int sd_jv_str_of(sd_jctx *c, const sd_jv *v, sd_jv *out) {
    if (v->t == SD_JT_STR) {
        *out = *v;
        return 0;
    }
    sd_jbuf b = {0};
    if (sd_jv_write_str(c, &b, v)) return -1;
    *out = sd_jbuf_val(&b);
    return 0;
}

/* ---- json.dumps ------------------------------------------------------------------------------------------------- */
/* json.dumps escapes (ensure_ascii: also every non-ASCII code point, as UTF-16). */
static int sd_jesc_json(int32_t cp, int ascii, char e[16]) {
    switch (cp) {
    case '"': return snprintf(e, 16, "\\\"");
    case '\\': return snprintf(e, 16, "\\\\");
    case '\n': return snprintf(e, 16, "\\n");
    case '\r': return snprintf(e, 16, "\\r");
    case '\t': return snprintf(e, 16, "\\t");
    case '\b': return snprintf(e, 16, "\\b");
    case '\f': return snprintf(e, 16, "\\f");
    default: break;
    }
    if (!(cp < 0x20 || (ascii && cp >= 0x7F))) return 0;
    if (cp <= 0xFFFF) return snprintf(e, 16, "\\u%04x", (unsigned)cp);
    int32_t v = cp - 0x10000;
    return snprintf(e, 16, "\\u%04x\\u%04x", (unsigned)(0xD800 + (v >> 10)), (unsigned)(0xDC00 + (v & 0x3FF)));
}

static int sd_jjson_str(sd_jctx *c, sd_jbuf *b, const char *s, size_t n, int ascii) {
    return sd_jv_write_quoted(c, b, s, n, '"', sd_jesc_json, ascii);
}

static int sd_jjson_newline(sd_jctx *c, sd_jbuf *b, const sd_jjson_opts *o, int level) {
    if (sd_jbuf_puts(c, b, "\n")) return -1;
    for (int i = 0; i < level; i++) {
        if (o->indent_s) {
            if (sd_jbuf_put(c, b, o->indent_s, o->indent_n)) return -1;
        } else {
            for (int k = 0; k < o->indent; k++)
                if (sd_jbuf_puts(c, b, " ")) return -1;
        }
    }
    return 0;
}

static int sd_jjson_key(sd_jctx *c, sd_jbuf *b, const sd_jv *k, const sd_jjson_opts *o) {
    switch (k->t) {
    case SD_JT_STR: return sd_jjson_str(c, b, k->u.s.p, k->u.s.n, o->ensure_ascii);
    case SD_JT_BOOL: return sd_jbuf_puts(c, b, k->u.i ? "\"true\"" : "\"false\"");
    case SD_JT_NONE: return sd_jbuf_puts(c, b, "\"null\"");
    case SD_JT_INT: case SD_JT_FLOAT: {
        sd_jbuf t = {0};
        if (k->t == SD_JT_FLOAT && (k->u.f != k->u.f || isinf(k->u.f)))
            return sd_jbuf_puts(c, b, k->u.f != k->u.f ? "\"NaN\"" : k->u.f > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        if (sd_jv_write_str(c, &t, k)) return -1;
        return sd_jjson_str(c, b, t.p, t.n, 0);
    }
    default:
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: keys must be str, int, float, bool or None, not %s",
                       sd_jv_typename(k));
    }
}

static int sd_jjson_container(sd_jctx *c, sd_jbuf *b, const sd_jv *v, const sd_jjson_opts *o, int level) {
    int is_dict = v->t == SD_JT_DICT;
    size_t n = is_dict ? v->u.d->n : v->u.l->n;
    if (!n) return sd_jbuf_puts(c, b, is_dict ? "{}" : "[]");
    size_t *order = NULL;
    if (is_dict && o->sort_keys) { /* insertion sort of indices by key */
        if (!(order = sd_jalloc(c, n * sizeof *order))) return -1;
        for (size_t i = 0; i < n; i++) {
            size_t j = i;
            int lt = 0;
            while (j > 0) {
                if (sd_jstep(c, 1) || sd_jv_lt(c, &v->u.d->k[i], &v->u.d->k[order[j - 1]], &lt)) return -1;
                if (!lt) break;
                order[j] = order[j - 1];
                j--;
            }
            order[j] = i;
        }
    }
    int pretty = o->indent >= 0 || o->indent_s;
    if (sd_jbuf_puts(c, b, is_dict ? "{" : "[")) return -1;
    for (size_t i = 0; i < n; i++) {
        if (i && sd_jbuf_put(c, b, o->item_sep, o->item_sep_n)) return -1;
        if (pretty && sd_jjson_newline(c, b, o, level + 1)) return -1;
        if (is_dict) {
            size_t k = order ? order[i] : i;
            if (sd_jjson_key(c, b, &v->u.d->k[k], o) || sd_jbuf_put(c, b, o->key_sep, o->key_sep_n) ||
                sd_jv_write_json(c, b, &v->u.d->v[k], o, level + 1))
                return -1;
        } else if (sd_jv_write_json(c, b, &v->u.l->v[i], o, level + 1)) {
            return -1;
        }
    }
    if (pretty && sd_jjson_newline(c, b, o, level)) return -1;
    return sd_jbuf_puts(c, b, is_dict ? "}" : "]");
}

int sd_jv_write_json(sd_jctx *c, sd_jbuf *b, const sd_jv *v, const sd_jjson_opts *o, int level) {
    char tmp[32];
    if (sd_jstep(c, 1)) return -1;
    switch (v->t) {
    case SD_JT_NONE: return sd_jbuf_puts(c, b, "null");
    case SD_JT_BOOL: return sd_jbuf_puts(c, b, v->u.i ? "true" : "false");
    case SD_JT_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i); return sd_jbuf_puts(c, b, tmp);
    case SD_JT_FLOAT:
        if (v->u.f != v->u.f) return sd_jbuf_puts(c, b, "NaN");
        if (isinf(v->u.f)) return sd_jbuf_puts(c, b, v->u.f > 0 ? "Infinity" : "-Infinity");
        return sd_jv_write_float(c, b, v->u.f);
    case SD_JT_STR: return sd_jjson_str(c, b, v->u.s.p, v->u.s.n, o->ensure_ascii);
    case SD_JT_LIST:
        if (v->sub >= SD_JL_ITER) break;
        /* fall through */
    case SD_JT_DICT: {
        if (sd_jv_enter(c)) return -1;
        int r = sd_jjson_container(c, b, v, o, level);
        c->depth--;
        return r;
    }
    default: break;
    }
    return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: Object of type %s is not JSON serializable", sd_jv_typename(v));
}

/* ---- iteration ---------------------------------------------------------------------------------------------- */
int sd_jv_items(sd_jctx *c, const sd_jv *v, const sd_jv **items, size_t *n) {
    *items = NULL;
    *n = 0;
    switch (v->t) {
    case SD_JT_UNDEF: return 0;
    case SD_JT_LIST:
        *items = v->u.l->v + v->u.l->pos;
        *n = v->u.l->n - v->u.l->pos;
        if (v->sub == SD_JL_ITER) v->u.l->pos = v->u.l->n; /* a generator is consumed */
        return 0;
    case SD_JT_DICT: *items = v->u.d->k; *n = v->u.d->n; return 0;
    case SD_JT_STR: {
        size_t cps = sd_jstr_len(v->u.s.p, v->u.s.n);
        sd_jv *out = sd_jalloc(c, (cps ? cps : 1) * sizeof *out);
        if (!out || sd_jstep(c, cps)) return -1;
        size_t i = 0;
        for (size_t off = 0; off < v->u.s.n; i++) {
            int32_t cp;
            size_t k = sd_utf8_next(v->u.s.p + off, v->u.s.n - off, &cp);
            if (!k) k = 1;
            out[i] = sd_jv_str(v->u.s.p + off, k);
            off += k;
        }
        *items = out;
        *n = i;
        return 0;
    }
    default:
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: '%s' object is not iterable", sd_jv_typename(v));
    }
}

/* ---- JSON variables ----------------------------------------------------------------------------------------- */
int sd_jv_from_json(sd_jctx *c, const cJSON *j, sd_jv *out, int depth) {
    if (depth > 64) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "a variable nested deeper than 64 levels");
    if (sd_jstep(c, 1)) return -1;
    if (cJSON_IsNull(j)) { *out = sd_jv_none(); return 0; }
    if (cJSON_IsBool(j)) { *out = sd_jv_bool(cJSON_IsTrue(j)); return 0; }
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        *out = d == floor(d) && fabs(d) <= 9007199254740992.0 ? sd_jv_int((int64_t)d) : sd_jv_float(d);
        return 0;
    }
    if (cJSON_IsString(j)) {
        size_t n = strlen(j->valuestring);
        if (!sd_utf8_valid((const unsigned char *)j->valuestring, n))
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "a string variable is not valid UTF-8");
        *out = sd_jv_str(j->valuestring, n);
        return 0;
    }
    if (cJSON_IsArray(j)) {
        sd_jlist *l = sd_jlist_new(c, (size_t)cJSON_GetArraySize(j));
        if (!l) return -1;
        size_t i = 0;
        for (const cJSON *e = j->child; e; e = e->next)
            if (sd_jv_from_json(c, e, &l->v[i++], depth + 1)) return -1;
        *out = sd_jv_list(l, 0);
        return 0;
    }
    if (cJSON_IsObject(j)) {
        sd_jdict *d = sd_jdict_new(c, (size_t)cJSON_GetArraySize(j));
        if (!d) return -1;
        for (const cJSON *e = j->child; e; e = e->next) {
            sd_jv v;
            size_t kn = strlen(e->string);
            if (!sd_utf8_valid((const unsigned char *)e->string, kn))
                return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "a key of a variable is not valid UTF-8");
            if (sd_jv_from_json(c, e, &v, depth + 1) || sd_jdict_set(c, d, sd_jv_str(e->string, kn), v)) return -1;
        }
        out->t = SD_JT_DICT;
        out->sub = 0;
        out->u.d = d;
        return 0;
    }
    return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "a variable of an unknown JSON type");
}

/* ---- strings -------------------------------------------------------------------------------------------------- */
size_t sd_jstr_len(const char *p, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)p[i] & 0xC0) != 0x80;
    return k;
}

size_t sd_jstr_off(const char *p, size_t n, size_t cps) {
    size_t i = 0;
    for (size_t k = 0; i < n; i++) {
        if (((unsigned char)p[i] & 0xC0) != 0x80) {
            if (k == cps) return i;
            k++;
        }
    }
    return n;
}

int sd_jpy_space(int32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static int sd_jstr_has_cp(const sd_jv *set, int32_t cp) {
    for (size_t i = 0; i < set->u.s.n;) {
        int32_t x;
        size_t k = sd_utf8_next(set->u.s.p + i, set->u.s.n - i, &x);
        if (x == cp) return 1;
        i += k ? k : 1;
    }
    return 0;
}

int sd_jv_strip(sd_jctx *c, const sd_jv *s, const sd_jv *chars, int left, int right, sd_jv *out) {
    int ws = !chars || chars->t == SD_JT_NONE || chars->t == SD_JT_UNDEF;
    if (!ws && chars->t != SD_JT_STR)
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: strip arg must be None or str");
    const char *p = s->u.s.p;
    size_t a = 0, e = s->u.s.n;
    while (left && a < e) {
        int32_t cp;
        size_t k = sd_utf8_next(p + a, e - a, &cp);
        if (!k || !(ws ? sd_jpy_space(cp) : sd_jstr_has_cp(chars, cp))) break;
        a += k;
    }
    while (right && e > a) {
        size_t b = e - 1;
        while (b > a && ((unsigned char)p[b] & 0xC0) == 0x80) b--;
        int32_t cp;
        sd_utf8_next(p + b, e - b, &cp);
        if (!(ws ? sd_jpy_space(cp) : sd_jstr_has_cp(chars, cp))) break;
        e = b;
    }
    *out = sd_jv_str(p + a, e - a);
    return 0;
}

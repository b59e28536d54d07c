/* sd_jinja_methods.c — Python methods templates call on values (str: strip/lstrip/rstrip, split/
 * rsplit, startswith/endswith, replace, upper/lower/title/capitalize, find/rfind/count, join,
 * splitlines, removeprefix/removesuffix, is*; dict: items/keys/values/get; list: index/count;
 * loop: cycle/changed), the globals of transformers' environment (range, namespace, dict,
 * raise_exception, strftime_now) and a locale-independent strftime.
 *
 * The sandbox transformers renders in (ImmutableSandboxedEnvironment) refuses methods that modify
 * a list or dict (append, pop, update, ...): they raise here too, so values never change after
 * they are made, except a namespace's attributes. Case mapping is utf8proc's (Python's, except
 * for the few characters refused in sd_jstr_case). */
#define _POSIX_C_SOURCE 200809L /* localtime_r */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <utf8proc.h>

#include "sd_jinja_int.h"
#include "sd_utf8.h"

enum {
    M_STRIP, M_LSTRIP, M_RSTRIP, M_SPLIT, M_RSPLIT, M_STARTSWITH, M_ENDSWITH, M_REPLACE, M_UPPER, M_LOWER, M_TITLE,
    M_CAPITALIZE, M_FIND, M_RFIND, M_COUNT, M_JOIN, M_SPLITLINES, M_REMOVEPREFIX, M_REMOVESUFFIX, M_ISDIGIT, M_ISALPHA,
    M_ISALNUM, M_ISSPACE, M_ISUPPER, M_ISLOWER, M_FORMAT,
    M_ITEMS, M_KEYS, M_VALUES, M_GET, M_DICT_UNSAFE,
    M_INDEX, M_LCOUNT, M_LIST_UNSAFE,
    M_CYCLE, M_CHANGED
};

static const struct { const char *name; int id; } sd_jstr_methods[] = {
    {"strip", M_STRIP},   {"lstrip", M_LSTRIP},         {"rstrip", M_RSTRIP},       {"split", M_SPLIT},
    {"rsplit", M_RSPLIT}, {"startswith", M_STARTSWITH}, {"endswith", M_ENDSWITH},   {"replace", M_REPLACE},
    {"upper", M_UPPER},   {"lower", M_LOWER},           {"title", M_TITLE},         {"capitalize", M_CAPITALIZE},
    {"find", M_FIND},     {"rfind", M_RFIND},           {"count", M_COUNT},         {"join", M_JOIN},
    {"splitlines", M_SPLITLINES}, {"removeprefix", M_REMOVEPREFIX}, {"removesuffix", M_REMOVESUFFIX},
    {"isdigit", M_ISDIGIT}, {"isalpha", M_ISALPHA},     {"isalnum", M_ISALNUM},     {"isspace", M_ISSPACE},
    {"isupper", M_ISUPPER}, {"islower", M_ISLOWER},     {"format", M_FORMAT},
}, sd_jdict_methods[] = {
    {"items", M_ITEMS}, {"keys", M_KEYS}, {"values", M_VALUES}, {"get", M_GET}, {"copy", M_DICT_UNSAFE},
    {"update", M_DICT_UNSAFE}, {"pop", M_DICT_UNSAFE}, {"popitem", M_DICT_UNSAFE}, {"setdefault", M_DICT_UNSAFE},
    {"clear", M_DICT_UNSAFE}, {"fromkeys", M_DICT_UNSAFE},
}, sd_jlist_methods[] = {
    {"index", M_INDEX}, {"count", M_LCOUNT}, {"append", M_LIST_UNSAFE}, {"extend", M_LIST_UNSAFE}, {"insert", M_LIST_UNSAFE},
    {"pop", M_LIST_UNSAFE}, {"remove", M_LIST_UNSAFE}, {"clear", M_LIST_UNSAFE}, {"sort", M_LIST_UNSAFE},
    {"reverse", M_LIST_UNSAFE}, {"copy", M_LIST_UNSAFE},
}, sd_jloop_methods[] = {{"cycle", M_CYCLE}, {"changed", M_CHANGED}};

#define SD_JM_FIND(tab)                                                                                  \
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)                                              \
        if (strlen(tab[i].name) == n && !memcmp(tab[i].name, name, n)) return tab[i].id;

int sd_jmethod_id(const sd_jv *self, const char *name, size_t n) {
    switch (self->t) {
    case SD_JT_STR: SD_JM_FIND(sd_jstr_methods) break;
    case SD_JT_DICT: SD_JM_FIND(sd_jdict_methods) break;
    case SD_JT_LIST: SD_JM_FIND(sd_jlist_methods) break;
    case SD_JT_LOOP: SD_JM_FIND(sd_jloop_methods) break;
    default: break;
    }
    return -1;
}

static const char *const sd_jglobals[SD_JF_N] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

int sd_jglobal_id(const char *name, size_t n) {
    for (int i = 0; i < SD_JF_N; i++)
        if (strlen(sd_jglobals[i]) == n && !memcmp(sd_jglobals[i], name, n)) return i;
    return -1;
}

/* ---- case mapping ------------------------------------------------------------------------------------ */
/* utf8proc's simple case mappings are Python's (checked over every code point against Python
 * 3.11 / Unicode 14) except where Python's full mapping has several characters: those, and the
 * context-dependent final sigma of lower(), are refused rather than mapped differently. */
static const int32_t sd_jcase_special[][2] = {
    {0xDF, 0xDF},     {0x130, 0x130},   {0x149, 0x149},   {0x1F0, 0x1F0},   {0x390, 0x390},   {0x3A3, 0x3A3},
    {0x3B0, 0x3B0},   {0x587, 0x587},   {0x1E96, 0x1E9A}, {0x1F50, 0x1F50}, {0x1F52, 0x1F52}, {0x1F54, 0x1F54},
    {0x1F56, 0x1F56}, {0x1F80, 0x1FAF}, {0x1FB2, 0x1FB4}, {0x1FB6, 0x1FB7}, {0x1FBC, 0x1FBC}, {0x1FC2, 0x1FC4},
    {0x1FC6, 0x1FC7}, {0x1FCC, 0x1FCC}, {0x1FD2, 0x1FD3}, {0x1FD6, 0x1FD7}, {0x1FE2, 0x1FE4}, {0x1FE6, 0x1FE7},
    {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FF7}, {0x1FFC, 0x1FFC}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}};
/* Cased in Python (Other_Lowercase / Other_Uppercase) but not of category Lu/Ll/Lt. */
static const int32_t sd_jcase_other[][2] = {
    {0xAA, 0xAA},       {0xBA, 0xBA},       {0x2B0, 0x2B8},     {0x2C0, 0x2C1},   {0x2E0, 0x2E4},   {0x345, 0x345},
    {0x37A, 0x37A},     {0x1D2C, 0x1D6A},   {0x1D78, 0x1D78},   {0x1D9B, 0x1DBF}, {0x2071, 0x2071}, {0x207F, 0x207F},
    {0x2090, 0x209C},   {0x2160, 0x217F},   {0x24B6, 0x24E9},   {0x2C7C, 0x2C7D}, {0xA69C, 0xA69D}, {0xA770, 0xA770},
    {0xA7F8, 0xA7F9},   {0xAB5C, 0xAB5F},   {0x10780, 0x10780}, {0x10783, 0x10785}, {0x10787, 0x107B0},
    {0x107B2, 0x107BA}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169}, {0x1F170, 0x1F189}};

static int sd_jin(const int32_t (*r)[2], size_t n, int32_t cp) {
    for (size_t i = 0; i < n; i++)
        if (cp >= r[i][0] && cp <= r[i][1]) return 1;
    return 0;
}

static int sd_jcased(int32_t cp) {
    utf8proc_category_t k = utf8proc_category(cp);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
           sd_jin(sd_jcase_other, sizeof sd_jcase_other / sizeof sd_jcase_other[0], cp);
}

/* Jinja's title filter word boundaries: [-\s({[<]. */
static int sd_jtitle_sep(int32_t cp) { return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || sd_jpy_space(cp); }

int sd_jstr_case(sd_jctx *c, const sd_jv *s, int mode, sd_jv *out) {
    const char *p = s->u.s.p;
    size_t n = s->u.s.n;
    sd_jbuf b = {0};
    int prev_cased = 0, at_start = 1, first = 1;
    if (sd_jstep(c, n / 16)) return -1;
    for (size_t i = 0; i < n;) {
        int32_t cp, m;
        size_t k = sd_utf8_next(p + i, n - i, &cp);
        if (!k) k = 1;
        if (cp >= 0x80 && sd_jin(sd_jcase_special, sizeof sd_jcase_special / sizeof sd_jcase_special[0], cp) &&
            !(mode == 'u' && cp == 0x3A3))
            return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "case mapping of U+%04X (a multi-character or context-dependent "
                           "mapping in Python) is not supported", (unsigned)cp);
        switch (mode) {
        case 'u': m = utf8proc_toupper(cp); break;
        case 'l': m = utf8proc_tolower(cp); break;
        case 'c': m = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp); break; /* str.capitalize() */
        case 't': /* str.title(): title case after an uncased character, lower case after a cased one */
            m = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
            prev_cased = sd_jcased(cp);
            break;
        default: { /* Jinja's title filter: each chunk between separator runs: first upper, rest lower */
            int sep = sd_jtitle_sep(cp);
            m = sep ? cp : at_start ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
            at_start = sep;
        }
        }
        first = 0;
        char e[4];
        if (m == cp ? sd_jbuf_put(c, &b, p + i, k) : sd_jbuf_put(c, &b, e, sd_utf8_put(e, m))) return -1;
        i += k;
    }
    *out = sd_jbuf_val(&b);
    return 0;
}

/* ---- str methods -------------------------------------------------------------------------------------- */
static int sd_jsplit_push(sd_jctx *c, sd_jv **v, size_t *n, size_t *cap, sd_jv x) {
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        sd_jv *nv = sd_jalloc(c, nc * sizeof *nv);
        if (!nv) return -1;
        if (*n) memcpy(nv, *v, *n * sizeof *nv);
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = x;
    return sd_jstep(c, 1);
}

static size_t sd_jspace_at(const char *p, size_t n, size_t i) {
    int32_t cp;
    size_t k = sd_utf8_next(p + i, n - i, &cp);
    return k && sd_jpy_space(cp) ? k : 0;
}

/* Whitespace split (sep None) from the left. */
static int sd_jsplit_ws(sd_jctx *c, const char *p, size_t n, int64_t maxsplit, sd_jv **v, size_t *cnt, size_t *cap) {
    size_t i = 0;
    for (;;) {
        size_t k;
        while (i < n && (k = sd_jspace_at(p, n, i))) i += k;
        if (i >= n) return 0;
        if (maxsplit >= 0 && (int64_t)*cnt >= maxsplit) { /* the rest, trailing whitespace kept */
            return sd_jsplit_push(c, v, cnt, cap, sd_jv_str(p + i, n - i));
        }
        size_t a = i;
        while (i < n && !sd_jspace_at(p, n, i)) {
            int32_t cp;
            size_t kk = sd_utf8_next(p + i, n - i, &cp);
            i += kk ? kk : 1;
        }
        if (sd_jsplit_push(c, v, cnt, cap, sd_jv_str(p + a, i - a))) return -1;
    }
}

/* Whitespace rsplit: pieces collected right to left (reversed by the caller). */
static int sd_jrsplit_ws(sd_jctx *c, const char *p, size_t n, int64_t maxsplit, sd_jv **v, size_t *cnt, size_t *cap) {
    size_t e = n;
    for (;;) {
        while (e > 0) {
            size_t b = e - 1;
            while (b && ((unsigned char)p[b] & 0xC0) == 0x80) b--;
            if (!sd_jspace_at(p, e, b)) break;
            e = b;
        }
        if (!e) return 0;
        if (maxsplit >= 0 && (int64_t)*cnt >= maxsplit) return sd_jsplit_push(c, v, cnt, cap, sd_jv_str(p, e));
        size_t a = e;
        while (a > 0) {
            size_t b = a - 1;
            while (b && ((unsigned char)p[b] & 0xC0) == 0x80) b--;
            if (sd_jspace_at(p, a, b)) break;
            a = b;
        }
        if (sd_jsplit_push(c, v, cnt, cap, sd_jv_str(p + a, e - a))) return -1;
        e = a;
    }
}

int sd_jstr_split(sd_jctx *c, const sd_jv *s, const sd_jv *sep, int64_t maxsplit, int right, sd_jv *out) {
    sd_jv *v = NULL;
    size_t cnt = 0, cap = 0;
    const char *p = s->u.s.p;
    size_t n = s->u.s.n;
    if (!sep || sep->t == SD_JT_NONE) {
        if ((right ? sd_jrsplit_ws : sd_jsplit_ws)(c, p, n, maxsplit, &v, &cnt, &cap)) return -1;
    } else {
        if (sep->t != SD_JT_STR) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: must be str or None, not %s", sd_jv_typename(sep));
        size_t m = sep->u.s.n;
        if (!m) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ValueError: empty separator");
        if (!right) {
            size_t a = 0;
            for (size_t i = 0; i + m <= n;) {
                if ((maxsplit < 0 || (int64_t)cnt < maxsplit) && !memcmp(p + i, sep->u.s.p, m)) {
                    if (sd_jsplit_push(c, &v, &cnt, &cap, sd_jv_str(p + a, i - a))) return -1;
                    i += m;
                    a = i;
                } else {
                    i++;
                }
            }
            if (sd_jsplit_push(c, &v, &cnt, &cap, sd_jv_str(p + a, n - a))) return -1;
        } else {
            size_t e = n;
            for (size_t i = n; i >= m;) {
                if ((maxsplit < 0 || (int64_t)cnt < maxsplit) && !memcmp(p + i - m, sep->u.s.p, m)) {
                    if (sd_jsplit_push(c, &v, &cnt, &cap, sd_jv_str(p + i, e - i))) return -1;
                    i -= m;
                    e = i;
                } else {
                    i--;
                }
            }
            if (sd_jsplit_push(c, &v, &cnt, &cap, sd_jv_str(p, e))) return -1;
        }
    }
    sd_jlist *l = sd_jlist_new(c, cnt);
    if (!l) return -1;
    for (size_t i = 0; i < cnt; i++) l->v[i] = right ? v[cnt - 1 - i] : v[i];
    *out = sd_jv_list(l, 0);
    return 0;
}

int sd_jstr_replace(sd_jctx *c, const sd_jv *s, const sd_jv *old, const sd_jv *rep, int64_t count, sd_jv *out) {
    sd_jbuf b = {0};
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, m = old->u.s.n;
    int64_t done = 0;
    if (!m) { /* inserted before every character and at the end */
        for (size_t i = 0; i <= n;) {
            if ((count < 0 || done < count) && sd_jbuf_put(c, &b, rep->u.s.p, rep->u.s.n)) return -1;
            done++;
            if (i == n) break;
            int32_t cp;
            size_t k = sd_utf8_next(p + i, n - i, &cp);
            if (!k) k = 1;
            if (sd_jbuf_put(c, &b, p + i, k)) return -1;
            i += k;
        }
        *out = sd_jbuf_val(&b);
        return 0;
    }
    size_t a = 0;
    for (size_t i = 0; i + m <= n;) {
        if ((count < 0 || done < count) && !memcmp(p + i, old->u.s.p, m)) {
            if (sd_jbuf_put(c, &b, p + a, i - a) || sd_jbuf_put(c, &b, rep->u.s.p, rep->u.s.n)) return -1;
            done++;
            i += m;
            a = i;
        } else {
            i++;
        }
    }
    if (sd_jbuf_put(c, &b, p + a, n - a)) return -1;
    *out = sd_jbuf_val(&b);
    return sd_jstep(c, n / 64);
}

static int sd_jstr_arg(sd_jctx *c, const sd_jargs *a, size_t i, const char *what, sd_jv *out) {
    if (a->n <= i) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: %s() missing an argument", what);
    *out = a->pos[i];
    if (out->t != SD_JT_STR)
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: %s() argument must be str, not %s", what, sd_jv_typename(out));
    return 0;
}

/* startswith/endswith with a string or a tuple of strings. */
static int sd_jstr_affix(sd_jctx *c, const sd_jv *s, const sd_jargs *a, int end, sd_jv *out) {
    const char *what = end ? "endswith" : "startswith";
    if (a->n != 1 || a->nk)
        return sd_jerr(c, a->n > 1 ? SPECDEC_ERR_UNSUPPORTED : SPECDEC_ERR_INVALID_ARGUMENT, "%s(): exactly one argument is supported", what);
    const sd_jv *cand = &a->pos[0], *items = cand;
    size_t n = 1;
    if (cand->t == SD_JT_LIST && cand->sub == SD_JL_TUPLE) {
        items = cand->u.l->v;
        n = cand->u.l->n;
    } else if (cand->t != SD_JT_STR) {
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: %s first arg must be str or a tuple of str, not %s", what,
                       sd_jv_typename(cand));
    }
    int r = 0;
    for (size_t i = 0; i < n && !r; i++) {
        if (items[i].t != SD_JT_STR) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: tuple for %s must only contain str", what);
        size_t m = items[i].u.s.n;
        r = m <= s->u.s.n && !memcmp(s->u.s.p + (end ? s->u.s.n - m : 0), items[i].u.s.p, m);
    }
    *out = sd_jv_bool(r);
    return 0;
}

static int sd_jstr_find(sd_jctx *c, const sd_jv *s, const sd_jargs *a, int id, sd_jv *out) {
    sd_jv sub;
    if (a->n != 1 || a->nk) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "find/rfind/count: exactly one argument is supported");
    if (sd_jstr_arg(c, a, 0, id == M_COUNT ? "count" : "find", &sub)) return -1;
    size_t n = s->u.s.n, m = sub.u.s.n;
    int64_t found = -1, count = 0;
    if (id == M_COUNT && !m) {
        *out = sd_jv_int((int64_t)sd_jstr_len(s->u.s.p, n) + 1);
        return 0;
    }
    for (size_t i = 0; i + m <= n;) {
        if (!memcmp(s->u.s.p + i, sub.u.s.p, m)) {
            count++;
            found = (int64_t)i;
            if (id == M_FIND) break;
            i += id == M_COUNT ? (m ? m : 1) : 1;
        } else {
            i++;
        }
    }
    if (id == M_COUNT) *out = sd_jv_int(count);
    else *out = sd_jv_int(found < 0 ? -1 : (int64_t)sd_jstr_len(s->u.s.p, (size_t)found));
    return sd_jstep(c, n / 64);
}

/* Python's Uppercase / Lowercase properties (category Lu / Ll, or one of the Other_* ranges:
 * those with a lower-case mapping or among the squared capitals are upper case). */
static int sd_jupper_prop(int32_t cp) {
    if (utf8proc_category(cp) == UTF8PROC_CATEGORY_LU) return 1;
    return sd_jin(sd_jcase_other, sizeof sd_jcase_other / sizeof sd_jcase_other[0], cp) &&
           (utf8proc_tolower(cp) != cp || (cp >= 0x1F130 && cp <= 0x1F189));
}
static int sd_jlower_prop(int32_t cp) {
    if (utf8proc_category(cp) == UTF8PROC_CATEGORY_LL) return 1;
    return sd_jin(sd_jcase_other, sizeof sd_jcase_other / sizeof sd_jcase_other[0], cp) && !sd_jupper_prop(cp);
}

int sd_jstr_cased_test(sd_jctx *c, const sd_jv *s, int upper, int *res) {
    int cased = 0, ok = 1;
    for (size_t i = 0; i < s->u.s.n;) {
        int32_t cp;
        size_t k = sd_utf8_next(s->u.s.p + i, s->u.s.n - i, &cp);
        i += k ? k : 1;
        if (upper ? sd_jlower_prop(cp) || utf8proc_category(cp) == UTF8PROC_CATEGORY_LT : sd_jupper_prop(cp) || utf8proc_category(cp) == UTF8PROC_CATEGORY_LT)
            ok = 0;
        if (upper ? sd_jupper_prop(cp) : sd_jlower_prop(cp)) cased = 1;
    }
    *res = ok && cased;
    return sd_jstep(c, s->u.s.n / 64);
}

static int sd_jstr_is(sd_jctx *c, const sd_jv *s, int id, sd_jv *out) {
    int ok = s->u.s.n > 0;
    if (id == M_ISUPPER || id == M_ISLOWER) {
        if (sd_jstr_cased_test(c, s, id == M_ISUPPER, &ok)) return -1;
        *out = sd_jv_bool(ok);
        return 0;
    }
    for (size_t i = 0; i < s->u.s.n;) {
        int32_t cp;
        size_t k = sd_utf8_next(s->u.s.p + i, s->u.s.n - i, &cp);
        i += k ? k : 1;
        utf8proc_category_t cat = utf8proc_category(cp);
        int alpha = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO, digit = cp >= '0' && cp <= '9';
        if (id == M_ISSPACE) ok = ok && sd_jpy_space(cp);
        else if (id == M_ISALPHA) ok = ok && alpha;
        else if (cp >= 0x80 && !(id == M_ISALNUM && alpha)) /* Numeric_Type is not in utf8proc */
            return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "str.isdigit()/isalnum() of non-ASCII text is not supported");
        else ok = ok && (digit || (id == M_ISALNUM && alpha));
    }
    *out = sd_jv_bool(ok);
    return 0;
}

static int sd_jstr_join(sd_jctx *c, const sd_jv *sep, const sd_jargs *a, sd_jv *out) {
    const sd_jv *items;
    size_t n;
    if (a->n != 1 || a->nk) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: join() takes exactly one argument");
    if (sd_jv_items(c, &a->pos[0], &items, &n)) return -1;
    sd_jbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (items[i].t != SD_JT_STR)
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: sequence item %zu: expected str instance, %s found", i,
                           sd_jv_typename(&items[i]));
        if ((i && sd_jbuf_put(c, &b, sep->u.s.p, sep->u.s.n)) || sd_jbuf_put(c, &b, items[i].u.s.p, items[i].u.s.n)) return -1;
    }
    *out = sd_jbuf_val(&b);
    return 0;
}

static int sd_jstr_splitlines(sd_jctx *c, const sd_jv *s, sd_jv *out) {
    sd_jv *v = NULL;
    size_t cnt = 0, cap = 0, a = 0;
    const char *p = s->u.s.p;
    size_t n = s->u.s.n;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t k = sd_utf8_next(p + i, n - i, &cp);
        if (!k) k = 1;
        int br = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 ||
                 cp == 0x2028 || cp == 0x2029;
        if (br) {
            if (sd_jsplit_push(c, &v, &cnt, &cap, sd_jv_str(p + a, i - a))) return -1;
            if (cp == '\r' && i + 1 < n && p[i + 1] == '\n') k = 2;
            a = i + k;
        }
        i += k;
    }
    if (a < n && sd_jsplit_push(c, &v, &cnt, &cap, sd_jv_str(p + a, n - a))) return -1;
    sd_jlist *l = sd_jlist_new(c, cnt);
    if (!l) return -1;
    if (cnt) memcpy(l->v, v, cnt * sizeof *v);
    *out = sd_jv_list(l, 0);
    return 0;
}

static int sd_jstr_method(sd_jctx *c, const sd_jv *s, int id, const sd_jargs *a, sd_jv *out) {
    sd_jv x, y;
    switch (id) {
    case M_STRIP: case M_LSTRIP: case M_RSTRIP:
        if (a->n > 1 || a->nk) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: strip() takes at most 1 argument");
        return sd_jv_strip(c, s, a->n ? &a->pos[0] : NULL, id != M_RSTRIP, id != M_LSTRIP, out);
    case M_SPLIT: case M_RSPLIT: {
        static const char *const names[] = {"sep", "maxsplit", NULL};
        if (sd_jargs_check(c, a, 2, names, "split")) return -1;
        int hs = sd_jarg(c, a, 0, "sep", &x), hm = sd_jarg(c, a, 1, "maxsplit", &y);
        if (hs < 0 || hm < 0) return -1;
        if (hm && y.t != SD_JT_INT && y.t != SD_JT_BOOL) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: maxsplit must be an int");
        return sd_jstr_split(c, s, hs ? &x : NULL, hm ? y.u.i : -1, id == M_RSPLIT, out);
    }
    case M_STARTSWITH: case M_ENDSWITH: return sd_jstr_affix(c, s, a, id == M_ENDSWITH, out);
    case M_REPLACE: {
        if (a->nk || a->n < 2 || a->n > 3) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: replace() takes 2 or 3 arguments");
        if (sd_jstr_arg(c, a, 0, "replace", &x) || sd_jstr_arg(c, a, 1, "replace", &y)) return -1;
        if (a->n == 3 && a->pos[2].t != SD_JT_INT) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: replace() count must be an int");
        return sd_jstr_replace(c, s, &x, &y, a->n == 3 ? a->pos[2].u.i : -1, out);
    }
    case M_UPPER: case M_LOWER: case M_TITLE: case M_CAPITALIZE:
        if (a->n || a->nk) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: the method takes no arguments");
        return sd_jstr_case(c, s, id == M_UPPER ? 'u' : id == M_LOWER ? 'l' : id == M_TITLE ? 't' : 'c', out);
    case M_FIND: case M_RFIND: case M_COUNT: return sd_jstr_find(c, s, a, id, out);
    case M_JOIN: return sd_jstr_join(c, s, a, out);
    case M_SPLITLINES:
        if (a->n || a->nk) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "splitlines(keepends) is not supported");
        return sd_jstr_splitlines(c, s, out);
    case M_REMOVEPREFIX: case M_REMOVESUFFIX: {
        if (a->nk || sd_jstr_arg(c, a, 0, id == M_REMOVEPREFIX ? "removeprefix" : "removesuffix", &x)) return -1;
        size_t m = x.u.s.n;
        *out = *s;
        if (m <= s->u.s.n && !memcmp(s->u.s.p + (id == M_REMOVESUFFIX ? s->u.s.n - m : 0), x.u.s.p, m))
            *out = sd_jv_str(s->u.s.p + (id == M_REMOVEPREFIX ? m : 0), s->u.s.n - m);
        return 0;
    }
    case M_FORMAT: return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "str.format() is not supported");
    default:
        if (a->n || a->nk) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: the method takes no arguments");
        return sd_jstr_is(c, s, id, out);
    }
}

/* ---- dict, list, loop methods ------------------------------------------------------------------------------------ */
static int sd_jdict_method(sd_jctx *c, const sd_jdict *d, int id, const sd_jargs *a, sd_jv *out) {
    if (id == M_GET) {
        if (a->nk || a->n < 1 || a->n > 2) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: get() takes 1 or 2 arguments");
        const sd_jv *v = sd_jv_hashable(&a->pos[0]) ? sd_jdict_get(d, &a->pos[0]) : NULL;
        if (!sd_jv_hashable(&a->pos[0]))
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: unhashable type: '%s'", sd_jv_typename(&a->pos[0]));
        *out = v ? *v : a->n == 2 ? a->pos[1] : sd_jv_none();
        return 0;
    }
    if (a->n || a->nk) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: the method takes no arguments");
    sd_jlist *l = sd_jlist_new(c, d->n);
    if (!l || sd_jstep(c, d->n)) return -1;
    for (size_t i = 0; i < d->n; i++) {
        if (id == M_KEYS) l->v[i] = d->k[i];
        else if (id == M_VALUES) l->v[i] = d->v[i];
        else {
            sd_jlist *p = sd_jlist_new(c, 2);
            if (!p) return -1;
            p->v[0] = d->k[i];
            p->v[1] = d->v[i];
            l->v[i] = sd_jv_list(p, 1);
        }
    }
    *out = sd_jv_list(l, SD_JL_VIEW);
    return 0;
}

static int sd_jlist_method(sd_jctx *c, const sd_jv *self, int id, const sd_jargs *a, sd_jv *out) {
    if (a->n != 1 || a->nk) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "list.index/count: exactly one argument is supported");
    int64_t count = 0, first = -1;
    for (size_t i = 0; i < self->u.l->n; i++) {
        if (sd_jv_eq(&self->u.l->v[i], &a->pos[0])) {
            count++;
            if (first < 0) first = (int64_t)i;
        }
    }
    if (id == M_INDEX && first < 0) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ValueError: the value is not in the list");
    *out = sd_jv_int(id == M_INDEX ? first : count);
    return sd_jstep(c, self->u.l->n);
}

static int sd_jloop_method(sd_jctx *c, sd_jloop *l, int id, const sd_jargs *a, sd_jv *out) {
    if (a->nk) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: the loop methods take no keyword arguments");
    if (id == M_CYCLE) {
        if (!a->n) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: no items for cycling given");
        *out = a->pos[l->i % a->n];
        return 0;
    }
    sd_jlist *now = sd_jlist_new(c, a->n);
    if (!now) return -1;
    if (a->n) memcpy(now->v, a->pos, a->n * sizeof *a->pos);
    sd_jv v = sd_jv_list(now, 0);
    int changed = !l->changed_set || !sd_jv_eq(&v, &l->changed_last);
    l->changed_set = 1;
    l->changed_last = v;
    *out = sd_jv_bool(changed);
    return 0;
}

int sd_jmethod_call(sd_jctx *c, const sd_jmethod *m, const sd_jargs *a, sd_jv *out) {
    if (sd_jstep(c, 1)) return -1;
    switch (m->self.t) {
    case SD_JT_STR:
        if (m->self.sub == SD_JS_MARKUP) { /* Markup's own methods: the text-only ones keep it Markup */
            int keeps = m->id == M_STRIP || m->id == M_LSTRIP || m->id == M_RSTRIP || m->id == M_UPPER || m->id == M_LOWER ||
                        m->id == M_TITLE || m->id == M_CAPITALIZE;
            int plain = m->id == M_STARTSWITH || m->id == M_ENDSWITH || m->id == M_FIND || m->id == M_RFIND ||
                        m->id == M_COUNT || (m->id >= M_ISDIGIT && m->id <= M_ISLOWER);
            if (!keeps && !plain) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "this method of a Markup string (|safe) is not supported");
            if (sd_jstr_method(c, &m->self, m->id, a, out)) return -1;
            if (keeps) out->sub = SD_JS_MARKUP;
            return 0;
        }
        return sd_jstr_method(c, &m->self, m->id, a, out);
    case SD_JT_DICT:
        if (m->id == M_DICT_UNSAFE)
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "SecurityError: the sandbox does not let templates modify a dict");
        return sd_jdict_method(c, m->self.u.d, m->id, a, out);
    case SD_JT_LIST:
        if (m->id == M_LIST_UNSAFE)
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "SecurityError: the sandbox does not let templates modify a list");
        return sd_jlist_method(c, &m->self, m->id, a, out);
    case SD_JT_LOOP: return sd_jloop_method(c, m->self.u.loop, m->id, a, out);
    default: return sd_jerr(c, SPECDEC_ERR_INTERNAL, "a method of a %s", sd_jv_typename(&m->self));
    }
}

/* ---- globals ---------------------------------------------------------------------------------------------------- */
static int sd_jg_range(sd_jctx *c, const sd_jargs *a, sd_jv *out) {
    int64_t v[3] = {0, 0, 1};
    if (a->nk || a->n < 1 || a->n > 3) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: range expected 1 to 3 arguments");
    for (size_t i = 0; i < a->n; i++) {
        if (a->pos[i].t != SD_JT_INT && a->pos[i].t != SD_JT_BOOL)
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: '%s' object cannot be interpreted as an integer",
                           sd_jv_typename(&a->pos[i]));
    }
    if (a->n == 1) v[1] = a->pos[0].u.i;
    else for (size_t i = 0; i < a->n; i++) v[i] = a->pos[i].u.i;
    if (!v[2]) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ValueError: range() arg 3 must not be zero");
    int64_t n = 0;
    if (v[2] > 0 && v[1] > v[0]) n = (int64_t)(((uint64_t)v[1] - (uint64_t)v[0] + (uint64_t)v[2] - 1) / (uint64_t)v[2]);
    if (v[2] < 0 && v[0] > v[1]) n = (int64_t)(((uint64_t)v[0] - (uint64_t)v[1] + (uint64_t)(-v[2]) - 1) / (uint64_t)(-v[2]));
    if (n > 100000 || n < 0) /* jinja2's sandbox MAX_RANGE */
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    sd_jlist *l = sd_jlist_new(c, (size_t)n);
    if (!l || sd_jstep(c, (uint64_t)n)) return -1;
    for (int64_t i = 0; i < n; i++) l->v[i] = sd_jv_int(v[0] + i * v[2]);
    *out = sd_jv_list(l, SD_JL_VIEW);
    return 0;
}

/* dict(mapping or pairs, **kw) and namespace(...): a new dict. */
static int sd_jg_dict(sd_jctx *c, const sd_jargs *a, int ns, sd_jv *out) {
    if (a->n > 1) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: dict expected at most 1 argument");
    sd_jdict *d = sd_jdict_new(c, a->nk + 4);
    if (!d) return -1;
    if (a->n == 1) {
        const sd_jv *src = &a->pos[0];
        if (src->t == SD_JT_DICT || src->t == SD_JT_NS) {
            for (size_t i = 0; i < src->u.d->n; i++)
                if (sd_jdict_set(c, d, src->u.d->k[i], src->u.d->v[i])) return -1;
        } else {
            const sd_jv *items;
            size_t n;
            if (sd_jv_items(c, src, &items, &n)) return -1;
            for (size_t i = 0; i < n; i++) {
                const sd_jv *kv;
                size_t m;
                if (sd_jv_items(c, &items[i], &kv, &m)) return -1;
                if (m != 2) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ValueError: dictionary update sequence element has length %zu; 2 is required", m);
                if (!sd_jv_hashable(&kv[0])) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: unhashable type");
                if (sd_jdict_set(c, d, kv[0], kv[1])) return -1;
            }
        }
    }
    for (size_t k = 0; k < a->nk; k++)
        if (sd_jdict_set(c, d, sd_jv_str(a->kname[k], a->klen[k]), a->kv[k])) return -1;
    if (ns) {
        for (size_t i = 0; i < d->n; i++)
            if (d->k[i].t == SD_JT_STR && d->k[i].u.s.n && d->k[i].u.s.p[0] == '_')
                return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "SecurityError: underscore-prefixed namespace attribute");
    }
    out->t = ns ? SD_JT_NS : SD_JT_DICT;
    out->sub = 0;
    out->u.d = d;
    return 0;
}

static const char *const sd_jdays[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
static const char *const sd_jmonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                         "July",    "August",   "September", "October", "November", "December"};

/* One strftime conversion (C locale, as Python's datetime.strftime in a C/POSIX LC_TIME). */
static int sd_jstrftime1(sd_jctx *c, sd_jbuf *b, const struct tm *t, char conv, int nopad) {
    char tmp[64];
    int n = -1, w = 2;
    long v = 0;
    switch (conv) {
    case 'a': n = snprintf(tmp, sizeof tmp, "%.3s", sd_jdays[t->tm_wday % 7]); break;
    case 'A': n = snprintf(tmp, sizeof tmp, "%s", sd_jdays[t->tm_wday % 7]); break;
    case 'b': case 'h': n = snprintf(tmp, sizeof tmp, "%.3s", sd_jmonths[t->tm_mon % 12]); break;
    case 'B': n = snprintf(tmp, sizeof tmp, "%s", sd_jmonths[t->tm_mon % 12]); break;
    case 'd': v = t->tm_mday; break;
    case 'e': n = snprintf(tmp, sizeof tmp, nopad ? "%d" : "%2d", t->tm_mday); break;
    case 'H': v = t->tm_hour; break;
    case 'I': v = t->tm_hour % 12 ? t->tm_hour % 12 : 12; break;
    case 'j': v = t->tm_yday + 1; w = 3; break;
    case 'm': v = t->tm_mon + 1; break;
    case 'M': v = t->tm_min; break;
    case 'S': v = t->tm_sec; break;
    case 'p': n = snprintf(tmp, sizeof tmp, "%s", t->tm_hour < 12 ? "AM" : "PM"); break;
    case 'y': v = (t->tm_year + 1900) % 100; break;
    case 'Y': n = snprintf(tmp, sizeof tmp, "%d", t->tm_year + 1900); break;
    case 'C': v = (t->tm_year + 1900) / 100; break;
    case 'w': n = snprintf(tmp, sizeof tmp, "%d", t->tm_wday); break;
    case 'u': n = snprintf(tmp, sizeof tmp, "%d", t->tm_wday ? t->tm_wday : 7); break;
    case 'U': v = (t->tm_yday + 7 - t->tm_wday) / 7; break;
    case 'W': v = (t->tm_yday + 7 - (t->tm_wday + 6) % 7) / 7; break;
    case 'f': n = snprintf(tmp, sizeof tmp, "000000"); break; /* the injected clock has whole seconds */
    case 'z': case 'Z': n = 0; tmp[0] = '\0'; break;         /* datetime.now() is naive: empty */
    case 'n': n = snprintf(tmp, sizeof tmp, "\n"); break;
    case 't': n = snprintf(tmp, sizeof tmp, "\t"); break;
    case '%': n = snprintf(tmp, sizeof tmp, "%%"); break;
    case 'D': n = snprintf(tmp, sizeof tmp, "%02d/%02d/%02d", t->tm_mon + 1, t->tm_mday, (t->tm_year + 1900) % 100); break;
    case 'F': n = snprintf(tmp, sizeof tmp, "%d-%02d-%02d", t->tm_year + 1900, t->tm_mon + 1, t->tm_mday); break;
    case 'T': n = snprintf(tmp, sizeof tmp, "%02d:%02d:%02d", t->tm_hour, t->tm_min, t->tm_sec); break;
    case 'R': n = snprintf(tmp, sizeof tmp, "%02d:%02d", t->tm_hour, t->tm_min); break;
    default: return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "strftime_now: the directive %%%c is not supported", conv);
    }
    if (n < 0) n = nopad ? snprintf(tmp, sizeof tmp, "%ld", v) : snprintf(tmp, sizeof tmp, "%0*ld", w, v);
    return sd_jbuf_put(c, b, tmp, (size_t)n);
}

static int sd_jg_strftime(sd_jctx *c, const sd_jargs *a, sd_jv *out) {
    if (a->nk || a->n != 1 || a->pos[0].t != SD_JT_STR)
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: strftime_now takes one format string");
    time_t now = c->now == SD_JINJA_NOW_SYSTEM ? time(NULL) : (time_t)c->now;
    struct tm t;
    if (!localtime_r(&now, &t)) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "strftime_now: the time is out of range");
    const char *f = a->pos[0].u.s.p;
    size_t n = a->pos[0].u.s.n;
    sd_jbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (f[i] != '%' || i + 1 >= n) {
            if (sd_jbuf_put(c, &b, f + i, 1)) return -1;
            continue;
        }
        int nopad = f[i + 1] == '-';
        if (nopad && i + 2 >= n) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "strftime_now: a format ending in %%-");
        i += nopad ? 2 : 1;
        if (sd_jstrftime1(c, &b, &t, f[i], nopad)) return -1;
    }
    *out = sd_jbuf_val(&b);
    return 0;
}

int sd_jglobal_call(sd_jctx *c, int id, const sd_jargs *a, sd_jv *out) {
    if (sd_jstep(c, 1)) return -1;
    switch (id) {
    case SD_JF_RANGE: return sd_jg_range(c, a, out);
    case SD_JF_NAMESPACE: return sd_jg_dict(c, a, 1, out);
    case SD_JF_DICT: return sd_jg_dict(c, a, 0, out);
    case SD_JF_STRFTIME: return sd_jg_strftime(c, a, out);
    case SD_JF_RAISE: {
        sd_jv msg = a->n ? a->pos[0] : sd_jv_cstr("");
        sd_jv s;
        if (sd_jv_str_of(c, &msg, &s)) return -1;
        if (c->st == SPECDEC_OK) {
            c->st = SPECDEC_ERR_INVALID_ARGUMENT;
            c->raised = 1;
            snprintf(c->msg, sizeof c->msg, "%.*s", (int)(s.u.s.n < sizeof c->msg ? s.u.s.n : sizeof c->msg - 1), s.u.s.p);
        }
        return -1;
    }
    default: return sd_jerr(c, SPECDEC_ERR_INTERNAL, "unknown global %d", id);
    }
}

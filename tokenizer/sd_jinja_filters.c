/* sd_jinja_filters.c — the filters and tests of jinja2 3.1 that chat templates use, with
 * jinja2's argument names and defaults, plus transformers' tojson (json.dumps with
 * ensure_ascii=False, indent=None, separators=None, sort_keys=False, in that positional order).
 * Attribute arguments (map/selectattr/join/sort/... attribute="a.b.0") read items as jinja2's
 * attrgetter does: each dotted part by item lookup, digits as integers. Not implemented (refused
 * at parse time): round, random, format, groupby, batch, slice, truncate, wordwrap, urlencode,
 * pprint, xmlattr, striptags, filesizeformat, center, attr, wordcount; the tests filter and test.
 * Like jinja2, map/select/reject/selectattr/rejectattr/unique/items/reverse return generators
 * (SD_JL_ITER); safe/escape return Markup (SD_JS_MARKUP), which upper/lower/title/capitalize/
 * trim/indent keep. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_jinja_int.h"
#include "sd_utf8.h"

enum {
    F_ABS, F_CAPITALIZE, F_COUNT, F_DEFAULT, F_DICTSORT, F_ESCAPE, F_FIRST, F_FLOAT, F_INDENT, F_INT, F_ITEMS, F_JOIN,
    F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_SAFE,
    F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE, F_UPPER, F_N
};

static const struct { const char *name; int id; } sd_jfilters[] = {
    {"abs", F_ABS},       {"capitalize", F_CAPITALIZE}, {"count", F_COUNT},   {"d", F_DEFAULT},     {"default", F_DEFAULT},
    {"dictsort", F_DICTSORT}, {"e", F_ESCAPE},        {"escape", F_ESCAPE}, {"first", F_FIRST},   {"float", F_FLOAT},
    {"indent", F_INDENT}, {"int", F_INT},               {"items", F_ITEMS},   {"join", F_JOIN},     {"last", F_LAST},
    {"length", F_LENGTH}, {"list", F_LIST},             {"lower", F_LOWER},   {"map", F_MAP},       {"max", F_MAX},
    {"min", F_MIN},       {"reject", F_REJECT},         {"rejectattr", F_REJECTATTR}, {"replace", F_REPLACE},
    {"reverse", F_REVERSE}, {"safe", F_SAFE},           {"select", F_SELECT}, {"selectattr", F_SELECTATTR},
    {"sort", F_SORT},     {"string", F_STRING},         {"sum", F_SUM},       {"title", F_TITLE},   {"tojson", F_TOJSON},
    {"trim", F_TRIM},     {"unique", F_UNIQUE},         {"upper", F_UPPER},
};

enum {
    T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_EVEN, T_FALSE, T_FLOAT, T_GE, T_GT, T_IN, T_INTEGER,
    T_ITERABLE, T_LE, T_LOWER, T_LT, T_MAPPING, T_NE, T_NONE, T_NUMBER, T_ODD, T_SAMEAS, T_SEQUENCE, T_STRING, T_TRUE,
    T_UNDEFINED, T_UPPER, T_ESCAPED
};

static const struct { const char *name; int id; } sd_jtests[] = {
    {"boolean", T_BOOLEAN},   {"callable", T_CALLABLE}, {"defined", T_DEFINED},   {"divisibleby", T_DIVISIBLEBY},
    {"eq", T_EQ},             {"equalto", T_EQ},        {"==", T_EQ},             {"even", T_EVEN},
    {"false", T_FALSE},       {"float", T_FLOAT},       {"ge", T_GE},             {">=", T_GE},
    {"gt", T_GT},             {"greaterthan", T_GT},    {">", T_GT},              {"in", T_IN},
    {"integer", T_INTEGER},   {"iterable", T_ITERABLE}, {"le", T_LE},             {"<=", T_LE},
    {"lower", T_LOWER},       {"lt", T_LT},             {"lessthan", T_LT},       {"<", T_LT},
    {"mapping", T_MAPPING},   {"ne", T_NE},             {"!=", T_NE},             {"none", T_NONE},
    {"number", T_NUMBER},     {"odd", T_ODD},           {"sameas", T_SAMEAS},     {"sequence", T_SEQUENCE},
    {"string", T_STRING},     {"true", T_TRUE},         {"undefined", T_UNDEFINED}, {"upper", T_UPPER},
    {"escaped", T_ESCAPED},
};

int sd_jfilter_id(const char *name, size_t n) {
    for (size_t i = 0; i < sizeof sd_jfilters / sizeof sd_jfilters[0]; i++)
        if (strlen(sd_jfilters[i].name) == n && !memcmp(sd_jfilters[i].name, name, n)) return sd_jfilters[i].id;
    return -1;
}

int sd_jtest_id(const char *name, size_t n) {
    for (size_t i = 0; i < sizeof sd_jtests / sizeof sd_jtests[0]; i++)
        if (strlen(sd_jtests[i].name) == n && !memcmp(sd_jtests[i].name, name, n)) return sd_jtests[i].id;
    return -1;
}

static const char *sd_jfilter_name(int id) {
    for (size_t i = 0; i < sizeof sd_jfilters / sizeof sd_jfilters[0]; i++)
        if (sd_jfilters[i].id == id) return sd_jfilters[i].name;
    return "?";
}

/* ---- arguments ------------------------------------------------------------------------------------- */
int sd_jarg(sd_jctx *c, const sd_jargs *a, size_t pos, const char *name, sd_jv *out) {
    int have = 0;
    if (pos < a->n) {
        *out = a->pos[pos];
        have = 1;
    }
    for (size_t k = 0; name && k < a->nk; k++) {
        if (a->klen[k] == strlen(name) && !memcmp(a->kname[k], name, a->klen[k])) {
            if (have) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: got multiple values for argument '%s'", name);
            *out = a->kv[k];
            have = 1;
        }
    }
    return have;
}

int sd_jargs_check(sd_jctx *c, const sd_jargs *a, size_t max_pos, const char *const *names, const char *what) {
    if (a->n > max_pos)
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: %s takes at most %zu argument(s) (%zu given)", what, max_pos,
                       a->n);
    for (size_t k = 0; k < a->nk; k++) {
        int ok = 0;
        for (const char *const *n = names; n && *n && !ok; n++) ok = a->klen[k] == strlen(*n) && !memcmp(a->kname[k], *n, a->klen[k]);
        if (!ok)
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: %s got an unexpected keyword argument '%.*s'", what,
                           (int)a->klen[k], a->kname[k]);
    }
    return 0;
}

/* The argument or its default; -1 on error. */
static int sd_jarg_or(sd_jctx *c, const sd_jargs *a, size_t pos, const char *name, sd_jv dflt, sd_jv *out) {
    int r = sd_jarg(c, a, pos, name, out);
    if (r < 0) return -1;
    if (!r) *out = dflt;
    return 0;
}

/* jinja2's soft_str: str(value). */
static int sd_jsoft_str(sd_jctx *c, const sd_jv *v, sd_jv *out) { return sd_jv_str_of(c, v, out); }

/* ---- attribute getters -------------------------------------------------------------------------------- */
/* jinja2's make_attrgetter: "a.b.0" looked up part by part (item lookup, digits as ints). */
static int sd_jattr_get(sd_jctx *c, const sd_jv *item, const sd_jv *attr, sd_jv *out) {
    if (attr->t == SD_JT_INT) return sd_jgetitem(c, item, attr, out);
    if (attr->t != SD_JT_STR) return sd_jgetitem(c, item, attr, out);
    sd_jv cur = *item;
    const char *p = attr->u.s.p, *end = p + attr->u.s.n;
    for (;;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        const char *e = dot ? dot : end;
        sd_jv key = sd_jv_str(p, (size_t)(e - p));
        int digits = e > p;
        for (const char *q = p; q < e && digits; q++) digits = *q >= '0' && *q <= '9';
        if (digits && e - p < 18) key = sd_jv_int(strtoll(p, NULL, 10));
        if (sd_jgetitem(c, &cur, &key, &cur)) return -1;
        if (!dot) break;
        p = dot + 1;
    }
    *out = cur;
    return 0;
}

/* Sort key: the attribute if given, lowercased when it is a string and !case_sensitive. */
static int sd_jsort_key(sd_jctx *c, const sd_jv *item, const sd_jv *attr, int case_sensitive, sd_jv *out) {
    sd_jv v = *item;
    if (attr && attr->t != SD_JT_NONE && attr->t != SD_JT_UNDEF && sd_jattr_get(c, item, attr, &v)) return -1;
    if (!case_sensitive && v.t == SD_JT_STR) return sd_jstr_case(c, &v, 'l', out);
    *out = v;
    return 0;
}

/* Stable merge sort of items by keys (Python's sorted(key=...), reverse keeps equal items in order). */
static int sd_jsort(sd_jctx *c, sd_jv *items, sd_jv *keys, size_t n, int reverse) {
    if (n < 2) return 0;
    sd_jv *ti = sd_jalloc(c, n * sizeof *ti), *tk = sd_jalloc(c, n * sizeof *tk);
    if (!ti || !tk) return -1;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, o = lo;
            while (i < mid || j < hi) {
                int take_right = 0;
                if (i < mid && j < hi) {
                    int lt;
                    if (sd_jstep(c, 1) || (reverse ? sd_jv_lt(c, &keys[i], &keys[j], &lt) : sd_jv_lt(c, &keys[j], &keys[i], &lt)))
                        return -1;
                    take_right = lt;
                } else {
                    take_right = i >= mid;
                }
                size_t s = take_right ? j++ : i++;
                ti[o] = items[s];
                tk[o++] = keys[s];
            }
        }
        memcpy(items, ti, n * sizeof *ti);
        memcpy(keys, tk, n * sizeof *tk);
    }
    return 0;
}

static int sd_jlist_out(sd_jctx *c, const sd_jv *items, size_t n, int sub, sd_jv *out) {
    sd_jlist *l = sd_jlist_new(c, n);
    if (!l) return -1;
    if (n) memcpy(l->v, items, n * sizeof *items);
    *out = sd_jv_list(l, sub);
    return 0;
}

static int sd_jcopy_items(sd_jctx *c, const sd_jv *v, sd_jv **items, size_t *n) {
    const sd_jv *src;
    if (sd_jv_items(c, v, &src, n)) return -1;
    *items = sd_jalloc(c, (*n ? *n : 1) * sizeof **items);
    if (!*items) return -1;
    if (*n) memcpy(*items, src, *n * sizeof *src);
    return sd_jstep(c, *n);
}

/* ---- filters ------------------------------------------------------------------------------------------ */
static int sd_jf_sort(sd_jctx *c, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    static const char *const names[] = {"reverse", "case_sensitive", "attribute", NULL};
    sd_jv rev, cs, attr;
    sd_jv *items, *keys;
    size_t n;
    if (sd_jargs_check(c, a, 3, names, "sort") || sd_jarg_or(c, a, 0, "reverse", sd_jv_bool(0), &rev) ||
        sd_jarg_or(c, a, 1, "case_sensitive", sd_jv_bool(0), &cs) || sd_jarg_or(c, a, 2, "attribute", sd_jv_none(), &attr) ||
        sd_jcopy_items(c, v, &items, &n) || !(keys = sd_jalloc(c, (n ? n : 1) * sizeof *keys)))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (sd_jsort_key(c, &items[i], &attr, sd_jv_truthy(&cs), &keys[i])) return -1;
    if (sd_jsort(c, items, keys, n, sd_jv_truthy(&rev))) return -1;
    return sd_jlist_out(c, items, n, SD_JL_LIST, out);
}

static int sd_jf_dictsort(sd_jctx *c, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    static const char *const names[] = {"case_sensitive", "by", "reverse", NULL};
    sd_jv cs, by, rev;
    if (sd_jargs_check(c, a, 3, names, "dictsort") || sd_jarg_or(c, a, 0, "case_sensitive", sd_jv_bool(0), &cs) ||
        sd_jarg_or(c, a, 1, "by", sd_jv_cstr("key"), &by) || sd_jarg_or(c, a, 2, "reverse", sd_jv_bool(0), &rev))
        return -1;
    if (v->t != SD_JT_DICT) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: dictsort needs a mapping");
    int pos = by.t == SD_JT_STR && by.u.s.n == 5 && !memcmp(by.u.s.p, "value", 5);
    if (!pos && !(by.t == SD_JT_STR && by.u.s.n == 3 && !memcmp(by.u.s.p, "key", 3)))
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "FilterArgumentError: You can only sort by either \"key\" or \"value\"");
    size_t n = v->u.d->n;
    sd_jv *items = sd_jalloc(c, (n ? n : 1) * sizeof *items), *keys = sd_jalloc(c, (n ? n : 1) * sizeof *keys);
    if (!items || !keys) return -1;
    for (size_t i = 0; i < n; i++) {
        sd_jlist *pair = sd_jlist_new(c, 2);
        if (!pair) return -1;
        pair->v[0] = v->u.d->k[i];
        pair->v[1] = v->u.d->v[i];
        items[i] = sd_jv_list(pair, 1);
        if (sd_jsort_key(c, &pair->v[pos], NULL, sd_jv_truthy(&cs), &keys[i])) return -1;
    }
    if (sd_jsort(c, items, keys, n, sd_jv_truthy(&rev))) return -1;
    return sd_jlist_out(c, items, n, SD_JL_LIST, out);
}

static int sd_jf_join(sd_jctx *c, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    static const char *const names[] = {"d", "attribute", NULL};
    sd_jv d, attr, s;
    const sd_jv *items;
    size_t n;
    if (sd_jargs_check(c, a, 2, names, "join") || sd_jarg_or(c, a, 0, "d", sd_jv_cstr(""), &d) ||
        sd_jarg_or(c, a, 1, "attribute", sd_jv_none(), &attr) || sd_jv_items(c, v, &items, &n) || sd_jsoft_str(c, &d, &d))
        return -1;
    sd_jbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        sd_jv it = items[i];
        if (attr.t != SD_JT_NONE && sd_jattr_get(c, &items[i], &attr, &it)) return -1;
        if ((i && sd_jbuf_put(c, &b, d.u.s.p, d.u.s.n)) || sd_jv_str_of(c, &it, &s) || sd_jbuf_put(c, &b, s.u.s.p, s.u.s.n))
            return -1;
    }
    *out = sd_jbuf_val(&b);
    return 0;
}

static int sd_jf_map(sd_jctx *c, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    const sd_jv *items;
    size_t n;
    sd_jv attr, dflt;
    int has_attr = sd_jarg(c, a, SIZE_MAX, "attribute", &attr), has_dflt = sd_jarg(c, a, SIZE_MAX, "default", &dflt);
    if (has_attr < 0 || has_dflt < 0 || sd_jv_items(c, v, &items, &n)) return -1;
    sd_jlist *l = sd_jlist_new(c, n);
    if (!l) return -1;
    if (has_attr) {
        if (a->n || a->nk > (size_t)(1 + has_dflt))
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "FilterArgumentError: Unexpected keyword argument with map(attribute=...)");
        for (size_t i = 0; i < n; i++) {
            if (sd_jattr_get(c, &items[i], &attr, &l->v[i])) return -1;
            if (has_dflt && l->v[i].t == SD_JT_UNDEF) l->v[i] = dflt;
        }
    } else {
        if (!a->n || a->pos[0].t != SD_JT_STR)
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "map needs a filter name or attribute=");
        int id = sd_jfilter_id(a->pos[0].u.s.p, a->pos[0].u.s.n);
        if (id < 0)
            return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "map: the filter '%.*s' is not supported", (int)a->pos[0].u.s.n,
                           a->pos[0].u.s.p);
        sd_jargs rest = *a;
        rest.n--;
        rest.pos++;
        for (size_t i = 0; i < n; i++)
            if (sd_jfilter(c, id, &items[i], &rest, &l->v[i])) return -1;
    }
    *out = sd_jv_list(l, SD_JL_ITER);
    return 0;
}

/* select/reject (attr = 0) and selectattr/rejectattr (attr = 1). */
static int sd_jf_select(sd_jctx *c, const sd_jv *v, const sd_jargs *a, int attr, int keep, sd_jv *out) {
    const sd_jv *items;
    size_t n, first = (size_t)attr;
    if (a->nk) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "keyword arguments to select/reject filters are not supported");
    if (attr && !a->n) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: selectattr/rejectattr need an attribute");
    int test = -1;
    if (a->n > first) {
        if (a->pos[first].t != SD_JT_STR) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "a test name must be a string");
        test = sd_jtest_id(a->pos[first].u.s.p, a->pos[first].u.s.n);
        if (test < 0)
            return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "the test '%.*s' is not supported", (int)a->pos[first].u.s.n,
                           a->pos[first].u.s.p);
    }
    sd_jargs rest = {0};
    if (a->n > first + 1) {
        rest.n = a->n - first - 1;
        rest.pos = a->pos + first + 1;
    }
    if (sd_jv_items(c, v, &items, &n)) return -1;
    sd_jv *kept = sd_jalloc(c, (n ? n : 1) * sizeof *kept);
    if (!kept) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        sd_jv x = items[i];
        int ok;
        if (attr && sd_jattr_get(c, &items[i], &a->pos[0], &x)) return -1;
        if (test < 0) ok = sd_jv_truthy(&x);
        else if (sd_jtest(c, test, &x, &rest, &ok)) return -1;
        if (ok == keep) kept[m++] = items[i];
    }
    if (sd_jstep(c, n)) return -1;
    return sd_jlist_out(c, kept, m, SD_JL_ITER, out);
}

static int sd_jf_minmax(sd_jctx *c, const sd_jv *v, const sd_jargs *a, int want_max, sd_jv *out) {
    static const char *const names[] = {"case_sensitive", "attribute", NULL};
    sd_jv cs, attr, best_key, key;
    const sd_jv *items;
    size_t n;
    if (sd_jargs_check(c, a, 2, names, want_max ? "max" : "min") || sd_jarg_or(c, a, 0, "case_sensitive", sd_jv_bool(0), &cs) ||
        sd_jarg_or(c, a, 1, "attribute", sd_jv_none(), &attr) || sd_jv_items(c, v, &items, &n))
        return -1;
    if (!n) {
        *out = sd_jv_undef("No aggregated item, sequence was empty.");
        return 0;
    }
    size_t best = 0;
    if (sd_jsort_key(c, &items[0], &attr, sd_jv_truthy(&cs), &best_key)) return -1;
    for (size_t i = 1; i < n; i++) {
        int lt;
        if (sd_jsort_key(c, &items[i], &attr, sd_jv_truthy(&cs), &key) ||
            (want_max ? sd_jv_lt(c, &best_key, &key, &lt) : sd_jv_lt(c, &key, &best_key, &lt)))
            return -1;
        if (lt) {
            best = i;
            best_key = key;
        }
    }
    *out = items[best];
    return 0;
}

static int sd_jf_unique(sd_jctx *c, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    static const char *const names[] = {"case_sensitive", "attribute", NULL};
    sd_jv cs, attr;
    const sd_jv *items;
    size_t n;
    if (sd_jargs_check(c, a, 2, names, "unique") || sd_jarg_or(c, a, 0, "case_sensitive", sd_jv_bool(0), &cs) ||
        sd_jarg_or(c, a, 1, "attribute", sd_jv_none(), &attr) || sd_jv_items(c, v, &items, &n))
        return -1;
    sd_jv *kept = sd_jalloc(c, (n ? n : 1) * sizeof *kept), *seen = sd_jalloc(c, (n ? n : 1) * sizeof *seen);
    if (!kept || !seen || sd_jstep(c, n * n / 64 + n)) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        sd_jv key;
        if (sd_jsort_key(c, &items[i], &attr, sd_jv_truthy(&cs), &key)) return -1;
        if (!sd_jv_hashable(&key)) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: unhashable type: '%s'", sd_jv_typename(&key));
        int dup = 0;
        for (size_t k = 0; k < m && !dup; k++) dup = sd_jv_eq(&seen[k], &key);
        if (!dup) {
            seen[m] = key;
            kept[m++] = items[i];
        }
    }
    return sd_jlist_out(c, kept, m, SD_JL_ITER, out);
}

static int sd_jf_sum(sd_jctx *c, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    static const char *const names[] = {"attribute", "start", NULL};
    sd_jv attr, acc;
    const sd_jv *items;
    size_t n;
    if (sd_jargs_check(c, a, 2, names, "sum") || sd_jarg_or(c, a, 0, "attribute", sd_jv_none(), &attr) ||
        sd_jarg_or(c, a, 1, "start", sd_jv_int(0), &acc) || sd_jv_items(c, v, &items, &n))
        return -1;
    for (size_t i = 0; i < n; i++) {
        sd_jv x = items[i];
        if (attr.t != SD_JT_NONE && sd_jattr_get(c, &items[i], &attr, &x)) return -1;
        if (!sd_jv_is_num(&x) || !sd_jv_is_num(&acc)) return sd_jtype_err(c, "+ (sum)", &acc, &x);
        if (x.t == SD_JT_FLOAT || acc.t == SD_JT_FLOAT) acc = sd_jv_float(sd_jv_num(&acc) + sd_jv_num(&x));
        else if (__builtin_add_overflow(acc.u.i, x.u.i, &acc.u.i)) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "integer overflow in sum");
        else acc.t = SD_JT_INT;
    }
    *out = acc;
    return 0;
}

/* str.splitlines() boundaries. */
static size_t sd_jline_break(const char *s, size_t n, size_t i) {
    int32_t cp;
    size_t k = sd_utf8_next(s + i, n - i, &cp);
    if (cp == '\r' && i + 1 < n && s[i + 1] == '\n') return 2;
    if (cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 || cp == 0x2028 ||
        cp == 0x2029)
        return k;
    return 0;
}

static int sd_jf_indent(sd_jctx *c, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    static const char *const names[] = {"width", "first", "blank", NULL};
    sd_jv s, width, first, blank;
    if (sd_jargs_check(c, a, 3, names, "indent") || sd_jarg_or(c, a, 0, "width", sd_jv_int(4), &width) ||
        sd_jarg_or(c, a, 1, "first", sd_jv_bool(0), &first) || sd_jarg_or(c, a, 2, "blank", sd_jv_bool(0), &blank) ||
        sd_jsoft_str(c, v, &s))
        return -1;
    sd_jbuf ind = {0}, b = {0};
    if (width.t == SD_JT_STR) {
        if (sd_jbuf_put(c, &ind, width.u.s.p, width.u.s.n)) return -1;
    } else if (width.t == SD_JT_INT || width.t == SD_JT_BOOL) {
        for (int64_t k = 0; k < width.u.i; k++)
            if (sd_jbuf_puts(c, &ind, " ")) return -1;
    } else {
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: indent width must be an int or a string");
    }
    /* s + "\n", split into lines; every line after the first gets the indent (unless blank
     * and !blank-mode), joined with "\n"; the trailing empty piece of the added "\n" is dropped */
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, start = 0, line = 0;
    if (sd_jv_truthy(&first) && sd_jbuf_put(c, &b, ind.p, ind.n)) return -1;
    for (size_t i = 0; i <= n;) {
        size_t br = i < n ? sd_jline_break(p, n, i) : 1; /* the added "\n" at the end */
        if (!br) {
            int32_t cp;
            size_t k = sd_utf8_next(p + i, n - i, &cp);
            i += k ? k : 1;
            continue;
        }
        size_t len = i - start;
        if (line && sd_jbuf_puts(c, &b, "\n")) return -1;
        if (line && (len || sd_jv_truthy(&blank)) && sd_jbuf_put(c, &b, ind.p, ind.n)) return -1;
        if (sd_jbuf_put(c, &b, p + start, len)) return -1;
        line++;
        i += br;
        start = i;
        if (i > n) break;
    }
    *out = sd_jbuf_val(&b);
    out->sub = s.sub;
    return 0;
}

/* Python's int(str) (base 10): optional sign, digits with single underscores, whitespace around. */
static int sd_jparse_int(const sd_jv *s, int64_t *v) {
    const char *p = s->u.s.p, *e = p + s->u.s.n;
    while (p < e && (*p == ' ' || (*p >= '\t' && *p <= '\r'))) p++;
    while (e > p && (e[-1] == ' ' || (e[-1] >= '\t' && e[-1] <= '\r'))) e--;
    int neg = 0;
    if (p < e && (*p == '+' || *p == '-')) neg = *p++ == '-';
    if (p == e || *p == '_') return -1;
    uint64_t x = 0;
    for (; p < e; p++) {
        if (*p == '_' && p + 1 < e && p[1] != '_') continue;
        if (*p < '0' || *p > '9' || x > (UINT64_MAX - 9) / 10) return -1;
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (x > (uint64_t)INT64_MAX) return -1;
    *v = neg ? -(int64_t)x : (int64_t)x;
    return 0;
}

static int sd_jparse_float(const sd_jv *s, double *v) {
    char buf[128];
    if (s->u.s.n >= sizeof buf) return -1;
    memcpy(buf, s->u.s.p, s->u.s.n);
    buf[s->u.s.n] = '\0';
    for (char *q = buf; *q; q++)
        if (*q == '_' || (*q == '0' && (q[1] == 'x' || q[1] == 'X'))) return -1; /* keep strtod to Python's syntax */
    char *end;
    *v = strtod(buf, &end);
    while (*end == ' ' || (*end >= '\t' && *end <= '\r')) end++;
    return end == buf || *end ? -1 : 0;
}

static int sd_jf_number(sd_jctx *c, int id, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    static const char *const inames[] = {"default", "base", NULL}, *const fnames[] = {"default", NULL};
    sd_jv dflt, base;
    if (id == F_INT) {
        if (sd_jargs_check(c, a, 2, inames, "int") || sd_jarg_or(c, a, 0, "default", sd_jv_int(0), &dflt) ||
            sd_jarg_or(c, a, 1, "base", sd_jv_int(10), &base))
            return -1;
        if (base.t != SD_JT_INT || base.u.i != 10) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "int: only base 10 is supported");
        int64_t i;
        double f;
        if (v->t == SD_JT_INT || v->t == SD_JT_BOOL) *out = sd_jv_int(v->u.i);
        else if (v->t == SD_JT_FLOAT && isfinite(v->u.f) && fabs(v->u.f) < 9.2e18) *out = sd_jv_int((int64_t)v->u.f);
        else if (v->t == SD_JT_STR && !sd_jparse_int(v, &i)) *out = sd_jv_int(i);
        else if (v->t == SD_JT_STR && !sd_jparse_float(v, &f) && isfinite(f) && fabs(f) < 9.2e18) *out = sd_jv_int((int64_t)f);
        else *out = dflt;
        return 0;
    }
    if (sd_jargs_check(c, a, 1, fnames, "float") || sd_jarg_or(c, a, 0, "default", sd_jv_float(0.0), &dflt)) return -1;
    double f;
    if (sd_jv_is_num(v)) *out = sd_jv_float(sd_jv_num(v));
    else if (v->t == SD_JT_STR && !sd_jparse_float(v, &f)) *out = sd_jv_float(f);
    else *out = dflt;
    return 0;
}

static int sd_jf_tojson(sd_jctx *c, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    sd_jv ea, ind, sep, sk;
    if (sd_jargs_check(c, a, 4, names, "tojson") || sd_jarg_or(c, a, 0, "ensure_ascii", sd_jv_bool(0), &ea) ||
        sd_jarg_or(c, a, 1, "indent", sd_jv_none(), &ind) || sd_jarg_or(c, a, 2, "separators", sd_jv_none(), &sep) ||
        sd_jarg_or(c, a, 3, "sort_keys", sd_jv_bool(0), &sk))
        return -1;
    sd_jjson_opts o = {sd_jv_truthy(&ea), sd_jv_truthy(&sk), -1, NULL, 0, ", ", ": ", 2, 2};
    if (ind.t == SD_JT_INT || ind.t == SD_JT_BOOL) {
        o.indent = ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : (int)ind.u.i;
    } else if (ind.t == SD_JT_STR) {
        o.indent_s = ind.u.s.p;
        o.indent_n = ind.u.s.n;
    } else if (ind.t != SD_JT_NONE) {
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: tojson indent must be an int, a string or None");
    }
    if (o.indent >= 0 || o.indent_s) {
        o.item_sep = ",";
        o.item_sep_n = 1;
    }
    if (sep.t != SD_JT_NONE) {
        if (sep.t != SD_JT_LIST || sep.u.l->n != 2 || sep.u.l->v[0].t != SD_JT_STR || sep.u.l->v[1].t != SD_JT_STR)
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "tojson separators must be a pair of strings");
        o.item_sep = sep.u.l->v[0].u.s.p;
        o.item_sep_n = sep.u.l->v[0].u.s.n;
        o.key_sep = sep.u.l->v[1].u.s.p;
        o.key_sep_n = sep.u.l->v[1].u.s.n;
    }
    sd_jbuf b = {0};
    if (sd_jv_write_json(c, &b, v, &o, 0)) return -1;
    *out = sd_jbuf_val(&b);
    return 0;
}

static int sd_jf_escape(sd_jctx *c, const sd_jv *v, sd_jv *out) {
    sd_jv s;
    if (sd_jsoft_str(c, v, &s)) return -1;
    if (s.sub == SD_JS_MARKUP) { /* already safe */
        *out = s;
        return 0;
    }
    sd_jbuf b = {0};
    if (sd_jbuf_escape(c, &b, s.u.s.p, s.u.s.n)) return -1;
    *out = sd_jbuf_val(&b);
    out->sub = SD_JS_MARKUP;
    return 0;
}

static int sd_jf_items(sd_jctx *c, const sd_jv *v, sd_jv *out) {
    if (v->t == SD_JT_UNDEF) return sd_jlist_out(c, NULL, 0, SD_JL_ITER, out);
    if (v->t != SD_JT_DICT) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: Can only get item pairs from a mapping.");
    sd_jlist *l = sd_jlist_new(c, v->u.d->n);
    if (!l) return -1;
    for (size_t i = 0; i < v->u.d->n; i++) {
        sd_jlist *p = sd_jlist_new(c, 2);
        if (!p) return -1;
        p->v[0] = v->u.d->k[i];
        p->v[1] = v->u.d->v[i];
        l->v[i] = sd_jv_list(p, 1);
    }
    *out = sd_jv_list(l, SD_JL_ITER);
    return sd_jstep(c, v->u.d->n);
}

static int sd_jf_first_last(sd_jctx *c, const sd_jv *v, int last, sd_jv *out) {
    const sd_jv *items;
    size_t n;
    if (v->t == SD_JT_STR && v->u.s.n) { /* without splitting the whole string */
        size_t a = 0, e = v->u.s.n;
        if (last) {
            a = e - 1;
            while (a && ((unsigned char)v->u.s.p[a] & 0xC0) == 0x80) a--;
        } else {
            e = sd_jstr_off(v->u.s.p, v->u.s.n, 1);
        }
        *out = sd_jv_str(v->u.s.p + a, e - a);
        return 0;
    }
    if (v->t == SD_JT_LIST && v->sub == SD_JL_ITER) { /* next() consumes one item; reversed() fails */
        if (last) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: 'generator' object is not reversible");
        sd_jlist *l = v->u.l;
        *out = l->pos < l->n ? l->v[l->pos++] : sd_jv_undef("No first item, sequence was empty.");
        return 0;
    }
    if (sd_jv_items(c, v, &items, &n)) return -1;
    *out = n ? items[last ? n - 1 : 0] : sd_jv_undef(last ? "No last item, sequence was empty." : "No first item, sequence was empty.");
    return 0;
}

static int sd_jf_length(sd_jctx *c, const sd_jv *v, sd_jv *out) {
    switch (v->t) {
    case SD_JT_STR: *out = sd_jv_int((int64_t)sd_jstr_len(v->u.s.p, v->u.s.n)); return 0;
    case SD_JT_LIST:
        if (v->sub == SD_JL_ITER) break;
        *out = sd_jv_int((int64_t)v->u.l->n);
        return 0;
    case SD_JT_DICT: *out = sd_jv_int((int64_t)v->u.d->n); return 0;
    case SD_JT_UNDEF: *out = sd_jv_int(0); return 0;
    case SD_JT_LOOP: *out = sd_jv_int((int64_t)v->u.loop->n); return 0;
    default: break;
    }
    return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: object of type '%s' has no len()", sd_jv_typename(v));
}

static int sd_jf_reverse(sd_jctx *c, const sd_jv *v, sd_jv *out) {
    if (v->t == SD_JT_STR) {
        sd_jbuf b = {0};
        for (size_t e = v->u.s.n; e > 0;) {
            size_t a = e - 1;
            while (a && ((unsigned char)v->u.s.p[a] & 0xC0) == 0x80) a--;
            if (sd_jbuf_put(c, &b, v->u.s.p + a, e - a)) return -1;
            e = a;
        }
        *out = sd_jbuf_val(&b);
        return 0;
    }
    const sd_jv *items;
    size_t n;
    if (sd_jv_items(c, v, &items, &n)) return -1;
    sd_jlist *l = sd_jlist_new(c, n);
    if (!l) return -1;
    for (size_t i = 0; i < n; i++) l->v[i] = items[n - 1 - i];
    *out = sd_jv_list(l, v->t == SD_JT_LIST && v->sub == SD_JL_ITER ? SD_JL_LIST : SD_JL_ITER);
    return sd_jstep(c, n);
}

static int sd_jf_str_filter(sd_jctx *c, int id, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    sd_jv s, x, y, cnt;
    if (sd_jsoft_str(c, v, &s)) return -1;
    switch (id) {
    case F_LOWER: case F_UPPER: case F_CAPITALIZE: case F_TITLE:
        if (sd_jargs_check(c, a, 0, NULL, sd_jfilter_name(id)) ||
            sd_jstr_case(c, &s, id == F_LOWER ? 'l' : id == F_UPPER ? 'u' : id == F_CAPITALIZE ? 'c' : 'T', out))
            return -1;
        out->sub = s.sub; /* Markup stays Markup */
        return 0;
    case F_TRIM: {
        static const char *const names[] = {"chars", NULL};
        if (sd_jargs_check(c, a, 1, names, "trim") || sd_jarg_or(c, a, 0, "chars", sd_jv_none(), &x) ||
            sd_jv_strip(c, &s, &x, 1, 1, out))
            return -1;
        out->sub = s.sub;
        return 0;
    }
    case F_REPLACE: {
        static const char *const names[] = {"old", "new", "count", NULL};
        if (sd_jargs_check(c, a, 3, names, "replace") || sd_jarg(c, a, 0, "old", &x) != 1 || sd_jarg(c, a, 1, "new", &y) != 1 ||
            sd_jarg_or(c, a, 2, "count", sd_jv_none(), &cnt))
            return c->st ? -1 : sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: replace needs old and new");
        if (sd_jsoft_str(c, &x, &x) || sd_jsoft_str(c, &y, &y)) return -1;
        s.sub = SD_JS_PLAIN; /* without autoescape: str(s).replace(str(old), str(new)) */
        if (cnt.t != SD_JT_NONE && cnt.t != SD_JT_INT) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: replace count must be an int");
        return sd_jstr_replace(c, &s, &x, &y, cnt.t == SD_JT_INT ? cnt.u.i : -1, out);
    }
    default: /* string, safe */
        if (sd_jargs_check(c, a, 0, NULL, sd_jfilter_name(id))) return -1;
        *out = s;
        return 0;
    }
}

int sd_jfilter(sd_jctx *c, int id, const sd_jv *v, const sd_jargs *a, sd_jv *out) {
    sd_jv x, y;
    if (sd_jstep(c, 1)) return -1;
    switch (id) {
    case F_ABS:
        if (sd_jargs_check(c, a, 0, NULL, "abs")) return -1;
        if (v->t == SD_JT_FLOAT) *out = sd_jv_float(fabs(v->u.f));
        else if ((v->t == SD_JT_INT || v->t == SD_JT_BOOL) && v->u.i != INT64_MIN) *out = sd_jv_int(v->u.i < 0 ? -v->u.i : v->u.i);
        else return sd_jtype_err(c, "abs()", v, NULL);
        return 0;
    case F_DEFAULT: {
        static const char *const names[] = {"default_value", "boolean", NULL};
        if (sd_jargs_check(c, a, 2, names, "default") || sd_jarg_or(c, a, 0, "default_value", sd_jv_cstr(""), &x) ||
            sd_jarg_or(c, a, 1, "boolean", sd_jv_bool(0), &y))
            return -1;
        *out = v->t == SD_JT_UNDEF || (sd_jv_truthy(&y) && !sd_jv_truthy(v)) ? x : *v;
        return 0;
    }
    case F_COUNT: case F_LENGTH:
        if (sd_jargs_check(c, a, 0, NULL, "length")) return -1;
        return sd_jf_length(c, v, out);
    case F_DICTSORT: return sd_jf_dictsort(c, v, a, out);
    case F_ESCAPE:
        if (sd_jargs_check(c, a, 0, NULL, "escape")) return -1;
        return sd_jf_escape(c, v, out);
    case F_FIRST: case F_LAST:
        if (sd_jargs_check(c, a, 0, NULL, id == F_FIRST ? "first" : "last")) return -1;
        return sd_jf_first_last(c, v, id == F_LAST, out);
    case F_FLOAT: case F_INT: return sd_jf_number(c, id, v, a, out);
    case F_INDENT: return sd_jf_indent(c, v, a, out);
    case F_ITEMS:
        if (sd_jargs_check(c, a, 0, NULL, "items")) return -1;
        return sd_jf_items(c, v, out);
    case F_JOIN: return sd_jf_join(c, v, a, out);
    case F_LIST: {
        const sd_jv *items;
        size_t n;
        if (sd_jargs_check(c, a, 0, NULL, "list") || sd_jv_items(c, v, &items, &n) || sd_jstep(c, n)) return -1;
        return sd_jlist_out(c, items, n, SD_JL_LIST, out);
    }
    case F_MAP: case F_REJECT: case F_SELECT: case F_REJECTATTR: case F_SELECTATTR:
        if (!sd_jv_truthy(v)) return sd_jlist_out(c, NULL, 0, SD_JL_ITER, out); /* jinja2: "if value:" before anything else */
        if (id == F_MAP) return sd_jf_map(c, v, a, out);
        if (id == F_REJECT || id == F_SELECT) return sd_jf_select(c, v, a, 0, id == F_SELECT, out);
        return sd_jf_select(c, v, a, 1, id == F_SELECTATTR, out);
    case F_MAX: case F_MIN: return sd_jf_minmax(c, v, a, id == F_MAX, out);
    case F_REVERSE:
        if (sd_jargs_check(c, a, 0, NULL, "reverse")) return -1;
        return sd_jf_reverse(c, v, out);
    case F_SORT: return sd_jf_sort(c, v, a, out);
    case F_SUM: return sd_jf_sum(c, v, a, out);
    case F_TOJSON: return sd_jf_tojson(c, v, a, out);
    case F_UNIQUE: return sd_jf_unique(c, v, a, out);
    case F_SAFE: /* Markup(str(v)) */
        if (sd_jargs_check(c, a, 0, NULL, "safe") || sd_jsoft_str(c, v, out)) return -1;
        out->sub = SD_JS_MARKUP;
        return 0;
    default: return sd_jf_str_filter(c, id, v, a, out);
    }
}

/* ---- tests --------------------------------------------------------------------------------------------------- */
static int sd_jt_case(sd_jctx *c, const sd_jv *v, int upper, int *res) {
    sd_jv s;
    return sd_jsoft_str(c, v, &s) || sd_jstr_cased_test(c, &s, upper, res) ? -1 : 0;
}

static int sd_jt_mod(sd_jctx *c, const sd_jv *v, const sd_jv *by, int64_t want, int *res) {
    if (!sd_jv_is_num(v) || !sd_jv_is_num(by)) return sd_jtype_err(c, "%", v, by);
    if (v->t == SD_JT_FLOAT || by->t == SD_JT_FLOAT) {
        double d = sd_jv_num(by);
        if (d == 0.0) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ZeroDivisionError: float modulo");
        double r = fmod(sd_jv_num(v), d);
        if (r != 0 && ((r < 0) != (d < 0))) r += d;
        *res = r == (double)want;
        return 0;
    }
    if (!by->u.i) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ZeroDivisionError: integer division or modulo by zero");
    int64_t r = by->u.i == -1 ? 0 : v->u.i % by->u.i;
    if (r != 0 && ((r < 0) != (by->u.i < 0))) r += by->u.i;
    *res = r == want;
    return 0;
}

int sd_jtest(sd_jctx *c, int id, const sd_jv *v, const sd_jargs *a, int *res) {
    sd_jv x;
    int lt;
    if (sd_jstep(c, 1)) return -1;
    int need = id == T_DIVISIBLEBY || id == T_EQ || id == T_NE || id == T_LT || id == T_LE || id == T_GT || id == T_GE ||
               id == T_IN || id == T_SAMEAS;
    if (a->nk) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "keyword arguments to tests are not supported");
    if (a->n != (size_t)need)
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: the test takes %d argument(s), %zu given", need, a->n);
    if (need) x = a->pos[0];
    switch (id) {
    case T_BOOLEAN: *res = v->t == SD_JT_BOOL; return 0;
    case T_CALLABLE:
        *res = v->t == SD_JT_MACRO || v->t == SD_JT_FUNC || v->t == SD_JT_METHOD || v->t == SD_JT_UNDEF || v->t == SD_JT_LOOP;
        return 0;
    case T_DEFINED: *res = v->t != SD_JT_UNDEF; return 0;
    case T_UNDEFINED: *res = v->t == SD_JT_UNDEF; return 0;
    case T_DIVISIBLEBY: return sd_jt_mod(c, v, &x, 0, res);
    case T_EVEN: { sd_jv two = sd_jv_int(2); return sd_jt_mod(c, v, &two, 0, res); }
    case T_ODD: { sd_jv two = sd_jv_int(2); return sd_jt_mod(c, v, &two, 1, res); }
    case T_EQ: *res = sd_jv_eq(v, &x); return 0;
    case T_NE: *res = !sd_jv_eq(v, &x); return 0;
    case T_LT: return sd_jv_lt(c, v, &x, res);
    case T_GT: return sd_jv_lt(c, &x, v, res);
    case T_LE: case T_GE:
        if (id == T_LE ? sd_jv_lt(c, v, &x, &lt) : sd_jv_lt(c, &x, v, &lt)) return -1;
        *res = lt || sd_jv_eq(v, &x);
        return 0;
    case T_IN: {
        sd_jv needle = *v;
        if (x.t == SD_JT_STR) {
            if (v->t != SD_JT_STR) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: 'in <string>' requires string as left operand");
            *res = !v->u.s.n;
            for (size_t i = 0; !*res && i + v->u.s.n <= x.u.s.n; i++) *res = !memcmp(x.u.s.p + i, v->u.s.p, v->u.s.n);
            return 0;
        }
        if (x.t == SD_JT_DICT) {
            *res = sd_jv_hashable(&needle) && sd_jdict_get(x.u.d, &needle) != NULL;
            return 0;
        }
        const sd_jv *items;
        size_t n;
        if (sd_jv_items(c, &x, &items, &n)) return -1;
        *res = 0;
        for (size_t i = 0; i < n && !*res; i++) *res = sd_jv_eq(&needle, &items[i]);
        return 0;
    }
    case T_FALSE: *res = v->t == SD_JT_BOOL && !v->u.i; return 0;
    case T_TRUE: *res = v->t == SD_JT_BOOL && v->u.i; return 0;
    case T_FLOAT: *res = v->t == SD_JT_FLOAT; return 0;
    case T_INTEGER: *res = v->t == SD_JT_INT; return 0;
    case T_NUMBER: *res = sd_jv_is_num(v); return 0;
    case T_STRING: *res = v->t == SD_JT_STR; return 0;
    case T_NONE: *res = v->t == SD_JT_NONE; return 0;
    case T_MAPPING: *res = v->t == SD_JT_DICT; return 0;
    case T_ITERABLE: *res = v->t == SD_JT_STR || v->t == SD_JT_LIST || v->t == SD_JT_DICT || v->t == SD_JT_UNDEF || v->t == SD_JT_LOOP; return 0;
    case T_SEQUENCE:
        *res = v->t == SD_JT_STR || (v->t == SD_JT_LIST && v->sub <= SD_JL_TUPLE) || v->t == SD_JT_DICT || v->t == SD_JT_UNDEF;
        return 0;
    case T_ESCAPED: *res = v->t == SD_JT_STR && v->sub == SD_JS_MARKUP; return 0;
    case T_LOWER: case T_UPPER: return sd_jt_case(c, v, id == T_UPPER, res);
    case T_SAMEAS:
        if (v->t != x.t) *res = 0;
        else if (v->t == SD_JT_NONE || v->t == SD_JT_BOOL || v->t == SD_JT_UNDEF) *res = sd_jv_eq(v, &x);
        else if (v->t == SD_JT_INT) *res = v->u.i == x.u.i && v->u.i >= -5 && v->u.i <= 256; /* CPython's cached ints */
        else if (v->t == SD_JT_STR) *res = v->u.s.p == x.u.s.p && v->u.s.n == x.u.s.n;
        else *res = v->u.l == x.u.l;
        return 0;
    default: return sd_jerr(c, SPECDEC_ERR_INTERNAL, "bad test id %d", id);
    }
}

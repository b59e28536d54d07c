/* sd_json_schema.c — JSON Schema / choices -> regex text (the subset and the text form are in
 * sd_json_schema.h). One walk over the schema writes the regex into a growing buffer; a
 * sub-schema whose language turns out empty (a $ref cut at the recursion bound, false, an
 * impossible range) is truncated away and reported to its parent, which drops or propagates it. */
#include "sd_json_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_json.h"
#include "sd_utf8.h"

/* One character of a JSON string: anything but '"', '\' and control characters, or an escape. */
#define JS_CHAR "(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})"
#define JS_STRING "\"" JS_CHAR "*\""
#define JS_INT "-?(?:0|[1-9][0-9]*)"
#define JS_NUMBER JS_INT "(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
#define JS_SCALAR "(?:" JS_STRING "|" JS_NUMBER "|true|false|null)"

/* RFC 3339 pieces (years 0001-9999, the day checked against month and leap year). */
#define JS_YEAR "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"
#define JS_LEAP "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][48]|[13579][26]|[2468]0)00)"
#define JS_MD                                                                                   \
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|" \
    "02-(?:0[1-9]|1[0-9]|2[0-8]))"
#define JS_DATE "(?:" JS_YEAR "-" JS_MD "|" JS_LEAP "-02-29)"
#define JS_TIME                                                                               \
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
#define JS_HEX4 "[0-9a-fA-F]{4}"
#define JS_UUID JS_HEX4 JS_HEX4 "-" JS_HEX4 "-" JS_HEX4 "-" JS_HEX4 "-" JS_HEX4 JS_HEX4 JS_HEX4
#define JS_ATOM "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
#define JS_LABEL "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define JS_EMAIL JS_ATOM "(?:\\." JS_ATOM ")*@" JS_LABEL "(?:\\." JS_LABEL ")+"

#define JS_PTR_MAX 256

typedef struct js_ctx {
    char *p; /* the regex being written */
    size_t len, cap;
    size_t work; /* bytes written in all */
    const cJSON *root;
    const char *what; /* "json schema" or "choice", for messages */
    sd_errbuf *eb;
    char ptr[JS_PTR_MAX]; /* JSON pointer of the schema being read, for messages */
    size_t ptr_len;
    const cJSON *refs[SD_JSON_SCHEMA_MAX_DEPTH + 1]; /* definitions being expanded on this path */
    int n_refs;
    char *any[SD_JSON_SCHEMA_ANY_DEPTH + 1]; /* any value, containers nested <= d */
} js_ctx;

/* ---- output buffer ------------------------------------------------------------------------- */

static specdec_status js_put(js_ctx *c, const char *s, size_t n) {
    if (c->len + n > SD_JSON_SCHEMA_MAX_REGEX)
        return sd_fail(c->eb, SPECDEC_ERR_UNSUPPORTED, "%s: the regex would exceed %zu bytes (at %s)", c->what,
                       (size_t)SD_JSON_SCHEMA_MAX_REGEX, c->ptr_len ? c->ptr : "the root");
    c->work += n;
    if (c->work > SD_JSON_SCHEMA_MAX_WORK)
        return sd_fail(c->eb, SPECDEC_ERR_UNSUPPORTED, "json schema: too complex (over %zu bytes of regex written)",
                       (size_t)SD_JSON_SCHEMA_MAX_WORK);
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 256;
        while (cap < c->len + n + 1) cap *= 2;
        char *p = sd_realloc(c->p, cap);
        if (!p) return sd_fail(c->eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory (%zu bytes)", c->what, cap);
        c->p = p;
        c->cap = cap;
    }
    if (n) memcpy(c->p + c->len, s, n);
    c->len += n;
    c->p[c->len] = '\0';
    return SPECDEC_OK;
}

static specdec_status js_puts(js_ctx *c, const char *s) { return js_put(c, s, strlen(s)); }

#define JS_TRY(x)                                  \
    do {                                           \
        specdec_status js_st_ = (x);               \
        if (js_st_ != SPECDEC_OK) return js_st_;   \
    } while (0)

/* A copy of c->p[from..len) as a new string, the buffer cut back to `from`. */
static specdec_status js_take(js_ctx *c, size_t from, char **out) {
    size_t n = c->len - from;
    *out = sd_malloc(n + 1);
    if (!*out) return sd_fail(c->eb, SPECDEC_ERR_OUT_OF_MEMORY, "json schema: out of memory (%zu bytes)", n + 1);
    memcpy(*out, c->p + from, n);
    (*out)[n] = '\0';
    c->len = from;
    if (c->p) c->p[from] = '\0';
    return SPECDEC_OK;
}

static void js_cut(js_ctx *c, size_t to) {
    c->len = to;
    if (c->p) c->p[to] = '\0';
}

/* Ends an alternation opened at `start` with "(?:": ")" after n >= 1 alternatives; with none, the
 * whole group is removed and the part is empty. */
static specdec_status js_alt_close(js_ctx *c, size_t start, int n, int *empty) {
    if (!n) {
        js_cut(c, start);
        *empty = 1;
        return SPECDEC_OK;
    }
    return js_puts(c, ")");
}

/* bytes s[0..n) as a regex literal: metacharacters escaped, control bytes as \xHH */
static specdec_status js_put_lit(js_ctx *c, const char *s, size_t n) {
    static const char meta[] = "\\.^$|?*+()[]{}";
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        char tmp[8];
        if (b && strchr(meta, b)) {
            tmp[0] = '\\';
            tmp[1] = (char)b;
            JS_TRY(js_put(c, tmp, 2));
        } else if (b < 0x20 || b == 0x7f) {
            snprintf(tmp, sizeof tmp, "\\x%02x", b);
            JS_TRY(js_put(c, tmp, 4));
        } else {
            JS_TRY(js_put(c, (const char *)&s[i], 1));
        }
    }
    return SPECDEC_OK;
}

/* ---- JSON pointer and errors ----------------------------------------------------------------- */

/* Append "/tok" (RFC 6901 escaping) to the pointer; returns the old length for js_pop. A pointer
 * past JS_PTR_MAX ends in "..." (messages only). */
static size_t js_push(js_ctx *c, const char *tok) {
    size_t old = c->ptr_len, n = c->ptr_len;
    const size_t room = JS_PTR_MAX - 4;
    if (n < room) c->ptr[n++] = '/';
    for (const char *t = tok; *t && n < room; t++) {
        if (*t == '~' || *t == '/') {
            if (n + 2 > room) break;
            c->ptr[n++] = '~';
            c->ptr[n++] = *t == '~' ? '0' : '1';
        } else {
            c->ptr[n++] = *t;
        }
    }
    if (n >= room) {
        memcpy(c->ptr + room, "...", 4);
        c->ptr_len = room + 3;
    } else {
        c->ptr[n] = '\0';
        c->ptr_len = n;
    }
    return old;
}

static void js_pop(js_ctx *c, size_t old) {
    c->ptr_len = old;
    c->ptr[old] = '\0';
}

static size_t js_push_index(js_ctx *c, int i) {
    char tmp[16];
    snprintf(tmp, sizeof tmp, "%d", i);
    return js_push(c, tmp);
}

static const char *js_where(const js_ctx *c) { return c->ptr_len ? c->ptr : "the root"; }

static specdec_status js_unsupported(js_ctx *c, const char *kw) {
    return sd_fail(c->eb, SPECDEC_ERR_UNSUPPORTED, "json schema: '%s' at %s is not supported", kw, js_where(c));
}

SD_PRINTF(3, 4) static specdec_status js_fail(js_ctx *c, specdec_status st, const char *fmt, ...) {
    char what[SD_ERRBUF_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sd_fail(c->eb, st, "json schema: %s at %s", what, js_where(c));
}

/* ---- keywords -------------------------------------------------------------------------------- */

enum {
    JK_ANNOT = 1u << 0, /* ignored */
    JK_TYPE = 1u << 1,
    JK_ENUM = 1u << 2, /* enum, const */
    JK_COMP = 1u << 3, /* anyOf, oneOf, allOf, $ref */
    JK_OBJ = 1u << 4,
    JK_ARR = 1u << 5,
    JK_STR = 1u << 6,
    JK_NUM = 1u << 7,
    JK_N_GROUPS = 8
};

static const struct {
    const char *name;
    unsigned group;
} js_keywords[] = {
    {"title", JK_ANNOT}, {"description", JK_ANNOT}, {"default", JK_ANNOT}, {"examples", JK_ANNOT},
    {"$schema", JK_ANNOT}, {"$id", JK_ANNOT}, {"$comment", JK_ANNOT}, {"deprecated", JK_ANNOT},
    {"readOnly", JK_ANNOT}, {"writeOnly", JK_ANNOT}, {"discriminator", JK_ANNOT}, {"$defs", JK_ANNOT},
    {"definitions", JK_ANNOT}, {"type", JK_TYPE}, {"enum", JK_ENUM}, {"const", JK_ENUM},
    {"anyOf", JK_COMP}, {"oneOf", JK_COMP}, {"allOf", JK_COMP}, {"$ref", JK_COMP},
    {"properties", JK_OBJ}, {"required", JK_OBJ}, {"additionalProperties", JK_OBJ}, {"items", JK_ARR},
    {"prefixItems", JK_ARR}, {"minItems", JK_ARR}, {"maxItems", JK_ARR}, {"minLength", JK_STR},
    {"maxLength", JK_STR}, {"pattern", JK_STR}, {"format", JK_STR}, {"minimum", JK_NUM},
    {"maximum", JK_NUM}, {"exclusiveMinimum", JK_NUM}, {"exclusiveMaximum", JK_NUM},
};

static int js_group_index(unsigned g) {
    int i = 0;
    while (g > 1u) {
        g >>= 1;
        i++;
    }
    return i;
}

/* The groups of keywords in schema object s (bit mask); unknown keywords, duplicate keys and
 * compositions with value keywords beside them are refused here. */
static specdec_status js_scan(js_ctx *c, const cJSON *s, unsigned *mask) {
    const char *first[JK_N_GROUPS] = {0};
    sd_errbuf tmp;
    specdec_status st = sd_json_check_unique(s, js_where(c), "json schema", &tmp);
    if (st != SPECDEC_OK)
        return sd_fail(c->eb, st == SPECDEC_ERR_FORMAT ? SPECDEC_ERR_INVALID_ARGUMENT : st, "%s", tmp.msg);
    unsigned m = 0;
    int n_comp = 0, n_enum = 0;
    for (const cJSON *k = s->child; k; k = k->next) {
        size_t i = 0, n = sizeof js_keywords / sizeof js_keywords[0];
        while (i < n && strcmp(js_keywords[i].name, k->string)) i++;
        if (i == n) return js_unsupported(c, k->string);
        unsigned g = js_keywords[i].group;
        int gi = js_group_index(g);
        if (!first[gi]) first[gi] = k->string;
        n_comp += g == JK_COMP;
        n_enum += g == JK_ENUM;
        m |= g;
        c->work++;
    }
    const unsigned value = JK_TYPE | JK_ENUM | JK_OBJ | JK_ARR | JK_STR | JK_NUM;
    const char *with = NULL, *what = NULL;
    if (n_comp > 1) {
        what = first[js_group_index(JK_COMP)];
        with = "another of anyOf/oneOf/allOf/$ref";
    } else if ((m & JK_COMP) && (m & value)) {
        what = first[js_group_index(JK_COMP)];
        for (unsigned g = JK_TYPE; g <= JK_NUM && !with; g <<= 1) with = (m & value & g) ? first[js_group_index(g)] : NULL;
    } else if (n_enum > 1 || ((m & JK_ENUM) && (m & (JK_OBJ | JK_ARR | JK_STR | JK_NUM)))) {
        what = first[js_group_index(JK_ENUM)];
        with = "another value keyword";
        for (unsigned g = JK_OBJ; g <= JK_NUM && n_enum == 1; g <<= 1)
            if (m & g) with = first[js_group_index(g)];
    }
    if (what)
        return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "'%s' together with '%s' is not supported", what, with);
    *mask = m;
    return SPECDEC_OK;
}

/* The member `key` of object s, JSON null included (sd_json_member hides null). */
static const cJSON *js_item(const cJSON *s, const char *key) { return cJSON_GetObjectItemCaseSensitive(s, key); }

/* A count keyword (minItems, maxLength, ...): absent -> *has = 0; a non-negative integer up to
 * SD_JSON_SCHEMA_MAX_REPEAT; larger ones are unsupported. */
static specdec_status js_count(js_ctx *c, const cJSON *s, const char *kw, int *has, int32_t *out) {
    const cJSON *v = js_item(s, kw);
    *has = v != NULL;
    *out = 0;
    if (!v) return SPECDEC_OK;
    if (!sd_json_is_int(v) || v->valuedouble < 0)
        return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'%s' must be a non-negative integer", kw);
    if (v->valuedouble > SD_JSON_SCHEMA_MAX_REPEAT)
        return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "'%s' = %.0f is above the supported %d", kw, v->valuedouble,
                       SD_JSON_SCHEMA_MAX_REPEAT);
    *out = (int32_t)v->valuedouble;
    return SPECDEC_OK;
}

/* ---- types ----------------------------------------------------------------------------------- */

enum { T_NULL = 1, T_BOOL = 2, T_INT = 4, T_NUM = 8, T_STR = 16, T_ARR = 32, T_OBJ = 64 };

static const char *const js_type_names[7] = {"null", "boolean", "integer", "number", "string", "array", "object"};

static specdec_status js_type_bit(js_ctx *c, const cJSON *v, unsigned *bit) {
    if (!cJSON_IsString(v)) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'type' must be a string or an array of strings");
    for (unsigned i = 0; i < 7; i++)
        if (!strcmp(v->valuestring, js_type_names[i])) {
            *bit = 1u << i;
            return SPECDEC_OK;
        }
    return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "unknown type '%s'", v->valuestring);
}

/* The type bits of a `type` keyword (a name or a non-empty list of names). */
static specdec_status js_types(js_ctx *c, const cJSON *tv, unsigned *mask) {
    *mask = 0;
    if (!cJSON_IsArray(tv)) return js_type_bit(c, tv, mask);
    if (!tv->child) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'type' must not be an empty list");
    for (const cJSON *t = tv->child; t; t = t->next) {
        unsigned bit = 0;
        JS_TRY(js_type_bit(c, t, &bit));
        *mask |= bit;
    }
    return SPECDEC_OK;
}

static int js_value_has_type(const cJSON *v, unsigned mask) {
    if (cJSON_IsNull(v)) return (mask & T_NULL) != 0;
    if (cJSON_IsBool(v)) return (mask & T_BOOL) != 0;
    if (cJSON_IsString(v)) return (mask & T_STR) != 0;
    if (cJSON_IsArray(v)) return (mask & T_ARR) != 0;
    if (cJSON_IsObject(v)) return (mask & T_OBJ) != 0;
    if (mask & T_NUM) return 1;
    return (mask & T_INT) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble);
}

/* ---- literals (enum, const, property names) -------------------------------------------------- */

/* A JSON string's serialisation ('"', '\' and control characters escaped as Python's
 * json.dumps(ensure_ascii=False) does, the rest raw UTF-8) as a regex literal. */
static specdec_status js_put_jstr(js_ctx *c, const char *s) {
    JS_TRY(js_put(c, "\"", 1));
    for (const char *q = s; *q; q++) {
        unsigned char b = (unsigned char)*q;
        const char *esc = b == '"' ? "\\\\\"" : b == '\\' ? "\\\\\\\\" : b == '\n' ? "\\\\n" : b == '\r' ? "\\\\r"
                        : b == '\t' ? "\\\\t" : b == '\b' ? "\\\\b" : b == '\f' ? "\\\\f" : NULL;
        char tmp[16];
        if (!esc && b < 0x20) {
            snprintf(tmp, sizeof tmp, "\\\\u00%02x", b);
            esc = tmp;
        }
        JS_TRY(esc ? js_puts(c, esc) : js_put_lit(c, q, 1));
    }
    return js_put(c, "\"", 1);
}

/* A number: integers (|v| <= 2^53) without fraction, others in the shortest %g form that reads
 * back to the same double. */
static specdec_status js_put_num(js_ctx *c, double d) {
    char tmp[40];
    if (!isfinite(d)) return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "a number beyond the double range in 'enum'/'const'");
    if (d == floor(d)) {
        if (fabs(d) > 9007199254740992.0)
            return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "the integer %.17g (beyond 2^53) in 'enum'/'const'", d);
        snprintf(tmp, sizeof tmp, "%.0f", d + 0.0);
    } else {
        for (int p = 1; p <= 17; p++) {
            snprintf(tmp, sizeof tmp, "%.*g", p, d);
            if (strtod(tmp, NULL) == d) break;
        }
    }
    return js_put_lit(c, tmp, strlen(tmp));
}

/* The serialisation of any JSON value v (SD_JSON_WS after ':' and ','). */
static specdec_status js_lit(js_ctx *c, const cJSON *v, int depth) {
    if (depth > SD_JSON_SCHEMA_MAX_DEPTH)
        return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "an 'enum'/'const' value nested deeper than %d levels",
                       SD_JSON_SCHEMA_MAX_DEPTH);
    if (cJSON_IsNull(v)) return js_puts(c, "null");
    if (cJSON_IsTrue(v)) return js_puts(c, "true");
    if (cJSON_IsFalse(v)) return js_puts(c, "false");
    if (cJSON_IsNumber(v)) return js_put_num(c, v->valuedouble);
    if (cJSON_IsString(v)) return js_put_jstr(c, v->valuestring);
    const int obj = cJSON_IsObject(v);
    JS_TRY(js_puts(c, obj ? "\\{" : "\\["));
    for (const cJSON *e = v->child; e; e = e->next) {
        if (e != v->child) JS_TRY(js_puts(c, "," SD_JSON_WS));
        if (obj) {
            JS_TRY(js_put_jstr(c, e->string));
            JS_TRY(js_puts(c, ":" SD_JSON_WS));
        }
        JS_TRY(js_lit(c, e, depth + 1));
    }
    return js_puts(c, obj ? "\\}" : "\\]");
}

/* enum / const: the values (of the `type`, when given) alternated. */
static specdec_status js_enum(js_ctx *c, const cJSON *s, int *empty) {
    const cJSON *cv = js_item(s, "const"), *ev = js_item(s, "enum"), *tv = js_item(s, "type");
    unsigned tmask = 0x7f;
    if (tv) JS_TRY(js_types(c, tv, &tmask));
    if (ev && !cJSON_IsArray(ev)) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'enum' must be an array");
    const size_t start = c->len;
    int n = 0;
    JS_TRY(js_puts(c, "(?:"));
    for (const cJSON *v = cv ? cv : ev->child; v; v = cv ? NULL : v->next) {
        if (!js_value_has_type(v, tmask)) continue;
        if (n++) JS_TRY(js_puts(c, "|"));
        JS_TRY(js_lit(c, v, 0));
    }
    return js_alt_close(c, start, n, empty);
}

/* ---- containers of any values ---------------------------------------------------------------- */

/* `\[ V (,WS V){lo-1,hi-1} \]` (hi < 0: no upper bound); V nonempty regex text. */
static specdec_status js_put_array_of(js_ctx *c, const char *v, int32_t lo, int32_t hi) {
    char q[48];
    JS_TRY(js_puts(c, "\\["));
    if (hi == 0) return js_puts(c, "\\]");
    if (lo == 0) JS_TRY(js_puts(c, "(?:"));
    JS_TRY(js_puts(c, v));
    const int32_t a = lo > 0 ? lo - 1 : 0, b = hi < 0 ? -1 : hi - 1;
    if (b != 0) {
        JS_TRY(js_puts(c, "(?:," SD_JSON_WS));
        JS_TRY(js_puts(c, v));
        if (b < 0) snprintf(q, sizeof q, a == 0 ? ")*" : a == 1 ? ")+" : "){%d,}", (int)a);
        else if (a == b) snprintf(q, sizeof q, a == 1 ? ")" : "){%d}", (int)a);
        else snprintf(q, sizeof q, a == 0 && b == 1 ? ")?" : "){%d,%d}", (int)a, (int)b);
        JS_TRY(js_puts(c, q));
    }
    if (lo == 0) JS_TRY(js_puts(c, ")?"));
    return js_puts(c, "\\]");
}

/* `\{ (K:WS V (,WS K:WS V)*)? \}` with K any JSON string. */
static specdec_status js_put_object_of(js_ctx *c, const char *v) {
    JS_TRY(js_puts(c, "\\{(?:" JS_STRING ":" SD_JSON_WS));
    JS_TRY(js_puts(c, v));
    JS_TRY(js_puts(c, "(?:," SD_JSON_WS JS_STRING ":" SD_JSON_WS));
    JS_TRY(js_puts(c, v));
    return js_puts(c, ")*)?\\}");
}

/* The regexes of any value with containers nested <= d, built once per call. */
static specdec_status js_any_build(js_ctx *c) {
    if (c->any[0]) return SPECDEC_OK;
    for (int d = 0; d <= SD_JSON_SCHEMA_ANY_DEPTH; d++) {
        const size_t mark = c->len;
        JS_TRY(js_puts(c, "(?:" JS_SCALAR));
        if (d > 0) {
            JS_TRY(js_puts(c, "|"));
            JS_TRY(js_put_object_of(c, c->any[d - 1]));
            JS_TRY(js_puts(c, "|"));
            JS_TRY(js_put_array_of(c, c->any[d - 1], 0, -1));
        }
        JS_TRY(js_puts(c, ")"));
        JS_TRY(js_take(c, mark, &c->any[d]));
    }
    return SPECDEC_OK;
}

static specdec_status js_any(js_ctx *c, int d) {
    JS_TRY(js_any_build(c));
    return js_puts(c, c->any[d]);
}

/* ---- strings --------------------------------------------------------------------------------- */

/* 1 if p[i] is preceded by an odd number of backslashes (starting at p[from]). */
static int js_escaped(const char *p, size_t from, size_t i) {
    size_t k = 0;
    while (i > from + k && p[i - 1 - k] == '\\') k++;
    return k & 1;
}

/* `pattern`: a leading '^' and a trailing '$' dropped; the rest must be balanced in its groups
 * and classes (it is embedded as one group) and use no other anchor. */
static specdec_status js_pattern(js_ctx *c, const cJSON *pv) {
    if (!cJSON_IsString(pv)) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'pattern' must be a string");
    const char *p = pv->valuestring;
    size_t b = 0, e = strlen(p);
    if (e && p[0] == '^') b = 1;
    if (e > b && p[e - 1] == '$' && !js_escaped(p, b, e - 1)) e--;
    int depth = 0, in_class = 0;
    for (size_t i = b; i < e; i++) {
        const char ch = p[i];
        if (ch == '\\') {
            if (++i == e) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'pattern' ends in a lone '\\'");
        } else if (in_class) {
            in_class = ch != ']';
        } else if (ch == '[') {
            in_class = 1;
            if (i + 1 < e && p[i + 1] == '^') i++;
            if (i + 1 < e && p[i + 1] == ']') i++; /* a ']' first in a class is literal */
        } else if (ch == '(') {
            depth++;
        } else if (ch == ')') {
            if (--depth < 0)
                return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'pattern' has an unbalanced ')' at byte %zu", i);
        } else if (ch == '^' || ch == '$') {
            return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "'%c' inside 'pattern' (byte %zu) is not supported", ch, i);
        }
    }
    if (in_class || depth)
        return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'pattern' has an unterminated %s", in_class ? "class" : "group");
    JS_TRY(js_puts(c, "\"(?:"));
    JS_TRY(js_put(c, p + b, e - b));
    return js_puts(c, ")\"");
}

static specdec_status js_format(js_ctx *c, const cJSON *fv) {
    static const struct {
        const char *name, *re;
    } formats[] = {{"date", JS_DATE},
                   {"time", JS_TIME},
                   {"date-time", JS_DATE "T" JS_TIME},
                   {"uuid", JS_UUID},
                   {"email", JS_EMAIL}};
    if (!cJSON_IsString(fv)) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'format' must be a string");
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        if (strcmp(fv->valuestring, formats[i].name)) continue;
        JS_TRY(js_puts(c, "\""));
        JS_TRY(js_puts(c, formats[i].re));
        return js_puts(c, "\"");
    }
    return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "format '%s' is not supported", fv->valuestring);
}

static specdec_status js_string(js_ctx *c, const cJSON *s, int *empty) {
    const cJSON *pv = js_item(s, "pattern"), *fv = js_item(s, "format");
    int has_lo, has_hi;
    int32_t lo, hi;
    JS_TRY(js_count(c, s, "minLength", &has_lo, &lo));
    JS_TRY(js_count(c, s, "maxLength", &has_hi, &hi));
    const int n_kinds = (pv != NULL) + (fv != NULL) + (has_lo || has_hi);
    if (n_kinds > 1)
        return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "'%s' together with '%s' is not supported", pv ? "pattern" : "format",
                       fv && pv ? "format" : has_lo ? "minLength" : "maxLength");
    if (fv) return js_format(c, fv);
    if (pv) return js_pattern(c, pv);
    if (has_hi && hi < lo) {
        *empty = 1;
        return SPECDEC_OK;
    }
    char q[48] = "*";
    if (has_hi) snprintf(q, sizeof q, lo == hi ? "{%d}" : "{%d,%d}", (int)lo, (int)hi);
    else if (lo > 0) snprintf(q, sizeof q, lo == 1 ? "+" : "{%d,}", (int)lo);
    JS_TRY(js_puts(c, "\"" JS_CHAR));
    JS_TRY(js_puts(c, q));
    return js_puts(c, "\"");
}

/* ---- numbers --------------------------------------------------------------------------------- */

/* Canonical decimals of the same length L between x and y (digit strings, x <= y). Recursion is
 * one level per digit (<= 16). */
static specdec_status js_digits(js_ctx *c, const char *x, const char *y, int L) {
    static const char zeros[] = "0000000000000000000", nines[] = "9999999999999999999";
    if (L == 0) return SPECDEC_OK;
    if (x[0] == y[0]) {
        JS_TRY(js_put(c, x, 1));
        return js_digits(c, x + 1, y + 1, L - 1);
    }
    const int xlow = !strncmp(x + 1, zeros, (size_t)L - 1), yhigh = !strncmp(y + 1, nines, (size_t)L - 1);
    const char first = xlow ? x[0] : (char)(x[0] + 1), last = yhigh ? y[0] : (char)(y[0] - 1);
    char tmp[32];
    int alts = 0;
    JS_TRY(js_puts(c, "(?:"));
    if (!xlow) {
        JS_TRY(js_put(c, x, 1));
        JS_TRY(js_digits(c, x + 1, nines, L - 1));
        alts++;
    }
    if (first <= last) {
        int n = first == last ? snprintf(tmp, sizeof tmp, "%s%c", alts ? "|" : "", first)
                              : snprintf(tmp, sizeof tmp, "%s[%c-%c]", alts ? "|" : "", first, last);
        if (L > 2) n += snprintf(tmp + n, sizeof tmp - (size_t)n, "[0-9]{%d}", L - 1);
        else if (L == 2) n += snprintf(tmp + n, sizeof tmp - (size_t)n, "[0-9]");
        JS_TRY(js_put(c, tmp, (size_t)n));
        alts++;
    }
    if (!yhigh) {
        if (alts) JS_TRY(js_puts(c, "|"));
        JS_TRY(js_put(c, y, 1));
        JS_TRY(js_digits(c, zeros, y + 1, L - 1));
    }
    return js_puts(c, ")");
}

/* Non-negative integers in [a, b] (b < 0: no upper bound) without leading zeros. */
static specdec_status js_nonneg_range(js_ctx *c, int64_t a, int64_t b) {
    char xa[24], xb[24], lo[24], hi[24];
    const int la = snprintf(xa, sizeof xa, "%lld", (long long)a);
    const int lb = b < 0 ? la : snprintf(xb, sizeof xb, "%lld", (long long)b);
    JS_TRY(js_puts(c, "(?:"));
    for (int L = la; L <= lb; L++) {
        if (L > la) JS_TRY(js_puts(c, "|"));
        memset(lo, '0', (size_t)L);
        memset(hi, '9', (size_t)L);
        lo[0] = '1';
        if (L == la) memcpy(lo, xa, (size_t)L);
        if (L == lb && b >= 0) memcpy(hi, xb, (size_t)L);
        JS_TRY(js_digits(c, lo, hi, L));
    }
    if (b < 0) {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "|[1-9][0-9]{%d,}", la);
        JS_TRY(js_puts(c, tmp));
    }
    return js_puts(c, ")");
}

/* The value of bound keyword kw (minimum, exclusiveMinimum, maximum, exclusiveMaximum) of an
 * integer or a number: *present = 0 when absent; a finite number within +-1e15, else an error. */
static specdec_status js_bound(js_ctx *c, const cJSON *s, const char *kw, int *present, double *d) {
    const cJSON *b = js_item(s, kw);
    *present = b != NULL;
    if (!b) return SPECDEC_OK;
    if (cJSON_IsBool(b)) return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "a boolean '%s' (draft 4) is not supported", kw);
    if (!cJSON_IsNumber(b) || !isfinite(b->valuedouble))
        return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'%s' must be a number", kw);
    *d = b->valuedouble;
    if (fabs(*d) > SD_JSON_SCHEMA_MAX_INT_BOUND)
        return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "'%s' = %.17g beyond +-1e15 is not supported", kw, *d);
    return SPECDEC_OK;
}

/* One integer bound: minimum (lower, inclusive), exclusiveMinimum, maximum, exclusiveMaximum. */
static specdec_status js_int_bound(js_ctx *c, const cJSON *s, const char *kw, int lower, int excl, int *has,
                                   int64_t *v) {
    int present = 0;
    double d = 0;
    JS_TRY(js_bound(c, s, kw, &present, &d));
    if (!present) return SPECDEC_OK;
    const int64_t k = lower ? (int64_t)(excl ? floor(d) + 1 : ceil(d)) : (int64_t)(excl ? ceil(d) - 1 : floor(d));
    if (!*has || (lower ? k > *v : k < *v)) *v = k;
    *has = 1;
    return SPECDEC_OK;
}

static specdec_status js_integer(js_ctx *c, const cJSON *s, int *empty) {
    int has_lo = 0, has_hi = 0;
    int64_t lo = 0, hi = 0;
    JS_TRY(js_int_bound(c, s, "minimum", 1, 0, &has_lo, &lo));
    JS_TRY(js_int_bound(c, s, "exclusiveMinimum", 1, 1, &has_lo, &lo));
    JS_TRY(js_int_bound(c, s, "maximum", 0, 0, &has_hi, &hi));
    JS_TRY(js_int_bound(c, s, "exclusiveMaximum", 0, 1, &has_hi, &hi));
    if (!has_lo && !has_hi) return js_puts(c, JS_INT);
    if (has_lo && has_hi && lo > hi) {
        *empty = 1;
        return SPECDEC_OK;
    }
    int alts = 0;
    JS_TRY(js_puts(c, "(?:"));
    if (!has_lo || lo < 0) { /* negative values: '-' and the magnitude in [max(1,-hi), -lo] */
        JS_TRY(js_puts(c, "-"));
        JS_TRY(js_nonneg_range(c, has_hi && hi < 0 ? -hi : 1, has_lo ? -lo : -1));
        alts++;
    }
    if (!has_hi || hi >= 0) {
        if (alts) JS_TRY(js_puts(c, "|"));
        JS_TRY(js_nonneg_range(c, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1));
    }
    return js_puts(c, ")");
}

/* ---- numbers with bounds ----------------------------------------------------------------------
 * The texts -?(0|[1-9][0-9]*)(\.[0-9]+)? (no exponent: a subset of the instances, as for integers)
 * whose exact decimal value lies within the bounds. A bound is read as the shortest decimal that
 * reads back as its double (what the schema's author wrote: 0.1 is 1/10, not the double nearest
 * it), and texts are compared with it in exact decimal arithmetic, digit by digit. */

/* A non-negative decimal: integer part ip, fraction digits fr without trailing zeros. */
typedef struct js_dec {
    int64_t ip;
    char fr[SD_JSON_SCHEMA_MAX_FRAC_DIGITS + 1];
} js_dec;

/* |d| as a js_dec; d is finite with |d| <= SD_JSON_SCHEMA_MAX_INT_BOUND (checked by the caller).
 * UNSUPPORTED when its shortest decimal has more than SD_JSON_SCHEMA_MAX_FRAC_DIGITS fraction
 * digits. */
static specdec_status js_dec_of(js_ctx *c, const char *kw, double d, js_dec *out) {
    char buf[48], m[24];
    for (int prec = 1; prec <= 17; prec++) { /* the shortest %.*e that reads back */
        snprintf(buf, sizeof buf, "%.*e", prec - 1, fabs(d));
        if (strtod(buf, NULL) == fabs(d)) break;
    }
    int nm = 0; /* buf = m[0].m[1..]e<exp>: the value is 0.m * 10^(exp + 1) */
    const char *p = buf;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nm < (int)sizeof m) m[nm++] = *p;
    const int point = (*p ? atoi(p + 1) : 0) + 1; /* m[0..point) is the integer part */
    memset(out, 0, sizeof *out);
    for (int i = 0; i < point; i++) out->ip = out->ip * 10 + (i < nm ? m[i] - '0' : 0);
    int nf = 0;
    for (int j = point > 0 ? point : 0; j < nm; j++) {
        const int pos = j - point; /* the fraction digit m[j] stands at */
        if (pos >= SD_JSON_SCHEMA_MAX_FRAC_DIGITS)
            return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "'%s' = %.17g has more than %d fraction digits", kw, d,
                           SD_JSON_SCHEMA_MAX_FRAC_DIGITS);
        while (nf < pos) out->fr[nf++] = '0';
        out->fr[nf++] = m[j];
    }
    while (nf > 0 && out->fr[nf - 1] == '0') nf--;
    out->fr[nf] = '\0';
    return SPECDEC_OK;
}

/* Fraction digit strings D (after the point) against bounds on the value 0.D: lo / hi are digit
 * strings without trailing zeros ("" = 0) or NULL (no bound), ls / hs make them strict. Writes the
 * regex of the NON-EMPTY strings D satisfying them (*has = 0 and nothing written when there are
 * none); *e says whether the empty D (value 0) satisfies them. Each level consumes a digit of lo or
 * hi, so the recursion is at most 2 * SD_JSON_SCHEMA_MAX_FRAC_DIGITS deep. */
static specdec_status js_frac_alt(js_ctx *c, const char *pre, size_t n_pre, const char *opener, const char *lo, int ls,
                                  const char *hi, int hs, int *n);

static specdec_status js_frac(js_ctx *c, const char *lo, int ls, const char *hi, int hs, int *has, int *e) {
    *has = 0;
    *e = 0;
    if (lo && !*lo && !ls) lo = NULL; /* >= 0 holds for every D */
    if (hi && !*hi) {                 /* <= 0 or < 0: only zeros, and only when nothing is needed below */
        if (hs || lo) return SPECDEC_OK;
        *has = *e = 1;
        return js_puts(c, "0+");
    }
    if (!lo && !hi) {
        *has = *e = 1;
        return js_puts(c, "[0-9]+");
    }
    if (lo && !*lo && !hi) { /* > 0: some digit not zero */
        *has = 1;
        return js_puts(c, "0*[1-9][0-9]*");
    }
    *e = lo == NULL; /* 0 satisfies a positive upper bound, never a lower one left here */
    const size_t start = c->len;
    int n = 0;
    JS_TRY(js_puts(c, "(?:"));
    char free_a = 0, free_b = 0; /* first digits after which both bounds hold whatever follows */
    for (char d = '0'; d <= '9'; d++) {
        const char *lo2 = NULL, *hi2 = NULL; /* the bounds on the rest after digit d; NULL: holds */
        if (lo && !*lo) { /* > 0 */
            if (d == '0') lo2 = lo;
        } else if (lo) {
            if (d < lo[0]) continue;
            if (d == lo[0]) lo2 = lo + 1;
        }
        if (hi) {
            if (d > hi[0]) continue;
            if (d == hi[0]) hi2 = hi + 1;
        }
        if (!lo2 && !hi2) {
            if (!free_a) free_a = d;
            free_b = d;
            continue;
        }
        JS_TRY(js_frac_alt(c, &d, 1, "(?:", lo2, ls, hi2, hs, &n));
    }
    if (free_a) { /* one range: the digits strictly between the bounds' digits */
        char tmp[16];
        const int k = free_a == free_b ? snprintf(tmp, sizeof tmp, "%s%c[0-9]*", n ? "|" : "", free_a)
                                       : snprintf(tmp, sizeof tmp, "%s[%c-%c][0-9]*", n ? "|" : "", free_a, free_b);
        JS_TRY(js_put(c, tmp, (size_t)k));
        n++;
    }
    if (!n) {
        js_cut(c, start);
        return SPECDEC_OK;
    }
    *has = 1;
    return js_puts(c, ")");
}

/* One alternative of an open group (*n counts them): pre[0..n_pre), then opener, the digit
 * strings of js_frac's bounds and ")" ("?" when they may be empty; opener and all left out when
 * only the empty string fits). Nothing when no string fits. */
static specdec_status js_frac_alt(js_ctx *c, const char *pre, size_t n_pre, const char *opener, const char *lo, int ls,
                                  const char *hi, int hs, int *n) {
    const size_t mark = c->len;
    if (*n) JS_TRY(js_puts(c, "|"));
    JS_TRY(js_put(c, pre, n_pre));
    const size_t open = c->len;
    JS_TRY(js_puts(c, opener));
    int has = 0, e = 0;
    JS_TRY(js_frac(c, lo, ls, hi, hs, &has, &e));
    if (has) {
        JS_TRY(js_puts(c, e ? ")?" : ")"));
    } else if (e) {
        js_cut(c, open);
    } else {
        js_cut(c, mark);
        return SPECDEC_OK;
    }
    (*n)++;
    return SPECDEC_OK;
}

/* One alternative "<ip>[.<fraction>]", the fraction bounded as in js_frac (see js_frac_alt). */
static specdec_status js_num_alt(js_ctx *c, int64_t ip, const char *lo, int ls, const char *hi, int hs, int *n) {
    char t[24];
    const int k = snprintf(t, sizeof t, "%lld", (long long)ip);
    return js_frac_alt(c, t, (size_t)k, "(?:\\.", lo, ls, hi, hs, n);
}

/* Non-negative texts with value in [a, b] (as / bs: strict; b NULL: unbounded) as alternatives
 * added to an open group (*n counts them). */
static specdec_status js_nonneg_num(js_ctx *c, const js_dec *a, int as, const js_dec *b, int bs, int *n) {
    if (b && b->ip == a->ip) return js_num_alt(c, a->ip, a->fr, as, b->fr, bs, n);
    JS_TRY(js_num_alt(c, a->ip, a->fr, as, NULL, 0, n));
    if (!b || a->ip + 1 <= b->ip - 1) {
        if (*n) JS_TRY(js_puts(c, "|"));
        JS_TRY(js_nonneg_range(c, a->ip + 1, b ? b->ip - 1 : -1));
        JS_TRY(js_puts(c, "(?:\\.[0-9]+)?"));
        (*n)++;
    }
    return b ? js_num_alt(c, b->ip, NULL, 0, b->fr, bs, n) : SPECDEC_OK;
}

/* One sign's texts (sign "-" or "") with magnitude in [a, b], as one alternative of an open group
 * (*n counts them); nothing when none fits. */
static specdec_status js_num_sign(js_ctx *c, const char *sign, const js_dec *a, int as, const js_dec *b, int bs,
                                  int *n) {
    const size_t mark = c->len;
    if (*n) JS_TRY(js_puts(c, "|"));
    JS_TRY(js_puts(c, sign));
    JS_TRY(js_puts(c, "(?:"));
    int m = 0;
    JS_TRY(js_nonneg_num(c, a, as, b, bs, &m));
    if (!m) {
        js_cut(c, mark);
        return SPECDEC_OK;
    }
    (*n)++;
    return js_puts(c, ")");
}

/* One bound of a number: the tighter of minimum / exclusiveMinimum (the larger; strict on a tie),
 * and of maximum / exclusiveMaximum. */
static specdec_status js_num_bound(js_ctx *c, const cJSON *s, const char *kw, int lower, int excl, int *has, double *v,
                                   int *strict, const char **which) {
    int present = 0;
    double d = 0;
    JS_TRY(js_bound(c, s, kw, &present, &d));
    if (!present) return SPECDEC_OK;
    if (!*has || (lower ? d > *v : d < *v) || (d == *v && excl)) {
        *v = d;
        *strict = excl;
        *which = kw;
    }
    *has = 1;
    return SPECDEC_OK;
}

static specdec_status js_number(js_ctx *c, const cJSON *s, int *empty) {
    int has_lo = 0, has_hi = 0, ls = 0, hs = 0;
    double lo = 0, hi = 0;
    const char *lo_kw = NULL, *hi_kw = NULL;
    JS_TRY(js_num_bound(c, s, "minimum", 1, 0, &has_lo, &lo, &ls, &lo_kw));
    JS_TRY(js_num_bound(c, s, "exclusiveMinimum", 1, 1, &has_lo, &lo, &ls, &lo_kw));
    JS_TRY(js_num_bound(c, s, "maximum", 0, 0, &has_hi, &hi, &hs, &hi_kw));
    JS_TRY(js_num_bound(c, s, "exclusiveMaximum", 0, 1, &has_hi, &hi, &hs, &hi_kw));
    if (!has_lo && !has_hi) return js_puts(c, JS_NUMBER);
    if (has_lo && has_hi && (lo > hi || (lo == hi && (ls || hs)))) {
        *empty = 1;
        return SPECDEC_OK;
    }
    js_dec dlo, dhi, zero;
    memset(&zero, 0, sizeof zero);
    if (has_lo) JS_TRY(js_dec_of(c, lo_kw, lo, &dlo));
    if (has_hi) JS_TRY(js_dec_of(c, hi_kw, hi, &dhi));
    const size_t start = c->len;
    int n = 0;
    JS_TRY(js_puts(c, "(?:"));
    if (!has_lo || lo < 0) /* x < 0: '-' and y = -x in (0 or -hi, -lo] */
        JS_TRY(js_num_sign(c, "-", has_hi && hi < 0 ? &dhi : &zero, has_hi && hi < 0 ? hs : 1, has_lo ? &dlo : NULL,
                           ls, &n));
    if (!has_hi || hi > 0 || (hi == 0 && !hs)) /* x >= 0 */
        JS_TRY(js_num_sign(c, "", has_lo && lo >= 0 ? &dlo : &zero, has_lo && lo >= 0 ? ls : 0, has_hi ? &dhi : NULL,
                           hs, &n));
    return js_alt_close(c, start, n, empty);
}

/* ---- composition ----------------------------------------------------------------------------- */

static specdec_status js_gen(js_ctx *c, const cJSON *s, int depth, int *empty);

/* The regex of sub-schema s (at pointer /kw or /kw/index) as a new string; NULL when empty. */
static specdec_status js_gen_str(js_ctx *c, const cJSON *s, const char *kw, int index, int depth, char **out) {
    const size_t old = js_push(c, kw), mark = c->len;
    if (index >= 0) js_push_index(c, index);
    int empty = 0;
    *out = NULL;
    specdec_status st = js_gen(c, s, depth + 1, &empty);
    js_pop(c, old);
    if (st != SPECDEC_OK) return st;
    if (empty) {
        js_cut(c, mark);
        return SPECDEC_OK;
    }
    return js_take(c, mark, out);
}

/* anyOf / oneOf: the members' regexes alternated, empty ones dropped. */
static specdec_status js_alt(js_ctx *c, const cJSON *arr, const char *kw, int depth, int *empty) {
    if (!cJSON_IsArray(arr) || !arr->child)
        return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'%s' must be a non-empty array", kw);
    const size_t start = c->len;
    int n = 0, i = 0;
    JS_TRY(js_puts(c, "(?:"));
    for (const cJSON *m = arr->child; m; m = m->next, i++) {
        const size_t mark = c->len, old = js_push(c, kw);
        js_push_index(c, i);
        if (n) JS_TRY(js_puts(c, "|"));
        int e = 0;
        specdec_status st = js_gen(c, m, depth + 1, &e);
        js_pop(c, old);
        if (st != SPECDEC_OK) return st;
        if (e) js_cut(c, mark);
        else n++;
    }
    return js_alt_close(c, start, n, empty);
}

/* The definition a $ref names ("#", "#/$defs/<name>", "#/definitions/<name>"); *defs_kw and *name
 * say where it is (for the pointer). */
static specdec_status js_resolve(js_ctx *c, const char *ref, const cJSON **out, const char **defs_kw, char *name,
                                 size_t name_cap) {
    *out = NULL;
    *defs_kw = NULL;
    name[0] = '\0';
    if (!strcmp(ref, "#")) {
        *out = c->root;
        return SPECDEC_OK;
    }
    const char *rest = !strncmp(ref, "#/$defs/", 8) ? ref + 8 : !strncmp(ref, "#/definitions/", 14) ? ref + 14 : NULL;
    if (!rest || strchr(rest, '/') || strlen(rest) >= name_cap)
        return js_fail(c, SPECDEC_ERR_UNSUPPORTED,
                       "'$ref' '%.200s' is not supported (only #, #/$defs/<name>, #/definitions/<name>)", ref);
    *defs_kw = ref[2] == '$' ? "$defs" : "definitions";
    size_t n = 0;
    for (const char *p = rest; *p; p++) { /* RFC 6901: ~1 is '/', ~0 is '~' */
        if (*p == '~' && (p[1] == '0' || p[1] == '1')) {
            name[n++] = p[1] == '0' ? '~' : '/';
            p++;
        } else {
            name[n++] = *p;
        }
    }
    name[n] = '\0';
    const cJSON *defs = js_item(c->root, *defs_kw);
    *out = cJSON_IsObject(defs) ? js_item(defs, name) : NULL;
    if (!*out) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'$ref' '%.200s' does not resolve", ref);
    return SPECDEC_OK;
}

/* $ref: the definition expanded in place (its pointer in messages), at most
 * SD_JSON_SCHEMA_REF_REPEAT times on one path, then cut (empty). */
static specdec_status js_ref(js_ctx *c, const cJSON *rv, int depth, int *empty) {
    if (!cJSON_IsString(rv)) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'$ref' must be a string");
    const cJSON *target;
    const char *defs_kw;
    char name[JS_PTR_MAX], saved[JS_PTR_MAX];
    JS_TRY(js_resolve(c, rv->valuestring, &target, &defs_kw, name, sizeof name));
    int seen = 0;
    for (int i = 0; i < c->n_refs; i++) seen += c->refs[i] == target;
    if (seen >= SD_JSON_SCHEMA_REF_REPEAT || c->n_refs > SD_JSON_SCHEMA_MAX_DEPTH) {
        *empty = 1;
        return SPECDEC_OK;
    }
    const size_t saved_len = c->ptr_len;
    memcpy(saved, c->ptr, saved_len + 1);
    js_pop(c, 0);
    if (defs_kw) {
        js_push(c, defs_kw);
        js_push(c, name);
    }
    c->refs[c->n_refs++] = target;
    specdec_status st = js_gen(c, target, depth + 1, empty);
    c->n_refs--;
    memcpy(c->ptr, saved, saved_len + 1);
    c->ptr_len = saved_len;
    return st;
}

static specdec_status js_comp(js_ctx *c, const cJSON *s, int depth, int *empty) {
    const cJSON *v;
    if ((v = js_item(s, "$ref"))) return js_ref(c, v, depth, empty);
    if ((v = js_item(s, "anyOf"))) return js_alt(c, v, "anyOf", depth, empty);
    if ((v = js_item(s, "oneOf"))) return js_alt(c, v, "oneOf", depth, empty);
    v = js_item(s, "allOf");
    if (!cJSON_IsArray(v) || !v->child) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'allOf' must be a non-empty array");
    if (v->child->next) return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "'allOf' with more than one member is not supported");
    return js_alt(c, v, "allOf", depth, empty);
}

/* ---- arrays ---------------------------------------------------------------------------------- */

/* prefixItems: every tuple member present, then (items a schema) up to the remaining count. */
static specdec_status js_tuple(js_ctx *c, const cJSON *s, const cJSON *pre, int32_t lo, int32_t hi, int depth,
                               int *empty) {
    const cJSON *items = js_item(s, "items");
    const int32_t k = cJSON_GetArraySize(pre);
    if (hi >= 0 && hi < k)
        return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "'maxItems' below the length of 'prefixItems' is not supported");
    char *extra = NULL;
    const int more = items && !cJSON_IsFalse(items) && (hi < 0 || hi > k);
    if (more) JS_TRY(js_gen_str(c, items, "items", -1, depth, &extra));
    const size_t start = c->len;
    specdec_status st = js_puts(c, "\\[");
    int i = 0;
    for (const cJSON *m = pre->child; m && st == SPECDEC_OK && !*empty; m = m->next, i++) {
        char *p = NULL;
        if (i) st = js_puts(c, "," SD_JSON_WS);
        if (st == SPECDEC_OK) st = js_gen_str(c, m, "prefixItems", i, depth, &p);
        if (st == SPECDEC_OK && !p) *empty = 1;
        if (st == SPECDEC_OK && p) st = js_puts(c, p);
        sd_free(p);
    }
    const int32_t need = lo > k ? lo - k : 0;
    if (st == SPECDEC_OK && !*empty && need > 0 && !extra) *empty = 1;
    if (st == SPECDEC_OK && !*empty && extra) {
        char q[48];
        const int32_t most = hi < 0 ? -1 : hi - k;
        if (most < 0) snprintf(q, sizeof q, need == 0 ? ")*" : need == 1 ? ")+" : "){%d,}", (int)need);
        else snprintf(q, sizeof q, need == most ? "){%d}" : "){%d,%d}", (int)need, (int)most);
        st = js_puts(c, "(?:," SD_JSON_WS);
        if (st == SPECDEC_OK) st = js_puts(c, extra);
        if (st == SPECDEC_OK) st = js_puts(c, q);
    }
    sd_free(extra);
    if (st == SPECDEC_OK && !*empty) st = js_puts(c, "\\]");
    if (st == SPECDEC_OK && *empty) js_cut(c, start);
    return st;
}

static specdec_status js_array(js_ctx *c, const cJSON *s, int depth, int *empty) {
    int has_lo, has_hi;
    int32_t lo, hi;
    JS_TRY(js_count(c, s, "minItems", &has_lo, &lo));
    JS_TRY(js_count(c, s, "maxItems", &has_hi, &hi));
    if (!has_hi) hi = -1;
    if (hi >= 0 && hi < lo) {
        *empty = 1;
        return SPECDEC_OK;
    }
    const cJSON *pre = js_item(s, "prefixItems"), *items = js_item(s, "items");
    if (pre && !cJSON_IsArray(pre)) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'prefixItems' must be an array");
    if (pre && pre->child) return js_tuple(c, s, pre, lo, hi, depth, empty);
    if (!items) {
        JS_TRY(js_any_build(c));
        return js_put_array_of(c, c->any[SD_JSON_SCHEMA_ANY_DEPTH - 1], lo, hi);
    }
    char *v = NULL;
    JS_TRY(js_gen_str(c, items, "items", -1, depth, &v));
    specdec_status st = SPECDEC_OK;
    if (v) st = js_put_array_of(c, v, lo, hi);
    else if (lo == 0) st = js_puts(c, "\\[\\]");
    else *empty = 1;
    sd_free(v);
    return st;
}

/* ---- objects --------------------------------------------------------------------------------- */

/* Every member "key":WS value regex of `properties` (NULL where the value is empty), and which are
 * required. *empty when a required one is empty. */
static specdec_status js_members(js_ctx *c, const cJSON *props, const cJSON *req, int depth, char **mem,
                                 uint8_t *reqd, int *empty) {
    int i = 0;
    for (const cJSON *p = props->child; p; p = p->next, i++) {
        for (const cJSON *r = req ? req->child : NULL; r && !reqd[i]; r = r->next) reqd[i] = !strcmp(r->valuestring, p->string);
        const size_t mark = c->len, old = js_push(c, "properties");
        js_push(c, p->string);
        JS_TRY(js_put_jstr(c, p->string));
        JS_TRY(js_puts(c, ":" SD_JSON_WS));
        int e = 0;
        JS_TRY(js_gen(c, p, depth + 1, &e));
        js_pop(c, old);
        if (e) {
            js_cut(c, mark);
            if (reqd[i]) *empty = 1;
            if (reqd[i]) return SPECDEC_OK;
        } else {
            JS_TRY(js_take(c, mark, &mem[i]));
        }
    }
    return SPECDEC_OK;
}

/* Members in order: required ones always, optional ones optional (commas placed so that any
 * subset in this order, and only those, reads as a valid object). */
static specdec_status js_put_members(js_ctx *c, char **mem, const uint8_t *reqd, int n) {
    int r = 0;
    while (r < n && !(mem[r] && reqd[r])) r++;
    JS_TRY(js_puts(c, "\\{"));
    if (r < n) {
        for (int i = 0; i < n; i++) {
            if (!mem[i]) continue;
            const int opt = !reqd[i];
            if (opt) JS_TRY(js_puts(c, "(?:"));
            if (i > r) JS_TRY(js_puts(c, "," SD_JSON_WS));
            JS_TRY(js_puts(c, mem[i]));
            if (i < r) JS_TRY(js_puts(c, "," SD_JSON_WS));
            if (opt) JS_TRY(js_puts(c, ")?"));
        }
        return js_puts(c, "\\}");
    }
    int alts = 0; /* all optional: one alternative per first member present */
    for (int j = 0; j < n; j++) {
        if (!mem[j]) continue;
        JS_TRY(js_puts(c, alts++ ? "|" : "(?:"));
        JS_TRY(js_puts(c, mem[j]));
        for (int i = j + 1; i < n; i++) {
            if (!mem[i]) continue;
            JS_TRY(js_puts(c, "(?:," SD_JSON_WS));
            JS_TRY(js_puts(c, mem[i]));
            JS_TRY(js_puts(c, ")?"));
        }
    }
    if (alts) JS_TRY(js_puts(c, ")?"));
    return js_puts(c, "\\}");
}

static specdec_status js_check_required(js_ctx *c, const cJSON *props, const cJSON *req) {
    if (req && !cJSON_IsArray(req)) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'required' must be an array");
    size_t n = 0;
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next, n++) {
        if (!cJSON_IsString(r)) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'required' must hold strings");
        if (!props) return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "'required' without 'properties' is not supported");
        if (!js_item(props, r->valuestring))
            return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "required key '%.100s' not in 'properties' is not supported",
                           r->valuestring);
    }
    c->work += n * (size_t)cJSON_GetArraySize(props) / 8; /* the matching in js_members */
    if (c->work > SD_JSON_SCHEMA_MAX_WORK)
        return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "too many properties and required keys");
    return SPECDEC_OK;
}

static specdec_status js_object(js_ctx *c, const cJSON *s, int depth, int *empty) {
    const cJSON *props = js_item(s, "properties"), *req = js_item(s, "required");
    const cJSON *addl = js_item(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'properties' must be an object");
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl))
        return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "'additionalProperties' must be a schema");
    JS_TRY(js_check_required(c, props, req));
    if (!props) {
        char *v = NULL;
        if (cJSON_IsFalse(addl)) return js_puts(c, "\\{\\}");
        if (!addl || cJSON_IsTrue(addl)) {
            JS_TRY(js_any_build(c));
            return js_put_object_of(c, c->any[SD_JSON_SCHEMA_ANY_DEPTH - 1]);
        }
        JS_TRY(js_gen_str(c, addl, "additionalProperties", -1, depth, &v));
        specdec_status st = v ? js_put_object_of(c, v) : js_puts(c, "\\{\\}");
        sd_free(v);
        return st;
    }
    if (addl && !cJSON_IsFalse(addl))
        return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "'additionalProperties' other than false beside 'properties' is not supported");
    sd_errbuf tmp;
    specdec_status st = sd_json_check_unique(props, "properties", "json schema", &tmp);
    if (st != SPECDEC_OK)
        return js_fail(c, st == SPECDEC_ERR_FORMAT ? SPECDEC_ERR_INVALID_ARGUMENT : st, "%s",
                       tmp.msg + strlen("json schema: "));
    const int n = cJSON_GetArraySize(props);
    char **mem = sd_calloc((size_t)n + 1, sizeof *mem);
    uint8_t *reqd = sd_calloc((size_t)n + 1, 1);
    st = mem && reqd ? SPECDEC_OK : sd_fail(c->eb, SPECDEC_ERR_OUT_OF_MEMORY, "json schema: out of memory");
    if (st == SPECDEC_OK) st = js_members(c, props, req, depth, mem, reqd, empty);
    if (st == SPECDEC_OK && !*empty) st = js_put_members(c, mem, reqd, n);
    for (int i = 0; mem && i < n; i++) sd_free(mem[i]);
    sd_free(mem);
    sd_free(reqd);
    return st;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static specdec_status js_one_type(js_ctx *c, const cJSON *s, unsigned t, int depth, int *empty) {
    switch (t) {
    case T_NULL: return js_puts(c, "null");
    case T_BOOL: return js_puts(c, "(?:true|false)");
    case T_INT: return js_integer(c, s, empty);
    case T_NUM: return js_number(c, s, empty);
    case T_STR: return js_string(c, s, empty);
    case T_ARR: return js_array(c, s, depth, empty);
    default: return js_object(c, s, depth, empty);
    }
}

/* A schema with type (or the type its keywords imply): its types' regexes alternated. */
static specdec_status js_typed(js_ctx *c, const cJSON *s, unsigned kw, int depth, int *empty) {
    const cJSON *tv = js_item(s, "type");
    unsigned tm = 0;
    if (tv) JS_TRY(js_types(c, tv, &tm));
    else tm = (kw & JK_OBJ ? T_OBJ : 0) | (kw & JK_ARR ? T_ARR : 0) | (kw & JK_STR ? T_STR : 0) | (kw & JK_NUM ? T_NUM : 0);
    if (!tm) return js_any(c, SD_JSON_SCHEMA_ANY_DEPTH);
    if (tm & T_NUM) tm &= ~(unsigned)T_INT; /* number already holds the integers */
    if (!(tm & (tm - 1))) return js_one_type(c, s, tm, depth, empty);
    const size_t start = c->len;
    int n = 0;
    JS_TRY(js_puts(c, "(?:"));
    for (unsigned t = 1; t <= T_OBJ; t <<= 1) {
        if (!(tm & t)) continue;
        const size_t mark = c->len;
        if (n) JS_TRY(js_puts(c, "|"));
        int e = 0;
        JS_TRY(js_one_type(c, s, t, depth, &e));
        if (e) js_cut(c, mark);
        else n++;
    }
    return js_alt_close(c, start, n, empty);
}

/* The regex of schema s, appended; *empty (and nothing appended) when s admits no value here. */
static specdec_status js_gen(js_ctx *c, const cJSON *s, int depth, int *empty) {
    *empty = 0;
    if (depth > SD_JSON_SCHEMA_MAX_DEPTH)
        return js_fail(c, SPECDEC_ERR_UNSUPPORTED, "schema nesting deeper than %d levels ($ref expansions included)",
                       SD_JSON_SCHEMA_MAX_DEPTH);
    c->work += 16; /* every visit counts, so fan-outs of cut references stay bounded */
    if (c->work > SD_JSON_SCHEMA_MAX_WORK)
        return sd_fail(c->eb, SPECDEC_ERR_UNSUPPORTED, "json schema: too complex (over %zu bytes of regex written)",
                       (size_t)SD_JSON_SCHEMA_MAX_WORK);
    if (cJSON_IsTrue(s)) return js_any(c, SD_JSON_SCHEMA_ANY_DEPTH);
    if (cJSON_IsFalse(s)) {
        *empty = 1;
        return SPECDEC_OK;
    }
    if (!cJSON_IsObject(s)) return js_fail(c, SPECDEC_ERR_INVALID_ARGUMENT, "a schema must be an object or a boolean");
    unsigned kw = 0;
    JS_TRY(js_scan(c, s, &kw));
    if (kw & JK_COMP) return js_comp(c, s, depth, empty);
    if (kw & JK_ENUM) return js_enum(c, s, empty);
    return js_typed(c, s, kw, depth, empty);
}

/* ---- entry points ---------------------------------------------------------------------------- */

/* 1 if the JSON text has a \u0000 escape (cJSON's strings end there: refused, not cut). */
static int js_has_nul_escape(const char *t, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (t[i] != '\\') continue;
        if (t[i + 1] == 'u' && i + 5 < n && !memcmp(t + i + 2, "0000", 4)) return 1;
        i++;
    }
    return 0;
}

static void js_ctx_free(js_ctx *c) {
    for (int d = 0; d <= SD_JSON_SCHEMA_ANY_DEPTH; d++) sd_free(c->any[d]);
    sd_free(c->p);
}

/* The finished regex handed to the caller (an empty one allocated too). */
static specdec_status js_finish(js_ctx *c, char **regex, size_t *regex_len) {
    if (!c->p) {
        c->p = sd_malloc(1);
        if (!c->p) return sd_fail(c->eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", c->what);
        c->p[0] = '\0';
    }
    *regex = c->p;
    *regex_len = c->len;
    c->p = NULL;
    return SPECDEC_OK;
}

static specdec_status js_parse(const char *schema, size_t len, cJSON **root, sd_errbuf *eb) {
    if (len > SD_JSON_SCHEMA_MAX_BYTES)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "json schema: %zu bytes is above the limit of %zu", len,
                       (size_t)SD_JSON_SCHEMA_MAX_BYTES);
    if (!sd_utf8_valid((const unsigned char *)schema, len))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "json schema: not valid UTF-8");
    if (js_has_nul_escape(schema, len))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "json schema: a \\u0000 escape is not supported");
    sd_errbuf tmp;
    specdec_status st = sd_json_parse(schema, len, "json schema", root, &tmp);
    if (st == SPECDEC_ERR_FORMAT) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s", tmp.msg);
    if (st != SPECDEC_OK) return sd_fail(eb, st, "%s", tmp.msg);
    return SPECDEC_OK;
}

specdec_status sd_json_schema_regex(const char *schema, size_t len, char **regex, size_t *regex_len, sd_errbuf *eb) {
    if (!regex || !regex_len) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "json schema: NULL output pointer");
    *regex = NULL;
    *regex_len = 0;
    if (!schema && len) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "json schema: NULL schema text");
    cJSON *root = NULL;
    JS_TRY(js_parse(schema, len, &root, eb));
    js_ctx c;
    memset(&c, 0, sizeof c);
    c.root = root;
    c.what = "json schema";
    c.eb = eb;
    int empty = 0;
    specdec_status st = js_gen(&c, root, 0, &empty);
    if (st == SPECDEC_OK && empty)
        st = sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                     "json schema: no value is an instance (false, an empty range or enum, or only recursion past the "
                     "$ref bound of %d)", SD_JSON_SCHEMA_REF_REPEAT);
    if (st == SPECDEC_OK) st = js_finish(&c, regex, regex_len);
    js_ctx_free(&c);
    cJSON_Delete(root);
    return st;
}

specdec_status sd_choice_regex(const char *const *choices, const size_t *lens, int32_t n, char **regex,
                               size_t *regex_len, sd_errbuf *eb) {
    if (!regex || !regex_len) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "choice: NULL output pointer");
    *regex = NULL;
    *regex_len = 0;
    if (n < 1 || n > SD_CHOICE_MAX_N || !choices || !lens)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "choice: need 1..%d choices, got %d%s", SD_CHOICE_MAX_N, (int)n,
                       choices && lens ? "" : " (NULL list)");
    for (int32_t i = 0; i < n; i++) {
        if (!choices[i] && lens[i]) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "choice %d: NULL text", (int)i);
        if (!sd_utf8_valid((const unsigned char *)choices[i], lens[i]))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "choice %d: not valid UTF-8", (int)i);
    }
    js_ctx c;
    memset(&c, 0, sizeof c);
    c.what = "choice";
    c.eb = eb;
    specdec_status st = js_puts(&c, "(?:");
    for (int32_t i = 0; i < n && st == SPECDEC_OK; i++) {
        if (i) st = js_puts(&c, "|");
        if (st == SPECDEC_OK) st = js_put_lit(&c, choices[i], lens[i]);
    }
    if (st == SPECDEC_OK) st = js_puts(&c, ")");
    if (st == SPECDEC_OK) st = js_finish(&c, regex, regex_len);
    js_ctx_free(&c);
    return st;
}

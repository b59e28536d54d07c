/* sd_jinja_parse.c — tokens to an AST, following jinja2's parser (precedence, tuples, slices,
 * filters and tests without parentheses, conditional expressions without else). Tags: if/elif/
 * else, for (tuple targets, a filter condition, else), set (names, tuples, namespace attributes,
 * block form), macro, call (with caller parameters), filter blocks, generation (transformers'
 * extension: its body is rendered as is), break/continue, print, raw (in the lexer). Refused with
 * the construct named: include, import, from, extends, block, with, autoescape, do, trans,
 * recursive loops, filters and tests specdec does not implement, *args and **kwargs in calls, the
 * globals cycler/joiner/lipsum. */
#include <stdio.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_jinja_int.h"
#include "sd_utf8.h"

#define SD_JP_MAX_DEPTH 200 /* nested expressions/statements */

typedef struct sd_jparser {
    sd_jarena *a;
    const sd_jtok *t;
    size_t nt, i;
    int depth;
    int loops;  /* enclosing for loops (break/continue allowed) */
    int macros; /* enclosing macro/call bodies */
    char err[SD_ERRBUF_SIZE - 64];
    int failed;
} sd_jparser;

static const sd_jtok *sd_jp_cur(const sd_jparser *P) { return &P->t[P->i < P->nt ? P->i : P->nt - 1]; }
static const sd_jtok *sd_jp_look(const sd_jparser *P) { return &P->t[P->i + 1 < P->nt ? P->i + 1 : P->nt - 1]; }
static void sd_jp_next(sd_jparser *P) {
    if (P->i + 1 < P->nt) P->i++;
}

static void sd_jp_describe(const sd_jtok *t, char *buf, size_t cap) {
    switch (t->k) {
    case SD_JK_DATA: snprintf(buf, cap, "template data"); break;
    case SD_JK_VAR_BEGIN: snprintf(buf, cap, "'{{'"); break;
    case SD_JK_VAR_END: snprintf(buf, cap, "end of print statement ('}}')"); break;
    case SD_JK_BLOCK_BEGIN: snprintf(buf, cap, "'{%%'"); break;
    case SD_JK_BLOCK_END: snprintf(buf, cap, "end of statement block ('%%}')"); break;
    case SD_JK_NAME: snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p); break;
    case SD_JK_STRING: snprintf(buf, cap, "a string"); break;
    case SD_JK_INT: case SD_JK_FLOAT: snprintf(buf, cap, "a number"); break;
    case SD_JK_OP: {
        static const char *two[] = {"", "//", "**", "==", "!=", "<=", ">="};
        if (t->op < sizeof two / sizeof two[0]) snprintf(buf, cap, "'%s'", two[t->op]);
        else snprintf(buf, cap, "'%c'", t->op);
        break;
    }
    default: snprintf(buf, cap, "end of template"); break;
    }
}

static sd_jnode *sd_jp_fail(sd_jparser *P, const char *fmt, const char *arg) {
    if (!P->failed) {
        char what[200];
        snprintf(what, sizeof what, fmt, arg ? arg : "");
        snprintf(P->err, sizeof P->err, "line %d: %s", sd_jp_cur(P)->line, what);
        P->failed = 1;
    }
    return NULL;
}

static sd_jnode *sd_jp_unexpected(sd_jparser *P, const char *expected) {
    char got[80], msg[200];
    sd_jp_describe(sd_jp_cur(P), got, sizeof got);
    snprintf(msg, sizeof msg, "syntax error: expected %s, got %s", expected, got);
    return sd_jp_fail(P, "%s", msg);
}

static int sd_jp_is_op(const sd_jparser *P, int op) { return sd_jp_cur(P)->k == SD_JK_OP && sd_jp_cur(P)->op == op; }
static int sd_jp_is_name(const sd_jparser *P, const char *name) {
    const sd_jtok *t = sd_jp_cur(P);
    return t->k == SD_JK_NAME && t->n == strlen(name) && !memcmp(t->p, name, t->n);
}
static int sd_jp_skip_op(sd_jparser *P, int op) {
    if (!sd_jp_is_op(P, op)) return 0;
    sd_jp_next(P);
    return 1;
}
static int sd_jp_skip_name(sd_jparser *P, const char *name) {
    if (!sd_jp_is_name(P, name)) return 0;
    sd_jp_next(P);
    return 1;
}
static int sd_jp_expect_op(sd_jparser *P, int op) {
    if (sd_jp_skip_op(P, op)) return 0;
    char want[8] = {'\'', (char)op, '\'', 0};
    sd_jp_unexpected(P, want);
    return -1;
}
static int sd_jp_expect_k(sd_jparser *P, int k, const char *what) {
    if (sd_jp_cur(P)->k == k) {
        sd_jp_next(P);
        return 0;
    }
    sd_jp_unexpected(P, what);
    return -1;
}
static int sd_jp_expect_name(sd_jparser *P, const char *name) {
    if (sd_jp_skip_name(P, name)) return 0;
    char want[64];
    snprintf(want, sizeof want, "'%s'", name);
    sd_jp_unexpected(P, want);
    return -1;
}

/* ---- nodes ---------------------------------------------------------------------------------------- */
static sd_jnode *sd_jp_node(sd_jparser *P, int k, uint32_t nkids) {
    sd_jnode *n = sd_ja_alloc(P->a, sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->k = (uint8_t)k;
    n->line = sd_jp_cur(P)->line;
    n->n = nkids;
    if (nkids) {
        n->c = sd_ja_alloc(P->a, nkids * sizeof *n->c);
        if (!n->c) return NULL;
        memset(n->c, 0, nkids * sizeof *n->c);
    }
    return n;
}

/* A growable child list, turned into a node at the end. */
typedef struct sd_jp_list {
    sd_jnode **v;
    uint32_t n, cap;
} sd_jp_list;

static int sd_jp_add(sd_jparser *P, sd_jp_list *l, sd_jnode *x) {
    if (!x) return -1;
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? 2 * l->cap : 8;
        sd_jnode **v = sd_ja_alloc(P->a, cap * sizeof *v);
        if (!v) return -1;
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

static sd_jnode *sd_jp_from_list(sd_jparser *P, int k, const sd_jp_list *l, uint32_t extra_front) {
    sd_jnode *n = sd_jp_node(P, k, l->n + extra_front);
    if (n && l->n) memcpy(n->c + extra_front, l->v, l->n * sizeof *n->c);
    return n;
}

static sd_jnode *sd_jp_name_node(sd_jparser *P, int k, const sd_jtok *t) {
    sd_jnode *n = sd_jp_node(P, k, 0);
    if (!n) return NULL;
    n->s = t->p;
    n->sn = t->n;
    n->line = t->line;
    return n;
}

static int sd_jp_enter(sd_jparser *P) {
    if (++P->depth > SD_JP_MAX_DEPTH) {
        sd_jp_fail(P, "template nested deeper than %s levels", "200");
        return -1;
    }
    return 0;
}

/* ---- expressions ---------------------------------------------------------------------------------- */
static sd_jnode *sd_jp_expression(sd_jparser *P, int with_condexpr);
static sd_jnode *sd_jp_unary(sd_jparser *P, int with_filter);
static sd_jnode *sd_jp_postfix(sd_jparser *P, sd_jnode *node);
static sd_jnode *sd_jp_primary(sd_jparser *P);

/* Tuple end: '}}', '%}', ')', or one of the extra names (NULL-terminated list). */
static int sd_jp_tuple_end(const sd_jparser *P, const char *const *extra) {
    const sd_jtok *t = sd_jp_cur(P);
    if (t->k == SD_JK_VAR_END || t->k == SD_JK_BLOCK_END || t->k == SD_JK_EOF || sd_jp_is_op(P, ')')) return 1;
    for (; extra && *extra; extra++)
        if (sd_jp_is_name(P, *extra)) return 1;
    return 0;
}

/* jinja2's parse_tuple: one expression, or a tuple when commas follow. mode: 0 with conditional
 * expressions, 1 without, 2 "simplified" (primaries only, for assignment targets). */
static sd_jnode *sd_jp_tuple(sd_jparser *P, int mode, const char *const *extra, int explicit_parens) {
    sd_jp_list l = {0};
    int is_tuple = 0;
    for (;;) {
        if (l.n && sd_jp_expect_op(P, ',')) return NULL;
        if (sd_jp_tuple_end(P, extra)) break;
        sd_jnode *e = mode == 2 ? sd_jp_primary(P) : sd_jp_expression(P, mode == 0);
        if (sd_jp_add(P, &l, e)) return NULL;
        if (sd_jp_is_op(P, ',')) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (l.n) return l.v[0];
        if (!explicit_parens) return sd_jp_unexpected(P, "an expression");
    }
    return sd_jp_from_list(P, SD_JN_TUPLE, &l, 0);
}

static sd_jnode *sd_jp_list_lit(sd_jparser *P) {
    sd_jp_list l = {0};
    sd_jp_next(P); /* [ */
    while (!sd_jp_is_op(P, ']')) {
        if (l.n && sd_jp_expect_op(P, ',')) return NULL;
        if (sd_jp_is_op(P, ']')) break;
        if (sd_jp_add(P, &l, sd_jp_expression(P, 1))) return NULL;
    }
    if (sd_jp_expect_op(P, ']')) return NULL;
    return sd_jp_from_list(P, SD_JN_LIST, &l, 0);
}

static sd_jnode *sd_jp_dict_lit(sd_jparser *P) {
    sd_jp_list l = {0};
    sd_jp_next(P); /* { */
    while (!sd_jp_is_op(P, '}')) {
        if (l.n && sd_jp_expect_op(P, ',')) return NULL;
        if (sd_jp_is_op(P, '}')) break;
        if (sd_jp_add(P, &l, sd_jp_expression(P, 1))) return NULL;
        if (sd_jp_expect_op(P, ':')) return NULL;
        if (sd_jp_add(P, &l, sd_jp_expression(P, 1))) return NULL;
    }
    if (sd_jp_expect_op(P, '}')) return NULL;
    return sd_jp_from_list(P, SD_JN_DICT, &l, 0);
}

static sd_jnode *sd_jp_const(sd_jparser *P, int type) {
    sd_jnode *n = sd_jp_node(P, SD_JN_CONST, 0);
    if (n) n->op = (uint8_t)type;
    return n;
}

static int sd_jp_name_eq(const sd_jtok *t, const char *s) { return t->n == strlen(s) && !memcmp(t->p, s, t->n); }

/* Adjacent string literals concatenate ("a" "b"). */
static sd_jnode *sd_jp_string(sd_jparser *P) {
    size_t total = 0, j = P->i;
    for (; j < P->nt && P->t[j].k == SD_JK_STRING; j++) total += P->t[j].n;
    sd_jnode *n = sd_jp_const(P, SD_JT_STR);
    if (!n) return NULL;
    if (j == P->i + 1) {
        n->s = P->t[P->i].p;
        n->sn = P->t[P->i].n;
    } else {
        char *s = sd_ja_alloc(P->a, total + 1);
        if (!s) return NULL;
        size_t o = 0;
        for (size_t k = P->i; k < j; k++) {
            memcpy(s + o, P->t[k].p, P->t[k].n);
            o += P->t[k].n;
        }
        n->s = s;
        n->sn = total;
    }
    P->i = j;
    return n;
}

static sd_jnode *sd_jp_primary(sd_jparser *P) {
    const sd_jtok *t = sd_jp_cur(P);
    sd_jnode *n;
    if (sd_jp_enter(P)) return NULL;
    switch (t->k) {
    case SD_JK_NAME:
        if (sd_jp_name_eq(t, "true") || sd_jp_name_eq(t, "True") || sd_jp_name_eq(t, "false") || sd_jp_name_eq(t, "False")) {
            if ((n = sd_jp_const(P, SD_JT_BOOL))) n->i = t->p[0] == 't' || t->p[0] == 'T';
        } else if (sd_jp_name_eq(t, "none") || sd_jp_name_eq(t, "None")) {
            n = sd_jp_const(P, SD_JT_NONE);
        } else {
            if (sd_jp_name_eq(t, "cycler") || sd_jp_name_eq(t, "joiner") || sd_jp_name_eq(t, "lipsum"))
                return sd_jp_fail(P, "the global '%s' is not supported", t->p[0] == 'c' ? "cycler" : t->p[0] == 'j' ? "joiner" : "lipsum");
            n = sd_jp_name_node(P, SD_JN_NAME, t);
        }
        sd_jp_next(P);
        break;
    case SD_JK_STRING: n = sd_jp_string(P); break;
    case SD_JK_INT:
    case SD_JK_FLOAT:
        if ((n = sd_jp_const(P, t->k == SD_JK_INT ? SD_JT_INT : SD_JT_FLOAT))) {
            n->i = t->i;
            n->f = t->f;
        }
        sd_jp_next(P);
        break;
    case SD_JK_OP:
        if (t->op == '(') {
            sd_jp_next(P);
            n = sd_jp_tuple(P, 0, NULL, 1);
            if (n && sd_jp_expect_op(P, ')')) n = NULL;
            break;
        }
        if (t->op == '[') { n = sd_jp_list_lit(P); break; }
        if (t->op == '{') { n = sd_jp_dict_lit(P); break; }
        /* fall through */
    default: n = sd_jp_unexpected(P, "an expression");
    }
    P->depth--;
    return n;
}

/* Call arguments after '(' up to ')': positional expressions then name=value. Appends to l. */
static int sd_jp_call_args(sd_jparser *P, sd_jp_list *l) {
    int kw = 0;
    uint32_t first = l->n;
    if (sd_jp_expect_op(P, '(')) return -1;
    while (!sd_jp_is_op(P, ')')) {
        if (l->n > first && sd_jp_expect_op(P, ',')) return -1;
        if (sd_jp_is_op(P, ')')) break;
        if (sd_jp_is_op(P, '*') || sd_jp_is_op(P, SD_JK_POW)) {
            sd_jp_fail(P, "*args / **kwargs in a call are not supported%s", "");
            return -1;
        }
        const sd_jtok *t = sd_jp_cur(P);
        if (t->k == SD_JK_NAME && sd_jp_look(P)->k == SD_JK_OP && sd_jp_look(P)->op == '=') {
            sd_jnode *k = sd_jp_name_node(P, SD_JN_KW, t);
            if (!k || !(k->c = sd_ja_alloc(P->a, sizeof *k->c))) return -1;
            k->n = 1;
            sd_jp_next(P);
            sd_jp_next(P);
            if (!(k->c[0] = sd_jp_expression(P, 1))) return -1;
            if (sd_jp_add(P, l, k)) return -1;
            kw = 1;
        } else {
            if (kw) {
                sd_jp_fail(P, "syntax error: a positional argument after a keyword argument%s", "");
                return -1;
            }
            if (sd_jp_add(P, l, sd_jp_expression(P, 1))) return -1;
        }
    }
    return sd_jp_expect_op(P, ')');
}

static sd_jnode *sd_jp_call(sd_jparser *P, sd_jnode *callee) {
    sd_jp_list l = {0};
    if (sd_jp_add(P, &l, callee) || sd_jp_call_args(P, &l)) return NULL;
    return sd_jp_from_list(P, SD_JN_CALL, &l, 0);
}

/* jinja2's parse_subscribed: an expression or a slice [a]:[b][:[c]]. */
static sd_jnode *sd_jp_subscribed(sd_jparser *P) {
    sd_jnode *parts[3] = {NULL, NULL, NULL};
    if (!sd_jp_is_op(P, ':')) {
        sd_jnode *e = sd_jp_expression(P, 1);
        if (!e || !sd_jp_is_op(P, ':')) return e;
        parts[0] = e;
    }
    sd_jp_next(P); /* : */
    if (!sd_jp_is_op(P, ']') && !sd_jp_is_op(P, ',') && !sd_jp_is_op(P, ':')) {
        if (!(parts[1] = sd_jp_expression(P, 1))) return NULL;
    }
    if (sd_jp_skip_op(P, ':') && !sd_jp_is_op(P, ']') && !sd_jp_is_op(P, ',')) {
        if (!(parts[2] = sd_jp_expression(P, 1))) return NULL;
    }
    sd_jnode *s = sd_jp_node(P, SD_JN_SLICE, 3);
    if (s) memcpy(s->c, parts, sizeof parts);
    return s;
}

static sd_jnode *sd_jp_subscript(sd_jparser *P, sd_jnode *obj) {
    if (sd_jp_skip_op(P, '.')) {
        const sd_jtok *t = sd_jp_cur(P);
        if (t->k == SD_JK_NAME) {
            sd_jnode *n = sd_jp_node(P, SD_JN_GETATTR, 1);
            if (!n) return NULL;
            n->c[0] = obj;
            n->s = t->p;
            n->sn = t->n;
            sd_jp_next(P);
            return n;
        }
        if (t->k != SD_JK_INT) return sd_jp_unexpected(P, "a name or a number after '.'");
        sd_jnode *n = sd_jp_node(P, SD_JN_GETITEM, 2), *k = sd_jp_const(P, SD_JT_INT);
        if (!n || !k) return NULL;
        k->i = t->i;
        n->c[0] = obj;
        n->c[1] = k;
        sd_jp_next(P);
        return n;
    }
    sd_jp_next(P); /* [ */
    sd_jp_list l = {0};
    while (!sd_jp_is_op(P, ']')) {
        if (l.n && sd_jp_expect_op(P, ',')) return NULL;
        if (sd_jp_add(P, &l, sd_jp_subscribed(P))) return NULL;
    }
    if (sd_jp_expect_op(P, ']')) return NULL;
    if (!l.n) return sd_jp_unexpected(P, "a subscript");
    sd_jnode *key = l.n == 1 ? l.v[0] : sd_jp_from_list(P, SD_JN_TUPLE, &l, 0);
    sd_jnode *n = sd_jp_node(P, SD_JN_GETITEM, 2);
    if (!n || !key) return NULL;
    n->c[0] = obj;
    n->c[1] = key;
    return n;
}

static sd_jnode *sd_jp_postfix(sd_jparser *P, sd_jnode *node) {
    while (node) {
        if (sd_jp_is_op(P, '.') || sd_jp_is_op(P, '[')) node = sd_jp_subscript(P, node);
        else if (sd_jp_is_op(P, '(')) node = sd_jp_call(P, node);
        else break;
    }
    return node;
}

/* name after '|' or 'is': its id (filter: 1, test: 0) or a refusal. */
static sd_jnode *sd_jp_named(sd_jparser *P, int k, sd_jnode *operand) {
    const sd_jtok *t = sd_jp_cur(P);
    if (t->k != SD_JK_NAME) return sd_jp_unexpected(P, k == SD_JN_FILTER ? "a filter name" : "a test name");
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(t->n < 60 ? t->n : 60), t->p);
    int id = k == SD_JN_FILTER ? sd_jfilter_id(t->p, t->n) : sd_jtest_id(t->p, t->n);
    if (id < 0) return sd_jp_fail(P, k == SD_JN_FILTER ? "the filter '%s' is not supported" : "the test '%s' is not supported", name);
    sd_jnode *n = sd_jp_name_node(P, k, t);
    if (!n) return NULL;
    n->op = (uint8_t)id;
    sd_jp_next(P);
    if (sd_jp_is_op(P, '.')) return sd_jp_fail(P, "dotted filter/test names ('%s.') are not supported", name);
    sd_jp_list l = {0};
    if (sd_jp_add(P, &l, operand ? operand : sd_jp_node(P, SD_JN_BODY, 0))) return NULL;
    if (!operand) l.v[0] = NULL;
    if (sd_jp_is_op(P, '(')) {
        if (sd_jp_call_args(P, &l)) return NULL;
    } else if (k == SD_JN_TEST) { /* one argument without parentheses: "x is divisibleby 3" */
        const sd_jtok *a = sd_jp_cur(P);
        int starts = a->k == SD_JK_NAME || a->k == SD_JK_STRING || a->k == SD_JK_INT || a->k == SD_JK_FLOAT ||
                     (a->k == SD_JK_OP && (a->op == '(' || a->op == '[' || a->op == '{'));
        if (starts && !sd_jp_is_name(P, "else") && !sd_jp_is_name(P, "or") && !sd_jp_is_name(P, "and")) {
            if (sd_jp_is_name(P, "is")) return sd_jp_fail(P, "syntax error: tests cannot be chained with 'is'%s", "");
            if (sd_jp_add(P, &l, sd_jp_postfix(P, sd_jp_primary(P)))) return NULL;
        }
    }
    sd_jnode *r = sd_jp_from_list(P, k, &l, 0);
    if (r) {
        r->op = n->op;
        r->s = n->s;
        r->sn = n->sn;
        r->line = n->line;
    }
    return r;
}

static sd_jnode *sd_jp_filter_expr(sd_jparser *P, sd_jnode *node) {
    while (node) {
        if (sd_jp_skip_op(P, '|')) {
            node = sd_jp_named(P, SD_JN_FILTER, node);
        } else if (sd_jp_skip_name(P, "is")) {
            int neg = sd_jp_skip_name(P, "not");
            node = sd_jp_named(P, SD_JN_TEST, node);
            if (node && neg) {
                sd_jnode *n = sd_jp_node(P, SD_JN_NOT, 1);
                if (n) n->c[0] = node;
                node = n;
            }
        } else if (sd_jp_is_op(P, '(')) {
            node = sd_jp_call(P, node);
        } else {
            break;
        }
    }
    return node;
}

static sd_jnode *sd_jp_unary(sd_jparser *P, int with_filter) {
    sd_jnode *node;
    if (sd_jp_enter(P)) return NULL;
    if (sd_jp_is_op(P, '-') || sd_jp_is_op(P, '+')) {
        int neg = sd_jp_is_op(P, '-');
        sd_jp_next(P);
        node = sd_jp_node(P, neg ? SD_JN_NEG : SD_JN_POS, 1);
        if (node && !(node->c[0] = sd_jp_unary(P, 0))) node = NULL;
    } else {
        node = sd_jp_primary(P);
    }
    node = sd_jp_postfix(P, node);
    if (with_filter) node = sd_jp_filter_expr(P, node);
    P->depth--;
    return node;
}

static sd_jnode *sd_jp_bin(sd_jparser *P, int k, int op, sd_jnode *l, sd_jnode *r) {
    if (!l || !r) return NULL;
    sd_jnode *n = sd_jp_node(P, k, 2);
    if (!n) return NULL;
    n->op = (uint8_t)op;
    n->c[0] = l;
    n->c[1] = r;
    return n;
}

static sd_jnode *sd_jp_pow(sd_jparser *P) {
    sd_jnode *l = sd_jp_unary(P, 1);
    while (l && sd_jp_skip_op(P, SD_JK_POW)) l = sd_jp_bin(P, SD_JN_BIN, SD_JOP_POW, l, sd_jp_unary(P, 1));
    return l;
}

static sd_jnode *sd_jp_math2(sd_jparser *P) {
    sd_jnode *l = sd_jp_pow(P);
    for (;;) {
        int op = sd_jp_is_op(P, '*') ? SD_JOP_MUL : sd_jp_is_op(P, '/') ? SD_JOP_DIV
               : sd_jp_is_op(P, SD_JK_FLOORDIV) ? SD_JOP_FLOORDIV : sd_jp_is_op(P, '%') ? SD_JOP_MOD : -1;
        if (!l || op < 0) return l;
        sd_jp_next(P);
        l = sd_jp_bin(P, SD_JN_BIN, op, l, sd_jp_pow(P));
    }
}

static sd_jnode *sd_jp_concat(sd_jparser *P) {
    sd_jp_list l = {0};
    if (sd_jp_add(P, &l, sd_jp_math2(P))) return NULL;
    while (sd_jp_skip_op(P, '~'))
        if (sd_jp_add(P, &l, sd_jp_math2(P))) return NULL;
    return l.n == 1 ? l.v[0] : sd_jp_from_list(P, SD_JN_CONCAT, &l, 0);
}

static sd_jnode *sd_jp_math1(sd_jparser *P) {
    sd_jnode *l = sd_jp_concat(P);
    for (;;) {
        int op = sd_jp_is_op(P, '+') ? SD_JOP_ADD : sd_jp_is_op(P, '-') ? SD_JOP_SUB : -1;
        if (!l || op < 0) return l;
        sd_jp_next(P);
        l = sd_jp_bin(P, SD_JN_BIN, op, l, sd_jp_concat(P));
    }
}

static sd_jnode *sd_jp_compare(sd_jparser *P) {
    sd_jnode *first = sd_jp_math1(P);
    if (!first) return NULL;
    sd_jp_list l = {0};
    for (;;) {
        const sd_jtok *t = sd_jp_cur(P);
        int op = -1;
        if (t->k == SD_JK_OP) {
            op = t->op == SD_JK_EQ ? SD_JCMP_EQ : t->op == SD_JK_NE ? SD_JCMP_NE : t->op == '<' ? SD_JCMP_LT
               : t->op == SD_JK_LE ? SD_JCMP_LE : t->op == '>' ? SD_JCMP_GT : t->op == SD_JK_GE ? SD_JCMP_GE : -1;
            if (op >= 0) sd_jp_next(P);
        } else if (sd_jp_skip_name(P, "in")) {
            op = SD_JCMP_IN;
        } else if (sd_jp_is_name(P, "not") && sd_jp_look(P)->k == SD_JK_NAME && sd_jp_name_eq(sd_jp_look(P), "in")) {
            sd_jp_next(P);
            sd_jp_next(P);
            op = SD_JCMP_NOTIN;
        }
        if (op < 0) break;
        sd_jnode *o = sd_jp_node(P, SD_JN_OPERAND, 1);
        if (!o || !(o->c[0] = sd_jp_math1(P))) return NULL;
        o->op = (uint8_t)op;
        if (sd_jp_add(P, &l, o)) return NULL;
    }
    if (!l.n) return first;
    sd_jnode *n = sd_jp_from_list(P, SD_JN_COMPARE, &l, 1);
    if (n) n->c[0] = first;
    return n;
}

static sd_jnode *sd_jp_not(sd_jparser *P) {
    if (sd_jp_is_name(P, "not")) {
        if (sd_jp_enter(P)) return NULL;
        sd_jp_next(P);
        sd_jnode *n = sd_jp_node(P, SD_JN_NOT, 1);
        if (n && !(n->c[0] = sd_jp_not(P))) n = NULL;
        P->depth--;
        return n;
    }
    return sd_jp_compare(P);
}

static sd_jnode *sd_jp_and(sd_jparser *P) {
    sd_jnode *l = sd_jp_not(P);
    while (l && sd_jp_skip_name(P, "and")) l = sd_jp_bin(P, SD_JN_AND, 0, l, sd_jp_not(P));
    return l;
}

static sd_jnode *sd_jp_or(sd_jparser *P) {
    sd_jnode *l = sd_jp_and(P);
    while (l && sd_jp_skip_name(P, "or")) l = sd_jp_bin(P, SD_JN_OR, 0, l, sd_jp_and(P));
    return l;
}

static sd_jnode *sd_jp_condexpr(sd_jparser *P) {
    sd_jnode *e1 = sd_jp_or(P);
    while (e1 && sd_jp_skip_name(P, "if")) {
        if (sd_jp_enter(P)) return NULL;
        sd_jnode *n = sd_jp_node(P, SD_JN_COND, 3);
        if (!n || !(n->c[0] = sd_jp_or(P))) return NULL;
        n->c[1] = e1;
        if (sd_jp_skip_name(P, "else") && !(n->c[2] = sd_jp_condexpr(P))) return NULL;
        e1 = n;
        P->depth--;
    }
    return e1;
}

static sd_jnode *sd_jp_expression(sd_jparser *P, int with_condexpr) {
    return with_condexpr ? sd_jp_condexpr(P) : sd_jp_or(P);
}

/* ---- statements ---------------------------------------------------------------------------------- */
static sd_jnode *sd_jp_body(sd_jparser *P, const char *const *ends);

static int sd_jp_block_end(sd_jparser *P) { return sd_jp_expect_k(P, SD_JK_BLOCK_END, "end of statement block ('%}')"); }

/* Assignment target: a name, names separated by commas (optionally in parentheses), or with
 * with_ns a namespace attribute (ns.attr). */
static sd_jnode *sd_jp_target(sd_jparser *P, int with_ns, const char *const *extra) {
    if (with_ns && sd_jp_cur(P)->k == SD_JK_NAME && sd_jp_look(P)->k == SD_JK_OP && sd_jp_look(P)->op == '.') {
        const sd_jtok *ns = sd_jp_cur(P);
        sd_jp_next(P);
        sd_jp_next(P);
        const sd_jtok *attr = sd_jp_cur(P);
        if (attr->k != SD_JK_NAME) return sd_jp_unexpected(P, "an attribute name");
        sd_jnode *n = sd_jp_name_node(P, SD_JN_NSREF, ns), *a = sd_jp_const(P, SD_JT_STR);
        if (!n || !a || !(n->c = sd_ja_alloc(P->a, sizeof *n->c))) return NULL;
        a->s = attr->p;
        a->sn = attr->n;
        n->n = 1;
        n->c[0] = a;
        sd_jp_next(P);
        return n;
    }
    sd_jnode *t = sd_jp_tuple(P, 2, extra, 0);
    if (!t) return NULL;
    if (t->k == SD_JN_NAME) return t;
    if (t->k == SD_JN_TUPLE) {
        for (uint32_t k = 0; k < t->n; k++)
            if (t->c[k]->k != SD_JN_NAME) return sd_jp_fail(P, "syntax error: cannot assign to %s", "this expression");
        return t;
    }
    return sd_jp_fail(P, "syntax error: cannot assign to %s", "this expression");
}

/* Does the subtree read the name s (for a macro's varargs/kwargs/caller)? */
static int sd_jp_reads(const sd_jnode *n, const char *s) {
    if (!n) return 0;
    if (n->k == SD_JN_NAME && n->sn == strlen(s) && !memcmp(n->s, s, n->sn)) return 1;
    if (n->k == SD_JN_MACRO) return 0; /* a nested macro has its own */
    for (uint32_t k = 0; k < n->n; k++)
        if (sd_jp_reads(n->c[k], s)) return 1;
    return 0;
}

static int sd_jp_defines_macro(const sd_jnode *n) {
    if (!n) return 0;
    if (n->k == SD_JN_MACRO) return 1;
    for (uint32_t k = 0; k < n->n; k++)
        if (sd_jp_defines_macro(n->c[k])) return 1;
    return 0;
}

static int sd_jp_macro_flags(const sd_jnode *body) {
    return (sd_jp_reads(body, "varargs") ? SD_JM_VARARGS : 0) | (sd_jp_reads(body, "kwargs") ? SD_JM_KWARGS : 0) |
           (sd_jp_reads(body, "caller") ? SD_JM_CALLER : 0);
}

/* "(a, b=default, ...)" into l as PARAM nodes. */
static int sd_jp_params(sd_jparser *P, sd_jp_list *l) {
    if (sd_jp_expect_op(P, '(')) return -1;
    while (!sd_jp_is_op(P, ')')) {
        if (l->n && sd_jp_expect_op(P, ',')) return -1;
        const sd_jtok *t = sd_jp_cur(P);
        if (t->k != SD_JK_NAME) {
            sd_jp_unexpected(P, "a parameter name");
            return -1;
        }
        sd_jnode *p = sd_jp_name_node(P, SD_JN_PARAM, t);
        if (!p || !(p->c = sd_ja_alloc(P->a, sizeof *p->c))) return -1;
        p->n = 1;
        p->c[0] = NULL;
        sd_jp_next(P);
        if (sd_jp_skip_op(P, '=') && !(p->c[0] = sd_jp_expression(P, 1))) return -1;
        if (sd_jp_add(P, l, p)) return -1;
    }
    return sd_jp_expect_op(P, ')');
}

/* End the statement whose closing tag is name ("endfor", ...): expects name and '%}'. */
static int sd_jp_end_tag(sd_jparser *P, const char *name) {
    if (sd_jp_expect_name(P, name)) return -1;
    return sd_jp_block_end(P);
}

static sd_jnode *sd_jp_for(sd_jparser *P) {
    static const char *const in_end[] = {"in", NULL}, *const rec_end[] = {"recursive", NULL};
    static const char *const body_end[] = {"endfor", "else", NULL}, *const else_end[] = {"endfor", NULL};
    sd_jnode *n = sd_jp_node(P, SD_JN_FOR, 5);
    if (!n || !(n->c[0] = sd_jp_target(P, 0, in_end)) || sd_jp_expect_name(P, "in")) return NULL;
    if (!(n->c[1] = sd_jp_tuple(P, 1, rec_end, 0))) return NULL;
    if (sd_jp_skip_name(P, "if") && !(n->c[2] = sd_jp_expression(P, 1))) return NULL;
    if (sd_jp_is_name(P, "recursive")) return sd_jp_fail(P, "recursive for loops are not supported%s", "");
    if (sd_jp_block_end(P)) return NULL;
    P->loops++;
    n->c[3] = sd_jp_body(P, body_end);
    P->loops--;
    if (!n->c[3]) return NULL;
    if (sd_jp_skip_name(P, "else")) {
        if (sd_jp_block_end(P) || !(n->c[4] = sd_jp_body(P, else_end))) return NULL;
    }
    n->i = sd_jp_defines_macro(n->c[3]); /* a macro may outlive its iteration's scope */
    return sd_jp_end_tag(P, "endfor") ? NULL : n;
}

static sd_jnode *sd_jp_if(sd_jparser *P) {
    static const char *const ends[] = {"elif", "else", "endif", NULL}, *const else_end[] = {"endif", NULL};
    sd_jnode *n = sd_jp_node(P, SD_JN_IF, 3), *top = n;
    if (!n) return NULL;
    for (;;) {
        if (!(n->c[0] = sd_jp_tuple(P, 1, NULL, 0)) || sd_jp_block_end(P) || !(n->c[1] = sd_jp_body(P, ends))) return NULL;
        if (sd_jp_skip_name(P, "elif")) {
            if (!(n->c[2] = sd_jp_node(P, SD_JN_IF, 3))) return NULL;
            n = n->c[2];
            continue;
        }
        if (sd_jp_skip_name(P, "else") && (sd_jp_block_end(P) || !(n->c[2] = sd_jp_body(P, else_end)))) return NULL;
        return sd_jp_end_tag(P, "endif") ? NULL : top;
    }
}

/* Filter chain after a '|' or the filter tag: FILTER nodes, the innermost operand NULL. */
static sd_jnode *sd_jp_filter_chain(sd_jparser *P) {
    sd_jnode *f = sd_jp_named(P, SD_JN_FILTER, NULL);
    while (f && sd_jp_skip_op(P, '|')) f = sd_jp_named(P, SD_JN_FILTER, f);
    return f;
}

static sd_jnode *sd_jp_set(sd_jparser *P) {
    static const char *const ends[] = {"endset", NULL};
    sd_jnode *target = sd_jp_target(P, 1, NULL);
    if (!target) return NULL;
    if (sd_jp_skip_op(P, '=')) {
        sd_jnode *n = sd_jp_node(P, SD_JN_SET, 2);
        if (!n || !(n->c[1] = sd_jp_tuple(P, 0, NULL, 0)) || sd_jp_block_end(P)) return NULL;
        n->c[0] = target;
        return n;
    }
    sd_jnode *n = sd_jp_node(P, SD_JN_SETBLOCK, 3);
    if (!n) return NULL;
    n->c[0] = target;
    if (sd_jp_skip_op(P, '|') && !(n->c[2] = sd_jp_filter_chain(P))) return NULL;
    if (sd_jp_block_end(P) || !(n->c[1] = sd_jp_body(P, ends))) return NULL;
    return sd_jp_end_tag(P, "endset") ? NULL : n;
}

static sd_jnode *sd_jp_macro(sd_jparser *P) {
    static const char *const ends[] = {"endmacro", NULL};
    const sd_jtok *name = sd_jp_cur(P);
    if (name->k != SD_JK_NAME) return sd_jp_unexpected(P, "a macro name");
    sd_jp_next(P);
    sd_jp_list l = {0};
    if (sd_jp_params(P, &l) || sd_jp_block_end(P)) return NULL;
    int loops = P->loops;
    P->loops = 0;
    P->macros++;
    sd_jnode *body = sd_jp_body(P, ends);
    P->macros--;
    P->loops = loops;
    if (!body || sd_jp_end_tag(P, "endmacro")) return NULL;
    sd_jnode *n = sd_jp_from_list(P, SD_JN_MACRO, &l, 1);
    if (!n) return NULL;
    n->c[0] = body;
    n->s = name->p;
    n->sn = name->n;
    n->i = sd_jp_macro_flags(body);
    return n;
}

static sd_jnode *sd_jp_callblock(sd_jparser *P) {
    static const char *const ends[] = {"endcall", NULL};
    sd_jp_list l = {0};
    if (sd_jp_is_op(P, '(') && sd_jp_params(P, &l)) return NULL;
    sd_jnode *call = sd_jp_expression(P, 1);
    if (!call) return NULL;
    if (call->k != SD_JN_CALL) return sd_jp_fail(P, "syntax error: expected a call after 'call'%s", "");
    if (sd_jp_block_end(P)) return NULL;
    int loops = P->loops;
    P->loops = 0;
    sd_jnode *body = sd_jp_body(P, ends);
    P->loops = loops;
    if (!body || sd_jp_end_tag(P, "endcall")) return NULL;
    sd_jnode *n = sd_jp_from_list(P, SD_JN_CALLBLOCK, &l, 2);
    if (!n) return NULL;
    n->c[0] = call;
    n->c[1] = body;
    n->i = sd_jp_macro_flags(body);
    return n;
}

static sd_jnode *sd_jp_statement(sd_jparser *P) {
    static const char *const gen_end[] = {"endgeneration", NULL}, *const filt_end[] = {"endfilter", NULL};
    static const char *const refused[] = {"include", "import", "from", "extends", "block", "with", "autoescape", "do",
                                          "trans", "pluralize", NULL};
    const sd_jtok *t = sd_jp_cur(P);
    if (t->k != SD_JK_NAME) return sd_jp_unexpected(P, "a statement name");
    char name[48];
    snprintf(name, sizeof name, "%.*s", (int)(t->n < 40 ? t->n : 40), t->p);
    sd_jp_next(P);
    if (!strcmp(name, "for")) return sd_jp_for(P);
    if (!strcmp(name, "if")) return sd_jp_if(P);
    if (!strcmp(name, "set")) return sd_jp_set(P);
    if (!strcmp(name, "macro")) return sd_jp_macro(P);
    if (!strcmp(name, "call")) return sd_jp_callblock(P);
    if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        if (!P->loops) return sd_jp_fail(P, "syntax error: '%s' outside of a loop", name);
        sd_jnode *n = sd_jp_node(P, name[0] == 'b' ? SD_JN_BREAK : SD_JN_CONTINUE, 0);
        return n && !sd_jp_block_end(P) ? n : NULL;
    }
    if (!strcmp(name, "print")) {
        sd_jnode *n = sd_jp_node(P, SD_JN_OUTPUT, 1);
        if (!n || !(n->c[0] = sd_jp_tuple(P, 0, NULL, 0)) || sd_jp_block_end(P)) return NULL;
        return n;
    }
    if (!strcmp(name, "generation")) { /* transformers' AssistantTracker: renders its body */
        sd_jnode *b;
        if (sd_jp_block_end(P) || !(b = sd_jp_body(P, gen_end)) || sd_jp_end_tag(P, "endgeneration")) return NULL;
        return b;
    }
    if (!strcmp(name, "filter")) {
        sd_jnode *n = sd_jp_node(P, SD_JN_FILTERBLOCK, 2);
        if (!n || !(n->c[0] = sd_jp_filter_chain(P)) || sd_jp_block_end(P) || !(n->c[1] = sd_jp_body(P, filt_end)) ||
            sd_jp_end_tag(P, "endfilter"))
            return NULL;
        return n;
    }
    for (const char *const *r = refused; *r; r++)
        if (!strcmp(name, *r)) return sd_jp_fail(P, "the tag '{%% %s %%}' is not supported", name);
    return sd_jp_fail(P, "syntax error: unknown or unexpected tag '%s'", name);
}

/* Statements up to one of the end names (then the current token is that name, its '{%'
 * consumed) or, with ends NULL, the end of the template. */
static sd_jnode *sd_jp_body(sd_jparser *P, const char *const *ends) {
    sd_jp_list l = {0};
    if (sd_jp_enter(P)) return NULL;
    for (;;) {
        const sd_jtok *t = sd_jp_cur(P);
        sd_jnode *n = NULL;
        if (t->k == SD_JK_EOF) {
            if (ends) {
                char want[80];
                snprintf(want, sizeof want, "unexpected end of template, expected '%s'", ends[0]);
                return sd_jp_fail(P, "syntax error: %s", want);
            }
            break;
        }
        if (t->k == SD_JK_DATA) {
            if ((n = sd_jp_node(P, SD_JN_TEXT, 0))) {
                n->s = t->p;
                n->sn = t->n;
            }
            sd_jp_next(P);
        } else if (t->k == SD_JK_VAR_BEGIN) {
            sd_jp_next(P);
            if ((n = sd_jp_node(P, SD_JN_OUTPUT, 1)) && (!(n->c[0] = sd_jp_tuple(P, 0, NULL, 0)) ||
                                                          sd_jp_expect_k(P, SD_JK_VAR_END, "end of print statement ('}}')")))
                n = NULL;
        } else if (t->k == SD_JK_BLOCK_BEGIN) {
            sd_jp_next(P);
            int at_end = 0;
            for (const char *const *e = ends; e && *e && !at_end; e++) at_end = sd_jp_is_name(P, *e);
            if (at_end) break;
            n = sd_jp_statement(P);
        } else {
            return sd_jp_unexpected(P, "template data or a tag");
        }
        if (sd_jp_add(P, &l, n)) return NULL;
    }
    P->depth--;
    return sd_jp_from_list(P, SD_JN_BODY, &l, 0);
}

specdec_status sd_jinja_parse(const char *src, size_t n, sd_jinja_tmpl **out) {
    *out = NULL;
    if (!sd_utf8_valid((const unsigned char *)src, n))
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "chat template: the text is not valid UTF-8");
    if (memchr(src, '\0', n)) return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "chat template: the text holds a NUL byte");
    sd_jinja_tmpl *t = sd_calloc(1, sizeof *t);
    if (!t) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory");
    sd_jparser P = {0};
    P.a = &t->arena;
    sd_jtok *toks = NULL;
    size_t nt = 0;
    specdec_status st = SPECDEC_OK;
    if (sd_jlex(&t->arena, src, n, &toks, &nt, P.err, sizeof P.err)) {
        st = t->arena.fail ? SPECDEC_ERR_OUT_OF_MEMORY : SPECDEC_ERR_UNSUPPORTED;
    } else {
        P.t = toks;
        P.nt = nt;
        t->root = sd_jp_body(&P, NULL);
        if (!t->root) st = P.failed ? SPECDEC_ERR_UNSUPPORTED : SPECDEC_ERR_OUT_OF_MEMORY;
    }
    sd_free(toks);
    if (st) {
        sd_jinja_free(t);
        return st == SPECDEC_ERR_OUT_OF_MEMORY ? sd_fail(NULL, st, "chat template: out of memory parsing it")
                                               : sd_fail(NULL, st, "chat template: %s", P.err);
    }
    *out = t;
    return SPECDEC_OK;
}

void sd_jinja_free(sd_jinja_tmpl *t) {
    if (!t) return;
    sd_ja_free(&t->arena);
    sd_free(t);
}

/* sd_jinja_int.h — internals shared by the sd_jinja_*.c files (see sd_jinja.h). */
#ifndef SD_JINJA_INT_H
#define SD_JINJA_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "sd_error.h"
#include "sd_jinja.h"

/* ---- arena: every render value, and the AST, live in one; freed at once -------------------- */
typedef struct sd_jchunk sd_jchunk;
typedef struct sd_jarena {
    sd_jchunk *head;
    size_t used;  /* bytes taken from malloc, chunk headers included */
    size_t limit; /* 0 = none */
    int fail;     /* 1: the limit was reached, 2: malloc failed */
} sd_jarena;
void *sd_ja_alloc(sd_jarena *a, size_t n); /* 8-aligned; NULL with a->fail set */
void sd_ja_free(sd_jarena *a);

/* ---- AST ----------------------------------------------------------------------------------- */
enum {
    /* statements */
    SD_JN_BODY,        /* c[0..n): statements */
    SD_JN_TEXT,        /* s: template data */
    SD_JN_OUTPUT,      /* c[0]: expression to print */
    SD_JN_IF,          /* c[0] cond, c[1] body, c[2] else (BODY or IF) or NULL */
    SD_JN_FOR,         /* c[0] target, c[1] iterable, c[2] filter or NULL, c[3] body, c[4] else or NULL;
                        * i: the body defines a macro */
    SD_JN_SET,         /* c[0] target (NAME, TUPLE of NAMEs, NSREF), c[1] value */
    SD_JN_SETBLOCK,    /* c[0] target, c[1] body, c[2] filter chain or NULL */
    SD_JN_MACRO,       /* s name, c[0] body, c[1..) PARAM; i: SD_JM_* flags */
    SD_JN_CALLBLOCK,   /* c[0] CALL, c[1] body, c[2..) PARAM of the caller; i: SD_JM_* flags */
    SD_JN_FILTERBLOCK, /* c[0] filter chain (innermost operand NULL), c[1] body */
    SD_JN_BREAK,
    SD_JN_CONTINUE,
    /* expressions */
    SD_JN_CONST,   /* op: SD_JT_NONE/BOOL/INT/FLOAT/STR; i, f, s */
    SD_JN_NAME,    /* s */
    SD_JN_NSREF,   /* s namespace variable, c[0] CONST attribute name */
    SD_JN_LIST,    /* c[0..n) */
    SD_JN_TUPLE,   /* c[0..n) */
    SD_JN_DICT,    /* c[2k] key, c[2k+1] value */
    SD_JN_GETATTR, /* c[0] object, s attribute */
    SD_JN_GETITEM, /* c[0] object, c[1] key or SLICE */
    SD_JN_SLICE,   /* c[0] start, c[1] stop, c[2] step, each may be NULL */
    SD_JN_CALL,    /* c[0] callee, c[1..) arguments (expressions, then KW) */
    SD_JN_KW,      /* s name, c[0] value */
    SD_JN_FILTER,  /* op filter id, s name, c[0] operand (NULL: the block's text), c[1..) arguments */
    SD_JN_TEST,    /* op test id, s name, c[0] operand, c[1..) arguments */
    SD_JN_NOT,     /* c[0] */
    SD_JN_NEG,     /* c[0] */
    SD_JN_POS,     /* c[0] */
    SD_JN_BIN,     /* op SD_JOP_*, c[0], c[1] */
    SD_JN_AND,     /* c[0], c[1] */
    SD_JN_OR,      /* c[0], c[1] */
    SD_JN_CONCAT,  /* c[0..n): the ~ operator */
    SD_JN_COMPARE, /* c[0] first operand, c[1..) OPERAND */
    SD_JN_OPERAND, /* op SD_JCMP_*, c[0] */
    SD_JN_COND,    /* c[0] condition, c[1] value if true, c[2] value if false or NULL */
    SD_JN_PARAM    /* s name, c[0] default or NULL */
};

enum { SD_JOP_ADD, SD_JOP_SUB, SD_JOP_MUL, SD_JOP_DIV, SD_JOP_FLOORDIV, SD_JOP_MOD, SD_JOP_POW };
enum { SD_JCMP_EQ, SD_JCMP_NE, SD_JCMP_LT, SD_JCMP_LE, SD_JCMP_GT, SD_JCMP_GE, SD_JCMP_IN, SD_JCMP_NOTIN };
/* Macro flags: the body reads varargs / kwargs / caller (Jinja only then accepts extra arguments). */
enum { SD_JM_VARARGS = 1, SD_JM_KWARGS = 2, SD_JM_CALLER = 4 };

typedef struct sd_jnode {
    uint8_t k, op;
    int line;
    uint32_t n;
    struct sd_jnode **c;
    const char *s;
    size_t sn;
    int64_t i;
    double f;
} sd_jnode;

struct sd_jinja_tmpl {
    sd_jarena arena;
    sd_jnode *root;
};

/* ---- lexer (sd_jinja_lex.c) ------------------------------------------------------------------- */
enum {
    SD_JK_DATA, SD_JK_VAR_BEGIN, SD_JK_VAR_END, SD_JK_BLOCK_BEGIN, SD_JK_BLOCK_END, SD_JK_NAME, SD_JK_STRING,
    SD_JK_INT, SD_JK_FLOAT, SD_JK_OP, SD_JK_EOF
};
/* Operators: the token's op is the character, or one of these for two-character ones. */
enum { SD_JK_FLOORDIV = 1, SD_JK_POW, SD_JK_EQ, SD_JK_NE, SD_JK_LE, SD_JK_GE };

typedef struct sd_jtok {
    uint8_t k, op;
    int line;
    const char *p; /* text (NAME, DATA), decoded value (STRING) */
    size_t n;
    int64_t i;
    double f;
} sd_jtok;

/* Tokens of src[0..n) into *toks (sd_malloc'd, ends with EOF; the caller frees it). Text and
 * string values point into memory of the arena. 0, or -1 with the message in err (the line
 * included) / arena->fail set when out of memory. */
int sd_jlex(sd_jarena *arena, const char *src, size_t n, sd_jtok **toks, size_t *ntok, char *err, size_t errcap);

/* ---- values ------------------------------------------------------------------------------------- */
enum {
    SD_JT_UNDEF, SD_JT_NONE, SD_JT_BOOL, SD_JT_INT, SD_JT_FLOAT, SD_JT_STR, SD_JT_LIST, SD_JT_DICT, SD_JT_NS,
    SD_JT_MACRO, SD_JT_FUNC, SD_JT_METHOD, SD_JT_LOOP
};

/* Subtypes. SD_JT_LIST: a list, a tuple, an iterator (what jinja2's map/select/... and
 * reversed() return: always true, no len(), not JSON; iterating consumes it) or a view (range(),
 * dict.items()/keys()/values(): a len(), not JSON). SD_JT_STR: plain, or Markup (|safe, |escape:
 * "+" with a plain string HTML-escapes the other operand, as markupsafe does). */
enum { SD_JL_LIST, SD_JL_TUPLE, SD_JL_ITER, SD_JL_VIEW };
enum { SD_JS_PLAIN, SD_JS_MARKUP };

typedef struct sd_jv {
    uint8_t t;
    uint8_t sub; /* SD_JL_* for lists, SD_JS_* for strings */
    union {
        int64_t i; /* INT, BOOL (0/1), FUNC (id) */
        double f;
        struct {
            const char *p; /* STR: UTF-8 bytes (not NUL-terminated); UNDEF: hint for messages or NULL */
            size_t n;
        } s;
        struct sd_jlist *l;
        struct sd_jdict *d; /* DICT; NS (the only mutable value: {% set ns.x %}) */
        struct sd_jmacro *m;
        struct sd_jmethod *meth;
        struct sd_jloop *loop;
    } u;
} sd_jv;

typedef struct sd_jlist {
    size_t n;
    size_t pos; /* SD_JL_ITER: items before pos were consumed */
    sd_jv v[];
} sd_jlist;

typedef struct sd_jdict {
    size_t n, cap;
    sd_jv *k, *v;
} sd_jdict;

typedef struct sd_jscope {
    struct sd_jscope *parent;
    size_t n, cap;
    const char **name;
    size_t *nlen;
    sd_jv *val;
} sd_jscope;

typedef struct sd_jmacro {
    const sd_jnode *node; /* MACRO, or CALLBLOCK for caller() */
    sd_jscope *scope;     /* where it was defined (names are looked up there at call time) */
    struct sd_jmacro *caller; /* the caller() a CALLBLOCK passes to the macro it calls */
} sd_jmacro;

typedef struct sd_jmethod {
    sd_jv self;
    int id;
} sd_jmethod;

typedef struct sd_jloop {
    const sd_jv *items;
    size_t n, i;
    int changed_set;
    sd_jv changed_last;
} sd_jloop;

/* Evaluated call arguments: positional, then keyword. */
typedef struct sd_jargs {
    size_t n, nk;
    sd_jv *pos;
    const char **kname;
    size_t *klen;
    sd_jv *kv;
} sd_jargs;

typedef struct sd_jbuf {
    char *p;
    size_t n, cap;
} sd_jbuf;

typedef struct sd_jctx {
    sd_jarena a;
    sd_jinja_limits lim;
    uint64_t steps;
    size_t bytes;
    int depth;
    int line;
    sd_jbuf *out;
    sd_jscope *top;
    int64_t now;
    specdec_status st;
    int raised; /* msg is a raise_exception() message, verbatim */
    char msg[SD_ERRBUF_SIZE - 32];
} sd_jctx;

/* Errors: record the first one (status + message with the line) and return -1. */
int sd_jerr(sd_jctx *c, specdec_status st, const char *fmt, ...) SD_PRINTF(3, 4);
int sd_jtype_err(sd_jctx *c, const char *what, const sd_jv *a, const sd_jv *b);
int sd_jstep(sd_jctx *c, uint64_t n); /* count n steps; -1 past the limit */
void *sd_jalloc(sd_jctx *c, size_t n); /* arena allocation; NULL with the error recorded */

/* Constructors (strings are referenced, not copied). */
static inline sd_jv sd_jv_undef(const char *hint) {
    sd_jv v = {SD_JT_UNDEF, 0, {.s = {hint, hint ? __builtin_strlen(hint) : 0}}};
    return v;
}
static inline sd_jv sd_jv_none(void) { sd_jv v = {SD_JT_NONE, 0, {.i = 0}}; return v; }
static inline sd_jv sd_jv_bool(int b) { sd_jv v = {SD_JT_BOOL, 0, {.i = b != 0}}; return v; }
static inline sd_jv sd_jv_int(int64_t i) { sd_jv v = {SD_JT_INT, 0, {.i = i}}; return v; }
static inline sd_jv sd_jv_float(double f) { sd_jv v = {SD_JT_FLOAT, 0, {.f = f}}; return v; }
static inline sd_jv sd_jv_str(const char *p, size_t n) { sd_jv v = {SD_JT_STR, 0, {.s = {p, n}}}; return v; }
sd_jv sd_jv_cstr(const char *s);
sd_jlist *sd_jlist_new(sd_jctx *c, size_t n); /* n items to fill */
sd_jv sd_jv_list(sd_jlist *l, int sub); /* SD_JL_* */
sd_jdict *sd_jdict_new(sd_jctx *c, size_t cap);
int sd_jdict_set(sd_jctx *c, sd_jdict *d, sd_jv k, sd_jv v); /* replaces an equal key */
const sd_jv *sd_jdict_get(const sd_jdict *d, const sd_jv *k);
const sd_jv *sd_jdict_getz(const sd_jdict *d, const char *k, size_t kn);

/* Python semantics. */
int sd_jv_truthy(const sd_jv *v);
int sd_jv_eq(const sd_jv *a, const sd_jv *b);
int sd_jv_lt(sd_jctx *c, const sd_jv *a, const sd_jv *b, int *lt); /* a < b; -1 TypeError */
int sd_jv_hashable(const sd_jv *v);
const char *sd_jv_typename(const sd_jv *v);
int sd_jv_is_num(const sd_jv *v); /* int, float or bool */
double sd_jv_num(const sd_jv *v);
int sd_jv_str_of(sd_jctx *c, const sd_jv *v, sd_jv *out); /* str(v) */
int sd_jv_write_str(sd_jctx *c, sd_jbuf *b, const sd_jv *v);  /* append str(v) */
int sd_jv_write_repr(sd_jctx *c, sd_jbuf *b, const sd_jv *v); /* append repr(v) */
int sd_jv_write_float(sd_jctx *c, sd_jbuf *b, double f);      /* Python float repr */

typedef struct sd_jjson_opts {
    int ensure_ascii, sort_keys;
    int indent;                 /* -1 none */
    const char *indent_s;       /* a string indent instead (indent_n bytes) */
    size_t indent_n;
    const char *item_sep, *key_sep;
    size_t item_sep_n, key_sep_n;
} sd_jjson_opts;
int sd_jv_write_json(sd_jctx *c, sd_jbuf *b, const sd_jv *v, const sd_jjson_opts *o, int level);
int sd_jv_from_json(sd_jctx *c, const struct cJSON *j, sd_jv *out, int depth);

/* Iteration: the items of an iterable (list/tuple items, dict keys, str characters,
 * undefined = none; an iterator's remaining items, which it consumes); TypeError otherwise. */
int sd_jv_items(sd_jctx *c, const sd_jv *v, const sd_jv **items, size_t *n);

/* Buffers (arena memory; every byte appended counts towards lim.max_bytes). */
int sd_jbuf_put(sd_jctx *c, sd_jbuf *b, const char *s, size_t n);
int sd_jbuf_escape(sd_jctx *c, sd_jbuf *b, const char *s, size_t n); /* markupsafe's escape() */
static inline int sd_jbuf_puts(sd_jctx *c, sd_jbuf *b, const char *s) { return sd_jbuf_put(c, b, s, __builtin_strlen(s)); }
sd_jv sd_jbuf_val(const sd_jbuf *b);

/* UTF-8 / Python string helpers (strings are valid UTF-8). */
size_t sd_jstr_len(const char *p, size_t n);              /* code points */
size_t sd_jstr_off(const char *p, size_t n, size_t cps);  /* byte offset of code point cps (n past the end) */
int sd_jpy_space(int32_t cp);                              /* str.isspace() */
int sd_jv_strip(sd_jctx *c, const sd_jv *s, const sd_jv *chars, int left, int right, sd_jv *out);

/* ---- evaluation (sd_jinja_eval.c) ---------------------------------------------------------------- */
int sd_jeval(sd_jctx *c, const sd_jnode *n, sd_jscope *sc, sd_jv *out);
int sd_jcall_value(sd_jctx *c, const sd_jv *fn, const sd_jargs *a, sd_jv *out);
int sd_jgetattr(sd_jctx *c, const sd_jv *obj, const char *name, size_t nn, sd_jv *out);
int sd_jgetitem(sd_jctx *c, const sd_jv *obj, const sd_jv *key, sd_jv *out);

/* ---- filters, tests (sd_jinja_filters.c) ----------------------------------------------------------- */
int sd_jfilter_id(const char *name, size_t n); /* -1 unknown */
int sd_jtest_id(const char *name, size_t n);   /* -1 unknown */
int sd_jfilter(sd_jctx *c, int id, const sd_jv *v, const sd_jargs *a, sd_jv *out);
int sd_jtest(sd_jctx *c, int id, const sd_jv *v, const sd_jargs *a, int *res);
/* Arguments by position or name: 1 present (*out set), 0 absent, -1 error (already recorded:
 * a value given twice). sd_jargs_check: -1 when an argument beyond max_pos or a keyword not
 * in names (NULL-terminated) was given. */
int sd_jarg(sd_jctx *c, const sd_jargs *a, size_t pos, const char *name, sd_jv *out);
int sd_jargs_check(sd_jctx *c, const sd_jargs *a, size_t max_pos, const char *const *names, const char *what);

/* ---- methods, globals (sd_jinja_methods.c) ------------------------------------------------------- */
int sd_jmethod_id(const sd_jv *self, const char *name, size_t n); /* -1 none */
int sd_jmethod_call(sd_jctx *c, const sd_jmethod *m, const sd_jargs *a, sd_jv *out);
enum { SD_JF_RANGE, SD_JF_NAMESPACE, SD_JF_DICT, SD_JF_RAISE, SD_JF_STRFTIME, SD_JF_N };
int sd_jglobal_id(const char *name, size_t n); /* -1 none */
int sd_jglobal_call(sd_jctx *c, int id, const sd_jargs *a, sd_jv *out);
int sd_jstr_case(sd_jctx *c, const sd_jv *s, int mode, sd_jv *out); /* mode: 'u' upper, 'l' lower, 't' str.title, 'c' capitalize, 'T' Jinja title */
int sd_jstr_cased_test(sd_jctx *c, const sd_jv *s, int upper, int *res); /* str.isupper()/islower() */
int sd_jstr_split(sd_jctx *c, const sd_jv *s, const sd_jv *sep, int64_t maxsplit, int right, sd_jv *out);
int sd_jstr_replace(sd_jctx *c, const sd_jv *s, const sd_jv *old, const sd_jv *rep, int64_t count, sd_jv *out);

#endif

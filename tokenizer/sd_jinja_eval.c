/* sd_jinja_eval.c — statements and expressions.
 *
 * Scopes follow jinja2: the template's top level is one scope (the render variables are in it);
 * {% if %} opens none; every iteration of a for loop runs in a fresh scope whose parent is the
 * enclosing one (so {% set %} in a loop body is gone at the next iteration and after the loop —
 * templates carry state across iterations in a namespace()); a macro call runs in a scope whose
 * parent is the scope the macro was defined in, looked up at call time. Names not found in any
 * scope are the globals (range, namespace, dict, raise_exception, strftime_now) or undefined.
 * Attribute access: a dict's keys (methods such as items() take precedence, as getattr() does in
 * Python), a namespace's attributes, the loop variable's fields, str/list/dict methods; a missing
 * one is undefined, but any access on an undefined value is an error, as in jinja2. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sd_jinja_int.h"
#include "sd_utf8.h"

enum { SD_JE_OK = 0, SD_JE_BREAK = 1, SD_JE_CONTINUE = 2 };

static int sd_je_exec(sd_jctx *c, const sd_jnode *n, sd_jscope *sc);

static int sd_je_enter(sd_jctx *c) {
    if (++c->depth <= c->lim.max_depth) return 0;
    c->depth--;
    return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "the template nests calls or blocks deeper than %d levels", c->lim.max_depth);
}

/* ---- scopes ---------------------------------------------------------------------------------------- */
static sd_jscope *sd_je_scope(sd_jctx *c, sd_jscope *parent) {
    sd_jscope *s = sd_jalloc(c, sizeof *s);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}

static int sd_je_assign(sd_jctx *c, sd_jscope *s, const char *name, size_t nn, sd_jv v) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->nlen[i] == nn && !memcmp(s->name[i], name, nn)) {
            s->val[i] = v;
            return 0;
        }
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        const char **nm = sd_jalloc(c, cap * sizeof *nm);
        size_t *nl = sd_jalloc(c, cap * sizeof *nl);
        sd_jv *vl = sd_jalloc(c, cap * sizeof *vl);
        if (!nm || !nl || !vl) return -1;
        if (s->n) {
            memcpy(nm, s->name, s->n * sizeof *nm);
            memcpy(nl, s->nlen, s->n * sizeof *nl);
            memcpy(vl, s->val, s->n * sizeof *vl);
        }
        s->name = nm;
        s->nlen = nl;
        s->val = vl;
        s->cap = cap;
    }
    s->name[s->n] = name;
    s->nlen[s->n] = nn;
    s->val[s->n++] = v;
    return 0;
}

static int sd_je_assignz(sd_jctx *c, sd_jscope *s, const char *name, sd_jv v) { return sd_je_assign(c, s, name, strlen(name), v); }

/* An undefined value whose hint is prefix 'name' suffix (for the error its use raises). */
static sd_jv sd_je_undef(sd_jctx *c, const char *prefix, const char *name, size_t nn, const char *suffix) {
    char tmp[200];
    snprintf(tmp, sizeof tmp, "%s'%.*s'%s", prefix, (int)(nn > 80 ? 80 : nn), name, suffix);
    size_t n = strlen(tmp);
    char *p = sd_jalloc(c, n + 1);
    sd_jv v = sd_jv_undef(NULL);
    if (p) {
        memcpy(p, tmp, n + 1);
        v.u.s.p = p;
        v.u.s.n = n;
    }
    return v;
}

static int sd_je_lookup(sd_jctx *c, sd_jscope *sc, const char *name, size_t nn, sd_jv *out) {
    for (sd_jscope *s = sc; s; s = s->parent) {
        for (size_t i = s->n; i-- > 0;) {
            if (s->nlen[i] == nn && !memcmp(s->name[i], name, nn)) {
                *out = s->val[i];
                return 0;
            }
        }
        if (sd_jstep(c, 1)) return -1;
    }
    int g = sd_jglobal_id(name, nn);
    if (g >= 0) {
        out->t = SD_JT_FUNC;
        out->sub = 0;
        out->u.i = g;
        return 0;
    }
    *out = sd_je_undef(c, "", name, nn, " is undefined");
    return 0;
}

/* ---- attributes, items ------------------------------------------------------------------------------- */
static int sd_je_method(sd_jctx *c, const sd_jv *obj, int id, sd_jv *out) {
    sd_jmethod *m = sd_jalloc(c, sizeof *m);
    if (!m) return -1;
    m->self = *obj;
    m->id = id;
    out->t = SD_JT_METHOD;
    out->sub = 0;
    out->u.meth = m;
    return 0;
}

static int sd_je_loop_attr(sd_jctx *c, const sd_jv *obj, const char *name, size_t nn, sd_jv *out) {
    const sd_jloop *l = obj->u.loop;
    static const char *const names[] = {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                                        "previtem", "nextitem", "depth", "depth0", NULL};
    int k = -1;
    for (int i = 0; names[i] && k < 0; i++)
        if (strlen(names[i]) == nn && !memcmp(names[i], name, nn)) k = i;
    int64_t i = (int64_t)l->i, n = (int64_t)l->n;
    switch (k) {
    case 0: *out = sd_jv_int(i + 1); return 0;
    case 1: *out = sd_jv_int(i); return 0;
    case 2: *out = sd_jv_int(n - i); return 0;
    case 3: *out = sd_jv_int(n - i - 1); return 0;
    case 4: *out = sd_jv_bool(i == 0); return 0;
    case 5: *out = sd_jv_bool(i == n - 1); return 0;
    case 6: *out = sd_jv_int(n); return 0;
    case 7: *out = i > 0 ? l->items[i - 1] : sd_jv_undef("there is no previous item"); return 0;
    case 8: *out = i + 1 < n ? l->items[i + 1] : sd_jv_undef("there is no next item"); return 0;
    case 9: *out = sd_jv_int(1); return 0;
    case 10: *out = sd_jv_int(0); return 0;
    default: break;
    }
    int id = sd_jmethod_id(obj, name, nn);
    if (id >= 0) return sd_je_method(c, obj, id, out);
    *out = sd_je_undef(c, "'LoopContext object' has no attribute ", name, nn, "");
    return 0;
}

int sd_jgetattr(sd_jctx *c, const sd_jv *obj, const char *name, size_t nn, sd_jv *out) {
    if (obj->t == SD_JT_UNDEF) return sd_jtype_err(c, "attribute access", obj, NULL);
    if (obj->t == SD_JT_LOOP) return sd_je_loop_attr(c, obj, name, nn, out);
    if (obj->t == SD_JT_NS) {
        const sd_jv *v = sd_jdict_getz(obj->u.d, name, nn);
        *out = v ? *v : sd_je_undef(c, "'Namespace object' has no attribute ", name, nn, "");
        return 0;
    }
    int id = sd_jmethod_id(obj, name, nn);
    if (id >= 0) return sd_je_method(c, obj, id, out);
    if (obj->t == SD_JT_DICT) {
        const sd_jv *v = sd_jdict_getz(obj->u.d, name, nn);
        if (v) {
            *out = *v;
            return 0;
        }
    }
    char what[48];
    snprintf(what, sizeof what, "'%s object' has no attribute ", sd_jv_typename(obj));
    *out = sd_je_undef(c, what, name, nn, "");
    return 0;
}

/* Python's slice indices for a sequence of n items. */
static int sd_je_slice_idx(sd_jctx *c, const sd_jv *v, int64_t n, int64_t step, int is_start, int64_t *out) {
    if (v->t == SD_JT_NONE || v->t == SD_JT_UNDEF) {
        *out = step > 0 ? (is_start ? 0 : n) : (is_start ? n - 1 : -1);
        return 0;
    }
    if (v->t != SD_JT_INT && v->t != SD_JT_BOOL)
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: slice indices must be integers or None");
    int64_t i = v->u.i;
    if (i < 0) {
        i += n;
        if (i < 0) i = step > 0 ? 0 : -1;
    } else if (i >= n) {
        i = step > 0 ? n : n - 1;
    }
    *out = i;
    return 0;
}

static int sd_je_slice(sd_jctx *c, const sd_jv *obj, const sd_jv s[3], sd_jv *out) {
    if (obj->t != SD_JT_STR && (obj->t != SD_JT_LIST || obj->sub >= SD_JL_ITER)) {
        *out = sd_jv_undef("this value cannot be sliced");
        return 0;
    }
    int64_t step = 1;
    if (s[2].t != SD_JT_NONE && s[2].t != SD_JT_UNDEF) {
        if (s[2].t != SD_JT_INT && s[2].t != SD_JT_BOOL)
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: slice indices must be integers or None");
        step = s[2].u.i;
        if (!step) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ValueError: slice step cannot be zero");
    }
    const sd_jv *items = NULL;
    size_t n = 0;
    if (sd_jv_items(c, obj, &items, &n)) return -1;
    int64_t a = 0, b = 0;
    if (sd_je_slice_idx(c, &s[0], (int64_t)n, step, 1, &a) || sd_je_slice_idx(c, &s[1], (int64_t)n, step, 0, &b)) return -1;
    size_t cnt = 0;
    if (step > 0 && b > a) cnt = (size_t)((b - a + step - 1) / step);
    if (step < 0 && a > b) cnt = (size_t)((a - b + (-step) - 1) / (-step));
    if (sd_jstep(c, cnt)) return -1;
    if (obj->t == SD_JT_STR) {
        sd_jbuf buf = {0};
        for (size_t k = 0; k < cnt; k++) {
            const sd_jv *ch = &items[a + (int64_t)k * step];
            if (sd_jbuf_put(c, &buf, ch->u.s.p, ch->u.s.n)) return -1;
        }
        *out = sd_jbuf_val(&buf);
        return 0;
    }
    sd_jlist *l = sd_jlist_new(c, cnt);
    if (!l) return -1;
    for (size_t k = 0; k < cnt; k++) l->v[k] = items[a + (int64_t)k * step];
    *out = sd_jv_list(l, obj->sub);
    return 0;
}

int sd_jgetitem(sd_jctx *c, const sd_jv *obj, const sd_jv *key, sd_jv *out) {
    if (obj->t == SD_JT_UNDEF) return sd_jtype_err(c, "item access", obj, NULL);
    if (obj->t == SD_JT_DICT && sd_jv_hashable(key)) {
        const sd_jv *v = sd_jdict_get(obj->u.d, key);
        if (v) {
            *out = *v;
            return 0;
        }
    } else if (((obj->t == SD_JT_LIST && obj->sub <= SD_JL_TUPLE) || obj->t == SD_JT_STR) &&
               (key->t == SD_JT_INT || key->t == SD_JT_BOOL)) {
        int64_t n = obj->t == SD_JT_LIST ? (int64_t)obj->u.l->n : (int64_t)sd_jstr_len(obj->u.s.p, obj->u.s.n);
        int64_t i = key->u.i < 0 ? key->u.i + n : key->u.i;
        if (i >= 0 && i < n) {
            if (obj->t == SD_JT_LIST) {
                *out = obj->u.l->v[i];
            } else {
                size_t a = sd_jstr_off(obj->u.s.p, obj->u.s.n, (size_t)i), b = sd_jstr_off(obj->u.s.p, obj->u.s.n, (size_t)i + 1);
                *out = sd_jv_str(obj->u.s.p + a, b - a);
            }
            return 0;
        }
        char what[48], num[24];
        snprintf(what, sizeof what, "'%s object' has no element ", sd_jv_typename(obj));
        snprintf(num, sizeof num, "%lld", (long long)key->u.i);
        *out = sd_je_undef(c, what, num, strlen(num), "");
        return 0;
    }
    if (key->t == SD_JT_STR) return sd_jgetattr(c, obj, key->u.s.p, key->u.s.n, out); /* jinja2 falls back to getattr */
    *out = sd_jv_undef("no such item");
    return 0;
}

/* ---- calls -------------------------------------------------------------------------------------------------- */
static int sd_je_args(sd_jctx *c, const sd_jnode *n, uint32_t first, sd_jscope *sc, sd_jargs *a) {
    memset(a, 0, sizeof *a);
    uint32_t m = n->n > first ? n->n - first : 0;
    if (!m) return 0;
    a->pos = sd_jalloc(c, m * sizeof *a->pos);
    a->kname = sd_jalloc(c, m * sizeof *a->kname);
    a->klen = sd_jalloc(c, m * sizeof *a->klen);
    a->kv = sd_jalloc(c, m * sizeof *a->kv);
    if (!a->pos || !a->kname || !a->klen || !a->kv) return -1;
    for (uint32_t k = first; k < n->n; k++) {
        const sd_jnode *x = n->c[k];
        if (x->k == SD_JN_KW) {
            a->kname[a->nk] = x->s;
            a->klen[a->nk] = x->sn;
            if (sd_jeval(c, x->c[0], sc, &a->kv[a->nk++])) return -1;
        } else if (sd_jeval(c, x, sc, &a->pos[a->n++])) {
            return -1;
        }
    }
    return 0;
}

static const sd_jnode *sd_je_macro_param(const sd_jnode *m, uint32_t first, const char *name, size_t nn, uint32_t *idx) {
    for (uint32_t k = first; k < m->n; k++) {
        if (m->c[k]->sn == nn && !memcmp(m->c[k]->s, name, nn)) {
            *idx = k - first;
            return m->c[k];
        }
    }
    return NULL;
}

/* Bind a macro's (or caller's) parameters in scope s. */
static int sd_je_bind_params(sd_jctx *c, const sd_jmacro *mac, const sd_jargs *a, sd_jscope *s) {
    const sd_jnode *node = mac->node;
    uint32_t first = node->k == SD_JN_MACRO ? 1 : 2, np = node->n - first;
    const char *mname = node->k == SD_JN_MACRO ? node->s : "caller";
    int mlen = node->k == SD_JN_MACRO ? (int)node->sn : 6;
    unsigned char bound[256] = {0};
    if (np > 255) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "a macro with more than 255 parameters");
    if (a->n > np && !(node->i & SD_JM_VARARGS))
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: macro '%.*s' takes not more than %u argument(s)", mlen,
                       mname, np);
    for (uint32_t k = 0; k < np && k < a->n; k++) {
        if (sd_je_assign(c, s, node->c[first + k]->s, node->c[first + k]->sn, a->pos[k])) return -1;
        bound[k] = 1;
    }
    sd_jdict *kw = (node->i & SD_JM_KWARGS) ? sd_jdict_new(c, 4) : NULL;
    if ((node->i & SD_JM_KWARGS) && !kw) return -1;
    for (size_t k = 0; k < a->nk; k++) {
        uint32_t idx;
        if (sd_je_macro_param(node, first, a->kname[k], a->klen[k], &idx)) {
            if (bound[idx])
                return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: macro '%.*s' got multiple values for argument '%.*s'",
                               mlen, mname, (int)a->klen[k], a->kname[k]);
            if (sd_je_assign(c, s, a->kname[k], a->klen[k], a->kv[k])) return -1;
            bound[idx] = 1;
        } else if (kw) {
            if (sd_jdict_set(c, kw, sd_jv_str(a->kname[k], a->klen[k]), a->kv[k])) return -1;
        } else {
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: macro '%.*s' takes no keyword argument '%.*s'", mlen,
                           mname, (int)a->klen[k], a->kname[k]);
        }
    }
    for (uint32_t k = 0; k < np; k++) {
        const sd_jnode *p = node->c[first + k];
        if (bound[k]) continue;
        sd_jv v;
        if (p->c[0]) {
            if (sd_jeval(c, p->c[0], s, &v)) return -1;
        } else {
            v = sd_je_undef(c, "no value was given for the parameter ", p->s, p->sn, "");
        }
        if (sd_je_assign(c, s, p->s, p->sn, v)) return -1;
    }
    if (node->i & SD_JM_VARARGS) {
        size_t extra = a->n > np ? a->n - np : 0;
        sd_jlist *l = sd_jlist_new(c, extra);
        if (!l) return -1;
        for (size_t k = 0; k < extra; k++) l->v[k] = a->pos[np + k];
        if (sd_je_assignz(c, s, "varargs", sd_jv_list(l, 1))) return -1;
    }
    if (kw) {
        sd_jv v = {SD_JT_DICT, 0, {.d = kw}};
        if (sd_je_assignz(c, s, "kwargs", v)) return -1;
    }
    return 0;
}

static int sd_je_call_macro(sd_jctx *c, const sd_jmacro *mac, const sd_jargs *a, sd_jv *out) {
    if (sd_je_enter(c)) return -1;
    sd_jscope *s = sd_je_scope(c, mac->scope);
    int r = -1;
    if (s && !sd_je_bind_params(c, mac, a, s)) {
        if (mac->caller) {
            sd_jv cv = {SD_JT_MACRO, 0, {.m = mac->caller}};
            if (sd_je_assignz(c, s, "caller", cv)) goto done;
        }
        sd_jbuf buf = {0}, *saved = c->out;
        c->out = &buf;
        r = sd_je_exec(c, mac->node->k == SD_JN_MACRO ? mac->node->c[0] : mac->node->c[1], s);
        c->out = saved;
        if (r >= 0) {
            *out = sd_jbuf_val(&buf);
            r = 0;
        }
    }
done:
    c->depth--;
    return r;
}

int sd_jcall_value(sd_jctx *c, const sd_jv *fn, const sd_jargs *a, sd_jv *out) {
    switch (fn->t) {
    case SD_JT_MACRO: return sd_je_call_macro(c, fn->u.m, a, out);
    case SD_JT_FUNC: return sd_jglobal_call(c, (int)fn->u.i, a, out);
    case SD_JT_METHOD: return sd_jmethod_call(c, fn->u.meth, a, out);
    case SD_JT_UNDEF: return sd_jtype_err(c, "a call", fn, NULL);
    default:
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: '%s' object is not callable", sd_jv_typename(fn));
    }
}

/* A CALL node; caller: the caller() of a {% call %} block, or NULL. */
static int sd_je_call(sd_jctx *c, const sd_jnode *n, sd_jscope *sc, sd_jmacro *caller, sd_jv *out) {
    sd_jv fn;
    sd_jargs a;
    if (sd_jeval(c, n->c[0], sc, &fn) || sd_je_args(c, n, 1, sc, &a)) return -1;
    if (!caller) return sd_jcall_value(c, &fn, &a, out);
    if (fn.t != SD_JT_MACRO) return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "{%% call %%} of something that is not a macro");
    sd_jmacro m = *fn.u.m;
    m.caller = caller;
    return sd_je_call_macro(c, &m, &a, out);
}

/* ---- operators ------------------------------------------------------------------------------------------------------ */
static int sd_je_overflow(sd_jctx *c) {
    return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "integer overflow (Python integers are unbounded, specdec's have 64 bits)");
}

static int sd_je_repeat(sd_jctx *c, const sd_jv *seq, int64_t times, sd_jv *out) {
    if (times < 0) times = 0;
    if (seq->t == SD_JT_STR) {
        if (seq->u.s.n && (uint64_t)times > c->lim.max_bytes / seq->u.s.n)
            return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "the template builds more than %zu MiB of text", c->lim.max_bytes >> 20);
        sd_jbuf b = {0};
        for (int64_t k = 0; k < times; k++)
            if (sd_jbuf_put(c, &b, seq->u.s.p, seq->u.s.n)) return -1;
        *out = sd_jbuf_val(&b);
        return 0;
    }
    size_t n = seq->u.l->n;
    if (n && (uint64_t)times > (uint64_t)(c->lim.max_steps / n))
        return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "a list repeated %lld times", (long long)times);
    if (sd_jstep(c, n * (size_t)times)) return -1;
    sd_jlist *l = sd_jlist_new(c, n * (size_t)times);
    if (!l) return -1;
    for (int64_t k = 0; k < times; k++) memcpy(l->v + (size_t)k * n, seq->u.l->v, n * sizeof(sd_jv));
    *out = sd_jv_list(l, seq->sub);
    return 0;
}

static int sd_je_concat2(sd_jctx *c, const sd_jv *x, const sd_jv *y, sd_jv *out) {
    if (x->t == SD_JT_STR) { /* Markup + str escapes the str (markupsafe), str + str is plain */
        int mk = x->sub == SD_JS_MARKUP || y->sub == SD_JS_MARKUP;
        sd_jbuf b = {0};
        for (int k = 0; k < 2; k++) {
            const sd_jv *p = k ? y : x;
            if (mk && p->sub != SD_JS_MARKUP ? sd_jbuf_escape(c, &b, p->u.s.p, p->u.s.n) : sd_jbuf_put(c, &b, p->u.s.p, p->u.s.n))
                return -1;
        }
        *out = sd_jbuf_val(&b);
        out->sub = (uint8_t)(mk ? SD_JS_MARKUP : SD_JS_PLAIN);
        return 0;
    }
    size_t n = x->u.l->n + y->u.l->n;
    if (sd_jstep(c, n / 8)) return -1;
    sd_jlist *l = sd_jlist_new(c, n);
    if (!l) return -1;
    memcpy(l->v, x->u.l->v, x->u.l->n * sizeof(sd_jv));
    memcpy(l->v + x->u.l->n, y->u.l->v, y->u.l->n * sizeof(sd_jv));
    *out = sd_jv_list(l, x->sub);
    return 0;
}

static int sd_je_int_op(sd_jctx *c, int op, int64_t x, int64_t y, sd_jv *out) {
    int64_t r = 0;
    switch (op) {
    case SD_JOP_ADD: if (__builtin_add_overflow(x, y, &r)) return sd_je_overflow(c); break;
    case SD_JOP_SUB: if (__builtin_sub_overflow(x, y, &r)) return sd_je_overflow(c); break;
    case SD_JOP_MUL: if (__builtin_mul_overflow(x, y, &r)) return sd_je_overflow(c); break;
    case SD_JOP_DIV:
        if (!y) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ZeroDivisionError: division by zero");
        *out = sd_jv_float((double)x / (double)y);
        return 0;
    case SD_JOP_FLOORDIV:
    case SD_JOP_MOD:
        if (!y) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ZeroDivisionError: integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return sd_je_overflow(c);
        r = op == SD_JOP_FLOORDIV ? x / y : x % y;
        if (op == SD_JOP_FLOORDIV && (x % y != 0) && ((x < 0) != (y < 0))) r--;
        if (op == SD_JOP_MOD && r != 0 && ((r < 0) != (y < 0))) r += y;
        break;
    case SD_JOP_POW:
        if (y < 0) {
            if (!x) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ZeroDivisionError: 0.0 cannot be raised to a negative power");
            *out = sd_jv_float(pow((double)x, (double)y));
            return 0;
        }
        r = 1;
        for (int64_t b = x, e = y; e; e >>= 1) {
            if ((e & 1) && __builtin_mul_overflow(r, b, &r)) return sd_je_overflow(c);
            if (e > 1 && __builtin_mul_overflow(b, b, &b)) return sd_je_overflow(c);
        }
        break;
    default: break;
    }
    *out = sd_jv_int(r);
    return 0;
}

static int sd_je_float_op(sd_jctx *c, int op, double x, double y, sd_jv *out) {
    double r = 0;
    switch (op) {
    case SD_JOP_ADD: r = x + y; break;
    case SD_JOP_SUB: r = x - y; break;
    case SD_JOP_MUL: r = x * y; break;
    case SD_JOP_DIV:
    case SD_JOP_FLOORDIV:
    case SD_JOP_MOD:
        if (y == 0.0) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ZeroDivisionError: float division by zero");
        if (op == SD_JOP_DIV) r = x / y;
        else if (op == SD_JOP_FLOORDIV) r = floor(x / y);
        else {
            r = fmod(x, y);
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            if (r == 0) r = copysign(0.0, y);
        }
        break;
    case SD_JOP_POW:
        if (x == 0.0 && y < 0) return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ZeroDivisionError: 0.0 cannot be raised to a negative power");
        r = pow(x, y);
        break;
    default: break;
    }
    *out = sd_jv_float(r);
    return 0;
}

static int sd_je_binop(sd_jctx *c, int op, const sd_jv *x, const sd_jv *y, sd_jv *out) {
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (sd_jv_is_num(x) && sd_jv_is_num(y)) {
        if (x->t != SD_JT_FLOAT && y->t != SD_JT_FLOAT) return sd_je_int_op(c, op, x->u.i, y->u.i, out);
        return sd_je_float_op(c, op, sd_jv_num(x), sd_jv_num(y), out);
    }
    if (op == SD_JOP_ADD && x->t == y->t && (x->t == SD_JT_STR || (x->t == SD_JT_LIST && x->sub == y->sub && x->sub <= SD_JL_TUPLE)))
        return sd_je_concat2(c, x, y, out);
    if (op == SD_JOP_MUL) {
        const sd_jv *seq = x->t == SD_JT_STR || x->t == SD_JT_LIST ? x : y, *k = seq == x ? y : x;
        if ((seq->t == SD_JT_STR || (seq->t == SD_JT_LIST && seq->sub <= SD_JL_TUPLE)) && (k->t == SD_JT_INT || k->t == SD_JT_BOOL)) {
            if (sd_je_repeat(c, seq, k->u.i, out)) return -1;
            if (seq->t == SD_JT_STR) out->sub = seq->sub;
            return 0;
        }
    }
    if (op == SD_JOP_MOD && x->t == SD_JT_STR)
        return sd_jerr(c, SPECDEC_ERR_UNSUPPORTED, "string formatting with '%%' is not supported");
    return sd_jtype_err(c, names[op], x, y);
}

static int sd_je_contains(sd_jctx *c, const sd_jv *needle, const sd_jv *hay, int *res) {
    *res = 0;
    switch (hay->t) {
    case SD_JT_STR:
        if (needle->t != SD_JT_STR) {
            if (needle->t == SD_JT_UNDEF) return sd_jtype_err(c, "'in'", needle, NULL);
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: 'in <string>' requires string as left operand, not %s",
                           sd_jv_typename(needle));
        }
        if (!needle->u.s.n) *res = 1;
        for (size_t i = 0; !*res && i + needle->u.s.n <= hay->u.s.n; i++)
            *res = !memcmp(hay->u.s.p + i, needle->u.s.p, needle->u.s.n);
        return sd_jstep(c, hay->u.s.n / 64);
    case SD_JT_LIST:
        for (size_t i = 0; !*res && i < hay->u.l->n; i++) *res = sd_jv_eq(needle, &hay->u.l->v[i]);
        return sd_jstep(c, hay->u.l->n);
    case SD_JT_DICT:
        if (!sd_jv_hashable(needle))
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: unhashable type: '%s'", sd_jv_typename(needle));
        *res = sd_jdict_get(hay->u.d, needle) != NULL;
        return sd_jstep(c, hay->u.d->n);
    case SD_JT_UNDEF: return 0; /* iterating an undefined value yields nothing */
    default:
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: argument of type '%s' is not iterable", sd_jv_typename(hay));
    }
}

static int sd_je_compare1(sd_jctx *c, int op, const sd_jv *a, const sd_jv *b, int *res) {
    int lt = 0, eq;
    switch (op) {
    case SD_JCMP_EQ: *res = sd_jv_eq(a, b); return 0;
    case SD_JCMP_NE: *res = !sd_jv_eq(a, b); return 0;
    case SD_JCMP_IN: return sd_je_contains(c, a, b, res);
    case SD_JCMP_NOTIN:
        if (sd_je_contains(c, a, b, res)) return -1;
        *res = !*res;
        return 0;
    case SD_JCMP_LT: return sd_jv_lt(c, a, b, res);
    case SD_JCMP_GT: return sd_jv_lt(c, b, a, res);
    case SD_JCMP_LE:
    case SD_JCMP_GE:
        if (op == SD_JCMP_LE ? sd_jv_lt(c, a, b, &lt) : sd_jv_lt(c, b, a, &lt)) return -1;
        eq = sd_jv_eq(a, b);
        *res = lt || eq;
        return 0;
    default: return sd_jerr(c, SPECDEC_ERR_INTERNAL, "bad comparison");
    }
}

static int sd_je_compare(sd_jctx *c, const sd_jnode *n, sd_jscope *sc, sd_jv *out) {
    sd_jv left, right;
    if (sd_jeval(c, n->c[0], sc, &left)) return -1;
    for (uint32_t k = 1; k < n->n; k++) {
        int res = 0;
        if (sd_jeval(c, n->c[k]->c[0], sc, &right) || sd_je_compare1(c, n->c[k]->op, &left, &right, &res)) return -1;
        if (!res) {
            *out = sd_jv_bool(0);
            return 0;
        }
        left = right;
    }
    *out = sd_jv_bool(1);
    return 0;
}

/* A FILTER node; base: the value the innermost filter of a chain applies to (filter blocks,
 * {% set x | f %}), NULL in expressions. */
static int sd_je_filter(sd_jctx *c, const sd_jnode *n, sd_jscope *sc, const sd_jv *base, sd_jv *out) {
    sd_jv v;
    sd_jargs a;
    if (!n->c[0]) {
        if (!base) return sd_jerr(c, SPECDEC_ERR_INTERNAL, "a filter without an operand");
        v = *base;
    } else if (base && n->c[0]->k == SD_JN_FILTER) {
        if (sd_je_filter(c, n->c[0], sc, base, &v)) return -1;
    } else if (sd_jeval(c, n->c[0], sc, &v)) {
        return -1;
    }
    if (sd_je_args(c, n, 1, sc, &a)) return -1;
    c->line = n->line;
    return sd_jfilter(c, n->op, &v, &a, out);
}

static int sd_je_unary(sd_jctx *c, const sd_jnode *n, sd_jscope *sc, sd_jv *out) {
    sd_jv v;
    if (sd_jeval(c, n->c[0], sc, &v)) return -1;
    if (n->k == SD_JN_NOT) {
        *out = sd_jv_bool(!sd_jv_truthy(&v));
        return 0;
    }
    if (v.t == SD_JT_FLOAT) {
        *out = sd_jv_float(n->k == SD_JN_NEG ? -v.u.f : v.u.f);
        return 0;
    }
    if (v.t == SD_JT_INT || v.t == SD_JT_BOOL) {
        if (n->k == SD_JN_NEG && v.u.i == INT64_MIN) return sd_je_overflow(c);
        *out = sd_jv_int(n->k == SD_JN_NEG ? -v.u.i : v.u.i);
        return 0;
    }
    return sd_jtype_err(c, n->k == SD_JN_NEG ? "unary -" : "unary +", &v, NULL);
}

static int sd_je_seq(sd_jctx *c, const sd_jnode *n, sd_jscope *sc, sd_jv *out) {
    if (n->k == SD_JN_DICT) {
        sd_jdict *d = sd_jdict_new(c, n->n / 2);
        if (!d) return -1;
        for (uint32_t k = 0; k + 1 < n->n; k += 2) {
            sd_jv key, val;
            if (sd_jeval(c, n->c[k], sc, &key) || sd_jeval(c, n->c[k + 1], sc, &val)) return -1;
            if (!sd_jv_hashable(&key))
                return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "TypeError: unhashable type: '%s'", sd_jv_typename(&key));
            if (sd_jdict_set(c, d, key, val)) return -1;
        }
        out->t = SD_JT_DICT;
        out->sub = 0;
        out->u.d = d;
        return 0;
    }
    sd_jlist *l = sd_jlist_new(c, n->n);
    if (!l) return -1;
    for (uint32_t k = 0; k < n->n; k++)
        if (sd_jeval(c, n->c[k], sc, &l->v[k])) return -1;
    *out = sd_jv_list(l, n->k == SD_JN_TUPLE);
    return 0;
}

static int sd_je_expr(sd_jctx *c, const sd_jnode *n, sd_jscope *sc, sd_jv *out) {
    sd_jv a, b;
    switch (n->k) {
    case SD_JN_CONST:
        switch (n->op) {
        case SD_JT_NONE: *out = sd_jv_none(); return 0;
        case SD_JT_BOOL: *out = sd_jv_bool((int)n->i); return 0;
        case SD_JT_INT: *out = sd_jv_int(n->i); return 0;
        case SD_JT_FLOAT: *out = sd_jv_float(n->f); return 0;
        default: *out = sd_jv_str(n->s, n->sn); return 0;
        }
    case SD_JN_NAME: return sd_je_lookup(c, sc, n->s, n->sn, out);
    case SD_JN_LIST: case SD_JN_TUPLE: case SD_JN_DICT: return sd_je_seq(c, n, sc, out);
    case SD_JN_GETATTR:
        if (sd_jeval(c, n->c[0], sc, &a)) return -1;
        return sd_jgetattr(c, &a, n->s, n->sn, out);
    case SD_JN_GETITEM:
        if (sd_jeval(c, n->c[0], sc, &a)) return -1;
        if (n->c[1]->k == SD_JN_SLICE) {
            sd_jv s[3];
            for (int k = 0; k < 3; k++) {
                s[k] = sd_jv_none();
                if (n->c[1]->c[k] && sd_jeval(c, n->c[1]->c[k], sc, &s[k])) return -1;
            }
            if (a.t == SD_JT_UNDEF) return sd_jtype_err(c, "item access", &a, NULL);
            return sd_je_slice(c, &a, s, out);
        }
        if (sd_jeval(c, n->c[1], sc, &b)) return -1;
        return sd_jgetitem(c, &a, &b, out);
    case SD_JN_CALL: return sd_je_call(c, n, sc, NULL, out);
    case SD_JN_FILTER: return sd_je_filter(c, n, sc, NULL, out);
    case SD_JN_TEST: {
        sd_jargs args;
        int res = 0;
        if (sd_jeval(c, n->c[0], sc, &a) || sd_je_args(c, n, 1, sc, &args)) return -1;
        c->line = n->line;
        if (sd_jtest(c, n->op, &a, &args, &res)) return -1;
        *out = sd_jv_bool(res);
        return 0;
    }
    case SD_JN_NOT: case SD_JN_NEG: case SD_JN_POS: return sd_je_unary(c, n, sc, out);
    case SD_JN_BIN:
        if (sd_jeval(c, n->c[0], sc, &a) || sd_jeval(c, n->c[1], sc, &b)) return -1;
        c->line = n->line;
        return sd_je_binop(c, n->op, &a, &b, out);
    case SD_JN_AND: case SD_JN_OR:
        if (sd_jeval(c, n->c[0], sc, &a)) return -1;
        if (sd_jv_truthy(&a) == (n->k == SD_JN_OR)) {
            *out = a;
            return 0;
        }
        return sd_jeval(c, n->c[1], sc, out);
    case SD_JN_CONCAT: {
        sd_jbuf buf = {0};
        for (uint32_t k = 0; k < n->n; k++)
            if (sd_jeval(c, n->c[k], sc, &a) || sd_jv_write_str(c, &buf, &a)) return -1;
        *out = sd_jbuf_val(&buf);
        return 0;
    }
    case SD_JN_COMPARE: return sd_je_compare(c, n, sc, out);
    case SD_JN_SLICE: /* in a tuple subscript (x[1, :]): jinja2's getitem of such a key fails quietly */
        for (int k = 0; k < 3; k++)
            if (n->c[k] && sd_jeval(c, n->c[k], sc, &a)) return -1;
        *out = sd_jv_undef("a slice object as a subscript");
        return 0;
    case SD_JN_COND:
        if (sd_jeval(c, n->c[0], sc, &a)) return -1;
        if (sd_jv_truthy(&a)) return sd_jeval(c, n->c[1], sc, out);
        if (n->c[2]) return sd_jeval(c, n->c[2], sc, out);
        *out = sd_jv_undef("the conditional expression was false and has no else");
        return 0;
    default: return sd_jerr(c, SPECDEC_ERR_INTERNAL, "bad expression node %d", n->k);
    }
}

int sd_jeval(sd_jctx *c, const sd_jnode *n, sd_jscope *sc, sd_jv *out) {
    if (sd_jstep(c, 1) || sd_je_enter(c)) return -1;
    c->line = n->line;
    int r = sd_je_expr(c, n, sc, out);
    c->depth--;
    return r;
}

/* ---- statements --------------------------------------------------------------------------------------------- */
/* Assign v to a target: NAME, TUPLE of NAMEs (unpacking), NSREF. */
static int sd_je_store(sd_jctx *c, const sd_jnode *t, sd_jscope *sc, const sd_jv *v) {
    if (t->k == SD_JN_NAME) return sd_je_assign(c, sc, t->s, t->sn, *v);
    if (t->k == SD_JN_NSREF) {
        sd_jv ns;
        if (sd_je_lookup(c, sc, t->s, t->sn, &ns)) return -1;
        if (ns.t != SD_JT_NS)
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "cannot assign attribute on non-namespace object '%.*s'",
                           (int)t->sn, t->s);
        if (t->c[0]->sn && t->c[0]->s[0] == '_')
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "SecurityError: underscore-prefixed namespace attribute");
        return sd_jdict_set(c, ns.u.d, sd_jv_str(t->c[0]->s, t->c[0]->sn), *v);
    }
    const sd_jv *items;
    size_t n;
    if (sd_jv_items(c, v, &items, &n)) return -1;
    if (n != t->n)
        return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "ValueError: %s values to unpack (expected %u, got %zu)",
                       n < t->n ? "not enough" : "too many", t->n, n);
    for (uint32_t k = 0; k < t->n; k++)
        if (sd_je_assign(c, sc, t->c[k]->s, t->c[k]->sn, items[k])) return -1;
    return 0;
}

static int sd_je_for(sd_jctx *c, const sd_jnode *n, sd_jscope *sc) {
    sd_jv it;
    const sd_jv *items;
    size_t cnt;
    if (sd_jeval(c, n->c[1], sc, &it) || sd_jv_items(c, &it, &items, &cnt)) return -1;
    if (n->c[2]) { /* {% for x in xs if cond %}: loop over the items that pass */
        sd_jv *kept = sd_jalloc(c, (cnt ? cnt : 1) * sizeof *kept);
        sd_jscope *fs = sd_je_scope(c, sc);
        if (!kept || !fs) return -1;
        size_t m = 0;
        for (size_t i = 0; i < cnt; i++) {
            sd_jv ok;
            fs->n = 0;
            if (sd_je_store(c, n->c[0], fs, &items[i]) || sd_jeval(c, n->c[2], fs, &ok)) return -1;
            if (sd_jv_truthy(&ok)) kept[m++] = items[i];
        }
        items = kept;
        cnt = m;
    }
    if (!cnt) {
        if (!n->c[4]) return 0;
        sd_jscope *es = sd_je_scope(c, sc);
        return es ? sd_je_exec(c, n->c[4], es) : -1;
    }
    sd_jloop *lp = sd_jalloc(c, sizeof *lp);
    if (!lp) return -1;
    memset(lp, 0, sizeof *lp);
    lp->items = items;
    lp->n = cnt;
    sd_jv lv = {SD_JT_LOOP, 0, {.loop = lp}};
    sd_jscope *is = NULL;
    for (size_t i = 0; i < cnt; i++) { /* a fresh scope per iteration; reused unless a macro defined in it may outlive it */
        if (!is || n->i) is = sd_je_scope(c, sc);
        else is->n = 0;
        if (!is || sd_jstep(c, 1)) return -1;
        lp->i = i;
        if (sd_je_store(c, n->c[0], is, &items[i]) || sd_je_assignz(c, is, "loop", lv)) return -1;
        int r = sd_je_exec(c, n->c[3], is);
        if (r < 0) return -1;
        if (r == SD_JE_BREAK) break;
    }
    return 0;
}

/* Run body with its output captured into a string. */
static int sd_je_capture(sd_jctx *c, const sd_jnode *body, sd_jscope *sc, sd_jv *out) {
    sd_jbuf buf = {0}, *saved = c->out;
    c->out = &buf;
    int r = sd_je_exec(c, body, sc);
    c->out = saved;
    *out = sd_jbuf_val(&buf);
    return r < 0 ? -1 : r;
}

static int sd_je_stmt(sd_jctx *c, const sd_jnode *n, sd_jscope *sc) {
    sd_jv v, t;
    switch (n->k) {
    case SD_JN_BODY:
        for (uint32_t k = 0; k < n->n; k++) {
            int r = sd_je_exec(c, n->c[k], sc);
            if (r) return r;
        }
        return 0;
    case SD_JN_TEXT: return sd_jbuf_put(c, c->out, n->s, n->sn);
    case SD_JN_OUTPUT:
        if (sd_jeval(c, n->c[0], sc, &v)) return -1;
        return sd_jv_write_str(c, c->out, &v);
    case SD_JN_IF:
        for (const sd_jnode *x = n; x;) {
            if (x->k != SD_JN_IF) return sd_je_exec(c, x, sc);
            if (sd_jeval(c, x->c[0], sc, &v)) return -1;
            if (sd_jv_truthy(&v)) return sd_je_exec(c, x->c[1], sc);
            x = x->c[2];
        }
        return 0;
    case SD_JN_FOR: return sd_je_for(c, n, sc);
    case SD_JN_SET:
        if (sd_jeval(c, n->c[1], sc, &v)) return -1;
        return sd_je_store(c, n->c[0], sc, &v);
    case SD_JN_SETBLOCK: {
        int r = sd_je_capture(c, n->c[1], sc, &v); /* a break inside still ends the loop */
        if (r < 0 || (n->c[2] && sd_je_filter(c, n->c[2], sc, &v, &v)) || sd_je_store(c, n->c[0], sc, &v)) return -1;
        return r;
    }
    case SD_JN_MACRO:
    case SD_JN_CALLBLOCK: { /* a macro, or the caller() a {% call %} block passes */
        sd_jmacro *m = sd_jalloc(c, sizeof *m);
        if (!m) return -1;
        m->node = n;
        m->scope = sc;
        m->caller = NULL;
        v.t = SD_JT_MACRO;
        v.sub = 0;
        v.u.m = m;
        if (n->k == SD_JN_MACRO) return sd_je_assign(c, sc, n->s, n->sn, v);
        if (sd_je_call(c, n->c[0], sc, m, &v)) return -1;
        return sd_jv_write_str(c, c->out, &v);
    }
    case SD_JN_FILTERBLOCK: {
        int r = sd_je_capture(c, n->c[1], sc, &t);
        if (r < 0 || sd_je_filter(c, n->c[0], sc, &t, &v) || sd_jv_write_str(c, c->out, &v)) return -1;
        return r;
    }
    case SD_JN_BREAK: return SD_JE_BREAK;
    case SD_JN_CONTINUE: return SD_JE_CONTINUE;
    default: return sd_jerr(c, SPECDEC_ERR_INTERNAL, "bad statement node %d", n->k);
    }
}

/* 0, SD_JE_BREAK / SD_JE_CONTINUE (out of the innermost loop body), -1 error. */
static int sd_je_exec(sd_jctx *c, const sd_jnode *n, sd_jscope *sc) {
    if (sd_jstep(c, 1) || sd_je_enter(c)) return -1;
    c->line = n->line;
    int r = sd_je_stmt(c, n, sc);
    c->depth--;
    return r;
}

sd_jinja_limits sd_jinja_default_limits(void) {
    sd_jinja_limits l = {(size_t)64 << 20, (size_t)256 << 20, 20000000u, 256};
    return l;
}

/* A render variable as a value. */
static int sd_je_var(sd_jctx *c, const sd_jinja_var *v, sd_jv *out) {
    switch (v->kind) {
    case SD_JINJA_NONE: *out = sd_jv_none(); return 0;
    case SD_JINJA_BOOL: *out = sd_jv_bool(v->b); return 0;
    case SD_JINJA_STR:
        if (!v->s || !sd_utf8_valid((const unsigned char *)v->s, strlen(v->s)))
            return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "the variable '%s' is not a valid UTF-8 string", v->name);
        *out = sd_jv_cstr(v->s);
        return 0;
    case SD_JINJA_JSON: return sd_jv_from_json(c, v->json, out, 0);
    case SD_JINJA_MESSAGES: {
        sd_jlist *l = sd_jlist_new(c, v->n_msgs > 0 ? (size_t)v->n_msgs : 0);
        if (!l) return -1;
        for (int32_t i = 0; i < v->n_msgs; i++) {
            const char *r = v->msgs[i].role, *t = v->msgs[i].content;
            if (!r || !t || !sd_utf8_valid((const unsigned char *)r, strlen(r)) || !sd_utf8_valid((const unsigned char *)t, strlen(t)))
                return sd_jerr(c, SPECDEC_ERR_INVALID_ARGUMENT, "message %d: role or content is NULL or not valid UTF-8", i);
            sd_jdict *d = sd_jdict_new(c, 2);
            if (!d || sd_jdict_set(c, d, sd_jv_cstr("role"), sd_jv_cstr(r)) ||
                sd_jdict_set(c, d, sd_jv_cstr("content"), sd_jv_cstr(t)))
                return -1;
            l->v[i].t = SD_JT_DICT;
            l->v[i].sub = 0;
            l->v[i].u.d = d;
        }
        *out = sd_jv_list(l, 0);
        return 0;
    }
    default: return sd_jerr(c, SPECDEC_ERR_INTERNAL, "bad variable kind %d", v->kind);
    }
}

specdec_status sd_jinja_render(const sd_jinja_tmpl *t, const sd_jinja_var *vars, size_t n_vars, int64_t now,
                               const sd_jinja_limits *lim, sd_tok_buf *out) {
    sd_jctx c;
    memset(&c, 0, sizeof c);
    c.lim = lim ? *lim : sd_jinja_default_limits();
    c.a.limit = c.lim.max_memory;
    c.now = now;
    c.line = 0;
    sd_jbuf buf = {0};
    c.out = &buf;
    int r = -1;
    if ((c.top = sd_je_scope(&c, NULL))) {
        r = 0;
        for (size_t i = 0; i < n_vars && !r; i++) {
            sd_jv v;
            r = sd_je_var(&c, &vars[i], &v) || sd_je_assign(&c, c.top, vars[i].name, strlen(vars[i].name), v) ? -1 : 0;
        }
        if (!r) r = sd_je_exec(&c, t->root, c.top) < 0 ? -1 : 0;
    }
    specdec_status st = SPECDEC_OK;
    if (r) {
        st = c.st ? c.st : SPECDEC_ERR_INTERNAL;
        if (c.raised) sd_fail(NULL, st, "chat template: %s", c.msg);
        else sd_fail(NULL, st, "chat template %s", c.st ? c.msg : "failed without a message");
    } else if (buf.n && sd_tok_buf_put(out, buf.p, buf.n)) {
        st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "chat template: out of memory for the text");
    }
    sd_ja_free(&c.a);
    return st;
}

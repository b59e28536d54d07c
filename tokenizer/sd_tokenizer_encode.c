/* sd_tokenizer_encode.c — text -> ids: added-token matching, normalizers,
 * pre-tokenizers, the BPE model and the post-processor, each following the
 * `tokenizers` library's semantics (NormalizedString::split behaviours,
 * AddedVocabulary::find_matches, BPE::merge_word / Word::merge_all). */
#include <string.h>

#include <utf8proc.h>

#include "sd_alloc.h"
#include "sd_tokenizer.h"

#define SD_OOM (-1)
#define SD_ENGINE (-2)

/* ---- normalizers ------------------------------------------------------------------ */
static int sd_tok_is_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return 0;
    return 1;
}

static int sd_tok_norm_unicode(sd_tok_work *w, const char *s, size_t n, sd_tok_buf *out, utf8proc_option_t opt) {
    if (sd_tok_is_ascii(s, n)) return sd_tok_buf_put(out, s, n); /* every normal form of ASCII is itself */
    opt |= UTF8PROC_STABLE;
    utf8proc_ssize_t need = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, NULL, 0, opt);
    if (need < 0) return SD_ENGINE;
    if ((size_t)need + 1 > w->u32_cap) {
        int32_t *p = sd_realloc(w->u32, ((size_t)need + 1) * sizeof *p);
        if (!p) return SD_OOM;
        w->u32 = p;
        w->u32_cap = (size_t)need + 1;
    }
    utf8proc_ssize_t got = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, w->u32, need, opt);
    if (got < 0 || got > need) return SD_ENGINE;
    utf8proc_ssize_t bytes = utf8proc_reencode(w->u32, got, opt);
    if (bytes < 0) return SD_ENGINE;
    return sd_tok_buf_put(out, w->u32, (size_t)bytes);
}

static int sd_tok_norm_lower(const char *s, size_t n, sd_tok_buf *out) {
    if (sd_tok_buf_reserve(out, n + 8)) return SD_OOM;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            char l = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            if (sd_tok_buf_put(out, &l, 1)) return SD_OOM;
            i++;
            continue;
        }
        int32_t cp;
        i += sd_utf8_next(s + i, n - i, &cp);
        char b[8];
        size_t k;
        if (cp == 0x130) { /* the one unconditional multi-char lowercase mapping */
            k = sd_utf8_put(b, 'i');
            k += sd_utf8_put(b + k, 0x307);
        } else {
            k = sd_utf8_put(b, utf8proc_tolower(cp));
        }
        if (sd_tok_buf_put(out, b, k)) return SD_OOM;
    }
    return 0;
}

int sd_tok_replace_all(sd_tok_work *w, const char *lit, size_t lit_len, const sd_tok_regex *re, const char *content,
                       size_t content_len, const char *s, size_t n, sd_tok_buf *out) {
    if (lit && lit_len == 0) {
        /* Rust's str::replace with an empty pattern (the BPEDecoder with "suffix": ""):
         * the empty string matches at every character boundary, the end included, so
         * content goes before each character and once more at the end ("" -> content). */
        for (size_t i = 0; i < n;) {
            int32_t cp;
            size_t l = sd_utf8_next(s + i, n - i, &cp);
            if (sd_tok_buf_put(out, content, content_len) || sd_tok_buf_put(out, s + i, l)) return SD_OOM;
            if (sd_tok_grown(w, out->len)) return SD_TOK_GROWN;
            i += l;
        }
        return sd_tok_buf_put(out, content, content_len);
    }
    if (lit) {
        size_t i = 0, run = 0;
        while (i + lit_len <= n) {
            if (s[i] == lit[0] && !memcmp(s + i, lit, lit_len)) {
                if (sd_tok_buf_put(out, s + run, i - run) || sd_tok_buf_put(out, content, content_len)) return SD_OOM;
                if (sd_tok_grown(w, out->len)) return SD_TOK_GROWN;
                i += lit_len;
                run = i;
            } else {
                i++;
            }
        }
        return sd_tok_buf_put(out, s + run, n - run);
    }
    if (!w->mt && !(w->mt = sd_calloc(1, sizeof *w->mt))) return SD_OOM;
    int r = sd_tok_regex_find(re, w, s, n, w->mt);
    if (r) return r;
    for (size_t k = 0; k < w->mt->n; k++) {
        const sd_tok_match *m = &w->mt->v[k];
        if (m->is_match ? sd_tok_buf_put(out, content, content_len) : sd_tok_buf_put(out, s + m->start, m->end - m->start))
            return SD_OOM;
        if (sd_tok_grown(w, out->len)) return SD_TOK_GROWN;
    }
    return 0;
}

int sd_tok_normalize(const sd_tok_norm *nm, sd_tok_work *w, const char *s, size_t n, sd_tok_buf *out) {
    switch (nm->kind) {
    case SD_NORM_NFC: return sd_tok_norm_unicode(w, s, n, out, UTF8PROC_COMPOSE);
    case SD_NORM_NFKC: return sd_tok_norm_unicode(w, s, n, out, UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case SD_NORM_NFD: return sd_tok_norm_unicode(w, s, n, out, UTF8PROC_DECOMPOSE);
    case SD_NORM_NFKD: return sd_tok_norm_unicode(w, s, n, out, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
    case SD_NORM_LOWERCASE: return sd_tok_norm_lower(s, n, out);
    case SD_NORM_PREPEND:
        if (n && sd_tok_buf_put(out, nm->str, nm->str_len)) return SD_OOM;
        return sd_tok_buf_put(out, s, n);
    case SD_NORM_REPLACE:
        return sd_tok_replace_all(w, nm->str, nm->str_len, &nm->re, nm->content, nm->content_len, s, n, out);
    case SD_NORM_STRIP: {
        size_t b = 0, e = n;
        int32_t cp;
        if (nm->left)
            while (b < e) {
                size_t l = sd_utf8_next(s + b, e - b, &cp);
                if (!sd_tok_is_whitespace(cp)) break;
                b += l;
            }
        if (nm->right)
            while (e > b) {
                size_t k = e - 1;
                while (k > b && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
                sd_utf8_next(s + k, e - k, &cp);
                if (!sd_tok_is_whitespace(cp)) break;
                e = k;
            }
        return sd_tok_buf_put(out, s + b, e - b);
    }
    case SD_NORM_STRIP_ACCENTS:
        for (size_t i = 0; i < n;) {
            int32_t cp;
            size_t l = sd_utf8_next(s + i, n - i, &cp);
            utf8proc_category_t c = cp < 0x80 ? UTF8PROC_CATEGORY_LL : utf8proc_category(cp);
            if (c != UTF8PROC_CATEGORY_MN && c != UTF8PROC_CATEGORY_MC && c != UTF8PROC_CATEGORY_ME &&
                sd_tok_buf_put(out, s + i, l))
                return SD_OOM;
            i += l;
        }
        return 0;
    case SD_NORM_SEQUENCE: {
        sd_tok_buf x = {0}, y = {0};
        int r = sd_tok_buf_put(&x, s, n);
        for (int i = 0; !r && i < nm->n_child; i++) {
            y.len = 0;
            r = sd_tok_normalize(&nm->child[i], w, x.p ? x.p : "", x.len, &y);
            if (!r && sd_tok_grown(w, y.len)) r = SD_TOK_GROWN;
            sd_tok_buf t = x; x = y; y = t;
        }
        if (!r) r = sd_tok_buf_put(out, x.p, x.len);
        sd_tok_buf_free(&x);
        sd_tok_buf_free(&y);
        return r;
    }
    }
    return SD_ENGINE;
}

/* ---- added tokens ------------------------------------------------------------------- */
static int32_t sd_tok_last_cp(const char *s, size_t n) {
    size_t k = n - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    int32_t cp;
    sd_utf8_next(s + k, n - k, &cp);
    return cp;
}

/* AddedVocabulary::find_matches: leftmost-longest non-overlapping matches, then the
 * single_word / lstrip / rstrip rules. Appends spans (offsets relative to s + base). */
static int sd_tok_split_added(const specdec_tokenizer *t, const sd_tok_matcher *m, const char *s, size_t n, int at_start,
                              sd_tok_spans *out) {
    if (m->start[256] == 0 || n == 0) return n ? sd_tok_spans_push(out, 0, n, -1, at_start) : 0;
    size_t start_offset = 0, pos = 0;
    while (pos < n) {
        unsigned char c = (unsigned char)s[pos];
        int32_t best = -1;
        size_t best_len = 0;
        for (int32_t k = m->start[c]; k < m->start[c + 1]; k++) {
            const sd_tok_added *a = &t->added[m->order[k]];
            if (a->len > best_len && a->len <= n - pos && !memcmp(s + pos, a->content, a->len)) {
                best = m->order[k];
                best_len = a->len;
            }
        }
        if (best < 0) { pos++; continue; }
        const sd_tok_added *a = &t->added[best];
        size_t start = pos, stop = pos + best_len;
        pos = stop;
        if (a->single_word) {
            int32_t cp;
            int start_space = start == 0 || !sd_tok_is_word_char(sd_tok_last_cp(s, start));
            int stop_space = stop == n || (sd_utf8_next(s + stop, n - stop, &cp), !sd_tok_is_word_char(cp));
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t k = ns - 1;
                while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
                int32_t cp;
                sd_utf8_next(s + k, ns - k, &cp);
                if (!sd_tok_is_whitespace(cp)) break;
                ns = k;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            while (stop < n) {
                int32_t cp;
                size_t l = sd_utf8_next(s + stop, n - stop, &cp);
                if (!sd_tok_is_whitespace(cp)) break;
                stop += l;
            }
        }
        if (start_offset < start && sd_tok_spans_push(out, start_offset, start - start_offset, -1, at_start && start_offset == 0))
            return SD_OOM;
        if (sd_tok_spans_push(out, start, stop - start, a->id, 0)) return SD_OOM;
        start_offset = stop;
        if (pos < stop) pos = stop;
    }
    if (start_offset < n && sd_tok_spans_push(out, start_offset, n - start_offset, -1, at_start && start_offset == 0))
        return SD_OOM;
    return 0;
}

/* ---- pre-tokenizers ------------------------------------------------------------------- */
/* Apply a split behaviour (NormalizedString::split) to matches covering the piece src
 * and append the kept, non-empty parts to (ob, os). Rewrites mt in place. */
static int sd_tok_emit_splits(const sd_tok_matches *mt, sd_tok_behavior beh, int invert, const char *src, int at_start,
                              sd_tok_buf *ob, sd_tok_spans *os) {
    size_t k = 0;
    sd_tok_match *v = mt->v;
    size_t cnt = mt->n;
    if (invert)
        for (size_t i = 0; i < cnt; i++) v[i].is_match = !v[i].is_match;
    /* results written into v[0..k) with is_match meaning "remove" */
    if (beh == SD_SPLIT_MERGED_NEXT) {
        /* fold from the right, then the list is read backwards */
        int prev = 0;
        size_t r = cnt; /* results in v[r..cnt) in reverse order */
        for (size_t i = cnt; i-- > 0;) {
            sd_tok_match m = v[i];
            if (m.is_match && !prev && r < cnt) v[r].start = m.start;
            else { v[--r] = (sd_tok_match){m.start, m.end, 0}; }
            prev = m.is_match;
        }
        memmove(v, v + r, (cnt - r) * sizeof *v);
        k = cnt - r;
    } else {
        int prev = 0;
        for (size_t i = 0; i < cnt; i++) {
            sd_tok_match m = v[i];
            if (beh == SD_SPLIT_ISOLATED) { v[k++] = (sd_tok_match){m.start, m.end, 0}; }
            else if (beh == SD_SPLIT_REMOVED) { v[k++] = m; }
            else if (beh == SD_SPLIT_CONTIGUOUS) {
                if (m.is_match == prev && k) v[k - 1].end = m.end;
                else v[k++] = (sd_tok_match){m.start, m.end, 0};
            } else { /* merged with previous */
                if (m.is_match && !prev && k) v[k - 1].end = m.end;
                else v[k++] = (sd_tok_match){m.start, m.end, 0};
            }
            prev = m.is_match;
        }
    }
    for (size_t i = 0; i < k; i++) {
        if (v[i].is_match || v[i].end <= v[i].start) continue;
        size_t off = ob->len;
        if (sd_tok_buf_put(ob, src + v[i].start, v[i].end - v[i].start)) return SD_OOM;
        if (sd_tok_spans_push(os, off, v[i].end - v[i].start, -1, at_start && v[i].start == 0)) return SD_OOM;
    }
    return 0;
}

typedef int (*sd_tok_pred)(int32_t cp);

static int sd_tok_find_pred(sd_tok_work *w, sd_tok_pred pred, const char *s, size_t n) {
    sd_tok_matches *m = w->mt;
    m->n = 0;
    size_t last = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t l = sd_utf8_next(s + i, n - i, &cp);
        if (pred(cp)) {
            if (m->n + 2 > m->cap) {
                size_t cap = m->cap ? m->cap * 2 : 64;
                sd_tok_match *v = sd_realloc(m->v, cap * sizeof *v);
                if (!v) return SD_OOM;
                m->v = v;
                m->cap = cap;
            }
            if (last < i) m->v[m->n++] = (sd_tok_match){last, i, 0};
            m->v[m->n++] = (sd_tok_match){i, i + l, 1};
            last = i + l;
        }
        i += l;
    }
    if (last < n || n == 0) {
        if (m->n + 1 > m->cap) {
            size_t cap = m->cap ? m->cap * 2 : 64;
            sd_tok_match *v = sd_realloc(m->v, cap * sizeof *v);
            if (!v) return SD_OOM;
            m->v = v;
            m->cap = cap;
        }
        m->v[m->n++] = (sd_tok_match){last, n, 0};
    }
    return 0;
}

/* One leaf pre-tokenizer over every piece of (ib, is) into (ob, os). */
static int sd_tok_pre_step(const sd_tok_pre *p, sd_tok_work *w, const sd_tok_buf *ib, const sd_tok_spans *is, sd_tok_buf *ob,
                           sd_tok_spans *os) {
    int r = 0;
    for (size_t i = 0; i < is->n && !r; i++) {
        const char *s = sd_tok_buf_at(ib, is->v[i].off);
        size_t n = is->v[i].len;
        int at = is->v[i].at_start;
        switch (p->kind) {
        case SD_PRE_SPLIT:
            if ((r = sd_tok_regex_find(&p->re, w, s, n, w->mt))) break;
            r = sd_tok_emit_splits(w->mt, p->behavior, p->invert, s, at, ob, os);
            break;
        case SD_PRE_WHITESPACE:
            if ((r = sd_tok_regex_find(&p->re, w, s, n, w->mt))) break;
            r = sd_tok_emit_splits(w->mt, SD_SPLIT_REMOVED, 1, s, at, ob, os);
            break;
        case SD_PRE_DIGITS:
            if ((r = sd_tok_find_pred(w, sd_tok_is_numeric, s, n))) break;
            r = sd_tok_emit_splits(w->mt, p->individual_digits ? SD_SPLIT_ISOLATED : SD_SPLIT_CONTIGUOUS, 0, s, at, ob, os);
            break;
        case SD_PRE_PUNCTUATION:
            if ((r = sd_tok_find_pred(w, sd_tok_is_punctuation, s, n))) break;
            r = sd_tok_emit_splits(w->mt, p->behavior, 0, s, at, ob, os);
            break;
        case SD_PRE_WHITESPACE_SPLIT:
            if ((r = sd_tok_find_pred(w, sd_tok_is_whitespace, s, n))) break;
            r = sd_tok_emit_splits(w->mt, SD_SPLIT_REMOVED, 0, s, at, ob, os);
            break;
        case SD_PRE_BYTELEVEL: {
            /* optional prefix space, optional GPT-2 regex split, then bytes -> chars */
            w->tmp.len = 0;
            if (p->add_prefix_space && (n == 0 || s[0] != ' ') && sd_tok_buf_put(&w->tmp, " ", 1)) { r = SD_OOM; break; }
            if (sd_tok_buf_put(&w->tmp, s, n)) { r = SD_OOM; break; }
            const char *t = sd_tok_buf_at(&w->tmp, 0);
            size_t tn = w->tmp.len;
            if (p->use_regex) {
                if ((r = sd_tok_regex_find(&p->re, w, t, tn, w->mt))) break;
            } else {
                w->mt->n = 0;
                w->mt->v[w->mt->n++] = (sd_tok_match){0, tn, 0};
            }
            for (size_t k = 0; k < w->mt->n && !r; k++) {
                size_t a = w->mt->v[k].start, e = w->mt->v[k].end;
                if (e <= a) continue;
                size_t off = ob->len;
                if (sd_tok_buf_reserve(ob, 2 * (e - a))) { r = SD_OOM; break; }
                for (size_t q = a; q < e; q++) ob->len += sd_utf8_put(ob->p + ob->len, sd_tok_byte_to_cp[(unsigned char)t[q]]);
                if (sd_tok_spans_push(os, off, ob->len - off, -1, at && a == 0)) r = SD_OOM;
            }
            break;
        }
        case SD_PRE_METASPACE: {
            w->tmp.len = 0;
            /* the prepend check looks at the text after ' ' was replaced */
            int first_is_rep = (n && s[0] == ' ') || (n >= p->rep_len && !memcmp(s, p->rep, p->rep_len));
            int pre = p->prepend == SD_PREPEND_ALWAYS ? !first_is_rep
                      : p->prepend == SD_PREPEND_FIRST ? (!first_is_rep && at) : 0;
            if (pre && sd_tok_buf_put(&w->tmp, p->rep, p->rep_len)) { r = SD_OOM; break; }
            if ((r = sd_tok_replace_all(w, " ", 1, NULL, p->rep, p->rep_len, s, n, &w->tmp))) break;
            if (!p->split) {
                size_t off = ob->len;
                if (sd_tok_buf_put(ob, w->tmp.p, w->tmp.len)) { r = SD_OOM; break; }
                if (w->tmp.len && sd_tok_spans_push(os, off, w->tmp.len, -1, at)) r = SD_OOM;
                break;
            }
            /* split on the replacement char, MergedWithNext */
            sd_tok_matches *m = w->mt;
            m->n = 0;
            const char *t = sd_tok_buf_at(&w->tmp, 0);
            size_t tn = w->tmp.len, last = 0;
            for (size_t q = 0; q + p->rep_len <= tn;) {
                if (!memcmp(t + q, p->rep, p->rep_len)) {
                    if (m->n + 2 > m->cap) {
                        size_t cap = m->cap ? m->cap * 2 : 64;
                        sd_tok_match *v = sd_realloc(m->v, cap * sizeof *v);
                        if (!v) { r = SD_OOM; break; }
                        m->v = v; m->cap = cap;
                    }
                    if (last < q) m->v[m->n++] = (sd_tok_match){last, q, 0};
                    m->v[m->n++] = (sd_tok_match){q, q + p->rep_len, 1};
                    q += p->rep_len;
                    last = q;
                } else {
                    int32_t cp;
                    q += sd_utf8_next(t + q, tn - q, &cp);
                }
            }
            if (r) break;
            if (last < tn || tn == 0) {
                if (m->n + 1 > m->cap) {
                    size_t cap = m->cap ? m->cap * 2 : 64;
                    sd_tok_match *v = sd_realloc(m->v, cap * sizeof *v);
                    if (!v) { r = SD_OOM; break; }
                    m->v = v; m->cap = cap;
                }
                m->v[m->n++] = (sd_tok_match){last, tn, 0};
            }
            /* emit_splits copies from t = w->tmp, which it does not touch */
            r = sd_tok_emit_splits(m, SD_SPLIT_MERGED_NEXT, 0, t, at, ob, os);
            break;
        }
        case SD_PRE_SEQUENCE: r = SD_ENGINE; break; /* flattened by the caller */
        }
    }
    return r;
}

static int sd_tok_pre_flatten(const sd_tok_pre *p, const sd_tok_pre **leaves, int *n, int max) {
    if (p->kind != SD_PRE_SEQUENCE) {
        if (*n >= max) return SD_ENGINE;
        leaves[(*n)++] = p;
        return 0;
    }
    for (int i = 0; i < p->n_child; i++)
        if (sd_tok_pre_flatten(&p->child[i], leaves, n, max)) return SD_ENGINE;
    return 0;
}

/* ---- BPE model --------------------------------------------------------------------------- */
typedef struct sd_tok_sym {
    int32_t id, prev, next, alive;
} sd_tok_sym;
typedef struct sd_tok_hent {
    int32_t rank, pos, id;
} sd_tok_hent;

static int sd_tok_ids_push(sd_tok_work *w, int32_t id) {
    if (w->n_ids == w->cap_ids) {
        size_t cap = w->cap_ids ? w->cap_ids * 2 : 256;
        int32_t *p = sd_realloc(w->ids, cap * sizeof *p);
        if (!p) return SD_OOM;
        w->ids = p;
        w->cap_ids = cap;
    }
    w->ids[w->n_ids++] = id;
    return 0;
}

static inline int sd_tok_hless(const sd_tok_hent *a, const sd_tok_hent *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void sd_tok_hpush(sd_tok_hent *h, size_t *n, sd_tok_hent e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!sd_tok_hless(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static sd_tok_hent sd_tok_hpop(sd_tok_hent *h, size_t *n) {
    sd_tok_hent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && sd_tok_hless(&h[c + 1], &h[c])) c++;
        if (!sd_tok_hless(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static int sd_tok_sym_add(sd_tok_work *w, size_t *ns, int32_t id) {
    if (*ns == w->bpe_sym_cap) {
        size_t cap = w->bpe_sym_cap ? w->bpe_sym_cap * 2 : 256;
        void *p = sd_realloc(w->bpe_sym, cap * sizeof(sd_tok_sym));
        if (!p) return SD_OOM;
        w->bpe_sym = p;
        w->bpe_sym_cap = cap;
    }
    sd_tok_sym *s = (sd_tok_sym *)w->bpe_sym;
    s[*ns] = (sd_tok_sym){id, (int32_t)*ns - 1, (int32_t)*ns + 1, 1};
    (*ns)++;
    return 0;
}

static int sd_tok_bpe(const specdec_tokenizer *t, sd_tok_work *w, const char *s, size_t n) {
    if (n == 0) return 0;
    if (t->ignore_merges) {
        int32_t id = sd_tok_strmap_get(&t->vocab, s, n);
        if (id >= 0) return sd_tok_ids_push(w, id);
    }
    size_t ns = 0;
    int32_t unk_pending = -1;
    char one[8];
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t l = sd_utf8_next(s + i, n - i, &cp);
        int first = i == 0, last = i + l == n;
        const char *key = s + i;
        size_t kl = l;
        if ((!first && t->cont_prefix) || (last && t->eow_suffix)) {
            w->tmp.len = 0;
            if (!first && t->cont_prefix && sd_tok_buf_put(&w->tmp, t->cont_prefix, t->cont_prefix_len)) return SD_OOM;
            if (sd_tok_buf_put(&w->tmp, s + i, l)) return SD_OOM;
            if (last && t->eow_suffix && sd_tok_buf_put(&w->tmp, t->eow_suffix, t->eow_suffix_len)) return SD_OOM;
            key = sd_tok_buf_at(&w->tmp, 0);
            kl = w->tmp.len;
        }
        i += l;
        int32_t id = sd_tok_strmap_get(&t->vocab, key, kl);
        if (id >= 0) {
            if (unk_pending >= 0) {
                if (sd_tok_sym_add(w, &ns, unk_pending)) return SD_OOM;
                unk_pending = -1;
            }
            if (sd_tok_sym_add(w, &ns, id)) return SD_OOM;
            continue;
        }
        if (t->byte_fallback) {
            int ok = 1;
            for (size_t b = 0; b < kl; b++)
                if (t->byte_ids[(unsigned char)key[b]] < 0) ok = 0;
            if (ok) {
                /* key may point into w->tmp; copy the bytes first */
                size_t kk = kl < sizeof one ? kl : 0;
                if (kk) memcpy(one, key, kk);
                for (size_t b = 0; b < kl; b++)
                    if (sd_tok_sym_add(w, &ns, t->byte_ids[(unsigned char)(kk ? one[b] : key[b])])) return SD_OOM;
                continue;
            }
        }
        if (t->unk_id >= 0) {
            if (unk_pending >= 0 && !t->fuse_unk && sd_tok_sym_add(w, &ns, unk_pending)) return SD_OOM;
            unk_pending = t->unk_id;
        }
    }
    if (unk_pending >= 0 && sd_tok_sym_add(w, &ns, unk_pending)) return SD_OOM;
    if (ns == 0) return 0;
    sd_tok_sym *sym = (sd_tok_sym *)w->bpe_sym;
    sym[ns - 1].next = -1;
    if (ns > 1) {
        if (w->bpe_heap_cap < 2 * ns) {
            void *p = sd_realloc(w->bpe_heap, 2 * ns * sizeof(sd_tok_hent));
            if (!p) return SD_OOM;
            w->bpe_heap = p;
            w->bpe_heap_cap = 2 * ns;
        }
        sd_tok_hent *h = (sd_tok_hent *)w->bpe_heap;
        size_t hn = 0;
        for (size_t i = 0; i + 1 < ns; i++) {
            const sd_tok_merge_slot *m = sd_tok_merge_get(&t->merges, sym[i].id, sym[i + 1].id);
            if (m) sd_tok_hpush(h, &hn, (sd_tok_hent){m->rank, (int32_t)i, m->id});
        }
        while (hn) {
            sd_tok_hent top = sd_tok_hpop(h, &hn);
            sd_tok_sym *cur = &sym[top.pos];
            if (!cur->alive || cur->next < 0) continue;
            int32_t nx = cur->next;
            const sd_tok_merge_slot *m = sd_tok_merge_get(&t->merges, cur->id, sym[nx].id);
            if (!m || m->id != top.id) continue; /* stale entry */
            cur->id = top.id;
            sym[nx].alive = 0;
            cur->next = sym[nx].next;
            if (cur->next >= 0) sym[cur->next].prev = top.pos;
            /* at most two new pairs per merge and one pop per merge keep hn < 2 * ns */
            if (cur->prev >= 0) {
                const sd_tok_merge_slot *q = sd_tok_merge_get(&t->merges, sym[cur->prev].id, cur->id);
                if (q) sd_tok_hpush(h, &hn, (sd_tok_hent){q->rank, cur->prev, q->id});
            }
            if (cur->next >= 0) {
                const sd_tok_merge_slot *q = sd_tok_merge_get(&t->merges, cur->id, sym[cur->next].id);
                if (q) sd_tok_hpush(h, &hn, (sd_tok_hent){q->rank, top.pos, q->id});
            }
            if (hn + 2 > w->bpe_heap_cap) {
                void *p = sd_realloc(w->bpe_heap, 2 * w->bpe_heap_cap * sizeof(sd_tok_hent));
                if (!p) return SD_OOM;
                w->bpe_heap = p;
                w->bpe_heap_cap *= 2;
                h = (sd_tok_hent *)w->bpe_heap;
            }
        }
    }
    for (size_t i = 0; i < ns; i++)
        if (sym[i].alive && sd_tok_ids_push(w, sym[i].id)) return SD_OOM;
    return 0;
}

/* ---- the pipeline ------------------------------------------------------------------------- */
static specdec_status sd_tok_fail_code(int r, sd_errbuf *eb) {
    if (r == SD_OOM) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer: out of memory while encoding");
    if (r == SD_TOK_GROWN)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED,
                       "tokenizer: its normalizers / pre-tokenizers grow this text more than %dx (refused)",
                       SD_TOK_MAX_GROWTH);
    return sd_fail(eb, SPECDEC_ERR_INTERNAL, "tokenizer: regex / Unicode engine error while encoding");
}

specdec_status sd_tok_encode_raw(const specdec_tokenizer *t, sd_tok_work *w, const char *s, size_t n, sd_errbuf *eb) {
    w->n_ids = 0;
    w->s1.n = 0;
    w->grow_cap = sd_tok_grow_cap(n);
    if (!w->mt && !(w->mt = sd_calloc(1, sizeof *w->mt))) return sd_tok_fail_code(SD_OOM, eb);
    if (w->mt->cap < 4) {
        sd_tok_match *v = sd_realloc(w->mt->v, 64 * sizeof *v);
        if (!v) return sd_tok_fail_code(SD_OOM, eb);
        w->mt->v = v;
        w->mt->cap = 64;
    }
    const sd_tok_pre *leaves[64];
    int n_leaves = 0;
    if (t->pre && sd_tok_pre_flatten(t->pre, leaves, &n_leaves, 64))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "tokenizer: more than 64 pre-tokenizers");
    int r = sd_tok_split_added(t, &t->match_raw, s, n, 1, &w->s1);
    if (r) return sd_tok_fail_code(r, eb);
    for (size_t i = 0; i < w->s1.n; i++) {
        sd_tok_span sp = w->s1.v[i];
        if (sp.id >= 0) {
            if ((r = sd_tok_ids_push(w, sp.id))) return sd_tok_fail_code(r, eb);
            continue;
        }
        /* normalize the segment into w->a */
        w->a.len = 0;
        r = t->norm ? sd_tok_normalize(t->norm, w, s + sp.off, sp.len, &w->a) : sd_tok_buf_put(&w->a, s + sp.off, sp.len);
        if (r) return sd_tok_fail_code(r, eb);
        w->s2.n = 0;
        if ((r = sd_tok_split_added(t, &t->match_norm, sd_tok_buf_at(&w->a, 0), w->a.len, sp.at_start, &w->s2))) return sd_tok_fail_code(r, eb);
        for (size_t j = 0; j < w->s2.n; j++) {
            sd_tok_span sq = w->s2.v[j];
            if (sq.id >= 0) {
                if ((r = sd_tok_ids_push(w, sq.id))) return sd_tok_fail_code(r, eb);
                continue;
            }
            /* pre-tokenize: ping-pong between (b, s3) and (text2, s4) */
            w->b.len = 0;
            w->s3.n = 0;
            if (sd_tok_buf_put(&w->b, sd_tok_buf_at(&w->a, sq.off), sq.len) || sd_tok_spans_push(&w->s3, 0, sq.len, -1, sq.at_start))
                return sd_tok_fail_code(SD_OOM, eb);
            sd_tok_buf *ib = &w->b, *ob = &w->text2;
            sd_tok_spans *is = &w->s3, *os = &w->s4;
            for (int k = 0; k < n_leaves; k++) {
                ob->len = 0;
                os->n = 0;
                if ((r = sd_tok_pre_step(leaves[k], w, ib, is, ob, os))) return sd_tok_fail_code(r, eb);
                if (sd_tok_grown(w, ob->len)) return sd_tok_fail_code(SD_TOK_GROWN, eb);
                sd_tok_buf *tb = ib; ib = ob; ob = tb;
                sd_tok_spans *ts = is; is = os; os = ts;
            }
            for (size_t q = 0; q < is->n; q++)
                if ((r = sd_tok_bpe(t, w, sd_tok_buf_at(ib, is->v[q].off), is->v[q].len))) return sd_tok_fail_code(r, eb);
        }
    }
    return SPECDEC_OK;
}

/* ---- public API ---------------------------------------------------------------------------- */
specdec_status specdec_tokenize(const specdec_tokenizer *tok, const char *text, size_t len, int add_special, int32_t *ids,
                                int32_t capacity, int32_t *n_ids) {
    if (n_ids) *n_ids = 0;
    if (!tok || !n_ids || (!text && len) || capacity < 0 || (!ids && capacity > 0))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_tokenize: NULL tokenizer, text, ids or n_ids, or capacity < 0");
    sd_tok_work w = {0};
    specdec_status st = SPECDEC_OK;
    if (sd_tok_utf8_sanitize(&w.text, text ? text : "", len)) {
        st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_tokenize: out of memory (%zu bytes of text)", len);
        goto done;
    }
    if ((st = sd_tok_encode_raw(tok, &w, w.text.p ? w.text.p : "", w.text.len, NULL))) goto done;
    size_t total = w.n_ids + (add_special ? (size_t)(tok->post.n_pre + tok->post.n_post) : 0);
    if (total > INT32_MAX) {
        st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_tokenize: text gives %zu ids, more than INT32_MAX", total);
        goto done;
    }
    *n_ids = (int32_t)total;
    if (total > (size_t)capacity) {
        st = sd_fail(NULL, SPECDEC_ERR_BUFFER_TOO_SMALL, "specdec_tokenize: %zu ids do not fit in capacity %d", total, capacity);
        goto done;
    }
    size_t k = 0;
    if (add_special) for (int32_t i = 0; i < tok->post.n_pre; i++) ids[k++] = tok->post.pre[i];
    if (w.n_ids) memcpy(ids + k, w.ids, w.n_ids * sizeof *ids);
    k += w.n_ids;
    if (add_special) for (int32_t i = 0; i < tok->post.n_post; i++) ids[k++] = tok->post.post[i];
done:
    sd_tok_work_free(&w);
    return st;
}

int32_t specdec_tokenizer_vocab_size(const specdec_tokenizer *tok) { return tok ? tok->n_ids : 0; }
int32_t specdec_tokenizer_bos_id(const specdec_tokenizer *tok) { return tok ? tok->bos_id : -1; }
int32_t specdec_tokenizer_eos_id(const specdec_tokenizer *tok) { return tok ? tok->eos_id : -1; }
int specdec_tokenizer_add_bos(const specdec_tokenizer *tok) { return tok ? tok->add_bos : 0; }

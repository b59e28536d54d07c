/* sd_tokenizer_decode.c — ids -> text: vocabulary strings through the decoder chain
 * (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, BPEDecoder, Sequence) as
 * the `tokenizers` library's Tokenizer::decode, token_to_piece, and the streaming
 * decoder (the library's DecodeStream algorithm: re-decode a short window of ids and
 * emit the new suffix only when it does not end in U+FFFD, i.e. an incomplete
 * UTF-8 sequence). */
#include <string.h>

#include "sd_alloc.h"
#include "sd_tokenizer.h"

#define SD_OOM (-1)
#define SD_ENGINE (-2)

const char *sd_tok_id_str(const specdec_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_ids) return NULL;
    int32_t e = t->id_entry[id];
    if (e == -1) return NULL;
    if (e >= 0) {
        *len = t->key_len[e];
        return t->blob + t->key_off[e];
    }
    const sd_tok_added *a = &t->added[-e - 2];
    *len = a->len;
    return a->content;
}

int sd_tok_is_special(const specdec_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_ids) return 0;
    int32_t e = t->id_entry[id];
    return e <= -2 && t->added[-e - 2].special;
}

static int sd_tok_push_tok(sd_tok_buf *b, sd_tok_spans *s, const char *p, size_t n) {
    size_t off = b->len;
    if (sd_tok_buf_put(b, p, n)) return SD_OOM;
    return sd_tok_spans_push(s, off, n, -1, 0);
}

int sd_tok_dec_flatten(const sd_tok_dec *d, const sd_tok_dec **leaves, int *n, int max) {
    if (d->kind != SD_DEC_SEQUENCE) {
        if (*n >= max) return SD_ENGINE;
        leaves[(*n)++] = d;
        return 0;
    }
    for (int i = 0; i < d->n_child; i++)
        if (sd_tok_dec_flatten(&d->child[i], leaves, n, max)) return SD_ENGINE;
    return 0;
}

static int sd_tok_hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int sd_tok_byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    if (s[3] == '+') return sd_tok_hexval(s[4]);
    int a = sd_tok_hexval(s[3]), b = sd_tok_hexval(s[4]);
    return a < 0 || b < 0 ? -1 : a * 16 + b;
}

static int sd_tok_flush_bytes(sd_tok_buf *pend, sd_tok_buf *ob, sd_tok_spans *os) {
    if (!pend->len) return 0;
    size_t i = 0, bad;
    while (i < pend->len) {
        size_t l = sd_utf8_seq_len((const unsigned char *)pend->p + i, pend->len - i, &bad);
        if (!l) break;
        i += l;
    }
    int r = 0;
    if (i == pend->len) r = sd_tok_push_tok(ob, os, pend->p, pend->len);
    else
        for (size_t k = 0; k < pend->len && !r; k++) r = sd_tok_push_tok(ob, os, "\xEF\xBF\xBD", 3);
    pend->len = 0;
    return r;
}

static int sd_tok_dec_step(const sd_tok_dec *d, sd_tok_work *w, const sd_tok_buf *ib, const sd_tok_spans *is, sd_tok_buf *ob,
                           sd_tok_spans *os) {
    int r = 0;
    switch (d->kind) {
    case SD_DEC_BYTELEVEL: {
        /* chars -> bytes; a token holding any char outside the table keeps its UTF-8 */
        w->tmp.len = 0;
        for (size_t i = 0; i < is->n; i++) {
            const char *s = sd_tok_buf_at(ib, is->v[i].off);
            size_t n = is->v[i].len, start = w->tmp.len, q = 0;
            int ok = 1;
            if (sd_tok_buf_reserve(&w->tmp, n)) return SD_OOM;
            while (q < n) {
                int32_t cp;
                q += sd_utf8_next(s + q, n - q, &cp);
                int b = sd_tok_cp_to_byte(cp);
                if (b < 0) { ok = 0; break; }
                w->tmp.p[w->tmp.len++] = (char)b;
            }
            if (!ok) {
                w->tmp.len = start;
                if (sd_tok_buf_put(&w->tmp, s, n)) return SD_OOM;
            }
        }
        size_t off = ob->len;
        if (sd_tok_utf8_sanitize(ob, w->tmp.p ? w->tmp.p : "", w->tmp.len)) return SD_OOM;
        return sd_tok_spans_push(os, off, ob->len - off, -1, 0);
    }
    case SD_DEC_FUSE: {
        size_t off = ob->len;
        for (size_t i = 0; i < is->n; i++)
            if (sd_tok_buf_put(ob, sd_tok_buf_at(ib, is->v[i].off), is->v[i].len)) return SD_OOM;
        return sd_tok_spans_push(os, off, ob->len - off, -1, 0);
    }
    case SD_DEC_BYTEFALLBACK:
        w->tmp.len = 0;
        for (size_t i = 0; i < is->n && !r; i++) {
            const char *s = sd_tok_buf_at(ib, is->v[i].off);
            size_t n = is->v[i].len;
            int b = sd_tok_byte_token(s, n);
            if (b >= 0) {
                char c = (char)b;
                if (sd_tok_buf_put(&w->tmp, &c, 1)) return SD_OOM;
                continue;
            }
            if ((r = sd_tok_flush_bytes(&w->tmp, ob, os))) return r;
            r = sd_tok_push_tok(ob, os, s, n);
        }
        if (!r) r = sd_tok_flush_bytes(&w->tmp, ob, os);
        return r;
    case SD_DEC_METASPACE:
        for (size_t i = 0; i < is->n; i++) {
            const char *s = sd_tok_buf_at(ib, is->v[i].off);
            size_t n = is->v[i].len, off = ob->len, q = 0;
            while (q < n) {
                if (q + d->rep_len <= n && !memcmp(s + q, d->rep, d->rep_len)) {
                    if (!(i == 0 && d->prepend != SD_PREPEND_NEVER) && sd_tok_buf_put(ob, " ", 1)) return SD_OOM;
                    q += d->rep_len;
                    continue;
                }
                int32_t cp;
                size_t l = sd_utf8_next(s + q, n - q, &cp);
                if (sd_tok_buf_put(ob, s + q, l)) return SD_OOM;
                q += l;
            }
            if (sd_tok_spans_push(os, off, ob->len - off, -1, 0)) return SD_OOM;
        }
        return 0;
    case SD_DEC_STRIP:
        for (size_t i = 0; i < is->n; i++) {
            const char *s = sd_tok_buf_at(ib, is->v[i].off);
            size_t n = is->v[i].len, b = 0, e = n;
            int32_t cp;
            for (int k = 0; k < d->start && b < n; k++) {
                size_t l = sd_utf8_next(s + b, n - b, &cp);
                if (cp != d->strip_cp) break;
                b += l;
            }
            for (int k = 0; k < d->stop && e > 0; k++) {
                size_t q = e - 1;
                while (q > 0 && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
                sd_utf8_next(s + q, e - q, &cp);
                if (cp != d->strip_cp) break;
                e = q;
            }
            if (e < b) e = b;
            if (sd_tok_push_tok(ob, os, s + b, e - b)) return SD_OOM;
        }
        return 0;
    case SD_DEC_REPLACE:
        for (size_t i = 0; i < is->n; i++) {
            size_t off = ob->len;
            if ((r = sd_tok_replace_all(w, d->str, d->str_len, &d->re, d->content, d->content_len, sd_tok_buf_at(ib, is->v[i].off),
                                            is->v[i].len, ob)))
                return r;
            if (sd_tok_spans_push(os, off, ob->len - off, -1, 0)) return SD_OOM;
        }
        return 0;
    case SD_DEC_BPE:
        for (size_t i = 0; i < is->n; i++) {
            size_t off = ob->len;
            const char *rep = i + 1 == is->n ? "" : " ";
            if ((r = sd_tok_replace_all(w, d->str, d->str_len, NULL, rep, strlen(rep), sd_tok_buf_at(ib, is->v[i].off), is->v[i].len, ob)))
                return r;
            if (sd_tok_spans_push(os, off, ob->len - off, -1, 0)) return SD_OOM;
        }
        return 0;
    case SD_DEC_SEQUENCE: return SD_ENGINE;
    }
    return SD_ENGINE;
}

specdec_status sd_tok_decode_into(const specdec_tokenizer *t, sd_tok_work *w, const int32_t *ids, size_t n, int skip_special,
                                  sd_tok_buf *out, sd_errbuf *eb) {
    int r = 0;
    w->a.len = 0;
    w->s1.n = 0;
    for (size_t i = 0; i < n && !r; i++) {
        size_t l;
        const char *s = sd_tok_id_str(t, ids[i], &l);
        if (!s || (skip_special && sd_tok_is_special(t, ids[i]))) continue; /* unknown ids are skipped, as the library does */
        r = sd_tok_push_tok(&w->a, &w->s1, s, l);
    }
    if (r) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer: out of memory while decoding");
    w->grow_cap = sd_tok_grow_cap(w->a.len);
    sd_tok_buf *ib = &w->a, *ob = &w->b;
    sd_tok_spans *is = &w->s1, *os = &w->s2;
    if (t->dec) {
        const sd_tok_dec *leaves[64];
        int nl = 0;
        if (sd_tok_dec_flatten(t->dec, leaves, &nl, 64))
            return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "tokenizer: more than 64 decoders");
        if (!w->mt && !(w->mt = sd_calloc(1, sizeof *w->mt)))
            return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer: out of memory while decoding");
        for (int k = 0; k < nl; k++) {
            ob->len = 0;
            os->n = 0;
            if (!(r = sd_tok_dec_step(leaves[k], w, ib, is, ob, os)) && sd_tok_grown(w, ob->len)) r = SD_TOK_GROWN;
            if (r == SD_TOK_GROWN)
                return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "tokenizer: its decoders grow this text more than %dx (refused)",
                               SD_TOK_MAX_GROWTH);
            if (r)
                return sd_fail(eb, r == SD_OOM ? SPECDEC_ERR_OUT_OF_MEMORY : SPECDEC_ERR_INTERNAL,
                               "tokenizer: %s while decoding", r == SD_OOM ? "out of memory" : "regex engine error");
            sd_tok_buf *tb = ib; ib = ob; ob = tb;
            sd_tok_spans *ts = is; is = os; os = ts;
        }
        for (size_t i = 0; i < is->n; i++)
            if (sd_tok_buf_put(out, sd_tok_buf_at(ib, is->v[i].off), is->v[i].len))
                return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer: out of memory while decoding");
    } else {
        for (size_t i = 0; i < is->n; i++)
            if ((i && sd_tok_buf_put(out, " ", 1)) || sd_tok_buf_put(out, sd_tok_buf_at(ib, is->v[i].off), is->v[i].len))
                return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer: out of memory while decoding");
    }
    return SPECDEC_OK;
}

specdec_status specdec_detokenize(const specdec_tokenizer *tok, const int32_t *ids, int32_t n_ids, int skip_special, char *text,
                                  size_t capacity, size_t *len) {
    if (len) *len = 0;
    if (!tok || !len || n_ids < 0 || (!ids && n_ids) || (!text && capacity))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_detokenize: NULL argument or n_ids < 0");
    sd_tok_work w = {0};
    sd_tok_buf out = {0};
    specdec_status st = sd_tok_decode_into(tok, &w, ids, (size_t)n_ids, skip_special, &out, NULL);
    if (!st) {
        *len = out.len;
        if (out.len + 1 > capacity) {
            st = sd_fail(NULL, SPECDEC_ERR_BUFFER_TOO_SMALL, "specdec_detokenize: %zu bytes + NUL do not fit in %zu", out.len,
                         capacity);
            if (capacity) text[0] = '\0';
        } else {
            if (out.len) memcpy(text, out.p, out.len);
            text[out.len] = '\0';
        }
    }
    sd_tok_buf_free(&out);
    sd_tok_work_free(&w);
    return st;
}

specdec_status specdec_token_to_piece(const specdec_tokenizer *tok, int32_t id, char *buf, size_t capacity, size_t *len) {
    if (len) *len = 0;
    if (!tok || !len || (!buf && capacity))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_token_to_piece: NULL argument");
    size_t l;
    const char *s = sd_tok_id_str(tok, id, &l);
    if (!s)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_token_to_piece: id %d is not in the vocabulary (size %d)",
                       id, tok->n_ids);
    *len = l;
    if (l + 1 > capacity) {
        if (capacity) buf[0] = '\0';
        return sd_fail(NULL, SPECDEC_ERR_BUFFER_TOO_SMALL, "specdec_token_to_piece: %zu bytes + NUL do not fit in %zu", l,
                       capacity);
    }
    memcpy(buf, s, l);
    buf[l] = '\0';
    return SPECDEC_OK;
}

/* ---- streaming -------------------------------------------------------------------------- */
struct specdec_detok_stream {
    const specdec_tokenizer *tok;
    int skip;
    int32_t *ids;
    size_t n, cap;
    size_t prefix_index;
    sd_tok_buf prefix, cur, out;
    sd_tok_work w;
};

specdec_status specdec_detok_stream_create(const specdec_tokenizer *tok, int skip_special, specdec_detok_stream **out) {
    if (out) *out = NULL;
    if (!tok || !out) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_detok_stream_create: NULL argument");
    specdec_detok_stream *s = sd_calloc(1, sizeof *s);
    if (!s) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_detok_stream_create: out of memory");
    s->tok = tok;
    s->skip = skip_special;
    /* pre-size so that ordinary generation does not allocate per token */
    s->cap = 16;
    s->ids = sd_malloc(s->cap * sizeof *s->ids);
    if (!s->ids || sd_tok_buf_reserve(&s->prefix, 256) || sd_tok_buf_reserve(&s->cur, 256) || sd_tok_buf_reserve(&s->out, 256)) {
        specdec_detok_stream_free(s);
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_detok_stream_create: out of memory");
    }
    *out = s;
    return SPECDEC_OK;
}

void specdec_detok_stream_free(specdec_detok_stream *s) {
    if (!s) return;
    sd_free(s->ids);
    sd_tok_buf_free(&s->prefix);
    sd_tok_buf_free(&s->cur);
    sd_tok_buf_free(&s->out);
    sd_tok_work_free(&s->w);
    sd_free(s);
}

static int sd_tok_ends_fffd(const sd_tok_buf *b) {
    return b->len >= 3 && !memcmp(b->p + b->len - 3, "\xEF\xBF\xBD", 3);
}

static specdec_status sd_tok_stream_decode(specdec_detok_stream *s, const int32_t *ids, size_t n, sd_tok_buf *into) {
    into->len = 0;
    return sd_tok_decode_into(s->tok, &s->w, ids, n, s->skip, into, NULL);
}

/* The window's text no longer starts with the text already emitted: the new ids
 * rewrote it. With real tokenizers only ByteFallback does this (a run of <0xNN> bytes
 * that was valid UTF-8 becomes invalid, and decode then turns the whole run, emitted
 * bytes included, into U+FFFD); the library's DecodeStream fails there ("invalid
 * prefix"). Emitted text is final, so restart the window at the ids not yet emitted
 * and decode them alone into s->cur (with an empty prefix). */
static specdec_status sd_tok_stream_resync(specdec_detok_stream *s) {
    memmove(s->ids, s->ids + s->prefix_index, (s->n - s->prefix_index) * sizeof *s->ids);
    s->n -= s->prefix_index;
    s->prefix_index = 0;
    s->prefix.len = 0;
    return sd_tok_stream_decode(s, s->ids, s->n, &s->cur);
}

static int sd_tok_stream_starts_with_prefix(const specdec_detok_stream *s) {
    return s->cur.len >= s->prefix.len && !memcmp(sd_tok_buf_at(&s->cur, 0), sd_tok_buf_at(&s->prefix, 0), s->prefix.len);
}

specdec_status specdec_detok_stream_push(specdec_detok_stream *s, int32_t id, const char **text, size_t *len) {
    if (text) *text = "";
    if (len) *len = 0;
    if (!s || !text || !len) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_detok_stream_push: NULL argument");
    specdec_status st;
    if (s->prefix.len == 0 && s->n) {
        if ((st = sd_tok_stream_decode(s, s->ids, s->n, &s->cur))) return st;
        if (!sd_tok_ends_fffd(&s->cur)) {
            sd_tok_buf t = s->prefix; s->prefix = s->cur; s->cur = t;
            s->prefix_index = s->n;
        }
    }
    if (s->n == s->cap) {
        int32_t *p = sd_realloc(s->ids, 2 * s->cap * sizeof *p);
        if (!p) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_detok_stream_push: out of memory");
        s->ids = p;
        s->cap *= 2;
    }
    s->ids[s->n++] = id;
    if ((st = sd_tok_stream_decode(s, s->ids, s->n, &s->cur))) { s->n--; return st; }
    if (s->cur.len > s->prefix.len && !sd_tok_ends_fffd(&s->cur) && !sd_tok_stream_starts_with_prefix(s) &&
        (st = sd_tok_stream_resync(s)))
        return st;
    if (s->cur.len > s->prefix.len && !sd_tok_ends_fffd(&s->cur)) {
        s->out.len = 0;
        if (sd_tok_buf_put(&s->out, s->cur.p + s->prefix.len, s->cur.len - s->prefix.len))
            return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_detok_stream_push: out of memory");
        size_t new_prefix_index = s->n - s->prefix_index;
        memmove(s->ids, s->ids + s->prefix_index, (s->n - s->prefix_index) * sizeof *s->ids);
        s->n -= s->prefix_index;
        if ((st = sd_tok_stream_decode(s, s->ids, s->n, &s->prefix))) return st;
        s->prefix_index = new_prefix_index;
        *text = s->out.p;
        *len = s->out.len;
    }
    return SPECDEC_OK;
}

specdec_status specdec_detok_stream_flush(specdec_detok_stream *s, const char **text, size_t *len) {
    if (text) *text = "";
    if (len) *len = 0;
    if (!s || !text || !len) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_detok_stream_flush: NULL argument");
    specdec_status st = sd_tok_stream_decode(s, s->ids, s->n, &s->cur);
    if (st) return st;
    if (!sd_tok_stream_starts_with_prefix(s) && (st = sd_tok_stream_resync(s))) return st;
    s->out.len = 0;
    if (s->cur.len > s->prefix.len && sd_tok_buf_put(&s->out, s->cur.p + s->prefix.len, s->cur.len - s->prefix.len))
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "specdec_detok_stream_flush: out of memory");
    /* the sequence ends here: the next push starts a fresh one */
    s->n = 0;
    s->prefix_index = 0;
    s->prefix.len = 0;
    *text = s->out.p ? s->out.p : "";
    *len = s->out.len;
    return SPECDEC_OK;
}

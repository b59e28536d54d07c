/* sd_tokenizer_grammar.c — structured output's view of a tokenizer (docs/STRUCTURED.md): every
 * token's bytes as they appear inside a text, kept with the tokenizer (core/sd_grammar.h's
 * vocabulary; specdec_grammar_compile, tokenizer/sd_grammar_compile.c, puts an automaton over it).
 *
 * A token's bytes: its vocabulary string through the decoder chain, each decoder as it treats a
 * token in the middle of a text: ByteLevel maps its characters back to bytes (kept raw: a token
 * may hold part of a UTF-8 character), Metaspace turns its replacement into a space, ByteFallback
 * turns "<0xHH>" into that byte, Replace and BPEDecoder (suffix -> space) replace; Fuse and
 * Strip, which act on the start or the whole of a text, do nothing to one token. Added tokens that
 * are not special keep their content; special tokens and holes have no text and a grammar never
 * allows them (the end tokens apart, core/sd_grammar.h). */
#include <pthread.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_grammar.h"
#include "sd_tokenizer.h"

/* One decoder applied to one token's bytes in a (in), result in b (out). 0, or SD_OOM-style -1/-2. */
static int sd_tokg_leaf(const sd_tok_dec *d, sd_tok_work *w, sd_tok_buf *in, sd_tok_buf *out) {
    const char *s = sd_tok_buf_at(in, 0);
    const size_t n = in->len;
    out->len = 0;
    switch (d->kind) {
    case SD_DEC_BYTELEVEL: {
        for (size_t q = 0; q < n;) {
            int32_t cp;
            q += sd_utf8_next(s + q, n - q, &cp);
            const int b = sd_tok_cp_to_byte(cp);
            if (b < 0) { /* a character outside the table: the token keeps its UTF-8 */
                out->len = 0;
                return sd_tok_buf_put(out, s, n);
            }
            const char c = (char)b;
            if (sd_tok_buf_put(out, &c, 1)) return -1;
        }
        return 0;
    }
    case SD_DEC_METASPACE:
        return sd_tok_replace_all(w, d->rep, d->rep_len, NULL, " ", 1, s, n, out);
    case SD_DEC_BYTEFALLBACK: {
        const int b = sd_tok_byte_token(s, n);
        const char c = (char)b;
        return b >= 0 ? sd_tok_buf_put(out, &c, 1) : sd_tok_buf_put(out, s, n);
    }
    case SD_DEC_REPLACE:
        return sd_tok_replace_all(w, d->str, d->str_len, &d->re, d->content, d->content_len, s, n, out);
    case SD_DEC_BPE:
        return sd_tok_replace_all(w, d->str, d->str_len, NULL, " ", 1, s, n, out);
    default: /* Fuse, Strip */
        return sd_tok_buf_put(out, s, n);
    }
}

/* Token id's bytes appended to all (with its offset and text flag). */
static int sd_tokg_token(const specdec_tokenizer *t, sd_tok_work *w, const sd_tok_dec **leaves, int nl, int32_t id,
                         sd_tok_buf *all, uint8_t *text) {
    size_t l;
    const char *s = sd_tok_id_str(t, id, &l);
    *text = s && !sd_tok_is_special(t, id);
    if (!*text) return 0;
    if (t->id_entry[id] <= -2) return sd_tok_buf_put(all, s, l); /* a non-special added token: its content */
    sd_tok_buf *a = &w->a, *b = &w->b;
    a->len = 0;
    if (sd_tok_buf_put(a, s, l)) return -1;
    for (int k = 0; k < nl; k++) {
        const int r = sd_tokg_leaf(leaves[k], w, a, b);
        if (r) return r;
        sd_tok_buf *x = a;
        a = b;
        b = x;
    }
    return sd_tok_buf_put(all, sd_tok_buf_at(a, 0), a->len);
}

static specdec_status sd_tokg_build(const specdec_tokenizer *t, sd_grammar_vocab **out, sd_errbuf *eb) {
    const int32_t n = t->n_ids;
    uint32_t *off = sd_malloc(((size_t)n + 1) * sizeof *off);
    uint8_t *text = sd_malloc((size_t)(n > 0 ? n : 1));
    sd_tok_buf all = {0};
    sd_tok_work w = {0};
    const sd_tok_dec *leaves[64];
    int nl = 0;
    if (t->dec && sd_tok_dec_flatten(t->dec, leaves, &nl, 64)) {
        sd_free(off);
        sd_free(text);
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "grammar: the tokenizer has more than 64 decoders");
    }
    int r = off && text ? 0 : -1;
    for (int32_t id = 0; id < n && !r; id++) {
        off[id] = (uint32_t)all.len;
        r = sd_tokg_token(t, &w, leaves, nl, id, &all, &text[id]);
        if (!r && all.len > UINT32_MAX - SD_TOK_MAX_TOKEN_BYTES) r = -1;
    }
    sd_tok_work_free(&w);
    if (r) {
        sd_free(off);
        sd_free(text);
        sd_tok_buf_free(&all);
        return sd_fail(eb, r == -1 ? SPECDEC_ERR_OUT_OF_MEMORY : SPECDEC_ERR_INTERNAL,
                       "grammar: %s while reading the vocabulary's bytes", r == -1 ? "out of memory" : "regex engine error");
    }
    off[n] = (uint32_t)all.len;
    uint8_t *bytes = all.p ? (uint8_t *)all.p : sd_malloc(1);
    return sd_grammar_vocab_create(n, off, bytes, text, out, eb);
}

specdec_status sd_tok_grammar_vocab(const specdec_tokenizer *ct, sd_grammar_vocab **out, sd_errbuf *eb) {
    specdec_tokenizer *t = (specdec_tokenizer *)ct; /* the cache is the only thing that changes */
    specdec_status st = SPECDEC_OK;
    pthread_mutex_lock(&t->gv_lock);
    if (!t->gv) st = sd_tokg_build(t, &t->gv, eb);
    if (st == SPECDEC_OK) {
        sd_grammar_vocab_retain(t->gv);
        *out = t->gv;
    }
    pthread_mutex_unlock(&t->gv_lock);
    return st;
}


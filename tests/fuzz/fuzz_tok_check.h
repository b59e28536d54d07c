/* fuzz_tok_check.h — the contract of a loaded tokenizer as include/specdec.h states it,
 * checked on fuzzed text and ids. Shared by fuzz_tokenizer.c (fuzzed tokenizer.json)
 * and fuzz_tokenizer_real.c (real vocabularies, fuzzed text and ids).
 *
 * Checked: statuses are documented ones; BUFFER_TOO_SMALL reports the size needed and
 * the exact size then succeeds with the same result; ids are inside the vocabulary;
 * detokenize writes a NUL; the streaming decoder's pieces plus its flush concatenate
 * to detokenize's text (the header promises it) and a piece is never NULL when it has
 * bytes (unless a byte-fallback run turns invalid, the exception specdec.h documents);
 * token_to_piece refuses ids outside the vocabulary. A fuzzed tokenizer.json
 * may legitimately be refused at use time (more than 64 decoders or pre-tokenizers, a
 * regex engine error), so `lenient` allows those statuses there, and its decoder chain
 * may make the streamed text differ from the whole decode; the real tokenizers must
 * do neither. */
#ifndef FUZZ_TOK_CHECK_H
#define FUZZ_TOK_CHECK_H

#include "fuzz_common.h"
#include "sd_tokenizer.h"
#include "specdec.h"

typedef struct sd_ftok_opts {
    int lenient;     /* fuzzed tokenizer.json: UNSUPPORTED/INTERNAL at use time are allowed */
    int utf8_output; /* decoded text must be well-formed UTF-8 */
} sd_ftok_opts;

/* "<0xHH>" -> the byte, else -1 (what the ByteFallback decoder reads as a byte). */
static int sd_ftok_byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : i == 3 && c == '+' ? 0 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The exception specdec.h documents for the streaming decoder: some run of
 * byte-fallback tokens (consecutive among the ids decode keeps) is valid UTF-8 up to
 * one of its tokens but invalid as a whole. Then streamed text may differ from
 * detokenize; otherwise it may not. */
static int sd_ftok_run_rewrites(const specdec_tokenizer *tok, const int32_t *ids, int32_t n, int skip) {
    char *run = malloc((size_t)n + 1);
    sd_fuzz_require(run != NULL);
    size_t rl = 0;
    int prefix_ok = 0, found = 0;
    for (int32_t i = 0; i <= n && !found; i++) {
        int b = -1;
        if (i < n) {
            size_t l = 0;
            const char *s = sd_tok_id_str(tok, ids[i], &l);
            if (!s || (skip && sd_tok_is_special(tok, ids[i]))) continue; /* decode drops it */
            b = sd_ftok_byte_token(s, l);
        }
        if (b >= 0) {
            if (rl > 0 && sd_fuzz_utf8_ok(run, rl)) prefix_ok = 1;
            run[rl++] = (char)b;
            continue;
        }
        found = rl > 0 && prefix_ok && !sd_fuzz_utf8_ok(run, rl);
        rl = 0;
        prefix_ok = 0;
    }
    free(run);
    return found;
}

/* Encode text; returns the ids (malloc'd, caller frees) in *ids, or NULL when the
 * tokenizer refused the text with an allowed status. */
static int32_t *sd_ftok_encode(const specdec_tokenizer *tok, const char *text, size_t len, int add_special,
                               const sd_ftok_opts *o, int32_t *n_ids) {
    int32_t n = -1;
    specdec_status st = specdec_tokenize(tok, text, len, add_special, NULL, 0, &n);
    if (st != SPECDEC_OK && st != SPECDEC_ERR_BUFFER_TOO_SMALL) {
        sd_fuzz_require(o->lenient && (st == SPECDEC_ERR_UNSUPPORTED || st == SPECDEC_ERR_INTERNAL));
        sd_fuzz_require(n == 0);
        return NULL;
    }
    sd_fuzz_require(st == SPECDEC_OK ? n == 0 : n > 0);
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    sd_fuzz_require(ids != NULL);
    int32_t m = -1;
    st = specdec_tokenize(tok, text, len, add_special, ids, n, &m);
    sd_fuzz_require(st == SPECDEC_OK && m == n);
    const int32_t V = specdec_tokenizer_vocab_size(tok);
    for (int32_t i = 0; i < n; i++) sd_fuzz_require(ids[i] >= 0 && ids[i] < V);
    if (n > 0) {
        st = specdec_tokenize(tok, text, len, add_special, ids, n - 1, &m);
        sd_fuzz_require(st == SPECDEC_ERR_BUFFER_TOO_SMALL && m == n);
    }
    *n_ids = n;
    return ids;
}

/* detokenize + streaming decoder + token_to_piece over ids[0..n). */
static void sd_ftok_decode(const specdec_tokenizer *tok, const int32_t *ids, int32_t n, int skip,
                           const sd_ftok_opts *o) {
    size_t need = 12345;
    specdec_status st = specdec_detokenize(tok, ids, n, skip, NULL, 0, &need);
    if (st != SPECDEC_ERR_BUFFER_TOO_SMALL) {
        sd_fuzz_require(o->lenient && (st == SPECDEC_ERR_UNSUPPORTED || st == SPECDEC_ERR_INTERNAL));
        return;
    }
    char *text = malloc(need + 1);
    sd_fuzz_require(text != NULL);
    size_t len = 0;
    st = specdec_detokenize(tok, ids, n, skip, text, need + 1, &len);
    sd_fuzz_require(st == SPECDEC_OK && len == need && text[len] == '\0');
    if (o->utf8_output) sd_fuzz_require(sd_fuzz_utf8_ok(text, len));
    if (need > 0) {
        size_t l2 = 0;
        st = specdec_detokenize(tok, ids, n, skip, text, need, &l2);
        sd_fuzz_require(st == SPECDEC_ERR_BUFFER_TOO_SMALL && l2 == need && text[0] == '\0');
        st = specdec_detokenize(tok, ids, n, skip, text, need + 1, &l2); /* restore */
        sd_fuzz_require(st == SPECDEC_OK && l2 == need);
    }

    /* streaming: pieces + flush == detokenize */
    specdec_detok_stream *s = NULL;
    st = specdec_detok_stream_create(tok, skip, &s);
    sd_fuzz_require(st == SPECDEC_OK && s != NULL);
    sd_fuzz_buf cat = {0};
    int broken = 0;
    for (int32_t i = 0; i < n && !broken; i++) {
        const char *piece = NULL;
        size_t pl = 99;
        st = specdec_detok_stream_push(s, ids[i], &piece, &pl);
        if (st != SPECDEC_OK) {
            sd_fuzz_require(o->lenient && st == SPECDEC_ERR_INTERNAL);
            broken = 1;
            break;
        }
        sd_fuzz_require(piece != NULL || pl == 0);
        if (o->utf8_output) sd_fuzz_require(sd_fuzz_utf8_ok(piece, pl));
        sd_fuzz_buf_put(&cat, piece, pl);
    }
    if (!broken) {
        const char *piece = NULL;
        size_t pl = 99;
        st = specdec_detok_stream_flush(s, &piece, &pl);
        if (st != SPECDEC_OK) {
            sd_fuzz_require(o->lenient && (st == SPECDEC_ERR_UNSUPPORTED || st == SPECDEC_ERR_INTERNAL));
        } else {
            sd_fuzz_require(piece != NULL);
            if (o->utf8_output) sd_fuzz_require(sd_fuzz_utf8_ok(piece, pl));
            sd_fuzz_buf_put(&cat, piece, pl);
            int same = cat.len == need && (need == 0 || !memcmp(cat.p, text, need));
            /* Exceptions: a byte-fallback run that turns invalid (documented in
             * specdec.h), or a fuzzed decoder chain whose output depends on ids left of
             * the window (a Replace regex across tokens after Fuse): the library's
             * DecodeStream does not promise equality there either. */
            if (!same && !o->lenient && !sd_ftok_run_rewrites(tok, ids, n, skip)) {
                fprintf(stderr, "stream != detokenize for %d ids (skip_special %d):", (int)n, skip);
                for (int32_t i = 0; i < n; i++) fprintf(stderr, " %d", (int)ids[i]);
                fprintf(stderr, "\n  detokenize: %zu bytes \"%.*s\"\n  stream:     %zu bytes \"%.*s\"\n", need,
                        (int)need, text, cat.len, (int)cat.len, cat.p ? cat.p : "");
                sd_fuzz_require(same);
            }
            /* the sequence ended: a second flush has nothing left */
            st = specdec_detok_stream_flush(s, &piece, &pl);
            sd_fuzz_require(st == SPECDEC_OK && pl == 0);
        }
    }
    specdec_detok_stream_free(s);
    free(cat.p);
    free(text);

    /* token_to_piece: ids outside [0, V) are refused; a short buffer reports the size */
    const int32_t V = specdec_tokenizer_vocab_size(tok);
    for (int32_t i = 0; i < n && i < 64; i++) {
        char buf[64];
        size_t pl = 0;
        st = specdec_token_to_piece(tok, ids[i], buf, sizeof buf, &pl);
        if (ids[i] < 0 || ids[i] >= V) {
            sd_fuzz_require(st == SPECDEC_ERR_INVALID_ARGUMENT);
            continue;
        }
        sd_fuzz_require(st == SPECDEC_OK || st == SPECDEC_ERR_INVALID_ARGUMENT /* a hole in the ids */ ||
                        (st == SPECDEC_ERR_BUFFER_TOO_SMALL && pl + 1 > sizeof buf));
        if (st == SPECDEC_OK) {
            sd_fuzz_require(buf[pl] == '\0');
            if (pl > 0) {
                size_t p2 = 0;
                st = specdec_token_to_piece(tok, ids[i], buf, pl, &p2);
                sd_fuzz_require(st == SPECDEC_ERR_BUFFER_TOO_SMALL && p2 == pl);
            }
        }
    }
}

#endif

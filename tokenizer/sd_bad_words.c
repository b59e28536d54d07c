/* sd_bad_words.c — vLLM's bad_words as token sequences (specdec_tokenize_bad_words; vLLM's
 * SamplingParams.update_from_tokenizer is the reference, docs/SAMPLING.md): each word with its
 * leading white space removed, tokenized without special tokens; then " " + that text, kept as
 * a second sequence only when it starts with another id and has the same length (a word that
 * tokenizes differently after a space, as at the start of a text and in its middle). */
#include <string.h>

#include "sd_alloc.h"
#include "sd_error.h"
#include "specdec.h"

#define BW_FN "specdec_tokenize_bad_words"

/* Appends tmp[0..k) as sequence *n, within the limits; word i is named in the error. */
static specdec_status bw_append(const int32_t *tmp, int32_t k, int32_t i, int32_t *ids, int32_t *offsets,
                                int32_t *n) {
    if (k == 0) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: words[%d] gives no tokens", BW_FN, (int)i);
    if (*n == SPECDEC_MAX_BAD_WORDS || k > SPECDEC_MAX_BAD_WORDS_TOKENS - offsets[*n])
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                       "%s: words[0..%d] give more than %d sequences or %d token ids in all", BW_FN, (int)i,
                       SPECDEC_MAX_BAD_WORDS, SPECDEC_MAX_BAD_WORDS_TOKENS);
    memcpy(ids + offsets[*n], tmp, (size_t)k * sizeof *tmp);
    offsets[*n + 1] = offsets[*n] + k;
    (*n)++;
    return SPECDEC_OK;
}

/* The ids of text (no special tokens) into tmp[0..SPECDEC_MAX_BAD_WORDS_TOKENS); *k their
 * count, which may exceed that (then tmp is not filled and bw_append refuses it). */
static specdec_status bw_tokenize(const specdec_tokenizer *tok, const char *text, size_t len, int32_t *tmp, int32_t *k) {
    const specdec_status st = specdec_tokenize(tok, text, len, 0, tmp, SPECDEC_MAX_BAD_WORDS_TOKENS, k);
    return st == SPECDEC_ERR_BUFFER_TOO_SMALL ? SPECDEC_OK : st;
}

/* Word i: its plain sequence, then the spaced one if vLLM keeps it. */
static specdec_status bw_word(const specdec_tokenizer *tok, const char *word, int32_t i, int32_t *tmp, int32_t *ids,
                              int32_t *offsets, int32_t *n) {
    const char *w = word + strspn(word, " \t\n\v\f\r");
    const size_t len = strlen(w);
    if (len == 0)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: words[%d] is empty or only white space", BW_FN, (int)i);
    int32_t k = 0;
    specdec_status st = bw_tokenize(tok, w, len, tmp, &k);
    if (st == SPECDEC_OK) st = bw_append(tmp, k, i, ids, offsets, n);
    if (st != SPECDEC_OK) return st;
    const int32_t plain = *n - 1, k_plain = k;
    char *spaced = sd_malloc(len + 2);
    if (!spaced) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: %zu bytes for words[%d]", BW_FN, len + 2, (int)i);
    spaced[0] = ' ';
    memcpy(spaced + 1, w, len + 1);
    st = bw_tokenize(tok, spaced, len + 1, tmp, &k);
    sd_free(spaced);
    if (st != SPECDEC_OK || k != k_plain || tmp[0] == ids[offsets[plain]]) return st;
    return bw_append(tmp, k, i, ids, offsets, n);
}

specdec_status specdec_tokenize_bad_words(const specdec_tokenizer *tok, const char *const *words, int32_t n_words,
                                          int32_t *ids, int32_t *offsets, int32_t *n_seqs) {
    if (n_seqs) *n_seqs = 0;
    if (!tok || !ids || !offsets || !n_seqs || n_words < 0 || (n_words > 0 && !words))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: NULL tokenizer, words, ids, offsets or n_seqs, or n_words %d",
                       BW_FN, (int)n_words);
    int32_t *tmp = sd_malloc(SPECDEC_MAX_BAD_WORDS_TOKENS * sizeof *tmp);
    if (!tmp) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: scratch", BW_FN);
    offsets[0] = 0;
    int32_t n = 0;
    specdec_status st = SPECDEC_OK;
    for (int32_t i = 0; i < n_words && st == SPECDEC_OK; i++)
        st = words[i] ? bw_word(tok, words[i], i, tmp, ids, offsets, &n)
                      : sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: words[%d] is NULL", BW_FN, (int)i);
    sd_free(tmp);
    *n_seqs = st == SPECDEC_OK ? n : 0;
    return st;
}

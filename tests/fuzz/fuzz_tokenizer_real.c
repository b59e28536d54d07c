/* fuzz_tokenizer_real.c — fuzz target: the real tokenizers of ../shared/tokenizers
 * (GPT-2, Llama 2 and 3, Mistral, Phi-3, Qwen2.5) on fuzzed text and fuzzed ids.
 *
 * The folder is $SPECDEC_SHARED_DIR/tokenizers, else the SPECDEC_SHARED_DIR compiled in
 * by CMake (../shared beside the source tree); without it the target skips (exit 77).
 * Every tokenizer is loaded once (sd_fuzz_init). Input layout:
 *   byte 0        which tokenizer (mod their number)
 *   byte 1        flags: bit 0 add_special, bit 1 skip_special, bit 2 the text is also a
 *                 list of bad words (split at '\n'; vLLM's bad_words, specdec_tokenize_bad_words)
 *   bytes 2..3    text length (little endian, clipped to what is left)
 *   text          encoded, then its ids decoded whole and streamed
 *   rest          ids, 4 bytes each: top nibble 0xF = the raw int32 (far outside the
 *                 vocabulary), else value mod (V + 4) - 2 (so -2..V+1); decoded whole and
 *                 streamed
 * Checked (fuzz_tok_check.h, strict): only documented statuses; sizes reported by
 * BUFFER_TOO_SMALL; ids inside the vocabulary; decoded text and every streamed piece
 * is well-formed UTF-8; pieces + flush == detokenize except after a byte-fallback run
 * that turns invalid (the exception specdec.h documents). For the byte-level tokenizers without a normalizer (GPT-2, Llama 3) also
 * decode(encode(x), skip_special = 0) == x with invalid UTF-8 replaced, which the
 * `tokenizers` library guarantees for them (every byte has a token, nothing is
 * normalised or stripped); for the others decode(encode(x)) is not x in general
 * (Prepend "▁", NFC, added tokens that strip spaces), so it is not asserted.
 * Bad words: only OK or INVALID_ARGUMENT; on OK the sequences are well formed (offsets from 0,
 * increasing, within the documented limits, ids inside the vocabulary), one or two per word, the
 * first being specdec_tokenize of the word after leading ASCII white space. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "fuzz_tok_check.h"
#include "sd_tokenizer.h"
#include "specdec.h"

#ifndef SPECDEC_SHARED_DIR
#define SPECDEC_SHARED_DIR "../shared"
#endif

#define SD_FREAL_MAX 16

static struct {
    specdec_tokenizer *tok;
    int roundtrip; /* decode(encode(x)) == x holds */
    char name[64];
} sd_freal[SD_FREAL_MAX];
static int sd_freal_n;

static int sd_freal_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int sd_fuzz_init(void) {
    const char *shared = getenv("SPECDEC_SHARED_DIR");
    if (!shared || !*shared) shared = SPECDEC_SHARED_DIR;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tokenizers", shared);
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz_tokenizer_real: no %s: skipped\n", dir);
        return SD_FUZZ_SKIP;
    }
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, sd_freal_cmp); /* byte 0 means the same tokenizer on every machine */
    for (int i = 0; i < n; i++) {
        char path[8192];
        struct stat stt;
        snprintf(path, sizeof path, "%s/%s/tokenizer.json", dir, names[i]);
        if (sd_freal_n < SD_FREAL_MAX && stat(path, &stt) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            specdec_tokenizer *t = NULL;
            specdec_status st = specdec_tokenizer_load(path, &t);
            if (st != SPECDEC_OK) {
                fprintf(stderr, "fuzz_tokenizer_real: %s does not load: %s\n", path, specdec_last_error());
                return 1;
            }
            sd_freal[sd_freal_n].tok = t;
            sd_freal[sd_freal_n].roundtrip = !strcmp(names[i], "gpt2") || !strcmp(names[i], "llama-3-8b");
            snprintf(sd_freal[sd_freal_n].name, sizeof sd_freal[0].name, "%s", names[i]);
            sd_freal_n++;
        }
        free(names[i]);
    }
    if (sd_freal_n == 0) {
        fprintf(stderr, "fuzz_tokenizer_real: no tokenizer.json under %s: skipped\n", dir);
        return SD_FUZZ_SKIP;
    }
    fprintf(stderr, "fuzz_tokenizer_real: %d tokenizers from %s\n", sd_freal_n, dir);
    return 0;
}

/* decode(encode(x)) == x with invalid UTF-8 replaced (byte-level tokenizers only). */
static void sd_freal_roundtrip(const specdec_tokenizer *tok, const char *text, size_t len, const sd_ftok_opts *o) {
    int32_t n = 0;
    int32_t *ids = sd_ftok_encode(tok, text, len, 0, o, &n);
    sd_tok_buf want = {0};
    sd_fuzz_require(sd_tok_utf8_sanitize(&want, len ? text : "", len) == 0);
    size_t got_len = 0;
    specdec_status st = specdec_detokenize(tok, ids, n, 0, NULL, 0, &got_len);
    sd_fuzz_require(st == SPECDEC_ERR_BUFFER_TOO_SMALL);
    char *got = malloc(got_len + 1);
    sd_fuzz_require(got != NULL);
    st = specdec_detokenize(tok, ids, n, 0, got, got_len + 1, &got_len);
    sd_fuzz_require(st == SPECDEC_OK);
    if (got_len != want.len || (got_len && memcmp(got, want.p, got_len))) {
        fprintf(stderr, "round trip differs: text %zu bytes -> %d ids -> %zu bytes\n", want.len, (int)n, got_len);
        sd_fuzz_require(!"decode(encode(x)) == x");
    }
    free(got);
    sd_tok_buf_free(&want);
    free(ids);
}

/* The text split at '\n' into words (NUL-terminated copies), tokenized as bad words. */
static void sd_freal_bad_words(const specdec_tokenizer *tok, const char *text, size_t len) {
    enum { MAXW = SPECDEC_MAX_BAD_WORDS + 8 };
    char *buf = malloc(len + 1);
    sd_fuzz_require(buf != NULL);
    if (len) memcpy(buf, text, len);
    buf[len] = '\0';
    const char *words[MAXW];
    int32_t nw = 0;
    for (char *w = buf; nw < MAXW;) {
        char *nl = strchr(w, '\n');
        words[nw++] = w;
        if (!nl) break;
        *nl = '\0';
        w = nl + 1;
    }
    static int32_t ids[SPECDEC_MAX_BAD_WORDS_TOKENS], off[SPECDEC_MAX_BAD_WORDS + 1];
    int32_t n_seqs = -1;
    specdec_status st = specdec_tokenize_bad_words(tok, words, nw, ids, off, &n_seqs);
    sd_fuzz_require(st == SPECDEC_OK || st == SPECDEC_ERR_INVALID_ARGUMENT);
    if (st == SPECDEC_OK) {
        const int32_t V = specdec_tokenizer_vocab_size(tok);
        sd_fuzz_require(n_seqs >= nw && n_seqs <= 2 * nw && n_seqs <= SPECDEC_MAX_BAD_WORDS && off[0] == 0);
        for (int32_t s = 0; s < n_seqs; s++) sd_fuzz_require(off[s + 1] > off[s]);
        sd_fuzz_require(off[n_seqs] <= SPECDEC_MAX_BAD_WORDS_TOKENS);
        for (int32_t i = 0; i < off[n_seqs]; i++) sd_fuzz_require(ids[i] >= 0 && ids[i] < V);
        /* the first word's first sequence is its plain tokenization after leading white space */
        const char *w0 = words[0];
        while (*w0 == ' ' || *w0 == '\t' || *w0 == '\n' || *w0 == '\r' || *w0 == '\f' || *w0 == '\v') w0++;
        int32_t n0 = 0;
        int32_t *t0 = sd_ftok_encode(tok, w0, strlen(w0), 0, &(sd_ftok_opts){0, 1}, &n0);
        sd_fuzz_require(t0 != NULL && n0 == off[1] && !memcmp(t0, ids, sizeof(int32_t) * (size_t)n0));
        free(t0);
    }
    free(buf);
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    if (sd_freal_n == 0) return 0;
    sd_fuzz_in in = {data, size};
    const int which = sd_fuzz_u8(&in) % sd_freal_n;
    const specdec_tokenizer *tok = sd_freal[which].tok;
    const uint8_t flags = sd_fuzz_u8(&in);
    const int add_special = flags & 1, skip = (flags >> 1) & 1;
    size_t tl = sd_fuzz_u8(&in);
    tl |= (size_t)sd_fuzz_u8(&in) << 8;
    if (tl > in.n) tl = in.n;
    const char *text = (const char *)in.p;
    in.p += tl;
    in.n -= tl;
    const sd_ftok_opts o = {0, 1};

    int32_t n = 0;
    int32_t *ids = sd_ftok_encode(tok, tl ? text : "", tl, add_special, &o, &n);
    sd_fuzz_require(ids != NULL);
    sd_ftok_decode(tok, ids, n, skip, &o);
    free(ids);
    if (sd_freal[which].roundtrip) sd_freal_roundtrip(tok, tl ? text : "", tl, &o);
    if (flags & 4) sd_freal_bad_words(tok, tl ? text : "", tl);

    const int32_t V = specdec_tokenizer_vocab_size(tok);
    const int32_t m = (int32_t)(in.n / 4);
    if (m > 0) {
        int32_t *fid = malloc((size_t)m * sizeof *fid);
        sd_fuzz_require(fid != NULL);
        for (int32_t i = 0; i < m; i++) {
            uint32_t r = sd_fuzz_u32(&in);
            fid[i] = (r >> 28) == 0xF ? (int32_t)r : (int32_t)(r % (uint32_t)(V + 4)) - 2;
        }
        sd_ftok_decode(tok, fid, m, skip, &o);
        free(fid);
    }
    return 0;
}

SD_FUZZ_DEFINE_ENTRY_WITH_INIT

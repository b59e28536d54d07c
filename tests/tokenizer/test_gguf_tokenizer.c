/* test_gguf_tokenizer.c — tokenizers embedded in GGUF files (tokenizer/sd_gguf_tokenizer.c).
 *
 * GGUF files are written here, key by key: a small byte-level ("gpt2") and a small SentencePiece
 * ("llama") vocabulary load and encode as the published tokenizers' rules say (merges ranked by the
 * scores, byte fallback, BOS, added tokens, chat template), found by the magic whatever the file's
 * name; a Gemma one by transformers' Gemma rules (white-space tokens respelt, merges by file position,
 * no prefix space, UNUSED tokens kept); then hostile metadata (missing / mistyped keys, counts that disagree, ids out of range, merges
 * naming unknown tokens, invalid UTF-8, NUL bytes, huge strings, unknown models and pre-tokenizers,
 * every truncation of a valid file, an allocation failure at every point) gives a status and a
 * message naming the key, never a crash. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sd_alloc.h"
#include "sd_gguf_tokenizer.h"
#include "sd_test.h"
#include "specdec.h"

/* ---- a GGUF writer ------------------------------------------------------------------------------ */
typedef struct { unsigned char *p; size_t n, cap; uint64_t n_kv; } gw;

static void put(gw *w, const void *s, size_t n) {
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 256;
        w->p = realloc(w->p, w->cap);
        if (!w->p) { fprintf(stderr, "out of memory\n"); exit(2); }
    }
    memcpy(w->p + w->n, s, n);
    w->n += n;
}
static void u32(gw *w, uint32_t v) { put(w, &v, 4); }
static void u64(gw *w, uint64_t v) { put(w, &v, 8); }
static void strn(gw *w, const char *s, size_t n) { u64(w, n); put(w, s, n); }
static void str(gw *w, const char *s) { strn(w, s, strlen(s)); }
static void key(gw *w, const char *k, uint32_t type) { str(w, k); u32(w, type); w->n_kv++; }
static void kv_str(gw *w, const char *k, const char *v) { key(w, k, 8); str(w, v); }
static void kv_u32(gw *w, const char *k, uint32_t v) { key(w, k, 4); u32(w, v); }
static void kv_bool(gw *w, const char *k, int v) { key(w, k, 7); unsigned char b = (unsigned char)v; put(w, &b, 1); }
static void kv_strs(gw *w, const char *k, const char *const *v, size_t n) {
    key(w, k, 9); u32(w, 8); u64(w, n);
    for (size_t i = 0; i < n; i++) str(w, v[i]);
}
static void kv_i32s(gw *w, const char *k, const int32_t *v, size_t n) {
    key(w, k, 9); u32(w, 5); u64(w, n);
    put(w, v, n * 4);
}
static void kv_f32s(gw *w, const char *k, const float *v, size_t n) {
    key(w, k, 9); u32(w, 6); u64(w, n);
    put(w, v, n * 4);
}
/* The finished file: header (version 3, no tensors) + the entries. */
static unsigned char *finish(gw *w, size_t *len) {
    gw h = {0};
    put(&h, "GGUF", 4);
    u32(&h, 3);
    u64(&h, 0);
    u64(&h, w->n_kv);
    put(&h, w->p, w->n);
    free(w->p);
    *len = h.n;
    return h.p;
}

/* ---- the two vocabularies (a field set to skip / replace is written differently) ----------------- */
enum { F_NONE, F_MODEL, F_PRE, F_TOKENS, F_TYPES, F_SCORES, F_MERGES, F_BOS, F_ADD_BOS, F_TEMPLATE };
typedef struct { int field; int variant; } mut;

/* byte-level: a b c ab abc Ġ Ġa <|eot|>(CONTROL) <x>(USER_DEFINED) [PAD9](UNUSED) */
static unsigned char *gpt2_file(mut m, size_t *len) {
    static const char *toks[] = {"a", "b", "c", "ab", "abc", "\xc4\xa0", "\xc4\xa0" "a", "<|eot|>", "<x>", "[PAD9]"};
    static const int32_t types[] = {1, 1, 1, 1, 1, 1, 1, 3, 4, 5};
    static const char *merges[] = {"a b", "ab c", "\xc4\xa0 a"};
    gw w = {0};
    if (m.field == F_MODEL) {
        if (m.variant == 0) {} /* missing */
        else if (m.variant == 1) kv_u32(&w, "tokenizer.ggml.model", 7);
        else kv_str(&w, "tokenizer.ggml.model", "bert");
    } else {
        kv_str(&w, "tokenizer.ggml.model", "gpt2");
    }
    static const char *pres[] = {"llama-bpe", "made-up-pre", "smollm", "qwen2", "deepseek-r1-qwen", "llama3"};
    if (m.field == F_PRE) kv_str(&w, "tokenizer.ggml.pre", pres[m.variant]);
    else kv_str(&w, "tokenizer.ggml.pre", "gpt-2");
    if (m.field == F_TOKENS) {
        if (m.variant == 0) kv_i32s(&w, "tokenizer.ggml.tokens", types, 10);
        else if (m.variant == 1) { const char *t2[10]; memcpy(t2, toks, sizeof t2); t2[4] = "a\xff"; kv_strs(&w, "tokenizer.ggml.tokens", t2, 10); }
        else if (m.variant == 2) { key(&w, "tokenizer.ggml.tokens", 9); u32(&w, 8); u64(&w, 10); for (int i = 0; i < 10; i++) strn(&w, i == 2 ? "c\0d" : toks[i], i == 2 ? 3 : strlen(toks[i])); }
        else if (m.variant == 3) { const char *t2[10]; memcpy(t2, toks, sizeof t2); t2[2] = "a"; kv_strs(&w, "tokenizer.ggml.tokens", t2, 10); }
        else if (m.variant == 4) { char *big = malloc(70001); memset(big, 'z', 70000); big[70000] = 0; const char *t2[10]; memcpy(t2, toks, sizeof t2); t2[2] = big; kv_strs(&w, "tokenizer.ggml.tokens", t2, 10); free(big); }
        else kv_strs(&w, "tokenizer.ggml.tokens", toks, 0);
    } else {
        kv_strs(&w, "tokenizer.ggml.tokens", toks, 10);
    }
    if (m.field == F_TYPES) {
        int32_t t2[10];
        memcpy(t2, types, sizeof t2);
        if (m.variant == 0) kv_i32s(&w, "tokenizer.ggml.token_type", types, 9);
        else { t2[3] = m.variant == 1 ? 9 : -1; kv_i32s(&w, "tokenizer.ggml.token_type", t2, 10); }
    } else {
        kv_i32s(&w, "tokenizer.ggml.token_type", types, 10);
    }
    if (m.field == F_MERGES) {
        const char *m2[3] = {"a b", m.variant == 0 ? "ab q" : m.variant == 1 ? "a b c" : "<|eot|> a", "\xc4\xa0 a"};
        if (m.variant == 3) kv_i32s(&w, "tokenizer.ggml.merges", types, 3);
        else kv_strs(&w, "tokenizer.ggml.merges", m2, 3);
    } else {
        kv_strs(&w, "tokenizer.ggml.merges", merges, 3);
    }
    if (m.field == F_BOS) {
        if (m.variant == 0) kv_u32(&w, "tokenizer.ggml.bos_token_id", 10);
        else if (m.variant == 1) kv_str(&w, "tokenizer.ggml.bos_token_id", "7");
        else kv_u32(&w, "tokenizer.ggml.bos_token_id", 9); /* an UNUSED token */
    } else {
        kv_u32(&w, "tokenizer.ggml.bos_token_id", 7);
    }
    kv_u32(&w, "tokenizer.ggml.eos_token_id", 7);
    if (m.field == F_ADD_BOS) kv_str(&w, "tokenizer.ggml.add_bos_token", "yes");
    else kv_bool(&w, "tokenizer.ggml.add_bos_token", 1);
    if (m.field == F_TEMPLATE) kv_str(&w, "tokenizer.chat_template", "{{ bos_token }}\xc3");
    else kv_str(&w, "tokenizer.chat_template", "{% for m in messages %}{{ m['content'] }}{{ eos_token }}{% endfor %}");
    return finish(&w, len);
}

/* SentencePiece: <unk> <s> </s> ▁ a b ▁a ab <0x63> <tool>(USER_DEFINED); scores rank ▁a before ab */
#define SP "\xe2\x96\x81"
static unsigned char *spm_file(mut m, size_t *len) {
    static const char *toks[] = {"<unk>", "<s>", "</s>", SP, "a", "b", SP "a", "ab", "<0x63>", "<tool>"};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 6, 4};
    static const float scores[] = {0, 0, 0, -10, -11, -12, -1, -3, 0, 0};
    gw w = {0};
    static const char *other_gemmas[] = {"gemma3n", "gemma-embedding"};
    kv_str(&w, "general.architecture", m.field == F_MODEL ? other_gemmas[m.variant] : "llama");
    if (m.field == F_NONE && m.variant == 2) kv_str(&w, "general.name", "Phi3 Mini"); /* llama.cpp's rstrip rule */
    kv_str(&w, "tokenizer.ggml.model", "llama");
    kv_strs(&w, "tokenizer.ggml.tokens", toks, 10);
    if (m.field == F_SCORES) {
        float s2[10];
        memcpy(s2, scores, sizeof s2);
        if (m.variant == 1) kv_f32s(&w, "tokenizer.ggml.scores", scores, 11 - 2);
        else if (m.variant == 2) { s2[6] = NAN; kv_f32s(&w, "tokenizer.ggml.scores", s2, 10); }
        else if (m.variant == 3) kv_strs(&w, "tokenizer.ggml.scores", toks, 10);
        /* variant 0: missing */
    } else if (m.field == F_NONE && m.variant == 1) {
        float s2[10];
        memcpy(s2, scores, sizeof s2);
        s2[6] = -5; /* now ab (-3) outranks ▁a (-5) */
        kv_f32s(&w, "tokenizer.ggml.scores", s2, 10);
    } else {
        kv_f32s(&w, "tokenizer.ggml.scores", scores, 10);
    }
    kv_i32s(&w, "tokenizer.ggml.token_type", types, 10);
    kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
    kv_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
    return finish(&w, len);
}

/* Gemma (transformers' rules): <pad> <eos> <bos> <unk>, "  " and "\t<space>U+3000" (USER_DEFINED white space,
 * respelt ▁▁ / ▁▁▁), "\t\t" (USER_DEFINED, kept), ▁ a b ab ba (ba scores above ab; ab comes first in
 * the file), <0x63>, <mask> (USER_DEFINED, special by name), <unused0> (UNUSED). Variants: 1 "" as a
 * token (an empty white-space run), 2 " " for "\t\t" (respelt ▁: ▁ twice), 3 "  " a CONTROL token, 4 a run of
 * 30,000 spaces (90,000 bytes respelt), 5 "\xff " (invalid UTF-8 holding a space), 6 no scores. */
static unsigned char *gemma_file(const char *arch, int variant, size_t *len) {
    static const char *toks[] = {"<pad>", "<eos>", "<bos>", "<unk>", "  ", "\t \xe3\x80\x80", "\t\t", SP, "a", "b", "ab",
                                 "ba", "<0x63>", "<mask>", "<unused0>"};
    static const int32_t types[] = {3, 3, 3, 2, 4, 4, 4, 1, 1, 1, 1, 1, 6, 4, 5};
    static const float scores[] = {0, 0, 0, 0, 0, 0, 0, -9, -10, -11, -5, -1, 0, 0, 0};
    const char *t2[15];
    int32_t y2[15];
    memcpy(t2, toks, sizeof t2);
    memcpy(y2, types, sizeof y2);
    char *run = NULL;
    if (variant == 1) t2[6] = "";
    else if (variant == 2) t2[6] = " ";
    else if (variant == 3) y2[4] = 3;
    else if (variant == 4) {
        run = malloc(30001);
        if (!run) { fprintf(stderr, "out of memory\n"); exit(2); }
        memset(run, ' ', 30000);
        run[30000] = 0;
        t2[4] = run;
    } else if (variant == 5) t2[6] = "\xff ";
    gw w = {0};
    kv_str(&w, "general.architecture", arch);
    kv_str(&w, "tokenizer.ggml.model", "llama");
    kv_str(&w, "tokenizer.ggml.pre", "default");
    kv_strs(&w, "tokenizer.ggml.tokens", t2, 15);
    if (variant != 6) kv_f32s(&w, "tokenizer.ggml.scores", scores, 15);
    kv_i32s(&w, "tokenizer.ggml.token_type", y2, 15);
    kv_bool(&w, "tokenizer.ggml.add_space_prefix", 1); /* ignored for Gemma, as transformers does */
    kv_u32(&w, "tokenizer.ggml.bos_token_id", 2);
    kv_u32(&w, "tokenizer.ggml.eos_token_id", 1);
    kv_u32(&w, "tokenizer.ggml.unknown_token_id", 3);
    kv_u32(&w, "tokenizer.ggml.padding_token_id", 0);
    free(run);
    return finish(&w, len);
}

static char tmpdir[256];

static specdec_status load_bytes(const unsigned char *p, size_t n, const char *fname, specdec_tokenizer **t) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, fname);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { fprintf(stderr, "cannot write %s\n", path); exit(2); }
    fclose(f);
    specdec_status st = specdec_tokenizer_load(path, t);
    unlink(path);
    return st;
}

static int enc(const specdec_tokenizer *t, const char *s, int special, int32_t *ids) {
    int32_t n = -1;
    if (specdec_tokenize(t, s, strlen(s), special, ids, 32, &n)) return -1;
    return n;
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__}), (int)(sizeof((const int32_t[]){__VA_ARGS__}) / 4)
static void expect_ids(const specdec_tokenizer *t, const char *s, int special, const int32_t *want, int nw) {
    int32_t got[32];
    int n = enc(t, s, special, got);
    int ok = n == nw && !memcmp(got, want, (size_t)nw * 4);
    SD_CHECK(ok, "encode(\"%s\", %d): got %d ids [%d %d %d ...], want %d", s, special, n, n > 0 ? got[0] : -1,
             n > 1 ? got[1] : -1, n > 2 ? got[2] : -1, nw);
}

static void expect_fail(const char *name, unsigned char *file, size_t len, specdec_status want, const char *needle) {
    specdec_tokenizer *t = (specdec_tokenizer *)1;
    specdec_status st = sd_gguf_tokenizer_parse(file, len, "bad.gguf", &t);
    const char *msg = specdec_last_error();
    SD_CHECK(st == want, "%s: status %d, want %d (%s)", name, st, want, msg);
    SD_CHECK(t == NULL, "%s: *out not NULL after failure", name);
    SD_CHECK(!needle || strstr(msg, needle), "%s: message \"%s\" lacks \"%s\"", name, msg, needle);
    if (st == SPECDEC_OK) specdec_tokenizer_free(t);
    free(file);
}

/* The SentencePiece file's variant v loaded (NULL, failure recorded, when it does not load). */
static specdec_tokenizer *spm_variant(int v) {
    size_t len = 0;
    unsigned char *f = spm_file((mut){F_NONE, v}, &len);
    specdec_tokenizer *t = NULL;
    specdec_status st = sd_gguf_tokenizer_parse(f, len, "spm.gguf", &t);
    SD_CHECK(st == SPECDEC_OK, "llama GGUF variant %d loads: %s", v, specdec_last_error());
    free(f);
    return t;
}

/* (the file is built first: its length is an output of the builder) */
static void expect_bad(const char *name, int spm, mut m, specdec_status want, const char *needle) {
    size_t len = 0;
    unsigned char *f = spm ? spm_file(m, &len) : gpt2_file(m, &len);
    expect_fail(name, f, len, want, needle);
}

/* Every truncation of file f fails cleanly, and an allocation failure at every point gives
 * OUT_OF_MEMORY and no tokenizer until the load completes. Frees f. */
static void truncations_and_oom(const char *name, unsigned char *f, size_t len) {
    specdec_tokenizer *t;
    specdec_status st;
    int trunc_bad = 0;
    for (size_t cut = 0; cut < len; cut++) {
        t = (specdec_tokenizer *)1;
        st = sd_gguf_tokenizer_parse(f, cut, "cut.gguf", &t);
        if (st == SPECDEC_OK || t) trunc_bad++;
    }
    SD_CHECK(trunc_bad == 0, "%s: %d truncations loaded", name, trunc_bad);
    int completed = 0, bad_status = 0;
    long k;
    for (k = 0; k < 20000 && !completed; k++) {
        sd_alloc_fail_after(k);
        t = NULL;
        st = sd_gguf_tokenizer_parse(f, len, "oom.gguf", &t);
        sd_alloc_fail_after(-1);
        if (st) {
            if (st != SPECDEC_ERR_OUT_OF_MEMORY || t) bad_status++;
            continue;
        }
        completed = 1;
        specdec_tokenizer_free(t);
    }
    SD_CHECK(completed && bad_status == 0, "%s: allocation failures: completed %d, %d other statuses", name, completed,
             bad_status);
    printf("%s: allocation failure injected at %ld points\n", name, k);
    free(f);
}

static void expect_bad_gemma(const char *name, int variant, specdec_status want, const char *needle) {
    size_t len = 0;
    unsigned char *f = gemma_file("gemma3", variant, &len);
    expect_fail(name, f, len, want, needle);
}

/* A byte-level vocabulary with pre-tokenizer `pre`: a b c 1 2 12 ca <s>, the one merge "1 2" ("ca" has none). */
static unsigned char *pre_file(const char *pre, size_t *len) {
    static const char *toks[] = {"a", "b", "c", "1", "2", "12", "ca", "<s>"};
    static const int32_t types[] = {1, 1, 1, 1, 1, 1, 1, 3};
    static const char *merges[] = {"1 2"};
    gw w = {0};
    kv_str(&w, "tokenizer.ggml.model", "gpt2");
    kv_str(&w, "tokenizer.ggml.pre", pre);
    kv_strs(&w, "tokenizer.ggml.tokens", toks, 8);
    kv_i32s(&w, "tokenizer.ggml.token_type", types, 8);
    kv_strs(&w, "tokenizer.ggml.merges", merges, 1);
    kv_u32(&w, "tokenizer.ggml.bos_token_id", 7);
    kv_u32(&w, "tokenizer.ggml.eos_token_id", 7);
    kv_bool(&w, "tokenizer.ggml.add_bos_token", 0);
    return finish(&w, len);
}

/* The pre-tokenizers' splits and merge rules: digits one at a time (tekken) or up to three (the others); a
 * pre-token found whole in the vocabulary taken as is (ignore_merges: the tiktoken-derived tekken, o200k and
 * Llama 3 families) or merged (GPT-2's, which has no merge making "ca"). */
static void pre_tokenizers(void) {
    static const struct { const char *pre; int digits_split, whole; } cases[] = {
        {"tekken", 1, 1}, {"gpt-4o", 0, 1}, {"llama-bpe", 0, 1}, {"smaug-bpe", 0, 1}, {"falcon3", 0, 1},
        {"gpt-2", 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        unsigned char *f = pre_file(cases[i].pre, &len);
        specdec_tokenizer *t = NULL;
        const specdec_status st = sd_gguf_tokenizer_parse(f, len, "pre.gguf", &t);
        SD_CHECK(st == SPECDEC_OK, "pre %s loads: %s", cases[i].pre, specdec_last_error());
        if (!st) {
            if (cases[i].digits_split) expect_ids(t, "12", 0, IDS(3, 4));
            else expect_ids(t, "12", 0, IDS(5));
            if (cases[i].whole) expect_ids(t, "ca", 0, IDS(6));
            else expect_ids(t, "ca", 0, IDS(2, 0));
            specdec_tokenizer_free(t);
        }
        free(f);
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sd_gguf_tok_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    size_t len;
    specdec_tokenizer *t = NULL;

    /* byte-level: merges, added tokens (CONTROL special, USER_DEFINED not), UNUSED left out, BOS, template;
     * found by the magic in a file not named .gguf */
    unsigned char *f = gpt2_file((mut){F_NONE, 0}, &len);
    specdec_status st = load_bytes(f, len, "vocab.bin", &t);
    SD_CHECK(st == SPECDEC_OK, "gpt2 GGUF loads: %s", specdec_last_error());
    if (!st) {
        expect_ids(t, "abc ab", 0, IDS(4, 5, 3));
        expect_ids(t, "abc", 1, IDS(7, 4));
        expect_ids(t, "a<|eot|>b<x>c", 0, IDS(0, 7, 1, 8, 2));
        SD_CHECK(specdec_tokenizer_vocab_size(t) == 9, "UNUSED [PAD9] is not an id (vocab %d)", specdec_tokenizer_vocab_size(t));
        SD_CHECK(specdec_tokenizer_bos_id(t) == 7 && specdec_tokenizer_eos_id(t) == 7 && specdec_tokenizer_add_bos(t) == 1,
                 "gpt2 specials %d %d %d", specdec_tokenizer_bos_id(t), specdec_tokenizer_eos_id(t), specdec_tokenizer_add_bos(t));
        char buf[64];
        size_t bl = 0;
        int32_t ids[] = {7, 4, 8};
        SD_CHECK(!specdec_detokenize(t, ids, 3, 1, buf, sizeof buf, &bl) && bl == 6 && !memcmp(buf, "abc<x>", 6),
                 "skip_special drops CONTROL, keeps USER_DEFINED: \"%.*s\"", (int)bl, buf);
        specdec_chat_message msg = {"user", "hi"};
        SD_CHECK(!specdec_chat_apply(t, NULL, &msg, 1, 0, buf, sizeof buf, &bl) && !strcmp(buf, "hi<|eot|>"),
                 "chat template from tokenizer.chat_template: \"%s\"", buf);
        specdec_tokenizer_free(t);
    }
    truncations_and_oom("gpt2", f, len);

    pre_tokenizers();

    /* every known pre-tokenizer loads (its regex compiles) and splits "abc ab" as GPT-2's does */
    for (int v = 0; v < 6; v++) {
        if (v == 1) continue;
        f = gpt2_file((mut){F_PRE, v}, &len);
        st = sd_gguf_tokenizer_parse(f, len, "pre.gguf", &t);
        SD_CHECK(st == SPECDEC_OK, "pre variant %d loads: %s", v, specdec_last_error());
        if (!st) {
            expect_ids(t, "abc ab", 0, IDS(4, 5, 3));
            specdec_tokenizer_free(t);
        }
        free(f);
    }

    /* SentencePiece: merges from the scores (▁a outranks ab), byte fallback, BOS, USER_DEFINED added */
    f = spm_file((mut){F_NONE, 0}, &len);
    st = load_bytes(f, len, "spm.gguf", &t);
    SD_CHECK(st == SPECDEC_OK, "llama GGUF loads: %s", specdec_last_error());
    if (!st) {
        expect_ids(t, "ab", 0, IDS(6, 5));
        expect_ids(t, "ab", 1, IDS(1, 6, 5));
        expect_ids(t, "b c", 0, IDS(3, 5, 3, 8));
        expect_ids(t, "x", 0, IDS(3, 0));
        expect_ids(t, "a<tool>b", 0, IDS(6, 9, 3, 5));
        expect_ids(t, "a<tool> b", 0, IDS(6, 9, 3, 3, 5));
        char buf[64];
        size_t bl = 0;
        int32_t ids[] = {1, 6, 5, 3, 8, 2};
        SD_CHECK(!specdec_detokenize(t, ids, 6, 1, buf, sizeof buf, &bl) && bl == 4 && !memcmp(buf, "ab c", 4),
                 "spm decode: \"%.*s\"", (int)bl, buf);
        specdec_tokenizer_free(t);
    }
    free(f);
    if ((t = spm_variant(2))) { /* named Phi-3 */
        expect_ids(t, "a<tool> b", 0, IDS(6, 9, 3, 5)); /* Phi-3's tokens strip the white space after them */
        expect_ids(t, "a<s> b", 0, IDS(6, 1, 3, 3, 5)); /* except <s>, <unk>, <|endoftext|> */
        specdec_tokenizer_free(t);
    }
    if ((t = spm_variant(1))) { /* ab scores above ▁a */
        expect_ids(t, "ab", 0, IDS(3, 7));
        specdec_tokenizer_free(t);
    }

    /* Gemma: merges by file position (ab before ba although ba scores higher), white-space runs respelt
     * (Python's white space: tab, U+3000), no prefix space although add_space_prefix says one, USER_DEFINED
     * "\t\t" whole, respelt "  " not an added token, "<mask>" special by name, UNUSED kept */
    static const char *gemma_archs[] = {"gemma", "gemma2", "gemma3"};
    for (int a = 0; a < 3; a++) {
        f = gemma_file(gemma_archs[a], 0, &len);
        st = sd_gguf_tokenizer_parse(f, len, "gemma.gguf", &t);
        SD_CHECK(st == SPECDEC_OK, "%s GGUF loads: %s", gemma_archs[a], specdec_last_error());
        free(f);
        if (st) continue;
        expect_ids(t, "aba", 0, IDS(10, 8));
        expect_ids(t, "a", 1, IDS(2, 8));
        expect_ids(t, "  a", 0, IDS(4, 8));
        expect_ids(t, "   ", 0, IDS(5));
        expect_ids(t, "b\t\tc", 0, IDS(9, 6, 12));
        expect_ids(t, "x<mask><bos>", 0, IDS(3, 13, 2));
        SD_CHECK(specdec_tokenizer_vocab_size(t) == 15, "%s: UNUSED <unused0> is an id (vocab %d)", gemma_archs[a],
                 specdec_tokenizer_vocab_size(t));
        char buf[64];
        size_t bl = 0;
        SD_CHECK(!specdec_token_to_piece(t, 5, buf, sizeof buf, &bl) && bl == 9 && !memcmp(buf, SP SP SP, 9),
                 "%s: \"\\t U+3000\" is looked up as three \"\xe2\x96\x81\" (%zu bytes)", gemma_archs[a], bl);
        int32_t ids[] = {2, 4, 8, 13, 5, 6, 12};
        SD_CHECK(!specdec_detokenize(t, ids, 7, 0, buf, sizeof buf, &bl) && bl == 20 && !memcmp(buf, "<bos>  a<mask>   \t\tc", 20),
                 "%s: decode \"%.*s\"", gemma_archs[a], (int)bl, buf);
        SD_CHECK(!specdec_detokenize(t, ids, 7, 1, buf, sizeof buf, &bl) && bl == 9 && !memcmp(buf, "  a   \t\tc", 9),
                 "%s: skip_special drops <bos> and <mask>: \"%.*s\"", gemma_archs[a], (int)bl, buf);
        specdec_tokenizer_free(t);
    }
    /* (the respelt copy of the tokens included) */
    f = gemma_file("gemma3", 0, &len);
    truncations_and_oom("gemma", f, len);
    /* an empty token (a white-space run of length 0) is an ordinary, if useless, vocabulary entry; the
     * scores are not needed (the merges follow the file) */
    for (int v = 1; v <= 6; v += 5) {
        f = gemma_file("gemma3", v, &len);
        st = sd_gguf_tokenizer_parse(f, len, "gemma.gguf", &t);
        SD_CHECK(st == SPECDEC_OK, "gemma variant %d: %s", v, specdec_last_error());
        if (!st) {
            expect_ids(t, "aba  ", 0, IDS(10, 8, 4));
            specdec_tokenizer_free(t);
        }
        free(f);
    }
    /* " " (USER_DEFINED, id 6) respelt "▁" like the NORMAL id 7: the later one is the token, id 6 decodes to
     * nothing (transformers' dict; ids and decode checked with transformers 5.24) */
    f = gemma_file("gemma3", 2, &len);
    st = sd_gguf_tokenizer_parse(f, len, "gemma.gguf", &t);
    SD_CHECK(st == SPECDEC_OK, "gemma with \" \" and \"\xe2\x96\x81\": %s", specdec_last_error());
    if (!st) {
        expect_ids(t, " a", 0, IDS(7, 8));
        expect_ids(t, " ", 0, IDS(7));
        char buf[64];
        size_t bl = 0;
        int32_t ids[] = {6, 7, 4, 5};
        SD_CHECK(!specdec_detokenize(t, ids, 4, 0, buf, sizeof buf, &bl) && bl == 6 && !memcmp(buf, "      ", 6),
                 "the shadowed id decodes to nothing: \"%.*s\"", (int)bl, buf);
        specdec_tokenizer_free(t);
    }
    free(f);
    expect_bad_gemma("gemma white-space CONTROL token", 3, SPECDEC_ERR_UNSUPPORTED, "tokens[4], a special token, is white space only");
    expect_bad_gemma("gemma huge white-space run", 4, SPECDEC_ERR_FORMAT, "tokens[4] (30000");
    expect_bad_gemma("gemma invalid UTF-8 with a space", 5, SPECDEC_ERR_FORMAT, "UTF-8");

    /* hostile metadata */
    expect_bad("no model", 0, (mut){F_MODEL, 0}, SPECDEC_ERR_FORMAT, "tokenizer.ggml.model");
    expect_bad("model not a string", 0, (mut){F_MODEL, 1}, SPECDEC_ERR_FORMAT, "tokenizer.ggml.model");
    expect_bad("model bert", 0, (mut){F_MODEL, 2}, SPECDEC_ERR_UNSUPPORTED, "\"bert\"");
    expect_bad("unknown pre", 0, (mut){F_PRE, 1}, SPECDEC_ERR_UNSUPPORTED, "made-up-pre");
    expect_bad("tokens not strings", 0, (mut){F_TOKENS, 0}, SPECDEC_ERR_FORMAT, "tokenizer.ggml.tokens");
    expect_bad("token invalid UTF-8", 0, (mut){F_TOKENS, 1}, SPECDEC_ERR_FORMAT, "UTF-8");
    expect_bad("token with NUL", 0, (mut){F_TOKENS, 2}, SPECDEC_ERR_UNSUPPORTED, "NUL");
    expect_bad("duplicate token", 0, (mut){F_TOKENS, 3}, SPECDEC_ERR_FORMAT, "twice");
    expect_bad("huge token", 0, (mut){F_TOKENS, 4}, SPECDEC_ERR_FORMAT, "bytes long");
    expect_bad("no tokens", 0, (mut){F_TOKENS, 5}, SPECDEC_ERR_FORMAT, "tokenizer.ggml.t");
    expect_bad("types count", 0, (mut){F_TYPES, 0}, SPECDEC_ERR_FORMAT, "token_type");
    expect_bad("type 9", 0, (mut){F_TYPES, 1}, SPECDEC_ERR_FORMAT, "token_type[3]");
    expect_bad("type -1", 0, (mut){F_TYPES, 2}, SPECDEC_ERR_FORMAT, "token_type[3]");
    expect_bad("merge unknown token", 0, (mut){F_MERGES, 0}, SPECDEC_ERR_FORMAT, "merges[1]");
    expect_bad("merge of three", 0, (mut){F_MERGES, 1}, SPECDEC_ERR_FORMAT, "merges[1]");
    expect_bad("merge names a control token", 0, (mut){F_MERGES, 2}, SPECDEC_ERR_FORMAT, "merges[1]");
    expect_bad("merges not strings", 0, (mut){F_MERGES, 3}, SPECDEC_ERR_FORMAT, "tokenizer.ggml.merges");
    expect_bad("bos out of range", 0, (mut){F_BOS, 0}, SPECDEC_ERR_FORMAT, "bos_token_id");
    expect_bad("bos a string", 0, (mut){F_BOS, 1}, SPECDEC_ERR_FORMAT, "bos_token_id");
    expect_bad("bos an unused token", 0, (mut){F_BOS, 2}, SPECDEC_ERR_FORMAT, "id 9");
    expect_bad("add_bos a string", 0, (mut){F_ADD_BOS, 0}, SPECDEC_ERR_FORMAT, "add_bos_token");
    expect_bad("template invalid UTF-8", 0, (mut){F_TEMPLATE, 0}, SPECDEC_ERR_FORMAT, "chat_template");
    expect_bad("gemma3n", 1, (mut){F_MODEL, 0}, SPECDEC_ERR_UNSUPPORTED, "\"gemma3n\" is not supported");
    expect_bad("gemma-embedding", 1, (mut){F_MODEL, 1}, SPECDEC_ERR_UNSUPPORTED, "gemma-embedding");
    expect_bad("llama without scores", 1, (mut){F_SCORES, 0}, SPECDEC_ERR_FORMAT, "tokenizer.ggml.scores");
    expect_bad("scores count", 1, (mut){F_SCORES, 1}, SPECDEC_ERR_FORMAT, "tokenizer.ggml.scores");
    expect_bad("score NaN", 1, (mut){F_SCORES, 2}, SPECDEC_ERR_FORMAT, "scores[6]");
    expect_bad("scores not numbers", 1, (mut){F_SCORES, 3}, SPECDEC_ERR_FORMAT, "tokenizer.ggml.scores");
    {
        gw w = {0};
        kv_str(&w, "general.architecture", "llama");
        unsigned char *nt = finish(&w, &len);
        expect_fail("a GGUF without a tokenizer", nt, len, SPECDEC_ERR_FORMAT, "holds no tokenizer");
    }
    /* a file of another kind is still read as tokenizer.json; a missing one is an I/O error */
    char path[512];
    snprintf(path, sizeof path, "%s/none.gguf", tmpdir);
    SD_CHECK(specdec_tokenizer_load(path, &t) == SPECDEC_ERR_IO && !t, "missing .gguf -> IO");
    rmdir(tmpdir);
    return sd_test_done();
}

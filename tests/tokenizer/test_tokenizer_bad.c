/* test_tokenizer_bad.c — malformed tokenizer.json files give a clear error status and
 * message (no crash, no leak under ASan/UBSan), and an allocation failure at every
 * point of loading, encoding and decoding returns SPECDEC_ERR_OUT_OF_MEMORY cleanly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_test.h"
#include "sd_tokenizer.h"
#include "specdec.h"

/* A small valid byte-level BPE: "ab" and "abc" by merges, one special token. */
#define VOCAB "\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"abc\":4,\"\\u0120\":5,\"\\u0120a\":6}"
#define MERGES "\"merges\":[\"a b\",[\"ab\",\"c\"],\"\\u0120 a\"]"
static const char *good =
    "{\"added_tokens\":[{\"id\":7,\"content\":\"<|eot|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
    "\"normalized\":false,\"special\":true}],"
    "\"normalizer\":{\"type\":\"NFC\"},"
    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
    "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|eot|>\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<|eot|>\":{\"id\":\"<|eot|>\",\"ids\":[7],"
    "\"tokens\":[\"<|eot|>\"]}}},"
    "\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"byte_fallback\":false," VOCAB "," MERGES "}}";

static void expect_fail(const char *name, const char *json, specdec_status want, const char *needle) {
    specdec_tokenizer *t = (specdec_tokenizer *)1;
    specdec_status st = sd_tokenizer_load_json(json, strlen(json), NULL, &t);
    const char *msg = specdec_last_error();
    SD_CHECK(st == want, "%s: status %d, want %d (%s)", name, st, want, msg);
    SD_CHECK(t == NULL, "%s: *out not NULL after failure", name);
    SD_CHECK(needle == NULL || strstr(msg, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", name, msg, needle);
    if (st == SPECDEC_OK) specdec_tokenizer_free(t);
}

static char *replace(const char *s, const char *from, const char *to) {
    const char *p = strstr(s, from);
    if (!p) { fprintf(stderr, "test bug: '%s' not found\n", from); exit(2); }
    size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
    char *o = malloc(n);
    snprintf(o, n, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
    return o;
}

static void bad_variant(const char *name, const char *from, const char *to, specdec_status want, const char *needle) {
    char *j = replace(good, from, to);
    expect_fail(name, j, want, needle);
    free(j);
}

/* A tokenizer.json over the vocabulary {a, b}: normalizer / pre-tokenizer / decoder
 * given as JSON (NULL: none), an optional added token "aab" normalized. */
static specdec_status load_ab(const char *norm, const char *pre, const char *dec, int added, specdec_tokenizer **t) {
    const size_t cap = 65536;
    char *j = malloc(cap);
    if (!j) return SPECDEC_ERR_OUT_OF_MEMORY;
    size_t o = (size_t)snprintf(j, cap, "{");
    if (added)
        o += (size_t)snprintf(j + o, cap - o, "\"added_tokens\":[{\"id\":2,\"content\":\"aab\",\"single_word\":false,"
                                              "\"lstrip\":false,\"rstrip\":false,\"normalized\":true,\"special\":false}],");
    if (norm) o += (size_t)snprintf(j + o, cap - o, "\"normalizer\":%s,", norm);
    if (pre) o += (size_t)snprintf(j + o, cap - o, "\"pre_tokenizer\":%s,", pre);
    if (dec) o += (size_t)snprintf(j + o, cap - o, "\"decoder\":%s,", dec);
    snprintf(j + o, cap - o, "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[]}}");
    specdec_status st = sd_tokenizer_load_json(j, strlen(j), NULL, t);
    free(j);
    return st;
}

/* `count` copies of item, comma-separated, inside {"type":"Sequence","<key>":[...]}. */
static char *seq_of(const char *key, const char *item, int count) {
    size_t n = 64 + (strlen(item) + 1) * (size_t)count;
    char *s = malloc(n);
    if (!s) exit(2);
    int o = snprintf(s, n, "{\"type\":\"Sequence\",\"%s\":[", key);
    for (int i = 0; i < count; i++) o += snprintf(s + o, n - (size_t)o, "%s%s", i ? "," : "", item);
    snprintf(s + o, n - (size_t)o, "]}");
    return s;
}

/* Growth inside the pipeline is bounded at SD_TOK_MAX_GROWTH x the input +
 * SD_TOK_GROWTH_SLACK (found by the fuzzing campaign: a Sequence of 42 ByteLevel /
 * Metaspace pre-tokenizers doubled the text at every ByteLevel until memory ran out
 * after two minutes). Text that would pass the bound is refused with UNSUPPORTED;
 * text that stays under it encodes as before. */
static void growth_bound(void) {
    specdec_tokenizer *t = NULL;
    int32_t ids[8];
    int32_t n = 0;
    /* exactly at the boundary: 1000 "a"s, each replaced by 60 (60,000 bytes <= 68,096)
     * encodes; by 70 (70,000 > 68,096) is refused */
    char *text = malloc(1001);
    memset(text, 'a', 1000);
    text[1000] = 0;
    for (int k = 60; k <= 70; k += 10) {
        char norm[256], rep[80];
        memset(rep, 'a', (size_t)k);
        rep[k] = 0;
        snprintf(norm, sizeof norm, "{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"%s\"}", rep);
        specdec_status st = load_ab(norm, NULL, NULL, 0, &t);
        SD_CHECK(st == SPECDEC_OK && t, "Replace a -> %d a's loads: %s", k, specdec_last_error());
        if (!t) continue;
        st = specdec_tokenize(t, text, 1000, 0, NULL, 0, &n);
        if (k == 60)
            SD_CHECK(st == SPECDEC_ERR_BUFFER_TOO_SMALL && n == 60000, "60x growth encodes (status %d, %d ids)", st, n);
        else
            SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && n == 0 && strstr(specdec_last_error(), "64x"),
                     "70x growth refused (status %d, %d ids: %s)", st, n, specdec_last_error());
        specdec_tokenizer_free(t);
        t = NULL;
    }
    free(text);
    /* exponential: 20 ByteLevel pre-tokenizers (2^20 x for a space); 30 Replace a -> aa
     * normalizers */
    char *pre = seq_of("pretokenizers", "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}", 20);
    char *nrm = seq_of("normalizers", "{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"aa\"}", 30);
    char *dec = seq_of("decoders", "{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"aa\"}", 30);
    const char *cases[2][2] = {{NULL, pre}, {nrm, NULL}};
    for (int c = 0; c < 2; c++) {
        specdec_status st = load_ab(cases[c][0], cases[c][1], NULL, 0, &t);
        SD_CHECK(st == SPECDEC_OK && t, "exponential case %d loads: %s", c, specdec_last_error());
        if (!t) continue;
        /* ByteLevel maps printable ASCII to itself, a space to U+0120 (2 bytes), and each
         * of those bytes again to a 2-byte character: the spaces double every step */
        st = specdec_tokenize(t, "a b a", 5, 0, ids, 8, &n);
        SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && n == 0, "exponential case %d refused (status %d)", c, st);
        specdec_tokenizer_free(t);
        t = NULL;
    }
    specdec_status st = load_ab(NULL, NULL, dec, 0, &t);
    SD_CHECK(st == SPECDEC_OK && t, "30 Replace decoders load: %s", specdec_last_error());
    if (t) {
        const int32_t dids[2] = {0, 1};
        char buf[64];
        size_t len = 0;
        st = specdec_detokenize(t, dids, 2, 0, buf, sizeof buf, &len);
        SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && strstr(specdec_last_error(), "decoders"),
                 "exponential decoders refused (status %d: %s)", st, specdec_last_error());
        specdec_tokenizer_free(t);
        t = NULL;
    }
    /* a normalized added token is normalized at load: the same bound, a FORMAT error */
    st = load_ab(nrm, NULL, NULL, 1, &t);
    SD_CHECK(st == SPECDEC_ERR_FORMAT && !t && strstr(specdec_last_error(), "64x"),
             "an added token through exponential normalizers: status %d (%s)", st, specdec_last_error());
    free(pre);
    free(nrm);
    free(dec);
}

int main(void) {
    specdec_tokenizer *t = NULL;
    specdec_status st = sd_tokenizer_load_json(good, strlen(good), NULL, &t);
    SD_CHECK(st == SPECDEC_OK && t, "the reference tokenizer loads: %s", specdec_last_error());
    if (t) {
        int32_t ids[16], n = 0;
        st = specdec_tokenize(t, "abc ab", 6, 1, ids, 16, &n);
        SD_CHECK(st == SPECDEC_OK && n == 4 && ids[0] == 7 && ids[1] == 4 && ids[2] == 5 && ids[3] == 3,
                 "encode \"abc ab\" -> 7 4 5 3 (\"a b\" outranks \"\u0120 a\") (got n=%d)", n);
        specdec_tokenizer_free(t);
    }

    /* BPEDecoder with "suffix": "" (found by fuzzing: the empty literal never advanced
     * and decoding grew its output forever). As the library's str::replace does, the
     * empty suffix matches at every character boundary: each token but the last gets a
     * space before every character and at its end; the last token is left as it is.
     * `tokenizers` decodes ["ab", "\u00e9\u20ac", "cd"] to " a b  \u00e9 \u20ac cd". */
    {
        static const char bpe_empty[] =
            "{\"decoder\":{\"type\":\"BPEDecoder\",\"suffix\":\"\"},"
            "\"model\":{\"type\":\"BPE\",\"vocab\":{\"ab\":0,\"\u00e9\u20ac\":1,\"cd\":2},\"merges\":[]}}";
        st = sd_tokenizer_load_json(bpe_empty, strlen(bpe_empty), NULL, &t);
        SD_CHECK(st == SPECDEC_OK && t, "BPEDecoder with an empty suffix loads: %s", specdec_last_error());
        if (t) {
            const int32_t ids[3] = {0, 1, 2};
            char buf[64];
            size_t len = 0;
            static const char want[] = " a b  \xc3\xa9 \xe2\x82\xac cd";
            st = specdec_detokenize(t, ids, 3, 0, buf, sizeof buf, &len);
            SD_CHECK(st == SPECDEC_OK && len == sizeof want - 1 && !memcmp(buf, want, len),
                     "empty BPEDecoder suffix: \"%s\" (status %d), want \"%s\"", buf, st, want);
            st = specdec_detokenize(t, ids, 1, 0, buf, sizeof buf, &len);
            SD_CHECK(st == SPECDEC_OK && len == 2 && !memcmp(buf, "ab", 2), "empty suffix, one token: \"%s\"", buf);
            specdec_tokenizer_free(t);
            t = NULL;
        }
    }

    growth_bound();

    expect_fail("empty", "", SPECDEC_ERR_FORMAT, "not valid JSON");
    expect_fail("not json", "hello", SPECDEC_ERR_FORMAT, "not valid JSON");
    expect_fail("truncated", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0", SPECDEC_ERR_FORMAT, "not valid JSON");
    expect_fail("array top", "[1,2]", SPECDEC_ERR_FORMAT, "top level");
    expect_fail("no model", "{}", SPECDEC_ERR_FORMAT, "\"model\" is missing");
    expect_fail("model not object", "{\"model\":3}", SPECDEC_ERR_FORMAT, "must be an object");
    bad_variant("wordpiece", "\"type\":\"BPE\"", "\"type\":\"WordPiece\"", SPECDEC_ERR_UNSUPPORTED, "WordPiece");
    bad_variant("unigram", "\"type\":\"BPE\"", "\"type\":\"Unigram\"", SPECDEC_ERR_UNSUPPORTED, "Unigram");
    bad_variant("merge not in vocab", "\"a b\"", "\"a zz\"", SPECDEC_ERR_FORMAT, "zz");
    bad_variant("merged not in vocab", "[\"ab\",\"c\"]", "[\"c\",\"a\"]", SPECDEC_ERR_FORMAT, "\"ca\"");
    bad_variant("merge 3 parts", "\"a b\"", "\"a b c\"", SPECDEC_ERR_FORMAT, "merges[0]");
    bad_variant("merge wrong type", "\"a b\"", "17", SPECDEC_ERR_FORMAT, "merges[0]");
    bad_variant("vocab wrong type", "\"vocab\":{", "\"vocab\":[],\"x\":{", SPECDEC_ERR_FORMAT, "model.vocab");
    bad_variant("vocab id string", "\"a\":0", "\"a\":\"zero\"", SPECDEC_ERR_FORMAT, "\"a\"");
    bad_variant("vocab id negative", "\"a\":0", "\"a\":-5", SPECDEC_ERR_FORMAT, "-5");
    bad_variant("vocab id huge", "\"a\":0", "\"a\":1000000000", SPECDEC_ERR_FORMAT, "1e+09");
    bad_variant("vocab id fraction", "\"a\":0", "\"a\":0.5", SPECDEC_ERR_FORMAT, "0.5");
    bad_variant("vocab duplicate", "\"b\":1", "\"a\":1", SPECDEC_ERR_FORMAT, "twice");
    bad_variant("added id huge", "\"id\":7", "\"id\":99999999999", SPECDEC_ERR_FORMAT, "added_tokens");
    bad_variant("added no content", "\"content\":\"<|eot|>\"", "\"contents\":\"x\"", SPECDEC_ERR_FORMAT, "content");
    bad_variant("added flag type", "\"lstrip\":false", "\"lstrip\":\"no\"", SPECDEC_ERR_FORMAT, "lstrip");
    bad_variant("unknown normalizer", "\"type\":\"NFC\"", "\"type\":\"Precompiled\"", SPECDEC_ERR_UNSUPPORTED, "Precompiled");
    bad_variant("normalizer no type", "{\"type\":\"NFC\"}", "{}", SPECDEC_ERR_FORMAT, "type");
    bad_variant("unknown pre", "\"type\":\"ByteLevel\",\"add", "\"type\":\"BertPreTokenizer\",\"add", SPECDEC_ERR_UNSUPPORTED,
                "BertPreTokenizer");
    bad_variant("pre flag type", "\"use_regex\":true", "\"use_regex\":1", SPECDEC_ERR_FORMAT, "use_regex");
    bad_variant("bad regex", "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}",
                "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(unclosed\"},\"behavior\":\"Isolated\",\"invert\":false}",
                SPECDEC_ERR_FORMAT, "(unclosed");
    bad_variant("bad behavior", "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}",
                "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Sideways\",\"invert\":false}",
                SPECDEC_ERR_FORMAT, "Sideways");
    bad_variant("unknown decoder", "\"decoder\":{\"type\":\"ByteLevel\"}", "\"decoder\":{\"type\":\"CTC\"}",
                SPECDEC_ERR_UNSUPPORTED, "CTC");
    bad_variant("template unknown special", "\"ids\":[7]", "\"idz\":[7]", SPECDEC_ERR_FORMAT, "<|eot|>");
    bad_variant("template id out of vocab", "\"ids\":[7]", "\"ids\":[123456]", SPECDEC_ERR_FORMAT, "123456");
    bad_variant("unk not in vocab", "\"byte_fallback\":false", "\"byte_fallback\":false,\"unk_token\":\"<unk>\"",
                SPECDEC_ERR_FORMAT, "<unk>");
    bad_variant("dropout", "\"byte_fallback\":false", "\"byte_fallback\":false,\"dropout\":0.1", SPECDEC_ERR_UNSUPPORTED,
                "dropout");
    bad_variant("empty vocab", VOCAB "," MERGES, "\"vocab\":{},\"merges\":[]", SPECDEC_ERR_FORMAT, "empty");
    /* deep nesting is refused, not recursed into */
    {
        char deep[4096] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"normalizer\":";
        for (int i = 0; i < 40; i++) strcat(deep, "{\"type\":\"Sequence\",\"normalizers\":[");
        strcat(deep, "{\"type\":\"NFC\"}");
        for (int i = 0; i < 40; i++) strcat(deep, "]}");
        strcat(deep, "}");
        expect_fail("deep nesting", deep, SPECDEC_ERR_FORMAT, "nested");
    }

    /* file-level errors */
    t = (specdec_tokenizer *)1;
    st = specdec_tokenizer_load("/nonexistent/dir/for/specdec", &t);
    SD_CHECK(st == SPECDEC_ERR_IO && t == NULL, "missing path -> IO (%d: %s)", st, specdec_last_error());
    SD_CHECK(strstr(specdec_last_error(), "/nonexistent/dir/for/specdec") != NULL, "message names the file: %s",
             specdec_last_error());
    st = specdec_tokenizer_load("/", &t);
    SD_CHECK(st == SPECDEC_ERR_IO, "directory without tokenizer.json -> IO (%d)", st);
    SD_CHECK(specdec_tokenizer_load(NULL, &t) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL path");
    SD_CHECK(specdec_tokenizer_load("x", NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL out");
    specdec_tokenizer_free(NULL);

    /* allocation failure at every point of load + encode + decode */
    int completed = 0, bad_status = 0;
    long k;
    /* stop at the first k that the run never reaches: every allocation was tried */
    for (k = 0; k < 20000 && !completed; k++) {
        sd_alloc_fail_after(k);
        t = NULL;
        st = sd_tokenizer_load_json(good, strlen(good), NULL, &t);
        if (st) {
            if (st != SPECDEC_ERR_OUT_OF_MEMORY || t) { bad_status++; fprintf(stderr, "k=%ld: load status %d: %s\n", k, st, specdec_last_error()); }
            continue;
        }
        int32_t ids[16], n = 0;
        st = specdec_tokenize(t, "abc ab\xff<|eot|>", 14, 1, ids, 16, &n);
        if (st == SPECDEC_OK) {
            char buf[64];
            size_t len = 0;
            st = specdec_detokenize(t, ids, n, 0, buf, sizeof buf, &len);
            if (st == SPECDEC_OK) {
                specdec_detok_stream *s = NULL;
                st = specdec_detok_stream_create(t, 0, &s);
                for (int32_t i = 0; st == SPECDEC_OK && i < n; i++) {
                    const char *p;
                    size_t pl;
                    st = specdec_detok_stream_push(s, ids[i], &p, &pl);
                }
                specdec_detok_stream_free(s);
                if (st == SPECDEC_OK && sd_alloc_count() <= k) completed = 1;
            }
        }
        if (st && st != SPECDEC_ERR_OUT_OF_MEMORY) { bad_status++; fprintf(stderr, "k=%ld: status %d: %s\n", k, st, specdec_last_error()); }
        specdec_tokenizer_free(t);
    }
    sd_alloc_fail_after(-1);
    SD_CHECK(completed, "load+encode+decode eventually succeeds with late allocation failures (k=%ld)", k);
    SD_CHECK(bad_status == 0, "%d injected failures gave a status other than OUT_OF_MEMORY", bad_status);
    printf("allocation failure injected at %ld points\n", k);
    return sd_test_done();
}

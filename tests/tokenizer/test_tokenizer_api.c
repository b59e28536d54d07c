/* test_tokenizer_api.c — the tokenizer C ABI.
 *
 * test_tokenizer_api --fixtures REPO_ROOT   (always runs: fixtures inside the repository)
 *   the bundled pair's tokenizer (models/kjv-target, ByteLevel BPE) and a cut-down
 *   TinyLlama tokenizer (tests/tokenizer/fixtures/tinyllama_small.json, byte_fallback):
 *   buffer-size protocol, token_to_piece, unknown ids, NULL handling, add_special,
 *   streaming decode holding back incomplete UTF-8, and concurrent use of one tokenizer
 *   from several threads (results equal the single-threaded ones). Expected ids were
 *   produced by the `tokenizers` library.
 * test_tokenizer_api --real SHARED_TOKENIZERS_DIR   (skips when the folder is absent)
 *   the six published tokenizers of ../shared/tokenizers: vocabulary sizes and special
 *   ids from tokenizer_config.json, GPT-2's "Hello world", Llama-3's load time. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sd_test.h"
#include "sd_test_util.h"
#include "specdec.h"

static char root[1024];

static specdec_tokenizer *load(const char *name) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", root, name);
    specdec_tokenizer *t = NULL;
    specdec_status st = specdec_tokenizer_load(p, &t);
    SD_CHECK(st == SPECDEC_OK, "load %s: %s", p, specdec_last_error());
    return t;
}

static const char *texts[] = {
    "Hello world, it's 12345 <s> 你好 😀 don't  stop",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "def f(x):\n    return x ** 2\n",
    "naïve café — Zürich 🇫🇷👨‍👩‍👧",
    "",
    "   \t\n\n  ",
};
#define NT (sizeof texts / sizeof *texts)

typedef struct { const specdec_tokenizer *t; int32_t (*ref)[512]; int32_t *nref; int bad; } job_t;

static void *worker(void *arg) {
    job_t *j = arg;
    int32_t ids[512];
    for (int it = 0; it < 200; it++) {
        size_t i = (size_t)it % NT;
        int32_t n = 0;
        if (specdec_tokenize(j->t, texts[i], strlen(texts[i]), 1, ids, 512, &n) || n != j->nref[i] ||
            memcmp(ids, j->ref[i], (size_t)n * sizeof *ids))
            j->bad++;
        char buf[2048];
        size_t len;
        if (specdec_detokenize(j->t, ids, n, 0, buf, sizeof buf, &len)) j->bad++;
    }
    return NULL;
}

/* The six published tokenizers: sizes and special ids, GPT-2's pieces, load time. */
static int run_real(void) {
    struct {
        const char *name;
        int32_t vocab, bos, eos, add_bos;
    } want[] = {
        {"gpt2", 50257, 50256, 50256, 0},
        {"llama-3-8b", 128256, 128000, 128001, 0},
        {"qwen2.5-1.5b-instruct", 151665, -1, 151645, 0},
        {"tinyllama-1.1b-chat-v1.0", 32000, 1, 2, 1},
        {"phi-3-mini", 32011, 1, 32000, 0},
        {"mistral-v1-mixtral-8x22b", 32000, 1, 2, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        specdec_tokenizer *t = load(want[i].name);
        if (!t) continue;
        SD_CHECK(specdec_tokenizer_vocab_size(t) == want[i].vocab, "%s vocab %d want %d", want[i].name,
                 specdec_tokenizer_vocab_size(t), want[i].vocab);
        SD_CHECK(specdec_tokenizer_bos_id(t) == want[i].bos, "%s bos %d want %d", want[i].name, specdec_tokenizer_bos_id(t),
                 want[i].bos);
        SD_CHECK(specdec_tokenizer_eos_id(t) == want[i].eos, "%s eos %d want %d", want[i].name, specdec_tokenizer_eos_id(t),
                 want[i].eos);
        SD_CHECK(specdec_tokenizer_add_bos(t) == want[i].add_bos, "%s add_bos %d", want[i].name, specdec_tokenizer_add_bos(t));
        specdec_tokenizer_free(t);
    }
    /* loading the largest vocabulary is fast (well under a second) */
    double t0 = sd_test_now_s();
    specdec_tokenizer *l3 = load("llama-3-8b");
    printf("llama-3-8b load: %.3f s\n", sd_test_now_s() - t0);
    specdec_tokenizer_free(l3);
    specdec_tokenizer *g = load("gpt2");
    if (!g) return sd_test_done();
    int32_t ids[64], n = -1;
    specdec_status st = specdec_tokenize(g, "Hello world", 11, 0, ids, 64, &n);
    SD_CHECK(st == SPECDEC_OK && n == 2 && ids[0] == 15496 && ids[1] == 995, "Hello world -> 15496 995");
    char buf[256];
    size_t len = 0;
    st = specdec_token_to_piece(g, 995, buf, sizeof buf, &len);
    SD_CHECK(st == SPECDEC_OK && !strcmp(buf, "\xC4\xA0world") && len == 7, "piece 995 = 'Ġworld' ('%s')", buf);
    st = specdec_token_to_piece(g, 50256, buf, sizeof buf, &len);
    SD_CHECK(st == SPECDEC_OK && !strcmp(buf, "<|endoftext|>"), "piece of the added token");
    specdec_tokenizer_free(g);
    return sd_test_done();
}

/* Buffer protocol, pieces, unknown ids and NULL handling on the bundled tokenizer. */
static void check_protocol(const specdec_tokenizer *g) {
    int32_t ids[64], n = -1;
    specdec_status st = specdec_tokenize(g, "And God said", 12, 0, NULL, 0, &n);
    SD_CHECK(st == SPECDEC_ERR_BUFFER_TOO_SMALL && n == 3, "size query: st %d n %d", st, n);
    st = specdec_tokenize(g, "And God said", 12, 0, ids, 1, &n);
    SD_CHECK(st == SPECDEC_ERR_BUFFER_TOO_SMALL && n == 3, "capacity 1: st %d n %d", st, n);
    st = specdec_tokenize(g, "And God said", 12, 0, ids, 64, &n);
    SD_CHECK(st == SPECDEC_OK && n == 3 && ids[0] == 297 && ids[1] == 388 && ids[2] == 389, "And God said -> 297 388 389");
    char buf[256];
    size_t len = 0;
    st = specdec_detokenize(g, ids, n, 0, buf, 5, &len);
    SD_CHECK(st == SPECDEC_ERR_BUFFER_TOO_SMALL && len == 12, "detokenize size %zu", len);
    st = specdec_detokenize(g, ids, n, 0, buf, 13, &len);
    SD_CHECK(st == SPECDEC_OK && len == 12 && !strcmp(buf, "And God said"), "detokenize exact fit: '%s'", buf);
    st = specdec_token_to_piece(g, 388, buf, sizeof buf, &len);
    SD_CHECK(st == SPECDEC_OK && !strcmp(buf, "\xC4\xA0God") && len == 5, "piece 388 = 'ĠGod' ('%s')", buf);
    SD_CHECK(specdec_token_to_piece(g, 4096, buf, sizeof buf, &len) == SPECDEC_ERR_INVALID_ARGUMENT, "piece out of range");
    /* The handle's detail is the thread's (the header's contract): it names the failed call. */
    SD_CHECK(strstr(specdec_tokenizer_last_error(g), "4096") != NULL &&
                 !strcmp(specdec_tokenizer_last_error(g), specdec_last_error()),
             "tokenizer_last_error after a failed call: '%s'", specdec_tokenizer_last_error(g));
    SD_CHECK(specdec_token_to_piece(g, -1, buf, sizeof buf, &len) == SPECDEC_ERR_INVALID_ARGUMENT, "piece -1");
    int32_t with_bad[] = {297, -7, 99999999, 388};
    st = specdec_detokenize(g, with_bad, 4, 0, buf, sizeof buf, &len);
    SD_CHECK(st == SPECDEC_OK && !strcmp(buf, "And God"), "unknown ids skipped as the library does: '%s'", buf);
    SD_CHECK(specdec_tokenize(NULL, "a", 1, 0, ids, 64, &n) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL tokenizer");
    SD_CHECK(specdec_tokenize(g, NULL, 3, 0, ids, 64, &n) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL text");
    SD_CHECK(specdec_tokenize(g, NULL, 0, 0, ids, 64, &n) == SPECDEC_OK && n == 0, "NULL text with len 0 is empty");
    SD_CHECK(specdec_tokenize(g, "a", 1, 0, NULL, 5, &n) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL ids with capacity");
    st = specdec_tokenize(g, "And God said", 12, 1, ids, 64, &n);
    SD_CHECK(st == SPECDEC_OK && n == 4 && ids[0] == 0, "add_special follows the post-processor: <s> first");
}

/* byte_fallback: an emoji spelled as 4 byte tokens appears only when complete. */
static void check_stream(const specdec_tokenizer *tl) {
    int32_t ids[64], n = -1;
    specdec_status st = specdec_tokenize(tl, "a\xF0\x9F\xA6\x9C", 5, 0, ids, 64, &n); /* U+1F99C */
    SD_CHECK(st == SPECDEC_OK && n >= 5 && ids[n - 4] == 243, "parrot emoji is byte-fallback tokens (n=%d)", n);
    specdec_detok_stream *ds = NULL;
    SD_CHECK(specdec_detok_stream_create(tl, 0, &ds) == SPECDEC_OK, "stream create");
    char acc[256] = "";
    size_t al = 0;
    for (int32_t i = 0; ds && i < n; i++) {
        const char *p;
        size_t pl;
        st = specdec_detok_stream_push(ds, ids[i], &p, &pl);
        SD_CHECK(st == SPECDEC_OK, "push");
        if (i >= n - 4 && i < n - 1) SD_CHECK(pl == 0, "incomplete UTF-8 held back at byte token %d (got %zu bytes)", i, pl);
        memcpy(acc + al, p, pl);
        al += pl;
    }
    if (ds) {
        const char *p;
        size_t pl;
        SD_CHECK(specdec_detok_stream_flush(ds, &p, &pl) == SPECDEC_OK && pl == 0, "nothing left to flush");
        /* an incomplete sequence at the end is flushed as U+FFFD */
        st = specdec_detok_stream_push(ds, 243 /* <0xF0> */, &p, &pl);
        SD_CHECK(st == SPECDEC_OK && pl == 0, "lone lead byte held back");
        st = specdec_detok_stream_flush(ds, &p, &pl);
        SD_CHECK(st == SPECDEC_OK && pl == 3 && !memcmp(p, "\xEF\xBF\xBD", 3), "flush gives U+FFFD (%zu bytes)", pl);
        specdec_detok_stream_free(ds);
    }
    acc[al] = '\0';
    /* the cut-down vocabulary has no "▁a": the library decodes the ids to "▁a🦜" too
     * (byte tokens for U+2581 are not touched by the Replace decoder) */
    SD_CHECK(!strcmp(acc, "\xE2\x96\x81" "a\xF0\x9F\xA6\x9C"), "streamed text '%s'", acc);
    specdec_detok_stream_free(NULL);
}

/* One tokenizer, 4 threads, the same results as single-threaded. */
static void check_threads(const specdec_tokenizer *g) {
    static int32_t ref[NT][512];
    int32_t nref[NT];
    for (size_t i = 0; i < NT; i++) specdec_tokenize(g, texts[i], strlen(texts[i]), 1, ref[i], 512, &nref[i]);
    pthread_t th[4];
    job_t jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job_t){g, ref, nref, 0};
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += jobs[i].bad;
    }
    SD_CHECK(bad == 0, "%d mismatches in concurrent use", bad);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "--fixtures") && strcmp(argv[1], "--real"))) {
        fprintf(stderr, "usage: test_tokenizer_api --fixtures REPO_ROOT | --real SHARED_TOKENIZERS_DIR\n");
        return 2;
    }
    struct stat sb;
    if (!strcmp(argv[1], "--real")) {
        if (stat(argv[2], &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            printf("skipped: the published tokenizers folder %s is absent (set SPECDEC_SHARED_DIR)\n", argv[2]);
            return 77;
        }
        snprintf(root, sizeof root, "%s", argv[2]);
        return run_real();
    }
    snprintf(root, sizeof root, "%s", argv[2]);
    specdec_tokenizer *g = load("models/kjv-target");
    specdec_tokenizer *tl = load("tests/tokenizer/fixtures/tinyllama_small.json");
    if (!g || !tl) return sd_test_done();
    check_protocol(g);
    check_stream(tl);
    check_threads(g);
    specdec_tokenizer_free(g);
    specdec_tokenizer_free(tl);
    return sd_test_done();
}

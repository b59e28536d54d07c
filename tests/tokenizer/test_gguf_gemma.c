/* test_gguf_gemma.c — a Gemma GGUF tokenizer against transformers' (tokenizer/sd_gguf_tokenizer.c).
 *
 * usage: test_gguf_gemma DIR   (DIR: tests/tokenizer/fixtures/gguf/tiny-gemma)
 * DIR/tokenizer.gguf is a Gemma-like vocabulary (tools/gen_gguf_tokenizer_fixtures.py --tiny: white-space
 * runs stored with real spaces, CONTROL turn tokens, byte fallback, scores that disagree with the file
 * order), and DIR/expected.json what transformers' GGUF tokenizer (AutoTokenizer.from_pretrained(DIR,
 * gguf_file=...)) makes of a varied sample: ids with and without BOS, decodes with and without special
 * tokens, one chat rendering. specdec must give the same, byte for byte, with no Python here. */
#define _GNU_SOURCE /* memmem in sd_test_files.h */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sd_test.h"
#include "sd_test_files.h"
#include "specdec.h"

enum { MAX_IDS = 4096, MAX_TEXT = 1 << 16 };

/* the JSON array of ids in want[], or -1 when it is not one */
static int json_ids(const cJSON *a, int32_t *want) {
    int n = 0;
    const cJSON *e;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > MAX_IDS) return -1;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e)) return -1;
        want[n++] = (int32_t)e->valuedouble;
    }
    return n;
}

static const char *json_str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void check_ids(const specdec_tokenizer *t, int c, const char *text, int add_special, const cJSON *want_json) {
    static int32_t want[MAX_IDS], got[MAX_IDS];
    int nw = json_ids(want_json, want);
    int32_t ng = -1;
    specdec_status st = specdec_tokenize(t, text, strlen(text), add_special, got, MAX_IDS, &ng);
    int same = st == SPECDEC_OK && nw >= 0 && ng == nw && !memcmp(got, want, (size_t)nw * sizeof *got);
    int at = 0;
    while (!same && at < ng && at < nw && got[at] == want[at]) at++;
    SD_CHECK(same, "case %d \"%s\" add_special %d: status %d, %d ids, transformers %d; first difference at %d: %d vs %d", c,
             text, add_special, st, ng, nw, at, at < ng ? got[at] : -1, at < nw ? want[at] : -1);
}

static void check_decode(const specdec_tokenizer *t, int c, const cJSON *ids_json, int skip, const char *want) {
    static int32_t ids[MAX_IDS];
    static char got[MAX_TEXT];
    int n = json_ids(ids_json, ids);
    size_t len = 0;
    specdec_status st = n >= 0 && want ? specdec_detokenize(t, ids, n, skip, got, sizeof got, &len) : SPECDEC_ERR_FORMAT;
    SD_CHECK(st == SPECDEC_OK && len == strlen(want) && !memcmp(got, want, len),
             "case %d decode(skip_special=%d): status %d, \"%.*s\", transformers \"%s\"", c, skip, st, (int)len, got,
             want ? want : "(missing)");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_gguf_gemma FIXTURE_DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/expected.json", argv[1]);
    size_t n = 0;
    char *raw = sd_test_slurp(path, &n);
    cJSON *doc = raw ? cJSON_ParseWithLength(raw, n) : NULL;
    free(raw);
    if (!doc) { fprintf(stderr, "cannot read %s\n", path); return 2; }
    snprintf(path, sizeof path, "%s/tokenizer.gguf", argv[1]);
    specdec_tokenizer *t = NULL;
    specdec_status st = specdec_tokenizer_load(path, &t);
    SD_CHECK(st == SPECDEC_OK, "load %s: %s", path, specdec_last_error());
    if (st) { cJSON_Delete(doc); return sd_test_done(); }

    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(doc, "vocab_size");
    SD_CHECK(cJSON_IsNumber(vs) && specdec_tokenizer_vocab_size(t) == (int32_t)vs->valuedouble, "vocab size %d, transformers %d",
             specdec_tokenizer_vocab_size(t), cJSON_IsNumber(vs) ? (int)vs->valuedouble : -1);
    SD_CHECK(specdec_tokenizer_bos_id(t) == 2 && specdec_tokenizer_eos_id(t) == 1 && specdec_tokenizer_add_bos(t) == 1,
             "bos %d eos %d add_bos %d", specdec_tokenizer_bos_id(t), specdec_tokenizer_eos_id(t), specdec_tokenizer_add_bos(t));

    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "cases"), *c;
    int nc = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *text = json_str(c, "text");
        if (!text) { SD_CHECK(0, "case %d has no text", nc); break; }
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "ids");
        check_ids(t, nc, text, 1, ids);
        check_ids(t, nc, text, 0, cJSON_GetObjectItemCaseSensitive(c, "ids_plain"));
        check_decode(t, nc, ids, 0, json_str(c, "decode"));
        check_decode(t, nc, ids, 1, json_str(c, "decode_skip"));
        nc++;
    }
    SD_CHECK(nc >= 20, "%d cases in expected.json", nc);

    /* the chat template of tokenizer.chat_template renders as apply_chat_template does */
    const cJSON *chat = cJSON_GetObjectItemCaseSensitive(doc, "chat"), *m;
    specdec_chat_message msgs[8];
    int nm = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(chat, "messages")) {
        if (nm == 8) break;
        msgs[nm++] = (specdec_chat_message){json_str(m, "role"), json_str(m, "content")};
    }
    const char *want = json_str(chat, "text");
    static char got[MAX_TEXT];
    size_t len = 0;
    st = nm && want ? specdec_chat_apply(t, NULL, msgs, nm, 1, got, sizeof got, &len) : SPECDEC_ERR_FORMAT;
    SD_CHECK(st == SPECDEC_OK && want && len == strlen(want) && !memcmp(got, want, len), "chat: status %d \"%.*s\" vs \"%s\"",
             st, (int)len, got, want ? want : "(missing)");

    printf("tiny-gemma: %d cases compared with transformers' GGUF tokenizer\n", nc);
    specdec_tokenizer_free(t);
    cJSON_Delete(doc);
    return sd_test_done();
}

/* fuzz_tokenizer.c — fuzz target: tokenizer.json text through the tokenizer loader's
 * internal entry sd_tokenizer_load_json() (tokenizer/sd_tokenizer.h), or, for an input that
 * starts with the GGUF magic, a GGUF file through sd_gguf_tokenizer_parse() (the tokenizer
 * a GGUF embeds, tokenizer/sd_gguf_tokenizer.h; seeds *_gguf_*). A refused file
 * leaves no tokenizer; a loaded one must encode a fixed text and decode (whole and
 * streamed) both the ids it produced and the first ids of its vocabulary plus ids
 * outside it, keeping the contract checked in fuzz_tok_check.h. */
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_tok_check.h"
#include "sd_gguf_tokenizer.h"
#include "sd_tokenizer.h"
#include "specdec.h"

int sd_fuzz_one(const uint8_t *data, size_t size) {
    specdec_tokenizer *tok = NULL;
    specdec_status st = size >= 4 && !memcmp(data, "GGUF", 4) ? sd_gguf_tokenizer_parse(data, size, "fuzz.gguf", &tok)
                                                               : sd_tokenizer_load_json((const char *)data, size, NULL, &tok);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(tok == NULL);
        return (int)st;
    }
    sd_fuzz_require(tok != NULL);
    const sd_ftok_opts o = {1, 0};
    static const char text[] = "Hello, world! 123 \xc3\xa9t\xc3\xa9 \xe2\x96\x81<s>  \n\xf0\x9f\x98\x80\xff";
    int32_t n = 0;
    int32_t *ids = sd_ftok_encode(tok, text, sizeof text - 1, 1, &o, &n);
    if (ids) {
        sd_ftok_decode(tok, ids, n, 0, &o);
        free(ids);
    }
    /* the first ids of the vocabulary (empty and odd tokens live there in fuzzed
     * files), then ids outside it */
    const int32_t V = specdec_tokenizer_vocab_size(tok);
    sd_fuzz_require(V >= 1);
    int32_t some[56];
    int32_t k = 0;
    for (int32_t i = 0; i < V && k < 48; i++) some[k++] = i;
    some[k++] = V - 1;
    some[k++] = V;
    some[k++] = -1;
    some[k++] = INT32_MAX;
    some[k++] = INT32_MIN;
    some[k++] = specdec_tokenizer_bos_id(tok);
    some[k++] = specdec_tokenizer_eos_id(tok);
    sd_ftok_decode(tok, some, k, 0, &o);
    sd_ftok_decode(tok, some, k, 1, &o);
    specdec_tokenizer_free(tok);
    return 0;
}

SD_FUZZ_DEFINE_ENTRY

/* fuzz_tokenizer.c — fuzz target: tokenizer.json text through the tokenizer loader's
 * internal entry sd_tokenizer_load_json() (tokenizer/sd_tokenizer.h). A loaded tokenizer
 * must encode and decode a short text without failing on memory safety. */
#include <string.h>

#include "fuzz_common.h"
#include "sd_tokenizer.h"
#include "specdec.h"

int sd_fuzz_one(const uint8_t *data, size_t size) {
    specdec_tokenizer *tok = NULL;
    specdec_status st = sd_tokenizer_load_json((const char *)data, size, NULL, &tok);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(tok == NULL);
        return (int)st;
    }
    sd_fuzz_require(tok != NULL);
    static const char text[] = "Hello, world! 123 \xc3\xa9t\xc3\xa9 \xe2\x96\x81<s>";
    int32_t ids[256];
    int32_t n = 0;
    if (specdec_tokenize(tok, text, sizeof text - 1, 1, ids, 256, &n) == SPECDEC_OK) {
        char out[2048];
        size_t len = 0;
        (void)specdec_detokenize(tok, ids, n, 0, out, sizeof out, &len);
    }
    specdec_tokenizer_free(tok);
    return 0;
}

SD_FUZZ_DEFINE_ENTRY

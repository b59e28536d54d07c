/* fuzz_safetensors.c — fuzz target: a whole safetensors file through
 * sd_st_parse_header(). A successful parse must describe tensors that lie inside the
 * data region, tile it, have sizes matching dtype x shape, and be findable by name. */
#include <string.h>

#include "fuzz_common.h"
#include "sd_safetensors.h"

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_st_header h;
    sd_errbuf eb;
    specdec_status st = sd_st_parse_header(data, size, "fuzz.safetensors", &h, &eb);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(h.tensors == NULL && h.n_tensors == 0);
        sd_fuzz_require(eb.msg[0] != '\0');
        return (int)st;
    }
    sd_fuzz_require(h.data_start + h.data_size == size);
    uint64_t covered = 0;
    for (int32_t i = 0; i < h.n_tensors; i++) {
        const sd_st_tensor *t = &h.tensors[i];
        sd_fuzz_require(t->begin <= t->end && t->end <= h.data_size);
        sd_fuzz_require((t->end - t->begin) * 8 == t->n_elements * sd_st_dtype_bits(t->dtype));
        sd_fuzz_require(sd_st_find(&h, t->name) == t);
        if (i) sd_fuzz_require(strcmp(h.tensors[i - 1].name, t->name) < 0);
        covered += t->end - t->begin;
        /* touch the bytes: ASan catches a range outside the buffer */
        if (t->end > t->begin) {
            volatile uint8_t x = data[h.data_start + t->begin] ^ data[h.data_start + t->end - 1];
            (void)x;
        }
    }
    sd_fuzz_require(covered == h.data_size);
    sd_st_header_free(&h);
    return 0;
}

SD_FUZZ_DEFINE_ENTRY

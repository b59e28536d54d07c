/* fuzz_gguf.c — fuzz target: a whole GGUF file through sd_gguf_parse() and, when it parses, through
 * specdec_model_load() (models/sd_gguf_load.c: the metadata becomes a configuration, tensors are
 * renamed, block-quantized ones repacked) and, when the model announces MTP blocks, again as its MTP draft
 * (specdec_model_params.mtp). A successful parse must describe tensors inside the data region at aligned
 * offsets, findable by name, with sizes matching type x extents; a load either fails with a message or
 * gives a model whose info reads back (the MTP draft: one layer of kind SPECDEC_DRAFT_MTP). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "sd_gguf.h"

static void check_parsed(const sd_gguf *g, const uint8_t *data, size_t size) {
    sd_fuzz_require(g->data_start + g->data_size == size || (g->n_tensors == 0 && g->data_start <= size));
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const sd_gguf_tensor *t = &g->tensors[i];
        const sd_ggml_type_info ti = sd_ggml_type_info_of(t->type);
        sd_fuzz_require(ti.block && t->ne[0] % ti.block == 0);
        sd_fuzz_require(t->nbytes == t->n_elements / ti.block * ti.bytes);
        sd_fuzz_require(t->offset % g->alignment == 0 && t->offset + t->nbytes <= g->data_size);
        sd_fuzz_require(sd_gguf_find_tensor(g, t->name) == t);
        if (t->nbytes) {
            volatile uint8_t x = data[g->data_start + t->offset] ^ data[g->data_start + t->offset + t->nbytes - 1];
            (void)x;
        }
    }
    for (uint64_t i = 0; i < g->n_kv; i++) sd_fuzz_require(sd_gguf_find(g, g->kv[i].key) == &g->kv[i]);
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_gguf g;
    sd_errbuf eb;
    specdec_status st = sd_gguf_parse(data, size, "fuzz.gguf", &g, &eb);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(g.kv == NULL && g.tensors == NULL && eb.msg[0] != '\0');
        return (int)st;
    }
    check_parsed(&g, data, size);
    sd_gguf_free(&g);
    char path[] = "/tmp/sd_fuzz_gguf_XXXXXX";
    const int fd = mkstemp(path);
    sd_fuzz_require(fd >= 0);
    const int wrote = size == 0 || write(fd, data, size) == (ssize_t)size;
    close(fd);
    sd_fuzz_require(wrote);
    specdec_model *m = NULL;
    st = specdec_model_load(path, NULL, &m);
    if (st != SPECDEC_OK) {
        unlink(path);
        sd_fuzz_require(m == NULL && specdec_last_error()[0] != '\0');
        return (int)st;
    }
    specdec_model_info info;
    sd_fuzz_require(specdec_model_get_info(m, &info) == SPECDEC_OK && info.n_layers >= 1 && info.vocab_size >= 1);
    specdec_model_free(m);
    if (info.mtp_layers > 0) { /* a GLM-4.5 file's MTP block as its one-layer draft */
        specdec_model_params mp = specdec_model_default_params();
        mp.mtp = 1;
        m = NULL;
        st = specdec_model_load(path, &mp, &m);
        sd_fuzz_require(st == SPECDEC_OK ? m != NULL : m == NULL && specdec_last_error()[0] != '\0');
        if (m)
            sd_fuzz_require(specdec_model_get_info(m, &info) == SPECDEC_OK && info.n_layers == 1 &&
                            info.model_kind == SPECDEC_DRAFT_MTP);
        specdec_model_free(m);
    }
    unlink(path);
    return st == SPECDEC_OK ? 0 : (int)st;
}

SD_FUZZ_DEFINE_ENTRY

/* fuzz_tiny_models.h — tiny random checkpoints for the fuzz targets that drive the
 * generation API (fuzz_generate, fuzz_scheduler): written once at start-up with
 * tests/checkpoint/ckpt_writer.h into a directory, loaded (the weights stay mapped) and
 * the files removed. max_position_embeddings is 64, so the default n_ctx is 64. */
#ifndef FUZZ_TINY_MODELS_H
#define FUZZ_TINY_MODELS_H

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../checkpoint/ckpt_writer.h"
#include "specdec.h"

static inline int fz_write_model(const char *dir, ck_spec *s) {
    ck_model m;
    ck_build(&m, s);
    int ok = ck_config_replace(&m, "\"max_position_embeddings\": 2048", "\"max_position_embeddings\": 64") &&
             ck_write_dir(dir, &m, s) == 0;
    ck_free(&m);
    return ok ? 0 : -1;
}

static inline void fz_rm_dir(const char *dir) {
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    char p[1024];
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* The pair both targets drive: a 2-layer F32 target (GQA 4/2) and a 1-layer BF16 draft
 * with a tied LM head, vocabulary V, seeds seed_t and seed_d. */
static inline void fz_pair_specs(int V, uint64_t seed_t, uint64_t seed_d, ck_spec *t, ck_spec *d) {
    const ck_spec tt = {.arch = "LlamaForCausalLM", .V = V, .H = 16, .I = 32, .L = 2, .NH = 4, .NKV = 2,
                        .wdtype = "F32", .ndtype = "F32", .seed = seed_t};
    const ck_spec dd = {.arch = "LlamaForCausalLM", .V = V, .H = 8, .I = 16, .L = 1, .NH = 2, .NKV = 1, .tie = 1,
                        .wdtype = "BF16", .ndtype = "F32", .seed = seed_d};
    *t = tt;
    *d = dd;
}

/* A directory for the models under $TMPDIR (or /tmp) in root[cap]; 0 on success. */
static inline int fz_make_root(char *root, size_t cap, const char *who) {
    const char *tmp = getenv("TMPDIR");
    snprintf(root, cap, "%s/specdec_%s_XXXXXX", tmp && *tmp ? tmp : "/tmp", who);
    if (mkdtemp(root)) return 0;
    fprintf(stderr, "%s: cannot create a directory under %s\n", who, tmp && *tmp ? tmp : "/tmp");
    return 1;
}

/* Write model `s` as root/name, then `extra` (may be NULL: e.g. a tokenizer writer)
 * into the same directory, load it into *out (and let `after` read the directory, may
 * be NULL), remove the files. 0 on success. */
static inline int fz_load_model(const char *root, const char *name, ck_spec *s, specdec_model **out,
                                int (*extra)(const char *dir), int (*after)(const char *dir)) {
    char dir[512]; /* short enough that ckpt_writer.h's 1024-byte paths cannot truncate */
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    int r = mkdir(dir, 0700);
    if (!r) r = fz_write_model(dir, s);
    if (!r && extra) r = extra(dir);
    if (!r && specdec_model_load(dir, NULL, out) != SPECDEC_OK) r = -1;
    if (!r && after) r = after(dir);
    if (r) fprintf(stderr, "fuzz set-up of %s failed: %s\n", dir, specdec_last_error());
    fz_rm_dir(dir); /* the weights stay mapped */
    return r;
}

#endif

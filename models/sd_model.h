/* sd_model.h — internal view of a loaded Llama-family model (struct specdec_model):
 * the sd_weights backends run (core/sd_weights.h) plus the storage behind them.
 *
 * The loader (models/sd_model_load.c) fills it from a Hugging Face directory. Weights
 * stay in the checkpoint's dtype and layout; a tensor whose bytes in the file are
 * misaligned (safetensors does not promise alignment) is copied into `owned`. */
#ifndef SD_MODEL_H
#define SD_MODEL_H

#include <stdint.h>
#include <stddef.h>

#include "specdec.h"
#include "sd_error.h"
#include "sd_weights.h"

struct sd_st_file;   /* one mapped safetensors file (models/sd_safetensors.h) */
struct sd_eagle3_head; /* an EAGLE-3 draft head (models/sd_eagle3_load.h) */

struct specdec_model {
    sd_weights w;         /* configuration and tensor views: what backends read */
    int64_t n_params;
    char path[4096];      /* directory it was loaded from */
    /* storage owned by the model */
    struct sd_st_file **files;
    int32_t n_files;
    void **owned;         /* copies of misaligned tensors */
    int32_t n_owned;
    sd_errbuf err;
    /* Set when the directory is an EAGLE-3 draft head: then `w` holds only the head's
     * decoder-layer config (w.layers == NULL: no runner accepts it as a model). */
    struct sd_eagle3_head *eagle3;
    double t_load_s;      /* seconds specdec_model_load took (specdec_stats.t_load_s) */
    int32_t file_format;  /* specdec_file_format: SPECDEC_FILE_GGUF when path is a GGUF file */
};

/* An MTP layer loaded as a draft (specdec_model_params.mtp: w is that one layer with its front). */
static inline int sd_model_is_mtp(const struct specdec_model *m) { return m && m->w.mtp_eh_proj.data != NULL; }
/* A draft that runs as a head runner over the target's hidden states (EAGLE-3 head or MTP layer). */
static inline int sd_model_is_head(const struct specdec_model *m) { return m && (m->eagle3 || sd_model_is_mtp(m)); }

#endif

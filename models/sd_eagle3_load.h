/* sd_eagle3_load.h — loading an EAGLE-3 draft head directory (docs/EAGLE3.md) into a
 * specdec_model: the head is recognised by its tensors (fc.weight and a hidden_norm under
 * `midlayer.` or `layers.0.`), never by `architectures`, in the flat EAGLE / SpecForge /
 * sglang layout and in the nested speculators layout; F32/F16/BF16 weights; with or without
 * its own embed_tokens; a reduced draft vocabulary through d2t (and/or t2d); explicit capture
 * ids or the default rule. specdec_model_load calls sd_eagle3_model_load first and falls back
 * to the Llama-family loader when the directory is not a head. */
#ifndef SD_EAGLE3_LOAD_H
#define SD_EAGLE3_LOAD_H

#include "sd_eagle3.h"
#include "sd_model.h"

/* The head owned by a specdec_model (m->eagle3). */
typedef struct sd_eagle3_head {
    sd_eagle3_weights w;   /* views into m->files[0] or `owned` copies */
    int32_t *d2t;          /* [Vd] target id per draft id (w.d2t points here) */
    void **owned;          /* copies of misaligned tensors */
    int32_t n_owned, cap_owned;
} sd_eagle3_head;

/* If m->path holds a single model.safetensors whose tensors make an EAGLE-3 head, load it:
 * *is_head = 1, m->eagle3, m->files, m->w.cfg (the head's decoder-layer config, for
 * specdec_model_get_info) and m->n_params are filled. Not a head (or no model.safetensors):
 * *is_head = 0 and m is untouched. A file that cannot be opened/parsed, a bad config, missing
 * or mis-shaped tensors, a d2t/t2d out of range: the status (IO, FORMAT, UNSUPPORTED,
 * MODEL_MISMATCH) with the detail naming file, key or tensor; *is_head = 1 when the tensors
 * said it is a head. Whatever was allocated is left in m for specdec_model_free. */
specdec_status sd_eagle3_model_load(specdec_model *m, int use_mmap, int *is_head);

/* Free m->eagle3 (NULL: nothing). */
void sd_eagle3_model_free(specdec_model *m);

/* The head's fields of specdec_model_info (model_kind, eagle3_*); a plain model gets
 * model_kind 0 and zeros. */
void sd_eagle3_model_info(const specdec_model *m, specdec_model_info *info);

#endif

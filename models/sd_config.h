/* sd_config.h — parsing and validation of a Hugging Face config.json into sd_config
 * (models/sd_model.h) for LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM. */
#ifndef SD_CONFIG_H
#define SD_CONFIG_H

#include <stddef.h>

#include "sd_model.h"

/* Bounds on config values: anything outside is refused before any allocation. */
#define SD_CFG_MAX_LAYERS 1024
#define SD_CFG_MAX_HIDDEN 65536
#define SD_CFG_MAX_INTERMEDIATE 1048576
#define SD_CFG_MAX_HEADS 1024
#define SD_CFG_MAX_HEAD_DIM 1024
#define SD_CFG_MAX_VOCAB 16777216
#define SD_CFG_MAX_POSITIONS 1073741824

/* Parse config.json text json[0..len) (need not be NUL-terminated). `fname` names the
 * file in error messages. On failure returns FORMAT (not JSON, wrong type, missing key,
 * out-of-range or inconsistent values) or UNSUPPORTED (architecture, rope type) with
 * the detail naming the key; *cfg is then unspecified. */
specdec_status sd_config_parse(const char *json, size_t len, const char *fname, sd_config *cfg, sd_errbuf *eb);

/* Short name of an architecture's rope type for display ("none", "llama3"). */
const char *sd_config_rope_name(const sd_config *cfg);

#endif

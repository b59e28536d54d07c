/* sd_config.h — parsing and validation of a Hugging Face config.json into sd_config
 * (core/sd_weights.h) for the families of models/sd_family.h (Llama, Mistral, Qwen2,
 * Qwen3, Phi-3, Gemma, Gemma 2, Gemma 3 text). */
#ifndef SD_CONFIG_H
#define SD_CONFIG_H

#include <stddef.h>

#include "sd_weights.h"

/* Parse config.json text json[0..len) (need not be NUL-terminated). `fname` names the
 * file in error messages. On failure returns FORMAT (not JSON, wrong type, missing key,
 * out-of-range or inconsistent values) or UNSUPPORTED (architecture, rope type) with
 * the detail naming the key; *cfg is then unspecified. */
specdec_status sd_config_parse(const char *json, size_t len, const char *fname, sd_config *cfg, sd_errbuf *eb);

/* Short name of the rope type for display ("none", "llama3", "linear", "dynamic",
 * "yarn", "longrope"). */
const char *sd_config_rope_name(const sd_config *cfg);

#endif

/* sd_config.h — parsing and validation of a Hugging Face config.json into sd_config
 * (core/sd_weights.h) for LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM. */
#ifndef SD_CONFIG_H
#define SD_CONFIG_H

#include <stddef.h>

#include "sd_weights.h"

/* Parse config.json text json[0..len) (need not be NUL-terminated). `fname` names the
 * file in error messages. On failure returns FORMAT (not JSON, wrong type, missing key,
 * out-of-range or inconsistent values) or UNSUPPORTED (architecture, rope type) with
 * the detail naming the key; *cfg is then unspecified. */
specdec_status sd_config_parse(const char *json, size_t len, const char *fname, sd_config *cfg, sd_errbuf *eb);

/* Short name of an architecture's rope type for display ("none", "llama3"). */
const char *sd_config_rope_name(const sd_config *cfg);

#endif

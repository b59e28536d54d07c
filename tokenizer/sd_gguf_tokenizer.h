/* sd_gguf_tokenizer.h — the tokenizer embedded in a GGUF file (tokenizer/sd_gguf_tokenizer.c). */
#ifndef SD_GGUF_TOKENIZER_H
#define SD_GGUF_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "specdec.h"

/* 1 when the file at path starts with the GGUF magic. */
int sd_gguf_tokenizer_is(const char *path);
/* The tokenizer of the GGUF file at path (memory-mapped; tensor data never read). */
specdec_status sd_gguf_tokenizer_load(const char *path, specdec_tokenizer **out);
/* The same from a whole GGUF file held in data[0..size); fname names it in messages. */
specdec_status sd_gguf_tokenizer_parse(const uint8_t *data, size_t size, const char *fname, specdec_tokenizer **out);

#endif

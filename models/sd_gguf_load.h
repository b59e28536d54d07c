/* sd_gguf_load.h — a GGUF file (llama.cpp's single-file checkpoint) as the model loader's input: the
 * configuration its metadata implies (as the config.json of the Hugging Face checkpoint it was
 * converted from) and its tensors under their Hugging Face names, so models/sd_model_load.c loads it
 * like a safetensors file. Architectures "llama" (Llama 1-3, Mistral, TinyLlama, ...), "qwen2", "qwen3",
 * "qwen2moe" and "qwen3moe" (stacked experts split into per-expert slices; "llama" with experts is
 * Mixtral), "phi3" (fused qkv / gate_up, partial rotary, longrope factor tensors); tensors F32, F16, BF16 (views of the mapped file) and the block types models/sd_ggml.h
 * repacks. llama.cpp's converter permutes the rows of a "llama" model's attn_q / attn_k so that ggml's
 * rope turns adjacent pairs; specdec keeps the rows and turns adjacent pairs (cfg.rope_interleaved),
 * the same attention. A `rope_freqs.weight` (Llama 3.1's rope scaling, per-pair frequency divisors)
 * becomes per-pair rope factors (the longrope machinery with one factor list and attention factor 1). */
#ifndef SD_GGUF_LOAD_H
#define SD_GGUF_LOAD_H

#include "sd_model.h"
#include "sd_safetensors.h"

/* 1 when `path` is a regular file that starts with the GGUF magic. */
int sd_gguf_path(const char *path);

/* Maps the GGUF file m->path (use_mmap as specdec_model_params) and, when it is the first of a split GGUF
 * (llama.cpp's gguf-split: split.count files named PREFIX-0000k-of-NNNNN.gguf), the others, into *out
 * (*n_out files, allocated; the caller closes them and frees the array, on failure too): their tensors
 * renamed to the Hugging Face names (block-quantized ones flagged by sd_st_tensor.gguf_quant); parses the
 * configuration the first file's metadata implies into m->w.cfg. With `mtp` (specdec_model_params.mtp) only
 * the first MTP block's tensors (a GLM-4.5 file's block n_layers: its decoder layer and nextn.*) and the
 * global ones are kept, the other blocks left out; else the MTP blocks are. Unsupported architectures, metadata and
 * tensor types are SPECDEC_ERR_UNSUPPORTED naming the key, tensor or type; malformed ones (a shard
 * missing, out of order, a tensor count that does not add up) SPECDEC_ERR_FORMAT. */
specdec_status sd_gguf_open_model(specdec_model *m, int use_mmap, int mtp, sd_st_file ***out, int32_t *n_out);

#endif

/* sd_model.h — internal view of a loaded Llama-family model (struct specdec_model).
 *
 * The loader (models/sd_model_load.c) fills this from a Hugging Face directory; the
 * backends (kernels/cpu, kernels/cuda) read it. Weights stay in the checkpoint's
 * dtype and layout (PyTorch nn.Linear: [out_features, in_features], row-major).
 * Every sd_tensor.data is aligned to its element size: the loader copies a tensor
 * whose bytes in the file are misaligned (safetensors does not promise alignment). */
#ifndef SD_MODEL_H
#define SD_MODEL_H

#include <stdint.h>
#include <stddef.h>

#include "specdec.h"
#include "sd_error.h"

typedef enum sd_arch {
    SD_ARCH_LLAMA = 0,    /* LlamaForCausalLM (Llama 2/3/3.x, TinyLlama, SmolLM) */
    SD_ARCH_MISTRAL = 1,  /* MistralForCausalLM */
    SD_ARCH_QWEN2 = 2     /* Qwen2ForCausalLM: q/k/v bias */
} sd_arch;

typedef enum sd_rope_type {
    SD_ROPE_DEFAULT = 0,  /* no rope_scaling */
    SD_ROPE_LLAMA3 = 1    /* rope_scaling.rope_type == "llama3" */
} sd_rope_type;

typedef struct sd_config {
    sd_arch arch;
    char architecture[64];
    int32_t vocab_size;
    int32_t hidden_size;
    int32_t intermediate_size;
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;              /* config head_dim, else hidden_size / n_heads */
    int32_t max_position_embeddings;
    float rms_norm_eps;
    float rope_theta;
    sd_rope_type rope_type;
    float rope_factor;             /* llama3: factor */
    float rope_low_freq_factor;    /* llama3: low_freq_factor */
    float rope_high_freq_factor;   /* llama3: high_freq_factor */
    int32_t rope_original_max_pos; /* llama3: original_max_position_embeddings */
    int32_t tie_word_embeddings;
    int32_t attention_bias;        /* q/k/v biases present */
    int32_t bos_id;                /* -1 if none */
    int32_t n_eos;
    int32_t eos_ids[SPECDEC_MAX_EOS];
} sd_config;

typedef enum sd_dtype {
    SD_F32 = SPECDEC_DTYPE_F32,
    SD_F16 = SPECDEC_DTYPE_F16,
    SD_BF16 = SPECDEC_DTYPE_BF16
} sd_dtype;

/* A 1-D or 2-D weight. data == NULL means absent (optional tensors only). */
typedef struct sd_tensor {
    const void *data;   /* aligned to the element size; points into the mapping or an owned copy */
    sd_dtype dtype;
    int32_t ndim;       /* 1 or 2 */
    int64_t shape[2];   /* [rows, cols] for 2-D; [n, 1] for 1-D */
} sd_tensor;

typedef struct sd_layer {
    sd_tensor attn_norm;  /* [hidden] */
    sd_tensor wq;         /* [n_heads*head_dim, hidden] */
    sd_tensor wk;         /* [n_kv_heads*head_dim, hidden] */
    sd_tensor wv;         /* [n_kv_heads*head_dim, hidden] */
    sd_tensor bq;         /* [n_heads*head_dim] (Qwen2) or absent */
    sd_tensor bk;         /* [n_kv_heads*head_dim] or absent */
    sd_tensor bv;         /* [n_kv_heads*head_dim] or absent */
    sd_tensor wo;         /* [hidden, n_heads*head_dim] */
    sd_tensor ffn_norm;   /* [hidden] */
    sd_tensor w_gate;     /* [intermediate, hidden] */
    sd_tensor w_up;       /* [intermediate, hidden] */
    sd_tensor w_down;     /* [hidden, intermediate] */
    sd_tensor bo;         /* [hidden] o_proj bias: Llama with attention_bias only, else absent */
} sd_layer;

struct sd_st_file;   /* one mapped safetensors file (models/sd_safetensors.h) */

struct specdec_model {
    sd_config cfg;
    sd_tensor tok_embd;   /* [vocab, hidden] model.embed_tokens.weight */
    sd_layer *layers;     /* [n_layers] */
    sd_tensor out_norm;   /* [hidden] model.norm.weight */
    sd_tensor lm_head;    /* [vocab, hidden]; == tok_embd when tied */
    sd_dtype dtype;       /* dtype of the projection weights */
    int64_t n_params;
    char path[4096];      /* directory it was loaded from */
    /* storage owned by the model */
    struct sd_st_file **files;
    int32_t n_files;
    void **owned;         /* copies of misaligned tensors */
    int32_t n_owned;
    sd_errbuf err;
};

/* Element size in bytes of a dtype. */
static inline size_t sd_dtype_size(sd_dtype t) { return t == SD_F32 ? 4u : 2u; }

#endif

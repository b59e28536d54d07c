/* sd_weights.h — the model description every layer shares: dtypes, the decoder's
 * configuration (sd_config), weight tensor views (sd_tensor, sd_layer) and the whole
 * set a backend runs (sd_weights). Plain data, no ownership: models/ fills it from a
 * Hugging Face directory (the views point into the mapped files), backends/ read it.
 *
 * Weights are in PyTorch nn.Linear layout ([out_features, in_features], row-major) and
 * in the checkpoint's dtype; every sd_tensor.data is aligned to its element size.
 *
 * sd_config_validate() is THE check of a configuration's values and their consistency
 * (one status per fault, SPECDEC_ERR_FORMAT: the values a config.json may not have).
 * The loader calls it after parsing; backends rely on it and never re-validate;
 * synthetic configurations (benchmarks, tests) go through it too. */
#ifndef SD_WEIGHTS_H
#define SD_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "specdec.h"
#include "sd_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds on config values: anything outside is refused before any allocation. */
#define SD_CFG_MAX_LAYERS 1024
#define SD_CFG_MAX_HIDDEN 65536
#define SD_CFG_MAX_INTERMEDIATE 1048576
#define SD_CFG_MAX_HEADS 1024
#define SD_CFG_MAX_HEAD_DIM 1024
#define SD_CFG_MAX_VOCAB 16777216
#define SD_CFG_MAX_POSITIONS 1073741824

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
    int32_t sliding_window;        /* Mistral: keys a query sees, itself included (positions
                                      p - sliding_window + 1 .. p); 0 = no window */
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

/* Everything a backend needs to run a model: the configuration and the tensors
 * (borrowed views). Filled by the loader (struct specdec_model embeds one). */
typedef struct sd_weights {
    sd_config cfg;
    sd_tensor tok_embd;   /* [vocab, hidden] model.embed_tokens.weight */
    sd_layer *layers;     /* [n_layers] */
    sd_tensor out_norm;   /* [hidden] model.norm.weight */
    sd_tensor lm_head;    /* [vocab, hidden]; == tok_embd when tied */
    sd_dtype dtype;       /* dtype of the projection weights */
} sd_weights;

/* Element size in bytes of a dtype. */
static inline size_t sd_dtype_size(sd_dtype t) { return t == SD_F32 ? 4u : 2u; }

/* Check cfg's values: sizes in [1, SD_CFG_MAX_*], n_heads a multiple of n_kv_heads,
 * head_dim even (RoPE rotates pairs), rms_norm_eps > 0, rope_theta > 0, llama3 rope
 * parameters positive with high_freq_factor > low_freq_factor, bos/eos ids inside the
 * vocabulary, n_eos in [0, SPECDEC_MAX_EOS]. SPECDEC_ERR_FORMAT naming the field and
 * value (prefixed by `what`, e.g. the file name), else SPECDEC_OK. */
specdec_status sd_config_validate(const sd_config *cfg, const char *what, sd_errbuf *eb);

/* sd_config_validate(&w->cfg), then every tensor view: present (biases optional),
 * F32/F16/BF16, shaped as the configuration implies. MODEL_MISMATCH naming the layer
 * and tensor (UNSUPPORTED for another dtype). Runners call it at creation. */
specdec_status sd_weights_validate(const sd_weights *w, sd_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif

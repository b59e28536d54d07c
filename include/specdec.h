/*
 * specdec.h — the public C ABI of specdec, a speculative-decoding runtime for
 * Llama-family transformer language models (CPU reference backend and CUDA).
 *
 * Conventions
 * - Every function that can fail returns a specdec_status; SPECDEC_OK == 0.
 * - Handles are opaque. Every create/load has a free; freeing NULL is a no-op.
 *   Using a handle after it was freed is undefined behaviour (as with free()).
 * - Errors: each handle keeps the detail of its last failure (file, tensor, value),
 *   readable with specdec_<object>_last_error(). A create/load that fails has no
 *   handle yet: its detail is kept per thread and read with specdec_last_error().
 *   A failed call leaves the handle as it was before the call unless stated.
 * - Ownership: pointers passed in are borrowed for the duration of the call unless a
 *   comment says otherwise; output buffers are owned by the caller.
 * - Thread safety: a specdec_model and a specdec_tokenizer are immutable after load
 *   and may be used from any number of threads at once. A specdec_engine is used by
 *   one thread at a time; a second thread calling into an engine that is busy gets
 *   SPECDEC_ERR_BUSY (it does not block and does not corrupt state). A model must
 *   outlive every engine created from it.
 * - Parameter structs are obtained from specdec_*_default_params(), then edited.
 *   Their reserved fields must stay zero; future versions give them meaning.
 */
#ifndef SPECDEC_H
#define SPECDEC_H

#include <stddef.h>
#include <stdint.h>

/* Versions and the ABI: while SPECDEC_VERSION_MAJOR is 0, a minor version may grow a
 * struct the caller allocates (0.4 grew specdec_stats, 0.5 specdec_generate_params), so
 * the shared library's soname is libspecdec.so.MAJOR.MINOR (libspecdec.so.0.5) and the
 * CMake package matches the
 * minor version; a program is rebuilt for each 0.x. Within a minor version, and from 1.0
 * on within a major version (soname libspecdec.so.MAJOR), existing fields keep their
 * offsets and meaning, enum numbers are stable, and new fields take reserved space. */
#define SPECDEC_VERSION_MAJOR 0
#define SPECDEC_VERSION_MINOR 5
#define SPECDEC_VERSION_PATCH 10
#define SPECDEC_VERSION_NUMBER \
    (SPECDEC_VERSION_MAJOR * 10000 + SPECDEC_VERSION_MINOR * 100 + SPECDEC_VERSION_PATCH)
#define SPECDEC_VERSION_STRING "0.5.10"

/* Largest draft length γ an engine supports (per round, fixed or adaptive); also the
 * deepest draft tree. */
#define SPECDEC_MAX_DRAFT 16
/* Most draft nodes one round of tree speculation verifies (the pending token excluded). */
#define SPECDEC_MAX_TREE_NODES 64
/* Most threads specdec_engine_params.cpu_threads (or SPECDEC_CPU_THREADS) may ask for. */
#define SPECDEC_MAX_CPU_THREADS 256
/* Most tokens specdec_engine_params.ngram_corpus_tokens may ask for (since 0.5.10). */
#define SPECDEC_MAX_NGRAM_CORPUS_TOKENS (1 << 26)
/* Most EOS ids a model config may list. */
#define SPECDEC_MAX_EOS 8

#if defined(_WIN32)
#  if defined(SPECDEC_BUILD_SHARED)
#    define SPECDEC_API __declspec(dllexport)
#  elif defined(SPECDEC_USE_SHARED)
#    define SPECDEC_API __declspec(dllimport)
#  else
#    define SPECDEC_API
#  endif
#else
#  define SPECDEC_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Status codes: the numbers are stable across versions.                     */
/* ------------------------------------------------------------------------- */
typedef enum specdec_status {
    SPECDEC_OK = 0,
    SPECDEC_ERR_INVALID_ARGUMENT = 1,   /* NULL pointer, value out of range */
    SPECDEC_ERR_OUT_OF_MEMORY = 2,      /* host or device allocation failed */
    SPECDEC_ERR_IO = 3,                 /* file missing, unreadable, mmap failed */
    SPECDEC_ERR_FORMAT = 4,             /* malformed safetensors / JSON / tokenizer */
    SPECDEC_ERR_UNSUPPORTED = 5,        /* well-formed but not supported (arch, dtype, rope type) */
    SPECDEC_ERR_MODEL_MISMATCH = 6,     /* tensor missing / wrong shape; target and draft disagree */
    SPECDEC_ERR_CONTEXT_FULL = 7,       /* tokens would not fit in the engine's context */
    SPECDEC_ERR_BACKEND_UNAVAILABLE = 8,/* CUDA requested but not built in or no device */
    SPECDEC_ERR_DEVICE_LOST = 9,        /* sticky device error: the engine can only be freed */
    SPECDEC_ERR_BUSY = 10,              /* engine in use by another thread */
    SPECDEC_ERR_BUFFER_TOO_SMALL = 11,  /* output buffer too small; the needed size is reported */
    SPECDEC_ERR_INTERNAL = 12,          /* a bug in specdec: please report */
    SPECDEC_ERR_QUEUE_FULL = 13,        /* the scheduler's queue is full: retry later */
    SPECDEC_ERR_NOT_FOUND = 14,         /* no such request id (never issued, or already collected) */
    SPECDEC_ERR_CANCELLED = 15,         /* a request's outcome: cancelled before it finished */
    SPECDEC_ERR_TIMEOUT = 16,           /* a wait ran out of time; the request goes on */
    SPECDEC_ERR_SHUT_DOWN = 17          /* the scheduler is shutting down / shut down */
} specdec_status;

/* Static English name of a status ("SPECDEC_OK: success", ...). Never NULL. */
SPECDEC_API const char *specdec_status_string(specdec_status status);

/* SPECDEC_VERSION_NUMBER / SPECDEC_VERSION_STRING of the library actually linked. */
SPECDEC_API unsigned specdec_version_number(void);
SPECDEC_API const char *specdec_version_string(void);

/* Detail of the last failed create/load call on the calling thread ("" if none).
 * The string is owned by the library and valid until the next failing call on this thread. */
SPECDEC_API const char *specdec_last_error(void);

/* 1 if this build contains the CUDA backend, 0 otherwise. */
SPECDEC_API int specdec_has_cuda(void);
/* Number of usable CUDA devices (0 without CUDA support, a driver, or a device). */
SPECDEC_API int specdec_cuda_device_count(void);

typedef struct specdec_model specdec_model;
typedef struct specdec_engine specdec_engine;
typedef struct specdec_tokenizer specdec_tokenizer;
typedef struct specdec_grammar specdec_grammar; /* structured output (since 0.5.1) */

/* ------------------------------------------------------------------------- */
/* Models: Hugging Face Llama-family directories (config.json + safetensors).  */
/* ------------------------------------------------------------------------- */
typedef enum specdec_dtype {
    SPECDEC_DTYPE_F32 = 0,
    SPECDEC_DTYPE_F16 = 1,
    SPECDEC_DTYPE_BF16 = 2,
    SPECDEC_DTYPE_FP8_E4M3 = 3, /* since 0.5.7: block-scaled float8_e4m3fn weights (quantization_config
                                   "fp8": DeepSeek-V3, Qwen3-*-FP8, ...), CPU backend; model_info only */
    SPECDEC_DTYPE_INT4 = 4,     /* since 0.5.8: 4-bit integer weights with group scales and zero points
                                   (quantization_config "gptq" / "awq" / compressed-tensors
                                   "pack-quantized"), CPU backend; model_info only */
    SPECDEC_DTYPE_INT8 = 5      /* since 0.5.8: the same with 8-bit integers (GPTQ bits 8, compressed-tensors
                                   W8A16), CPU backend; model_info only */
} specdec_dtype;

typedef struct specdec_model_params {
    int32_t use_mmap;      /* 1 (default): memory-map the safetensors files; 0: read them into memory */
    /* since 0.5.7 (was reserved_i[0]): 1 = load the checkpoint's multi-token-prediction layer
     * (GLM-4.5 / DeepSeek-V3 `num_nextn_predict_layers`, model.layers.<num_hidden_layers>.*) as an
     * MTP draft model: model_kind SPECDEC_DRAFT_MTP, n_layers 1. It drafts over an engine's or
     * scheduler's target loaded from the same checkpoint (draft_method SPECDEC_DRAFT_MTP; CPU
     * backend). MODEL_MISMATCH when the checkpoint has none. 0 (default): the model itself. */
    int32_t mtp;
    int32_t reserved_i[6];
    uint64_t reserved[8];
} specdec_model_params;

SPECDEC_API specdec_model_params specdec_model_default_params(void);

/* Load a model directory (config.json plus model.safetensors, or the shards named by
 * model.safetensors.index.json), or (since 0.5.9) a GGUF file: llama.cpp's single-file format,
 * architectures llama (and Mixtral) / qwen2 / qwen3 / qwen2moe / qwen3moe / phi3, tensors F32, F16, BF16 and the block types Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (block-quantized ones: CPU backend; README "GGUF files").
 * `path` is borrowed. On success *out_model owns the
 * mapping of the files; free it with specdec_model_free(). On failure *out_model is
 * set to NULL and specdec_last_error() names the file and the tensor or key. */
SPECDEC_API specdec_status specdec_model_load(const char *path, const specdec_model_params *params,
                                              specdec_model **out_model);
SPECDEC_API void specdec_model_free(specdec_model *model);
SPECDEC_API const char *specdec_model_last_error(const specdec_model *model);

typedef struct specdec_model_info {
    char architecture[64];        /* "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM" */
    int32_t vocab_size;
    int32_t hidden_size;
    int32_t intermediate_size;
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;
    int32_t max_position_embeddings;
    float rms_norm_eps;
    float rope_theta;
    int32_t rope_scaling_llama3;  /* 1 if rope_scaling.rope_type == "llama3" */
    int32_t tie_word_embeddings;
    int32_t attention_bias;       /* q/k/v projections carry a bias (Qwen2) */
    specdec_dtype dtype;          /* dtype of the projection weights */
    int64_t n_params;             /* parameters stored (tied embeddings counted once) */
    int32_t bos_id;               /* -1 if none */
    int32_t n_eos;                /* number of valid entries in eos_ids */
    int32_t eos_ids[SPECDEC_MAX_EOS];
    /* Since 0.4 (carved from the reserved space; the struct's size is unchanged). What the
     * directory holds: 0 = a language model; SPECDEC_DRAFT_EAGLE3 (3) = an EAGLE-3 draft
     * head, recognised by its tensors (flat EAGLE / SpecForge / sglang or speculators layout).
     * For a head the fields above describe its one decoder layer (hidden_size, heads,
     * head_dim, intermediate_size, its own RoPE, n_layers = 1, dtype, n_params) and
     * vocab_size is the TARGET vocabulary it drafts in; the head cannot run as a model of
     * its own (an engine refuses it as target or draft with MODEL_MISMATCH). */
    int32_t model_kind;
    int32_t eagle3_target_hidden;   /* head: hidden_size of the target it fits (fc reads 3 x this); else 0 */
    int32_t eagle3_draft_vocab;     /* head: ids its LM head scores (<= vocab_size, mapped by d2t); else 0 */
    int32_t eagle3_aux_layers[3];   /* head: captured target hidden states as hs indices (0 = embeddings,
                                       i = the input of target layer i, L = the last layer's output
                                       before the final norm); all -1 = the default rule 2, L/2, L-3 of
                                       the target's L layers; else 0 */
    int32_t eagle3_own_embedding;   /* head: 1 = ships embed_tokens, 0 = uses the target's; else 0 */
    /* since 0.5.6 (was reserved_i[0]; the struct keeps its size): the rope scaling of the full-attention
     * layers, a specdec_rope_type (rope_scaling_llama3 stays 1 exactly when this is LLAMA3) */
    int32_t rope_type;
    /* since 0.5.7 (was the first half of reserved[0]; the struct keeps its size): MTP layers the
     * checkpoint ships (config.json num_nextn_predict_layers: GLM-4.5, DeepSeek-V3); >= 1 means it
     * can draft for itself (specdec_model_params.mtp, draft_method SPECDEC_DRAFT_MTP); 0 = none */
    int32_t mtp_layers;
    /* since 0.5.9 (was reserved_i2; the struct keeps its size): what was loaded, a specdec_file_format:
     * SPECDEC_FILE_HF (0) a Hugging Face directory, SPECDEC_FILE_GGUF (1) a GGUF file (llama.cpp's format;
     * its block-quantized matrices report SPECDEC_DTYPE_INT4 / INT8) */
    int32_t file_format;
    uint64_t reserved[3];
} specdec_model_info;

/* specdec_model_info.file_format (since 0.5.9). */
typedef enum specdec_file_format {
    SPECDEC_FILE_HF = 0,  /* config.json + safetensors */
    SPECDEC_FILE_GGUF = 1 /* one .gguf file (specdec_model_load's path names the file) */
} specdec_file_format;

/* specdec_model_info.rope_type: config.json's rope_scaling / rope_parameters type, resolved as
 * transformers resolves it (Phi-3's "su" is LONGROPE). */
typedef enum specdec_rope_type {
    SPECDEC_ROPE_DEFAULT = 0,  /* none */
    SPECDEC_ROPE_LLAMA3 = 1,
    SPECDEC_ROPE_LINEAR = 2,
    SPECDEC_ROPE_DYNAMIC = 3,  /* dynamic NTK */
    SPECDEC_ROPE_YARN = 4,
    SPECDEC_ROPE_LONGROPE = 5
} specdec_rope_type;

SPECDEC_API specdec_status specdec_model_get_info(const specdec_model *model, specdec_model_info *info);

/* ------------------------------------------------------------------------- */
/* Engines: a target model, an optional draft model, their KV caches.         */
/* ------------------------------------------------------------------------- */
typedef enum specdec_backend {
    SPECDEC_BACKEND_AUTO = 0,  /* CUDA when built in and a device exists, else CPU */
    SPECDEC_BACKEND_CPU = 1,   /* plain-C fp32 reference */
    SPECDEC_BACKEND_CUDA = 2
} specdec_backend;

typedef struct specdec_engine_params {
    specdec_backend backend;  /* default SPECDEC_BACKEND_AUTO */
    int32_t n_ctx;            /* context length in tokens; 0 = min(max_position_embeddings, 4096).
                                 More than either model's max_position_embeddings (positions it
                                 was never trained for): INVALID_ARGUMENT naming both numbers,
                                 before any weights are converted or uploaded (since 0.4) */
    int32_t max_batch;        /* most tokens per forward call; 0 = n_ctx (prefill in one call);
                                 raised to SPECDEC_MAX_TREE_NODES + 1 (a verify pass is one call) */
    int32_t cuda_device;      /* CUDA device ordinal; default 0 */
    int32_t cuda_keep_f32;    /* CUDA: keep F32 checkpoints in F32 instead of converting to BF16 */
    /* since 0.5.3 (was reserved_i[0]; the struct keeps its size) */
    int32_t cpu_threads;      /* CPU backend: threads of each model's forward pass (the calling
                                 thread included), 1..SPECDEC_MAX_CPU_THREADS; 0 (default) = the
                                 environment's SPECDEC_CPU_THREADS when set (1..SPECDEC_MAX_CPU_THREADS,
                                 else INVALID_ARGUMENT), else the physical cores this process may
                                 use, at most 8. Outputs are bitwise the same for every count
                                 (each value is computed by one thread in the one-thread order).
                                 Negative or more than SPECDEC_MAX_CPU_THREADS: INVALID_ARGUMENT.
                                 Threads that cannot be started are done without (never an error).
                                 Ignored by the CUDA backend */
    /* since 0.5.10 (was reserved_i[0]; the struct keeps its size): the n-gram drafter's cross-request
     * corpus (docs/DRAFTERS.md "Across requests"), in tokens, 0..2^26; 0 (default) = none. With it,
     * every finished generation of this engine or scheduler (its output and the last 64 prompt tokens)
     * is kept, oldest evicted first, and a sequence drafting with SPECDEC_DRAFT_NGRAM also proposes what
     * followed its suffix there (as vLLM's "suffix" method's global cache). Outputs stay exactly the
     * target's (GREEDY / MATCH: token for token the same); costs a scan of the corpus per round. */
    int32_t ngram_corpus_tokens;
    int32_t reserved_i[5];
    uint64_t reserved[8];
} specdec_engine_params;

SPECDEC_API specdec_engine_params specdec_engine_default_params(void);

/* Create an engine. `target` is required, `draft` may be NULL (plain decoding).
 * Both models are borrowed and must outlive the engine. A draft whose vocabulary
 * size or special ids disagree with the target's is refused
 * (SPECDEC_ERR_MODEL_MISMATCH). KV caches and activations are allocated here;
 * nothing is allocated while generating. params NULL = defaults. BACKEND_AUTO picks
 * CUDA when a device is usable, else CPU; BACKEND_CUDA without one fails with
 * SPECDEC_ERR_BACKEND_UNAVAILABLE. On failure *out_engine is NULL. */
SPECDEC_API specdec_status specdec_engine_create(const specdec_model *target, const specdec_model *draft,
                                                 const specdec_engine_params *params,
                                                 specdec_engine **out_engine);
SPECDEC_API void specdec_engine_free(specdec_engine *engine);
SPECDEC_API const char *specdec_engine_last_error(const specdec_engine *engine);
/* The backend the engine runs on (never AUTO). */
SPECDEC_API specdec_backend specdec_engine_backend(const specdec_engine *engine);
/* The engine's context length in tokens. */
SPECDEC_API int32_t specdec_engine_n_ctx(const specdec_engine *engine);

/* Which of the engine's two models a low-level call addresses. */
typedef enum specdec_role {
    SPECDEC_ROLE_TARGET = 0,
    SPECDEC_ROLE_DRAFT = 1
} specdec_role;

/* Run one forward pass of `role`'s model over tokens[0..n_tokens) at absolute
 * positions [pos, pos + n_tokens). Requires 0 <= pos <= current KV length; the cache
 * is first truncated to pos, then the n_tokens keys/values are appended. If `logits`
 * is not NULL it receives n_tokens rows of vocab_size fp32 logits (caller-owned,
 * n_tokens * vocab_size floats). Logits of a position are bitwise identical whether
 * computed alone or inside a longer call (batch invariance). */
SPECDEC_API specdec_status specdec_engine_forward(specdec_engine *engine, specdec_role role,
                                                  const int32_t *tokens, int32_t n_tokens, int32_t pos,
                                                  float *logits);
/* Current KV-cache length of `role`'s model, or -1 on a bad argument. */
SPECDEC_API int32_t specdec_engine_kv_length(const specdec_engine *engine, specdec_role role);
/* Truncate `role`'s KV cache to `length` tokens (O(1)); length must be <= the current length. */
SPECDEC_API specdec_status specdec_engine_kv_truncate(specdec_engine *engine, specdec_role role,
                                                      int32_t length);

/* ------------------------------------------------------------------------- */
/* Generation                                                                 */
/* ------------------------------------------------------------------------- */
typedef enum specdec_verify_mode {
    SPECDEC_VERIFY_AUTO = 0,       /* greedy when temperature == 0, else rejection */
    SPECDEC_VERIFY_REJECTION = 1,  /* Leviathan/Chen rejection sampling, residual norm(max(0,p-q)) */
    SPECDEC_VERIFY_GREEDY = 2,     /* accept while the draft equals the target's argmax */
    SPECDEC_VERIFY_MATCH = 3       /* coupled inverse-CDF sampling: output == plain decoding, same seed */
} specdec_verify_mode;

/* Who proposes the draft tokens of a round (since 0.4; generate params `draft_method`, stats
 * `draft_method`). Stable numbers. */
typedef enum specdec_draft_method {
    SPECDEC_DRAFT_AUTO = 0,    /* the engine's draft model when it has one (an EAGLE-3 head is
                                  detected as such), else plain decoding */
    SPECDEC_DRAFT_MODEL = 1,   /* a separate draft model (the engine's draft) */
    SPECDEC_DRAFT_NGRAM = 2,   /* prompt lookup over the sequence so far; no draft model */
    SPECDEC_DRAFT_EAGLE3 = 3,  /* an EAGLE-3 head reading the target's hidden states */
    SPECDEC_DRAFT_NONE = 4,    /* plain decoding (what statistics report when nothing drafted) */
    SPECDEC_DRAFT_MTP = 5      /* since 0.5.7: the target checkpoint's own multi-token-prediction layer
                                  (a model loaded with specdec_model_params.mtp) reading the target's
                                  last hidden states, as vLLM's "mtp" / "deepseek_mtp" method */
} specdec_draft_method;

/* When the n-gram drafter proposes what it found (since 0.4; generate params `ngram_cost`,
 * docs/DRAFTERS.md "When to propose"). Stable numbers. */
typedef enum specdec_ngram_cost {
    SPECDEC_NGRAM_COST_MEASURED = 0, /* default: a round proposes the prefix of its lookup (chain) or
                                        the subtree (tree) whose expected tokens per unit of cost
                                        beats a plain step's, from the acceptance observed per
                                        matched suffix length and the sequence's measured round
                                        times (a least-squares fit of seconds against tokens
                                        verified); nothing worth it: a plain step */
    SPECDEC_NGRAM_COST_OFF = 1,      /* every match is proposed as far as the shape allows (the
                                        raw lookup, e.g. to benchmark it) */
    SPECDEC_NGRAM_COST_FIXED = 2     /* as MEASURED with a fixed cost instead of timings: a round
                                        verifying N draft tokens costs 1 + ngram_token_cost * N
                                        plain steps (decisions reproducible run to run) */
} specdec_ngram_cost;

typedef enum specdec_stop_reason {
    SPECDEC_STOP_NONE = 0,
    SPECDEC_STOP_N_PREDICT = 1,    /* n_predict tokens generated */
    SPECDEC_STOP_EOS = 2,          /* an EOS id was generated (it is included in the output) */
    SPECDEC_STOP_STRING = 3,       /* a stop string appeared in the text */
    SPECDEC_STOP_CALLBACK = 4,     /* the token callback returned non-zero */
    SPECDEC_STOP_CONTEXT_FULL = 5, /* the context filled up */
    SPECDEC_STOP_TOKEN_ID = 6      /* one of stop_token_ids was generated (since 0.5; it is included
                                      in the output) */
} specdec_stop_reason;

/* Called once per emitted token, in order. `piece` is the UTF-8 text this token adds
 * to the output when a tokenizer was given (never a broken UTF-8 sequence: incomplete
 * bytes are held back until complete; special tokens add no text), else NULL with
 * piece_len 0. Return 0 to go on, non-zero to stop generation after this token.
 * When generation ends with bytes still held back, one more call with token = -1
 * delivers them (as U+FFFD); its return value is ignored. Borrowed pointers, valid
 * during the call. */
typedef int (*specdec_token_callback)(void *user_data, int32_t token, const char *piece, size_t piece_len);

/* Log-probabilities of emitted tokens (since 0.4.1; docs/LOGPROBS.md). With
 * specdec_generate_params.logprobs = 1, logprob_callback is called once per emitted token,
 * in order, on the thread that calls `callback`, immediately BEFORE `callback` for the same
 * token (so a consumer can pair them; it is not called for callback's token = -1 flush).
 * The distribution is the TARGET's at that position: log_softmax of the target's raw logits
 * (the model's output, after a final logit soft-cap where the model has one; before
 * temperature, top-k, top-p, min-p), as vLLM's default `logprobs_mode = raw_logprobs`. It does
 * not depend on the drafter, the verify mode, γ or the tree: speculation changes which pass
 * computes a row, not the row. Borrowed pointers, valid during the call. Return 0 to go on,
 * non-zero to stop generation after this token (SPECDEC_STOP_CALLBACK, as `callback`).
 * With prompt_logprobs = 1 the prompt's tokens come first (position 1..n_prompt-1, n_top =
 * prompt_top_logprobs), without `callback` calls; a token's position tells them apart
 * (position < n_prompt: a prompt token). */
#define SPECDEC_MAX_TOP_LOGPROBS 20
typedef struct specdec_token_logprobs {
    int32_t token;              /* the emitted token */
    float logprob;              /* its log-probability (<= 0; -INFINITY only if the logits make it so) */
    int32_t rank;               /* 1 + the number of ids with a strictly larger logprob (1 = most likely) */
    int32_t n_top;              /* = specdec_generate_params.top_logprobs, for a prompt token
                                   prompt_top_logprobs (fewer only when V is smaller) */
    const int32_t *top_tokens;  /* n_top ids, most likely first; ties: the lower id first */
    const float *top_logprobs;  /* their log-probabilities */
    int64_t position;           /* the token's absolute position in the sequence (prompt = 0..n_prompt-1) */
} specdec_token_logprobs;
typedef int (*specdec_logprob_callback)(void *user_data, const specdec_token_logprobs *lp);

/* specdec_generate_params.seed: draw a random seed (since 0.4). */
#define SPECDEC_SEED_RANDOM UINT64_MAX

/* What one round of speculation did (since 0.4; specdec_generate_params.round_callback,
 * `specdec generate --trace`). Borrowed pointers, valid during the call. Node i (0-based;
 * the pending token that precedes the round is not a node) is draft token i: a chain
 * has parent i - 1, a tree its parent node (-1: it follows the pending token). */
typedef struct specdec_round_info {
    int32_t round;                     /* 0-based index of the round in this generation */
    specdec_draft_method draft_method; /* who drafted it; NONE: a plain step (nothing proposed) */
    int32_t n_drafted;                 /* draft tokens (tree nodes) proposed, 0..SPECDEC_MAX_TREE_NODES */
    const int32_t *draft_tokens;       /* [n_drafted] */
    const int32_t *draft_parents;      /* [n_drafted] */
    int32_t n_accepted;                /* drafts accepted: the accepted path's length */
    const int32_t *accepted_nodes;     /* [n_accepted] the path's node ids, root-first */
    int32_t n_emitted;                 /* tokens the round emitted: n_accepted + 1, fewer when a stop
                                          (EOS, stop string, callback, budget) cut it */
    const int32_t *emitted;            /* [n_emitted] */
} specdec_round_info;

/* Called once per round, after the round's tokens went through the token callback. */
typedef void (*specdec_round_callback)(void *user_data, const specdec_round_info *info);

/* One entry of specdec_generate_params.logit_bias (since 0.5). */
#define SPECDEC_MAX_LOGIT_BIAS 1024
#define SPECDEC_MAX_STOP_TOKEN_IDS 64
/* specdec_generate_params.allowed_token_ids / bad_words_* limits (since 0.5.2; the bad-words
 * ones are vLLM's: 128 sequences, 1024 ids in all) */
#define SPECDEC_MAX_ALLOWED_TOKEN_IDS 1048576
#define SPECDEC_MAX_BAD_WORDS 128
#define SPECDEC_MAX_BAD_WORDS_TOKENS 1024
/* Most ids of specdec_generate_params.grammar_after_tokens (since 0.5.4). */
#define SPECDEC_MAX_GRAMMAR_AFTER_TOKENS 32
typedef struct specdec_logit_bias {
    int32_t token; /* 0..vocabulary size - 1 */
    float bias;    /* -100..100 (OpenAI's range; -100 bans the token in practice) */
} specdec_logit_bias;

typedef struct specdec_generate_params {
    int32_t n_predict;             /* most tokens to generate (> 0); default 128. 0 only with
                                      prompt_logprobs = 1 (since 0.4.1): score the prompt, generate
                                      nothing (OpenAI's echo with max_tokens 0) */
    float temperature;             /* 0 = greedy; default 0.8 */
    int32_t top_k;                 /* 0 = disabled; default 40 */
    float top_p;                   /* in (0, 1], 1 = disabled; default 0.95 */
    float min_p;                   /* in [0, 1], 0 = disabled; default 0.05 */
    uint64_t seed;                 /* RNG seed, any value but SPECDEC_SEED_RANDOM; default 0.
                                      SPECDEC_SEED_RANDOM: a seed drawn from the OS's entropy when
                                      generation starts (< 2^32, as llama.cpp's), reported in
                                      specdec_stats.seed so the run can be repeated */
    uint64_t sequence_id;          /* RNG stream of this sequence; default 0 */
    specdec_verify_mode verify;    /* default AUTO */
    int32_t n_draft;               /* γ, 1..SPECDEC_MAX_DRAFT; default 4; ignored without a draft;
                                      0 = plain decoding even with a draft */
    int32_t adaptive_draft;        /* 1: adjust γ each round from the acceptance observed (n_draft is the
                                      start, >= 1). Rule: α = (A+1)/(A+R+2) from accepted drafts A and
                                      rejections R, both decayed by 0.9 per round; E(γ) = (1-α^(γ+1))/(1-α);
                                      C(γ) = γ·c_draft + c0 + c1·(γ+1), c_draft = EWMA of seconds per draft
                                      step, c0 + c1·tokens a decayed least-squares fit of verify-pass
                                      seconds (c1 = 0 until two γ were seen; c_draft/c_verify = 0.1 when
                                      no timing is usable); next γ = argmax over [1, SPECDEC_MAX_DRAFT]
                                      of E/C. Output is unchanged in GREEDY/MATCH; in REJECTION it
                                      depends on γ, hence on timings: not reproducible run to run. */
    int32_t ignore_eos;            /* 1: do not stop at the model's EOS ids */
    const char *const *stop_strings; /* borrowed; n_stop_strings entries of 1..512 bytes; needs
                                        `tokenizer`; generation stops after the token whose text
                                        completes one (that token is kept in the output) */
    int32_t n_stop_strings;
    const specdec_tokenizer *tokenizer; /* borrowed, optional: text pieces for the callback, stop strings */
    specdec_token_callback callback;    /* optional */
    void *user_data;                    /* passed to callback */
    /* Tree speculation (since 0.2; docs/TREE.md). The draft proposes a tree of candidates,
     * the target verifies every node in one pass, the longest accepted path is taken.
     * Exact in every verify mode; GREEDY and MATCH output is identical to plain decoding.
     * Needs a draft model (INVALID_ARGUMENT without one); not with adaptive_draft.
     * When either field is set, n_draft is ignored. */
    uint8_t tree_width[SPECDEC_MAX_DRAFT]; /* up to tree_width[d] children per node at depth d+1,
                                      each 1..SPECDEC_MAX_TREE_NODES; the depth is the number of
                                      leading non-zero entries (a non-zero after a zero is an
                                      error); at most SPECDEC_MAX_TREE_NODES nodes in all.
                                      All zero (default) = a chain of n_draft. Set it with
                                      specdec_generate_params_set_tree(). */
    int32_t draft_nodes;           /* 0 (default) = off; 1..SPECDEC_MAX_TREE_NODES: node budget, the
                                      tree grown best-first by draft path probability (EAGLE-2
                                      style) within tree_width (all zero: any branching, depth up
                                      to SPECDEC_MAX_DRAFT) */
    /* Drafters (since 0.4; docs/DRAFTERS.md). These fill what was reserved_i[3] and
     * reserved[0..1], so the struct keeps its size and every 0.3 field its offset. */
    specdec_draft_method draft_method; /* who proposes the drafts: AUTO (default) = the engine's
                                      draft model when it has one, else plain decoding; MODEL
                                      (needs a draft model); NGRAM = prompt lookup over the
                                      sequence so far, no draft model needed (chains of n_draft,
                                      or a tree with tree_width / draft_nodes; not with
                                      adaptive_draft); EAGLE3 (needs an EAGLE-3 head as the
                                      engine's or scheduler's draft, CPU or CUDA; chains or EAGLE-2
                                      trees; AUTO picks it for a head, and MODEL is then refused);
                                      NONE = plain decoding */
    int32_t ngram_min;             /* NGRAM: shortest suffix looked up, 1..ngram_max; default 1 */
    int32_t ngram_max;             /* NGRAM: longest suffix looked up (tried first), ngram_min..64;
                                      default 4 */
    specdec_round_callback round_callback; /* optional: called after every round (tracing) */
    void *round_user_data;                 /* passed to round_callback */
    /* NGRAM: when a match is worth proposing (these two fill the first uint64_t of 0.4's
     * reserved[6]; zero-initialised = MEASURED). With
     * MEASURED (the default), output in REJECTION depends on the proposals, hence on the
     * timings (as with adaptive_draft): OFF or FIXED make it reproducible; GREEDY and MATCH
     * output is plain decoding's whatever is proposed. */
    specdec_ngram_cost ngram_cost; /* MEASURED (0, default), OFF or FIXED */
    float ngram_token_cost;        /* FIXED: the cost of one more verified draft token, in plain
                                      steps, 0..100 (the bundled target on a 2-core CPU:
                                      0.25-0.75 by load; a GPU: ~0); default 0, ignored unless
                                      FIXED */
    /* Log-probabilities (since 0.4.1; docs/LOGPROBS.md). These fill what was 0.4.0's
     * reserved[0..2]; zero-initialised = off. */
    int32_t logprobs;              /* 1: report every emitted token's log-probability through
                                      logprob_callback (required then); 0 (default): off */
    int32_t top_logprobs;          /* with logprobs: also the top_logprobs most likely ids of the same
                                      distribution, 0..SPECDEC_MAX_TOP_LOGPROBS; default 0 */
    specdec_logprob_callback logprob_callback; /* see specdec_token_logprobs */
    void *logprob_user_data;                   /* passed to logprob_callback */
    /* Prompt log-probabilities (since 0.4.1; docs/LOGPROBS.md "Prompt tokens"; vLLM's
     * prompt_logprobs, OpenAI's echo). These fill 0.4.0's reserved[3]; zero-initialised = off. */
    int32_t prompt_logprobs;       /* 1: before anything is generated, report each prompt token but
                                      the first (positions 1..n_prompt-1, in order) through
                                      logprob_callback (required then): the same record as for a
                                      generated token, from the target's raw logits of the position
                                      before it, computed by the prefill (no extra forward pass).
                                      `callback` is not called for prompt tokens; a non-zero return
                                      stops before the first generated token. 0 (default): off */
    int32_t prompt_top_logprobs;   /* with prompt_logprobs: the top list of prompt tokens,
                                      0..SPECDEC_MAX_TOP_LOGPROBS; default 0 */
    /* since 0.4.1 (was 0.4.0's last reserved field; the struct keeps its size) */
    uint64_t cache_salt;           /* a scheduler's prefix cache (specdec_prefix_cache) shares KV
                                      rows only between requests with the same salt: 0 (default)
                                      shares with every unsalted request; give each tenant its own
                                      value (vLLM's cache_salt, hashed) so that no client can time
                                      whether another's prompt was cached. Outputs do not depend on
                                      it; specdec_generate ignores it */
    /* Logits processors (since 0.5; the struct grew, hence libspecdec.so.0.5; docs/SAMPLING.md
     * "Logits processors"). They change the target's distribution of every generated token,
     * as OpenAI's and vLLM's fields of the same names do, applied to the raw logits in this
     * order: logit_bias and the min_tokens mask, repetition_penalty, then frequency_penalty and
     * presence_penalty; then temperature, top_k, top_p and min_p as before. Speculative
     * output stays exactly distributed as plain decoding with the same processors (GREEDY and
     * MATCH: equal to it). Drafts of a draft model's chains are processed alike (so acceptance
     * stays high); tree and EAGLE-3 drafts are not (exact all the same). A CUDA engine runs
     * such a sequence's verifier on the host (as for logprobs). Log-probabilities stay those of
     * the raw logits (vLLM's default). Zero-initialised = off. */
    const specdec_logit_bias *logit_bias; /* borrowed; n_logit_bias entries: bias added to the
                                      token's logit (entries for one token add up) */
    int32_t n_logit_bias;          /* 0..SPECDEC_MAX_LOGIT_BIAS */
    int32_t min_tokens;            /* >= 0: the EOS ids (unless ignore_eos) and stop_token_ids cannot
                                      be generated before min_tokens tokens are (vLLM's) */
    const int32_t *stop_token_ids; /* borrowed; n_stop_token_ids ids: generation stops after one
                                      (reason SPECDEC_STOP_TOKEN_ID; the token is in the output) */
    int32_t n_stop_token_ids;      /* 0..SPECDEC_MAX_STOP_TOKEN_IDS */
    float presence_penalty;        /* -2..2 (OpenAI): subtracted from the logit of every token the
                                      output holds so far (drafts of this round included) */
    float frequency_penalty;       /* -2..2 (OpenAI): subtracted once per occurrence in the output */
    float repetition_penalty;      /* 0 (default) or 1: off; else (0, 100] (HF / vLLM): the logit of
                                      every token in the prompt or the output is divided by it when
                                      positive, multiplied when not */
    /* Structured output (since 0.5.1; 8 bytes of 0.5.0's reserved space: declared before
     * reserved_i, it lies where 0.5.0 had reserved_i[0..1], and the reserved arrays start 8 bytes
     * later (reserved lost its last entry). 0.5.0 callers zeroed all of it, so the struct keeps
     * its size and they run as before;
     * docs/STRUCTURED.md). Every generated token's bytes continue a match of the grammar (and
     * the output ends — EOS or a stop_token_ids id — only where a whole match is complete),
     * by -inf at every other token of the target's logits, before the processors above. The
     * output is exactly distributed as plain decoding under the same mask (speculative or
     * not); a draft model's chain drafts are masked alike. Compile one with
     * specdec_grammar_compile against the tokenizer of the models; a CUDA engine runs such
     * a sequence's verifier on the host. NULL (default): off. */
    const specdec_grammar *grammar; /* borrowed by specdec_generate; a scheduler request holds
                                      its own reference until it is collected */
    /* vLLM's allowed_token_ids and bad_words (since 0.5.2; the two counts take 0.5.1's
     * reserved_i[0..1], the three pointers its reserved[0..2], so the struct keeps its size and
     * every field its offset; docs/SAMPLING.md). Masks of the target's logits, before logit_bias
     * (vLLM v1's order); a draft model's chain drafts are masked alike. Zero-initialised = off. */
    int32_t n_allowed_token_ids;   /* 0 (off) or 1..SPECDEC_MAX_ALLOWED_TOKEN_IDS entries */
    int32_t n_bad_words;           /* 0 (off) or 1..SPECDEC_MAX_BAD_WORDS token sequences */
    /* Structured output after a marker (since 0.5.4; the count is 0.5.3's reserved_i[0], the
     * pointer its reserved[0], so the struct keeps its size and every field its offset;
     * vLLM's structured outputs with a reasoning parser: the grammar constrains only the answer
     * after the end of the thinking). With a grammar and n_grammar_after_tokens > 0, the grammar
     * starts inactive: the target's rows are not masked (nor drafts checked or forced against it)
     * until the output first contains the token sequence grammar_after_tokens (e.g. the id of
     * "</think>"); from the row after the marker's last token on, the grammar is active from its
     * start state, exactly as a grammar set alone. The marker is looked for in the generated
     * tokens only (a prompt that already ended the thinking: leave this off). Exact as before:
     * speculative output is distributed as plain decoding under the same gating, also when a
     * draft chain holds the marker. Zero-initialised = off (the grammar is active from the
     * first token). */
    int32_t n_grammar_after_tokens; /* 0 (off) or 1..SPECDEC_MAX_GRAMMAR_AFTER_TOKENS; needs grammar */
    int32_t reserved_i[4];         /* must be zero */
    /* since 0.5.4 (was reserved_i[5]; zero-initialised = 0): a scheduler request's priority under
     * specdec_scheduling_policy PRIORITY (vLLM's): lower values are admitted, resumed and kept
     * first (ties: the older request); any other value than 0 is INVALID_ARGUMENT at submit under
     * FCFS. specdec_generate ignores it. */
    int32_t priority;
    const int32_t *allowed_token_ids; /* borrowed; every id not listed gets -inf (the EOS ids too
                                      unless listed, as in vLLM); ids in [0, vocabulary) */
    const int32_t *bad_words_ids;  /* borrowed; sequence i is bad_words_ids[bad_words_offsets[i] ..
                                      bad_words_offsets[i+1]), >= 1 ids in
                                      [0, vocabulary), SPECDEC_MAX_BAD_WORDS_TOKENS in all. A
                                      sequence w of k ids bans w[k-1] (-inf) whenever the output
                                      so far (not the prompt; drafts of this round included) ends
                                      with w[0..k-2]; k = 1: always. The caller tokenizes words
                                      (the server and Python do it as vLLM does) */
    const int32_t *bad_words_offsets; /* borrowed; n_bad_words + 1 entries: 0, then strictly
                                      increasing */
    const int32_t *grammar_after_tokens; /* borrowed; n_grammar_after_tokens ids in [0, vocabulary)
                                      (since 0.5.4, see n_grammar_after_tokens) */
    uint64_t reserved[3];          /* must be zero */
} specdec_generate_params;

SPECDEC_API specdec_generate_params specdec_generate_default_params(void);

/* Check params without a model (since 0.4), so a program can refuse bad values before it
 * loads anything: n_predict, n_draft, verify, the sampling values (temperature, top_k,
 * top_p, min_p), stop strings (count and lengths; not whether a tokenizer is set), the
 * tree (shape, draft_nodes, not with adaptive_draft), the log-probability fields (logprobs
 * and prompt_logprobs 0 or 1, top_logprobs / prompt_top_logprobs 0..SPECDEC_MAX_TOP_LOGPROBS
 * and only with logprobs / prompt_logprobs, logprob_callback set with either; since 0.4.1)
 * and the reserved fields, as
 * specdec_generate checks them. SPECDEC_OK, or INVALID_ARGUMENT naming the field and the
 * value in specdec_last_error(). What needs the models (a tree or adaptive_draft without
 * a draft model, stop strings without a tokenizer, the context) is checked by
 * specdec_generate / specdec_scheduler_submit as before. */
SPECDEC_API specdec_status specdec_generate_params_validate(const specdec_generate_params *params);

/* Set params->tree_width to widths[0..depth) and zero the rest; depth 0 clears it (a chain
 * of n_draft again). INVALID_ARGUMENT, params unchanged and the detail in
 * specdec_last_error(), for NULL params (or widths with depth > 0), depth outside
 * [0, SPECDEC_MAX_DRAFT], a width outside [1, SPECDEC_MAX_TREE_NODES], or a shape of more
 * than SPECDEC_MAX_TREE_NODES nodes (sum over d of widths[0] * ... * widths[d]). */
SPECDEC_API specdec_status specdec_generate_params_set_tree(specdec_generate_params *params, const int32_t *widths,
                                                            int32_t depth);

typedef struct specdec_stats {
    int64_t n_prompt;         /* prompt tokens processed */
    int64_t n_generated;      /* tokens emitted */
    int64_t n_rounds;         /* speculative rounds (plain steps when decoding without a draft) */
    int64_t n_drafted;        /* draft tokens proposed (with a tree: its nodes) */
    int64_t n_accepted;       /* draft tokens accepted (with a tree: on the accepted path) */
    double acceptance_rate;   /* n_accepted / n_drafted (0 if nothing drafted) */
    double tokens_per_round;  /* n_generated / n_rounds */
    double t_prefill_s;       /* prompt processing, both models */
    double t_draft_s;         /* draft forward passes and draft sampling */
    double t_target_s;        /* target forward passes after the prompt */
    double t_verify_s;        /* verification and sampling of target tokens */
    double t_total_s;         /* wall time of the whole call */
    double tokens_per_second; /* decode rate: n_generated / (t_total_s - t_prefill_s) */
    int32_t final_n_draft;    /* γ at the end (differs from n_draft when adaptive) */
    specdec_stop_reason stop_reason;
    /* since 0.2 (were reserved) */
    int64_t n_draft_rounds;       /* rounds that verified at least one draft token (chain or tree) */
    double mean_accepted_length;  /* n_accepted / n_draft_rounds: drafts accepted per round (the
                                     accepted path of a tree; the emitted extra token excluded) */
    double nodes_per_round;       /* n_drafted / n_draft_rounds: draft tokens (tree nodes) verified
                                     per round */
    /* since 0.4: the first five take the place of the former reserved[5]; the struct grew
     * from 176 to 672 bytes (hence the soname libspecdec.so.0.4). */
    double t_load_s;              /* seconds to load the models this ran on (specdec_model_load of
                                     target and draft) and create its engine or scheduler: a
                                     one-time cost, the same in every call on that engine */
    double t_first_token_s;       /* from the start of the generation (the call; a scheduler
                                     request: its admission, after any queueing) to its first
                                     emitted token: prefill + the first round; 0 if none */
    double prompt_tokens_per_second; /* n_prompt / t_prefill_s */
    int64_t n_target_passes;      /* target forward passes after the prompt: one per round, each
                                     verifying that round's draft (plain decoding: one per token) */
    double tokens_per_target_pass; /* n_generated / n_target_passes: the bound on the speedup over
                                     plain decoding (which makes 1), reached when drafting is free */
    uint64_t seed;                /* the seed used (SPECDEC_SEED_RANDOM resolved) */
    specdec_draft_method draft_method; /* who drafted: MODEL, NGRAM, or NONE for plain decoding
                                     (no drafter, n_draft 0); never AUTO */
    specdec_verify_mode verify;   /* the verification used (AUTO resolved) */
    int32_t n_draft;              /* γ a chain started with (the params' n_draft); 0 for a tree
                                     and plain decoding. final_n_draft: γ at the end (a tree: the
                                     depth of its shape) */
    int32_t adaptive_draft;       /* 1 if γ adapted (a chain with adaptive_draft) */
    int32_t draft_nodes;          /* a tree's node budget as used (0: none) */
    uint8_t tree_width[SPECDEC_MAX_DRAFT]; /* a tree's widths per depth as used (all 0: a chain) */
    /* Acceptance by position: index i is the (i+1)-th draft token of a chain, or depth i+1 of
     * a tree. n_drafted_at_pos[i]: rounds whose draft reached that position (chain: γ > i;
     * tree: depth > i); n_accepted_at_pos[i]: rounds that accepted a token there (accepted
     * length > i); acceptance_at_pos[i] = their ratio (0 when nothing was drafted there).
     * For a tree this is the per-depth acceptance, while
     * acceptance_rate is accepted path tokens per verified NODE (a per-node rate, small for
     * wide trees) and mean_accepted_length the accepted tokens per round. */
    int64_t n_drafted_at_pos[SPECDEC_MAX_DRAFT];
    int64_t n_accepted_at_pos[SPECDEC_MAX_DRAFT];
    double acceptance_at_pos[SPECDEC_MAX_DRAFT];
    /* since 0.4.1 (was reserved[0]) */
    int64_t n_cached_prompt;      /* prompt tokens whose target rows came from a scheduler's prefix
                                     cache (specdec_prefix_cache): not prefilled; 0 for
                                     specdec_generate (OpenAI usage.prompt_tokens_details.cached_tokens) */
    /* since 0.5.3 (was reserved[0]) */
    int64_t n_forced;             /* structured output: draft tokens proposed because the grammar
                                     allowed no other token (jump-forward), counted in n_drafted
                                     too; plain decoding proposes them as well (its rounds then
                                     verify them in one target pass: n_target_passes drops below
                                     n_generated; draft_method stays NONE) */
    /* since 0.5.4 (was reserved[0]) */
    int64_t n_preemptions;        /* a scheduler's request: times it was preempted and recomputed its
                                     rows (specdec_kv_admission OPTIMISTIC); 0 for specdec_generate */
    uint64_t reserved[5];
} specdec_stats;

/* Static lower-case names of enum values, as the CLI's --json and the server's
 * `speculative` object write them (since 0.4): verify "auto" "rejection" "greedy" "match";
 * stop reason "none" "n_predict" "eos" "stop_string" "callback" "context_full"; draft
 * method "auto" "model" "ngram" "eagle3" "none". "?" for a value outside the enum. */
SPECDEC_API const char *specdec_verify_mode_name(specdec_verify_mode mode);
SPECDEC_API const char *specdec_stop_reason_name(specdec_stop_reason reason);
SPECDEC_API const char *specdec_draft_method_name(specdec_draft_method method);

/* Generate from a prompt of token ids. The engine's KV caches are reset first.
 * out_tokens (caller-owned, capacity out_capacity >= min(n_predict, n_ctx - n_prompt),
 * else SPECDEC_ERR_BUFFER_TOO_SMALL naming the size) receives the emitted ids, *n_out
 * their count. params NULL = specdec_generate_default_params(); stats may be NULL.
 * Errors (bad params, prompt empty, ids outside [0, V): INVALID_ARGUMENT; prompt
 * leaving no room, n_prompt >= n_ctx: CONTEXT_FULL) return a status with nothing
 * generated. n_predict larger than the room left is fine: generation stops with
 * SPECDEC_STOP_CONTEXT_FULL once prompt + output fill n_ctx. When the callback stops
 * generation the call returns SPECDEC_OK with stop_reason SPECDEC_STOP_CALLBACK.
 * A failure while generating (runner error) returns its status with *n_out and stats
 * covering the tokens emitted so far; the engine stays usable (except DEVICE_LOST).
 * Nothing is allocated per round (a tokenizer's streaming decoder is created once per
 * call). */
SPECDEC_API specdec_status specdec_generate(specdec_engine *engine, const int32_t *prompt, int32_t n_prompt,
                                            const specdec_generate_params *params, int32_t *out_tokens,
                                            int32_t out_capacity, int32_t *n_out, specdec_stats *stats);

/* ------------------------------------------------------------------------- */
/* Scheduler: many requests on one target (+ optional draft) model pair.      */
/* ------------------------------------------------------------------------- */
/* Since 0.2.0; batched since 0.3.0.
 *
 * Requests are queued FIFO and decoded up to max_active at a time, TOGETHER: one
 * scheduler thread runs rounds over every active sequence — the draft steps of all of
 * them as batched draft forwards, ONE batched target verify pass over every
 * sequence's positions (each sequence its own γ or draft tree), then each sequence's
 * own verifier — and requests join and leave between rounds (continuous batching).
 * Each model is one instance (weights once) with a paged KV cache: a pool of
 * kv_pool_blocks blocks of kv_block_tokens tokens, a block table per sequence. A
 * request is admitted when a slot is free and its blocks fit the pool. How much a request
 * claims is specdec_kv_admission (since 0.5.4): by default (OPTIMISTIC, vLLM's way) the
 * blocks of its prompt and of one round's growth, beside what the running requests may take
 * in their next round; when a round's growth does not fit, the newest running request is
 * preempted (its blocks given back; with the prefix cache its rows stay cached) and resumes
 * later, oldest first and before any newer request starts, by recomputing its prompt and
 * output so far (stats.n_preemptions); its output does not change: a resumed sequence's
 * rows are bitwise those it had (batch-invariant kernels) and its random numbers are
 * addressed by position (in rejection mode a draft model's or EAGLE-3 head's proposals
 * after a resume may differ, and with them which of the equally distributed outputs comes
 * out; greedy and match modes, and the n-gram drafter, are unaffected). With RESERVE
 * (0.5.3's way) a request claims its reservation: the
 * blocks of min(n_ctx, n_prompt + n_predict) tokens (+ SPECDEC_MAX_TREE_NODES with a
 * draft tree), per model — for a model whose every layer has a sliding window (since
 * 0.4), at most a window's worth, as its sequences give the blocks behind the window
 * back (docs/BATCHING.md "Sliding windows"); beside the running requests' held
 * blocks (shared ones counted once, since 0.4.1) and what they may still take. It then
 * never runs out of KV mid-generation, and the pool is never exceeded. Every output is exactly what specdec_generate alone produces for
 * the same prompt and params (the kernels are batch invariant and the random numbers
 * are addressed by (seed, sequence_id, position)), except where specdec_generate
 * itself is not reproducible (adaptive_draft in rejection mode follows timings).
 * On the CUDA backend the rounds are batched the same way (one weight copy, paged KV),
 * with each round's logits read back to the host.
 *
 * Thread-safe: every function may be called from any thread at any time, except
 * specdec_scheduler_free, which must be the last call, and neither shutdown nor free
 * may be called from a request's token callback. A request's token callback runs on
 * the scheduler thread (not the thread that submitted it); it may call submit, cancel
 * and get_metrics, but must not wait (that blocks the scheduler; waiting for its own
 * request never ends) and should return quickly (every active request waits for it). */
typedef struct specdec_scheduler specdec_scheduler;
typedef int64_t specdec_request_id; /* > 0, never reused by one scheduler */

/* Automatic prefix caching (since 0.4.1; docs/BATCHING.md "Prefix cache"). A model's KV
 * pool remembers the full blocks of prompts (and, at a request's clean end, of prompt +
 * output) it computed, keyed by the exact token ids from the first position on. A new
 * request whose prompt starts with remembered blocks uses their rows and prefills only
 * the rest; requests that share a system prompt, the n choices of one prompt and the
 * turns of one chat share the rows. Blocks no running request holds stay remembered
 * until the pool needs them (least recently released first), and count as free for
 * admission. Outputs are bitwise those without the cache (the kernels are batch
 * invariant: a row does not depend on which pass computed it). Not for: requests asking
 * for prompt log-probabilities (they need the prompt's logits; they still remember
 * their blocks), the target's rows of a request drafting with an EAGLE-3 head (it reads
 * the prompt's hidden states), models whose every layer slides (their blocks are given
 * back as the window moves), and schedulers without runner groups. Rows are shared only
 * between requests of equal specdec_generate_params.cache_salt. Stable numbers. */
typedef enum specdec_prefix_cache {
    SPECDEC_PREFIX_CACHE_AUTO = 0, /* default: on wherever it works (see above), else off */
    SPECDEC_PREFIX_CACHE_OFF = 1,  /* every request prefills its whole prompt */
    SPECDEC_PREFIX_CACHE_ON = 2    /* as AUTO, but specdec_scheduler_create fails with UNSUPPORTED
                                      where the target's pool cannot cache (sliding window, no
                                      runner groups) */
} specdec_prefix_cache;

/* How a scheduler admits requests into its KV pool (since 0.5.4; see the scheduler's
 * description above). Stable numbers. */
typedef enum specdec_kv_admission {
    SPECDEC_KV_ADMISSION_AUTO = 0,       /* default: OPTIMISTIC with runner groups (one paged pool per
                                            model), else RESERVE */
    SPECDEC_KV_ADMISSION_RESERVE = 1,    /* a request claims every block it may ever hold; never
                                            preempted (0.5.3's way) */
    SPECDEC_KV_ADMISSION_OPTIMISTIC = 2  /* a request claims its prompt and one round; preemption
                                            (recompute) when the pool runs short; specdec_scheduler_create
                                            fails with UNSUPPORTED without runner groups */
} specdec_kv_admission;

/* The order a scheduler serves requests in (since 0.5.4; vLLM's --scheduling-policy). Stable
 * numbers. */
typedef enum specdec_scheduling_policy {
    SPECDEC_SCHEDULING_FCFS = 0,     /* default: first come, first served (a request's priority must
                                        be 0) */
    SPECDEC_SCHEDULING_PRIORITY = 1  /* by specdec_generate_params.priority, lower first, then by
                                        arrival: the queue is kept in that order; a preempted request
                                        resumes before any queued one of a later (priority, arrival);
                                        the running request of the latest is preempted first
                                        (OPTIMISTIC admission), also to make room for a queued request
                                        of an earlier (priority, arrival) that does not fit */
} specdec_scheduling_policy;

typedef struct specdec_scheduler_params {
    int32_t max_active;      /* most sequences decoded at once (in one round), 1..256; default 8 */
    int32_t max_queued;      /* most requests waiting to start, 1..1048576; a submit beyond it gets
                                SPECDEC_ERR_QUEUE_FULL; default 1024 */
    int32_t kv_block_tokens; /* tokens per KV-cache block (paged KV), 1..4096; default 16 */
    int32_t kv_pool_blocks;  /* KV blocks per model, >= 0; 0 = enough for max_active full contexts.
                                A request whose claim (kv_admission, see above) does not fit what is
                                free waits in the queue; one whose reservation cannot fit even in the
                                whole pool is refused at submit with CONTEXT_FULL. */
    /* since 0.4.1 (was reserved_i[0]; zero-initialised = AUTO): automatic prefix caching,
     * see specdec_prefix_cache above */
    int32_t prefix_cache;    /* a specdec_prefix_cache */
    /* since 0.4.1 (was reserved_i[1]): chunked prefill. Prompt tokens the target prefills
     * between two rounds, over all joining requests (the oldest first; a request's next
     * chunk waits for the next round), so a long prompt joins over several rounds while
     * the running requests keep decoding instead of waiting for all of it. >= 0; 0
     * (default) = no limit: every joining request prefills its whole prompt (in max_batch
     * forwards) before the next round, as before 0.4.1. Requests asking for prompt logprobs or
     * drafting with an EAGLE-3 head, and a draft model's prefill, are not split. Outputs
     * do not depend on it. */
    int32_t prefill_chunk;
    /* since 0.5.4 (was reserved_i[0]; zero-initialised = AUTO): what admission claims of
     * the KV pool, a specdec_kv_admission (above) */
    int32_t kv_admission;
    /* since 0.5.4 (was reserved_i[1]; zero-initialised = FCFS): the order requests are served
     * in, a specdec_scheduling_policy (above) */
    int32_t scheduling_policy;
    int32_t reserved_i[4];
    uint64_t reserved[8];
} specdec_scheduler_params;

SPECDEC_API specdec_scheduler_params specdec_scheduler_default_params(void);

/* Create a scheduler. target/draft are borrowed and must outlive the scheduler (draft
 * may be NULL: plain decoding; an EAGLE-3 head: every slot drafts with its own head runner,
 * on the CPU or CUDA backend); engine_params as for specdec_engine_create (NULL =
 * defaults; max_batch bounds the tokens of one pass through a model, several passes
 * make a round when more are active); params NULL = defaults. The models' instances,
 * KV pools and max_active sequence slots are created here: their failures are this
 * call's (OUT_OF_MEMORY, BACKEND_UNAVAILABLE, MODEL_MISMATCH ...). On failure *out is
 * NULL and specdec_last_error() has the detail. */
SPECDEC_API specdec_status specdec_scheduler_create(const specdec_model *target, const specdec_model *draft,
                                                    const specdec_engine_params *engine_params,
                                                    const specdec_scheduler_params *params,
                                                    specdec_scheduler **out);
/* Stop accepting requests (later submits: SHUT_DOWN), cancel queued and running
 * requests (their outcome: CANCELLED, tokens so far kept; a request that finishes
 * first keeps its outcome), and stop the scheduler's threads (returns once they have
 * stopped). Idempotent; NULL is a no-op. Results stay collectable until free. */
SPECDEC_API void specdec_scheduler_shutdown(specdec_scheduler *s);
/* shutdown + free everything, uncollected results included. NULL is a no-op. */
SPECDEC_API void specdec_scheduler_free(specdec_scheduler *s);
/* Context length in tokens of every sequence the scheduler decodes (as
 * specdec_engine_n_ctx of its engines); 0 for NULL. */
SPECDEC_API int32_t specdec_scheduler_n_ctx(const specdec_scheduler *s);
/* Detail of the last failed scheduler call on the calling thread ("" if none); the
 * scheduler is shared between threads, so its detail is per thread (as
 * specdec_last_error()). */
SPECDEC_API const char *specdec_scheduler_last_error(const specdec_scheduler *s);

/* Queue a request. prompt and params are copied (stop strings too); params->tokenizer
 * is borrowed and must outlive the request; params->callback is called on a scheduler
 * thread, once per emitted token as in specdec_generate (non-zero return: the request
 * stops with SPECDEC_STOP_CALLBACK, outcome OK). params NULL = defaults. Validation as
 * specdec_generate (INVALID_ARGUMENT: NULL pointers, empty prompt, ids outside [0, V),
 * bad sampling values ...; CONTEXT_FULL: n_prompt >= n_ctx, or more KV blocks than
 * kv_pool_blocks), plus QUEUE_FULL and SHUT_DOWN. A refused request leaves nothing
 * behind. *out_id is set on success (0 on failure). */
SPECDEC_API specdec_status specdec_scheduler_submit(specdec_scheduler *s, const int32_t *prompt, int32_t n_prompt,
                                                    const specdec_generate_params *params,
                                                    specdec_request_id *out_id);
/* Cancel a queued or running request: SPECDEC_OK, its outcome becomes CANCELLED unless
 * it finished first. A running request stops before its next round (or at its next
 * emitted token inside the current one) and gives its KV blocks back; a prompt being
 * prefilled stops between two of its chunks (prefill_chunk). A finished, uncollected request: SPECDEC_OK, no effect.
 * Unknown or collected id: NOT_FOUND. */
SPECDEC_API specdec_status specdec_scheduler_cancel(specdec_scheduler *s, specdec_request_id id);
/* Wait for a request to finish (timeout_ms < 0: no limit, 0: just check) -> TIMEOUT if
 * it has not (nothing is collected). When finished: copies its tokens into out_tokens
 * (caller-owned; may be NULL when capacity is 0; BUFFER_TOO_SMALL reports the count in
 * *n_out and collects nothing), stats (may be NULL) and its outcome into
 * *request_status (OK, the generation's failure status, or CANCELLED), and releases
 * the id (later calls: NOT_FOUND). n_out and request_status are required. Two threads
 * waiting for one id: one collects, the other gets NOT_FOUND. */
SPECDEC_API specdec_status specdec_scheduler_wait(specdec_scheduler *s, specdec_request_id id, int32_t timeout_ms,
                                                  int32_t *out_tokens, int32_t capacity, int32_t *n_out,
                                                  specdec_stats *stats, specdec_status *request_status);
/* Wait until some request has finished (since 0.5.5; timeout_ms as specdec_scheduler_wait):
 * *out_id = the id of the earliest-finished request not reported by an earlier call and not
 * collected yet; it is NOT collected (specdec_scheduler_wait(id, 0, ...) then collects it at
 * once). Each finished request is reported once, whichever thread asks, so one collector thread
 * can serve any number of requests (an asyncio front end, a serving loop). TIMEOUT when none
 * finished within the time; SHUT_DOWN (DEVICE_LOST) once the scheduler is shut down (lost its
 * device) and every request that finished has been reported: nothing can finish any more.
 * *out_id is 0 unless OK. Requests collected by specdec_scheduler_wait before being reported
 * are never reported. */
SPECDEC_API specdec_status specdec_scheduler_wait_any(specdec_scheduler *s, int32_t timeout_ms,
                                                      specdec_request_id *out_id);

typedef struct specdec_scheduler_metrics {
    int64_t submitted, finished, cancelled, failed, rejected; /* request counts since create: submits
                                                                 accepted; outcomes OK / CANCELLED /
                                                                 other; submits refused (any status) */
    int32_t queued, active;                                   /* now */
    int64_t tokens_generated, rounds, drafted, accepted;      /* totals over all requests (cancelled and
                                                                 failed included), counted per round */
    int32_t kv_blocks_total, kv_blocks_used;                  /* target pool: blocks, and blocks holding
                                                                 rows now (after the last round) */
    int32_t draft_kv_blocks_total, draft_kv_blocks_used;      /* the draft's (0 / 0 without a draft, and
                                                                 with an EAGLE-3 head: its cache is
                                                                 per slot, in no pool) */
    /* since 0.4.1 (were reserved[0..2]): the target's prefix cache (specdec_prefix_cache);
     * kv_blocks_used above counts each block once however many sequences share it */
    int64_t prefix_cache_queries; /* prompt tokens looked up (n_prompt - 1 of each begun request the
                                     cache can serve: not those asking for prompt logprobs, nor
                                     EAGLE-3 drafting ones) */
    int64_t prefix_cache_hits;    /* of them, tokens whose rows came from the cache */
    int32_t kv_blocks_cached;     /* target blocks only the cache holds now (reusable at once) */
    int32_t draft_kv_blocks_cached; /* the draft model's */
    /* since 0.5.4 (were reserved[0..1]): specdec_kv_admission OPTIMISTIC */
    int64_t preemptions;          /* requests preempted since create (a request may count several times) */
    int64_t preempted;            /* requests preempted now, waiting to resume (counted in `active`) */
    uint64_t reserved[3];
} specdec_scheduler_metrics;
/* A consistent snapshot (taken under the scheduler's lock). */
SPECDEC_API specdec_status specdec_scheduler_get_metrics(const specdec_scheduler *s, specdec_scheduler_metrics *m);
/* Acceptance by draft position since create (since 0.3; vLLM's spec_decode metrics):
 * *draft_rounds = rounds that verified at least one draft token (specdec_stats'
 * n_draft_rounds summed over requests); accepted_at[i], i < capacity = how many of those
 * rounds accepted the draft token at position i + 1 (a tree: depth i + 1 of the accepted
 * path); positions from SPECDEC_MAX_DRAFT on are 0. Counted per round, cancelled and
 * failed requests included, as get_metrics. accepted_at may be NULL when capacity is 0.
 * INVALID_ARGUMENT for NULL s / draft_rounds or capacity < 0. */
SPECDEC_API specdec_status specdec_scheduler_get_acceptance(const specdec_scheduler *s, int64_t *draft_rounds,
                                                            int64_t *accepted_at, int32_t capacity);


/* ------------------------------------------------------------------------- */
/* Tokenizer: Hugging Face tokenizer.json (BPE), identical ids to `tokenizers`. */
/* ------------------------------------------------------------------------- */
/* Supported: model BPE (merges as "a b" strings or ["a","b"] pairs, byte_fallback,
 * unk_token/fuse_unk, continuing_subword_prefix, end_of_word_suffix, ignore_merges);
 * normalizers NFC, NFKC, NFD, NFKD, Lowercase, Prepend, Replace, Strip, StripAccents,
 * Sequence; pre-tokenizers ByteLevel, Split, Metaspace, Digits, Punctuation,
 * Whitespace, WhitespaceSplit, Sequence; post-processors TemplateProcessing, ByteLevel,
 * Bert/RobertaProcessing, Sequence; decoders ByteLevel, Metaspace, ByteFallback, Fuse,
 * Strip, Replace, BPEDecoder, Sequence. Other model types (WordPiece, Unigram, ...) and
 * components fail with SPECDEC_ERR_UNSUPPORTED. "truncation" and "padding" are ignored.
 * A loaded tokenizer is immutable and may be used from any number of threads. Calls
 * that take a const tokenizer record failure detail per thread. */

/* Load `path`: a directory holding tokenizer.json (and optionally tokenizer_config.json,
 * which supplies bos_token, eos_token and add_bos_token), or a tokenizer.json file
 * (tokenizer_config.json is then looked for next to it), or a GGUF file (recognised by its
 * "GGUF" magic, whatever its name): the tokenizer its metadata embeds
 * (tokenizer.ggml.model "gpt2" or "llama"; README "Tokenizers from GGUF files"), read from
 * the header only. On failure *out is NULL and specdec_last_error() names the file, key
 * and value. */
SPECDEC_API specdec_status specdec_tokenizer_load(const char *path, specdec_tokenizer **out);
SPECDEC_API void specdec_tokenizer_free(specdec_tokenizer *tok);
/* Detail of the last failed call on this thread (tokenizer calls are const and
 * thread-safe, so their detail is per thread); same as specdec_last_error(). */
SPECDEC_API const char *specdec_tokenizer_last_error(const specdec_tokenizer *tok);

/* Encode text (len bytes) into the ids the `tokenizers` library produces for
 * Tokenizer.encode(text, add_special_tokens=add_special). Invalid UTF-8 is first
 * replaced by U+FFFD, one per maximal invalid subsequence (the rule of Python's
 * bytes.decode("utf-8", errors="replace") and Rust's String::from_utf8_lossy), so the
 * ids equal the library's on that replaced string. add_special: apply the
 * post-processor (BOS/EOS as tokenizer.json's post_processor defines; note that
 * tokenizer_config.json's add_bos_token is NOT applied here, see
 * specdec_tokenizer_add_bos). Added/special tokens written in the text are always
 * recognised. Writes at most capacity ids (ids may be NULL when capacity is 0); if
 * more are needed returns SPECDEC_ERR_BUFFER_TOO_SMALL and *n_ids is the count needed.
 * A tokenizer whose normalizers / pre-tokenizers would grow the text more than 64x
 * (+ 4 KiB) on the way (no published tokenizer comes near; a crafted file can grow it
 * exponentially) refuses it with SPECDEC_ERR_UNSUPPORTED instead of exhausting memory;
 * the same bound applies to the decoders in specdec_detokenize and the stream. */
SPECDEC_API specdec_status specdec_tokenize(const specdec_tokenizer *tok, const char *text, size_t len,
                                            int add_special, int32_t *ids, int32_t capacity, int32_t *n_ids);

/* vLLM's bad_words as the token sequences specdec_generate_params.bad_words_* take (since
 * 0.5.2; vLLM's SamplingParams.update_from_tokenizer, docs/SAMPLING.md): for each word, its
 * text after leading ASCII white space is tokenized without special tokens (one sequence);
 * then " " + that text, kept as a second sequence only when its first id differs from the
 * first sequence's and its length is the same. ids: room for SPECDEC_MAX_BAD_WORDS_TOKENS;
 * offsets: room for SPECDEC_MAX_BAD_WORDS + 1 (offsets[0] = 0, sequence s is ids[offsets[s] ..
 * offsets[s+1])); *n_seqs the count. INVALID_ARGUMENT (*n_seqs 0, the word's index in
 * specdec_last_error()) for a NULL or empty / all-white-space word, a word of no tokens, or more
 * than SPECDEC_MAX_BAD_WORDS sequences or SPECDEC_MAX_BAD_WORDS_TOKENS ids in all. */
SPECDEC_API specdec_status specdec_tokenize_bad_words(const specdec_tokenizer *tok, const char *const *words,
                                                      int32_t n_words, int32_t *ids, int32_t *offsets,
                                                      int32_t *n_seqs);
/* Decode ids to UTF-8 text as the tokenizers library's decode(ids, skip_special_tokens):
 * ids outside the vocabulary are skipped. Writes a NUL-terminated string; *len excludes
 * the NUL. BUFFER_TOO_SMALL reports the needed length (without NUL) in *len. */
SPECDEC_API specdec_status specdec_detokenize(const specdec_tokenizer *tok, const int32_t *ids, int32_t n_ids,
                                              int skip_special, char *text, size_t capacity, size_t *len);
/* The vocabulary string of one id (as stored in tokenizer.json, e.g. "Ġthe" or
 * "▁the"), NUL-terminated; *len excludes the NUL. INVALID_ARGUMENT for unknown ids. */
SPECDEC_API specdec_status specdec_token_to_piece(const specdec_tokenizer *tok, int32_t id, char *buf,
                                                  size_t capacity, size_t *len);
/* Number of ids (model vocab plus added tokens); the largest id + 1. */
SPECDEC_API int32_t specdec_tokenizer_vocab_size(const specdec_tokenizer *tok);
/* Special ids, -1 when the tokenizer has none. From tokenizer_config.json's bos_token /
 * eos_token when present; otherwise the post-processor's first inserted id (BOS) and
 * well-known names ("<s>", "</s>", "<|begin_of_text|>", "<|endoftext|>", ...). */
SPECDEC_API int32_t specdec_tokenizer_bos_id(const specdec_tokenizer *tok);
SPECDEC_API int32_t specdec_tokenizer_eos_id(const specdec_tokenizer *tok);
/* 1 if a prompt should start with BOS: tokenizer_config.json's add_bos_token when
 * given, else whether the post-processor inserts ids before the text. */
SPECDEC_API int specdec_tokenizer_add_bos(const specdec_tokenizer *tok);

/* Streaming decoder: feed ids one at a time, get the text they complete. Text returned
 * never ends inside a UTF-8 sequence; incomplete bytes are held until completed or
 * flushed. The concatenation of all pieces plus the flush equals specdec_detokenize()
 * of all ids, with one exception: a run of byte-fallback tokens (<0xNN>) that was valid
 * UTF-8 up to one of its tokens and is invalid as a whole. Decode replaces such a run by
 * U+FFFD per byte, bytes already returned included; returned text stays as it was, so
 * the streamed text differs there (the library's DecodeStream then fails with "invalid
 * prefix" or repeats text; this stream restarts its window at the ids not yet returned
 * and goes on). Otherwise the library's DecodeStream algorithm (decodes a short window
 * of recent ids; buffers grow only when a window is longer than any before). One stream
 * per sequence; not shared between threads; the tokenizer must outlive it. */
typedef struct specdec_detok_stream specdec_detok_stream;
SPECDEC_API specdec_status specdec_detok_stream_create(const specdec_tokenizer *tok, int skip_special,
                                                       specdec_detok_stream **out);
SPECDEC_API void specdec_detok_stream_free(specdec_detok_stream *s);
/* Push one id; *text points to library-owned bytes valid until the next call on s
 * (not NUL-terminated; *len may be 0). On failure the id is not consumed. */
SPECDEC_API specdec_status specdec_detok_stream_push(specdec_detok_stream *s, int32_t id, const char **text,
                                                     size_t *len);
/* Emit whatever is held back (invalid bytes become U+FFFD as the library does) and end
 * the sequence: the next push starts a new one. */
SPECDEC_API specdec_status specdec_detok_stream_flush(specdec_detok_stream *s, const char **text, size_t *len);

/* ---- Chat templates ----------------------------------------------------------------------
 * Render an OpenAI-style conversation into the prompt text a chat model was trained on, byte
 * for byte as transformers' tokenizer.apply_chat_template(messages, tokenize=False,
 * add_generation_prompt=...) renders the model's Jinja chat_template: specdec runs the template
 * with its own Jinja interpreter (tokenizer/sd_jinja*.c), configured as transformers configures
 * jinja2 (sandboxed; trim_blocks, lstrip_blocks; raise_exception, strftime_now, namespace, dict,
 * tojson(indent, ensure_ascii=False); break/continue; {% generation %}) and with Python's value
 * semantics (str()/repr() of values, json.dumps, string methods, Undefined). It is checked against
 * transformers on the published templates of 59 model families (README, "Chat templates").
 *
 * The template comes from the tokenizer's directory: chat_template.jinja when present (it takes
 * priority, as in transformers), else tokenizer_config.json's "chat_template" (a string, or a
 * list of {"name","template"} objects of which the one named "default" is used, as transformers
 * does when no tools are passed). It is parsed when the tokenizer is loaded; a template outside
 * the supported subset (a tag such as {% include %}/{% extends %}/{% import %}, a recursive
 * loop, a filter or test specdec does not implement, *args in a call, invalid syntax) is not a
 * load error: specdec_chat_template_detect and rendering then answer SPECDEC_ERR_UNSUPPORTED
 * with the construct and its line in the last-error text.
 * The template sees: messages (a list of {"role", "content"} dicts), add_generation_prompt,
 * tools = None, documents = None, and the tokenizer's special tokens bos_token, eos_token,
 * unk_token, sep_token, pad_token, cls_token, mask_token (tokenizer_config.json strings, or the
 * "content" of AddedToken objects; an absent or null one is undefined). strftime_now formats the
 * current local time.
 *
 * Names for template_name (specdec_chat_template_name() lists them):
 *   "jinja"   the tokenizer's own: its template, or "plain" when it has none (the same as NULL).
 *   "plain"   specdec's format for a tokenizer with no chat template (e.g. the bundled pair):
 *             one line "Role: content\n" per message, the role with its first letter upper-
 *             cased ("system" -> "System"), content verbatim; then "Assistant:" (no trailing
 *             space) when add_generation_prompt. Every non-empty role without a newline is
 *             accepted. NULL selects it when the tokenizer has no template.
 *   "llama3", "chatml", "llama2", "mistral", "zephyr", "phi3": a built-in published template,
 *             rendered with the tokenizer's special tokens whatever the tokenizer's own template
 *             is: Meta-Llama-3-8B-Instruct; the generic ChatML template (no default system
 *             prompt, every role rendered); Llama-2-7b-chat-hf; Mixtral-8x22B-Instruct-v0.1's
 *             "default"; TinyLlama-1.1B-Chat-v1.0 (Zephyr); Phi-3-mini-4k-instruct.
 * Errors a template raises itself (raise_exception: roles not alternating, a role the template
 * does not support) are returned as SPECDEC_ERR_INVALID_ARGUMENT with the last-error text
 * "chat template: " followed by the template's own message, where transformers raises jinja2
 * TemplateError(message); other errors jinja2 would raise (an undefined value used, a type error)
 * are INVALID_ARGUMENT too, naming the line. SPECDEC_ERR_UNSUPPORTED at render time: something
 * specdec does not reproduce (e.g. Python's multi-character case mappings such as
 * "\u00df".upper(), printing a generator, str % formatting) or a template exceeding the
 * interpreter's limits (64 MiB of strings built, 256 MiB of memory, 20 M evaluation steps,
 * nesting depth 256): a hostile template ends with an error instead of hanging. An empty
 * conversation is INVALID_ARGUMENT for every name (transformers refuses it too). */

/* One message; both strings are borrowed, NUL-terminated UTF-8 (invalid UTF-8 is refused with
 * INVALID_ARGUMENT, never repaired). role is matched exactly ("system", "user", "assistant",
 * "tool", ...; case-sensitive, as the templates compare it). */
typedef struct specdec_chat_message {
    const char *role;
    const char *content;
} specdec_chat_message;

/* The i-th template name (0 <= i): "llama3", "chatml", "llama2", "mistral", "zephyr", "phi3",
 * "plain", "jinja"; NULL past the end. Static strings. */
SPECDEC_API const char *specdec_chat_template_name(int32_t i);

/* The tokenizer's chat template text as loaded (see above), or NULL when it has none. Owned by
 * the tokenizer, valid until it is freed. */
SPECDEC_API const char *specdec_tokenizer_chat_template(const specdec_tokenizer *tok);

/* What template_name = NULL renders with: *name = "jinja" when the tokenizer has a template in
 * the supported subset, "plain" when it has none (static strings). SPECDEC_ERR_UNSUPPORTED (and
 * *name = NULL) when it has one that cannot be used (outside the subset; a list without
 * "default"; longer than 1 MiB); the last-error text names the construct and its line. A caller
 * may then force a built-in template by name. */
SPECDEC_API specdec_status specdec_chat_template_detect(const specdec_tokenizer *tok, const char **name);

/* Render msgs[0..n_msgs) with template_name (see the names above; NULL = the tokenizer's own
 * template, or "plain" when it has none). add_generation_prompt: nonzero to end with the
 * assistant's turn header (as the template writes it). Writes a NUL-terminated UTF-8 string of at
 * most capacity bytes (text may be NULL when capacity is 0); *len is its length without the NUL.
 * Errors: INVALID_ARGUMENT for NULL pointers, n_msgs <= 0, a NULL role or content, invalid
 * UTF-8, an empty role, or a conversation the template rejects (its message in the last-error
 * text); INVALID_ARGUMENT for an unknown template_name; UNSUPPORTED as for detect and at render
 * time (see above); BUFFER_TOO_SMALL with *len
 * = the length needed (call again with *len + 1 bytes); OUT_OF_MEMORY. On failure text holds ""
 * when capacity > 0. Thread-safe (per-thread error; the parsed template is shared read-only);
 * the tokenizer's template is parsed once, at load; a built-in one on every call (microseconds). */
SPECDEC_API specdec_status specdec_chat_apply(const specdec_tokenizer *tok, const char *template_name,
                                              const specdec_chat_message *msgs, int32_t n_msgs,
                                              int add_generation_prompt, char *text, size_t capacity, size_t *len);

/* The add_special value to pass to specdec_tokenize() for text rendered with template_name
 * (NULL as above), so that the ids equal transformers' apply_chat_template(tokenize=True): 0 for
 * every Jinja template, the model's own or a built-in one (transformers tokenizes the rendered
 * text with add_special_tokens=False; templates that need BOS write its text themselves); 1 for
 * "plain", which has no transformers counterpart and is tokenized like any other specdec prompt
 * (the post-processor's BOS).
 * Note: transformers 5 rebuilds the normalizer/pre-tokenizer of Llama-2-vocabulary tokenizers
 * (its LlamaTokenizer class: TinyLlama, Phi-3, Mistral v1) instead of using tokenizer.json's, so
 * its ids for those models can differ from specdec's, which follow tokenizer.json as the
 * `tokenizers` library applies it; the text is identical either way.
 * Errors as specdec_chat_template_detect / unknown name. */
SPECDEC_API specdec_status specdec_chat_add_special(const specdec_tokenizer *tok, const char *template_name,
                                                    int *add_special);

/* specdec_chat_apply followed by specdec_tokenize with the add_special above: the prompt ids a
 * server feeds to specdec_generate. ids, capacity and n_ids as for specdec_tokenize
 * (BUFFER_TOO_SMALL reports the count needed). Errors as both functions. */
SPECDEC_API specdec_status specdec_chat_tokenize(const specdec_tokenizer *tok, const char *template_name,
                                                 const specdec_chat_message *msgs, int32_t n_msgs,
                                                 int add_generation_prompt, int32_t *ids, int32_t capacity,
                                                 int32_t *n_ids);

/* Render an OpenAI-format conversation given as JSON text (since 0.5.3): what vLLM's
 * /v1/chat/completions and LLM.chat hand to apply_chat_template, with tools and extra template
 * variables. messages_json: a JSON array of message objects (UTF-8, NUL-terminated, borrowed).
 * Each message is normalised as vLLM does (vllm/entrypoints/chat_utils.py) before the template
 * sees it, then as transformers does:
 *   - "role": a non-empty string (required). "content": a string; null or absent -> ""; a list of
 *     parts -> the texts of its "text" / "input_text" / "output_text" parts, "refusal" parts and
 *     "thinking" parts joined with "\n" (vLLM's "string" content format; a part whose text is null
 *     is skipped); any other part type (images, audio, ...) is UNSUPPORTED.
 *   - assistant: "tool_calls" (a list, kept as given; an empty list is dropped, null ignored);
 *     each call's function.arguments given as a string is parsed as JSON (not JSON, or empty:
 *     {}), any other non-object/non-list value becomes {} (vLLM's _postprocess_messages: tool
 *     templates expect a dict). "reasoning" (or the older "reasoning_content" when "reasoning" is
 *     absent) is kept as both "reasoning" and "reasoning_content".
 *   - tool: "tool_call_id" kept. Any role: "name" (a string) kept; developer: "tools" kept.
 *     Every other field is dropped, as vLLM drops it.
 *   - transformers then copies the reasoning into "thinking" and "reasoning_content" (its
 *     _alias_reasoning_fields).
 * tools_json: NULL or "null" (tools = None), or a JSON array passed to the template as given (the
 * server passes vLLM's normalised {"type": "function", "function": {...}} objects).
 * kwargs_json: NULL, or a JSON object of extra template variables (vLLM's chat_template_kwargs,
 * e.g. {"enable_thinking": false} for Qwen3). As in vLLM (where they update the keyword arguments
 * of apply_chat_template), they override add_generation_prompt, tools, documents and the special
 * tokens; "messages", "conversation", "chat_template" and "tokenize" are INVALID_ARGUMENT (vLLM
 * refuses the last two, Python the first two) and "continue_final_message" is UNSUPPORTED. At
 * most 256 keys.
 * template_name as for specdec_chat_apply. "plain" renders role and the normalised content, as a
 * template that reads nothing else: tools, tool_calls and kwargs other than add_generation_prompt
 * are accepted and do not appear (the built-in family templates likewise ignore what they do not
 * read).
 * Output (text, capacity, len) and the other errors as specdec_chat_apply; a JSON text that does
 * not parse, is not valid UTF-8, or has the wrong shape is INVALID_ARGUMENT naming the field
 * ("messages[2].tool_calls[0].function"). Tokenize the text with specdec_tokenize() and the
 * add_special of specdec_chat_add_special(). Thread-safe like specdec_chat_apply. */
SPECDEC_API specdec_status specdec_chat_apply_json(const specdec_tokenizer *tok, const char *template_name,
                                                   const char *messages_json, const char *tools_json,
                                                   const char *kwargs_json, int add_generation_prompt, char *text,
                                                   size_t capacity, size_t *len);

/* ---- structured output (since 0.5.1; docs/STRUCTURED.md) ----------------------------- */
/* What a grammar constrains the output to (vLLM's structured outputs / guided decoding,
 * OpenAI's response_format). */
typedef enum specdec_grammar_kind {
    SPECDEC_GRAMMAR_REGEX = 1,       /* spec: a regular expression the whole output matches
                                        (Python re.fullmatch; the subset docs/STRUCTURED.md lists) */
    SPECDEC_GRAMMAR_JSON_SCHEMA = 2, /* spec: a JSON Schema (text); the output is an instance of it
                                        in the compact form docs/STRUCTURED.md describes */
    SPECDEC_GRAMMAR_JSON_OBJECT = 3, /* spec: NULL (len 0): any JSON object (OpenAI's "json_object") */
    SPECDEC_GRAMMAR_CHOICE = 4,      /* spec: a JSON array of strings: the output is one of them */
    SPECDEC_GRAMMAR_GBNF = 5         /* since 0.5.2. spec: a context-free grammar in GBNF / xgrammar EBNF (llama.cpp's
                                        "root ::= ..."; vLLM's guided_grammar): docs/STRUCTURED.md */
} specdec_grammar_kind;

/* Compile a grammar against tok (the models' tokenizer; the grammar keeps what it needs of
 * it, so the tokenizer may be freed first). The first grammar of a tokenizer also indexes its
 * vocabulary (kept with the tokenizer for the next ones). A malformed spec is
 * SPECDEC_ERR_INVALID_ARGUMENT, a valid one using what specdec does not support
 * SPECDEC_ERR_UNSUPPORTED; specdec_last_error() says what and where. The grammar is
 * immutable to callers and may serve any number of requests on any threads at once. */
SPECDEC_API specdec_status specdec_grammar_compile(const specdec_tokenizer *tok, specdec_grammar_kind kind,
                                                   const char *spec, size_t len, specdec_grammar **out);
/* Drop the caller's reference: requests still using the grammar keep it alive. NULL: no-op. */
SPECDEC_API void specdec_grammar_free(specdec_grammar *grammar);

/* END tokenizer section */

#ifdef __cplusplus
}
#endif

#endif /* SPECDEC_H */

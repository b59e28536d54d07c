/* sd_engine.h — internal view of the engine (struct specdec_engine): a target runner,
 * an optional draft runner, the rounds that drive them (core/sd_round.h) and the
 * buffers of the generation loop, all allocated at creation so that
 * specdec_generate() allocates nothing per round.
 *
 * Files: sd_engine.c (creation, the low-level forward / KV API), sd_generate.c (the
 * one generation loop: budget, stop conditions, emission, statistics), sd_driver.c (the
 * driver it shares with the scheduler), sd_adapt.c (adaptive γ). Tests build engines directly from runners (e.g. synthetic
 * Markov-chain models) with sd_engine_create_from_runners(). */
#ifndef SD_ENGINE_H
#define SD_ENGINE_H

#include <stdatomic.h>
#include <stdint.h>

#include "specdec.h"
#include "sd_adapt.h"
#include "sd_error.h"
#include "sd_driver.h"
#include "sd_eagle3.h"
#include "sd_generate.h"
#include "sd_round.h"
#include "sd_runner.h"


/* Which executor specdec_generate's round uses (specdec_engine.round_kind). */
typedef enum sd_engine_round_kind {
    SD_ENGINE_ROUND_HOST = 0,         /* logits to the host, CPU sampling and verifier (any runners) */
    SD_ENGINE_ROUND_DEVICE = 1,       /* CUDA device-resident executor, kernels enqueued one by one */
    SD_ENGINE_ROUND_DEVICE_GRAPH = 2  /* CUDA device-resident executor replayed from CUDA graphs (default on CUDA) */
} sd_engine_round_kind;

struct specdec_engine {
    sd_errbuf err;
    atomic_flag busy;          /* set while a call runs: a second thread gets SPECDEC_ERR_BUSY */
    sd_runner *target;         /* owned */
    sd_runner *draft;          /* owned, NULL without a draft model */
    specdec_backend backend;   /* CPU or CUDA, never AUTO */
    int32_t n_ctx;
    int32_t n_vocab;
    sd_engine_special special; /* the target's */
    sd_gen_env env;            /* what its generations know of the models */
    int dead;                  /* a runner or round reported DEVICE_LOST: every later call fails */

    sd_exec *host_exec;        /* owned, always present: the host executor (and the device one's fallback) */
    sd_exec *device_exec;      /* owned; CUDA engines whose vocabulary the GPU sampler serves, else NULL */
    sd_engine_round_kind round_kind; /* DEVICE_GRAPH when device_exec exists, else HOST; tests switch it */
    int device_exec_cuda;      /* device_exec is the CUDA executor (tests may install another) */
    sd_round *round;           /* owned: the protocol over these executors and the engine's runners */
    sd_driver driver;          /* one generation at a time on `round` */

    /* generation loop buffers */
    int32_t *seq;              /* [n_ctx + 1] prompt + generated tokens */
    char *text_win;            /* [SD_GEN_TEXT_WIN] tail of the decoded text (stop strings) */
    sd_adapt adapt;
};

/* Build an engine from runners. Takes ownership of `target` and `draft` (NULL for
 * none) in every case: on failure they are destroyed. The runners must agree on
 * n_vocab and backend. `special` (may be NULL: no BOS, no EOS) gives the ids the
 * engine stops on. n_ctx is min of the runners' n_ctx. On failure *out = NULL and the
 * detail is in the thread-local buffer. */
specdec_status sd_engine_create_from_runners(sd_runner *target, sd_runner *draft, const sd_engine_special *special,
                                             specdec_engine **out);

/* specdec_engine_create's reading of its arguments, shared with the scheduler: params
 * checked (reserved fields, backend, signs) and defaulted, the pair checked
 * (vocabulary, BOS, EOS), n_ctx defaulted (min(max_position_embeddings, 4096) of
 * both), max_batch defaulted (n_ctx) and at least one verify pass, the target's
 * special ids. The detail of a failure is in the thread-local buffer. */
typedef struct sd_engine_plan {
    specdec_engine_params params;  /* the caller's, or the defaults; cpu_threads resolved (>= 1) */
    int32_t n_ctx, max_batch;
    sd_engine_special special;
} sd_engine_plan;
specdec_status sd_engine_plan_params(const specdec_model *target, const specdec_model *draft,
                                     const specdec_engine_params *params, sd_engine_plan *out);
/* The CPU threads of a model's passes for cpu_threads = requested (include/specdec.h): requested
 * when > 0, else SPECDEC_CPU_THREADS from the environment (INVALID_ARGUMENT, detail in the
 * thread-local buffer, when not an integer in [1, SPECDEC_MAX_CPU_THREADS]), else
 * sd_cpu_default_threads(). */
specdec_status sd_engine_cpu_threads(int32_t requested, int32_t *out);
/* Seconds target and draft (may be NULL) took to load (specdec_stats.t_load_s adds the
 * engine's or scheduler's creation to it). */
double sd_engine_models_load_s(const specdec_model *target, const specdec_model *draft);
/* AUTO: CUDA when a device is usable, else the CPU; others unchanged. */
specdec_backend sd_engine_pick_backend(specdec_backend requested);
/* A runner of model m on backend be (one sequence, its own cache). */
specdec_status sd_engine_make_runner(const specdec_model *m, specdec_backend be, const specdec_engine_params *p,
                                     int32_t n_ctx, int32_t max_batch, sd_runner **out, sd_errbuf *eb);
/* A runner group of model m on backend be (core/sd_runner.h "Groups and batches"):
 * UNSUPPORTED where the backend has none yet (CUDA, see sd_cuda_backend.h). Its
 * kv_window is sd_cfg_release_window(model, n_ctx): sequences of all-sliding models give
 * blocks behind the window back ("Sliding-window release"). */
specdec_status sd_engine_make_group(const specdec_model *m, specdec_backend be, const specdec_engine_params *p,
                                    int32_t n_ctx, int32_t max_batch, int32_t n_blocks, int32_t block_tokens,
                                    sd_runner_group **out, sd_errbuf *eb);
/* The weights the head runners of one engine or scheduler share (core/sd_eagle3.h
 * sd_eagle3_shared; one reference returned), made once on backend be: on the CPU the head's
 * F16/BF16 matrices widened to F32; on CUDA the device arena of the weights and the RoPE
 * tables for n_ctx, on the device and in the weight dtype of the target runner t (every
 * runner made over it must draft for a target runner of that device and dtype, with that
 * n_ctx). Errors as sd_engine_make_head's; the detail in eb. */
specdec_status sd_engine_make_head_shared(const specdec_model *target, const specdec_model *head, specdec_backend be,
                                          sd_runner *t, int32_t n_ctx, sd_eagle3_shared **out, sd_errbuf *eb);
/* An EAGLE-3 head's runner (core/sd_eagle3.h) drafting for the target runner t of model
 * `target` on backend be, reading the weights `shared` (from sd_engine_make_head_shared on
 * the same backend; the runner takes its own reference) or, with shared NULL, weights of its
 * own: its own draft cache of n_ctx rows and buffers; t's group is set to capture the head's
 * three states (the engine's target, or one scheduler slot's). The head borrows the target's
 * embedding when it ships none. UNSUPPORTED on a backend whose runners capture nothing,
 * BACKEND_UNAVAILABLE for CUDA without the toolkit, MODEL_MISMATCH when the head does not fit,
 * INVALID_ARGUMENT for a `shared` made for another backend, device or n_ctx, OUT_OF_MEMORY;
 * the detail in eb. */
specdec_status sd_engine_make_head(const specdec_model *target, const specdec_model *head, specdec_backend be,
                                   sd_runner *t, int32_t n_ctx, sd_eagle3_shared *shared, sd_runner **out,
                                   sd_errbuf *eb);

/* The driver specdec_generate uses, its round set to the executors of round_kind (the
 * device executor with the host one as its fallback, or the host one alone). */
sd_driver *sd_engine_driver(specdec_engine *e);

/* Busy flag: every mutating entry point takes it; a second thread gets SPECDEC_ERR_BUSY. */
specdec_status sd_engine_enter(specdec_engine *e);
void sd_engine_leave(specdec_engine *e);

#endif

/* sd_engine.h — internal view of the engine (struct specdec_engine): a target runner,
 * an optional draft runner, and every buffer the speculative loop needs, all
 * allocated at creation so that specdec_generate() allocates nothing per round.
 *
 * Tests build engines directly from runners (e.g. synthetic Markov-chain models)
 * with sd_engine_create_from_runners(). */
#ifndef SD_ENGINE_H
#define SD_ENGINE_H

#include <stdatomic.h>
#include <stdint.h>

#include "specdec.h"
#include "sd_error.h"
#include "sd_runner.h"

/* Longest stop string accepted by specdec_generate (bytes). */
#define SD_ENGINE_MAX_STOP_LEN 512

/* How a CUDA engine runs specdec_generate (specdec_engine.cuda_path). */
#define SD_ENGINE_CUDA_HOST_ROWS 0 /* logits to the host, CPU sampling/verifier (the CPU loop) */
#define SD_ENGINE_CUDA_DEVICE 1    /* device-resident round, kernels enqueued one by one */
#define SD_ENGINE_CUDA_GRAPH 2     /* device-resident round replayed from CUDA graphs (default) */

struct sd_cuda_round;

/* Special ids the engine stops on / checks a draft against. */
typedef struct sd_engine_special {
    int32_t bos_id;                    /* -1 if none */
    int32_t n_eos;
    int32_t eos_ids[SPECDEC_MAX_EOS];
} sd_engine_special;

/* Online estimates behind adaptive γ (see sd_engine_choose_gamma). */
typedef struct sd_engine_adapt {
    double acc;        /* exponentially-weighted count of accepted draft tokens */
    double rej;        /* exponentially-weighted count of rejections */
    double c_draft;    /* EWMA seconds per draft forward step (one token) */
    double s_w, s_x, s_y, s_xx, s_xy; /* decayed least squares of verify time vs tokens */
    int32_t n_obs;     /* rounds observed */
} sd_engine_adapt;

struct specdec_engine {
    sd_errbuf err;
    atomic_flag busy;          /* set while a call runs: a second thread gets SPECDEC_ERR_BUSY */
    sd_runner *target;         /* owned */
    sd_runner *draft;          /* owned, NULL without a draft model */
    specdec_backend backend;   /* CPU or CUDA, never AUTO */
    int32_t n_ctx;
    int32_t n_vocab;
    int32_t max_batch;         /* most tokens per runner call (>= SPECDEC_MAX_DRAFT + 1 or n_ctx) */
    sd_engine_special special; /* the target's */
    int dead;                  /* a runner reported DEVICE_LOST: every later call fails */

    /* per-round buffers, [rows * n_vocab] fp32 each */
    float *p_rows;             /* [SPECDEC_MAX_DRAFT + 1][V] target logits -> probabilities */
    float *q_rows;             /* [SPECDEC_MAX_DRAFT][V] draft logits -> the probabilities each draft was drawn from */
    float *work;               /* [V] scratch row for logit processing */
    void *sample_scratch;      /* scratch of the sampling / verification code */
    size_t sample_scratch_size;
    int32_t *seq;              /* [n_ctx + 1] prompt + generated tokens */
    char *text_win;            /* [2 * SD_ENGINE_MAX_STOP_LEN] tail of the decoded text (stop strings) */

    sd_engine_adapt adapt;

    /* CUDA engines: the device-resident round (kernels/cuda/sd_cuda_round.h), NULL on
     * the CPU or when the GPU sampler cannot serve the vocabulary (then the host-rows
     * loop runs); cuda_path picks the loop (SD_ENGINE_CUDA_*; tests switch it). */
    struct sd_cuda_round *cuda_round;
    int cuda_path;
};

/* Build an engine from runners. Takes ownership of `target` and `draft` (NULL for
 * none) in every case: on failure they are destroyed. The runners must agree on
 * n_vocab and backend. `special` (may be NULL: no BOS, no EOS) gives the ids the
 * engine stops on. n_ctx is min of the runners' n_ctx. On failure *out = NULL and the
 * detail is in the thread-local buffer. */
specdec_status sd_engine_create_from_runners(sd_runner *target, sd_runner *draft, const sd_engine_special *special,
                                             specdec_engine **out);

/* Adaptive γ: the draft length in [1, gmax] maximising expected emitted tokens per
 * unit of time, E(γ)/C(γ), with E(γ) = (1 − α^(γ+1))/(1 − α) and
 * C(γ) = γ·c_draft + c_verify(γ) from the estimates in `a`; returns `cur` until
 * enough has been observed. Exposed for tests. */
int32_t sd_engine_choose_gamma(const sd_engine_adapt *a, int32_t cur, int32_t gmax);
/* Record one round: `gamma` drafted, `n_acc` accepted, draft / verify seconds. */
void sd_engine_adapt_observe(sd_engine_adapt *a, int32_t gamma, int32_t n_acc, double t_draft, double t_verify);

#endif

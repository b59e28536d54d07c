/* sd_cuda_round.cu — the device-resident speculative round (see sd_cuda_round.h for
 * the round's steps and contract).
 *
 * Device state (one arena, allocated in create):
 *   state  int64 [1 + SPECDEC_MAX_DRAFT + 1]: state[0] = L (sequence length; the
 *          verifier's pos0; forwards read it with a constant offset baked into the
 *          graph), state[1 + i] = L + i (the draft step i's sampling position: the
 *          draft-step launcher takes a pointer per step);
 *   rb     int32 [SPECDEC_MAX_DRAFT + 2]: rb[0] = accepted count, rb[1..] = tokens —
 *          contiguous so one copy brings a round back;
 *   seed, seq_id (uint64), q rows [SPECDEC_MAX_DRAFT][V] fp32, the draft-step and
 *   verifier workspaces (the latter zeroed once; the kernel leaves it zeroed).
 * Token inputs live in the runners' own device token buffers: the draft step writes
 * x_{i+1} to the draft's buffer[0] and the target's buffer[1 + i]; the finish kernel
 * writes the target's buffer[0] and the draft's buffer[0..1].
 * Launch geometry: forwards as in sd_cuda_runner.cu (device-position variants),
 * draft step 1 block, verifier (γ+1) blocks, finish 1 thread.
 * Runners: standalone CUDA runners only (sd_cuda_runner_create: a private KV pool whose
 * block table is the identity from creation on, so the captured forwards stay valid
 * as the sequence grows); runners of a group are refused (UNSUPPORTED) and driven by
 * the host round. */
#include <cuda_runtime.h>
#include <string.h>
#include <time.h>

#include "sd_cuda_common.cuh"
#include "sd_cuda_backend.h"
#include "sd_cuda_round.h"
#include "sd_cuda_runner.h"
#include "sd_cuda_sample.h"

extern "C" {
#include "sd_alloc.h"
}

#define SD_ROUND_STATE (SPECDEC_MAX_DRAFT + 2)
#define SD_ROUND_RB (SPECDEC_MAX_DRAFT + 2)

/* Host staging in pinned memory: start() uploads from it, run() reads back into it. */
typedef struct sd_round_pinned {
    int64_t state[SD_ROUND_STATE];
    uint64_t seed, seq_id;
    int32_t tok;
    int32_t rb[SD_ROUND_RB];
} sd_round_pinned;

struct sd_cuda_round {
    sd_round base;    /* must be first: the engine sees an sd_round * */
    sd_runner *t, *d; /* borrowed */
    int use_graphs;   /* run(): replay CUDA graphs (1) or enqueue directly (0) */
    int device;
    int32_t V;
    int32_t n_ctx;    /* min of the runners' */
    int draft_two;    /* the draft's token buffer holds >= 2 ids */
    cudaStream_t stream;
    cudaEvent_t done; /* the readback landed */
    cudaEvent_t order; /* stream ordering with the runners' streams (sd_round_join) */
    cudaEvent_t ev[4]; /* timing: start, after draft, after target, end */
    void *arena;
    int64_t *state;
    int32_t *rb;
    uint64_t *seed, *seq_id;
    float *q;          /* [SPECDEC_MAX_DRAFT][V] */
    void *ws_draft;
    size_t ws_draft_bytes;
    void *ws_verify;
    size_t ws_verify_bytes;
    sd_round_pinned *h; /* pinned */
    cudaGraphExec_t graph[SPECDEC_MAX_DRAFT + 1][2]; /* [γ][n_pend - 1] */
    int32_t n_graphs;
    int graph_events;  /* 1: capture the stage events into graphs (falls back to 0) */
    specdec_verify_mode mode;
    sd_sampling_params sp;
    int started;
    int32_t L;
    int lost;
};

static double sd_round_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static specdec_status sd_round_note(sd_cuda_round *rd, specdec_status st) {
    if (st == SPECDEC_ERR_DEVICE_LOST) rd->lost = 1;
    return st;
}

/* A runner launcher failed: its detail is in the runner's errbuf. */
static specdec_status sd_round_runner_fail(sd_errbuf *eb, sd_runner *r, const char *what, specdec_status st) {
    return sd_fail(eb, st, "device round, %s forward: %s", what, r->err.msg);
}

/* After verify: advance L by n + 1 and write the next round's inputs (header). One
 * thread: a handful of scalar stores. n is clamped so a corrupt count cannot index
 * out of rb; the host rejects such a round anyway. */
static __global__ void sd_round_finish_kernel(int64_t *__restrict__ state, const int32_t *__restrict__ rb,
                                              int32_t gamma, int32_t *__restrict__ ttok, int32_t *__restrict__ dtok,
                                              int draft_two) {
    int32_t n = rb[0];
    if (n < 0 || n > gamma) n = 0;
    const int32_t t = rb[1 + n];
    const int64_t L = state[0] + n + 1;
    state[0] = L;
    for (int i = 0; i <= SPECDEC_MAX_DRAFT; i++) state[1 + i] = L + i;
    ttok[0] = t;
    if (dtok) {
        dtok[0] = (gamma > 0 && n == gamma) ? rb[gamma] : t; /* rb[gamma] = out[γ-1] = x_γ */
        if (draft_two) dtok[1] = t;
    }
}

static void sd_cuda_round_free(sd_cuda_round *rd) {
    if (!rd) return;
    (void)cudaSetDevice(rd->device);
    if (rd->stream) (void)cudaStreamSynchronize(rd->stream);
    for (int g = 0; g <= SPECDEC_MAX_DRAFT; g++)
        for (int k = 0; k < 2; k++)
            if (rd->graph[g][k]) (void)cudaGraphExecDestroy(rd->graph[g][k]);
    if (rd->done) (void)cudaEventDestroy(rd->done);
    if (rd->order) (void)cudaEventDestroy(rd->order);
    for (int i = 0; i < 4; i++)
        if (rd->ev[i]) (void)cudaEventDestroy(rd->ev[i]);
    if (rd->stream) (void)cudaStreamDestroy(rd->stream);
    if (rd->arena) (void)cudaFree(rd->arena);
    if (rd->h) (void)cudaFreeHost(rd->h);
    (void)cudaGetLastError();
    sd_free(rd);
}

static void sd_round_drop_graphs(sd_cuda_round *rd) {
    for (int g = 0; g <= SPECDEC_MAX_DRAFT; g++)
        for (int k = 0; k < 2; k++)
            if (rd->graph[g][k]) {
                (void)cudaGraphExecDestroy(rd->graph[g][k]);
                rd->graph[g][k] = NULL;
            }
    rd->n_graphs = 0;
}

static size_t sd_round_al(size_t n) { return (n + 255) / 256 * 256; }

/* The runners a device round can drive: standalone CUDA runners (identity block
 * tables: the round's forwards address rows through them in CHAIN mode) on one device,
 * of one vocabulary within the GPU sampler's range. */
static specdec_status sd_round_check_runners(sd_runner *target, sd_runner *draft, sd_errbuf *eb) {
    if (!target || target->backend != SPECDEC_BACKEND_CUDA || (draft && draft->backend != SPECDEC_BACKEND_CUDA))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "device round: needs CUDA runners (target %p)", (void *)target);
    if (!sd_cuda_runner_standalone(target) || (draft && !sd_cuda_runner_standalone(draft)))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED,
                       "device round: the %s runner belongs to a runner group (paged KV shared by sequences); "
                       "groups are driven by the host round",
                       sd_cuda_runner_standalone(target) ? "draft" : "target");
    const int32_t V = target->n_vocab;
    if (V <= 0 || V > SD_CUDA_SAMPLE_MAX_VOCAB)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "device round: vocabulary %d outside [1, %d] of the GPU sampler",
                       (int)V, SD_CUDA_SAMPLE_MAX_VOCAB);
    if (draft && (draft->n_vocab != V || sd_cuda_runner_device(draft) != sd_cuda_runner_device(target)))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "device round: draft vocabulary %d / device %d vs target %d / %d",
                       (int)draft->n_vocab, sd_cuda_runner_device(draft), (int)V, sd_cuda_runner_device(target));
    return SPECDEC_OK;
}

static specdec_status sd_cuda_round_alloc(sd_runner *target, sd_runner *draft, sd_cuda_round **out,
                                          sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "device round: out is NULL");
    specdec_status st = sd_round_check_runners(target, draft, eb);
    if (st != SPECDEC_OK) return st;
    const int32_t V = target->n_vocab;
    sd_cuda_round *rd = (sd_cuda_round *)sd_calloc(1, sizeof *rd);
    if (!rd) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "device round: out of host memory");
    rd->t = target;
    rd->d = draft;
    rd->device = sd_cuda_runner_device(target);
    rd->V = V;
    rd->n_ctx = draft && draft->n_ctx < target->n_ctx ? draft->n_ctx : target->n_ctx;
    rd->draft_two = draft && draft->max_batch >= 2;
    rd->graph_events = 1;
    rd->L = -1;

    rd->ws_draft_bytes = sd_cuda_sample_ws_bytes(1, V);
    for (int32_t g = 0; g <= SPECDEC_MAX_DRAFT; g++) {
        size_t b = sd_cuda_verify_ws_bytes(1, g, V);
        if (b > rd->ws_verify_bytes) rd->ws_verify_bytes = b;
    }
    const size_t off_rb = sd_round_al(SD_ROUND_STATE * sizeof(int64_t));
    const size_t off_seed = off_rb + sd_round_al(SD_ROUND_RB * sizeof(int32_t));
    const size_t off_q = off_seed + sd_round_al(2 * sizeof(uint64_t));
    const size_t off_wd = off_q + sd_round_al((size_t)SPECDEC_MAX_DRAFT * (size_t)V * sizeof(float));
    const size_t off_wv = off_wd + sd_round_al(rd->ws_draft_bytes);
    const size_t total = off_wv + sd_round_al(rd->ws_verify_bytes);

    st = SPECDEC_OK;
#define SD_ROUND_CREATE(stmt)                                              \
    do {                                                                   \
        cudaError_t e_ = (stmt);                                           \
        if (e_ != cudaSuccess) {                                           \
            st = sd_cuda_fail(eb, e_, #stmt, __FILE__, __LINE__);          \
            goto fail;                                                     \
        }                                                                  \
    } while (0)
    SD_ROUND_CREATE(cudaSetDevice(rd->device));
    SD_ROUND_CREATE(cudaStreamCreateWithFlags(&rd->stream, cudaStreamNonBlocking));
    SD_ROUND_CREATE(cudaEventCreateWithFlags(&rd->done, cudaEventDisableTiming));
    SD_ROUND_CREATE(cudaEventCreateWithFlags(&rd->order, cudaEventDisableTiming));
    for (int i = 0; i < 4; i++) SD_ROUND_CREATE(cudaEventCreate(&rd->ev[i]));
    SD_ROUND_CREATE(cudaMalloc(&rd->arena, total));
    SD_ROUND_CREATE(cudaMallocHost((void **)&rd->h, sizeof(sd_round_pinned)));
#undef SD_ROUND_CREATE
    {
        char *b = (char *)rd->arena;
        rd->state = (int64_t *)b;
        rd->rb = (int32_t *)(b + off_rb);
        rd->seed = (uint64_t *)(b + off_seed);
        rd->seq_id = rd->seed + 1;
        rd->q = (float *)(b + off_q);
        rd->ws_draft = b + off_wd;
        rd->ws_verify = b + off_wv;
    }
    memset(rd->h, 0, sizeof *rd->h);
    st = sd_cuda_verify_ws_init(rd->ws_verify, rd->ws_verify_bytes, rd->stream, eb);
    if (st == SPECDEC_OK) st = sd_cuda_sample_ws_init(rd->ws_draft, rd->ws_draft_bytes, rd->stream, eb);
    if (st == SPECDEC_OK) {
        cudaError_t e = cudaStreamSynchronize(rd->stream);
        if (e != cudaSuccess) st = sd_cuda_fail(eb, e, "cudaStreamSynchronize(round ws init)", __FILE__, __LINE__);
    }
    if (st != SPECDEC_OK) goto fail;
    *out = rd;
    return SPECDEC_OK;
fail:
    (void)cudaGetLastError();
    sd_cuda_round_free(rd);
    return st;
}

/* Issue 24 (c): the round's stream and its runners' own streams (prefill, host-path
 * steps) share the runners' buffers; they are ordered by events, never only by a host
 * synchronisation: out = 0: the round's later work waits for everything the runners'
 * streams hold; out = 1: the runners' later work waits for the round's. Outside any
 * capture (around graph launches). */
static specdec_status sd_round_join(sd_cuda_round *rd, int out, sd_errbuf *eb) {
    sd_runner *rs[2] = {rd->t, rd->d};
    for (int i = 0; i < 2; i++) {
        if (!rs[i]) continue;
        const cudaStream_t rsx = sd_cuda_runner_stream(rs[i]);
        const specdec_status st = out ? sd_cuda_stream_after(rsx, rd->stream, rd->order, eb)
                                      : sd_cuda_stream_after(rd->stream, rsx, rd->order, eb);
        if (st != SPECDEC_OK) return st;
    }
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_round_start(sd_cuda_round *rd, specdec_verify_mode mode,
                                              const sd_sampling_params *sp, uint64_t seed, uint64_t sequence_id,
                                              int32_t length, int32_t last_token, sd_errbuf *eb) {
    if (!rd || !sp) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "device round start: NULL round or params");
    if (rd->lost)
        return sd_fail(eb, SPECDEC_ERR_DEVICE_LOST, "device round: an earlier device error left the device unusable");
    if (mode != SPECDEC_VERIFY_REJECTION && mode != SPECDEC_VERIFY_GREEDY && mode != SPECDEC_VERIFY_MATCH)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "device round start: mode %d", (int)mode);
    if (length < 1 || length > rd->n_ctx || last_token < 0 || last_token >= rd->V)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "device round start: length %d (n_ctx %d), last token %d (vocab %d)", (int)length,
                       (int)rd->n_ctx, (int)last_token, (int)rd->V);
    /* GREEDY: argmax of the raw logits, as the CPU engine (processing is skipped there) */
    const sd_sampling_params p = mode == SPECDEC_VERIFY_GREEDY ? sd_rule_greedy_params() : *sp;
    rd->started = 0;
    if (rd->mode != mode || memcmp(&rd->sp, &p, sizeof p) != 0) sd_round_drop_graphs(rd);
    rd->mode = mode;
    rd->sp = p;
    sd_round_pinned *h = rd->h;
    for (int i = 0; i < SD_ROUND_STATE; i++) h->state[i] = (int64_t)length + (i == 0 ? 0 : i - 1);
    h->seed = seed;
    h->seq_id = sequence_id;
    h->tok = last_token;
    SD_CUDA_TRY(eb, cudaSetDevice(rd->device));
    cudaStream_t s = rd->stream;
    specdec_status st = sd_round_join(rd, 0, eb); /* after the runners' prefill */
    if (st != SPECDEC_OK) {
        (void)cudaGetLastError();
        return sd_round_note(rd, st);
    }
    cudaError_t e = cudaMemcpyAsync(rd->state, h->state, sizeof h->state, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) e = cudaMemcpyAsync(rd->seed, &h->seed, 2 * sizeof(uint64_t), cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(sd_cuda_runner_device_tokens(rd->t), &h->tok, sizeof(int32_t), cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess && rd->d)
        e = cudaMemcpyAsync(sd_cuda_runner_device_tokens(rd->d), &h->tok, sizeof(int32_t), cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) st = sd_round_join(rd, 1, eb); /* the runners' later work after the uploads */
    if (e == cudaSuccess) e = cudaStreamSynchronize(s); /* h is reused by the next call */
    if (st != SPECDEC_OK) {
        (void)cudaGetLastError();
        return sd_round_note(rd, st);
    }
    if (e != cudaSuccess) {
        st = sd_round_note(rd, sd_cuda_fail(eb, e, "device round start: upload of the sequence state", __FILE__,
                                            __LINE__));
        (void)cudaGetLastError();
        return st;
    }
    rd->L = length;
    rd->started = 1;
    return SPECDEC_OK;
}

/* Record a stage event; inside a capture as an external node (so the graph keeps it). */
static cudaError_t sd_round_mark(sd_cuda_round *rd, int i, int capturing) {
    if (capturing) return cudaEventRecordWithFlags(rd->ev[i], rd->stream, cudaEventRecordExternal);
    return cudaEventRecord(rd->ev[i], rd->stream);
}

/* The draft step's arguments that do not depend on the step (one sequence; the
 * caller sets position, q_out and tok_out2 per step). */
/* Blocks per row of the round's draft step and verifier: 0 = the one-block kernels
 * (measured), SD_CUDA_MB_AUTO = the multi-block ones (sd_cuda_verify_mb.cu; switch once
 * tests/cuda_sample passes on a device — see docs/GPU_VERIFY.md). */
#ifndef SD_ROUND_BLOCKS_PER_ROW
#define SD_ROUND_BLOCKS_PER_ROW 0
#endif

static sd_cuda_sample_draft_args sd_round_draft_args(const sd_cuda_round *rd, int32_t *dtok) {
    sd_cuda_sample_draft_args da;
    memset(&da, 0, sizeof da);
    da.logits = rd->d ? sd_cuda_runner_device_logits(rd->d) : NULL;
    da.ld_logits = rd->V;
    da.n_seq = 1;
    da.n_vocab = rd->V;
    da.sp = rd->sp;
    da.mode = rd->mode;
    da.seed = rd->seed;
    da.seq_id = rd->seq_id;
    da.advance_position = 0;
    da.ld_q = rd->V;
    da.tok_out = dtok; /* the next draft step's input */
    da.tok_stride = 1;
    da.tok2_stride = 1;
    da.blocks_per_row = SD_ROUND_BLOCKS_PER_ROW;
    return da;
}

/* The verifier's arguments for a round of gamma drafts (the drafts sit in the
 * target's token buffer after the last accepted token). */
static sd_cuda_verify_args sd_round_verify_args(const sd_cuda_round *rd, int32_t gamma, int32_t *ttok) {
    const int32_t V = rd->V;
    sd_cuda_verify_args a;
    memset(&a, 0, sizeof a);
    a.mode = rd->mode;
    a.gamma = gamma;
    a.n_vocab = V;
    a.n_seq = 1;
    a.sp = rd->sp;
    a.logits = sd_cuda_runner_device_logits(rd->t);
    a.ld_logits = V;
    a.logits_seq_stride = (int64_t)(gamma + 1) * V;
    a.q = gamma > 0 ? rd->q : NULL;
    a.ld_q = V;
    a.q_seq_stride = (int64_t)SPECDEC_MAX_DRAFT * V;
    a.draft = ttok + 1;
    a.draft_stride = gamma > 0 ? gamma : 1;
    a.seed = rd->seed;
    a.seq_id = rd->seq_id;
    a.pos0 = rd->state;
    a.out_tokens = rd->rb + 1;
    a.out_stride = gamma + 1;
    a.out_n_accepted = rd->rb;
    a.blocks_per_row = SD_ROUND_BLOCKS_PER_ROW;
    return a;
}

/* Enqueue one round (see the header); `marks`: record ev[1], ev[2] between stages. */
static specdec_status sd_round_enqueue(sd_cuda_round *rd, int32_t gamma, int32_t n_pend, int marks, int capturing,
                                       sd_errbuf *eb) {
    cudaStream_t s = rd->stream;
    const int32_t V = rd->V;
    int32_t *ttok = sd_cuda_runner_device_tokens(rd->t);
    int32_t *dtok = rd->d ? sd_cuda_runner_device_tokens(rd->d) : NULL;
    specdec_status st;
    sd_cuda_sample_draft_args da = sd_round_draft_args(rd, dtok);
    for (int32_t i = 0; i < gamma; i++) {
        /* catch-up of n_pend tokens at L - n_pend, then x_i at L + i - 1 */
        st = i == 0 ? sd_cuda_runner_enqueue_dpos(rd->d, n_pend, rd->state, -n_pend, 1, s)
                    : sd_cuda_runner_enqueue_dpos(rd->d, 1, rd->state, i - 1, 1, s);
        if (st != SPECDEC_OK) return sd_round_runner_fail(eb, rd->d, "draft", st);
        da.position = rd->state + 1 + i;
        da.q_out = rd->q + (size_t)i * V;
        da.tok_out2 = ttok + 1 + i; /* the verify pass's input */
        st = sd_cuda_sample_draft_step(&da, rd->ws_draft, rd->ws_draft_bytes, s, eb);
        if (st != SPECDEC_OK) return st;
    }
    if (marks) SD_CUDA_TRY(eb, sd_round_mark(rd, 1, capturing));
    st = sd_cuda_runner_enqueue_dpos(rd->t, gamma + 1, rd->state, -1, gamma + 1, s);
    if (st != SPECDEC_OK) return sd_round_runner_fail(eb, rd->t, "target", st);
    if (marks) SD_CUDA_TRY(eb, sd_round_mark(rd, 2, capturing));
    const sd_cuda_verify_args va = sd_round_verify_args(rd, gamma, ttok);
    st = sd_cuda_verify(&va, rd->ws_verify, rd->ws_verify_bytes, s, eb);
    if (st != SPECDEC_OK) return st;
    sd_round_finish_kernel<<<1, 1, 0, s>>>(rd->state, rd->rb, gamma, ttok, gamma > 0 ? dtok : NULL, rd->draft_two);
    SD_CUDA_LAUNCHED(eb, "sd_round_finish_kernel");
    return SPECDEC_OK;
}

/* Capture (gamma, n_pend) into *slot. With graph_events the stage events go into the
 * graph as external event nodes; if that capture fails, retry once without them. */
static specdec_status sd_round_capture(sd_cuda_round *rd, int32_t gamma, int32_t n_pend, cudaGraphExec_t *slot,
                                       sd_errbuf *eb) {
    for (;;) {
        SD_CUDA_TRY(eb, cudaStreamBeginCapture(rd->stream, cudaStreamCaptureModeRelaxed));
        specdec_status st = sd_round_enqueue(rd, gamma, n_pend, rd->graph_events, 1, eb);
        cudaGraph_t g = NULL;
        cudaError_t e = cudaStreamEndCapture(rd->stream, &g);
        if (st == SPECDEC_OK && e != cudaSuccess)
            st = sd_cuda_fail(eb, e, "cudaStreamEndCapture(device round)", __FILE__, __LINE__);
        if (st == SPECDEC_OK) {
            e = cudaGraphInstantiate(slot, g, 0);
            if (e != cudaSuccess) {
                *slot = NULL;
                st = sd_cuda_fail(eb, e, "cudaGraphInstantiate(device round)", __FILE__, __LINE__);
            }
        }
        if (g) (void)cudaGraphDestroy(g);
        if (st == SPECDEC_OK) {
            rd->n_graphs++;
            return SPECDEC_OK;
        }
        (void)cudaGetLastError();
        if (st == SPECDEC_ERR_DEVICE_LOST || !rd->graph_events) return st;
        rd->graph_events = 0; /* external event nodes refused: capture without them */
    }
}

/* Enqueue the round (graph replay or direct launches) and the readback of (n, tokens),
 * then wait for it. *stages: whether the stage events were recorded. */
static specdec_status sd_round_execute(sd_cuda_round *rd, int32_t gamma, int32_t n_pend, int use_graph, int *stages,
                                       sd_errbuf *eb) {
    cudaStream_t s = rd->stream;
    specdec_status st = SPECDEC_OK;
    *stages = 0;
    st = sd_round_join(rd, 0, eb); /* after the runners' own work */
    cudaError_t e = st == SPECDEC_OK ? cudaEventRecord(rd->ev[0], s) : cudaSuccess;
    if (e != cudaSuccess) st = sd_cuda_fail(eb, e, "cudaEventRecord(round start)", __FILE__, __LINE__);
    if (st == SPECDEC_OK && use_graph) {
        cudaGraphExec_t *slot = &rd->graph[gamma][n_pend - 1];
        if (!*slot) st = sd_round_capture(rd, gamma, n_pend, slot, eb);
        if (st == SPECDEC_OK) {
            *stages = rd->graph_events;
            e = cudaGraphLaunch(*slot, s);
            if (e != cudaSuccess) st = sd_cuda_fail(eb, e, "cudaGraphLaunch(device round)", __FILE__, __LINE__);
        }
    } else if (st == SPECDEC_OK) {
        *stages = 1;
        st = sd_round_enqueue(rd, gamma, n_pend, 1, 0, eb);
    }
    if (st == SPECDEC_OK) {
        e = cudaMemcpyAsync(rd->h->rb, rd->rb, (size_t)(gamma + 2) * sizeof(int32_t), cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaEventRecord(rd->ev[3], s);
        if (e == cudaSuccess) e = cudaEventRecord(rd->done, s);
        if (e != cudaSuccess) st = sd_cuda_fail(eb, e, "device round: readback of the accepted tokens", __FILE__, __LINE__);
        if (st == SPECDEC_OK) st = sd_round_join(rd, 1, eb); /* the runners' later work after the round's */
        e = st == SPECDEC_OK ? cudaEventSynchronize(rd->done) : cudaSuccess;
        if (e != cudaSuccess) st = sd_cuda_fail(eb, e, "device round: readback of the accepted tokens", __FILE__, __LINE__);
    }
    if (st != SPECDEC_OK) {
        (void)cudaStreamSynchronize(s);
        (void)cudaGetLastError();
        return sd_round_note(rd, st);
    }
    return SPECDEC_OK;
}

/* The stage times of the round just read back (events ev[0..3]). */
static void sd_round_timing(const sd_cuda_round *rd, int stages, double t_wall, sd_cuda_round_timing *tm) {
    memset(tm, 0, sizeof *tm);
    tm->t_wall = t_wall;
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, rd->ev[0], rd->ev[3]) == cudaSuccess) tm->t_gpu = 1e-3 * ms;
    if (stages) {
        float a = 0, b = 0, c = 0;
        if (cudaEventElapsedTime(&a, rd->ev[0], rd->ev[1]) == cudaSuccess &&
            cudaEventElapsedTime(&b, rd->ev[1], rd->ev[2]) == cudaSuccess &&
            cudaEventElapsedTime(&c, rd->ev[2], rd->ev[3]) == cudaSuccess) {
            tm->t_draft = 1e-3 * a;
            tm->t_target = 1e-3 * b;
            tm->t_verify = 1e-3 * c;
            tm->stages = 1;
        }
    }
    (void)cudaGetLastError(); /* an unreadable timing is not an error of the round */
}

extern "C" specdec_status sd_cuda_round_run(sd_cuda_round *rd, int32_t gamma, int32_t n_pend, int use_graph,
                                            int32_t *out_tokens, int32_t *out_n_accepted, sd_cuda_round_timing *tm,
                                            sd_errbuf *eb) {
    if (!rd || !out_tokens || !out_n_accepted)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "device round: NULL round or output");
    if (rd->lost)
        return sd_fail(eb, SPECDEC_ERR_DEVICE_LOST, "device round: an earlier device error left the device unusable");
    if (!rd->started) return sd_fail(eb, SPECDEC_ERR_INTERNAL, "device round: run before start");
    if (gamma < 0 || gamma > SPECDEC_MAX_DRAFT || (gamma > 0 && (!rd->d || n_pend < 1 || n_pend > 2)))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "device round: gamma %d, n_pend %d, %s draft", (int)gamma,
                       (int)n_pend, rd->d ? "with" : "no");
    if (gamma == 0) n_pend = 1;
    const int32_t L = rd->L;
    /* every position any kernel of the round touches must be inside the caches */
    if ((int64_t)L + gamma > rd->n_ctx || L - (gamma > 0 ? n_pend : 1) < 0)
        return sd_fail(eb, SPECDEC_ERR_CONTEXT_FULL, "device round: length %d + gamma %d exceeds n_ctx %d", (int)L,
                       (int)gamma, (int)rd->n_ctx);
    SD_CUDA_TRY(eb, cudaSetDevice(rd->device));
    rd->started = 0; /* until the round completes: a failure leaves the state unknown */
    const double t0 = sd_round_now();
    int stages = 0;
    specdec_status st = sd_round_execute(rd, gamma, n_pend, use_graph, &stages, eb);
    if (st != SPECDEC_OK) return st;
    const double t1 = sd_round_now();
    const int32_t *rb = rd->h->rb;
    const int32_t n = rb[0];
    if (n < 0 || n > gamma)
        return sd_fail(eb, SPECDEC_ERR_INTERNAL, "device round: accepted count %d outside [0, %d]", (int)n, (int)gamma);
    for (int32_t i = 0; i <= n; i++) {
        if (rb[1 + i] < 0 || rb[1 + i] >= rd->V)
            return sd_fail(eb, SPECDEC_ERR_INTERNAL, "device round: token %d at %d outside [0, %d)", (int)rb[1 + i],
                           (int)i, (int)rd->V);
        out_tokens[i] = rb[1 + i];
    }
    *out_n_accepted = n;
    rd->L = L + n + 1;
    rd->started = 1;
    if (tm) sd_round_timing(rd, stages, t1 - t0, tm);
    return SPECDEC_OK;
}

extern "C" int32_t sd_cuda_round_length(const sd_cuda_round *rd) { return rd && rd->started ? rd->L : -1; }
extern "C" int32_t sd_cuda_round_graph_count(const sd_cuda_round *rd) { return rd ? rd->n_graphs : 0; }
extern "C" int sd_cuda_round_lost(const sd_cuda_round *rd) { return rd ? rd->lost : 0; }

/* ---- the round interface (core/sd_round.h) ----------------------------------------- */

static specdec_status sd_round_fail_op(sd_cuda_round *rd, specdec_status st) {
    if (st == SPECDEC_ERR_DEVICE_LOST || rd->lost) rd->base.device_lost = 1;
    return st;
}

/* Prefill both caches through the runners (host path, chunked), then upload the
 * sequence state for device-resident rounds. */
static specdec_status cuda_round_begin(sd_round *base, sd_round_seq *s) {
    sd_cuda_round *rd = (sd_cuda_round *)base;
    sd_errbuf *eb = &base->err;
    if (s->length < 1) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "device round: empty sequence");
    if ((s->target && s->target != rd->t) || (s->draft && s->draft != rd->d))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "device round: a sequence on other runners than the round's");
    rd->started = 0;
    sd_runner_truncate(rd->t, 0);
    if (rd->d) sd_runner_truncate(rd->d, 0);
    specdec_status st = SPECDEC_OK;
    if (s->length > 1) {
        st = sd_runner_forward_chunked(rd->t, s->tokens, s->length - 1, 0, NULL);
        if (st != SPECDEC_OK) return sd_round_fail_op(rd, sd_fail(eb, st, "target prefill: %s", rd->t->err.msg));
        if (rd->d && s->uses_draft) st = sd_runner_forward_chunked(rd->d, s->tokens, s->length - 1, 0, NULL);
        if (st != SPECDEC_OK) return sd_round_fail_op(rd, sd_fail(eb, st, "draft prefill: %s", rd->d->err.msg));
    }
    st = sd_cuda_round_start(rd, s->mode, &s->sp, s->seed, s->sequence_id, s->length, s->tokens[s->length - 1], eb);
    return sd_round_fail_op(rd, st);
}

/* The round's wall time in the device stages' proportions (all of it counts as target
 * time when the stage events are unavailable). */
static void cuda_round_times(const sd_cuda_round_timing *tm, sd_round_times *t) {
    t->draft = 0;
    t->target = tm->t_wall;
    t->verify = 0;
    if (tm->stages && tm->t_gpu > 0) {
        t->draft = tm->t_wall * tm->t_draft / tm->t_gpu;
        t->verify = tm->t_wall * tm->t_verify / tm->t_gpu;
        t->target = tm->t_wall - t->draft - t->verify;
    }
}

static specdec_status cuda_round_run(sd_round *base, sd_round_seq *const *seqs, int32_t n_seqs) {
    sd_cuda_round *rd = (sd_cuda_round *)base;
    sd_errbuf *eb = &base->err;
    if (n_seqs != 1 || !seqs || !seqs[0])
        return sd_fail(eb, n_seqs > 1 ? SPECDEC_ERR_UNSUPPORTED : SPECDEC_ERR_INVALID_ARGUMENT,
                       "device round: %d sequences (one per engine)", (int)n_seqs);
    sd_round_seq *s = seqs[0];
    const int32_t gamma = s->shape.depth, L = s->length;
    s->status = SPECDEC_ERR_INTERNAL;
    if ((s->target && s->target != rd->t) || (s->draft && s->draft != rd->d))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "device round: a sequence on other runners than the round's");
    if (!sd_draft_is_chain(&s->shape))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "device round: draft trees are not implemented yet");
    if (!rd->started || rd->L != L)
        return sd_fail(eb, SPECDEC_ERR_INTERNAL, "device round: sequence at length %d, device state at %d%s", (int)L,
                       (int)rd->L, rd->started ? "" : " (not begun)");
    /* the draft's lag behind the sequence: 1 after a rejection or the prefill, 2 after
     * a round that accepted everything (it never saw x_γ) */
    const int32_t n_pend = gamma > 0 && rd->d ? L - sd_runner_kv_len(rd->d) : 1;
    if (gamma > 0 && (n_pend < 1 || n_pend > 2))
        return sd_fail(eb, SPECDEC_ERR_INTERNAL, "device round: the draft is %d tokens behind (1 or 2 supported)",
                       (int)n_pend);
    sd_cuda_round_timing tm;
    specdec_status st = sd_cuda_round_run(rd, gamma, n_pend, rd->use_graphs, s->out, &s->n_accepted, &tm, eb);
    if (st != SPECDEC_OK) return sd_round_fail_op(rd, st);
    s->n_drafted = gamma;
    cuda_round_times(&tm, &s->t);
    /* what the device-side forwards appended: the target holds L + n (the emitted
     * token pending); the draft saw up to L + γ - 1, of which the accepted path stays */
    sd_cuda_runner_note_kv(rd->t, L + s->n_accepted);
    if (gamma > 0) {
        const int32_t dk = L + gamma - 1 < L + s->n_accepted ? L + gamma - 1 : L + s->n_accepted;
        sd_cuda_runner_note_kv(rd->d, dk);
    }
    s->status = SPECDEC_OK;
    return SPECDEC_OK;
}

/* A stop inside the round: the caches give up what lies beyond `length`; the device
 * state no longer matches the sequence, so it must be begun again. */
static specdec_status cuda_round_settle(sd_round *base, sd_round_seq *s, int32_t length) {
    sd_cuda_round *rd = (sd_cuda_round *)base;
    (void)s;
    sd_runner_truncate(rd->t, length - 1);
    if (rd->d) sd_runner_truncate(rd->d, length - 1);
    rd->started = 0;
    return SPECDEC_OK;
}

static void cuda_round_destroy(sd_round *base) { sd_cuda_round_free((sd_cuda_round *)base); }

static const sd_round_ops sd_cuda_round_ops = {"cuda", cuda_round_begin, cuda_round_run, cuda_round_settle,
                                               cuda_round_destroy};

extern "C" specdec_status sd_cuda_round_create(sd_runner *target, sd_runner *draft, int use_graphs, sd_round **out,
                                               sd_errbuf *eb) {
    if (out) *out = NULL;
    sd_cuda_round *rd = NULL;
    specdec_status st = sd_cuda_round_alloc(target, draft, &rd, eb);
    if (st != SPECDEC_OK) return st;
    rd->base.ops = &sd_cuda_round_ops;
    rd->use_graphs = use_graphs;
    *out = &rd->base;
    return SPECDEC_OK;
}

extern "C" void sd_cuda_round_use_graphs(sd_round *base, int use_graphs) {
    if (base) ((sd_cuda_round *)base)->use_graphs = use_graphs;
}

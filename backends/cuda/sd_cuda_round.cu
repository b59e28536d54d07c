/* sd_cuda_round.cu — the device-resident executor (see sd_cuda_round.h for the round's
 * stages on the device; the protocol that calls them is core/sd_round.c).
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
 * x_{i+1} to the draft's buffer[0] and the target's buffer[1 + i] (a deterministic
 * proposal is copied there from pinned memory); the finish kernel writes the target's
 * buffer[0] and the draft's buffer[0..1].
 * Graphs: one per (deterministic, γ, lag), captured between wave_begin and wave_end
 * (whatever the protocol enqueued: the drafter's draft primitives, the verify pass and
 * the verifier); each primitive call is also logged, so that a capture the driver
 * refuses (external event nodes) is retried without the stage events from the log.
 * Launch geometry: forwards as in sd_cuda_runner.cu (device-position variants),
 * draft step 1 block, verifier (γ+1) blocks, finish 1 thread.
 * Runners: standalone CUDA runners only (sd_cuda_runner_create: a private KV pool whose
 * block table is the identity from creation on, so the captured forwards stay valid
 * as the sequence grows); runners of a group are refused (UNSUPPORTED) and driven by
 * the batched executor or the host one. */
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
#define SD_ROUND_LOG (2 * SPECDEC_MAX_DRAFT + 4)

/* Blocks per row of the draft step and verifier: 0 = the one-block kernels (measured),
 * SD_CUDA_MB_AUTO = the multi-block ones (sd_cuda_verify_mb.cu; switch once
 * tests/cuda_sample passes on a device — see docs/GPU_VERIFY.md). */
#ifndef SD_ROUND_BLOCKS_PER_ROW
#define SD_ROUND_BLOCKS_PER_ROW 0
#endif

/* Host staging in pinned memory: the state upload, the deterministic proposal, the
 * readback. */
typedef struct sd_round_pinned {
    int64_t state[SD_ROUND_STATE];
    uint64_t seed, seq_id;
    int32_t ttok, dtok[2];
    int32_t prop[SPECDEC_MAX_DRAFT];  /* a deterministic proposal (read by the graph's memcpy) */
    int32_t drafted[SPECDEC_MAX_DRAFT]; /* model drafts read back for the trace */
    int32_t rb[SD_ROUND_RB];
} sd_round_pinned;

/* One logged primitive call of the wave being enqueued. */
typedef struct sd_round_op {
    int kind; /* SD_OP_* */
    int32_t step;
} sd_round_op;
enum { SD_OP_DRAFT_FORWARD, SD_OP_DRAFT_SAMPLE, SD_OP_VERIFY_PASS, SD_OP_VERIFY };

typedef struct sd_cuda_round {
    sd_exec base;     /* must be first: the protocol sees an sd_exec * */
    sd_runner *t, *d; /* borrowed */
    int use_graphs;   /* replay CUDA graphs (1) or enqueue directly (0) */
    int device;
    int32_t V;
    int32_t n_ctx;    /* min of the runners' */
    int draft_two;    /* the draft's token buffer holds >= 2 ids */
    cudaStream_t stream;
    cudaEvent_t done; /* the readback landed */
    cudaEvent_t ev[4]; /* timing: start, after draft, after target, end */
    cudaEvent_t order; /* stream ordering with the runners' streams (sd_round_join) */
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
    cudaGraphExec_t graph[2][SPECDEC_MAX_DRAFT + 1][3]; /* [deterministic][γ][lag] */
    int32_t n_graphs;
    int graph_events;  /* 1: capture the stage events into graphs (falls back to 0) */
    /* the sequence the device state holds */
    specdec_verify_mode mode;
    sd_sampling_params sp;
    uint64_t cur_seed, cur_sid;
    int started;       /* the device state is the sequence's at length L */
    int32_t L;
    int dtok_lag;      /* the draft's token buffer holds its catch-up of this many tokens (0: unknown) */
    int lost;
    /* the wave in flight */
    sd_round_slot *x;
    int32_t gamma, lag;
    int det, capturing, marks, replayed;
    cudaGraphExec_t *slot;
    sd_round_op log[SD_ROUND_LOG];
    int32_t n_log;
    double t0;
    sd_cuda_round_timing last;
} sd_cuda_round;

static double sd_round_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A failure: a lost device is sticky; a capture in progress is ended and dropped, the
 * stream drained; the device state is no longer known. */
static specdec_status sd_round_note(sd_cuda_round *rd, specdec_status st) {
    if (rd->capturing) {
        cudaGraph_t g = NULL;
        (void)cudaStreamEndCapture(rd->stream, &g);
        if (g) (void)cudaGraphDestroy(g);
        rd->capturing = 0;
    }
    (void)cudaStreamSynchronize(rd->stream);
    (void)cudaGetLastError();
    rd->started = 0;
    if (st == SPECDEC_ERR_DEVICE_LOST) rd->lost = rd->base.device_lost = 1;
    return st;
}

/* A runner launcher failed: its detail is in the runner's errbuf. */
static specdec_status sd_round_runner_fail(sd_cuda_round *rd, sd_runner *r, const char *what, specdec_status st) {
    return sd_round_note(rd, sd_fail(&rd->base.err, st, "device round, %s forward: %s", what, r->err.msg));
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

static void sd_round_drop_graphs(sd_cuda_round *rd) {
    for (int k = 0; k < 2; k++)
        for (int g = 0; g <= SPECDEC_MAX_DRAFT; g++)
            for (int l = 0; l < 3; l++)
                if (rd->graph[k][g][l]) {
                    (void)cudaGraphExecDestroy(rd->graph[k][g][l]);
                    rd->graph[k][g][l] = NULL;
                }
    rd->n_graphs = 0;
}

static void sd_cuda_round_free(sd_cuda_round *rd) {
    if (!rd) return;
    (void)cudaSetDevice(rd->device);
    if (rd->stream) (void)cudaStreamSynchronize(rd->stream);
    sd_round_drop_graphs(rd);
    if (rd->done) (void)cudaEventDestroy(rd->done);
    for (int i = 0; i < 4; i++)
        if (rd->ev[i]) (void)cudaEventDestroy(rd->ev[i]);
    if (rd->order) (void)cudaEventDestroy(rd->order);
    if (rd->stream) (void)cudaStreamDestroy(rd->stream);
    if (rd->arena) (void)cudaFree(rd->arena);
    if (rd->h) (void)cudaFreeHost(rd->h);
    (void)cudaGetLastError();
    sd_free(rd);
}

/* Issue 24 (c): the executor's stream and its runners' own streams (prefill, host-path
 * rounds of the fallback executor) share the runners' buffers; they are ordered by
 * events, never only by a host synchronisation: out = 0: the executor's later work waits
 * for everything the runners' streams hold; out = 1: the runners' later work waits for
 * the executor's. Outside any capture (around graph launches). */
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

/* Record a stage event; inside a capture as an external node (so the graph keeps it). */
static cudaError_t sd_round_mark(sd_cuda_round *rd, int i) {
    if (!rd->marks) return cudaSuccess;
    if (rd->capturing) return cudaEventRecordWithFlags(rd->ev[i], rd->stream, cudaEventRecordExternal);
    return cudaEventRecord(rd->ev[i], rd->stream);
}

/* ------------------------------------------------------------------------- */
/* the enqueued stages                                                        */
/* ------------------------------------------------------------------------- */
static specdec_status sd_round_enq_draft_forward(sd_cuda_round *rd, int32_t step) {
    const specdec_status st = step == 0 ? sd_cuda_runner_enqueue_dpos(rd->d, rd->lag, rd->state, -rd->lag, 1, rd->stream)
                                        : sd_cuda_runner_enqueue_dpos(rd->d, 1, rd->state, step - 1, 1, rd->stream);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_round_runner_fail(rd, rd->d, "draft", st);
}

static specdec_status sd_round_enq_draft_sample(sd_cuda_round *rd, int32_t step) {
    sd_cuda_sample_draft_args da;
    memset(&da, 0, sizeof da);
    da.logits = sd_cuda_runner_device_logits(rd->d);
    da.ld_logits = rd->V;
    da.n_seq = 1;
    da.n_vocab = rd->V;
    da.sp = rd->sp;
    da.mode = rd->mode;
    da.seed = rd->seed;
    da.seq_id = rd->seq_id;
    da.position = rd->state + 1 + step;
    da.ld_q = rd->V;
    da.q_out = rd->q + (size_t)step * (size_t)rd->V;
    da.tok_out = sd_cuda_runner_device_tokens(rd->d); /* the next draft step's input */
    da.tok_stride = 1;
    da.tok_out2 = sd_cuda_runner_device_tokens(rd->t) + 1 + step; /* the verify pass's input */
    da.tok2_stride = 1;
    da.blocks_per_row = SD_ROUND_BLOCKS_PER_ROW;
    const specdec_status st = sd_cuda_sample_draft_step(&da, rd->ws_draft, rd->ws_draft_bytes, rd->stream, &rd->base.err);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_round_note(rd, st);
}

static specdec_status sd_round_enq_verify_pass(sd_cuda_round *rd) {
    cudaError_t e = sd_round_mark(rd, 1);
    if (e == cudaSuccess && rd->det && rd->gamma > 0) /* the host's proposal, from pinned memory */
        e = cudaMemcpyAsync(sd_cuda_runner_device_tokens(rd->t) + 1, rd->h->prop, (size_t)rd->gamma * sizeof(int32_t),
                            cudaMemcpyHostToDevice, rd->stream);
    if (e != cudaSuccess) return sd_round_note(rd, sd_cuda_fail(&rd->base.err, e, "device round: verify pass input", __FILE__, __LINE__));
    const specdec_status st = sd_cuda_runner_enqueue_dpos(rd->t, rd->gamma + 1, rd->state, -1, rd->gamma + 1, rd->stream);
    return st == SPECDEC_OK ? SPECDEC_OK : sd_round_runner_fail(rd, rd->t, "target", st);
}

/* The verifier's arguments (the drafts sit in the target's token buffer after the
 * pending token). */
static sd_cuda_verify_args sd_round_verify_args(const sd_cuda_round *rd) {
    const int32_t V = rd->V, gamma = rd->gamma;
    int32_t *ttok = sd_cuda_runner_device_tokens(rd->t);
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
    a.q = gamma > 0 && !rd->det ? rd->q : NULL;
    a.ld_q = V;
    a.q_seq_stride = (int64_t)SPECDEC_MAX_DRAFT * V;
    a.deterministic = rd->det;
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

static specdec_status sd_round_enq_verify(sd_cuda_round *rd) {
    const cudaError_t e = sd_round_mark(rd, 2);
    if (e != cudaSuccess) return sd_round_note(rd, sd_cuda_fail(&rd->base.err, e, "device round: stage event", __FILE__, __LINE__));
    const sd_cuda_verify_args va = sd_round_verify_args(rd);
    specdec_status st = sd_cuda_verify(&va, rd->ws_verify, rd->ws_verify_bytes, rd->stream, &rd->base.err);
    if (st != SPECDEC_OK) return sd_round_note(rd, st);
    int32_t *dtok = rd->gamma > 0 && !rd->det ? sd_cuda_runner_device_tokens(rd->d) : NULL;
    sd_round_finish_kernel<<<1, 1, 0, rd->stream>>>(rd->state, rd->rb, rd->gamma, sd_cuda_runner_device_tokens(rd->t),
                                                    dtok, rd->draft_two);
    const cudaError_t le = cudaGetLastError();
    return le == cudaSuccess ? SPECDEC_OK
                             : sd_round_note(rd, sd_cuda_fail(&rd->base.err, le, "sd_round_finish_kernel", __FILE__, __LINE__));
}

/* One logged primitive, enqueued (and logged unless replaying the log). */
static specdec_status sd_round_enq(sd_cuda_round *rd, int kind, int32_t step) {
    switch (kind) {
    case SD_OP_DRAFT_FORWARD: return sd_round_enq_draft_forward(rd, step);
    case SD_OP_DRAFT_SAMPLE: return sd_round_enq_draft_sample(rd, step);
    case SD_OP_VERIFY_PASS: return sd_round_enq_verify_pass(rd);
    default: return sd_round_enq_verify(rd);
    }
}

static specdec_status sd_round_logged(sd_cuda_round *rd, int kind, int32_t step) {
    if (rd->n_log >= SD_ROUND_LOG)
        return sd_round_note(rd, sd_fail(&rd->base.err, SPECDEC_ERR_INTERNAL, "device round: %d stages", (int)rd->n_log));
    rd->log[rd->n_log].kind = kind;
    rd->log[rd->n_log++].step = step;
    return sd_round_enq(rd, kind, step);
}

/* ------------------------------------------------------------------------- */
/* the executor's ops                                                         */
/* ------------------------------------------------------------------------- */
static int cr_model(const sd_round_slot *x) { return x->dr && !x->det; }

/* Trees, sequences whose verify pass captures hidden states (x->aux: an EAGLE-3 head,
 * whose draft steps run on the host), sequences that report log-probabilities (their
 * raw target rows are read back to the host, docs/LOGPROBS.md) and sequences with logits
 * processors (applied on the host, core/sd_logits_proc.h) go to the fallback executor. */
static int cr_accepts(sd_exec *ex, const sd_round_slot *x) {
    sd_cuda_round *rd = (sd_cuda_round *)ex;
    if (x->tree || x->aux || x->s->logprobs || x->s->proc || x->t != rd->t) return 0;
    if (cr_model(x)) return x->d == rd->d && rd->d && x->lag >= 1 && x->lag <= (rd->draft_two ? 2 : 1);
    return 1;
}

static void cr_invalidate(sd_exec *ex, const sd_round_seq *s) {
    (void)s;
    ((sd_cuda_round *)ex)->started = 0;
}

static int32_t cr_pack(sd_exec *ex, sd_round_slot **xs, int32_t n) {
    (void)ex;
    (void)n;
    xs[0]->j = 0;
    return 1;
}

/* The device state for slot x: L, seed, sequence id, the pending tokens of both
 * runners; the verify mode and sampling parameters (new ones drop the graphs). */
static specdec_status cr_sync(sd_cuda_round *rd, const sd_round_slot *x) {
    const sd_round_seq *s = x->s;
    const sd_sampling_params p = s->mode == SPECDEC_VERIFY_GREEDY ? sd_rule_greedy_params() : s->sp;
    if (rd->mode != s->mode || memcmp(&rd->sp, &p, sizeof p) != 0) sd_round_drop_graphs(rd);
    rd->mode = s->mode;
    rd->sp = p;
    const int need_dtok = cr_model(x) && rd->dtok_lag != x->lag;
    if (rd->started && rd->L == s->length && rd->cur_seed == s->seed && rd->cur_sid == s->sequence_id && !need_dtok)
        return SPECDEC_OK;
    sd_round_pinned *h = rd->h;
    const int32_t L = s->length;
    for (int i = 0; i < SD_ROUND_STATE; i++) h->state[i] = (int64_t)L + (i == 0 ? 0 : i - 1);
    h->seed = s->seed;
    h->seq_id = s->sequence_id;
    h->ttok = s->tokens[L - 1];
    for (int32_t i = 0; i < x->lag && i < 2; i++) h->dtok[i] = s->tokens[L - x->lag + i];
    cudaStream_t st = rd->stream;
    specdec_status jst = sd_round_join(rd, 0, &rd->base.err); /* after the runners' prefill / host rounds */
    if (jst != SPECDEC_OK) return sd_round_note(rd, jst);
    cudaError_t e = cudaMemcpyAsync(rd->state, h->state, sizeof h->state, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess) e = cudaMemcpyAsync(rd->seed, &h->seed, 2 * sizeof(uint64_t), cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(sd_cuda_runner_device_tokens(rd->t), &h->ttok, sizeof(int32_t), cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess && cr_model(x))
        e = cudaMemcpyAsync(sd_cuda_runner_device_tokens(rd->d), h->dtok, (size_t)x->lag * sizeof(int32_t),
                            cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess && (jst = sd_round_join(rd, 1, &rd->base.err)) != SPECDEC_OK) return sd_round_note(rd, jst);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st); /* h is reused */
    if (e != cudaSuccess)
        return sd_round_note(rd, sd_cuda_fail(&rd->base.err, e, "device round: upload of the sequence state", __FILE__, __LINE__));
    rd->L = L;
    rd->cur_seed = s->seed;
    rd->cur_sid = s->sequence_id;
    rd->dtok_lag = cr_model(x) ? x->lag : 0;
    rd->started = 1;
    return SPECDEC_OK;
}

/* Replay the wave's graph, or start enqueueing it (capturing when graphs are on). */
static specdec_status cr_wave_begin(sd_exec *ex, sd_round_slot *const *xs, int32_t k, int *replayed) {
    sd_cuda_round *rd = (sd_cuda_round *)ex;
    sd_round_slot *x = xs[0];
    (void)k;
    if (rd->lost) return sd_fail(&ex->err, SPECDEC_ERR_DEVICE_LOST, "device round: the device was lost earlier");
    if ((int64_t)x->s->length + x->depth > rd->n_ctx)
        return sd_fail(&ex->err, SPECDEC_ERR_CONTEXT_FULL, "device round: length %d + gamma %d exceeds n_ctx %d",
                       (int)x->s->length, (int)x->depth, (int)rd->n_ctx);
    SD_CUDA_TRY(&ex->err, cudaSetDevice(rd->device));
    specdec_status st = cr_sync(rd, x);
    if (st != SPECDEC_OK) return st;
    rd->x = x;
    rd->gamma = x->depth;
    rd->det = x->depth > 0 && x->det;
    rd->lag = cr_model(x) ? x->lag : 0;
    rd->n_log = 0;
    for (int32_t i = 0; rd->det && i < rd->gamma; i++) rd->h->prop[i] = x->vtok[1 + i];
    rd->slot = &rd->graph[rd->det][rd->gamma][rd->lag];
    rd->replayed = rd->use_graphs && *rd->slot;
    rd->marks = !rd->use_graphs || rd->graph_events;
    rd->t0 = sd_round_now();
    if ((st = sd_round_join(rd, 0, &ex->err)) != SPECDEC_OK) return sd_round_note(rd, st); /* after the runners' work */
    cudaError_t e = cudaEventRecord(rd->ev[0], rd->stream);
    if (e == cudaSuccess && rd->replayed) e = cudaGraphLaunch(*rd->slot, rd->stream);
    else if (e == cudaSuccess && rd->use_graphs) e = cudaStreamBeginCapture(rd->stream, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) return sd_round_note(rd, sd_cuda_fail(&ex->err, e, "device round: start", __FILE__, __LINE__));
    rd->capturing = rd->use_graphs && !rd->replayed;
    *replayed = rd->replayed;
    return SPECDEC_OK;
}

static specdec_status cr_draft_forward(sd_exec *ex, sd_round_slot *const *xs, int32_t n, int32_t step) {
    (void)xs;
    (void)n;
    return sd_round_logged((sd_cuda_round *)ex, SD_OP_DRAFT_FORWARD, step);
}
static specdec_status cr_draft_sample(sd_exec *ex, sd_round_slot *const *xs, int32_t n, int32_t step) {
    (void)xs;
    (void)n;
    return sd_round_logged((sd_cuda_round *)ex, SD_OP_DRAFT_SAMPLE, step);
}
static specdec_status cr_verify_pass(sd_exec *ex, sd_round_slot *const *xs, int32_t k) {
    (void)xs;
    (void)k;
    return sd_round_logged((sd_cuda_round *)ex, SD_OP_VERIFY_PASS, 0);
}
static specdec_status cr_verify(sd_exec *ex, sd_round_slot *const *xs, int32_t k) {
    (void)xs;
    (void)k;
    return sd_round_logged((sd_cuda_round *)ex, SD_OP_VERIFY, 0);
}

/* End the capture: instantiate into the slot and launch. A refused capture with stage
 * events is captured again from the log without them. */
static specdec_status cr_end_capture(sd_cuda_round *rd) {
    for (;;) {
        cudaGraph_t g = NULL;
        cudaError_t e = cudaStreamEndCapture(rd->stream, &g);
        rd->capturing = 0;
        if (e == cudaSuccess) e = cudaGraphInstantiate(rd->slot, g, 0);
        if (g) (void)cudaGraphDestroy(g);
        if (e == cudaSuccess) {
            rd->n_graphs++;
            e = cudaGraphLaunch(*rd->slot, rd->stream);
            if (e == cudaSuccess) return SPECDEC_OK;
        }
        *rd->slot = NULL;
        (void)cudaGetLastError();
        if (!rd->graph_events)
            return sd_round_note(rd, sd_cuda_fail(&rd->base.err, e, "device round: graph capture", __FILE__, __LINE__));
        rd->graph_events = 0; /* external event nodes refused: capture without them */
        rd->marks = 0;
        e = cudaStreamBeginCapture(rd->stream, cudaStreamCaptureModeRelaxed);
        if (e != cudaSuccess)
            return sd_round_note(rd, sd_cuda_fail(&rd->base.err, e, "device round: graph capture", __FILE__, __LINE__));
        rd->capturing = 1;
        for (int32_t i = 0; i < rd->n_log; i++) {
            const specdec_status st = sd_round_enq(rd, rd->log[i].kind, rd->log[i].step);
            if (st != SPECDEC_OK) return st;
        }
    }
}

/* The stage times of the round just read back (events ev[0..3]). */
static void cr_timing(sd_cuda_round *rd, double t_wall) {
    sd_cuda_round_timing *tm = &rd->last;
    memset(tm, 0, sizeof *tm);
    tm->t_wall = t_wall;
    tm->replayed = rd->replayed;
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, rd->ev[0], rd->ev[3]) == cudaSuccess) tm->t_gpu = 1e-3 * ms;
    if (rd->marks) {
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

/* The round's results: the tokens checked, the state advanced, the stage times (the
 * wall time in the device stages' proportions; all target time without stage events). */
static specdec_status cr_results(sd_cuda_round *rd, double t_wall) {
    sd_round_slot *x = rd->x;
    sd_round_seq *s = x->s;
    const int32_t *rb = rd->h->rb, n = rb[0];
    if (n < 0 || n > rd->gamma)
        return sd_round_note(rd, sd_fail(&rd->base.err, SPECDEC_ERR_INTERNAL, "device round: accepted count %d outside [0, %d]",
                                         (int)n, (int)rd->gamma));
    for (int32_t i = 0; i <= n; i++) {
        if (rb[1 + i] < 0 || rb[1 + i] >= rd->V)
            return sd_round_note(rd, sd_fail(&rd->base.err, SPECDEC_ERR_INTERNAL, "device round: token %d at %d outside [0, %d)",
                                             (int)rb[1 + i], (int)i, (int)rd->V));
        s->out[i] = rb[1 + i];
    }
    s->n_accepted = n;
    if (s->trace && !rd->det)
        for (int32_t i = 0; i < rd->gamma; i++) x->vtok[1 + i] = rd->h->drafted[i];
    rd->L = s->length + n + 1;
    rd->dtok_lag = rd->gamma > 0 && !rd->det ? (n == rd->gamma && rd->draft_two ? 2 : 1) : 0;
    cr_timing(rd, t_wall);
    const sd_cuda_round_timing *tm = &rd->last;
    s->t.draft = 0;
    s->t.target = tm->t_wall;
    s->t.verify = 0;
    if (tm->stages && tm->t_gpu > 0) {
        s->t.draft = tm->t_wall * tm->t_draft / tm->t_gpu;
        s->t.verify = tm->t_wall * tm->t_verify / tm->t_gpu;
        s->t.target = tm->t_wall - s->t.draft - s->t.verify;
    }
    return SPECDEC_OK;
}

/* Launch a fresh capture, then ONE readback of (n, tokens) (and the drafted tokens for
 * a trace), ONE synchronisation, the results. */
static specdec_status cr_wave_end(sd_exec *ex, sd_round_slot *const *xs, int32_t k, int *timed) {
    sd_cuda_round *rd = (sd_cuda_round *)ex;
    (void)xs;
    (void)k;
    specdec_status st = rd->capturing ? cr_end_capture(rd) : SPECDEC_OK;
    if (st != SPECDEC_OK) return st;
    cudaStream_t s = rd->stream;
    cudaError_t e = cudaMemcpyAsync(rd->h->rb, rd->rb, (size_t)(rd->gamma + 2) * sizeof(int32_t), cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess && rd->x->s->trace && rd->gamma > 0 && !rd->det)
        e = cudaMemcpyAsync(rd->h->drafted, sd_cuda_runner_device_tokens(rd->t) + 1, (size_t)rd->gamma * sizeof(int32_t),
                            cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaEventRecord(rd->ev[3], s);
    if (e == cudaSuccess) e = cudaEventRecord(rd->done, s);
    if (e != cudaSuccess)
        return sd_round_note(rd, sd_cuda_fail(&ex->err, e, "device round: readback of the accepted tokens", __FILE__, __LINE__));
    if ((st = sd_round_join(rd, 1, &ex->err)) != SPECDEC_OK) return sd_round_note(rd, st); /* the runners' later work after it */
    if ((e = cudaEventSynchronize(rd->done)) != cudaSuccess)
        return sd_round_note(rd, sd_cuda_fail(&ex->err, e, "device round: readback of the accepted tokens", __FILE__, __LINE__));
    st = cr_results(rd, sd_round_now() - rd->t0);
    *timed = st == SPECDEC_OK;
    return st;
}

static void cr_note_kv(sd_exec *ex, sd_runner *r, int32_t len) {
    (void)ex;
    sd_cuda_runner_note_kv(r, len);
}

static void cr_destroy(sd_exec *ex) { sd_cuda_round_free((sd_cuda_round *)ex); }

static const sd_exec_ops sd_cuda_exec_ops = {
    "cuda",         cr_accepts,     NULL,          cr_invalidate,  cr_pack,   cr_wave_begin,
    cr_draft_forward, cr_draft_sample, NULL,        NULL,           cr_verify_pass, cr_verify,
    cr_wave_end,    cr_note_kv,     cr_destroy};

/* ------------------------------------------------------------------------- */
/* create                                                                     */
/* ------------------------------------------------------------------------- */
static size_t sd_round_al(size_t n) { return (n + 255) / 256 * 256; }

/* The runners a device executor can drive: standalone CUDA runners (identity block
 * tables: the forwards address rows through them in CHAIN mode) on one device, of one
 * vocabulary within the GPU sampler's range. */
static specdec_status sd_round_check_runners(sd_runner *target, sd_runner *draft, sd_errbuf *eb) {
    if (!target || target->backend != SPECDEC_BACKEND_CUDA || (draft && draft->backend != SPECDEC_BACKEND_CUDA))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "device round: needs CUDA runners (target %p)", (void *)target);
    if (!sd_cuda_runner_standalone(target) || (draft && !sd_cuda_runner_standalone(draft)))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED,
                       "device round: the %s runner belongs to a runner group (paged KV shared by sequences); "
                       "groups are driven by the batched executor",
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

/* The arena's layout (offsets), the stream, events, arena and pinned staging. */
static specdec_status sd_cuda_round_device(sd_cuda_round *rd, sd_errbuf *eb) {
    const int32_t V = rd->V;
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
    SD_CUDA_TRY(eb, cudaSetDevice(rd->device));
    SD_CUDA_TRY(eb, cudaStreamCreateWithFlags(&rd->stream, cudaStreamNonBlocking));
    SD_CUDA_TRY(eb, cudaEventCreateWithFlags(&rd->done, cudaEventDisableTiming));
    for (int i = 0; i < 4; i++) SD_CUDA_TRY(eb, cudaEventCreate(&rd->ev[i]));
    SD_CUDA_TRY(eb, cudaEventCreateWithFlags(&rd->order, cudaEventDisableTiming));
    SD_CUDA_TRY(eb, cudaMalloc(&rd->arena, total));
    SD_CUDA_TRY(eb, cudaMallocHost((void **)&rd->h, sizeof(sd_round_pinned)));
    char *b = (char *)rd->arena;
    rd->state = (int64_t *)b;
    rd->rb = (int32_t *)(b + off_rb);
    rd->seed = (uint64_t *)(b + off_seed);
    rd->seq_id = rd->seed + 1;
    rd->q = (float *)(b + off_q);
    rd->ws_draft = b + off_wd;
    rd->ws_verify = b + off_wv;
    memset(rd->h, 0, sizeof *rd->h);
    specdec_status st = sd_cuda_verify_ws_init(rd->ws_verify, rd->ws_verify_bytes, rd->stream, eb);
    if (st == SPECDEC_OK) st = sd_cuda_sample_ws_init(rd->ws_draft, rd->ws_draft_bytes, rd->stream, eb);
    if (st != SPECDEC_OK) return st;
    SD_CUDA_TRY(eb, cudaStreamSynchronize(rd->stream));
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_exec_create(sd_runner *target, sd_runner *draft, int use_graphs, sd_exec **out,
                                              sd_errbuf *eb) {
    if (out) *out = NULL;
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "device round: out is NULL");
    specdec_status st = sd_round_check_runners(target, draft, eb);
    if (st != SPECDEC_OK) return st;
    sd_cuda_round *rd = (sd_cuda_round *)sd_calloc(1, sizeof *rd);
    if (!rd) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "device round: out of host memory");
    rd->base.ops = &sd_cuda_exec_ops;
    rd->t = target;
    rd->d = draft;
    rd->use_graphs = use_graphs;
    rd->device = sd_cuda_runner_device(target);
    rd->V = target->n_vocab;
    rd->n_ctx = draft && draft->n_ctx < target->n_ctx ? draft->n_ctx : target->n_ctx;
    rd->draft_two = draft && draft->max_batch >= 2;
    rd->graph_events = 1;
    rd->L = -1;
    st = sd_cuda_round_device(rd, eb);
    if (st != SPECDEC_OK) {
        (void)cudaGetLastError();
        sd_cuda_round_free(rd);
        return st;
    }
    *out = &rd->base;
    return SPECDEC_OK;
}

extern "C" void sd_cuda_exec_use_graphs(sd_exec *ex, int use_graphs) {
    if (ex) ((sd_cuda_round *)ex)->use_graphs = use_graphs;
}

extern "C" void sd_cuda_exec_last_timing(const sd_exec *ex, sd_cuda_round_timing *tm) {
    if (tm) *tm = ex ? ((const sd_cuda_round *)ex)->last : sd_cuda_round_timing{};
}

extern "C" int32_t sd_cuda_exec_graph_count(const sd_exec *ex) { return ex ? ((const sd_cuda_round *)ex)->n_graphs : 0; }

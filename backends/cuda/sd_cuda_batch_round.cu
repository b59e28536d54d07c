/* sd_cuda_batch_round.cu — the device-resident BATCHED executor ("cuda-batch",
 * core/sd_round.h) for sequences whose runners belong to CUDA runner groups (the
 * scheduler's): the logits stay on the device, the GPU sampler and verifier
 * (kernels/cuda/sd_cuda_sample.h) decide, the host reads back token ids only.
 *
 * Reference semantics: the host executor (backends/cpu/sd_host_round.c). Tokens,
 * accepted counts, statuses and cache lengths are its own: the group's forwards are batch
 * invariant (a row's bits do not depend on the batch), the GPU sampler and verifier are
 * bitwise the CPU reference's (kernels/sd_sample_math.h, core/sd_sample_rules.h), and the
 * uniforms are addressed by (seed, sequence, position). Trees are not accepted (the
 * round's fallback, a host executor on the same runners, runs them); chains (γ = 0 plain
 * steps included, model or deterministic drafts) run here, in the protocol's WAVES
 * (core/sd_round.c) of consecutive sequences, sorted by (mode, sampling parameters, γ,
 * kind of q) so that every launch group is a contiguous slot range, whose rows fit the
 * executor's buffers:
 *   wave_begin     upload the wave's seeds, sequence ids and positions (one copy from
 *                  pinned memory);
 *   draft_forward  step 0 = every model-drafted sequence's catch-up (its lag pending
 *                  tokens as one segment, only the last row's logits), step i = x_i;
 *                  each step ONE group forward with the logits left in the executor's
 *                  device rows (sd_cuda_group_forward_device);
 *   draft_sample   one draft-sampling launch per launch group (the q rows stay on the
 *                  device for the verifier; the kernel advances each sequence's draft
 *                  position), then ONE small readback of the sampled ids (the next
 *                  forward's host token ids);
 *   verify_pass    ONE group forward over every verify segment [pending, x_1 .. x_γ],
 *                  every row's logits to the device;
 *   verify         the drafts of every slot to the device (a deterministic proposal is
 *                  planned on the host), one sd_cuda_verify per launch group (the
 *                  deterministic flag for n-gram drafts: no q rows), then ONE readback of
 *                  every (n_accepted, tokens) (pinned memory, one synchronisation).
 * Rollback and timings are the protocol's. Simple first: no CUDA graphs, sampled ids go
 * through the host (docs/BATCHING.md).
 *
 * Device memory, one arena allocated in create (run() allocates nothing):
 *   tlog [n_rows][V]   target logits: a wave's verify rows packed in slot order;
 *   q    [n_rows][V]   the processed draft rows each x_i was drawn from, γ per slot packed;
 *   dlog [n_slots][V]  one draft logits row per slot (the row the next draft is drawn from);
 *   the draft-sampling and verifier workspaces (zeroed once: launches of every shape
 *   share them, kernels/cuda/sd_cuda_mb.h "workspace layouts");
 *   the small arrays (seeds, sequence ids, draft and verify positions, draft ids, the
 *   readback), twinned in pinned host memory at the same offsets.
 * n_rows = max_seqs * (SPECDEC_MAX_DRAFT + 1), capped so the arena stays near
 * SD_CBR_ARENA_BYTES (about 20 V bytes per row with the verifier's workspace), never
 * below one full chain; n_slots = min(max_seqs, n_rows). */
#include <cuda_runtime.h>
#include <string.h>
#include <time.h>

#include "sd_cuda_common.cuh"
#include "sd_cuda_backend.h"
#include "sd_cuda_runner.h"
#include "sd_cuda_sample.h"

extern "C" {
#include "sd_alloc.h"
}

#define SD_CBR_R (SPECDEC_MAX_DRAFT + 1) /* verify rows of a full chain; tokens out per sequence */
#define SD_CBR_D SPECDEC_MAX_DRAFT       /* draft ids per sequence */
#define SD_CBR_ARENA_BYTES ((size_t)1 << 30)
#define SD_CBR_ROW_COST 20 /* bytes per target row per vocabulary entry: logits, q, p, w */

/* One chain sequence's place in a wave (indexed by its slot's j). */
typedef struct sd_cbr_slot {
    int32_t gamma;
    int det;                /* a deterministic proposal (no q rows, the verifier's flag) */
    specdec_verify_mode mode;
    sd_sampling_params sp;  /* what the device applies: GREEDY takes the neutral params */
    int32_t toff, qoff;     /* its first row in tlog / q */
} sd_cbr_slot;

typedef struct sd_cbr {
    sd_exec base;             /* must be first */
    sd_runner_group *gt, *gd; /* borrowed; gd may be NULL */
    int device;
    int32_t V, max_seqs;
    int32_t n_rows, n_slots;  /* a wave's buffers (see the top) */
    cudaStream_t stream;
    cudaEvent_t order;        /* stream ordering with the groups' streams (cbr_forward) */
    void *arena;
    float *tlog, *q, *dlog;
    void *ws_draft, *ws_verify;
    size_t ws_draft_bytes, ws_verify_bytes;
    char *d_small, *h_small;  /* device / pinned twins */
    size_t off_sid, off_pos, off_pos0, off_dtok, off_rbn, off_rbt, small_bytes;
    sd_cbr_slot *slots;       /* [max_seqs] the wave's, by slot index j */
    sd_round_slot **wave;     /* the wave being run (the protocol's slots) */
    int32_t k;
    sd_runner_seg *segs;      /* [max_seqs] one forward's segments */
} sd_cbr;

/* The small arrays (the same layout on both sides). */
static uint64_t *cbr_seed(char *b) { return (uint64_t *)b; }
static uint64_t *cbr_sid(const sd_cbr *rd, char *b) { return (uint64_t *)(b + rd->off_sid); }
static int64_t *cbr_pos(const sd_cbr *rd, char *b) { return (int64_t *)(b + rd->off_pos); }
static int64_t *cbr_pos0(const sd_cbr *rd, char *b) { return (int64_t *)(b + rd->off_pos0); }
static int32_t *cbr_dtok(const sd_cbr *rd, char *b) { return (int32_t *)(b + rd->off_dtok); }
static int32_t *cbr_rbn(const sd_cbr *rd, char *b) { return (int32_t *)(b + rd->off_rbn); }
static int32_t *cbr_rbt(const sd_cbr *rd, char *b) { return (int32_t *)(b + rd->off_rbt); }

/* A failure of the executor: DEVICE_LOST is sticky. */
static specdec_status cbr_note(sd_cbr *rd, specdec_status st) {
    if (st == SPECDEC_ERR_DEVICE_LOST) rd->base.device_lost = 1;
    return st;
}

static specdec_status cbr_cuda_fail(sd_cbr *rd, cudaError_t e, const char *what, int line) {
    specdec_status st = sd_cuda_fail(&rd->base.err, e, what, __FILE__, line);
    (void)cudaStreamSynchronize(rd->stream); /* nothing in flight uses the buffers any more */
    (void)cudaGetLastError();
    return cbr_note(rd, st);
}

#define CBR_TRY(rd, stmt)                                                     \
    do {                                                                      \
        cudaError_t cbr_e_ = (stmt);                                          \
        if (cbr_e_ != cudaSuccess) return cbr_cuda_fail((rd), cbr_e_, #stmt, __LINE__); \
    } while (0)

/* ------------------------------------------------------------------------- */
/* slots: check, order, waves                                                 */
/* ------------------------------------------------------------------------- */
static int cbr_model(const sd_round_slot *x) { return x->dr && !x->det; }

/* Trees, captured-hidden-state sequences (x->aux: an EAGLE-3 head's), sequences that
 * report log-probabilities (their raw rows are read on the host, docs/LOGPROBS.md) and
 * sequences with logits processors (applied on the host, core/sd_logits_proc.h) go to the
 * fallback. */
static int cbr_accepts(sd_exec *ex, const sd_round_slot *x) {
    (void)ex;
    return !x->tree && !x->aux && !x->s->logprobs && !x->s->proc;
}

/* The runners must be of the executor's groups (a model-drafted chain: its draft of the
 * draft group). */
static specdec_status cbr_check(sd_exec *ex, const sd_round_slot *x) {
    sd_cbr *rd = (sd_cbr *)ex;
    const sd_round_seq *s = x->s;
    if (x->t->group != rd->gt || (x->d && x->d->group != rd->gd) || (cbr_model(x) && !rd->gd))
        return sd_fail(&ex->err, SPECDEC_ERR_INVALID_ARGUMENT,
                       "cuda-batch round: a sequence whose runners are not of the round's CUDA groups "
                       "(target %s, draft %s, depth %d)",
                       x->t->group == rd->gt ? "ok" : "foreign", !x->d ? "none" : x->d->group == rd->gd ? "ok" : "foreign",
                       (int)x->depth);
    if (s->mode != SPECDEC_VERIFY_REJECTION && s->mode != SPECDEC_VERIFY_GREEDY && s->mode != SPECDEC_VERIFY_MATCH)
        return sd_fail(&ex->err, SPECDEC_ERR_INVALID_ARGUMENT, "cuda-batch round: verify mode %d", (int)s->mode);
    return SPECDEC_OK;
}

static sd_cbr_slot cbr_key(const sd_round_slot *x) {
    sd_cbr_slot k;
    memset(&k, 0, sizeof k);
    k.gamma = x->depth;
    k.det = x->depth > 0 && x->det;
    k.mode = x->s->mode;
    /* GREEDY: the argmax of the raw logits, as the host executor (which skips processing) */
    k.sp = x->s->mode == SPECDEC_VERIFY_GREEDY ? sd_rule_greedy_params() : x->s->sp;
    return k;
}

/* Launch-group order: mode, params, γ descending, dense q before deterministic. */
static int cbr_cmp(const sd_cbr_slot *a, const sd_cbr_slot *b) {
    if (a->mode != b->mode) return a->mode < b->mode ? -1 : 1;
    const int c = memcmp(&a->sp, &b->sp, sizeof a->sp); /* four 4-byte fields: no padding */
    if (c != 0) return c;
    if (a->gamma != b->gamma) return b->gamma - a->gamma;
    return a->det - b->det;
}

/* Stable insertion sort of the slots (at most SD_ROUND_MAX_SEQS). */
static void cbr_sort(sd_round_slot **xs, int32_t n) {
    for (int32_t i = 1; i < n; i++) {
        sd_round_slot *x = xs[i];
        const sd_cbr_slot kx = cbr_key(x);
        int32_t j = i;
        while (j > 0) {
            const sd_cbr_slot kj = cbr_key(xs[j - 1]);
            if (cbr_cmp(&kj, &kx) <= 0) break;
            xs[j] = xs[j - 1];
            j--;
        }
        xs[j] = x;
    }
}

/* Sorted, the slots from xs[0] on that fit one wave: their count; their rows laid out. */
static int32_t cbr_pack(sd_exec *ex, sd_round_slot **xs, int32_t n) {
    sd_cbr *rd = (sd_cbr *)ex;
    cbr_sort(xs, n);
    int32_t k = 0, rows = 0, qrows = 0;
    while (k < n && k < rd->n_slots && rows + xs[k]->depth + 1 <= rd->n_rows) {
        sd_cbr_slot *c = &rd->slots[k];
        *c = cbr_key(xs[k]);
        c->toff = rows;
        c->qoff = qrows;
        xs[k]->j = k;
        rows += c->gamma + 1;
        qrows += c->det ? 0 : c->gamma;
        k++;
    }
    return k;
}

/* The end of the launch group starting at wave slot a (slots a .. end - 1 share mode,
 * params, γ and the kind of q). */
static int32_t cbr_group_end(const sd_cbr *rd, int32_t a, int32_t k) {
    int32_t b = a + 1;
    while (b < k && cbr_cmp(&rd->slots[a], &rd->slots[b]) == 0) b++;
    return b;
}

/* ------------------------------------------------------------------------- */
/* the wave's stages                                                          */
/* ------------------------------------------------------------------------- */
/* Seeds, sequence ids, draft positions (advanced by the draft kernel) and verify
 * positions, all L at the start. */
static specdec_status cbr_wave_begin(sd_exec *ex, sd_round_slot *const *xs, int32_t k, int *replayed) {
    sd_cbr *rd = (sd_cbr *)ex;
    char *h = rd->h_small;
    *replayed = 0;
    if (ex->device_lost)
        return sd_fail(&ex->err, SPECDEC_ERR_DEVICE_LOST, "cuda-batch round: the device was lost earlier");
    CBR_TRY(rd, cudaSetDevice(rd->device));
    rd->wave = (sd_round_slot **)xs;
    rd->k = k;
    for (int32_t j = 0; j < k; j++) {
        const sd_round_seq *s = xs[j]->s;
        cbr_seed(h)[j] = s->seed;
        cbr_sid(rd, h)[j] = s->sequence_id;
        cbr_pos(rd, h)[j] = s->length;
        cbr_pos0(rd, h)[j] = s->length;
    }
    /* the pinned source is rewritten only by the next wave, after this one synchronised */
    CBR_TRY(rd, cudaMemcpyAsync(rd->d_small, h, rd->off_dtok, cudaMemcpyHostToDevice, rd->stream));
    return SPECDEC_OK;
}

/* A chain segment whose wanted logits rows go to the device rows at `logits`. */
static sd_runner_seg cbr_seg(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits) {
    sd_runner_seg g;
    memset(&g, 0, sizeof g);
    g.r = r;
    g.tokens = tokens;
    g.n = n;
    g.pos = pos;
    g.logits = logits;
    return g;
}

/* One forward of the wave (segments in rd->segs, runners of group grp), the wanted rows
 * to the device. The forward runs on the group's stream and writes the executor's logits
 * rows, which the executor's stream reads and earlier read (issue 24 (c)): the two are
 * ordered by events both ways, never only by the host synchronisations around them. */
static specdec_status cbr_forward(sd_cbr *rd, sd_runner_group *grp, int32_t n, int32_t tail, const char *what) {
    if (n == 0) return SPECDEC_OK;
    sd_errbuf eb;
    sd_err_clear(&eb);
    const cudaStream_t gs = sd_cuda_group_stream(grp);
    specdec_status st = sd_cuda_stream_after(gs, rd->stream, rd->order, &eb);
    if (st == SPECDEC_OK) st = sd_cuda_group_forward_device(rd->segs, n, tail, &eb);
    if (st == SPECDEC_OK) st = sd_cuda_stream_after(rd->stream, gs, rd->order, &eb);
    if (st == SPECDEC_OK) return SPECDEC_OK;
    return cbr_note(rd, sd_fail(&rd->base.err, st, "cuda-batch round: %s forward: %s", what, eb.msg));
}

/* Draft step `step`'s forward: the catch-up (step 0) or x_step, the last row of each to
 * the slot's dlog row. */
static specdec_status cbr_draft_forward(sd_exec *ex, sd_round_slot *const *xs, int32_t n, int32_t step) {
    sd_cbr *rd = (sd_cbr *)ex;
    const size_t V = (size_t)rd->V;
    for (int32_t i = 0; i < n; i++) {
        sd_round_slot *x = xs[i];
        const int32_t L = x->s->length;
        float *row = rd->dlog + (size_t)x->j * V;
        rd->segs[i] = step == 0 ? cbr_seg(x->d, x->s->tokens + L - x->lag, x->lag, L - x->lag, row)
                                : cbr_seg(x->d, &x->vtok[step], 1, L + step - 1, row);
    }
    return cbr_forward(rd, rd->gd, n, 1, "draft");
}

/* Draft step `step`'s sampling: x_{step+1} of every slot in xs from its dlog row (q row
 * step kept), one launch per launch group, then the ids back to the host. */
static specdec_status cbr_draft_sample(sd_exec *ex, sd_round_slot *const *xs, int32_t n, int32_t step) {
    sd_cbr *rd = (sd_cbr *)ex;
    const size_t V = (size_t)rd->V;
    char *d = rd->d_small;
    for (int32_t i = 0, e; i < n; i = e) { /* consecutive wave slots of one launch group */
        const int32_t a = xs[i]->j, b = cbr_group_end(rd, a, rd->k);
        for (e = i + 1; e < n && xs[e]->j == xs[e - 1]->j + 1 && xs[e]->j < b;) e++;
        const sd_cbr_slot *c = &rd->slots[a];
        sd_cuda_sample_draft_args da;
        memset(&da, 0, sizeof da);
        da.logits = rd->dlog + (size_t)a * V;
        da.ld_logits = (int64_t)V;
        da.n_seq = e - i;
        da.n_vocab = rd->V;
        da.sp = c->sp;
        da.mode = c->mode;
        da.seed = cbr_seed(d) + a;
        da.seq_id = cbr_sid(rd, d) + a;
        da.position = cbr_pos(rd, d) + a;
        da.advance_position = 1; /* x_{step+1} is drawn at L + step */
        da.q_out = rd->q + ((size_t)c->qoff + (size_t)step) * V;
        da.ld_q = (int64_t)c->gamma * (int64_t)V;
        da.tok_out = cbr_dtok(rd, d) + (size_t)a * SD_CBR_D + step;
        da.tok_stride = SD_CBR_D;
        specdec_status st = sd_cuda_sample_draft_step(&da, rd->ws_draft, rd->ws_draft_bytes, rd->stream, &rd->base.err);
        if (st != SPECDEC_OK) return cbr_note(rd, st);
    }
    int32_t *h = cbr_dtok(rd, rd->h_small);
    CBR_TRY(rd, cudaMemcpyAsync(h, cbr_dtok(rd, d), (size_t)rd->k * SD_CBR_D * sizeof(int32_t),
                                cudaMemcpyDeviceToHost, rd->stream));
    CBR_TRY(rd, cudaStreamSynchronize(rd->stream));
    for (int32_t i = 0; i < n; i++) {
        const int32_t t = h[(size_t)xs[i]->j * SD_CBR_D + step];
        if (t < 0 || t >= rd->V)
            return sd_fail(&rd->base.err, SPECDEC_ERR_INTERNAL, "cuda-batch round: draft token %d outside [0, %d)",
                           (int)t, (int)rd->V);
        xs[i]->vtok[1 + step] = t;
    }
    return SPECDEC_OK;
}

/* ONE target forward over every slot's verify pass, all rows to tlog. */
static specdec_status cbr_verify_pass(sd_exec *ex, sd_round_slot *const *xs, int32_t k) {
    sd_cbr *rd = (sd_cbr *)ex;
    const size_t V = (size_t)rd->V;
    for (int32_t j = 0; j < k; j++) {
        sd_round_slot *x = xs[j];
        const int32_t L = x->s->length;
        if (sd_runner_kv_len(x->t) != L - 1)
            return sd_fail(&rd->base.err, SPECDEC_ERR_INTERNAL,
                           "cuda-batch round at length %d: target cache holds %d tokens", (int)L,
                           (int)sd_runner_kv_len(x->t));
        rd->segs[j] = cbr_seg(x->t, x->vtok, x->depth + 1, L - 1, rd->tlog + (size_t)rd->slots[j].toff * V);
    }
    return cbr_forward(rd, rd->gt, k, 0, "target");
}

/* One verifier launch: the launch group of wave slots a .. b - 1. */
static specdec_status cbr_verify_group(sd_cbr *rd, int32_t a, int32_t b) {
    const size_t V = (size_t)rd->V;
    char *d = rd->d_small;
    const sd_cbr_slot *c = &rd->slots[a];
    const int32_t g = c->gamma;
    sd_cuda_verify_args va;
    memset(&va, 0, sizeof va);
    va.mode = c->mode;
    va.gamma = g;
    va.n_vocab = rd->V;
    va.n_seq = b - a;
    va.sp = c->sp;
    va.logits = rd->tlog + (size_t)c->toff * V;
    va.ld_logits = (int64_t)V;
    va.logits_seq_stride = (int64_t)(g + 1) * (int64_t)V;
    va.q = g > 0 && !c->det ? rd->q + (size_t)c->qoff * V : NULL;
    va.ld_q = (int64_t)V;
    va.q_seq_stride = (int64_t)(g > 0 ? g : 1) * (int64_t)V;
    va.deterministic = c->det;
    va.draft = cbr_dtok(rd, d) + (size_t)a * SD_CBR_D;
    va.draft_stride = SD_CBR_D;
    va.seed = cbr_seed(d) + a;
    va.seq_id = cbr_sid(rd, d) + a;
    va.pos0 = cbr_pos0(rd, d) + a;
    va.out_tokens = cbr_rbt(rd, d) + (size_t)a * SD_CBR_R;
    va.out_stride = SD_CBR_R;
    va.out_n_accepted = cbr_rbn(rd, d) + a;
    /* launches of every (n_seq, γ) share the workspace: its counters sit in the
     * control header, fixed per sequence and left at zero (sd_cuda_mb.h, issue 24 (a)) */
    specdec_status st = sd_cuda_verify(&va, rd->ws_verify, rd->ws_verify_bytes, rd->stream, &rd->base.err);
    return st == SPECDEC_OK ? SPECDEC_OK : cbr_note(rd, st);
}

/* Every slot's drafts to the device (the model drafts were read back, the
 * deterministic ones were planned on the host), the verifier of every launch group,
 * then ONE readback of every (n_accepted, tokens) and each slot's results. */
static specdec_status cbr_verify(sd_exec *ex, sd_round_slot *const *xs, int32_t k) {
    sd_cbr *rd = (sd_cbr *)ex;
    char *h = rd->h_small;
    for (int32_t j = 0; j < k; j++)
        for (int32_t i = 0; i < xs[j]->depth; i++) cbr_dtok(rd, h)[(size_t)j * SD_CBR_D + i] = xs[j]->vtok[1 + i];
    CBR_TRY(rd, cudaMemcpyAsync(cbr_dtok(rd, rd->d_small), cbr_dtok(rd, h), (size_t)k * SD_CBR_D * sizeof(int32_t),
                                cudaMemcpyHostToDevice, rd->stream));
    for (int32_t a = 0, b; a < k; a = b) {
        b = cbr_group_end(rd, a, k);
        const specdec_status st = cbr_verify_group(rd, a, b);
        if (st != SPECDEC_OK) return st;
    }
    CBR_TRY(rd, cudaMemcpyAsync(h + rd->off_rbn, rd->d_small + rd->off_rbn, rd->small_bytes - rd->off_rbn,
                                cudaMemcpyDeviceToHost, rd->stream));
    CBR_TRY(rd, cudaStreamSynchronize(rd->stream));
    for (int32_t j = 0; j < k; j++) {
        sd_round_seq *s = xs[j]->s;
        const int32_t n = cbr_rbn(rd, h)[j], *tok = cbr_rbt(rd, h) + (size_t)j * SD_CBR_R;
        if (n < 0 || n > xs[j]->depth)
            return sd_fail(&rd->base.err, SPECDEC_ERR_INTERNAL, "cuda-batch round: accepted count %d outside [0, %d]",
                           (int)n, (int)xs[j]->depth);
        for (int32_t i = 0; i <= n; i++) {
            if (tok[i] < 0 || tok[i] >= rd->V)
                return sd_fail(&rd->base.err, SPECDEC_ERR_INTERNAL, "cuda-batch round: token %d at %d outside [0, %d)",
                               (int)tok[i], (int)i, (int)rd->V);
            s->out[i] = tok[i];
        }
        s->n_accepted = n;
    }
    return SPECDEC_OK;
}

static void cbr_free(sd_cbr *rd) {
    if (!rd) return;
    if (rd->stream || rd->arena || rd->h_small || rd->order) {
        (void)cudaSetDevice(rd->device);
        if (rd->stream) (void)cudaStreamSynchronize(rd->stream);
        if (rd->arena) (void)cudaFree(rd->arena);
        if (rd->h_small) (void)cudaFreeHost(rd->h_small);
        if (rd->stream) (void)cudaStreamDestroy(rd->stream);
        if (rd->order) (void)cudaEventDestroy(rd->order);
        (void)cudaGetLastError();
    }
    sd_free(rd->slots);
    sd_free(rd->segs);
    sd_free(rd);
}

static void cbr_destroy(sd_exec *base) { cbr_free((sd_cbr *)base); }

static const sd_exec_ops sd_cbr_ops = {"cuda-batch",      cbr_accepts,      cbr_check, NULL, cbr_pack,
                                       cbr_wave_begin,    cbr_draft_forward, cbr_draft_sample, NULL, NULL,
                                       cbr_verify_pass,   cbr_verify,       NULL,      NULL, cbr_destroy};

/* ------------------------------------------------------------------------- */
/* create                                                                     */
/* ------------------------------------------------------------------------- */
static size_t cbr_al(size_t n) { return (n + 255) / 256 * 256; }

/* Rows and slots of a wave, and the workspaces they need (see the top). */
static void cbr_size(sd_cbr *rd) {
    const int64_t V = rd->V;
    const int64_t cap = (int64_t)(SD_CBR_ARENA_BYTES / ((size_t)SD_CBR_ROW_COST * (size_t)V));
    int64_t rows = (int64_t)rd->max_seqs * SD_CBR_R;
    if (rows > cap) rows = cap;
    if (rows < SD_CBR_R) rows = SD_CBR_R;
    rd->n_rows = (int32_t)rows;
    rd->n_slots = rd->max_seqs < rd->n_rows ? rd->max_seqs : rd->n_rows;
    rd->ws_draft_bytes = sd_cuda_sample_ws_bytes(rd->n_slots, rd->V);
    rd->ws_verify_bytes = 0;
    for (int32_t g = 0; g <= SPECDEC_MAX_DRAFT; g++) { /* a launch group of γ = g: at most this many sequences */
        int32_t n = rd->n_rows / (g + 1);
        if (n > rd->n_slots) n = rd->n_slots;
        const size_t b = n > 0 ? sd_cuda_verify_ws_bytes(n, g, rd->V) : 0;
        if (b > rd->ws_verify_bytes) rd->ws_verify_bytes = b;
    }
    const size_t W = (size_t)rd->n_slots;
    rd->off_sid = W * sizeof(uint64_t);
    rd->off_pos = rd->off_sid + W * sizeof(uint64_t);
    rd->off_pos0 = rd->off_pos + W * sizeof(int64_t);
    rd->off_dtok = rd->off_pos0 + W * sizeof(int64_t);
    rd->off_rbn = rd->off_dtok + W * SD_CBR_D * sizeof(int32_t);
    rd->off_rbt = rd->off_rbn + W * sizeof(int32_t);
    rd->small_bytes = rd->off_rbt + W * SD_CBR_R * sizeof(int32_t);
}

/* The stream, the device arena, the pinned twin; the workspaces zeroed. */
static specdec_status cbr_alloc_device(sd_cbr *rd, sd_errbuf *eb) {
    const size_t V = (size_t)rd->V, rows = (size_t)rd->n_rows * V * sizeof(float);
    const size_t off_q = cbr_al(rows), off_d = off_q + cbr_al(rows);
    const size_t off_wd = off_d + cbr_al((size_t)rd->n_slots * V * sizeof(float));
    const size_t off_wv = off_wd + cbr_al(rd->ws_draft_bytes);
    const size_t off_s = off_wv + cbr_al(rd->ws_verify_bytes), total = off_s + cbr_al(rd->small_bytes);
    SD_CUDA_TRY(eb, cudaSetDevice(rd->device));
    SD_CUDA_TRY(eb, cudaStreamCreateWithFlags(&rd->stream, cudaStreamNonBlocking));
    SD_CUDA_TRY(eb, cudaEventCreateWithFlags(&rd->order, cudaEventDisableTiming));
    SD_CUDA_TRY(eb, cudaMalloc(&rd->arena, total));
    SD_CUDA_TRY(eb, cudaMallocHost((void **)&rd->h_small, rd->small_bytes));
    char *b = (char *)rd->arena;
    rd->tlog = (float *)b;
    rd->q = (float *)(b + off_q);
    rd->dlog = (float *)(b + off_d);
    rd->ws_draft = b + off_wd;
    rd->ws_verify = b + off_wv;
    rd->d_small = b + off_s;
    memset(rd->h_small, 0, rd->small_bytes);
    specdec_status st = sd_cuda_verify_ws_init(rd->ws_verify, rd->ws_verify_bytes, rd->stream, eb);
    if (st == SPECDEC_OK) st = sd_cuda_sample_ws_init(rd->ws_draft, rd->ws_draft_bytes, rd->stream, eb);
    if (st != SPECDEC_OK) return st;
    SD_CUDA_TRY(eb, cudaMemsetAsync(rd->d_small, 0, rd->small_bytes, rd->stream));
    SD_CUDA_TRY(eb, cudaStreamSynchronize(rd->stream));
    return SPECDEC_OK;
}

/* Groups the round can drive: CUDA groups on one device, one vocabulary within the GPU
 * sampler's range. */
static specdec_status cbr_check_groups(sd_runner_group *target, sd_runner_group *draft, int32_t max_seqs,
                                       sd_errbuf *eb) {
    const int dt = sd_cuda_group_device(target), dd = draft ? sd_cuda_group_device(draft) : dt;
    if (dt < 0 || dd < 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda-batch round: the %s is not a CUDA runner group",
                       dt < 0 ? "target" : "draft");
    if (dd != dt)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "cuda-batch round: target on device %d, draft on device %d", dt, dd);
    const int32_t V = target->n_vocab;
    if (draft && draft->n_vocab != V)
        return sd_fail(eb, SPECDEC_ERR_MODEL_MISMATCH, "cuda-batch round: vocabularies %d (target) and %d (draft)",
                       (int)V, (int)draft->n_vocab);
    if (V <= 0 || V > SD_CUDA_SAMPLE_MAX_VOCAB)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "cuda-batch round: vocabulary %d outside [1, %d] of the GPU sampler",
                       (int)V, SD_CUDA_SAMPLE_MAX_VOCAB);
    if (max_seqs < 1 || max_seqs > SD_ROUND_MAX_SEQS)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda-batch round: %d sequences (1..%d)", (int)max_seqs,
                       SD_ROUND_MAX_SEQS);
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_batch_exec_create(sd_runner_group *target, sd_runner_group *draft,
                                                    int32_t max_seqs, sd_exec **out, sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda-batch round: out is NULL");
    *out = NULL;
    specdec_status st = cbr_check_groups(target, draft, max_seqs, eb);
    if (st != SPECDEC_OK) return st;
    sd_cbr *rd = (sd_cbr *)sd_calloc(1, sizeof *rd);
    if (!rd) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "cuda-batch round: out of host memory");
    rd->base.ops = &sd_cbr_ops;
    rd->gt = target;
    rd->gd = draft;
    rd->device = sd_cuda_group_device(target);
    rd->V = target->n_vocab;
    rd->max_seqs = max_seqs;
    cbr_size(rd);
    rd->slots = (sd_cbr_slot *)sd_malloc((size_t)max_seqs * sizeof *rd->slots);
    rd->segs = (sd_runner_seg *)sd_malloc((size_t)max_seqs * sizeof *rd->segs);
    if (!rd->slots || !rd->segs)
        st = sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "cuda-batch round: out of host memory (%d slots)", (int)max_seqs);
    if (st == SPECDEC_OK) st = cbr_alloc_device(rd, eb);
    if (st != SPECDEC_OK) {
        (void)cudaGetLastError();
        cbr_free(rd);
        return st;
    }
    *out = &rd->base;
    return SPECDEC_OK;
}

/* fuzz_scheduler.c — structure-aware fuzz target for the request scheduler
 * (specdec_scheduler_*, runtime/sd_scheduler.c, docs/BATCHING.md) on tiny random
 * checkpoints (fuzz_tiny_models.h: a target of V = 48 and a draft of the same
 * vocabulary, CPU backend).
 *
 * Each input is decoded (sd_fuzz_in) into scheduler params (max_active, max_queued, KV
 * block size and a pool from "plenty" down to a few blocks, sometimes out of range),
 * engine params (n_ctx, draft or not) and up to 12 operations: submit (fuzzed prompt,
 * ids sometimes outside the vocabulary, verify mode greedy / match / rejection,
 * n_predict, γ, a tree shape or node budget, a callback that stops after k tokens),
 * cancel (an issued id, or one never issued), wait with timeout 0, get_metrics. At the
 * end every request is waited for.
 *
 * Checked: create and submit return the status include/specdec.h documents for their
 * arguments (computed here: bad values INVALID_ARGUMENT, a request whose KV reservation
 * exceeds the pool CONTEXT_FULL, a valid one OK or QUEUE_FULL); cancel and wait answer
 * OK / TIMEOUT / NOT_FOUND as the id's state allows; the metrics never show more KV
 * blocks used than the pool, more active than max_active, more queued than max_queued;
 * every outcome is OK or CANCELLED; an OK request's tokens equal specdec_generate alone
 * on an engine with the same n_ctx (all three modes: γ is fixed), cut at the callback's
 * stop; a CANCELLED one's are a prefix of that; at the end the counts add up and no
 * block is held. No leak (libFuzzer's -detect_leaks). The scheduler's loop thread makes
 * runs timing-dependent; every check holds for any timing. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_tiny_models.h"
#include "specdec.h"

#define FV 48
#define FMAX_OPS 12
#define FMAX_REQ 12
#define FMAX_PROMPT 12
#define FMAX_PREDICT 20

static specdec_model *g_target, *g_draft;

int sd_fuzz_init(void) {
    (void)ck_find;
    (void)ck_remove;
    char root[256];
    if (fz_make_root(root, sizeof root, "fuzz_scheduler")) return 1;
    ck_spec t, d;
    fz_pair_specs(FV, 21, 22, &t, &d);
    int r = fz_load_model(root, "target", &t, &g_target, NULL, NULL) || fz_load_model(root, "draft", &d, &g_draft, NULL, NULL);
    rmdir(root);
    return r ? 1 : 0;
}

/* One request as submitted, and what came back. */
typedef struct fz_req {
    int32_t prompt[FMAX_PROMPT], n_prompt;
    specdec_generate_params gp;
    int32_t stop_after, n_calls; /* the callback: stop at call stop_after (0: never); calls seen */
    specdec_request_id id;
    int collected;
    int32_t out[FMAX_PREDICT], n_out;
    specdec_status outcome;
    specdec_stats stats;
} fz_req;

typedef struct fz_state {
    specdec_scheduler *s;
    specdec_scheduler_params sp;
    int32_t n_ctx, pool;
    int has_draft;
    fz_req req[FMAX_REQ];
    int n_req;
    int64_t accepted;
} fz_state;

static int fz_on_token(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)piece;
    (void)len;
    fz_req *r = ud;
    if (tok < 0) return 0;
    r->n_calls++;
    return r->stop_after && r->n_calls == r->stop_after;
}

/* Scheduler and engine params; 0 when creation must fail (checked here). */
static int fz_create(sd_fuzz_in *in, fz_state *z, specdec_engine_params *ep) {
    const uint8_t a = sd_fuzz_u8(in), q = sd_fuzz_u8(in), b = sd_fuzz_u8(in), p = sd_fuzz_u8(in), c = sd_fuzz_u8(in);
    z->sp = specdec_scheduler_default_params();
    z->sp.max_active = a == 255 ? 0 : a == 254 ? 257 : 1 + a % 6;
    z->sp.max_queued = q == 255 ? 0 : 1 + q % 8;
    z->sp.kv_block_tokens = b == 255 ? 0 : 1 + b % 16;
    z->sp.kv_pool_blocks = p == 255 ? -1 : p < 100 ? 0 : p % 48;
    *ep = specdec_engine_default_params();
    ep->backend = SPECDEC_BACKEND_CPU;
    ep->n_ctx = 16 + c % 49;
    z->has_draft = (c >> 7) == 0;
    const int valid = a < 254 && q != 255 && b != 255 && p != 255;
    specdec_status st = specdec_scheduler_create(g_target, z->has_draft ? g_draft : NULL, ep, &z->sp, &z->s);
    if (!valid) {
        sd_fuzz_require(st == SPECDEC_ERR_INVALID_ARGUMENT && z->s == NULL && specdec_last_error()[0]);
        return 0;
    }
    if (st != SPECDEC_OK) fprintf(stderr, "scheduler_create: %s\n", specdec_last_error());
    sd_fuzz_require(st == SPECDEC_OK && z->s != NULL);
    z->n_ctx = specdec_scheduler_n_ctx(z->s);
    sd_fuzz_require(z->n_ctx == ep->n_ctx);
    const int32_t bt = z->sp.kv_block_tokens, per = (z->n_ctx + bt - 1) / bt;
    z->pool = z->sp.kv_pool_blocks > 0 ? z->sp.kv_pool_blocks : z->sp.max_active * per;
    return 1;
}

/* A fuzzed request into r; returns the status submit must give (OK meaning OK or
 * QUEUE_FULL). */
static specdec_status fz_make_request(sd_fuzz_in *in, const fz_state *z, fz_req *r) {
    memset(r, 0, sizeof *r);
    specdec_status want = SPECDEC_OK;
    r->n_prompt = 1 + sd_fuzz_u8(in) % FMAX_PROMPT;
    for (int32_t i = 0; i < r->n_prompt; i++) {
        const uint8_t t = sd_fuzz_u8(in);
        r->prompt[i] = t < 250 ? t % FV : t == 250 ? FV : -1;
        if (t >= 250) want = SPECDEC_ERR_INVALID_ARGUMENT;
    }
    const uint8_t m = sd_fuzz_u8(in), n = sd_fuzz_u8(in), g = sd_fuzz_u8(in);
    r->gp = specdec_generate_default_params();
    r->gp.verify = m % 3 == 0 ? SPECDEC_VERIFY_GREEDY : m % 3 == 1 ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_REJECTION;
    r->gp.temperature = m % 3 == 0 ? 0.0f : 0.8f;
    r->gp.seed = (uint64_t)(m >> 2);
    r->gp.n_predict = n == 255 ? 0 : 1 + n % FMAX_PREDICT;
    r->gp.n_draft = g % 6;
    if (n == 255) want = SPECDEC_ERR_INVALID_ARGUMENT;
    int tree = 0;
    if ((g >> 3) % 8 == 1) {
        const int32_t shape[2] = {2, 1};
        specdec_generate_params_set_tree(&r->gp, shape, 2);
        tree = 1;
    } else if ((g >> 3) % 8 == 2) {
        r->gp.draft_nodes = 1 + (g >> 6) * 3;
        tree = 1;
    }
    if (tree && !z->has_draft) want = SPECDEC_ERR_INVALID_ARGUMENT;
    const uint8_t k = sd_fuzz_u8(in);
    r->stop_after = k < 200 ? 0 : 1 + k % 8;
    r->gp.callback = fz_on_token;
    r->gp.user_data = r;
    if (want != SPECDEC_OK) return want;
    if (r->n_prompt >= z->n_ctx) return SPECDEC_ERR_CONTEXT_FULL;
    int64_t rows = (int64_t)r->n_prompt + r->gp.n_predict + (tree ? SPECDEC_MAX_TREE_NODES : 0);
    if (rows > z->n_ctx) rows = z->n_ctx;
    const int64_t blocks = (rows + z->sp.kv_block_tokens - 1) / z->sp.kv_block_tokens;
    return blocks > z->pool ? SPECDEC_ERR_CONTEXT_FULL : SPECDEC_OK;
}

static void fz_check_metrics(const fz_state *z) {
    specdec_scheduler_metrics m;
    sd_fuzz_require(specdec_scheduler_get_metrics(z->s, &m) == SPECDEC_OK);
    sd_fuzz_require(m.kv_blocks_total == z->pool && m.kv_blocks_used >= 0 && m.kv_blocks_used <= m.kv_blocks_total);
    sd_fuzz_require(m.draft_kv_blocks_used >= 0 && m.draft_kv_blocks_used <= m.draft_kv_blocks_total);
    sd_fuzz_require(m.active >= 0 && m.active <= z->sp.max_active && m.queued >= 0 && m.queued <= z->sp.max_queued);
    sd_fuzz_require(m.failed == 0 && m.finished + m.cancelled <= m.submitted && m.submitted == z->accepted);
}

static void fz_op_submit(sd_fuzz_in *in, fz_state *z) {
    if (z->n_req >= FMAX_REQ) return;
    fz_req *r = &z->req[z->n_req];
    const specdec_status want = fz_make_request(in, z, r);
    specdec_request_id id = 0;
    specdec_status st = specdec_scheduler_submit(z->s, r->prompt, r->n_prompt, &r->gp, &id);
    if (want == SPECDEC_OK) sd_fuzz_require(st == SPECDEC_OK || st == SPECDEC_ERR_QUEUE_FULL);
    else sd_fuzz_require(st == want);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(id == 0 && specdec_scheduler_last_error(z->s)[0]);
        return;
    }
    sd_fuzz_require(id > 0);
    r->id = id;
    z->n_req++;
    z->accepted++;
}

/* Collect r with a wait of timeout_ms; 1 once collected. */
static int fz_collect(fz_state *z, fz_req *r, int32_t timeout_ms) {
    specdec_status st = specdec_scheduler_wait(z->s, r->id, timeout_ms, r->out, FMAX_PREDICT, &r->n_out, &r->stats,
                                               &r->outcome);
    if (r->collected) {
        sd_fuzz_require(st == SPECDEC_ERR_NOT_FOUND);
        return 1;
    }
    sd_fuzz_require(st == SPECDEC_OK || (timeout_ms >= 0 && st == SPECDEC_ERR_TIMEOUT));
    if (st == SPECDEC_OK) r->collected = 1;
    return r->collected;
}

static void fz_op(sd_fuzz_in *in, fz_state *z) {
    const uint8_t op = sd_fuzz_u8(in), which = sd_fuzz_u8(in);
    fz_req *r = z->n_req ? &z->req[which % z->n_req] : NULL;
    switch (op % 5) {
    case 0:
    case 1: fz_op_submit(in, z); break;
    case 2:
        if (!r || which >= 240) {
            sd_fuzz_require(specdec_scheduler_cancel(z->s, (specdec_request_id)1000 + which) == SPECDEC_ERR_NOT_FOUND);
        } else {
            specdec_status st = specdec_scheduler_cancel(z->s, r->id);
            sd_fuzz_require(r->collected ? st == SPECDEC_ERR_NOT_FOUND : st == SPECDEC_OK);
        }
        break;
    case 3:
        if (r) (void)fz_collect(z, r, 0);
        break;
    default: fz_check_metrics(z);
    }
}

/* What specdec_generate alone gives for r (no callback: the full output). */
static int32_t fz_reference(const fz_state *z, specdec_engine *ref, const fz_req *r, int32_t *out) {
    specdec_generate_params gp = r->gp;
    gp.callback = NULL;
    gp.user_data = NULL;
    int32_t n = 0;
    specdec_stats st;
    specdec_status rc = specdec_generate(ref, r->prompt, r->n_prompt, &gp, out, FMAX_PREDICT, &n, &st);
    (void)z;
    if (rc != SPECDEC_OK) fprintf(stderr, "reference generate: %s\n", specdec_engine_last_error(ref));
    sd_fuzz_require(rc == SPECDEC_OK);
    return n;
}

static void fz_check_results(fz_state *z, const specdec_engine_params *ep) {
    specdec_engine *ref = NULL;
    sd_fuzz_require(specdec_engine_create(g_target, z->has_draft ? g_draft : NULL, ep, &ref) == SPECDEC_OK);
    for (int i = 0; i < z->n_req; i++) {
        fz_req *r = &z->req[i];
        sd_fuzz_require(r->outcome == SPECDEC_OK || r->outcome == SPECDEC_ERR_CANCELLED);
        int32_t want[FMAX_PREDICT];
        const int32_t n = fz_reference(z, ref, r, want);
        sd_fuzz_require(r->n_out <= n && memcmp(r->out, want, (size_t)r->n_out * sizeof(int32_t)) == 0);
        sd_fuzz_require(r->n_calls == r->n_out);
        if (r->outcome != SPECDEC_OK) continue;
        const int cut = r->stop_after && r->stop_after <= n;
        sd_fuzz_require(r->n_out == (cut ? r->stop_after : n) && r->stats.n_generated == r->n_out);
        if (cut && r->stop_after < n) sd_fuzz_require(r->stats.stop_reason == SPECDEC_STOP_CALLBACK);
    }
    specdec_engine_free(ref);
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_fuzz_in in = {data, size};
    fz_state z;
    memset(&z, 0, sizeof z);
    specdec_engine_params ep;
    if (!fz_create(&in, &z, &ep)) return 1; /* refused, as it had to be */
    const int n_ops = sd_fuzz_u8(&in) % (FMAX_OPS + 1);
    for (int i = 0; i < n_ops; i++) fz_op(&in, &z);
    for (int i = 0; i < z.n_req; i++)
        if (!z.req[i].collected) sd_fuzz_require(fz_collect(&z, &z.req[i], -1));
    fz_check_metrics(&z);
    specdec_scheduler_metrics m;
    sd_fuzz_require(specdec_scheduler_get_metrics(z.s, &m) == SPECDEC_OK);
    sd_fuzz_require(m.queued == 0 && m.active == 0 && m.finished + m.cancelled == m.submitted);
    sd_fuzz_require(m.kv_blocks_used == 0 && m.draft_kv_blocks_used == 0);
    specdec_scheduler_free(z.s);
    fz_check_results(&z, &ep);
    return 0;
}

SD_FUZZ_DEFINE_ENTRY_WITH_INIT

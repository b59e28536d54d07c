/* fuzz_scheduler.c — structure-aware fuzz target for the request scheduler
 * (specdec_scheduler_*, runtime/sd_scheduler.c, docs/BATCHING.md) on tiny random
 * checkpoints (fuzz_tiny_models.h: a target of V = 48 and a draft of the same
 * vocabulary, CPU backend) and a tiny random EAGLE-3 head for that target (written here at
 * start-up with tests/checkpoint/ckpt_writer.h, flat layout, capture ids hs[0..2]).
 *
 * Each input is decoded (sd_fuzz_in) into scheduler params (max_active, max_queued, KV
 * block size and a pool from "plenty" down to a few blocks, sometimes out of range; the
 * prefix cache AUTO, ON or OFF: with blocks of 1..16 tokens and short fuzzed prompts,
 * requests share cached blocks often; chunked prefill of 1..7 rows or max_batch; KV admission
 * AUTO, RESERVE or OPTIMISTIC: with small pools OPTIMISTIC preempts and resumes requests, whose
 * outputs are still checked against specdec_generate's; scheduling FCFS (a priority other than 0
 * refused) or PRIORITY with priorities -1, 0, 1),
 * engine params (n_ctx; the scheduler's draft: none, the draft model or the EAGLE-3 head)
 * and up to 12 operations: submit (fuzzed prompt, ids sometimes outside the vocabulary,
 * verify mode greedy / match / rejection, n_predict, γ, a tree shape or node budget,
 * draft_method AUTO / MODEL / NGRAM / EAGLE3 / NONE or an unknown value, log-probabilities
 * with top_logprobs 0..20, valid or not, a token callback that stops after k tokens or
 * none, a logprob callback that stops after j records or none, top_k / top_p / min_p /
 * temperature), cancel (an issued id, or
 * one never issued), wait with timeout 0, get_metrics. At the end every request is waited
 * for.
 *
 * Checked: create and submit return the status include/specdec.h documents for their
 * arguments (computed here: bad values INVALID_ARGUMENT — including the documented
 * log-probability rules, MODEL with a head, EAGLE3 without one, a tree without a drafter —
 * a request whose KV reservation exceeds the pool CONTEXT_FULL, a valid one OK or
 * QUEUE_FULL); cancel and wait answer OK / TIMEOUT / NOT_FOUND as the id's state allows;
 * the metrics never show more KV blocks used than the pool, more active than max_active,
 * more queued than max_queued; every outcome is OK or CANCELLED; an OK request's tokens
 * equal specdec_generate alone on an engine with the same models and n_ctx (all three
 * modes), cut at the first callback's stop, and in greedy / match mode plain decoding's
 * too; a CANCELLED one's are a prefix of that. Log-probabilities (docs/LOGPROBS.md), on
 * the scheduler threads, per request: one record per collected token, in order, each
 * just before `callback`'s call for the same token, none with logprobs 0; position =
 * n_prompt + index, a finite logprob <= 0, n_top as asked, the top list most likely first
 * (ties: lower id first), the rank consistent with the list; and every record equal,
 * bitwise, to specdec_generate's (and, greedy / match, to plain decoding's); two requests
 * at the same context (same prompt and tokens so far) have the same records whatever their
 * drafter, verify mode and sampling values (top_k, top_p, min_p, temperature: fuzzed; the
 * values are the raw rows'), top lists one a prefix of the other. Prompt log-probabilities
 * (prompt_logprobs, from byte j): records at positions 1..n_prompt-1, in order, before any
 * other call, each as documented with prompt_top_logprobs entries and the prompt's token;
 * all of them for an OK request, a prefix for a CANCELLED one (a cancel between records);
 * bitwise equal to specdec_generate's and to plain decoding's (one prefill, any drafter:
 * the CPU rows are batch invariant). At the end
 * the counts add up and no block is held. No leak (libFuzzer's -detect_leaks). The
 * scheduler's loop thread makes runs timing-dependent; every check holds for any timing
 * (n-gram requests use a FIXED or OFF cost in rejection mode, MEASURED only where the
 * output does not depend on the proposals). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
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
#define FTOP SPECDEC_MAX_TOP_LOGPROBS

enum { FZ_NO_DRAFT, FZ_MODEL, FZ_HEAD };
static specdec_model *g_target, *g_draft, *g_head;

/* A 1-layer EAGLE-3 head (flat layout) for the tiny target: hidden 16 (the target's, so
 * it reads the target's embedding), 4 heads of 4 (GQA 2), intermediate 32, V = 48 without
 * a vocabulary map, capture ids hs[0], hs[1], hs[2] (the 2-layer target is too short for
 * the default rule). Random F32 weights: its drafts are poor, which the oracle does not
 * mind (greedy / match output is plain decoding's whatever the head proposes). */
static int fz_write_head(const char *dir) {
    enum { H = 16, F = 32, Q = 16, KV = 8 };
    static const struct {
        const char *name;
        int ndim;
        int64_t r, c;
    } t[] = {{"fc.weight", 2, H, 3 * H},
             {"midlayer.input_layernorm.weight", 1, H, 0},
             {"midlayer.hidden_norm.weight", 1, H, 0},
             {"midlayer.self_attn.q_proj.weight", 2, Q, 2 * H},
             {"midlayer.self_attn.k_proj.weight", 2, KV, 2 * H},
             {"midlayer.self_attn.v_proj.weight", 2, KV, 2 * H},
             {"midlayer.self_attn.o_proj.weight", 2, H, Q},
             {"midlayer.post_attention_layernorm.weight", 1, H, 0},
             {"midlayer.mlp.gate_proj.weight", 2, F, H},
             {"midlayer.mlp.up_proj.weight", 2, F, H},
             {"midlayer.mlp.down_proj.weight", 2, H, F},
             {"norm.weight", 1, H, 0},
             {"lm_head.weight", 2, FV, H}};
    ck_model m;
    memset(&m, 0, sizeof m);
    uint64_t rng = 23;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) ck_add(&m, t[i].name, "F32", t[i].ndim, t[i].r, t[i].c, &rng);
    snprintf(m.config, sizeof m.config,
             "{\"architectures\": [\"LlamaForCausalLMEagle3\"], \"model_type\": \"llama\", \"hidden_size\": %d, "
             "\"intermediate_size\": %d, \"num_hidden_layers\": 1, \"num_attention_heads\": 4, "
             "\"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-05, \"vocab_size\": %d, "
             "\"max_position_embeddings\": 2048, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, "
             "\"bos_token_id\": 1, \"eos_token_id\": 2, \"rope_theta\": 10000.0, \"target_hidden_size\": %d, "
             "\"eagle_aux_hidden_state_layer_ids\": [0, 1, 2]}\n",
             (int)H, (int)F, FV, (int)H);
    const ck_spec none = {0};
    const int r = ck_write_dir(dir, &m, &none);
    ck_free(&m);
    return r;
}

static int fz_load_head(const char *root) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/head", root);
    int r = mkdir(dir, 0700);
    if (!r) r = fz_write_head(dir);
    if (!r && specdec_model_load(dir, NULL, &g_head) != SPECDEC_OK) r = -1;
    specdec_model_info info;
    if (!r && (specdec_model_get_info(g_head, &info) != SPECDEC_OK || info.model_kind != SPECDEC_DRAFT_EAGLE3)) r = -1;
    if (r) fprintf(stderr, "fuzz set-up of %s failed: %s\n", dir, specdec_last_error());
    fz_rm_dir(dir); /* the weights stay mapped */
    return r;
}

int sd_fuzz_init(void) {
    (void)ck_find;
    (void)ck_remove;
    char root[256];
    if (fz_make_root(root, sizeof root, "fuzz_scheduler")) return 1;
    ck_spec t, d;
    fz_pair_specs(FV, 21, 22, &t, &d);
    int r = fz_load_model(root, "target", &t, &g_target, NULL, NULL) ||
            fz_load_model(root, "draft", &d, &g_draft, NULL, NULL) || fz_load_head(root);
    rmdir(root);
    return r ? 1 : 0;
}

/* One log-probability record, copied out of the borrowed one. */
typedef struct fz_lp {
    int32_t token, rank, n_top;
    float logprob;
    int64_t position;
    int32_t top_tokens[FTOP];
    float top_logprobs[FTOP];
} fz_lp;

/* What a logprob callback collects (per request, or per reference call): only the thread
 * generating that request writes it; the harness reads it after the request is collected. */
typedef struct fz_lp_log {
    int32_t n_prompt, top_want, stop_after; /* stop_after: return 1 at record stop_after (0: never) */
    const int32_t *n_calls;                 /* the token callback's count (NULL: no token callback) */
    fz_lp rec[FMAX_PREDICT];
    int32_t n;
    int bad; /* a record out of order, beyond the budget, or not as documented */
    /* prompt_logprobs: the prompt's records (positions 1..n_prompt-1), before any other */
    const int32_t *prompt;
    int32_t prompt_top_want, n_p;
    fz_lp prec[FMAX_PROMPT];
} fz_lp_log;

/* One request as submitted, and what came back. */
typedef struct fz_req {
    int32_t prompt[FMAX_PROMPT], n_prompt;
    specdec_generate_params gp;
    int32_t stop_after, n_calls; /* the callback: stop at call stop_after (0: never); calls seen */
    int order_bad;               /* a token call without its record just before it */
    fz_lp_log lp;
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
    int draft_kind; /* FZ_NO_DRAFT, FZ_MODEL, FZ_HEAD */
    fz_req req[FMAX_REQ];
    int n_req;
    int64_t accepted;
} fz_state;

static specdec_model *fz_draft_model(int kind) { return kind == FZ_MODEL ? g_draft : kind == FZ_HEAD ? g_head : NULL; }

static int fz_on_token(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)piece;
    (void)len;
    fz_req *r = ud;
    if (tok < 0) return 0;
    if (r->gp.logprobs == 1 && r->gp.logprob_callback && r->lp.n != r->n_calls + 1) r->order_bad = 1;
    r->n_calls++;
    return r->stop_after && r->n_calls == r->stop_after;
}

/* The documented record at this request's next position (fuzz_common.h). */
static int fz_lp_ok(const fz_lp_log *c, const specdec_token_logprobs *lp) {
    return sd_fuzz_lp_record_ok(lp, FV, c->top_want, (int64_t)c->n_prompt + c->n);
}

static void fz_lp_copy(fz_lp *o, const specdec_token_logprobs *lp) {
    memset(o, 0, sizeof *o);
    o->token = lp->token;
    o->rank = lp->rank;
    o->n_top = lp->n_top;
    o->logprob = lp->logprob;
    o->position = lp->position;
    for (int32_t k = 0; k < lp->n_top && k < FTOP; k++) {
        o->top_tokens[k] = lp->top_tokens[k];
        o->top_logprobs[k] = lp->top_logprobs[k];
    }
}

/* A prompt token's record: positions 1, 2, ... before any generated token's or token call. */
static int fz_on_prompt_logprob(fz_lp_log *c, const specdec_token_logprobs *lp) {
    if (c->n || (c->n_calls && *c->n_calls) || c->n_p >= FMAX_PROMPT - 1 || lp->position != (int64_t)c->n_p + 1 ||
        !c->prompt || lp->token != c->prompt[lp->position] ||
        !sd_fuzz_lp_record_ok(lp, FV, c->prompt_top_want, lp->position))
        c->bad = 1;
    if (c->n_p < FMAX_PROMPT - 1) fz_lp_copy(&c->prec[c->n_p++], lp);
    return 0;
}

static int fz_on_logprob(void *ud, const specdec_token_logprobs *lp) {
    fz_lp_log *c = ud;
    if (lp->position < c->n_prompt) return fz_on_prompt_logprob(c, lp);
    if (c->n >= FMAX_PREDICT || (c->n_calls && *c->n_calls != c->n)) {
        c->bad = 1;
        return 1;
    }
    if (!fz_lp_ok(c, lp)) c->bad = 1;
    fz_lp_copy(&c->rec[c->n++], lp);
    return c->stop_after && c->n == c->stop_after;
}

/* Scheduler and engine params; 0 when creation must fail (checked here). */
static int fz_create(sd_fuzz_in *in, fz_state *z, specdec_engine_params *ep) {
    const uint8_t a = sd_fuzz_u8(in), q = sd_fuzz_u8(in), b = sd_fuzz_u8(in), p = sd_fuzz_u8(in), c = sd_fuzz_u8(in);
    z->sp = specdec_scheduler_default_params();
    z->sp.max_active = a == 255 ? 0 : a == 254 ? 257 : 1 + a % 6;
    z->sp.max_queued = q == 255 ? 0 : 1 + q % 8;
    z->sp.kv_block_tokens = b == 255 ? 0 : 1 + b % 16;
    z->sp.kv_pool_blocks = p == 255 ? -1 : p < 100 ? 0 : p % 48;
    z->sp.prefill_chunk = (q >> 3) & 7; /* 0: max_batch; 1..7 rows between rounds */
    z->sp.kv_admission = (a >> 6) % 3; /* AUTO (= OPTIMISTIC here), RESERVE, OPTIMISTIC: small pools preempt */
    z->sp.scheduling_policy = (p >> 6) & 1; /* FCFS, PRIORITY (requests' priorities -1, 0, 1) */
    z->sp.prefix_cache = (b >> 5) == 6 ? SPECDEC_PREFIX_CACHE_OFF : (b >> 5) == 5 ? SPECDEC_PREFIX_CACHE_ON
                                                                                    : SPECDEC_PREFIX_CACHE_AUTO;
    *ep = specdec_engine_default_params();
    ep->backend = SPECDEC_BACKEND_CPU;
    ep->n_ctx = 16 + c % 49;
    z->draft_kind = (c >> 7) ? FZ_NO_DRAFT : (q >> 6) & 1 ? FZ_HEAD : FZ_MODEL;
    const int valid = a < 254 && q != 255 && b != 255 && p != 255;
    specdec_status st = specdec_scheduler_create(g_target, fz_draft_model(z->draft_kind), ep, &z->sp, &z->s);
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

/* draft_method from byte d: sets it (and the n-gram knobs) in r->gp; returns whether the
 * request has a drafter (a tree needs one), or -1 for a method the scheduler must refuse. */
static int fz_decode_method(uint8_t d, const fz_state *z, fz_req *r) {
    static const specdec_draft_method methods[8] = {SPECDEC_DRAFT_AUTO,  SPECDEC_DRAFT_AUTO,   SPECDEC_DRAFT_MODEL,
                                                    SPECDEC_DRAFT_NGRAM, SPECDEC_DRAFT_EAGLE3, SPECDEC_DRAFT_NONE,
                                                    SPECDEC_DRAFT_NGRAM, (specdec_draft_method)7};
    const specdec_draft_method m = methods[d % 8];
    r->gp.draft_method = m;
    if (m == SPECDEC_DRAFT_NGRAM) {
        r->gp.ngram_min = 1 + (d >> 3) % 2;
        r->gp.ngram_max = r->gp.ngram_min + (d >> 4) % 3;
        const int cost = d >> 6; /* MEASURED makes rejection output timing-dependent: OFF there */
        r->gp.ngram_cost = cost == 0 ? SPECDEC_NGRAM_COST_OFF
                           : cost == 1 ? SPECDEC_NGRAM_COST_FIXED
                           : cost == 2 || r->gp.verify == SPECDEC_VERIFY_REJECTION ? SPECDEC_NGRAM_COST_OFF
                                                                                   : SPECDEC_NGRAM_COST_MEASURED;
        r->gp.ngram_token_cost = cost == 1 ? 0.25f : 0.0f;
    }
    switch (m) {
    case SPECDEC_DRAFT_AUTO: return z->draft_kind != FZ_NO_DRAFT;
    case SPECDEC_DRAFT_MODEL: return z->draft_kind == FZ_MODEL ? 1 : -1;
    case SPECDEC_DRAFT_NGRAM: return 1;
    case SPECDEC_DRAFT_EAGLE3: return z->draft_kind == FZ_HEAD ? 1 : -1;
    case SPECDEC_DRAFT_NONE: return 0;
    default: return -1;
    }
}

/* Sampling from byte s (byte 0: the defaults, temperature 0.8 outside greedy mode): the
 * records are the raw rows' (docs/LOGPROBS.md), so these must change none of them. */
static void fz_decode_sampling(uint8_t s, fz_req *r) {
    static const int32_t top_k[4] = {40, 0, 3, 1};
    static const float top_p[4] = {0.95f, 1.0f, 0.5f, 0.2f}, min_p[4] = {0.05f, 0.0f, 0.3f, 0.0f},
                       temp[4] = {0.8f, 1.5f, 0.3f, 0.8f};
    r->gp.top_k = top_k[s % 4];
    r->gp.top_p = top_p[(s >> 2) % 4];
    r->gp.min_p = min_p[(s >> 4) % 4];
    if (r->gp.verify != SPECDEC_VERIFY_GREEDY) r->gp.temperature = temp[s >> 6];
}

/* The callbacks from bytes k (token callback), l (logprobs, top_logprobs) and j (the
 * logprob callback); returns 0 when the log-probability fields must be refused. */
static int fz_decode_callbacks(uint8_t k, uint8_t l, uint8_t j, fz_req *r) {
    r->stop_after = k < 190 ? 0 : k < 200 ? -1 : 1 + k % 8;
    r->gp.callback = r->stop_after < 0 ? NULL : fz_on_token;
    r->gp.user_data = r->gp.callback ? r : NULL;
    if (r->stop_after < 0) r->stop_after = 0;
    const int32_t t = (l >> 1) % 24;
    r->gp.logprobs = l == 254 ? 2 : l & 1;
    r->gp.top_logprobs = t <= FTOP ? t : t == 21 ? 21 : t == 22 ? -1 : 0;
    if (!(l & 1) && l < 128) r->gp.top_logprobs = 0; /* mostly valid: top only with logprobs */
    r->lp.n_prompt = r->n_prompt;
    r->lp.top_want = r->gp.top_logprobs;
    r->lp.stop_after = j < 200 ? 0 : 1 + j % 8;
    r->lp.n_calls = r->gp.callback ? &r->n_calls : NULL;
    r->gp.prompt_logprobs = j < 200 && j % 4 == 3; /* prompt logprobs: top (j >> 2) % 6 */
    r->gp.prompt_top_logprobs = r->gp.prompt_logprobs ? (j >> 2) % 6 : 0;
    r->lp.prompt = r->prompt;
    r->lp.prompt_top_want = r->gp.prompt_top_logprobs;
    r->gp.logprob_callback = j == 255 ? NULL : fz_on_logprob;
    r->gp.logprob_user_data = &r->lp;
    const int32_t lpv = r->gp.logprobs, top = r->gp.top_logprobs;
    return (lpv == 0 || lpv == 1) && top >= 0 && top <= FTOP && !(top > 0 && lpv == 0) &&
           !(lpv == 1 && !r->gp.logprob_callback);
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
    /* PRIORITY: -1, 0 or 1; FCFS: 0, or 7 (refused) once in a while */
    r->gp.priority = z->sp.scheduling_policy == SPECDEC_SCHEDULING_PRIORITY ? (int32_t)((m >> 2) % 3) - 1 : m == 254 ? 7 : 0;
    if (r->gp.priority && z->sp.scheduling_policy != SPECDEC_SCHEDULING_PRIORITY) want = SPECDEC_ERR_INVALID_ARGUMENT;
    r->gp.n_draft = g % 6;
    int tree = 0;
    if ((g >> 3) % 8 == 1) {
        const int32_t shape[2] = {2, 1};
        specdec_generate_params_set_tree(&r->gp, shape, 2);
        tree = 1;
    } else if ((g >> 3) % 8 == 2) {
        r->gp.draft_nodes = 1 + (g >> 6) * 3;
        tree = 1;
    }
    const uint8_t k = sd_fuzz_u8(in), d = sd_fuzz_u8(in), l = sd_fuzz_u8(in), j = sd_fuzz_u8(in), smp = sd_fuzz_u8(in);
    fz_decode_sampling(smp, r);
    const int drafter = fz_decode_method(d, z, r);
    if (drafter < 0 || (tree && !drafter)) want = SPECDEC_ERR_INVALID_ARGUMENT;
    if (!fz_decode_callbacks(k, l, j, r)) want = SPECDEC_ERR_INVALID_ARGUMENT;
    if (n == 255 && !r->gp.prompt_logprobs) want = SPECDEC_ERR_INVALID_ARGUMENT; /* n_predict 0: scoring only */
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
    if (z->draft_kind == FZ_HEAD) sd_fuzz_require(m.draft_kv_blocks_total == 0); /* the head's cache is in no pool */
    sd_fuzz_require(m.active >= 0 && m.active <= z->sp.max_active && m.queued >= 0 && m.queued <= z->sp.max_queued);
    sd_fuzz_require(m.failed == 0 && m.finished + m.cancelled <= m.submitted && m.submitted == z->accepted);
    sd_fuzz_require(m.prefix_cache_hits >= 0 && m.prefix_cache_hits <= m.prefix_cache_queries &&
                    m.kv_blocks_cached >= 0 && m.kv_blocks_cached + m.kv_blocks_used <= m.kv_blocks_total);
    if (z->sp.prefix_cache == SPECDEC_PREFIX_CACHE_OFF)
        sd_fuzz_require(m.prefix_cache_queries == 0 && m.kv_blocks_cached == 0);
}

static void fz_op_submit(sd_fuzz_in *in, fz_state *z) {
    if (z->n_req >= FMAX_REQ) return;
    fz_req *r = &z->req[z->n_req];
    const specdec_status want = fz_make_request(in, z, r);
    specdec_request_id id = 0;
    specdec_status st = specdec_scheduler_submit(z->s, r->prompt, r->n_prompt, &r->gp, &id);
    if (want == SPECDEC_OK) {
        if (st != SPECDEC_OK && st != SPECDEC_ERR_QUEUE_FULL)
            fprintf(stderr, "submit: %d %s\n", (int)st, specdec_scheduler_last_error(z->s));
        sd_fuzz_require(st == SPECDEC_OK || st == SPECDEC_ERR_QUEUE_FULL);
    } else {
        if (st != want) fprintf(stderr, "submit: %d (want %d) %s\n", (int)st, (int)want, specdec_scheduler_last_error(z->s));
        sd_fuzz_require(st == want);
    }
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

/* What specdec_generate alone gives for r (no token callback, a logprob callback that
 * never stops: the full output and its records in *lp); plain: with draft_method NONE
 * (plain decoding). */
static int32_t fz_reference(specdec_engine *ref, const fz_req *r, int plain, int32_t *out, fz_lp_log *lp,
                            specdec_stats *st) {
    specdec_generate_params gp = r->gp;
    gp.callback = NULL;
    gp.user_data = NULL;
    memset(lp, 0, sizeof *lp);
    lp->n_prompt = r->n_prompt;
    lp->top_want = gp.top_logprobs;
    lp->prompt = r->prompt;
    lp->prompt_top_want = gp.prompt_top_logprobs;
    gp.logprob_callback = fz_on_logprob;
    gp.logprob_user_data = lp;
    if (plain) {
        gp.draft_method = SPECDEC_DRAFT_NONE;
        (void)specdec_generate_params_set_tree(&gp, NULL, 0);
        gp.draft_nodes = 0;
    }
    int32_t n = 0;
    specdec_status rc = specdec_generate(ref, r->prompt, r->n_prompt, &gp, out, FMAX_PREDICT, &n, st);
    if (rc != SPECDEC_OK) fprintf(stderr, "reference generate: %s\n", specdec_engine_last_error(ref));
    sd_fuzz_require(rc == SPECDEC_OK && !lp->bad);
    sd_fuzz_require(lp->n == (gp.logprobs ? n : 0));
    sd_fuzz_require(lp->n_p == (gp.prompt_logprobs ? r->n_prompt - 1 : 0));
    return n;
}

static int fz_lp_equal(const fz_lp *a, const fz_lp *b) {
    return a->token == b->token && a->rank == b->rank && a->n_top == b->n_top && a->position == b->position &&
           !memcmp(&a->logprob, &b->logprob, sizeof a->logprob) &&
           !memcmp(a->top_tokens, b->top_tokens, (size_t)a->n_top * sizeof(int32_t)) &&
           !memcmp(a->top_logprobs, b->top_logprobs, (size_t)a->n_top * sizeof(float));
}

/* r against the reference (want[0..n), records ref): tokens, records, the stop. */
static void fz_check_request(const fz_state *z, const fz_req *r, const int32_t *want, int32_t n, const fz_lp_log *ref,
                             const specdec_stats *ref_stats) {
    sd_fuzz_require(r->outcome == SPECDEC_OK || r->outcome == SPECDEC_ERR_CANCELLED);
    sd_fuzz_require(r->n_out <= n && memcmp(r->out, want, (size_t)r->n_out * sizeof(int32_t)) == 0);
    sd_fuzz_require(r->gp.callback ? r->n_calls == r->n_out : r->n_calls == 0);
    sd_fuzz_require(!r->order_bad && !r->lp.bad);
    const int lp_on = r->gp.logprobs == 1;
    sd_fuzz_require(r->lp.n == (lp_on ? r->n_out : 0));
    for (int32_t i = 0; i < r->lp.n; i++) {
        sd_fuzz_require(r->lp.rec[i].token == r->out[i]);
        sd_fuzz_require(fz_lp_equal(&r->lp.rec[i], &ref->rec[i]));
    }
    /* prompt records: all of them unless cancelled (then a prefix), the reference's bitwise */
    sd_fuzz_require(r->lp.n_p <= ref->n_p && (r->outcome != SPECDEC_OK || r->lp.n_p == ref->n_p));
    sd_fuzz_require(r->lp.n_p == 0 || r->gp.prompt_logprobs);
    for (int32_t i = 0; i < r->lp.n_p; i++) sd_fuzz_require(fz_lp_equal(&r->lp.prec[i], &ref->prec[i]));
    if (r->outcome != SPECDEC_OK) return;
    int32_t stop = r->gp.callback ? r->stop_after : 0;
    if (lp_on && r->lp.stop_after && (!stop || r->lp.stop_after < stop)) stop = r->lp.stop_after;
    const int cut = stop && stop <= n;
    sd_fuzz_require(r->n_out == (cut ? stop : n) && r->stats.n_generated == r->n_out);
    if (cut && stop < n) sd_fuzz_require(r->stats.stop_reason == SPECDEC_STOP_CALLBACK);
    sd_fuzz_require(r->stats.draft_method == ref_stats->draft_method);
    /* cached prompt rows: whole blocks of the first n_prompt - 1 tokens, none with prompt logprobs */
    const int64_t c = r->stats.n_cached_prompt;
    sd_fuzz_require(c >= 0 && c <= r->n_prompt - 1 && c % z->sp.kv_block_tokens == 0 && ref_stats->n_cached_prompt == 0);
    sd_fuzz_require(c == 0 || (r->gp.prompt_logprobs == 0 && z->sp.prefix_cache != SPECDEC_PREFIX_CACHE_OFF));
}

/* r's sequence (prompt, then its tokens) equals q's over positions [0, pos)? */
static int fz_same_context(const fz_req *r, const fz_req *q, int32_t pos) {
    for (int32_t p = 0; p < pos; p++) {
        const int32_t a = p < r->n_prompt ? r->prompt[p] : r->out[p - r->n_prompt];
        const int32_t b = p < q->n_prompt ? q->prompt[p] : q->out[p - q->n_prompt];
        if (a != b) return 0;
    }
    return 1;
}

/* Two requests of one scheduler at the same context: the same target row, whatever the
 * drafter, verify mode, sampling values, batch and round, so equal records for the same
 * token (bitwise) and top lists of which the shorter is a prefix of the longer. */
static void fz_check_across(const fz_state *z) {
    for (int a = 0; a < z->n_req; a++)
        for (int b = a + 1; b < z->n_req; b++) {
            const fz_req *r = &z->req[a], *q = &z->req[b];
            for (int32_t i = 0; i < r->lp.n; i++) {
                const int32_t pos = r->n_prompt + i, k = pos - q->n_prompt;
                if (k < 0 || k >= q->lp.n || !fz_same_context(r, q, pos)) continue;
                const fz_lp *x = &r->lp.rec[i], *y = &q->lp.rec[k];
                const int32_t nt = x->n_top < y->n_top ? x->n_top : y->n_top;
                sd_fuzz_require(!memcmp(x->top_tokens, y->top_tokens, (size_t)nt * sizeof(int32_t)) &&
                                !memcmp(x->top_logprobs, y->top_logprobs, (size_t)nt * sizeof(float)));
                if (x->token == y->token)
                    sd_fuzz_require(x->rank == y->rank && !memcmp(&x->logprob, &y->logprob, sizeof x->logprob));
            }
        }
}

static void fz_check_results(fz_state *z, const specdec_engine_params *ep) {
    specdec_engine *ref = NULL;
    sd_fuzz_require(specdec_engine_create(g_target, fz_draft_model(z->draft_kind), ep, &ref) == SPECDEC_OK);
    static fz_lp_log lp, lp_plain; /* the harness's own thread only */
    for (int i = 0; i < z->n_req; i++) {
        fz_req *r = &z->req[i];
        int32_t want[FMAX_PREDICT], plain[FMAX_PREDICT];
        specdec_stats st, st_plain;
        const int32_t n = fz_reference(ref, r, 0, want, &lp, &st);
        fz_check_request(z, r, want, n, &lp, &st);
        if (r->gp.verify == SPECDEC_VERIFY_REJECTION || st.draft_method == SPECDEC_DRAFT_NONE) continue;
        /* greedy and match: plain decoding's tokens and records, whoever drafted (nothing
         * drafted: the reference was plain decoding) */
        const int32_t np = fz_reference(ref, r, 1, plain, &lp_plain, &st_plain);
        sd_fuzz_require(np == n && !memcmp(plain, want, (size_t)n * sizeof(int32_t)));
        for (int32_t k = 0; k < lp.n; k++) sd_fuzz_require(fz_lp_equal(&lp.rec[k], &lp_plain.rec[k]));
        sd_fuzz_require(lp.n_p == lp_plain.n_p);
        for (int32_t k = 0; k < lp.n_p; k++) sd_fuzz_require(fz_lp_equal(&lp.prec[k], &lp_plain.prec[k]));
    }
    specdec_engine_free(ref);
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_fuzz_in in = {data, size};
    static fz_state z; /* large (records); one input at a time */
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
    fz_check_across(&z);
    return 0;
}

SD_FUZZ_DEFINE_ENTRY_WITH_INIT

/* fuzz_generate.c — structure-aware fuzz target for the public engine and generate API
 * on tiny random checkpoints (written once at start-up with tests/checkpoint/
 * ckpt_writer.h into a temporary directory, loaded, and the files removed): a target
 * (V = 48, 2 layers, GQA), a draft of the same vocabulary, a draft of another
 * vocabulary, and a small byte-fallback tokenizer over the same 48 ids (partial UTF-8
 * byte tokens, so streamed text holds bytes back and restarts windows).
 *
 * Each input is decoded (sd_fuzz_in) into engine params (backend, n_ctx, max_batch,
 * device, reserved fields, which draft) and then up to 6 operations: specdec_generate
 * with every field of specdec_generate_params fuzzed (NaN/inf/negative floats,
 * boundary ints, verify modes outside the enum, n_draft, adaptive, stop strings
 * including NULL/empty/over-long ones, ignore_eos, a callback that stops after k
 * tokens, logprobs with top_logprobs and a logprob callback, valid or not, the logits
 * processors (logit_bias, min_tokens, stop_token_ids, penalties), valid or not), fuzzed prompts (ids outside [0, V), NULL, empty, longer than the context),
 * output capacity and NULL outputs; specdec_engine_forward and kv_truncate with fuzzed
 * roles, positions, counts and ids.
 *
 * Checked for every call: the status is the one include/specdec.h documents for the
 * arguments (computed here independently: valid arguments must succeed, each invalid
 * one must give its documented status); a failure writes nothing and leaves the KV
 * lengths as they were; on success n_out is within capacity, n_predict and the
 * context, ids are in [0, V), the statistics add up, the stop reason matches the
 * output (EOS, stop token id, n_predict, context, callback, stop string; no earlier stop;
 * no EOS or stop id before min_tokens), the
 * callback sees exactly the output tokens, its text is well-formed UTF-8 and equals a
 * separate streaming decode of the output; the logprob callback sees each output token
 * once, before `callback`'s, with a record that keeps its contract (position, rank vs
 * the top list, order, ties) and the same values on a repeat (within 1e-4 of plain
 * decoding's); deterministic modes repeat exactly, and
 * greedy and match output equals plain decoding with the same seed; forward logits
 * are finite and bitwise the same computed one token at a time. No leak (libFuzzer's
 * -detect_leaks). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "fuzz_tiny_models.h"
#include "sd_tokenizer.h"
#include "specdec.h"

#define FV 48       /* vocabulary of the target, the draft and the tokenizer */
#define FCTX 64     /* max_position_embeddings: the default n_ctx */
#define FEOS 2      /* eos_token_id written by ckpt_writer.h */
#define FMAX_CTX 96 /* largest n_ctx asked for (more only costs time) */
#define FMAX_STOP 512

static specdec_model *g_target, *g_draft, *g_draft_other;
static specdec_tokenizer *g_tok;

/* ---- set-up --------------------------------------------------------------- */
/* Llama-2 style byte-fallback tokenizer over ids 0..FV-1. */
static int fgen_write_tokenizer(const char *dir) {
    static const char *const bytes[] = {"<0x41>", "<0x80>", "<0xC3>", "<0xA9>", "<0xE2>", "<0x96>", "<0x81>",
                                        "<0xFF>", "<0x0A>", "<0xF0>", "<0x9F>"};
    static const char *const words[] = {"\xe2\x96\x81", "\xe2\x96\x81" "a", "\xe2\x96\x81" "the", "he", "th", ".", "!"};
    char buf[8192];
    size_t o = 0;
    o += (size_t)snprintf(buf + o, sizeof buf - o,
        "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true}, {\"id\": 1, \"content\": \"<s>\", "
        "\"special\": true}, {\"id\": 2, \"content\": \"</s>\", \"special\": true}],\n"
        "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\xe2\x96\x81\"}, "
        "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}]},\n"
        "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
        "\"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": \"Strip\", "
        "\"content\": \" \", \"start\": 1, \"stop\": 0}]},\n"
        "\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true, \"merges\": [], \"vocab\": "
        "{\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2");
    int id = 3;
    for (size_t i = 0; i < sizeof bytes / sizeof *bytes; i++) o += (size_t)snprintf(buf + o, sizeof buf - o, ", \"%s\": %d", bytes[i], id++);
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) o += (size_t)snprintf(buf + o, sizeof buf - o, ", \"%s\": %d", words[i], id++);
    for (char c = 'a'; id < FV; c++) o += (size_t)snprintf(buf + o, sizeof buf - o, ", \"%c\": %d", c, id++);
    o += (size_t)snprintf(buf + o, sizeof buf - o, "}}}\n");
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    return o < sizeof buf ? ck_write_text(path, buf, o) : -1;
}

static int fgen_load_tokenizer(const char *dir) {
    return specdec_tokenizer_load(dir, &g_tok) == SPECDEC_OK ? 0 : -1;
}

int sd_fuzz_init(void) {
    (void)ck_find; /* helpers of ckpt_writer.h this target does not need */
    (void)ck_remove;
    char root[256];
    if (fz_make_root(root, sizeof root, "fuzz_generate")) return 1;
    ck_spec t, d;
    fz_pair_specs(FV, 11, 12, &t, &d);
    ck_spec o = d;
    o.V = FV - 8;
    o.seed = 13;
    int r = fz_load_model(root, "target", &t, &g_target, fgen_write_tokenizer, fgen_load_tokenizer) ||
            fz_load_model(root, "draft", &d, &g_draft, NULL, NULL) ||
            fz_load_model(root, "other", &o, &g_draft_other, NULL, NULL);
    rmdir(root);
    return r ? 1 : 0;
}

/* ---- engine ------------------------------------------------------------------ */
typedef struct fgen_engine {
    specdec_engine *e;
    int has_draft;
    int32_t n_ctx;
} fgen_engine;

static int32_t fgen_small(sd_fuzz_in *in, int32_t span, int32_t lo) {
    uint8_t t = sd_fuzz_u8(in);
    if (t >= 250) return sd_fuzz_i32(in);
    return lo + (int32_t)(t % (uint32_t)span);
}

/* Engine params from the input; returns 0 when creation failed (as it had to). */
static int fgen_make_engine(sd_fuzz_in *in, fgen_engine *fe) {
    memset(fe, 0, sizeof *fe);
    specdec_engine_params ep = specdec_engine_default_params();
    const uint8_t f = sd_fuzz_u8(in), b = sd_fuzz_u8(in);
    const int draft_kind = (f & 3) == 3 ? ((f >> 2) & 7 ? 1 : 2) : f & 1; /* 0 none, 1 draft, 2 other vocab */
    if (b % 16 == 10) ep.backend = SPECDEC_BACKEND_CUDA;
    else if (b % 16 == 11) ep.backend = (specdec_backend)7;
    else if (b % 16 == 12) ep.backend = (specdec_backend)-1;
    else ep.backend = b & 1 ? SPECDEC_BACKEND_CPU : SPECDEC_BACKEND_AUTO;
    const uint8_t c = sd_fuzz_u8(in);
    ep.n_ctx = c < 128 ? 0 : c < 250 ? (int32_t)(c % FMAX_CTX) + 1 : c == 250 ? -1 : c == 251 ? INT32_MIN : 2;
    const uint8_t m = sd_fuzz_u8(in);
    ep.max_batch = m < 160 ? 0 : m < 250 ? (int32_t)(m % 40) + 1 : m == 250 ? -5 : INT32_MAX;
    if ((f >> 5) == 7) ep.cuda_device = -1;
    /* the counts from the struct itself: 0.5.3 took reserved_i[0] for cpu_threads (a literal 7 here
     * wrote past the array) */
    if ((f >> 5) == 6) ep.reserved_i[b % (sizeof ep.reserved_i / sizeof ep.reserved_i[0])] = 1;
    if ((f >> 5) == 5) ep.reserved[b % (sizeof ep.reserved / sizeof ep.reserved[0])] = 1;
    ep.cuda_keep_f32 = (f >> 4) & 1;
    if ((f >> 5) == 3) { /* the n-gram corpus (0.5.10): a size, or out of range (refused) */
        const int32_t nc[6] = {1, 64, 4096, -1, SPECDEC_MAX_NGRAM_CORPUS_TOKENS + 1, INT32_MIN};
        ep.ngram_corpus_tokens = nc[b % 6];
    }
    if ((f >> 5) == 4) { /* CPU threads: 1-3, or out of range (refused) */
        const int32_t th[6] = {1, 2, 3, -1, SPECDEC_MAX_CPU_THREADS + 1, INT32_MIN};
        ep.cpu_threads = th[b % 6];
    }
    const specdec_model *draft = draft_kind == 1 ? g_draft : draft_kind == 2 ? g_draft_other : NULL;
    /* n_ctx beyond max_position_embeddings (FCTX, both models): refused since 0.4 */
    int valid = ep.n_ctx >= 0 && ep.n_ctx <= FCTX && ep.max_batch >= 0 && ep.cuda_device >= 0 && (f >> 5) != 6 &&
                (f >> 5) != 5 && draft_kind != 2 && ep.cpu_threads >= 0 && ep.cpu_threads <= SPECDEC_MAX_CPU_THREADS &&
                ep.ngram_corpus_tokens >= 0 && ep.ngram_corpus_tokens <= SPECDEC_MAX_NGRAM_CORPUS_TOKENS;
    int cuda_ok = specdec_cuda_device_count() > 0;
    unsigned allowed = 1u << SPECDEC_ERR_INVALID_ARGUMENT | 1u << SPECDEC_ERR_MODEL_MISMATCH;
    if (ep.backend == SPECDEC_BACKEND_CUDA && !cuda_ok) valid = 0, allowed |= 1u << SPECDEC_ERR_BACKEND_UNAVAILABLE;
    if ((int)ep.backend < 0 || (int)ep.backend > 2) valid = 0;
    specdec_status st = specdec_engine_create(g_target, draft, &ep, &fe->e);
    if (valid) {
        if (st != SPECDEC_OK) fprintf(stderr, "engine_create: %s\n", specdec_last_error());
        sd_fuzz_require(st == SPECDEC_OK && fe->e != NULL);
    } else {
        sd_fuzz_require(st != SPECDEC_OK && ((allowed >> st) & 1) && fe->e == NULL && specdec_last_error()[0]);
        return 0;
    }
    fe->has_draft = draft != NULL;
    fe->n_ctx = specdec_engine_n_ctx(fe->e);
    sd_fuzz_require(fe->n_ctx == (ep.n_ctx ? ep.n_ctx : FCTX));
    sd_fuzz_require(specdec_engine_backend(fe->e) == (cuda_ok && ep.backend != SPECDEC_BACKEND_CPU ? SPECDEC_BACKEND_CUDA
                                                                                              : SPECDEC_BACKEND_CPU));
    sd_fuzz_require(specdec_engine_kv_length(fe->e, SPECDEC_ROLE_TARGET) == 0);
    sd_fuzz_require(specdec_engine_kv_length(fe->e, SPECDEC_ROLE_DRAFT) == (fe->has_draft ? 0 : -1));
    sd_fuzz_require(specdec_engine_kv_length(fe->e, (specdec_role)5) == -1);
    return 1;
}

/* ---- generate: one fuzzed call ------------------------------------------------ */
/* What the callback saw. */
typedef struct fgen_cb {
    int32_t stop_after;      /* return 1 at this call (1-based); 0 = never */
    int32_t n_calls;         /* calls with a token >= 0 */
    int32_t toks[FMAX_CTX + 1];
    size_t piece_end[FMAX_CTX + 1]; /* text length after each token's piece */
    int n_final;             /* calls with token -1 */
    int order_bad;           /* a token after the final call, too many calls, bad piece */
    int has_tok;
    sd_fuzz_buf text;          /* pieces of the tokens, then the final call's */
    /* logprob_callback (0.4.1): one call per emitted token, just before `callback`'s */
    int32_t n_prompt;        /* positions start here */
    int lp_on, cb_on;        /* which of the two callbacks the call set */
    int32_t top_want;        /* top_logprobs asked for */
    int32_t prompt_top_want; /* prompt_top_logprobs asked for */
    const int32_t *prompt;   /* the prompt: prompt records (positions 1..n_prompt-1) come first */
    int32_t n_plp;           /* prompt records */
    int32_t n_lp;            /* calls for generated tokens */
    int32_t lp_tok[FMAX_CTX + 1];
    float lp[FMAX_CTX + 1];
    int lp_bad;              /* a record breaking specdec_token_logprobs' contract, or out of order */
} fgen_cb;

/* Checks each record against include/specdec.h (sd_fuzz_lp_record_ok; tiny random models
 * have finite logits, V = 48 > 20) and that it comes before `callback` of the same token
 * (n_lp runs one ahead of n_calls). */
static int fgen_on_logprob(void *ud, const specdec_token_logprobs *lp) {
    fgen_cb *c = ud;
    if (lp->position >= 1 && lp->position < c->n_prompt) { /* a prompt token's, before anything else */
        if (c->n_lp || c->n_calls || c->n_final || lp->position != (int64_t)c->n_plp + 1 ||
            lp->token != c->prompt[lp->position] ||
            !sd_fuzz_lp_record_ok(lp, FV, c->prompt_top_want, (int64_t)c->n_plp + 1))
            c->lp_bad = 1;
        c->n_plp++;
        return 0;
    }
    if (c->n_lp > FMAX_CTX || (c->cb_on && c->n_lp != c->n_calls) || c->n_final) {
        c->lp_bad = 1;
        return 0;
    }
    const int ok = sd_fuzz_lp_record_ok(lp, FV, c->top_want, (int64_t)c->n_prompt + c->n_lp);
    if (!ok) c->lp_bad = 1;
    c->lp_tok[c->n_lp] = lp->token;
    c->lp[c->n_lp] = lp->logprob;
    c->n_lp++;
    return 0;
}

static int fgen_on_token(void *ud, int32_t tok, const char *piece, size_t len) {
    fgen_cb *c = ud;
    if ((piece == NULL) != !c->has_tok || (!c->has_tok && len) || (len && !sd_fuzz_utf8_ok(piece, len)))
        c->order_bad = 1;
    if (tok < 0) {
        if (tok != -1 || !len) c->order_bad = 1; /* the final call delivers held-back bytes */
        c->n_final++;
        if (piece) sd_fuzz_buf_put(&c->text, piece, len);
        return 0;
    }
    if (c->n_final || c->n_calls > FMAX_CTX || (c->lp_on && c->n_lp != c->n_calls + 1)) {
        c->order_bad = 1;
        return 1;
    }
    if (piece) sd_fuzz_buf_put(&c->text, piece, len);
    c->toks[c->n_calls] = tok;
    c->piece_end[c->n_calls] = c->text.len;
    c->n_calls++;
    return c->stop_after && c->n_calls == c->stop_after;
}

/* A fuzzed call: the arguments and the storage they point into. */
typedef struct fgen_call {
    specdec_generate_params gp;
    int32_t *prompt;
    int32_t n_prompt;
    int32_t cap;          /* out_capacity passed */
    int32_t *out;         /* NULL or exactly max(cap, 1) entries */
    int null_n_out, null_stats, null_params;
    char *stop_buf[5];
    const char *stops[5];
    int stop_mode;        /* 0 array, 1 NULL array, 2 negative count */
    int use_cb;
    int32_t stop_after;
    specdec_logit_bias bias[3]; /* logits processors' arrays (0.5) */
    int32_t stop_ids[2];
} fgen_call;

static void fgen_call_free(fgen_call *c) {
    free(c->prompt);
    free(c->out);
    for (int i = 0; i < 5; i++) free(c->stop_buf[i]);
}

/* Logits processors (0.5), valid and not: bias entries (ids past the vocabulary, NaN / out of
 * range biases, bad counts, a NULL array), min_tokens, stop ids, penalties in and out of range. */
static void fgen_decode_proc(sd_fuzz_in *in, fgen_call *c) {
    specdec_generate_params *gp = &c->gp;
    const uint8_t k = sd_fuzz_u8(in);
    const int32_t nb = k % 4;
    gp->n_logit_bias = (k >> 2) % 8 == 7 ? -1 : (k >> 2) % 8 == 6 ? SPECDEC_MAX_LOGIT_BIAS + 1 : nb;
    gp->logit_bias = (k >> 5) == 7 ? NULL : c->bias;
    for (int32_t i = 0; i < nb; i++) {
        const uint8_t t = sd_fuzz_u8(in), b = sd_fuzz_u8(in);
        c->bias[i].token = t >= 250 ? -1 : t % 52; /* 48..51: outside the vocabulary */
        c->bias[i].bias = b % 16 == 15 ? sd_fuzz_float(in) : b % 16 == 14 ? -100.0f : (float)((int)b - 128) * 0.8f;
    }
    const uint8_t m = sd_fuzz_u8(in);
    gp->min_tokens = m % 8 == 7 ? -1 : m % 8;
    const int32_t ns = (m >> 3) % 3;
    gp->n_stop_token_ids = (m >> 5) == 7 ? SPECDEC_MAX_STOP_TOKEN_IDS + 1 : (m >> 5) == 6 ? -1 : ns;
    gp->stop_token_ids = (m >> 5) == 5 ? NULL : c->stop_ids;
    for (int32_t i = 0; i < ns; i++) c->stop_ids[i] = (int32_t)(sd_fuzz_u8(in) % 50);
    const uint8_t p = sd_fuzz_u8(in);
    static const float reps[8] = {0.0f, 1.0f, 0.5f, 1.3f, 2.0f, 100.5f, -1.0f, 100.0f};
    gp->presence_penalty = p % 8 == 7 ? sd_fuzz_float(in) : (float)((int)(p % 8) - 3) * 0.8f; /* +-2.4: too big */
    gp->frequency_penalty = (p >> 3) % 8 == 7 ? sd_fuzz_float(in) : (float)((int)((p >> 3) % 8) - 3) * 0.5f;
    gp->repetition_penalty = (p >> 6) == 3 ? sd_fuzz_float(in) : reps[(p >> 6) * 2 + (k & 1)];
}

static void fgen_decode_sampling(sd_fuzz_in *in, fgen_call *c) {
    specdec_generate_params *gp = &c->gp;
    const uint8_t m = sd_fuzz_u8(in);
    gp->n_predict = fgen_small(in, 70, -1);
    if (m & 1) gp->temperature = sd_fuzz_float(in);
    else gp->temperature = m & 2 ? 0.0f : 0.8f;
    if (m & 4) gp->top_k = fgen_small(in, 60, -2);
    if (m & 8) gp->top_p = sd_fuzz_float(in);
    if (m & 16) gp->min_p = sd_fuzz_float(in);
    if (m & 32) gp->seed = sd_fuzz_u64(in);
    if (m & 64) gp->sequence_id = sd_fuzz_u64(in);
    const uint8_t v = sd_fuzz_u8(in);
    gp->verify = (specdec_verify_mode)(v % 8 < 4 ? v % 8 : v % 8 == 4 ? -1 : v % 8 == 5 ? 4 : v % 4);
    gp->n_draft = fgen_small(in, 20, -1);
    const uint8_t a = sd_fuzz_u8(in);
    gp->adaptive_draft = a % 4 == 1 ? 1 : a % 4 == 2 ? (int32_t)a : 0;
    gp->ignore_eos = (a >> 2) & 1;
    if ((m & 128) && (a >> 3) % 16 == 0) gp->draft_method = (specdec_draft_method)((a >> 7) ? 7 : a % 6);
    if ((m & 128) && (a >> 3) % 16 == 2) {
        gp->draft_method = SPECDEC_DRAFT_NGRAM;
        gp->ngram_min = a % 3;
        gp->ngram_max = (a >> 1) % 6 + ((a >> 7) ? 60 : 0);
        const uint8_t nc = sd_fuzz_u8(in);
        gp->ngram_cost = (specdec_ngram_cost)(nc % 5 == 4 ? -1 : nc % 5 == 3 ? 3 : nc % 3);
        gp->ngram_token_cost = (nc >> 3) % 4 == 3 ? sd_fuzz_float(in) : (float)((nc >> 3) % 4) * 0.25f;
    }
    if ((m & 128) && (a >> 3) % 16 == 4) fgen_decode_proc(in, c);
    if ((m & 128) && (a >> 3) % 16 == 1) gp->cache_salt = 0x9e3779b97f4a7c15ull * (uint64_t)(a + 1); /* any value */
    if ((m & 128) && (a >> 3) % 16 == 3) { /* logprobs (0.4.1), valid and not */
        const uint8_t l = sd_fuzz_u8(in);
        gp->logprobs = l % 8 == 7 ? 2 : l % 8 == 6 ? -1 : l % 8 != 0;
        gp->top_logprobs = (l >> 3) % 16 == 15 ? SPECDEC_MAX_TOP_LOGPROBS + 1 : (l >> 3) % 16 == 14 ? -1
                           : (l >> 3) % 16 == 13 ? SPECDEC_MAX_TOP_LOGPROBS : (int32_t)((l >> 3) % 16) % 6;
        gp->logprob_callback = (l >> 7) ? NULL : fgen_on_logprob;
        const uint8_t q = sd_fuzz_u8(in); /* prompt logprobs (0.4.1), valid and not */
        gp->prompt_logprobs = q % 8 == 7 ? 2 : q % 8 == 6 ? -1 : q % 8 >= 3;
        gp->prompt_top_logprobs = (q >> 3) % 16 == 15 ? SPECDEC_MAX_TOP_LOGPROBS + 1 : (q >> 3) % 16 == 14 ? -1
                                  : (q >> 3) % 16 == 13 ? SPECDEC_MAX_TOP_LOGPROBS : (int32_t)((q >> 3) % 16) % 4;
    }
}

static void fgen_decode_stops(sd_fuzz_in *in, fgen_call *c) {
    const uint8_t s = sd_fuzz_u8(in);
    int n = s % 5;
    c->stop_mode = (s >> 3) % 16 == 0 ? 1 : (s >> 3) % 16 == 1 ? 2 : 0;
    for (int i = 0; i < n; i++) {
        const uint8_t t = sd_fuzz_u8(in);
        if (t == 255) continue; /* a NULL entry */
        const uint8_t *p;
        size_t len = t >= 250 ? 600 + (size_t)(t - 250) * 30 : t % 12; /* short ones match; long ones are refused */
        char *b = malloc(len + 1);
        sd_fuzz_require(b != NULL);
        size_t got = sd_fuzz_bytes(in, len > 255 ? 0 : len, &p);
        if (len > 255) memset(b, 'a', len);
        else if (got) memcpy(b, p, got);
        b[len > 255 ? len : got] = '\0';
        c->stop_buf[i] = b;
        c->stops[i] = b;
    }
    c->gp.stop_strings = c->stop_mode == 1 ? NULL : c->stops;
    c->gp.n_stop_strings = c->stop_mode == 2 ? -n - 1 : n;
}

static void fgen_decode_call(sd_fuzz_in *in, fgen_call *c) {
    memset(c, 0, sizeof *c);
    c->gp = specdec_generate_default_params();
    fgen_decode_sampling(in, c);
    fgen_decode_stops(in, c);
    const uint8_t f = sd_fuzz_u8(in);
    if (f & 1) c->gp.tokenizer = g_tok;
    c->use_cb = (f >> 1) & 1;
    c->stop_after = (f >> 2) & 1 ? (int32_t)(sd_fuzz_u8(in) % 24) : 0;
    c->null_n_out = f == 0x80;
    c->null_stats = (f >> 3) % 8 == 1;
    c->null_params = f == 0x81;
    /* prompt */
    const uint8_t pl = sd_fuzz_u8(in);
    c->n_prompt = pl < 240 ? (int32_t)(pl % 24) : pl < 250 ? (int32_t)(pl - 240) * 12 : pl == 250 ? -1 : 0;
    if (pl != 251 && c->n_prompt > 0) {
        c->prompt = malloc((size_t)c->n_prompt * sizeof *c->prompt);
        sd_fuzz_require(c->prompt != NULL);
        for (int32_t i = 0; i < c->n_prompt; i++) {
            const uint8_t t = sd_fuzz_u8(in);
            c->prompt[i] = t < 248 ? t % FV : t == 248 ? FV : t == 249 ? -1 : t == 250 ? INT32_MAX : (int32_t)t % FV;
        }
    } else if (pl == 252) {
        static int32_t one = 3; /* a prompt pointer with n_prompt 0 */
        c->prompt = malloc(sizeof one);
        sd_fuzz_require(c->prompt != NULL);
        c->prompt[0] = one;
    }
    /* output capacity: the buffer has exactly that many entries */
    const uint8_t oc = sd_fuzz_u8(in);
    c->cap = oc < 240 ? (int32_t)(oc % (FMAX_CTX + 4)) : oc < 250 ? FMAX_CTX : oc == 250 ? -1 : 0;
    if (oc != 251) {
        c->out = malloc((size_t)(c->cap > 0 ? c->cap : 1) * sizeof *c->out);
        sd_fuzz_require(c->out != NULL);
        for (int32_t i = 0; i < (c->cap > 0 ? c->cap : 1); i++) c->out[i] = -7;
    }
}

/* Statuses include/specdec.h gives these arguments: returns the set that some invalid
 * argument calls for (empty: all valid, must succeed); *maybe collects statuses the
 * header leaves open (n_draft outside its range when there is no draft to use it). */
static unsigned fgen_expected(const fgen_engine *fe, const fgen_call *c, const specdec_generate_params *p,
                              unsigned *maybe) {
    unsigned bad = 0;
    *maybe = 0;
#define BAD(cond, st) do { if (cond) bad |= 1u << (st); } while (0)
    const unsigned inval = SPECDEC_ERR_INVALID_ARGUMENT;
    BAD(!c->prompt || !c->out || c->null_n_out, inval);
    BAD(c->n_prompt <= 0, inval);
    BAD(c->n_prompt >= fe->n_ctx, SPECDEC_ERR_CONTEXT_FULL);
    for (int32_t i = 0; c->prompt && i < c->n_prompt; i++) BAD(c->prompt[i] < 0 || c->prompt[i] >= FV, inval);
    BAD(p->n_predict < 0 || (p->n_predict == 0 && p->prompt_logprobs != 1), inval); /* 0: score the prompt */
    const int draft_range = p->n_draft < 0 || p->n_draft > SPECDEC_MAX_DRAFT;
    const int adaptive_zero = p->adaptive_draft && p->n_draft == 0;
    if (fe->has_draft) BAD(draft_range || adaptive_zero, inval);
    else if (draft_range || adaptive_zero) *maybe |= 1u << inval;
    BAD((int)p->verify < SPECDEC_VERIFY_AUTO || (int)p->verify > SPECDEC_VERIFY_MATCH, inval);
    BAD(!(p->temperature >= 0.0f) || isinf(p->temperature), inval);
    BAD(p->top_k < 0, inval);
    BAD(!(p->top_p > 0.0f && p->top_p <= 1.0f), inval);
    BAD(!(p->min_p >= 0.0f && p->min_p <= 1.0f), inval);
    BAD(p->n_stop_strings < 0 || (p->n_stop_strings > 0 && (!p->stop_strings || !p->tokenizer)), inval);
    for (int32_t i = 0; p->n_stop_strings > 0 && p->stop_strings && i < p->n_stop_strings; i++) {
        const char *s = p->stop_strings[i];
        BAD(!s || !*s || strlen(s) > FMAX_STOP, inval);
    }
    const int dm = (int)p->draft_method;
    /* these engines have no head: EAGLE3 and MTP need one */
    BAD(dm < SPECDEC_DRAFT_AUTO || dm > SPECDEC_DRAFT_MTP || dm == SPECDEC_DRAFT_EAGLE3 || dm == SPECDEC_DRAFT_MTP,
        inval);
    BAD(dm == SPECDEC_DRAFT_MODEL && !fe->has_draft, inval);
    if (dm == SPECDEC_DRAFT_NGRAM)
        BAD(p->ngram_min < 1 || p->ngram_max < p->ngram_min || p->ngram_max > 64 || p->adaptive_draft ||
                (int)p->ngram_cost < 0 || (int)p->ngram_cost > 2 ||
                !(p->ngram_token_cost >= 0.0f && p->ngram_token_cost <= 100.0f),
            inval);
    BAD(p->logprobs != 0 && p->logprobs != 1, inval);
    BAD(p->top_logprobs < 0 || p->top_logprobs > SPECDEC_MAX_TOP_LOGPROBS || (p->top_logprobs > 0 && !p->logprobs), inval);
    BAD(p->prompt_logprobs != 0 && p->prompt_logprobs != 1, inval);
    BAD(p->prompt_top_logprobs < 0 || p->prompt_top_logprobs > SPECDEC_MAX_TOP_LOGPROBS ||
            (p->prompt_top_logprobs > 0 && !p->prompt_logprobs),
        inval);
    BAD(p->prompt_logprobs && !p->logprob_callback, inval);
    BAD(p->logprobs == 1 && !p->logprob_callback, inval);
    BAD(p->n_logit_bias < 0 || p->n_logit_bias > SPECDEC_MAX_LOGIT_BIAS || (p->n_logit_bias > 0 && !p->logit_bias), inval);
    for (int32_t i = 0; p->logit_bias && p->n_logit_bias <= 3 && i < p->n_logit_bias; i++)
        BAD(p->logit_bias[i].token < 0 || p->logit_bias[i].token >= FV ||
                !(p->logit_bias[i].bias >= -100.0f && p->logit_bias[i].bias <= 100.0f),
            inval);
    BAD(p->min_tokens < 0, inval);
    BAD(p->n_stop_token_ids < 0 || p->n_stop_token_ids > SPECDEC_MAX_STOP_TOKEN_IDS ||
            (p->n_stop_token_ids > 0 && !p->stop_token_ids),
        inval);
    for (int32_t i = 0; p->stop_token_ids && p->n_stop_token_ids <= 2 && i < p->n_stop_token_ids; i++)
        BAD(p->stop_token_ids[i] < 0 || p->stop_token_ids[i] >= FV, inval);
    BAD(!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f), inval);
    BAD(!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f), inval);
    BAD(!(p->repetition_penalty == 0.0f || (p->repetition_penalty > 0.0f && p->repetition_penalty <= 100.0f)), inval);
    const int64_t room = (int64_t)fe->n_ctx - c->n_prompt;
    BAD(c->cap < (p->n_predict < room ? p->n_predict : room), SPECDEC_ERR_BUFFER_TOO_SMALL);
#undef BAD
    return bad;
}

/* The text of out[0..n) as the engine streams it: piece_end[i] after token i, the
 * flush's bytes last. Returns the length before the flush. */
static size_t fgen_stream_text(const int32_t *out, int32_t n, sd_fuzz_buf *t, size_t *piece_end) {
    specdec_detok_stream *s = NULL;
    sd_fuzz_require(specdec_detok_stream_create(g_tok, 1, &s) == SPECDEC_OK);
    for (int32_t i = 0; i < n; i++) {
        const char *p;
        size_t l;
        sd_fuzz_require(specdec_detok_stream_push(s, out[i], &p, &l) == SPECDEC_OK);
        sd_fuzz_buf_put(t, p, l);
        piece_end[i] = t->len;
    }
    const size_t before = t->len;
    const char *p;
    size_t l;
    sd_fuzz_require(specdec_detok_stream_flush(s, &p, &l) == SPECDEC_OK);
    sd_fuzz_buf_put(t, p, l);
    specdec_detok_stream_free(s);
    return before;
}

/* A stop string ends inside text(a, b]. */
static int fgen_stop_in(const specdec_generate_params *p, const char *text, size_t a, size_t b) {
    for (int32_t k = 0; k < p->n_stop_strings; k++) {
        const char *s = p->stop_strings[k];
        const size_t L = strlen(s);
        for (size_t end = a + 1; end <= b; end++)
            if (end >= L && !memcmp(text + end - L, s, L)) return 1;
    }
    return 0;
}

/* Generation stops at the first token where a stop condition holds, with the reason of
 * the highest priority (EOS, stop string, callback, n_predict, context full). */
static void fgen_check_stops(const fgen_engine *fe, const fgen_call *c, const specdec_generate_params *p,
                             const int32_t *out, int32_t n, const char *text, const size_t *piece_end,
                             specdec_stop_reason reason) {
    for (int32_t i = 0; i < n; i++) {
        const int eos = !p->ignore_eos && out[i] == FEOS;
        int tokid = 0;
        for (int32_t j = 0; j < p->n_stop_token_ids; j++) tokid |= out[i] == p->stop_token_ids[j];
        sd_fuzz_require(i >= p->min_tokens || (!eos && !tokid)); /* min_tokens holds them off */
        const int str = p->n_stop_strings > 0 && fgen_stop_in(p, text, i ? piece_end[i - 1] : 0, piece_end[i]);
        const int cbs = p->callback && c->stop_after == i + 1;
        const int np = i + 1 >= p->n_predict;
        const int ctx = c->n_prompt + i + 1 >= fe->n_ctx;
        if (i < n - 1) {
            sd_fuzz_require(!eos && !tokid && !str && !cbs && !np && !ctx);
            continue;
        }
        specdec_stop_reason want = eos ? SPECDEC_STOP_EOS : tokid ? SPECDEC_STOP_TOKEN_ID : str ? SPECDEC_STOP_STRING
                                   : cbs ? SPECDEC_STOP_CALLBACK
                                   : np ? SPECDEC_STOP_N_PREDICT : ctx ? SPECDEC_STOP_CONTEXT_FULL : SPECDEC_STOP_NONE;
        if (reason != want) fprintf(stderr, "stop reason %d, expected %d (after %d tokens)\n", (int)reason, (int)want, (int)n);
        sd_fuzz_require(want != SPECDEC_STOP_NONE && reason == want);
    }
}

/* Whether the call drafts: the model drafter (AUTO / MODEL with a draft) or NGRAM, γ > 0. */
static int fgen_drafts(const fgen_engine *fe, const specdec_generate_params *p) {
    const specdec_draft_method dm = p->draft_method;
    if (p->n_draft <= 0) return 0;
    return dm == SPECDEC_DRAFT_NGRAM || ((dm == SPECDEC_DRAFT_AUTO || dm == SPECDEC_DRAFT_MODEL) && fe->has_draft);
}

static void fgen_check_stats(const fgen_engine *fe, const fgen_call *c, const specdec_generate_params *p,
                             const specdec_stats *s, int32_t n) {
    const int use_draft = fgen_drafts(fe, p);
    sd_fuzz_require(s->n_prompt == c->n_prompt && s->n_generated == n);
    if (p->n_predict == 0) { /* the prompt scored, nothing generated: no round */
        sd_fuzz_require(n == 0 && s->n_rounds == 0 && s->n_drafted == 0 && s->stop_reason == SPECDEC_STOP_N_PREDICT);
        return;
    }
    sd_fuzz_require(s->n_rounds >= 1 && s->n_rounds <= n);
    sd_fuzz_require(s->n_accepted >= 0 && s->n_accepted <= s->n_drafted);
    if (!use_draft) {
        sd_fuzz_require(s->n_drafted == 0 && s->n_rounds == n && s->final_n_draft == 0);
    } else {
        sd_fuzz_require(s->n_drafted <= (int64_t)SPECDEC_MAX_DRAFT * s->n_rounds);
        sd_fuzz_require(n <= s->n_rounds + s->n_accepted);
        sd_fuzz_require(s->final_n_draft >= 1 && s->final_n_draft <= SPECDEC_MAX_DRAFT);
        if (!p->adaptive_draft) sd_fuzz_require(s->final_n_draft == p->n_draft);
    }
    sd_fuzz_require(s->acceptance_rate == (s->n_drafted ? (double)s->n_accepted / (double)s->n_drafted : 0.0));
    sd_fuzz_require(s->tokens_per_round == (double)s->n_generated / (double)s->n_rounds);
    const double t[7] = {s->t_prefill_s, s->t_draft_s, s->t_target_s, s->t_verify_s, s->t_total_s, s->tokens_per_second, 0};
    for (int i = 0; i < 6; i++) sd_fuzz_require(isfinite(t[i]) && t[i] >= 0);
    sd_fuzz_require(s->t_total_s >= s->t_prefill_s);
    sd_fuzz_require(s->stop_reason >= SPECDEC_STOP_N_PREDICT && s->stop_reason <= SPECDEC_STOP_TOKEN_ID);
}

/* The result of one specdec_generate call. */
typedef struct fgen_result {
    specdec_status st;
    int32_t n_out;
    specdec_stats stats;
    fgen_cb cb;
} fgen_result;

static void fgen_result_free(fgen_result *r) { free(r->cb.text.p); }

static void fgen_call_run(const fgen_engine *fe, fgen_call *c, const specdec_generate_params *p, int32_t *out,
                          fgen_result *r) {
    memset(r, 0, sizeof *r);
    memset(&r->stats, 0x5a, sizeof r->stats);
    r->n_out = -5;
    specdec_generate_params gp = *p;
    r->cb.has_tok = gp.tokenizer != NULL;
    r->cb.stop_after = c->stop_after;
    if (gp.callback) gp.user_data = &r->cb;
    if (gp.logprob_callback) gp.logprob_user_data = &r->cb;
    r->cb.n_prompt = c->n_prompt;
    r->cb.top_want = gp.top_logprobs;
    r->cb.prompt_top_want = gp.prompt_top_logprobs;
    r->cb.prompt = c->prompt;
    r->cb.lp_on = gp.logprobs == 1 && gp.logprob_callback != NULL;
    r->cb.cb_on = gp.callback != NULL;
    r->st = specdec_generate(fe->e, c->prompt, c->n_prompt, c->null_params ? NULL : &gp, out, c->cap,
                             c->null_n_out ? NULL : &r->n_out, c->null_stats ? NULL : &r->stats);
}

/* A successful call: output, callback, text, stops and statistics. */
static void fgen_check_ok(const fgen_engine *fe, const fgen_call *c, const specdec_generate_params *p, const int32_t *out,
                          const fgen_result *r) {
    const int32_t n = r->n_out;
    const int64_t room = (int64_t)fe->n_ctx - c->n_prompt;
    sd_fuzz_require(n >= (p->n_predict > 0) && n <= p->n_predict && n <= room && n <= c->cap);
    for (int32_t i = 0; i < n; i++) sd_fuzz_require(out[i] >= 0 && out[i] < FV);
    for (int32_t i = n; i < c->cap; i++) sd_fuzz_require(out[i] == -7); /* nothing past n_out */
    sd_fuzz_buf t = {0};
    size_t piece_end[FMAX_CTX + 1] = {0};
    size_t before_flush = 0;
    if (p->tokenizer) before_flush = fgen_stream_text(out, n, &t, piece_end);
    if (p->callback) {
        const fgen_cb *cb = &r->cb;
        sd_fuzz_require(!cb->order_bad && cb->n_calls == n && !memcmp(cb->toks, out, (size_t)n * sizeof *out));
        if (p->tokenizer) {
            sd_fuzz_require(cb->n_final == (t.len > before_flush ? 1 : 0));
            sd_fuzz_require(cb->text.len == t.len && (!t.len || !memcmp(cb->text.p, t.p, t.len)));
            sd_fuzz_require(!memcmp(cb->piece_end, piece_end, (size_t)n * sizeof *piece_end));
        } else {
            sd_fuzz_require(cb->n_final == 0 && cb->text.len == 0);
        }
    }
    if (p->logprobs) { /* one record per emitted token, the output's tokens */
        const fgen_cb *cb = &r->cb;
        sd_fuzz_require(!cb->lp_bad && cb->n_lp == n && !memcmp(cb->lp_tok, out, (size_t)n * sizeof *out));
    } else {
        sd_fuzz_require(r->cb.n_lp == 0);
    }
    /* one record per prompt token but the first (the callback never stops them here) */
    sd_fuzz_require(!r->cb.lp_bad && r->cb.n_plp == (p->prompt_logprobs ? c->n_prompt - 1 : 0));
    if (!c->null_stats) {
        fgen_check_stops(fe, c, p, out, n, t.p, piece_end, r->stats.stop_reason);
        fgen_check_stats(fe, c, p, &r->stats, n);
    }
    free(t.p);
}

/* Same arguments again (or plain decoding for greedy / match): same tokens, same stop. */
static void fgen_check_repeat(const fgen_engine *fe, fgen_call *c, const specdec_generate_params *p,
                              const int32_t *out, const fgen_result *r, int plain) {
    specdec_generate_params q = *p;
    if (plain) {
        q.n_draft = 0;
        q.adaptive_draft = 0;
    }
    int32_t *out2 = malloc((size_t)(c->cap > 0 ? c->cap : 1) * sizeof *out2);
    sd_fuzz_require(out2 != NULL);
    fgen_result r2;
    fgen_call_run(fe, c, &q, out2, &r2);
    if (r2.st != r->st || r2.n_out != r->n_out || memcmp(out, out2, (size_t)r->n_out * sizeof *out))
        fprintf(stderr, "%s run differs: status %d/%d, %d/%d tokens\n", plain ? "plain" : "repeated", (int)r->st,
                (int)r2.st, (int)r->n_out, (int)r2.n_out);
    sd_fuzz_require(r2.st == r->st && r2.n_out == r->n_out && !memcmp(out, out2, (size_t)r->n_out * sizeof *out));
    if (!c->null_stats) sd_fuzz_require(r2.stats.stop_reason == r->stats.stop_reason);
    /* the target's rows: bitwise again for the same call; plain decoding computes them one
     * at a time instead of in a verify pass, so within 1e-4 (tests/logprobs measures ~1e-7) */
    for (int32_t i = 0; r->st == SPECDEC_OK && p->logprobs && i < r->n_out; i++)
        sd_fuzz_require(plain ? fabsf(r->cb.lp[i] - r2.cb.lp[i]) <= 1e-4f
                              : !memcmp(&r->cb.lp[i], &r2.cb.lp[i], sizeof r->cb.lp[i]));
    fgen_result_free(&r2);
    free(out2);
}

static void fgen_generate(sd_fuzz_in *in, const fgen_engine *fe) {
    fgen_call c;
    fgen_decode_call(in, &c);
    const uint8_t again = sd_fuzz_u8(in);
    if (c.use_cb) c.gp.callback = fgen_on_token;
    const specdec_generate_params eff = c.null_params ? specdec_generate_default_params() : c.gp;
    const int32_t kv_t = specdec_engine_kv_length(fe->e, SPECDEC_ROLE_TARGET);
    const int32_t kv_d = specdec_engine_kv_length(fe->e, SPECDEC_ROLE_DRAFT);
    fgen_result r;
    fgen_call_run(fe, &c, &eff, c.out, &r);
    unsigned maybe = 0, bad = fgen_expected(fe, &c, &eff, &maybe);
    if (bad == 0 && r.st != SPECDEC_OK && !((maybe >> r.st) & 1))
        fprintf(stderr, "generate refused valid arguments: %s\n", specdec_engine_last_error(fe->e));
    if (bad && r.st == SPECDEC_OK) fprintf(stderr, "generate accepted invalid arguments (mask 0x%x)\n", bad);
    sd_fuzz_require(r.st == SPECDEC_OK ? bad == 0 : (((bad | maybe) >> r.st) & 1) != 0);
    if (r.st != SPECDEC_OK) {
        sd_fuzz_require(c.null_n_out || r.n_out == 0);
        for (int32_t i = 0; c.out && i < (c.cap > 0 ? c.cap : 1); i++) sd_fuzz_require(c.out[i] == -7);
        sd_fuzz_require(r.cb.n_calls == 0 && r.cb.n_final == 0 && r.cb.n_lp == 0 && r.cb.n_plp == 0);
        sd_fuzz_require(specdec_engine_kv_length(fe->e, SPECDEC_ROLE_TARGET) == kv_t);
        sd_fuzz_require(specdec_engine_kv_length(fe->e, SPECDEC_ROLE_DRAFT) == kv_d);
        sd_fuzz_require(specdec_engine_last_error(fe->e)[0] != '\0');
    } else {
        fgen_check_ok(fe, &c, &eff, c.out, &r);
        specdec_verify_mode mode = eff.verify;
        if (mode == SPECDEC_VERIFY_AUTO) mode = eff.temperature == 0.0f ? SPECDEC_VERIFY_GREEDY : SPECDEC_VERIFY_REJECTION;
        const int use_draft = fgen_drafts(fe, &eff);
        /* rejection with adaptive γ or measured n-gram costs depends on timings: not reproducible */
        const int timed = mode == SPECDEC_VERIFY_REJECTION && use_draft &&
                          (eff.adaptive_draft ||
                           (eff.draft_method == SPECDEC_DRAFT_NGRAM && eff.ngram_cost == SPECDEC_NGRAM_COST_MEASURED));
        /* SEED_RANDOM draws a seed per call: a sampling mode repeats with the one reported */
        specdec_generate_params rep = eff;
        const int drawn = eff.seed == SPECDEC_SEED_RANDOM && mode != SPECDEC_VERIFY_GREEDY;
        if (drawn && !c.null_stats) rep.seed = r.stats.seed;
        if ((again & 1) && !timed && !(drawn && c.null_stats)) fgen_check_repeat(fe, &c, &rep, c.out, &r, 0);
        if ((again & 2) && use_draft && mode != SPECDEC_VERIFY_REJECTION && !c.null_params && !(drawn && c.null_stats))
            fgen_check_repeat(fe, &c, &rep, c.out, &r, 1);
    }
    fgen_result_free(&r);
    fgen_call_free(&c);
}

/* ---- low-level calls ------------------------------------------------------------ */
static specdec_role fgen_role(sd_fuzz_in *in) {
    const uint8_t r = sd_fuzz_u8(in) % 8;
    return r < 3 ? SPECDEC_ROLE_TARGET : r < 6 ? SPECDEC_ROLE_DRAFT : r == 6 ? (specdec_role)2 : (specdec_role)-1;
}

static int fgen_role_ok(const fgen_engine *fe, specdec_role role) {
    return role == SPECDEC_ROLE_TARGET || (role == SPECDEC_ROLE_DRAFT && fe->has_draft);
}

/* Forward tokens one at a time from pos: each row must equal the batched one bitwise. */
static void fgen_check_batch_invariance(const fgen_engine *fe, specdec_role role, const int32_t *toks, int32_t n,
                                        int32_t pos, const float *logits) {
    float row[FV];
    sd_fuzz_require(specdec_engine_kv_truncate(fe->e, role, pos) == SPECDEC_OK);
    for (int32_t i = 0; i < n; i++) {
        sd_fuzz_require(specdec_engine_forward(fe->e, role, toks + i, 1, pos + i, row) == SPECDEC_OK);
        sd_fuzz_require(!memcmp(row, logits + (size_t)i * FV, sizeof row));
    }
    sd_fuzz_require(specdec_engine_kv_length(fe->e, role) == pos + n);
}

static void fgen_forward(sd_fuzz_in *in, const fgen_engine *fe) {
    const specdec_role role = fgen_role(in);
    const int32_t kv = fgen_role_ok(fe, role) ? specdec_engine_kv_length(fe->e, role) : 0;
    const int32_t n = fgen_small(in, 24, -2);
    const uint8_t pt = sd_fuzz_u8(in);
    const int32_t pos = pt < 250 ? (int32_t)(pt % (uint32_t)(kv + 3)) - 1 : sd_fuzz_i32(in);
    const uint8_t f = sd_fuzz_u8(in);
    int32_t *toks = NULL;
    float *logits = NULL;
    const int32_t nt = n > 0 && n <= 4 * FMAX_CTX ? n : 0;
    int bad_tok = 0;
    if (f != 255 && nt > 0) {
        toks = malloc((size_t)nt * sizeof *toks);
        sd_fuzz_require(toks != NULL);
        for (int32_t i = 0; i < nt; i++) {
            const uint8_t t = sd_fuzz_u8(in);
            toks[i] = t < 250 ? t % FV : t == 250 ? FV : t == 251 ? -1 : INT32_MIN;
            bad_tok |= toks[i] < 0 || toks[i] >= FV;
        }
    }
    if ((f & 1) && nt > 0) {
        logits = malloc((size_t)nt * FV * sizeof *logits);
        sd_fuzz_require(logits != NULL);
    }
    const int32_t kv_t = specdec_engine_kv_length(fe->e, SPECDEC_ROLE_TARGET);
    const int32_t kv_d = specdec_engine_kv_length(fe->e, SPECDEC_ROLE_DRAFT);
    /* n larger than the tokens we have would be read past the buffer: only with tokens */
    const int32_t n_call = toks ? nt : n;
    specdec_status st = specdec_engine_forward(fe->e, role, toks, n_call, pos, logits);
    unsigned bad = 0;
    if (!fgen_role_ok(fe, role) || !toks || n_call <= 0 || pos < 0 || pos > kv || bad_tok)
        bad |= 1u << SPECDEC_ERR_INVALID_ARGUMENT;
    if (fgen_role_ok(fe, role) && (int64_t)pos + n_call > fe->n_ctx) bad |= 1u << SPECDEC_ERR_CONTEXT_FULL;
    sd_fuzz_require(st == SPECDEC_OK ? bad == 0 : ((bad >> st) & 1) != 0);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(specdec_engine_kv_length(fe->e, SPECDEC_ROLE_TARGET) == kv_t);
        sd_fuzz_require(specdec_engine_kv_length(fe->e, SPECDEC_ROLE_DRAFT) == kv_d);
        sd_fuzz_require(specdec_engine_last_error(fe->e)[0] != '\0');
    } else {
        sd_fuzz_require(specdec_engine_kv_length(fe->e, role) == pos + n_call);
        const specdec_role other = role == SPECDEC_ROLE_TARGET ? SPECDEC_ROLE_DRAFT : SPECDEC_ROLE_TARGET;
        sd_fuzz_require(specdec_engine_kv_length(fe->e, other) == (role == SPECDEC_ROLE_TARGET ? kv_d : kv_t));
        for (int64_t i = 0; logits && i < (int64_t)n_call * FV; i++) sd_fuzz_require(isfinite(logits[i]));
        if (logits && (f & 2)) fgen_check_batch_invariance(fe, role, toks, n_call, pos, logits);
    }
    free(toks);
    free(logits);
}

static void fgen_truncate(sd_fuzz_in *in, const fgen_engine *fe) {
    const specdec_role role = fgen_role(in);
    const int ok_role = fgen_role_ok(fe, role);
    const int32_t kv = ok_role ? specdec_engine_kv_length(fe->e, role) : 0;
    const uint8_t t = sd_fuzz_u8(in);
    const int32_t len = t < 250 ? (int32_t)(t % (uint32_t)(kv + 3)) - 1 : sd_fuzz_i32(in);
    specdec_status st = specdec_engine_kv_truncate(fe->e, role, len);
    const int valid = ok_role && len >= 0 && len <= kv;
    sd_fuzz_require(valid ? st == SPECDEC_OK : st == SPECDEC_ERR_INVALID_ARGUMENT);
    if (ok_role) sd_fuzz_require(specdec_engine_kv_length(fe->e, role) == (valid ? len : kv));
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_fuzz_in in = {data, size};
    fgen_engine fe;
    if (!fgen_make_engine(&in, &fe)) return 0;
    for (int op = 0; op < 6 && in.n > 0; op++) {
        const uint8_t k = sd_fuzz_u8(&in) % 4;
        if (k <= 1) fgen_generate(&in, &fe);
        else if (k == 2) fgen_forward(&in, &fe);
        else fgen_truncate(&in, &fe);
    }
    specdec_engine_free(fe.e);
    return 0;
}

SD_FUZZ_DEFINE_ENTRY_WITH_INIT

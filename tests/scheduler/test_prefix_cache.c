/* test_prefix_cache.c — how the scheduler prefills: its automatic prefix cache
 * (specdec_prefix_cache, docs/BATCHING.md "Prefix cache") and chunked prefill
 * (prefill_chunk, "Chunked prefill") on the bundled pair: outputs stay exactly what
 * specdec_generate alone gives, and both work as documented.
 *   1. AUTO (the default): request 0 (a long shared system text + a question) alone,
 *      then a wave of 7 requests, the same system text with other questions and request
 *      0 again, in every mode that reproduces (greedy chains, match sampling, fixed-seed
 *      rejection, n-gram drafts, a draft tree, plain seeded sampling), then a second turn
 *      (request 0's prompt + its output + more). Every output and its speculative
 *      statistics equal the reference. n_cached_prompt: 0 for the first request; for the
 *      others a multiple of the block size, at most their n_prompt - 1, at least the
 *      full blocks they share with request 0's prompt + output (the second turn: beyond
 *      the first prompt, so a finished request's output rows are reused); the metrics'
 *      queries and hits are the sums of n_prompt - 1 and n_cached_prompt; finished
 *      requests leave cached blocks (kv_blocks_cached > 0, kv_blocks_used 0).
 *   2. OFF: the same requests, the same outputs, nothing cached, metrics 0.
 *   3. A pool of 40 blocks of 8 tokens: 24 requests over 4 system texts (blocks are
 *      evicted and reused all the time): every output equals its reference; some hits.
 *   4. A request asking for prompt log-probabilities takes nothing from the cache (it
 *      needs the prompt's logits) and its records equal the reference's.
 *   5. Parameters: ON works with the bundled pair; prefix_cache 3 is INVALID_ARGUMENT;
 *      ON with a model whose every layer slides (tests/models/fixtures/mistral_window) is
 *      UNSUPPORTED, AUTO there runs without the cache.
 *   6. Chunked prefill (prefill_chunk): parts 1 and 3 again with chunks of 7 and 5 rows
 *      (outputs equal, the n choices still share); a ~350-token prompt joining in chunks of
 *      8 lets a running request decode >= 30 tokens before the newcomer's first token,
 *      where in one chunk (the default) it decodes <= 10; prefill_chunk -1 is refused.
 *   7. Admission counts shared blocks once: 6 requests sharing a ~200-token text, each
 *      reserving 15 of a 40-block pool, run >= 4 at once with the cache (the running ones
 *      hold the shared blocks once) and 2 at once without; outputs equal, the pool never
 *      exceeded (metrics sampled on every token).
 *   8. Cache salts (cache_salt): one prompt with salts 0, 9, 9, 0, 10 in turn finds cached
 *      rows only after an earlier request of the same salt (0, 0, > 0, > 0, 0); outputs equal.
 * Under the sanitizers (ctest passes `4 sanitized`) every part runs, 6 without its repeats of
 * parts 1 and 3 and its run in one chunk, 7 with 4 requests: ~50 s under ASan since the CPU
 * kernels' hot loops run uninstrumented (kernels/cpu/sd_cpu_sanitize.h). `quick`: parts 1, 5
 * and 6 only.
 * Usage: test_prefix_cache [--cuda] TARGET_DIR DRAFT_DIR FIXTURES_DIR [N_EVICT (<= 24) [quick|sanitized]] */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>

#include "sched_common.h"

#define N_PREDICT 24
#define MAX_PROMPT 256
#define MAX_LP (MAX_PROMPT + N_PREDICT)
#define MAX_REQ 24
#define BT 16

static const char *const SYSTEMS[] = {
    "And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them, When any man of "
    "you bring an offering unto the LORD, ye shall bring your offering of the cattle, even of the herd, and of the "
    "flock. ",
    "In the beginning was the Word, and the Word was with God, and the Word was God. The same was in the beginning "
    "with God. All things were made by him; and without him was not any thing made that was made. ",
    "Blessed is the man that walketh not in the counsel of the ungodly, nor standeth in the way of sinners, nor "
    "sitteth in the seat of the scornful. But his delight is in the law of the LORD. ",
    "The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures: he leadeth me beside the "
    "still waters. He restoreth my soul. ",
};

typedef struct req {
    int32_t prompt[MAX_PROMPT], n_prompt;
    specdec_generate_params gp;
    int32_t ref[N_PREDICT], n_ref, out[N_PREDICT], n_out;
    specdec_stats ref_st, st;
    specdec_request_id id;
} req;

/* Request params by kind (all reproducible across batching). */
static specdec_generate_params kind_params(int kind, uint64_t seed) {
    specdec_generate_params gp = sc_params(kind == 1 ? 1 : 0, seed, N_PREDICT, 4);
    if (kind == 2 || kind == 5) { /* fixed-seed rejection sampling (fixed γ) */
        gp.temperature = 0.9f;
        gp.verify = SPECDEC_VERIFY_REJECTION;
        gp.seed = seed;
        gp.n_draft = 3;
    }
    if (kind == 3) { /* decisions reproducible run to run (MEASURED follows timings) */
        gp.draft_method = SPECDEC_DRAFT_NGRAM;
        gp.ngram_cost = SPECDEC_NGRAM_COST_OFF;
    }
    if (kind == 4) {
        const int32_t widths[2] = {2, 2};
        SD_CHECK(specdec_generate_params_set_tree(&gp, widths, 2) == SPECDEC_OK, "tree: %s", specdec_last_error());
    }
    if (kind == 5) {
        gp.draft_method = SPECDEC_DRAFT_NONE;
        gp.n_draft = 0;
    }
    return gp;
}

static int make_req(sc_env *e, req *r, const char *sys, const char *question, int kind, uint64_t seed) {
    char text[1024];
    snprintf(text, sizeof text, "%s%s", sys, question);
    memset(r, 0, sizeof *r);
    r->n_prompt = sc_encode(e, text, r->prompt, MAX_PROMPT);
    r->gp = kind_params(kind, seed);
    r->n_ref = r->n_prompt > 0 ? sc_reference(e, r->prompt, r->n_prompt, &r->gp, r->ref, N_PREDICT, &r->ref_st) : -1;
    SD_CHECK(r->n_prompt > 0 && r->n_ref > 0, "request %s: prompt %d, reference %d", question, r->n_prompt, r->n_ref);
    return r->n_ref > 0 ? 0 : 1;
}

static int32_t g_chunk; /* prefill_chunk of the schedulers made (0: the default) */

static specdec_scheduler *make_sched(const sc_env *e, int32_t prefix, int32_t max_active, int32_t bt, int32_t blocks) {
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.prefill_chunk = g_chunk;
    sp.max_active = max_active;
    sp.kv_block_tokens = bt;
    sp.kv_pool_blocks = blocks;
    sp.prefix_cache = prefix;
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_OK, "scheduler: %s",
             specdec_last_error());
    return s;
}

static void submit(specdec_scheduler *s, req *r) {
    SD_CHECK(specdec_scheduler_submit(s, r->prompt, r->n_prompt, &r->gp, &r->id) == SPECDEC_OK, "submit: %s",
             specdec_scheduler_last_error(s));
}

/* Wait for r and compare with its reference: tokens and speculative statistics. */
static void collect(specdec_scheduler *s, req *r, const char *what) {
    specdec_status outcome = SPECDEC_OK;
    SD_CHECK(specdec_scheduler_wait(s, r->id, -1, r->out, N_PREDICT, &r->n_out, &r->st, &outcome) == SPECDEC_OK &&
                 outcome == SPECDEC_OK,
             "%s: wait (%s)", what, specdec_scheduler_last_error(s));
    SD_CHECK(r->n_out == r->n_ref && sc_same(r->out, r->ref, r->n_out), "%s: tokens equal the reference (%d vs %d)",
             what, r->n_out, r->n_ref);
    SD_CHECK(r->st.n_rounds == r->ref_st.n_rounds && r->st.n_drafted == r->ref_st.n_drafted &&
                 r->st.n_accepted == r->ref_st.n_accepted && r->st.stop_reason == r->ref_st.stop_reason,
             "%s: statistics equal (rounds %lld/%lld accepted %lld/%lld)", what, (long long)r->st.n_rounds,
             (long long)r->ref_st.n_rounds, (long long)r->st.n_accepted, (long long)r->ref_st.n_accepted);
    SD_CHECK(r->ref_st.n_cached_prompt == 0, "specdec_generate never reports cached prompt tokens");
}

/* Rows of a's first `limit` tokens that b starts with, in whole blocks. */
static int32_t common_blocks(const int32_t *a, int32_t na, const int32_t *b, int32_t nb, int32_t limit, int32_t bt) {
    int32_t k = 0;
    while (k < na && k < nb && k < limit && a[k] == b[k]) k++;
    return k / bt * bt;
}

/* ---- 1 and 2 ------------------------------------------------------------------------- */
#define WAVE 7
/* Long questions that diverge inside full blocks, after a few equal words. */
static const char *const QUESTIONS[WAVE] = {
    "And God said unto Noah, The end of all flesh is come before me; for the earth is filled with violence",
    "And God said unto Moses, I AM THAT I AM: and he said, Thus shalt thou say unto the children of Israel",
    "And God said unto Jacob, Arise, go up to Bethel, and dwell there: and make there an altar unto God",
    "Then answered Jesus and said unto them, Verily, verily, I say unto you, The Son can do nothing of himself",
    "Then answered Peter and said unto him, Behold, we have forsaken all, and followed thee",
    "And it came to pass, when the king heard the words of the law, that he rent his clothes",
    "And God said unto Noah, The end of all flesh is come before me; for the earth is filled with violence"};

static void waves(sc_env *e, int32_t prefix) {
    const int on = prefix != SPECDEC_PREFIX_CACHE_OFF;
    const char *tag = on ? "AUTO" : "OFF";
    static req r[WAVE + 2];
    if (make_req(e, &r[0], SYSTEMS[0], QUESTIONS[0], 0, 1)) return;
    for (int i = 1; i <= WAVE; i++)
        if (make_req(e, &r[i], SYSTEMS[0], QUESTIONS[i - 1], i == WAVE ? 0 : i % 6, 100 + i)) return;
    specdec_scheduler *s = make_sched(e, prefix, 8, BT, 0);
    if (!s) return;
    submit(s, &r[0]);
    collect(s, &r[0], "first");
    SD_CHECK(r[0].st.n_cached_prompt == 0, "%s: the first request finds nothing (%lld)", tag,
             (long long)r[0].st.n_cached_prompt);
    specdec_scheduler_metrics m;
    SD_CHECK(specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK, "metrics");
    SD_CHECK(on ? (m.kv_blocks_cached > 0 && m.kv_blocks_used == 0 && m.draft_kv_blocks_cached > 0)
                : m.kv_blocks_cached == 0,
             "%s: after one request: %d blocks cached (draft %d), %d used", tag, m.kv_blocks_cached,
             m.draft_kv_blocks_cached, m.kv_blocks_used);
    /* request 0's whole sequence, whose full blocks are cached now */
    int32_t seq0[MAX_PROMPT + N_PREDICT];
    memcpy(seq0, r[0].prompt, (size_t)r[0].n_prompt * sizeof(int32_t));
    memcpy(seq0 + r[0].n_prompt, r[0].out, (size_t)r[0].n_out * sizeof(int32_t));
    const int32_t n_seq0 = r[0].n_prompt + r[0].n_out;
    /* the second turn: request 0's sequence, then more */
    req *turn = &r[WAVE + 1];
    memset(turn, 0, sizeof *turn);
    memcpy(turn->prompt, seq0, (size_t)n_seq0 * sizeof(int32_t));
    const int32_t more = sc_encode(e, "And Moses said", turn->prompt + n_seq0, MAX_PROMPT - n_seq0);
    SD_CHECK(more >= 2, "encode");
    memmove(turn->prompt + n_seq0, turn->prompt + n_seq0 + 1, (size_t)(more - 1) * sizeof(int32_t)); /* its BOS */
    turn->n_prompt = n_seq0 + more - 1;
    turn->gp = kind_params(0, 7);
    turn->n_ref = sc_reference(e, turn->prompt, turn->n_prompt, &turn->gp, turn->ref, N_PREDICT, &turn->ref_st);
    for (int i = 1; i <= WAVE + 1; i++) submit(s, &r[i]);
    int64_t queries = r[0].n_prompt - 1, hits = r[0].st.n_cached_prompt;
    for (int i = 1; i <= WAVE + 1; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s request %d", tag, i);
        collect(s, &r[i], what);
        const int64_t c = r[i].st.n_cached_prompt;
        const int32_t lo = common_blocks(seq0, n_seq0 - 1, r[i].prompt, r[i].n_prompt, r[i].n_prompt - 1, BT);
        SD_CHECK(on ? (c % BT == 0 && c <= r[i].n_prompt - 1 && c >= lo) : c == 0,
                 "%s: %lld cached prompt tokens (n_prompt %d; shares %d rows in blocks with request 0)", what,
                 (long long)c, r[i].n_prompt, lo);
        queries += r[i].n_prompt - 1;
        hits += c;
    }
    SD_CHECK(!on || turn->st.n_cached_prompt > (r[0].n_prompt - 1) / BT * BT,
             "the second turn reuses request 0's output rows too (%lld cached, its prompt had %d)",
             (long long)turn->st.n_cached_prompt, r[0].n_prompt);
    SD_CHECK(!on || r[1].st.n_cached_prompt >= 48, "a shared system text of %d tokens is reused (%lld)", r[1].n_prompt,
             (long long)r[1].st.n_cached_prompt);
    SD_CHECK(specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK, "metrics");
    SD_CHECK(m.prefix_cache_queries == (on ? queries : 0) && m.prefix_cache_hits == (on ? hits : 0),
             "%s: metrics queries %lld (want %lld), hits %lld (want %lld)", tag, (long long)m.prefix_cache_queries,
             (long long)(on ? queries : 0), (long long)m.prefix_cache_hits, (long long)(on ? hits : 0));
    printf("%s: %lld of %lld prompt tokens from the cache\n", tag, (long long)hits, (long long)queries);
    specdec_scheduler_free(s);
}

/* ---- 3. eviction ------------------------------------------------------------------------ */
static void eviction(sc_env *e, int n_req) {
    static req r[MAX_REQ];
    uint64_t rs = 99;
    for (int i = 0; i < n_req; i++)
        if (make_req(e, &r[i], SYSTEMS[sc_rand_int(&rs, 0, 3)], QUESTIONS[sc_rand_int(&rs, 0, WAVE - 1)],
                     sc_rand_int(&rs, 0, 5), 1000 + i))
            return;
    specdec_scheduler *s = make_sched(e, SPECDEC_PREFIX_CACHE_AUTO, 3, 8, 40);
    if (!s) return;
    for (int i = 0; i < n_req; i++) submit(s, &r[i]);
    int64_t hits = 0;
    for (int i = 0; i < n_req; i++) {
        char what[64];
        snprintf(what, sizeof what, "small pool, request %d", i);
        collect(s, &r[i], what);
        hits += r[i].st.n_cached_prompt;
    }
    specdec_scheduler_metrics m;
    SD_CHECK(specdec_scheduler_get_metrics(s, &m) == SPECDEC_OK && m.kv_blocks_cached <= m.kv_blocks_total &&
                 m.kv_blocks_used == 0,
             "small pool: %d cached of %d", m.kv_blocks_cached, m.kv_blocks_total);
    SD_CHECK(hits > 0 && m.prefix_cache_hits == hits, "small pool: %lld tokens from the cache (metrics %lld)",
             (long long)hits, (long long)m.prefix_cache_hits);
    printf("small pool: %lld prompt tokens from the cache over %d requests\n", (long long)hits, n_req);
    specdec_scheduler_free(s);
}

/* ---- 4. prompt log-probabilities ------------------------------------------------------- */
typedef struct lp_rec {
    int32_t n;
    float lp[MAX_LP];
} lp_rec;

static int on_lp(void *ud, const specdec_token_logprobs *rec) {
    lp_rec *l = ud;
    if (l->n < MAX_LP) l->lp[l->n++] = rec->logprob;
    return 0;
}

static void prompt_logprobs(sc_env *e) {
    req r;
    if (make_req(e, &r, SYSTEMS[1], QUESTIONS[2], 0, 5)) return;
    lp_rec ref = {0}, got = {0};
    specdec_generate_params gp = r.gp;
    gp.prompt_logprobs = 1;
    gp.logprob_callback = on_lp;
    gp.logprob_user_data = &ref;
    int32_t n = 0;
    specdec_stats st;
    SD_CHECK(specdec_generate(e->ref, r.prompt, r.n_prompt, &gp, r.ref, N_PREDICT, &n, &st) == SPECDEC_OK,
             "reference with prompt logprobs");
    specdec_scheduler *s = make_sched(e, SPECDEC_PREFIX_CACHE_AUTO, 2, BT, 0);
    if (!s) return;
    submit(s, &r); /* the same prompt without logprobs first: its blocks get cached */
    collect(s, &r, "before prompt logprobs");
    r.gp = gp;
    r.gp.logprob_user_data = &got;
    submit(s, &r);
    collect(s, &r, "prompt logprobs");
    SD_CHECK(r.st.n_cached_prompt == 0, "prompt logprobs: nothing from the cache (%lld)",
             (long long)r.st.n_cached_prompt);
    SD_CHECK(got.n >= r.n_prompt - 1 && got.n == ref.n && memcmp(got.lp, ref.lp, (size_t)got.n * sizeof(float)) == 0,
             "prompt logprobs: %d records, bitwise the reference's %d", got.n, ref.n);
    specdec_scheduler_free(s);
}

/* ---- 5. parameters ---------------------------------------------------------------------- */
static void params(sc_env *e, const char *fx) {
    specdec_scheduler *s = make_sched(e, SPECDEC_PREFIX_CACHE_ON, 2, BT, 0);
    specdec_scheduler_free(s);
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.prefix_cache = 3;
    s = NULL;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_ERR_INVALID_ARGUMENT && !s &&
                 strstr(specdec_last_error(), "prefix_cache"),
             "prefix_cache 3: %s", specdec_last_error());
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/mistral_window", fx);
    specdec_model *w = NULL;
    SD_CHECK(specdec_model_load(dir, NULL, &w) == SPECDEC_OK, "load %s: %s", dir, specdec_last_error());
    if (!w) return;
    sp.prefix_cache = SPECDEC_PREFIX_CACHE_ON;
    sp.max_active = 2;
    SD_CHECK(specdec_scheduler_create(w, NULL, &ep, &sp, &s) == SPECDEC_ERR_UNSUPPORTED && !s &&
                 strstr(specdec_last_error(), "slides"),
             "ON, every layer sliding: %s", specdec_last_error());
    sp.prefix_cache = SPECDEC_PREFIX_CACHE_AUTO;
    SD_CHECK(specdec_scheduler_create(w, NULL, &ep, &sp, &s) == SPECDEC_OK, "AUTO, sliding: %s", specdec_last_error());
    int32_t prompt[40], out[4], n = 0;
    for (int i = 0; i < 40; i++) prompt[i] = 3 + i % 50;
    specdec_generate_params gp = sc_params(0, 0, 4, 0);
    for (int k = 0; s && k < 2; k++) {
        specdec_request_id id = 0;
        specdec_stats st;
        specdec_status outcome = SPECDEC_OK;
        SD_CHECK(specdec_scheduler_submit(s, prompt, 40, &gp, &id) == SPECDEC_OK &&
                     specdec_scheduler_wait(s, id, -1, out, 4, &n, &st, &outcome) == SPECDEC_OK && outcome == SPECDEC_OK,
                 "windowed request %d", k);
        SD_CHECK(st.n_cached_prompt == 0, "windowed: nothing cached (%lld)", (long long)st.n_cached_prompt);
    }
    specdec_scheduler_free(s);
    specdec_model_free(w);
}

/* ---- 6. chunked prefill ---------------------------------------------------------------- */
typedef struct race {
    atomic_int a_tokens; /* tokens request A emitted so far */
    atomic_int a_at_b;   /* A's count when B emitted its first token (-1: not yet) */
} race;

static int on_a(void *ud, int32_t token, const char *piece, size_t len) {
    (void)token, (void)piece, (void)len;
    atomic_fetch_add(&((race *)ud)->a_tokens, 1);
    return 0;
}
static int on_b(void *ud, int32_t token, const char *piece, size_t len) {
    (void)token, (void)piece, (void)len;
    race *x = ud;
    int expect = -1;
    atomic_compare_exchange_strong(&x->a_at_b, &expect, atomic_load(&x->a_tokens));
    return 0;
}

/* A decodes; B, a long prompt, joins: A's tokens emitted between B's submit and B's first
 * token. */
static int a_tokens_while_b_joins(sc_env *e, int32_t chunk) {
    static int32_t pa[8], pb[480];
    char text[4096];
    snprintf(text, sizeof text, "%s%s%s%s%s%s%s", SYSTEMS[0], SYSTEMS[1], SYSTEMS[2], SYSTEMS[3], SYSTEMS[0],
             SYSTEMS[1], SYSTEMS[2]);
    const int32_t na = sc_encode(e, "And God said", pa, 8), nb = sc_encode(e, text, pb, 480);
    g_chunk = chunk;
    specdec_scheduler *s = make_sched(e, SPECDEC_PREFIX_CACHE_OFF, 2, BT, 0);
    g_chunk = 0;
    if (!s || na <= 0 || nb < 300) {
        SD_CHECK(0, "setup: %d / %d tokens", na, nb);
        specdec_scheduler_free(s);
        return -1;
    }
    race x;
    atomic_init(&x.a_tokens, 0);
    atomic_init(&x.a_at_b, -1);
    specdec_generate_params ga = sc_params(0, 0, 400, 4), gb = sc_params(0, 0, 4, 4);
    ga.ignore_eos = 1;
    ga.callback = on_a;
    ga.user_data = &x;
    gb.callback = on_b;
    gb.user_data = &x;
    specdec_request_id ia = 0, ib = 0;
    SD_CHECK(specdec_scheduler_submit(s, pa, na, &ga, &ia) == SPECDEC_OK, "submit A");
    while (atomic_load(&x.a_tokens) < 5) sc_sleep_us(200);
    const int at_submit = atomic_load(&x.a_tokens);
    SD_CHECK(specdec_scheduler_submit(s, pb, nb, &gb, &ib) == SPECDEC_OK, "submit B");
    int32_t out[400], n = 0;
    specdec_status outcome;
    SD_CHECK(specdec_scheduler_wait(s, ib, -1, out, 400, &n, NULL, &outcome) == SPECDEC_OK && outcome == SPECDEC_OK,
             "B");
    SD_CHECK(specdec_scheduler_cancel(s, ia) == SPECDEC_OK, "cancel A");
    (void)specdec_scheduler_wait(s, ia, -1, out, 400, &n, NULL, &outcome);
    specdec_scheduler_free(s);
    const int during = atomic_load(&x.a_at_b) - at_submit;
    printf("chunked prefill %d: A emitted %d tokens while B's %d-token prompt joined\n", chunk, during, nb);
    return during;
}

static void chunked(sc_env *e, int quick) {
    /* outputs: the waves and the small pool again with odd chunks (not block multiples) */
    g_chunk = 7;
    if (!quick) waves(e, SPECDEC_PREFIX_CACHE_AUTO);
    g_chunk = 5;
    if (!quick) eviction(e, 6);
    g_chunk = 0;
    /* B's ~350-token prompt in chunks of 8: A keeps decoding through ~40 rounds; in one
     * chunk (the default: no limit) A runs at most the round B joins and the one in
     * flight when it was submitted (<= 2 x (γ + 1) tokens) */
    const int split = a_tokens_while_b_joins(e, 8), whole = quick ? 0 : a_tokens_while_b_joins(e, 0);
    SD_CHECK(split >= 30, "chunks of 8: A decoded %d tokens while B joined (>= 30)", split);
    if (!quick) SD_CHECK(whole >= 0 && whole <= 10, "one chunk: A decoded %d tokens while B joined (<= 10)", whole);
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.prefill_chunk = -1;
    specdec_scheduler *s = NULL;
    SD_CHECK(specdec_scheduler_create(e->tm, e->dm, &ep, &sp, &s) == SPECDEC_ERR_INVALID_ARGUMENT && !s &&
                 strstr(specdec_last_error(), "prefill_chunk"),
             "prefill_chunk -1: %s", specdec_last_error());
}

/* ---- 7. admission counts shared blocks once ---------------------------------------------- */
typedef struct watch {
    specdec_scheduler *s;
    atomic_int max_active, over;
} watch;

static int on_watch(void *ud, int32_t token, const char *piece, size_t len) {
    (void)token, (void)piece, (void)len;
    watch *w = ud;
    specdec_scheduler_metrics m;
    if (specdec_scheduler_get_metrics(w->s, &m) != SPECDEC_OK) return 0;
    if (m.active > atomic_load(&w->max_active)) atomic_store(&w->max_active, m.active);
    if (m.kv_blocks_used > m.kv_blocks_total || m.draft_kv_blocks_used > m.draft_kv_blocks_total)
        atomic_store(&w->over, 1);
    return 0;
}

/* 6 requests of one ~200-token text + a question in a pool of 40 blocks of 16: each
 * reserves 15; the most running at once. */
static int shared_admission(sc_env *e, int32_t prefix, int n_req) {
    static req r[WAVE];
    char sys[2048];
    snprintf(sys, sizeof sys, "%s%s%s%s", SYSTEMS[0], SYSTEMS[1], SYSTEMS[2], SYSTEMS[3]);
    for (int i = 0; i < n_req; i++)
        if (make_req(e, &r[i], sys, QUESTIONS[i], i % 2, 300 + i)) return -1;
    specdec_scheduler *s = make_sched(e, prefix, 8, BT, 40);
    if (!s) return -1;
    watch w;
    w.s = s;
    atomic_init(&w.max_active, 0);
    atomic_init(&w.over, 0);
    for (int i = 0; i < n_req; i++) {
        specdec_generate_params gp = r[i].gp;
        gp.callback = on_watch;
        gp.user_data = &w;
        SD_CHECK(specdec_scheduler_submit(s, r[i].prompt, r[i].n_prompt, &gp, &r[i].id) == SPECDEC_OK, "submit: %s",
                 specdec_scheduler_last_error(s));
    }
    for (int i = 0; i < n_req; i++) collect(s, &r[i], prefix ? "shared admission, cache OFF" : "shared admission");
    SD_CHECK(!atomic_load(&w.over), "the pool is never exceeded");
    specdec_scheduler_free(s);
    const int32_t need = (r[0].n_prompt + N_PREDICT + BT - 1) / BT;
    printf("shared admission (cache %s): at most %d of %d requests at once (each reserves %d of 40 blocks)\n",
           prefix ? "OFF" : "AUTO", atomic_load(&w.max_active), n_req, need);
    return atomic_load(&w.max_active);
}

static void admission(sc_env *e, int quick) {
    const int n = quick ? 4 : 6;
    const int on = shared_admission(e, SPECDEC_PREFIX_CACHE_AUTO, n);
    const int off = quick ? 2 : shared_admission(e, SPECDEC_PREFIX_CACHE_OFF, n);
    SD_CHECK(off == 2, "without the cache: 2 at once (%d)", off);
    SD_CHECK(on >= 4, "with the cache: shared blocks counted once, >= 4 at once (%d)", on);
}

/* ---- 8. cache salts ----------------------------------------------------------------------- */
static void salts(sc_env *e) {
    req r;
    if (make_req(e, &r, SYSTEMS[3], QUESTIONS[4], 1, 77)) return;
    specdec_scheduler *s = make_sched(e, SPECDEC_PREFIX_CACHE_AUTO, 2, BT, 0);
    if (!s) return;
    static const uint64_t salt[5] = {0, 9, 9, 0, 10};
    int64_t cached[5];
    for (int k = 0; k < 5; k++) {
        r.gp.cache_salt = salt[k];
        submit(s, &r);
        collect(s, &r, "salted");
        cached[k] = r.st.n_cached_prompt;
    }
    SD_CHECK(cached[0] == 0 && cached[1] == 0 && cached[2] > 0 && cached[3] > 0 && cached[4] == 0,
             "salts 0, 9, 9, 0, 10: cached %lld %lld %lld %lld %lld (want 0, 0, >0, >0, 0)", (long long)cached[0],
             (long long)cached[1], (long long)cached[2], (long long)cached[3], (long long)cached[4]);
    specdec_scheduler_free(s);
}

int main(int argc, char **argv) {
    const int cuda = sc_backend_arg(argc, argv);
    if (cuda < 0) return sd_test_skip("no CUDA device");
    argv += cuda;
    argc -= cuda;
    if (argc < 4) {
        fprintf(stderr, "usage: test_prefix_cache [--cuda] TARGET_DIR DRAFT_DIR FIXTURES_DIR\n");
        return 2;
    }
    /* "quick": parts 1, 5 and 6 (small); "sanitized": every part, 6 and 7 small (the sanitizer builds) */
    const int sanitized = argc > 5 && !strcmp(argv[5], "sanitized");
    const int n_evict = argc > 4 ? atoi(argv[4]) : MAX_REQ, quick = sanitized || (argc > 5 && !strcmp(argv[5], "quick"));
    const int every = !quick || sanitized;
    if (n_evict < 1 || n_evict > MAX_REQ) {
        fprintf(stderr, "N_EVICT %s outside [1, %d]\n", argv[4], MAX_REQ);
        return 2;
    }
    sc_env e;
    if (sc_env_load(&e, argv[1], argv[2])) return 1;
    double t = sc_now();
#define PART(name, call)                                                      \
    do {                                                                      \
        call;                                                                 \
        printf("  %-22s %6.1f s\n", name, sc_now() - t);                      \
        t = sc_now();                                                         \
    } while (0)
    PART("1. AUTO", waves(&e, SPECDEC_PREFIX_CACHE_AUTO));
    if (every) PART("2. OFF", waves(&e, SPECDEC_PREFIX_CACHE_OFF));
    if (every) PART("3. eviction", eviction(&e, n_evict));
    if (every) PART("4. prompt logprobs", prompt_logprobs(&e));
    PART("5. parameters", params(&e, argv[3]));
    PART("6. chunked prefill", chunked(&e, quick));
    if (every) PART("7. admission", admission(&e, quick));
    if (every) PART("8. salts", salts(&e));
#undef PART
    sc_env_free(&e);
    return sd_test_done();
}

/* test_tree_api.c — the public side of tree speculation (include/specdec.h 0.2):
 *  - ABI: specdec_generate_params and specdec_stats keep their 0.1 size and the offset
 *    of every 0.1 field (compile-time checks against a copy of the 0.1 layout); the new
 *    fields live in what was reserved;
 *  - specdec_generate_params_set_tree accepts good shapes and refuses bad ones with
 *    INVALID_ARGUMENT and a message, the params unchanged;
 *  - bad tree requests to specdec_generate (a zero inside the shape, more than 64 nodes,
 *    a width above 64, draft_nodes out of range, no drafter, adaptive_draft, an unknown
 *    draft_method, reserved) return INVALID_ARGUMENT with a message and change nothing in
 *    the engine (KV lengths, and the next generation's output);
 *  - the statistics of trees and chains (n_draft_rounds, mean_accepted_length,
 *    nodes_per_round) agree with the counts;
 *  - sd_round_tree_check (the check the protocol runs on every tree) on good and bad
 *    shapes, and the protocol refusing a bad tree with the caches unchanged;
 *  - the fallback: an engine whose device executor does not accept trees (a fake
 *    device executor here, as the CUDA ones) runs tree rounds on the host executor,
 *    with output identical to plain decoding, and chains still on the device one. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "markov_tree.h"
#include "sd_engine.h"
#include "sd_host_round.h"
#include "sd_test.h"

/* ---- ABI: the 0.1 layouts ---------------------------------------------------------- */
typedef struct v01_generate_params {
    int32_t n_predict;
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
    uint64_t seed;
    uint64_t sequence_id;
    specdec_verify_mode verify;
    int32_t n_draft;
    int32_t adaptive_draft;
    int32_t ignore_eos;
    const char *const *stop_strings;
    int32_t n_stop_strings;
    const specdec_tokenizer *tokenizer;
    specdec_token_callback callback;
    void *user_data;
    int32_t reserved_i[8];
    uint64_t reserved[8];
} v01_generate_params;

typedef struct v01_stats {
    int64_t n_prompt, n_generated, n_rounds, n_drafted, n_accepted;
    double acceptance_rate, tokens_per_round, t_prefill_s, t_draft_s, t_target_s, t_verify_s, t_total_s,
        tokens_per_second;
    int32_t final_n_draft;
    specdec_stop_reason stop_reason;
    uint64_t reserved[8];
} v01_stats;

#define SAME_OFFSET(T, O, f) _Static_assert(offsetof(T, f) == offsetof(O, f), #f " moved")
/* 0.5 grew the struct (soname libspecdec.so.0.5): everything before it keeps its offset */
_Static_assert(sizeof(specdec_generate_params) > sizeof(v01_generate_params), "generate params shrank");
SAME_OFFSET(specdec_generate_params, v01_generate_params, n_predict);
SAME_OFFSET(specdec_generate_params, v01_generate_params, temperature);
SAME_OFFSET(specdec_generate_params, v01_generate_params, top_k);
SAME_OFFSET(specdec_generate_params, v01_generate_params, top_p);
SAME_OFFSET(specdec_generate_params, v01_generate_params, min_p);
SAME_OFFSET(specdec_generate_params, v01_generate_params, seed);
SAME_OFFSET(specdec_generate_params, v01_generate_params, sequence_id);
SAME_OFFSET(specdec_generate_params, v01_generate_params, verify);
SAME_OFFSET(specdec_generate_params, v01_generate_params, n_draft);
SAME_OFFSET(specdec_generate_params, v01_generate_params, adaptive_draft);
SAME_OFFSET(specdec_generate_params, v01_generate_params, ignore_eos);
SAME_OFFSET(specdec_generate_params, v01_generate_params, stop_strings);
SAME_OFFSET(specdec_generate_params, v01_generate_params, n_stop_strings);
SAME_OFFSET(specdec_generate_params, v01_generate_params, tokenizer);
SAME_OFFSET(specdec_generate_params, v01_generate_params, callback);
SAME_OFFSET(specdec_generate_params, v01_generate_params, user_data);
_Static_assert(offsetof(specdec_generate_params, tree_width) == offsetof(v01_generate_params, reserved_i),
               "tree_width is the old reserved_i");
_Static_assert(offsetof(specdec_generate_params, ngram_max) + sizeof(int32_t) ==
                   offsetof(v01_generate_params, reserved_i) + sizeof(((v01_generate_params *)0)->reserved_i),
               "the 0.2 and 0.4 fields fill exactly the old reserved_i");
/* 0.4: the round callback takes the old reserved[0..1] (LP64) */
_Static_assert(offsetof(specdec_generate_params, round_callback) == offsetof(v01_generate_params, reserved),
               "round_callback is the old reserved[0]");
/* 0.4: ngram_cost and ngram_token_cost fill exactly the first uint64_t after round_user_data */
_Static_assert(offsetof(specdec_generate_params, ngram_cost) ==
                   offsetof(specdec_generate_params, round_user_data) + sizeof(void *) &&
                   offsetof(specdec_generate_params, ngram_token_cost) ==
                       offsetof(specdec_generate_params, ngram_cost) + 4 &&
                   offsetof(specdec_generate_params, logprobs) == offsetof(specdec_generate_params, ngram_cost) + 8 &&
                   sizeof(specdec_ngram_cost) == 4,
               "ngram_cost / ngram_token_cost are one old reserved uint64_t");
/* 0.4.1: logprobs / top_logprobs fill the next uint64_t, the callback and its user data the two after,
 * prompt_logprobs / prompt_top_logprobs the next */
_Static_assert(offsetof(specdec_generate_params, top_logprobs) == offsetof(specdec_generate_params, logprobs) + 4 &&
                   offsetof(specdec_generate_params, logprob_callback) ==
                       offsetof(specdec_generate_params, logprobs) + 8 &&
                   offsetof(specdec_generate_params, logprob_user_data) ==
                       offsetof(specdec_generate_params, logprob_callback) + sizeof(void *) &&
                   offsetof(specdec_generate_params, prompt_logprobs) ==
                       offsetof(specdec_generate_params, logprob_user_data) + sizeof(void *) &&
                   offsetof(specdec_generate_params, prompt_top_logprobs) ==
                       offsetof(specdec_generate_params, prompt_logprobs) + 4 &&
                   offsetof(specdec_generate_params, cache_salt) ==
                       offsetof(specdec_generate_params, prompt_logprobs) + 8,
               "the 0.4.1 logprob fields are 0.4.0's reserved[0..3]");
/* 0.4.1: cache_salt is 0.4.0's last reserved uint64_t, and ends 0.4's struct where reserved did */
_Static_assert(offsetof(specdec_generate_params, cache_salt) + sizeof(uint64_t) ==
                   offsetof(v01_generate_params, reserved) + sizeof(((v01_generate_params *)0)->reserved),
               "cache_salt ends 0.4's struct where reserved did");
/* 0.5: the logits processors follow cache_salt, then new reserved space; no padding */
_Static_assert(offsetof(specdec_generate_params, logit_bias) == sizeof(v01_generate_params) &&
                   sizeof(specdec_generate_params) ==
                       offsetof(specdec_generate_params, reserved) + sizeof(((specdec_generate_params *)0)->reserved) &&
                   sizeof(specdec_logit_bias) == 8,
               "0.5's fields start where 0.4's struct ended");
/* 0.5.1: grammar, then int32_t reserved_i[8] and uint64_t reserved[7]; 0.5.2:
 * n_allowed_token_ids and n_bad_words take 0.5.1's reserved_i[0..1], the three mask pointers its
 * reserved[0..2]; 0.5.4: n_grammar_after_tokens takes 0.5.3's reserved_i[0], grammar_after_tokens
 * its reserved[0]; the size is 0.5.0's */
#define GP_OFF(f) offsetof(specdec_generate_params, f)
_Static_assert(GP_OFF(n_allowed_token_ids) == GP_OFF(grammar) + 8 && GP_OFF(n_bad_words) == GP_OFF(grammar) + 12 &&
                   GP_OFF(n_grammar_after_tokens) == GP_OFF(grammar) + 16 &&
                   GP_OFF(reserved_i) == GP_OFF(grammar) + 20 &&
                   GP_OFF(allowed_token_ids) == GP_OFF(grammar) + 8 + 8 * 4 &&
                   GP_OFF(bad_words_ids) == GP_OFF(allowed_token_ids) + 8 &&
                   GP_OFF(bad_words_offsets) == GP_OFF(allowed_token_ids) + 16 &&
                   GP_OFF(grammar_after_tokens) == GP_OFF(allowed_token_ids) + 24 &&
                   GP_OFF(reserved) == GP_OFF(allowed_token_ids) + 32 &&
                   sizeof(specdec_generate_params) == GP_OFF(grammar) + 8 + 8 * 4 + 7 * 8 &&
                   GP_OFF(grammar) == GP_OFF(repetition_penalty) + 4,
               "0.5.2's masks take reserved space; the struct keeps 0.5.0's size");
#undef GP_OFF
/* 0.4 grew specdec_stats (soname libspecdec.so.0.4): the 0.1 fields keep their offsets,
 * the 0.2 ones fill the old reserved space, the 0.4 ones start where 0.2's reserved[5] was. */
_Static_assert(sizeof(specdec_stats) > sizeof(v01_stats), "stats shrank");
SAME_OFFSET(specdec_stats, v01_stats, n_prompt);
SAME_OFFSET(specdec_stats, v01_stats, n_generated);
SAME_OFFSET(specdec_stats, v01_stats, n_rounds);
SAME_OFFSET(specdec_stats, v01_stats, n_drafted);
SAME_OFFSET(specdec_stats, v01_stats, n_accepted);
SAME_OFFSET(specdec_stats, v01_stats, acceptance_rate);
SAME_OFFSET(specdec_stats, v01_stats, tokens_per_round);
SAME_OFFSET(specdec_stats, v01_stats, t_prefill_s);
SAME_OFFSET(specdec_stats, v01_stats, t_draft_s);
SAME_OFFSET(specdec_stats, v01_stats, t_target_s);
SAME_OFFSET(specdec_stats, v01_stats, t_verify_s);
SAME_OFFSET(specdec_stats, v01_stats, t_total_s);
SAME_OFFSET(specdec_stats, v01_stats, tokens_per_second);
SAME_OFFSET(specdec_stats, v01_stats, final_n_draft);
SAME_OFFSET(specdec_stats, v01_stats, stop_reason);
_Static_assert(offsetof(specdec_stats, n_draft_rounds) == offsetof(v01_stats, reserved), "new stats in reserved");
_Static_assert(offsetof(specdec_stats, t_load_s) == offsetof(v01_stats, reserved) + 3 * 8,
               "the 0.4 stats begin where 0.2's reserved[5] was");

#define V 16
static float g_t[V * V * V], g_d[V * V];

static void test_set_tree(void) {
    specdec_generate_params p = specdec_generate_default_params(), before;
    const int32_t good[4] = {4, 2, 1, 1}, zero[3] = {2, 0, 1}, wide[1] = {65}, many[2] = {8, 8};
    int32_t deep[SPECDEC_MAX_DRAFT + 1];
    for (int i = 0; i <= SPECDEC_MAX_DRAFT; i++) deep[i] = 1;
    SD_CHECK(specdec_generate_params_set_tree(&p, good, 4) == SPECDEC_OK && p.tree_width[0] == 4 &&
                 p.tree_width[3] == 1 && p.tree_width[4] == 0, "set 4,2,1,1");
    SD_CHECK(specdec_generate_params_set_tree(&p, deep, SPECDEC_MAX_DRAFT) == SPECDEC_OK, "depth 16");
    SD_CHECK(specdec_generate_params_set_tree(&p, good, 0) == SPECDEC_OK && p.tree_width[0] == 0, "clear");
    specdec_generate_params_set_tree(&p, good, 4);
    before = p;
    const struct {
        const int32_t *w;
        int32_t depth;
        const char *what;
    } bad[] = {{zero, 3, "a zero"}, {wide, 1, "width 65"}, {many, 2, "72 nodes"},
               {deep, SPECDEC_MAX_DRAFT + 1, "depth 17"}, {good, -1, "depth -1"}, {NULL, 2, "NULL widths"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        specdec_status st = specdec_generate_params_set_tree(&p, bad[i].w, bad[i].depth);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && specdec_last_error()[0] && !memcmp(&p, &before, sizeof p),
                 "set_tree %s: status %d, message '%s'", bad[i].what, (int)st, specdec_last_error());
    }
    SD_CHECK(specdec_generate_params_set_tree(NULL, good, 1) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL params");
}

static specdec_engine *markov_engine(int with_draft) {
    mk_runner *mt = mkt_runner_new(2, g_t, V, 256, 65, 1);
    mk_runner *md = with_draft ? mkt_runner_new(1, g_d, V, 256, 65, 1) : NULL;
    specdec_engine *e = NULL;
    SD_CHECK(sd_engine_create_from_runners(&mt->base, md ? &md->base : NULL, NULL, &e) == SPECDEC_OK, "engine: %s",
             specdec_last_error());
    return e;
}

static const int32_t PROMPT[3] = {3, 5, 7};

static specdec_generate_params base_params(void) {
    specdec_generate_params p = specdec_generate_default_params();
    p.n_predict = 48;
    p.temperature = 0.9f;
    p.verify = SPECDEC_VERIFY_MATCH;
    p.seed = 99;
    p.ignore_eos = 1;
    return p;
}

static void test_bad_requests(void) {
    specdec_engine *e = markov_engine(1), *e_nd = markov_engine(0);
    if (!e || !e_nd) return;
    int32_t ref[64], out[64], n = 0, n2 = 0;
    specdec_generate_params ok = base_params();
    const int32_t w[4] = {4, 2, 1, 1};
    specdec_generate_params_set_tree(&ok, w, 4);
    SD_CHECK(specdec_generate(e, PROMPT, 3, &ok, ref, 64, &n, NULL) == SPECDEC_OK, "good tree request");
    const int32_t kt = specdec_engine_kv_length(e, SPECDEC_ROLE_TARGET), kd = specdec_engine_kv_length(e, SPECDEC_ROLE_DRAFT);
    for (int c = 0; c < 9; c++) {
        specdec_generate_params p = ok;
        const char *what = "";
        switch (c) {
        case 0: p.tree_width[1] = 0, what = "a zero inside the shape"; break;
        case 1: p.tree_width[0] = 8, p.tree_width[1] = 8, what = "8,8,1,1: more than 64 nodes"; break;
        case 2: p.tree_width[0] = 200, what = "width 200"; break;
        case 3: p.draft_nodes = SPECDEC_MAX_TREE_NODES + 1, what = "draft_nodes 65"; break;
        case 4: p.draft_nodes = -1, what = "draft_nodes -1"; break;
        case 5: p.adaptive_draft = 1, what = "adaptive_draft with a tree"; break;
        case 6: p.draft_method = (specdec_draft_method)7, what = "draft_method 7"; break;
        case 7: p.logprobs = 2, what = "logprobs 2"; break;
        case 8: memset(p.tree_width, 0, sizeof p.tree_width), p.tree_width[5] = 2, what = "a zero first"; break;
        }
        n2 = -1;
        specdec_status st = specdec_generate(e, PROMPT, 3, &p, out, 64, &n2, NULL);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && specdec_engine_last_error(e)[0] && n2 == 0 &&
                     specdec_engine_kv_length(e, SPECDEC_ROLE_TARGET) == kt &&
                     specdec_engine_kv_length(e, SPECDEC_ROLE_DRAFT) == kd,
                 "%s: status %d, message '%s'", what, (int)st, specdec_engine_last_error(e));
    }
    specdec_generate_params p = ok;
    SD_CHECK(specdec_generate(e_nd, PROMPT, 3, &p, out, 64, &n2, NULL) == SPECDEC_ERR_INVALID_ARGUMENT &&
                 strstr(specdec_engine_last_error(e_nd), "draft model"),
             "a tree without a draft model: '%s'", specdec_engine_last_error(e_nd));
    p.tree_width[0] = 0;
    p.draft_nodes = 8;
    SD_CHECK(specdec_generate(e_nd, PROMPT, 3, &p, out, 64, &n2, NULL) == SPECDEC_ERR_INVALID_ARGUMENT,
             "a node budget without a draft model");
    SD_CHECK(specdec_generate(e, PROMPT, 3, &ok, out, 64, &n2, NULL) == SPECDEC_OK && n2 == n &&
                 !memcmp(out, ref, (size_t)n * sizeof *out),
             "the engine changed after refused requests");
    specdec_engine_free(e);
    specdec_engine_free(e_nd);
}

static void check_stats(const specdec_stats *st, const char *what) {
    SD_CHECK(st->n_draft_rounds > 0 && st->n_draft_rounds <= st->n_rounds, "%s: n_draft_rounds %lld of %lld", what,
             (long long)st->n_draft_rounds, (long long)st->n_rounds);
    SD_CHECK(st->n_draft_rounds > 0 &&
                 st->nodes_per_round == (double)st->n_drafted / (double)st->n_draft_rounds &&
                 st->mean_accepted_length == (double)st->n_accepted / (double)st->n_draft_rounds,
             "%s: nodes_per_round %.3f, mean_accepted_length %.3f", what, st->nodes_per_round, st->mean_accepted_length);
}

static void test_stats(void) {
    specdec_engine *e = markov_engine(1);
    if (!e) return;
    int32_t out[64], n = 0;
    specdec_stats st;
    specdec_generate_params p = base_params();
    p.n_draft = 3;
    SD_CHECK(specdec_generate(e, PROMPT, 3, &p, out, 64, &n, &st) == SPECDEC_OK, "chain");
    check_stats(&st, "chain γ 3");
    SD_CHECK(st.nodes_per_round <= 3.0 && st.nodes_per_round > 2.0, "chain: nodes per round %.3f", st.nodes_per_round);
    const int32_t w[2] = {3, 3};
    specdec_generate_params_set_tree(&p, w, 2);
    SD_CHECK(specdec_generate(e, PROMPT, 3, &p, out, 64, &n, &st) == SPECDEC_OK, "tree");
    check_stats(&st, "tree 3,3");
    SD_CHECK(st.nodes_per_round > 3.0 && st.nodes_per_round <= 12.0 && st.final_n_draft == 2,
             "tree 3,3: %.3f nodes per round, final depth %d", st.nodes_per_round, (int)st.final_n_draft);
    SD_CHECK(st.mean_accepted_length <= 2.0, "tree 3,3: mean accepted %.3f > depth", st.mean_accepted_length);
    specdec_generate_params_set_tree(&p, w, 0);
    p.draft_nodes = 10;
    SD_CHECK(specdec_generate(e, PROMPT, 3, &p, out, 64, &n, &st) == SPECDEC_OK, "budget");
    check_stats(&st, "budget 10");
    SD_CHECK(st.nodes_per_round <= 10.0 && st.nodes_per_round > 5.0, "budget 10: %.3f nodes", st.nodes_per_round);
    specdec_engine_free(e);
}

/* ---- a device executor that, like the CUDA ones, runs chains only ------------------ */
typedef struct fake_exec {
    sd_exec base;
    sd_exec *inner; /* a host executor does the work */
    sd_exec_ops ops;
    long waves, refused;
} fake_exec;

static fake_exec *g_fake; /* the ops below serve this one */

static int fake_accepts(sd_exec *ex, const sd_round_slot *x) {
    (void)ex;
    if (!x->tree) return 1;
    g_fake->refused++;
    return 0;
}
static int32_t fake_pack(sd_exec *ex, sd_round_slot **xs, int32_t n) {
    (void)ex;
    g_fake->waves++;
    return g_fake->inner->ops->pack(g_fake->inner, xs, n);
}
static void fake_destroy(sd_exec *ex) {
    fake_exec *f = (fake_exec *)ex;
    sd_exec_destroy(f->inner);
    free(f);
}

/* The fake: the host executor's ops on its own state (every op gets the inner one),
 * except accepts, pack and destroy. */
#define FAKE_FWD(name, ...)                                                                  \
    static specdec_status fake_##name(sd_exec *ex, __VA_ARGS__)
FAKE_FWD(draft_forward, sd_round_slot *const *xs, int32_t n, int32_t step) {
    (void)ex;
    return g_fake->inner->ops->draft_forward(g_fake->inner, xs, n, step);
}
FAKE_FWD(draft_sample, sd_round_slot *const *xs, int32_t n, int32_t step) {
    (void)ex;
    return g_fake->inner->ops->draft_sample(g_fake->inner, xs, n, step);
}
FAKE_FWD(verify_pass, sd_round_slot *const *xs, int32_t k) {
    (void)ex;
    return g_fake->inner->ops->verify_pass(g_fake->inner, xs, k);
}
FAKE_FWD(verify, sd_round_slot *const *xs, int32_t k) {
    (void)ex;
    return g_fake->inner->ops->verify(g_fake->inner, xs, k);
}

static fake_exec *fake_create(int32_t n_vocab) {
    fake_exec *f = calloc(1, sizeof *f);
    sd_errbuf eb;
    if (!f || sd_host_exec_create(n_vocab, 1, 1, &f->inner, &eb) != SPECDEC_OK) {
        free(f);
        return NULL;
    }
    f->ops = (sd_exec_ops){.name = "fake-device",
                           .accepts = fake_accepts,
                           .pack = fake_pack,
                           .draft_forward = fake_draft_forward,
                           .draft_sample = fake_draft_sample,
                           .verify_pass = fake_verify_pass,
                           .verify = fake_verify,
                           .destroy = fake_destroy};
    f->base.ops = &f->ops;
    g_fake = f;
    return f;
}

/* The tree check every round shares (sd_round_tree_check), and the protocol refusing
 * a bad tree before anything runs: INVALID_ARGUMENT with a message, caches unchanged. */
static void test_round_tree_check(void) {
    specdec_engine *e = markov_engine(1);
    if (!e) return;
    sd_round_seq s;
    memset(&s, 0, sizeof s);
    s.tokens = PROMPT;
    s.length = 3;
    s.mode = SPECDEC_VERIFY_MATCH;
    s.drafter = sd_drafter_model();
    s.shape = sd_draft_chain(3);
    s.shape.width[0] = 4, s.shape.width[1] = 2; /* 4 + 8 + 8 nodes */
    sd_errbuf eb;
    sd_err_clear(&eb);
    int32_t nodes = -1;
    SD_CHECK(sd_round_tree_check(&s, e->target, e->draft, "t", &eb, &nodes) == SPECDEC_OK && nodes == 20,
             "a 4,2,1 tree: %d nodes (%s)", (int)nodes, eb.msg);
    s.shape.n_nodes = 9;
    SD_CHECK(sd_round_tree_check(&s, e->target, e->draft, "t", &eb, &nodes) == SPECDEC_OK && nodes == 9,
             "a budget of 9: %d", (int)nodes);
    struct {
        int32_t w1, n_nodes, length;
        const char *what;
    } bad[] = {{0, 0, 3, "tree width[1] = 0"},
               {SPECDEC_MAX_TREE_NODES + 1, 0, 3, "tree width[1] = 65"},
               {2, -1, 3, "nodes"},
               {2, SPECDEC_MAX_TREE_NODES + 1, 3, "nodes"},
               {16, 0, 3, "a tree of 132 nodes"},
               {2, 0, 256 - 15, "does not fit"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s.shape.width[1] = bad[i].w1;
        s.shape.n_nodes = bad[i].n_nodes;
        s.length = bad[i].length;
        sd_err_clear(&eb);
        SD_CHECK(sd_round_tree_check(&s, e->target, e->draft, "who", &eb, NULL) == SPECDEC_ERR_INVALID_ARGUMENT &&
                     strstr(eb.msg, bad[i].what) && !strncmp(eb.msg, "who: ", 5),
                 "bad tree %zu: '%s' (want '%s')", i, eb.msg, bad[i].what);
    }
    s.shape.width[1] = 2, s.shape.n_nodes = 0, s.length = 3;
    SD_CHECK(sd_round_tree_check(&s, NULL, e->draft, "t", &eb, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "no target runner");
    SD_CHECK(sd_round_tree_check(&s, e->target, NULL, "t", &eb, NULL) == SPECDEC_OK, "no draft runner (n-gram)");
    sd_exec *h = NULL;
    sd_round *rd = NULL;
    SD_CHECK(sd_host_exec_create(e->n_vocab, 1, 1, &h, &eb) == SPECDEC_OK &&
                 sd_round_create(h, NULL, e->target, e->draft, 1, &rd, &eb) == SPECDEC_OK,
             "host round: %s", eb.msg);
    if (!rd) {
        sd_exec_destroy(h);
        specdec_engine_free(e);
        return;
    }
    const int32_t kt = sd_runner_kv_len(e->target), kd = sd_runner_kv_len(e->draft);
    s.shape.width[1] = 0;
    sd_round_seq *p[1] = {&s};
    SD_CHECK(sd_round_run(rd, p, 1) == SPECDEC_ERR_INVALID_ARGUMENT && strstr(sd_round_err(rd), "host round: tree width"),
             "host round, a zero width: %s", sd_round_err(rd));
    SD_CHECK(s.status == SPECDEC_ERR_INVALID_ARGUMENT, "the refused sequence's status: %d", (int)s.status);
    SD_CHECK(sd_runner_kv_len(e->target) == kt && sd_runner_kv_len(e->draft) == kd, "a refused tree changed the caches");
    sd_round_destroy(rd);
    sd_exec_destroy(h);
    specdec_engine_free(e);
}

/* Trees the device executor refuses run on the fallback (host) executor in the same
 * round, without beginning the sequence again; chains stay on the device one. */
static void test_fallback(void) {
    specdec_engine *e = markov_engine(1);
    if (!e) return;
    fake_exec *f = fake_create(e->n_vocab);
    SD_CHECK(f != NULL, "fake executor");
    if (!f) {
        specdec_engine_free(e);
        return;
    }
    e->device_exec = &f->base;
    e->device_exec_cuda = 0;
    e->round_kind = SD_ENGINE_ROUND_DEVICE;
    int32_t ref[64], out[64], n = 0, n2 = 0;
    specdec_generate_params p = base_params();
    p.n_draft = 0;
    SD_CHECK(specdec_generate(e, PROMPT, 3, &p, ref, 64, &n, NULL) == SPECDEC_OK, "plain");
    const long waves_plain = f->waves;
    SD_CHECK(waves_plain > 0 && f->refused == 0 && !strcmp(sd_round_exec_name(e->round), "fake-device"),
             "plain decoding did not run on the device executor (%s)", sd_round_exec_name(e->round));
    const int32_t w[3] = {3, 2, 1};
    specdec_generate_params_set_tree(&p, w, 3);
    specdec_stats st;
    SD_CHECK(specdec_generate(e, PROMPT, 3, &p, out, 64, &n2, &st) == SPECDEC_OK, "tree: %s", specdec_engine_last_error(e));
    SD_CHECK(f->refused >= st.n_draft_rounds && st.n_draft_rounds > 0, "the device executor refused %ld of %lld tree rounds",
             f->refused, (long long)st.n_draft_rounds);
    SD_CHECK(n2 == n && !memcmp(out, ref, (size_t)n * sizeof *out) && st.nodes_per_round > 1.0,
             "tree output on the fallback differs from plain decoding");
    p.tree_width[0] = 0, p.tree_width[1] = 0, p.tree_width[2] = 0;
    p.n_draft = 4;
    const long before = f->waves, refused = f->refused;
    SD_CHECK(specdec_generate(e, PROMPT, 3, &p, out, 64, &n2, NULL) == SPECDEC_OK && f->waves > before &&
                 f->refused == refused && n2 == n && !memcmp(out, ref, (size_t)n * sizeof *out),
             "chains on the device executor after a tree call");
    specdec_engine_free(e);
}

int main(void) {
    mk_fill_table(g_t, V * V, V, 1.5, 0.1, 5);
    mk_fill_table(g_d, V, V, 1.5, 0.1, 6);
    test_set_tree();
    test_bad_requests();
    test_stats();
    test_round_tree_check();
    test_fallback();
    return sd_test_done();
}

/* test_ngram_corpus.c — the n-gram drafter's cross-request corpus (core/sd_ngram_corpus.c,
 * specdec_engine_params.ngram_corpus_tokens; docs/DRAFTERS.md "Across requests"):
 *   1. the corpus itself: an entry is the output with the last 64 prompt tokens in front (all of a
 *      shorter prompt), nothing when nothing was generated; a scan finds the longest suffix (up to
 *      nmax, at least nmin) with what followed it cut at the depth, the newest entry first on equal
 *      lengths, the whole ranking capped; the oldest entries go first when the token budget is full,
 *      an entry longer than the corpus keeps its newest tokens; create refuses 0 and more than 2^26;
 *      4 threads adding and scanning at once (the TSan stage runs this test) lose no entry; the index (hash
 *      chains, lazy eviction) ranks exactly as a scan of every token on 6,000 random queries;
 *   2. the bundled target through a scheduler and an engine with a corpus, the n-gram drafter, no
 *      draft model: a prompt's second generation (its first one in the corpus) equals plain
 *      decoding token for token in GREEDY and in MATCH (seeded sampling, T 0.8), with more drafts
 *      accepted than the first time (what the sequence alone could not propose); chains and a tree;
 *   3. ngram_corpus_tokens -1 and 2^26 + 1: INVALID_ARGUMENT naming the field.
 * argv: TARGET_DIR DRAFT_DIR (the bundled pair; the draft is loaded by sched_common, unused). */
#include "sched_common.h" /* first: it sets _POSIX_C_SOURCE */

#include <pthread.h>

#include "sd_drafter.h"

static void corpus_unit(void) {
    sd_ngram_corpus *c = NULL;
    SD_CHECK(sd_ngram_corpus_create(0, &c, NULL) == SPECDEC_ERR_INVALID_ARGUMENT && !c, "0 tokens refused");
    SD_CHECK(sd_ngram_corpus_create(SPECDEC_MAX_NGRAM_CORPUS_TOKENS + 1LL, &c, NULL) == SPECDEC_ERR_INVALID_ARGUMENT && !c,
             "2^26 + 1 tokens refused");
    SD_CHECK(sd_ngram_corpus_create(20, &c, NULL) == SPECDEC_OK && c, "create");
    if (!c) return;
    int32_t ne = -1;
    int64_t nt = -1, na = -1;
    const int32_t a[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    sd_ngram_corpus_add(c, a, 10, 10); /* nothing generated */
    sd_ngram_corpus_stats(c, &ne, &nt, &na);
    SD_CHECK(ne == 0 && nt == 0 && na == 0, "nothing generated: nothing added (%d entries)", ne);
    sd_ngram_corpus_add(c, a, 3, 10); /* prompt 1 2 3, output 4 .. 10 */
    sd_ngram_corpus_stats(c, &ne, &nt, &na);
    SD_CHECK(ne == 1 && nt == 10 && na == 1, "one entry of 10 tokens (%d, %lld)", ne, (long long)nt);
    sd_ngram_found f[4];
    const int32_t q[5] = {9, 9, 2, 3, 4}; /* suffix 2 3 4: a match of 3, continued by 5 6 7 ... */
    int32_t m = sd_ngram_corpus_scan(c, q, 5, 1, 4, 3, 4, f);
    SD_CHECK(m == 1 && f[0].n == 3 && f[0].len == 3 && f[0].tok[0] == 5 && f[0].tok[2] == 7,
             "scan: n %d len %d first %d", m ? f[0].n : -1, m ? f[0].len : -1, m ? f[0].tok[0] : -1);
    SD_CHECK(sd_ngram_corpus_scan(c, q, 5, 4, 4, 3, 4, f) == 0, "nmin 4: no match of 4");
    const int32_t q2[2] = {0, 10}; /* the entry's last token: nothing follows it */
    SD_CHECK(sd_ngram_corpus_scan(c, q2, 2, 1, 4, 3, 4, f) == 0, "no continuation, no candidate");
    const int32_t b[6] = {7, 7, 3, 4, 11, 12}; /* a newer entry with 3 4 -> 11 */
    sd_ngram_corpus_add(c, b, 2, 6);
    const int32_t q3[3] = {8, 3, 4};
    m = sd_ngram_corpus_scan(c, q3, 3, 1, 4, 2, 4, f);
    SD_CHECK(m == 2 && f[0].n == 2 && f[0].tok[0] == 11 && f[1].n == 2 && f[1].tok[0] == 5,
             "equal lengths: the newest entry first (%d: %d, %d)", m, m ? f[0].tok[0] : -1, m > 1 ? f[1].tok[0] : -1);
    const int32_t q4[4] = {1, 2, 3, 4};
    m = sd_ngram_corpus_scan(c, q4, 4, 1, 4, 2, 1, f);
    SD_CHECK(m == 1 && f[0].n == 4 && f[0].tok[0] == 5, "cap 1: the longest (4) kept (%d, n %d)", m, m ? f[0].n : -1);
    sd_ngram_corpus_stats(c, &ne, &nt, NULL);
    SD_CHECK(ne == 2 && nt == 16, "two entries, 16 tokens (%d, %lld)", ne, (long long)nt);
    sd_ngram_corpus_add(c, b, 2, 6); /* 22 > 20: the oldest (10 tokens) goes */
    sd_ngram_corpus_stats(c, &ne, &nt, &na);
    SD_CHECK(ne == 2 && nt == 12 && na == 3, "eviction: %d entries, %lld tokens", ne, (long long)nt);
    m = sd_ngram_corpus_scan(c, q, 5, 1, 4, 3, 4, f); /* 2 3 4 -> 5 was the evicted entry's; 3 4 -> 11 twice */
    SD_CHECK(m == 2 && f[0].n == 2 && f[0].tok[0] == 11 && f[1].tok[0] == 11, "the evicted entry is gone (%d)", m);
    int32_t big[100];
    for (int i = 0; i < 100; i++) big[i] = 100 + i;
    sd_ngram_corpus_add(c, big, 90, 100); /* prompt 90 (64 kept) + 10: 74 > 20 -> its newest 20 */
    sd_ngram_corpus_stats(c, &ne, &nt, NULL);
    const int32_t q5[2] = {180, 181};
    SD_CHECK(ne == 1 && nt == 20 && sd_ngram_corpus_scan(c, q5, 2, 1, 4, 2, 4, f) == 1 && f[0].tok[0] == 182,
             "an entry longer than the corpus keeps its newest tokens (%d, %lld)", ne, (long long)nt);
    const int32_t q6[2] = {1, 179};
    SD_CHECK(sd_ngram_corpus_scan(c, q6, 2, 1, 4, 2, 4, f) == 0, "its older tokens are not kept");
    sd_ngram_corpus_free(c);
    SD_CHECK(sd_ngram_corpus_create(1000, &c, NULL) == SPECDEC_OK, "create 1000");
    sd_ngram_corpus_add(c, big, 90, 100); /* prompt 90: its last 64 tokens and the 10 generated */
    sd_ngram_corpus_stats(c, &ne, &nt, NULL);
    SD_CHECK(ne == 1 && nt == 74, "a long prompt: its last 64 tokens kept (%lld)", (long long)nt);
    sd_ngram_corpus_free(c);
}

/* The index (bigram then unigram chains, lazy eviction) ranks exactly as the scan of every token: random corpora
 * of 3 vocabulary sizes (8 ids: long chains and matches; 5,000: hash collisions in 1,024 buckets; mixed), entries
 * evicted as the budget fills, 2,000 queries each over suffix lengths, depths and caps. */
static void corpus_index_equal(void) {
    static const int32_t vocab[3] = {8, 5000, 40};
    unsigned s = 99;
    long queries = 0, found_total = 0, bad = 0;
    for (int v = 0; v < 3; v++) {
        sd_ngram_corpus *c = NULL;
        if (sd_ngram_corpus_create(3000, &c, NULL) != SPECDEC_OK) return;
        int32_t t[400], q[40];
        for (int round = 0; round < 40; round++) {
            const int32_t n = 20 + (int32_t)(s % 300);
            for (int32_t i = 0; i < n; i++) s = s * 1103515245u + 12345u, t[i] = (int32_t)((s >> 16) % (unsigned)vocab[v]);
            sd_ngram_corpus_add(c, t, (int32_t)(s % 80), n);
            for (int k = 0; k < 50; k++) {
                s = s * 1103515245u + 12345u;
                const int32_t L = 1 + (int32_t)((s >> 8) % 40);
                for (int32_t i = 0; i < L; i++) s = s * 1103515245u + 12345u, q[i] = (int32_t)((s >> 16) % (unsigned)vocab[v]);
                if (k % 3 == 0 && n > L) memcpy(q, t + (s % (unsigned)(n - L)), sizeof(int32_t) * (size_t)L); /* a hit */
                const int32_t nmin = 1 + (int32_t)(s % 3), nmax = nmin + (int32_t)((s >> 4) % 5);
                const int32_t depth = 1 + (int32_t)((s >> 7) % 16), cap = 1 + (int32_t)((s >> 11) % 64);
                sd_ngram_found a[64], b[64];
                const int32_t ma = sd_ngram_corpus_scan(c, q, L, nmin, nmax, depth, cap, a);
                const int32_t mb = sd_ngram_corpus_scan_linear(c, q, L, nmin, nmax, depth, cap, b);
                int same = ma == mb;
                for (int32_t i = 0; same && i < ma; i++)
                    same = a[i].n == b[i].n && a[i].len == b[i].len &&
                           !memcmp(a[i].tok, b[i].tok, sizeof(int32_t) * (size_t)a[i].len);
                bad += !same;
                queries++;
                found_total += ma;
            }
        }
        sd_ngram_corpus_free(c);
    }
    SD_CHECK(bad == 0 && found_total > queries, "index vs linear scan: %ld of %ld queries differ (%ld found)", bad,
             queries, found_total);
    printf("corpus index == linear scan on %ld queries (%ld matches ranked)\n", queries, found_total);
}

typedef struct worker {
    sd_ngram_corpus *c;
    int id;
    long found;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    int32_t t[12];
    sd_ngram_found f[8];
    for (int i = 0; i < 200; i++) {
        for (int k = 0; k < 12; k++) t[k] = (w->id * 7 + i + k) % 23;
        sd_ngram_corpus_add(w->c, t, 4, 12);
        w->found += sd_ngram_corpus_scan(w->c, t, 6, 1, 4, 4, 8, f);
    }
    return NULL;
}

static void corpus_threads(void) {
    sd_ngram_corpus *c = NULL;
    if (sd_ngram_corpus_create(600, &c, NULL) != SPECDEC_OK) return;
    pthread_t th[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){c, i, 0};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    long found = 0;
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL), found += w[i].found;
    int32_t ne = 0;
    int64_t nt = 0, na = 0;
    sd_ngram_corpus_stats(c, &ne, &nt, &na);
    SD_CHECK(na == 800 && nt <= 600 && ne == 50 && found > 0, "4 threads: %lld added, %d kept (%lld tokens), %ld found",
             (long long)na, ne, (long long)nt, found);
    sd_ngram_corpus_free(c);
}

/* Generate prompt p twice through gen() and compare with the plain reference; returns the second's accepted
 * count minus the first's (or -1000 on failure). */
typedef int32_t (*gen_fn)(void *ctx, const int32_t *prompt, int32_t n, const specdec_generate_params *gp,
                          int32_t *out, specdec_stats *st);

static int32_t sched_gen(void *ctx, const int32_t *prompt, int32_t n, const specdec_generate_params *gp, int32_t *out,
                         specdec_stats *st) {
    specdec_scheduler *s = ctx;
    specdec_request_id id = 0;
    int32_t n_out = -1;
    specdec_status rs = SPECDEC_OK;
    if (specdec_scheduler_submit(s, prompt, n, gp, &id) != SPECDEC_OK ||
        specdec_scheduler_wait(s, id, -1, out, 64, &n_out, st, &rs) != SPECDEC_OK || rs != SPECDEC_OK)
        return -1;
    return n_out;
}

static int32_t engine_gen(void *ctx, const int32_t *prompt, int32_t n, const specdec_generate_params *gp,
                          int32_t *out, specdec_stats *st) {
    int32_t n_out = -1;
    return specdec_generate(ctx, prompt, n, gp, out, 64, &n_out, st) == SPECDEC_OK ? n_out : -1;
}

static void twice(sc_env *e, const char *what, gen_fn gen, void *ctx, int prompt_i, int mode, int tree,
                  long *gain) {
    int32_t prompt[64], ref[64], out[2][64];
    const int32_t n = sc_encode(e, SC_PROMPTS[prompt_i], prompt, 64);
    specdec_generate_params gp = sc_params(mode, 4242 + (uint64_t)prompt_i, 48, 6);
    gp.ignore_eos = 1;
    gp.draft_method = SPECDEC_DRAFT_NONE;
    const int32_t nr = sc_reference(e, prompt, n, &gp, ref, 64, NULL);
    gp.draft_method = SPECDEC_DRAFT_NGRAM;
    gp.ngram_cost = SPECDEC_NGRAM_COST_OFF;
    if (tree) {
        const int32_t w[3] = {2, 2, 1};
        specdec_generate_params_set_tree(&gp, w, 3);
    }
    specdec_stats st[2];
    int32_t no[2];
    for (int k = 0; k < 2; k++) no[k] = gen(ctx, prompt, n, &gp, out[k], &st[k]);
    SD_CHECK(nr == 48 && no[0] == nr && no[1] == nr && sc_same(ref, out[0], nr) && sc_same(ref, out[1], nr),
             "%s prompt %d mode %d tree %d: outputs differ from plain decoding (%d, %d, %d)", what, prompt_i, mode, tree,
             nr, no[0], no[1]);
    SD_CHECK(st[1].n_accepted > st[0].n_accepted && st[1].draft_method == SPECDEC_DRAFT_NGRAM,
             "%s prompt %d mode %d tree %d: the corpus did not help (%lld then %lld accepted)", what, prompt_i, mode,
             tree, (long long)st[0].n_accepted, (long long)st[1].n_accepted);
    *gain += st[1].n_accepted - st[0].n_accepted;
    printf("%-9s prompt %d %s%s: accepted %3lld of %3lld, then with it in the corpus %3lld of %3lld (rounds %lld -> %lld)\n",
           what, prompt_i, mode ? "match " : "greedy", tree ? " tree" : "     ", (long long)st[0].n_accepted,
           (long long)st[0].n_drafted, (long long)st[1].n_accepted, (long long)st[1].n_drafted,
           (long long)st[0].n_rounds, (long long)st[1].n_rounds);
}

int main(int argc, char **argv) {
    corpus_unit();
    corpus_index_equal();
    corpus_threads();
    if (argc < 3) {
        fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR\n", argv[0]);
        return 2;
    }
    sc_env e;
    if (sc_env_load(&e, argv[1], argv[2])) return 1;
    specdec_engine_params ep = sc_engine_params();
    ep.ngram_corpus_tokens = 1 << 16;
    specdec_scheduler *s = NULL;
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    SD_CHECK(specdec_scheduler_create(e.tm, NULL, &ep, &sp, &s) == SPECDEC_OK, "scheduler: %s", specdec_last_error());
    specdec_engine *en = NULL;
    SD_CHECK(specdec_engine_create(e.tm, NULL, &ep, &en) == SPECDEC_OK, "engine: %s", specdec_last_error());
    long gain = 0;
    for (int i = 0; s && en && i < 3; i++) {
        twice(&e, "scheduler", sched_gen, s, i, 0, 0, &gain);
        twice(&e, "engine", engine_gen, en, i + 3, 1, 0, &gain);
    }
    if (s) twice(&e, "scheduler", sched_gen, s, 4, 1, 1, &gain);
    if (en) twice(&e, "engine", engine_gen, en, 1, 0, 1, &gain);
    printf("the corpus: %ld more drafts accepted in the second generations\n", gain);
    specdec_scheduler_free(s);
    specdec_engine_free(en);
    for (int k = 0; k < 2; k++) {
        specdec_engine *bad = NULL;
        ep.ngram_corpus_tokens = k ? SPECDEC_MAX_NGRAM_CORPUS_TOKENS + 1 : -1;
        SD_CHECK(specdec_engine_create(e.tm, NULL, &ep, &bad) == SPECDEC_ERR_INVALID_ARGUMENT && !bad &&
                     strstr(specdec_last_error(), "ngram_corpus_tokens"),
                 "ngram_corpus_tokens %d refused: %s", (int)ep.ngram_corpus_tokens, specdec_last_error());
        specdec_scheduler *bs = NULL;
        SD_CHECK(specdec_scheduler_create(e.tm, NULL, &ep, &sp, &bs) == SPECDEC_ERR_INVALID_ARGUMENT && !bs,
                 "scheduler: ngram_corpus_tokens %d refused", (int)ep.ngram_corpus_tokens);
    }
    sc_env_free(&e);
    return sd_test_done();
}

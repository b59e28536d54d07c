/* test_cuda_batch_round.c — a round on the batched device executor ("cuda-batch",
 * backends/cuda/sd_cuda_batch_round.cu, with the host executor as its fallback for
 * trees) against a round on the host executor alone (backends/cpu/sd_host_round.c),
 * each on its own identical fresh CUDA runner groups
 * (a synthetic BF16 target, and as draft the same model with a flattened LM head, so
 * that drafts are often but not always accepted: both draft lags, 1 and 2, occur).
 *   - the device logits path of the group (sd_cuda_group_forward_device, tails 0, 1, 2,
 *     9, 200) == the host path's rows of sd_runner_forward_batch, bitwise, nothing written
 *     past the wanted rows: one small pass, and a pass of 547 tokens (two body chunks,
 *     several LM-head windows, a segment across both chunks, one without logits);
 *   - rounds: 8 sequences with different prompts, seeds and sampling parameters
 *     (GREEDY, MATCH and REJECTION, two sequences sharing params so a launch group holds
 *     several), ragged γ 0..6 drawn per sequence per round, a tree-shaped sequence, a
 *     plain-only sequence without a draft runner, an n-gram-drafted sequence (the
 *     verifier's deterministic flag; a periodic prompt so that lookups match); a random subset of the sequences per
 *     round, sometimes a stop inside the round (settle). Every round: the same status,
 *     n_accepted, n_drafted, tokens and both KV lengths on both sides, BITWISE / exactly;
 *   - errors: n_seqs > max_seqs (UNSUPPORTED), a sequence on another group's runners
 *     (INVALID_ARGUMENT), a bad tree (zero width, too many nodes) after good chains in
 *     one set (INVALID_ARGUMENT), all with nothing changed; creation on a CPU group or with 0
 *     sequences (INVALID_ARGUMENT).
 * Skips without a device ("skipped: no CUDA device", exit 77). */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include "cuda_test_util.h"
#include "fwd_common.h"
#include "sd_cpu_runner.h"
#include "sd_cuda_backend.h"
#include "sd_cuda_runner.h"
#include "sd_host_round.h"
#include "sd_round.h"
#include "sd_runner.h"

#define N_SEQ 8
#define N_CTX 160
#define BT 8
#define MAX_BATCH 160
#define VOCAB 384
#define TREE_SEQ 5   /* the tree-shaped sequence */
#define PLAIN_SEQ 6  /* plain steps only, no draft runner */
#define NGRAM_SEQ 3  /* n-gram drafts (deterministic) */
#define LIMIT (N_CTX - 12)

typedef struct side {
    const char *name;
    sd_runner_group *gt, *gd;
    sd_runner *t[N_SEQ], *d[N_SEQ];
    sd_exec *host, *dev;
    sd_round *rd;
    sd_round_seq seq[N_SEQ];
    int32_t tok[N_SEQ][N_CTX];
} side;

static uint64_t rng_state = 20240611;
static int32_t rnd(int32_t n) { return (int32_t)(fwd_rng_next(&rng_state) % (uint64_t)n); }

static sd_config test_config(void) {
    sd_config c = fwd_small_config();
    c.vocab_size = VOCAB;
    c.max_position_embeddings = N_CTX;
    return c;
}

/* The draft: the target's weights with its LM head scaled (a flatter q, same argmax). */
static void flatten_lm_head(struct specdec_model *m, float factor) {
    uint16_t *w = (uint16_t *)m->w.lm_head.data;
    const int64_t n = m->w.lm_head.shape[0] * m->w.lm_head.shape[1];
    for (int64_t i = 0; i < n; i++) w[i] = sd_f32_to_bf16(sd_bf16_to_f32(w[i]) * factor);
}

static int make_groups(side *s, const struct specdec_model *tm, const struct specdec_model *dm) {
    sd_errbuf eb;
    sd_err_clear(&eb);
    const int32_t blocks = N_SEQ * (N_CTX / BT);
    SD_CHECK(sd_cuda_group_create(&tm->w, N_CTX, MAX_BATCH, blocks, BT, 0, 0, &s->gt, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_cuda_group_create(&dm->w, N_CTX, MAX_BATCH, blocks, BT, 0, 0, &s->gd, &eb) == SPECDEC_OK, "%s", eb.msg);
    if (!s->gt || !s->gd) return 0;
    for (int i = 0; i < N_SEQ; i++) {
        SD_CHECK(sd_runner_group_add(s->gt, &s->t[i], &eb) == SPECDEC_OK, "%s", eb.msg);
        if (i != PLAIN_SEQ) SD_CHECK(sd_runner_group_add(s->gd, &s->d[i], &eb) == SPECDEC_OK, "%s", eb.msg);
    }
    return 1;
}

static void free_side(side *s) {
    sd_round_destroy(s->rd);
    sd_exec_destroy(s->dev);
    sd_exec_destroy(s->host);
    for (int i = 0; i < N_SEQ; i++) {
        sd_runner_destroy(s->t[i]);
        sd_runner_destroy(s->d[i]);
    }
    sd_runner_group_destroy(s->gt);
    sd_runner_group_destroy(s->gd);
}

/* Sequence i's identity, sampling and prompt (the same on both sides). */
static void init_seq(side *s, int i, const int32_t *prompt, int32_t n_prompt) {
    sd_round_seq *q = &s->seq[i];
    memset(q, 0, sizeof *q);
    q->seed = 1000 + (uint64_t)i;
    q->sequence_id = (uint64_t)i;
    q->drafter = i == PLAIN_SEQ ? NULL : i == NGRAM_SEQ ? sd_drafter_ngram() : sd_drafter_model();
    q->ngram_min = 1;
    q->ngram_max = 3;
    q->target = s->t[i];
    q->draft = s->d[i];
    static const specdec_verify_mode modes[N_SEQ] = {SPECDEC_VERIFY_GREEDY,    SPECDEC_VERIFY_MATCH,
                                                     SPECDEC_VERIFY_REJECTION, SPECDEC_VERIFY_REJECTION,
                                                     SPECDEC_VERIFY_MATCH,     SPECDEC_VERIFY_REJECTION,
                                                     SPECDEC_VERIFY_GREEDY,    SPECDEC_VERIFY_REJECTION};
    q->mode = modes[i];
    /* GREEDY ignores the params (argmax of the raw logits): give it non-neutral ones */
    const int p = i == 7 ? 2 : i; /* sequence 7 shares sequence 2's params: one launch group */
    q->sp.temperature = 0.6f + 0.15f * (float)p;
    q->sp.top_k = p % 2 == 0 ? 24 : 0;
    q->sp.top_p = p == 1 ? 0.9f : 1.0f;
    q->sp.min_p = p == 3 ? 0.05f : 0.0f;
    memcpy(s->tok[i], prompt, (size_t)n_prompt * sizeof(int32_t));
    q->tokens = s->tok[i];
    q->length = n_prompt;
}

static int setup_side(side *s, const char *name, const struct specdec_model *tm, const struct specdec_model *dm,
                      int cuda_batch, int32_t prompts[N_SEQ][24], const int32_t *n_prompt) {
    memset(s, 0, sizeof *s);
    s->name = name;
    if (!make_groups(s, tm, dm)) return 0;
    sd_errbuf eb;
    sd_err_clear(&eb);
    specdec_status st = sd_host_exec_create(VOCAB, 1, N_SEQ, &s->host, &eb);
    if (st == SPECDEC_OK && cuda_batch) st = sd_cuda_batch_exec_create(s->gt, s->gd, N_SEQ, &s->dev, &eb);
    if (st == SPECDEC_OK)
        st = sd_round_create(s->dev ? s->dev : s->host, s->dev ? s->host : NULL, NULL, NULL, N_SEQ, &s->rd, &eb);
    SD_CHECK(st == SPECDEC_OK, "%s round: %s", name, eb.msg);
    if (st != SPECDEC_OK) return 0;
    for (int i = 0; i < N_SEQ; i++) {
        init_seq(s, i, prompts[i], n_prompt[i]);
        const specdec_status b = sd_round_begin(s->rd, &s->seq[i]);
        SD_CHECK(b == SPECDEC_OK, "%s begin %d: %s", name, i, sd_round_err(s->rd));
        if (b != SPECDEC_OK) return 0;
    }
    return 1;
}

/* Sequence i of both sides after a round: everything the host round fills. */
static int same_result(const side *a, const side *b, int i, int round) {
    const sd_round_seq *x = &a->seq[i], *y = &b->seq[i];
    int ok = x->status == y->status && x->n_accepted == y->n_accepted && x->n_drafted == y->n_drafted;
    for (int32_t k = 0; ok && x->status == SPECDEC_OK && k <= x->n_accepted; k++) ok = x->out[k] == y->out[k];
    ok = ok && sd_runner_kv_len(a->t[i]) == sd_runner_kv_len(b->t[i]);
    if (a->d[i]) ok = ok && sd_runner_kv_len(a->d[i]) == sd_runner_kv_len(b->d[i]);
    SD_CHECK(ok,
             "round %d seq %d (mode %d, depth %d, length %d): status %d/%d, accepted %d/%d, drafted %d/%d, "
             "first token %d/%d, target kv %d/%d, draft kv %d/%d",
             round, i, (int)x->mode, (int)x->shape.depth, (int)x->length, (int)x->status, (int)y->status,
             (int)x->n_accepted, (int)y->n_accepted, (int)x->n_drafted, (int)y->n_drafted, (int)x->out[0],
             (int)y->out[0], (int)sd_runner_kv_len(a->t[i]), (int)sd_runner_kv_len(b->t[i]),
             a->d[i] ? (int)sd_runner_kv_len(a->d[i]) : -1, b->d[i] ? (int)sd_runner_kv_len(b->d[i]) : -1);
    return ok;
}

/* This round's shape of sequence i. */
static sd_draft_shape pick_shape(int i) {
    if (i == PLAIN_SEQ) return sd_draft_chain(0);
    if (i != TREE_SEQ) return sd_draft_chain(rnd(7));
    sd_draft_shape t = sd_draft_chain(2);
    t.width[0] = 2;
    t.width[1] = 2;
    return t;
}

/* Append the kept tokens on both sides (a stop inside the round now and then: settle). */
static void absorb(side *a, side *b, int i, int round, int64_t *accepted, int64_t *drafted) {
    const sd_round_seq *x = &a->seq[i];
    int32_t m = x->n_accepted + 1;
    *accepted += x->n_accepted;
    *drafted += x->n_drafted;
    if (rnd(6) == 0) m = 1 + rnd(m);
    side *sides[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        sd_round_seq *q = &sides[k]->seq[i];
        memcpy(sides[k]->tok[i] + q->length, q->out, (size_t)m * sizeof(int32_t));
        q->length += m;
        if (m < x->n_accepted + 1) {
            const specdec_status st = sd_round_settle(sides[k]->rd, q, q->length);
            SD_CHECK(st == SPECDEC_OK, "round %d seq %d: %s settle failed", round, i, sides[k]->name);
        }
    }
}

/* Rounds over random subsets until every sequence is near the context's end. */
static void run_rounds(side *a, side *b) {
    int64_t accepted = 0, drafted = 0;
    int rounds = 0;
    for (int round = 0; round < 200; round++) {
        sd_round_seq *pa[N_SEQ], *pb[N_SEQ];
        int idx[N_SEQ], n = 0, live = 0;
        for (int i = 0; i < N_SEQ; i++) {
            if (a->seq[i].length >= LIMIT) continue;
            live++;
            if (rnd(6) == 0) continue; /* sits this round out */
            a->seq[i].shape = b->seq[i].shape = pick_shape(i);
            pa[n] = &a->seq[i];
            pb[n] = &b->seq[i];
            idx[n++] = i;
        }
        if (live == 0) break;
        if (n == 0) continue;
        const specdec_status sa = sd_round_run(a->rd, pa, n), sb = sd_round_run(b->rd, pb, n);
        SD_CHECK(sa == SPECDEC_OK && sb == SPECDEC_OK, "round %d: %s %d (%s), %s %d (%s)", round, a->name, (int)sa,
                 sd_round_err(a->rd), b->name, (int)sb, sd_round_err(b->rd));
        int ok = sa == sb;
        for (int j = 0; j < n; j++) ok &= same_result(a, b, idx[j], round);
        if (!ok || sa != SPECDEC_OK) return;
        for (int j = 0; j < n; j++) absorb(a, b, idx[j], round, &accepted, &drafted);
        rounds++;
    }
    for (int i = 0; i < N_SEQ; i++)
        SD_CHECK(memcmp(a->tok[i], b->tok[i], (size_t)a->seq[i].length * sizeof(int32_t)) == 0 &&
                     a->seq[i].length == b->seq[i].length,
                 "seq %d: sequences differ", i);
    printf("%d rounds, %lld of %lld drafts accepted, bitwise equal to the host round\n", rounds, (long long)accepted,
           (long long)drafted);
    SD_CHECK(accepted > 0 && accepted < drafted, "acceptance %lld / %lld: want some rejections and some acceptances",
             (long long)accepted, (long long)drafted);
}

/* n_seqs > max_seqs, and a sequence of another group: refused, nothing changed. */
static void check_errors(side *a, side *b, const struct specdec_model *tm) {
    SD_CHECK(strcmp(a->dev->ops->name, "cuda-batch") == 0, "executor name %s", a->dev->ops->name);
    int32_t kv[N_SEQ], dkv[N_SEQ];
    sd_round_seq *p[N_SEQ + 1];
    for (int i = 0; i < N_SEQ; i++) {
        kv[i] = sd_runner_kv_len(a->t[i]);
        dkv[i] = a->d[i] ? sd_runner_kv_len(a->d[i]) : 0;
        a->seq[i].shape = sd_draft_chain(i == PLAIN_SEQ ? 0 : 3);
        a->seq[i].status = SPECDEC_OK;
        p[i] = &a->seq[i];
    }
    p[N_SEQ] = &a->seq[0];
    SD_CHECK(sd_round_run(a->rd, p, N_SEQ + 1) == SPECDEC_ERR_UNSUPPORTED, "n_seqs > max_seqs: %s", sd_round_err(a->rd));
    sd_round_seq foreign = a->seq[1];
    foreign.target = b->t[1]; /* the host side's group */
    foreign.draft = b->d[1];
    sd_round_seq *pf[2] = {&a->seq[0], &foreign};
    SD_CHECK(sd_round_run(a->rd, pf, 2) == SPECDEC_ERR_INVALID_ARGUMENT, "a foreign sequence: %s", sd_round_err(a->rd));
    /* a bad tree after good chains in one set: refused before any chain ran */
    const sd_draft_shape keep = a->seq[TREE_SEQ].shape;
    sd_draft_shape bad = sd_draft_chain(2);
    bad.width[0] = 3;
    bad.width[1] = 0; /* a zero width */
    a->seq[TREE_SEQ].shape = bad;
    SD_CHECK(sd_round_run(a->rd, p, N_SEQ) == SPECDEC_ERR_INVALID_ARGUMENT, "a zero tree width: %s", sd_round_err(a->rd));
    bad.width[1] = SPECDEC_MAX_TREE_NODES; /* 3 + 3 * max nodes */
    a->seq[TREE_SEQ].shape = bad;
    SD_CHECK(sd_round_run(a->rd, p, N_SEQ) == SPECDEC_ERR_INVALID_ARGUMENT, "an oversized tree: %s", sd_round_err(a->rd));
    a->seq[TREE_SEQ].shape = keep;
    for (int i = 0; i < N_SEQ; i++)
        SD_CHECK(!a->d[i] || sd_runner_kv_len(a->d[i]) == dkv[i], "seq %d: draft kv %d changed to %d by a refused run",
                 i, (int)dkv[i], (int)sd_runner_kv_len(a->d[i]));
    for (int i = 0; i < N_SEQ; i++)
        SD_CHECK(sd_runner_kv_len(a->t[i]) == kv[i], "seq %d: target kv %d changed to %d by a refused run", i,
                 (int)kv[i], (int)sd_runner_kv_len(a->t[i]));
    sd_errbuf eb;
    sd_err_clear(&eb);
    sd_runner_group *cpu = NULL;
    sd_exec *r = NULL;
    SD_CHECK(sd_cpu_group_create(&tm->w, 16, 16, 4, 4, &cpu, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_cuda_batch_exec_create(cpu, NULL, 4, &r, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && !r,
             "a CPU group must be refused");
    SD_CHECK(sd_cuda_batch_exec_create(a->gt, a->gd, 0, &r, &eb) == SPECDEC_ERR_INVALID_ARGUMENT && !r,
             "max_seqs 0 must be refused");
    sd_runner_group_destroy(cpu);
}

/* The group's device logits path == its host path, bitwise, for every tail: ns segments
 * (runner i prefilled with pre[i] tokens, then n[i] tokens; want[i] 0: no logits) of a
 * group of max_batch tokens per pass. max_batch > 512 makes a pass of two body chunks
 * (act_rows 512) and several LM-head windows (logit_rows 128) with segments across both. */
#define FD_MAX_SEGS 5
static void check_forward_device_case(const struct specdec_model *tm, int32_t max_batch, int ns, const int32_t *pre,
                                      const int32_t *n, const int *want) {
    static const int32_t tails[] = {0, 1, 2, 9, 200};
    sd_errbuf eb;
    sd_err_clear(&eb);
    sd_runner_group *g = NULL;
    SD_CHECK(sd_cuda_group_create(&tm->w, N_CTX, max_batch, ns * (N_CTX / BT), BT, 0, 0, &g, &eb) == SPECDEC_OK, "%s",
             eb.msg);
    if (!g) return;
    sd_runner *r[FD_MAX_SEGS] = {NULL};
    static int32_t tok[FD_MAX_SEGS][N_CTX];
    float *host[FD_MAX_SEGS] = {NULL};
    int32_t total = 0;
    int ok = 1;
    for (int i = 0; i < ns; i++) {
        total += n[i];
        SD_CHECK(sd_runner_group_add(g, &r[i], &eb) == SPECDEC_OK, "%s", eb.msg);
        for (int k = 0; k < N_CTX; k++) tok[i][k] = rnd(VOCAB);
        host[i] = (float *)malloc((size_t)n[i] * VOCAB * sizeof(float));
        ok = ok && r[i] && host[i];
        if (r[i]) SD_CHECK(sd_runner_forward(r[i], tok[i], pre[i], 0, NULL) == SPECDEC_OK, "prefill %d", i);
    }
    float *back = (float *)malloc((size_t)total * VOCAB * sizeof(float));
    float *dev = (float *)ct_dev_alloc((size_t)total * VOCAB * sizeof(float));
    SD_CHECK(ok && back && dev, "max_batch %d: setup failed", (int)max_batch);
    sd_runner_seg seg[FD_MAX_SEGS];
    for (int i = 0; i < ns; i++)
        seg[i] = (sd_runner_seg){r[i], tok[i] + pre[i], n[i], pre[i], NULL, 0, want[i] ? host[i] : NULL, NULL, NULL};
    if (ok && back && dev)
        SD_CHECK(sd_runner_forward_batch(seg, ns, &eb) == SPECDEC_OK, "host batch (max_batch %d): %s", (int)max_batch,
                 eb.msg);
    for (size_t ti = 0; ok && back && dev && ti < sizeof tails / sizeof tails[0]; ti++) {
        const int32_t tail = tails[ti];
        int32_t off[FD_MAX_SEGS], rows = 0;
        for (int i = 0; i < ns; i++) {
            off[i] = rows;
            seg[i].logits = want[i] ? dev + (size_t)rows * VOCAB : NULL;
            if (want[i]) rows += tail == 0 || tail > n[i] ? n[i] : tail;
        }
        ct_poison(dev, (size_t)total * VOCAB * sizeof(float));
        SD_CHECK(sd_cuda_group_forward_device(seg, ns, tail, &eb) == SPECDEC_OK, "device batch: %s", eb.msg);
        CT_CUDA(cudaMemcpy(back, dev, (size_t)total * VOCAB * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < ns; i++) {
            const int32_t w = tail == 0 || tail > n[i] ? n[i] : tail;
            if (want[i])
                SD_CHECK(memcmp(back + (size_t)off[i] * VOCAB, host[i] + (size_t)(n[i] - w) * VOCAB,
                                (size_t)w * VOCAB * sizeof(float)) == 0,
                         "max_batch %d tail %d segment %d: device rows differ from the host rows", (int)max_batch,
                         (int)tail, i);
            SD_CHECK(sd_runner_kv_len(r[i]) == pre[i] + n[i], "tail %d segment %d: kv %d", (int)tail, i,
                     (int)sd_runner_kv_len(r[i]));
        }
        /* nothing written past the wanted rows (still the poison: every bit set) */
        const uint32_t *u = (const uint32_t *)(back + (size_t)rows * VOCAB);
        int clean = 1;
        for (size_t k = 0; k < (size_t)(total - rows) * VOCAB; k++) clean &= u[k] == 0xFFFFFFFFu;
        SD_CHECK(clean, "max_batch %d tail %d: rows written past the %d wanted", (int)max_batch, (int)tail, (int)rows);
    }
    if (dev) cudaFree(dev);
    free(back);
    for (int i = 0; i < ns; i++) {
        free(host[i]);
        sd_runner_destroy(r[i]);
    }
    sd_runner_group_destroy(g);
}

static void check_forward_device(const struct specdec_model *tm) {
    /* one chunk, one window */
    const int32_t pre3[3] = {5, 9, 3}, n3[3] = {4, 1, 6};
    const int want3[3] = {1, 1, 1};
    check_forward_device_case(tm, 32, 3, pre3, n3, want3);
    /* 547 tokens: body chunks [0, 512) and [512, 547), LM-head windows of 128 over the
     * runs of wanted rows; segment 2 wants none, segment 4 spans both chunks */
    const int32_t pre5[5] = {5, 9, 3, 4, 2}, n5[5] = {130, 7, 150, 120, 140};
    const int want5[5] = {1, 1, 0, 1, 1};
    check_forward_device_case(tm, 560, 5, pre5, n5, want5);
}

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    const sd_config cfg = test_config();
    struct specdec_model *tm = fwd_model_make(&cfg, SD_BF16, 11), *dm = fwd_model_make(&cfg, SD_BF16, 11);
    flatten_lm_head(dm, 0.6f);
    check_forward_device(tm);
    int32_t prompts[N_SEQ][24], n_prompt[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) {
        n_prompt[i] = 4 + rnd(20);
        for (int k = 0; k < n_prompt[i]; k++) prompts[i][k] = i == NGRAM_SEQ && k >= 5 ? prompts[i][k - 5] : rnd(VOCAB);
    }
    static side a, b;
    if (setup_side(&a, "cuda-batch", tm, dm, 1, prompts, n_prompt) &&
        setup_side(&b, "host", tm, dm, 0, prompts, n_prompt)) {
        run_rounds(&a, &b);
        check_errors(&a, &b, tm);
    }
    free_side(&a);
    free_side(&b);
    fwd_model_free(tm);
    fwd_model_free(dm);
    return sd_test_done();
}
#endif

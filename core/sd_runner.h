/* sd_runner.h — the backend contract, part 1: a runner runs ONE model's forward pass
 * over its own KV cache on one backend (backends/cpu/sd_cpu_runner.c,
 * backends/cuda/sd_cuda_runner.cu; tests implement it with synthetic models, e.g. a
 * Markov chain, to drive the engine without a transformer).
 *
 * forward(): tokens[0..n) at absolute positions [pos, pos+n); requires
 * 0 <= pos <= kv_len, pos + n <= n_ctx and n <= max_batch; the cache is truncated to
 * pos, then extended to pos + n. Writes n rows of n_vocab fp32 logits to logits_out
 * (host memory; NULL skips the LM head). No allocation. A failure leaves kv_len <= pos
 * (the rows past it are undefined) and the detail in r->err.
 *
 * KV length: kv_len has one owner, the runner. It changes only in the runner's own
 * code: forward(), sd_runner_truncate(), and a backend's device-resident round
 * reporting what its device-side forwards appended (backends/cuda). Everyone else
 * reads it with sd_runner_kv_len().
 *
 * Runners are created by their backend from validated weights (core/sd_weights.h:
 * sd_weights_validate) and destroyed with sd_runner_destroy().
 *
 * Trees (tree speculation, docs/TREE.md). A tree lives in cache rows base.. after the
 * sequence rows [0, base); its nodes are numbered 0, 1, ... in the order they were
 * forwarded, node i in cache row base + i.
 *   sd_runner_forward_tree(r, tokens, n, base, first, parent, logits): forwards nodes
 *   first .. first + n - 1 (first == 0 starts a new tree: the cache is truncated to
 *   base, which must be <= kv_len; first > 0 extends the current tree, which must hold
 *   exactly `first` nodes on the same base). parent[i] is the parent of node first + i:
 *   a node < first + i, or -1 = none (the node follows the cache directly). A node at
 *   depth k (k ancestors) has absolute position base + k and attends to cache rows
 *   [0, base) and then to its ancestors root-first and itself, in that order — the keys
 *   plain decoding of that path would see, in the same order, so with batch-invariant
 *   kernels a node's logits are bitwise those of plain decoding along its path. The
 *   plain forward is the special case of one chain (parent[i] = i - 1). Row i of
 *   logits (n rows, NULL: none) belongs to node first + i. Requires n <= max_batch,
 *   first + n <= SD_RUNNER_TREE_MAX, base + first + n <= n_ctx.
 *   sd_runner_compact(r, keep, n_keep): keep[0..n_keep) is a root-first path of the
 *   current tree (keep[0] has no parent, parent(keep[j]) == keep[j-1]); its rows move
 *   down to base .. base + n_keep - 1, the rest is dropped: kv_len = base + n_keep.
 *   Between the two, rows past base belong to the tree (kv_len there is the runner's
 *   business); any forward() or truncate() ends the tree (compact is then refused).
 * A runner implements them natively (r->tree_ops: the CPU runner) or leaves tree_ops
 * NULL (runners are zero-initialised), and sd_runner.c emulates them exactly with forward(): each node
 * by one forward of the part of its path not already in the cache (N nodes in depth-
 * first order cost N one-token forwards), compact by re-forwarding the kept path.
 * Failures leave the tree ended, kv_len <= base + first, the detail in r->err.
 *
 * Groups and batches (many sequences per forward: the scheduler, runtime/sd_scheduler.c).
 * A runner GROUP is one model instance on one backend: the weights, the activation
 * buffers of max_batch tokens, and one paged KV pool (core/sd_kv.h). Each runner of a
 * group is one SEQUENCE: its own block table, kv_len and tree, its blocks taken from the
 * group's pool as its cache grows and given back when it is rolled back or destroyed
 * (the runner stays the one owner of its kv_len). A standalone runner (group NULL: test
 * runners, and backends without groups) has its own cache.
 *   sd_runner_forward_batch(segs, n, eb): ONE forward over several sequences: segment i
 *   is a forward() (parent NULL) or a forward_tree() (parent set) of runner segs[i].r,
 *   with exactly those calls' semantics and checks, the runners distinct. When every
 *   runner belongs to one group that implements forward_batch, the segments go through
 *   the model together (max_batch tokens per pass: weights read once per pass); the
 *   group's kernels compute every token's row independently of the others (batch
 *   invariance), so each segment's logits and cache rows are bitwise those of its own
 *   call. Otherwise the segments run one by one (same results, no sharing). A grouped
 *   batch holds the blocks of every segment before computing anything, all or nothing
 *   (CONTEXT_FULL when the pool runs dry). A failure leaves every runner of the call at
 *   kv_len <= its pos (tree: base + first) with its tree ended, the detail in eb; a
 *   failed check (INVALID_ARGUMENT, CONTEXT_FULL past n_ctx) changes nothing.
 * Groups are driven by one thread at a time (they share the activation buffers).
 *
 * Captured hidden states (a drafter head, EAGLE-3: docs/EAGLE3.md). A group may be asked
 * (sd_runner_group_set_capture) to capture the residual stream at chosen boundaries:
 * hs[0] = the embeddings (after any embedding scale), hs[i] for 0 < i < n_layers = the
 * stream entering layer i (before its input norm), hs[n_layers] = the last layer's output
 * before the final norm, hs[n_layers + 1] = after it (what the LM head reads: an MTP layer's
 * input; CPU groups only, whose capture_max is n_layers + 1). A segment with aux set then receives, for each of its tokens in
 * order, one row of n_capture * hidden fp32: concat(hs[capture[0]], hs[capture[1]], ...)
 * (ids increasing). aux lives in the group's memory: host memory for a CPU group (one memcpy
 * per state and token in cpu_pass), device memory for a CUDA group (standalone runners'
 * private groups included: one strided device copy per segment and state on the pass's
 * stream, done when the pass returns; host memory works there too, synchronously). Chains,
 * trees, prefill chunks and batched passes capture alike; a capture never changes logits
 * or cache rows. A segment asking for aux of a group that captures nothing (capture_max 0:
 * test runners) is refused (UNSUPPORTED) before anything runs.
 *
 * Sliding-window release (core/sd_kv.h "Sliding windows"). A group whose kv_window is
 * W > 0 (set by its creator with sd_runner_group_set_window, before it has runners: only
 * for models whose EVERY layer slides with window W, sd_cfg_release_window) lets its
 * sequences give old blocks back. After every successful forward(), forward_tree(),
 * compact() and batched forward that leaves a runner at kv_len = K, the runner releases
 * the blocks wholly below sd_kv_window_keep(K, W, SD_RUNNER_WINDOW_MARGIN) (releases
 * are monotone: the largest K any call left counts): every position >= that K -
 * SD_RUNNER_WINDOW_MARGIN can still be computed. The round protocol never goes back
 * further (core/sd_round.c: a round starts at the committed length, which only grows,
 * and one call appends at most the γ + 1 or SD_RUNNER_TREE_MAX rows it may roll back;
 * a draft runner's catch-up starts at its own kv_len; a prefill chunk is committed);
 * while a tree is live its rows are never released (compact() moves them). The rows
 * before the release point are gone:
 *   CONTRACT: a forward() at pos, a batch segment at pos, a new tree at base, or a
 *   sd_runner_truncate() to len is valid for 0 or for values >= sd_runner_min_len(r)
 *   (the smallest length whose next position's keys are all held); a smaller non-zero
 *   value fails with SPECDEC_ERR_INVALID_ARGUMENT ("... released by the sliding
 *   window") and changes nothing. 0 always works: the sequence starts over.
 * Attention never reads a released row: a query at p reads rows >= p - W + 1 (CPU:
 * sd_cfg_first_key; CUDA: sd_keymap_first_key, loaded from the aligned tile holding it,
 * hence SD_KV_WINDOW_ALIGN), all at or above the release point while p >= K - margin
 * (tests/kv). Groups with kv_window 0 — every standalone runner (its private pool
 * is sized for n_ctx anyway), mixed local/global models — keep every block, and for
 * them truncation and forwards at any pos <= kv_len always work (sd_runner_min_len 0). */
#ifndef SD_RUNNER_H
#define SD_RUNNER_H

#include <stdint.h>
#include "specdec.h"
#include "sd_error.h"
#include "sd_kv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_runner sd_runner;
typedef struct sd_runner_group sd_runner_group;

/* Most hidden states a group captures per token (EAGLE-3 reads three). */
#define SD_RUNNER_MAX_CAPTURE 4

/* Most nodes of one tree (the pending token and SPECDEC_MAX_TREE_NODES drafts). */
#define SD_RUNNER_TREE_MAX (SPECDEC_MAX_TREE_NODES + 1)
/* Rows a sequence may go back below the kv_len its last call left (see "Sliding-window
 * release"): the most rows one round appends (a tree, or γ + 1 <= SPECDEC_MAX_DRAFT + 1). */
#define SD_RUNNER_WINDOW_MARGIN SD_RUNNER_TREE_MAX

typedef struct sd_runner_vtbl {
    specdec_status (*forward)(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits_out);
    void (*destroy)(sd_runner *r);
} sd_runner_vtbl;

/* A runner's native tree operations (optional: sd_runner.tree_ops NULL = emulated with
 * forward(), see "Trees" above). Called by sd_runner_forward_tree / sd_runner_compact
 * after they validated the call and recorded it in r->tree: forward_tree forwards nodes
 * first .. first + n - 1 of r->tree (tokens, depths and parents are there), leaving
 * kv_len = tree.base + first + n; compact moves the rows of the validated path keep[]
 * down, leaving kv_len = tree.base + n_keep. */
typedef struct sd_runner_tree_ops {
    specdec_status (*forward_tree)(sd_runner *r, int32_t first, int32_t n, float *logits_out);
    specdec_status (*compact)(sd_runner *r, const int32_t *keep, int32_t n_keep);
} sd_runner_tree_ops;

/* The current tree of a runner (kept by sd_runner.c; runners read it). */
typedef struct sd_runner_tree {
    int32_t n;                            /* nodes forwarded; 0 = no tree */
    int32_t base;                         /* node i lives in cache row base + i */
    int32_t token[SD_RUNNER_TREE_MAX];
    int32_t parent[SD_RUNNER_TREE_MAX];   /* -1 = none */
    int32_t depth[SD_RUNNER_TREE_MAX];    /* ancestors; position = base + depth */
    int32_t path[SD_RUNNER_TREE_MAX];     /* emulation: the nodes in cache rows base .. base + path_len - 1 */
    int32_t path_len;
} sd_runner_tree;

/* One sequence's part of a batched forward (see "Groups and batches" above). */
typedef struct sd_runner_seg {
    sd_runner *r;            /* the sequence */
    const int32_t *tokens;   /* n token ids */
    int32_t n;               /* 1 .. max_batch */
    int32_t pos;             /* chain: the first token's position (the cache is truncated to it);
                                tree: the tree's base */
    const int32_t *parent;   /* NULL: a chain (forward() semantics); else a tree call
                                (forward_tree() semantics): parents of nodes first .. first + n - 1 */
    int32_t first;           /* tree: the first node of this call (0 starts a tree) */
    float *logits;           /* n rows of n_vocab fp32 (host), or NULL */
    float *aux;              /* NULL, or n rows of n_capture * hidden fp32 captured hidden states, in
                                the group's memory (see "Captured hidden states" above) */
    const float *hin;        /* n rows of group->hin_width fp32 host floats entering with the tokens (an
                                MTP layer's runner: core/sd_weights.h), exactly when the group has
                                hin_width > 0; else NULL */
} sd_runner_seg;

typedef struct sd_runner_group_vtbl {
    /* A new sequence of the group (empty cache); *out NULL and the detail in eb on failure. */
    specdec_status (*add_runner)(sd_runner_group *g, sd_runner **out, sd_errbuf *eb);
    /* Segments already validated by sd_runner_forward_batch, of distinct runners of g,
     * trees recorded in r->tree (nodes first .. first + n - 1), blocks held, total
     * tokens <= max_batch. Leaves each runner at kv_len = pos + n (tree: base + first + n). */
    specdec_status (*forward_batch)(sd_runner_group *g, const sd_runner_seg *segs, int32_t n_segs);
    /* Frees the group; its runners must have been destroyed. */
    void (*destroy)(sd_runner_group *g);
} sd_runner_group_vtbl;

/* A model instance shared by sequences (see "Groups and batches" above). */
struct sd_runner_group {
    const sd_runner_group_vtbl *vt;
    specdec_backend backend;
    int32_t n_vocab;
    int32_t n_ctx;            /* most rows one sequence holds */
    int32_t max_batch;        /* most tokens per pass (all segments together) */
    sd_kv_pool pool;          /* the KV blocks of every runner of the group */
    int32_t kv_window;        /* > 0: sequences release blocks behind this window ("Sliding-
                                 window release"); 0: every block kept (the default) */
    int32_t n_runners;        /* live runners */
    sd_errbuf err;
    /* hidden-state capture (see "Captured hidden states" above) */
    int32_t capture_max;      /* set by the backend: hs indices 0..capture_max it can capture (its
                                 n_layers); 0: none */
    int32_t capture_width;    /* set by the backend: floats of one captured state (hidden size) */
    int32_t n_capture;        /* states captured per token (0: capture off) */
    int32_t capture[SD_RUNNER_MAX_CAPTURE]; /* their hs indices, increasing */
    int32_t hin_width;        /* > 0: every row also enters with this many floats (sd_runner_seg.hin; an
                                 MTP layer): only batched segments carrying them run (forward() and
                                 forward_tree() are refused with UNSUPPORTED) */
};

struct sd_runner {
    const sd_runner_vtbl *vt;
    specdec_backend backend;  /* CPU or CUDA */
    int32_t n_vocab;
    int32_t n_ctx;
    int32_t max_batch;        /* most tokens per forward() */
    int32_t kv_len;           /* tokens in the cache (see "KV length" above) */
    sd_errbuf err;            /* detail of the last failure */
    const sd_runner_tree_ops *tree_ops; /* NULL: trees emulated with forward() */
    sd_runner_tree tree;      /* see "Trees" above */
    sd_runner_group *group;   /* NULL: standalone (its own cache) */
    sd_kv_table kv;           /* grouped: the blocks of rows [0, kv_len) (and of a tree) */
};

/* forward() (see the top), plus the window's checks and release. */
specdec_status sd_runner_forward(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits_out);
static inline void sd_runner_destroy(sd_runner *r) {
    if (r) r->vt->destroy(r);
}
static inline int32_t sd_runner_kv_len(const sd_runner *r) { return r->kv_len; }
/* The smallest non-zero length the runner can go back to (0: any; see "Sliding-window
 * release"): truncation, forward pos and tree base must be 0 or at least this. */
static inline int32_t sd_runner_min_len(const sd_runner *r) {
    if (!r->group) return 0;
    const int32_t shared = r->kv.shared * r->group->pool.block_tokens; /* "Prefix cache" below */
    if (r->group->kv_window <= 0) return shared;
    const int32_t w = sd_kv_window_min_len(sd_kv_first_row(&r->kv, r->group->pool.block_tokens), r->group->kv_window);
    return w > shared ? w : shared;
}
/* INVALID_ARGUMENT (detail in r->err, naming `what`) when the runner cannot go back to
 * len (0 < len < sd_runner_min_len), else OK. */
specdec_status sd_runner_check_len(sd_runner *r, int32_t len, const char *what);
/* Drop cache rows at and beyond len (O(1); a grouped runner gives the blocks past len
 * back to the pool); len >= kv_len changes nothing, len < 0 means 0. INVALID_ARGUMENT
 * and nothing changed when len is below what a windowed runner kept (see "Sliding-
 * window release"); else OK. */
static inline specdec_status sd_runner_truncate(sd_runner *r, int32_t len) {
    if (len >= r->kv_len) return SPECDEC_OK;
    if (len < 0) len = 0;
    if (len > 0 && len < sd_runner_min_len(r)) return sd_runner_check_len(r, len, "truncate");
    r->kv_len = len;
    r->tree.n = 0;
    if (r->group) sd_kv_trim(&r->kv, &r->group->pool, r->kv_len);
    return SPECDEC_OK;
}
/* Release what a windowed group's runner no longer needs at its kv_len (see "Sliding-
 * window release"; no-op for kv_window 0). Called by core after each successful call. */
void sd_runner_slide(sd_runner *r);

/* Grouped runners: make the runner hold the blocks of rows [0, rows) (CONTEXT_FULL
 * with the detail in r->err when the pool runs dry; nothing taken). Standalone: OK. */
specdec_status sd_runner_hold(sd_runner *r, int32_t rows);

/* Set a group's kv_window (see "Sliding-window release"): window >= 0, only while the
 * group has no runners (else INVALID_ARGUMENT, nothing changed). */
specdec_status sd_runner_group_set_window(sd_runner_group *g, int32_t window, sd_errbuf *eb);

/* Prefix cache (core/sd_kv.h "Prefix cache"; the scheduler's, specdec_prefix_cache).
 * sd_runner_group_enable_prefix gives the group's pool one: only for a group with
 * kv_window 0 (windowed sequences give their first blocks back) and no runners yet
 * (INVALID_ARGUMENT / UNSUPPORTED otherwise, nothing changed).
 * sd_runner_prefix_attach(r, tokens, rows): for an empty grouped runner (kv_len 0, no
 * tree), take the cached blocks of the longest block-aligned prefix of tokens[0..rows):
 * returns the rows taken, now r's kv_len (0: none, or no prefix cache). Their rows are
 * bitwise what r would have computed (batch-invariant kernels: a row depends on its
 * token and the rows before it, not on the pass that computed it).
 * sd_runner_prefix_publish(r, tokens, rows): r's rows [0, min(rows, kv_len)) hold
 * tokens[0..) and are final (a prefill's, or a finished sequence's): cache its full
 * blocks among them (no-op without a prefix cache or during a tree).
 * Both name the sequence's salt (specdec_generate_params.cache_salt): rows are shared only
 * between equal salts. Shared blocks are never rewritten: sd_runner_min_len is at least the rows of the
 * runner's shared blocks, so truncations and forwards below them (but to 0) fail with
 * INVALID_ARGUMENT like those below a released window. */
specdec_status sd_runner_group_enable_prefix(sd_runner_group *g, sd_errbuf *eb);
int32_t sd_runner_prefix_attach(sd_runner *r, const int32_t *tokens, int32_t rows, uint64_t salt);
void sd_runner_prefix_publish(sd_runner *r, const int32_t *tokens, int32_t rows, uint64_t salt);

/* A new sequence in group g (g->vt->add_runner; the detail in eb on failure). */
specdec_status sd_runner_group_add(sd_runner_group *g, sd_runner **out, sd_errbuf *eb);
/* Free a group whose runners are all destroyed (NULL: no-op). */
static inline void sd_runner_group_destroy(sd_runner_group *g) {
    if (g) g->vt->destroy(g);
}
/* Capture hs[ids[0]], .., hs[ids[n-1]] (increasing, within [0, capture_max]) for every
 * segment with aux set (n 0: capture off). INVALID_ARGUMENT naming the id otherwise,
 * UNSUPPORTED for a group that captures nothing; nothing changes on failure. */
specdec_status sd_runner_group_set_capture(sd_runner_group *g, const int32_t *ids, int32_t n, sd_errbuf *eb);

/* Common part of a group runner's creation/destruction: the table of n_ctx rows
 * (add_runner) and giving every block back (destroy). */
specdec_status sd_runner_group_attach(sd_runner_group *g, sd_runner *r, sd_errbuf *eb);
void sd_runner_group_detach(sd_runner *r);

/* One forward over several sequences (see "Groups and batches" above). */
specdec_status sd_runner_forward_batch(const sd_runner_seg *segs, int32_t n_segs, sd_errbuf *eb);
/* The same for runners of ONE group with a native forward_batch (else INVALID_ARGUMENT,
 * nothing changed), each native pass made by pass(ctx, g, segs, n) instead of
 * g->vt->forward_batch, with that entry's contract: a backend's variant of its batched
 * forward (backends/cuda/sd_cuda_runner.cu: logits left on the device). Checks, block
 * holding, splitting into passes and failure semantics as sd_runner_forward_batch. */
typedef specdec_status (*sd_runner_pass_fn)(void *ctx, sd_runner_group *g, const sd_runner_seg *segs, int32_t n_segs);
specdec_status sd_runner_forward_batch_via(const sd_runner_seg *segs, int32_t n_segs, sd_runner_pass_fn pass,
                                           void *ctx, sd_errbuf *eb);

/* forward() in chunks of max_batch tokens (a prompt longer than one call): logits row
 * i (when wanted) lands at logits + i * n_vocab. On success kv_len == pos + n; a
 * runner that ends anywhere else is reported as SPECDEC_ERR_INTERNAL. The failing
 * chunk's status is returned, its detail stays in r->err. */
specdec_status sd_runner_forward_chunked(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits);

/* Tree forward and compaction (see "Trees" above). */
specdec_status sd_runner_forward_tree(sd_runner *r, const int32_t *tokens, int32_t n, int32_t base, int32_t first,
                                      const int32_t *parent, float *logits);
specdec_status sd_runner_compact(sd_runner *r, const int32_t *keep, int32_t n_keep);

#ifdef __cplusplus
}
#endif

#endif

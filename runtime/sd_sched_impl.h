/* sd_sched_impl.h — private to the scheduler: runtime/sd_scheduler.c (the public
 * specdec_scheduler_* calls: requests, the queue, ids, waiting, metrics, create and
 * shutdown) and runtime/sd_sched_loop.c (the loop thread: admission, rounds, retiring).
 *
 * Model: one loop thread owns max_active sequence slots. Each slot is one sequence's
 * caches (a runner per model; with runner groups, core/sd_runner.h, all slots share one
 * model instance and one paged KV pool per model) and, while a request runs in it, that
 * request's generation (runtime/sd_generate.h). Every round the loop hands the running
 * sequences to the generation driver (runtime/sd_driver.h, the engine's too): it plans
 * each (its drafter, γ or tree), runs ONE shared round over all of them (core/sd_round.c:
 * batched draft forwards, one batched target verify pass, each sequence's own verifier;
 * on CUDA runner groups the batched device executor, backends/cuda/sd_cuda_batch_round.cu,
 * logits kept on the GPU, with the host executor for trees; otherwise the host executor,
 * backends/cpu/sd_host_round.h) and absorbs each sequence's tokens (callbacks, stop
 * conditions). Sequences with different drafters (model, ngram, none) share the round. Requests join between rounds when a slot is free and their KV
 * blocks can be reserved, and leave when they finish, fail or are cancelled.
 *
 * Admission control: a request reserves, per model, the blocks of the most rows it can
 * ever hold: min(n_ctx, n_prompt + n_predict) (+ SPECDEC_MAX_TREE_NODES with a draft
 * tree), or, for a model whose every layer slides (its group's kv_window > 0, core/
 * sd_runner.h "Sliding-window release"), the fewer blocks a sequence that gives the
 * blocks behind its window back holds at once (sd_kv_window_blocks: window + rollback
 * margin + one call's rows). Running requests never hold more than they reserved. The
 * queue head (FIFO) joins when its reservation fits beside them: on runner groups the
 * blocks held now (shared ones once) + what each running request may still take
 * (reservation - held) + its own reservation <= the pool (sd_sched_loop.c admit_fits);
 * per-slot runners: the sum of the reservations. Either way the pool never runs dry
 * mid-generation. That is specdec_kv_admission RESERVE.
 *
 * OPTIMISTIC admission (the default with runner groups) claims less: a slot's demand is the
 * blocks it may take before the loop looks again — an unbegun or restarting one its whole
 * (remaining) prefill plus one round, a running one one round (its round_rows),
 * never beyond its reservation, minus what it holds. The queue head joins when the pool's
 * used blocks + every running slot's demand + its own fit (sd_sched_loop.c sched_fits). Before
 * each round (sched_make_room) the loop checks the same sum; while it does not fit, the
 * newest running request is preempted: its rows are published to the prefix cache (when on),
 * its caches truncated to nothing, and its slot parked (it keeps the slot, its generation
 * and its output). Parked slots resume oldest first when their demand fits, before any
 * queued request joins, by a prefill over the sequence so far (sd_driver_resume_step: a
 * first begin step on tokens[0..length), which leaves its statistics alone). A lone running
 * request always fits (its demand is within its reservation, which fits the pool), so the
 * loop never stalls. Order (specdec_scheduling_policy): every "oldest" / "newest" here is by
 * sd_req_before — arrival under FCFS, (priority, arrival) under PRIORITY, where a queued request
 * that waits for room also has the running ones served after it preempted, latest first.
 *
 * Locking: `mu` guards the queue, the id table, request states, the reservation count
 * and the metrics. A running request's other fields are written only by the loop
 * thread; readers look at them once they see SD_REQ_DONE under the lock. The loop
 * never holds `mu` while it computes or calls a callback, so callbacks may submit,
 * cancel and read metrics. */
#ifndef SD_SCHED_IMPL_H
#define SD_SCHED_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "specdec.h"
#include "sd_driver.h"
#include "sd_generate.h"
#include "sd_round.h"
#include "sd_runner.h"

#define SD_SCHED_MAX_ACTIVE 256
#define SD_SCHED_MAX_QUEUED (1 << 20)
#define SD_SCHED_MAX_BLOCK_TOKENS 4096

typedef enum sd_req_state { SD_REQ_QUEUED, SD_REQ_RUNNING, SD_REQ_DONE } sd_req_state;

typedef struct sd_req {
    specdec_request_id id;
    struct sd_req *hnext;         /* chain of the id table bucket */
    struct sd_req *qprev, *qnext; /* FIFO links while queued */
    struct sd_req *dprev, *dnext; /* the finished list, while finished and neither reported by
                                     specdec_scheduler_wait_any nor collected */
    int in_done_list;
    sd_req_state state;           /* under the scheduler's lock */
    atomic_int cancel;            /* set by cancel/shutdown; read by the loop */
    int32_t *prompt;              /* [n_prompt + cap]: the prompt, then the output (the sequence) */
    int32_t *out;                 /* prompt + n_prompt */
    int32_t n_prompt, cap, n_out;
    int32_t need_blocks;          /* KV blocks reserved per model while it runs */
    int32_t round_rows;           /* most rows one round adds beyond its kv length: the pending token and
                                     a tree's nodes or a chain's tokens, + 1 (OPTIMISTIC admission) */
    char *stop_block;             /* [n_stop] pointers then the strings; NULL without stops */
    void *proc_block;             /* copies of logit_bias, stop_token_ids, allowed_token_ids, bad_words_ids then
                                     bad_words_offsets; NULL without any */
    char *text_win;               /* [SD_GEN_TEXT_WIN] with stop strings, else NULL */
    specdec_detok_stream *ds;     /* with a tokenizer, else NULL */
    specdec_generate_params gp;   /* the caller's, stop_strings pointing into stop_block */
    specdec_stats stats;
    specdec_status outcome;
} sd_req;

/* One of the loop's max_active sequence slots. */
typedef struct sd_sched_seq {
    sd_runner *t, *d;             /* its caches (d NULL without a draft model; an EAGLE-3 head runner
                                     bound to t with a head) */
    sd_req *req;                  /* the request running in it; NULL: free (under the lock) */
    int begun;                    /* the request's prefill started (its generation is initialised) */
    int prefilling;               /* begun, its prefill not done yet (chunked prefill): no rounds */
    int finished;                 /* the request ended this round (the loop retires it) */
    int parked;                   /* OPTIMISTIC admission: preempted, holds no blocks, waits to resume */
    int restart;                  /* its caches were dropped: its next begin step is a first call */
    int resume;                   /* ... over a sequence that had run rounds (its prefill statistics stay) */
    sd_gen g;
    sd_adapt adapt;
    int64_t counted_tokens, counted_rounds, counted_drafted, counted_accepted; /* in the metrics already */
    int64_t counted_draft_rounds;
    int counted_prefix;           /* its prefix-cache lookup is in the metrics */
} sd_sched_seq;

struct specdec_scheduler {
    pthread_mutex_t mu;
    pthread_cond_t work_cv;       /* a request was queued or cancelled, or stopping: wakes the loop */
    pthread_cond_t done_cv;       /* a request ended, or the loop was joined: wakes waiters */
    int sync_ready;               /* mutex and conds initialised */
    specdec_scheduler_params p;
    int32_t n_ctx, n_vocab;
    int has_draft;
    int32_t prefill_budget;       /* prompt tokens prefilled between two rounds (p.prefill_chunk resolved) */
    int head;                     /* the draft is an EAGLE-3 head: each slot's d is a head runner over its
                                     t (its own draft cache, in no pool; gd NULL) */
    sd_gen_env env;
    sd_runner_group *gt, *gd;     /* one model instance each; NULL: a runner per slot */
    sd_exec *host_exec;           /* the host executor (the device one's fallback for trees) */
    sd_exec *dev_exec;            /* the batched CUDA executor on CUDA groups, else NULL */
    sd_round *round;              /* the shared round over them */
    sd_driver driver;             /* runs the rounds */
    sd_sched_seq *seqs;           /* [p.max_active] */
    sd_gen **gens;                /* [p.max_active] one round's generations */
    sd_sched_seq **batch_of;      /* [p.max_active] their slots */
    int32_t pool_blocks;          /* KV blocks per model the admission control hands out */
    int32_t reserved;             /* blocks reserved by running requests (per model) */
    int optimistic;               /* specdec_kv_admission OPTIMISTIC in effect (runner groups) */
    const sd_req *blocked;        /* loop thread: the queue head the last admission left waiting for room
                                     (NULL: none), as blocked_copy: a copy taken under the lock, since a
                                     queued request may be cancelled and collected once it is released
                                     (sched_make_room reads its id, priority and claim only) */
    sd_req blocked_copy;
    int64_t preemptions;          /* preemptions so far (loop thread; copied into m under the lock) */
    pthread_t thread;
    int started;
    sd_req **buckets;             /* [n_buckets] id table, intrusive chains */
    size_t n_buckets;             /* power of two */
    sd_req *q_head, *q_tail;      /* FIFO of queued requests */
    sd_req *d_head, *d_tail;      /* finished requests specdec_scheduler_wait_any has not reported yet, in
                                     the order they finished */
    specdec_request_id last_id;
    int stopping, join_claimed, joined;
    int dead;                     /* the device was lost: every request fails */
    specdec_scheduler_metrics m;
    int64_t draft_rounds;                          /* specdec_scheduler_get_acceptance */
    int64_t accepted_at[SPECDEC_MAX_DRAFT];
};

/* Whether request a is served before b: FCFS by id (arrival); PRIORITY by (priority, id) (the
 * priority of FCFS requests is 0). */
static inline int sd_req_before(const sd_req *a, const sd_req *b) {
    return a->gp.priority != b->gp.priority ? a->gp.priority < b->gp.priority : a->id < b->id;
}

/* The target's group has a prefix cache (specdec_prefix_cache): requests take cached prompt
 * rows and leave theirs (docs/BATCHING.md "Prefix cache"). */
static inline int sd_sched_prefix_on(const specdec_scheduler *s) { return s->gt && s->gt->pool.prefix; }

/* The loop thread (sd_sched_loop.c). */
void *sd_sched_loop(void *arg);
/* Under the lock: mark r done with its outcome and count it. */
void sd_sched_done(specdec_scheduler *s, sd_req *r);
/* Under the lock: take a request out of the queue. */
void sd_queue_remove(specdec_scheduler *s, sd_req *r);
/* The scheduler whose loop runs on this thread (shutdown/free from a callback). */
extern _Thread_local const specdec_scheduler *sd_sched_self;

#endif

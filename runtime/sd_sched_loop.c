/* sd_sched_loop.c — the scheduler's loop thread (see sd_sched_impl.h for the model):
 * admit queued requests into free sequence slots while their KV reservations fit, run
 * one round over every running sequence, retire the ones that ended. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "sd_sched_impl.h"

/* ------------------------------------------------------------------------- */
/* under the lock: admission, retiring                                        */
/* ------------------------------------------------------------------------- */
static sd_sched_seq *free_slot(specdec_scheduler *s) {
    for (int32_t i = 0; i < s->p.max_active; i++)
        if (!s->seqs[i].req) return &s->seqs[i];
    return NULL;
}

/* What the running requests may still take from a group's pool: each one's reservation
 * minus the blocks it holds now (shared ones included). */
static int64_t future_blocks(const specdec_scheduler *s, int draft) {
    int64_t f = 0;
    for (int32_t i = 0; i < s->p.max_active; i++) {
        const sd_sched_seq *q = &s->seqs[i];
        if (!q->req) continue;
        const int32_t held = sd_kv_held(draft ? &q->d->kv : &q->t->kv);
        f += q->req->need_blocks > held ? q->req->need_blocks - held : 0;
    }
    return f;
}

/* Whether a request reserving `need` blocks per model fits now (on the loop thread, between
 * rounds: the tables are still). Runner groups: the blocks held now, each once however many
 * sequences share it (prefix cache), plus what every running request may still take, plus
 * `need` must fit the pool — so holds never fail, and requests sharing a prefix leave room
 * for more. Per-slot runners: the sum of the reservations. */
static int admit_fits(const specdec_scheduler *s, int32_t need) {
    if (!s->gt) return s->reserved + need <= s->pool_blocks;
    if ((int64_t)sd_kv_pool_used(&s->gt->pool) + future_blocks(s, 0) + need > s->pool_blocks) return 0;
    return !s->gd || (int64_t)sd_kv_pool_used(&s->gd->pool) + future_blocks(s, 1) + need <= s->pool_blocks;
}

/* ---- OPTIMISTIC admission (sd_sched_impl.h) ---- */
/* The blocks a request claims of one model's pool when its caches reach `rows` rows: those
 * rows' blocks within its reservation (a sliding-window group's sequences release blocks
 * behind the window, so there its reservation, the most they hold at once). */
static int32_t claim_blocks(const specdec_scheduler *s, const sd_req *r, int draft, int32_t rows) {
    const sd_runner_group *g = draft ? s->gd : s->gt;
    if (g->kv_window > 0) return r->need_blocks;
    const int32_t b = sd_kv_blocks_for(rows, s->p.kv_block_tokens);
    return b < r->need_blocks ? b : r->need_blocks;
}

/* Rows slot q's caches may reach before the loop looks again: its (remaining) prefill and
 * one round; a request not begun yet: its prompt's. */
static int32_t next_rows(const sd_sched_seq *q) {
    const int64_t len = q->begun ? q->g.L : q->req->n_prompt;
    const int64_t rows = len - 1 + q->req->round_rows;
    return rows > INT32_MAX ? INT32_MAX : (int32_t)rows;
}

/* What slot q may still take from a model's pool (parked: nothing; it holds nothing). */
static int64_t seq_demand(const specdec_scheduler *s, const sd_sched_seq *q, int draft) {
    if (q->parked || q->finished) return 0;
    const int32_t held = sd_kv_held(draft ? &q->d->kv : &q->t->kv);
    const int32_t want = claim_blocks(s, q->req, draft, next_rows(q));
    return want > held ? want - held : 0;
}

/* Whether every running slot's demand, plus `extra` (NULL: nothing; a parked slot about to
 * resume; a queued request about to join), fits each pool beside its used blocks. */
static int sched_fits(const specdec_scheduler *s, const sd_sched_seq *extra, const sd_req *joining) {
    for (int draft = 0; draft <= (s->gd != NULL); draft++) {
        const sd_runner_group *g = draft ? s->gd : s->gt;
        int64_t need = sd_kv_pool_used(&g->pool);
        for (int32_t i = 0; i < s->p.max_active; i++)
            if (s->seqs[i].req) need += seq_demand(s, &s->seqs[i], draft);
        if (extra) need += claim_blocks(s, extra->req, draft, next_rows(extra)); /* it holds nothing */
        if (joining) need += claim_blocks(s, joining, draft, joining->n_prompt - 1 + joining->round_rows);
        if (need > s->pool_blocks) return 0;
    }
    return 1;
}

/* Whether a preempted request waits that is served before r (sd_req_before). */
static int parked_before(const specdec_scheduler *s, const sd_req *r) {
    for (int32_t i = 0; i < s->p.max_active; i++)
        if (s->seqs[i].req && s->seqs[i].parked && !s->seqs[i].finished && sd_req_before(s->seqs[i].req, r)) return 1;
    return 0;
}

/* Move queued requests (in queue order: FCFS, or by priority) into free slots while their
 * reservations fit (OPTIMISTIC: their claims, and only once no preempted request served before
 * them waits to resume). A head left waiting for room is s->blocked (sched_make_room). */
static void sched_admit(specdec_scheduler *s) {
    s->blocked = NULL;
    while (s->q_head && !s->stopping && !s->dead) {
        sd_sched_seq *q = free_slot(s);
        sd_req *r = s->q_head;
        if (s->optimistic && parked_before(s, r)) return; /* they resume first */
        if (!q || (s->optimistic ? !sched_fits(s, NULL, r) : !admit_fits(s, r->need_blocks))) {
            if (q) { /* waiting for room (not for a slot) */
                s->blocked_copy = *r;
                s->blocked = &s->blocked_copy;
            }
            return;                    /* the head waits: queue order */
        }
        sd_queue_remove(s, r);
        r->state = SD_REQ_RUNNING;
        s->reserved += r->need_blocks;
        s->m.active++;
        q->req = r;
        q->begun = q->prefilling = 0;
        q->finished = q->parked = q->restart = q->resume = 0;
        q->counted_tokens = q->counted_rounds = q->counted_drafted = q->counted_accepted = 0;
        q->counted_draft_rounds = 0;
        q->counted_prefix = 0;
    }
}

/* Add what the running sequences did since the last count to the metrics. */
static void sched_count(specdec_scheduler *s, sd_sched_seq *q) {
    const specdec_stats *st = &q->req->stats;
    int64_t draft_rounds = st->n_draft_rounds - q->counted_draft_rounds, accepted = st->n_accepted - q->counted_accepted;
    s->draft_rounds += draft_rounds;
    if (draft_rounds == 1) /* one round since the last count: its accepted path, by position */
        for (int64_t i = 0; i < accepted && i < SPECDEC_MAX_DRAFT; i++) s->accepted_at[i]++;
    q->counted_draft_rounds = st->n_draft_rounds;
    if (!q->counted_prefix) {
        s->m.prefix_cache_queries += q->g.rs.prefix_queried;
        s->m.prefix_cache_hits += q->g.rs.prefix_hit;
        q->counted_prefix = 1;
    }
    s->m.tokens_generated += q->g.n_out - q->counted_tokens;
    s->m.rounds += st->n_rounds - q->counted_rounds;
    s->m.drafted += st->n_drafted - q->counted_drafted;
    s->m.accepted += st->n_accepted - q->counted_accepted;
    q->counted_tokens = q->g.n_out;
    q->counted_rounds = st->n_rounds;
    q->counted_drafted = st->n_drafted;
    q->counted_accepted = st->n_accepted;
}

/* The blocks a slot's per-slot runner would take (those of its length). */
static int32_t seq_blocks(const specdec_scheduler *s, const sd_runner *r) {
    return sd_kv_blocks_for(sd_runner_kv_len(r), s->p.kv_block_tokens);
}

/* Count every running sequence, retire the finished ones, snapshot the KV use: a group's
 * held blocks (shared ones once), else the slots' own. */
static void sched_retire(specdec_scheduler *s) {
    int32_t used = 0, dused = 0;
    for (int32_t i = 0; i < s->p.max_active; i++) {
        sd_sched_seq *q = &s->seqs[i];
        if (!q->req) continue;
        if (q->begun) sched_count(s, q);
        if (q->finished) {
            s->reserved -= q->req->need_blocks;
            s->m.active--;
            sd_sched_done(s, q->req);
            q->req = NULL;
            continue;
        }
        if (!s->gt) used += seq_blocks(s, q->t);
        if (q->d && !s->head && !s->gd) dused += seq_blocks(s, q->d); /* a head's cache is in no pool */
    }
    int64_t parked = 0;
    for (int32_t i = 0; i < s->p.max_active; i++) parked += s->seqs[i].req && s->seqs[i].parked;
    s->m.preempted = parked;
    s->m.preemptions = s->preemptions;
    s->m.kv_blocks_used = s->gt ? sd_kv_pool_used(&s->gt->pool) : used;
    s->m.draft_kv_blocks_used = s->gd ? sd_kv_pool_used(&s->gd->pool) : dused;
    s->m.kv_blocks_cached = s->gt ? sd_kv_cached(&s->gt->pool) : 0;
    s->m.draft_kv_blocks_cached = s->gd ? sd_kv_cached(&s->gd->pool) : 0;
}

/* ------------------------------------------------------------------------- */
/* without the lock: one round                                                */
/* ------------------------------------------------------------------------- */
/* The request in q ends with status st: its statistics, its outcome, its blocks back. */
static void seq_end(specdec_scheduler *s, sd_sched_seq *q, specdec_status st) {
    sd_req *r = q->req;
    sd_gen_finish(&q->g, st, &r->n_out);
    r->outcome = st == SPECDEC_OK && q->g.cancelled && q->g.reason == SPECDEC_STOP_CALLBACK ? SPECDEC_ERR_CANCELLED : st;
    if (sd_sched_prefix_on(s) && st == SPECDEC_OK && q->begun) { /* its rows hold the sequence's tokens: leave them */
        const int32_t rows = r->n_prompt + r->n_out - 1;
        sd_runner_prefix_publish(q->t, r->prompt, rows, r->gp.cache_salt);
        if (q->d && !s->head) sd_runner_prefix_publish(q->d, r->prompt, rows, r->gp.cache_salt);
    }
    sd_runner_truncate(q->t, 0);
    if (q->d) sd_runner_truncate(q->d, 0);
    q->finished = 1;
}

/* The request in q was cancelled outside a round (between prefill chunks, or preempted): it
 * ends CANCELLED with the tokens it has; one not begun yet has none. */
static void seq_end_cancelled(specdec_scheduler *s, sd_sched_seq *q) {
    if (!q->begun) {
        q->req->outcome = SPECDEC_ERR_CANCELLED;
        q->finished = 1;
        return;
    }
    q->g.reason = SPECDEC_STOP_CALLBACK;
    q->g.cancelled = 1;
    q->prefilling = 0;
    seq_end(s, q, SPECDEC_OK);
}

/* One step of a request's prefill (chunked prefill: at most `budget` target rows): the
 * first starts its generation. *used: the target rows it prefilled. */
static specdec_status seq_begin_step(specdec_scheduler *s, sd_sched_seq *q, int32_t budget, int32_t *used) {
    sd_req *r = q->req;
    const int first = !q->begun || q->restart;
    if (!q->begun) {
        const sd_gen_io io = {r->prompt, r->out, r->text_win, &q->adapt, r->ds, &r->stats, sd_thread_err()};
        sd_gen_init(&q->g, &s->env, &r->gp, r->prompt, r->n_prompt, &io);
        q->g.cancel = &r->cancel;
        q->g.rs.target = q->t;
        q->g.rs.draft = q->d;
        q->g.rs.prefix_cache = sd_sched_prefix_on(s);
        q->g.rs.prefix_salt = r->gp.cache_salt;
        q->begun = q->prefilling = 1;
    }
    if (q->restart) q->g.rs.length = q->g.L; /* the sequence so far (the last round's tokens are in L only) */
    const int32_t before = first ? 0 : sd_runner_kv_len(q->t);
    int done = 0;
    const specdec_status st = q->resume ? sd_driver_resume_step(&s->driver, &q->g, first, budget, &done)
                                        : sd_driver_begin_step(&s->driver, &q->g, first, budget, &done);
    q->restart = 0;
    if (done || st != SPECDEC_OK) q->resume = 0;
    const int32_t after = sd_runner_kv_len(q->t), from = first ? q->g.rs.prefix_hit : before;
    *used = after > from ? after - from : 0;
    if (done || st != SPECDEC_OK) q->prefilling = 0;
    return st;
}

/* The oldest admitted request whose prefill is not done (NULL: none). */
static sd_sched_seq *oldest_prefill(specdec_scheduler *s) {
    sd_sched_seq *best = NULL;
    for (int32_t i = 0; i < s->p.max_active; i++) {
        sd_sched_seq *q = &s->seqs[i];
        if (q->req && !q->finished && !q->parked && (!q->begun || q->prefilling) &&
            (!best || q->req->id < best->req->id))
            best = q;
    }
    return best;
}

/* Chunked prefill: at most prefill_budget prompt rows between two rounds, the oldest
 * request first; a request starts (and takes what the prefix cache has) only once every
 * older one finished its prefill, so the n choices of a prompt share its rows. */
static void sched_prefill(specdec_scheduler *s) {
    int32_t budget = s->prefill_budget;
    sd_sched_seq *q;
    while (budget > 0 && (q = oldest_prefill(s)) != NULL) {
        if (q->begun && atomic_load_explicit(&q->req->cancel, memory_order_acquire)) { /* between chunks */
            seq_end_cancelled(s, q);
            continue;
        }
        int32_t used = 0;
        const specdec_status st = seq_begin_step(s, q, budget, &used);
        budget -= used;
        if (st != SPECDEC_OK) seq_end(s, q, st);
    }
}

/* Prefill what the budget allows, end the requests that failed to begin, flag cancelled
 * ones: the round's generations (begun, prefilled). */
static int32_t sched_gather(specdec_scheduler *s) {
    int32_t n = 0;
    sched_prefill(s);
    for (int32_t i = 0; i < s->p.max_active; i++) {
        sd_sched_seq *q = &s->seqs[i];
        if (!q->req || q->finished || q->parked || !q->begun || q->prefilling) continue;
        if (atomic_load_explicit(&q->req->cancel, memory_order_acquire) && q->g.reason == SPECDEC_STOP_NONE) {
            q->g.reason = SPECDEC_STOP_CALLBACK;
            q->g.cancelled = 1;
        }
        s->gens[n] = &q->g;
        s->batch_of[n++] = q;
    }
    return n;
}

/* One round over the gathered generations (the driver plans, runs and absorbs them),
 * then the ones that ended. */
static void sched_run(specdec_scheduler *s, int32_t n) {
    (void)sd_driver_round(&s->driver, s->gens, n);
    for (int32_t j = 0; j < n; j++) {
        sd_sched_seq *q = s->batch_of[j];
        if (q->g.status != SPECDEC_OK || q->g.reason != SPECDEC_STOP_NONE) seq_end(s, q, q->g.status);
    }
    if (sd_round_device_lost(s->round)) s->dead = 1;
}

/* OPTIMISTIC: preempt slot q (its caches dropped, its rows left to the prefix cache when on;
 * its generation and output kept) and park it until it fits again. */
static void seq_preempt(specdec_scheduler *s, sd_sched_seq *q) {
    if (q->begun) {
        sd_req *r = q->req;
        if (sd_sched_prefix_on(s)) { /* rows of seq[0..L-1): the resume may find them cached */
            const int32_t rows = q->g.L - 1;
            sd_runner_prefix_publish(q->t, r->prompt, rows, r->gp.cache_salt);
            if (q->d && !s->head) sd_runner_prefix_publish(q->d, r->prompt, rows, r->gp.cache_salt);
        }
        sd_runner_truncate(q->t, 0);
        if (q->d) sd_runner_truncate(q->d, 0);
        if (!q->prefilling) q->resume = 1; /* it had run rounds: a resume, not its prefill */
        q->prefilling = q->restart = 1;
        r->stats.n_preemptions++;
    }
    q->parked = 1;
    s->preemptions++;
}

/* The running (not parked) slot served last (sd_req_before), NULL when none. */
static sd_sched_seq *last_running(specdec_scheduler *s) {
    sd_sched_seq *victim = NULL;
    for (int32_t i = 0; i < s->p.max_active; i++) {
        sd_sched_seq *q = &s->seqs[i];
        if (q->req && !q->finished && !q->parked && (!victim || sd_req_before(victim->req, q->req))) victim = q;
    }
    return victim;
}

/* OPTIMISTIC, before a round: parked requests whose client left end now; while the running
 * slots' demand does not fit, the running request served last is preempted (never the last one:
 * alone it fits); under PRIORITY, while the queue head waits for room and a running request is
 * served after it, that one is preempted too (the head joins at the next admission); then parked
 * ones resume, first served first, while they fit and are served before the queue head. */
static void sched_make_room(specdec_scheduler *s) {
    int32_t running = 0;
    for (int32_t i = 0; i < s->p.max_active; i++) {
        sd_sched_seq *q = &s->seqs[i];
        if (!q->req || q->finished) continue;
        if (q->parked && atomic_load_explicit(&q->req->cancel, memory_order_acquire)) {
            q->parked = 0;
            seq_end_cancelled(s, q);
            continue;
        }
        running += !q->parked;
    }
    while (running > 1 && !sched_fits(s, NULL, NULL)) {
        seq_preempt(s, last_running(s));
        running--;
    }
    const sd_req *head = s->blocked;
    if (head && s->p.scheduling_policy == SPECDEC_SCHEDULING_PRIORITY) {
        sd_sched_seq *victim;
        while (running > 0 && !sched_fits(s, NULL, head) && (victim = last_running(s)) && sd_req_before(head, victim->req)) {
            seq_preempt(s, victim);
            running--;
        }
        if (sched_fits(s, NULL, head)) return; /* room made: it joins before anything resumes */
    }
    for (;;) {
        sd_sched_seq *first = NULL;
        for (int32_t i = 0; i < s->p.max_active; i++) {
            sd_sched_seq *q = &s->seqs[i];
            if (q->req && !q->finished && q->parked && (!first || sd_req_before(q->req, first->req))) first = q;
        }
        if (!first || (head && sd_req_before(head, first->req)) || (running > 0 && !sched_fits(s, first, NULL))) return;
        first->parked = 0;
        running++;
    }
}

/* Under the lock after a lost device: every request fails. */
static void sched_fail_all(specdec_scheduler *s) {
    for (int32_t i = 0; i < s->p.max_active; i++) {
        sd_sched_seq *q = &s->seqs[i];
        if (!q->req || q->finished) continue;
        if (q->begun) seq_end(s, q, SPECDEC_ERR_DEVICE_LOST);
        else {
            q->req->outcome = SPECDEC_ERR_DEVICE_LOST;
            q->finished = 1;
        }
    }
    while (s->q_head) {
        sd_req *r = s->q_head;
        sd_queue_remove(s, r);
        r->outcome = SPECDEC_ERR_DEVICE_LOST;
        sd_sched_done(s, r);
    }
}

void *sd_sched_loop(void *arg) {
    specdec_scheduler *s = arg;
    sd_sched_self = s;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        sched_admit(s);
        if (s->m.active == 0) {
            if (s->stopping) break;
            pthread_cond_wait(&s->work_cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        if (s->optimistic) sched_make_room(s);
        const int32_t n = sched_gather(s);
        if (n > 0) sched_run(s, n);
        pthread_mutex_lock(&s->mu);
        if (s->dead) sched_fail_all(s);
        sched_retire(s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* test_scheduler_random.c — randomized arrival and cancel schedules (fixed seed): one
 * thread submits requests at random instants with random prompts, modes (greedy, match
 * with one of two seeds), n_predict and γ; a second thread cancels a random third of
 * them at random delays; both then wait for everything. Whatever the timing:
 *  - a request with outcome OK produced exactly the reference (specdec_generate alone)
 *    cut to its n_predict: greedy and match output do not depend on γ or n_predict;
 *  - a CANCELLED request produced a prefix of that;
 *  - the metrics add up (every submitted request finished or was cancelled, none
 *    failed, nothing queued or active at the end).
 * Usage: test_scheduler_random TARGET_DIR DRAFT_DIR [N_REQUESTS [MAX_PREDICT (<= 40)]] */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "sched_common.h"

#define MAX_REQ 200
#define MAX_PREDICT 40
static int max_predict = MAX_PREDICT; /* n_predict is drawn from [1, max_predict] */
#define N_USED_PROMPTS 4
#define N_VARIANTS 3 /* greedy, match seed 1, match seed 2 */

typedef struct plan {
    int prompt, variant;
    int32_t n_predict, n_draft;
    long submit_at_us, cancel_at_us; /* cancel_at_us < 0: never */
} plan;

typedef struct state {
    sc_env *e;
    specdec_scheduler *s;
    int n;
    plan plans[MAX_REQ];
    specdec_request_id ids[MAX_REQ];
    specdec_status submit_st[MAX_REQ];
    int32_t prompts[N_USED_PROMPTS][64], n_prompts[N_USED_PROMPTS];
    int32_t ref[N_USED_PROMPTS][N_VARIANTS][MAX_PREDICT], n_ref[N_USED_PROMPTS][N_VARIANTS];
    pthread_mutex_t mu; /* ids[] are published by the submitter, read by the canceller */
    double t0;
} state;

static specdec_generate_params variant_params(int variant, int32_t n_predict, int32_t n_draft) {
    return sc_params(variant == 0 ? 0 : 1, (uint64_t)variant, n_predict, n_draft);
}

static void sleep_until(const state *st, long at_us) {
    long now = (long)((sc_now() - st->t0) * 1e6);
    if (at_us > now) sc_sleep_us(at_us - now);
}

static void *submitter(void *arg) {
    state *st = arg;
    for (int i = 0; i < st->n; i++) {
        const plan *p = &st->plans[i];
        sleep_until(st, p->submit_at_us);
        specdec_generate_params gp = variant_params(p->variant, p->n_predict, p->n_draft);
        specdec_request_id id = 0;
        specdec_status rc = specdec_scheduler_submit(st->s, st->prompts[p->prompt], st->n_prompts[p->prompt], &gp, &id);
        pthread_mutex_lock(&st->mu);
        st->ids[i] = id;
        st->submit_st[i] = rc;
        pthread_mutex_unlock(&st->mu);
    }
    return NULL;
}

static int by_cancel_time(const void *a, const void *b, void *plans) {
    const plan *p = plans;
    long x = p[*(const int *)a].cancel_at_us, y = p[*(const int *)b].cancel_at_us;
    return (x > y) - (x < y);
}

static void *canceller(void *arg) {
    state *st = arg;
    int order[MAX_REQ], n = 0;
    for (int i = 0; i < st->n; i++)
        if (st->plans[i].cancel_at_us >= 0) order[n++] = i;
    for (int a = 1; a < n; a++) /* insertion sort by cancel time */
        for (int b = a; b > 0 && by_cancel_time(&order[b - 1], &order[b], st->plans) > 0; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    for (int k = 0; k < n; k++) {
        int i = order[k];
        sleep_until(st, st->plans[i].cancel_at_us);
        specdec_request_id id;
        for (;;) { /* its submit may lag behind when the machine is slow */
            pthread_mutex_lock(&st->mu);
            id = st->ids[i];
            int submitted = id != 0 || st->submit_st[i] != SPECDEC_OK;
            pthread_mutex_unlock(&st->mu);
            if (submitted) break;
            sc_sleep_us(500);
        }
        if (id) {
            specdec_status rc = specdec_scheduler_cancel(st->s, id);
            SD_CHECK(rc == SPECDEC_OK, "cancel %d: %s", i, specdec_status_string(rc)); /* not yet collected */
        }
    }
    return NULL;
}

static void make_plan(state *st, uint64_t seed) {
    long t = 0;
    for (int i = 0; i < st->n; i++) {
        plan *p = &st->plans[i];
        p->prompt = sc_rand_int(&seed, 0, N_USED_PROMPTS - 1);
        p->variant = sc_rand_int(&seed, 0, N_VARIANTS - 1);
        p->n_predict = sc_rand_int(&seed, 1, max_predict);
        p->n_draft = sc_rand_int(&seed, 0, 6);
        t += sc_rand_int(&seed, 0, 8000); /* 0-8 ms between arrivals */
        p->submit_at_us = t;
        p->cancel_at_us = sc_rand_int(&seed, 0, 2) == 0 ? t + sc_rand_int(&seed, 0, 40000) : -1;
    }
}

static int references(state *st) {
    for (int p = 0; p < N_USED_PROMPTS; p++) {
        st->n_prompts[p] = sc_encode(st->e, SC_PROMPTS[p], st->prompts[p], 64);
        if (st->n_prompts[p] <= 0) return 1;
        for (int v = 0; v < N_VARIANTS; v++) {
            specdec_generate_params gp = variant_params(v, max_predict, 4);
            st->n_ref[p][v] = sc_reference(st->e, st->prompts[p], st->n_prompts[p], &gp, st->ref[p][v], max_predict,
                                           NULL);
            if (st->n_ref[p][v] < 0) return 1;
        }
    }
    return 0;
}

static void collect_and_check(state *st) {
    int n_ok = 0, n_cancelled = 0;
    for (int i = 0; i < st->n; i++) {
        const plan *p = &st->plans[i];
        SD_CHECK(st->submit_st[i] == SPECDEC_OK, "submit %d: %s", i, specdec_status_string(st->submit_st[i]));
        if (st->submit_st[i] != SPECDEC_OK) continue;
        int32_t out[MAX_PREDICT], n = -1;
        specdec_status os = SPECDEC_ERR_INTERNAL;
        specdec_status rc = specdec_scheduler_wait(st->s, st->ids[i], -1, out, MAX_PREDICT, &n, NULL, &os);
        const int32_t *ref = st->ref[p->prompt][p->variant];
        int32_t want = st->n_ref[p->prompt][p->variant];
        if (want > p->n_predict) want = p->n_predict;
        SD_CHECK(rc == SPECDEC_OK && (os == SPECDEC_OK || os == SPECDEC_ERR_CANCELLED), "request %d: %d / %d", i, rc,
                 os);
        if (os == SPECDEC_OK) {
            n_ok++;
            SD_CHECK(n == want && sc_same(out, ref, n), "request %d (prompt %d variant %d γ %d n %d): %d tokens vs %d",
                     i, p->prompt, p->variant, (int)p->n_draft, (int)p->n_predict, (int)n, (int)want);
        } else if (os == SPECDEC_ERR_CANCELLED) {
            n_cancelled++;
            SD_CHECK(p->cancel_at_us >= 0, "request %d cancelled without a cancel", i);
            SD_CHECK(n >= 0 && n <= want && sc_same(out, ref, n), "request %d: cancelled output not a prefix", i);
        }
    }
    specdec_scheduler_metrics m;
    specdec_scheduler_get_metrics(st->s, &m);
    SD_CHECK(m.submitted == st->n && m.finished == n_ok && m.cancelled == n_cancelled && m.failed == 0 &&
                 m.queued == 0 && m.active == 0,
             "metrics: submitted %lld finished %lld/%d cancelled %lld/%d failed %lld", (long long)m.submitted,
             (long long)m.finished, n_ok, (long long)m.cancelled, n_cancelled, (long long)m.failed);
    printf("%d requests: %d finished, %d cancelled\n", st->n, n_ok, n_cancelled);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TARGET_DIR DRAFT_DIR [N_REQUESTS [MAX_PREDICT]]\n", argv[0]);
        return 2;
    }
    static state st;
    sc_env e;
    if (sc_env_load(&e, argv[1], argv[2])) return 1;
    st.e = &e;
    st.n = argc > 3 ? atoi(argv[3]) : 60;
    if (st.n < 1 || st.n > MAX_REQ) st.n = 60;
    max_predict = argc > 4 ? atoi(argv[4]) : MAX_PREDICT;
    if (max_predict < 1 || max_predict > MAX_PREDICT) max_predict = MAX_PREDICT;
    pthread_mutex_init(&st.mu, NULL);
    make_plan(&st, 0x5eed5eedULL);
    specdec_engine_params ep = sc_engine_params();
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = 3;
    if (references(&st) || specdec_scheduler_create(e.tm, e.dm, &ep, &sp, &st.s) != SPECDEC_OK) {
        fprintf(stderr, "setup: %s\n", specdec_last_error());
        sc_env_free(&e);
        return 1;
    }
    st.t0 = sc_now();
    pthread_t a, b;
    pthread_create(&a, NULL, submitter, &st);
    pthread_create(&b, NULL, canceller, &st);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    collect_and_check(&st);
    specdec_scheduler_free(st.s);
    pthread_mutex_destroy(&st.mu);
    sc_env_free(&e);
    return sd_test_done();
}

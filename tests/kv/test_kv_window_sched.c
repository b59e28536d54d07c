/* test_kv_window_sched.c — the scheduler with sliding-window release (runtime/
 * sd_sched_impl.h "Admission control", core/sd_runner.h "Sliding-window release").
 * Models: the Mistral-window fixture (tests/models/fixtures/mistral_window, window 5 on
 * every layer) as the target, the same weights with window 3 as the draft (a different
 * model: drafts get rejected, rounds roll back), both with max_position_embeddings
 * raised so a sequence can run long; and the same pair without a window
 * (sliding_window null: no release) for admission. Written to a temporary directory
 * (config.json edited, the weights linked).
 *   1. Long generations in a small pool: three requests of 12 + 560 tokens — greedy
 *      chains, a fixed-seed rejection chain, a greedy draft tree — decoded together in a
 *      pool of 66 blocks of 8 tokens (528 rows: less than ONE request's 572 rows, a
 *      third of the three) are bitwise what specdec_generate alone gives (standalone
 *      runners, which never release): tokens and speculative statistics; the pool is
 *      never exceeded (metrics, sampled on every token).
 *   2. Admission: the windowed pair runs all three at once in that pool; the pair
 *      without a window has each request refused at submit (CONTEXT_FULL: its 72-block
 *      reservation exceeds the pool), and in a pool of 80 blocks runs them one at a
 *      time while the windowed pair runs three at a time.
 * With --cuda (ctest kv_window_sched_cuda, label gpu) the schedulers and the reference
 * engine run on CUDA (the scheduler's CUDA runner groups, whose attention kernel reads
 * tiles of 32 keys: the release point's alignment); skipped without a device.
 * Usage: test_kv_window_sched [--cuda] FIXTURES_DIR */
#define _XOPEN_SOURCE 700 /* realpath, mkdtemp */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sd_test.h"
#include "specdec.h"

#define N_PROMPT 12
#define N_PREDICT 560
#define N_REQ 3
#define N_CTX 640
#define BT 8
#define SMALL_POOL 66 /* 3 x the windowed reservation (22 blocks); < one full one (72) */
#define MID_POOL 80

static char g_tmp[256];
static specdec_backend g_backend = SPECDEC_BACKEND_CPU;

/* dst/config.json = src/config.json with the window replaced and max_position_embeddings
 * raised; dst/model.safetensors -> src's. 0 on success. */
static int write_model(const char *src, const char *name, const char *window) {
    char path[1024], dst[512], buf[8192];
    snprintf(dst, sizeof dst, "%s/%s", g_tmp, name);
    snprintf(path, sizeof path, "%s/config.json", src);
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *w = strstr(buf, "\"sliding_window\": 5"), *p = strstr(buf, "\"max_position_embeddings\": 64");
    if (!w || !p || p > w || mkdir(dst, 0700) != 0) return 1;
    char out[8192 + 64];
    /* the two keys are replaced in place (their order in the file: max_position first) */
    *p = 0;
    *w = 0;
    const int len = snprintf(out, sizeof out, "%s\"max_position_embeddings\": 1024%s\"sliding_window\": %s%s", buf,
                             p + strlen("\"max_position_embeddings\": 64"), window, w + strlen("\"sliding_window\": 5"));
    if (len < 0 || (size_t)len >= sizeof out) return 1;
    snprintf(path, sizeof path, "%s/config.json", dst);
    f = fopen(path, "wb");
    if (!f) return 1;
    fputs(out, f);
    fclose(f);
    char from[1024];
    snprintf(from, sizeof from, "%s/model.safetensors", src);
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    char real[4096];
    if (!realpath(from, real)) return 1;
    return symlink(real, path);
}

typedef struct pair {
    specdec_model *t, *d;
} pair;

static int load_pair(pair *p, const char *tname, const char *dname) {
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/%s", g_tmp, tname);
    snprintf(b, sizeof b, "%s/%s", g_tmp, dname);
    memset(p, 0, sizeof *p);
    if (specdec_model_load(a, NULL, &p->t) == SPECDEC_OK && specdec_model_load(b, NULL, &p->d) == SPECDEC_OK) return 0;
    fprintf(stderr, "load %s / %s: %s\n", a, b, specdec_last_error());
    return 1;
}

static void free_pair(pair *p) {
    specdec_model_free(p->t);
    specdec_model_free(p->d);
}

typedef struct req {
    int32_t prompt[N_PROMPT];
    specdec_generate_params gp;
    int32_t ref[N_PREDICT], n_ref, out[N_PREDICT], n_out;
    specdec_stats ref_stats, stats;
} req;

/* the token callback's monitor: pool never exceeded, most requests active at once */
typedef struct monitor {
    specdec_scheduler *s;
    int32_t max_active, max_used, total, over;
    int32_t max_running;   /* active - preempted (specdec_kv_admission OPTIMISTIC) */
    int64_t preemptions;
} monitor;

static int on_token(void *ud, int32_t token, const char *piece, size_t len) {
    (void)token;
    (void)piece;
    (void)len;
    monitor *m = ud;
    specdec_scheduler_metrics mt;
    if (specdec_scheduler_get_metrics(m->s, &mt) != SPECDEC_OK) return 0;
    if (mt.active > m->max_active) m->max_active = mt.active;
    if (mt.active - mt.preempted > m->max_running) m->max_running = (int32_t)(mt.active - mt.preempted);
    if (mt.preemptions > m->preemptions) m->preemptions = mt.preemptions;
    if (mt.kv_blocks_used > m->max_used) m->max_used = mt.kv_blocks_used;
    if (mt.kv_blocks_used > mt.kv_blocks_total || mt.draft_kv_blocks_used > mt.draft_kv_blocks_total) m->over++;
    m->total = mt.kv_blocks_total;
    return 0;
}

static void make_requests(req *r) {
    uint64_t s = 0x1234;
    for (int i = 0; i < N_REQ; i++) {
        for (int j = 0; j < N_PROMPT; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            r[i].prompt[j] = 3 + (int32_t)((s >> 33) % 77);
        }
        specdec_generate_params gp = specdec_generate_default_params();
        gp.n_predict = N_PREDICT;
        gp.ignore_eos = 1;
        gp.temperature = 0.0f;
        gp.verify = SPECDEC_VERIFY_GREEDY;
        gp.n_draft = 4;
        if (i == 1) { /* fixed-seed rejection sampling */
            gp.temperature = 0.9f;
            gp.verify = SPECDEC_VERIFY_REJECTION;
            gp.seed = 77;
            gp.n_draft = 3;
        } else if (i == 2) { /* a draft tree: 2 x 2 x 2 */
            const int32_t widths[3] = {2, 2, 2};
            SD_CHECK(specdec_generate_params_set_tree(&gp, widths, 3) == SPECDEC_OK, "tree: %s", specdec_last_error());
        }
        r[i].gp = gp;
    }
}

/* Run the requests through a scheduler with a pool of n_blocks admitting as `adm`: 0 when every submit
 * was accepted (outputs in r), 1 when one was refused with `refused` set to its status. */
static int run_sched(const pair *p, int32_t n_blocks, specdec_kv_admission adm, req *r, monitor *mon,
                     specdec_status *refused) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = g_backend;
    ep.n_ctx = N_CTX;
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = N_REQ;
    sp.kv_block_tokens = BT;
    sp.kv_pool_blocks = n_blocks;
    sp.kv_admission = adm;
    specdec_scheduler *s = NULL;
    specdec_status st = specdec_scheduler_create(p->t, p->d, &ep, &sp, &s);
    SD_CHECK(st == SPECDEC_OK, "scheduler: %s", specdec_last_error());
    if (st != SPECDEC_OK) return 1;
    memset(mon, 0, sizeof *mon);
    mon->s = s;
    specdec_request_id id[N_REQ] = {0};
    int rc = 0;
    *refused = SPECDEC_OK;
    for (int i = 0; i < N_REQ; i++) {
        specdec_generate_params gp = r[i].gp;
        gp.callback = on_token;
        gp.user_data = mon;
        st = specdec_scheduler_submit(s, r[i].prompt, N_PROMPT, &gp, &id[i]);
        if (st != SPECDEC_OK) {
            *refused = st;
            rc = 1;
        }
    }
    for (int i = 0; i < N_REQ; i++) {
        if (!id[i]) continue;
        specdec_status outcome = SPECDEC_OK;
        st = specdec_scheduler_wait(s, id[i], -1, r[i].out, N_PREDICT, &r[i].n_out, &r[i].stats, &outcome);
        SD_CHECK(st == SPECDEC_OK && outcome == SPECDEC_OK, "request %d: %s / %s (%s)", i, specdec_status_string(st),
                 specdec_status_string(outcome), specdec_scheduler_last_error(s));
    }
    specdec_scheduler_free(s);
    return rc;
}

static void references(const pair *p, req *r) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = g_backend;
    ep.n_ctx = N_CTX;
    specdec_engine *e = NULL;
    SD_CHECK(specdec_engine_create(p->t, p->d, &ep, &e) == SPECDEC_OK, "engine: %s", specdec_last_error());
    for (int i = 0; e && i < N_REQ; i++)
        SD_CHECK(specdec_generate(e, r[i].prompt, N_PROMPT, &r[i].gp, r[i].ref, N_PREDICT, &r[i].n_ref,
                                  &r[i].ref_stats) == SPECDEC_OK,
                 "reference %d: %s", i, specdec_engine_last_error(e));
    specdec_engine_free(e);
}

static void long_generations(const pair *win, req *r) {
    references(win, r);
    monitor mon;
    specdec_status refused;
    SD_CHECK(run_sched(win, SMALL_POOL, SPECDEC_KV_ADMISSION_AUTO, r, &mon, &refused) == 0, "windowed: a request refused (%s)",
             specdec_status_string(refused));
    const char *what[N_REQ] = {"greedy chain", "rejection chain (seed 77)", "greedy tree"};
    for (int i = 0; i < N_REQ; i++) {
        SD_CHECK(r[i].n_out == N_PREDICT && r[i].n_ref == N_PREDICT &&
                     memcmp(r[i].out, r[i].ref, sizeof r[i].out) == 0,
                 "%s: %d tokens vs the reference's %d, not identical", what[i], r[i].n_out, r[i].n_ref);
        SD_CHECK(r[i].stats.n_rounds == r[i].ref_stats.n_rounds && r[i].stats.n_drafted == r[i].ref_stats.n_drafted &&
                     r[i].stats.n_accepted == r[i].ref_stats.n_accepted,
                 "%s: rounds/drafted/accepted %lld/%lld/%lld vs %lld/%lld/%lld", what[i],
                 (long long)r[i].stats.n_rounds, (long long)r[i].stats.n_drafted, (long long)r[i].stats.n_accepted,
                 (long long)r[i].ref_stats.n_rounds, (long long)r[i].ref_stats.n_drafted,
                 (long long)r[i].ref_stats.n_accepted);
        SD_CHECK(r[i].stats.n_accepted < r[i].stats.n_drafted, "%s: drafts were rejected (rollbacks ran)", what[i]);
    }
    SD_CHECK(mon.over == 0 && mon.total == SMALL_POOL, "pool exceeded %d times (total %d)", mon.over, mon.total);
    SD_CHECK(mon.max_active == N_REQ, "all %d requests decoded at once (max active %d)", N_REQ, mon.max_active);
    printf("long generations: %d x %d tokens in a pool of %d rows, at most %d blocks used of %d\n", N_REQ, N_PREDICT,
           SMALL_POOL * BT, mon.max_used, SMALL_POOL);
}

static void admission(const pair *win, const pair *full, req *r) {
    monitor mon;
    specdec_status refused;
    for (int a = 0; a < 2; a++) /* a request that cannot fit the whole pool is refused however admission claims */
        SD_CHECK(run_sched(full, SMALL_POOL, a ? SPECDEC_KV_ADMISSION_OPTIMISTIC : SPECDEC_KV_ADMISSION_RESERVE, r, &mon,
                           &refused) == 1 &&
                     refused == SPECDEC_ERR_CONTEXT_FULL,
                 "no window (%s): a request of %d rows is refused by a pool of %d (%s)", a ? "optimistic" : "reserve",
                 N_PROMPT + N_PREDICT, SMALL_POOL * BT, specdec_status_string(refused));
    SD_CHECK(run_sched(full, MID_POOL, SPECDEC_KV_ADMISSION_RESERVE, r, &mon, &refused) == 0 && mon.max_active == 1 &&
                 mon.preemptions == 0,
             "no window, reserve, pool of %d blocks: one request at a time (max active %d, %lld preemptions)", MID_POOL,
             mon.max_active, (long long)mon.preemptions);
    const int32_t full_active = mon.max_active;
    SD_CHECK(run_sched(win, MID_POOL, SPECDEC_KV_ADMISSION_RESERVE, r, &mon, &refused) == 0 && mon.max_active == N_REQ,
             "window, pool of %d blocks: all %d at once (max active %d)", MID_POOL, N_REQ, mon.max_active);
    printf("admission in %d blocks: %d at once without release, %d with\n", MID_POOL, full_active, mon.max_active);
    /* OPTIMISTIC (the default): all three start at once in the same pool, the newest are preempted
     * when it runs short and resume by recomputing; every output and its rounds are those of a
     * reference run alone (greedy chain, seeded rejection chain with the draft model, greedy tree) */
    references(full, r);
    SD_CHECK(run_sched(full, MID_POOL, SPECDEC_KV_ADMISSION_AUTO, r, &mon, &refused) == 0 && mon.max_running == N_REQ &&
                 mon.preemptions > 0 && mon.over == 0,
             "no window, optimistic, pool of %d blocks: %d running at once (want %d), %lld preemptions (want > 0), "
             "pool exceeded %d times",
             MID_POOL, mon.max_running, N_REQ, (long long)mon.preemptions, mon.over);
    int64_t n_pre = 0;
    const char *what[N_REQ] = {"greedy chain", "rejection chain (seed 77)", "greedy tree"};
    for (int i = 0; i < N_REQ; i++) {
        SD_CHECK(r[i].n_out == N_PREDICT && r[i].n_ref == N_PREDICT && memcmp(r[i].out, r[i].ref, sizeof r[i].out) == 0,
                 "optimistic, %s: %d tokens vs the reference's %d, not identical", what[i], r[i].n_out, r[i].n_ref);
        n_pre += r[i].stats.n_preemptions;
        SD_CHECK(r[i].ref_stats.n_preemptions == 0, "specdec_generate counts no preemption");
    }
    SD_CHECK(n_pre == mon.preemptions, "the requests' n_preemptions add up to the metric: %lld vs %lld",
             (long long)n_pre, (long long)mon.preemptions);
    printf("optimistic admission in %d blocks: %d running at once, %lld preemptions, outputs identical\n", MID_POOL,
           mon.max_running, (long long)mon.preemptions);
}

static void cleanup(void) {
    const char *names[] = {"w5", "w3", "full", "full_d"};
    char path[1024];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s/config.json", g_tmp, names[i]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s/model.safetensors", g_tmp, names[i]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s", g_tmp, names[i]);
        rmdir(path);
    }
    rmdir(g_tmp);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--cuda") == 0) {
        if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
        g_backend = SPECDEC_BACKEND_CUDA;
        argv++;
        argc--;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: test_kv_window_sched [--cuda] FIXTURES_DIR\n");
        return 2;
    }
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sd_kv_window_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    char src[1024];
    snprintf(src, sizeof src, "%s/mistral_window", argv[1]);
    pair win = {0}, full = {0};
    int bad = write_model(src, "w5", "5") || write_model(src, "w3", "3") || write_model(src, "full", "null") ||
              write_model(src, "full_d", "null") || load_pair(&win, "w5", "w3") || load_pair(&full, "full", "full_d");
    SD_CHECK(!bad, "temporary models in %s", g_tmp);
    if (!bad) {
        static req r[N_REQ];
        make_requests(r);
        long_generations(&win, r);
        admission(&win, &full, r);
    }
    free_pair(&win);
    free_pair(&full);
    cleanup();
    return sd_test_done();
}

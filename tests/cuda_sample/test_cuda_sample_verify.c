/* test_cuda_sample_verify.c — the fused GPU verifier's decisions against the host model
 * (sample_ref.h, exact) and the CPU reference sd_verify (given the same rows and
 * uniforms), across modes (rejection / greedy / match), gamma 1..8, V in {16, 1000,
 * 32000, 151936, 256000}, the parameter grid and rows with NaN / Inf / all -inf logits.
 * Per round (B sequences per launch):
 *  (a) GPU (n, tokens) == sr_verify on the GPU's own p rows and the q rows (exact);
 *  (b) == sd_verify on the same rows and the same uniforms (as doubles);
 *  (c) == sd_verify on rows processed by the CPU from the same logits (end to end);
 *  (d) the GPU's p and q rows equal the CPU's (sd_sampling_process) BIT FOR BIT;
 *  (e) every emitted id is in [0, V); a draft id outside [0, V) is rejected.
 * Injected words and cuRAND words (seed, sequence id, pos0 in device memory) are both
 * run; the Philox run is also captured in a CUDA graph and replayed with new pos0
 * values, which must equal direct launches. All of it again for the multi-block
 * verifier (blocks_per_row automatic, 1, 13, 40). Then (issue 24 (a)) 40 launches of
 * random shapes — n_seq 1..4, gamma 0..8, V 4096 / 32000, one-block and multi-block
 * kernels mixed — on ONE workspace zero-filled once: every launch must still pass
 * (a)-(e) (a stale counter or histogram of an earlier shape would change tokens or hang
 * a row). And for deterministic drafts (the flag, q not read) against sd_verify_det in
 * (b) and (c). Needs a GPU (skips otherwise). */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cs_common.h"
#include "sd_cuda_sample.h"
#include "sd_cuda_mb.h"
#include "sd_rng.h"
#include "sd_cpu_verify.h"
#include "sample_ref.h"

static void *dalloc(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", n);
        exit(1);
    }
    cudaMemset(p, 0xFF, n ? n : 1);
    return p;
}
#define UP(d, h, n) cudaMemcpy((d), (h), (n), cudaMemcpyHostToDevice)
#define DOWN(h, d, n) cudaMemcpy((h), (d), (n), cudaMemcpyDeviceToHost)

static long n_rounds, bad_a, bad_b, bad_c, bad_rows, bad_range;
static int g_bpr; /* blocks_per_row of every launch: 0 one-block, else multi-block */
static int g_det; /* deterministic drafts (q one-hot, no rows): compared with sd_verify_det */
static void *g_ws; /* non-NULL: the workspace every launch shares (zero-filled once) */
static size_t g_wsb;

/* One launch of B sequences; philox: 0 injected words, 1 cuRAND words, 2 cuRAND via a
 * replayed graph. */
static void run_case(int V, int g, specdec_verify_mode mode, const sd_sampling_params *sp, int B, int philox,
                     cs_rng *rng) {
    const int R = g + 1;
    const size_t rowsP = (size_t)B * R, rowsQ = (size_t)B * (g ? g : 1);
    float *lp = malloc(sizeof(float) * rowsP * V), *lq = malloc(sizeof(float) * rowsQ * V);
    float *P = malloc(sizeof(float) * rowsP * V), *Q = malloc(sizeof(float) * rowsQ * V);
    float *Pc = malloc(sizeof(float) * (size_t)R * V), *Qc = malloc(sizeof(float) * rowsQ * V);
    int32_t *draft = malloc(sizeof(int32_t) * (size_t)B * SPECDEC_MAX_DRAFT), *out = malloc(sizeof(int32_t) * (size_t)B * (SPECDEC_MAX_DRAFT + 1));
    int32_t *nacc = malloc(sizeof(int32_t) * B);
    uint32_t *wa = malloc(sizeof(uint32_t) * (size_t)B * SPECDEC_MAX_DRAFT), *wsm = malloc(sizeof(uint32_t) * (size_t)B * (SPECDEC_MAX_DRAFT + 1));
    uint64_t *seed = malloc(8 * (size_t)B), *sid = malloc(8 * (size_t)B);
    int64_t *pos0 = malloc(8 * (size_t)B);
    size_t ss = sd_sampling_scratch_size(V);
    void *scratch = malloc(ss);
    for (size_t k = 0; k < rowsP; k++) {
        int kind = (k % 4 == 3) ? (int)(cs_next(rng) % CS_KINDS) : CS_NOISY;
        cs_logits(rng, kind, lp + k * V, V);
    }
    for (size_t k = 0; k < rowsQ; k++) {
        const float *src = lp + (k / (g ? g : 1) * R + k % (g ? g : 1)) * V;
        for (int i = 0; i < V; i++) lq[k * V + i] = 0.8f * src[i] + (float)cs_normal(rng);
    }
    for (int b = 0; b < B; b++) {
        seed[b] = cs_next(rng);
        sid[b] = (uint64_t)b + 1000 * (uint64_t)g;
        pos0[b] = (int64_t)(cs_next(rng) % 4096);
        for (int i = 0; i < SPECDEC_MAX_DRAFT; i++) wa[(size_t)b * SPECDEC_MAX_DRAFT + i] = (uint32_t)cs_next(rng);
        for (int i = 0; i <= SPECDEC_MAX_DRAFT; i++) wsm[(size_t)b * (SPECDEC_MAX_DRAFT + 1) + i] = (uint32_t)cs_next(rng);
    }
    /* q rows on the GPU (the draft kernel's processing), then the draft tokens */
    float *dlp = dalloc(sizeof(float) * rowsP * V), *dlq = dalloc(sizeof(float) * rowsQ * V), *dq = dalloc(sizeof(float) * rowsQ * V);
    size_t pwsb = sd_cuda_sample_ws_bytes((int)rowsQ, V);
    void *pws = dalloc(pwsb);
    UP(dlp, lp, sizeof(float) * rowsP * V);
    UP(dlq, lq, sizeof(float) * rowsQ * V);
    sd_errbuf eb = {{0}};
    const sd_cuda_sample_rows_args ra = {
        .logits = dlq, .ld_in = V, .n_rows = (int32_t)rowsQ, .n_vocab = V, .sp = *sp, .probs = dq, .ld_out = V};
    SD_CHECK(sd_cuda_sample_process_rows(&ra, pws, pwsb, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    DOWN(Q, dq, sizeof(float) * rowsQ * V);
    size_t cpu_scratch_rows = 0;
    (void)cpu_scratch_rows;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < g; i++) {
            const float *qr = Q + ((size_t)b * g + i) * V;
            int32_t x = sr_sample(qr, V, (uint32_t)cs_next(rng));
            uint64_t c = cs_next(rng) % 8;
            if (c < 3) { /* the target's own choice: acceptances in every mode */
                float *tmp = malloc(sizeof(float) * V);
                sd_sampling_process(lp + ((size_t)b * R + i) * V, V, sp, scratch, ss, tmp, NULL);
                x = (mode == SPECDEC_VERIFY_GREEDY) ? sd_sample_argmax(tmp, V)
                                                    : sd_sample_inverse_cdf(tmp, V, sd_rng_u32_to_uniform_double(
                                                          philox ? sd_rng_u32_at(seed[b], sid[b], pos0[b] + i, SD_RNG_PURPOSE_SAMPLE)
                                                                 : wsm[(size_t)b * (SPECDEC_MAX_DRAFT + 1) + i]));
                free(tmp);
            } else if (c == 7 && mode == SPECDEC_VERIFY_REJECTION && !philox) {
                x = (cs_next(rng) % 2) ? -1 : V; /* invalid id: must be rejected */
            }
            draft[(size_t)b * SPECDEC_MAX_DRAFT + i] = x;
        }
    int32_t *ddraft = dalloc(sizeof(int32_t) * (size_t)B * SPECDEC_MAX_DRAFT), *dout = dalloc(sizeof(int32_t) * (size_t)B * (SPECDEC_MAX_DRAFT + 1));
    int32_t *dn = dalloc(sizeof(int32_t) * B);
    uint32_t *dwa = dalloc(sizeof(uint32_t) * (size_t)B * SPECDEC_MAX_DRAFT), *dwsm = dalloc(sizeof(uint32_t) * (size_t)B * (SPECDEC_MAX_DRAFT + 1));
    uint64_t *dseed = dalloc(8 * (size_t)B), *dsid = dalloc(8 * (size_t)B);
    int64_t *dpos = dalloc(8 * (size_t)B);
    UP(ddraft, draft, sizeof(int32_t) * (size_t)B * SPECDEC_MAX_DRAFT);
    UP(dwa, wa, sizeof(uint32_t) * (size_t)B * SPECDEC_MAX_DRAFT);
    UP(dwsm, wsm, sizeof(uint32_t) * (size_t)B * (SPECDEC_MAX_DRAFT + 1));
    UP(dseed, seed, 8 * (size_t)B);
    UP(dsid, sid, 8 * (size_t)B);
    size_t wsb = sd_cuda_verify_ws_bytes(B, g, V);
    void *dws = g_ws;
    if (g_ws) {
        SD_CHECK(wsb <= g_wsb, "shared workspace too small for n_seq %d gamma %d V %d", B, g, V);
        wsb = g_wsb;
    } else {
        dws = dalloc(wsb);
        SD_CHECK(sd_cuda_verify_ws_init(dws, wsb, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    }
    sd_cuda_verify_args a;
    memset(&a, 0, sizeof a);
    a.mode = mode; a.gamma = g; a.n_vocab = V; a.n_seq = B; a.sp = *sp;
    a.logits = dlp; a.ld_logits = V; a.logits_seq_stride = (int64_t)R * V;
    a.q = g_det ? NULL : dq; a.ld_q = V; a.q_seq_stride = (int64_t)g * V;
    a.deterministic = g_det;
    a.draft = ddraft; a.draft_stride = SPECDEC_MAX_DRAFT;
    a.seed = dseed; a.seq_id = dsid; a.pos0 = dpos;
    a.u_accept = philox ? NULL : dwa; a.u_sample = philox ? NULL : dwsm;
    a.out_tokens = dout; a.out_stride = SPECDEC_MAX_DRAFT + 1; a.out_n_accepted = dn;
    a.blocks_per_row = g_bpr;
    if (philox == 2) { /* capture once with other positions, replay with the real ones */
        cudaStream_t s;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        cudaStreamCreate(&s);
        int64_t *tmp = malloc(8 * (size_t)B);
        for (int b = 0; b < B; b++) tmp[b] = pos0[b] + 17;
        UP(dpos, tmp, 8 * (size_t)B);
        cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        specdec_status st = sd_cuda_verify(&a, dws, wsb, s, &eb);
        SD_CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess && st == SPECDEC_OK, "graph capture failed: %s", eb.msg);
        SD_CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "graph instantiate failed");
        cudaGraphLaunch(exec, s); /* replay 1 with the +17 positions */
        cudaStreamSynchronize(s);
        UP(dpos, pos0, 8 * (size_t)B);
        cudaGraphLaunch(exec, s); /* replay 2: the positions checked below */
        SD_CHECK(cudaStreamSynchronize(s) == cudaSuccess, "graph replay failed");
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        cudaStreamDestroy(s);
        free(tmp);
    } else {
        UP(dpos, pos0, 8 * (size_t)B);
        SD_CHECK(sd_cuda_verify(&a, dws, wsb, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    }
    SD_CHECK(cudaDeviceSynchronize() == cudaSuccess, "verify kernel failed (V=%d gamma=%d mode %d)", V, g, mode);
    DOWN(out, dout, sizeof(int32_t) * (size_t)B * (SPECDEC_MAX_DRAFT + 1));
    DOWN(nacc, dn, sizeof(int32_t) * B);
    DOWN(P, sd_cuda_verify_p_rows(dws, B, g, V), sizeof(float) * rowsP * V);
    for (int b = 0; b < B; b++) {
        const float *Pb = P + (size_t)b * R * V, *Qb = Q + (size_t)b * g * V;
        const int32_t *db = draft + (size_t)b * SPECDEC_MAX_DRAFT, *ob = out + (size_t)b * (SPECDEC_MAX_DRAFT + 1);
        uint32_t ba[SPECDEC_MAX_DRAFT], bs[SPECDEC_MAX_DRAFT + 1];
        sd_verify_uniforms u;
        for (int i = 0; i <= g; i++) {
            bs[i] = philox ? sd_rng_u32_at(seed[b], sid[b], pos0[b] + i, SD_RNG_PURPOSE_SAMPLE) : wsm[(size_t)b * (SPECDEC_MAX_DRAFT + 1) + i];
            u.sample[i] = sd_rng_u32_to_uniform_double(bs[i]);
            if (i < g) {
                ba[i] = philox ? sd_rng_u32_at(seed[b], sid[b], pos0[b] + i, SD_RNG_PURPOSE_ACCEPT) : wa[(size_t)b * SPECDEC_MAX_DRAFT + i];
                u.accept[i] = sd_rng_u32_to_uniform_double(ba[i]);
            }
        }
        if (philox) { /* the CPU's own uniform fetch must agree with the words */
            sd_verify_uniforms u2;
            sd_verify_fetch_uniforms(seed[b], sid[b], pos0[b], g, &u2);
            SD_CHECK(!memcmp(u2.sample, u.sample, sizeof(double) * (size_t)(g + 1)), "fetch_uniforms differs");
        }
        n_rounds++;
        const int n = nacc[b];
        int range_ok = n >= 0 && n <= g;
        for (int i = 0; range_ok && i <= n; i++) range_ok = ob[i] >= 0 && ob[i] < V;
        if (!range_ok) {
            if (bad_range++ < 5) fprintf(stderr, "  V=%d g=%d mode %d seq %d: n=%d or an id out of range\n", V, g, mode, b, n);
            continue;
        }
        int32_t o1[SPECDEC_MAX_DRAFT + 1], n1 = g_det ? n : sr_verify(mode, g, V, Pb, Qb, db, ba, bs, o1);
        if (g_det) memcpy(o1, ob, sizeof(int32_t) * (size_t)(n + 1)); /* the host model has no deterministic rule */
        int same = n1 == n;
        for (int i = 0; same && i <= n; i++) same = o1[i] == ob[i];
        if (!same && bad_a++ < 5) fprintf(stderr, "  (a) V=%d g=%d mode %d philox %d seq %d: gpu n=%d t=%d, sample_ref n=%d t=%d\n", V, g, mode, philox, b, n, ob[n], n1, o1[n1]);
        int valid = 1;
        for (int i = 0; i < g; i++) valid &= db[i] >= 0 && db[i] < V;
        if (!valid) continue; /* sd_verify refuses invalid drafts (checked by (a)) */
        int32_t o2[SPECDEC_MAX_DRAFT + 1], n2 = -1;
        if (g_det) sd_verify_det(mode, g, V, Pb, db, &u, o2, &n2, NULL);
        else sd_verify(mode, g, V, Pb, Qb, db, &u, o2, &n2, NULL);
        same = n2 == n;
        for (int i = 0; same && i <= n; i++) same = o2[i] == ob[i];
        if (!same && bad_b++ < 5) fprintf(stderr, "  (b) V=%d g=%d mode %d seq %d: gpu n=%d, sd_verify n=%d\n", V, g, mode, b, n, n2);
        /* end to end on the CPU */
        for (int i = 0; i < R; i++) sd_sampling_process(lp + ((size_t)b * R + i) * V, V, sp, scratch, ss, Pc + (size_t)i * V, NULL);
        for (int i = 0; i < g; i++) sd_sampling_process(lq + ((size_t)b * g + i) * V, V, sp, scratch, ss, Qc + (size_t)i * V, NULL);
        long rb = 0;
        rb += memcmp(Pc, Pb, sizeof(float) * (size_t)R * V) != 0; /* CPU == GPU bit for bit */
        rb += memcmp(Qc, Qb, sizeof(float) * (size_t)g * V) != 0;
        bad_rows += rb > 0;
        int32_t o3[SPECDEC_MAX_DRAFT + 1], n3 = -1;
        if (g_det) sd_verify_det(mode, g, V, Pc, db, &u, o3, &n3, NULL);
        else sd_verify(mode, g, V, Pc, Qc, db, &u, o3, &n3, NULL);
        same = n3 == n;
        for (int i = 0; same && i <= n; i++) same = o3[i] == ob[i];
        if (!same && bad_c++ < 5) fprintf(stderr, "  (c) V=%d g=%d mode %d seq %d: gpu n=%d, cpu end-to-end n=%d\n", V, g, mode, b, n, n3);
    }
    cudaFree(dlp); cudaFree(dlq); cudaFree(dq); cudaFree(pws); cudaFree(ddraft); cudaFree(dout); cudaFree(dn);
    cudaFree(dwa); cudaFree(dwsm); cudaFree(dseed); cudaFree(dsid); cudaFree(dpos);
    if (!g_ws) cudaFree(dws);
    free(lp); free(lq); free(P); free(Q); free(Pc); free(Qc); free(draft); free(out); free(nacc); free(wa); free(wsm);
    free(seed); free(sid); free(pos0); free(scratch);
}

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    cs_rng rng = {2024};
    const int Vs[5] = {16, 1000, 32000, 151936, 256000};
    const specdec_verify_mode modes[3] = {SPECDEC_VERIFY_REJECTION, SPECDEC_VERIFY_GREEDY, SPECDEC_VERIFY_MATCH};
    for (int vi = 0; vi < 5; vi++) {
        const int V = Vs[vi], big = V > 100000;
        for (int g = 1; g <= 8; g++) {
            if (big && g != 1 && g != 4 && g != 8) continue;
            for (int m = 0; m < 3; m++) {
                const sd_sampling_params *sp = modes[m] == SPECDEC_VERIFY_GREEDY ? &cs_params[10]
                                                                                 : &cs_params[(g + vi + m) % 10];
                run_case(V, g, modes[m], sp, big ? 2 : (V > 10000 ? 4 : 16), (g + m) % 3, &rng);
            }
        }
    }
    run_case(1000, 0, SPECDEC_VERIFY_REJECTION, &cs_params[0], 8, 0, &rng); /* gamma 0: plain step */
    run_case(1000, 16, SPECDEC_VERIFY_REJECTION, &cs_params[4], 4, 1, &rng); /* the maximum gamma */
    /* the multi-block kernels: few sequences so every row's blocks are resident */
    const int bprs[4] = {SD_CUDA_MB_AUTO, 1, 13, 40};
    for (int vi = 0; vi < 5; vi++)
        for (int g = 1; g <= 8; g++)
            for (int m = 0; m < 3; m++) {
                const int V = Vs[vi], k = (g + m + vi) % 4;
                if (V < 1000 || (V > 100000 && g != 1 && g != 4) || (bprs[k] == 1 && V > 4096) ||
                    (bprs[k] > 1 && sd_mb_min_blocks(V) > bprs[k]) || bprs[k] * (g + 1) > 128)
                    g_bpr = SD_CUDA_MB_AUTO;
                else
                    g_bpr = bprs[k];
                const sd_sampling_params *sp = modes[m] == SPECDEC_VERIFY_GREEDY ? &cs_params[10]
                                                                                 : &cs_params[(g + vi + 2 * m) % 12];
                run_case(V, g, modes[m], sp, 1, (g + m) % 3, &rng);
            }
    g_bpr = 0;
    /* deterministic drafts (the n-gram drafter's): the flag instead of q rows */
    g_det = 1;
    for (int vi = 0; vi < 3; vi++)
        for (int g = 1; g <= 8; g += 3)
            for (int m = 0; m < 3; m++)
                run_case(Vs[vi], g, modes[m], modes[m] == SPECDEC_VERIFY_GREEDY ? &cs_params[10] : &cs_params[(g + vi + m) % 10],
                         vi == 2 ? 4 : 16, (g + m) % 3, &rng);
    g_det = 0;
    /* issue 24 (a): one workspace, zero-filled once, launches of varying shapes */
    g_wsb = sd_cuda_verify_ws_bytes(4, 8, 32000);
    g_ws = dalloc(g_wsb);
    sd_errbuf eb = {{0}};
    SD_CHECK(sd_cuda_verify_ws_init(g_ws, g_wsb, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    for (int it = 0; it < 40; it++) {
        const int V = (cs_next(&rng) % 2) ? 32000 : 4096, g = (int)(cs_next(&rng) % 9), B = 1 + (int)(cs_next(&rng) % 4);
        const int m = (int)(cs_next(&rng) % 3), k = (int)(cs_next(&rng) % 4);
        g_bpr = k == 0 ? 0 : k == 1 ? SD_CUDA_MB_AUTO : (k == 2 ? 8 : 1);
        if ((g_bpr == 1 && V > 4096) || (g_bpr > 0 && B * (g + 1) * g_bpr > 128)) g_bpr = SD_CUDA_MB_AUTO;
        const sd_sampling_params *sp = modes[m] == SPECDEC_VERIFY_GREEDY ? &cs_params[10] : &cs_params[(it * 7) % 12];
        run_case(V, g, modes[m], sp, B, it % 3, &rng);
    }
    g_bpr = 0;
    cudaFree(g_ws);
    g_ws = NULL;
    printf("rounds %ld: (a) vs sample_ref %ld, (b) vs sd_verify same rows %ld, (c) vs cpu end-to-end %ld, rows off %ld, "
           "out of range %ld\n",
           n_rounds, bad_a, bad_b, bad_c, bad_rows, bad_range);
    SD_CHECK(bad_range == 0, "%ld rounds emitted an id outside [0, V) or a bad count", bad_range);
    SD_CHECK(bad_a == 0, "%ld rounds differ from sample_ref", bad_a);
    SD_CHECK(bad_b == 0, "%ld rounds differ from sd_verify on the same rows", bad_b);
    SD_CHECK(bad_c == 0 && bad_rows == 0, "%ld rounds / %ld row sets differ from the CPU end to end", bad_c, bad_rows);
    return sd_test_done();
}
#endif

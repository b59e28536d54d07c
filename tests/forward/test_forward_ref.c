/* test_forward_ref.c — the CPU runner on real checkpoint directories (loaded with
 * specdec_model_load) against the independent float64 numpy reference.
 *
 * Fixture (prepare_cases.py, run by CTest first): for each case a random HF
 * checkpoint, tokens.bin (int32 [T]) and ref.bin (float64 [T, V] logits of the numpy
 * reference), listed in manifest.txt as "<case> <dir> <T> <V>".
 * Per case:
 *   - full prefill of T tokens vs the reference: ||C - ref|| / ||ref|| < 1e-5, and the
 *     argmax agrees wherever the reference's top-2 margin exceeds 1e-3;
 *   - incremental decoding (1 token per call, and chunks of 3) vs full prefill:
 *     required bitwise identical on the CPU (batch invariance; the 1e-5 bound of
 *     the reference comparison is also checked and the max error printed);
 *   - batch invariance: chunks of k = 2..16 bitwise equal to 1-token decoding;
 *   - rollback: prefill T, rewrite from position T/2 with other tokens == fresh run.
 *     argv[1] = manifest path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "sd_cpu_runner.h"
#include "fwd_common.h"

#define REL_TOL 1e-5

static void *read_all(const char *dir, const char *name, size_t want_bytes) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    void *buf = malloc(want_bytes + 1);
    size_t got = fread(buf, 1, want_bytes + 1, f);
    fclose(f);
    if (got != want_bytes) {
        fprintf(stderr, "%s: %zu bytes, expected %zu\n", p, got, want_bytes);
        free(buf);
        return NULL;
    }
    return buf;
}

static void run_case(const char *name, const char *dir, int32_t T, int32_t V) {
    specdec_model *model = NULL;
    specdec_status st = specdec_model_load(dir, NULL, &model);
    SD_CHECK(st == SPECDEC_OK, "%s: load: %s", name, specdec_last_error());
    if (st != SPECDEC_OK) return;
    SD_CHECK(model->w.cfg.vocab_size == V, "%s: vocab %d, manifest says %d", name, model->w.cfg.vocab_size, V);
    int32_t *tok = read_all(dir, "tokens.bin", sizeof(int32_t) * (size_t)T);
    double *ref = read_all(dir, "ref.bin", sizeof(double) * (size_t)T * (size_t)V);
    SD_CHECK(tok && ref, "%s: fixture files missing or truncated", name);
    sd_errbuf eb = {{0}};
    sd_runner *r = NULL;
    if (tok && ref && model->w.cfg.vocab_size == V) {
        st = sd_cpu_runner_create(&model->w, T, T, &r, &eb);
        SD_CHECK(st == SPECDEC_OK, "%s: runner: %s", name, eb.msg);
    }
    if (!r) goto out;

    size_t sz = (size_t)T * (size_t)V;
    float *full = malloc(sz * sizeof(float)), *inc = malloc(sz * sizeof(float));

    /* 1. full prefill vs the numpy reference */
    st = sd_runner_forward(r, tok, T, 0, full);
    SD_CHECK(st == SPECDEC_OK, "%s: prefill: %s", name, r->err.msg);
    double rel = fwd_rel_l2_f64(full, ref, (int64_t)sz), max_abs = 0;
    for (size_t i = 0; i < sz; i++) max_abs = fmax(max_abs, fabs((double)full[i] - ref[i]));
    int argmax_bad = 0;
    for (int32_t t = 0; t < T; t++) {
        const double *rr = ref + (int64_t)t * V;
        const float *cr = full + (int64_t)t * V;
        int32_t a = 0, b = -1, ca = 0;
        for (int32_t v = 1; v < V; v++) {
            if (rr[v] > rr[a]) { b = a; a = v; }
            else if (b < 0 || rr[v] > rr[b]) b = v;
            if (cr[v] > cr[ca]) ca = v;
        }
        if (ca != a && rr[a] - rr[b] > 1e-3) {
            argmax_bad++;
            fprintf(stderr, "  %s: position %d: argmax %d, reference %d\n", name, t, ca, a);
        }
    }
    printf("%-26s T=%-3d V=%-4d vs numpy float64: rel L2 %.3g, max abs %.3g\n", name, T, V, rel, max_abs);
    SD_CHECK(rel < REL_TOL, "%s: rel L2 error %.3g vs the numpy reference (tol %g)", name, rel, REL_TOL);
    SD_CHECK(argmax_bad == 0, "%s: %d positions with a different argmax", name, argmax_bad);

    /* 2. incremental decoding: 1 token per call, then chunks of 3, vs full prefill */
    for (int32_t k = 1; k <= 16; k++) {
        memset(inc, 0, sz * sizeof(float));
        st = fwd_run_chunked(r, tok, T, k, inc);
        SD_CHECK(st == SPECDEC_OK, "%s: chunks of %d: %s", name, k, r->err.msg);
        int64_t d = fwd_first_diff(inc, full, (int64_t)sz);
        if (k == 1 || k == 3)
            printf("%-26s chunks of %d vs full prefill: rel L2 %.3g, max abs %.3g, %s\n", name, k,
                   fwd_rel_l2(inc, full, (int64_t)sz), fwd_max_abs(inc, full, (int64_t)sz),
                   d < 0 ? "bitwise identical" : "NOT bitwise identical");
        SD_CHECK(fwd_rel_l2(inc, full, (int64_t)sz) < REL_TOL, "%s: chunks of %d vs prefill", name, k);
        SD_CHECK(d < 0, "%s: chunks of %d differ bitwise from the prefill at position %lld token %lld", name, k,
                 (long long)(d / V), (long long)(d % V));
    }

    /* 3. rollback: rewrite the second half with other tokens == a fresh run */
    int32_t m = T / 2;
    int32_t *alt = malloc(sizeof(int32_t) * (size_t)T);
    memcpy(alt, tok, sizeof(int32_t) * (size_t)T);
    for (int32_t i = m; i < T; i++) alt[i] = (tok[i] * 7 + 3) % V;
    SD_CHECK(sd_runner_forward(r, tok, T, 0, NULL) == SPECDEC_OK, "%s", r->err.msg);
    r->kv_len = m; /* truncation */
    SD_CHECK(sd_runner_forward(r, alt + m, T - m, m, inc) == SPECDEC_OK, "%s", r->err.msg);
    sd_runner *r2 = NULL;
    SD_CHECK(sd_cpu_runner_create(&model->w, T, T, &r2, &eb) == SPECDEC_OK, "%s: %s", name, eb.msg);
    if (r2) {
        SD_CHECK(sd_runner_forward(r2, alt, T, 0, full) == SPECDEC_OK, "%s", r2->err.msg);
        int64_t d = fwd_first_diff(inc, full + (int64_t)m * V, (int64_t)(T - m) * V);
        SD_CHECK(d < 0, "%s: rollback differs from a fresh run at %lld", name, (long long)d);
        sd_runner_destroy(r2);
    }
    free(alt);
    free(full);
    free(inc);
    sd_runner_destroy(r);
out:
    free(tok);
    free(ref);
    specdec_model_free(model);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s manifest.txt\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    SD_CHECK(f != NULL, "cannot open %s (did forward_prepare run?)", argv[1]);
    if (!f) return sd_test_done();
    char name[256], dir[4096];
    int T, V, n = 0;
    while (fscanf(f, "%255s %4095s %d %d", name, dir, &T, &V) == 4) {
        run_case(name, dir, T, V);
        n++;
    }
    fclose(f);
    SD_CHECK(n >= 7, "only %d cases in the manifest", n);
    return sd_test_done();
}

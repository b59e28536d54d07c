/* test_cpu_sanitize.c — the CPU kernels' hot loops run uninstrumented under the sanitizers,
 * behind whole-range checks (kernels/cpu/sd_cpu_sanitize.h). This test shows those checks still
 * catch what per-element instrumentation caught, one element past the end included:
 *  - AddressSanitizer build: sd_cpu_dot reading one float past a heap buffer (either operand),
 *    reading a freed buffer, and sd_cpu_dequant reading one half past its weights or writing one
 *    float past its output each end the process with ASan's report of that kind; so does
 *    sd_cpu_matmul on the AVX2 path (kernels/cpu/sd_cpu_matmul_x86.c, when the CPU has it) reading
 *    one half past its weights, one float past its input, or writing one float past its output;
 *  - ThreadSanitizer build: sd_cpu_dot reading, and sd_cpu_dequant writing, a buffer another
 *    thread wrote without synchronisation each end with a data race report;
 *  - both: the same calls within bounds (and, for TSan, ordered by pthread_join) report nothing
 *    and give the reference values, so the checks do not fire on correct code.
 * Each case runs in a forked child whose stderr is read back. Other builds have no checks to
 * test: the test prints "skipped: not a sanitizer build". */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sd_cpu_dequant.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_sanitize.h"
#include "sd_test.h"

#define N 67 /* not a multiple of 4: the dot's tail loop runs too */

static float *floats(int64_t n) {
    float *p = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = (float)(i % 7) - 3.0f;
    return p;
}

static double ref_dot(const float *a, const float *b, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

/* Runs fn in a child; returns its exit status (128 + signal when killed) and its stderr in err. */
static int run_child(void (*fn)(void), char *err, size_t cap) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        fn();
        fflush(stderr);
        _exit(0);
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t got;
    while ((got = read(fd[0], err + len, cap - 1 - len)) > 0) len += (size_t)got;
    err[len] = '\0';
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char err[1 << 16];

static void expect(const char *what, void (*fn)(void), const char *report) {
    int rc = run_child(fn, err, sizeof err);
    if (report) {
        SD_CHECK(rc != 0 && strstr(err, report) != NULL, "%s: exit %d, expected a report with \"%s\"; stderr:\n%.2000s",
                 what, rc, report, err);
    } else {
        SD_CHECK(rc == 0 && strstr(err, "Sanitizer") == NULL, "%s: exit %d, expected no report; stderr:\n%.2000s", what,
                 rc, err);
    }
}

/* ---- cases shared by both sanitizers ---- */

static void dot_in_bounds(void) {
    float *a = floats(N), *b = floats(N);
    double got = sd_cpu_dot(a, b, N), want = ref_dot(a, b, N);
    if (got != want) fprintf(stderr, "wrong dot %.17g != %.17g\n", got, want), _exit(3);
    free(a), free(b);
}

static sd_tensor f16_tensor(int64_t n) {
    uint16_t *h = malloc((size_t)n * sizeof(uint16_t));
    for (int64_t i = 0; i < n; i++) h[i] = sd_f32_to_f16((float)i * 0.5f - 7.0f);
    sd_tensor t = {.data = h, .dtype = SD_F16, .ndim = 1, .shape = {n, 1}};
    return t;
}

static void dequant_in_bounds(void) {
    sd_tensor t = f16_tensor(N);
    float *out = malloc((N - 1) * sizeof(float));
    sd_cpu_dequant(&t, 1, N - 1, out); /* the last N - 1 halves, exactly */
    for (int64_t i = 0; i < N - 1; i++)
        if (out[i] != (float)(i + 1) * 0.5f - 7.0f) fprintf(stderr, "wrong value at %lld\n", (long long)i), _exit(3);
    free((void *)t.data), free(out);
}

#if defined(SD_CPU_ASAN)
static void dot_reads_past_a(void) {
    float *a = floats(N), *b = floats(N + 1);
    fprintf(stderr, "%g\n", sd_cpu_dot(a, b, N + 1));
}
static void dot_reads_past_b(void) {
    float *a = floats(N + 1), *b = floats(N);
    fprintf(stderr, "%g\n", sd_cpu_dot(a, b, N + 1));
}
static float *volatile freed; /* volatile: the compiler cannot see the use after free */
static void dot_reads_freed(void) {
    float *a = floats(N);
    freed = floats(N);
    free(freed);
    fprintf(stderr, "%g\n", sd_cpu_dot(a, freed, N));
}
static void dequant_reads_past(void) {
    sd_tensor t = f16_tensor(N);
    float *out = malloc(N * sizeof(float));
    sd_cpu_dequant(&t, 1, N, out); /* halves 1..N: one past the end */
}
static void dequant_writes_past(void) {
    sd_tensor t = f16_tensor(N);
    float *out = malloc((N - 1) * sizeof(float));
    sd_cpu_dequant(&t, 0, N, out);
}
#endif

#if defined(SD_CPU_ASAN)
/* sd_cpu_matmul of 3 rows x N columns of F16 weights, 2 tokens; short = which buffer lacks its
 * last element (0: none, 1: weights, 2: input, 3: output). */
static void matmul_case(int short_which) {
    sd_tensor w = f16_tensor(3 * N - (short_which == 1));
    w.ndim = 2, w.shape[0] = 3, w.shape[1] = N;
    float *x = floats(2 * N - (short_which == 2)), *y = malloc((6 - (short_which == 3)) * sizeof(float));
    float *buf = malloc(N * sizeof(float));
    sd_cpu_matmul(x, 2, &w, NULL, y, buf);
    fprintf(stderr, "%g\n", y[0]);
}
static void matmul_in_bounds(void) { matmul_case(0); }
static void matmul_reads_past_w(void) { matmul_case(1); }
static void matmul_reads_past_x(void) { matmul_case(2); }
static void matmul_writes_past_y(void) { matmul_case(3); }
#endif

#if defined(SD_CPU_TSAN)
static float *shared_buf;
static atomic_int written;

static void *writer(void *arg) {
    (void)arg;
    shared_buf[N - 1] = 1.0f; /* the last element: the range check must cover it */
    atomic_store_explicit(&written, 1, memory_order_relaxed); /* relaxed: no happens-before */
    return NULL;
}

static void start_writer(pthread_t *th) {
    shared_buf = floats(N);
    atomic_store(&written, 0);
    pthread_create(th, NULL, writer, NULL);
}

static void dot_races(void) {
    pthread_t th;
    start_writer(&th);
    float *a = floats(N);
    while (!atomic_load_explicit(&written, memory_order_relaxed)) {
    }
    fprintf(stderr, "%g\n", sd_cpu_dot(a, shared_buf, N));
    pthread_join(th, NULL);
}

static void dequant_races(void) {
    pthread_t th;
    start_writer(&th);
    sd_tensor t = f16_tensor(N);
    while (!atomic_load_explicit(&written, memory_order_relaxed)) {
    }
    sd_cpu_dequant(&t, 0, N, shared_buf); /* writes what the other thread wrote */
    pthread_join(th, NULL);
}

static void dot_joined(void) {
    pthread_t th;
    start_writer(&th);
    pthread_join(th, NULL); /* happens-before: no race */
    float *a = floats(N);
    if (sd_cpu_dot(a, shared_buf, N) != ref_dot(a, shared_buf, N)) _exit(3);
    sd_tensor t = f16_tensor(N);
    sd_cpu_dequant(&t, 0, N, shared_buf);
}
#endif

int main(void) {
#if defined(SD_CPU_ASAN)
    expect("dot within bounds", dot_in_bounds, NULL);
    expect("dequant within bounds", dequant_in_bounds, NULL);
    expect("dot: one float past the first operand", dot_reads_past_a, "heap-buffer-overflow");
    expect("dot: one float past the second operand", dot_reads_past_b, "heap-buffer-overflow");
    expect("dot: a freed operand", dot_reads_freed, "heap-use-after-free");
    expect("dequant: one half past the weights", dequant_reads_past, "heap-buffer-overflow");
    expect("dequant: one float past the output", dequant_writes_past, "WRITE of size");
    printf("matmul path: %s\n", sd_cpu_matmul_isa() == SD_CPU_ISA_AVX2 ? "AVX2" : "portable");
    expect("matmul within bounds", matmul_in_bounds, NULL);
    expect("matmul: one half past the weights", matmul_reads_past_w, "heap-buffer-overflow");
    expect("matmul: one float past the input", matmul_reads_past_x, "heap-buffer-overflow");
    expect("matmul: one float past the output", matmul_writes_past_y, "WRITE of size");
    return sd_test_done();
#elif defined(SD_CPU_TSAN)
    expect("dot within bounds", dot_in_bounds, NULL);
    expect("dequant within bounds", dequant_in_bounds, NULL);
    expect("dot and dequant after pthread_join", dot_joined, NULL);
    expect("dot reading a racing write", dot_races, "data race");
    expect("dequant writing over a racing write", dequant_races, "data race");
    return sd_test_done();
#else
    (void)expect, (void)dot_in_bounds, (void)dequant_in_bounds;
    return sd_test_skip("not a sanitizer build (the range checks are empty)");
#endif
}

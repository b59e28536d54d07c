/* sd_cpu_logprobs.c — log_softmax of one row, the emitted token's value and rank, and the
 * top list (sd_cpu_logprobs.h). */
#include "sd_cpu_logprobs.h"

#include <math.h>

/* The row's log-normaliser split as (m, log_sum): lp_i = (x_i - m) - log_sum. With no
 * finite maximum, m = +inf (count: +inf entries) or -inf. */
static void lp_normaliser(const float *row, int32_t V, double *m_out, double *log_sum_out) {
    float m = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (row[i] > m) m = row[i]; /* NaN compares false: skipped */
    *m_out = (double)m;
    if (isinf(m)) {
        int64_t n_inf = 0;
        for (int32_t i = 0; i < V; i++) n_inf += row[i] == m;
        *log_sum_out = m > 0 ? log((double)n_inf) : 0.0;
        return;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < V; i++)
        if (row[i] >= -INFINITY) sum += exp((double)row[i] - (double)m); /* NaN fails >= */
    *log_sum_out = log(sum);
}

static float lp_value(float x, double m, double log_sum) {
    if (isinf(m)) return m > 0 && x == (float)m ? (float)-log_sum : -INFINITY;
    if (!(x >= -INFINITY)) return -INFINITY; /* NaN */
    return (float)(((double)x - m) - log_sum);
}

void sd_cpu_logprobs(const float *row, int32_t n_vocab, int32_t token, int32_t n_top, sd_logprob *out) {
    const int32_t V = n_vocab;
    if (n_top > SPECDEC_MAX_TOP_LOGPROBS) n_top = SPECDEC_MAX_TOP_LOGPROBS;
    if (n_top > V) n_top = V;
    if (n_top < 0) n_top = 0;
    double m, log_sum;
    lp_normaliser(row, V, &m, &log_sum);
    const float lt = lp_value(row[token], m, log_sum);
    int32_t above = 0, k = 0;
    for (int32_t i = 0; i < V; i++) {
        const float v = lp_value(row[i], m, log_sum);
        above += v > lt;
        if (n_top == 0 || (k == n_top && !(v > out->top_logprobs[k - 1]))) continue;
        /* insert after every entry >= v: equal values keep id order (lower id first) */
        int32_t j = k < n_top ? k++ : k - 1;
        while (j > 0 && v > out->top_logprobs[j - 1]) {
            out->top_logprobs[j] = out->top_logprobs[j - 1];
            out->top_tokens[j] = out->top_tokens[j - 1];
            j--;
        }
        out->top_logprobs[j] = v;
        out->top_tokens[j] = i;
    }
    out->token = token;
    out->logprob = lt;
    out->rank = 1 + above;
    out->n_top = k;
}

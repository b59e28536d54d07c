/* sd_server_metrics.c — counters kept by the server and the Prometheus text format
 * (version 0.0.4) of /metrics: HTTP responses by endpoint and status code, generation
 * requests by outcome, tokens, acceptance rate, tokens per round, queue depth, active
 * requests, KV pool use, disconnects, timeouts, time to first token, connections
 * refused or cut, the prefix cache (tokens queried and hit, blocks it holds); and, under
 * vLLM's names, types, labels (model_name, engine) and histogram buckets, what routers and
 * dashboards built for vLLM read (sd_render_vllm). */
#include <stdio.h>
#include <string.h>

#include "sd_server_internal.h"

static const char *const sd_out_names[SD_OUT_COUNT] = {"stop", "length", "timeout", "disconnect", "shutdown", "error"};
static const char *const sd_ep_names[SD_EP_COUNT] = {"/v1/completions", "/v1/chat/completions", "/v1/models",
                                                     "/health", "/metrics", "/tokenize", "/detokenize",
                                                     "/version", "/ping", "other"};

int sd_metrics_init(sd_server_metrics *m) {
    memset(m, 0, sizeof *m);
    return pthread_mutex_init(&m->mu, NULL) == 0 ? 0 : -1;
}

void sd_metrics_destroy(sd_server_metrics *m) { pthread_mutex_destroy(&m->mu); }

static void sd_metrics_code(sd_server_metrics *m, sd_endpoint ep, int code, int library) {
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < SD_METRICS_CODES; i++) {
        if (m->codes[i] == 0) m->codes[i] = code; /* first time this code is seen */
        if (m->codes[i] == code) {
            m->http[ep][i]++;
            m->library[i] += library;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

void sd_metrics_http(sd_server_metrics *m, sd_endpoint ep, int code) { sd_metrics_code(m, ep, code, 0); }

void sd_metrics_http_library(sd_server_metrics *m, sd_endpoint ep, int code) { sd_metrics_code(m, ep, code, 1); }

void sd_metrics_outcome(sd_server_metrics *m, int chat, int stream, sd_outcome o) {
    pthread_mutex_lock(&m->mu);
    m->outcomes[chat != 0][stream != 0][o]++;
    pthread_mutex_unlock(&m->mu);
}

void sd_metrics_usage(sd_server_metrics *m, int32_t n_prompt, int32_t n_completion, double ttft_s) {
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += n_prompt;
    m->completion_tokens += n_completion;
    if (ttft_s >= 0) {
        m->ttft_sum += ttft_s;
        m->ttft_count++;
    }
    pthread_mutex_unlock(&m->mu);
}

/* vLLM's bucket bounds (vllm/v1/metrics/loggers.py): time to first token, inter-token
 * latency (as time_per_output_token), and request latency (e2e and queue). */
static const double sd_b_ttft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                   1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double sd_b_itl[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                  0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double sd_b_req[] = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                  30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
static const struct {
    const char *name, *help;
    const double *bounds;
    int n;
} sd_hists[SD_H_COUNT] = {
    {"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", sd_b_ttft, 22},
    {"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", sd_b_itl, 19},
    {"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", sd_b_req, 21},
    {"vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", sd_b_req, 21},
};

static void sd_hist_add(sd_hist *h, sd_hist_kind k, double v) {
    int i = 0;
    while (i < sd_hists[k].n && v > sd_hists[k].bounds[i]) i++;
    if (i < sd_hists[k].n) h->bucket[i]++;
    h->count++;
    h->sum += v;
}

void sd_metrics_observe(sd_server_metrics *m, sd_hist_kind h, double seconds) {
    pthread_mutex_lock(&m->mu);
    sd_hist_add(&m->hist[h], h, seconds);
    pthread_mutex_unlock(&m->mu);
}

void sd_metrics_finish(sd_server_metrics *m, sd_finish f, double e2e_s, double queue_s, int32_t prefilled,
                       int32_t cached) {
    pthread_mutex_lock(&m->mu);
    m->finished[f]++;
    m->prefill_tokens += prefilled;
    m->cached_tokens += cached;
    sd_hist_add(&m->hist[SD_H_E2E], SD_H_E2E, e2e_s);
    sd_hist_add(&m->hist[SD_H_QUEUE], SD_H_QUEUE, queue_s);
    pthread_mutex_unlock(&m->mu);
}

void sd_metrics_count(sd_server_metrics *m, long *counter) {
    pthread_mutex_lock(&m->mu);
    (*counter)++;
    pthread_mutex_unlock(&m->mu);
}

void sd_metrics_event(sd_server_metrics *m, int disconnect, int timeout) {
    pthread_mutex_lock(&m->mu);
    m->disconnects += disconnect != 0;
    m->timeouts += timeout != 0;
    pthread_mutex_unlock(&m->mu);
}

static void sd_metric(sd_buf *b, const char *name, const char *type, const char *help) {
    sd_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Every admitted generation request once, when it ends: a stream cut after its 200 went out
 * is told from a completed one here (its status stays 200 in specdec_http_requests_total). */
static void sd_render_outcomes(sd_buf *b, const sd_server_metrics *m) {
    sd_metric(b, "specdec_generation_outcomes_total", "counter",
              "Generation requests admitted to the scheduler, by how they ended: stop, length (ran to their end); "
              "timeout, disconnect, shutdown (cut: finish_reason abort); error.");
    for (int chat = 0; chat < 2; chat++)
        for (int stream = 0; stream < 2; stream++)
            for (int o = 0; o < SD_OUT_COUNT; o++)
                sd_buf_printf(b,
                              "specdec_generation_outcomes_total{endpoint=\"%s\",stream=\"%s\",outcome=\"%s\"} "
                              "%ld\n",
                              sd_ep_names[chat ? SD_EP_CHAT : SD_EP_COMPLETIONS], stream ? "true" : "false",
                              sd_out_names[o], m->outcomes[chat][stream][o]);
}

void sd_metrics_summary(sd_server_metrics *m, FILE *f) {
    long n[SD_OUT_COUNT] = {0}, streamed[SD_OUT_COUNT] = {0};
    pthread_mutex_lock(&m->mu);
    for (int o = 0; o < SD_OUT_COUNT; o++)
        for (int chat = 0; chat < 2; chat++) {
            streamed[o] += m->outcomes[chat][1][o];
            n[o] += m->outcomes[chat][0][o] + m->outcomes[chat][1][o];
        }
    pthread_mutex_unlock(&m->mu);
    fprintf(f, "specdec serve: generation requests by outcome (streamed):");
    for (int o = 0; o < SD_OUT_COUNT; o++)
        fprintf(f, "%s %s %ld (%ld)", o ? "," : "", sd_out_names[o], n[o], streamed[o]);
    fprintf(f, "\n");
}

static void sd_render_http(sd_buf *b, const sd_server_metrics *m) {
    sd_metric(b, "specdec_http_requests_total", "counter", "HTTP responses by endpoint and status code.");
    for (int e = 0; e < SD_EP_COUNT; e++)
        for (int i = 0; i < SD_METRICS_CODES && m->codes[i]; i++)
            if (m->http[e][i])
                sd_buf_printf(b, "specdec_http_requests_total{endpoint=\"%s\",code=\"%d\"} %ld\n", sd_ep_names[e],
                              m->codes[i], m->http[e][i]);
    sd_metric(b, "specdec_http_library_answers_total", "counter",
              "Of those, answers libmicrohttpd gave by itself to malformed HTTP (HTML bodies), by status code.");
    for (int i = 0; i < SD_METRICS_CODES && m->codes[i]; i++)
        if (m->library[i])
            sd_buf_printf(b, "specdec_http_library_answers_total{code=\"%d\"} %ld\n", m->codes[i], m->library[i]);
    sd_render_outcomes(b, m);
    sd_metric(b, "specdec_prompt_tokens_total", "counter", "Prompt tokens of answered generation requests.");
    sd_buf_printf(b, "specdec_prompt_tokens_total %ld\n", m->prompt_tokens);
    sd_metric(b, "specdec_completion_tokens_total", "counter", "Completion tokens of answered generation requests.");
    sd_buf_printf(b, "specdec_completion_tokens_total %ld\n", m->completion_tokens);
    sd_metric(b, "specdec_client_disconnects_total", "counter", "Requests cancelled because the client left.");
    sd_buf_printf(b, "specdec_client_disconnects_total %ld\n", m->disconnects);
    sd_metric(b, "specdec_request_timeouts_total", "counter", "Requests cancelled by the per-request timeout.");
    sd_buf_printf(b, "specdec_request_timeouts_total %ld\n", m->timeouts);
    sd_metric(b, "specdec_time_to_first_token_seconds", "summary", "Seconds from submit to the first token.");
    sd_buf_printf(b, "specdec_time_to_first_token_seconds_sum %.6f\nspecdec_time_to_first_token_seconds_count %ld\n",
                  m->ttft_sum, m->ttft_count);
    sd_metric(b, "specdec_connections_refused_total", "counter",
              "Connections over --max-connections, answered 503 and closed.");
    sd_buf_printf(b, "specdec_connections_refused_total %ld\n", m->over_limit);
    sd_metric(b, "specdec_request_deadline_closes_total", "counter",
              "Connections closed because a request did not arrive within --body-timeout.");
    sd_buf_printf(b, "specdec_request_deadline_closes_total %ld\n", m->deadline_closes);
}

/* ------------------------------------------------------------------------- */
/* vLLM's names                                                               */
/* ------------------------------------------------------------------------- */
/* A bucket bound as Prometheus' clients print it (Go's float formatting: "1.0", "0.025"). */
static void sd_le(char *out, size_t cap, double v) {
    snprintf(out, cap, "%g", v);
    if (!strpbrk(out, ".e")) snprintf(out + strlen(out), cap - strlen(out), ".0");
}

static void sd_render_hist(sd_buf *b, const char *labels, sd_hist_kind k, const sd_hist *h) {
    const char *name = sd_hists[k].name;
    sd_metric(b, name, "histogram", sd_hists[k].help);
    long cum = 0;
    char le[32];
    for (int i = 0; i < sd_hists[k].n; i++) {
        cum += h->bucket[i];
        sd_le(le, sizeof le, sd_hists[k].bounds[i]);
        sd_buf_printf(b, "%s_bucket{%s,le=\"%s\"} %ld\n", name, labels, le, cum);
    }
    sd_buf_printf(b, "%s_bucket{%s,le=\"+Inf\"} %ld\n%s_count{%s} %ld\n%s_sum{%s} %.9g\n", name, labels, h->count,
                  name, labels, h->count, name, labels, h->sum);
}

/* model_name="ID",engine="0" with the id escaped as the text format wants (\\ \" \n). */
static void sd_vllm_labels(char *out, size_t cap, const char *model) {
    size_t o = (size_t)snprintf(out, cap, "model_name=\"");
    for (const char *p = model; *p && o + 4 < cap; p++) {
        if (*p == '\\' || *p == '"' || *p == '\n') out[o++] = '\\';
        out[o++] = *p == '\n' ? 'n' : *p;
    }
    snprintf(out + o, cap - o, "\",engine=\"0\"");
}

static void sd_render_vllm_spec(sd_buf *b, const char *lb, sd_server *srv, const specdec_scheduler_metrics *s) {
    int64_t rounds = 0, at[SPECDEC_MAX_DRAFT] = {0};
    if (specdec_scheduler_get_acceptance(srv->sched, &rounds, at, SPECDEC_MAX_DRAFT) != SPECDEC_OK) return;
    sd_metric(b, "vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.");
    sd_buf_printf(b, "vllm:spec_decode_num_drafts_total{%s} %lld\n", lb, (long long)rounds);
    sd_metric(b, "vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.");
    sd_buf_printf(b, "vllm:spec_decode_num_draft_tokens_total{%s} %lld\n", lb, (long long)s->drafted);
    sd_metric(b, "vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.");
    sd_buf_printf(b, "vllm:spec_decode_num_accepted_tokens_total{%s} %lld\n", lb, (long long)s->accepted);
    sd_metric(b, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position.");
    int n = srv->cfg.n_draft > 0 ? srv->cfg.n_draft : 1; /* the default γ's positions, more once used */
    for (int i = 0; i < SPECDEC_MAX_DRAFT; i++)
        if (at[i]) n = i + 1 > n ? i + 1 : n;
    for (int i = 0; i < n; i++)
        sd_buf_printf(b, "vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position=\"%d\"} %lld\n", lb, i,
                      (long long)at[i]);
}

static void sd_render_vllm(sd_buf *b, sd_server *srv, const sd_server_metrics *m, const specdec_scheduler_metrics *s) {
    static const char *const reasons[SD_FIN_COUNT] = {"stop", "length", "abort", "error"};
    char lb[sizeof srv->model_id * 2 + 32];
    sd_vllm_labels(lb, sizeof lb, srv->model_id);
    /* as vLLM counts them: a preempted request waits (specdec_kv_admission OPTIMISTIC) */
    sd_metric(b, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
    sd_buf_printf(b, "vllm:num_requests_running{%s} %lld\n", lb, (long long)(s->active - s->preempted));
    sd_metric(b, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
    sd_buf_printf(b, "vllm:num_requests_waiting{%s} %lld\n", lb, (long long)(s->queued + s->preempted));
    sd_metric(b, "vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.");
    sd_buf_printf(b, "vllm:num_preemptions_total{%s} %lld\n", lb, (long long)s->preemptions);
    sd_metric(b, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
    sd_buf_printf(b, "vllm:kv_cache_usage_perc{%s} %.6g\n", lb,
                  s->kv_blocks_total ? (double)s->kv_blocks_used / (double)s->kv_blocks_total : 0.0);
    sd_metric(b, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
    sd_buf_printf(b, "vllm:prompt_tokens_total{%s} %ld\n", lb, m->prefill_tokens);
    sd_metric(b, "vllm:prompt_tokens_cached_total", "counter", "Number of cached prompt tokens.");
    sd_buf_printf(b, "vllm:prompt_tokens_cached_total{%s} %ld\n", lb, m->cached_tokens);
    sd_metric(b, "vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of queried tokens.");
    sd_buf_printf(b, "vllm:prefix_cache_queries_total{%s} %lld\n", lb, (long long)s->prefix_cache_queries);
    sd_metric(b, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of cached tokens.");
    sd_buf_printf(b, "vllm:prefix_cache_hits_total{%s} %lld\n", lb, (long long)s->prefix_cache_hits);
    sd_metric(b, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
    sd_buf_printf(b, "vllm:generation_tokens_total{%s} %lld\n", lb, (long long)s->tokens_generated);
    sd_metric(b, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
    for (int f = 0; f < SD_FIN_COUNT; f++)
        sd_buf_printf(b, "vllm:request_success_total{%s,finished_reason=\"%s\"} %ld\n", lb, reasons[f],
                      m->finished[f]);
    for (int k = 0; k < SD_H_COUNT; k++) sd_render_hist(b, lb, (sd_hist_kind)k, &m->hist[k]);
    if (srv->draft) sd_render_vllm_spec(b, lb, srv, s);
}

static void sd_render_sched(sd_buf *b, const specdec_scheduler_metrics *s) {
    sd_metric(b, "specdec_requests_total", "counter", "Generation requests by outcome (rejected: refused at submit).");
    sd_buf_printf(b,
                  "specdec_requests_total{outcome=\"finished\"} %lld\nspecdec_requests_total{outcome=\"cancelled\"} "
                  "%lld\nspecdec_requests_total{outcome=\"failed\"} %lld\nspecdec_requests_total{outcome=\"rejected\"} "
                  "%lld\n",
                  (long long)s->finished, (long long)s->cancelled, (long long)s->failed, (long long)s->rejected);
    sd_metric(b, "specdec_tokens_generated_total", "counter", "Tokens generated by ended requests.");
    sd_buf_printf(b, "specdec_tokens_generated_total %lld\n", (long long)s->tokens_generated);
    sd_metric(b, "specdec_rounds_total", "counter", "Speculative rounds (plain steps without a draft).");
    sd_buf_printf(b, "specdec_rounds_total %lld\n", (long long)s->rounds);
    sd_metric(b, "specdec_draft_tokens_total", "counter", "Draft tokens proposed.");
    sd_buf_printf(b, "specdec_draft_tokens_total %lld\n", (long long)s->drafted);
    sd_metric(b, "specdec_accepted_tokens_total", "counter", "Draft tokens accepted.");
    sd_buf_printf(b, "specdec_accepted_tokens_total %lld\n", (long long)s->accepted);
    sd_metric(b, "specdec_acceptance_rate", "gauge", "Accepted / drafted since start.");
    sd_buf_printf(b, "specdec_acceptance_rate %.6g\n", s->drafted ? (double)s->accepted / (double)s->drafted : 0.0);
    sd_metric(b, "specdec_tokens_per_round", "gauge", "Tokens generated / rounds since start.");
    sd_buf_printf(b, "specdec_tokens_per_round %.6g\n",
                  s->rounds ? (double)s->tokens_generated / (double)s->rounds : 0.0);
    sd_metric(b, "specdec_queue_depth", "gauge", "Requests waiting to start.");
    sd_buf_printf(b, "specdec_queue_depth %d\n", (int)s->queued);
    sd_metric(b, "specdec_active_requests", "gauge", "Requests being decoded (the preempted ones included).");
    sd_buf_printf(b, "specdec_active_requests %d\n", (int)s->active);
    sd_metric(b, "specdec_preempted_requests", "gauge",
              "Of the active requests, those preempted now (their KV given back), waiting to resume.");
    sd_buf_printf(b, "specdec_preempted_requests %lld\n", (long long)s->preempted);
    sd_metric(b, "specdec_preemptions_total", "counter",
              "Requests preempted when the KV pool ran short (--kv-admission optimistic); each resumes by recomputing.");
    sd_buf_printf(b, "specdec_preemptions_total %lld\n", (long long)s->preemptions);
    sd_metric(b, "specdec_kv_blocks", "gauge", "KV-cache pool blocks per model: the pool, and those holding rows after the last round.");
    sd_buf_printf(b,
                  "specdec_kv_blocks{model=\"target\",state=\"total\"} %d\nspecdec_kv_blocks{model=\"target\","
                  "state=\"used\"} %d\nspecdec_kv_blocks{model=\"draft\",state=\"total\"} %d\n"
                  "specdec_kv_blocks{model=\"draft\",state=\"used\"} %d\n",
                  (int)s->kv_blocks_total, (int)s->kv_blocks_used, (int)s->draft_kv_blocks_total,
                  (int)s->draft_kv_blocks_used);
    sd_metric(b, "specdec_kv_blocks_cached", "gauge",
              "KV-cache pool blocks per model that only the prefix cache holds (reusable at once; not in used).");
    sd_buf_printf(b, "specdec_kv_blocks_cached{model=\"target\"} %d\nspecdec_kv_blocks_cached{model=\"draft\"} %d\n",
                  (int)s->kv_blocks_cached, (int)s->draft_kv_blocks_cached);
    sd_metric(b, "specdec_prefix_cache_queries_total", "counter",
              "Prompt tokens looked up in the target's prefix cache (of each request begun that it can serve: its "
              "prompt but the last token).");
    sd_buf_printf(b, "specdec_prefix_cache_queries_total %lld\n", (long long)s->prefix_cache_queries);
    sd_metric(b, "specdec_prefix_cache_hits_total", "counter",
              "Of the prompt tokens looked up, those whose KV came from the prefix cache (not prefilled).");
    sd_buf_printf(b, "specdec_prefix_cache_hits_total %lld\n", (long long)s->prefix_cache_hits);
}

/* Structured output: lookups of the compiled-grammar cache (a miss compiles) and its size. */
static void sd_render_grammars(sd_buf *b, sd_gcache *c) {
    long hits = 0, misses = 0;
    int entries = 0;
    if (!c) return;
    sd_gcache_stats(c, &hits, &misses, &entries);
    sd_metric(b, "specdec_grammar_cache_lookups_total", "counter",
              "Structured-output constraints looked up in the compiled-grammar cache: hit, or miss (compiled).");
    sd_buf_printf(b,
                  "specdec_grammar_cache_lookups_total{result=\"hit\"} %ld\n"
                  "specdec_grammar_cache_lookups_total{result=\"miss\"} %ld\n",
                  hits, misses);
    sd_metric(b, "specdec_grammar_cache_entries", "gauge", "Compiled grammars kept (--grammar-cache at most).");
    sd_buf_printf(b, "specdec_grammar_cache_entries %d\n", entries);
}

int sd_metrics_render(sd_buf *b, sd_server *srv) {
    sd_server_metrics *m = &srv->metrics, snap;
    pthread_mutex_lock(&m->mu);
    sd_render_http(b, m);
    snap = *m;
    pthread_mutex_unlock(&m->mu);
    specdec_scheduler_metrics s;
    if (atomic_load(&srv->state) != SD_STATE_LOADING && specdec_scheduler_get_metrics(srv->sched, &s) == SPECDEC_OK) {
        sd_render_sched(b, &s);
        sd_render_grammars(b, srv->grammars);
        sd_render_vllm(b, srv, &snap, &s);
    }
    return b->oom ? -1 : 0;
}

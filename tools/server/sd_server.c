/* sd_server.c — the server's lifecycle: bind and start the HTTP daemon (/health says
 * "loading"), load the model pair and tokenizer, create the scheduler (max_active =
 * --parallel) and the prep pool, serve (the main thread sweeps connection deadlines
 * between signals), then on SIGINT/SIGTERM drain: new requests 503, running and queued
 * ones get --shutdown-timeout to finish, then the rest are cancelled (scheduler
 * shutdown), their answers go out, the daemon stops (joins the connection threads) and
 * everything is freed. */
#define _GNU_SOURCE /* mallopt */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sd_server_internal.h"

void sd_server_config_default(sd_server_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->parallel = 4;
    c->queue = 64;
    c->backend = SPECDEC_BACKEND_AUTO;
    c->n_draft = 4;
    c->max_body = (size_t)2 << 20;
    c->timeout_s = 600;
    c->body_timeout_s = 30;
    c->idle_timeout_s = 5;
    c->shutdown_timeout_s = 30;
    c->max_connections = 256;
    c->prefix_cache = SPECDEC_PREFIX_CACHE_AUTO;
    c->grammar_cache = SD_SERVER_GRAMMAR_CACHE;
}

int sd_server_chat_template_known(const char *name) {
    for (int32_t i = 0; name && specdec_chat_template_name(i); i++)
        if (!strcmp(name, specdec_chat_template_name(i))) return 1;
    return 0;
}

void sd_server_chat_template_list(char *buf, size_t cap) {
    size_t off = 0;
    if (cap) buf[0] = '\0';
    for (int32_t i = 0; specdec_chat_template_name(i) && off < cap; i++) {
        int n = snprintf(buf + off, cap - off, "%s%s", i ? ", " : "", specdec_chat_template_name(i));
        if (n < 0) break;
        off += (size_t)n;
    }
}

/* The chat family: forced by --chat-template, else detected from the tokenizer. A
 * template of no known family does not stop the server (completions still work); chat
 * requests are then refused with the reason, and the log says so now. */
static void sd_server_chat_setup(sd_server *srv) {
    if (srv->cfg.chat_template) {
        srv->chat_family = srv->cfg.chat_template;
        return;
    }
    const char *name = NULL;
    if (specdec_chat_template_detect(srv->tok, &name) == SPECDEC_OK) {
        srv->chat_family = name;
        return;
    }
    srv->chat_family = NULL;
    snprintf(srv->chat_problem, sizeof srv->chat_problem, "%s", specdec_last_error());
    char names[128];
    sd_server_chat_template_list(names, sizeof names);
    fprintf(stderr,
            "specdec serve: warning: %s; /v1/chat/completions will answer 400 (chat_template_unsupported) "
            "unless --chat-template NAME is given (%s)\n",
            srv->chat_problem, names);
}

/* The served model id: --alias, else the target directory's last component. */
static void sd_server_model_id(sd_server *srv) {
    const char *src = srv->cfg.model_alias;
    char tmp[sizeof srv->model_id];
    if (!src) {
        snprintf(tmp, sizeof tmp, "%s", srv->cfg.target_dir);
        size_t n = strlen(tmp);
        while (n > 1 && tmp[n - 1] == '/') tmp[--n] = '\0';
        const char *slash = strrchr(tmp, '/');
        src = slash && slash[1] ? slash + 1 : tmp;
    }
    snprintf(srv->model_id, sizeof srv->model_id, "%s", *src ? src : "model");
}

static int sd_server_fail(const char *what, specdec_status st) {
    fprintf(stderr, "specdec serve: %s: %s: %s\n", what, specdec_status_string(st), specdec_last_error());
    return -1;
}

/* The models, the tokenizer and the scheduler: 0, -1 (the message printed), or 2 when the
 * --speculative-config method does not fit the draft loaded (a usage error). */
static int sd_server_load(sd_server *srv) {
    specdec_status st = specdec_model_load(srv->cfg.target_dir, NULL, &srv->target);
    if (st) return sd_server_fail("loading the target model", st);
    /* "mtp": the draft is the checkpoint's own MTP layer (-md's, else the target's) */
    specdec_model_params dp = specdec_model_default_params();
    dp.mtp = srv->spec.method == SPECDEC_DRAFT_MTP;
    if (dp.mtp && !srv->cfg.draft_dir) srv->cfg.draft_dir = srv->cfg.target_dir;
    if (srv->cfg.draft_dir && (st = specdec_model_load(srv->cfg.draft_dir, &dp, &srv->draft)))
        return sd_server_fail(dp.mtp ? "loading the MTP layer" : "loading the draft model", st);
    specdec_model_info info;
    if (srv->draft && (st = specdec_model_get_info(srv->draft, &info))) return sd_server_fail("reading the draft", st);
    srv->draft_head = srv->draft && (info.model_kind == SPECDEC_DRAFT_EAGLE3 || info.model_kind == SPECDEC_DRAFT_MTP)
                          ? info.model_kind
                          : 0;
    char msg[600];
    if (sd_spec_check_loaded(&srv->spec, srv->cfg.draft_dir, srv->draft_head, msg, sizeof msg)) {
        fprintf(stderr, "specdec serve: --speculative-config: %s\n", msg);
        return 2; /* a usage error, as the config's own */
    }
    if ((st = specdec_tokenizer_load(srv->cfg.tokenizer_path ? srv->cfg.tokenizer_path : srv->cfg.target_dir,
                                     &srv->tok)))
        return sd_server_fail("loading the tokenizer", st);
    sd_server_chat_setup(srv);
    srv->tool_parser = srv->cfg.enable_auto_tool_choice ? sd_tools_parser_named(srv->cfg.tool_call_parser) : SD_TP_NONE;
    if ((srv->reasoning = sd_reasoning_parser_named(srv->cfg.reasoning_parser)) != SD_RP_NONE) {
        sd_server_reasoning_tags(srv->cfg.reasoning_tags ? srv->cfg.reasoning_tags : "<think> </think>", srv->rs_start,
                                 srv->rs_end);
        /* the marker that activates a request's grammar: the end tag's ids (one added token for
           Qwen3 / DeepSeek-R1's "</think>") */
        st = specdec_tokenize(srv->tok, srv->rs_end, strlen(srv->rs_end), 0, srv->rs_marker, SPECDEC_MAX_GRAMMAR_AFTER_TOKENS,
                              &srv->n_rs_marker);
        if (st || srv->n_rs_marker < 1) {
            fprintf(stderr, "specdec serve: the reasoning end tag '%s' is not 1..%d tokens\n", srv->rs_end,
                    SPECDEC_MAX_GRAMMAR_AFTER_TOKENS);
            return 2;
        }
    }
    if ((st = specdec_model_get_info(srv->target, &info))) return sd_server_fail("reading the model", st);
    srv->n_vocab = info.vocab_size;
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = srv->cfg.backend;
    ep.n_ctx = srv->cfg.n_ctx;
    ep.cpu_threads = srv->cfg.cpu_threads;
    ep.ngram_corpus_tokens = srv->cfg.ngram_corpus_tokens;
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = srv->cfg.parallel;
    sp.max_queued = srv->cfg.queue;
    sp.prefix_cache = srv->cfg.prefix_cache;
    sp.prefill_chunk = srv->cfg.prefill_chunk;
    sp.kv_pool_blocks = srv->cfg.kv_pool_blocks;
    if (srv->cfg.kv_block_tokens > 0) sp.kv_block_tokens = srv->cfg.kv_block_tokens;
    sp.kv_admission = srv->cfg.kv_admission;
    sp.scheduling_policy = srv->cfg.scheduling_policy;
    if ((st = specdec_scheduler_create(srv->target, srv->draft, &ep, &sp, &srv->sched))) {
        if (st == SPECDEC_ERR_UNSUPPORTED && srv->cfg.prefix_cache == SPECDEC_PREFIX_CACHE_ON) {
            fprintf(stderr, "specdec serve: --enable-prefix-caching: this model and backend cannot cache prefixes: "
                            "%s; start without the option (the default caches where it can) or with "
                            "--no-enable-prefix-caching\n", specdec_last_error());
            return -1;
        }
        return sd_server_fail("creating the scheduler", st);
    }
    srv->n_ctx = specdec_scheduler_n_ctx(srv->sched);
    specdec_backend be = srv->cfg.backend;
    if (be == SPECDEC_BACKEND_AUTO) be = specdec_cuda_device_count() > 0 ? SPECDEC_BACKEND_CUDA : SPECDEC_BACKEND_CPU;
    srv->backend_name = be == SPECDEC_BACKEND_CUDA ? "cuda" : "cpu";
    srv->max_prompt_bytes = srv->cfg.max_prompt_bytes ? srv->cfg.max_prompt_bytes : sd_prep_default_bytes(srv);
    int threads = srv->cfg.prep_threads;
    if (threads <= 0) threads = (int)(sysconf(_SC_NPROCESSORS_ONLN) / 2);
    srv->prep = sd_prep_create(threads); /* NULL (no thread could start): prepared on the connection's thread */
    if (!(srv->grammars = sd_gcache_create(srv->cfg.grammar_cache))) {
        fprintf(stderr, "specdec serve: creating the grammar cache: out of memory\n");
        return -1;
    }
    return 0;
}

static void sd_server_free(sd_server *srv) {
    sd_http_stop(srv);
    sd_prep_free(srv->prep);
    specdec_scheduler_free(srv->sched);
    sd_gcache_free(srv->grammars); /* after the scheduler: no request holds an entry any more */
    specdec_tokenizer_free(srv->tok);
    specdec_model_free(srv->draft);
    specdec_model_free(srv->target);
    sd_metrics_destroy(&srv->metrics);
    sd_conn_destroy(srv);
    free(srv);
}

/* Wait up to seconds for a signal in set, sweeping connection deadlines meanwhile:
 * the signal, or 0 when the time is up (seconds < 0: no limit). */
static int sd_server_wait(sd_server *srv, const sigset_t *set, double seconds) {
    double end = sd_now() + seconds;
    for (;;) {
        sd_conn_sweep(srv);
        if (seconds >= 0 && sd_now() >= end) return 0;
        struct timespec tick = {0, 100000000L}; /* the sweep's period */
        int sig = sigtimedwait(set, NULL, &tick);
        if (sig > 0) return sig;
    }
}

/* Drain: new requests get 503 (state), running and queued ones may finish within
 * shutdown_timeout_s (a second signal ends the wait), then the rest are cancelled. */
static void sd_server_drain(sd_server *srv, const sigset_t *set) {
    atomic_store(&srv->state, SD_STATE_DRAINING);
    double end = sd_now() + srv->cfg.shutdown_timeout_s;
    while (atomic_load(&srv->active_jobs) > 0 && sd_now() < end)
        if (sd_server_wait(srv, set, 0.1 < end - sd_now() ? 0.1 : end - sd_now()) > 0) break;
    if (atomic_load(&srv->active_jobs) > 0)
        fprintf(stderr, "specdec serve: cancelling %d request(s) still running\n", atomic_load(&srv->active_jobs));
    atomic_store(&srv->cancel_all, 1);
    specdec_scheduler_shutdown(srv->sched); /* queued and running requests end as cancelled */
    /* let the answers of the cancelled requests (final chunks) go out before the daemon
     * closes every connection: a job ends when its answer is queued, which libmicrohttpd then
     * sends, so wait for the requests to complete too (a request stays open until its answer
     * is out; CI saw a cut request's connection closed unanswered under ASan); a client that
     * does not read is not waited for long */
    for (int i = 0; i < 50 && (atomic_load(&srv->active_jobs) > 0 || atomic_load(&srv->open_requests) > 0); i++)
        sd_server_wait(srv, set, 0.1);
}

/* The options that need nothing loaded: 0, or 2 with the reason on stderr. */
static int sd_server_check_config(const sd_server_config *cfg) {
    if (cfg->api_key && !*cfg->api_key) {
        fprintf(stderr, "specdec serve: the API key is empty, which would leave the server open; set "
                        "SPECDEC_API_KEY to a secret, or unset it (and give no --api-key) for no authentication\n");
        return 2;
    }
    if (cfg->chat_template && !sd_server_chat_template_known(cfg->chat_template)) {
        char names[128];
        sd_server_chat_template_list(names, sizeof names);
        fprintf(stderr, "specdec serve: unknown chat template '%s' (known: %s)\n", cfg->chat_template, names);
        return 2;
    }
    if (cfg->tool_call_parser && sd_tools_parser_named(cfg->tool_call_parser) == SD_TP_NONE) {
        fprintf(stderr, "specdec serve: unknown tool call parser '%s' (known: " SD_TOOL_PARSER_NAMES ")\n",
                cfg->tool_call_parser);
        return 2;
    }
    if (cfg->reasoning_parser && sd_reasoning_parser_named(cfg->reasoning_parser) == SD_RP_NONE) {
        fprintf(stderr, "specdec serve: unknown reasoning parser '%s' (known: " SD_REASONING_PARSER_NAMES ")\n",
                cfg->reasoning_parser);
        return 2;
    }
    if (cfg->reasoning_tags && sd_server_reasoning_tags(cfg->reasoning_tags, NULL, NULL)) {
        fprintf(stderr, "specdec serve: reasoning tags '%s': two tags of 1..%d bytes separated by one space\n",
                cfg->reasoning_tags, SD_REASONING_TAG_MAX);
        return 2;
    }
    if (cfg->enable_auto_tool_choice && !cfg->tool_call_parser) {
        fprintf(stderr, "specdec serve: --enable-auto-tool-choice needs --tool-call-parser (" SD_TOOL_PARSER_NAMES ")\n");
        return 2;
    }
    return 0;
}

int sd_server_run(const sd_server_config *cfg) {
    if (sd_server_check_config(cfg)) return 2;
    /* Signals are taken by sigwait below: block them before any thread exists so that
     * every thread (scheduler, daemon, connections) inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client that hangs up must not kill the process */
    /* buffers of request size (bodies, parse trees, prompt ids) come from mmap and go back
     * when freed: a burst of big requests must not leave its peak in malloc's arenas (the
     * default threshold grows to 32 MiB after the first such free) */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    sd_spec_config spec;
    char msg[300];
    int model_from_spec = 0;
    if (sd_spec_server_config(cfg->speculative_config, cfg->draft_dir, &spec, &model_from_spec, msg, sizeof msg)) {
        fprintf(stderr, "specdec serve: --speculative-config: %s\n", msg);
        return 2;
    }
    sd_server *srv = calloc(1, sizeof *srv);
    if (!srv || sd_metrics_init(&srv->metrics) || sd_conn_init(srv)) {
        fprintf(stderr, "specdec serve: out of memory\n");
        free(srv);
        return 1;
    }
    srv->cfg = *cfg;
    srv->spec = spec;
    if (spec.suffix && !srv->cfg.ngram_corpus_tokens) srv->cfg.ngram_corpus_tokens = SD_SERVER_SUFFIX_CORPUS;
    if (model_from_spec) srv->cfg.draft_dir = srv->spec.model;
    atomic_init(&srv->state, SD_STATE_LOADING);
    atomic_init(&srv->cancel_all, 0);
    atomic_init(&srv->next_id, 1);
    atomic_init(&srv->active_jobs, 0);
    atomic_init(&srv->open_requests, 0);
    sd_server_model_id(srv);
    if (sd_http_start(srv)) {
        sd_server_free(srv);
        return 1;
    }
    if (srv->cfg.before_load) srv->cfg.before_load(srv->cfg.before_load_arg); /* tests only (sd_server.h) */
    const int rc = sd_server_load(srv);
    if (rc) {
        sd_server_free(srv);
        return rc < 0 ? 1 : rc;
    }
    atomic_store(&srv->state, SD_STATE_READY); /* release: the models are set up */
    static const char *const pc_names[] = {"auto", "off", "on"}; /* by specdec_prefix_cache value */
    const unsigned pc = (unsigned)srv->cfg.prefix_cache;
    printf("specdec serve: ready (model %s, %s backend, %s, parallel %d, chat template %s, prefix caching %s)\n",
           srv->model_id, srv->backend_name, srv->draft ? "speculative" : "plain decoding", srv->cfg.parallel,
           srv->chat_family ? srv->chat_family : "unsupported", pc < 3 ? pc_names[pc] : "?");
    fflush(stdout);
    int sig = sd_server_wait(srv, &set, -1);
    fprintf(stderr, "specdec serve: %s, draining (up to %g s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            srv->cfg.shutdown_timeout_s);
    sd_server_drain(srv, &set);
    sd_http_stop(srv); /* every connection closed: every request counted */
    sd_metrics_summary(&srv->metrics, stderr);
    sd_server_free(srv);
    return 0;
}

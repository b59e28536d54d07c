/* cmd_serve.c — `specdec serve`: options -> sd_server_config, then tools/server runs
 * the OpenAI-compatible HTTP server until SIGINT/SIGTERM. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "specdec.h"

int cli_cmd_serve(int argc, char **argv);

#ifdef SPECDEC_WITH_SERVER
#include "sd_server.h"

static void serve_usage(FILE *f) {
    fprintf(f,
            "usage: specdec serve [-m TARGET_DIR] [-md DRAFT_DIR] [options]\n"
            "  -m DIR              target model directory or .gguf file; default: the bundled pair kjv-target +\n"
            "                      kjv-draft\n"
            "  -md DIR             draft model or EAGLE-3 head directory (speculative decoding; a head\n"
            "                      drafts as eagle3, CPU backend); none: plain decoding\n"
            "  --tokenizer PATH    the tokenizer (tokenizer.json, its directory or a .gguf) instead of the\n"
            "                      target's, e.g. a GGUF whose own tokenizer specdec does not read\n"
            "  --host ADDR         bind address (default 127.0.0.1: loopback only)\n"
            "  --port N            port, 0 = any free one (printed); default 8080\n"
            "  --api-key KEY       require 'Authorization: Bearer KEY' (default: $SPECDEC_API_KEY, else none;\n"
            "                      prefer the variable: argv is visible to every user of the machine)\n"
            "  --parallel N        requests decoded at once, 1..256 (default 4)\n"
            "  --queue N           requests waiting beyond those; more get 429 (default 64)\n"
            "  --backend B         auto|cpu|cuda (default auto)\n"
            "  --ctx N             context length, 0 = from the model (default 0)\n"
            "  -t, --threads N     CPU backend: threads of each model's forward pass, 1..%d (default 0:\n"
            "                      $SPECDEC_CPU_THREADS, else the physical cores, at most 8)\n"
            "  --draft N           default draft length γ of a request, 0..%d (default 4)\n"
            "  --ngram-corpus N    the n-gram drafter also searches earlier requests' outputs, kept in a corpus\n"
            "                      of N tokens, oldest evicted first (default 0: none; a request's speed then\n"
            "                      depends on what others generated)\n"
            "  --speculative-config JSON  the requests' default drafter, vLLM's keys: {\"method\":\n"
            "                      \"ngram\"|\"suffix\"|\"draft_model\"|\"eagle3\"|\"mtp\", \"num_speculative_tokens\": G,\n"
            "                      \"prompt_lookup_min\": N, \"prompt_lookup_max\": N, \"model\": DRAFT_DIR};\n"
            "                      \"eagle3\" needs an EAGLE-3 head as the draft (-md or \"model\"),\n"
            "                      \"draft_model\" a draft model; \"mtp\" loads the MTP layer of -md's\n"
            "                      checkpoint, by default the target's own (GLM-4.5, DeepSeek-V3; CPU);\n"
            "                      a request's \"speculative_config\" overrides it (with it and no -m:\n"
            "                      the bundled target alone)\n"
            "  --chat-template T   chat prompts: jinja (the model's own template) | plain | a built-in one:\n"
            "                      llama3|chatml|llama2|mistral|zephyr|phi3 (default: jinja when the model\n"
            "                      has a template, else plain)\n"
            "  --enable-auto-tool-choice  tool_choice \"auto\" (the default with tools) parses tool calls\n"
            "                      out of the text with --tool-call-parser; without it \"auto\" is 400\n"
            "  --tool-call-parser P  hermes (<tool_call>{json}</tool_call>: Qwen2.5/Qwen3/Hermes) |\n"
            "                      llama3_json | mistral | glm45 (<tool_call>NAME<arg_key>..: GLM-4.5/4.6) |\n"
            "                      qwen3_coder (<function=NAME><parameter=P>..: Qwen3-Coder) |\n"
            "                      deepseek_v3 (DeepSeek-V3's tool call tags)\n"
            "  --reasoning-parser P  qwen3 | deepseek_r1 | glm45: chat outputs split into \"reasoning\" (the\n"
            "                      <think>...</think> text) and \"content\"; response_format and\n"
            "                      tool_choice grammars act after the thinking\n"
            "  --alias NAME, --served-model-name NAME\n"
            "                      model id served and expected in requests (default: the target dir's name)\n"
            "  --max-body BYTES    request body limit, 413 beyond (default 2097152)\n"
            "  --timeout S         per-request limit in seconds; the request is cancelled (default 600)\n"
            "  --body-timeout S    a request (headers and body) must arrive within S seconds of the accept or\n"
            "                      of the connection's previous answer, else it is closed (default 30)\n"
            "  --idle-timeout S    close a connection silent for S seconds (default 5)\n"
            "  --shutdown-timeout S  SIGTERM: requests get S seconds to finish, then are cancelled (default 30)\n"
            "  --max-connections N simultaneous connections; more get 503 + Retry-After (default 256); beyond\n"
            "                      N + max(16, N/4) they are closed unanswered\n"
            "  --allowed-hosts H   comma-separated Host names accepted on a loopback bind besides localhost,\n"
            "                      127.0.0.1, [::1] and --host ('*': any; default none)\n"
            "  --max-prompt-bytes N  refuse longer prompt text before tokenizing (default 0: 2 x context x\n"
            "                      the longest token's bytes)\n"
            "  --prep-threads N    threads that parse and tokenize requests, 1..4 (default 0: half the CPUs)\n"
            "  --enable-prefix-caching     reuse the KV of prompt prefixes seen before (vLLM's option); the\n"
            "                      start fails where the model or backend cannot (default: on where it can)\n"
            "  --no-enable-prefix-caching  every request prefills its whole prompt\n"
            "  --prefill-chunk N   prompt tokens prefilled between two decode rounds (chunked prefill: a long\n"
            "                      prompt joins over several rounds while the others keep streaming); 0\n"
            "                      (default) = no limit\n",
            SPECDEC_MAX_CPU_THREADS, SPECDEC_MAX_DRAFT);
    cli_kv_usage(f, 19);
    fprintf(f,
            "  --scheduling-policy P  fcfs (default: first come, first served) or priority (vLLM's: a request's\n"
            "                      \"priority\", lower first, orders the queue and who is preempted; fcfs\n"
            "                      answers 400 to a priority other than 0)\n"
            "  --grammar-cache N   structured output: compiled grammars kept for requests that repeat a\n"
            "                      constraint (LRU by kind and exact spec), 0..%d (default %d; 0 = none)\n"
            "  --verbose           log requests to stderr\n"
            "vLLM's names are accepted too: --max-model-len (--ctx), --max-num-seqs (--parallel),\n"
            "--served-model-name (--alias), --num-gpu-blocks-override (--kv-blocks), --block-size\n"
            "(--kv-block-size).\n",
            SD_SERVER_GRAMMAR_CACHE_MAX, SD_SERVER_GRAMMAR_CACHE);
}

static int serve_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int serve_seconds(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || !isfinite(v) || v > 1e7) return -1;
    *out = v;
    return 0;
}

/* vLLM's names of options this command has under its own (so `vllm serve` command lines carry over). */
static const char *serve_vllm_alias(const char *a) {
    static const struct { const char *vllm, *ours; } names[] = {
        {"--max-model-len", "--ctx"}, {"--max-num-seqs", "--parallel"},
        {"--num-gpu-blocks-override", "--kv-blocks"}, {"--block-size", "--kv-block-size"},
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (!strcmp(a, names[k].vllm)) return names[k].ours;
    return a;
}

/* One option at argv[*i] (its value at argv[*i + 1]); 0 ok, 1 help, -1 usage error. */
static int serve_option(sd_server_config *c, int argc, char **argv, int *i) {
    const char *a = serve_vllm_alias(argv[*i]), *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long n = 0;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
    if (!strcmp(a, "--verbose")) return c->verbose = 1, 0;
    if (!strcmp(a, "--enable-prefix-caching")) return c->prefix_cache = SPECDEC_PREFIX_CACHE_ON, 0;
    if (!strcmp(a, "--no-enable-prefix-caching")) return c->prefix_cache = SPECDEC_PREFIX_CACHE_OFF, 0;
    if (!strcmp(a, "--enable-auto-tool-choice")) return c->enable_auto_tool_choice = 1, 0;
    if (!v) return fprintf(stderr, "specdec serve: unknown option or missing value: %s\n", a), -1;
    (*i)++;
    int bad = 0;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) c->target_dir = v;
    else if (!strcmp(a, "-md") || !strcmp(a, "--model-draft")) c->draft_dir = v;
    else if (!strcmp(a, "--tokenizer")) c->tokenizer_path = v;
    else if (!strcmp(a, "--host")) c->host = v;
    else if (!strcmp(a, "--port")) bad = serve_long(v, 0, 65535, &n), c->port = (int)n;
    else if (!strcmp(a, "--api-key")) c->api_key = v;
    else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) bad = serve_long(v, 1, 256, &n), c->parallel = (int)n;
    else if (!strcmp(a, "--queue")) bad = serve_long(v, 1, 1 << 20, &n), c->queue = (int)n;
    else if (!strcmp(a, "--prefill-chunk")) bad = serve_long(v, 0, 1 << 20, &n), c->prefill_chunk = (int32_t)n;
    else if (!strcmp(a, "--scheduling-policy")) {
        bad = strcmp(v, "fcfs") && strcmp(v, "priority");
        c->scheduling_policy = !strcmp(v, "priority") ? SPECDEC_SCHEDULING_PRIORITY : SPECDEC_SCHEDULING_FCFS;
    }
    else if (!strncmp(a, "--kv-", 5)) {
        cli_kv_opts kv = {c->kv_pool_blocks, c->kv_block_tokens, c->kv_admission};
        const int r = cli_kv_option(a, v, &kv);
        if (r < 0) return fprintf(stderr, "specdec serve: unknown option: %s\n", a), -1;
        bad = r;
        c->kv_pool_blocks = kv.pool_blocks;
        c->kv_block_tokens = kv.block_tokens;
        c->kv_admission = kv.admission;
    }
    else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) bad = serve_long(v, 0, 1 << 30, &n), c->n_ctx = (int)n;
    else if (!strcmp(a, "--threads") || !strcmp(a, "-t"))
        bad = serve_long(v, 0, SPECDEC_MAX_CPU_THREADS, &n), c->cpu_threads = (int)n;
    else if (!strcmp(a, "--draft")) bad = serve_long(v, 0, SPECDEC_MAX_DRAFT, &n), c->n_draft = (int)n;
    else if (!strcmp(a, "--ngram-corpus")) bad = serve_long(v, 0, SPECDEC_MAX_NGRAM_CORPUS_TOKENS, &n), c->ngram_corpus_tokens = (int)n;
    else if (!strcmp(a, "--speculative-config")) c->speculative_config = v;
    else if (!strcmp(a, "--chat-template")) {
        if (!sd_server_chat_template_known(v)) {
            char names[128];
            sd_server_chat_template_list(names, sizeof names);
            return fprintf(stderr, "specdec serve: unknown chat template '%s' (known: %s)\n", v, names), -1;
        }
        c->chat_template = v;
    }
    else if (!strcmp(a, "--alias") || !strcmp(a, "--served-model-name")) c->model_alias = v; /* llama.cpp's, vLLM's */
    else if (!strcmp(a, "--tool-call-parser")) c->tool_call_parser = v;
    else if (!strcmp(a, "--reasoning-parser")) c->reasoning_parser = v;
    else if (!strcmp(a, "--max-body")) bad = serve_long(v, 1, 1L << 30, &n), c->max_body = (size_t)n;
    else if (!strcmp(a, "--timeout")) bad = serve_seconds(v, &c->timeout_s);
    else if (!strcmp(a, "--body-timeout")) bad = serve_seconds(v, &c->body_timeout_s);
    else if (!strcmp(a, "--idle-timeout")) bad = serve_seconds(v, &c->idle_timeout_s);
    else if (!strcmp(a, "--shutdown-timeout")) bad = serve_seconds(v, &c->shutdown_timeout_s);
    else if (!strcmp(a, "--allowed-hosts")) c->allowed_hosts = v;
    else if (!strcmp(a, "--max-prompt-bytes")) bad = serve_long(v, 0, 1L << 30, &n), c->max_prompt_bytes = (size_t)n;
    else if (!strcmp(a, "--prep-threads")) bad = serve_long(v, 0, 4, &n), c->prep_threads = (int)n;
    else if (!strcmp(a, "--grammar-cache"))
        bad = serve_long(v, 0, SD_SERVER_GRAMMAR_CACHE_MAX, &n), c->grammar_cache = (int)n;
    else if (!strcmp(a, "--max-connections")) bad = serve_long(v, 1, 100000, &n), c->max_connections = (int)n;
    else if (!strcmp(a, "--backend")) {
        if (!strcmp(v, "auto")) c->backend = SPECDEC_BACKEND_AUTO;
        else if (!strcmp(v, "cpu")) c->backend = SPECDEC_BACKEND_CPU;
        else if (!strcmp(v, "cuda")) c->backend = SPECDEC_BACKEND_CUDA;
        else bad = 1;
    } else return fprintf(stderr, "specdec serve: unknown option '%s'\n", a), -1;
    if (bad) return fprintf(stderr, "specdec serve: bad value '%s' for %s\n", v, argv[*i - 1]), -1; /* as typed */
    return 0;
}

int cli_cmd_serve(int argc, char **argv) {
    sd_server_config c;
    sd_server_config_default(&c);
    c.api_key = getenv("SPECDEC_API_KEY");
    c.reasoning_tags = getenv("SPECDEC_REASONING_TAGS"); /* "START END"; tests use words the bundled model writes */
    for (int i = 1; i < argc; i++) {
        int rc = serve_option(&c, argc, argv, &i);
        if (rc) {
            serve_usage(rc > 0 ? stdout : stderr);
            return rc > 0 ? 0 : 2;
        }
    }
    char bundled_t[4096], bundled_d[4096];
    if (!c.target_dir) {
        const char *dir = cli_bundled_models_dir();
        if (!dir) {
            fprintf(stderr, "specdec serve: no -m given and the bundled model pair is not installed; pass -m DIR\n");
            return 1;
        }
        snprintf(bundled_t, sizeof bundled_t, "%s/kjv-target", dir);
        snprintf(bundled_d, sizeof bundled_d, "%s/kjv-draft", dir);
        c.target_dir = bundled_t;
        if (!c.draft_dir && !c.speculative_config) c.draft_dir = bundled_d;
    }
    return sd_server_run(&c);
}

#else

int cli_cmd_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "specdec serve: this build has no server (configure with SPECDEC_SERVER=ON and libmicrohttpd)\n");
    return 1;
}

#endif

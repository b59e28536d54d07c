/* test_server_parse.c — the server's pure parts, without HTTP:
 *  - sd_api_parse: valid bodies of both endpoints give the fields; each malformed body
 *    (not JSON, wrong types, out-of-range values, unknown model, empty messages, bad
 *    UTF-8, a tree shape the library refuses) gives its HTTP status, an error message and
 *    the offending param; a valid "tree" / "draft_nodes" is passed through;
 *  - the logits processors (presence / frequency / repetition penalties, logit_bias, min_tokens,
 *    stop_token_ids; vLLM's allowed_token_ids, bad_words, include_stop_str_in_output): values
 *    in range are passed in the request, each range's ends, wrong types, logit_bias's key forms
 *    and a token given twice, min_tokens over max_tokens, the 1024 / 64 limits (at the limit
 *    accepted, one over refused), null = absent; every refusal a 400 naming the field; a choice's stop_reason (a stop_token_ids id as an integer, a
 *    stop string, null) in a whole response and a stream's last chunk;
 *  - fields of the OpenAI / vLLM APIs specdec does not implement: a non-default value is a
 *    400 "unsupported_value" naming the field, the default is accepted, a wrong type is a
 *    400; harmless fields are type-checked; ignore_eos is parsed;
 *  - structured output (response_format, guided_json / guided_regex / guided_choice /
 *    guided_grammar, structured_outputs, llama.cpp's grammar): each kind's spec text and field;
 *    the defaults give none; wrong types, two constraints, structural_tag / a whitespace pattern and a
 *    spec over SD_API_MAX_GUIDED_BYTES are 400s naming the field;
 *  - logprobs in responses: token text and raw bytes (U+FFFD for half a character), the
 *    chat and completions shapes, -inf as -9999.0, text_offset in code points;
 *  - sd_api_check_head: routes, methods, the API key (scheme case-insensitive), the
 *    declared length, Content-Type (415), the Host on a loopback bind (403);
 *  - sd_api_check_framing: CL + TE, differing CLs, chunked twice (400), other codings (501);
 *  - a NUL in a body (raw, or \u0000 outside an escaped backslash) is a 400;
 *  - sd_api_utf8_valid against a reference decoder on random byte strings (fixed seed);
 *  - the stop filter (sd_stopper): text fed in random pieces releases exactly the text
 *    before the first stop sequence (with include_stop_str_in_output, through its end), never
 *    more than it, and never takes text back,
 *    compared with a direct search on random texts over a small alphabet;
 *  - sd_buf_json_str escapes controls, quotes and NUL;
 *  - usage: a whole response and the stream's usage chunk carry OpenAI's
 *    prompt_tokens_details.cached_tokens with the value given (0 too), next to the token
 *    counts, and the "speculative" object the request's n_cached_prompt;
 *  - robustness: sd_server_parse_body on 20,000 mutations of valid bodies (byte flips,
 *    truncations, insertions; fixed seed) returns a status and never crashes (the ASan
 *    build checks memory). */
#define _DEFAULT_SOURCE /* usleep */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>
#include <pthread.h>

#include <cjson/cJSON.h>
#include <unistd.h>

#include "sd_server_internal.h"
#include "sd_server_request.h"
#include "sd_server_text.h"
#include "sd_server_tools.h"
#include "sd_test.h"

static uint64_t rng = 0x243f6a8885a308d3ULL;
static uint64_t next(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

static int parse(const char *body, int chat, sd_api_request *r, sd_api_error *e) {
    return sd_api_parse(body, strlen(body), chat, "kjv-target", r, e);
}

static void test_valid(void) {
    sd_api_request r;
    sd_api_error e;
    int code = parse("{\"model\":\"kjv-target\",\"prompt\":\"And God\",\"max_tokens\":7,\"temperature\":0.5,"
                     "\"top_p\":0.9,\"top_k\":40,\"min_p\":0.1,\"seed\":-1,\"stop\":[\"a\",\"bc\"],\"stream\":true,"
                     "\"stream_options\":{\"include_usage\":true},\"n_draft\":3,\"verify\":\"match\",\"n\":1,"
                     "\"unknown\":{\"x\":[1,2]},\"logprobs\":null}",
                     0, &r, &e);
    SD_CHECK(code == 200, "valid completion: %d %s", code, e.message);
    if (code == 200) {
        SD_CHECK(r.n_prompts == 1 && r.prompts[0].text && !strcmp(r.prompts[0].text, "And God") && r.n == 1 &&
                     r.max_tokens == 7 && r.temperature == 0.5f &&
                     r.top_p == 0.9f && r.top_k == 40 && r.min_p == 0.1f && r.has_seed && r.seed == UINT64_MAX &&
                     r.n_stop == 2 && !strcmp(r.stop[1], "bc") && r.stream && r.include_usage && r.n_draft == 3 &&
                     r.verify == SPECDEC_VERIFY_MATCH,
                 "completion fields");
        sd_api_request_free(&r);
    }
    code = parse("{\"prompt\":[[5,6,7]]}", 0, &r, &e);
    SD_CHECK(code == 200 && r.n_prompts == 1 && r.prompts[0].n_ids == 3 && r.prompts[0].ids[2] == 7 &&
                 !r.prompts[0].text && r.n == 1 && r.max_tokens == -1 &&
                 r.temperature == 1.0f && r.top_p == 1.0f && r.n_draft == -1 && !r.model,
             "token-id prompt and defaults: %d", code);
    if (code == 200) sd_api_request_free(&r);
    code = parse("{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
                 "[{\"type\":\"text\",\"text\":\"Hi \"},{\"type\":\"text\",\"text\":\"there\"}]},"
                 "{\"role\":\"assistant\",\"content\":null}],\"max_completion_tokens\":5,\"stop\":\"\\n\"}",
                 1, &r, &e);
    SD_CHECK(code == 200 && r.n_messages == 3 && !strcmp(r.messages[1].content, "Hi \nthere") && /* vLLM joins parts with "\n" */
                 !strcmp(r.messages[2].content, "") && r.max_tokens == 5 && r.n_stop == 1 && !strcmp(r.stop[0], "\n"),
             "chat fields: %d %s", code, e.message);
    if (code == 200) sd_api_request_free(&r);
}

static void test_tree(void) {
    sd_api_request r;
    sd_api_error e;
    int code = parse("{\"prompt\":\"x\",\"tree\":[4,2,1],\"draft_nodes\":12}", 0, &r, &e);
    SD_CHECK(code == 200 && r.n_tree == 3 && r.tree[0] == 4 && r.tree[1] == 2 && r.tree[2] == 1 && r.draft_nodes == 12,
             "tree passed through: %d %s", code, e.message);
    if (code == 200) sd_api_request_free(&r);
    code = parse("{\"prompt\":\"x\",\"tree\":[64,64]}", 0, &r, &e);
    SD_CHECK(code == 400 && strstr(e.message, "more than 64 nodes"), "the library's message: %s", e.message);
    code = parse("{\"prompt\":\"x\"}", 0, &r, &e);
    SD_CHECK(code == 200 && r.n_tree == 0 && r.draft_nodes == 0, "no tree by default");
    if (code == 200) sd_api_request_free(&r);
}

/* A quoted value cut inside a UTF-8 character must not leave a broken message. */
static void test_message_utf8(void) {
    char body[512];
    char name[300] = {0};
    memset(name, 'm', 119);
    for (int i = 0; i < 8; i++) memcpy(name + 119 + 2 * i, "\xc3\xa9", 2);
    snprintf(body, sizeof body, "{\"model\":\"%s\",\"prompt\":\"x\"}", name);
    sd_api_request r;
    sd_api_error e;
    int code = parse(body, 0, &r, &e);
    SD_CHECK(code == 404 && sd_api_utf8_valid(e.message, strlen(e.message)), "404 message is UTF-8: %s", e.message);
}

static void test_head(void) {
    static const struct {
        const char *method, *url, *auth, *length, *key;
        int code;
        sd_endpoint ep;
        const char *ctype, *host;
    } cases[] = {
        {"POST", "/v1/completions", "bearer k", NULL, "k", 0, SD_EP_COMPLETIONS, NULL, NULL},
        {"POST", "/v1/completions", "BEARER  k", NULL, "k", 0, SD_EP_COMPLETIONS, NULL, NULL},
        {"POST", "/v1/completions", NULL, NULL, NULL, 415, SD_EP_COMPLETIONS, "text/plain", NULL},
        {"POST", "/v1/completions", NULL, NULL, NULL, 415, SD_EP_COMPLETIONS, "", NULL},
        {"POST", "/v1/completions", NULL, NULL, NULL, 415, SD_EP_COMPLETIONS, "application/jsonx", NULL},
        {"POST", "/v1/completions", NULL, NULL, NULL, 0, SD_EP_COMPLETIONS, " Application/JSON;charset=utf-8", NULL},
        {"GET", "/health", NULL, NULL, NULL, 403, SD_EP_HEALTH, NULL, "evil.example"},
        {"GET", "/health", NULL, NULL, NULL, 403, SD_EP_HEALTH, NULL, "localhost.evil:80"},
        {"GET", "/health", NULL, NULL, NULL, 0, SD_EP_HEALTH, NULL, "LOCALHOST:8080"},
        {"GET", "/health", NULL, NULL, NULL, 0, SD_EP_HEALTH, NULL, "[::1]:8080"},
        {"GET", "/health", NULL, NULL, NULL, 403, SD_EP_HEALTH, NULL, "[::2]"},
        {"POST", "/v1/completions", NULL, "10", NULL, 0, SD_EP_COMPLETIONS, NULL, NULL},
        {"POST", "/completions", NULL, NULL, NULL, 0, SD_EP_COMPLETIONS, NULL, NULL},
        {"POST", "/v1/chat/completions", "Bearer k", NULL, "k", 0, SD_EP_CHAT, NULL, NULL},
        {"GET", "/v1/models", NULL, NULL, NULL, 0, SD_EP_MODELS, NULL, NULL},
        {"GET", "/health", NULL, NULL, "k", 0, SD_EP_HEALTH, NULL, NULL},
        {"GET", "/metrics", "Bearer k", NULL, "k", 0, SD_EP_METRICS, NULL, NULL},
        {"GET", "/metrics", NULL, NULL, "k", 401, SD_EP_METRICS, NULL, NULL},
        {"POST", "/v1/completions", "Bearer kk", NULL, "k", 401, SD_EP_COMPLETIONS, NULL, NULL},
        {"POST", "/v1/completions", "k", NULL, "k", 401, SD_EP_COMPLETIONS, NULL, NULL},
        {"POST", "/v1/completions", "Bearer ", NULL, "k", 401, SD_EP_COMPLETIONS, NULL, NULL},
        {"POST", "/v1/embeddings", NULL, NULL, NULL, 404, SD_EP_OTHER, NULL, NULL},
        {"POST", "/v1/embeddings", NULL, NULL, "k", 401, SD_EP_OTHER, NULL, NULL},
        {"GET", "/v1/completions", NULL, NULL, NULL, 405, SD_EP_OTHER, NULL, NULL},
        {"POST", "/v1/completions", NULL, "101", NULL, 413, SD_EP_COMPLETIONS, NULL, NULL},
        {"POST", "/v1/completions", NULL, "100", NULL, 0, SD_EP_COMPLETIONS, NULL, NULL},
        {"POST", "/v1/completions", NULL, "99999999999999999999999", NULL, 413, SD_EP_COMPLETIONS, NULL, NULL},
        /* vLLM's utility endpoints: /ping as /health (no key, GET or POST, any Content-Type) */
        {"POST", "/tokenize", "Bearer k", NULL, "k", 0, SD_EP_TOKENIZE, NULL, NULL},
        {"POST", "/v1/tokenize", NULL, NULL, "k", 401, SD_EP_TOKENIZE, NULL, NULL},
        {"POST", "/tokenize", NULL, NULL, NULL, 415, SD_EP_TOKENIZE, "text/plain", NULL},
        {"GET", "/tokenize", NULL, NULL, NULL, 405, SD_EP_OTHER, NULL, NULL},
        {"POST", "/detokenize", NULL, NULL, NULL, 0, SD_EP_DETOKENIZE, NULL, NULL},
        {"POST", "/v1/detokenize", NULL, NULL, NULL, 0, SD_EP_DETOKENIZE, NULL, NULL},
        {"GET", "/version", NULL, NULL, NULL, 0, SD_EP_VERSION, NULL, NULL},
        {"GET", "/version", NULL, NULL, "k", 401, SD_EP_VERSION, NULL, NULL},
        {"POST", "/version", NULL, NULL, NULL, 405, SD_EP_OTHER, NULL, NULL},
        {"GET", "/ping", NULL, NULL, "k", 0, SD_EP_PING, NULL, NULL},
        {"POST", "/ping", NULL, NULL, "k", 0, SD_EP_PING, "", NULL},
        {"POST", "/ping", NULL, NULL, NULL, 0, SD_EP_PING, "text/plain", NULL},
        {"PUT", "/ping", NULL, NULL, NULL, 405, SD_EP_OTHER, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
        const char *ct = cases[i].ctype ? cases[i].ctype : "application/json";
        sd_api_head h = {cases[i].method, cases[i].url, cases[i].auth, cases[i].length,
                         *ct ? ct : NULL, cases[i].host, hosts, 3, NULL};
        sd_endpoint ep;
        sd_api_error e;
        int code = sd_api_check_head(&h, cases[i].key, 100, &ep, &e);
        SD_CHECK(code == cases[i].code && ep == cases[i].ep && (code == 0 || (e.http == code && e.message[0])),
                 "head %zu (%s %s): %d ep %d, want %d ep %d", i, cases[i].method, cases[i].url, code, (int)ep,
                 cases[i].code, (int)cases[i].ep);
    }
}

/* HTTP/1.1 needs a Host (answered here in JSON, not by libmicrohttpd); 1.0 does not; and
 * the endpoint of a target by its path alone (how libmicrohttpd's own answers are counted). */
static void test_host_required(void) {
    static const struct { const char *version, *host; int code; } cases[] = {
        {"HTTP/1.1", NULL, 400}, {"HTTP/1.1", "localhost", 0}, {"HTTP/1.0", NULL, 0}, {NULL, NULL, 0},
        {"HTTP/1.1", "evil.example", 403},
    };
    static const char *const hosts[] = {"localhost"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sd_api_head h = {"GET", "/health", NULL, NULL, NULL, cases[i].host, hosts, 1, cases[i].version};
        sd_endpoint ep;
        sd_api_error e;
        int code = sd_api_check_head(&h, NULL, 100, &ep, &e);
        SD_CHECK(code == cases[i].code && ep == SD_EP_HEALTH, "Host case %zu: %d, want %d", i, code, cases[i].code);
    }
    static const struct { const char *target; sd_endpoint ep; } targets[] = {
        {"/v1/completions", SD_EP_COMPLETIONS}, {"/v1/chat/completions?x=1", SD_EP_CHAT}, {"/health?", SD_EP_HEALTH},
        {"/metrics", SD_EP_METRICS}, {"/models", SD_EP_MODELS}, {"/v1/completionsx", SD_EP_OTHER},
        {"/v1/completion", SD_EP_OTHER}, {"", SD_EP_OTHER}, {"?/health", SD_EP_OTHER},
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        SD_CHECK(sd_api_endpoint_of(targets[i].target) == targets[i].ep, "endpoint of %s: %d, want %d",
                 targets[i].target, (int)sd_api_endpoint_of(targets[i].target), (int)targets[i].ep);
}

/* The prep pool's lanes: with its one thread busy, a small body queued after two big ones
 * runs before them (a burst of big prompts must not queue every small request behind it). */
typedef struct sd_lane_log {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int in_gate, open, order[4], n;
} sd_lane_log;
static sd_lane_log sd_lanes = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, {0}, 0};

static void sd_lane_job(void *arg) {
    pthread_mutex_lock(&sd_lanes.mu);
    sd_lanes.in_gate |= (intptr_t)arg == 0;
    while (!sd_lanes.open && (intptr_t)arg == 0) pthread_cond_wait(&sd_lanes.cv, &sd_lanes.mu); /* job 0: the gate */
    if (sd_lanes.n < 4) sd_lanes.order[sd_lanes.n++] = (int)(intptr_t)arg;
    pthread_mutex_unlock(&sd_lanes.mu);
}

typedef struct sd_lane_req {
    sd_prep *p;
    size_t bytes;
    intptr_t id;
} sd_lane_req;

static void *sd_lane_thread(void *a) {
    sd_lane_req *r = a;
    sd_prep_run(r->p, r->bytes, sd_lane_job, (void *)r->id);
    return NULL;
}

static void test_prep_lanes(void) {
    sd_prep *p = sd_prep_create(1);
    SD_CHECK(p != NULL, "prep pool created");
    if (!p) return;
    sd_lane_req reqs[4] = {{p, 1 << 20, 0}, {p, 1 << 20, 1}, {p, 2 << 20, 2}, {p, 100, 3}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) { /* the gate holds the pool's thread; then each of the others waits queued */
        pthread_create(&th[i], NULL, sd_lane_thread, &reqs[i]);
        for (int spins = 0; spins < 10000; spins++) {
            pthread_mutex_lock(&sd_lanes.mu);
            int in_gate = sd_lanes.in_gate;
            pthread_mutex_unlock(&sd_lanes.mu);
            if (i == 0 ? in_gate : sd_prep_pending(p) == i) break;
            usleep(1000);
        }
    }
    int queued = sd_prep_pending(p);
    pthread_mutex_lock(&sd_lanes.mu);
    sd_lanes.open = 1;
    pthread_cond_broadcast(&sd_lanes.cv);
    pthread_mutex_unlock(&sd_lanes.mu);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    sd_prep_free(p);
    SD_CHECK(queued == 3 && sd_lanes.n == 4 && sd_lanes.order[0] == 0 && sd_lanes.order[1] == 3 &&
                 sd_lanes.order[2] == 1 && sd_lanes.order[3] == 2,
             "the small body runs before the big ones queued before it: queued %d, order %d %d %d %d", queued,
             sd_lanes.order[0], sd_lanes.order[1], sd_lanes.order[2], sd_lanes.order[3]);
}

/* Batches (a list of prompts) and n: the shapes, and the caps on prompts, n and their
 * product at the edges (64 each). */
static void test_batch(void) {
    sd_api_request r;
    sd_api_error e;
    int code = parse("{\"prompt\":[\"And God\",\"In the\",\"x\"],\"n\":3}", 0, &r, &e);
    SD_CHECK(code == 200 && r.n_prompts == 3 && r.n == 3 && !strcmp(r.prompts[1].text, "In the") &&
                 r.prompts[1].len == 6 && !r.prompts[2].ids,
             "a batch of three texts, n 3: %d %s", code, e.message);
    if (code == 200) sd_api_request_free(&r);
    code = parse("{\"prompt\":[[5,6],[7]]}", 0, &r, &e);
    SD_CHECK(code == 200 && r.n_prompts == 2 && r.prompts[0].n_ids == 2 && r.prompts[1].ids[0] == 7 &&
                 !r.prompts[1].text && r.n == 1,
             "a batch of two id lists: %d %s", code, e.message);
    if (code == 200) sd_api_request_free(&r);
    code = parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":64}", 1, &r, &e);
    SD_CHECK(code == 200 && r.n == 64 && r.n_prompts == 0, "chat n 64: %d %s", code, e.message);
    if (code == 200) sd_api_request_free(&r);
    /* 64 prompts: accepted; 65: refused naming the limit; 64 x n 2: refused naming n */
    char body[1024];
    for (int count = 64; count <= 65; count++)
        for (int n = 1; n <= 2; n++) {
            size_t k = (size_t)snprintf(body, sizeof body, "{\"n\":%d,\"prompt\":[", n);
            for (int i = 0; i < count; i++) k += (size_t)snprintf(body + k, sizeof body - k, "%s\"p\"", i ? "," : "");
            snprintf(body + k, sizeof body - k, "]}");
            code = parse(body, 0, &r, &e);
            const int ok = count == 64 && n == 1;
            SD_CHECK(code == (ok ? 200 : 400), "%d prompts, n %d: %d", count, n, code);
            if (code == 200) {
                SD_CHECK(r.n_prompts == 64, "64 prompts kept: %d", r.n_prompts);
                sd_api_request_free(&r);
            } else {
                SD_CHECK(!strcmp(e.param, count == 65 ? "prompt" : "n") && strstr(e.message, "at most"),
                         "%d prompts, n %d: param %s, message %s", count, n, e.param, e.message);
                SD_CHECK(!r.prompts && r.n_prompts == 0, "a refused batch leaves nothing");
            }
        }
}

static void test_invalid(void) {
    static const struct { int chat; const char *body; int code; const char *param; } cases[] = {
        {0, "", 400, ""},
        {0, "{", 400, ""},
        {0, "{\"prompt\":\"x\"} trailing", 400, ""},
        {0, "[1,2]", 400, ""},
        {0, "{}", 400, "prompt"},
        {0, "{\"prompt\":5}", 400, "prompt"},
        {0, "{\"prompt\":[]}", 400, "prompt"},
        {0, "{\"prompt\":[1,-2]}", 400, "prompt"},
        {0, "{\"prompt\":[\"a\",[1]]}", 400, "prompt"},        /* a batch is not mixed */
        {0, "{\"prompt\":[[1],\"a\"]}", 400, "prompt"},
        {0, "{\"prompt\":[[1],5]}", 400, "prompt"},
        {0, "{\"prompt\":[\"a\",null]}", 400, "prompt"},
        {0, "{\"prompt\":[[1],[]]}", 400, "prompt"},           /* an empty prompt in a batch */
        {0, "{\"prompt\":[[1],[2,-1]]}", 400, "prompt"},
        {0, "{\"prompt\":[\"a\",\"\xff\"]}", 400, ""}, /* the body is not UTF-8 */
        {0, "{\"prompt\":\"x\",\"max_tokens\":0}", 400, "max_tokens"},
        {0, "{\"prompt\":\"x\",\"max_tokens\":-4}", 400, "max_tokens"},
        {0, "{\"prompt\":\"x\",\"max_tokens\":1.5}", 400, "max_tokens"},
        {0, "{\"prompt\":\"x\",\"max_tokens\":\"ten\"}", 400, "max_tokens"},
        {0, "{\"prompt\":\"x\",\"max_tokens\":1e300}", 400, "max_tokens"},
        {0, "{\"prompt\":\"x\",\"temperature\":\"hot\"}", 400, "temperature"},
        {0, "{\"prompt\":\"x\",\"temperature\":-0.1}", 400, "temperature"},
        {0, "{\"prompt\":\"x\",\"top_p\":0}", 400, "top_p"},
        {0, "{\"prompt\":\"x\",\"top_k\":-1}", 400, "top_k"},
        {0, "{\"prompt\":\"x\",\"min_p\":1.5}", 400, "min_p"},
        {0, "{\"prompt\":\"x\",\"seed\":0.5}", 400, "seed"},
        {0, "{\"prompt\":\"x\",\"stop\":5}", 400, "stop"},
        {0, "{\"prompt\":\"x\",\"stop\":[\"\"]}", 400, "stop"},
        {0, "{\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400, "stop"},
        {0, "{\"prompt\":\"x\",\"stream\":\"yes\"}", 400, "stream"},
        {0, "{\"prompt\":\"x\",\"stream_options\":3}", 400, "stream_options"},
        {0, "{\"prompt\":\"x\",\"n\":0}", 400, "n"},
        {0, "{\"prompt\":\"x\",\"n\":65}", 400, "n"},  /* over SD_API_MAX_N */
        {0, "{\"prompt\":\"x\",\"n\":1.5}", 400, "n"},
        {0, "{\"prompt\":\"x\",\"n\":\"2\"}", 400, "n"},
        {0, "{\"prompt\":[\"a\",\"b\"],\"n\":33}", 400, "n"}, /* 66 choices > SD_API_MAX_CHOICES */
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":65}", 400, "n"},
        {0, "{\"prompt\":\"x\",\"n_draft\":17}", 400, "n_draft"},
        {0, "{\"prompt\":\"x\",\"verify\":\"maybe\"}", 400, "verify"},
        {0, "{\"prompt\":\"x\",\"tree\":[64,64]}", 400, "tree"}, /* more than 64 nodes */
        {0, "{\"prompt\":\"x\",\"tree\":[2,0,2]}", 400, "tree"},
        {0, "{\"prompt\":\"x\",\"tree\":[1.5]}", 400, "tree"},
        {0, "{\"prompt\":\"x\",\"draft_nodes\":65}", 400, "draft_nodes"},
        {0, "{\"prompt\":\"x\",\"draft_nodes\":-1}", 400, "draft_nodes"},
        {0, "{\"prompt\":\"x\",\"tree\":[]}", 400, "tree"},
        {0, "{\"prompt\":\"x\",\"tree\":[0]}", 400, "tree"},
        {0, "{\"prompt\":\"x\",\"tree\":\"2\"}", 400, "tree"},
        {0, "{\"prompt\":\"x\",\"tree\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}", 400, "tree"},
        {0, "{\"model\":\"gpt-4\",\"prompt\":\"x\"}", 404, "model"},
        {0, "{\"model\":7,\"prompt\":\"x\"}", 400, "model"},
        {0, "{\"prompt\":\"\xff\xfe\"}", 400, ""},
        {0, "{\"prompt\":\"\xc0\xaf\"}", 400, ""},     /* overlong */
        {0, "{\"prompt\":\"\xed\xa0\x80\"}", 400, ""}, /* surrogate */
        {1, "{\"messages\":[]}", 400, "messages"},
        {1, "{\"messages\":\"hi\"}", 400, "messages"},
        {1, "{}", 400, "messages"},
        {1, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "messages"},
        {1, "{\"messages\":[{\"role\":\"user\"}]}", 400, "messages"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400, "messages"},
        {1, "{\"messages\":[5]}", 400, "messages"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sd_api_request r;
        sd_api_error e;
        int code = parse(cases[i].body, cases[i].chat, &r, &e);
        SD_CHECK(code == cases[i].code && e.http == code && e.message[0] && e.type &&
                     !strcmp(e.param, cases[i].param),
                 "case %zu (%s): got %d param '%s' (%s), want %d param '%s'", i, cases[i].body, code, e.param,
                 e.message, cases[i].code, cases[i].param);
        if (code == 200) sd_api_request_free(&r);
    }
    sd_api_request r;
    sd_api_error e;
    int code = sd_api_parse("{\"prompt\":\"x\"}", 5, 0, NULL, &r, &e); /* length cuts the JSON */
    SD_CHECK(code == 400, "a body is read only up to its length: %d", code);
}

/* Structured output: each field's constraint (kind, spec text as the library gets it, the
 * field named for errors); the defaults (absent, null, response_format text) give none; every
 * malformed value, a second constraint and the refused features are a 400 naming the field. */
static void test_guided(void) {
    static const struct {
        int chat;
        const char *extra;
        int kind;
        const char *spec, *param;
    } ok[] = {
        {0, "\"guided_regex\":\"(yes|no)\"", SPECDEC_GRAMMAR_REGEX, "(yes|no)", "guided_regex"},
        {1, "\"guided_regex\":\"\"", SPECDEC_GRAMMAR_REGEX, "", "guided_regex"},
        {0, "\"guided_choice\":[\"a\", \"b c\"]", SPECDEC_GRAMMAR_CHOICE, "[\"a\",\"b c\"]", "guided_choice"},
        {0, "\"guided_json\":{\"type\": \"object\"}", SPECDEC_GRAMMAR_JSON_SCHEMA, "{\"type\":\"object\"}",
         "guided_json"},
        {1, "\"guided_json\":\"{\\\"type\\\": \\\"integer\\\"}\"", SPECDEC_GRAMMAR_JSON_SCHEMA,
         "{\"type\": \"integer\"}", "guided_json"}, /* a string: passed as given */
        {1, "\"response_format\":{\"type\":\"json_object\"}", SPECDEC_GRAMMAR_JSON_OBJECT, NULL, "response_format"},
        {0, "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"strict\":true,"
            "\"schema\":{\"type\": \"object\", \"properties\": {\"a\": {\"enum\": [1, \"\u00e9\"]}}}}}",
         SPECDEC_GRAMMAR_JSON_SCHEMA, "{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[1,\"\xc3\xa9\"]}}}",
         "response_format"},
        {0, "\"structured_outputs\":{\"regex\":\"[0-9]+\",\"disable_any_whitespace\":true}", SPECDEC_GRAMMAR_REGEX,
         "[0-9]+", "structured_outputs.regex"},
        {1, "\"structured_outputs\":{\"json\":{\"type\":\"string\"}}", SPECDEC_GRAMMAR_JSON_SCHEMA,
         "{\"type\":\"string\"}", "structured_outputs.json"},
        {1, "\"structured_outputs\":{\"choice\":[\"x\"]}", SPECDEC_GRAMMAR_CHOICE, "[\"x\"]",
         "structured_outputs.choice"},
        {0, "\"structured_outputs\":{\"json_object\":true}", SPECDEC_GRAMMAR_JSON_OBJECT, NULL,
         "structured_outputs.json_object"},
        {0, "\"guided_regex\":\"a\",\"guided_decoding_backend\":\"xgrammar\",\"guided_whitespace_pattern\":null",
         SPECDEC_GRAMMAR_REGEX, "a", "guided_regex"},
        {0, "\"response_format\":{\"type\":\"text\"},\"guided_json\":null,\"structured_outputs\":null", 0, NULL, ""},
        {0, "\"guided_grammar\":\"root ::= [a-z]+\"", SPECDEC_GRAMMAR_GBNF, "root ::= [a-z]+", "guided_grammar"},
        {1, "\"structured_outputs\":{\"grammar\":\"root ::= \\\"a\\\"\"}", SPECDEC_GRAMMAR_GBNF, "root ::= \"a\"",
         "structured_outputs.grammar"},
        {1, "\"grammar\":\"root ::= x\\nx ::= \\\"b\\\"\"", SPECDEC_GRAMMAR_GBNF, "root ::= x\nx ::= \"b\"", "grammar"},
        {0, "\"grammar\":null,\"guided_regex\":\"a\"", SPECDEC_GRAMMAR_REGEX, "a", "guided_regex"},
    };
    char body[1024];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        const char *head = ok[i].chat ? "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" : "{\"prompt\":\"x\"";
        snprintf(body, sizeof body, "%s,%s}", head, ok[i].extra);
        sd_api_request r;
        sd_api_error e;
        int code = parse(body, ok[i].chat, &r, &e);
        SD_CHECK(code == 200, "%s: accepted: %d %s", body, code, e.message);
        if (code != 200) continue;
        const sd_api_guided *g = &r.guided;
        SD_CHECK((int)g->kind == ok[i].kind && !strcmp(g->param, ok[i].param) &&
                     (ok[i].spec ? g->spec && g->len == strlen(ok[i].spec) && !strcmp(g->spec, ok[i].spec)
                                 : !g->spec && g->len == 0),
                 "%s: kind %d spec '%s' param '%s'", body, (int)g->kind, g->spec ? g->spec : "(null)", g->param);
        sd_api_request_free(&r);
    }
    static const struct { int chat; const char *extra, *param; int unsupported; } bad[] = {
        {0, "\"guided_regex\":5", "guided_regex", 0},
        {0, "\"guided_choice\":[]", "guided_choice", 0},
        {0, "\"guided_choice\":\"a\"", "guided_choice", 0},
        {1, "\"guided_choice\":[\"a\",1]", "guided_choice", 0},
        {0, "\"guided_json\":[1]", "guided_json", 0},
        {0, "\"guided_json\":true", "guided_json", 0},
        {1, "\"response_format\":{\"type\":\"json_schema\"}", "response_format", 0},
        {1, "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\"}}", "response_format", 0},
        {1, "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":true}}", "response_format", 0},
        {0, "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{},\"strict\":1}}",
         "response_format", 0},
        {0, "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{},\"name\":3}}",
         "response_format", 0},
        {1, "\"response_format\":{\"type\":\"yaml\"}", "response_format", 0},
        {1, "\"response_format\":{\"type\":\"structural_tag\"}", "response_format", 1},
        {1, "\"response_format\":\"json_object\"", "response_format", 0},
        {0, "\"guided_regex\":\"a\",\"guided_choice\":[\"a\"]", "guided_choice", 0},
        {1, "\"response_format\":{\"type\":\"json_object\"},\"guided_regex\":\"a\"", "guided_regex", 0},
        {0, "\"guided_json\":{},\"structured_outputs\":{\"regex\":\"a\"}", "structured_outputs.regex", 0},
        {0, "\"structured_outputs\":{\"regex\":\"a\",\"choice\":[\"a\"]}", "structured_outputs.choice", 0},
        {0, "\"structured_outputs\":{}", "structured_outputs", 0},
        {0, "\"structured_outputs\":{\"json_object\":false}", "structured_outputs", 0},
        {0, "\"structured_outputs\":{\"json_object\":1}", "structured_outputs.json_object", 0},
        {0, "\"structured_outputs\":[\"regex\"]", "structured_outputs", 0},
        {1, "\"structured_outputs\":{\"grammar\":5}", "structured_outputs.grammar", 0},
        {0, "\"guided_regex\":\"a\",\"grammar\":\"root ::= x\"", "grammar", 0},
        {1, "\"grammar\":[\"root ::= x\"]", "grammar", 0},
        {1, "\"structured_outputs\":{\"structural_tag\":\"{}\"}", "structured_outputs.structural_tag", 1},
        {0, "\"structured_outputs\":{\"regex\":\"a\",\"whitespace_pattern\":\" \"}",
         "structured_outputs.whitespace_pattern", 1},
        {0, "\"guided_grammar\":{\"root\":\"x\"}", "guided_grammar", 0},
        {0, "\"guided_decoding_backend\":3", "guided_decoding_backend", 0},
        {0, "\"guided_regex\":\"a\",\"guided_whitespace_pattern\":\"[ ]+\"", "guided_whitespace_pattern", 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *head = bad[i].chat ? "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" : "{\"prompt\":\"x\"";
        snprintf(body, sizeof body, "%s,%s}", head, bad[i].extra);
        sd_api_request r;
        sd_api_error e;
        int code = parse(body, bad[i].chat, &r, &e);
        const int unsupported = e.code && !strcmp(e.code, "unsupported_value") && strstr(e.message, "not supported");
        SD_CHECK(code == 400 && !strcmp(e.param, bad[i].param) && unsupported == bad[i].unsupported && e.message[0],
                 "%s: got %d param '%s' code %s (%s)", body, code, e.param, e.code ? e.code : "null", e.message);
        if (code == 200) sd_api_request_free(&r);
    }
    /* the spec's size: SD_API_MAX_GUIDED_BYTES accepted, one more byte refused before any compile */
    const size_t n = SD_API_MAX_GUIDED_BYTES, cap = n + 64;
    char *big = malloc(cap);
    SD_CHECK(big != NULL, "memory");
    if (!big) return;
    for (int over = 0; over < 2; over++) {
        int k = snprintf(big, cap, "{\"prompt\":\"x\",\"guided_regex\":\"");
        memset(big + k, 'a', n + (size_t)over);
        k += (int)(n + (size_t)over);
        k += snprintf(big + k, cap - (size_t)k, "\"}");
        sd_api_request r;
        sd_api_error e;
        int code = sd_api_parse(big, (size_t)k, 0, "model", &r, &e);
        SD_CHECK(over ? code == 400 && !strcmp(e.param, "guided_regex") : code == 200 && r.guided.len == n,
                 "a spec of %zu bytes: %d %s", n + (size_t)over, code, e.message);
        if (code == 200) sd_api_request_free(&r);
    }
    free(big);
}

/* Fields of the OpenAI / vLLM APIs that specdec does not implement: a value other than the
 * default is refused (400, param = the field, code "unsupported_value", the message says it
 * is not supported), the default is accepted, a value of the wrong type is a 400 naming the
 * field; harmless fields are accepted when well typed; ignore_eos is parsed. */
static void test_unsupported(void) {
    static const struct { int chat; const char *field, *refused, *accepted, *wrong_type; } cases[] = {
        {1, "functions", "[{\"name\":\"f\"}]", "[]", "\"f\""},
        {1, "function_call", "{\"name\":\"f\"}", "\"none\"", "true"},
        {0, "best_of", "2", "1", "0"},
        {0, "best_of", "3", "1", "1.5"},
        {1, "echo", "true", "false", "\"no\""},
        {0, "suffix", "\"x\"", "\"\"", "1"},
        {0, "use_beam_search", "true", "false", "\"false\""},
        {0, "guided_grammar", NULL, "null", "5"},
        {1, "guided_whitespace_pattern", "\"[ ]*\"", "null", "3"},
        {0, "user", NULL, "\"u\"", "5"},
        {1, "metadata", NULL, "{\"k\":\"v\"}", "[]"},
        {1, "store", NULL, "false", "\"no\""},
        {0, "service_tier", NULL, "\"auto\"", "1"},
        {1, "parallel_tool_calls", NULL, "true", "\"yes\""},
        {0, "ignore_eos", NULL, "false", "\"true\""},
    };
    char body[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *head = cases[i].chat ? "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" : "{\"prompt\":\"x\"";
        const char *vals[3] = {cases[i].refused, cases[i].accepted, cases[i].wrong_type};
        for (int k = 0; k < 3; k++) {
            if (!vals[k]) continue;
            snprintf(body, sizeof body, "%s,\"%s\":%s}", head, cases[i].field, vals[k]);
            sd_api_request r;
            sd_api_error e;
            int code = parse(body, cases[i].chat, &r, &e);
            if (k == 1) {
                SD_CHECK(code == 200, "%s: the default is accepted: %d %s", body, code, e.message);
                if (code == 200) sd_api_request_free(&r);
                continue;
            }
            int unsupported = e.code && !strcmp(e.code, "unsupported_value") && strstr(e.message, "not supported");
            SD_CHECK(code == 400 && !strcmp(e.param, cases[i].field) && (k == 0 ? unsupported : !e.code),
                     "%s: %s: got %d param '%s' code %s (%s)", body, k == 0 ? "refused" : "wrong type", code, e.param,
                     e.code ? e.code : "null", e.message);
        }
    }
    /* logprobs: completions an integer 0..20, chat a boolean and top_logprobs 0..20 */
    static const struct { int chat; const char *extra; int code, logprobs, top; const char *param; } lp[] = {
        {0, "\"logprobs\":0", 200, 1, 0, ""},         {0, "\"logprobs\":20", 200, 1, 20, ""},
        {0, "\"logprobs\":null", 200, 0, 0, ""},      {0, "\"logprobs\":21", 400, 0, 0, "logprobs"},
        {0, "\"logprobs\":-1", 400, 0, 0, "logprobs"}, {0, "\"logprobs\":true", 400, 0, 0, "logprobs"},
        {0, "\"logprobs\":\"1\"", 400, 0, 0, "logprobs"},
        {1, "\"logprobs\":true", 200, 1, 0, ""},      {1, "\"logprobs\":true,\"top_logprobs\":20", 200, 1, 20, ""},
        {1, "\"logprobs\":false,\"top_logprobs\":0", 200, 0, 0, ""},
        {1, "\"logprobs\":1", 400, 0, 0, "logprobs"},
        {1, "\"logprobs\":true,\"top_logprobs\":21", 400, 0, 0, "top_logprobs"},
        {1, "\"top_logprobs\":2", 400, 0, 0, "top_logprobs"},
        {1, "\"logprobs\":false,\"top_logprobs\":1", 400, 0, 0, "top_logprobs"},
    };
    for (size_t i = 0; i < sizeof lp / sizeof lp[0]; i++) {
        const char *head = lp[i].chat ? "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" : "{\"prompt\":\"x\"";
        snprintf(body, sizeof body, "%s,%s}", head, lp[i].extra);
        sd_api_request r;
        sd_api_error e;
        int code = parse(body, lp[i].chat, &r, &e);
        SD_CHECK(code == lp[i].code && (code != 200 || (r.logprobs == lp[i].logprobs && r.top_logprobs == lp[i].top)) &&
                     (code == 200 || !strcmp(e.param, lp[i].param)),
                 "%s: %d param '%s' (%s)", body, code, e.param, e.message);
        if (code == 200) sd_api_request_free(&r);
    }
    /* echo (completions: a boolean; chat: refused above) and vLLM's prompt_logprobs (0..20, null =
     * off, refused with stream): r.echo / r.prompt_logprobs, or the field named */
    static const struct { int chat; const char *extra; int code, echo, plp; const char *param; } ep[] = {
        {0, "\"echo\":true", 200, 1, -1, ""},           {0, "\"echo\":false", 200, 0, -1, ""},
        {0, "\"echo\":null", 200, 0, -1, ""},           {0, "\"echo\":\"yes\"", 400, 0, 0, "echo"},
        {0, "\"echo\":1", 400, 0, 0, "echo"},           {0, "\"prompt_logprobs\":0", 200, 0, 0, ""},
        {0, "\"prompt_logprobs\":20", 200, 0, 20, ""},  {0, "\"prompt_logprobs\":null", 200, 0, -1, ""},
        {1, "\"prompt_logprobs\":3", 200, 0, 3, ""},    {0, "\"prompt_logprobs\":21", 400, 0, 0, "prompt_logprobs"},
        {0, "\"prompt_logprobs\":-1", 400, 0, 0, "prompt_logprobs"},
        {0, "\"prompt_logprobs\":\"x\"", 400, 0, 0, "prompt_logprobs"},
        {1, "\"prompt_logprobs\":1.5", 400, 0, 0, "prompt_logprobs"},
        {0, "\"prompt_logprobs\":1,\"stream\":true", 400, 0, 0, "prompt_logprobs"},
        {0, "\"echo\":true,\"logprobs\":2,\"prompt_logprobs\":1", 200, 1, 1, ""},
        /* max_tokens 0: the prompt alone, with echo only (OpenAI, vLLM); chat never */
        {0, "\"echo\":true,\"max_tokens\":0", 200, 1, -1, ""},
        {0, "\"echo\":false,\"max_tokens\":0", 400, 0, 0, "max_tokens"},
        {0, "\"prompt_logprobs\":2,\"max_tokens\":0", 400, 0, 0, "max_tokens"},
        {1, "\"max_tokens\":0", 400, 0, 0, "max_tokens"},
    };
    for (size_t i = 0; i < sizeof ep / sizeof ep[0]; i++) {
        const char *head = ep[i].chat ? "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" : "{\"prompt\":\"x\"";
        snprintf(body, sizeof body, "%s,%s}", head, ep[i].extra);
        sd_api_request r;
        sd_api_error e;
        int code = parse(body, ep[i].chat, &r, &e);
        SD_CHECK(code == ep[i].code && (code != 200 || (r.echo == ep[i].echo && r.prompt_logprobs == ep[i].plp)) &&
                     (code == 200 || !strcmp(e.param, ep[i].param)),
                 "%s: %d param '%s' (%s)", body, code, e.param, e.message);
        if (code == 200) sd_api_request_free(&r);
    }
    /* vLLM's cache_salt: a non-empty string, hashed (never 0; equal strings equal, others not); null /
     * absent 0; anything else the field named */
    static const struct { int chat; const char *extra; int code; } cs[] = {
        {0, "\"cache_salt\":\"tenant-a\"", 200}, {1, "\"cache_salt\":\"tenant-a\"", 200},
        {0, "\"cache_salt\":\"tenant-b\"", 200}, {0, "\"cache_salt\":null", 200},
        {0, "\"cache_salt\":\"\"", 400},         {1, "\"cache_salt\":7", 400},
        {0, "\"cache_salt\":[\"a\"]", 400},
    };
    uint64_t salt[sizeof cs / sizeof cs[0]] = {0};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const char *head = cs[i].chat ? "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" : "{\"prompt\":\"x\"";
        snprintf(body, sizeof body, "%s,%s}", head, cs[i].extra);
        sd_api_request rq;
        sd_api_error er;
        int c = parse(body, cs[i].chat, &rq, &er);
        SD_CHECK(c == cs[i].code && (c == 200 || !strcmp(er.param, "cache_salt")), "%s: %d param '%s' (%s)", body, c,
                 er.param, er.message);
        if (c == 200) salt[i] = rq.cache_salt, sd_api_request_free(&rq);
    }
    SD_CHECK(salt[0] != 0 && salt[0] == salt[1] && salt[2] != 0 && salt[2] != salt[0] && salt[3] == 0,
             "cache_salt hashes: %llx %llx %llx %llx", (unsigned long long)salt[0], (unsigned long long)salt[1],
             (unsigned long long)salt[2], (unsigned long long)salt[3]);
    /* what a UI sends: every default at once */
    sd_api_request r;
    sd_api_error e;
    int code = parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"presence_penalty\":0,"
                     "\"frequency_penalty\":0,\"logit_bias\":{},\"response_format\":{\"type\":\"text\"},\"tools\":[],"
                     "\"tool_choice\":\"auto\",\"n\":1,\"echo\":false,\"best_of\":1,\"logprobs\":false,"
                     "\"top_logprobs\":0,\"user\":\"u\",\"store\":false,\"parallel_tool_calls\":true,"
                     "\"stream_options\":null,\"ignore_eos\":true,\"guided_json\":null}",
                     1, &r, &e);
    SD_CHECK(code == 200 && r.ignore_eos == 1 && r.logprobs == 0, "every default at once: %d %s", code, e.message);
    if (code == 200) sd_api_request_free(&r);
    /* the value is quoted, cut to 48 bytes */
    code = parse("{\"prompt\":\"x\",\"suffix\":\"0123456789012345678901234567890123456789012345678901234567890\"}", 0,
                 &r, &e);
    SD_CHECK(code == 400 && strstr(e.message, "'suffix' = \"0123") && strstr(e.message, "...") &&
                 strlen(e.message) < sizeof e.message - 1,
             "long value cut: %s", e.message);
}

/* Logprobs as responses show them (sd_server_response.c):
 *  - a token's text and bytes on the bundled byte-level tokenizer: a whole token's bytes are
 *    its text; the piece "Ã" (byte 0xC3 alone, half of a two-byte character) has bytes [0xC3]
 *    and text U+FFFD; every id of the vocabulary gives valid UTF-8 text;
 *  - the chat shape (token, logprob, bytes, top_logprobs) and the completions shape (tokens,
 *    token_logprobs, top_logprobs with the sampled token added when not among the top,
 *    text_offset in code points, cut at the returned length) parse back with the values;
 *    -inf is written as -9999.0 (JSON has no infinity). */
static void test_logprobs_json(void) {
    sd_server srv;
    memset(&srv, 0, sizeof srv);
    if (specdec_tokenizer_load(SD_TEST_MODELS_DIR "/kjv-target", &srv.tok) != SPECDEC_OK) {
        SD_CHECK(0, "load the bundled tokenizer: %s", specdec_last_error());
        return;
    }
    char text[800], piece[64];
    unsigned char bytes[256];
    size_t tn, bn, pn;
    int32_t v = specdec_tokenizer_vocab_size(srv.tok), half = -1, bad_text = 0;
    for (int32_t id = 0; id < v; id++) {
        sd_resp_token_text(srv.tok, id, text, sizeof text, &tn, bytes, sizeof bytes, &bn);
        bad_text += !sd_api_utf8_valid(text, tn);
        if (specdec_token_to_piece(srv.tok, id, piece, sizeof piece, &pn) == SPECDEC_OK && !strcmp(piece, "\xc3\x83"))
            half = id;
    }
    SD_CHECK(bad_text == 0, "every token's text is valid UTF-8 (%d are not)", (int)bad_text);
    SD_CHECK(half >= 0, "the vocabulary has the byte piece for 0xC3");
    if (half >= 0) {
        sd_resp_token_text(srv.tok, half, text, sizeof text, &tn, bytes, sizeof bytes, &bn);
        SD_CHECK(bn == 1 && bytes[0] == 0xC3 && tn == 3 && !memcmp(text, "\xEF\xBF\xBD", 3),
                 "half a character: bytes [%zu: %02x], text %zu bytes", bn, bn ? bytes[0] : 0, tn);
    }
    int32_t ids[2];
    int32_t n_ids = 0;
    specdec_tokenize(srv.tok, " unto him", 9, 0, ids, 2, &n_ids);
    SD_CHECK(n_ids == 2, "two tokens: %d", (int)n_ids);
    sd_lp_entry e[2];
    memset(e, 0, sizeof e);
    e[0].token = ids[0], e[0].logprob = -0.5f, e[0].n_top = 2, e[0].end = 5;
    e[0].top_tokens[0] = ids[0], e[0].top_logprobs[0] = -0.5f, e[0].top_tokens[1] = ids[1];
    e[0].top_logprobs[1] = -1.5f;
    e[1].token = ids[1], e[1].logprob = -INFINITY, e[1].n_top = 1, e[1].end = 9;
    e[1].top_tokens[0] = ids[0], e[1].top_logprobs[0] = -0.25f;
    sd_cp_cursor cur = {0, 0};
    sd_lp_span span = {e, 2, 0, "\xc3\xa9nto him", 7, &cur, NULL, 0}; /* "é" is 2 bytes, 1 code point; cut at 7 */
    sd_buf b = {0};
    sd_resp_logprobs(&b, &srv, 0, &span);
    cJSON *c = cJSON_Parse(b.p ? b.p : "");
    const cJSON *toks = cJSON_GetObjectItem(c, "tokens"), *lps = cJSON_GetObjectItem(c, "token_logprobs");
    const cJSON *tops = cJSON_GetObjectItem(c, "top_logprobs"), *offs = cJSON_GetObjectItem(c, "text_offset");
    const cJSON *top1 = cJSON_GetArrayItem(tops, 1);
    SD_CHECK(c && cJSON_GetArraySize(toks) == 2 && !strcmp(cJSON_GetArrayItem(toks, 0)->valuestring, " unto") &&
                 cJSON_GetArrayItem(lps, 0)->valuedouble == -0.5 && cJSON_GetArrayItem(lps, 1)->valuedouble == -9999.0 &&
                 cJSON_GetArraySize(cJSON_GetArrayItem(tops, 0)) == 2 && cJSON_GetArraySize(top1) == 2 &&
                 cJSON_GetObjectItem(top1, " him") && cJSON_GetObjectItem(top1, " him")->valuedouble == -9999.0 &&
                 cJSON_GetArrayItem(offs, 0)->valueint == 0 && cJSON_GetArrayItem(offs, 1)->valueint == 4,
             "completions logprobs: %s", b.p ? b.p : "(none)");
    cJSON_Delete(c);
    sd_buf_free(&b);
    sd_resp_logprobs(&b, &srv, 1, &span);
    c = cJSON_Parse(b.p ? b.p : "");
    const cJSON *content = cJSON_GetObjectItem(c, "content"), *c0 = cJSON_GetArrayItem(content, 0);
    const cJSON *c0bytes = cJSON_GetObjectItem(c0, "bytes"), *c0top = cJSON_GetObjectItem(c0, "top_logprobs");
    SD_CHECK(c && cJSON_GetArraySize(content) == 2 && !strcmp(cJSON_GetObjectItem(c0, "token")->valuestring, " unto") &&
                 cJSON_GetObjectItem(c0, "logprob")->valuedouble == -0.5 && cJSON_GetArraySize(c0bytes) == 5 &&
                 cJSON_GetArrayItem(c0bytes, 0)->valueint == ' ' && cJSON_GetArraySize(c0top) == 2 &&
                 cJSON_GetObjectItem(cJSON_GetArrayItem(c0top, 1), "logprob")->valuedouble == -1.5 &&
                 cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(content, 1), "top_logprobs")) == 1,
             "chat logprobs: %s", b.p ? b.p : "(none)");
    cJSON_Delete(c);
    sd_buf_free(&b);
    /* echo: a one-token prompt first (null entries), the completion's offsets after its 3 code points */
    sd_cp_cursor cur2 = {0, 0};
    size_t eoff[1] = {0};
    sd_lp_echo ec = {ids, 1, NULL, 0, eoff, 3};
    sd_lp_span es = {e, 2, 0, "\xc3\xa9nto him", 7, &cur2, &ec, 3};
    sd_resp_logprobs(&b, &srv, 0, &es);
    c = cJSON_Parse(b.p ? b.p : "");
    toks = cJSON_GetObjectItem(c, "tokens"), lps = cJSON_GetObjectItem(c, "token_logprobs");
    tops = cJSON_GetObjectItem(c, "top_logprobs"), offs = cJSON_GetObjectItem(c, "text_offset");
    SD_CHECK(c && cJSON_GetArraySize(toks) == 3 && cJSON_GetArraySize(lps) == 3 && cJSON_GetArraySize(tops) == 3 &&
                 cJSON_IsNull(cJSON_GetArrayItem(lps, 0)) && cJSON_IsNull(cJSON_GetArrayItem(tops, 0)) &&
                 cJSON_GetArrayItem(lps, 1)->valuedouble == -0.5 && cJSON_GetArrayItem(offs, 0)->valueint == 0 &&
                 cJSON_GetArrayItem(offs, 1)->valueint == 3 && cJSON_GetArrayItem(offs, 2)->valueint == 7,
             "echo logprobs: %s", b.p ? b.p : "(none)");
    cJSON_Delete(c);
    sd_buf_free(&b);
    specdec_tokenizer_free(srv.tok);
}

/* The usage object of a body (a whole response or one SSE event "data: {...}"), parsed. */
static cJSON *usage_of(const sd_buf *b, cJSON **root) {
    const char *p = b->p ? b->p : "";
    if (!strncmp(p, "data: ", 6)) p += 6;
    *root = cJSON_Parse(p);
    return cJSON_GetObjectItem(*root, "usage");
}

static int usage_is(const cJSON *u, int prompt, int completion, int cached) {
    const cJSON *d = cJSON_GetObjectItem(u, "prompt_tokens_details"), *c = cJSON_GetObjectItem(d, "cached_tokens");
    return cJSON_IsNumber(c) && c->valueint == cached && cJSON_GetObjectItem(u, "prompt_tokens")->valueint == prompt &&
           cJSON_GetObjectItem(u, "completion_tokens")->valueint == completion &&
           cJSON_GetObjectItem(u, "total_tokens")->valueint == prompt + completion;
}

static void test_usage_json(void) {
    sd_server srv;
    memset(&srv, 0, sizeof srv);
    snprintf(srv.model_id, sizeof srv.model_id, "kjv-target");
    srv.backend_name = "cpu";
    specdec_stats st;
    memset(&st, 0, sizeof st);
    st.n_prompt = 40, st.n_generated = 3, st.n_cached_prompt = 32;
    sd_gen_result r;
    memset(&r, 0, sizeof r);
    r.text = "abc", r.len = 3, r.finish = "length", r.stop_detail = "n_predict", r.stats = &st;
    r.n_prompt = 40, r.n_completion = 3, r.n_cached = 32;
    for (int cached = 0; cached <= 32; cached += 32)
        for (int chat = 0; chat < 2; chat++) {
            sd_gen_result usage = {.n_prompt = 40, .n_completion = 3, .n_cached = cached};
            sd_buf b = {0};
            sd_resp_completion(&b, &srv, chat, "cmpl-1", 0, &r, 1, &usage);
            cJSON *root;
            const cJSON *u = usage_of(&b, &root);
            const cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "speculative"), "n_cached_prompt");
            SD_CHECK(root && usage_is(u, 40, 3, cached) && cJSON_IsNumber(n) && n->valueint == 32,
                     "chat %d: usage with cached_tokens %d, speculative.n_cached_prompt 32: %s", chat, cached,
                     b.p ? b.p : "(none)");
            cJSON_Delete(root);
            sd_buf_free(&b);
            sd_resp_usage_chunk(&b, &srv, chat, "cmpl-1", 0, &usage);
            u = usage_of(&b, &root);
            SD_CHECK(root && usage_is(u, 40, 3, cached) && cJSON_GetArraySize(cJSON_GetObjectItem(root, "choices")) == 0,
                     "chat %d: the usage chunk with cached_tokens %d: %s", chat, cached, b.p ? b.p : "(none)");
            cJSON_Delete(root);
            sd_buf_free(&b);
        }
}

/* The logits processors: accepted values land in the request; every bad one is a 400
 * invalid_request_error naming its field. */
static void test_procs(void) {
    static const struct { int chat; const char *extra; const char *param; } bad[] = {
        {0, "\"presence_penalty\":2.01", "presence_penalty"}, {1, "\"presence_penalty\":-2.5", "presence_penalty"},
        {0, "\"presence_penalty\":\"1\"", "presence_penalty"}, {0, "\"presence_penalty\":true", "presence_penalty"},
        {1, "\"frequency_penalty\":3", "frequency_penalty"},  {0, "\"frequency_penalty\":[1]", "frequency_penalty"},
        {0, "\"repetition_penalty\":0", "repetition_penalty"}, {1, "\"repetition_penalty\":-1", "repetition_penalty"},
        {0, "\"repetition_penalty\":100.5", "repetition_penalty"},
        {0, "\"repetition_penalty\":\"1.2\"", "repetition_penalty"},
        {0, "\"min_tokens\":-1", "min_tokens"},               {1, "\"min_tokens\":1.5", "min_tokens"},
        {0, "\"min_tokens\":\"3\"", "min_tokens"},            {0, "\"max_tokens\":5,\"min_tokens\":6", "min_tokens"},
        {1, "\"max_completion_tokens\":2,\"min_tokens\":3", "min_tokens"},
        {0, "\"logit_bias\":[]", "logit_bias"},               {1, "\"logit_bias\":\"5\"", "logit_bias"},
        {0, "\"logit_bias\":{\"-1\":1}", "logit_bias"},       {0, "\"logit_bias\":{\"a\":1}", "logit_bias"},
        {0, "\"logit_bias\":{\"\":1}", "logit_bias"},         {0, "\"logit_bias\":{\" 5\":1}", "logit_bias"},
        {0, "\"logit_bias\":{\"+5\":1}", "logit_bias"},       {1, "\"logit_bias\":{\"1.0\":1}", "logit_bias"},
        {0, "\"logit_bias\":{\"0x5\":1}", "logit_bias"},      {0, "\"logit_bias\":{\"2147483648\":1}", "logit_bias"},
        {0, "\"logit_bias\":{\"5\":101}", "logit_bias"},      {1, "\"logit_bias\":{\"5\":-100.5}", "logit_bias"},
        {0, "\"logit_bias\":{\"5\":\"1\"}", "logit_bias"},    {0, "\"logit_bias\":{\"5\":null}", "logit_bias"},
        {0, "\"logit_bias\":{\"5\":1,\"5\":2}", "logit_bias"},
        {0, "\"stop_token_ids\":2", "stop_token_ids"},        {1, "\"stop_token_ids\":[-1]", "stop_token_ids"},
        {0, "\"stop_token_ids\":[1.5]", "stop_token_ids"},    {0, "\"stop_token_ids\":[\"1\"]", "stop_token_ids"},
        {0, "\"stop_token_ids\":[null]", "stop_token_ids"},   {1, "\"stop_token_ids\":[[1]]", "stop_token_ids"},
        {0, "\"stop_token_ids\":[2147483648]", "stop_token_ids"}, {0, "\"stop_token_ids\":{}", "stop_token_ids"},
        {0, "\"allowed_token_ids\":[]", "allowed_token_ids"},  {1, "\"allowed_token_ids\":[3,-1]", "allowed_token_ids"},
        {0, "\"allowed_token_ids\":5", "allowed_token_ids"},   {0, "\"allowed_token_ids\":[\"5\"]", "allowed_token_ids"},
        {0, "\"allowed_token_ids\":[0.5]", "allowed_token_ids"},
        {0, "\"bad_words\":\"x\"", "bad_words"},               {1, "\"bad_words\":[1]", "bad_words"},
        {0, "\"bad_words\":[\"\"]", "bad_words"},              {0, "\"bad_words\":[\" \\t\"]", "bad_words"},
        {0, "\"bad_words\":[\"a\",null]", "bad_words"},
        {0, "\"include_stop_str_in_output\":1", "include_stop_str_in_output"},
        {1, "\"include_stop_str_in_output\":\"true\"", "include_stop_str_in_output"},
    };
    char body[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *head = bad[i].chat ? "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" : "{\"prompt\":\"x\"";
        snprintf(body, sizeof body, "%s,%s}", head, bad[i].extra);
        sd_api_request r;
        sd_api_error e;
        int code = parse(body, bad[i].chat, &r, &e);
        SD_CHECK(code == 400 && e.http == 400 && !strcmp(e.param, bad[i].param) && !e.code &&
                     !strcmp(e.type, "invalid_request_error") && strstr(e.message, bad[i].param),
                 "%s: got %d param '%s' code %s (%s)", body, code, e.param, e.code ? e.code : "null", e.message);
        if (code == 200) sd_api_request_free(&r);
    }
    /* accepted: the ranges' ends, and every field at once */
    static const char *const good[] = {
        "\"presence_penalty\":-2,\"frequency_penalty\":2,\"repetition_penalty\":100",
        "\"presence_penalty\":2,\"frequency_penalty\":-2,\"repetition_penalty\":0.01",
        "\"presence_penalty\":null,\"frequency_penalty\":null,\"repetition_penalty\":null,\"logit_bias\":null,"
        "\"min_tokens\":null,\"stop_token_ids\":null",
        "\"max_tokens\":5,\"min_tokens\":5", "\"logit_bias\":{\"0\":-100,\"007\":100}",
        "\"allowed_token_ids\":null,\"bad_words\":null,\"include_stop_str_in_output\":null",
        "\"bad_words\":[],\"include_stop_str_in_output\":false",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        for (int chat = 0; chat < 2; chat++) {
            snprintf(body, sizeof body, "%s,%s}",
                     chat ? "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" : "{\"prompt\":\"x\"", good[i]);
            sd_api_request r;
            sd_api_error e;
            int code = parse(body, chat, &r, &e);
            SD_CHECK(code == 200, "%s: accepted: %d %s", body, code, e.message);
            if (code == 200) sd_api_request_free(&r);
        }
    sd_api_request r;
    sd_api_error e;
    int code = parse("{\"prompt\":\"x\",\"max_tokens\":9,\"presence_penalty\":0.5,\"frequency_penalty\":-1.25,"
                     "\"repetition_penalty\":1.5,\"min_tokens\":4,\"logit_bias\":{\"50256\":-100,\"3\":2.5},"
                     "\"stop_token_ids\":[7,0,7],\"allowed_token_ids\":[9,3],\"bad_words\":[\" a b\",\"c\"],"
                     "\"include_stop_str_in_output\":true}",
                     0, &r, &e);
    SD_CHECK(code == 200 && r.n_allowed_token_ids == 2 && r.allowed_token_ids[0] == 9 && r.allowed_token_ids[1] == 3 &&
                 r.n_bad_words == 2 && !strcmp(r.bad_words[0], " a b") && !strcmp(r.bad_words[1], "c") &&
                 r.include_stop_str_in_output == 1,
             "allowed_token_ids, bad_words, include_stop_str_in_output in the request: %d %s", code, e.message);
    SD_CHECK(code == 200 && r.presence_penalty == 0.5f && r.frequency_penalty == -1.25f &&
                 r.repetition_penalty == 1.5f && r.min_tokens == 4 && r.n_logit_bias == 2 &&
                 r.logit_bias[0].token == 50256 && r.logit_bias[0].bias == -100.0f && r.logit_bias[1].token == 3 &&
                 r.logit_bias[1].bias == 2.5f && r.n_stop_token_ids == 3 && r.stop_token_ids[0] == 7 &&
                 r.stop_token_ids[1] == 0 && r.stop_token_ids[2] == 7,
             "the values in the request: %d %s", code, e.message);
    if (code == 200) sd_api_request_free(&r);
    code = parse("{\"prompt\":\"x\"}", 0, &r, &e); /* the defaults: every processor off */
    SD_CHECK(code == 200 && r.presence_penalty == 0 && r.frequency_penalty == 0 && r.repetition_penalty == 1.0f &&
                 r.min_tokens == 0 && r.n_logit_bias == 0 && !r.logit_bias && r.n_stop_token_ids == 0 &&
                 !r.stop_token_ids && r.n_allowed_token_ids == 0 && r.n_bad_words == 0 && !r.include_stop_str_in_output,
             "defaults: %d %s", code, e.message);
    if (code == 200) sd_api_request_free(&r);
    /* the limits: SPECDEC_MAX_LOGIT_BIAS entries and SPECDEC_MAX_STOP_TOKEN_IDS ids; one more refused */
    sd_buf b = {0};
    for (int over = 0; over < 2; over++) {
        b.len = 0;
        sd_buf_puts(&b, "{\"prompt\":\"x\",\"logit_bias\":{");
        for (int k = 0; k < SPECDEC_MAX_LOGIT_BIAS + over; k++) sd_buf_printf(&b, "%s\"%d\":-1", k ? "," : "", k);
        sd_buf_puts(&b, "}}");
        code = sd_api_parse(b.p, b.len, 0, NULL, &r, &e);
        SD_CHECK(over ? code == 400 && !strcmp(e.param, "logit_bias") && strstr(e.message, "1024")
                      : code == 200 && r.n_logit_bias == SPECDEC_MAX_LOGIT_BIAS &&
                            r.logit_bias[SPECDEC_MAX_LOGIT_BIAS - 1].token == SPECDEC_MAX_LOGIT_BIAS - 1,
                 "logit_bias of %d entries: %d %s", SPECDEC_MAX_LOGIT_BIAS + over, code, e.message);
        if (code == 200) sd_api_request_free(&r);
        b.len = 0;
        sd_buf_puts(&b, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop_token_ids\":[");
        for (int k = 0; k < SPECDEC_MAX_STOP_TOKEN_IDS + over; k++) sd_buf_printf(&b, "%s%d", k ? "," : "", k);
        sd_buf_puts(&b, "]}");
        code = sd_api_parse(b.p, b.len, 1, NULL, &r, &e);
        SD_CHECK(over ? code == 400 && !strcmp(e.param, "stop_token_ids") && strstr(e.message, "64")
                      : code == 200 && r.n_stop_token_ids == SPECDEC_MAX_STOP_TOKEN_IDS,
                 "stop_token_ids of %d ids: %d %s", SPECDEC_MAX_STOP_TOKEN_IDS + over, code, e.message);
        if (code == 200) sd_api_request_free(&r);
    }
    sd_buf_free(&b);
}

/* A choice's "stop_reason" (vLLM's): the stop_token_ids id as an integer, the stop string, or
 * null; in a whole response's choice and in a stream's last chunk, both endpoints. */
static void test_stop_reason_json(void) {
    sd_server srv;
    memset(&srv, 0, sizeof srv);
    snprintf(srv.model_id, sizeof srv.model_id, "kjv-target");
    srv.backend_name = "cpu";
    specdec_stats st;
    memset(&st, 0, sizeof st);
    for (int kind = 0; kind < 3; kind++)
        for (int chat = 0; chat < 2; chat++)
            for (int stream = 0; stream < 2; stream++) {
                sd_gen_result r;
                memset(&r, 0, sizeof r);
                r.text = "abc", r.len = 3, r.finish = kind == 2 ? "length" : "stop", r.stats = &st;
                if (kind == 0) r.stop_by_token = 1, r.stop_token = 0; /* id 0: an integer, not null */
                if (kind == 1) r.stop_str = "\"q";
                sd_buf b = {0};
                sd_gen_result usage = {.n_prompt = 4, .n_completion = 3};
                if (stream) sd_resp_chunk(&b, &srv, chat, "cmpl-1", 0, 0, "", 0, 0, &r, NULL);
                else sd_resp_completion(&b, &srv, chat, "cmpl-1", 0, &r, 1, &usage);
                const char *json = b.p ? b.p + (stream ? 6 : 0) : "";
                cJSON *root = cJSON_Parse(json);
                const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "choices"), 0);
                const cJSON *sr = cJSON_GetObjectItem(c, "stop_reason");
                const cJSON *fin = cJSON_GetObjectItem(c, "finish_reason");
                int ok = cJSON_IsString(fin) && !strcmp(fin->valuestring, r.finish) &&
                         (kind == 0   ? cJSON_IsNumber(sr) && sr->valuedouble == 0
                          : kind == 1 ? cJSON_IsString(sr) && !strcmp(sr->valuestring, "\"q")
                                      : cJSON_IsNull(sr));
                SD_CHECK(root && ok, "kind %d chat %d stream %d: %s", kind, chat, stream, json);
                cJSON_Delete(root);
                sd_buf_free(&b);
            }
}

/* Reference decoder: maximal well-formed sequences per Unicode Table 3-7. */
static int ref_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        unsigned lo = 0x80, hi = 0xBF;
        size_t k;
        if (c <= 0x7F) { i++; continue; }
        else if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c >= 0xE0 && c <= 0xEF) k = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) k = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return 0;
        if (n - i <= k) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (size_t j = 2; j <= k; j++)
            if (s[i + j] < 0x80 || s[i + j] > 0xBF) return 0;
        i += k + 1;
    }
    return 1;
}

static void test_utf8(void) {
    unsigned char buf[8];
    int mismatches = 0, valid = 0;
    for (int t = 0; t < 200000; t++) {
        size_t n = 1 + next() % 6;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = next();
            buf[i] = (unsigned char)(r % 4 == 0 ? 0x80 + (r >> 8) % 64 : r % 4 == 1 ? 0xC0 + (r >> 8) % 64 : r >> 8);
        }
        int a = sd_api_utf8_valid((const char *)buf, n), b = ref_utf8(buf, n);
        valid += b;
        if (a != b && mismatches++ < 5) SD_CHECK(0, "utf8 disagreement on %zu bytes: %d vs %d", n, a, b);
    }
    SD_CHECK(mismatches == 0 && valid > 1000, "utf8: %d mismatches, %d valid strings", mismatches, valid);
}

/* Where the text must end: at the first piece that completes a stop sequence, the
 * earliest start among the sequences it completes (generation stops after that piece); with
 * include (include_stop_str_in_output), the end of that sequence (the first of stops there). */
static size_t stop_expect(const char *text, size_t n, char **stops, const size_t *ends, int n_pieces, int include) {
    size_t old = 0;
    for (int p = 0; p < n_pieces; p++) {
        size_t best = (size_t)-1, best_end = 0;
        for (int k = 0; k < 2; k++) {
            size_t l = strlen(stops[k]);
            for (size_t i = 0; i + l <= ends[p]; i++)
                if (i + l > old && !memcmp(text + i, stops[k], l) && i < best) best = i, best_end = i + l;
        }
        if (best != (size_t)-1) return include ? best_end : best;
        old = ends[p];
    }
    return n;
}

static void test_stopper(void) {
    int bad = 0;
    for (int t = 0; t < 20000; t++) {
        char text[64], s1[4], s2[4];
        size_t n = next() % 48, ends[64];
        int n_pieces = 0;
        for (size_t i = 0; i < n; i++) text[i] = "abc"[next() % 3];
        for (size_t len = 0; len < n; n_pieces++) {
            size_t piece = 1 + next() % 4;
            len = len + piece > n ? n : len + piece;
            ends[n_pieces] = len;
        }
        size_t l1 = 1 + next() % 3, l2 = 1 + next() % 3;
        for (size_t i = 0; i < l1; i++) s1[i] = "abc"[next() % 3];
        for (size_t i = 0; i < l2; i++) s2[i] = "abc"[next() % 3];
        s1[l1] = s2[l2] = '\0';
        char *stops[2] = {s1, s2};
        const int include = t % 2;
        size_t want = stop_expect(text, n, stops, ends, n_pieces, include);
        sd_stopper st;
        sd_stop_init(&st, stops, 2, include);
        size_t len = 0, last_safe = 0;
        for (int p = 0; p < n_pieces && st.stop_at == (size_t)-1; p++) {
            sd_stop_scan(&st, text, len, ends[p]);
            len = ends[p];
            if (st.safe < last_safe || st.safe > want) bad++;
            last_safe = st.safe;
        }
        sd_stop_finish(&st, len);
        if (st.safe != want) bad++;
    }
    SD_CHECK(bad == 0, "stop filter: %d wrong releases", bad);
}

static void test_json_escape(void) {
    sd_buf b = {0};
    sd_buf_json_str(&b, "a\"b\\c\n\x01\0z\xc3\xa9", 11);
    const char *want = "\"a\\\"b\\\\c\\n\\u0001\\u0000z\xc3\xa9\"";
    SD_CHECK(b.p && !strcmp(b.p, want), "json escape: %s", b.p ? b.p : "(null)");
    sd_buf_free(&b);
}

static void test_mutations(void) {
    static const char *const seeds[] = {
        "{\"model\":\"model\",\"prompt\":\"And God said\",\"max_tokens\":16,\"temperature\":0,\"stop\":[\"\\n\"]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}],\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true},\"tree\":[2,1],\"seed\":123456789012}",
        "{\"prompt\":[[1,2,3]],\"top_k\":5,\"min_p\":0.1,\"verify\":\"match\",\"n_draft\":4,\"n\":1}",
    };
    char buf[512];
    int counts[600] = {0};
    for (int t = 0; t < 20000; t++) {
        const char *s = seeds[t % 3];
        size_t n = strlen(s);
        memcpy(buf, s, n);
        for (int m = 0, nm = 1 + (int)(next() % 4); m < nm; m++) {
            uint64_t r = next();
            size_t at = n ? (size_t)(r >> 8) % n : 0;
            switch (r % 4) {
            case 0: buf[at] = (char)(next() & 0xff); break;                  /* flip a byte */
            case 1: n = at; break;                                          /* truncate */
            case 2: /* insert a structural character */
                if (n + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, n - at);
                    buf[at] = "{}[]\",:0\\"[next() % 9];
                    n++;
                }
                break;
            case 3: if (n) { memmove(buf + at, buf + at + 1, n - at - 1); n--; } break; /* delete */
            }
        }
        int code = sd_server_parse_body((const uint8_t *)buf, n, t & 1);
        if (code >= 0 && code < 600) counts[code]++;
        else SD_CHECK(0, "mutation %d: status %d", t, code);
    }
    SD_CHECK(counts[400] > 1000 && counts[200] > 10, "mutations: %d valid, %d rejected", counts[200], counts[400]);
    printf("mutations: %d valid, %d x 400, %d x 404\n", counts[200], counts[400], counts[404]);
}

static void test_framing(void) {
    static const struct {
        const char *cl[3], *te[3];
        int n_cl, n_te, code;
    } cases[] = {
        {{"5"}, {NULL}, 1, 0, 0},
        {{"5", "5"}, {NULL}, 2, 0, 0},
        {{NULL}, {"chunked"}, 0, 1, 0},
        {{NULL}, {" Chunked "}, 0, 1, 0},
        {{"5"}, {"chunked"}, 1, 1, 400},
        {{"5", "6"}, {NULL}, 2, 0, 400},
        {{NULL}, {"chunked", "chunked"}, 0, 2, 400},
        {{NULL}, {"gzip"}, 0, 1, 501},
        {{NULL}, {"gzip, chunked"}, 0, 1, 501},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sd_api_error e;
        int code = sd_api_check_framing(cases[i].cl, cases[i].n_cl, cases[i].te, cases[i].n_te, &e);
        SD_CHECK(code == cases[i].code && (code == 0 || (e.close && e.message[0])), "framing %zu: %d want %d", i,
                 code, cases[i].code);
    }
}

static void test_nul(void) {
    static const struct {
        const char *body;
        size_t len;
        int code;
    } cases[] = {
        {"{\"prompt\":\"a\\u0000b\"}", 0, 400},
        {"{\"prompt\":\"a\\\\u0000b\"}", 0, 200}, /* an escaped backslash, then "u0000" */
        {"{\"prompt\":\"a\\\\\\u0000b\"}", 0, 400},
        {"{\"prompt\":\"a\0b\"}", 16, 400},
        {"{\"prompt\":\"a\",\"stop\":\"\\u0000\"}", 0, 400},
        {"{\"prompt\":\"a\\u0001\"}", 0, 200},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sd_api_request r;
        sd_api_error e;
        size_t n = cases[i].len ? cases[i].len : strlen(cases[i].body);
        int code = sd_api_parse(cases[i].body, n, 0, NULL, &r, &e);
        SD_CHECK(code == cases[i].code, "NUL case %zu: %d want %d (%s)", i, code, cases[i].code, e.message);
        if (code == 200) sd_api_request_free(&r);
    }
}


/* ---- tool calling (sd_server_tools.c) ------------------------------------------------------ */
/* The parse of tools / tool_choice / chat_template_kwargs: vLLM's defaults and its errors. */
static void test_tools_parse(void) {
    static const char W[] = "{\"type\":\"function\",\"function\":{\"name\":\"w\",\"parameters\":{\"type\":\"object\","
                            "\"properties\":{\"c\":{\"type\":\"string\"}},\"$defs\":{\"d\":{\"type\":\"integer\"}}},"
                            "\"strict\":true},\"x_extra\":1}";
    static const char S[] = "{\"function\":{\"name\":\"s\",\"description\":\"find\"}}";
    char body[2048];
    sd_api_request r;
    sd_api_error e;
    const char *head = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    /* absent tool_choice with tools: "auto" (vLLM), none without; the tools as model_dump writes them */
    snprintf(body, sizeof body, "%s,\"tools\":[%s,%s]}", head, W, S);
    int code = parse(body, 1, &r, &e);
    SD_CHECK(code == 200 && r.tool_choice == SD_TC_AUTO && r.n_tools == 2 && !r.guided.kind && r.tools_json &&
                 !strcmp(r.tools_json, "[{\"type\":\"function\",\"function\":{\"name\":\"w\",\"description\":null,"
                                       "\"parameters\":{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"string\"}},"
                                       "\"$defs\":{\"d\":{\"type\":\"integer\"}}},\"strict\":true},\"x_extra\":1},"
                                       "{\"type\":\"function\",\"function\":{\"name\":\"s\",\"description\":\"find\","
                                       "\"parameters\":null}}]"),
             "tools normalised: %d %s %s", code, e.message, code == 200 ? r.tools_json : "");
    if (code == 200) sd_api_request_free(&r);
    code = parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[]}", 1, &r, &e);
    SD_CHECK(code == 200 && r.tool_choice == SD_TC_NONE && r.tools_json && !strcmp(r.tools_json, "[]"), "empty tools");
    if (code == 200) sd_api_request_free(&r);
    /* named: the tool's parameters are the constraint; required: vLLM's list schema, $defs merged */
    snprintf(body, sizeof body, "%s,\"tools\":[%s,%s],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"s\"}}}",
             head, W, S);
    code = parse(body, 1, &r, &e);
    SD_CHECK(code == 200 && r.tool_choice == SD_TC_NAMED && r.tool_named == 1 &&
                 r.guided.kind == SPECDEC_GRAMMAR_JSON_SCHEMA && !strcmp(r.guided.param, "tool_choice") &&
                 !strcmp(r.guided.spec, "{\"type\":\"object\",\"properties\":{}}"),
             "named without parameters: %d %s", code, code == 200 ? r.guided.spec : e.message);
    if (code == 200) sd_api_request_free(&r);
    snprintf(body, sizeof body, "%s,\"tools\":[%s,%s],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"w\"}}}",
             head, W, S);
    code = parse(body, 1, &r, &e);
    SD_CHECK(code == 200 && r.tool_choice == SD_TC_NAMED && r.tool_named == 0 &&
                 !strcmp(r.guided.spec, "{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"string\"}},"
                                        "\"$defs\":{\"d\":{\"type\":\"integer\"}}}"),
             "named keeps its parameters whole ($defs included): %d %s", code, code == 200 ? r.guided.spec : e.message);
    if (code == 200) sd_api_request_free(&r);
    snprintf(body, sizeof body, "%s,\"tools\":[%s,%s],\"tool_choice\":\"required\"}", head, W, S);
    code = parse(body, 1, &r, &e);
    SD_CHECK(code == 200 && r.tool_choice == SD_TC_REQUIRED &&
                 !strcmp(r.guided.spec,
                         "{\"type\":\"array\",\"minItems\":1,\"items\":{\"anyOf\":[{\"type\":\"object\",\"properties\":{"
                         "\"name\":{\"type\":\"string\",\"enum\":[\"w\"]},\"parameters\":{\"type\":\"object\",\"properties\":"
                         "{\"c\":{\"type\":\"string\"}}}},\"required\":[\"name\",\"parameters\"]},{\"type\":\"object\","
                         "\"properties\":{\"name\":{\"type\":\"string\",\"enum\":[\"s\"]},\"parameters\":{\"type\":\"object\","
                         "\"properties\":{}}},\"required\":[\"name\",\"parameters\"]}]},\"$defs\":{\"d\":{\"type\":\"integer\"}}}"),
             "required schema: %d %s", code, code == 200 ? r.guided.spec : e.message);
    if (code == 200) sd_api_request_free(&r);
    snprintf(body, sizeof body, "%s,\"tools\":[],\"tool_choice\":\"required\"}", head);
    code = parse(body, 1, &r, &e);
    SD_CHECK(code == 200 && r.tool_choice == SD_TC_NONE && !r.guided.kind, "required without tools is none");
    if (code == 200) sd_api_request_free(&r);
    snprintf(body, sizeof body, "%s,\"chat_template_kwargs\":{\"enable_thinking\":false}}", head);
    code = parse(body, 1, &r, &e);
    SD_CHECK(code == 200 && r.kwargs_json && !strcmp(r.kwargs_json, "{\"enable_thinking\":false}") && r.messages_json,
             "kwargs kept");
    if (code == 200) sd_api_request_free(&r);
    /* assistant tool calls and tool results */
    code = parse("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":null,"
                 "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"w\",\"arguments\":\"{}\"}}]},"
                 "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"r\"}]}", 1, &r, &e);
    SD_CHECK(code == 200 && r.n_messages == 3, "tool call conversation: %d %s", code, e.message);
    if (code == 200) sd_api_request_free(&r);
    /* refusals: (extra fields, the param named) */
    static const struct { const char *extra, *param; } bad[] = {
        {"\"tools\":{}", "tools"},
        {"\"tools\":[1]", "tools"},
        {"\"tools\":[{\"type\":\"code\",\"function\":{\"name\":\"f\"}}]", "tools"},
        {"\"tools\":[{\"type\":\"function\"}]", "tools"},
        {"\"tools\":[{\"function\":{\"name\":5}}]", "tools"},
        {"\"tools\":[{\"function\":{\"name\":\"\"}}]", "tools"},
        {"\"tools\":[{\"function\":{\"name\":\"f\",\"description\":3}}]", "tools"},
        {"\"tools\":[{\"function\":{\"name\":\"f\",\"parameters\":\"{}\"}}]", "tools"},
        {"\"tools\":[{\"function\":{\"name\":\"f\",\"strict\":\"yes\"}}]", "tools"},
        {"\"tools\":[{\"function\":{\"name\":\"f\"}},{\"function\":{\"name\":\"f\"}}]", "tools"},
        {"\"tools\":[{\"function\":{\"name\":\"a\",\"parameters\":{\"$defs\":{\"d\":{\"type\":\"string\"}}}}},"
         "{\"function\":{\"name\":\"b\",\"parameters\":{\"$defs\":{\"d\":{\"type\":\"integer\"}}}}}],\"tool_choice\":\"required\"",
         "tools"},
        {"\"tool_choice\":\"auto\"", "tool_choice"},
        {"\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}", "tool_choice"},
        {"\"tools\":[{\"function\":{\"name\":\"f\"}}],\"tool_choice\":\"sometimes\"", "tool_choice"},
        {"\"tools\":[{\"function\":{\"name\":\"f\"}}],\"tool_choice\":3", "tool_choice"},
        {"\"tools\":[{\"function\":{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}",
         "tool_choice"},
        {"\"tools\":[{\"function\":{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{}}", "tool_choice"},
        {"\"tools\":[{\"function\":{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"x\",\"function\":{\"name\":\"f\"}}",
         "tool_choice"},
        {"\"tools\":[{\"function\":{\"name\":\"f\"}}],\"tool_choice\":\"required\",\"guided_regex\":\"a\"", "tool_choice"},
        {"\"chat_template_kwargs\":[]", "chat_template_kwargs"},
        {"\"chat_template_kwargs\":\"x\"", "chat_template_kwargs"},
        {"\"functions\":[{\"name\":\"f\"}]", "functions"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(body, sizeof body, "%s,%s}", head, bad[i].extra);
        code = parse(body, 1, &r, &e);
        SD_CHECK(code == 400 && !strcmp(e.param, bad[i].param) && e.message[0], "%s: %d param '%s' (%s)", bad[i].extra, code,
                 e.param, e.message);
        if (code == 200) sd_api_request_free(&r);
    }
    static const char *bad_msgs[] = {
        "{\"role\":\"assistant\",\"tool_calls\":{}}",
        "{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{}}]}",
        "{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":5}}]}",
        "{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":7}",
    };
    for (size_t i = 0; i < sizeof bad_msgs / sizeof bad_msgs[0]; i++) {
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},%s]}", bad_msgs[i]);
        code = parse(body, 1, &r, &e);
        SD_CHECK(code == 400 && !strcmp(e.param, "messages"), "%s: %d %s", bad_msgs[i], code, e.param);
        if (code == 200) sd_api_request_free(&r);
    }
    /* limits: 129 tools; parameters nested 33 deep; 128 tools and 32 deep pass */
    for (int pass = 0; pass < 4; pass++) {
        sd_buf b = {0};
        sd_buf_puts(&b, head);
        sd_buf_puts(&b, ",\"tool_choice\":\"none\",\"tools\":[");
        int n = pass == 0 ? 129 : pass == 1 ? 128 : 1;
        for (int i = 0; i < n; i++) sd_buf_printf(&b, "%s{\"function\":{\"name\":\"f%d\"}}", i ? "," : "", i);
        if (pass >= 2) {
            int depth = pass == 2 ? SD_API_MAX_SCHEMA_DEPTH + 1 : SD_API_MAX_SCHEMA_DEPTH;
            b.len -= 2; /* reopen the function object */
            sd_buf_puts(&b, ",\"parameters\":");
            for (int d = 1; d < depth; d++) sd_buf_puts(&b, "{\"a\":");
            sd_buf_puts(&b, "{}");
            for (int d = 1; d < depth; d++) sd_buf_puts(&b, "}");
            sd_buf_puts(&b, "}}");
        }
        sd_buf_puts(&b, "]}");
        code = sd_api_parse(b.p, b.len, 1, "kjv-target", &r, &e);
        const int want = pass == 0 || pass == 2 ? 400 : 200;
        SD_CHECK(code == want && (want == 200 || !strcmp(e.param, "tools")), "tool limits pass %d: %d %s", pass, code,
                 e.message);
        if (code == 200) sd_api_request_free(&r);
        sd_buf_free(&b);
    }
}

/* Python's json.dumps of parsed values (how vLLM writes a parsed call's arguments). */
static void test_pydump(void) {
    static const struct { const char *in, *want; } cases[] = {
        {"{\"a\":1,\"b\":[true,false,null],\"c\":{}}", "{\"a\": 1, \"b\": [true, false, null], \"c\": {}}"},
        {"{\"s\":\"\\u00e9\\n\\t\\\"\\\\\\u0001/\"}", "{\"s\": \"\u00e9\\n\\t\\\"\\\\\\u0001/\"}"},
        {"[0.5,-2,1e-07,1e300,3.25,[]]", "[0.5, -2, 1e-07, 1e+300, 3.25, []]"},
        {"\"x\"", "\"x\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *v = cJSON_Parse(cases[i].in);
        sd_buf b = {0};
        sd_tools_pydump(&b, v);
        SD_CHECK(b.p && !strcmp(b.p, cases[i].want), "pydump %s: %s", cases[i].in, b.p ? b.p : "");
        sd_buf_free(&b);
        cJSON_Delete(v);
    }
}

/* Feed text in pieces of k bytes (k = 0: whole, at once): the concatenated content and calls. */
typedef struct { char content[4096]; char names[8][64]; char args[8][512]; char ids[8][48]; int n; int shapes; } streamed;
static void feed_all(sd_tool_out *o, const char *text, size_t k, streamed *s) {
    memset(s, 0, sizeof *s);
    s->shapes = 1;
    size_t n = strlen(text);
    for (size_t end = k ? (k < n ? k : n) : n;; end = end + k < n ? end + k : n) {
        sd_buf d = {0};
        sd_tools_feed(o, text, end, end == n, &d);
        for (char *line = d.p; line && *line;) {
            char *nl = strchr(line, '\n');
            *nl = '\0';
            cJSON *v = cJSON_Parse(line);
            const cJSON *c = cJSON_GetObjectItem(v, "content"), *tc = cJSON_GetObjectItem(v, "tool_calls");
            if (cJSON_IsString(c)) strncat(s->content, c->valuestring, sizeof s->content - strlen(s->content) - 1);
            const cJSON *t = cJSON_GetArrayItem(tc, 0);
            if (t) {
                int idx = cJSON_GetObjectItem(t, "index")->valueint;
                const cJSON *f = cJSON_GetObjectItem(t, "function"), *id = cJSON_GetObjectItem(t, "id");
                if (idx == s->n && idx < 8) { /* first delta of a call */
                    s->shapes &= cJSON_IsString(id) && cJSON_IsString(cJSON_GetObjectItem(f, "name"));
                    if (cJSON_IsString(id)) snprintf(s->ids[idx], sizeof s->ids[idx], "%s", id->valuestring);
                    snprintf(s->names[idx], sizeof s->names[idx], "%s", cJSON_GetObjectItem(f, "name")->valuestring);
                    s->n++;
                } else s->shapes &= !id && idx < s->n;
                const cJSON *a = cJSON_GetObjectItem(f, "arguments");
                if (idx < 8 && cJSON_IsString(a)) strncat(s->args[idx], a->valuestring, sizeof s->args[idx] - strlen(s->args[idx]) - 1);
            }
            SD_CHECK(v && (c || tc), "delta is a JSON object: %s", line);
            cJSON_Delete(v);
            line = nl + 1;
        }
        sd_buf_free(&d);
        if (end == n) break;
    }
}

/* The parsers on adversarial text, whole and streamed in pieces of 1, 3 and 7 bytes: the same calls
 * both ways; what a parser cannot read stays content (never lost, never an error). */
static void test_tool_parsers(void) {
    static const struct {
        int choice, parser;
        const char *text;
        int n_calls;             /* calls parsed (whole) */
        const char *content;     /* whole: content (NULL: null) */
        const char *args0;       /* first call's arguments */
        const char *streamed_content; /* streamed: the content (NULL: as whole) */
    } cases[] = {
        {SD_TC_AUTO, SD_TP_HERMES, "plain text, no call", 0, "plain text, no call", NULL, NULL},
        /* a closing tag inside a JSON string ends the block (vLLM's non-greedy regex): not JSON, all text */
        {SD_TC_AUTO, SD_TP_HERMES, "Sure. <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"}</tool_call>{\"}}</tool_call>",
         0, "Sure. <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"}</tool_call>{\"}}</tool_call>", NULL, NULL},
        /* braces and quotes inside strings */
        {SD_TC_AUTO, SD_TP_HERMES, "Sure. <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"}}{\\\"[\"}}</tool_call>", 1,
         "Sure. ", "{\"a\": \"}}{\\\"[\"}", "Sure. "},
        {SD_TC_AUTO, SD_TP_HERMES,
         "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"x\":[1,{\"y\":\"<tool_call>\"}]}}\n</tool_call>\n<tool_call>{\"name\":\"g\","
         "\"arguments\":{}}</tool_call>tail",
         2, NULL, "{\"x\": [1, {\"y\": \"<tool_call>\"}]}", ""},
        {SD_TC_AUTO, SD_TP_HERMES, "a <tool_call>{\"name\": \"f\", \"arguments\": {\"k\": 1}}", 1, "a ", "{\"k\": 1}", "a "},
        {SD_TC_AUTO, SD_TP_HERMES, "a <tool_call>{\"name\": \"f\", \"arguments\": {\"k\": 1}", 0,
         "a <tool_call>{\"name\": \"f\", \"arguments\": {\"k\": 1}", NULL, NULL},
        {SD_TC_AUTO, SD_TP_HERMES, "a <tool_call>{not json}</tool_call>", 0, "a <tool_call>{not json}</tool_call>", NULL, NULL},
        {SD_TC_AUTO, SD_TP_HERMES, "<tool_call>{\"arguments\": {}}</tool_call>", 0, "<tool_call>{\"arguments\": {}}</tool_call>",
         NULL, NULL},
        {SD_TC_AUTO, SD_TP_HERMES, "x <tool_ca", 0, "x <tool_ca", NULL, NULL},
        {SD_TC_AUTO, SD_TP_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call><tool_call>[1]</tool_call>", 0,
         "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call><tool_call>[1]</tool_call>", NULL,
         "<tool_call>[1]</tool_call>"},
        {SD_TC_AUTO, SD_TP_LLAMA3_JSON, "{\"name\": \"f\", \"parameters\": {\"q\": \"a; b\"}}; {\"name\": \"g\", \"arguments\": []}",
         2, NULL, "{\"q\": \"a; b\"}", NULL},
        {SD_TC_AUTO, SD_TP_LLAMA3_JSON, "<|python_tag|>{\"name\": \"f\", \"arguments\": {\"z\": null}}", 1, NULL,
         "{\"z\": null}", NULL},
        {SD_TC_AUTO, SD_TP_LLAMA3_JSON, " {\"name\": \"f\", \"arguments\": {}}", 0, " {\"name\": \"f\", \"arguments\": {}}", NULL,
         NULL},
        {SD_TC_AUTO, SD_TP_LLAMA3_JSON, "{\"name\": \"f\"}", 0, "{\"name\": \"f\"}", NULL, NULL},
        {SD_TC_AUTO, SD_TP_LLAMA3_JSON, "Hello", 0, "Hello", NULL, NULL},
        {SD_TC_AUTO, SD_TP_MISTRAL, "Let me. [TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}]", 1, "Let me. ",
         "{\"a\": [1, 2]}", NULL},
        {SD_TC_AUTO, SD_TP_MISTRAL, "[TOOL_CALLS]junk [{\"name\": \"f\", \"arguments\": {}}] more", 1, NULL, "{}", NULL},
        {SD_TC_AUTO, SD_TP_MISTRAL, "ab [TOOL_CALLS] {broken", 0, "ab  {broken", NULL, "ab {broken"},
        {SD_TC_REQUIRED, 0, "[{\"name\": \"f\", \"parameters\": {\"s\": \"}]\"}}, {\"name\": \"g\", \"parameters\": {}}]", 2, "",
         "{\"s\": \"}]\"}", ""},
        {SD_TC_REQUIRED, 0, "[{\"name\": \"f\", \"parameters\": {\"s\": \"x\"}}, {\"name\": \"g\", \"param", 0,
         "[{\"name\": \"f\", \"parameters\": {\"s\": \"x\"}}, {\"name\": \"g\", \"param", NULL, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sd_tool_out o;
        sd_tools_out_init(&o, (sd_tool_choice)cases[i].choice, (sd_tool_parser)cases[i].parser, NULL);
        sd_tool_result r;
        sd_tools_final(&o, cases[i].text, strlen(cases[i].text), &r);
        const int content_ok = cases[i].content ? r.content && r.content_len == strlen(cases[i].content) &&
                                                      !memcmp(r.content, cases[i].content, r.content_len)
                                                : !r.content;
        SD_CHECK(r.n_calls == cases[i].n_calls && r.called == (cases[i].n_calls > 0) && content_ok &&
                     (!cases[i].args0 || (r.n_calls && !strcmp(r.calls[0].args, cases[i].args0))),
                 "parser case %zu: %d calls, content %.*s, args %s", i, r.n_calls, r.content ? (int)r.content_len : 4,
                 r.content ? r.content : "null", r.n_calls ? r.calls[0].args : "-");
        for (int c = 0; c < r.n_calls; c++)
            SD_CHECK(cases[i].parser == SD_TP_MISTRAL ? strlen(r.calls[c].id) == 9
                                                      : !strncmp(r.calls[c].id, "chatcmpl-tool-", 14) && strlen(r.calls[c].id) == 46,
                     "case %zu: id %s", i, r.calls[c].id);
        for (size_t k = 0; k < 4; k++) {
            static const size_t pieces[] = {0, 1, 3, 7};
            streamed s;
            sd_tools_out_init(&o, (sd_tool_choice)cases[i].choice, (sd_tool_parser)cases[i].parser, NULL);
            feed_all(&o, cases[i].text, pieces[k], &s);
            const char *want = cases[i].streamed_content ? cases[i].streamed_content : cases[i].content ? cases[i].content : "";
            int calls_ok = s.shapes && (cases[i].streamed_content && cases[i].n_calls == 0 ? 1 : s.n == r.n_calls);
            for (int c = 0; calls_ok && c < s.n && c < r.n_calls; c++)
                calls_ok = !strcmp(s.names[c], r.calls[c].name) && !strcmp(s.args[c], r.calls[c].args);
            SD_CHECK(!strcmp(s.content, want) && calls_ok && o.n_calls == s.n,
                     "streamed case %zu in pieces of %zu: content '%s' (want '%s'), %d calls (whole %d)", i, pieces[k],
                     s.content, want, s.n, r.n_calls);
        }
        sd_tools_result_free(&r);
    }
    /* a named call: the text is the arguments, streamed as it comes; an empty output still makes the call */
    for (int empty = 0; empty < 2; empty++) {
        sd_tool_out o;
        sd_tools_out_init(&o, SD_TC_NAMED, SD_TP_NONE, "get_weather");
        const char *t = empty ? "" : "{\"city\": \"Pa";
        streamed s;
        feed_all(&o, t, 2, &s);
        sd_tool_result r;
        sd_tools_final(&o, t, strlen(t), &r);
        SD_CHECK(s.n == 1 && !strcmp(s.names[0], "get_weather") && !strcmp(s.args[0], t) && !strcmp(s.ids[0], o.named_id) &&
                     r.n_calls == 1 && !strcmp(r.calls[0].args, t) && !strcmp(r.calls[0].id, o.named_id) && !r.called &&
                     r.content && r.content_len == 0 && s.content[0] == '\0',
                 "named (%s): %d %s", empty ? "empty" : "partial", s.n, s.args[0]);
        sd_tools_result_free(&r);
    }
    /* huge and hostile: 1 MiB of unclosed blocks and of nesting, 100 calls (64 parsed at most) */
    sd_buf big = {0};
    for (int i = 0; i < 100; i++) sd_buf_puts(&big, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
    sd_tool_out o;
    sd_tools_out_init(&o, SD_TC_AUTO, SD_TP_HERMES, NULL);
    sd_tool_result r;
    sd_tools_final(&o, big.p, big.len, &r);
    SD_CHECK(r.n_calls == 0 && r.content_len == big.len, "100 calls: more than the limit stay text (%d)", r.n_calls);
    sd_tools_result_free(&r);
    big.len = 0;
    while (big.len < (1u << 20)) sd_buf_puts(&big, "<tool_call>[[[[[[[[[[{\"a\":\"");
    for (int p = 0; p < 3; p++) {
        sd_tools_out_init(&o, p == 2 ? SD_TC_REQUIRED : SD_TC_AUTO, p == 0 ? SD_TP_HERMES : SD_TP_MISTRAL, NULL);
        sd_tools_final(&o, big.p, big.len, &r);
        SD_CHECK(r.n_calls == 0 && r.content && r.content_len == big.len, "1 MiB hostile text (%d): stays content", p);
        sd_tools_result_free(&r);
        sd_buf d = {0};
        sd_tools_out_init(&o, p == 2 ? SD_TC_REQUIRED : SD_TC_AUTO, p == 0 ? SD_TP_HERMES : SD_TP_MISTRAL, NULL);
        sd_tools_feed(&o, big.p, big.len / 2, 0, &d);
        sd_tools_feed(&o, big.p, big.len, 1, &d);
        SD_CHECK(o.n_calls == 0 && !d.oom, "1 MiB hostile text streamed (%d)", p);
        sd_buf_free(&d);
    }
    sd_buf_free(&big);
}

/* A parser that reads the request's tools, on cases whose expected values come from vLLM: whole,
 * and streamed in pieces of 1, 3 and 7 bytes (the same calls, the same content). */
typedef struct typed_case {
    const char *text;
    int n_calls;
    const char *content; /* NULL: null */
    const char *names[3], *args[3];
    int called; /* called (finish_reason "tool_calls") even without calls: deepseek_v3's begin tag alone */
} typed_case;

static void check_typed_parser(sd_tool_parser parser, const cJSON *tools, const typed_case *cases, size_t n_cases) {
    for (size_t i = 0; i < n_cases; i++) {
        sd_tool_out o;
        sd_tools_out_init(&o, SD_TC_AUTO, parser, NULL);
        o.tools = tools;
        sd_tool_result r;
        sd_tools_final(&o, cases[i].text, strlen(cases[i].text), &r);
        const char *want = cases[i].content;
        int ok = r.n_calls == cases[i].n_calls && r.called == (r.n_calls > 0 || cases[i].called) &&
                 (want ? r.content && r.content_len == strlen(want) && !memcmp(r.content, want, r.content_len) : !r.content);
        for (int c = 0; ok && c < r.n_calls && c < 3; c++)
            ok = !strcmp(r.calls[c].name, cases[i].names[c]) && !strcmp(r.calls[c].args, cases[i].args[c]) &&
                 !strncmp(r.calls[c].id, "chatcmpl-tool-", 14);
        SD_CHECK(ok, "parser %d case %zu: %d calls, content %.*s, args %s", (int)parser, i, r.n_calls,
                 r.content ? (int)r.content_len : 4, r.content ? r.content : "null", r.n_calls ? r.calls[0].args : "-");
        for (size_t k = 0; k < 4; k++) {
            static const size_t pieces[] = {0, 1, 3, 7};
            streamed s;
            sd_tools_out_init(&o, SD_TC_AUTO, parser, NULL);
            o.tools = tools;
            feed_all(&o, cases[i].text, pieces[k], &s);
            int calls_ok = s.shapes && s.n == r.n_calls;
            for (int c = 0; calls_ok && c < s.n; c++)
                calls_ok = !strcmp(s.names[c], r.calls[c].name) && !strcmp(s.args[c], r.calls[c].args);
            SD_CHECK(!strcmp(s.content, want ? want : "") && calls_ok,
                     "parser %d streamed case %zu in pieces of %zu: content '%s', %d calls (whole %d)", (int)parser, i,
                     pieces[k], s.content, s.n, r.n_calls);
        }
        sd_tools_result_free(&r);
    }
}

/* glm45 (vLLM's glm4_moe_tool_parser: GLM-4.5 / 4.6): the expected values are what vLLM's
 * extract_tool_calls returns for each text with the tools below (string-typed values kept as written,
 * others json.loads, else ast.literal_eval, else the stripped text; a block without "\n" skipped; a
 * schema or value Python raises on makes the whole output content). Whole, and streamed in pieces of
 * 1, 3 and 7 bytes: the same calls, the content before the first block (whitespace only: null). */
static void test_glm45_parser(void) {
    static const char tools_json[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},\"opts\":{\"type\":\"object\"}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"bad\",\"parameters\":{\"properties\":{\"x\":true}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"noparams\",\"parameters\":null}}]";
    static const typed_case cases[] = {
    {"I'll check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value> Paris </arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
     1, "I'll check.\n", {"get_weather"}, {"{\"city\": \" Paris \", \"days\": 3}"}, 0},
    {"\n\n<tool_call>get_weather\n<arg_key>days</arg_key><arg_value>1.0</arg_value></tool_call>\nand\n<tool_call>other_fn\n<arg_key>q</arg_key>\n<arg_value>{'a': (1, 2), \"b\": True, 3: None, 2.5: 'x'}</arg_value>\n<arg_key>q</arg_key><arg_value>[1e400, -0x1F, 0o17, 1_000, 0b101]</arg_value>\n<arg_key>p</arg_key><arg_value>{'a': (1, 2), \"b\": True, 3: None, 2.5: 'x', -1: 1e5, 'a': []}</arg_value><arg_key>r</arg_key><arg_value>h\303\251llo \"w\"</arg_value>\n</tool_call>",
     2, NULL, {"get_weather", "other_fn"}, {"{\"days\": 1.0}", "{\"q\": [Infinity, -31, 15, 1000, 5], \"p\": {\"a\": [], \"b\": true, \"3\": null, \"2.5\": \"x\", \"-1\": 100000.0}, \"r\": \"h\303\251llo \\\"w\\\"\"}"}, 0},
    {"<tool_call>get_weather</tool_call>",
     0, "<tool_call>get_weather</tool_call>", {}, {}, 0},
    {"<tool_call>x</tool_call> <tool_call>get_weather\n</tool_call>",
     1, NULL, {"get_weather"}, {"{}"}, 0},
    {"text <tool_call>get_weather\n<arg_key>city</arg_key><arg_value>Rome",
     0, "text <tool_call>get_weather\n<arg_key>city</arg_key><arg_value>Rome", {}, {}, 0},
    {"<tool_call>bad\n<arg_key>x</arg_key><arg_value>1</arg_value></tool_call>",
     0, "<tool_call>bad\n<arg_key>x</arg_key><arg_value>1</arg_value></tool_call>", {}, {}, 0},
    {"ok <tool_call>f\n<arg_key>s</arg_key><arg_value>{1, 2}</arg_value></tool_call>",
     0, "ok <tool_call>f\n<arg_key>s</arg_key><arg_value>{1, 2}</arg_value></tool_call>", {}, {}, 0},
    {"<tool_call>f\n<arg_key>s</arg_key><arg_value>b'xy'</arg_value></tool_call>",
     0, "<tool_call>f\n<arg_key>s</arg_key><arg_value>b'xy'</arg_value></tool_call>", {}, {}, 0},
    {"<tool_call>f\n<arg_key> a </arg_key>  <arg_value> 'it\\'s' </arg_value><arg_key>b</arg_key><arg_value>NaN</arg_value><arg_key>c</arg_key><arg_value>nope</arg_value><arg_key>d</arg_key><arg_value>-5</arg_value><arg_key>e</arg_key><arg_value>{\"k\": [1, 2.50, \"\\u00e9\\ud83d\\ude00\"], \"k\": -0.0}</arg_value><arg_key>f</arg_key><arg_value>007</arg_value><arg_key>g</arg_key><arg_value>1e16</arg_value><arg_key>h</arg_key><arg_value>0.00001</arg_value><arg_key>i</arg_key><arg_value>123456789012345678901234567890</arg_value><arg_key>j</arg_key><arg_value>1e22</arg_value></tool_call>",
     1, NULL, {"f"}, {"{\"a\": \"it's\", \"b\": NaN, \"c\": \"nope\", \"d\": -5, \"e\": {\"k\": -0.0}, \"f\": \"007\", \"g\": 1e+16, \"h\": 1e-05, \"i\": 123456789012345678901234567890, \"j\": 1e+22}"}, 0},
    {"<tool_call>f\n<arg_key>a</arg_key>x<arg_key>b</arg_key>\n<arg_value>2</arg_value></tool_call>",
     1, NULL, {"f"}, {"{\"a</arg_key>x<arg_key>b\": 2}"}, 0},
    {"<tool_call>noparams\n<arg_key>city</arg_key><arg_value>true</arg_value></tool_call>",
     1, NULL, {"noparams"}, {"{\"city\": true}"}, 0},
    {"Hi <tool_call>  get_weather \t\n<arg_key>city</arg_key><arg_value>\n\nLyon\n</arg_value><arg_key>opts</arg_key><arg_value>{\"u\": \"C\"}</arg_value></tool_call>",
     1, "Hi ", {"get_weather"}, {"{\"city\": \"\\n\\nLyon\\n\", \"opts\": {\"u\": \"C\"}}"}, 0},
    {"<tool_call>f\n<arg_key>a</arg_key><arg_value>(1,)</arg_value><arg_key>b</arg_key><arg_value>u'x' \"y\"</arg_value><arg_key>c</arg_key><arg_value>{}</arg_value><arg_key>d</arg_key><arg_value>[1, 2,]</arg_value><arg_key>e</arg_key><arg_value>'''t\nq'''</arg_value><arg_key>g</arg_key><arg_value>r'\\d+'</arg_value><arg_key>h</arg_key><arg_value>'\\x41\\101\\u00e9\\q'</arg_value><arg_key>i</arg_key><arg_value>.5</arg_value><arg_key>j</arg_key><arg_value>[1,]</arg_value><arg_key>k</arg_key><arg_value>\"a\\u0000b\\u001f\"</arg_value></tool_call>",
     1, NULL, {"f"}, {"{\"a\": [1], \"b\": \"xy\", \"c\": {}, \"d\": [1, 2], \"e\": \"t\\nq\", \"g\": \"\\\\d+\", \"h\": \"AA\303\251\\\\q\", \"i\": 0.5, \"j\": [1], \"k\": \"a\\u0000b\\u001f\"}"}, 0},
    {"<tool_call>f\n<arg_key>a</arg_key><arg_value>True False</arg_value><arg_key>b</arg_key><arg_value>-True</arg_value><arg_key>c</arg_key><arg_value>1_</arg_value><arg_key>d</arg_key><arg_value>0x</arg_value><arg_key>e</arg_key><arg_value>[1, 2</arg_value><arg_key>f</arg_key><arg_value>'x\ny'</arg_value><arg_key>g</arg_key><arg_value>{'a' 1}</arg_value><arg_key>h</arg_key><arg_value>1abc</arg_value><arg_key>i</arg_key><arg_value>--1</arg_value><arg_key>j</arg_key><arg_value>\"\\x41\"</arg_value></tool_call>",
     1, NULL, {"f"}, {"{\"a\": \"True False\", \"b\": \"-True\", \"c\": \"1_\", \"d\": \"0x\", \"e\": \"[1, 2\", \"f\": \"'x\\ny'\", \"g\": \"{'a' 1}\", \"h\": \"1abc\", \"i\": \"--1\", \"j\": \"A\"}"}, 0},
    };
    cJSON *tools = cJSON_Parse(tools_json);
    SD_CHECK(tools != NULL, "glm45 tools parse");
    check_typed_parser(SD_TP_GLM45, tools, cases, sizeof cases / sizeof cases[0]);
    /* no tools at all: nothing is string-typed; 65 calls: more than the limit stay text */
    sd_tool_out o;
    sd_tools_out_init(&o, SD_TC_AUTO, SD_TP_GLM45, NULL);
    sd_tool_result r;
    static const char untyped[] = "<tool_call>get_weather\n<arg_key>city</arg_key><arg_value> 12 </arg_value></tool_call>";
    sd_tools_final(&o, untyped, strlen(untyped), &r);
    SD_CHECK(r.n_calls == 1 && !strcmp(r.calls[0].args, "{\"city\": 12}"), "glm45 without tools: %s",
             r.n_calls ? r.calls[0].args : "-");
    sd_tools_result_free(&r);
    sd_buf big = {0};
    for (int i = 0; i <= SD_TOOLS_MAX_CALLS; i++) sd_buf_puts(&big, "<tool_call>f\n</tool_call>");
    sd_tools_final(&o, big.p, big.len, &r);
    SD_CHECK(r.n_calls == 0 && r.content_len == big.len, "glm45: %d calls past the limit", r.n_calls);
    sd_tools_result_free(&r);
    /* hostile: 1 MiB of open tags and of nesting, whole and streamed */
    big.len = 0;
    while (big.len < (1u << 20)) sd_buf_puts(&big, "<tool_call>f\n<arg_key>k</arg_key><arg_value>[[[[[{(((<arg_key>");
    sd_buf_puts(&big, "</tool_call>");
    sd_tools_final(&o, big.p, big.len, &r);
    SD_CHECK(r.n_calls == 1 && !strcmp(r.calls[0].args, "{}"), "glm45 1 MiB: %d calls", r.n_calls);
    sd_tools_result_free(&r);
    sd_buf d = {0};
    sd_tools_feed(&o, big.p, big.len / 2, 0, &d);
    sd_tools_feed(&o, big.p, big.len, 1, &d);
    SD_CHECK(o.n_calls == 1 && !d.oom, "glm45 1 MiB streamed: %d calls", o.n_calls);
    sd_buf_free(&d);
    sd_buf_free(&big);
    cJSON_Delete(tools);
}

/* qwen3_coder (vLLM's qwen3coder_tool_parser: Qwen3-Coder): expected values are what vLLM's
 * extract_tool_calls returns with the tools below (types converted as declared, including a
 * "parameters" without "properties" read as the properties, "null" for any type, int() / float()
 * / bool / json.loads / ast.literal_eval and their fallbacks to the text; an unclosed block or
 * function running to the end; a function or parameter without ">" or a "properties" list naming
 * the parameter, where vLLM raises, making the output content; nan kept as text, inf raising). */
static void test_qwen3_coder_parser(void) {
    static const char tools_json[] = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \" Integer \"}, \"temp\": {\"type\": \"number\"}, \"ok\": {\"type\": \"boolean\"}, \"opts\": {\"type\": \"object\"}, \"tags\": {\"type\": \"array\"}, \"any\": {\"type\": \"whatever\"}, \"nt\": {\"type\": [\"string\", \"null\"]}, \"u\": {\"enum\": [\"a\"]}}}}}, {\"type\": \"function\", \"function\": {\"name\": \"flat\", \"parameters\": {\"type\": \"object\", \"x\": {\"type\": \"integer\"}}}}, {\"type\": \"function\", \"function\": {\"name\": \"badprops\", \"parameters\": {\"properties\": [\"q\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"noparams\", \"parameters\": null}}]";
    static const typed_case cases[] = {
    {"Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n 0_07 \n</parameter>\n</function>\n</tool_call>",
     1, "Let me check.\n", {"get_weather"}, {"{\"city\": \"Paris\", \"days\": 7}"}, 0},
    {"<tool_call>\n<function=get_weather>\n<parameter=temp>\n2.50\n</parameter>\n<parameter=ok>\nTRUE\n</parameter>\n<parameter=opts>\n{\"a\": [1, 2.0]}\n</parameter>\n<parameter=tags>\n['x', (1, 2)]\n</parameter>\n<parameter=any>\n0x1F\n</parameter>\n<parameter=city>\nNull\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=flat>\n<parameter=x>\n12\n</parameter>\n<parameter=type>\n5\n</parameter>\n</function>\n</tool_call>",
     2, NULL, {"get_weather", "flat"}, {"{\"temp\": 2.5, \"ok\": true, \"opts\": {\"a\": [1, 2.0]}, \"tags\": [\"x\", [1, 2]], \"any\": 31, \"city\": null}", "{\"x\": 12, \"type\": \"5\"}"}, 0},
    {"<tool_call>\n<function=get_weather>\n<parameter=temp>\n1e3\n</parameter>\n<parameter=days>\nseven\n</parameter>\n<parameter=ok>\nyes\n</parameter>\n<parameter=opts>\nnot json\n</parameter>\n<parameter=nt>\n[1]\n</parameter>\n<parameter=u>\n7\n</parameter>\n<parameter=unknown>\n\n two lines \n\n</parameter>\n</function>\n</tool_call>",
     1, NULL, {"get_weather"}, {"{\"temp\": 1000, \"days\": \"seven\", \"ok\": false, \"opts\": \"not json\", \"nt\": [1], \"u\": \"7\", \"unknown\": \"\\n two lines \\n\"}"}, 0},
    {"<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n<parameter=days>\n3\n</function>\n</tool_call>",
     1, NULL, {"get_weather"}, {"{\"city\": \"Rome\", \"days\": 3}"}, 0},
    {"<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n",
     1, NULL, {"get_weather"}, {"{\"city\": \"Oslo\"}"}, 0},
    {"text <function=noparams>\n<parameter=a>\n1\n</parameter>\n</function> and <tool_call><function=get_weather></function></tool_call>",
     1, "text <function=noparams>\n<parameter=a>\n1\n</parameter>\n</function> and ", {"get_weather"}, {"{}"}, 0},
    {"no call here <tool_call> at all",
     0, "no call here <tool_call> at all", {}, {}, 0},
    {"<tool_call>\n<function=get_weather\n</function>\n</tool_call>",
     0, "<tool_call>\n<function=get_weather\n</function>\n</tool_call>", {}, {}, 0},
    {"<tool_call>\n<function=get_weather>\n<parameter=city\n</parameter>\n</function>\n</tool_call>",
     0, "<tool_call>\n<function=get_weather>\n<parameter=city\n</parameter>\n</function>\n</tool_call>", {}, {}, 0},
    {"<tool_call>\n<function=badprops>\n<parameter=q>\n1\n</parameter>\n</function>\n</tool_call>",
     0, "<tool_call>\n<function=badprops>\n<parameter=q>\n1\n</parameter>\n</function>\n</tool_call>", {}, {}, 0},
    {"<tool_call>\n<function=badprops>\n<parameter=r>\n1\n</parameter>\n</function>\n</tool_call>",
     1, NULL, {"badprops"}, {"{\"r\": \"1\"}"}, 0},
    {"<tool_call>\n<function=get_weather>\n<parameter=temp>\nnan\n</parameter>\n</function>\n</tool_call>",
     1, NULL, {"get_weather"}, {"{\"temp\": \"nan\"}"}, 0},
    {"<tool_call>\n<function=get_weather>\n<parameter=temp>\n-inf\n</parameter>\n</function>\n</tool_call>",
     0, "<tool_call>\n<function=get_weather>\n<parameter=temp>\n-inf\n</parameter>\n</function>\n</tool_call>", {}, {}, 0},
    {"<tool_call>\n<function=get_weather>\n<parameter=any>\n{1, 2}\n</parameter>\n</function>\n</tool_call>",
     0, "<tool_call>\n<function=get_weather>\n<parameter=any>\n{1, 2}\n</parameter>\n</function>\n</tool_call>", {}, {}, 0},
    {"<tool_call>\n<function=get_weather>\n<parameter=temp>\n 1_0.5e1 \n</parameter>\n<parameter=days>\n-0\n</parameter>\n<parameter=temp>\n1e20\n</parameter>\n</function>\n</tool_call>\n",
     1, NULL, {"get_weather"}, {"{\"temp\": 100000000000000000000, \"days\": 0}"}, 0},
    };
    cJSON *tools = cJSON_Parse(tools_json);
    SD_CHECK(tools != NULL, "qwen3_coder tools parse");
    check_typed_parser(SD_TP_QWEN3_CODER, tools, cases, sizeof cases / sizeof cases[0]);
    /* 65 calls: more than the limit stay text; 1 MiB of open tags, whole and streamed */
    sd_tool_out o;
    sd_tools_out_init(&o, SD_TC_AUTO, SD_TP_QWEN3_CODER, NULL);
    o.tools = tools;
    sd_tool_result r;
    sd_buf big = {0};
    for (int i = 0; i <= SD_TOOLS_MAX_CALLS; i++) sd_buf_puts(&big, "<tool_call><function=f></function></tool_call>");
    sd_tools_final(&o, big.p, big.len, &r);
    SD_CHECK(r.n_calls == 0 && r.content_len == big.len, "qwen3_coder: %d calls past the limit", r.n_calls);
    sd_tools_result_free(&r);
    big.len = 0;
    sd_buf_puts(&big, "<tool_call><function=get_weather>");
    while (big.len < (1u << 20)) sd_buf_puts(&big, "<parameter=opts>[[[[{(<parameter=tags>");
    sd_tools_final(&o, big.p, big.len, &r);
    SD_CHECK(r.n_calls == 1, "qwen3_coder 1 MiB: %d calls", r.n_calls);
    sd_tools_result_free(&r);
    sd_buf d = {0};
    sd_tools_feed(&o, big.p, big.len / 2, 0, &d);
    sd_tools_feed(&o, big.p, big.len, 1, &d);
    SD_CHECK(o.n_calls == 1 && !d.oom, "qwen3_coder 1 MiB streamed: %d calls", o.n_calls);
    sd_buf_free(&d);
    sd_buf_free(&big);
    cJSON_Delete(tools);
}

/* deepseek_v3 (vLLM's deepseekv3_tool_parser: DeepSeek-V3): expected values are what vLLM's
 * extract_tool_calls returns (one-line names and arguments, the arguments as written; a type other
 * than "function", which vLLM's ToolCall refuses, makes the output content; the calls' begin tag
 * alone still counts as called). */
static void test_deepseek_v3_parser(void) {
    static const typed_case cases[] = {
    {"Let me look.<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>get_weather\n```json\n{\"city\": \"Paris\", \"n\": 1.0}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>\n<\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>search\n```json\n{\"q\": \"\303\251\"}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234><\357\275\234tool\342\226\201calls\342\226\201end\357\275\234>",
     2, "Let me look.", {"get_weather", "search"}, {"{\"city\": \"Paris\", \"n\": 1.0}", "{\"q\": \"\303\251\"}"}, 1},
    {"<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>f\n```json\n{\"a\":\n1}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234><\357\275\234tool\342\226\201calls\342\226\201end\357\275\234>",
     0, NULL, {}, {}, 1},
    {"<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>a<\357\275\234tool\342\226\201sep\357\275\234>b\n```json\n{}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>",
     0, "<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>a<\357\275\234tool\342\226\201sep\357\275\234>b\n```json\n{}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>", {}, {}, 0},
    {"<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>tool<\357\275\234tool\342\226\201sep\357\275\234>f\n```json\n{}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>",
     0, "<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>tool<\357\275\234tool\342\226\201sep\357\275\234>f\n```json\n{}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>", {}, {}, 0},
    {"no calls <\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>f\n```json\n{}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>",
     0, "no calls <\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>f\n```json\n{}\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>", {}, {}, 0},
    {"<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234>nothing well-formed",
     0, NULL, {}, {}, 1},
    {"<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>f\n```json\nnot json at all\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>g\n```json\n[]\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>",
     0, "<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>f\n```json\nnot json at all\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>g\n```json\n[]\n```<\357\275\234tool\342\226\201call\342\226\201end\357\275\234>", {}, {}, 0},
    {"<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234><\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function<\357\275\234tool\342\226\201sep\357\275\234>f\n```json\n{}\n```",
     0, NULL, {}, {}, 1},
    };
    check_typed_parser(SD_TP_DEEPSEEK_V3, NULL, cases, sizeof cases / sizeof cases[0]);
    /* 1 MiB of call tags, most on one line: no call, in linear time */
    sd_buf big = {0};
    sd_buf_puts(&big, "<\357\275\234tool\342\226\201calls\342\226\201begin\357\275\234>");
    static const char call[] = "<\357\275\234tool\342\226\201call\342\226\201begin\357\275\234>function"
                               "<\357\275\234tool\342\226\201sep\357\275\234>f";
    for (int k = 0; big.len < (1u << 20); k++) sd_buf_puts(&big, k % 1000 ? call : "\n```json\n");
    sd_tool_out o;
    sd_tools_out_init(&o, SD_TC_AUTO, SD_TP_DEEPSEEK_V3, NULL);
    sd_tool_result r;
    sd_tools_final(&o, big.p, big.len, &r);
    SD_CHECK(r.called && r.n_calls == 0 && !r.content, "deepseek_v3 1 MiB: %d calls", r.n_calls);
    sd_tools_result_free(&r);
    sd_buf_free(&big);
    /* the --tool-call-parser names */
    static const struct { const char *name; sd_tool_parser p; } names[] = {
        {"hermes", SD_TP_HERMES}, {"llama3_json", SD_TP_LLAMA3_JSON}, {"mistral", SD_TP_MISTRAL}, {"glm45", SD_TP_GLM45},
        {"qwen3_coder", SD_TP_QWEN3_CODER}, {"deepseek_v3", SD_TP_DEEPSEEK_V3}, {"deepseekv3", SD_TP_NONE},
        {"glm4_moe", SD_TP_NONE}, {"", SD_TP_NONE}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        SD_CHECK(sd_tools_parser_named(names[i].name) == names[i].p &&
                     (names[i].p == SD_TP_NONE || strstr(SD_TOOL_PARSER_NAMES, names[i].name)),
                 "parser name '%s'", names[i].name);
}

/* vLLM's add_generation_prompt / continue_final_message: parsed (chat), the two together refused, and
 * sd_api_continue_final's cut of a rendered prompt (transformers' rule: after the last occurrence of
 * the last message's stripped content; empty cuts nothing; absent is a 400). */
static void test_continue_final(void) {
    sd_api_request r;
    sd_api_error e;
    static const char *const msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                                    "{\"role\":\"assistant\",\"content\":\" ab \\n\"}]";
    char body[512];
    snprintf(body, sizeof body, "{%s}", msgs);
    SD_CHECK(parse(body, 1, &r, &e) == 200 && r.add_generation_prompt == 1 && r.continue_final_message == 0,
             "defaults: add_generation_prompt true, continue_final_message false");
    sd_api_request_free(&r);
    snprintf(body, sizeof body, "{%s, \"add_generation_prompt\": false, \"continue_final_message\": true}", msgs);
    SD_CHECK(parse(body, 1, &r, &e) == 200 && !r.add_generation_prompt && r.continue_final_message, "both read");
    static const struct { const char *text; size_t want; int code; } cuts[] = {
        {"<u>hi</u><a> ab \n</a>", 15, 0},      /* after "ab" (the content stripped) */
        {"ab ab <a> ab </a>", 12, 0},           /* the last occurrence */
        {"<u>hi</u><a></a>", 0, 400},            /* the template did not write it */
        {"", 0, 400},
    };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        size_t len = strlen(cuts[i].text);
        int code = sd_api_continue_final(&r, cuts[i].text, &len, &e);
        SD_CHECK(code == cuts[i].code && (code || len == cuts[i].want) &&
                     (!code || (e.http == 400 && strstr(e.message, "final message"))),
                 "cut %zu: code %d len %zu, want %d %zu", i, code, len, cuts[i].code, cuts[i].want);
    }
    r.continue_final_message = 0; /* off: no cut */
    size_t len = 5;
    SD_CHECK(sd_api_continue_final(&r, "hello", &len, &e) == 0 && len == 5, "off: no cut");
    sd_api_request_free(&r);
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"assistant\",\"content\":\" \\t\"}], "
             "\"add_generation_prompt\": false, \"continue_final_message\": true}");
    SD_CHECK(parse(body, 1, &r, &e) == 200, "a white-space content parses");
    len = 7;
    SD_CHECK(sd_api_continue_final(&r, "<a> \t</a>", &len, &e) == 0 && len == 7, "empty after stripping: no cut");
    sd_api_request_free(&r);
    snprintf(body, sizeof body, "{%s, \"continue_final_message\": true}", msgs);
    SD_CHECK(parse(body, 1, &r, &e) == 400 && !strcmp(e.param, "continue_final_message"),
             "continue_final_message with add_generation_prompt (default true): 400");
    snprintf(body, sizeof body, "{%s, \"continue_final_message\": \"yes\"}", msgs);
    SD_CHECK(parse(body, 1, &r, &e) == 400, "continue_final_message not a boolean: 400");
}

/* sd_api_tokenize_body: exactly the fields of vLLM's TokenizeChatRequest / TokenizeCompletionRequest
 * survive, so sd_api_parse ignores generation-only fields of any type (a 400 on the whole body) and
 * still refuses a malformed field that /tokenize reads. */
static void test_tokenize_body(void) {
    static const char *const junk = "\"n\": 1000, \"temperature\": \"hot\", \"max_tokens\": -5, \"stream\": \"x\", "
                                    "\"logprobs\": \"many\", \"stop\": 7, \"seed\": -1.5, \"best_of\": [1], "
                                    "\"response_format\": 3, \"tool_choice\": 7, \"speculative_config\": 1";
    static const char *const chat_fields[] = {"model", "messages", "add_generation_prompt", "continue_final_message",
                                              "add_special_tokens", "chat_template", "chat_template_kwargs", "tools",
                                              "return_token_strs"};
    static const char *const prompt_fields[] = {"model", "prompt", "add_special_tokens", "return_token_strs"};
    char body[1024];
    for (int chat = 0; chat < 2; chat++) {
        snprintf(body, sizeof body,
                 "{%s, \"model\": \"kjv-target\", \"prompt\": \"p\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
                 "\"add_generation_prompt\": true, \"continue_final_message\": false, \"add_special_tokens\": true, "
                 "\"chat_template\": null, \"chat_template_kwargs\": {\"a\": 1}, \"tools\": [], "
                 "\"return_token_strs\": true}", junk);
        cJSON *root = cJSON_Parse(body);
        char *kept = sd_api_tokenize_body(root, chat);
        cJSON *k = kept ? cJSON_Parse(kept) : NULL;
        const char *const *want = chat ? chat_fields : prompt_fields;
        const int n_want = chat ? (int)(sizeof chat_fields / sizeof *chat_fields) : 4;
        SD_CHECK(k && cJSON_GetArraySize(k) == n_want, "%s: %d fields kept, want %d", chat ? "chat" : "prompt",
                 k ? cJSON_GetArraySize(k) : -1, n_want);
        for (int i = 0; k && i < n_want; i++)
            SD_CHECK(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(k, want[i]),
                                   cJSON_GetObjectItemCaseSensitive(root, want[i]), 1),
                     "%s: %s kept as given", chat ? "chat" : "prompt", want[i]);
        sd_api_request r;
        sd_api_error e;
        SD_CHECK(parse(body, chat, &r, &e) == 400, "%s: the whole body is refused (a junk field)", chat ? "chat" : "prompt");
        SD_CHECK(kept && parse(kept, chat, &r, &e) == 200, "%s: the kept fields parse: %s", chat ? "chat" : "prompt",
                 e.message);
        if (kept) sd_api_request_free(&r);
        cJSON_free(kept);
        cJSON_Delete(k);
        cJSON_Delete(root);
    }
    /* a read field still checked, whatever junk comes with it */
    static const struct { const char *field; const char *param; } bad[] = {
        {"\"tools\": \"x\"", "tools"},
        {"\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": 3}}]", "tools"},
        {"\"add_generation_prompt\": \"y\"", "add_generation_prompt"},
        {"\"continue_final_message\": 1", "continue_final_message"},
        {"\"chat_template_kwargs\": []", "chat_template_kwargs"},
        {"\"chat_template\": \"{{ x }}\"", "chat_template"},
        {"\"model\": 5", "model"},
        {"\"messages\": [{\"role\": \"bogus\", \"content\": \"x\"}]", "messages"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(body, sizeof body, "{%s, %s, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", junk,
                 bad[i].field); /* the bad field first: cJSON reads the first of two equal keys */
        cJSON *root = cJSON_Parse(body);
        char *kept = sd_api_tokenize_body(root, 1);
        sd_api_request r;
        sd_api_error e;
        int code = kept ? parse(kept, 1, &r, &e) : 0;
        SD_CHECK(code == 400 && !strcmp(e.param, bad[i].param), "%s: %d naming '%s', want 400 '%s'", bad[i].field, code,
                 code == 400 ? e.param : "", bad[i].param);
        if (code == 200) sd_api_request_free(&r);
        cJSON_free(kept);
        cJSON_Delete(root);
    }
    char *none = sd_api_tokenize_body(NULL, 1);
    SD_CHECK(none && !strcmp(none, "{}"), "a NULL root: an empty object, %s", none ? none : "NULL");
    cJSON_free(none);
}

int main(void) {
    test_continue_final();
    test_tokenize_body();
    test_framing();
    test_nul();
    test_valid();
    test_invalid();
    test_batch();
    test_unsupported();
    test_guided();
    test_procs();
    test_stop_reason_json();
    test_logprobs_json();
    test_usage_json();
    test_tree();
    test_message_utf8();
    test_head();
    test_host_required();
    test_prep_lanes();
    test_utf8();
    test_stopper();
    test_json_escape();
    test_mutations();
    test_tools_parse();
    test_pydump();
    test_glm45_parser();
    test_qwen3_coder_parser();
    test_deepseek_v3_parser();
    test_tool_parsers();
    return sd_test_done();
}

/* fuzz_server.c — fuzz target: the HTTP server's request checks without sockets
 * (tools/server/sd_server_request.c): the head (method, path, Authorization,
 * Content-Length: sd_api_check_head) and the body (an OpenAI completions or chat
 * request: sd_api_parse), then what the server does next with a chat request: render
 * and tokenize it with a chat template family (specdec_chat_tokenize on the bundled
 * tokenizer).
 *
 * Input: byte 0 = flags (bit 0 chat endpoint, bit 1 an API key is set, bit 2 the served
 * model id is checked, bits 3-4 the body limit, bits 5-7 the chat family: the i-th name
 * of specdec_chat_template_name, 7 = the tokenizer's own); then four NUL-terminated
 * fields method, url, Authorization, Content-Length (an empty header field = absent);
 * the rest, NULs included, is the body.
 *
 * Checked: every input either passes (head admitted, body parsed) into a request whose
 * fields are within their documented ranges (the logits processors' values as
 * specdec_generate_params_validate accepts them), or is answered with an HTTP 4xx status and
 * an error whose message is non-empty valid UTF-8 and whose JSON (sd_resp_error_json,
 * what the client receives) parses back to the same message, type, param and code; a
 * refused body leaves the request empty; both checks are deterministic; a chat request
 * renders or is refused with INVALID_ARGUMENT (the template's objection), never another
 * status, and its ids are in the vocabulary; so does its JSON form with tools and
 * chat_template_kwargs (specdec_chat_apply_json; UNSUPPORTED too, with a message); tool_choice
 * and the tools count are within range; a chat body's bytes, taken as a model's output, go through
 * every tool-call parser whole and streamed (sd_fsrv_tool_text); a completions prompt is one or a batch (texts or
 * id lists, not mixed) within SD_API_MAX_PROMPTS, n and prompts x n within their caps; a
 * token-id prompt (the batch's last), taken as generated tokens,
 * goes through the logprobs writers (both shapes parse, every token's text is valid UTF-8); the
 * body as POST /tokenize reads it (sd_api_tokenize_body) parses or is a well-formed 4xx, and a body
 * the generation endpoint takes gives /tokenize the same conversation.
 * No leak (ASan). Returns 0 when the head and
 * body both pass, 1 otherwise (the seed runner's ok_ / bad_ names). */
#include <math.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "fuzz_common.h"
#include "sd_server_internal.h"
#include "sd_server_request.h"
#include "sd_server_tools.h"
#include "specdec.h"

#ifndef SD_FUZZ_MODELS_DIR
#define SD_FUZZ_MODELS_DIR "models"
#endif

#define SD_FSRV_KEY "s3cret"
#define SD_FSRV_MODEL "kjv-target"

static specdec_tokenizer *g_tok;
static int32_t g_vocab;

int sd_fuzz_init(void) {
    if (specdec_tokenizer_load(SD_FUZZ_MODELS_DIR "/kjv-target", &g_tok) != SPECDEC_OK) {
        fprintf(stderr, "fuzz_server: cannot load the bundled tokenizer: %s\n", specdec_last_error());
        return 1;
    }
    g_vocab = specdec_tokenizer_vocab_size(g_tok);
    return g_vocab > 0 ? 0 : 1;
}

/* The error the client would get: a 4xx, a message, and JSON that says the same. */
static void sd_fsrv_check_error(const sd_api_error *e, int code) {
    sd_fuzz_require(code >= 400 && code <= 499 && e->http == code);
    sd_fuzz_require(e->type != NULL && e->message[0] != '\0');
    sd_fuzz_require(sd_fuzz_utf8_ok(e->message, strlen(e->message)));
    sd_buf b = {0};
    sd_resp_error_json(&b, e);
    sd_fuzz_require(!b.oom && b.p != NULL);
    cJSON *root = cJSON_ParseWithLength(b.p, b.len);
    sd_fuzz_require(root != NULL);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(err, "message");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(err, "type");
    const cJSON *param = cJSON_GetObjectItemCaseSensitive(err, "param");
    const cJSON *ecode = cJSON_GetObjectItemCaseSensitive(err, "code");
    sd_fuzz_require(cJSON_IsString(msg) && !strcmp(msg->valuestring, e->message));
    sd_fuzz_require(cJSON_IsString(type) && !strcmp(type->valuestring, e->type));
    sd_fuzz_require(e->param[0] ? cJSON_IsString(param) && !strcmp(param->valuestring, e->param) : cJSON_IsNull(param));
    sd_fuzz_require(e->code ? cJSON_IsString(ecode) && !strcmp(ecode->valuestring, e->code) : cJSON_IsNull(ecode));
    cJSON_Delete(root);
    sd_buf_free(&b);
}

/* Reference for the declared length: decimal digits, saturating. */
static int sd_fsrv_length_over(const char *cl, size_t max) {
    size_t v = 0;
    for (; *cl >= '0' && *cl <= '9'; cl++) {
        if (v > (SIZE_MAX - 9) / 10) return 1;
        v = v * 10 + (size_t)(*cl - '0');
    }
    return v > max;
}

static int sd_fsrv_head(const sd_api_head *h, const char *key, size_t max_body) {
    sd_endpoint ep, ep2;
    sd_api_error e, e2;
    int rc = sd_api_check_head(h, key, max_body, &ep, &e);
    int rc2 = sd_api_check_head(h, key, max_body, &ep2, &e2);
    sd_fuzz_require(rc == rc2 && ep == ep2 && (rc == 0 || !strcmp(e.message, e2.message)));
    sd_fuzz_require(rc == 0 || rc == 401 || rc == 404 || rc == 405 || rc == 413 || rc == 415);
    sd_fuzz_require((int)ep >= 0 && ep < SD_EP_COUNT);
    sd_fuzz_require(rc != 0 || sd_api_endpoint_of(h->url) == ep); /* an admitted target routes by its path */
    /* the scheme in any case, then one or more spaces, then the key (RFC 9110) */
    const char *tok = h->authorization && !strncasecmp(h->authorization, "Bearer ", 7) ? h->authorization + 7 : NULL;
    while (tok && *tok == ' ') tok++;
    int authorized = !key || ep == SD_EP_HEALTH || ep == SD_EP_PING || (tok && !strcmp(tok, key));
    sd_fuzz_require((rc == 401) == !authorized);
    if (rc == 404) sd_fuzz_require(ep == SD_EP_OTHER);
    if (rc == 0) {
        sd_fuzz_require(ep != SD_EP_OTHER);
        sd_fuzz_require(!h->content_length || !sd_fsrv_length_over(h->content_length, max_body));
    } else {
        sd_fsrv_check_error(&e, rc);
    }
    return rc;
}

static int sd_fsrv_role_ok(const char *s) {
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (!strcmp(s, roles[i])) return 1;
    return 0;
}

static void sd_fsrv_check_messages(const sd_api_request *r) {
    sd_fuzz_require(r->n_messages >= 1 && r->messages != NULL && !r->prompts && r->n_prompts == 0);
    for (int i = 0; i < r->n_messages; i++) {
        const sd_api_message *m = &r->messages[i];
        sd_fuzz_require(m->role && sd_fsrv_role_ok(m->role) && m->content);
        sd_fuzz_require(sd_fuzz_utf8_ok(m->content, strlen(m->content)));
    }
}

static void sd_fsrv_check_prompt(const sd_api_request *r) {
    sd_fuzz_require(!r->messages && r->n_messages == 0);
    sd_fuzz_require(r->n_prompts >= 1 && r->n_prompts <= SD_API_MAX_PROMPTS && r->prompts != NULL);
    for (int k = 0; k < r->n_prompts; k++) {
        const sd_api_prompt *p = &r->prompts[k];
        sd_fuzz_require((p->text != NULL) != (p->ids != NULL));
        sd_fuzz_require(!k || (p->text != NULL) == (r->prompts[0].text != NULL)); /* a batch is not mixed */
        if (p->text) sd_fuzz_require(p->len == strlen(p->text) && sd_fuzz_utf8_ok(p->text, p->len));
        if (p->ids) {
            sd_fuzz_require(p->n_ids >= 1);
            for (int32_t i = 0; i < p->n_ids; i++) sd_fuzz_require(p->ids[i] >= 0);
        }
    }
}

/* A parsed request: every field within the range the server relies on. */
static void sd_fsrv_check_request(const sd_api_request *r, int chat, const char *model_id) {
    sd_fuzz_require(r->chat == chat);
    sd_fuzz_require(r->n >= 1 && r->n <= SD_API_MAX_N && (chat ? 1 : r->n_prompts) * r->n <= SD_API_MAX_CHOICES);
    if (chat) sd_fsrv_check_messages(r);
    else sd_fsrv_check_prompt(r);
    sd_fuzz_require(!r->model || !model_id || !strcmp(r->model, model_id));
    sd_fuzz_require(r->max_tokens == -1 || r->max_tokens >= 1);
    sd_fuzz_require(r->temperature >= 0 && r->temperature <= 2);
    sd_fuzz_require(r->top_p > 0 && r->top_p <= 1 && r->min_p >= 0 && r->min_p <= 1 && r->top_k >= 0);
    sd_fuzz_require(r->n_stop >= 0 && r->n_stop <= SD_API_MAX_STOP);
    for (int i = 0; i < r->n_stop; i++) {
        size_t n = strlen(r->stop[i]);
        sd_fuzz_require(n >= 1 && n <= SD_API_MAX_STOP_LEN && sd_fuzz_utf8_ok(r->stop[i], n));
    }
    sd_fuzz_require((r->stream == 0 || r->stream == 1) && (r->include_usage == 0 || r->include_usage == 1));
    sd_fuzz_require(r->n_draft == -1 || (r->n_draft >= 0 && r->n_draft <= SPECDEC_MAX_DRAFT));
    sd_fuzz_require(r->verify >= SPECDEC_VERIFY_AUTO && r->verify <= SPECDEC_VERIFY_MATCH);
    sd_fuzz_require(r->draft_nodes >= 0 && r->draft_nodes <= SPECDEC_MAX_TREE_NODES);
    sd_fuzz_require(r->ignore_eos == 0 || r->ignore_eos == 1);
    sd_fuzz_require((r->logprobs == 0 || r->logprobs == 1) && r->top_logprobs >= 0 &&
                    r->top_logprobs <= SPECDEC_MAX_TOP_LOGPROBS && (r->logprobs || r->top_logprobs == 0));
    sd_fuzz_require(r->n_tree >= 0 && r->n_tree <= SD_API_MAX_TREE);
    specdec_generate_params gp = specdec_generate_default_params();
    sd_fuzz_require(specdec_generate_params_set_tree(&gp, r->tree, r->n_tree) == SPECDEC_OK);
    /* the logits processors: what the parser accepts, the library accepts (ids but the vocabulary,
       which the server checks against the model); each logit_bias token once */
    specdec_generate_params pp = specdec_generate_default_params();
    pp.presence_penalty = r->presence_penalty, pp.frequency_penalty = r->frequency_penalty;
    pp.repetition_penalty = r->repetition_penalty, pp.min_tokens = r->min_tokens;
    pp.logit_bias = r->logit_bias, pp.n_logit_bias = r->n_logit_bias;
    pp.stop_token_ids = r->stop_token_ids, pp.n_stop_token_ids = r->n_stop_token_ids;
    sd_fuzz_require(specdec_generate_params_validate(&pp) == SPECDEC_OK);
    sd_fuzz_require(r->max_tokens < 0 || r->min_tokens <= r->max_tokens);
    for (int32_t i = 0; i < r->n_logit_bias; i++)
        for (int32_t k = 0; k < i; k++) sd_fuzz_require(r->logit_bias[k].token != r->logit_bias[i].token);
}

/* The tool-call parsers on text (what a model generated): whole and streamed in two pieces,
 * for a named call and each "required" / "auto" parser: content within the text or the parser's
 * own, at most SD_TOOLS_MAX_CALLS calls each with an id, a name and arguments, every streamed delta
 * a JSON object. */
static void sd_fsrv_tool_text(const char *text, size_t n) {
    static const int modes[][2] = {{SD_TC_NAMED, SD_TP_NONE},  {SD_TC_REQUIRED, SD_TP_NONE}, {SD_TC_AUTO, SD_TP_HERMES},
                                   {SD_TC_AUTO, SD_TP_LLAMA3_JSON}, {SD_TC_AUTO, SD_TP_MISTRAL}, {SD_TC_AUTO, SD_TP_GLM45},
                                   {SD_TC_AUTO, SD_TP_GLM45}, {SD_TC_AUTO, SD_TP_QWEN3_CODER}, {SD_TC_AUTO, SD_TP_QWEN3_CODER},
                                   {SD_TC_AUTO, SD_TP_DEEPSEEK_V3}};
    /* the typed parsers read the request's tools: string, integer, number, boolean, object types, a
       bad property schema, properties that are a list */
    static cJSON *tools;
    if (!tools)
        tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                            "\"properties\":{\"s\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"},\"x\":true,"
                            "\"r\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"},\"o\":{\"type\":\"object\"}}}}},"
                            "{\"type\":\"function\",\"function\":{\"name\":\"g\",\"parameters\":null}},"
                            "{\"type\":\"function\",\"function\":{\"name\":\"h\",\"parameters\":{\"properties\":[\"q\"]}}}]");
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        sd_tool_out o;
        sd_tools_out_init(&o, (sd_tool_choice)modes[m][0], (sd_tool_parser)modes[m][1], "f");
        if (m > 0 && modes[m][1] == modes[m - 1][1]) o.tools = tools; /* the second run of a typed parser */
        sd_tool_result r;
        sd_tools_final(&o, text, n, &r);
        sd_fuzz_require(r.n_calls >= 0 && r.n_calls <= SD_TOOLS_MAX_CALLS);
        sd_fuzz_require(!r.content || r.content_len <= n);
        for (int i = 0; i < r.n_calls; i++) sd_fuzz_require(r.calls[i].id[0] && r.calls[i].name && r.calls[i].args);
        sd_tools_result_free(&r);
        sd_buf d = {0};
        sd_tools_feed(&o, text, n / 2, 0, &d);
        sd_tools_feed(&o, text, n, 1, &d);
        sd_fuzz_require(!d.oom && o.n_calls <= SD_TOOLS_MAX_CALLS + 1);
        for (char *line = d.p; line && *line;) {
            char *nl = strchr(line, '\n');
            sd_fuzz_require(nl != NULL);
            *nl = '\0';
            cJSON *v = cJSON_Parse(line);
            sd_fuzz_require(cJSON_IsObject(v));
            cJSON_Delete(v);
            line = nl + 1;
        }
        sd_buf_free(&d);
    }
}

/* The reasoning split (sd_server_reasoning.c) on text: for each parser, enable_thinking on and
 * off, streamed in three pieces, the reasoning and content deltas are within the text, in order,
 * never overlap, and add up to the whole split (but qwen3's "no end tag with thinking off: all
 * content", which streaming cannot know before the end: vLLM's streaming sends it as reasoning;
 * glm45, with and without a prompt that closed the thinking: an output streamed as all content adds
 * up to the text, one streamed as reasoning to the whole split where that has reasoning). */
static void sd_fsrv_reasoning_text(const char *text, size_t n) {
    for (int m = 0; m < 6; m++) {
        sd_reasoning r;
        const int glm = m >= 4;
        sd_reasoning_init(&r, m < 2 ? SD_RP_QWEN3 : glm ? SD_RP_GLM45 : SD_RP_DEEPSEEK_R1, NULL, NULL, m & 1,
                          glm && (m & 1));
        sd_reasoning_split w;
        sd_reasoning_whole(&r, text, n, &w);
        sd_fuzz_require(!w.has_r || w.r_off + w.r_len <= n);
        sd_fuzz_require(!w.has_c || w.c_off + w.c_len <= n);
        size_t r_sum = 0, c_sum = 0, last = 0, cuts[3] = {n / 3, 2 * n / 3, n};
        for (int k = 0; k < 3; k++) {
            size_t ra, rb, ca, cb;
            sd_reasoning_feed(&r, text, cuts[k], k == 2, &ra, &rb, &ca, &cb);
            sd_fuzz_require(ra <= rb && rb <= cuts[k] && ca <= cb && cb <= cuts[k]);
            sd_fuzz_require((ra == rb || ra >= last) && (ca == cb || (ca >= last && ca >= rb)));
            if (rb > ra) r_sum += rb - ra, last = rb;
            if (cb > ca) c_sum += cb - ca, last = cb;
        }
        if (glm && r.phase == 2 && r.content_at == 0) sd_fuzz_require(r_sum == 0 && c_sum == n);
        else if (w.has_r) sd_fuzz_require(r_sum == w.r_len && c_sum == (w.has_c ? w.c_len : 0));
        else if (!glm) sd_fuzz_require(r.phase != 2 || c_sum == w.c_len);
    }
}

/* What the server does with a chat request next: the family's prompt ids, and the conversation
 * as JSON with its tools and chat_template_kwargs (specdec_chat_apply_json, the server's path). */
static void sd_fsrv_chat(const sd_api_request *r, const char *family) {
    size_t len = 0;
    static char text[1 << 16];
    specdec_status js = specdec_chat_apply_json(g_tok, family, r->messages_json, r->tools_json, r->kwargs_json, 1, text,
                                                sizeof text, &len);
    sd_fuzz_require(js == SPECDEC_OK || js == SPECDEC_ERR_INVALID_ARGUMENT || js == SPECDEC_ERR_UNSUPPORTED ||
                    js == SPECDEC_ERR_BUFFER_TOO_SMALL);
    if (js != SPECDEC_OK && js != SPECDEC_ERR_BUFFER_TOO_SMALL) sd_fuzz_require(specdec_last_error()[0] != '\0');
    if (js == SPECDEC_OK) sd_fuzz_require(len == strlen(text) && sd_api_utf8_valid(text, len));
    specdec_chat_message m[64];
    int n = r->n_messages < 64 ? r->n_messages : 64;
    for (int i = 0; i < n; i++) m[i] = (specdec_chat_message){r->messages[i].role, r->messages[i].content};
    int32_t ids[512], n_ids = -1;
    specdec_status st = specdec_chat_tokenize(g_tok, family, m, n, 1, ids, 512, &n_ids);
    sd_fuzz_require(st == SPECDEC_OK || st == SPECDEC_ERR_INVALID_ARGUMENT || st == SPECDEC_ERR_BUFFER_TOO_SMALL);
    if (st == SPECDEC_ERR_INVALID_ARGUMENT) sd_fuzz_require(specdec_last_error()[0] != '\0');
    if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) sd_fuzz_require(n_ids > 512);
    if (st != SPECDEC_OK) return;
    sd_fuzz_require(n_ids >= 0 && n_ids <= 512);
    for (int32_t i = 0; i < n_ids; i++) sd_fuzz_require(ids[i] >= 0 && ids[i] < g_vocab);
}

/* The logprobs writers on a parsed token-id prompt taken as generated tokens (ids outside
 * the vocabulary included): each token's text is valid UTF-8, both shapes parse as JSON
 * with one entry per token, and text_offset stays within the text. */
static void sd_fsrv_logprobs(const sd_api_request *r) {
    sd_lp_entry e[16];
    const sd_api_prompt *p = &r->prompts[r->n_prompts - 1];
    int32_t n = p->n_ids < 16 ? p->n_ids : 16;
    char text[64];
    for (int32_t k = 0; k < n; k++) {
        e[k].token = p->ids[k];
        e[k].logprob = k == 1 ? -INFINITY : -(float)k;
        e[k].n_top = n - k < SPECDEC_MAX_TOP_LOGPROBS ? n - k : SPECDEC_MAX_TOP_LOGPROBS;
        for (int32_t t = 0; t < e[k].n_top; t++) e[k].top_tokens[t] = p->ids[k + t], e[k].top_logprobs[t] = -t;
        e[k].end = (size_t)(k * 4 + 2);
        text[k * 4] = 'a', text[k * 4 + 1] = (char)0xC3, text[k * 4 + 2] = (char)0xA9, text[k * 4 + 3] = 'b';
    }
    sd_server srv;
    memset(&srv, 0, sizeof srv);
    srv.tok = g_tok;
    for (int chat = 0; chat < 2 && n > 0; chat++) {
        sd_cp_cursor cur = {0, 0};
        sd_lp_span span = {e, n, 0, text, (size_t)n * 4 - 1, &cur, NULL, 0};
        sd_buf b = {0};
        sd_fuzz_require(sd_resp_logprobs(&b, &srv, chat, &span) == 0 && b.p);
        cJSON *root = cJSON_ParseWithLength(b.p, b.len);
        sd_fuzz_require(root != NULL);
        const cJSON *list = cJSON_GetObjectItem(root, chat ? "content" : "tokens");
        sd_fuzz_require(cJSON_GetArraySize(list) == n);
        for (const cJSON *x = list->child; x; x = x->next) {
            const cJSON *s = chat ? cJSON_GetObjectItem(x, "token") : x;
            sd_fuzz_require(cJSON_IsString(s) && sd_fuzz_utf8_ok(s->valuestring, strlen(s->valuestring)));
        }
        const cJSON *off = chat ? NULL : cJSON_GetObjectItem(root, "text_offset");
        for (const cJSON *x = off ? off->child : NULL; x; x = x->next)
            sd_fuzz_require(x->valuedouble >= 0 && x->valuedouble <= (double)n * 3);
        cJSON_Delete(root);
        sd_buf_free(&b);
    }
}

static int sd_fsrv_streq(const char *a, const char *b) {
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* POST /tokenize's view of the body (sd_api_tokenize_body: vLLM's tokenize fields only, then
 * sd_api_parse): 200 or a 4xx with a well-formed error; a body the generation endpoint takes is
 * taken here too, with the same conversation (messages, tools, kwargs, add_generation_prompt). */
static void sd_fsrv_tokenize_view(const char *body, size_t n, int chat, const char *model_id, const sd_api_request *full,
                                  int full_code) {
    cJSON *root = cJSON_ParseWithLength(body, n);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return;
    }
    char *kept = sd_api_tokenize_body(root, chat);
    cJSON_Delete(root);
    if (!kept) return; /* out of memory */
    sd_api_request r;
    sd_api_error e;
    int code = sd_api_parse(kept, strlen(kept), chat, model_id, &r, &e);
    cJSON_free(kept);
    if (code != 200) sd_fsrv_check_error(&e, code);
    if (full_code == 200) {
        sd_fuzz_require(code == 200);
        sd_fuzz_require(sd_fsrv_streq(r.messages_json, full->messages_json) && sd_fsrv_streq(r.tools_json, full->tools_json) &&
                        sd_fsrv_streq(r.kwargs_json, full->kwargs_json) &&
                        r.add_generation_prompt == full->add_generation_prompt &&
                        r.continue_final_message == full->continue_final_message);
    }
    if (code == 200) sd_api_request_free(&r);
}

static int sd_fsrv_body(const char *body, size_t n, int chat, const char *model_id, const char *family) {
    sd_api_request r, r2;
    sd_api_error e, e2;
    int code = sd_api_parse(body, n, chat, model_id, &r, &e);
    int code2 = sd_api_parse(body, n, chat, model_id, &r2, &e2);
    sd_fuzz_require(code == code2);
    if (code == 200) {
        sd_fsrv_check_request(&r, chat, model_id);
        sd_fuzz_require(r.n_messages == r2.n_messages && r.n_stop == r2.n_stop && r.max_tokens == r2.max_tokens);
        if (chat) sd_fsrv_chat(&r, family);
        sd_fuzz_require(r.n == r2.n && r.n_prompts == r2.n_prompts && r.tool_choice == r2.tool_choice &&
                        r.n_tools == r2.n_tools);
        sd_fuzz_require(r.tool_choice >= SD_TC_NONE && r.tool_choice <= SD_TC_NAMED && r.n_tools <= SD_API_MAX_TOOLS);
        sd_fuzz_require(r.tool_choice != SD_TC_NAMED || (r.tool_named >= 0 && r.tool_named < r.n_tools));
        if (!chat && r.prompts[r.n_prompts - 1].ids) sd_fsrv_logprobs(&r);
    } else {
        sd_fsrv_check_error(&e, code);
        sd_fuzz_require(!strcmp(e.message, e2.message) && !strcmp(e.param, e2.param));
        if (code == 404) sd_fuzz_require(model_id && !strcmp(e.param, "model"));
        sd_fuzz_require(!r.model && !r.prompts && r.n_prompts == 0 && !r.messages && r.n_messages == 0 && r.n_stop == 0);
    }
    sd_fsrv_tokenize_view(body, n, chat, model_id, &r, code);
    sd_api_request_free(&r);
    sd_api_request_free(&r2);
    return code;
}

/* The next NUL-terminated field of buf[*pos..n) (the rest when there is no NUL). */
static const char *sd_fsrv_field(char *buf, size_t n, size_t *pos) {
    const char *f = buf + *pos;
    while (*pos < n && buf[*pos]) (*pos)++;
    if (*pos < n) (*pos)++;
    return f;
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    static const size_t limits[4] = {0, 64, 4096, (size_t)2 << 20};
    if (size == 0) return 1;
    const uint8_t flags = data[0];
    const int chat = flags & 1;
    const char *key = flags & 2 ? SD_FSRV_KEY : NULL;
    const char *model_id = flags & 4 ? SD_FSRV_MODEL : NULL;
    const char *family = specdec_chat_template_name((flags >> 5) & 7); /* NULL past the end: the tokenizer's */
    /* the head fields need NULs after them; an exact-size copy plus one NUL */
    size_t n = size - 1;
    char *buf = malloc(n + 1);
    sd_fuzz_require(buf != NULL);
    if (n) memcpy(buf, data + 1, n);
    buf[n] = '\0';
    size_t pos = 0;
    sd_api_head h;
    memset(&h, 0, sizeof h);
    h.content_type = "application/json"; /* the head's decisions as before; the new parsers below */
    h.method = sd_fsrv_field(buf, n, &pos);
    h.url = sd_fsrv_field(buf, n, &pos);
    h.authorization = sd_fsrv_field(buf, n, &pos);
    h.content_length = sd_fsrv_field(buf, n, &pos);
    if (!h.authorization[0]) h.authorization = NULL;
    if (!h.content_length[0]) h.content_length = NULL;
    int head = sd_fsrv_head(&h, key, limits[(flags >> 3) & 3]);
    /* the Host and framing parsers on the same fuzzed strings (issue 25) */
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]", "*x"};
    (void)sd_api_host_allowed(h.url, hosts, 4);
    const char *cl[2] = {h.content_length ? h.content_length : "", h.method}, *te[1] = {h.url};
    sd_api_error fe;
    int fr = sd_api_check_framing(cl, 2, te, (flags & 1) ? 1 : 0, &fe);
    sd_fuzz_require(fr == 0 || ((fr == 400 || fr == 501) && fe.close && fe.message[0]));
    /* the body: an exact-size heap copy so ASan sees a read past its end */
    char *body = malloc(n - pos + 1);
    sd_fuzz_require(body != NULL);
    memcpy(body, buf + pos, n - pos);
    int code = sd_fsrv_body(n > pos ? body : NULL, n - pos, chat, model_id, family);
    if (chat) sd_fsrv_tool_text(body, n - pos), sd_fsrv_reasoning_text(body, n - pos); /* the body's bytes as a
                                                                                          model's output */
    free(body);
    free(buf);
    return head == 0 && code == 200 ? 0 : 1;
}

SD_FUZZ_DEFINE_ENTRY_WITH_INIT

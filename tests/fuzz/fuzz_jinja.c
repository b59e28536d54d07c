/* fuzz_jinja.c — fuzz target: a chat template through the Jinja interpreter (sd_jinja_parse,
 * sd_jinja_render). Input: byte 0 = flags, the rest = the template text.
 *   bit 0      add_generation_prompt
 *   bit 1      pass a tools list (JSON) instead of None
 *   bits 2-3   messages: 0 role/content (as the C API passes them), 1 with tool calls and tool
 *              results (JSON), 2 content as a list of parts (JSON), 3 none (an empty list)
 *   bit 4      extra variables: enable_thinking=false, date_string
 * Small limits (200k steps, 4 MiB of text, 64 MiB of memory, depth 128) keep every input fast.
 * Checked: parse and render return OK, INVALID_ARGUMENT (the template raised) or UNSUPPORTED,
 * with a message; the text is valid UTF-8; a second render gives the same text (no state kept
 * between renders, nothing read uninitialised). sd_fuzz_one returns 0 when the template parsed
 * and rendered or raised, else the status (seeds: ok_* must be in the subset, bad_* refused). */
#include <cjson/cJSON.h>

#include "fuzz_common.h"
#include "sd_jinja.h"
#include "sd_utf8.h"

static cJSON *g_vars; /* {"rich": [...], "parts": [...], "tools": [...]} */

static const char g_vars_json[] =
    "{\"rich\": [{\"role\": \"system\", \"content\": \"Use tools.\"}, {\"role\": \"user\", \"content\": \"Weather?\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call_abc123456\", \"type\": \"function\","
    " \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
    " {\"role\": \"tool\", \"content\": \"{\\\"t\\\": 21}\", \"tool_call_id\": \"call_abc123456\"},"
    " {\"role\": \"assistant\", \"content\": \"21 \xc2\xb0" "C\", \"reasoning_content\": \"look\"}],"
    " \"parts\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"image\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]}";

static const specdec_chat_message g_msgs[] = {{"system", "Be brief."}, {"user", "Hi \xc3\xa9 \xf0\x9f\x8e\x89"},
                                              {"assistant", " Hello! "}, {"user", "{{ x }} <|im_end|>"}};

int sd_fuzz_init(void) {
    g_vars = cJSON_Parse(g_vars_json);
    return g_vars ? 0 : 1;
}

static specdec_status sd_fz_render(const sd_jinja_tmpl *t, int flags, sd_tok_buf *out) {
    static const sd_jinja_limits lim = {(size_t)4 << 20, (size_t)64 << 20, 200000, 128};
    sd_jinja_var v[8];
    size_t n = 0;
    memset(v, 0, sizeof v);
    int which = (flags >> 2) & 3;
    v[n].name = "messages";
    if (which == 0 || which == 3) {
        v[n].kind = SD_JINJA_MESSAGES;
        v[n].msgs = g_msgs;
        v[n++].n_msgs = which == 0 ? 4 : 0;
    } else {
        v[n].kind = SD_JINJA_JSON;
        v[n++].json = cJSON_GetObjectItem(g_vars, which == 1 ? "rich" : "parts");
    }
    v[n].name = "add_generation_prompt";
    v[n].kind = SD_JINJA_BOOL;
    v[n++].b = flags & 1;
    v[n].name = "tools";
    if (flags & 2) {
        v[n].kind = SD_JINJA_JSON;
        v[n++].json = cJSON_GetObjectItem(g_vars, "tools");
    } else {
        v[n++].kind = SD_JINJA_NONE;
    }
    v[n].name = "bos_token";
    v[n].kind = SD_JINJA_STR;
    v[n++].s = "<s>";
    v[n].name = "eos_token";
    v[n].kind = SD_JINJA_STR;
    v[n++].s = "</s>";
    if (flags & 16) {
        v[n].name = "enable_thinking";
        v[n++].kind = SD_JINJA_BOOL;
        v[n].name = "date_string";
        v[n].kind = SD_JINJA_STR;
        v[n++].s = "05 Jul 2025";
    }
    return sd_jinja_render(t, v, n, 1751706303, &lim, out);
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    if (!size) return 0;
    int flags = data[0];
    sd_jinja_tmpl *t = NULL;
    specdec_status st = sd_jinja_parse((const char *)data + 1, size - 1, &t);
    if (st) {
        sd_fuzz_require(!t && (st == SPECDEC_ERR_UNSUPPORTED || st == SPECDEC_ERR_OUT_OF_MEMORY));
        sd_fuzz_require(specdec_last_error()[0] != '\0');
        return (int)st;
    }
    sd_tok_buf a = {0}, b = {0};
    st = sd_fz_render(t, flags, &a);
    sd_fuzz_require(st == SPECDEC_OK || st == SPECDEC_ERR_INVALID_ARGUMENT || st == SPECDEC_ERR_UNSUPPORTED);
    if (st) {
        sd_fuzz_require(specdec_last_error()[0] != '\0');
    } else {
        sd_fuzz_require(sd_utf8_valid((const unsigned char *)(a.p ? a.p : ""), a.len));
        specdec_status st2 = sd_fz_render(t, flags, &b);
        sd_fuzz_require(st2 == SPECDEC_OK && b.len == a.len && (!a.len || !memcmp(a.p, b.p, a.len)));
    }
    sd_tok_buf_free(&a);
    sd_tok_buf_free(&b);
    sd_jinja_free(t);
    return st == SPECDEC_ERR_INVALID_ARGUMENT ? 0 : (int)st;
}

SD_FUZZ_DEFINE_ENTRY_WITH_INIT

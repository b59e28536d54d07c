/* test_chat_api — the chat API with nothing outside the repository:
 *   - the documented "plain" format on the bundled tokenizer (which has no template),
 *     BUFFER_TOO_SMALL, specdec_chat_tokenize == specdec_tokenize(text, add_special=1);
 *   - bad input (NULLs, empty conversation, empty role, invalid UTF-8, unknown name) gives
 *     INVALID_ARGUMENT with a message and "" in the buffer, never a crash;
 *   - templates this test writes next to the bundled tokenizer.json: a string, the list form
 *     with and without "default", a wrong type, chat_template.jinja taking priority, templates
 *     outside the supported subset (refused at load naming the construct; a forced family still
 *     renders), AddedToken-object special tokens, the variables transformers passes (special
 *     tokens, tools=None, documents=None, add_generation_prompt), a template that raises;
 *   - allocation failure injected at every allocation of render and of the end of load.
 * Usage: test_chat_api MODELS/kjv-target */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, unlink, rmdir, localtime_r */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sd_alloc.h"
#include "sd_test.h"
#include "specdec.h"

#define MSG(r, c) {(r), (c)}

static const char *g_tokjson; /* the bundled tokenizer.json */
static char g_dir[256];       /* temporary model directory */

static char *render(const specdec_tokenizer *tok, const char *name, const specdec_chat_message *m, int n, int agp,
                    specdec_status *st) {
    static char buf[4096];
    size_t len = 0;
    *st = specdec_chat_apply(tok, name, m, n, agp, buf, sizeof buf, &len);
    return *st ? NULL : buf;
}

static void test_plain(const specdec_tokenizer *tok) {
    const char *name = NULL;
    SD_CHECK(specdec_chat_template_detect(tok, &name) == SPECDEC_OK && name && !strcmp(name, "plain"), "detect %s",
             name ? name : "(null)");
    SD_CHECK(specdec_tokenizer_chat_template(tok) == NULL, "bundled tokenizer has no template");
    int as = -1;
    SD_CHECK(specdec_chat_add_special(tok, NULL, &as) == SPECDEC_OK && as == 1, "plain add_special %d", as);
    specdec_chat_message m[] = {MSG("system", "Be brief."), MSG("user", "Hi there"), MSG("assistant", "Hello."),
                                MSG("user", "\xc3\x9cn\xc3\xaf 🎉 "), MSG("tool", "42"), MSG("\xc3\xa9t", "x")};
    specdec_status st;
    const char *t = render(tok, NULL, m, 6, 1, &st);
    const char *want = "System: Be brief.\nUser: Hi there\nAssistant: Hello.\nUser: \xc3\x9cn\xc3\xaf 🎉 \nTool: 42\n"
                       "\xc3\xa9t: x\nAssistant:";
    SD_CHECK(t && !strcmp(t, want), "plain render:\n%s", t ? t : specdec_last_error());
    t = render(tok, "plain", m, 2, 0, &st);
    SD_CHECK(t && !strcmp(t, "System: Be brief.\nUser: Hi there\n"), "plain without prompt: %s", t ? t : "");
    specdec_chat_message e[] = {MSG("user", "")};
    t = render(tok, NULL, e, 1, 1, &st);
    SD_CHECK(t && !strcmp(t, "User: \nAssistant:"), "plain empty content: %s", t ? t : "");

    /* BUFFER_TOO_SMALL reports the size; the buffer holds "" */
    size_t len = 0, need = strlen(want);
    char small[8] = "junk";
    SD_CHECK(specdec_chat_apply(tok, NULL, m, 6, 1, NULL, 0, &len) == SPECDEC_ERR_BUFFER_TOO_SMALL && len == need,
             "size query len %zu", len);
    SD_CHECK(specdec_chat_apply(tok, NULL, m, 6, 1, small, sizeof small, &len) == SPECDEC_ERR_BUFFER_TOO_SMALL &&
                 len == need && small[0] == '\0',
             "small buffer");
    char *exact = malloc(need + 1);
    SD_CHECK(exact && specdec_chat_apply(tok, NULL, m, 6, 1, exact, need + 1, &len) == SPECDEC_OK && !strcmp(exact, want),
             "exact-size buffer");
    free(exact);

    /* chat_tokenize == tokenize(text, add_special = 1) */
    int32_t a[256], b[256], na = 0, nb = 0;
    SD_CHECK(specdec_chat_tokenize(tok, NULL, m, 6, 1, a, 256, &na) == SPECDEC_OK, "chat_tokenize: %s", specdec_last_error());
    SD_CHECK(specdec_tokenize(tok, want, strlen(want), 1, b, 256, &nb) == SPECDEC_OK, "tokenize");
    SD_CHECK(na == nb && na > 0 && !memcmp(a, b, sizeof *a * (size_t)na), "chat_tokenize ids (%d vs %d)", na, nb);
    int32_t need_ids = 0;
    SD_CHECK(specdec_chat_tokenize(tok, NULL, m, 6, 1, a, 1, &need_ids) == SPECDEC_ERR_BUFFER_TOO_SMALL && need_ids == na,
             "chat_tokenize too small: %d", need_ids);
}

static void expect_invalid(specdec_status st, const char *buf, const char *what) {
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT, "%s: status %d", what, st);
    SD_CHECK(specdec_last_error()[0] != '\0', "%s: no message", what);
    SD_CHECK(!buf || buf[0] == '\0', "%s: buffer not emptied", what);
}

static void test_bad_input(const specdec_tokenizer *tok) {
    char buf[64];
    size_t len;
    specdec_chat_message ok[] = {MSG("user", "hi")};
    static const char *bad_utf8[] = {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"};
    strcpy(buf, "x");
    expect_invalid(specdec_chat_apply(NULL, NULL, ok, 1, 1, buf, sizeof buf, &len), buf, "NULL tok");
    expect_invalid(specdec_chat_apply(tok, NULL, ok, 1, 1, buf, sizeof buf, NULL), NULL, "NULL len");
    expect_invalid(specdec_chat_apply(tok, NULL, ok, 1, 1, NULL, 10, &len), NULL, "NULL text with capacity");
    expect_invalid(specdec_chat_apply(tok, NULL, NULL, 1, 1, buf, sizeof buf, &len), buf, "NULL msgs");
    expect_invalid(specdec_chat_apply(tok, NULL, ok, 0, 1, buf, sizeof buf, &len), buf, "empty conversation");
    expect_invalid(specdec_chat_apply(tok, NULL, ok, -3, 1, buf, sizeof buf, &len), buf, "negative count");
    expect_invalid(specdec_chat_apply(tok, "nosuch", ok, 1, 1, buf, sizeof buf, &len), buf, "unknown name");
    specdec_chat_message m[2] = {MSG("user", "hi"), MSG(NULL, "x")};
    expect_invalid(specdec_chat_apply(tok, NULL, m, 2, 1, buf, sizeof buf, &len), buf, "NULL role");
    m[1].role = "assistant";
    m[1].content = NULL;
    expect_invalid(specdec_chat_apply(tok, NULL, m, 2, 1, buf, sizeof buf, &len), buf, "NULL content");
    m[1].role = "";
    m[1].content = "x";
    expect_invalid(specdec_chat_apply(tok, NULL, m, 2, 1, buf, sizeof buf, &len), buf, "empty role");
    m[1].role = "a\nb";
    expect_invalid(specdec_chat_apply(tok, NULL, m, 2, 1, buf, sizeof buf, &len), buf, "role with newline (plain)");
    for (size_t i = 0; i < sizeof bad_utf8 / sizeof *bad_utf8; i++) {
        for (int field = 0; field < 2; field++) {
            specdec_chat_message b[] = {MSG("user", "ok"), MSG(field ? bad_utf8[i] : "user", field ? "x" : bad_utf8[i])};
            for (int f = 0; specdec_chat_template_name(f); f++) {
                strcpy(buf, "x");
                expect_invalid(specdec_chat_apply(tok, specdec_chat_template_name(f), b, 2, 1, buf, sizeof buf, &len), buf,
                               "invalid UTF-8");
            }
        }
    }
    int32_t ids[4], n;
    SD_CHECK(specdec_chat_tokenize(tok, NULL, ok, 1, 1, NULL, 4, &n) == SPECDEC_ERR_INVALID_ARGUMENT, "tokenize NULL ids");
    SD_CHECK(specdec_chat_tokenize(tok, NULL, ok, 1, 1, ids, -1, &n) == SPECDEC_ERR_INVALID_ARGUMENT, "tokenize cap < 0");
    SD_CHECK(specdec_chat_tokenize(tok, NULL, ok, 1, 1, ids, 4, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "tokenize NULL n");
    SD_CHECK(specdec_chat_template_detect(NULL, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "detect NULL");
    SD_CHECK(specdec_chat_add_special(tok, "nosuch", &n) == SPECDEC_ERR_INVALID_ARGUMENT, "add_special unknown name");
    SD_CHECK(specdec_tokenizer_chat_template(NULL) == NULL, "chat_template(NULL)");
    int count = 0;
    while (specdec_chat_template_name(count)) count++;
    SD_CHECK(count == 8 && !specdec_chat_template_name(-1) && !strcmp(specdec_chat_template_name(6), "plain") &&
                 !strcmp(specdec_chat_template_name(7), "jinja"),
             "name list %d", count);
    SD_CHECK(specdec_chat_apply(tok, "jinja", ok, 1, 1, buf, sizeof buf, &len) == SPECDEC_OK && !strcmp(buf, "User: hi\nAssistant:"),
             "\"jinja\" without a template is plain: %s", buf);
}

/* specdec_chat_apply_json on the plain format: arguments, UTF-8, the size protocol. (Renders with
 * templates, tools and kwargs against transformers: test_chat_json.py.) */
static void test_json_plain(const specdec_tokenizer *tok) {
    char buf[64];
    size_t len = 7;
    const char *ok = "[{\"role\": \"user\", \"content\": \"hi\"}]";
    strcpy(buf, "x");
    expect_invalid(specdec_chat_apply_json(NULL, NULL, ok, NULL, NULL, 1, buf, sizeof buf, &len), buf, "json: NULL tok");
    expect_invalid(specdec_chat_apply_json(tok, NULL, NULL, NULL, NULL, 1, buf, sizeof buf, &len), buf, "json: NULL msgs");
    expect_invalid(specdec_chat_apply_json(tok, NULL, ok, NULL, NULL, 1, buf, sizeof buf, NULL), NULL, "json: NULL len");
    expect_invalid(specdec_chat_apply_json(tok, NULL, ok, NULL, NULL, 1, NULL, 4, &len), NULL, "json: NULL text");
    expect_invalid(specdec_chat_apply_json(tok, NULL, "[{\"role\": \"user\", \"content\": \"\xff\"}]", NULL, NULL, 1, buf,
                                           sizeof buf, &len), buf, "json: invalid UTF-8");
    expect_invalid(specdec_chat_apply_json(tok, NULL, ok, "[\"\xc3\"]", NULL, 1, buf, sizeof buf, &len), buf,
                   "json: tools not UTF-8");
    expect_invalid(specdec_chat_apply_json(tok, NULL, ok, NULL, "{} x", 1, buf, sizeof buf, &len), buf,
                   "json: kwargs with trailing bytes");
    expect_invalid(specdec_chat_apply_json(tok, NULL, "[{\"role\": \"a\\nb\"}]", NULL, NULL, 1, buf, sizeof buf, &len),
                   buf, "json: plain role with a newline");
    const char *want = "User: hi\nAssistant:";
    SD_CHECK(specdec_chat_apply_json(tok, NULL, ok, "null", "{\"enable_thinking\": false}", 1, NULL, 0, &len) ==
                     SPECDEC_ERR_BUFFER_TOO_SMALL && len == strlen(want), "json: size %zu", len);
    SD_CHECK(specdec_chat_apply_json(tok, NULL, ok, "null", NULL, 1, buf, len, &len) == SPECDEC_ERR_BUFFER_TOO_SMALL &&
                 buf[0] == '\0', "json: one byte short");
    SD_CHECK(specdec_chat_apply_json(tok, "plain", ok, NULL, NULL, 1, buf, sizeof buf, &len) == SPECDEC_OK &&
                 !strcmp(buf, want), "json: plain %s", buf);
    /* the same conversation as specdec_chat_apply renders it, tool result included */
    const char *conv = "[{\"role\": \"system\", \"content\": [{\"type\": \"text\", \"text\": \"S\"}]},"
                       " {\"role\": \"user\", \"content\": \"q\", \"unknown\": {\"a\": 1}},"
                       " {\"role\": \"tool\", \"content\": null, \"tool_call_id\": \"c1\"}]";
    specdec_chat_message m[] = {MSG("system", "S"), MSG("user", "q"), MSG("tool", "")};
    char a[128], b[128];
    SD_CHECK(specdec_chat_apply_json(tok, NULL, conv, NULL, NULL, 0, a, sizeof a, &len) == SPECDEC_OK &&
                 specdec_chat_apply(tok, NULL, m, 3, 0, b, sizeof b, &len) == SPECDEC_OK && !strcmp(a, b),
             "json and struct conversations render alike: %s | %s", a, b);
}

/* ---- templates written next to the bundled tokenizer.json ------------------------------------ */
static int write_file(const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static void remove_file(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    unlink(p);
}

static int copy_tokenizer(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/tokenizer.json", g_dir);
    FILE *in = fopen(g_tokjson, "rb"), *out = fopen(p, "wb");
    char b[65536];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (!rc && (n = fread(b, 1, sizeof b, in)) > 0)
        if (fwrite(b, 1, n, out) != n) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out)) rc = -1;
    return rc;
}

/* Load g_dir with tokenizer_config.json = {"bos_token": bos, "eos_token": "</s>", "chat_template": ct}. */
static specdec_tokenizer *load_with(const char *ct_json, const char *bos_json) {
    char cfg[8192];
    snprintf(cfg, sizeof cfg, "{\"bos_token\": %s, \"eos_token\": \"</s>\", \"chat_template\": %s}",
             bos_json ? bos_json : "\"<s>\"", ct_json);
    specdec_tokenizer *tok = NULL;
    if (write_file("tokenizer_config.json", cfg) || specdec_tokenizer_load(g_dir, &tok))
        fprintf(stderr, "load_with: %s\n", specdec_last_error());
    return tok;
}

#define CHATML "\"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\\\n' + message['content'] + '<|im_end|>' + '\\\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\\\n' }}{% endif %}\""
#define ZEPHYR_JINJA "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"

static void expect_detect(const specdec_tokenizer *tok, specdec_status want_st, const char *want, const char *what) {
    const char *name = NULL;
    specdec_status st = tok ? specdec_chat_template_detect(tok, &name) : SPECDEC_ERR_INTERNAL;
    SD_CHECK(st == want_st && (want ? name && !strcmp(name, want) : !name), "%s: detect %d %s (%s)", what, st,
             name ? name : "(null)", st ? specdec_last_error() : "");
}

static void expect_render(const specdec_tokenizer *tok, const char *name, const specdec_chat_message *m, int n, int agp,
                          const char *want, const char *what) {
    specdec_status st;
    const char *t = tok ? render(tok, name, m, n, agp, &st) : NULL;
    SD_CHECK(t && !strcmp(t, want), "%s:\n  want %s\n  got  %s", what, want, t ? t : specdec_last_error());
}

static void test_templates(void) {
    specdec_chat_message m[] = {MSG("user", "hi")};
    specdec_status st;
    specdec_tokenizer *tok = load_with(CHATML, NULL);
    expect_detect(tok, SPECDEC_OK, "jinja", "string");
    expect_render(tok, NULL, m, 1, 1, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "chatml");
    expect_render(tok, "jinja", m, 1, 0, "<|im_start|>user\nhi<|im_end|>\n", "chatml by name");
    int as = -1;
    SD_CHECK(tok && specdec_chat_add_special(tok, NULL, &as) == SPECDEC_OK && as == 0, "template add_special %d", as);
    SD_CHECK(tok && specdec_chat_add_special(tok, "llama3", &as) == SPECDEC_OK && as == 0, "family add_special %d", as);
    expect_render(tok, "plain", m, 1, 1, "User: hi\nAssistant:", "forced plain over a template");
    specdec_tokenizer_free(tok);

    tok = load_with("[{\"name\": \"tool_use\", \"template\": \"{{ tools }}\"}, {\"name\": \"default\", \"template\": " CHATML "}]", NULL);
    expect_detect(tok, SPECDEC_OK, "jinja", "list with default");
    expect_render(tok, NULL, m, 1, 0, "<|im_start|>user\nhi<|im_end|>\n", "the default entry");
    specdec_tokenizer_free(tok);

    tok = load_with("[{\"name\": \"tool_use\", \"template\": " CHATML "}]", NULL);
    expect_detect(tok, SPECDEC_ERR_UNSUPPORTED, NULL, "list without default");
    SD_CHECK(strstr(specdec_last_error(), "default") != NULL, "message names the missing entry: %s", specdec_last_error());
    expect_render(tok, "chatml", m, 1, 0, "<|im_start|>user\nhi<|im_end|>\n", "forced chatml");
    specdec_tokenizer_free(tok);

    tok = load_with("42", NULL);
    expect_detect(tok, SPECDEC_ERR_UNSUPPORTED, NULL, "number");
    specdec_tokenizer_free(tok);

    /* outside the subset: refused at load with the construct and its line named */
    tok = load_with("\"{{ bos_token }}\\n{% include 'other.jinja' %}\"", NULL);
    expect_detect(tok, SPECDEC_ERR_UNSUPPORTED, NULL, "include");
    SD_CHECK(strstr(specdec_last_error(), "include") && strstr(specdec_last_error(), "line 2"), "message: %s",
             specdec_last_error());
    st = tok ? specdec_chat_apply(tok, NULL, m, 1, 1, NULL, 0, &(size_t){0}) : SPECDEC_ERR_INTERNAL;
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && strstr(specdec_last_error(), "include"), "render refused: %d", st);
    expect_render(tok, "llama3", m, 1, 1,
                  "<s><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                  "forced llama3 over a refused template");
    specdec_tokenizer_free(tok);
    tok = load_with("\"{% for m in messages %}{{ m.content | wordwrap(8) }}{% endfor %}\"", NULL);
    expect_detect(tok, SPECDEC_ERR_UNSUPPORTED, NULL, "unknown filter");
    SD_CHECK(strstr(specdec_last_error(), "'wordwrap'") != NULL, "message: %s", specdec_last_error());
    specdec_tokenizer_free(tok);

    /* the variables transformers passes; AddedToken objects; absent or null tokens are undefined */
    const char *cfg =
        "{\"bos_token\": {\"content\": \"<B>\", \"special\": true}, \"eos_token\": \"<E>\", \"unk_token\": null, "
        "\"pad_token\": \"<P>\", \"chat_template\": \"{{ bos_token }}|{{ eos_token }}|{{ pad_token }}|{{ unk_token is "
        "defined }}|{{ mask_token is defined }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|"
        "{{ messages | tojson }}|{{ date_string is defined }}\"}";
    tok = NULL;
    SD_CHECK(write_file("tokenizer_config.json", cfg) == 0 && specdec_tokenizer_load(g_dir, &tok) == SPECDEC_OK, "load: %s",
             specdec_last_error());
    specdec_chat_message u[] = {MSG("user", "\xc3\xa9 \"q\"\n")};
    expect_render(tok, NULL, u, 1, 1,
                  "<B>|<E>|<P>|False|False|True|True|True|[{\"role\": \"user\", \"content\": \"\xc3\xa9 \\\"q\\\"\\n\"}]|False",
                  "template variables");
    specdec_tokenizer_free(tok);

    /* strftime_now reads the clock (local time) */
    tok = load_with("\"{{ strftime_now('%Y') }}\"", NULL);
    char year[16];
    time_t now = time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    snprintf(year, sizeof year, "%d", tmv.tm_year + 1900);
    expect_render(tok, NULL, m, 1, 1, year, "strftime_now");
    specdec_tokenizer_free(tok);

    /* AddedToken-object bos_token; a forced family's built-in template; its raise message */
    tok = load_with("null", "{\"content\": \"<s>\", \"lstrip\": false, \"special\": true}");
    expect_detect(tok, SPECDEC_OK, "plain", "no template");
    specdec_chat_message sm[] = {MSG("system", "s"), MSG("user", "u")};
    expect_render(tok, "mistral", m, 1, 1, "<s> [INST] hi [/INST]", "forced mistral");
    specdec_chat_message em[] = {MSG("user", ""), MSG("assistant", ""), MSG("user", "")};
    expect_render(tok, "llama2", em, 3, 1, "<s>[INST]  [/INST]  </s><s>[INST]  [/INST]", "forced llama2, empty contents");
    st = tok ? specdec_chat_apply(tok, "mistral", sm, 2, 1, NULL, 0, &(size_t){0}) : SPECDEC_ERR_INTERNAL;
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT &&
                 !strcmp(specdec_last_error(), "chat template: Conversation roles must alternate user/assistant/user/assistant/..."),
             "mistral rejects a system message: %d %s", st, specdec_last_error());
    int32_t ids[8], nid = -1;
    SD_CHECK(tok && specdec_chat_tokenize(tok, "mistral", sm, 2, 1, ids, 8, &nid) == SPECDEC_ERR_INVALID_ARGUMENT && nid == 0,
             "tokenize: the template's error");
    specdec_tokenizer_free(tok);

    /* chat_template.jinja takes priority over the config's template */
    SD_CHECK(write_file("chat_template.jinja", ZEPHYR_JINJA) == 0, "write jinja");
    tok = load_with(CHATML, NULL);
    expect_detect(tok, SPECDEC_OK, "jinja", "chat_template.jinja priority");
    expect_render(tok, NULL, m, 1, 1, "<|user|>\nhi</s>\n<|assistant|>\n", "zephyr");
    SD_CHECK(tok && !strcmp(specdec_tokenizer_chat_template(tok), ZEPHYR_JINJA), "the text as loaded");
    specdec_tokenizer_free(tok);
    remove_file("chat_template.jinja");
}

/* Every allocation of a render fails in turn: OUT_OF_MEMORY each time, then success. */
static void test_alloc_failures(void) {
    specdec_tokenizer *tok = load_with(CHATML, NULL);
    specdec_chat_message m[] = {MSG("system", "s"), MSG("user", "u"), MSG("assistant", "a"), MSG("user", "v")};
    for (int f = 0; tok && specdec_chat_template_name(f); f++) {
        const char *name = specdec_chat_template_name(f);
        int mistral = !strcmp(name, "mistral");
        int done = 0, bad = 0;
        for (long k = 0; k < 1000 && !done; k++) {
            char buf[512];
            size_t len;
            sd_alloc_fail_after(k);
            specdec_status st = specdec_chat_apply(tok, name, m + mistral, 4 - mistral, 1, buf, sizeof buf, &len);
            sd_alloc_fail_after(-1);
            if (st == SPECDEC_OK) done = 1;
            else if (st != SPECDEC_ERR_OUT_OF_MEMORY) bad = 1;
        }
        SD_CHECK(done && !bad, "%s under allocation failures: done %d bad %d", name, done, bad);
    }
    /* the JSON entry point: its own buffers and the render's (cJSON's own allocations are not injected) */
    const char *conv = "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, \"b\"]},"
                       " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"function\": {\"name\": \"f\","
                       " \"arguments\": \"{\\\"x\\\": 1}\"}}]}]";
    int done = 0, bad = 0;
    for (long k = 0; tok && k < 1000 && !done; k++) {
        char buf[512];
        size_t len;
        sd_alloc_fail_after(k);
        specdec_status st = specdec_chat_apply_json(tok, NULL, conv, "[]", "{\"x\": 1}", 1, buf, sizeof buf, &len);
        sd_alloc_fail_after(-1);
        if (st == SPECDEC_OK) done = 1;
        else if (st != SPECDEC_ERR_OUT_OF_MEMORY) bad = 1;
    }
    SD_CHECK(done && !bad, "apply_json under allocation failures: done %d bad %d", done, bad);
    specdec_tokenizer_free(tok);
    /* the end of a load: the special tokens, the template and its parse are the last allocations */
    sd_alloc_fail_after(-1);
    specdec_tokenizer *t2 = NULL;
    specdec_status st = specdec_tokenizer_load(g_dir, &t2);
    long total = sd_alloc_count();
    specdec_tokenizer_free(t2);
    SD_CHECK(st == SPECDEC_OK && total > 0, "load: %s", specdec_last_error());
    for (long k = total > 40 ? total - 40 : 0; k < total; k++) {
        sd_alloc_fail_after(k);
        t2 = NULL;
        st = specdec_tokenizer_load(g_dir, &t2);
        sd_alloc_fail_after(-1);
        SD_CHECK((st == SPECDEC_ERR_OUT_OF_MEMORY && !t2) || (st == SPECDEC_OK && t2), "load with allocation %ld failing: %d", k, st);
        specdec_tokenizer_free(t2);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_chat_api MODELS/kjv-target\n");
        return 2;
    }
    specdec_tokenizer *tok = NULL;
    if (specdec_tokenizer_load(argv[1], &tok)) {
        fprintf(stderr, "cannot load %s: %s\n", argv[1], specdec_last_error());
        return 1;
    }
    test_plain(tok);
    test_bad_input(tok);
    test_json_plain(tok);
    specdec_tokenizer_free(tok);

    static char tokjson[512];
    snprintf(tokjson, sizeof tokjson, "%s/tokenizer.json", argv[1]);
    g_tokjson = tokjson;
    snprintf(g_dir, sizeof g_dir, "/tmp/specdec_chat_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    SD_CHECK(copy_tokenizer() == 0, "copy tokenizer.json");
    test_templates();
    test_alloc_failures();
    remove_file("tokenizer.json");
    remove_file("tokenizer_config.json");
    rmdir(g_dir);
    return sd_test_done();
}

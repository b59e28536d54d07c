/* test_json_schema.c — core/sd_json_schema.h: the exact regex text of small schemas and choice
 * lists (the form documented in the header), every refusal with its status and message, the
 * limits, hostile inputs (deep nesting, recursion fan-out, huge counts) and allocation failures.
 * Matching behaviour against Python's re is test_json_schema_re.py's job. */
#include <stdio.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_json_schema.h"
#include "sd_test.h"

#define WS SD_JSON_WS
#define STR "\"(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})"
#define INT "-?(?:0|[1-9][0-9]*)"

static void expect_re(const char *schema, const char *want) {
    char *re = NULL;
    size_t n = 0;
    sd_errbuf eb = {{0}};
    specdec_status st = sd_json_schema_regex(schema, strlen(schema), &re, &n, &eb);
    SD_CHECK(st == SPECDEC_OK, "%s: status %d (%s)", schema, (int)st, eb.msg);
    if (st == SPECDEC_OK) {
        SD_CHECK(!strcmp(re, want) && n == strlen(want), "%s:\n  got  %s\n  want %s", schema, re, want);
    }
    sd_free(re);
}

static void expect_err(const char *schema, specdec_status want, const char *msg_part) {
    char *re = (char *)1;
    size_t n = 7;
    sd_errbuf eb = {{0}};
    specdec_status st = sd_json_schema_regex(schema, strlen(schema), &re, &n, &eb);
    SD_CHECK(st == want, "%.120s: status %d, want %d (%s)", schema, (int)st, (int)want, eb.msg);
    SD_CHECK(re == NULL && n == 0, "%.120s: outputs not cleared on failure", schema);
    SD_CHECK(strstr(eb.msg, msg_part) != NULL, "%.120s: message '%s' lacks '%s'", schema, eb.msg, msg_part);
    if (st == SPECDEC_OK) sd_free(re);
}

static void test_texts(void) {
    expect_re("{\"type\":\"null\"}", "null");
    expect_re("{\"type\":\"boolean\"}", "(?:true|false)");
    expect_re("{\"type\":\"integer\"}", INT);
    expect_re("{\"type\":\"string\",\"maxLength\":3}", STR "{0,3}\"");
    expect_re("{\"type\":\"string\",\"minLength\":2}", STR "{2,}\"");
    expect_re("{\"type\":[\"string\",\"null\"]}", "(?:null|" STR "*\")");
    expect_re("{\"enum\":[\"a.b\",1,null,0.5,{\"x\":[true]}]}",
              "(?:\"a\\.b\"|1|null|0\\.5|\\{\"x\":" WS "\\[true\\]\\})");
    expect_re("{\"const\":\"q\\\"\\\\\\n\"}", "(?:\"q\\\\\"\\\\\\\\\\\\n\")");
    expect_re("{\"type\":\"string\",\"enum\":[\"a\",1,\"b\"]}", "(?:\"a\"|\"b\")");
    expect_re("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"null\"}},"
              "\"required\":[\"b\"]}",
              "\\{(?:\"a\":" WS INT "," WS ")?\"b\":" WS "null\\}");
    expect_re("{\"properties\":{\"a\":{\"type\":\"null\"},\"b\":{\"type\":\"null\"}}}",
              "\\{(?:\"a\":" WS "null(?:," WS "\"b\":" WS "null)?|\"b\":" WS "null)?\\}");
    expect_re("{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"minItems\":1,\"maxItems\":3}",
              "\\[null(?:," WS "null){0,2}\\]");
    expect_re("{\"type\":\"array\",\"items\":{\"type\":\"null\"}}", "\\[(?:null(?:," WS "null)*)?\\]");
    expect_re("{\"type\":\"array\",\"items\":false}", "\\[\\]");
    expect_re("{\"prefixItems\":[{\"type\":\"null\"},{\"const\":1}],\"type\":\"array\"}",
              "\\[null," WS "(?:1)\\]");
    expect_re("{\"type\":\"integer\",\"minimum\":-12,\"maximum\":345}",
              "(?:-(?:(?:[1-9])|1(?:[0-2]))|(?:(?:[0-9])|(?:[1-9][0-9])|(?:[1-2][0-9]{2}|3(?:[0-3][0-9]|4(?:[0-5])))))");
    expect_re("{\"type\":\"integer\",\"exclusiveMinimum\":0}", "(?:(?:(?:[1-9])|[1-9][0-9]{1,}))");
    /* numbers with bounds: exact decimal comparison digit by digit, no exponent, no "-0" */
    expect_re("{\"type\":\"number\",\"minimum\":-1.25,\"exclusiveMaximum\":3.5}",
              "(?:-(?:0(?:\\.0*[1-9][0-9]*)|1(?:\\.(?:2(?:(?:5(?:0+)?|[0-4][0-9]*))?|[0-1][0-9]*))?)|"
              "(?:0(?:\\.[0-9]+)?|(?:(?:[1-2]))(?:\\.[0-9]+)?|3(?:\\.(?:[0-4][0-9]*))?))");
    expect_re("{\"type\":\"number\",\"minimum\":0,\"maximum\":0}", "(?:(?:0(?:\\.0+)?))");
    expect_re("{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}", "\"(?:[a-z]+)\"");
    expect_re("{\"type\":\"string\",\"format\":\"uuid\"}",
              "\"[0-9a-fA-F]{4}[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
              "[0-9a-fA-F]{4}[0-9a-fA-F]{4}\"");
    expect_re("{\"anyOf\":[{\"type\":\"null\"},false,{\"const\":true}]}", "(?:null|(?:true))");
    expect_re("{\"$defs\":{\"N\":{\"type\":\"null\"}},\"allOf\":[{\"$ref\":\"#/$defs/N\"}],\"title\":\"t\"}",
              "(?:null)");
    expect_re("{\"definitions\":{\"a/b~\":{\"type\":\"null\"}},\"$ref\":\"#/definitions/a~1b~0\"}", "null");
    expect_re("{\"type\":\"object\",\"additionalProperties\":false}", "\\{\\}");
    expect_re("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"null\"}}",
              "\\{(?:" STR "*\":" WS "null(?:," WS STR "*\":" WS "null)*)?\\}");
    expect_re("{\"properties\":{\"a.b\\\"\":{\"type\":\"null\"}},\"required\":[\"a.b\\\"\"]}",
              "\\{\"a\\.b\\\\\"\":" WS "null\\}");
    /* recursion: the third nested Node is cut, so its optional member disappears */
    expect_re("{\"$ref\":\"#/$defs/L\",\"$defs\":{\"L\":{\"properties\":{\"n\":{\"$ref\":\"#/$defs/L\"}}}}}",
              "\\{(?:\"n\":" WS "\\{(?:\"n\":" WS "\\{\\})?\\})?\\}");
    /* an object whose required member is cut disappears from its parent's anyOf */
    expect_re("{\"$defs\":{\"R\":{\"properties\":{\"r\":{\"$ref\":\"#/$defs/R\"}},\"required\":[\"r\"]}},"
              "\"anyOf\":[{\"$ref\":\"#/$defs/R\"},{\"type\":\"null\"}]}", "(?:null)");
    char *re = NULL;
    size_t n = 0;
    sd_errbuf eb;
    SD_CHECK(sd_json_schema_regex("{}", 2, &re, &n, &eb) == SPECDEC_OK && n > 1000 && strlen(re) == n,
             "{} gives the any-value regex (%zu bytes)", n);
    sd_free(re);
    SD_CHECK(sd_json_schema_regex("true", 4, &re, &n, &eb) == SPECDEC_OK && n > 1000, "true: any value");
    sd_free(re);
}

static void test_errors(void) {
    expect_err("{\"properties\":{\"a\":{\"patternProperties\":{}}}}", SPECDEC_ERR_UNSUPPORTED,
               "json schema: 'patternProperties' at /properties/a is not supported");
    expect_err("{\"type\":\"number\",\"multipleOf\":2}", SPECDEC_ERR_UNSUPPORTED, "'multipleOf' at the root");
    expect_err("{\"type\":\"number\",\"minimum\":1e-21}", SPECDEC_ERR_UNSUPPORTED, "more than 20 fraction digits");
    expect_err("{\"type\":\"number\",\"maximum\":-2e15}", SPECDEC_ERR_UNSUPPORTED, "beyond +-1e15");
    expect_err("{\"type\":\"number\",\"maximum\":\"1\"}", SPECDEC_ERR_INVALID_ARGUMENT, "'maximum' must be a number");
    expect_err("{\"type\":\"number\",\"minimum\":0.5,\"exclusiveMaximum\":0.5}", SPECDEC_ERR_INVALID_ARGUMENT, "no value");
    expect_err("{\"items\":[{\"type\":\"null\"}],\"type\":\"array\"}", SPECDEC_ERR_INVALID_ARGUMENT,
               "a schema must be an object or a boolean at /items");
    expect_err("{\"type\":\"string\",\"format\":\"uri\"}", SPECDEC_ERR_UNSUPPORTED, "format 'uri'");
    expect_err("{\"type\":\"string\",\"pattern\":\"a^b\"}", SPECDEC_ERR_UNSUPPORTED, "'^' inside 'pattern'");
    expect_err("{\"type\":\"string\",\"pattern\":\"a)|(b\"}", SPECDEC_ERR_INVALID_ARGUMENT, "unbalanced ')'");
    expect_err("{\"type\":\"string\",\"pattern\":\"[a\"}", SPECDEC_ERR_INVALID_ARGUMENT, "unterminated class");
    expect_err("{\"type\":\"string\",\"pattern\":\"a\",\"maxLength\":3}", SPECDEC_ERR_UNSUPPORTED,
               "'pattern' together with 'maxLength'");
    expect_err("{\"anyOf\":[{\"type\":\"null\"}],\"type\":\"null\"}", SPECDEC_ERR_UNSUPPORTED,
               "'anyOf' together with 'type'");
    expect_err("{\"allOf\":[{},{}]}", SPECDEC_ERR_UNSUPPORTED, "'allOf' with more than one member");
    expect_err("{\"anyOf\":[]}", SPECDEC_ERR_INVALID_ARGUMENT, "'anyOf' must be a non-empty array");
    expect_err("{\"$ref\":\"#/$defs/X\"}", SPECDEC_ERR_INVALID_ARGUMENT, "'$ref' '#/$defs/X' does not resolve");
    expect_err("{\"$ref\":\"http://x/s.json\"}", SPECDEC_ERR_UNSUPPORTED, "is not supported (only #");
    expect_err("{\"type\":\"strin\"}", SPECDEC_ERR_INVALID_ARGUMENT, "unknown type 'strin'");
    expect_err("{\"type\":\"array\",\"minItems\":-1}", SPECDEC_ERR_INVALID_ARGUMENT, "'minItems' must be a non-negative");
    expect_err("{\"type\":\"array\",\"maxItems\":1001}", SPECDEC_ERR_UNSUPPORTED, "'maxItems' = 1001 is above");
    expect_err("{\"type\":\"integer\",\"minimum\":1e16}", SPECDEC_ERR_UNSUPPORTED, "beyond +-1e15");
    expect_err("{\"type\":\"integer\",\"exclusiveMinimum\":true}", SPECDEC_ERR_UNSUPPORTED, "boolean 'exclusiveMinimum'");
    expect_err("{\"properties\":{\"a\":{}},\"additionalProperties\":true}", SPECDEC_ERR_UNSUPPORTED,
               "'additionalProperties' other than false");
    expect_err("{\"properties\":{\"a\":{}},\"required\":[\"b\"]}", SPECDEC_ERR_UNSUPPORTED, "required key 'b'");
    expect_err("{\"required\":[\"b\"]}", SPECDEC_ERR_UNSUPPORTED, "'required' without 'properties'");
    expect_err("{\"type\":\"null\",\"type\":\"null\"}", SPECDEC_ERR_INVALID_ARGUMENT, "duplicate key 'type'");
    expect_err("{\"properties\":{\"a\":{},\"a\":{}}}", SPECDEC_ERR_INVALID_ARGUMENT, "duplicate key 'a'");
    expect_err("{\"enum\":[1],\"minLength\":1}", SPECDEC_ERR_UNSUPPORTED, "'enum' together with 'minLength'");
    expect_err("{\"enum\":[12345678901234567890]}", SPECDEC_ERR_UNSUPPORTED, "beyond 2^53");
    expect_err("{\"const\":\"a\\u0000b\"}", SPECDEC_ERR_UNSUPPORTED, "\\u0000");
    expect_err("{\"type\":", SPECDEC_ERR_INVALID_ARGUMENT, "not valid JSON");
    expect_err("{} x", SPECDEC_ERR_INVALID_ARGUMENT, "not valid JSON");
    expect_err("{\"title\":\"\xff\"}", SPECDEC_ERR_INVALID_ARGUMENT, "not valid UTF-8");
    expect_err("false", SPECDEC_ERR_INVALID_ARGUMENT, "no value is an instance");
    expect_err("{\"type\":\"integer\",\"minimum\":3,\"maximum\":2}", SPECDEC_ERR_INVALID_ARGUMENT, "no value");
    expect_err("{\"enum\":[]}", SPECDEC_ERR_INVALID_ARGUMENT, "no value");
    expect_err("{\"$ref\":\"#\",\"$defs\":{}}", SPECDEC_ERR_INVALID_ARGUMENT, "recursion past the $ref bound");
    expect_err("{\"type\":\"array\",\"prefixItems\":[{},{}],\"maxItems\":1}", SPECDEC_ERR_UNSUPPORTED,
               "'maxItems' below the length of 'prefixItems'");
    char *re = (char *)1;
    size_t n = 3;
    SD_CHECK(sd_json_schema_regex(NULL, 3, &re, &n, NULL) == SPECDEC_ERR_INVALID_ARGUMENT && !re && !n, "NULL text");
    SD_CHECK(sd_json_schema_regex("{}", 2, NULL, &n, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL output");
}

/* A growing text buffer for the generated schemas below. */
typedef struct tbuf {
    char p[1 << 20];
    size_t n;
} tbuf;

static void tput(tbuf *b, const char *s) {
    size_t k = strlen(s);
    if (b->n + k < sizeof b->p) {
        memcpy(b->p + b->n, s, k + 1);
        b->n += k;
    }
}

static tbuf g_buf;

static void test_limits(void) {
    tbuf *b = &g_buf;
    /* nesting past SD_JSON_SCHEMA_MAX_DEPTH */
    b->n = 0;
    for (int i = 0; i < 40; i++) tput(b, "{\"type\":\"array\",\"items\":");
    tput(b, "{}");
    for (int i = 0; i < 40; i++) tput(b, "}");
    char *re = NULL;
    size_t n = 0;
    sd_errbuf eb;
    specdec_status st = sd_json_schema_regex(b->p, b->n, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && strstr(eb.msg, "nesting deeper than 32"), "deep nesting: %d %s", (int)st,
             eb.msg);
    /* JSON nested past cJSON's own limit */
    b->n = 0;
    for (int i = 0; i < 3000; i++) tput(b, "[");
    st = sd_json_schema_regex(b->p, b->n, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT, "3000 '[': %d", (int)st);
    /* the output limit: many any-value properties */
    b->n = 0;
    tput(b, "{\"properties\":{");
    for (int i = 0; i < 100; i++) {
        char k[32];
        snprintf(k, sizeof k, "%s\"p%d\":{}", i ? "," : "", i);
        tput(b, k);
    }
    tput(b, "},\"required\":[\"p0\"]}");
    st = sd_json_schema_regex(b->p, b->n, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && strstr(eb.msg, "would exceed 262144 bytes"), "size: %d %s", (int)st, eb.msg);
    /* schema text over the limit */
    b->n = 0;
    tput(b, "{\"title\":\"");
    while (b->n < SD_JSON_SCHEMA_MAX_BYTES + 10) tput(b, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    tput(b, "\"}");
    st = sd_json_schema_regex(b->p, b->n, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && strstr(eb.msg, "above the limit"), "schema size: %d %s", (int)st, eb.msg);
    /* fan-out through references: 30 definitions, each an anyOf of 60 references to the next, the
     * last recursing into the first: bounded by the work limit, not 60^30 visits */
    b->n = 0;
    tput(b, "{\"$ref\":\"#/$defs/d0\",\"$defs\":{");
    for (int d = 0; d < 30; d++) {
        char k[64];
        snprintf(k, sizeof k, "%s\"d%d\":{\"anyOf\":[", d ? "," : "", d);
        tput(b, k);
        for (int j = 0; j < 60; j++) {
            snprintf(k, sizeof k, "%s{\"$ref\":\"#/$defs/d%d\"}", j ? "," : "", (d + 1) % 30);
            tput(b, k);
        }
        tput(b, "]}");
    }
    tput(b, "}}");
    st = sd_json_schema_regex(b->p, b->n, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && (strstr(eb.msg, "too complex") || strstr(eb.msg, "nesting")),
             "fan-out: %d %s", (int)st, eb.msg);
    /* a pointer longer than the message buffer is cut, not overrun */
    b->n = 0;
    tput(b, "{\"properties\":{\"");
    for (int i = 0; i < 600; i++) tput(b, "k");
    tput(b, "\":{\"not\":{}}}}");
    st = sd_json_schema_regex(b->p, b->n, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && strstr(eb.msg, "'not' at /properties/kkk") && strstr(eb.msg, "..."),
             "long pointer: %s", eb.msg);
}

static void test_choices(void) {
    const char *c1[] = {"a.b", "", "(x)|[y]{2}*+?^$\\", "\xc3\xbc\xf0\x9f\x98\x80", "a\nb"};
    const size_t l1[] = {3, 0, 16, 6, 3};
    char *re = NULL;
    size_t n = 0;
    sd_errbuf eb;
    specdec_status st = sd_choice_regex(c1, l1, 5, &re, &n, &eb);
    const char *want = "(?:a\\.b||\\(x\\)\\|\\[y\\]\\{2\\}\\*\\+\\?\\^\\$\\\\|\xc3\xbc\xf0\x9f\x98\x80|a\\x0ab)";
    SD_CHECK(st == SPECDEC_OK && !strcmp(re, want) && n == strlen(want), "choices: %d %s", (int)st, re ? re : eb.msg);
    sd_free(re);
    const char *nul[] = {"a\0b"};
    const size_t nl[] = {3};
    st = sd_choice_regex(nul, nl, 1, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_OK && !strcmp(re, "(?:a\\x00b)"), "NUL in a choice: %s", re ? re : eb.msg);
    sd_free(re);
    const char *bad[] = {"ok", "\xc3("};
    const size_t bl[] = {2, 2};
    st = sd_choice_regex(bad, bl, 2, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && strstr(eb.msg, "choice 1: not valid UTF-8") && !re, "bad UTF-8");
    st = sd_choice_regex(bad, bl, 0, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && strstr(eb.msg, "need 1..65536 choices"), "n = 0: %s", eb.msg);
    st = sd_choice_regex(NULL, bl, 1, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT, "NULL list");
    /* 60000 choices of 10 bytes: past the output limit */
    static char big[60000][11];
    static const char *bp[60000];
    static size_t blen[60000];
    for (int i = 0; i < 60000; i++) {
        snprintf(big[i], sizeof big[i], "c%09u", (unsigned)i % 1000000000u);
        bp[i] = big[i];
        blen[i] = 10;
    }
    st = sd_choice_regex(bp, blen, 60000, &re, &n, &eb);
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && strstr(eb.msg, "choice: the regex would exceed"), "big: %s", eb.msg);
}

/* Every allocation failing in turn: OUT_OF_MEMORY or success, never a crash or leak (ASan). */
static void test_alloc_failures(void) {
    const char *schema = "{\"$defs\":{\"A\":{\"properties\":{\"x\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/A\"}},"
                         "\"y\":{}},\"required\":[\"y\"]}},\"anyOf\":[{\"$ref\":\"#/$defs/A\"},{\"enum\":[1,\"a\"]}]}";
    int ok_at = -1;
    for (long k = 0; k < 400 && ok_at < 0; k++) {
        char *re = NULL;
        size_t n = 0;
        sd_errbuf eb;
        sd_alloc_fail_after(k);
        specdec_status st = sd_json_schema_regex(schema, strlen(schema), &re, &n, &eb);
        sd_alloc_fail_after(-1);
        SD_CHECK(st == SPECDEC_OK || (st == SPECDEC_ERR_OUT_OF_MEMORY && !re), "fail at %ld: %d %s", k, (int)st, eb.msg);
        if (st == SPECDEC_OK) ok_at = (int)k;
        sd_free(re);
    }
    SD_CHECK(ok_at > 5, "succeeded after %d injected failures", ok_at);
}

int main(void) {
    test_texts();
    test_errors();
    test_limits();
    test_choices();
    test_alloc_failures();
    return sd_test_done();
}

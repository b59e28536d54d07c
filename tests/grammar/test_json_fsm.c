/* test_json_fsm.c — core/sd_json_fsm.h: a table of (object_only, max_depth, text, expectation)
 * over every value kind, number forms and digit bounds, string escapes, UTF-8 of 2/3/4 bytes and
 * ill-formed UTF-8, raw control characters, the depth limit, the whitespace bound (leading,
 * inner, none trailing) and object_only; interning (equal configurations reached by different
 * prefixes share an id, different stacks or counters do not, a repeated walk interns nothing);
 * SD_FSM_FULL at max_states and on allocation failures; argument errors; and, exhaustively for
 * max_depth 1..4, that every reachable state can reach an accepting one (backward search over
 * the whole transition graph). RFC 8259 is the reference the expectations were written from
 * (tests/grammar/test_json_fsm_diff.c checks against cJSON on random texts). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_json_fsm.h"
#include "sd_test.h"

/* M: the whole text is accepted; P: a live prefix that is not complete; D: dead. */
typedef struct jf_case {
    int object_only, max_depth;
    const char *text;
    char expect;
} jf_case;

static const jf_case CASES[] = {
    /* literals and numbers at the top level */
    {0, 4, "", 'P'}, {0, 4, "true", 'M'}, {0, 4, "tru", 'P'}, {0, 4, "trux", 'D'}, {0, 4, "false", 'M'},
    {0, 4, "fals", 'P'}, {0, 4, "null", 'M'}, {0, 4, "nulll", 'D'}, {0, 4, "True", 'D'}, {0, 4, "nan", 'D'},
    {0, 4, "0", 'M'}, {0, 4, "-0", 'M'}, {0, 4, "123", 'M'}, {0, 4, "-", 'P'}, {0, 4, "1.5", 'M'}, {0, 4, "1.", 'P'},
    {0, 4, "1.e5", 'D'}, {0, 4, ".5", 'D'}, {0, 4, "01", 'D'}, {0, 4, "-01", 'D'}, {0, 4, "00", 'D'},
    {0, 4, "1e5", 'M'}, {0, 4, "1E+5", 'M'}, {0, 4, "1e-05", 'M'}, {0, 4, "1e", 'P'}, {0, 4, "1e+", 'P'},
    {0, 4, "1e+-1", 'D'}, {0, 4, "1e5.0", 'D'}, {0, 4, "1e5e5", 'D'}, {0, 4, "+1", 'D'}, {0, 4, "1.5e3", 'M'},
    {0, 4, "0.0", 'M'}, {0, 4, "-0.25E-7", 'M'}, {0, 4, "1x", 'D'}, {0, 4, "0x10", 'D'}, {0, 4, "--1", 'D'},
    {0, 4, "-.5", 'D'}, {0, 4, "1..5", 'D'}, {0, 4, "Infinity", 'D'},
    /* strings: escapes, control characters */
    {0, 4, "\"\"", 'M'}, {0, 4, "\"abc\"", 'M'}, {0, 4, "\"a", 'P'}, {0, 4, "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", 'M'},
    {0, 4, "\"\\u00e9\\uABCD\\uffff\"", 'M'}, {0, 4, "\"\\u12", 'P'}, {0, 4, "\"\\u12\"", 'D'}, {0, 4, "\"\\u12g4\"", 'D'},
    {0, 4, "\"\\U0041\"", 'D'}, {0, 4, "\"\\x41\"", 'D'}, {0, 4, "\"\\a\"", 'D'}, {0, 4, "\"\\'\"", 'D'},
    {0, 4, "\"\\", 'P'}, {0, 4, "\"\\ud800\"", 'M'}, {0, 4, "\"\\udc00\\ud800\"", 'M'}, {0, 4, "\"\x01\"", 'D'},
    {0, 4, "\"\t\"", 'D'}, {0, 4, "\"\n\"", 'D'}, {0, 4, "\"\x1f\"", 'D'}, {0, 4, "\"\x7f\"", 'M'},
    {0, 4, "\"a\"b", 'D'}, {0, 4, "\"{[,:]}\"", 'M'},
    /* strings: UTF-8 (well-formed: 2, 3, 4 bytes and the edges; ill-formed: truncated, overlong,
     * surrogates, above U+10FFFF, stray continuation bytes, bytes that never occur) */
    {0, 4, "\"\xc3\xa9\"", 'M'}, {0, 4, "\"\xc2\x80\xdf\xbf\"", 'M'}, {0, 4, "\"\xe2\x82\xac\"", 'M'},
    {0, 4, "\"\xe0\xa0\x80\xef\xbf\xbf\"", 'M'}, {0, 4, "\"\xf0\x9f\x98\x80\"", 'M'}, {0, 4, "\"\xf0\x90\x80\x80\"", 'M'},
    {0, 4, "\"\xf4\x8f\xbf\xbf\"", 'M'}, {0, 4, "\"\xed\x9f\xbf\xee\x80\x80\"", 'M'}, {0, 4, "\"\xe2\x82", 'P'},
    {0, 4, "\"\xc3\"", 'D'}, {0, 4, "\"\xe2\x82\"", 'D'}, {0, 4, "\"\xf0\x9f\x98\"", 'D'}, {0, 4, "\"\xc0\x80\"", 'D'},
    {0, 4, "\"\xc1\xbf\"", 'D'}, {0, 4, "\"\xe0\x9f\xbf\"", 'D'}, {0, 4, "\"\xed\xa0\x80\"", 'D'},
    {0, 4, "\"\xed\xbf\xbf\"", 'D'}, {0, 4, "\"\xf0\x8f\xbf\xbf\"", 'D'}, {0, 4, "\"\xf4\x90\x80\x80\"", 'D'},
    {0, 4, "\"\xf5\x80\x80\x80\"", 'D'}, {0, 4, "\"\xff\"", 'D'}, {0, 4, "\"\xfe\"", 'D'}, {0, 4, "\"\x80\"", 'D'},
    {0, 4, "\"\xbf\"", 'D'}, {0, 4, "\"\xc3\xa9\xa9\"", 'D'}, {0, 4, "\"\xe2\x28\xa1\"", 'D'},
    {0, 4, "\xc3\xa9", 'D'}, {0, 4, "{\"\xc3\xa9\":\"\xf0\x9f\x98\x80\"}", 'M'},
    /* containers */
    {0, 4, "[]", 'M'}, {0, 4, "{}", 'M'}, {0, 4, "[1,2]", 'M'}, {0, 4, "[1,]", 'D'}, {0, 4, "[,1]", 'D'},
    {0, 4, "[1 , 2 ]", 'M'}, {0, 4, "{\"a\":1}", 'M'}, {0, 4, "{\"a\" : [true, false, null], \"b\": {\"c\": \"d\"}}", 'M'},
    {0, 4, "{\"a\"}", 'D'}, {0, 4, "{\"a\":}", 'D'}, {0, 4, "{1:2}", 'D'}, {0, 4, "{\"a\":1,}", 'D'},
    {0, 4, "{\"a\":1 \"b\":2}", 'D'}, {0, 4, "{\"a\" 1}", 'D'}, {0, 4, "{\"a\"::1}", 'D'}, {0, 4, "{,}", 'D'},
    {0, 4, "[1 2]", 'D'}, {0, 4, "[}", 'D'}, {0, 4, "{]", 'D'}, {0, 4, "[1}", 'D'}, {0, 4, "{\"a\":1]", 'D'},
    {0, 4, "[[[", 'P'}, {0, 4, "[-1,0.5e-3,[],{}]", 'M'}, {0, 4, "[1]]", 'D'}, {0, 4, "{}{}", 'D'},
    {0, 4, "[][]", 'D'}, {0, 4, "[\"a\",\"b\"]", 'M'}, {0, 4, "[01]", 'D'}, {0, 4, "[0,-0]", 'M'}, {0, 4, "[1e5]", 'M'},
    {0, 4, "[1e]", 'D'}, {0, 4, "[1.]", 'D'}, {0, 4, "[-]", 'D'}, {0, 4, "[-", 'P'}, {0, 4, "{\"\":0}", 'M'},
    {0, 4, "[1,{\"k\":[2,{\"j\":null}]}]", 'M'}, {0, 4, "{\"a\":1,\"a\":2}", 'M'}, {0, 4, "[true false]", 'D'},
    {0, 4, "[true,", 'P'}, {0, 4, "[0]", 'M'}, {0, 4, "[0 ]", 'M'}, {0, 4, "[0\n,\t1\r]", 'M'}, {0, 4, "{\"a\":0}", 'M'},
    {0, 4, "{\"a\":-1e+9 }", 'M'}, {0, 4, "[tru]", 'D'}, {0, 4, "[\"a\":1]", 'D'}, {0, 4, "{\"a\",1}", 'D'},
    /* whitespace: " \t\n\r" only, runs of at most 16, none after the top value */
    {0, 4, " 1", 'D'}, {0, 4, "[ \t\n\r1 \t\n\r]", 'M'}, {0, 4, " \t[1]", 'D'}, {0, 4, "[] ", 'D'}, {0, 4, "1 ", 'D'}, {0, 4, "\"a\" ", 'D'},
    {0, 4, "true\n", 'D'}, {0, 4, "\f1", 'D'}, {0, 4, "\v1", 'D'}, {0, 4, "\xc2\xa0" "1", 'D'},
    {0, 4, "[                1]", 'M'}, {0, 4, "[                 1]", 'D'}, {0, 4, "                 ", 'D'},
    {0, 4, "[                ]", 'M'}, {0, 4, "[                 ]", 'D'},
    {0, 4, "{                \"a\"                :                1                ,"
           "                \"b\"                :[                ]                }", 'M'},
    {0, 4, "{\"a\"                 :1}", 'D'}, {0, 4, "[1,                 2]", 'D'}, {0, 4, "[1                 ,2]", 'D'},
    {0, 4, "[1 \t\n\r \t\n\r \t\n\r \t\n\r,2]", 'M'},
    /* depth */
    {0, 1, "[]", 'M'}, {0, 1, "[1,\"a\",null]", 'M'}, {0, 1, "[[]]", 'D'}, {0, 1, "[[", 'D'}, {0, 1, "{\"a\":{}}", 'D'},
    {0, 1, "{\"a\":[]}", 'D'}, {0, 1, "{\"a\":1}", 'M'}, {0, 1, "1", 'M'}, {0, 2, "[[]]", 'M'}, {0, 2, "[[[]]]", 'D'},
    {0, 2, "[{\"a\":[]}]", 'D'}, {0, 2, "[{\"a\":1},[2]]", 'M'},
    /* object_only */
    {1, 4, "{}", 'M'}, {1, 4, "[]", 'D'}, {1, 4, "1", 'D'}, {1, 4, "\"a\"", 'D'}, {1, 4, "true", 'D'}, {1, 4, " {}", 'D'},
    {1, 4, "{\"a\":[1]}", 'M'}, {1, 4, "", 'P'}, {1, 4, "  ", 'D'}, {1, 4, "{", 'P'}, {1, 1, "{\"a\":[]}", 'D'},
    {1, 1, "{\"a\":\"b\"}", 'M'},
};

/* Walks text through f: 'D' if a step is dead, else 'M' / 'P' by acceptance; 'F' on FULL. */
static char jf_walk(sd_fsm *f, const char *text, size_t n, int32_t *end) {
    int32_t s = f->start;
    for (size_t i = 0; i < n; i++) {
        s = sd_fsm_step(f, s, (uint8_t)text[i]);
        if (s == SD_FSM_DEAD) return 'D';
        if (s == SD_FSM_FULL) return 'F';
    }
    if (end) *end = s;
    return sd_fsm_accepting(f, s) ? 'M' : 'P';
}

static sd_fsm *jf_make(int object_only, int32_t max_depth, int32_t max_states) {
    sd_fsm *f = NULL;
    sd_errbuf eb;
    const specdec_status st = sd_json_fsm_create(object_only, max_depth, max_states, &f, &eb);
    SD_CHECK(st == SPECDEC_OK && f, "create(%d, %d, %d): %s", object_only, (int)max_depth, (int)max_states, eb.msg);
    return st == SPECDEC_OK ? f : NULL;
}

static void test_cases(void) {
    int n = 0;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const jf_case *c = &CASES[i];
        sd_fsm *f = jf_make(c->object_only, c->max_depth, 1 << 20);
        if (!f) continue;
        const char got = jf_walk(f, c->text, strlen(c->text), NULL);
        SD_CHECK(got == c->expect, "case %zu (object_only %d, depth %d) \"%s\": got %c, expected %c", i,
                 c->object_only, (int)c->max_depth, c->text, got, c->expect);
        sd_fsm_free(f);
        n++;
    }
    printf("cases: %d texts\n", n);
}

/* Texts of exact lengths: digit runs at and past SD_JSON_FSM_MAX_DIGITS, depth 64 and 65. */
static void test_bounds(void) {
    char buf[256];
    const int D = SD_JSON_FSM_MAX_DIGITS;
    const char *forms[3] = {"1", "0.", "1e"}; /* then digits: integer, fraction, exponent */
    for (int k = 0; k < 3; k++)
        for (int extra = 0; extra <= 1; extra++) {
            sd_fsm *f = jf_make(0, 4, 1 << 20);
            if (!f) return;
            const int pre = (int)strlen(forms[k]), digits = D + extra - (k == 0);
            memcpy(buf, forms[k], (size_t)pre);
            memset(buf + pre, '7', (size_t)digits);
            buf[pre + digits] = '\0';
            SD_CHECK(jf_walk(f, buf, strlen(buf), NULL) == (extra ? 'D' : 'M'), "digits %s + %d: %s", forms[k], digits, buf);
            sd_fsm_free(f);
        }
    for (int depth = 64; depth <= 65; depth++) {
        sd_fsm *f = jf_make(0, 64, 1 << 20);
        if (!f) return;
        memset(buf, '[', (size_t)depth);
        memset(buf + depth, ']', (size_t)depth);
        buf[2 * depth] = '\0';
        SD_CHECK(jf_walk(f, buf, (size_t)(2 * depth), NULL) == (depth == 64 ? 'M' : 'D'), "depth %d", depth);
        sd_fsm_free(f);
    }
    /* a NUL byte: never whitespace, never inside a string */
    sd_fsm *f = jf_make(0, 4, 1 << 20);
    if (!f) return;
    SD_CHECK(jf_walk(f, "[\0]", 3, NULL) == 'D' && jf_walk(f, "\"\0\"", 3, NULL) == 'D', "NUL bytes");
    sd_fsm_free(f);
}

static int32_t jf_state(sd_fsm *f, const char *text) {
    int32_t s = -3;
    const char r = jf_walk(f, text, strlen(text), &s);
    return r == 'M' || r == 'P' ? s : -3;
}

static void test_interning(void) {
    sd_fsm *f = jf_make(0, 8, 1 << 20);
    if (!f) return;
    static const char *const same[][2] = {
        {"[1,2", "[3,4"},       {"[1,\"ab\",", "[1,"},   {"[1,", "[[1],"},        {"{\"a\":1", "{\"bcd\":7"},
        {"[true", "[null"},     {"[{}", "[[1,2]"},           {"[\"\\u00e9", "[\"x"},
        {"{\"a\":[1],", "{\"x\":{},"},
    };
    /* "[[" vs "[1,": depth 2 vs 1; "[{\"a\":[" vs "[[[": the same depth and lexical state, another stack */
    static const char *const differ[][2] = {
        {"[[", "[1,"},          {"{\"a\":[", "[["},          {"[{", "{\"a\":{"},
        {"[ ", "[  "},          {"[12", "[1"},               {"[\"a\"", "{\"a\""},
        {"[\"\xc3", "[\"\xe2"}, {"[\"\\u0", "[\"\\u00"},     {"[{\"a\":[", "[[["},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        const int32_t a = jf_state(f, same[i][0]), b = jf_state(f, same[i][1]);
        SD_CHECK(a >= 0 && a == b, "'%s' -> %d and '%s' -> %d should be one state", same[i][0], (int)a, same[i][1],
                 (int)b);
    }
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        const int32_t a = jf_state(f, differ[i][0]), b = jf_state(f, differ[i][1]);
        SD_CHECK(a >= 0 && b >= 0 && a != b, "'%s' -> %d and '%s' -> %d should differ", differ[i][0], (int)a,
                 differ[i][1], (int)b);
    }
    const char *text = "{\"k\": [1, 2.5e3, \"s\\n\xc3\xa9\", {\"x\": null}], \"t\": true}";
    int32_t end1 = -3, end2 = -3;
    SD_CHECK(jf_walk(f, text, strlen(text), &end1) == 'M', "%s", text);
    const int32_t held = f->vt->n_states(f);
    SD_CHECK(jf_walk(f, text, strlen(text), &end2) == 'M' && end1 == end2, "second walk");
    SD_CHECK(f->vt->n_states(f) == held, "a repeated walk interned %d new states", (int)(f->vt->n_states(f) - held));
    SD_CHECK(sd_fsm_step(f, -1, '[') == SD_FSM_DEAD && sd_fsm_step(f, held, '[') == SD_FSM_DEAD, "bad ids");
    SD_CHECK(!sd_fsm_accepting(f, -1) && !sd_fsm_accepting(f, held), "bad ids are not accepting");
    sd_fsm_free(f);
}

static void test_full(void) {
    sd_fsm *f = jf_make(0, 8, 1);
    if (f) {
        SD_CHECK(f->vt->n_states(f) == 1 && f->start == 0, "one state: the start");
        SD_CHECK(sd_fsm_step(f, 0, '[') == SD_FSM_FULL, "max_states 1: a new state is FULL");
        SD_CHECK(sd_fsm_step(f, 0, 'x') == SD_FSM_DEAD, "DEAD stays DEAD at the limit");
        sd_fsm_free(f);
    }
    f = jf_make(0, 8, 3);
    if (f) {
        const int32_t a = sd_fsm_step(f, 0, '['), b = a >= 0 ? sd_fsm_step(f, a, '[') : -9;
        SD_CHECK(a == 1 && b == 2, "ids 1, 2: %d %d", (int)a, (int)b);
        SD_CHECK(sd_fsm_step(f, b, '[') == SD_FSM_FULL && f->vt->n_states(f) == 3, "third new state: FULL");
        SD_CHECK(sd_fsm_step(f, 0, '[') == a && sd_fsm_step(f, a, '[') == b, "known states still answer");
        SD_CHECK(sd_fsm_step(f, b, ']') == SD_FSM_FULL, "'[[]' is a new state too");
        sd_fsm_free(f);
    }
    /* allocation failures while interning: FULL, never a crash; the automaton stays usable */
    long full = 0;
    for (long k = 0; k < 8; k++) {
        sd_fsm *g = jf_make(0, 64, 1 << 20);
        if (!g) return;
        char text[130];
        memset(text, '[', 64);
        memset(text + 64, ']', 64);
        sd_alloc_fail_after(k);
        int32_t s = g->start;
        for (int i = 0; i < 128 && s >= 0; i++) s = sd_fsm_step(g, s, (uint8_t)text[i]);
        sd_alloc_fail_after(-1);
        full += s == SD_FSM_FULL;
        SD_CHECK(s == SD_FSM_FULL || sd_fsm_accepting(g, s), "fail_after %ld: %d", k, (int)s);
        SD_CHECK(jf_walk(g, text, 128, NULL) == 'M', "fail_after %ld: usable after", k);
        sd_fsm_free(g);
    }
    SD_CHECK(full >= 1, "some injected failure hit an interning allocation");
}

static void test_arguments(void) {
    static const struct {
        int object_only, max_depth, max_states;
        const char *needle;
    } bad[] = {{2, 4, 100, "object_only 2"}, {-1, 4, 100, "object_only -1"}, {0, 0, 100, "max_depth 0"},
               {0, 65, 100, "max_depth 65"}, {0, 4, 0, "max_states 0"},      {0, 4, -5, "max_states -5"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sd_fsm *f = (sd_fsm *)&f;
        sd_errbuf eb;
        eb.msg[0] = '\0';
        const specdec_status st = sd_json_fsm_create(bad[i].object_only, bad[i].max_depth, bad[i].max_states, &f, &eb);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && f == NULL && strstr(eb.msg, bad[i].needle), "%s: %d '%s'",
                 bad[i].needle, (int)st, eb.msg);
    }
    sd_errbuf eb;
    SD_CHECK(sd_json_fsm_create(0, 4, 4, NULL, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "out NULL");
    for (long k = 0; k < 3; k++) {
        sd_fsm *f = NULL;
        sd_alloc_fail_after(k);
        const specdec_status st = sd_json_fsm_create(0, 4, 100, &f, &eb);
        sd_alloc_fail_after(-1);
        SD_CHECK(st == SPECDEC_ERR_OUT_OF_MEMORY && f == NULL, "create with allocation %ld failing: %d", k, (int)st);
    }
}

/* Every state reachable from the start (all 256 bytes) can reach an accepting one: the whole
 * transition graph, then a backward search from the accepting states. Returns the state count. */
static int32_t jf_all_viable(int object_only, int32_t max_depth) {
    const int32_t cap = 1 << 16;
    sd_fsm *f = jf_make(object_only, max_depth, cap);
    if (!f) return -1;
    int32_t *to = malloc((size_t)cap * 256 * sizeof(int32_t));
    uint8_t *live = calloc((size_t)cap, 1);
    if (!to || !live) {
        SD_CHECK(0, "out of memory");
        free(to), free(live), sd_fsm_free(f);
        return -1;
    }
    long bad = 0;
    for (int32_t s = 0; s < f->vt->n_states(f); s++) /* n_states grows while we go: a BFS in id order */
        for (int b = 0; b < 256; b++) {
            const int32_t t = sd_fsm_step(f, s, (uint8_t)b);
            bad += t == SD_FSM_FULL || t < SD_FSM_FULL || t >= f->vt->n_states(f);
            to[(size_t)s * 256 + (size_t)b] = t;
        }
    const int32_t n = f->vt->n_states(f);
    int32_t n_acc = 0;
    for (int32_t s = 0; s < n; s++)
        if (sd_fsm_accepting(f, s)) live[s] = 1, n_acc++;
    /* backward closure to a fixed point (the graph is small): a state is live if some byte leads to
     * a live one; ids are in breadth-first order, so sweeping from the last id converges fast */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t s = n - 1; s >= 0; s--)
            for (int b = 0; b < 256 && !live[s]; b++) {
                const int32_t t = to[(size_t)s * 256 + (size_t)b];
                if (t >= 0 && live[t]) live[s] = 1, changed = 1;
            }
    }
    int32_t stuck = 0;
    for (int32_t s = 0; s < n; s++) stuck += !live[s];
    SD_CHECK(bad == 0 && stuck == 0 && n_acc > 0, "object_only %d depth %d: %d states, %d cannot accept, %ld bad steps",
             object_only, (int)max_depth, (int)n, (int)stuck, bad);
    free(to), free(live), sd_fsm_free(f);
    return n;
}

static void test_viability(void) {
    for (int oo = 0; oo <= 1; oo++)
        for (int32_t d = 1; d <= 4; d++) {
            const int32_t n = jf_all_viable(oo, d);
            printf("viability: object_only %d max_depth %d: %d reachable states, all can accept\n", oo, (int)d, (int)n);
        }
}

int main(void) {
    test_cases();
    test_bounds();
    test_interning();
    test_full();
    test_arguments();
    test_viability();
    return sd_test_done();
}

/* test_gbnf.c — core/sd_gbnf.h: a table of grammars and texts (whole match M, live prefix P,
 * dead D) over arithmetic expressions, a JSON-like grammar (the shape of llama.cpp's
 * grammars/json.gbnf, written here), chess move lists, repetition bounds, classes with UTF-8 of
 * 2/3/4 bytes, negated classes, nullable rules, '.', escapes, comments and the depth bound; every
 * error (status and message); interning (equal configurations reached by different prefixes share
 * an id, a repeated walk interns nothing); SD_FSM_FULL on a tiny max_states; and, on each
 * grammar, that every state reached by a walk over all bytes can still reach acceptance. The
 * expectations were written from the grammars by hand (llama.cpp grammars/README.md semantics). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_fsm_check.h"
#include "sd_gbnf.h"
#include "sd_test.h"

static const char *const ARITH = "root ::= expr\n"
                                 "expr ::= term ((\"+\" | \"-\") term)*\n"
                                 "term ::= factor ((\"*\" | \"/\") factor)*\n"
                                 "factor ::= num | \"(\" expr \")\" | \"-\" factor\n"
                                 "num ::= [0-9]+ # digits\n";

static const char *const JSONISH =
    "# the shape of llama.cpp's json.gbnf\n"
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "            string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static const char *const CHESS = "root ::= \"1. \" move \" \" move \"\\n\" ([1-9] [0-9]? \". \" move \" \" move \"\\n\")+\n"
                                 "move ::= (pawn | nonpawn | castle) [+#]?\n"
                                 "pawn ::= ([a-h] \"x\")? [a-h] [1-8] (\"=\" [NBKQR])?\n"
                                 "nonpawn ::= [NBKQR] [a-h]? [1-8]? \"x\"? [a-h] [1-8]\n"
                                 "castle ::= \"O-O\" \"-O\"?\n";

static const char *const REPS = "root ::= \"x\"{2,4} [0-9]{3} (\"ab\"){0,2} \"-\"{1,} \"z\"{0}\n";
static const char *const UTF = "root ::= [a-zé-ÿ\\u4e00-\\u4e0f\\U0001F600-\\U0001F60F]+ [^a-z\\n]?\n";
static const char *const NULLABLE = "root ::= a b c d\na ::= \"x\"?\nb ::= (\"y\" | )\nc ::= \"z\"*\nd ::= e\ne ::=\n";
static const char *const DOT = "root ::= \"<\" .{0,2} \">\"\n";
static const char *const ESC = "root ::= \"\\x41\\u00e9\\n\\t\\\\\\\"\\[\\]\" [\\]\\[\\-\\^]\n";
static const char *const ANBN = "root ::= \"a\" root \"b\" | \"\"\n";
static const char *const NEG = "root ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\n";

typedef struct case_t {
    const char *const *grammar;
    const char *text;
    char expect;
} case_t;

static const case_t CASES[] = {
    {&ARITH, "1", 'M'}, {&ARITH, "1+2*3", 'M'}, {&ARITH, "(1+2)*-3", 'M'}, {&ARITH, "((12))", 'M'}, {&ARITH, "", 'P'},
    {&ARITH, "1+", 'P'}, {&ARITH, "(1", 'P'}, {&ARITH, "1)", 'D'}, {&ARITH, "+1", 'D'}, {&ARITH, "1++2", 'D'},
    {&ARITH, "1 + 2", 'D'}, {&ARITH, "--1", 'M'}, {&ARITH, "()", 'D'}, {&ARITH, "1/2/3-4", 'M'}, {&ARITH, "x", 'D'},
    {&JSONISH, "{}", 'M'}, {&JSONISH, "{\"a\": 1}", 'M'}, {&JSONISH, "{\"a\":[1, 2.5e3, true, null]}", 'M'},
    {&JSONISH, "{\"a\": {\"b\": \"c\\u00e9\\n\"}} ", 'M'}, {&JSONISH, "{\"a\": 01}", 'D'}, {&JSONISH, "{", 'P'},
    {&JSONISH, "[]", 'D'}, {&JSONISH, "{\"a\" : 1}", 'M'}, {&JSONISH, "{\"a\"  : 1}", 'D'}, {&JSONISH, "{\"a\":1,}", 'D'}, {&JSONISH, "{\"\x01\":1}", 'D'},
    {&JSONISH, "{\"a\":\"\\x\"}", 'D'}, {&JSONISH, "{\"é😀\":\"\"}", 'M'}, {&JSONISH, "{\n  \"a\":1}", 'M'},
    {&JSONISH, "{\"a\":1}\n\t\t", 'M'}, {&JSONISH, "{\"a\":1}  ", 'D'}, {&JSONISH, "{\"a\":\"\\u12\"}", 'D'},
    {&CHESS, "1. e4 e5\n2. Nf3 Nc6\n", 'M'}, {&CHESS, "1. e4 e5\n", 'P'}, {&CHESS, "1. O-O O-O-O\n10. exd5+ Qxd5#\n", 'M'},
    {&CHESS, "1. e9 e5\n", 'D'}, {&CHESS, "1. e8=Q e5\n2. a1 a2\n", 'M'}, {&CHESS, "1. e4 e5\n0. a1 a2\n", 'D'},
    {&CHESS, "1. e4 e5\n100. a1 a2\n", 'D'}, {&CHESS, "2. e4", 'D'},
    {&REPS, "xx123-", 'M'}, {&REPS, "xxxx123abab---", 'M'}, {&REPS, "x123-", 'D'}, {&REPS, "xxxxx", 'D'},
    {&REPS, "xx12-", 'D'}, {&REPS, "xx123ababab-", 'D'}, {&REPS, "xx123aba", 'P'}, {&REPS, "xx123", 'P'},
    {&REPS, "xx123-z", 'D'},
    {&UTF, "a", 'M'}, {&UTF, "é", 'M'}, {&UTF, "ÿ", 'M'}, {&UTF, "\xc3\xa8", 'D'}, {&UTF, "a\xc3\xa8", 'M'}, {&UTF, "\xc3\xa0", 'D'},
    {&UTF, "\xe4\xb8\x80", 'M'}, {&UTF, "\xe4\xb8\x8f", 'M'}, {&UTF, "\xe4\xb8\x90", 'D'}, {&UTF, "\xe4\xb8", 'P'},
    {&UTF, "\xe4\xb9", 'D'}, {&UTF, "😀", 'M'}, {&UTF, "😏", 'M'}, {&UTF, "\xf0\x9f\x98\x90", 'D'}, {&UTF, "\xf0\x9f", 'P'},
    {&UTF, "\xf0\x9e", 'D'}, {&UTF, "aZ", 'M'}, {&UTF, "a€", 'M'}, {&UTF, "a\n", 'D'}, {&UTF, "a!b", 'D'},
    {&UTF, "a\xc3", 'P'}, {&UTF, "a\xed\xa0\x80", 'D'}, {&UTF, "a\xc0\x80", 'D'}, {&UTF, "a\xff", 'D'}, {&UTF, "", 'P'},
    {&NULLABLE, "", 'M'}, {&NULLABLE, "x", 'M'}, {&NULLABLE, "xy", 'M'}, {&NULLABLE, "xyzzz", 'M'}, {&NULLABLE, "yz", 'M'},
    {&NULLABLE, "z", 'M'}, {&NULLABLE, "yx", 'D'}, {&NULLABLE, "xx", 'D'}, {&NULLABLE, "zy", 'D'},
    {&DOT, "<>", 'M'}, {&DOT, "<a>", 'M'}, {&DOT, "<\n😀>", 'M'}, {&DOT, "<>>", 'M'}, {&DOT, "<abc>", 'D'},
    {&DOT, "<\x00>", 'M'}, {&DOT, "<\xed\xa0\x80>", 'D'}, {&DOT, "<\xf4\x8f\xbf\xbf>", 'M'}, {&DOT, "<\xf4\x90", 'D'},
    {&ESC, "A\xc3\xa9\n\t\\\"[]-", 'M'}, {&ESC, "A\xc3\xa9\n\t\\\"[]^", 'M'}, {&ESC, "A\xc3\xa9\n\t\\\"[]]", 'M'},
    {&ESC, "A\xc3\xa9\n\t\\\"[]a", 'D'},
    {&ANBN, "", 'M'}, {&ANBN, "ab", 'M'}, {&ANBN, "aabb", 'M'}, {&ANBN, "aab", 'P'}, {&ANBN, "abb", 'D'}, {&ANBN, "ba", 'D'},
    {&NEG, "\"\"", 'M'}, {&NEG, "\"a'b\"", 'M'}, {&NEG, "\"a\"b\"", 'D'}, {&NEG, "\"\\", 'D'}, {&NEG, "\"é\n\"", 'M'},
};

typedef struct err_t {
    const char *grammar;
    specdec_status st;
    const char *msg;
} err_t;

static const err_t ERRS[] = {
    {"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: no 'root' rule"},
    {"foo ::= \"a\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: no 'root' rule"},
    {"root ::= \"a\" foo\n", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: undefined rule 'foo' at byte 13"},
    {"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: rule 'expr' is left-recursive"},
    {"root ::= a\na ::= b \"x\"\nb ::= c? a | \"y\"\nc ::= \"z\"", SPECDEC_ERR_INVALID_ARGUMENT,
     "gbnf: rule 'a' is left-recursive"},
    {"root ::= (\"\")* \"x\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: rule 'root' is left-recursive (in a group"},
    {"root ::= a\na ::= \"x\" a", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: rule 'root' derives no finite string"},
    {"root ::= \"x\" | b\nb ::= \"y\" b", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: rule 'b' derives no finite string"},
    {"root ::= \"a", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unterminated string at byte 9"},
    {"root ::= [a-", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unterminated character class at byte 9"},
    {"root ::= [z-a]", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: bad character range at byte 11"},
    {"root ::= [\\uD800-\\uDFFF]", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: character class matches nothing at byte 9"},
    {"root ::= [^\\x00-\\U0010FFFF]", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: character class matches nothing at byte 9"},
    {"root ::= \"\\q\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unknown escape '\\q' at byte 10"},
    {"root ::= \"\\x4\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: bad hex digits in escape at byte 10"},
    {"root ::= \"\\U00110000\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: code point above U+10FFFF at byte 10"},
    {"root ::= (\"a\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected ')' for the '(' at byte 9, at byte 13"},
    {"root ::= \"a\")", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unbalanced ')' at byte 12"},
    {"root ::= \"a\"{3,2}", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: repetition {3,2} with max < min at byte 12"},
    {"root ::= \"a\"{1001}", SPECDEC_ERR_UNSUPPORTED, "gbnf: repetition count above 1000 at byte 13"},
    {"root ::= \"a\"{2", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected '}' in the repetition at byte 12"},
    {"root ::= \"a\"{,2}", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected a number at byte 13"},
    {"root ::= (= \"a\") \"a\"", SPECDEC_ERR_UNSUPPORTED, "gbnf: lookahead assertions (= ...) are not supported at byte 9"},
    {"root ::= <[1000]>", SPECDEC_ERR_UNSUPPORTED, "gbnf: token references <...> are not supported at byte 9"},
    {"start: \"a\"", SPECDEC_ERR_INVALID_ARGUMENT,
     "gbnf: expected '::=' after the rule name at byte 0 (Lark grammars are not supported)"},
    {"root = \"a\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected '::=' after the rule name at byte 0"},
    {"root ::= 'a'", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: single-quoted strings are not supported"},
    {"root ::= \"a\" ; ", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: unexpected ';' at byte 13"},
    {"root ::= \"a\"\nroot ::= \"b\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: rule 'root' defined twice, again at byte 13"},
    {"::= \"a\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: expected a rule name, got ':' at byte 0"},
    {"root ::= \"\xff\"", SPECDEC_ERR_INVALID_ARGUMENT, "gbnf: the grammar is not valid UTF-8"},
};

/* Walks text; 'M', 'P' or 'D' ('F' on SD_FSM_FULL). */
static char walk(sd_fsm *f, const char *text, size_t n) {
    int32_t s = f->start;
    for (size_t i = 0; i < n; i++) {
        s = sd_fsm_step(f, s, (uint8_t)text[i]);
        if (s == SD_FSM_DEAD) return 'D';
        if (s == SD_FSM_FULL) return 'F';
    }
    return sd_fsm_accepting(f, s) ? 'M' : 'P';
}

static sd_fsm *make(const char *g, int32_t max_states) {
    sd_errbuf eb;
    sd_fsm *f = NULL;
    const specdec_status st = sd_gbnf_fsm_create(g, strlen(g), max_states, &f, &eb);
    SD_CHECK(st == SPECDEC_OK, "grammar <<%s>>: %s", g, eb.msg);
    return f;
}

static void test_cases(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const case_t *c = &CASES[i];
        sd_fsm *f = make(*c->grammar, 100000);
        if (!f) continue;
        /* texts with an embedded NUL: the DOT case "<\x00>" has 3 bytes */
        const size_t n = c->text[0] == '<' && c->text[1] == 0 ? 3 : strlen(c->text);
        const char got = walk(f, c->text, n);
        SD_CHECK(got == c->expect, "case %zu <<%s>>: got %c, expected %c", i, c->text, got, c->expect);
        sd_fsm_free(f);
    }
}

static void test_errors(void) {
    for (size_t i = 0; i < sizeof ERRS / sizeof ERRS[0]; i++) {
        sd_errbuf eb;
        memset(&eb, 0, sizeof eb);
        sd_fsm *f = (sd_fsm *)&eb; /* must be reset to NULL */
        const specdec_status st = sd_gbnf_fsm_create(ERRS[i].grammar, strlen(ERRS[i].grammar), 1000, &f, &eb);
        SD_CHECK(st == ERRS[i].st && f == NULL, "error case %zu: status %d", i, (int)st);
        SD_CHECK(strncmp(eb.msg, ERRS[i].msg, strlen(ERRS[i].msg)) == 0, "error case %zu: message '%s', expected '%s'", i,
                 eb.msg, ERRS[i].msg);
        sd_fsm_free(f);
    }
    sd_errbuf eb;
    sd_fsm *f = NULL;
    SD_CHECK(sd_gbnf_fsm_create("root ::= \"a\"", 12, 0, &f, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "max_states 0");
    SD_CHECK(sd_gbnf_fsm_create("root ::= \"a\"", 12, 10, NULL, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "out NULL");
    SD_CHECK(sd_gbnf_fsm_create(NULL, 5, 10, &f, &eb) == SPECDEC_ERR_INVALID_ARGUMENT, "text NULL");
    /* nesting beyond SD_GBNF_MAX_NESTING */
    char deep[512] = "root ::= ";
    for (int k = 0; k < SD_GBNF_MAX_NESTING + 1; k++) strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int k = 0; k < SD_GBNF_MAX_NESTING + 1; k++) strcat(deep, ")");
    SD_CHECK(sd_gbnf_fsm_create(deep, strlen(deep), 10, &f, &eb) == SPECDEC_ERR_UNSUPPORTED &&
                 strstr(eb.msg, "nested deeper than 100"), "nesting: %s", eb.msg);
    deep[strlen(deep) - 1] = 0; /* 100 deep is fine */
    memmove(deep + 9, deep + 10, strlen(deep + 10) + 1);
    SD_CHECK(sd_gbnf_fsm_create(deep, strlen(deep), 10, &f, &eb) == SPECDEC_OK, "nesting 100: %s", eb.msg);
    sd_fsm_free(f);
    /* nested repetitions stay small (rules share their bodies); 201 x [a]{1000} pass the element limit */
    const char *nest = "root ::= ((\"a\"{1000}){1000}){1000}";
    SD_CHECK(sd_gbnf_fsm_create(nest, strlen(nest), 10, &f, &eb) == SPECDEC_OK, "nested repetitions: %s", eb.msg);
    sd_fsm_free(f);
    static char big[4096] = "root ::=";
    for (int k = 0; k < 201; k++) strcat(big, " [a]{1000}");
    SD_CHECK(sd_gbnf_fsm_create(big, strlen(big), 10, &f, &eb) == SPECDEC_ERR_UNSUPPORTED && strstr(eb.msg, "elements"),
             "elements: %s", eb.msg);
    /* root deeper than the depth bound: x needs 70 frames */
    char chain[4096] = "root ::= r0\n";
    for (int k = 0; k < 70; k++) snprintf(chain + strlen(chain), sizeof chain - strlen(chain), "r%d ::= r%d \"x\"\n", k, k + 1);
    strcat(chain, "r70 ::= \"y\"\n");
    SD_CHECK(sd_gbnf_fsm_create(chain, strlen(chain), 10, &f, &eb) == SPECDEC_ERR_UNSUPPORTED && strstr(eb.msg, "nested"),
             "depth: %s", eb.msg);
}

/* a^n b^n: n <= SD_GBNF_MAX_DEPTH (each pending "b" is a frame). */
static void test_depth(void) {
    sd_fsm *f = make(ANBN, 100000);
    if (!f) return;
    char buf[300];
    for (int n = SD_GBNF_MAX_DEPTH - 1; n <= SD_GBNF_MAX_DEPTH + 1; n++) {
        memset(buf, 'a', (size_t)n);
        memset(buf + n, 'b', (size_t)n);
        const char got = walk(f, buf, 2 * (size_t)n);
        SD_CHECK(got == (n <= SD_GBNF_MAX_DEPTH ? 'M' : 'D'), "a^%d b^%d: %c", n, n, got);
    }
    sd_fsm_free(f);
}

static void test_interning(void) {
    sd_fsm *f = make(ARITH, 100000);
    if (!f) return;
    const char *a = "1+2", *b = "(3)*4-5";
    int32_t sa = f->start, sb = f->start;
    for (const char *p = a; *p; p++) sa = sd_fsm_step(f, sa, (uint8_t)*p);
    for (const char *p = b; *p; p++) sb = sd_fsm_step(f, sb, (uint8_t)*p);
    SD_CHECK(sa >= 0 && sa == sb, "after a number at the top level: %d vs %d", sa, sb);
    int32_t sc = f->start;
    for (const char *p = "(1"; *p; p++) sc = sd_fsm_step(f, sc, (uint8_t)*p);
    SD_CHECK(sc >= 0 && sc != sa, "inside a group differs: %d", sc);
    const int32_t held = f->vt->n_states(f);
    walk(f, "(3)*4-5", 7);
    SD_CHECK(f->vt->n_states(f) == held, "a repeated walk interns nothing: %d -> %d", held, f->vt->n_states(f));
    sd_fsm_free(f);
    /* different texts, same partial code point of one class: same state */
    f = make(UTF, 100000);
    if (!f) return;
    const int32_t u1 = sd_fsm_step(f, sd_fsm_step(f, f->start, 'a'), 0xe4);
    const int32_t u2 = sd_fsm_step(f, sd_fsm_step(f, f->start, 'b'), 0xe4);
    SD_CHECK(u1 >= 0 && u1 == u2, "a[e4] vs b[e4]: %d %d", u1, u2);
    sd_fsm_free(f);
}

static void test_full(void) {
    sd_fsm *f = make(ARITH, 3);
    if (!f) return;
    const char got = walk(f, "(((1", 4);
    SD_CHECK(got == 'F', "max_states 3: %c", got);
    SD_CHECK(f->vt->n_states(f) == 3, "states %d", f->vt->n_states(f));
    sd_fsm_free(f);
    /* an ambiguous grammar passing SD_GBNF_MAX_STACKS (4096): after a^n, 3 x 2^n stacks (2^n pending
     * b/c sequences, each under either "a" alternative or its end) */
    const char *amb = "root ::= \"a\" root \"b\" | \"a\" root \"c\" | \"\"\n";
    f = make(amb, 100000);
    if (!f) return;
    SD_CHECK(walk(f, "aaaaaa", 6) == 'P', "a^6: %c", walk(f, "aaaaaa", 6));
    SD_CHECK(walk(f, "aaaaaacbcbbb", 12) == 'M', "a^6 cbcbbb");
    SD_CHECK(walk(f, "aaaaaaaaaa", 10) == 'P', "a^10: %c", walk(f, "aaaaaaaaaa", 10));
    SD_CHECK(walk(f, "aaaaaaaaaaa", 11) == 'F', "a^11: %c", walk(f, "aaaaaaaaaaa", 11));
    sd_fsm_free(f);
    /* 1000 literal alternatives start 1000 stacks */
    static char words[16384] = "root ::= \"w0\"";
    for (int k = 1; k < 1000; k++) snprintf(words + strlen(words), sizeof words - strlen(words), " | \"w%d\"", k);
    f = make(words, 100000);
    if (!f) return;
    SD_CHECK(walk(f, "w999", 4) == 'M' && walk(f, "w1000", 5) == 'D' && walk(f, "w5", 2) == 'M', "1000 words");
    sd_fsm_free(f);
}

/* Every state reachable within a few bytes of each grammar (all 256 bytes) can still accept. */
static void test_viability(void) {
    const char *const *gs[] = {&ARITH, &JSONISH, &CHESS, &REPS, &UTF, &NULLABLE, &DOT, &ESC, &ANBN, &NEG};
    enum { CAP = 200000 };
    int32_t *queue = malloc(CAP * sizeof(int32_t)), *bfs = malloc(CAP * sizeof(int32_t));
    uint8_t *seen = malloc(CAP), *depth = calloc(CAP, 1);
    for (size_t g = 0; queue && bfs && seen && depth && g < sizeof gs / sizeof gs[0]; g++) {
        sd_fsm *f = make(*gs[g], CAP);
        if (!f) continue;
        long bad = 0, dead_ends = 0;
        int32_t qh = 0, qt = 0;
        memset(depth, 0, CAP);
        queue[qt++] = f->start;
        depth[f->start] = 1;
        while (qh < qt) {
            const int32_t s = queue[qh++];
            if (sd_fsm_can_accept(f, s, CAP, bfs, seen, &bad) != 1) dead_ends++;
            if (depth[s] >= 4) continue;
            for (int b = 0; b < 256; b++) {
                const int32_t t = sd_fsm_step(f, s, (uint8_t)b);
                if (t >= 0 && !depth[t]) depth[t] = (uint8_t)(depth[s] + 1), queue[qt++] = t;
            }
        }
        SD_CHECK(dead_ends == 0 && bad == 0, "grammar %zu: %ld dead ends, %ld bad ids over %d states", g, dead_ends, bad, qt);
        sd_fsm_free(f);
    }
    free(queue), free(bfs), free(seen), free(depth);
}

int main(void) {
    test_cases();
    test_errors();
    test_depth();
    test_interning();
    test_full();
    test_viability();
    return sd_test_done();
}

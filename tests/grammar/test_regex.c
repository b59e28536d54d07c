/* test_regex.c — core/sd_regex.h: a table of (pattern, string, expectation) over every supported
 * construct (UTF-8 included: multi-byte literals, non-ASCII class ranges, '.' over 2/3/4-byte
 * characters, invalid UTF-8 bytes DEAD), every refused construct and limit with its status,
 * interning (equal sets = equal ids, bounded counts, max_states -> SD_FSM_FULL), allocation
 * failures, and random walks checking that every live state can reach acceptance and every
 * accepted string is valid UTF-8. Python's re.fullmatch(p, s, re.ASCII) is the reference
 * the expectations were written from (tests/grammar/test_regex_diff.py checks it directly). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sd_alloc.h"
#include "sd_fsm_check.h"
#include "sd_regex.h"
#include "sd_rng.h"
#include "sd_test.h"
#include "sd_utf8.h"

/* M: the whole string matches; P: a viable prefix that does not match yet; D: dead. */
typedef struct rx_case {
    const char *pattern, *text;
    char expect;
} rx_case;

static const rx_case CASES[] = {
    /* literals, multi-byte literals, the empty pattern */
    {"abc", "abc", 'M'}, {"abc", "ab", 'P'}, {"abc", "abd", 'D'}, {"abc", "abcd", 'D'},
    {"", "", 'M'}, {"", "a", 'D'},
    {"h\xc3\xa9llo", "h\xc3\xa9llo", 'M'}, {"h\xc3\xa9llo", "h\xc3", 'P'}, {"h\xc3\xa9llo", "he", 'D'},
    {"\xe2\x82\xac\xf0\x9f\x98\x80", "\xe2\x82\xac\xf0\x9f\x98\x80", 'M'},
    {"\xe2\x82\xac\xf0\x9f\x98\x80", "\xe2\x82\xac\xf0\x9f", 'P'},
    /* '.': any code point but '\n', whole UTF-8 sequences only */
    {".", "a", 'M'}, {".", "\xc3\xa9", 'M'}, {".", "\xe2\x82\xac", 'M'}, {".", "\xf0\x9f\x98\x80", 'M'},
    {".", "\xf4\x8f\xbf\xbf", 'M'}, {".", "\r", 'M'}, {".", "\n", 'D'}, {".", "\xe2\x82", 'P'}, {".", "ab", 'D'},
    {".", "\xc0\x80", 'D'}, {".", "\xc1", 'D'}, {".", "\xe0\x80", 'D'}, {".", "\xed\xa0\x80", 'D'},
    {".", "\xed\x9f\xbf", 'M'}, {".", "\xee\x80\x80", 'M'}, {".", "\xf4\x90", 'D'}, {".", "\xf5", 'D'},
    {".", "\xff", 'D'}, {".", "\x80", 'D'}, {".", "\xf0\x8f", 'D'}, {"..", "a\xc3\xa9", 'M'},
    /* classes */
    {"[a-c]+", "abcab", 'M'}, {"[a-c]+", "abd", 'D'}, {"[^a-c]", "d", 'M'}, {"[^a-c]", "a", 'D'},
    {"[^a-c]", "\n", 'M'}, {"[^a-c]", "\xc3\xa9", 'M'}, {"[^a-c]", "\xf0\x9f\x98\x80", 'M'},
    {"[^a-c]", "\xed\xa0\x80", 'D'},
    {"[\xce\xb1-\xcf\x89]", "\xce\xb2", 'M'}, {"[\xce\xb1-\xcf\x89]", "a", 'D'}, {"[\xce\xb1-\xcf\x89]", "\xce\xa9", 'D'},
    {"[\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80]+", "\xf0\x9f\x98\x80\xc3\xa9\xe2\x82\xac", 'M'},
    {"[\\u0100-\\U0001F600]", "\xf0\x9f\x98\x80", 'M'}, {"[\\u0100-\\U0001F600]", "\xc3\xbf", 'D'},
    {"[\\u0100-\\U0001F600]", "\xf0\x9f\x98\x81", 'D'}, {"[\\u0100-\\U0001F600]", "\xed\xa0\x80", 'D'},
    {"[\\ud7ff-\\ue000]", "\xed\x9f\xbf", 'M'}, {"[\\ud7ff-\\ue000]", "\xee\x80\x80", 'M'},
    {"[\\ud7ff-\\ue000]", "\xed\xa0\x80", 'D'}, {"a|\\ud800", "a", 'M'},
    {"[]a]", "]", 'M'}, {"[]a]", "a", 'M'}, {"[^]a]", "b", 'M'}, {"[^]a]", "]", 'D'}, {"[a-]", "-", 'M'},
    {"[-a]", "-", 'M'}, {"[--/]", ".", 'M'}, {"[a-c-e]", "-", 'M'}, {"[a-c-e]", "d", 'D'}, {"[\\d-]", "-", 'M'},
    {"[\\d]", "5", 'M'}, {"[^\\D]", "5", 'M'}, {"[^\\D]", "a", 'D'}, {"[\\w.]+", "a_1.Z", 'M'}, {"[\\s]", "\t", 'M'},
    {"[\\S]", " ", 'D'}, {"[\\W]", "\xc3\xa9", 'M'}, {"[\\b]", "\b", 'M'}, {"[\\n]", "\n", 'M'}, {"[\\]]", "]", 'M'},
    {"[\\x41-\\x43]", "B", 'M'}, {"[\\101]", "A", 'M'}, {"[\\0]", "\x01", 'D'}, {"[\\s\\S]", "\n", 'M'},
    {"[\\^a]", "^", 'M'}, {"[a^]", "^", 'M'}, {"[.*+?(){}|$]+", ".*+?(){}|$", 'M'},
    /* escapes (\d \w \s ASCII-only, as re.ASCII) */
    {"\\d+", "0123456789", 'M'}, {"\\d", "\xd9\xa1", 'D'}, {"\\D", "\xd9\xa1", 'M'}, {"\\D", "7", 'D'},
    {"\\w+", "aZ_09", 'M'}, {"\\w", "\xc3\xa9", 'D'}, {"\\W", "\xc3\xa9", 'M'}, {"\\W", "_", 'D'},
    {"\\s+", " \t\n\r\f\v", 'M'}, {"\\s", "\xc2\xa0", 'D'}, {"\\S", " ", 'D'}, {"\\S", "\xc2\xa0", 'M'},
    {"\\n\\t\\r\\f\\v\\a", "\n\t\r\f\v\a", 'M'}, {"\\x41\\x7e", "A~", 'M'}, {"\\xe9", "\xc3\xa9", 'M'},
    {"\\u00e9\\u20AC", "\xc3\xa9\xe2\x82\xac", 'M'}, {"\\U0001F600", "\xf0\x9f\x98\x80", 'M'},
    {"\\\\", "\\", 'M'}, {"\\.", ".", 'M'}, {"\\.", "a", 'D'}, {"\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$\\-\\/", "*+?()[]{}|^$-/", 'M'},
    {"\\101\\0", "A", 'P'}, {"\\01", "\x01", 'M'}, {"\\011", "\t", 'M'}, {"\\0111", "\t1", 'M'},
    {"\\\xc3\xa9", "\xc3\xa9", 'M'}, {"\\ ", " ", 'M'}, {"\\#", "#", 'M'},
    /* groups */
    {"(ab)+", "abab", 'M'}, {"(ab)+", "aba", 'P'}, {"(ab)+", "", 'P'}, {"(?:ab|cd)*", "abcdab", 'M'},
    {"(?:ab|cd)*", "ac", 'D'}, {"(?P<x>a)b", "ab", 'M'}, {"(?<x_1>a)b", "ab", 'M'}, {"(?P<\xc3\xa9>a)", "a", 'M'},
    {"a(?#comment)b", "ab", 'M'}, {"a(?#)b", "ab", 'M'}, {"()", "", 'M'}, {"(|a)", "a", 'M'}, {"((a|b)c)*", "acbc", 'M'},
    {"(((((((((((x)))))))))))", "x", 'M'}, {"()*", "", 'M'}, {"(a*)*", "aaa", 'M'}, {"(a*)+b", "aab", 'M'},
    {"(a|)+", "", 'M'}, {"(?:a?){3}b", "ab", 'M'},
    /* alternation */
    {"a|bc|", "", 'M'}, {"a|bc|", "bc", 'M'}, {"a|bc|", "b", 'P'}, {"a|bc|", "c", 'D'}, {"|", "", 'M'},
    {"cat|category", "cat", 'M'}, {"cat|category", "categ", 'P'}, {"cat|category", "category", 'M'},
    /* quantifiers, lazy forms, literal braces */
    {"a*", "", 'M'}, {"a*", "aaaa", 'M'}, {"a+", "", 'P'}, {"a?", "aa", 'D'}, {"a{3}", "aaa", 'M'},
    {"a{3}", "aa", 'P'}, {"a{3}", "aaaa", 'D'}, {"a{2,}", "aaaaa", 'M'}, {"a{2,}", "a", 'P'}, {"a{2,3}", "aaaa", 'D'},
    {"a{2,3}", "aaa", 'M'}, {"a{,2}", "", 'M'}, {"a{,2}", "aaa", 'D'}, {"a{,}", "aaa", 'M'}, {"a{0}", "", 'M'},
    {"a{0}", "a", 'D'}, {"a{0,0}b", "b", 'M'}, {"a*?b", "aab", 'M'}, {"a+?", "a", 'M'}, {"a??", "", 'M'},
    {"a{2}?", "aa", 'M'}, {"a{1,2}?b", "ab", 'M'}, {"a{", "a{", 'M'}, {"a{x}", "a{x}", 'M'}, {"a{}", "a{}", 'M'},
    {"a{1,2x", "a{1,2x", 'M'}, {"a{1,2}{", "aa{", 'M'}, {"{", "{", 'M'}, {"}", "}", 'M'}, {"]", "]", 'M'},
    {"x{ 2}", "x{ 2}", 'M'}, {"a{1000}", "a", 'P'}, {"(?:ab){2,4}", "ababab", 'M'}, {"(?:ab){2,4}", "ababababab", 'D'},
    {"[\xc3\xa9-\xc3\xab]{2}", "\xc3\xa9\xc3\xab", 'M'},
    /* anchors at the very start and end */
    {"^abc$", "abc", 'M'}, {"^$", "", 'M'}, {"^", "", 'M'}, {"$", "", 'M'}, {"^a|b$", "b", 'M'}, {"\\$", "$", 'M'},
    {"a{$", "a{", 'M'}, {"[$]", "$", 'M'},
    /* practical ones */
    {"\\d{4}-\\d{2}-\\d{2}", "2024-01-31", 'M'}, {"\\d{4}-\\d{2}-\\d{2}", "2024-1", 'P'},
    {"[A-Za-z_][A-Za-z0-9_]*", "_x9", 'M'}, {"-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?", "-12.5e+3", 'M'},
    {"-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?", "01", 'D'}, {"\"([^\"\\\\]|\\\\.)*\"", "\"a\\\"\xc3\xa9\"", 'M'},
    {"(yes|no|maybe)", "mayb", 'P'}, {"(yes|no|maybe)", "nope", 'D'},
};

/* The state after text, or the first SD_FSM_DEAD / SD_FSM_FULL. */
static int32_t walk(sd_fsm *f, const char *t, size_t n) {
    int32_t s = f->start;
    for (size_t i = 0; i < n && s >= 0; i++) s = sd_fsm_step(f, s, (uint8_t)t[i]);
    return s;
}

static sd_fsm *compile(const char *p, size_t n, int32_t max_states) {
    sd_fsm *f = NULL;
    sd_errbuf eb = {{0}};
    specdec_status st = sd_regex_fsm_create(p, n, max_states, &f, &eb);
    SD_CHECK(st == SPECDEC_OK && f, "'%s': status %d: %s", p, (int)st, eb.msg);
    return f;
}

static void test_table(void) {
    int n = 0;
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const rx_case *c = &CASES[k];
        sd_fsm *f = compile(c->pattern, strlen(c->pattern), 100000);
        if (!f) continue;
        const int32_t s = walk(f, c->text, strlen(c->text));
        const char got = s == SD_FSM_DEAD ? 'D' : s < 0 ? 'F' : sd_fsm_accepting(f, s) ? 'M' : 'P';
        SD_CHECK(got == c->expect, "case %zu: /%s/ on \"%s\": %c, expected %c", k, c->pattern, c->text, got, c->expect);
        sd_fsm_free(f);
        n++;
    }
    /* NUL bytes: in the pattern and through escapes */
    sd_fsm *f = compile("a\0b", 3, 100);
    if (f) SD_CHECK(sd_fsm_accepting(f, walk(f, "a\0b", 3)) && walk(f, "ab", 2) == SD_FSM_DEAD, "literal NUL");
    sd_fsm_free(f);
    f = compile("\\0[\\x00]\\x00", 12, 100);
    if (f) SD_CHECK(sd_fsm_accepting(f, walk(f, "\0\0\0", 3)), "escaped NULs");
    sd_fsm_free(f);
    printf("table: %d cases\n", n);
}

typedef struct rx_err_case {
    const char *pattern;
    specdec_status st;
    const char *needle; /* in the message */
} rx_err_case;

static const rx_err_case ERRS[] = {
    /* refused constructs: UNSUPPORTED, naming the construct and the byte */
    {"a^", SPECDEC_ERR_UNSUPPORTED, "'^' is supported only at the start of the pattern (byte 1)"},
    {"a$b", SPECDEC_ERR_UNSUPPORTED, "'$' is supported only at the end of the pattern (byte 1)"},
    {"(^a)", SPECDEC_ERR_UNSUPPORTED, "byte 1"}, {"(a$)", SPECDEC_ERR_UNSUPPORTED, "byte 2"},
    {"(a)\\1", SPECDEC_ERR_UNSUPPORTED, "backreferences (\\1) are not supported (byte 3)"},
    {"(?P<x>a)(?P=x)", SPECDEC_ERR_UNSUPPORTED, "backreferences (?P=name)"},
    {"(?=a)", SPECDEC_ERR_UNSUPPORTED, "lookahead"}, {"a(?!b)", SPECDEC_ERR_UNSUPPORTED, "lookahead (?!...) is not supported (byte 1)"},
    {"(?<=a)b", SPECDEC_ERR_UNSUPPORTED, "lookbehind"}, {"(?<!a)b", SPECDEC_ERR_UNSUPPORTED, "lookbehind"},
    {"\\bx", SPECDEC_ERR_UNSUPPORTED, "anchor \\b"}, {"x\\B", SPECDEC_ERR_UNSUPPORTED, "anchor \\B is not supported (byte 1)"},
    {"\\Ax", SPECDEC_ERR_UNSUPPORTED, "anchor \\A"}, {"x\\Z", SPECDEC_ERR_UNSUPPORTED, "anchor \\Z"},
    {"(?i)a", SPECDEC_ERR_UNSUPPORTED, "inline flags"}, {"(?s:.)", SPECDEC_ERR_UNSUPPORTED, "inline flags"},
    {"(?-i:a)", SPECDEC_ERR_UNSUPPORTED, "inline flags"}, {"(?>a)", SPECDEC_ERR_UNSUPPORTED, "atomic"},
    {"(a)?(?(1)b|c)", SPECDEC_ERR_UNSUPPORTED, "conditional"}, {"a*+", SPECDEC_ERR_UNSUPPORTED, "possessive"},
    {"a{2}+", SPECDEC_ERR_UNSUPPORTED, "possessive"}, {"\\N{DIGIT ONE}", SPECDEC_ERR_UNSUPPORTED, "\\N{...}"},
    {"a(?#c)*", SPECDEC_ERR_UNSUPPORTED, "comment"},
    /* limits */
    {"a{1001}", SPECDEC_ERR_UNSUPPORTED, "repeat count above 1000"}, {"a{0,4294967296}", SPECDEC_ERR_UNSUPPORTED, "repeat count"},
    {"(?:a{1000}){1000}", SPECDEC_ERR_UNSUPPORTED, "automaton states"},
    {"(?:(?:(?:.{1000}){1000}){1000}){1000}", SPECDEC_ERR_UNSUPPORTED, "automaton states"},
    {"(?:.{100}){200}(?:.{100}){200}", SPECDEC_ERR_UNSUPPORTED, "automaton states"},
    /* syntax errors: INVALID_ARGUMENT, as Python's re refuses them */
    {"*a", SPECDEC_ERR_INVALID_ARGUMENT, "nothing to repeat at byte 0"}, {"a**", SPECDEC_ERR_INVALID_ARGUMENT, "multiple repeat"},
    {"a{2}{3}", SPECDEC_ERR_INVALID_ARGUMENT, "multiple repeat at byte 4"}, {"a|+", SPECDEC_ERR_INVALID_ARGUMENT, "nothing to repeat"},
    {"({2})", SPECDEC_ERR_INVALID_ARGUMENT, "nothing to repeat"}, {"^*", SPECDEC_ERR_INVALID_ARGUMENT, "nothing to repeat"},
    {"a*?*", SPECDEC_ERR_INVALID_ARGUMENT, "multiple repeat"},
    {"(a", SPECDEC_ERR_INVALID_ARGUMENT, "missing ), unterminated subpattern at byte 0"},
    {"a)", SPECDEC_ERR_INVALID_ARGUMENT, "unbalanced ')' at byte 1"}, {"[a", SPECDEC_ERR_INVALID_ARGUMENT, "unterminated character set"},
    {"[]", SPECDEC_ERR_INVALID_ARGUMENT, "unterminated"}, {"[a-", SPECDEC_ERR_INVALID_ARGUMENT, "unterminated"},
    {"[z-a]", SPECDEC_ERR_INVALID_ARGUMENT, "bad character range at byte 1"}, {"[\\d-z]", SPECDEC_ERR_INVALID_ARGUMENT, "bad character range"},
    {"[a-\\w]", SPECDEC_ERR_INVALID_ARGUMENT, "bad character range"}, {"\\c", SPECDEC_ERR_INVALID_ARGUMENT, "bad escape \\c at byte 0"},
    {"[\\8]", SPECDEC_ERR_INVALID_ARGUMENT, "bad escape"}, {"[\\A]", SPECDEC_ERR_INVALID_ARGUMENT, "bad escape"},
    {"a{3,2}", SPECDEC_ERR_INVALID_ARGUMENT, "min repeat greater than max repeat"}, {"\\", SPECDEC_ERR_INVALID_ARGUMENT, "trailing backslash"},
    {"\\x4", SPECDEC_ERR_INVALID_ARGUMENT, "incomplete escape \\x"}, {"\\u12g4", SPECDEC_ERR_INVALID_ARGUMENT, "incomplete escape \\u"},
    {"\\U00110000", SPECDEC_ERR_INVALID_ARGUMENT, "bad escape"}, {"\\400", SPECDEC_ERR_INVALID_ARGUMENT, "octal"},
    {"[\\777]", SPECDEC_ERR_INVALID_ARGUMENT, "octal"}, {"(?P<1a>x)", SPECDEC_ERR_INVALID_ARGUMENT, "group name"},
    {"(?P<>x)", SPECDEC_ERR_INVALID_ARGUMENT, "missing group name"}, {"(?P<a", SPECDEC_ERR_INVALID_ARGUMENT, "unterminated name"},
    {"(?Px)", SPECDEC_ERR_INVALID_ARGUMENT, "unknown extension"}, {"(?", SPECDEC_ERR_INVALID_ARGUMENT, "unknown extension"},
    {"(?#abc", SPECDEC_ERR_INVALID_ARGUMENT, "unterminated comment"}, {"a\xff", SPECDEC_ERR_INVALID_ARGUMENT, "not valid UTF-8 at byte 1"},
    {"\xc3(", SPECDEC_ERR_INVALID_ARGUMENT, "not valid UTF-8 at byte 0"}, {"\xed\xa0\x80", SPECDEC_ERR_INVALID_ARGUMENT, "UTF-8"},
    {"[^\\s\\S]", SPECDEC_ERR_INVALID_ARGUMENT, "matches no string"}, {"a[^\\d\\D]|[^\\w\\W]b", SPECDEC_ERR_INVALID_ARGUMENT, "matches no string"},
    {"\\ud800", SPECDEC_ERR_INVALID_ARGUMENT, "matches no string"},
};

static void check_err(const char *p, size_t n, int32_t max_states, specdec_status want, const char *needle) {
    sd_fsm *f = (sd_fsm *)(uintptr_t)1;
    sd_errbuf eb = {{0}};
    specdec_status st = sd_regex_fsm_create(p, n, max_states, &f, &eb);
    SD_CHECK(st == want && f == NULL, "'%.40s': status %d (expected %d): %s", p, (int)st, (int)want, eb.msg);
    SD_CHECK(strstr(eb.msg, needle) != NULL, "'%.40s': message '%s' lacks '%s'", p, eb.msg, needle);
    sd_fsm_free(st == SPECDEC_OK ? f : NULL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_errors(void) {
    for (size_t k = 0; k < sizeof ERRS / sizeof ERRS[0]; k++)
        check_err(ERRS[k].pattern, strlen(ERRS[k].pattern), 100, ERRS[k].st, ERRS[k].needle);
    /* arguments */
    check_err("a", 1, 0, SPECDEC_ERR_INVALID_ARGUMENT, "max_states 0");
    check_err(NULL, 3, 10, SPECDEC_ERR_INVALID_ARGUMENT, "NULL");
    SD_CHECK(sd_regex_fsm_create("a", 1, 10, NULL, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL out");
    /* pattern length: one byte over the limit refused, the limit itself accepted */
    const size_t big = SD_REGEX_MAX_PATTERN;
    char *p = malloc(big + 1);
    memset(p, 'a', big + 1);
    check_err(p, big + 1, 10, SPECDEC_ERR_UNSUPPORTED, "at most");
    sd_fsm *f = compile(p, big, (int32_t)big + 2);
    if (f) SD_CHECK(walk(f, p, big) >= 0 && sd_fsm_accepting(f, walk(f, p, big)), "a pattern of the largest length");
    sd_fsm_free(f);
    /* nesting: SD_REGEX_MAX_DEPTH groups accepted, one more refused */
    const int d = SD_REGEX_MAX_DEPTH;
    for (int k = 0; k < d + 1; k++) p[k] = '(', p[2 * d + 2 - k] = ')';
    p[d + 1] = 'x';
    check_err(p, 2 * (size_t)d + 3, 10, SPECDEC_ERR_UNSUPPORTED, "nested deeper than 100");
    f = compile(p + 1, 2 * (size_t)d + 1, 10);
    if (f) SD_CHECK(sd_fsm_accepting(f, walk(f, "x", 1)), "deepest nesting");
    sd_fsm_free(f);
    /* hostile nesting: a long run of '(' is refused at the limit, fast */
    memset(p, '(', big);
    double t0 = now_s();
    check_err(p, big, 10, SPECDEC_ERR_UNSUPPORTED, "nested deeper");
    /* counted repetition past the NFA limit is refused before anything is built */
    check_err("(?:(?:(?:(?:(?:a{1000}){1000}){1000}){1000}){1000})", 50, 10, SPECDEC_ERR_UNSUPPORTED, "automaton states");
    const double dt = now_s() - t0;
    SD_CHECK(dt < 0.5, "refusals took %.3f s", dt);
    /* a large NFA accepted: 100,000 states */
    f = compile("(?:[a-c]{1000}){100}", 20, 10);
    sd_fsm_free(f);
    free(p);
    printf("errors: %zu patterns, limits refused in %.3f s\n", sizeof ERRS / sizeof ERRS[0], dt);
}

static void test_interning(void) {
    sd_fsm *f = compile("(ab)*", 5, 100);
    if (!f) return;
    const int32_t s2 = walk(f, "ab", 2), s4 = walk(f, "abab", 4), s0 = f->start;
    SD_CHECK(s2 == s4 && s2 >= 0, "the same set is one state: %d %d", s2, s4);
    SD_CHECK(s0 == s2, "(ab)*: the start state again after ab (%d %d)", s0, s2);
    SD_CHECK(walk(f, "aba", 3) == walk(f, "a", 1), "after a and aba");
    SD_CHECK(sd_fsm_step(f, s2, 'a') == sd_fsm_step(f, s2, 'a'), "deterministic");
    SD_CHECK(f->vt->n_states(f) == 2, "(ab)* has 2 states, got %d", f->vt->n_states(f));
    sd_fsm_free(f);
    /* bounded: (a|b)*c over many random strings stays at 2 states (+ the accepting one) */
    f = compile("(a|b)*c", 7, 100);
    if (!f) return;
    sd_philox_state rs;
    sd_rng_init(&rs, 7, 0, 0);
    for (int k = 0; k < 200; k++) {
        char t[32];
        int n = 1 + (int)(sd_rng_next_u32(&rs) % 30);
        for (int i = 0; i < n; i++) t[i] = "abc"[sd_rng_next_u32(&rs) % 3];
        (void)walk(f, t, (size_t)n);
    }
    SD_CHECK(f->vt->n_states(f) == 2, "(a|b)*c: %d states", f->vt->n_states(f));
    sd_fsm_free(f);
    /* max_states: x{0,50} needs a state per count; with 5 the 5th new one is FULL */
    f = compile("x{0,50}", 7, 5);
    if (!f) return;
    int32_t s = f->start, prev = s;
    int k = 0;
    for (; k < 50 && s >= 0; k++) prev = s, s = sd_fsm_step(f, s, 'x');
    SD_CHECK(s == SD_FSM_FULL && k == 5, "FULL after %d steps (got %d)", k, s);
    SD_CHECK(f->vt->n_states(f) == 5, "5 states held, got %d", f->vt->n_states(f));
    SD_CHECK(sd_fsm_step(f, prev, 'x') == SD_FSM_FULL, "FULL is not cached as a state");
    SD_CHECK(sd_fsm_step(f, prev, 'y') == SD_FSM_DEAD, "DEAD still answered at the limit");
    SD_CHECK(sd_fsm_accepting(f, prev) && !sd_fsm_accepting(f, SD_FSM_FULL) && !sd_fsm_accepting(f, 99), "accepting");
    SD_CHECK(sd_fsm_step(f, 99, 'x') == SD_FSM_DEAD && sd_fsm_step(f, -1, 'x') == SD_FSM_DEAD, "bad ids are DEAD");
    sd_fsm_free(f);
}

/* Allocation failures: every allocation of a compile and of a walk, one at a time. */
static void test_alloc_failures(void) {
    static const char *const pats[] = {"(?:[a-z\xc3\xa9]+|\\d{2,4})*x", "x{0,200}y"};
    char texts[2][256];
    strcpy(texts[0], "ab\xc3\xa9" "12345x");
    memset(texts[1], 'x', 150);
    strcpy(texts[1] + 150, "y"); /* 151 states: the state arrays grow while walking */
    int ooms = 0, fulls = 0;
    for (int p = 0; p < 2; p++) {
        for (long k = 0; k < 200; k++) {
            sd_fsm *f = NULL;
            sd_errbuf eb;
            sd_alloc_fail_after(k);
            specdec_status st = sd_regex_fsm_create(pats[p], strlen(pats[p]), 1000, &f, &eb);
            int32_t s = st == SPECDEC_OK ? walk(f, texts[p], strlen(texts[p])) : 0;
            sd_alloc_fail_after(-1);
            SD_CHECK(st == SPECDEC_OK || (st == SPECDEC_ERR_OUT_OF_MEMORY && f == NULL), "fail at %ld: %d", k, (int)st);
            ooms += st == SPECDEC_ERR_OUT_OF_MEMORY;
            if (st == SPECDEC_OK) {
                fulls += s == SD_FSM_FULL;
                SD_CHECK(s == SD_FSM_FULL || (s >= 0 && sd_fsm_accepting(f, s)), "fail at %ld: walk %d", k, s);
                /* after a FULL the same walk completes once memory is back */
                if (s == SD_FSM_FULL) {
                    s = walk(f, texts[p], strlen(texts[p]));
                    SD_CHECK(s >= 0 && sd_fsm_accepting(f, s), "fail at %ld: walk again %d", k, s);
                }
            }
            sd_fsm_free(f);
        }
    }
    SD_CHECK(ooms > 5 && fulls > 0, "failures injected: %d OUT_OF_MEMORY, %d FULL", ooms, fulls);
    printf("allocation failures: %d OUT_OF_MEMORY at creation, %d FULL while walking\n", ooms, fulls);
}

/* Random walks: at each live state a random byte among those that keep it live. Every live
 * state visited must reach acceptance; every accepted string must be valid UTF-8. */
static void test_random_walks(void) {
    static const char *const pats[] = {
        "(?:[a-z\xc3\xa9]+|\\d{2,4})*x", ".{0,5}\xe2\x82\xac", "[^a]*(ab|\xf0\x9f\x98\x80)+",
        "\\w+@\\w+\\.(com|org)", "(a|b)*a(a|b){3}", "\"([^\"\\\\]|\\\\.)*\"", "[\\u0080-\\U0010FFFF]{1,3}z",
        "-?(0|[1-9]\\d*)(\\.\\d+)?", "(x|[^x]{2}|\\s)*$", "(?:a|\\ud800)b",
    };
    enum { CAP = 20000 };
    int32_t *queue = malloc(CAP * sizeof *queue);
    uint8_t *seen = malloc(CAP);
    sd_philox_state rs;
    sd_rng_init(&rs, 12345, 0, 0);
    long steps = 0, accepted = 0;
    for (size_t p = 0; p < sizeof pats / sizeof pats[0]; p++) {
        sd_fsm *f = compile(pats[p], strlen(pats[p]), CAP);
        if (!f) continue;
        for (int w = 0; w < 100; w++) {
            uint8_t text[64];
            int32_t s = f->start;
            for (int i = 0; i < 64; i++) {
                int32_t next[256], n_live = 0;
                uint8_t byte[256];
                for (int b = 0; b < 256; b++) {
                    const int32_t t = sd_fsm_step(f, s, (uint8_t)b);
                    SD_CHECK(t == SD_FSM_DEAD || (t >= 0 && t < CAP), "step gave %d", t);
                    if (t >= 0) next[n_live] = t, byte[n_live++] = (uint8_t)b;
                }
                long bad = 0;
                SD_CHECK(sd_fsm_can_accept(f, s, CAP, queue, seen, &bad) == 1 && bad == 0,
                         "/%s/: a live state cannot reach acceptance", pats[p]);
                if (sd_fsm_accepting(f, s)) {
                    accepted++;
                    SD_CHECK(sd_utf8_valid(text, (size_t)i), "/%s/: accepted invalid UTF-8", pats[p]);
                }
                if (!n_live) break;
                const uint32_t r = sd_rng_next_u32(&rs) % (uint32_t)n_live;
                text[i] = byte[r];
                s = next[r];
                steps++;
            }
        }
        sd_fsm_free(f);
    }
    free(queue);
    free(seen);
    SD_CHECK(steps > 10000 && accepted > 100, "walks: %ld steps, %ld accepting", steps, accepted);
    printf("random walks: %ld steps, %ld accepting prefixes\n", steps, accepted);
}

int main(void) {
    test_table();
    test_errors();
    test_interning();
    test_alloc_failures();
    test_random_walks();
    return sd_test_done();
}

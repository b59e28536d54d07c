/* fuzz_json_schema.c — fuzz target: core/sd_json_schema.h. Byte 0 even ('J'): the rest is a JSON
 * Schema for sd_json_schema_regex; odd ('C'): up to 8 choices (a length byte, then the bytes) for
 * sd_choice_regex. Checked: the status is OK, INVALID_ARGUMENT, UNSUPPORTED or OUT_OF_MEMORY; a
 * failure clears the outputs and leaves a message; a success gives a NUL-terminated regex of the
 * reported length within SD_JSON_SCHEMA_MAX_REGEX, valid UTF-8, with its groups and classes
 * balanced (so it embeds as one piece); a second call gives the same answer. Choices: accepted
 * exactly when every choice is valid UTF-8, and the regex holds each choice's bytes escaped. */
#include "fuzz_common.h"

#include "sd_alloc.h"
#include "sd_json_schema.h"

/* Groups and classes of a regex balanced ('\' escapes the next byte; '[' opens a class that the
 * next unescaped ']' after its first member closes). */
static int balanced(const char *r, size_t n) {
    long depth = 0;
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i] == '\\') {
            if (++i == n) return 0;
        } else if (in_class) {
            in_class = r[i] != ']';
        } else if (r[i] == '[') {
            in_class = 1;
            if (i + 1 < n && r[i + 1] == '^') i++;
            if (i + 1 < n && r[i + 1] == ']') i++;
        } else if (r[i] == '(') {
            depth++;
        } else if (r[i] == ')' && --depth < 0) {
            return 0;
        }
    }
    return depth == 0 && !in_class;
}

static int check_result(specdec_status st, char *re, size_t n, const sd_errbuf *eb) {
    sd_fuzz_require(st == SPECDEC_OK || st == SPECDEC_ERR_INVALID_ARGUMENT || st == SPECDEC_ERR_UNSUPPORTED ||
                    st == SPECDEC_ERR_OUT_OF_MEMORY);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(re == NULL && n == 0 && eb->msg[0] != '\0');
        return (int)st;
    }
    sd_fuzz_require(re != NULL && strlen(re) == n && n <= SD_JSON_SCHEMA_MAX_REGEX);
    sd_fuzz_require(sd_fuzz_utf8_ok(re, n));
    sd_fuzz_require(balanced(re, n));
    return 0;
}

static int fuzz_schema(const char *text, size_t len) {
    char *re = NULL, *re2 = NULL;
    size_t n = 0, n2 = 0;
    sd_errbuf eb, eb2;
    specdec_status st = sd_json_schema_regex(text, len, &re, &n, &eb);
    int r = check_result(st, re, n, &eb);
    specdec_status st2 = sd_json_schema_regex(text, len, &re2, &n2, &eb2);
    sd_fuzz_require(st2 == st && n2 == n && (st != SPECDEC_OK || !memcmp(re, re2, n)));
    sd_fuzz_require(st == SPECDEC_OK || !strcmp(eb.msg, eb2.msg));
    sd_free(re);
    sd_free(re2);
    return r;
}

static int fuzz_choices(sd_fuzz_in *in) {
    const char *items[8] = {0};
    size_t lens[8] = {0};
    int32_t k = (int32_t)(sd_fuzz_u8(in) % 9); /* 0 must be refused */
    int all_utf8 = 1;
    for (int32_t i = 0; i < k; i++) {
        const uint8_t *p;
        lens[i] = sd_fuzz_bytes(in, 64, &p);
        items[i] = (const char *)p;
        all_utf8 &= sd_fuzz_utf8_ok(items[i], lens[i]);
    }
    char *re = NULL;
    size_t n = 0;
    sd_errbuf eb;
    specdec_status st = sd_choice_regex(items, lens, k, &re, &n, &eb);
    int r = check_result(st, re, n, &eb);
    sd_fuzz_require((st == SPECDEC_OK) == (k >= 1 && all_utf8) || st == SPECDEC_ERR_OUT_OF_MEMORY);
    if (st == SPECDEC_OK) {
        /* printable, non-meta bytes of each choice appear in order in the regex */
        for (int32_t i = 0; i < k; i++) {
            size_t at = 0;
            for (size_t j = 0; j < lens[i]; j++) {
                const char ch = items[i][j];
                if ((unsigned char)ch < 0x20 || ch == 0x7f) continue;
                while (at < n && re[at] != ch) at++;
                sd_fuzz_require(at < n);
                at++;
            }
        }
    }
    sd_free(re);
    return r;
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (data[0] % 2 == 0) return fuzz_schema((const char *)data + 1, size - 1);
    sd_fuzz_in in = {data + 1, size - 1};
    return fuzz_choices(&in);
}

SD_FUZZ_DEFINE_ENTRY

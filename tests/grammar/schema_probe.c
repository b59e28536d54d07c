/* schema_probe.c — the C side of test_json_schema_re.py: reads lines from stdin, answers one line
 * each on stdout (hex keeps any byte on one line).
 *   J <hex schema>            sd_json_schema_regex: "ok <hex regex>" or "err <status> <hex message>"
 *   C <hex choice> ...        sd_choice_regex over the listed choices ("-" is the empty choice)
 * With a file argument instead: prints the regex of that schema file (for people). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_json.h"
#include "sd_json_schema.h"

static size_t unhex(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        if (sscanf(s + i, "%2x", &v) != 1) break;
        out[k++] = (char)v;
    }
    return k;
}

static void put_hex(const char *s, size_t n) {
    if (!n) fputc('-', stdout);
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
}

static void answer(specdec_status st, char *re, size_t n, const sd_errbuf *eb) {
    if (st == SPECDEC_OK) {
        fputs("ok ", stdout);
        put_hex(re, n);
    } else {
        printf("err %d ", (int)st);
        put_hex(eb->msg, strlen(eb->msg));
    }
    fputc('\n', stdout);
    fflush(stdout);
    sd_free(re);
}

static void choices(char *line) {
    const char *items[4096];
    size_t lens[4096];
    int32_t n = 0;
    for (char *tok = strtok(line, " \n"); tok && n < 4096; tok = strtok(NULL, " \n")) {
        size_t len = strlen(tok);
        lens[n] = strcmp(tok, "-") ? unhex(tok, len, tok) : 0; /* decoded in place */
        items[n++] = tok;
    }
    char *re = NULL;
    size_t rl = 0;
    sd_errbuf eb = {{0}};
    specdec_status st = sd_choice_regex(items, lens, n, &re, &rl, &eb);
    answer(st, re, rl, &eb);
}

int main(int argc, char **argv) {
    char *re = NULL;
    size_t rl = 0;
    sd_errbuf eb = {{0}};
    if (argc == 2) {
        char *text = NULL;
        size_t len = 0;
        if (sd_read_file(argv[1], SD_JSON_SCHEMA_MAX_BYTES, &text, &len, &eb) != SPECDEC_OK) {
            fprintf(stderr, "%s\n", eb.msg);
            return 1;
        }
        specdec_status st = sd_json_schema_regex(text, len, &re, &rl, &eb);
        sd_free(text);
        if (st != SPECDEC_OK) fprintf(stderr, "error %d: %s\n", (int)st, eb.msg);
        else printf("%s\n", re);
        sd_free(re);
        return st == SPECDEC_OK ? 0 : 1;
    }
    static char line[1 << 21], buf[1 << 20];
    while (fgets(line, sizeof line, stdin)) {
        if (line[0] == 'C' && line[1] == ' ') {
            choices(line + 2);
        } else if (line[0] == 'J' && line[1] == ' ') {
            size_t n = strcspn(line + 2, " \n");
            size_t len = n == 1 && line[2] == '-' ? 0 : unhex(line + 2, n, buf);
            specdec_status st = sd_json_schema_regex(buf, len, &re, &rl, &eb);
            answer(st, re, rl, &eb);
            re = NULL;
        } else {
            printf("err -1 %s\n", "756e6b6e6f776e20636f6d6d616e64"); /* "unknown command" */
            fflush(stdout);
        }
    }
    return 0;
}

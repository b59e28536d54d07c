/* chat_util.h — helpers of the tests/chat programs (header-only): a whole file into a
 * NUL-terminated malloc'd buffer, and a JSON request file parsed (exit 2 with a message when it
 * cannot be read). */
#ifndef CHAT_UTIL_H
#define CHAT_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

/* path's bytes + NUL (malloc'd; free it), or NULL. */
static inline char *chat_read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = '\0';
    fclose(f);
    return b;
}

/* The request of a driver: `prog REQUEST.json` parsed; NULL after printing why (exit 2). */
static inline cJSON *chat_read_request(int argc, char **argv, const char *prog) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s REQUEST.json\n", prog);
        return NULL;
    }
    char *text = chat_read_file(argv[1]);
    cJSON *req = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!req) fprintf(stderr, "%s: cannot read %s\n", prog, argv[1]);
    return req;
}

#endif

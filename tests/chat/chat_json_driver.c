/* chat_json_driver — renders conversations with specdec_chat_apply_json for test_chat_json.py.
 *
 *   chat_json_driver REQUEST.json
 * REQUEST: {"dir": model dir, "name": null or a template name,
 *           "renders": [{"messages": JSON value, "tools": JSON value (absent: NULL),
 *                        "kwargs": JSON value (absent: NULL), "raw": text passed as messages_json
 *                        instead of "messages", "agp": 0|1}, ...]}
 * stdout: {"results": [{"status": n, "error": s, "text": s}, ...]}
 * The JSON values are printed to text and passed as such; texts go through the BUFFER_TOO_SMALL
 * protocol (first call with capacity 0). Exit status 0 unless the request itself is unusable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "chat_util.h"
#include "specdec.h"

static char *print_or_null(const cJSON *v) { return v ? cJSON_PrintUnformatted(v) : NULL; }

static cJSON *render(const specdec_tokenizer *tok, const char *name, const cJSON *rq) {
    const cJSON *raw = cJSON_GetObjectItemCaseSensitive(rq, "raw");
    char *msgs = cJSON_IsString(raw) ? NULL : print_or_null(cJSON_GetObjectItemCaseSensitive(rq, "messages"));
    char *tools = print_or_null(cJSON_GetObjectItemCaseSensitive(rq, "tools"));
    char *kw = print_or_null(cJSON_GetObjectItemCaseSensitive(rq, "kwargs"));
    const char *m = cJSON_IsString(raw) ? raw->valuestring : msgs;
    int agp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rq, "agp"));
    size_t len = 0;
    specdec_status st = specdec_chat_apply_json(tok, name, m, tools, kw, agp, NULL, 0, &len);
    char *text = NULL;
    if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) {
        text = malloc(len + 1);
        st = text ? specdec_chat_apply_json(tok, name, m, tools, kw, agp, text, len + 1, &len) : SPECDEC_ERR_OUT_OF_MEMORY;
    } else if (st == SPECDEC_OK) {
        st = SPECDEC_ERR_INTERNAL; /* a render (even "") needs its NUL: 0 bytes never fit */
    }
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "status", st);
    cJSON_AddStringToObject(r, "error", st ? specdec_last_error() : "");
    if (!st) cJSON_AddStringToObject(r, "text", text);
    free(text);
    free(msgs);
    free(tools);
    free(kw);
    return r;
}

int main(int argc, char **argv) {
    cJSON *req = chat_read_request(argc, argv, "chat_json_driver");
    if (!req) return 2;
    const cJSON *dir = cJSON_GetObjectItemCaseSensitive(req, "dir"), *nm = cJSON_GetObjectItemCaseSensitive(req, "name");
    specdec_tokenizer *tok = NULL;
    if (!cJSON_IsString(dir) || specdec_tokenizer_load(dir->valuestring, &tok)) {
        fprintf(stderr, "chat_json_driver: %s\n", cJSON_IsString(dir) ? specdec_last_error() : "no \"dir\"");
        cJSON_Delete(req);
        return 2;
    }
    cJSON *out = cJSON_CreateObject(), *res = cJSON_AddArrayToObject(out, "results");
    const cJSON *rq;
    cJSON_ArrayForEach(rq, cJSON_GetObjectItemCaseSensitive(req, "renders"))
        cJSON_AddItemToArray(res, render(tok, cJSON_IsString(nm) ? nm->valuestring : NULL, rq));
    char *s = cJSON_PrintUnformatted(out);
    fputs(s, stdout);
    free(s);
    cJSON_Delete(out);
    cJSON_Delete(req);
    specdec_tokenizer_free(tok);
    return 0;
}

/* chat_driver — renders conversations with specdec's chat API for test_chat_templates.py.
 *
 *   chat_driver REQUEST.json
 * REQUEST: {"dir": model dir, "name": null or a family name,
 *           "convs": [{"msgs": [[role, content], ...], "agp": 0|1}, ...]}
 * stdout: {"detect": name|null, "detect_status": n, "detect_error": s, "add_special": n,
 *          "results": [{"status": n, "error": s, "text": s, "ids_status": n, "ids": [...]}, ...]}
 * Texts go through the BUFFER_TOO_SMALL protocol (first call with capacity 0), as a caller
 * that does not know the size would. Exit status 0 unless the request itself is unusable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "chat_util.h"
#include "specdec.h"

static cJSON *render(const specdec_tokenizer *tok, const char *name, const specdec_chat_message *m, int n, int agp) {
    cJSON *r = cJSON_CreateObject();
    size_t len = 0;
    specdec_status st = specdec_chat_apply(tok, name, m, n, agp, NULL, 0, &len);
    char *text = NULL;
    if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) {
        text = malloc(len + 1);
        st = text ? specdec_chat_apply(tok, name, m, n, agp, text, len + 1, &len) : SPECDEC_ERR_OUT_OF_MEMORY;
    } else if (st == SPECDEC_OK) {
        st = SPECDEC_ERR_INTERNAL; /* a non-empty render must not fit in 0 bytes */
    }
    cJSON_AddNumberToObject(r, "status", st);
    cJSON_AddStringToObject(r, "error", st ? specdec_last_error() : "");
    if (!st) cJSON_AddStringToObject(r, "text", text);
    free(text);
    int32_t nid = 0;
    st = specdec_chat_tokenize(tok, name, m, n, agp, NULL, 0, &nid);
    int32_t *ids = NULL;
    if (st == SPECDEC_ERR_BUFFER_TOO_SMALL || (st == SPECDEC_OK && nid == 0)) {
        ids = malloc(sizeof *ids * (size_t)(nid + 1));
        st = ids ? specdec_chat_tokenize(tok, name, m, n, agp, ids, nid + 1, &nid) : SPECDEC_ERR_OUT_OF_MEMORY;
    }
    cJSON_AddNumberToObject(r, "ids_status", st);
    cJSON *ja = cJSON_AddArrayToObject(r, "ids");
    for (int32_t i = 0; !st && i < nid; i++) cJSON_AddItemToArray(ja, cJSON_CreateNumber(ids[i]));
    free(ids);
    return r;
}

static int run(const cJSON *req, cJSON *out) {
    const cJSON *dir = cJSON_GetObjectItem(req, "dir"), *nm = cJSON_GetObjectItem(req, "name");
    const cJSON *convs = cJSON_GetObjectItem(req, "convs");
    if (!cJSON_IsString(dir) || !cJSON_IsArray(convs)) return 2;
    const char *name = cJSON_IsString(nm) ? nm->valuestring : NULL;
    specdec_tokenizer *tok;
    if (specdec_tokenizer_load(dir->valuestring, &tok)) {
        fprintf(stderr, "chat_driver: %s\n", specdec_last_error());
        return 2;
    }
    const char *fam = NULL;
    specdec_status st = specdec_chat_template_detect(tok, &fam);
    if (fam) cJSON_AddStringToObject(out, "detect", fam);
    else cJSON_AddNullToObject(out, "detect");
    cJSON_AddNumberToObject(out, "detect_status", st);
    cJSON_AddStringToObject(out, "detect_error", st ? specdec_last_error() : "");
    int as = -1;
    if (specdec_chat_add_special(tok, name, &as)) as = -1;
    cJSON_AddNumberToObject(out, "add_special", as);
    cJSON *res = cJSON_AddArrayToObject(out, "results");
    const cJSON *c;
    cJSON_ArrayForEach(c, convs) {
        const cJSON *msgs = cJSON_GetObjectItem(c, "msgs");
        int n = cJSON_GetArraySize(msgs), k = 0;
        specdec_chat_message *m = calloc((size_t)n + 1, sizeof *m);
        const cJSON *e;
        cJSON_ArrayForEach(e, msgs) {
            m[k].role = cJSON_GetArrayItem(e, 0)->valuestring;
            m[k++].content = cJSON_GetArrayItem(e, 1)->valuestring;
        }
        cJSON_AddItemToArray(res, render(tok, name, m, n, cJSON_IsTrue(cJSON_GetObjectItem(c, "agp"))));
        free(m);
    }
    specdec_tokenizer_free(tok);
    return 0;
}

int main(int argc, char **argv) {
    cJSON *req = chat_read_request(argc, argv, "chat_driver");
    if (!req) return 2;
    cJSON *out = cJSON_CreateObject();
    int rc = run(req, out);
    if (!rc) {
        char *s = cJSON_PrintUnformatted(out);
        fputs(s, stdout);
        free(s);
    }
    cJSON_Delete(out);
    cJSON_Delete(req);
    return rc;
}

/* jinja_driver — renders templates with specdec's Jinja interpreter for test_jinja_templates.py.
 *
 *   jinja_driver REQUEST.json
 * REQUEST: {"now": seconds since the epoch for strftime_now,
 *           "templates": [{"template": text, "renders": [{"vars": {name: JSON value, ...}}, ...]}, ...],
 *           "builtins": ["llama3", ...]}
 * stdout: {"templates": [{"parse_status": n, "parse_error": s,
 *                         "renders": [{"status": n, "error": s, "text": s}, ...]}, ...],
 *          "builtins": {name: text or null, ...}}
 * Every variable is passed as a JSON value (objects become dicts, null None). Exit status 0
 * unless the request itself is unusable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "chat_util.h"
#include "sd_chat_template.h"
#include "sd_jinja.h"
#include "specdec.h"

static cJSON *render(const sd_jinja_tmpl *t, const cJSON *vars, int64_t now) {
    cJSON *r = cJSON_CreateObject();
    int nv = cJSON_GetArraySize(vars), i = 0;
    sd_jinja_var *v = calloc((size_t)(nv > 0 ? nv : 1), sizeof *v);
    for (const cJSON *e = vars ? vars->child : NULL; e && v; e = e->next, i++) {
        v[i].name = e->string;
        v[i].kind = SD_JINJA_JSON;
        v[i].json = e;
    }
    sd_tok_buf out = {0};
    specdec_status st = v ? sd_jinja_render(t, v, (size_t)i, now, NULL, &out) : SPECDEC_ERR_OUT_OF_MEMORY;
    cJSON_AddNumberToObject(r, "status", st);
    cJSON_AddStringToObject(r, "error", st ? specdec_last_error() : "");
    if (!st) {
        char *s = malloc(out.len + 1);
        if (s) {
            if (out.len) memcpy(s, out.p, out.len);
            s[out.len] = '\0';
            cJSON_AddStringToObject(r, "text", s);
            free(s);
        }
    }
    sd_tok_buf_free(&out);
    free(v);
    return r;
}

int main(int argc, char **argv) {
    cJSON *req = chat_read_request(argc, argv, "jinja_driver");
    if (!req) return 2;
    const cJSON *jnow = cJSON_GetObjectItemCaseSensitive(req, "now");
    int64_t now = cJSON_IsNumber(jnow) ? (int64_t)jnow->valuedouble : SD_JINJA_NOW_SYSTEM;
    cJSON *out = cJSON_CreateObject(), *outs = cJSON_AddArrayToObject(out, "templates");
    const cJSON *tp;
    cJSON_ArrayForEach(tp, cJSON_GetObjectItemCaseSensitive(req, "templates")) {
        const cJSON *src = cJSON_GetObjectItemCaseSensitive(tp, "template");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(outs, o);
        sd_jinja_tmpl *t = NULL;
        specdec_status st = cJSON_IsString(src) ? sd_jinja_parse(src->valuestring, strlen(src->valuestring), &t)
                                                : SPECDEC_ERR_INVALID_ARGUMENT;
        cJSON_AddNumberToObject(o, "parse_status", st);
        cJSON_AddStringToObject(o, "parse_error", st ? specdec_last_error() : "");
        cJSON *rs = cJSON_AddArrayToObject(o, "renders");
        const cJSON *rq;
        cJSON_ArrayForEach(rq, cJSON_GetObjectItemCaseSensitive(tp, "renders")) {
            if (t) cJSON_AddItemToArray(rs, render(t, cJSON_GetObjectItemCaseSensitive(rq, "vars"), now));
        }
        sd_jinja_free(t);
    }
    cJSON *bo = cJSON_AddObjectToObject(out, "builtins");
    const cJSON *bn;
    cJSON_ArrayForEach(bn, cJSON_GetObjectItemCaseSensitive(req, "builtins")) {
        const char *b = cJSON_IsString(bn) ? sd_chat_builtin(bn->valuestring) : NULL;
        if (b) cJSON_AddStringToObject(bo, bn->valuestring, b);
        else if (cJSON_IsString(bn)) cJSON_AddNullToObject(bo, bn->valuestring);
    }
    char *s = cJSON_PrintUnformatted(out);
    if (s) {
        fputs(s, stdout);
        free(s);
    }
    cJSON_Delete(out);
    cJSON_Delete(req);
    return s ? 0 : 1;
}

/* sd_server_spec.c — speculative_config (see sd_server_spec.h). */
#include "sd_server_spec.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sd_server_request.h"

#define SPEC_INVALID "invalid_request_error"

/* An integer key of o in [lo, hi]: *out, or -1 when absent. */
static int spec_int(const cJSON *o, const char *key, int32_t lo, int32_t hi, int32_t *out, sd_api_error *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = -1;
    if (!v || cJSON_IsNull(v)) return 0;
    const double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    char param[64];
    snprintf(param, sizeof param, "speculative_config.%s", key);
    if (!cJSON_IsNumber(v) || !isfinite(d) || d != floor(d) || d < lo || d > hi)
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, param, "'%s' must be an integer in [%d, %d]", param, (int)lo,
                           (int)hi);
    *out = (int32_t)d;
    return 0;
}

static int spec_method(const cJSON *o, sd_spec_config *out, sd_api_error *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "method");
    out->method = -1;
    if (!v || cJSON_IsNull(v)) return 0;
    const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
    if (s && !strcmp(s, "ngram")) out->method = SPECDEC_DRAFT_NGRAM;
    else if (s && !strcmp(s, "suffix")) out->method = SPECDEC_DRAFT_NGRAM, out->suffix = 1; /* over the corpus */
    else if (s && !strcmp(s, "draft_model")) out->method = SPECDEC_DRAFT_MODEL;
    else if (s && !strcmp(s, "eagle3")) out->method = SPECDEC_DRAFT_EAGLE3;
    /* vLLM's names of the checkpoint's own MTP layer (it maps the model-specific ones to "mtp") */
    else if (s && (!strcmp(s, "mtp") || !strcmp(s, "deepseek_mtp") || !strcmp(s, "glm4_moe_mtp")))
        out->method = SPECDEC_DRAFT_MTP;
    else
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.method",
                           "'speculative_config.method' must be \"ngram\", \"suffix\", \"draft_model\", \"eagle3\" or "
                           "\"mtp\"");
    return 0;
}

int sd_spec_parse(const cJSON *v, sd_spec_config *out, sd_api_error *e) {
    memset(out, 0, sizeof *out);
    out->method = out->num_tokens = out->lookup_min = out->lookup_max = -1;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsObject(v))
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config", "'speculative_config' must be an object");
    out->present = 1;
    for (const cJSON *k = v->child; k; k = k->next) /* vLLM's SuffixDecoding knobs: not this implementation's */
        if (k->string && !strncmp(k->string, "suffix_decoding_", 16)) {
            char param[96];
            snprintf(param, sizeof param, "speculative_config.%.60s", k->string);
            return sd_api_fail(e, 400, SPEC_INVALID, NULL, param, "'%s' is not supported: specdec's \"suffix\" method is "
                               "the n-gram drafter over the request and the server's corpus of earlier outputs "
                               "(num_speculative_tokens, prompt_lookup_min / _max apply)", param);
        }
    int rc = spec_method(v, out, e);
    if (!rc) rc = spec_int(v, "num_speculative_tokens", 0, SPECDEC_MAX_DRAFT, &out->num_tokens, e);
    if (!rc) rc = spec_int(v, "prompt_lookup_min", 1, 64, &out->lookup_min, e);
    if (!rc) rc = spec_int(v, "prompt_lookup_max", 1, 64, &out->lookup_max, e);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(v, "model");
    if (!rc && m && !cJSON_IsNull(m)) {
        if (!cJSON_IsString(m) || !m->valuestring[0] || strlen(m->valuestring) >= sizeof out->model)
            rc = sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.model",
                             "'speculative_config.model' must be a non-empty string (a directory)");
        else snprintf(out->model, sizeof out->model, "%s", m->valuestring);
    }
    if (!rc && out->model[0] && out->method == SPECDEC_DRAFT_NGRAM)
        rc = sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.model",
                         "the ngram method takes no draft model ('speculative_config.model' given)");
    return rc;
}

int sd_spec_parse_text(const char *json, sd_spec_config *out, char *msg, size_t cap) {
    cJSON *root = cJSON_Parse(json);
    sd_api_error e;
    memset(&e, 0, sizeof e);
    int rc = root ? sd_spec_parse(root, out, &e) : sd_api_fail(&e, 400, SPEC_INVALID, NULL, "", "not valid JSON");
    if (root && !cJSON_IsObject(root)) rc = sd_api_fail(&e, 400, SPEC_INVALID, NULL, "", "not a JSON object");
    cJSON_Delete(root);
    if (rc) snprintf(msg, cap, "%s", e.message);
    return rc ? -1 : 0;
}

int sd_spec_server_config(const char *json, const char *draft_dir, sd_spec_config *out, int *model_from_spec,
                          char *msg, size_t cap) {
    *model_from_spec = 0;
    if (!json) return sd_spec_parse(NULL, out, NULL);
    if (sd_spec_parse_text(json, out, msg, cap)) return -1;
    if (out->model[0] && draft_dir && strcmp(out->model, draft_dir)) {
        snprintf(msg, cap, "\"model\" %s and -md %s name different draft models", out->model, draft_dir);
        return -1;
    }
    *model_from_spec = out->model[0] && !draft_dir;
    if (out->method == SPECDEC_DRAFT_MODEL && !out->model[0] && !draft_dir) {
        snprintf(msg, cap, "the draft_model method needs a draft model (-md or \"model\")");
        return -1;
    }
    if (out->method == SPECDEC_DRAFT_EAGLE3 && !out->model[0] && !draft_dir) {
        snprintf(msg, cap, "the eagle3 method needs an EAGLE-3 head (-md or \"model\")");
        return -1;
    }
    return 0;
}

int sd_spec_check_loaded(const sd_spec_config *srv, const char *draft_dir, int draft_head, char *msg, size_t cap) {
    if (srv->method == SPECDEC_DRAFT_MODEL && draft_head) {
        snprintf(msg, cap, "method \"draft_model\", but %s is %s", draft_dir,
                 draft_head == SPECDEC_DRAFT_MTP ? "an MTP layer (use \"mtp\")" : "an EAGLE-3 head (use \"eagle3\")");
        return -1;
    }
    if (srv->method == SPECDEC_DRAFT_EAGLE3 && draft_head != SPECDEC_DRAFT_EAGLE3) {
        snprintf(msg, cap, "method \"eagle3\", but %s is not an EAGLE-3 head (use \"draft_model\")",
                 draft_dir ? draft_dir : "the server's draft");
        return -1;
    }
    if (srv->method == SPECDEC_DRAFT_MTP && draft_head != SPECDEC_DRAFT_MTP) {
        snprintf(msg, cap, "method \"mtp\", but %s was not loaded as its MTP layer",
                 draft_dir ? draft_dir : "the server's draft");
        return -1;
    }
    return 0;
}

/* The request's value over the server's over the default (-1 = absent). */
static int32_t spec_pick(int32_t req, int32_t srv, int32_t dflt) { return req >= 0 ? req : srv >= 0 ? srv : dflt; }

/* The draft model a request names must be the loaded one (its directory, or the
 * directory's last component). */
static int spec_model_ok(const char *want, const char *loaded) {
    if (!want[0]) return 1;
    if (!loaded) return 0;
    const char *base = strrchr(loaded, '/');
    return !strcmp(want, loaded) || (base && !strcmp(want, base + 1));
}

/* The method against the loaded draft: draft_model needs a model, eagle3 a head. */
static int spec_method_fits(specdec_draft_method m, const char *draft_name, int draft_head, sd_api_error *e) {
    if (m == SPECDEC_DRAFT_MODEL && !draft_name)
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.method",
                           "the draft_model method needs a draft model; this server has none (no -md)");
    if (m == SPECDEC_DRAFT_MODEL && draft_head)
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.method",
                           "the draft_model method needs a draft model; this server's draft (%s) is %s", draft_name,
                           draft_head == SPECDEC_DRAFT_MTP ? "an MTP layer: use \"mtp\""
                                                           : "an EAGLE-3 head: use \"eagle3\"");
    const char *have = !draft_name                     ? "none (no -md)"
                       : draft_head == SPECDEC_DRAFT_MTP ? "an MTP layer"
                       : draft_head                      ? "an EAGLE-3 head"
                                                         : "a draft model";
    if (m == SPECDEC_DRAFT_EAGLE3 && draft_head != SPECDEC_DRAFT_EAGLE3)
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.method",
                           "the eagle3 method needs an EAGLE-3 head; this server has %s%s%s", have,
                           draft_name ? ": " : "", draft_name ? draft_name : "");
    if (m == SPECDEC_DRAFT_MTP && draft_head != SPECDEC_DRAFT_MTP)
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.method",
                           "the mtp method needs the server started with --speculative-config '{\"method\": \"mtp\"}' "
                           "(it loads the target checkpoint's MTP layer); this server has %s%s%s", have,
                           draft_name ? ": " : "", draft_name ? draft_name : "");
    return 0;
}

int sd_spec_resolve(const sd_spec_config *srv, const sd_spec_config *req, const char *draft_name, int draft_head,
                    int32_t n_draft_default, int32_t n_draft_req, int tree, int has_corpus, sd_spec_resolved *out,
                    sd_api_error *e) {
    const int m = req->method >= 0 ? req->method : srv->method >= 0 ? srv->method : -1;
    if ((req->method >= 0 ? req->suffix : srv->suffix) && !has_corpus)
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.method",
                           "the suffix method needs the server's n-gram corpus: start it with --ngram-corpus N or "
                           "--speculative-config '{\"method\": \"suffix\"}'");
    out->method = m >= 0             ? (specdec_draft_method)m
                  : !draft_name      ? SPECDEC_DRAFT_NONE
                  : draft_head       ? (specdec_draft_method)draft_head
                                     : SPECDEC_DRAFT_MODEL;
    const int rc = spec_method_fits(out->method, draft_name, draft_head, e);
    if (rc) return rc;
    if (!spec_model_ok(req->model, draft_name))
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.model",
                           "'speculative_config.model' must name the loaded draft model (%s)", draft_name ? draft_name : "none");
    if (out->method == SPECDEC_DRAFT_NGRAM && req->model[0])
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.model",
                           "the ngram method takes no draft model ('speculative_config.model' given)");
    out->n_draft = spec_pick(req->num_tokens >= 0 ? req->num_tokens : n_draft_req, srv->num_tokens, n_draft_default);
    out->ngram_min = spec_pick(req->lookup_min, srv->lookup_min, 1);
    out->ngram_max = spec_pick(req->lookup_max, srv->lookup_max, out->ngram_min > 4 ? out->ngram_min : 4);
    if (out->method == SPECDEC_DRAFT_NGRAM && out->ngram_max < out->ngram_min)
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "speculative_config.prompt_lookup_max",
                           "'prompt_lookup_max' %d < 'prompt_lookup_min' %d", (int)out->ngram_max, (int)out->ngram_min);
    if (out->method == SPECDEC_DRAFT_NONE) out->n_draft = 0;
    if (tree && out->method == SPECDEC_DRAFT_NONE)
        return sd_api_fail(e, 400, SPEC_INVALID, NULL, "tree",
                           "a draft tree needs a draft model (-md) or \"speculative_config\": {\"method\": \"ngram\"}");
    return 0;
}

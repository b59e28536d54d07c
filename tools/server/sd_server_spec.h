/* sd_server_spec.h — vLLM's "speculative_config" for `specdec serve` (docs/DRAFTERS.md
 * "Server"): the --speculative-config JSON at start (the server's defaults) and the same
 * object per request as the extension field "speculative_config", mapped onto the
 * generate params' drafter fields. Keys: "method" ("ngram" | "draft_model" | "eagle3"),
 * "num_speculative_tokens" (γ, 0..SPECDEC_MAX_DRAFT), "prompt_lookup_min",
 * "prompt_lookup_max" (1..64), "model" (the draft model or EAGLE-3 head: at start it may
 * name the directory -md would; in a request only the loaded one; never with "ngram").
 * "draft_model" needs a loaded draft model, "eagle3" a loaded EAGLE-3 head. Other keys
 * are ignored, as vLLM-compatible servers do. Pure (no model, no sockets): the request
 * parser and its fuzz target use it. */
#ifndef SD_SERVER_SPEC_H
#define SD_SERVER_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "specdec.h"

struct cJSON;
struct sd_api_error;

/* One speculative_config object as given (-1 / NULL: the key is absent). */
typedef struct sd_spec_config {
    int present;                 /* the object was given */
    int method;                  /* -1, or SPECDEC_DRAFT_NGRAM / _MODEL / _EAGLE3 */
    int suffix;                  /* "suffix" (vLLM's SuffixDecoding): NGRAM over the server's n-gram corpus */
    int32_t num_tokens, lookup_min, lookup_max;
    char model[256];             /* "" when absent */
} sd_spec_config;

/* What a request runs with, both objects resolved against the server. */
typedef struct sd_spec_resolved {
    specdec_draft_method method; /* MODEL, NGRAM, EAGLE3 or NONE */
    int32_t n_draft, ngram_min, ngram_max;
} sd_spec_resolved;

/* Parse v (NULL: absent, *out empty) as a speculative_config object. 0, or the HTTP
 * status (400) with *e naming the field ("speculative_config.method", ...). */
int sd_spec_parse(const struct cJSON *v, sd_spec_config *out, struct sd_api_error *e);

/* The --speculative-config text; 0, or -1 with the reason in msg. */
int sd_spec_parse_text(const char *json, sd_spec_config *out, char *msg, size_t cap);

/* `specdec serve --speculative-config JSON` (NULL: none, *out empty): parsed, and its
 * "model" reconciled with -md (draft_dir, may be NULL): *model_from_spec = 1 when the
 * draft model to load is out->model (no -md). 0, or -1 with the reason in msg. Whether the
 * loaded draft fits "method" (a head for "eagle3", a model for "draft_model") is
 * sd_spec_check_loaded's, once it is loaded. */
int sd_spec_server_config(const char *json, const char *draft_dir, sd_spec_config *out, int *model_from_spec,
                          char *msg, size_t cap);

/* The server's method against the draft it loaded (draft_dir NULL: none; draft_head: 0 for a
 * draft model or none, SPECDEC_DRAFT_EAGLE3 for an EAGLE-3 head, SPECDEC_DRAFT_MTP for the
 * target checkpoint's MTP layer): "draft_model" with a head, "eagle3" without an EAGLE-3 head,
 * "mtp" without an MTP layer are refused. 0, or -1 with the reason in msg. */
int sd_spec_check_loaded(const sd_spec_config *srv, const char *draft_dir, int draft_head, char *msg, size_t cap);

/* The drafter of a request: its own object over the server's (srv) over the defaults
 * (the loaded draft: eagle3 for an EAGLE-3 head, mtp for an MTP layer, else the draft model;
 * γ = n_draft_default, lookup 1..4); n_draft_req the request's "n_draft" extension (-1: absent;
 * "num_speculative_tokens" wins); draft_name the loaded draft's directory (NULL: none),
 * draft_head as sd_spec_check_loaded's; tree: a "tree" or "draft_nodes" was asked for.
 * "draft_model" with a head, "eagle3" / "mtp" without that head, "suffix" on a server without an n-gram
 * corpus (has_corpus 0): 400 naming speculative_config.method.
 * 0, or 400 with *e naming the field. */
int sd_spec_resolve(const sd_spec_config *srv, const sd_spec_config *req, const char *draft_name, int draft_head,
                    int32_t n_draft_default, int32_t n_draft_req, int tree, int has_corpus, sd_spec_resolved *out,
                    struct sd_api_error *e);

/* The n-gram corpus a server started with --speculative-config '{"method": "suffix"}' and no --ngram-corpus
 * keeps, in tokens (specdec_engine_params.ngram_corpus_tokens). */
#define SD_SERVER_SUFFIX_CORPUS (1 << 18)

#endif

/* sd_grammar_compile.c — specdec_grammar_compile (docs/STRUCTURED.md): the automaton of a spec
 * (core/sd_regex.h; core/sd_json_schema.h and a regex; core/sd_json_fsm.h; core/sd_gbnf.h) over the tokenizer's
 * vocabulary (tokenizer/sd_tokenizer_grammar.c). */
#include <string.h>

#include "sd_alloc.h"
#include "sd_gbnf.h"
#include "sd_grammar.h"
#include "sd_json.h"
#include "sd_json_fsm.h"
#include "sd_json_schema.h"
#include "sd_regex.h"
#include "sd_tokenizer.h"

/* Interned automaton states one grammar may hold (each adds a 256-entry transition table). */
#define SD_GRAMMAR_MAX_STATES 20000
/* Nesting of a "json_object" output. */
#define SD_GRAMMAR_JSON_DEPTH 32
/* Most choices, and bytes of a spec. */
#define SD_GRAMMAR_MAX_CHOICES 4096
#define SD_GRAMMAR_MAX_SPEC ((size_t)1 << 20)

/* A JSON array of strings -> the choice regex. */
static specdec_status sd_tokg_choice(const char *spec, size_t len, char **re, size_t *re_len, sd_errbuf *eb) {
    cJSON *root = NULL;
    specdec_status st = sd_json_parse(spec, len, "choice", &root, eb);
    if (st != SPECDEC_OK) return st == SPECDEC_ERR_FORMAT ? SPECDEC_ERR_INVALID_ARGUMENT : st;
    const int n = cJSON_IsArray(root) ? cJSON_GetArraySize(root) : -1;
    if (n < 1 || n > SD_GRAMMAR_MAX_CHOICES) {
        cJSON_Delete(root);
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "choice: a JSON array of 1..%d strings is expected",
                       SD_GRAMMAR_MAX_CHOICES);
    }
    const char **v = sd_malloc((size_t)n * sizeof *v);
    size_t *l = sd_malloc((size_t)n * sizeof *l);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (!cJSON_IsString(e)) break;
        if (v && l) {
            v[i] = e->valuestring;
            l[i] = strlen(e->valuestring);
        }
        i++;
    }
    if (!v || !l) st = sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "choice: out of memory");
    else if (i != n) st = sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "choice: item %d is not a string", i);
    else st = sd_choice_regex(v, l, n, re, re_len, eb);
    sd_free(v);
    sd_free(l);
    cJSON_Delete(root);
    return st;
}

/* The automaton of (kind, spec). */
static specdec_status sd_tokg_fsm(specdec_grammar_kind kind, const char *spec, size_t len, sd_fsm **fsm, sd_errbuf *eb) {
    char *re = NULL;
    size_t re_len = 0;
    specdec_status st;
    switch (kind) {
    case SPECDEC_GRAMMAR_REGEX: return sd_regex_fsm_create(spec, len, SD_GRAMMAR_MAX_STATES, fsm, eb);
    case SPECDEC_GRAMMAR_JSON_OBJECT:
        return sd_json_fsm_create(1, SD_GRAMMAR_JSON_DEPTH, SD_GRAMMAR_MAX_STATES, fsm, eb);
    case SPECDEC_GRAMMAR_GBNF: return sd_gbnf_fsm_create(spec, len, SD_GRAMMAR_MAX_STATES, fsm, eb);
    case SPECDEC_GRAMMAR_JSON_SCHEMA: st = sd_json_schema_regex(spec, len, &re, &re_len, eb); break;
    case SPECDEC_GRAMMAR_CHOICE: st = sd_tokg_choice(spec, len, &re, &re_len, eb); break;
    default:
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_grammar_compile: unknown kind %d", (int)kind);
    }
    if (st == SPECDEC_OK) st = sd_regex_fsm_create(re, re_len, SD_GRAMMAR_MAX_STATES, fsm, eb);
    sd_free(re);
    return st;
}

specdec_status specdec_grammar_compile(const specdec_tokenizer *tok, specdec_grammar_kind kind, const char *spec,
                                       size_t len, specdec_grammar **out) {
    if (out) *out = NULL;
    if (!tok || !out || (!spec && len))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_grammar_compile: NULL argument");
    if (len > SD_GRAMMAR_MAX_SPEC)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_grammar_compile: spec of %zu bytes (at most %zu)", len,
                       SD_GRAMMAR_MAX_SPEC);
    if (kind == SPECDEC_GRAMMAR_JSON_OBJECT && len)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_grammar_compile: json_object takes no spec");
    sd_errbuf *eb = NULL; /* the thread's detail (specdec_last_error) */
    sd_fsm *fsm = NULL;
    specdec_status st = sd_tokg_fsm(kind, spec ? spec : "", len, &fsm, eb);
    if (st != SPECDEC_OK) return st;
    sd_grammar_vocab *v = NULL;
    st = sd_tok_grammar_vocab(tok, &v, eb);
    if (st != SPECDEC_OK) {
        sd_fsm_free(fsm);
        return st;
    }
    st = sd_grammar_create(v, fsm, out, eb);
    sd_grammar_vocab_release(v);
    return st;
}

void specdec_grammar_free(specdec_grammar *grammar) { sd_grammar_release(grammar); }

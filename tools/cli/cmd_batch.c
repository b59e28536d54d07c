/* cmd_batch.c — `specdec batch -f PROMPTS --parallel N [generate options] [--json]`:
 * every line of PROMPTS is one prompt; all go through the request scheduler
 * (specdec_scheduler_*, at most N decoded at once) and their results are printed in
 * line order. Parsing is cli_batch_parse (cli_parse.c); models as `generate`.
 *
 * Output: text mode prints "[index] text" per prompt on stdout and a summary on
 * stderr; --json prints one object per prompt {"index", "tokens", "text", "n_prompt",
 * "stop_reason", "status", ...} and then {"summary": {prompts, tokens, seconds,
 * tokens_per_second, ...}}. A prompt that fails (refused at submit, or its generation
 * failed) is reported in its line with its status; the exit code is then 1. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli.h"

static void batch_usage(FILE *f) {
    fprintf(f,
            "usage: specdec batch [-m TARGET_DIR] [-md DRAFT_DIR] -f PROMPTS [--parallel N] [generate options] [--json]\n"
            "  -f FILE          one prompt per line (a final newline ends the last line, it adds none)\n"
            "  --parallel N     requests decoded at once by the scheduler, 1..256 (default 4)\n"
            "  --json           one JSON object per prompt (index, tokens, text, ...), then {\"summary\": ...}\n"
            "The generate options (-n, --temp, --top-k, --top-p, --min-p, --seed, --draft-max, --tree,\n"
            "--draft-nodes, --drafter, --ngram-min, --ngram-max, --verify, --backend, --ctx, --ignore-eos,\n"
            "--stop) apply to every prompt;\n"
            "see 'specdec generate --help'. Outputs equal `specdec generate` on each line alone.\n");
}

static int fail(const char *what, specdec_status st, const char *detail) { return cli_fail("batch", what, st, detail); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One prompt: its line, then what happened to it. */
typedef struct batch_item {
    const char *line;
    size_t len;
    specdec_request_id id;   /* 0: not submitted */
    specdec_status status;   /* submit's, else the request's outcome */
    const char *detail;      /* static or owned by `details` */
    int32_t n_prompt, n_out;
    int32_t *out;            /* owned */
    specdec_stats stats;
} batch_item;

typedef struct batch_ctx {
    const cli_batch_opts *o;
    cli_pair pair;
    specdec_scheduler *s;
    char *text;              /* the file, lines NUL-terminated in place */
    batch_item *items;
    int32_t n_items;
    char **details;          /* owned copies of error details, one per item */
    int32_t n_ctx;
    double seconds;
} batch_ctx;

static void batch_free(batch_ctx *c) {
    specdec_scheduler_free(c->s);
    for (int32_t i = 0; i < c->n_items; i++) {
        free(c->items[i].out);
        if (c->details) free(c->details[i]);
    }
    free(c->items);
    free(c->details);
    free(c->text);
    cli_pair_free(&c->pair);
}

/* The whole file into c->text, split into lines ("\r\n" too). */
static int batch_read(batch_ctx *c, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail("reading the prompts", SPECDEC_ERR_IO, path);
    size_t cap = 4096, n = 0, got;
    c->text = malloc(cap);
    while (c->text && (got = fread(c->text + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *p = realloc(c->text, cap *= 2);
            if (!p) free(c->text);
            c->text = p;
        }
    }
    const int err = ferror(f);
    fclose(f);
    if (!c->text) return fail("reading the prompts", SPECDEC_ERR_OUT_OF_MEMORY, path);
    if (err) return fail("reading the prompts", SPECDEC_ERR_IO, path);
    c->text[n] = '\0';
    int32_t lines = 0;
    for (size_t i = 0; i < n; i++) lines += c->text[i] == '\n';
    if (n > 0 && c->text[n - 1] != '\n') lines++;
    c->items = calloc((size_t)(lines ? lines : 1), sizeof *c->items);
    c->details = calloc((size_t)(lines ? lines : 1), sizeof *c->details);
    if (!c->items || !c->details) return fail("reading the prompts", SPECDEC_ERR_OUT_OF_MEMORY, path);
    for (char *p = c->text; c->n_items < lines; c->n_items++) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 0 && p[len - 1] == '\r') len--;
        p[len] = '\0';
        c->items[c->n_items].line = p;
        c->items[c->n_items].len = len;
        p = nl ? nl + 1 : p + len;
    }
    return 0;
}

static void batch_note(batch_ctx *c, int32_t i, specdec_status st, const char *detail) {
    c->items[i].status = st;
    free(c->details[i]);
    c->details[i] = detail && *detail ? strdup(detail) : NULL;
    c->items[i].detail = c->details[i] ? c->details[i] : "";
}

/* Encode and queue every prompt; a refused one is noted in its item. */
static int batch_submit(batch_ctx *c) {
    const cli_gen_opts *g = &c->o->gen;
    specdec_generate_params gp = g->gp;
    gp.tokenizer = c->pair.tok;
    gp.stop_strings = g->n_stops ? g->stops : NULL;
    gp.n_stop_strings = g->n_stops;
    for (int32_t i = 0; i < c->n_items; i++) {
        batch_item *it = &c->items[i];
        int32_t *ids = NULL;
        specdec_status st = cli_encode(c->pair.tok, it->line, it->len, &ids, &it->n_prompt);
        if (st != SPECDEC_OK) {
            batch_note(c, i, st, specdec_tokenizer_last_error(c->pair.tok));
            continue;
        }
        st = specdec_scheduler_submit(c->s, ids, it->n_prompt, &gp, &it->id);
        free(ids);
        if (st == SPECDEC_OK) continue;
        if (st == SPECDEC_ERR_OUT_OF_MEMORY) return fail("submitting", st, specdec_scheduler_last_error(c->s));
        batch_note(c, i, st, specdec_scheduler_last_error(c->s));
    }
    return 0;
}

/* Collect the results in line order. */
static int batch_collect(batch_ctx *c) {
    for (int32_t i = 0; i < c->n_items; i++) {
        batch_item *it = &c->items[i];
        if (!it->id) continue;
        it->out = malloc((size_t)c->n_ctx * sizeof *it->out);
        if (!it->out) return fail("collecting", SPECDEC_ERR_OUT_OF_MEMORY, "");
        specdec_status outcome = SPECDEC_OK;
        specdec_status st = specdec_scheduler_wait(c->s, it->id, -1, it->out, c->n_ctx, &it->n_out, &it->stats, &outcome);
        if (st != SPECDEC_OK) return fail("waiting for a request", st, specdec_scheduler_last_error(c->s));
        if (outcome != SPECDEC_OK) batch_note(c, i, outcome, "the generation failed");
    }
    return 0;
}

static int batch_run(batch_ctx *c) {
    const cli_batch_opts *o = c->o;
    if (batch_read(c, o->file)) return 1;
    if (cli_pair_load("batch", o->gen.target_dir, o->gen.draft_dir, cli_gen_bundled_draft(&o->gen), &c->pair)) return 1;
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = o->parallel;
    sp.max_queued = c->n_items > 0 ? c->n_items : 1;
    specdec_status st = specdec_scheduler_create(c->pair.target, c->pair.draft, &o->gen.ep, &sp, &c->s);
    if (st != SPECDEC_OK) return fail("creating the scheduler", st, specdec_last_error());
    c->n_ctx = specdec_scheduler_n_ctx(c->s);
    const double t0 = now_s();
    if (batch_submit(c) || batch_collect(c)) return 1;
    c->seconds = now_s() - t0;
    return 0;
}

/* The text of an item's tokens (malloc'ed; NULL on failure). */
static char *batch_text(const batch_ctx *c, const batch_item *it) {
    size_t len = 0;
    specdec_status st = specdec_detokenize(c->pair.tok, it->out, it->n_out, 1, NULL, 0, &len);
    if (st != SPECDEC_OK && st != SPECDEC_ERR_BUFFER_TOO_SMALL) return NULL;
    char *t = malloc(len + 1);
    if (t && specdec_detokenize(c->pair.tok, it->out, it->n_out, 1, t, len + 1, &len) != SPECDEC_OK) {
        free(t);
        return NULL;
    }
    return t;
}

static const char *batch_stop_name(specdec_stop_reason r) {
    static const char *const names[] = {"none", "n_predict", "eos", "stop_string", "callback", "context_full"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

static cJSON *batch_item_json(const batch_item *it, int32_t index, const char *text) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "index", index);
    cJSON *jt = cJSON_AddArrayToObject(j, "tokens");
    for (int32_t k = 0; k < it->n_out; k++) cJSON_AddItemToArray(jt, cJSON_CreateNumber(it->out[k]));
    cJSON_AddStringToObject(j, "text", text ? text : "");
    cJSON_AddNumberToObject(j, "n_prompt", it->n_prompt);
    cJSON_AddStringToObject(j, "status", specdec_status_string(it->status));
    if (it->status != SPECDEC_OK) cJSON_AddStringToObject(j, "error", it->detail ? it->detail : "");
    cJSON_AddStringToObject(j, "stop_reason", batch_stop_name(it->stats.stop_reason));
    cJSON_AddNumberToObject(j, "n_rounds", (double)it->stats.n_rounds);
    cJSON_AddNumberToObject(j, "acceptance_rate", it->stats.acceptance_rate);
    cJSON_AddNumberToObject(j, "tokens_per_round", it->stats.tokens_per_round);
    return j;
}

static int batch_print_json_line(cJSON *j) {
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) return fail("printing JSON", SPECDEC_ERR_OUT_OF_MEMORY, "");
    printf("%s\n", s);
    cJSON_free(s);
    return 0;
}

/* Totals over the prompts; returns the number that failed. */
static int32_t batch_totals(const batch_ctx *c, int64_t *tokens, int64_t *drafted, int64_t *accepted) {
    int32_t failed = 0;
    *tokens = *drafted = *accepted = 0;
    for (int32_t i = 0; i < c->n_items; i++) {
        *tokens += c->items[i].n_out;
        *drafted += c->items[i].stats.n_drafted;
        *accepted += c->items[i].stats.n_accepted;
        failed += c->items[i].status != SPECDEC_OK;
    }
    return failed;
}

static int batch_print(const batch_ctx *c, int json) {
    for (int32_t i = 0; i < c->n_items; i++) {
        const batch_item *it = &c->items[i];
        char *text = batch_text(c, it);
        if (json && batch_print_json_line(batch_item_json(it, i, text))) {
            free(text);
            return 1;
        }
        if (!json && it->status == SPECDEC_OK) printf("[%d] %s\n", (int)i, text ? text : "");
        if (!json && it->status != SPECDEC_OK)
            printf("[%d] (failed: %s%s%s)\n", (int)i, specdec_status_string(it->status), *it->detail ? ": " : "",
                   it->detail);
        free(text);
    }
    int64_t tokens, drafted, accepted;
    const int32_t failed = batch_totals(c, &tokens, &drafted, &accepted);
    const double tps = c->seconds > 0 ? (double)tokens / c->seconds : 0.0;
    if (json) {
        cJSON *root = cJSON_CreateObject(), *s = cJSON_AddObjectToObject(root, "summary");
        cJSON_AddNumberToObject(s, "prompts", c->n_items);
        cJSON_AddNumberToObject(s, "failed", failed);
        cJSON_AddNumberToObject(s, "parallel", c->o->parallel);
        cJSON_AddNumberToObject(s, "tokens", (double)tokens);
        cJSON_AddNumberToObject(s, "seconds", c->seconds);
        cJSON_AddNumberToObject(s, "tokens_per_second", tps);
        cJSON_AddNumberToObject(s, "acceptance_rate", drafted ? (double)accepted / (double)drafted : 0.0);
        if (batch_print_json_line(root)) return 1;
    } else {
        fprintf(stderr, "--- specdec batch: %d prompts (%d failed), parallel %d: %lld tokens in %.3f s, %.2f tokens/s\n",
                (int)c->n_items, (int)failed, (int)c->o->parallel, (long long)tokens, c->seconds, tps);
    }
    return failed ? 1 : 0;
}

int cli_cmd_batch(int argc, char **argv) {
    cli_batch_opts o;
    cli_parse_err err;
    cli_parse_rc prc = cli_batch_parse(argc, argv, &o, &err);
    if (prc != CLI_PARSE_OK) {
        cli_batch_opts_free(&o);
        if (prc == CLI_PARSE_HELP) batch_usage(stdout);
        if (prc == CLI_PARSE_NOMEM) return fail("allocating", SPECDEC_ERR_OUT_OF_MEMORY, "");
        if (prc == CLI_PARSE_USAGE) {
            cli_parse_err_print(stderr, "batch", &err);
            batch_usage(stderr);
        }
        return prc == CLI_PARSE_HELP ? 0 : 2;
    }
    batch_ctx c;
    memset(&c, 0, sizeof c);
    c.o = &o;
    int rc = batch_run(&c);
    if (!rc) rc = batch_print(&c, o.gen.json);
    batch_free(&c);
    cli_batch_opts_free(&o);
    return rc;
}

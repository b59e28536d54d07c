/* cmd_batch.c — `specdec batch -f PROMPTS --parallel N [generate options] [--json]`:
 * every line of PROMPTS is one prompt; all go through the request scheduler
 * (specdec_scheduler_*, at most N decoded at once) and their results are printed in
 * line order. Parsing is cli_batch_parse (cli_parse.c); models as `generate`.
 *
 * Seeds: line i (0-based) samples with seed S + i, S being --seed (-1, the default: a
 * random S, printed), so identical lines give independent samples and line i equals
 * `specdec generate --seed S+i` on that line alone. With --jsonl each line is a JSON
 * object {"prompt": TEXT, "seed": N} whose optional seed replaces S + i.
 *
 * Output: text mode prints "[index] text" per prompt on stdout and a summary on
 * stderr; --json prints one object per prompt {"index", "tokens", "text", "status",
 * the statistics named as specdec_stats' fields (n_prompt, stop_reason, seed, ...)} and
 * then {"summary": {prompts, tokens, seconds, tokens_per_second, seed, ...}}. Progress
 * goes to stderr while it runs: a line per finished prompt, or one bar redrawn in place
 * when stderr is a terminal (--no-progress: none). A prompt that fails (refused at
 * submit, or its generation failed) is reported in its line with its status; the exit
 * code is then 1. Ctrl-C cancels what has not finished, prints what there is (the
 * cancelled prompts with their tokens so far) and exits 130. */
#define _DEFAULT_SOURCE /* clock_gettime, getrandom, isatty */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"

static void batch_usage(FILE *f) {
    fprintf(f,
            "usage: specdec batch [-m TARGET_DIR] [-md DRAFT_DIR] -f PROMPTS [--parallel N] [generate options] [--json]\n"
            "  -f FILE          one prompt per line (a final newline ends the last line, it adds none)\n"
            "  --parallel N     requests decoded at once by the scheduler, 1..256 (default 4)\n"
            "  --json           one JSON object per prompt (index, tokens, text, ...), then {\"summary\": ...}\n"
            "  --jsonl          each line of FILE is {\"prompt\": TEXT} or {\"prompt\": TEXT, \"seed\": N}\n"
            "  --no-progress    no progress on stderr (default: a line per finished prompt, a bar on a terminal)\n"
            "  --enable-prefix-caching     reuse the KV of prompt prefixes computed before (vLLM's option); fails\n"
            "                   where the model or backend cannot (default: on where it can)\n"
            "  --no-enable-prefix-caching  every prompt prefills all its tokens\n"
            "  --prefill-chunk N  prompt tokens prefilled between two decode rounds (chunked prefill: a long\n"
            "                   prompt joins over several rounds while the others decode); 0 (default) = no\n"
            "                   limit\n");
    cli_kv_usage(f, 16);
    fprintf(f,
            "  --seed S         line i samples with seed S + i (default -1: a random S, printed), so identical\n"
            "                   lines give independent samples; a --jsonl line's own seed replaces S + i\n"
            "The generate options (-n, --temp, --top-k, --top-p, --min-p, --presence-penalty,\n"
            "--frequency-penalty, --repetition-penalty, --logit-bias, --min-tokens, --stop-token-id,\n"
            "--allowed-token-ids, --bad-words,\n"
            "--draft-max, --tree, --draft-nodes, --drafter, --ngram-min, --ngram-max, --ngram-cost, --ngram-corpus,\n"
            "--verify, "
            "--backend, --ctx, --threads, --ignore-eos, --stop, and structured output: --regex, --json-schema,\n"
            "--json-object, --choice, --grammar) apply to every prompt;\n"
            "see 'specdec generate --help'. Line i equals `specdec generate --seed S+i` on that line alone.\n"
            "Ctrl-C cancels what has not finished, prints the results so far and exits with 130.\n");
}

static int fail(const char *what, specdec_status st, const char *detail) { return cli_fail("batch", what, st, detail); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One prompt: its line, then what happened to it. */
typedef struct batch_item {
    const char *line;        /* the prompt (--jsonl: its "prompt", owned by `prompts`) */
    size_t len;
    int has_seed;            /* --jsonl: the line gives its own seed */
    uint64_t seed;           /* the seed asked for (S + index, or the line's) */
    int done;                /* collected */
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
    specdec_grammar *grammar; /* structured output (--regex, ...): every prompt's; NULL when none */
    cli_bad_words bw;         /* --bad-words as token sequences */
    char *text;              /* the file, lines NUL-terminated in place */
    batch_item *items;
    int32_t n_items;
    char **details;          /* owned copies of error details, one per item */
    char **prompts;          /* --jsonl: owned prompt texts, one per item */
    int32_t n_ctx;
    uint64_t seed;           /* S: the base seed (--seed, or drawn) */
    int32_t n_done;          /* collected so far (progress) */
    int64_t tokens_done;
    int interrupted;         /* Ctrl-C: the rest was cancelled */
    double t0, seconds;
} batch_ctx;

static void batch_free(batch_ctx *c) {
    specdec_scheduler_free(c->s);
    specdec_grammar_free(c->grammar);
    for (int32_t i = 0; i < c->n_items; i++) {
        free(c->items[i].out);
        if (c->details) free(c->details[i]);
        if (c->prompts) free(c->prompts[i]);
    }
    free(c->items);
    free(c->details);
    free(c->prompts);
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
    c->prompts = calloc((size_t)(lines ? lines : 1), sizeof *c->prompts);
    if (!c->items || !c->details || !c->prompts) return fail("reading the prompts", SPECDEC_ERR_OUT_OF_MEMORY, path);
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

/* --jsonl: line i is {"prompt": TEXT[, "seed": N]}; a line that is not is noted as the
 * item's failure (INVALID_ARGUMENT) and not submitted. 0, or 1 out of memory. */
static int batch_parse_jsonl(batch_ctx *c, int32_t i) {
    batch_item *it = &c->items[i];
    cJSON *j = cJSON_ParseWithLength(it->line, it->len);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prompt"), *sd = cJSON_GetObjectItemCaseSensitive(j, "seed");
    const char *why = !cJSON_IsObject(j) ? "not a JSON object"
                      : !cJSON_IsString(p) ? "no \"prompt\" string"
                      : sd && !(cJSON_IsNumber(sd) && sd->valuedouble >= 0 && sd->valuedouble < 9007199254740992.0 &&
                                sd->valuedouble == (double)(uint64_t)sd->valuedouble)
                          ? "\"seed\" is not an integer in [0, 2^53)"
                          : NULL;
    if (!why) {
        c->prompts[i] = strdup(p->valuestring);
        if (!c->prompts[i]) {
            cJSON_Delete(j);
            return 1;
        }
        it->line = c->prompts[i];
        it->len = strlen(c->prompts[i]);
        it->has_seed = sd != NULL;
        if (sd) it->seed = (uint64_t)sd->valuedouble;
    }
    cJSON_Delete(j);
    if (why) batch_note(c, i, SPECDEC_ERR_INVALID_ARGUMENT, why);
    return 0;
}

/* S (--seed, or drawn when -1) and each line's seed: its own, or (S + index) mod
 * (2^64 - 1), so that SPECDEC_SEED_RANDOM (2^64 - 1) is never one: past it, one more. */
static void batch_seeds(batch_ctx *c) {
    uint64_t s = c->o->gen.gp.seed;
    if (s == SPECDEC_SEED_RANDOM) {
        uint32_t r = (uint32_t)time(NULL) ^ (uint32_t)getpid();
        (void)!getrandom(&r, sizeof r, GRND_NONBLOCK);
        s = r;
    }
    c->seed = s;
    for (int32_t i = 0; i < c->n_items; i++) {
        batch_item *it = &c->items[i];
        if (!it->has_seed) it->seed = s + (uint64_t)i < s || s + (uint64_t)i == SPECDEC_SEED_RANDOM ? s + (uint64_t)i + 1
                                                                                                    : s + (uint64_t)i;
        it->stats.seed = it->seed;
    }
}

/* Encode and queue every prompt; a refused one is noted in its item. */
static int batch_submit(batch_ctx *c) {
    const cli_gen_opts *g = &c->o->gen;
    specdec_generate_params gp = g->gp;
    gp.tokenizer = c->pair.tok;
    gp.grammar = c->grammar; /* each request takes its own reference */
    cli_bad_words_set(&c->bw, &gp);
    gp.stop_strings = g->n_stops ? g->stops : NULL;
    gp.n_stop_strings = g->n_stops;
    for (int32_t i = 0; i < c->n_items; i++) {
        batch_item *it = &c->items[i];
        if (it->status != SPECDEC_OK) continue; /* a bad --jsonl line */
        int32_t *ids = NULL;
        specdec_status st = cli_encode(c->pair.tok, it->line, it->len, &ids, &it->n_prompt);
        it->stats.n_prompt = it->n_prompt;
        if (st != SPECDEC_OK) {
            batch_note(c, i, st, specdec_tokenizer_last_error(c->pair.tok));
            continue;
        }
        gp.seed = it->seed;
        st = specdec_scheduler_submit(c->s, ids, it->n_prompt, &gp, &it->id);
        free(ids);
        if (st == SPECDEC_OK) continue;
        if (st == SPECDEC_ERR_OUT_OF_MEMORY) return fail("submitting", st, specdec_scheduler_last_error(c->s));
        batch_note(c, i, st, specdec_scheduler_last_error(c->s));
    }
    return 0;
}

/* Progress on stderr: a bar redrawn in place on a terminal, else a line per prompt. */
static void batch_progress(batch_ctx *c, int32_t i, int tty) {
    const batch_item *it = &c->items[i];
    const double t = now_s() - c->t0, tps = t > 0 ? (double)c->tokens_done / t : 0.0;
    if (tty) {
        char bar[31];
        const int fill = c->n_items ? (int)(30LL * c->n_done / c->n_items) : 30;
        for (int k = 0; k < 30; k++) bar[k] = k < fill ? '#' : '.';
        bar[30] = '\0';
        fprintf(stderr, "\r[%s] %d/%d prompts, %lld tokens, %.1f tokens/s", bar, (int)c->n_done, (int)c->n_items,
                (long long)c->tokens_done, tps);
        if (c->n_done == c->n_items) fputc('\n', stderr);
    } else {
        fprintf(stderr, "specdec batch: %d/%d done: line %d, %d tokens, %s, %.2f s (%.1f tokens/s overall)\n",
                (int)c->n_done, (int)c->n_items, (int)i, (int)it->n_out,
                it->status != SPECDEC_OK ? specdec_status_string(it->status) : specdec_stop_reason_name(it->stats.stop_reason),
                t, tps);
    }
    fflush(stderr);
}

/* Collect request i if it has finished (timeout_ms as specdec_scheduler_wait). 1 when
 * collected, 0 when still running, -1 on failure (printed). */
static int batch_collect_one(batch_ctx *c, int32_t i, int32_t timeout_ms) {
    batch_item *it = &c->items[i];
    specdec_status outcome = SPECDEC_OK;
    specdec_status st =
        specdec_scheduler_wait(c->s, it->id, timeout_ms, it->out, c->n_ctx, &it->n_out, &it->stats, &outcome);
    if (st == SPECDEC_ERR_TIMEOUT) return 0;
    if (st != SPECDEC_OK) return -fail("waiting for a request", st, specdec_scheduler_last_error(c->s));
    if (outcome != SPECDEC_OK)
        batch_note(c, i, outcome, outcome == SPECDEC_ERR_CANCELLED ? "cancelled (Ctrl-C)" : "the generation failed");
    it->done = 1;
    c->n_done++;
    c->tokens_done += it->n_out;
    return 1;
}

/* Ctrl-C: cancel every request not collected yet (each keeps its tokens so far). */
static void batch_cancel_rest(batch_ctx *c) {
    c->interrupted = 1;
    for (int32_t i = 0; i < c->n_items; i++)
        if (c->items[i].id && !c->items[i].done) (void)specdec_scheduler_cancel(c->s, c->items[i].id);
}

/* Collect the results as they finish (progress on stderr); printed later in line order. */
static int batch_collect(batch_ctx *c) {
    const int tty = isatty(STDERR_FILENO);
    int32_t left = 0;
    c->n_done = 0;
    for (int32_t i = 0; i < c->n_items; i++) {
        batch_item *it = &c->items[i];
        if (!it->id) {
            c->n_done++; /* refused at submit: done, nothing to wait for */
            continue;
        }
        it->out = malloc((size_t)c->n_ctx * sizeof *it->out);
        if (!it->out) return fail("collecting", SPECDEC_ERR_OUT_OF_MEMORY, "");
        left++;
    }
    while (left > 0) {
        if (cli_interrupted() && !c->interrupted) batch_cancel_rest(c);
        int32_t first = 1; /* the first unfinished request is waited for up to 50 ms, the others polled */
        for (int32_t i = 0; i < c->n_items; i++) {
            if (!c->items[i].id || c->items[i].done) continue;
            const int r = batch_collect_one(c, i, first ? 50 : 0);
            first = 0;
            if (r < 0) return 1;
            if (r == 0) continue;
            left--;
            if (c->o->progress) batch_progress(c, i, tty);
        }
    }
    return 0;
}

static int batch_run(batch_ctx *c) {
    const cli_batch_opts *o = c->o;
    if (batch_read(c, o->file)) return 1;
    for (int32_t i = 0; o->jsonl && i < c->n_items; i++)
        if (batch_parse_jsonl(c, i)) return fail("reading the prompts", SPECDEC_ERR_OUT_OF_MEMORY, o->file);
    batch_seeds(c);
    if (cli_pair_load("batch", o->gen.target_dir, o->gen.draft_dir, o->gen.tokenizer,
                      cli_gen_bundled_draft(&o->gen), o->gen.gp.draft_method == SPECDEC_DRAFT_MTP, &c->pair))
        return 1;
    int rc = cli_grammar_compile("batch", &o->gen, c->pair.tok, &c->grammar);
    if (!rc) rc = cli_bad_words_tokenize("batch", &o->gen, c->pair.tok, &c->bw);
    if (rc) return rc;
    specdec_scheduler_params sp = specdec_scheduler_default_params();
    sp.max_active = o->parallel;
    sp.max_queued = c->n_items > 0 ? c->n_items : 1;
    sp.prefix_cache = o->prefix_cache;
    sp.prefill_chunk = o->prefill_chunk;
    cli_kv_apply(&o->kv, &sp);
    specdec_status st = specdec_scheduler_create(c->pair.target, c->pair.draft, &o->gen.ep, &sp, &c->s);
    if (st != SPECDEC_OK)
        return fail(st == SPECDEC_ERR_UNSUPPORTED && o->prefix_cache == SPECDEC_PREFIX_CACHE_ON
                        ? "--enable-prefix-caching: creating the scheduler (leave the option out: the default "
                          "caches where it can)"
                        : "creating the scheduler",
                    st, specdec_last_error());
    c->n_ctx = specdec_scheduler_n_ctx(c->s);
    c->t0 = now_s();
    if (batch_submit(c) || batch_collect(c)) return 1;
    c->seconds = now_s() - c->t0;
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

static cJSON *batch_item_json(const batch_item *it, int32_t index, const char *text) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "index", index);
    cJSON *jt = cJSON_AddArrayToObject(j, "tokens");
    for (int32_t k = 0; k < it->n_out; k++) cJSON_AddItemToArray(jt, cJSON_CreateNumber(it->out[k]));
    cJSON_AddStringToObject(j, "text", text ? text : "");
    cJSON_AddStringToObject(j, "status", specdec_status_string(it->status));
    if (it->status != SPECDEC_OK) cJSON_AddStringToObject(j, "error", it->detail ? it->detail : "");
    cli_stats_json(j, &it->stats); /* n_prompt, stop_reason, seed, ...: specdec_stats' names */
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

/* Totals over the prompts (the count fields of specdec_stats summed). */
typedef struct batch_sum {
    int32_t failed;
    int64_t tokens, drafted, accepted, passes, forced, preemptions;
    int64_t prompt, cached; /* prompt tokens, and of them those whose KV came from the prefix cache */
    double t_load_s;
} batch_sum;

static batch_sum batch_totals(const batch_ctx *c) {
    batch_sum t;
    memset(&t, 0, sizeof t);
    for (int32_t i = 0; i < c->n_items; i++) {
        const batch_item *it = &c->items[i];
        t.tokens += it->n_out;
        t.drafted += it->stats.n_drafted;
        t.accepted += it->stats.n_accepted;
        t.passes += it->stats.n_target_passes;
        t.forced += it->stats.n_forced;
        t.preemptions += it->stats.n_preemptions;
        t.prompt += it->stats.n_prompt;
        t.cached += it->stats.n_cached_prompt;
        t.failed += it->status != SPECDEC_OK;
        if (it->stats.t_load_s > t.t_load_s) t.t_load_s = it->stats.t_load_s;
    }
    return t;
}

static void batch_print_summary(const batch_ctx *c, int json) {
    const batch_sum t = batch_totals(c);
    const double tps = c->seconds > 0 ? (double)t.tokens / c->seconds : 0.0;
    const double acc = t.drafted ? (double)t.accepted / (double)t.drafted : 0.0;
    const double tpp = t.passes ? (double)t.tokens / (double)t.passes : 0.0;
    if (!json) {
        fprintf(stderr,
                "--- specdec batch: %d prompts (%d failed%s), parallel %d, seed %llu (line i: seed + i): %lld tokens "
                "in %.3f s, %.2f tokens/s; %.2f tokens per target pass, acceptance rate %.1f%%; prompt tokens %lld, "
                "%lld of them from the prefix cache; load %.3f s\n",
                (int)c->n_items, (int)t.failed, c->interrupted ? ", interrupted by Ctrl-C" : "", (int)c->o->parallel,
                (unsigned long long)c->seed, (long long)t.tokens, c->seconds, tps, tpp, 100.0 * acc,
                (long long)t.prompt, (long long)t.cached, t.t_load_s);
        return;
    }
    cJSON *root = cJSON_CreateObject(), *s = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddNumberToObject(s, "prompts", c->n_items);
    cJSON_AddNumberToObject(s, "failed", t.failed);
    cJSON_AddNumberToObject(s, "parallel", c->o->parallel);
    cJSON_AddNumberToObject(s, "tokens", (double)t.tokens);
    cJSON_AddNumberToObject(s, "seconds", c->seconds);
    cJSON_AddNumberToObject(s, "tokens_per_second", tps);
    cJSON_AddNumberToObject(s, "n_drafted", (double)t.drafted);
    cJSON_AddNumberToObject(s, "n_accepted", (double)t.accepted);
    cJSON_AddNumberToObject(s, "acceptance_rate", acc);
    cJSON_AddNumberToObject(s, "n_target_passes", (double)t.passes);
    cJSON_AddNumberToObject(s, "tokens_per_target_pass", tpp);
    cJSON_AddNumberToObject(s, "n_prompt", (double)t.prompt);
    cJSON_AddNumberToObject(s, "n_cached_prompt", (double)t.cached);
    cJSON_AddNumberToObject(s, "n_forced", (double)t.forced);
    cJSON_AddNumberToObject(s, "n_preemptions", (double)t.preemptions);
    cJSON_AddNumberToObject(s, "t_load_s", t.t_load_s);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
    cJSON_AddRawToObject(s, "seed", seed);
    if (c->interrupted) cJSON_AddBoolToObject(s, "interrupted", 1);
    (void)batch_print_json_line(root);
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
    batch_print_summary(c, json);
    return batch_totals(c).failed ? 1 : 0;
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
    cli_sigint_install();
    int rc = batch_run(&c);
    if (!rc) rc = batch_print(&c, o.gen.json);
    if (cli_interrupted()) rc = CLI_EXIT_INTERRUPTED;
    batch_free(&c);
    cli_batch_opts_free(&o);
    return rc;
}

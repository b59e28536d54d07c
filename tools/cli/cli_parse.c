/* cli_parse.c — argument parsing of the subcommands (generate, info, tokenize), apart
 * from running them: each parser fills an options struct from argv and reports the
 * first problem in a cli_parse_err; it never prints and never exits, so the fuzz
 * target tests/fuzz/fuzz_cli.c can call it with any argv. Options are read left to
 * right; -h/--help wins only if it comes before the first bad argument. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_parse_err_print(FILE *f, const char *cmd, const cli_parse_err *e) {
    switch (e->kind) {
    case CLI_ERR_NEEDS_VALUE: fprintf(f, "specdec %s: %s needs a value\n", cmd, e->opt); break;
    case CLI_ERR_BAD_VALUE:
        fprintf(f, "specdec %s: bad value '%s' for %s%s%s\n", cmd, e->value, e->opt, e->detail[0] ? ": " : "",
                e->detail);
        break;
    case CLI_ERR_UNKNOWN_OPTION: fprintf(f, "specdec %s: unknown option '%s'\n", cmd, e->opt); break;
    case CLI_ERR_UNKNOWN_ARGUMENT: fprintf(f, "specdec %s: unknown argument '%s'\n", cmd, e->opt); break;
    case CLI_ERR_NO_PROMPT: fprintf(f, "specdec %s: -p PROMPT is required\n", cmd); break;
    case CLI_ERR_NO_FILE: fprintf(f, "specdec %s: -f PROMPTS is required\n", cmd); break;
    case CLI_ERR_PROMPT_IN_BATCH: fprintf(f, "specdec %s: -p is not a batch option: prompts come from -f\n", cmd); break;
    case CLI_ERR_INVALID: fprintf(f, "specdec %s: %s\n", cmd, e->detail); break;
    case CLI_ERR_NOT_BATCH: fprintf(f, "specdec %s: %s is not a batch option\n", cmd, e->opt); break;
    case CLI_ERR_NONE:
    case CLI_ERR_INCOMPLETE: break;
    }
}

static cli_parse_rc cli_err(cli_parse_err *e, cli_err_kind kind, const char *opt, const char *value) {
    e->kind = kind;
    e->opt = opt;
    e->value = value;
    return CLI_PARSE_USAGE;
}

/* A base-10 integer in [lo, hi], the whole string. */
static int cli_parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* A float as strtod reads it (nan, inf and hex included), the whole string; its range
 * is the library's business (specdec_generate refuses what it does not accept). */
static int cli_parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) return -1;
    *out = (float)v;
    return 0;
}

static int cli_is(const char *a, const char *x, const char *y, const char *z) {
    return !strcmp(a, x) || (y && !strcmp(a, y)) || (z && !strcmp(a, z));
}

/* generate: the numeric options. 1 = a is one of them (then *ok says whether v parsed). */
static int gen_numeric(cli_gen_opts *o, const char *a, const char *v, int *ok) {
    long n = 0;
    int r = 0;
    if (cli_is(a, "-n", "--n-predict", NULL)) {
        if (!(r = cli_parse_long(v, INT32_MIN, INT32_MAX, &n))) o->gp.n_predict = (int32_t)n;
    } else if (cli_is(a, "--top-k", NULL, NULL)) {
        if (!(r = cli_parse_long(v, INT32_MIN, INT32_MAX, &n))) o->gp.top_k = (int32_t)n;
    } else if (cli_is(a, "--ngram-min", NULL, NULL)) {
        if (!(r = cli_parse_long(v, INT32_MIN, INT32_MAX, &n))) o->gp.ngram_min = (int32_t)n;
    } else if (cli_is(a, "--ngram-max", NULL, NULL)) {
        if (!(r = cli_parse_long(v, INT32_MIN, INT32_MAX, &n))) o->gp.ngram_max = (int32_t)n;
    } else if (cli_is(a, "--logprobs", NULL, NULL)) {
        if (!(r = cli_parse_long(v, 0, SPECDEC_MAX_TOP_LOGPROBS, &n))) o->logprobs = (int32_t)n;
    } else if (cli_is(a, "--prompt-logprobs", NULL, NULL)) {
        if (!(r = cli_parse_long(v, 0, SPECDEC_MAX_TOP_LOGPROBS, &n))) o->prompt_logprobs = (int32_t)n;
    } else if (cli_is(a, "--draft-max", "--draft", NULL)) {
        if (!(r = cli_parse_long(v, INT32_MIN, INT32_MAX, &n))) o->gp.n_draft = (int32_t)n;
    } else if (cli_is(a, "--ctx", "-c", "--ctx-size")) {
        if (!(r = cli_parse_long(v, 0, INT32_MAX, &n))) o->ep.n_ctx = (int32_t)n;
    } else if (cli_is(a, "--threads", "-t", NULL)) {
        if (!(r = cli_parse_long(v, 0, SPECDEC_MAX_CPU_THREADS, &n))) o->ep.cpu_threads = (int32_t)n;
    } else if (cli_is(a, "--ngram-corpus", NULL, NULL)) {
        if (!(r = cli_parse_long(v, 0, SPECDEC_MAX_NGRAM_CORPUS_TOKENS, &n))) o->ep.ngram_corpus_tokens = (int32_t)n;
    } else if (cli_is(a, "--temp", NULL, NULL)) {
        r = cli_parse_float(v, &o->gp.temperature);
        o->temp_given = 1;
    } else if (cli_is(a, "--top-p", NULL, NULL)) {
        r = cli_parse_float(v, &o->gp.top_p);
    } else if (cli_is(a, "--min-p", NULL, NULL)) {
        r = cli_parse_float(v, &o->gp.min_p);
    } else if (cli_is(a, "--presence-penalty", NULL, NULL)) {
        r = cli_parse_float(v, &o->gp.presence_penalty);
    } else if (cli_is(a, "--frequency-penalty", NULL, NULL)) {
        r = cli_parse_float(v, &o->gp.frequency_penalty);
    } else if (cli_is(a, "--repetition-penalty", NULL, NULL)) {
        r = cli_parse_float(v, &o->gp.repetition_penalty);
    } else if (cli_is(a, "--min-tokens", NULL, NULL)) {
        if (!(r = cli_parse_long(v, INT32_MIN, INT32_MAX, &n))) o->gp.min_tokens = (int32_t)n;
    } else if (cli_is(a, "--seed", "-s", NULL)) {
        /* -1: random (SPECDEC_SEED_RANDOM, the default); else 0 .. 2^64 - 2 */
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        r = errno || end == v || *end || v[0] == '-' || v[0] == '+' || s == SPECDEC_SEED_RANDOM ? -1 : 0;
        if (!r) o->gp.seed = s;
        if (!strcmp(v, "-1")) r = 0, o->gp.seed = SPECDEC_SEED_RANDOM;
    } else {
        return 0;
    }
    *ok = r == 0;
    return 1;
}

/* --tree B1,B2,...: per-depth branchings (docs/TREE.md); the library's setter checks the
 * shape and its message becomes the detail. 0 = set. */
static int gen_tree(cli_gen_opts *o, const char *v, cli_parse_err *err) {
    int32_t w[64], depth = 0;
    for (const char *c = v;; c++) {
        char *end;
        errno = 0;
        long x = strtol(c, &end, 10);
        if (errno || end == c || x < 0 || x > 1000000 || depth == 64 || (*end && *end != ',')) {
            snprintf(err->detail, sizeof err->detail, "a comma-separated list of branchings");
            return -1;
        }
        w[depth++] = (int32_t)x;
        if (!*end) break;
        c = end;
    }
    if (specdec_generate_params_set_tree(&o->gp, w, depth) == SPECDEC_OK) return 0;
    snprintf(err->detail, sizeof err->detail, "%s", specdec_last_error());
    return -1;
}

/* generate: the tree options. 1 = a is one of them (then *ok as above, err->detail why not). */
static int gen_tree_option(cli_gen_opts *o, const char *a, const char *v, int *ok, cli_parse_err *err) {
    long n;
    if (!strcmp(a, "--tree")) {
        *ok = gen_tree(o, v, err) == 0;
    } else if (!strcmp(a, "--draft-nodes")) {
        *ok = cli_parse_long(v, 1, SPECDEC_MAX_TREE_NODES, &n) == 0;
        if (*ok) o->gp.draft_nodes = (int32_t)n;
        else snprintf(err->detail, sizeof err->detail, "a node budget in [1, %d]", SPECDEC_MAX_TREE_NODES);
    } else {
        return 0;
    }
    return 1;
}

/* --ngram-cost measured|off|fixed:X (specdec_generate_params.ngram_cost, ngram_token_cost;
 * X's range is the library's business). 0 = set. */
static int gen_ngram_cost(cli_gen_opts *o, const char *v) {
    if (!strcmp(v, "measured")) o->gp.ngram_cost = SPECDEC_NGRAM_COST_MEASURED;
    else if (!strcmp(v, "off")) o->gp.ngram_cost = SPECDEC_NGRAM_COST_OFF;
    else if (!strncmp(v, "fixed:", 6) && !cli_parse_float(v + 6, &o->gp.ngram_token_cost))
        o->gp.ngram_cost = SPECDEC_NGRAM_COST_FIXED;
    else return -1;
    return 0;
}

/* The logits processors' lists: --stop-token-id ID and --logit-bias ID=BIAS, one entry each
 * (the arrays have room for one per argument). Range and count are the library's checks
 * (gen_check); here only the form. 0 = added. */
static int gen_proc_list(cli_gen_opts *o, const char *a, const char *v) {
    long id = 0;
    if (!strcmp(a, "--stop-token-id")) {
        if (cli_parse_long(v, INT32_MIN, INT32_MAX, &id)) return -1;
        o->stop_token_ids[o->gp.n_stop_token_ids++] = (int32_t)id;
        o->gp.stop_token_ids = o->stop_token_ids;
        return 0;
    }
    const char *eq = strchr(v, '=');
    char num[24];
    float bias = 0;
    if (!eq || eq == v || (size_t)(eq - v) >= sizeof num) return -1;
    memcpy(num, v, (size_t)(eq - v));
    num[eq - v] = '\0';
    if (cli_parse_long(num, INT32_MIN, INT32_MAX, &id) || cli_parse_float(eq + 1, &bias)) return -1;
    o->logit_bias[o->gp.n_logit_bias].token = (int32_t)id;
    o->logit_bias[o->gp.n_logit_bias++].bias = bias;
    o->gp.logit_bias = o->logit_bias;
    return 0;
}

/* --allowed-token-ids ID,ID,...: appended to o->allowed (range and count: the library's). 0 = added. */
static int gen_allowed(cli_gen_opts *o, const char *v) {
    size_t n = 1;
    for (const char *p = v; *p; p++) n += *p == ',';
    const size_t have = (size_t)o->gp.n_allowed_token_ids;
    if (have + n > (size_t)SPECDEC_MAX_ALLOWED_TOKEN_IDS + 1) return -1; /* the library refuses that many */
    int32_t *a = realloc(o->allowed, (have + n) * sizeof *a);
    if (!a) return -1;
    o->allowed = a;
    o->gp.allowed_token_ids = a;
    char num[24];
    for (const char *p = v;; p++) {
        const size_t len = strcspn(p, ",");
        long id = 0;
        if (len == 0 || len >= sizeof num) return -1;
        memcpy(num, p, len);
        num[len] = '\0';
        if (cli_parse_long(num, INT32_MIN, INT32_MAX, &id)) return -1;
        a[o->gp.n_allowed_token_ids++] = (int32_t)id;
        p += len;
        if (!*p) return 0;
    }
}

/* generate: the options that take a value. 1 = a is one of them (then *ok as above). */
static int gen_value(cli_gen_opts *o, const char *a, const char *v, int *ok) {
    *ok = 1;
    if (cli_is(a, "-m", "--model", NULL)) o->target_dir = v;
    else if (cli_is(a, "-md", "--model-draft", NULL)) o->draft_dir = v;
    else if (cli_is(a, "--tokenizer", NULL, NULL)) o->tokenizer = v;
    else if (cli_is(a, "-p", "--prompt", NULL)) o->prompt = v;
    else if (cli_is(a, "--stop", NULL, NULL)) o->stops[o->n_stops++] = v;
    else if (cli_is(a, "--stop-token-id", "--logit-bias", NULL)) *ok = gen_proc_list(o, a, v) == 0;
    else if (cli_is(a, "--allowed-token-ids", NULL, NULL)) *ok = gen_allowed(o, v) == 0;
    else if (cli_is(a, "--bad-words", NULL, NULL)) o->bad_words[o->n_bad_words++] = v;
    else if (cli_is(a, "--verify", NULL, NULL)) {
        if (!strcmp(v, "auto")) o->gp.verify = SPECDEC_VERIFY_AUTO;
        else if (!strcmp(v, "rejection")) o->gp.verify = SPECDEC_VERIFY_REJECTION;
        else if (!strcmp(v, "greedy")) o->gp.verify = SPECDEC_VERIFY_GREEDY;
        else if (!strcmp(v, "match")) o->gp.verify = SPECDEC_VERIFY_MATCH;
        else *ok = 0;
    } else if (cli_is(a, "--drafter", NULL, NULL)) {
        if (!strcmp(v, "auto")) o->gp.draft_method = SPECDEC_DRAFT_AUTO;
        else if (!strcmp(v, "model")) o->gp.draft_method = SPECDEC_DRAFT_MODEL;
        else if (!strcmp(v, "ngram")) o->gp.draft_method = SPECDEC_DRAFT_NGRAM;
        else if (!strcmp(v, "eagle3")) o->gp.draft_method = SPECDEC_DRAFT_EAGLE3;
        else if (!strcmp(v, "mtp")) o->gp.draft_method = SPECDEC_DRAFT_MTP;
        else if (!strcmp(v, "none")) o->gp.draft_method = SPECDEC_DRAFT_NONE;
        else *ok = 0;
    } else if (cli_is(a, "--ngram-cost", NULL, NULL)) {
        *ok = gen_ngram_cost(o, v) == 0;
    } else if (cli_is(a, "--backend", NULL, NULL)) {
        if (!strcmp(v, "auto")) o->ep.backend = SPECDEC_BACKEND_AUTO;
        else if (!strcmp(v, "cpu")) o->ep.backend = SPECDEC_BACKEND_CPU;
        else if (!strcmp(v, "cuda")) o->ep.backend = SPECDEC_BACKEND_CUDA;
        else *ok = 0;
    } else {
        return gen_numeric(o, a, v, ok);
    }
    return 1;
}

/* Structured output: --regex PATTERN, --json-schema FILE, --choice JSON_ARRAY, --grammar FILE
 * (GBNF), --json-object (v
 * NULL). 0: a is none of them; 1: recorded; -1: a second constraint (err->detail says which). */
static int gen_grammar(cli_gen_opts *o, const char *a, const char *v, cli_parse_err *err) {
    specdec_grammar_kind k;
    if (!strcmp(a, "--regex")) k = SPECDEC_GRAMMAR_REGEX;
    else if (!strcmp(a, "--json-schema")) k = SPECDEC_GRAMMAR_JSON_SCHEMA;
    else if (!strcmp(a, "--choice")) k = SPECDEC_GRAMMAR_CHOICE;
    else if (!strcmp(a, "--grammar")) k = SPECDEC_GRAMMAR_GBNF;
    else if (!strcmp(a, "--json-object")) k = SPECDEC_GRAMMAR_JSON_OBJECT;
    else return 0;
    if (o->grammar_kind) {
        snprintf(err->detail, sizeof err->detail,
                 "%s and %s both constrain the output: give at most one of --regex, --json-schema, --json-object, "
                 "--choice, --grammar",
                 o->grammar_opt, a);
        return -1;
    }
    o->grammar_kind = k;
    o->grammar_arg = v;
    o->grammar_opt = a;
    return 1;
}

static const char *const gen_value_opts[] = {
    "-m", "--model", "-md", "--model-draft", "--tokenizer", "-p", "--prompt", "--stop", "--verify", "--backend", "-n",
    "--n-predict", "--top-k", "--draft-max", "--draft", "--ctx", "-c", "--ctx-size", "--threads", "-t", "--temp",
    "--top-p",
    "--min-p", "--seed", "-s", "--tree", "--draft-nodes", "--drafter", "--ngram-min", "--ngram-max", "--ngram-corpus",
    "--ngram-cost", "--logprobs", "--prompt-logprobs", "--presence-penalty", "--frequency-penalty",
    "--allowed-token-ids", "--bad-words",
    "--repetition-penalty", "--min-tokens", "--stop-token-id", "--logit-bias", "--regex", "--json-schema",
    "--choice", "--grammar", NULL};

static int gen_takes_value(const char *a) {
    for (int i = 0; gen_value_opts[i]; i++)
        if (!strcmp(a, gen_value_opts[i])) return 1;
    return 0;
}

int cli_gen_bundled_draft(const cli_gen_opts *o) {
    return o->gp.draft_method == SPECDEC_DRAFT_AUTO || o->gp.draft_method == SPECDEC_DRAFT_MODEL;
}

/* A drafter that needs no draft model with one given (-md): refused, naming both (eagle3
 * drafts with -md: an EAGLE-3 head; mtp with -md: the checkpoint whose MTP layer drafts). */
static cli_parse_rc gen_check_drafter(cli_gen_opts *o, int argc, char **argv, cli_parse_err *err) {
    if (cli_gen_bundled_draft(o) || o->gp.draft_method == SPECDEC_DRAFT_EAGLE3 ||
        o->gp.draft_method == SPECDEC_DRAFT_MTP || !o->draft_dir)
        return CLI_PARSE_OK;
    for (int i = argc - 2; i > 0; i--)
        if (!strcmp(argv[i], "--drafter")) {
            snprintf(err->detail, sizeof err->detail, "a draft model is given (-md %s); this drafter uses none",
                     o->draft_dir);
            return cli_err(err, CLI_ERR_BAD_VALUE, argv[i], argv[i + 1]);
        }
    return CLI_PARSE_OK;
}

/* After every option: conflicts, then the values as the library checks them. */
/* Stands in for cmd_generate's logprob callback while the params are validated here. */
static int cli_lp_placeholder(void *u, const specdec_token_logprobs *lp) {
    (void)u;
    (void)lp;
    return 0;
}

static cli_parse_rc gen_check(cli_gen_opts *o, cli_parse_err *err) {
    if (o->gp.verify == SPECDEC_VERIFY_GREEDY && o->temp_given && !(o->gp.temperature <= 0.0f)) {
        snprintf(err->detail, sizeof err->detail,
                 "--verify greedy conflicts with --temp %g: greedy verification takes the target's argmax and "
                 "ignores the temperature; use --temp 0, or --verify rejection|match to sample",
                 (double)o->gp.temperature);
        return cli_err(err, CLI_ERR_INVALID, "--verify", NULL);
    }
    if (o->gp.verify == SPECDEC_VERIFY_GREEDY && !o->temp_given) o->gp.temperature = 0.0f;
    if (o->baseline && o->gp.n_predict == 0) {
        snprintf(err->detail, sizeof err->detail, "--baseline needs -n > 0 (-n 0 only scores the prompt)");
        return cli_err(err, CLI_ERR_INVALID, "--baseline", NULL);
    }
    specdec_generate_params v = o->gp; /* as cmd_generate will set it: -n 0 needs --prompt-logprobs */
    if (o->prompt_logprobs >= 0) {
        v.prompt_logprobs = 1;
        v.prompt_top_logprobs = o->prompt_logprobs;
        v.logprob_callback = cli_lp_placeholder;
    }
    if (specdec_generate_params_validate(&v) != SPECDEC_OK) {
        snprintf(err->detail, sizeof err->detail, "%s", specdec_last_error());
        return cli_err(err, CLI_ERR_INVALID, NULL, NULL);
    }
    return CLI_PARSE_OK;
}

cli_parse_rc cli_gen_parse(int argc, char **argv, cli_gen_opts *o, cli_parse_err *err) {
    memset(o, 0, sizeof *o);
    memset(err, 0, sizeof *err);
    o->gp = specdec_generate_default_params();
    o->gp.seed = SPECDEC_SEED_RANDOM; /* llama.cpp's default: -1, a new seed every run (printed) */
    o->ep = specdec_engine_default_params();
    o->logprobs = -1;
    o->prompt_logprobs = -1;
    const size_t cap = (size_t)(argc > 0 ? argc : 1); /* at most one --stop (etc.) per argument */
    o->stops = calloc(cap, sizeof *o->stops);
    o->logit_bias = calloc(cap, sizeof *o->logit_bias);
    o->stop_token_ids = calloc(cap, sizeof *o->stop_token_ids);
    o->bad_words = calloc(cap, sizeof *o->bad_words);
    if (!o->stops || !o->logit_bias || !o->stop_token_ids || !o->bad_words) return CLI_PARSE_NOMEM;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int ok = 1;
        if (cli_is(a, "-h", "--help", NULL)) return CLI_PARSE_HELP;
        if (!strcmp(a, "--adaptive")) o->gp.adaptive_draft = 1;
        else if (!strcmp(a, "--ignore-eos")) o->gp.ignore_eos = 1;
        else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--trace")) o->trace = 1;
        else if (!strcmp(a, "--baseline")) o->baseline = 1;
        else if (!strcmp(a, "--json-object")) {
            if (gen_grammar(o, a, NULL, err) < 0) return cli_err(err, CLI_ERR_INVALID, a, NULL);
        } else if (!gen_takes_value(a)) return cli_err(err, CLI_ERR_UNKNOWN_OPTION, a, NULL);
        else if (i + 1 >= argc) return cli_err(err, CLI_ERR_NEEDS_VALUE, a, NULL);
        else {
            const int g = gen_grammar(o, a, argv[i + 1], err);
            if (g < 0) return cli_err(err, CLI_ERR_INVALID, a, NULL);
            if (!g && !gen_tree_option(o, a, argv[i + 1], &ok, err)) (void)gen_value(o, a, argv[i + 1], &ok);
            if (!ok && (!strcmp(a, "--logprobs") || !strcmp(a, "--prompt-logprobs")))
                snprintf(err->detail, sizeof err->detail, "the top count, 0..%d", SPECDEC_MAX_TOP_LOGPROBS);
            if (!ok && !strcmp(a, "--logit-bias"))
                snprintf(err->detail, sizeof err->detail, "ID=BIAS: a token id and a number");
            if (!ok && !strcmp(a, "--allowed-token-ids"))
                snprintf(err->detail, sizeof err->detail, "token ids separated by commas (at most %d in all)",
                         SPECDEC_MAX_ALLOWED_TOKEN_IDS);
            if (!ok && cli_is(a, "--seed", "-s", NULL))
                snprintf(err->detail, sizeof err->detail, "-1 (random) or an integer in [0, %llu]",
                         (unsigned long long)SPECDEC_SEED_RANDOM - 1);
            i++;
            if (!ok) return cli_err(err, CLI_ERR_BAD_VALUE, a, argv[i]);
        }
    }
    cli_parse_rc rc = gen_check(o, err);
    if (rc == CLI_PARSE_OK) rc = gen_check_drafter(o, argc, argv, err);
    if (rc == CLI_PARSE_OK && !o->prompt) return cli_err(err, CLI_ERR_NO_PROMPT, NULL, NULL);
    return rc;
}

void cli_gen_opts_free(cli_gen_opts *o) {
    free(o->stops);
    free(o->logit_bias);
    free(o->stop_token_ids);
    free(o->allowed);
    free(o->bad_words);
    o->allowed = NULL;
    o->bad_words = NULL;
    o->gp.allowed_token_ids = NULL;
    o->gp.n_allowed_token_ids = 0;
    o->n_bad_words = 0;
    o->stops = NULL;
    o->logit_bias = NULL;
    o->stop_token_ids = NULL;
    o->gp.logit_bias = NULL;
    o->gp.stop_token_ids = NULL;
    o->gp.n_logit_bias = o->gp.n_stop_token_ids = 0;
    o->n_stops = 0;
}

int cli_kv_option(const char *a, const char *v, cli_kv_opts *o) {
    long n = 0;
    if (!strcmp(a, "--kv-blocks")) {
        if (!v || cli_parse_long(v, 0, INT32_MAX, &n)) return 1;
        o->pool_blocks = (int32_t)n;
        return 0;
    }
    if (!strcmp(a, "--kv-block-size")) {
        if (!v || cli_parse_long(v, 1, 4096, &n)) return 1;
        o->block_tokens = (int32_t)n;
        return 0;
    }
    if (!strcmp(a, "--kv-admission")) {
        static const char *const names[] = {"auto", "reserve", "optimistic"}; /* by specdec_kv_admission value */
        for (int32_t i = 0; v && i < 3; i++)
            if (!strcmp(v, names[i])) return o->admission = i, 0;
        return 1;
    }
    return -1;
}

void cli_kv_apply(const cli_kv_opts *o, specdec_scheduler_params *sp) {
    sp->kv_pool_blocks = o->pool_blocks;
    if (o->block_tokens > 0) sp->kv_block_tokens = o->block_tokens;
    sp->kv_admission = o->admission;
}

void cli_kv_usage(FILE *f, int width) {
    fprintf(f,
            "  %-*s KV-cache blocks per model (default 0: every slot's full context)\n"
            "  %-*s tokens per KV-cache block, 1..4096 (default 16)\n"
            "  %-*s how a request claims the pool: optimistic (its prompt and one round; the\n"
            "  %-*s newest request is preempted and recomputed when the pool runs short; vLLM's\n"
            "  %-*s way) or reserve (every block it may ever hold; never preempted); default auto:\n"
            "  %-*s optimistic where the pool is paged\n",
            width, "--kv-blocks N", width, "--kv-block-size N", width, "--kv-admission A", width, "", width, "",
            width, "");
}

/* batch: takes its own options (-f, --parallel, --jsonl, --no-progress, the prefix cache's,
 * --prefill-chunk, the KV pool's) out
 * of argv, then parses the rest as generate's options; -p is refused (the prompts come from the
 * file). */
cli_parse_rc cli_batch_parse(int argc, char **argv, cli_batch_opts *o, cli_parse_err *err) {
    memset(o, 0, sizeof *o);
    memset(err, 0, sizeof *err);
    o->parallel = 4;
    o->progress = 1;
    o->gen_argv = calloc((size_t)(argc > 0 ? argc : 1) + 1, sizeof *o->gen_argv);
    if (!o->gen_argv) return CLI_PARSE_NOMEM;
    int n = 0;
    long v;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const int is_f = i > 0 && cli_is(a, "-f", "--file", NULL), is_par = i > 0 && !strcmp(a, "--parallel"),
                  is_chunk = i > 0 && !strcmp(a, "--prefill-chunk");
        if (i > 0 && cli_is(a, "-h", "--help", NULL)) return CLI_PARSE_HELP;
        if (i > 0 && cli_is(a, "-p", "--prompt", NULL)) return cli_err(err, CLI_ERR_PROMPT_IN_BATCH, a, NULL);
        if (i > 0 && (!strcmp(a, "--baseline") || !strcmp(a, "--logprobs") || !strcmp(a, "--prompt-logprobs")))
            return cli_err(err, CLI_ERR_NOT_BATCH, a, NULL);
        if (i > 0 && (!strcmp(a, "--jsonl") || !strcmp(a, "--no-progress"))) {
            if (a[2] == 'j') o->jsonl = 1;
            else o->progress = 0;
            continue;
        }
        if (i > 0 && (!strcmp(a, "--enable-prefix-caching") || !strcmp(a, "--no-enable-prefix-caching"))) {
            o->prefix_cache = a[2] == 'e' ? SPECDEC_PREFIX_CACHE_ON : SPECDEC_PREFIX_CACHE_OFF;
            continue;
        }
        const int kv = i > 0 ? cli_kv_option(a, i + 1 < argc ? argv[i + 1] : NULL, &o->kv) : -1;
        if (kv == 1) return cli_err(err, i + 1 < argc ? CLI_ERR_BAD_VALUE : CLI_ERR_NEEDS_VALUE, a,
                                    i + 1 < argc ? argv[i + 1] : NULL);
        if (kv == 0) {
            i++;
            continue;
        }
        if (!is_f && !is_par && !is_chunk) {
            o->gen_argv[n++] = argv[i];
            if (i > 0 && gen_takes_value(a) && i + 1 < argc) o->gen_argv[n++] = argv[++i]; /* a value, not an option */
            continue;
        }
        if (i + 1 >= argc) return cli_err(err, CLI_ERR_NEEDS_VALUE, a, NULL);
        if (is_f) o->file = argv[++i];
        else if (cli_parse_long(argv[++i], is_chunk ? 0 : 1, is_chunk ? 1 << 20 : 256, &v))
            return cli_err(err, CLI_ERR_BAD_VALUE, a, argv[i]);
        else if (is_chunk) o->prefill_chunk = (int32_t)v;
        else o->parallel = (int32_t)v;
    }
    cli_parse_rc rc = cli_gen_parse(n, o->gen_argv, &o->gen, err);
    if (rc == CLI_PARSE_USAGE && err->kind == CLI_ERR_NO_PROMPT) {
        memset(err, 0, sizeof *err);
        rc = CLI_PARSE_OK;
    }
    if (rc == CLI_PARSE_OK && !o->file) return cli_err(err, CLI_ERR_NO_FILE, NULL, NULL);
    return rc;
}

void cli_batch_opts_free(cli_batch_opts *o) {
    cli_gen_opts_free(&o->gen);
    free(o->gen_argv);
    o->gen_argv = NULL;
}

cli_parse_rc cli_info_parse(int argc, char **argv, cli_info_opts *o, cli_parse_err *err) {
    memset(err, 0, sizeof *err);
    o->dir = NULL;
    o->use_mmap = 1;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "-m", "--model", NULL) && i + 1 < argc) o->dir = argv[++i];
        else if (!strcmp(argv[i], "--no-mmap")) o->use_mmap = 0;
        else if (cli_is(argv[i], "-h", "--help", NULL)) return CLI_PARSE_HELP;
        else return cli_err(err, CLI_ERR_UNKNOWN_ARGUMENT, argv[i], NULL);
    }
    if (!o->dir) return cli_err(err, CLI_ERR_INCOMPLETE, NULL, NULL);
    return CLI_PARSE_OK;
}

cli_parse_rc cli_tok_parse(int argc, char **argv, cli_tok_opts *o, cli_parse_err *err) {
    memset(o, 0, sizeof *o);
    memset(err, 0, sizeof *err);
    o->special = 1;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "-m", "--model", NULL) && i + 1 < argc) o->dir = argv[++i];
        else if (cli_is(argv[i], "-p", "--prompt", NULL) && i + 1 < argc) o->text = argv[++i];
        else if (cli_is(argv[i], "-f", "--file", NULL) && i + 1 < argc) o->file = argv[++i];
        else if (!strcmp(argv[i], "--pieces")) o->pieces = 1;
        else if (!strcmp(argv[i], "--no-special")) o->special = 0;
        else if (!strcmp(argv[i], "--decode")) o->decode = 1;
        else if (!strcmp(argv[i], "--chat") && i + 1 < argc) o->chat = argv[++i];
        else if (!strcmp(argv[i], "--text")) o->chat_text = 1;
        else if (cli_is(argv[i], "-h", "--help", NULL)) return CLI_PARSE_HELP;
        else return cli_err(err, CLI_ERR_UNKNOWN_ARGUMENT, argv[i], NULL);
    }
    /* exactly one input: -p, -f or --chat; --text only with --chat */
    if (!o->dir || (!!o->text + !!o->file + !!o->chat) != 1 || (o->chat_text && !o->chat))
        return cli_err(err, CLI_ERR_INCOMPLETE, NULL, NULL);
    return CLI_PARSE_OK;
}

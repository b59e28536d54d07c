/* fuzz_cli.c — fuzz target: the specdec program's argument parsers (tools/cli/
 * cli_parse.c: generate, batch, info, tokenize) with fuzzed argv. Byte 0 picks the
 * subcommand; the rest is split at NUL bytes into the arguments after it (at most
 * 256). Checked: the result is one of OK / HELP / USAGE (never out of memory for a
 * small argv); a USAGE error names arguments that really are in argv (the message
 * printer reads them) and the option before a bad value; an OK result has what the
 * subcommand requires, pointers into argv only, and values in their documented
 * ranges; parsing is deterministic (the same argv gives the same options). */
#include <string.h>

#include "cli.h"
#include "fuzz_common.h"

#define SD_FCLI_MAX_ARGS 256

static int sd_fcli_in_argv(const char *p, int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (p == argv[i]) return 1;
    return 0;
}

/* A USAGE error must point into argv; print it to exercise the printer. */
static void sd_fcli_check_err(const char *cmd, const cli_parse_err *e, int argc, char **argv) {
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    sd_fuzz_require(e->kind != CLI_ERR_NONE);
    if (e->kind == CLI_ERR_NEEDS_VALUE) sd_fuzz_require(e->opt == argv[argc - 1]);
    if (e->kind == CLI_ERR_UNKNOWN_OPTION || e->kind == CLI_ERR_UNKNOWN_ARGUMENT)
        sd_fuzz_require(sd_fcli_in_argv(e->opt, argc, argv));
    if (e->kind == CLI_ERR_BAD_VALUE) {
        sd_fuzz_require(sd_fcli_in_argv(e->value, argc, argv) && e->value != argv[0]);
        int k = 1;
        while (argv[k] != e->value) k++;
        sd_fuzz_require(e->opt == argv[k - 1]);
    }
    if (devnull) cli_parse_err_print(devnull, cmd, e);
}

static void sd_fcli_generate(int argc, char **argv) {
    cli_gen_opts o, o2;
    cli_parse_err e, e2;
    cli_parse_rc rc = cli_gen_parse(argc, argv, &o, &e);
    cli_parse_rc rc2 = cli_gen_parse(argc, argv, &o2, &e2);
    sd_fuzz_require(rc == CLI_PARSE_OK || rc == CLI_PARSE_HELP || rc == CLI_PARSE_USAGE);
    sd_fuzz_require(rc2 == rc && e.kind == e2.kind && e.opt == e2.opt && e.value == e2.value);
    if (rc == CLI_PARSE_USAGE) sd_fcli_check_err("generate", &e, argc, argv);
    if (rc == CLI_PARSE_OK) {
        sd_fuzz_require(o.prompt && sd_fcli_in_argv(o.prompt, argc, argv));
        sd_fuzz_require(!o.target_dir || sd_fcli_in_argv(o.target_dir, argc, argv));
        sd_fuzz_require(!o.draft_dir || sd_fcli_in_argv(o.draft_dir, argc, argv));
        sd_fuzz_require(o.n_stops >= 0 && o.n_stops <= argc / 2);
        for (int i = 0; i < o.n_stops; i++) sd_fuzz_require(sd_fcli_in_argv(o.stops[i], argc, argv));
        sd_fuzz_require(o.gp.verify >= SPECDEC_VERIFY_AUTO && o.gp.verify <= SPECDEC_VERIFY_MATCH);
        sd_fuzz_require(o.ep.backend >= SPECDEC_BACKEND_AUTO && o.ep.backend <= SPECDEC_BACKEND_CUDA);
        sd_fuzz_require(o.ep.n_ctx >= 0);
        sd_fuzz_require(o.json == 0 || o.json == 1);
        /* --logprobs N: -1 (off) or a top count the library accepts; logprobs stay off in gp
           (the command sets them with its callback) */
        sd_fuzz_require(o.logprobs >= -1 && o.logprobs <= SPECDEC_MAX_TOP_LOGPROBS && o.logprobs == o2.logprobs);
        sd_fuzz_require(o.gp.logprobs == 0 && o.gp.logprob_callback == NULL);
        /* values the library accepts, no greedy verification with a temperature above 0 */
        sd_fuzz_require(specdec_generate_params_validate(&o.gp) == SPECDEC_OK);
        sd_fuzz_require(!(o.gp.verify == SPECDEC_VERIFY_GREEDY && o.gp.temperature > 0.0f));
        sd_fuzz_require(o.gp.tokenizer == NULL && o.gp.callback == NULL && o.gp.stop_strings == NULL);
        /* the processors' lists point into the options' own arrays (--logit-bias, --stop-token-id) */
        sd_fuzz_require(o.gp.n_logit_bias == 0 ? o.gp.logit_bias == NULL : o.gp.logit_bias == o.logit_bias);
        sd_fuzz_require(o.gp.n_stop_token_ids == 0 ? o.gp.stop_token_ids == NULL
                                                   : o.gp.stop_token_ids == o.stop_token_ids);
        sd_fuzz_require(o.gp.n_logit_bias == o2.gp.n_logit_bias && o.gp.n_stop_token_ids == o2.gp.n_stop_token_ids);
        sd_fuzz_require(!o.gp.n_logit_bias ||
                        !memcmp(o.logit_bias, o2.logit_bias, (size_t)o.gp.n_logit_bias * sizeof *o.logit_bias));
        sd_fuzz_require(!o.gp.n_stop_token_ids || !memcmp(o.stop_token_ids, o2.stop_token_ids,
                                                          (size_t)o.gp.n_stop_token_ids * sizeof *o.stop_token_ids));
        /* --allowed-token-ids: the same ids in each parse's own array */
        sd_fuzz_require(o.gp.n_allowed_token_ids == o2.gp.n_allowed_token_ids &&
                        (!o.gp.n_allowed_token_ids ||
                         !memcmp(o.gp.allowed_token_ids, o2.gp.allowed_token_ids,
                                 (size_t)o.gp.n_allowed_token_ids * sizeof *o.gp.allowed_token_ids)));
        /* same options both times (NaN floats compare by bits; the lists' pointers aside) */
        o2.gp.logit_bias = o.gp.logit_bias, o2.gp.stop_token_ids = o.gp.stop_token_ids;
        o2.gp.allowed_token_ids = o.gp.allowed_token_ids;
        sd_fuzz_require(!memcmp(&o.gp, &o2.gp, sizeof o.gp) && !memcmp(&o.ep, &o2.ep, sizeof o.ep));
        sd_fuzz_require(o.n_stops == o2.n_stops && o.prompt == o2.prompt);
    }
    cli_gen_opts_free(&o);
    cli_gen_opts_free(&o2);
}

static void sd_fcli_info(int argc, char **argv) {
    cli_info_opts o;
    cli_parse_err e;
    cli_parse_rc rc = cli_info_parse(argc, argv, &o, &e);
    sd_fuzz_require(rc == CLI_PARSE_OK || rc == CLI_PARSE_HELP || rc == CLI_PARSE_USAGE);
    if (rc == CLI_PARSE_USAGE) sd_fcli_check_err("info", &e, argc, argv);
    if (rc == CLI_PARSE_OK) sd_fuzz_require(o.dir && sd_fcli_in_argv(o.dir, argc, argv) && (o.use_mmap == 0 || o.use_mmap == 1));
}

static void sd_fcli_tokenize(int argc, char **argv) {
    cli_tok_opts o;
    cli_parse_err e;
    cli_parse_rc rc = cli_tok_parse(argc, argv, &o, &e);
    sd_fuzz_require(rc == CLI_PARSE_OK || rc == CLI_PARSE_HELP || rc == CLI_PARSE_USAGE);
    if (rc == CLI_PARSE_USAGE) sd_fcli_check_err("tokenize", &e, argc, argv);
    if (rc == CLI_PARSE_OK) {
        sd_fuzz_require(o.dir && sd_fcli_in_argv(o.dir, argc, argv));
        /* exactly one source: -p, -f or --chat; --text only with --chat */
        sd_fuzz_require((o.text != NULL) + (o.file != NULL) + (o.chat != NULL) == 1);
        sd_fuzz_require(!o.chat_text || o.chat);
        sd_fuzz_require(!o.text || sd_fcli_in_argv(o.text, argc, argv));
        sd_fuzz_require(!o.file || sd_fcli_in_argv(o.file, argc, argv));
        sd_fuzz_require(!o.chat || sd_fcli_in_argv(o.chat, argc, argv));
    }
}

/* batch: generate's options minus -p, plus -f (required), --parallel in [1, 256] and the prefix
 * cache's mode (a specdec_prefix_cache). */
static void sd_fcli_batch(int argc, char **argv) {
    cli_batch_opts o;
    cli_parse_err e;
    cli_parse_rc rc = cli_batch_parse(argc, argv, &o, &e);
    sd_fuzz_require(rc == CLI_PARSE_OK || rc == CLI_PARSE_HELP || rc == CLI_PARSE_USAGE);
    if (rc == CLI_PARSE_USAGE) sd_fcli_check_err("batch", &e, argc, argv);
    if (rc == CLI_PARSE_OK) {
        sd_fuzz_require(o.file && sd_fcli_in_argv(o.file, argc, argv));
        sd_fuzz_require(o.parallel >= 1 && o.parallel <= 256);
        sd_fuzz_require(o.gen.prompt == NULL && !o.gen.baseline);
        sd_fuzz_require(specdec_generate_params_validate(&o.gen.gp) == SPECDEC_OK);
        sd_fuzz_require((o.jsonl == 0 || o.jsonl == 1) && (o.progress == 0 || o.progress == 1));
        sd_fuzz_require(o.prefix_cache == SPECDEC_PREFIX_CACHE_AUTO || o.prefix_cache == SPECDEC_PREFIX_CACHE_ON ||
                        o.prefix_cache == SPECDEC_PREFIX_CACHE_OFF);
        sd_fuzz_require(!o.gen.target_dir || sd_fcli_in_argv(o.gen.target_dir, argc, argv));
        for (int i = 0; i < o.gen.n_stops; i++) sd_fuzz_require(sd_fcli_in_argv(o.gen.stops[i], argc, argv));
    }
    cli_batch_opts_free(&o);
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    static const char *const cmds[4] = {"generate", "info", "tokenize", "batch"};
    if (size == 0) return 0;
    const int which = data[0] % 4;
    /* a NUL-terminated heap copy of the rest; argv entries point into it (exact size, so
     * ASan sees a parser reading past an argument's end) */
    size_t n = size - 1;
    char *buf = malloc(n + 1);
    sd_fuzz_require(buf != NULL);
    if (n) memcpy(buf, data + 1, n);
    buf[n] = '\0';
    char *argv[SD_FCLI_MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)cmds[which];
    for (size_t i = 0; i < n && argc <= SD_FCLI_MAX_ARGS; i++) {
        argv[argc++] = buf + i;
        while (i < n && buf[i]) i++;
    }
    argv[argc] = NULL;
    if (which == 0) sd_fcli_generate(argc, argv);
    else if (which == 1) sd_fcli_info(argc, argv);
    else if (which == 2) sd_fcli_tokenize(argc, argv);
    else sd_fcli_batch(argc, argv);
    free(buf);
    return 0;
}

SD_FUZZ_DEFINE_ENTRY

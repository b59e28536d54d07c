/* cli.h — subcommands of the specdec program. Each returns the process exit code
 * (0 success, 1 runtime failure, 2 usage error). argv[0] is the subcommand name.
 *
 * Each subcommand is parse (cli_parse.c: argv -> options struct; never prints, never
 * exits, so it can be tested and fuzzed alone: tests/fuzz/fuzz_cli.c), run and print
 * (cmd_<name>.c). */
#ifndef SPECDEC_CLI_H
#define SPECDEC_CLI_H

#include <stdio.h>

#include "specdec.h"

int cli_cmd_generate(int argc, char **argv);
int cli_cmd_info(int argc, char **argv);
int cli_cmd_tokenize(int argc, char **argv);
int cli_cmd_batch(int argc, char **argv);

/* Directory of the bundled model pair, the first that exists of: share/specdec/models
 * beside the program's bin/ (an installed prefix, wherever it is), models/ of the
 * source tree it was built from, the configured install prefix's; NULL if none. */
const char *cli_bundled_models_dir(void);

/* Prints "specdec <cmd>: <what>: <status>[: detail]" to stderr; returns 1 (the exit code). */
int cli_fail(const char *cmd, const char *what, specdec_status st, const char *detail);

/* The models and tokenizer a subcommand runs on. */
typedef struct cli_pair {
    const char *target_dir, *draft_dir; /* as given, or the bundled pair's */
    char bundled_t[4096], bundled_d[4096];
    specdec_model *target, *draft;      /* draft NULL without -md (and -m given) */
    specdec_tokenizer *tok;             /* the target's */
} cli_pair;

/* Loads target_dir (NULL: the bundled pair, its draft too unless draft_dir or
 * !bundled_draft), draft_dir (NULL: none) and the tokenizer: tokenizer_path (--tokenizer: a
 * tokenizer.json, a directory holding one, or a .gguf) or else the target's. 0, or 1 after
 * printing why; free with cli_pair_free either way. */
int cli_pair_load(const char *cmd, const char *target_dir, const char *draft_dir, const char *tokenizer_path,
                  int bundled_draft, int mtp, cli_pair *p);
void cli_pair_free(cli_pair *p);

/* ---- statistics (cli_stats.c), the same names everywhere ------------------ */
struct cJSON;
/* Adds every specdec_stats field to obj under its C name (include/specdec.h), as the
 * server's `speculative` object does: numbers; enums by name (specdec_*_name); seed as an
 * exact integer; tree_width up to its first 0; the *_at_pos arrays up to the deepest
 * position drafted. 0, or -1 out of memory. */
int cli_stats_json(struct cJSON *obj, const specdec_stats *s);
/* The statistics as text lines on f (generate's stderr report); `stop` overrides the
 * stop reason's name when not NULL ("interrupted"). */
void cli_stats_print(FILE *f, const specdec_stats *s, const char *backend, const char *stop);

/* Ctrl-C: cli_sigint_install() makes SIGINT set a flag instead of killing the process;
 * cli_interrupted() reads it. A second Ctrl-C kills as usual. Exit code then: 130. */
void cli_sigint_install(void);
int cli_interrupted(void);
#define CLI_EXIT_INTERRUPTED 130

/* The whole file at path (malloc'ed, *len bytes, not NUL-terminated); NULL on failure (errno). */
char *cli_read_file(const char *path, size_t *len);

/* text -> ids with the post-processor's special tokens; *ids malloc'ed (free it). */
specdec_status cli_encode(const specdec_tokenizer *tok, const char *text, size_t len, int32_t **ids, int32_t *n);

/* ---- parsing (cli_parse.c) ---------------------------------------------- */
typedef enum cli_parse_rc {
    CLI_PARSE_OK = 0,
    CLI_PARSE_HELP = 1,  /* -h / --help: print the usage and exit 0 */
    CLI_PARSE_USAGE = 2, /* bad arguments: err says which; exit 2 */
    CLI_PARSE_NOMEM = 3  /* out of memory: exit 1 */
} cli_parse_rc;

typedef enum cli_err_kind {
    CLI_ERR_NONE = 0,
    CLI_ERR_NEEDS_VALUE,      /* "<opt> needs a value" */
    CLI_ERR_BAD_VALUE,        /* "bad value '<value>' for <opt>" */
    CLI_ERR_UNKNOWN_OPTION,   /* "unknown option '<opt>'" */
    CLI_ERR_UNKNOWN_ARGUMENT, /* "unknown argument '<opt>'" */
    CLI_ERR_NO_PROMPT,        /* "-p PROMPT is required" */
    CLI_ERR_NO_FILE,          /* "-f PROMPTS is required" (batch) */
    CLI_ERR_PROMPT_IN_BATCH,  /* "-p is not a batch option" (batch reads -f) */
    CLI_ERR_INCOMPLETE,       /* required arguments missing: only the usage is printed */
    CLI_ERR_INVALID,          /* values the library refuses, or that conflict: detail says which */
    CLI_ERR_NOT_BATCH         /* "<opt> is not a batch option" */
} cli_err_kind;

/* What was wrong; opt and value point into argv; detail (may be empty) says why a
 * value is bad when the option has its own rules (--tree, --draft-nodes). */
typedef struct cli_parse_err {
    cli_err_kind kind;
    const char *opt;
    const char *value;
    char detail[256];
} cli_parse_err;

/* Prints "specdec <cmd>: <message>\n" to f (nothing for CLI_ERR_INCOMPLETE / NONE). */
void cli_parse_err_print(FILE *f, const char *cmd, const cli_parse_err *e);

typedef struct cli_gen_opts {
    const char *target_dir; /* -m; NULL = the bundled pair */
    const char *draft_dir;  /* -md; NULL = none (or the bundled draft without -m) */
    const char *tokenizer;  /* --tokenizer; NULL = the target's (its directory or .gguf) */
    const char *prompt;     /* -p, required */
    specdec_generate_params gp; /* gp.seed: SPECDEC_SEED_RANDOM for --seed -1 (the default) */
    specdec_engine_params ep;
    int json;
    int trace;          /* --trace: one record per round (with --json: the "trace" array) */
    int baseline;       /* --baseline: also decode without speculation and report the speedup */
    int temp_given;     /* --temp was on the command line */
    int32_t logprobs;   /* --logprobs N: -1 (default) off; else logprobs on with N top entries, 0..20
                           (docs/LOGPROBS.md; the "logprobs" array of --json) */
    int32_t prompt_logprobs; /* --prompt-logprobs N: -1 (default) off; else prompt records with N top
                           entries, 0..20 (the "prompt_logprobs" array of --json: null, then one
                           record per prompt token but the first) */
    const char **stops; /* --stop values (owned array of argv pointers) */
    int n_stops;
    /* --logit-bias ID=BIAS and --stop-token-id ID (repeatable): owned arrays that gp.logit_bias and
       gp.stop_token_ids point to (gp.n_logit_bias / gp.n_stop_token_ids entries); the library's
       checks (count, range, vocabulary) apply as to any params */
    specdec_logit_bias *logit_bias;
    int32_t *stop_token_ids;
    /* vLLM's masks: --allowed-token-ids ID,ID,... (repeatable, the lists joined: an owned array
       gp.allowed_token_ids points to) and --bad-words WORD (repeatable: argv pointers, tokenized
       once the tokenizer is loaded, cli_bad_words) */
    int32_t *allowed;
    const char **bad_words;
    int n_bad_words;
    /* structured output (docs/STRUCTURED.md): at most one of --regex PATTERN, --json-schema FILE,
       --json-object, --choice JSON_ARRAY; compiled once the tokenizer is loaded (cli_grammar_compile) */
    specdec_grammar_kind grammar_kind; /* 0: none */
    const char *grammar_arg;           /* the pattern, the schema file's path or the JSON array (argv);
                                          NULL for --json-object */
    const char *grammar_opt;           /* the flag that gave it (argv) */
} cli_gen_opts;

/* Whether the drafter asked for may use the bundled draft model (--drafter auto|model). */
int cli_gen_bundled_draft(const cli_gen_opts *o);

/* Fills o from argv (o->stops, o->logit_bias and o->stop_token_ids must be freed with
 * cli_gen_opts_free whatever it returns).
 * The values are checked as the library checks them (specdec_generate_params_validate)
 * and for conflicts (--verify greedy with --temp > 0), so a bad command line is refused
 * before any model loads; --verify greedy without --temp means temperature 0. */
cli_parse_rc cli_gen_parse(int argc, char **argv, cli_gen_opts *o, cli_parse_err *err);
void cli_gen_opts_free(cli_gen_opts *o);

/* Structured output: o's constraint (--regex, --json-schema, --json-object, --choice) compiled
 * against tok into *out (NULL when none; free with specdec_grammar_free). 0, or the exit code
 * after printing "specdec <cmd>: <flag>: ..." to stderr: 2 when the library refuses the
 * constraint (its message says what and where), 1 when the schema file cannot be read or memory
 * runs out. */
int cli_grammar_compile(const char *cmd, const cli_gen_opts *o, const specdec_tokenizer *tok, specdec_grammar **out);

/* --bad-words: o's words as vLLM tokenizes them (specdec_tokenize_bad_words) into bw (bw->n 0
 * without words). 0, or the exit code after printing "specdec <cmd>: --bad-words: ..." (2 for a
 * word the library refuses). cli_bad_words_set points gp's bad_words_* at bw's sequences. */
typedef struct cli_bad_words {
    int32_t ids[SPECDEC_MAX_BAD_WORDS_TOKENS];
    int32_t offsets[SPECDEC_MAX_BAD_WORDS + 1];
    int32_t n;
} cli_bad_words;
int cli_bad_words_tokenize(const char *cmd, const cli_gen_opts *o, const specdec_tokenizer *tok, cli_bad_words *bw);
void cli_bad_words_set(const cli_bad_words *bw, specdec_generate_params *gp);

/* The scheduler's KV pool options of batch and serve: --kv-blocks N (kv_pool_blocks; 0 = enough
 * for every slot's full context), --kv-block-size N (kv_block_tokens, 1..4096; 0 = the default),
 * --kv-admission auto|optimistic|reserve (a specdec_kv_admission). */
typedef struct cli_kv_opts {
    int32_t pool_blocks, block_tokens, admission;
} cli_kv_opts;

/* If `a` is one of those options: 0 with its value `v` (may be NULL) stored, 1 when v is missing or
 * bad; -1: not one of them. */
int cli_kv_option(const char *a, const char *v, cli_kv_opts *o);
/* Copies the options set into sp. */
void cli_kv_apply(const cli_kv_opts *o, specdec_scheduler_params *sp);
/* The usage lines of those options (indented for a column of `width`). */
void cli_kv_usage(FILE *f, int width);

typedef struct cli_batch_opts {
    cli_gen_opts gen;   /* the generate options (gen.prompt stays NULL: -p is refused) */
    const char *file;   /* -f PROMPTS: one prompt per line, required */
    int32_t parallel;   /* --parallel N: requests decoded at once (default 4) */
    int jsonl;          /* --jsonl: each line is {"prompt": TEXT[, "seed": N]} */
    int progress;       /* 1 (default): a progress line per finished prompt on stderr (a bar on a
                           terminal); --no-progress: 0 */
    int32_t prefix_cache; /* a specdec_prefix_cache: AUTO (default), ON (--enable-prefix-caching), OFF
                           (--no-enable-prefix-caching); vLLM's option names */
    int32_t prefill_chunk; /* --prefill-chunk N: the scheduler's prefill_chunk (0: no limit) */
    cli_kv_opts kv;     /* --kv-blocks, --kv-block-size, --kv-admission */
    char **gen_argv;    /* owned: argv without the batch options, what gen was parsed from */
} cli_batch_opts;

/* Fills o from argv: -f, --parallel, --jsonl, --no-progress and the prefix cache options here,
 * everything else as generate's options (-p excepted). Free with cli_batch_opts_free whatever it returns. */
cli_parse_rc cli_batch_parse(int argc, char **argv, cli_batch_opts *o, cli_parse_err *err);
void cli_batch_opts_free(cli_batch_opts *o);

typedef struct cli_info_opts {
    const char *dir;
    int use_mmap;
} cli_info_opts;

cli_parse_rc cli_info_parse(int argc, char **argv, cli_info_opts *o, cli_parse_err *err);

typedef struct cli_tok_opts {
    const char *dir, *text, *file;
    int pieces, special, decode;
    const char *chat; /* --chat FILE.json: a conversation rendered with the chat template */
    int chat_text;    /* --text: print the rendered conversation instead of its ids */
} cli_tok_opts;

cli_parse_rc cli_tok_parse(int argc, char **argv, cli_tok_opts *o, cli_parse_err *err);

#endif

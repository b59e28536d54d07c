/* cmd_generate.c — `specdec generate`: load a target (and optionally a draft) model
 * directory, encode the prompt with the target's tokenizer.json, generate (speculative
 * when a draft is given), stream the text to stdout and print statistics to stderr,
 * or print one JSON object with --json. Options follow llama.cpp's names; they are
 * parsed (and their values checked, before anything loads) by cli_gen_parse
 * (cli_parse.c), then gen_run runs and gen_print_* print. --seed -1 (the default) draws
 * a seed, which the statistics print. Ctrl-C stops after the current token: the text so
 * far and the statistics are printed, exit code 130. --baseline decodes once more without
 * speculation (same settings and seed) and reports the measured speedup. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "specdec.h"

static void gen_usage(FILE *f) {
    fprintf(f,
            "usage: specdec generate [-m TARGET_DIR] [-md DRAFT_DIR] -p PROMPT [options]\n"
            "  -m DIR           target model directory (config.json, safetensors, tokenizer.json) or a\n"
            "                   .gguf file (model, tokenizer and chat template); default: the bundled pair\n"
            "                   kjv-target + kjv-draft\n"
            "  -md DIR          draft model directory or .gguf file (speculative decoding); none: plain decoding\n"
            "  --tokenizer PATH the tokenizer (tokenizer.json, its directory or a .gguf) instead of the target's,\n"
            "                   e.g. a GGUF whose own tokenizer specdec does not read\n"
            "  -p TEXT          prompt (encoded with the target's tokenizer, BOS as its post-processor says)\n"
            "  -n N             tokens to generate (default 128; 0 with --prompt-logprobs: score the prompt only)\n"
            "  --temp T         temperature, 0 = greedy (default 0.8)\n"
            "  --top-k K        top-k, 0 = off (default 40)\n"
            "  --top-p P        top-p in (0,1], 1 = off (default 0.95)\n"
            "  --min-p P        min-p in [0,1], 0 = off (default 0.05)\n"
            "  --presence-penalty X   in [-2,2]: subtracted from the logit of every token the output\n"
            "                   holds (OpenAI's; default 0 = off)\n"
            "  --frequency-penalty X  in [-2,2]: subtracted once per occurrence in the output (OpenAI's;\n"
            "                   default 0 = off)\n"
            "  --repetition-penalty X  in (0,100]: a prompt or output token's logit divided by X when\n"
            "                   positive, multiplied when not (HF / vLLM; default 1 = off)\n"
            "  --logit-bias ID=BIAS  add BIAS in [-100,100] to token ID's logit (repeatable, at most %d)\n"
            "  --min-tokens N   EOS and --stop-token-id ids cannot come before N tokens (vLLM's; default 0)\n"
            "  --stop-token-id ID  stop after token ID, which is kept (repeatable, at most %d)\n"
            "  --allowed-token-ids ID,ID,...  only these ids can be generated (vLLM's; repeatable)\n"
            "  --bad-words WORD  never generate WORD's tokens in a row (vLLM's: with and without a\n"
            "                   leading space; repeatable)\n"
            "                   (order: allowed ids and bad words, logit bias and the min-tokens mask,\n"
            "                   repetition, frequency and presence penalties, then temperature, top-k,\n"
            "                   top-p, min-p)\n"
            "  --seed S         RNG seed, -1 = random (default -1; the seed used is printed)\n"
            "  --draft-max G    draft length γ, 1..%d (default 4)\n"
            "  --adaptive       adapt γ each round from the acceptance observed\n"
            "  --tree B1,B2,..  draft tree: up to Bd children per node at depth d (at most %d nodes)\n"
            "  --draft-nodes N  draft tree of N nodes grown best-first by draft probability (within --tree)\n"
            "  --drafter D      auto|model|ngram|eagle3|mtp|none: who drafts (default auto: the draft model\n"
            "                   if any; an EAGLE-3 head given as -md drafts as eagle3);\n"
            "                   ngram = prompt lookup over the text so far, no draft model (-md) needed;\n"
            "                   mtp = the target checkpoint's own MTP layer (GLM-4.5, DeepSeek-V3; CPU)\n"
            "  --ngram-min N    ngram: shortest suffix looked up (default 1)\n"
            "  --ngram-max N    ngram: longest suffix looked up, tried first, at most 64 (default 4)\n"
            "  --ngram-cost C   ngram: measured|off|fixed:X: propose what pays by the measured round\n"
            "                   times (default), everything found, or a draft token costing X plain steps\n"
            "  --ngram-corpus N ngram: also search the finished generations of this run (batch: the earlier\n"
            "                   lines; serve: the earlier requests) kept in a corpus of N tokens (default 0: none)\n"
            "  --verify MODE    auto|rejection|greedy|match (default auto: greedy at T=0, else rejection;\n"
            "                   greedy implies --temp 0 and refuses a --temp above 0)\n"
            "  --backend B      auto|cpu|cuda (default auto)\n"
            "  --ctx N          context length, 0 = min(4096, the model's max_position_embeddings);\n"
            "                   more than max_position_embeddings is refused (default 0)\n"
            "  -t, --threads N  CPU backend: threads of each forward pass, 1..%d; outputs are the same for\n"
            "                   every count (default 0: $SPECDEC_CPU_THREADS, else the physical cores, at\n"
            "                   most 8)\n"
            "  --ignore-eos     do not stop at EOS\n"
            "  --stop STR       stop when STR appears in the text (repeatable)\n"
            "  --regex RE       structured output: the whole output matches the regular expression RE\n"
            "                   (Python re.fullmatch; docs/STRUCTURED.md lists the syntax)\n"
            "  --json-schema F  structured output: the output is an instance of the JSON Schema in file F\n"
            "  --json-object    structured output: the output is a JSON object\n"
            "  --choice JSON    structured output: the output is one of the strings of the JSON array\n"
            "  --grammar F      structured output: the output derives from the GBNF grammar in file F\n"
            "                   (llama.cpp's root ::= ...; docs/STRUCTURED.md)\n"
            "                   (at most one of these five; the output ends when a whole match is complete\n"
            "                   and the model picks EOS, or at -n)\n"
            "  --json           print one JSON object (text, ids, statistics, parameters) instead\n"
            "  --logprobs N     log-probabilities of the emitted tokens under the target (raw logits),\n"
            "                   with the N (0..%d) most likely ids each: the \"logprobs\" array of\n"
            "                   --json (the text output is unchanged)\n"
            "  --prompt-logprobs N  log-probabilities of the prompt's tokens (vLLM prompt_logprobs) with\n"
            "                   the N (0..%d) most likely ids each: the \"prompt_logprobs\" array of\n"
            "                   --json, null for the first token, then one record per prompt token\n"
            "  --trace          every round's drafts, accepted path and emitted tokens (stderr, or the\n"
            "                   \"trace\" array with --json)\n"
            "  --baseline       also decode without speculation (same settings and seed) and print\n"
            "                   the measured speedup\n"
            "Ctrl-C stops after the current token, prints the statistics and exits with 130.\n",
            SPECDEC_MAX_LOGIT_BIAS, SPECDEC_MAX_STOP_TOKEN_IDS, SPECDEC_MAX_DRAFT, SPECDEC_MAX_TREE_NODES,
            SPECDEC_MAX_CPU_THREADS, SPECDEC_MAX_TOP_LOGPROBS, SPECDEC_MAX_TOP_LOGPROBS);
}

typedef struct gen_out {
    int json;
    char *text;      /* --json: the text so far */
    size_t len, cap;
    int oom;
} gen_out;

static int on_token(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)tok;
    gen_out *o = ud;
    if (!piece || len == 0) return cli_interrupted();
    if (!o->json) {
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
        return cli_interrupted();
    }
    if (o->len + len + 1 > o->cap) {
        size_t nc = (o->cap ? o->cap * 2 : 256);
        while (nc < o->len + len + 1) nc *= 2;
        char *p = realloc(o->text, nc);
        if (!p) {
            o->oom = 1;
            return 1;
        }
        o->text = p;
        o->cap = nc;
    }
    memcpy(o->text + o->len, piece, len);
    o->len += len;
    o->text[o->len] = '\0';
    return cli_interrupted();
}

/* The baseline run's callback: nothing to show, only Ctrl-C to notice. */
static int on_token_quiet(void *ud, int32_t tok, const char *piece, size_t len) {
    (void)ud, (void)tok, (void)piece, (void)len;
    return cli_interrupted();
}

static const char *backend_name(specdec_backend b) {
    return b == SPECDEC_BACKEND_CUDA ? "cuda" : b == SPECDEC_BACKEND_CPU ? "cpu" : "auto";
}

static int fail(const char *what, specdec_status st, const char *detail) { return cli_fail("generate", what, st, detail); }

/* Everything one run holds; freed by gen_free. */
typedef struct gen_ctx {
    const cli_gen_opts *o;
    cli_pair pair;
    specdec_engine *eng;
    int32_t *ids, *out, *base_out;
    int32_t n_ids, n_out, n_base, cap_out;
    specdec_generate_params gp;
    specdec_stats stats;
    specdec_stats base_stats; /* --baseline: plain decoding with the same settings and seed */
    int has_base;
    int interrupted;          /* Ctrl-C stopped the generation */
    gen_out go;
    cJSON *trace;             /* --trace --json: one object per round */
    cJSON *lp;                /* --logprobs --json: one object per emitted token */
    cJSON *plp;               /* --prompt-logprobs --json: null, then one object per prompt token */
    specdec_grammar *grammar; /* structured output (--regex, ...): NULL when none */
    cli_bad_words bw;         /* --bad-words as token sequences */
} gen_ctx;

static void gen_free(gen_ctx *c) {
    cJSON_Delete(c->trace);
    cJSON_Delete(c->lp);
    cJSON_Delete(c->plp);
    specdec_engine_free(c->eng);
    specdec_grammar_free(c->grammar);
    cli_pair_free(&c->pair);
    free(c->ids);
    free(c->out);
    free(c->base_out);
    free(c->go.text);
}

/* Models, tokenizer and the prompt's ids. */
static int gen_load(gen_ctx *c) {
    if (cli_pair_load("generate", c->o->target_dir, c->o->draft_dir, c->o->tokenizer,
                      cli_gen_bundled_draft(c->o), c->o->gp.draft_method == SPECDEC_DRAFT_MTP, &c->pair))
        return 1;
    const char *prompt = c->o->prompt;
    specdec_status st = cli_encode(c->pair.tok, prompt, strlen(prompt), &c->ids, &c->n_ids);
    if (st != SPECDEC_OK) return fail("encoding the prompt", st, specdec_tokenizer_last_error(c->pair.tok));
    const int rc = cli_grammar_compile("generate", c->o, c->pair.tok, &c->grammar);
    return rc ? rc : cli_bad_words_tokenize("generate", c->o, c->pair.tok, &c->bw);
}

static cJSON *gen_ids(const int32_t *v, int32_t n) {
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

/* --trace: one record per round (a JSON object, or a line on stderr). */
static void on_round(void *ud, const specdec_round_info *r) {
    gen_ctx *c = ud;
    const char *who = specdec_draft_method_name(r->draft_method);
    if (!c->o->json) {
        fprintf(stderr, "[round %d, %s] drafted %d:", (int)r->round, who, (int)r->n_drafted);
        for (int32_t i = 0; i < r->n_drafted; i++) fprintf(stderr, " %d<%d", (int)r->draft_tokens[i], (int)r->draft_parents[i]);
        fprintf(stderr, "; accepted %d; emitted", (int)r->n_accepted);
        for (int32_t i = 0; i < r->n_emitted; i++) fprintf(stderr, " %d", (int)r->emitted[i]);
        fputc('\n', stderr);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    cJSON_AddNumberToObject(o, "round", r->round);
    cJSON_AddStringToObject(o, "drafter", who);
    cJSON_AddItemToObject(o, "draft_tokens", gen_ids(r->draft_tokens, r->n_drafted));
    cJSON_AddItemToObject(o, "draft_parents", gen_ids(r->draft_parents, r->n_drafted));
    cJSON_AddNumberToObject(o, "n_accepted", r->n_accepted);
    cJSON_AddItemToObject(o, "accepted_nodes", gen_ids(r->accepted_nodes, r->n_accepted));
    cJSON_AddItemToObject(o, "emitted", gen_ids(r->emitted, r->n_emitted));
    cJSON_AddItemToArray(c->trace, o);
}

/* --logprobs: one record per emitted token, {"token", "logprob", "rank", "top": [[id, logprob], ...]}
 * (a logprob of -inf prints as null); kept for --json only. --prompt-logprobs: the same record per
 * prompt token (position < n_prompt: the library reports those first) into "prompt_logprobs". */
static int on_logprob(void *ud, const specdec_token_logprobs *lp) {
    gen_ctx *c = ud;
    cJSON *dst = lp->position < c->n_ids ? c->plp : c->lp;
    if (!dst) return 0;
    cJSON *o = cJSON_CreateObject(), *top = o ? cJSON_AddArrayToObject(o, "top") : NULL;
    if (!top) {
        cJSON_Delete(o);
        c->go.oom = 1;
        return 1;
    }
    cJSON_AddNumberToObject(o, "token", lp->token);
    cJSON_AddNumberToObject(o, "logprob", lp->logprob);
    cJSON_AddNumberToObject(o, "rank", lp->rank);
    for (int32_t k = 0; k < lp->n_top; k++) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(lp->top_tokens[k]));
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(lp->top_logprobs[k]));
        cJSON_AddItemToArray(top, pair);
    }
    cJSON_AddItemToArray(dst, o);
    return 0;
}

/* Engine and generation (text streams to stdout through on_token unless --json). */
static int gen_run(gen_ctx *c) {
    const cli_gen_opts *o = c->o;
    specdec_status st;
    if ((st = specdec_engine_create(c->pair.target, c->pair.draft, &o->ep, &c->eng)) != SPECDEC_OK)
        return fail("creating the engine", st, specdec_last_error());
    c->gp = o->gp;
    int64_t room = (int64_t)specdec_engine_n_ctx(c->eng) - c->n_ids;
    int32_t cap_out = (int32_t)(c->gp.n_predict > 0 && c->gp.n_predict < room ? c->gp.n_predict : room > 0 ? room : 1);
    c->cap_out = cap_out;
    c->out = malloc((size_t)cap_out * sizeof *c->out);
    if (!c->out) return fail("allocating the output", SPECDEC_ERR_OUT_OF_MEMORY, "");
    c->go.json = o->json;
    c->gp.tokenizer = c->pair.tok;
    c->gp.grammar = c->grammar;
    cli_bad_words_set(&c->bw, &c->gp);
    c->gp.stop_strings = o->n_stops ? o->stops : NULL;
    c->gp.n_stop_strings = o->n_stops;
    c->gp.callback = on_token;
    c->gp.user_data = &c->go;
    if (o->trace && o->json && !(c->trace = cJSON_CreateArray())) return fail("tracing", SPECDEC_ERR_OUT_OF_MEMORY, "");
    if (o->trace) {
        c->gp.round_callback = on_round;
        c->gp.round_user_data = c;
    }
    if (o->logprobs >= 0) {
        if (o->json && !(c->lp = cJSON_CreateArray())) return fail("logprobs", SPECDEC_ERR_OUT_OF_MEMORY, "");
        c->gp.logprobs = 1;
        c->gp.top_logprobs = o->logprobs;
        c->gp.logprob_callback = on_logprob;
        c->gp.logprob_user_data = c;
    }
    if (o->prompt_logprobs >= 0) {
        if (o->json && (!(c->plp = cJSON_CreateArray()) || !cJSON_AddItemToArray(c->plp, cJSON_CreateNull())))
            return fail("prompt logprobs", SPECDEC_ERR_OUT_OF_MEMORY, "");
        c->gp.prompt_logprobs = 1;
        c->gp.prompt_top_logprobs = o->prompt_logprobs;
        c->gp.logprob_callback = on_logprob;
        c->gp.logprob_user_data = c;
    }
    if (cli_interrupted()) { /* Ctrl-C while loading: report nothing generated, as an interrupted run */
        c->interrupted = 1;
        return 0;
    }
    st = specdec_generate(c->eng, c->ids, c->n_ids, &c->gp, c->out, cap_out, &c->n_out, &c->stats);
    c->interrupted = cli_interrupted();
    if (c->go.oom) return fail("collecting the text", SPECDEC_ERR_OUT_OF_MEMORY, "");
    if (st != SPECDEC_OK) {
        if (!o->json) fputc('\n', stdout);
        return fail("generating", st, specdec_engine_last_error(c->eng));
    }
    return 0;
}

/* --baseline: the same prompt, settings and seed without speculation, not shown. */
static int gen_run_baseline(gen_ctx *c) {
    specdec_generate_params bp = c->gp;
    bp.n_draft = 0;
    bp.adaptive_draft = 0;
    bp.draft_nodes = 0;
    (void)specdec_generate_params_set_tree(&bp, NULL, 0);
    bp.seed = c->stats.seed;
    bp.callback = on_token_quiet;
    bp.round_callback = NULL; /* the trace and the logprobs are the speculative run's */
    bp.logprobs = 0;
    bp.top_logprobs = 0;
    bp.prompt_logprobs = 0;
    bp.prompt_top_logprobs = 0;
    bp.logprob_callback = NULL;
    c->base_out = malloc((size_t)c->cap_out * sizeof *c->base_out);
    if (!c->base_out) return fail("allocating the baseline's output", SPECDEC_ERR_OUT_OF_MEMORY, "");
    specdec_status st = specdec_generate(c->eng, c->ids, c->n_ids, &bp, c->base_out, c->cap_out, &c->n_base,
                                         &c->base_stats);
    if (st != SPECDEC_OK) return fail("generating the baseline", st, specdec_engine_last_error(c->eng));
    c->interrupted = cli_interrupted();
    c->has_base = !c->interrupted;
    return 0;
}

/* Speculative: a drafter drafted (a draft model or n-gram lookup, a chain or a tree). */
static int gen_is_spec(const gen_ctx *c) { return c->stats.draft_method != SPECDEC_DRAFT_NONE; }

static double gen_speedup(const gen_ctx *c) {
    return c->base_stats.tokens_per_second > 0 ? c->stats.tokens_per_second / c->base_stats.tokens_per_second : 0.0;
}

static int gen_same_tokens(const gen_ctx *c) {
    return c->n_base == c->n_out && !memcmp(c->base_out, c->out, (size_t)c->n_out * sizeof *c->out);
}

static void gen_json_stats(cJSON *root, const gen_ctx *c) {
    cJSON *js = cJSON_AddObjectToObject(root, "stats");
    cli_stats_json(js, &c->stats);
    cJSON_AddStringToObject(js, "backend", backend_name(specdec_engine_backend(c->eng)));
    if (c->interrupted) cJSON_AddBoolToObject(root, "interrupted", 1);
    if (!c->has_base) return;
    cJSON *jb = cJSON_AddObjectToObject(root, "baseline");
    cli_stats_json(jb, &c->base_stats);
    cJSON_AddNumberToObject(jb, "speedup", gen_speedup(c));
    cJSON_AddBoolToObject(jb, "same_tokens", gen_same_tokens(c));
}

static void gen_json_params(cJSON *root, const gen_ctx *c) {
    const specdec_generate_params *gp = &c->gp;
    const cli_gen_opts *o = c->o;
    const int spec = gen_is_spec(c);
    cJSON *jq = cJSON_AddObjectToObject(root, "params");
    cJSON_AddStringToObject(jq, "model", c->pair.target_dir);
    if (c->pair.draft) cJSON_AddStringToObject(jq, "draft_model", c->pair.draft_dir);
    else cJSON_AddNullToObject(jq, "draft_model");
    cJSON_AddStringToObject(jq, "prompt", o->prompt);
    cJSON_AddNumberToObject(jq, "n_predict", gp->n_predict);
    cJSON_AddNumberToObject(jq, "temperature", gp->temperature);
    cJSON_AddNumberToObject(jq, "top_k", gp->top_k);
    cJSON_AddNumberToObject(jq, "top_p", gp->top_p);
    cJSON_AddNumberToObject(jq, "min_p", gp->min_p);
    char seed[32];
    if (c->o->gp.seed == SPECDEC_SEED_RANDOM) snprintf(seed, sizeof seed, "-1");
    else snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->o->gp.seed);
    cJSON_AddRawToObject(jq, "seed", seed); /* as asked: -1 = random (stats.seed: the one used) */
    cJSON_AddNumberToObject(jq, "n_draft", spec ? gp->n_draft : 0);
    cJSON_AddBoolToObject(jq, "adaptive_draft", gp->adaptive_draft != 0);
    cJSON *jtw = cJSON_AddArrayToObject(jq, "tree");
    for (int d = 0; d < SPECDEC_MAX_DRAFT && gp->tree_width[d]; d++)
        cJSON_AddItemToArray(jtw, cJSON_CreateNumber(gp->tree_width[d]));
    cJSON_AddNumberToObject(jq, "draft_nodes", gp->draft_nodes);
    cJSON_AddStringToObject(jq, "drafter", specdec_draft_method_name(gp->draft_method));
    cJSON_AddNumberToObject(jq, "ngram_min", gp->ngram_min);
    cJSON_AddNumberToObject(jq, "ngram_max", gp->ngram_max);
    cJSON_AddStringToObject(jq, "ngram_cost", gp->ngram_cost == SPECDEC_NGRAM_COST_OFF     ? "off"
                                              : gp->ngram_cost == SPECDEC_NGRAM_COST_FIXED ? "fixed"
                                                                                            : "measured");
    cJSON_AddNumberToObject(jq, "ngram_token_cost", gp->ngram_token_cost);
    cJSON_AddStringToObject(jq, "verify", specdec_verify_mode_name(c->stats.verify));
    cJSON_AddStringToObject(jq, "backend", backend_name(o->ep.backend));
    cJSON_AddNumberToObject(jq, "n_ctx", specdec_engine_n_ctx(c->eng));
    cJSON_AddBoolToObject(jq, "ignore_eos", gp->ignore_eos != 0);
    cJSON *jstop = cJSON_AddArrayToObject(jq, "stop");
    for (int i = 0; i < o->n_stops; i++) cJSON_AddItemToArray(jstop, cJSON_CreateString(o->stops[i]));
    static const char *const kinds[] = {NULL, "regex", "json_schema", "json_object", "choice", "gbnf"};
    const unsigned k = (unsigned)o->grammar_kind;
    cJSON_AddItemToObject(jq, "structured_output", /* the constraint's kind (specdec_grammar_kind), or null */
                          k && k < 6 ? cJSON_CreateString(kinds[k]) : cJSON_CreateNull());
}

/* --json: one object with the text, ids, statistics and parameters. */
static int gen_print_json(gen_ctx *c) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "text", c->go.text ? c->go.text : "");
    cJSON *jt = cJSON_AddArrayToObject(root, "tokens");
    for (int32_t i = 0; i < c->n_out; i++) cJSON_AddItemToArray(jt, cJSON_CreateNumber(c->out[i]));
    cJSON *jp = cJSON_AddArrayToObject(root, "prompt_tokens");
    for (int32_t i = 0; i < c->n_ids; i++) cJSON_AddItemToArray(jp, cJSON_CreateNumber(c->ids[i]));
    gen_json_stats(root, c);
    gen_json_params(root, c);
    if (c->trace) {
        cJSON_AddItemToObject(root, "trace", c->trace);
        c->trace = NULL; /* root owns it now */
    }
    if (c->lp) {
        cJSON_AddItemToObject(root, "logprobs", c->lp);
        c->lp = NULL;
    }
    if (c->plp) {
        cJSON_AddItemToObject(root, "prompt_logprobs", c->plp);
        c->plp = NULL;
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!s) return fail("printing JSON", SPECDEC_ERR_OUT_OF_MEMORY, "");
    printf("%s\n", s);
    cJSON_free(s);
    return 0;
}

/* The text went to stdout already; the statistics go to stderr. */
static void gen_print_text(const gen_ctx *c) {
    fputc('\n', stdout);
    fflush(stdout);
    cli_stats_print(stderr, &c->stats, backend_name(specdec_engine_backend(c->eng)),
                    c->interrupted ? "interrupted (Ctrl-C)" : NULL);
    if (c->has_base)
        fprintf(stderr,
                "    baseline, plain decoding with the same settings and seed: %.2f tokens/s in %lld target passes; "
                "speedup %.2fx (decode); same tokens: %s\n",
                c->base_stats.tokens_per_second, (long long)c->base_stats.n_target_passes, gen_speedup(c),
                gen_same_tokens(c) ? "yes" : "no (rejection sampling draws differently)");
    else if (c->o->baseline && !gen_is_spec(c))
        fprintf(stderr, "    baseline: none to measure, this run is plain decoding already\n");
}

int cli_cmd_generate(int argc, char **argv) {
    cli_gen_opts o;
    cli_parse_err err;
    cli_parse_rc prc = cli_gen_parse(argc, argv, &o, &err);
    if (prc != CLI_PARSE_OK) {
        cli_gen_opts_free(&o);
        if (prc == CLI_PARSE_HELP) gen_usage(stdout);
        if (prc == CLI_PARSE_NOMEM) return fail("allocating", SPECDEC_ERR_OUT_OF_MEMORY, "");
        if (prc == CLI_PARSE_USAGE) {
            cli_parse_err_print(stderr, "generate", &err);
            gen_usage(stderr);
        }
        return prc == CLI_PARSE_HELP ? 0 : 2;
    }
    gen_ctx c;
    memset(&c, 0, sizeof c);
    c.o = &o;
    cli_sigint_install();
    int rc = gen_load(&c);
    if (!rc) rc = gen_run(&c);
    if (!rc && o.baseline && gen_is_spec(&c) && !c.interrupted) rc = gen_run_baseline(&c);
    if (!rc) {
        if (o.json) rc = gen_print_json(&c);
        else gen_print_text(&c);
    }
    if (!rc && c.interrupted) rc = CLI_EXIT_INTERRUPTED;
    if (rc == 1 && cli_interrupted()) rc = CLI_EXIT_INTERRUPTED;
    gen_free(&c);
    cli_gen_opts_free(&o);
    return rc;
}

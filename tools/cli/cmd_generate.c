/* cmd_generate.c — `specdec generate`: load a target (and optionally a draft) model
 * directory, encode the prompt with the target's tokenizer.json, generate (speculative
 * with a draft model or --drafter ngram), stream the text to stdout and print statistics to stderr,
 * or print one JSON object with --json. Options follow llama.cpp's names; they are
 * parsed by cli_gen_parse (cli_parse.c), then gen_run runs and gen_print_* print. */
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
            "  -m DIR           target model directory (config.json, safetensors, tokenizer.json);\n"
            "                   default: the bundled pair kjv-target + kjv-draft\n"
            "  -md DIR          draft model directory (speculative decoding); none: plain decoding\n"
            "  -p TEXT          prompt (encoded with the target's tokenizer, BOS as its post-processor says)\n"
            "  -n N             tokens to generate (default 128)\n"
            "  --temp T         temperature, 0 = greedy (default 0.8)\n"
            "  --top-k K        top-k, 0 = off (default 40)\n"
            "  --top-p P        top-p in (0,1], 1 = off (default 0.95)\n"
            "  --min-p P        min-p in [0,1], 0 = off (default 0.05)\n"
            "  --seed S         RNG seed (default 0)\n"
            "  --draft-max G    draft length γ, 1..%d (default 4)\n"
            "  --adaptive       adapt γ each round from the acceptance observed\n"
            "  --tree B1,B2,..  draft tree: up to Bd children per node at depth d (at most %d nodes)\n"
            "  --draft-nodes N  draft tree of N nodes grown best-first by draft probability (within --tree)\n"
            "  --drafter D      auto|model|ngram|none: who drafts (default auto: the draft model if any);\n"
            "                   ngram = prompt lookup over the text so far, no draft model (-md) needed\n"
            "  --ngram-min N    ngram: shortest suffix looked up (default 1)\n"
            "  --ngram-max N    ngram: longest suffix looked up, tried first, at most 64 (default 4)\n"
            "  --verify MODE    auto|rejection|greedy|match (default auto: greedy at T=0, else rejection)\n"
            "  --backend B      auto|cpu|cuda (default auto)\n"
            "  --ctx N          context length, 0 = from the model (default 0)\n"
            "  --ignore-eos     do not stop at EOS\n"
            "  --stop STR       stop when STR appears in the text (repeatable)\n"
            "  --json           print one JSON object (text, ids, statistics, parameters) instead\n"
            "  --trace          every round's drafts, accepted path and emitted tokens (stderr, or the\n"
            "                   \"trace\" array with --json)\n",
            SPECDEC_MAX_DRAFT, SPECDEC_MAX_TREE_NODES);
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
    if (!piece || len == 0) return 0;
    if (!o->json) {
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
        return 0;
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
    return 0;
}

static const char *verify_name(specdec_verify_mode m) {
    switch (m) {
    case SPECDEC_VERIFY_AUTO: return "auto";
    case SPECDEC_VERIFY_REJECTION: return "rejection";
    case SPECDEC_VERIFY_GREEDY: return "greedy";
    case SPECDEC_VERIFY_MATCH: return "match";
    }
    return "?";
}

static const char *stop_name(specdec_stop_reason r) {
    switch (r) {
    case SPECDEC_STOP_NONE: return "none";
    case SPECDEC_STOP_N_PREDICT: return "n_predict";
    case SPECDEC_STOP_EOS: return "eos";
    case SPECDEC_STOP_STRING: return "stop_string";
    case SPECDEC_STOP_CALLBACK: return "callback";
    case SPECDEC_STOP_CONTEXT_FULL: return "context_full";
    }
    return "?";
}

static const char *drafter_name(specdec_draft_method m) {
    switch (m) {
    case SPECDEC_DRAFT_AUTO: return "auto";
    case SPECDEC_DRAFT_MODEL: return "model";
    case SPECDEC_DRAFT_NGRAM: return "ngram";
    case SPECDEC_DRAFT_EAGLE3: return "eagle3";
    case SPECDEC_DRAFT_NONE: return "none";
    }
    return "?";
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
    int32_t *ids, *out;
    int32_t n_ids, n_out;
    specdec_generate_params gp;
    specdec_stats stats;
    gen_out go;
    cJSON *trace;    /* --trace --json: one object per round */
} gen_ctx;

static void gen_free(gen_ctx *c) {
    cJSON_Delete(c->trace);
    specdec_engine_free(c->eng);
    cli_pair_free(&c->pair);
    free(c->ids);
    free(c->out);
    free(c->go.text);
}

/* Models, tokenizer and the prompt's ids. */
static int gen_load(gen_ctx *c) {
    if (cli_pair_load("generate", c->o->target_dir, c->o->draft_dir, cli_gen_bundled_draft(c->o), &c->pair)) return 1;
    const char *prompt = c->o->prompt;
    specdec_status st = cli_encode(c->pair.tok, prompt, strlen(prompt), &c->ids, &c->n_ids);
    if (st != SPECDEC_OK) return fail("encoding the prompt", st, specdec_tokenizer_last_error(c->pair.tok));
    return 0;
}

static cJSON *gen_ids(const int32_t *v, int32_t n) {
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

/* --trace: one record per round (a JSON object, or a line on stderr). */
static void on_round(void *ud, const specdec_round_info *r) {
    gen_ctx *c = ud;
    if (!c->o->json) {
        fprintf(stderr, "[round %d, %s] drafted %d:", (int)r->round, drafter_name(r->draft_method), (int)r->n_drafted);
        for (int32_t i = 0; i < r->n_drafted; i++) fprintf(stderr, " %d<%d", (int)r->draft_tokens[i], (int)r->draft_parents[i]);
        fprintf(stderr, "; accepted %d; emitted", (int)r->n_accepted);
        for (int32_t i = 0; i < r->n_emitted; i++) fprintf(stderr, " %d", (int)r->emitted[i]);
        fputc('\n', stderr);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    cJSON_AddNumberToObject(o, "round", r->round);
    cJSON_AddStringToObject(o, "drafter", drafter_name(r->draft_method));
    cJSON_AddItemToObject(o, "draft_tokens", gen_ids(r->draft_tokens, r->n_drafted));
    cJSON_AddItemToObject(o, "draft_parents", gen_ids(r->draft_parents, r->n_drafted));
    cJSON_AddNumberToObject(o, "n_accepted", r->n_accepted);
    cJSON_AddItemToObject(o, "accepted_nodes", gen_ids(r->accepted_nodes, r->n_accepted));
    cJSON_AddItemToObject(o, "emitted", gen_ids(r->emitted, r->n_emitted));
    cJSON_AddItemToArray(c->trace, o);
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
    c->out = malloc((size_t)cap_out * sizeof *c->out);
    if (!c->out) return fail("allocating the output", SPECDEC_ERR_OUT_OF_MEMORY, "");
    c->go.json = o->json;
    c->gp.tokenizer = c->pair.tok;
    c->gp.stop_strings = o->n_stops ? o->stops : NULL;
    c->gp.n_stop_strings = o->n_stops;
    c->gp.callback = on_token;
    c->gp.user_data = &c->go;
    if (o->trace && o->json && !(c->trace = cJSON_CreateArray())) return fail("tracing", SPECDEC_ERR_OUT_OF_MEMORY, "");
    if (o->trace) {
        c->gp.round_callback = on_round;
        c->gp.round_user_data = c;
    }
    st = specdec_generate(c->eng, c->ids, c->n_ids, &c->gp, c->out, cap_out, &c->n_out, &c->stats);
    if (c->go.oom) return fail("collecting the text", SPECDEC_ERR_OUT_OF_MEMORY, "");
    if (st != SPECDEC_OK) {
        if (!o->json) fputc('\n', stdout);
        return fail("generating", st, specdec_engine_last_error(c->eng));
    }
    return 0;
}

/* Speculative: a drafter drafted (a draft model or n-gram lookup, a chain or a tree). */
static int gen_is_spec(const gen_ctx *c) { return c->stats.draft_method != SPECDEC_DRAFT_NONE; }

/* The tree statistics (text to stderr, or into the JSON stats object). */
static void gen_tree_stats(const specdec_stats *st, cJSON *js) {
    if (js) {
        cJSON_AddNumberToObject(js, "n_draft_rounds", (double)st->n_draft_rounds);
        cJSON_AddNumberToObject(js, "mean_accepted_length", st->mean_accepted_length);
        cJSON_AddNumberToObject(js, "nodes_per_round", st->nodes_per_round);
        return;
    }
    fprintf(stderr, "    draft rounds %lld: mean accepted path %.2f, %.2f nodes verified per round\n",
            (long long)st->n_draft_rounds, st->mean_accepted_length, st->nodes_per_round);
}

static specdec_verify_mode gen_mode(const specdec_generate_params *gp) {
    if (gp->verify != SPECDEC_VERIFY_AUTO) return gp->verify;
    return gp->temperature == 0.0f ? SPECDEC_VERIFY_GREEDY : SPECDEC_VERIFY_REJECTION;
}

static void gen_json_stats(cJSON *root, const gen_ctx *c) {
    const specdec_stats *s = &c->stats;
    cJSON *js = cJSON_AddObjectToObject(root, "stats");
    cJSON_AddNumberToObject(js, "n_prompt", (double)s->n_prompt);
    cJSON_AddNumberToObject(js, "n_generated", (double)s->n_generated);
    cJSON_AddNumberToObject(js, "n_rounds", (double)s->n_rounds);
    cJSON_AddNumberToObject(js, "n_drafted", (double)s->n_drafted);
    cJSON_AddNumberToObject(js, "n_accepted", (double)s->n_accepted);
    cJSON_AddNumberToObject(js, "acceptance_rate", s->acceptance_rate);
    cJSON_AddNumberToObject(js, "tokens_per_round", s->tokens_per_round);
    cJSON_AddNumberToObject(js, "t_prefill_s", s->t_prefill_s);
    cJSON_AddNumberToObject(js, "t_draft_s", s->t_draft_s);
    cJSON_AddNumberToObject(js, "t_target_s", s->t_target_s);
    cJSON_AddNumberToObject(js, "t_verify_s", s->t_verify_s);
    cJSON_AddNumberToObject(js, "t_total_s", s->t_total_s);
    cJSON_AddNumberToObject(js, "tokens_per_second", s->tokens_per_second);
    cJSON_AddNumberToObject(js, "final_n_draft", s->final_n_draft);
    cJSON_AddStringToObject(js, "stop_reason", stop_name(s->stop_reason));
    cJSON_AddStringToObject(js, "backend", backend_name(specdec_engine_backend(c->eng)));
    cJSON_AddStringToObject(js, "draft_method", drafter_name(s->draft_method));
    gen_tree_stats(s, js);
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
    cJSON_AddNumberToObject(jq, "seed", (double)gp->seed);
    cJSON_AddNumberToObject(jq, "n_draft", spec ? gp->n_draft : 0);
    cJSON_AddBoolToObject(jq, "adaptive_draft", gp->adaptive_draft != 0);
    cJSON *jtw = cJSON_AddArrayToObject(jq, "tree");
    for (int d = 0; d < SPECDEC_MAX_DRAFT && gp->tree_width[d]; d++)
        cJSON_AddItemToArray(jtw, cJSON_CreateNumber(gp->tree_width[d]));
    cJSON_AddNumberToObject(jq, "draft_nodes", gp->draft_nodes);
    cJSON_AddStringToObject(jq, "drafter", drafter_name(gp->draft_method));
    cJSON_AddNumberToObject(jq, "ngram_min", gp->ngram_min);
    cJSON_AddNumberToObject(jq, "ngram_max", gp->ngram_max);
    cJSON_AddStringToObject(jq, "verify", verify_name(gen_mode(gp)));
    cJSON_AddStringToObject(jq, "backend", backend_name(o->ep.backend));
    cJSON_AddNumberToObject(jq, "n_ctx", specdec_engine_n_ctx(c->eng));
    cJSON_AddBoolToObject(jq, "ignore_eos", gp->ignore_eos != 0);
    cJSON *jstop = cJSON_AddArrayToObject(jq, "stop");
    for (int i = 0; i < o->n_stops; i++) cJSON_AddItemToArray(jstop, cJSON_CreateString(o->stops[i]));
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
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!s) return fail("printing JSON", SPECDEC_ERR_OUT_OF_MEMORY, "");
    printf("%s\n", s);
    cJSON_free(s);
    return 0;
}

/* The text went to stdout already; the statistics go to stderr. */
static void gen_print_text(const gen_ctx *c) {
    const specdec_stats *s = &c->stats;
    const specdec_generate_params *gp = &c->gp;
    const int spec = gen_is_spec(c);
    fputc('\n', stdout);
    fflush(stdout);
    fprintf(stderr, "\n--- specdec: backend %s, %s%s", backend_name(specdec_engine_backend(c->eng)),
            spec ? "speculative, drafter " : "plain decoding", spec ? drafter_name(s->draft_method) : "");
    if (spec)
        fprintf(stderr, ", verify %s, γ %d%s (final %d)", verify_name(gen_mode(gp)), (int)gp->n_draft,
                gp->adaptive_draft ? " adaptive" : "", (int)s->final_n_draft);
    fprintf(stderr, "\n    prompt %lld tokens, generated %lld tokens in %lld rounds (%.2f tokens/round), stop: %s\n",
            (long long)s->n_prompt, (long long)s->n_generated, (long long)s->n_rounds, s->tokens_per_round,
            stop_name(s->stop_reason));
    if (spec)
        fprintf(stderr, "    drafted %lld, accepted %lld (acceptance rate %.1f%%)\n", (long long)s->n_drafted,
                (long long)s->n_accepted, 100.0 * s->acceptance_rate);
    if (spec) gen_tree_stats(s, NULL);
    fprintf(stderr, "    time: prefill %.3f s, draft %.3f s, target %.3f s, verify %.3f s, total %.3f s; %.2f tokens/s\n",
            s->t_prefill_s, s->t_draft_s, s->t_target_s, s->t_verify_s, s->t_total_s, s->tokens_per_second);
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
    int rc = gen_load(&c);
    if (!rc) rc = gen_run(&c);
    if (!rc) {
        if (o.json) rc = gen_print_json(&c);
        else gen_print_text(&c);
    }
    gen_free(&c);
    cli_gen_opts_free(&o);
    return rc;
}

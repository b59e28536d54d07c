/* cmd_generate.c — `specdec generate`: load a target (and optionally a draft) model
 * directory, encode the prompt with the target's tokenizer.json, generate (speculative
 * when a draft is given), stream the text to stdout and print statistics to stderr,
 * or print one JSON object with --json. Options follow llama.cpp's names. */
#include <errno.h>
#include <limits.h>
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
            "  --verify MODE    auto|rejection|greedy|match (default auto: greedy at T=0, else rejection)\n"
            "  --backend B      auto|cpu|cuda (default auto)\n"
            "  --ctx N          context length, 0 = from the model (default 0)\n"
            "  --ignore-eos     do not stop at EOS\n"
            "  --stop STR       stop when STR appears in the text (repeatable)\n"
            "  --json           print one JSON object (text, ids, statistics, parameters) instead\n",
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

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) return -1;
    *out = (float)v;
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

static const char *backend_name(specdec_backend b) {
    return b == SPECDEC_BACKEND_CUDA ? "cuda" : b == SPECDEC_BACKEND_CPU ? "cpu" : "auto";
}

/* Tree speculation options (docs/TREE.md): --tree B1,B2,... and --draft-nodes N.
 * Returns 1 when argv[*i] was one (*i moved past its value), 0 when it is another
 * option, -1 on a bad value (message printed). */
static int parse_tree_option(int argc, char **argv, int *i, specdec_generate_params *gp) {
    const char *a = argv[*i];
    const int tree = !strcmp(a, "--tree"), nodes = !strcmp(a, "--draft-nodes");
    if (!tree && !nodes) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "specdec generate: %s needs a value\n", a);
        return -1;
    }
    const char *v = argv[++*i];
    long x;
    if (nodes) {
        if (parse_int(v, 1, SPECDEC_MAX_TREE_NODES, &x) == 0) {
            gp->draft_nodes = (int32_t)x;
            return 1;
        }
        fprintf(stderr, "specdec generate: --draft-nodes '%s': a node budget in [1, %d]\n", v, SPECDEC_MAX_TREE_NODES);
        return -1;
    }
    int32_t w[64], depth = 0;
    for (const char *c = v;; c++) { /* B1,B2,...: the setter checks the shape */
        char *end;
        errno = 0;
        x = strtol(c, &end, 10);
        if (errno || end == c || x < 0 || x > 1000000 || depth == 64 || (*end && *end != ',')) {
            fprintf(stderr, "specdec generate: --tree '%s': a comma-separated list of branchings\n", v);
            return -1;
        }
        w[depth++] = (int32_t)x;
        if (!*end) break;
        c = end;
    }
    if (depth == 0 || specdec_generate_params_set_tree(gp, w, depth) != SPECDEC_OK) {
        fprintf(stderr, "specdec generate: --tree '%s': %s\n", v, depth ? specdec_last_error() : "empty shape");
        return -1;
    }
    return 1;
}

/* The tree statistics (text to stderr, or into the JSON objects). */
static void print_tree_stats(const specdec_stats *st, cJSON *js) {
    if (js) {
        cJSON_AddNumberToObject(js, "n_draft_rounds", (double)st->n_draft_rounds);
        cJSON_AddNumberToObject(js, "mean_accepted_length", st->mean_accepted_length);
        cJSON_AddNumberToObject(js, "nodes_per_round", st->nodes_per_round);
        return;
    }
    fprintf(stderr, "    draft rounds %lld: mean accepted path %.2f, %.2f nodes verified per round\n",
            (long long)st->n_draft_rounds, st->mean_accepted_length, st->nodes_per_round);
}

static int fail(const char *what, specdec_status st, const char *detail) {
    fprintf(stderr, "specdec generate: %s: %s%s%s\n", what, specdec_status_string(st), detail && *detail ? ": " : "",
            detail ? detail : "");
    return 1;
}

int cli_cmd_generate(int argc, char **argv) {
    const char *target_dir = NULL, *draft_dir = NULL, *prompt = NULL;
    char bundled_t[4096], bundled_d[4096];
    specdec_generate_params gp = specdec_generate_default_params();
    specdec_engine_params ep = specdec_engine_default_params();
    int json = 0;
    const char **stops = calloc((size_t)argc, sizeof *stops);
    int n_stops = 0;
    if (!stops) return fail("allocating", SPECDEC_ERR_OUT_OF_MEMORY, "");

#define NEED_ARG()                                                                   \
    do {                                                                             \
        if (i + 1 >= argc) {                                                         \
            fprintf(stderr, "specdec generate: %s needs a value\n", a);            \
            goto usage;                                                              \
        }                                                                            \
    } while (0)
#define BAD_VALUE()                                                                  \
    do {                                                                             \
        fprintf(stderr, "specdec generate: bad value '%s' for %s\n", argv[i], a);  \
        goto usage;                                                                  \
    } while (0)
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long v;
        const int tree_opt = parse_tree_option(argc, argv, &i, &gp);
        if (tree_opt < 0) goto usage;
        if (tree_opt > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            gen_usage(stdout);
            free(stops);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            NEED_ARG();
            target_dir = argv[++i];
        } else if (!strcmp(a, "-md") || !strcmp(a, "--model-draft")) {
            NEED_ARG();
            draft_dir = argv[++i];
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            NEED_ARG();
            prompt = argv[++i];
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            NEED_ARG();
            if (parse_int(argv[++i], INT32_MIN, INT32_MAX, &v)) BAD_VALUE();
            gp.n_predict = (int32_t)v;
        } else if (!strcmp(a, "--temp")) {
            NEED_ARG();
            if (parse_float(argv[++i], &gp.temperature)) BAD_VALUE();
        } else if (!strcmp(a, "--top-k")) {
            NEED_ARG();
            if (parse_int(argv[++i], INT32_MIN, INT32_MAX, &v)) BAD_VALUE();
            gp.top_k = (int32_t)v;
        } else if (!strcmp(a, "--top-p")) {
            NEED_ARG();
            if (parse_float(argv[++i], &gp.top_p)) BAD_VALUE();
        } else if (!strcmp(a, "--min-p")) {
            NEED_ARG();
            if (parse_float(argv[++i], &gp.min_p)) BAD_VALUE();
        } else if (!strcmp(a, "--seed") || !strcmp(a, "-s")) {
            NEED_ARG();
            char *end;
            errno = 0;
            unsigned long long s = strtoull(argv[++i], &end, 10);
            if (errno || end == argv[i] || *end || argv[i][0] == '-') BAD_VALUE();
            gp.seed = s;
        } else if (!strcmp(a, "--draft-max") || !strcmp(a, "--draft")) {
            NEED_ARG();
            if (parse_int(argv[++i], INT32_MIN, INT32_MAX, &v)) BAD_VALUE();
            gp.n_draft = (int32_t)v;
        } else if (!strcmp(a, "--adaptive")) {
            gp.adaptive_draft = 1;
        } else if (!strcmp(a, "--verify")) {
            NEED_ARG();
            const char *m = argv[++i];
            if (!strcmp(m, "auto")) gp.verify = SPECDEC_VERIFY_AUTO;
            else if (!strcmp(m, "rejection")) gp.verify = SPECDEC_VERIFY_REJECTION;
            else if (!strcmp(m, "greedy")) gp.verify = SPECDEC_VERIFY_GREEDY;
            else if (!strcmp(m, "match")) gp.verify = SPECDEC_VERIFY_MATCH;
            else BAD_VALUE();
        } else if (!strcmp(a, "--backend")) {
            NEED_ARG();
            const char *b = argv[++i];
            if (!strcmp(b, "auto")) ep.backend = SPECDEC_BACKEND_AUTO;
            else if (!strcmp(b, "cpu")) ep.backend = SPECDEC_BACKEND_CPU;
            else if (!strcmp(b, "cuda")) ep.backend = SPECDEC_BACKEND_CUDA;
            else BAD_VALUE();
        } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            NEED_ARG();
            if (parse_int(argv[++i], 0, INT32_MAX, &v)) BAD_VALUE();
            ep.n_ctx = (int32_t)v;
        } else if (!strcmp(a, "--ignore-eos")) {
            gp.ignore_eos = 1;
        } else if (!strcmp(a, "--stop")) {
            NEED_ARG();
            stops[n_stops++] = argv[++i];
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else {
            fprintf(stderr, "specdec generate: unknown option '%s'\n", a);
            goto usage;
        }
    }
#undef NEED_ARG
#undef BAD_VALUE
    if (!prompt) {
        fprintf(stderr, "specdec generate: -p PROMPT is required\n");
        goto usage;
    }
    if (!target_dir) {
        const char *dir = cli_bundled_models_dir();
        if (!dir) {
            fprintf(stderr,
                    "specdec generate: no -m given and the bundled model pair (models/kjv-target, models/kjv-draft) "
                    "is not present in the source tree or the installed share/specdec/models; pass -m TARGET_DIR\n");
            free(stops);
            return 1;
        }
        snprintf(bundled_t, sizeof bundled_t, "%s/kjv-target", dir);
        snprintf(bundled_d, sizeof bundled_d, "%s/kjv-draft", dir);
        target_dir = bundled_t;
        if (!draft_dir) draft_dir = bundled_d;
    }

    int rc = 1;
    specdec_model *target = NULL, *draft = NULL;
    specdec_tokenizer *tok = NULL;
    specdec_engine *eng = NULL;
    int32_t *ids = NULL, *out = NULL;
    gen_out go;
    memset(&go, 0, sizeof go);
    go.json = json;
    specdec_status st;
    specdec_model_params mp = specdec_model_default_params();

    if ((st = specdec_model_load(target_dir, &mp, &target)) != SPECDEC_OK) {
        rc = fail("loading the target model", st, specdec_last_error());
        goto done;
    }
    if (draft_dir && (st = specdec_model_load(draft_dir, &mp, &draft)) != SPECDEC_OK) {
        rc = fail("loading the draft model", st, specdec_last_error());
        goto done;
    }
    if ((st = specdec_tokenizer_load(target_dir, &tok)) != SPECDEC_OK) {
        rc = fail("loading the tokenizer", st, specdec_last_error());
        goto done;
    }
    int32_t n_ids = 0, cap_ids = 256;
    for (;;) {
        ids = malloc((size_t)cap_ids * sizeof *ids);
        if (!ids) {
            rc = fail("encoding the prompt", SPECDEC_ERR_OUT_OF_MEMORY, "");
            goto done;
        }
        st = specdec_tokenize(tok, prompt, strlen(prompt), 1, ids, cap_ids, &n_ids);
        if (st != SPECDEC_ERR_BUFFER_TOO_SMALL || n_ids <= cap_ids) break;
        free(ids);
        ids = NULL;
        cap_ids = n_ids;
    }
    if (st != SPECDEC_OK) {
        rc = fail("encoding the prompt", st, specdec_tokenizer_last_error(tok));
        goto done;
    }
    if ((st = specdec_engine_create(target, draft, &ep, &eng)) != SPECDEC_OK) {
        rc = fail("creating the engine", st, specdec_last_error());
        goto done;
    }
    int64_t room = (int64_t)specdec_engine_n_ctx(eng) - n_ids;
    int32_t cap_out = (int32_t)(gp.n_predict > 0 && gp.n_predict < room ? gp.n_predict : room > 0 ? room : 1);
    out = malloc((size_t)cap_out * sizeof *out);
    if (!out) {
        rc = fail("allocating the output", SPECDEC_ERR_OUT_OF_MEMORY, "");
        goto done;
    }
    gp.tokenizer = tok;
    gp.stop_strings = n_stops ? stops : NULL;
    gp.n_stop_strings = n_stops;
    gp.callback = on_token;
    gp.user_data = &go;
    int32_t n_out = 0;
    specdec_stats stats;
    memset(&stats, 0, sizeof stats);
    st = specdec_generate(eng, ids, n_ids, &gp, out, cap_out, &n_out, &stats);
    if (go.oom) {
        rc = fail("collecting the text", SPECDEC_ERR_OUT_OF_MEMORY, "");
        goto done;
    }
    if (st != SPECDEC_OK) {
        if (!json) fputc('\n', stdout);
        rc = fail("generating", st, specdec_engine_last_error(eng));
        goto done;
    }

    const int tree = gp.tree_width[0] != 0 || gp.draft_nodes > 0;
    const int spec = draft != NULL && (gp.n_draft > 0 || tree);
    specdec_verify_mode vm = gp.verify;
    if (vm == SPECDEC_VERIFY_AUTO) vm = gp.temperature == 0.0f ? SPECDEC_VERIFY_GREEDY : SPECDEC_VERIFY_REJECTION;
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "text", go.text ? go.text : "");
        cJSON *jt = cJSON_AddArrayToObject(root, "tokens");
        for (int32_t i = 0; i < n_out; i++) cJSON_AddItemToArray(jt, cJSON_CreateNumber(out[i]));
        cJSON *jp = cJSON_AddArrayToObject(root, "prompt_tokens");
        for (int32_t i = 0; i < n_ids; i++) cJSON_AddItemToArray(jp, cJSON_CreateNumber(ids[i]));
        cJSON *js = cJSON_AddObjectToObject(root, "stats");
        cJSON_AddNumberToObject(js, "n_prompt", (double)stats.n_prompt);
        cJSON_AddNumberToObject(js, "n_generated", (double)stats.n_generated);
        cJSON_AddNumberToObject(js, "n_rounds", (double)stats.n_rounds);
        cJSON_AddNumberToObject(js, "n_drafted", (double)stats.n_drafted);
        cJSON_AddNumberToObject(js, "n_accepted", (double)stats.n_accepted);
        cJSON_AddNumberToObject(js, "acceptance_rate", stats.acceptance_rate);
        cJSON_AddNumberToObject(js, "tokens_per_round", stats.tokens_per_round);
        cJSON_AddNumberToObject(js, "t_prefill_s", stats.t_prefill_s);
        cJSON_AddNumberToObject(js, "t_draft_s", stats.t_draft_s);
        cJSON_AddNumberToObject(js, "t_target_s", stats.t_target_s);
        cJSON_AddNumberToObject(js, "t_verify_s", stats.t_verify_s);
        cJSON_AddNumberToObject(js, "t_total_s", stats.t_total_s);
        cJSON_AddNumberToObject(js, "tokens_per_second", stats.tokens_per_second);
        cJSON_AddNumberToObject(js, "final_n_draft", stats.final_n_draft);
        cJSON_AddStringToObject(js, "stop_reason", stop_name(stats.stop_reason));
        cJSON_AddStringToObject(js, "backend", backend_name(specdec_engine_backend(eng)));
        print_tree_stats(&stats, js);
        cJSON *jq = cJSON_AddObjectToObject(root, "params");
        cJSON_AddStringToObject(jq, "model", target_dir);
        if (draft_dir) cJSON_AddStringToObject(jq, "draft_model", draft_dir);
        else cJSON_AddNullToObject(jq, "draft_model");
        cJSON_AddStringToObject(jq, "prompt", prompt);
        cJSON_AddNumberToObject(jq, "n_predict", gp.n_predict);
        cJSON_AddNumberToObject(jq, "temperature", gp.temperature);
        cJSON_AddNumberToObject(jq, "top_k", gp.top_k);
        cJSON_AddNumberToObject(jq, "top_p", gp.top_p);
        cJSON_AddNumberToObject(jq, "min_p", gp.min_p);
        cJSON_AddNumberToObject(jq, "seed", (double)gp.seed);
        cJSON_AddNumberToObject(jq, "n_draft", spec ? gp.n_draft : 0);
        cJSON_AddBoolToObject(jq, "adaptive_draft", gp.adaptive_draft != 0);
        cJSON *jtw = cJSON_AddArrayToObject(jq, "tree");
        for (int d = 0; d < SPECDEC_MAX_DRAFT && gp.tree_width[d]; d++)
            cJSON_AddItemToArray(jtw, cJSON_CreateNumber(gp.tree_width[d]));
        cJSON_AddNumberToObject(jq, "draft_nodes", gp.draft_nodes);
        cJSON_AddStringToObject(jq, "verify", verify_name(vm));
        cJSON_AddStringToObject(jq, "backend", backend_name(ep.backend));
        cJSON_AddNumberToObject(jq, "n_ctx", specdec_engine_n_ctx(eng));
        cJSON_AddBoolToObject(jq, "ignore_eos", gp.ignore_eos != 0);
        cJSON *jstop = cJSON_AddArrayToObject(jq, "stop");
        for (int i = 0; i < n_stops; i++) cJSON_AddItemToArray(jstop, cJSON_CreateString(stops[i]));
        char *s = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        if (!s) {
            rc = fail("printing JSON", SPECDEC_ERR_OUT_OF_MEMORY, "");
            goto done;
        }
        printf("%s\n", s);
        cJSON_free(s);
    } else {
        fputc('\n', stdout);
        fflush(stdout);
        fprintf(stderr, "\n--- specdec: backend %s, %s", backend_name(specdec_engine_backend(eng)),
                spec ? "speculative" : "plain decoding");
        if (spec)
            fprintf(stderr, ", verify %s, γ %d%s (final %d)", verify_name(vm), (int)gp.n_draft,
                    gp.adaptive_draft ? " adaptive" : "", (int)stats.final_n_draft);
        fprintf(stderr, "\n    prompt %lld tokens, generated %lld tokens in %lld rounds (%.2f tokens/round), stop: %s\n",
                (long long)stats.n_prompt, (long long)stats.n_generated, (long long)stats.n_rounds,
                stats.tokens_per_round, stop_name(stats.stop_reason));
        if (spec)
            fprintf(stderr, "    drafted %lld, accepted %lld (acceptance rate %.1f%%)\n", (long long)stats.n_drafted,
                    (long long)stats.n_accepted, 100.0 * stats.acceptance_rate);
        if (spec) print_tree_stats(&stats, NULL);
        fprintf(stderr,
                "    time: prefill %.3f s, draft %.3f s, target %.3f s, verify %.3f s, total %.3f s; %.2f tokens/s\n",
                stats.t_prefill_s, stats.t_draft_s, stats.t_target_s, stats.t_verify_s, stats.t_total_s,
                stats.tokens_per_second);
    }
    rc = 0;

done:
    specdec_engine_free(eng);
    specdec_tokenizer_free(tok);
    specdec_model_free(draft);
    specdec_model_free(target);
    free(ids);
    free(out);
    free(go.text);
    free(stops);
    return rc;

usage:
    gen_usage(stderr);
    free(stops);
    return 2;
}

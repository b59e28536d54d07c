/* cli_stats.c — the statistics of a generation as the specdec program reports them:
 * JSON members named exactly as the specdec_stats fields (generate --json, batch --json;
 * the server's `speculative` object uses the same names, tests/cli/test_cli_stats.py
 * checks all three against include/specdec.h), and the text report on stderr. Also the
 * Ctrl-C flag: an interrupted run still prints its statistics, then exits 130. */
#define _POSIX_C_SOURCE 200809L /* sigaction */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"

static volatile sig_atomic_t cli_sigint_seen;

static void cli_on_sigint(int sig) {
    (void)sig;
    cli_sigint_seen = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends the process at once */
}

void cli_sigint_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = cli_on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

int cli_interrupted(void) { return cli_sigint_seen != 0; }

/* The deepest position any round drafted (the length of the *_at_pos arrays written). */
static int cli_stats_depth(const specdec_stats *s) {
    int d = 0;
    while (d < SPECDEC_MAX_DRAFT && s->n_drafted_at_pos[d] > 0) d++;
    return d;
}

static int cli_json_i64_array(cJSON *obj, const char *name, const int64_t *v, int n) {
    cJSON *a = cJSON_AddArrayToObject(obj, name);
    for (int i = 0; a && i < n; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]))) return -1;
    return a ? 0 : -1;
}

int cli_stats_json(cJSON *obj, const specdec_stats *s) {
    const struct { const char *name; double v; } num[] = {
        {"n_prompt", (double)s->n_prompt}, {"n_generated", (double)s->n_generated},
        {"n_rounds", (double)s->n_rounds}, {"n_drafted", (double)s->n_drafted},
        {"n_accepted", (double)s->n_accepted}, {"acceptance_rate", s->acceptance_rate},
        {"tokens_per_round", s->tokens_per_round}, {"t_prefill_s", s->t_prefill_s},
        {"t_draft_s", s->t_draft_s}, {"t_target_s", s->t_target_s}, {"t_verify_s", s->t_verify_s},
        {"t_total_s", s->t_total_s}, {"tokens_per_second", s->tokens_per_second},
        {"final_n_draft", s->final_n_draft}, {"n_draft_rounds", (double)s->n_draft_rounds},
        {"mean_accepted_length", s->mean_accepted_length}, {"nodes_per_round", s->nodes_per_round},
        {"t_load_s", s->t_load_s}, {"t_first_token_s", s->t_first_token_s},
        {"prompt_tokens_per_second", s->prompt_tokens_per_second},
        {"n_target_passes", (double)s->n_target_passes}, {"tokens_per_target_pass", s->tokens_per_target_pass},
        {"n_draft", s->n_draft}, {"adaptive_draft", s->adaptive_draft}, {"draft_nodes", s->draft_nodes},
        {"n_cached_prompt", (double)s->n_cached_prompt}, {"n_forced", (double)s->n_forced},
        {"n_preemptions", (double)s->n_preemptions}};
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++)
        if (!cJSON_AddNumberToObject(obj, num[i].name, num[i].v)) return -1;
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed); /* exact: a double would round it */
    if (!cJSON_AddRawToObject(obj, "seed", seed)) return -1;
    if (!cJSON_AddStringToObject(obj, "stop_reason", specdec_stop_reason_name(s->stop_reason)) ||
        !cJSON_AddStringToObject(obj, "draft_method", specdec_draft_method_name(s->draft_method)) ||
        !cJSON_AddStringToObject(obj, "verify", specdec_verify_mode_name(s->verify)))
        return -1;
    int64_t w[SPECDEC_MAX_DRAFT];
    int nw = 0;
    while (nw < SPECDEC_MAX_DRAFT && s->tree_width[nw]) w[nw] = s->tree_width[nw], nw++;
    const int depth = cli_stats_depth(s);
    if (cli_json_i64_array(obj, "tree_width", w, nw) ||
        cli_json_i64_array(obj, "n_drafted_at_pos", s->n_drafted_at_pos, depth) ||
        cli_json_i64_array(obj, "n_accepted_at_pos", s->n_accepted_at_pos, depth))
        return -1;
    cJSON *a = cJSON_AddArrayToObject(obj, "acceptance_at_pos");
    for (int i = 0; a && i < depth; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(s->acceptance_at_pos[i]))) return -1;
    return a ? 0 : -1;
}

/* "γ 4", "γ 4 adaptive (final 6)", "tree 4,2,1", "tree 4,2,1, 12 nodes best-first". */
static void cli_stats_drafter(FILE *f, const specdec_stats *s) {
    if (s->tree_width[0] || s->draft_nodes) {
        fprintf(f, "tree ");
        for (int d = 0; d < SPECDEC_MAX_DRAFT && s->tree_width[d]; d++) fprintf(f, "%s%d", d ? "," : "", s->tree_width[d]);
        if (!s->tree_width[0]) fprintf(f, "(any shape)");
        if (s->draft_nodes) fprintf(f, ", %d nodes best-first", (int)s->draft_nodes);
    } else {
        fprintf(f, "γ %d", (int)s->n_draft);
        if (s->adaptive_draft) fprintf(f, " adaptive (final %d)", (int)s->final_n_draft);
    }
}

static void cli_stats_acceptance(FILE *f, const specdec_stats *s, int tree) {
    const int depth = cli_stats_depth(s);
    if (tree)
        fprintf(f, "    tree: %.1f nodes verified per round, %.2f accepted per round (mean accepted length); "
                   "acceptance by depth:", s->nodes_per_round, s->mean_accepted_length);
    else
        fprintf(f, "    drafted %lld, accepted %lld (acceptance rate %.1f%%), mean accepted length %.2f; "
                   "acceptance by position:", (long long)s->n_drafted, (long long)s->n_accepted,
                100.0 * s->acceptance_rate, s->mean_accepted_length);
    for (int i = 0; i < depth; i++) fprintf(f, " %.2f", s->acceptance_at_pos[i]);
    if (tree)
        fprintf(f, "\n    drafted %lld nodes, accepted %lld: node acceptance %.1f%% (accepted path / verified nodes)",
                (long long)s->n_drafted, (long long)s->n_accepted, 100.0 * s->acceptance_rate);
    fputc('\n', f);
}

void cli_stats_print(FILE *f, const specdec_stats *s, const char *backend, const char *stop) {
    const int spec = s->draft_method != SPECDEC_DRAFT_NONE && s->draft_method != SPECDEC_DRAFT_AUTO;
    const int tree = s->tree_width[0] || s->draft_nodes;
    fprintf(f, "\n--- specdec: backend %s, ", backend);
    if (spec) {
        fprintf(f, "speculative (%s draft, ", specdec_draft_method_name(s->draft_method));
        cli_stats_drafter(f, s);
        fprintf(f, ", verify %s)", specdec_verify_mode_name(s->verify));
    } else {
        fprintf(f, "plain decoding (verify %s)", specdec_verify_mode_name(s->verify));
    }
    fprintf(f, ", seed %llu\n", (unsigned long long)s->seed);
    fprintf(f, "    load %.3f s; prompt %lld tokens in %.3f s (%.1f tokens/s); first token after %.3f s\n", s->t_load_s,
            (long long)s->n_prompt, s->t_prefill_s, s->prompt_tokens_per_second, s->t_first_token_s);
    fprintf(f, "    generated %lld tokens in %lld target passes: %.2f tokens per target pass (plain decoding: 1; "
               "the bound on the speedup), stop: %s\n",
            (long long)s->n_generated, (long long)s->n_target_passes, s->tokens_per_target_pass,
            stop ? stop : specdec_stop_reason_name(s->stop_reason));
    if (spec) cli_stats_acceptance(f, s, tree);
    fprintf(f, "    decode %.2f tokens/s; time: prefill %.3f s, draft %.3f s, target %.3f s, verify %.3f s, total %.3f s\n",
            s->tokens_per_second, s->t_prefill_s, s->t_draft_s, s->t_target_s, s->t_verify_s, s->t_total_s);
}

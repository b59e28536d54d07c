/* sd_server_response.c — response bodies in OpenAI's shapes: text_completion,
 * chat.completion, their stream chunks (server-sent events), errors, the model list.
 * The speculative statistics travel in the extension field "speculative". Written
 * with sd_buf (JSON strings escaped by sd_buf_json_str, so NUL bytes survive). */
#include <math.h>
#include <string.h>

#include "sd_server_internal.h"

static double sd_finite(double x) { return isfinite(x) ? x : 0.0; }

static void sd_head(sd_buf *b, const sd_server *srv, const char *object, const char *id, long created) {
    sd_buf_puts(b, "{\"id\":");
    sd_buf_json_str(b, id, strlen(id));
    sd_buf_printf(b, ",\"object\":\"%s\",\"created\":%ld,\"model\":", object, created);
    sd_buf_json_str(b, srv->model_id, strlen(srv->model_id));
}

static void sd_usage(sd_buf *b, const sd_gen_result *r) {
    sd_buf_printf(b, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}", (int)r->n_prompt,
                  (int)r->n_completion, (int)(r->n_prompt + r->n_completion));
}

/* "name":[v0,v1,...], the first n of v (doubles printed as %.6g, counts as integers). */
static void sd_json_array(sd_buf *b, const char *name, const int64_t *iv, const double *dv, int n) {
    sd_buf_printf(b, "\"%s\":[", name);
    for (int i = 0; i < n; i++)
        if (iv) sd_buf_printf(b, "%s%lld", i ? "," : "", (long long)iv[i]);
        else sd_buf_printf(b, "%s%.6g", i ? "," : "", sd_finite(dv[i]));
    sd_buf_puts(b, "],");
}

/* The extension field "speculative": every specdec_stats field under its C name with the
 * CLI's values (tools/cli/cli_stats.c; tests/cli/test_cli_stats.py checks both against
 * include/specdec.h), plus the server's own: backend and the tree asked for; stop_reason
 * is the library's name ("n_predict", "eos", ...), or for a request cut short (finish
 * "abort") the server's reason ("shutdown", "timeout", "disconnect"). */
static void sd_speculative(sd_buf *b, const sd_server *srv, const sd_gen_result *r) {
    const specdec_stats *s = r->stats;
    sd_buf_printf(b,
                  "\"speculative\":{\"backend\":\"%s\",\"n_prompt\":%lld,\"n_generated\":%lld,\"n_rounds\":%lld,"
                  "\"n_drafted\":%lld,\"n_accepted\":%lld,\"acceptance_rate\":%.6g,\"tokens_per_round\":%.6g,"
                  "\"t_prefill_s\":%.6g,\"t_draft_s\":%.6g,\"t_target_s\":%.6g,\"t_verify_s\":%.6g,\"t_total_s\":%.6g,"
                  "\"tokens_per_second\":%.6g,\"final_n_draft\":%d,\"n_draft_rounds\":%lld,"
                  "\"mean_accepted_length\":%.6g,\"nodes_per_round\":%.6g,",
                  srv->backend_name, (long long)s->n_prompt, (long long)s->n_generated, (long long)s->n_rounds,
                  (long long)s->n_drafted, (long long)s->n_accepted, sd_finite(s->acceptance_rate),
                  sd_finite(s->tokens_per_round), sd_finite(s->t_prefill_s), sd_finite(s->t_draft_s),
                  sd_finite(s->t_target_s), sd_finite(s->t_verify_s), sd_finite(s->t_total_s),
                  sd_finite(s->tokens_per_second), (int)s->final_n_draft, (long long)s->n_draft_rounds,
                  sd_finite(s->mean_accepted_length), sd_finite(s->nodes_per_round));
    sd_buf_printf(b,
                  "\"t_load_s\":%.6g,\"t_first_token_s\":%.6g,\"prompt_tokens_per_second\":%.6g,"
                  "\"n_target_passes\":%lld,\"tokens_per_target_pass\":%.6g,\"seed\":%llu,\"draft_method\":\"%s\","
                  "\"verify\":\"%s\",\"n_draft\":%d,\"adaptive_draft\":%d,\"draft_nodes\":%d,",
                  sd_finite(s->t_load_s), sd_finite(s->t_first_token_s), sd_finite(s->prompt_tokens_per_second),
                  (long long)s->n_target_passes, sd_finite(s->tokens_per_target_pass), (unsigned long long)s->seed,
                  specdec_draft_method_name(s->draft_method), specdec_verify_mode_name(r->verify), (int)s->n_draft,
                  (int)s->adaptive_draft, (int)s->draft_nodes);
    int64_t w[SPECDEC_MAX_DRAFT];
    int nw = 0, depth = 0;
    while (nw < SPECDEC_MAX_DRAFT && s->tree_width[nw]) w[nw] = s->tree_width[nw], nw++;
    while (depth < SPECDEC_MAX_DRAFT && s->n_drafted_at_pos[depth] > 0) depth++;
    sd_json_array(b, "tree_width", w, NULL, nw);
    sd_json_array(b, "n_drafted_at_pos", s->n_drafted_at_pos, NULL, depth);
    sd_json_array(b, "n_accepted_at_pos", s->n_accepted_at_pos, NULL, depth);
    sd_json_array(b, "acceptance_at_pos", NULL, s->acceptance_at_pos, depth);
    if (r->n_tree > 0 || r->draft_nodes > 0) { /* tree speculation: the shape asked for */
        sd_buf_puts(b, "\"tree\":[");
        for (int i = 0; i < r->n_tree; i++) sd_buf_printf(b, "%s%d", i ? "," : "", (int)r->tree[i]);
        sd_buf_puts(b, "],");
    }
    const int cut = !strcmp(r->finish, "abort"); /* cancelled: the server says why */
    sd_buf_printf(b, "\"stop_reason\":\"%s\"}", cut ? r->stop_detail : specdec_stop_reason_name(s->stop_reason));
}

int sd_resp_completion(sd_buf *b, const sd_server *srv, int chat, const char *id, long created,
                       const sd_gen_result *r) {
    sd_head(b, srv, chat ? "chat.completion" : "text_completion", id, created);
    sd_buf_puts(b, ",\"choices\":[{\"index\":0,");
    if (chat) {
        sd_buf_puts(b, "\"message\":{\"role\":\"assistant\",\"content\":");
        sd_buf_json_str(b, r->text, r->len);
        sd_buf_puts(b, "},");
    } else {
        sd_buf_puts(b, "\"text\":");
        sd_buf_json_str(b, r->text, r->len);
        sd_buf_puts(b, ",");
    }
    sd_buf_printf(b, "\"logprobs\":null,\"finish_reason\":\"%s\"}],", r->finish);
    sd_usage(b, r);
    sd_buf_puts(b, ",");
    sd_speculative(b, srv, r);
    return sd_buf_puts(b, "}");
}

int sd_resp_chunk(sd_buf *b, const sd_server *srv, int chat, const char *id, long created, const char *text,
                  size_t len, int chat_role, const sd_gen_result *r) {
    sd_buf_puts(b, "data: ");
    sd_head(b, srv, chat ? "chat.completion.chunk" : "text_completion", id, created);
    sd_buf_puts(b, ",\"choices\":[{\"index\":0,");
    if (chat) {
        sd_buf_puts(b, "\"delta\":{");
        if (chat_role) sd_buf_puts(b, "\"role\":\"assistant\",\"content\":\"\"");
        else if (!r) sd_buf_puts(b, "\"content\":"), sd_buf_json_str(b, text, len);
        sd_buf_puts(b, "},");
    } else {
        sd_buf_puts(b, "\"text\":");
        sd_buf_json_str(b, text, len);
        sd_buf_puts(b, ",");
    }
    if (r) {
        sd_buf_printf(b, "\"logprobs\":null,\"finish_reason\":\"%s\"}],", r->finish);
        sd_speculative(b, srv, r);
        return sd_buf_puts(b, "}\n\n");
    }
    return sd_buf_puts(b, "\"logprobs\":null,\"finish_reason\":null}]}\n\n");
}

int sd_resp_usage_chunk(sd_buf *b, const sd_server *srv, int chat, const char *id, long created,
                        const sd_gen_result *r) {
    sd_buf_puts(b, "data: ");
    sd_head(b, srv, chat ? "chat.completion.chunk" : "text_completion", id, created);
    sd_buf_puts(b, ",\"choices\":[],");
    sd_usage(b, r);
    return sd_buf_puts(b, "}\n\n");
}

int sd_resp_error_json(sd_buf *b, const sd_api_error *e) {
    sd_buf_puts(b, "{\"error\":{\"message\":");
    sd_buf_json_str(b, e->message, strlen(e->message));
    sd_buf_puts(b, ",\"type\":");
    sd_buf_json_str(b, e->type ? e->type : "server_error", strlen(e->type ? e->type : "server_error"));
    sd_buf_puts(b, ",\"param\":");
    if (e->param[0]) sd_buf_json_str(b, e->param, strlen(e->param));
    else sd_buf_puts(b, "null");
    sd_buf_puts(b, ",\"code\":");
    if (e->code) sd_buf_json_str(b, e->code, strlen(e->code));
    else sd_buf_puts(b, "null");
    return sd_buf_puts(b, "}}");
}

int sd_resp_models(sd_buf *b, const sd_server *srv) {
    sd_buf_puts(b, "{\"object\":\"list\",\"data\":[{\"id\":");
    sd_buf_json_str(b, srv->model_id, strlen(srv->model_id));
    sd_buf_printf(b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"specdec\",\"meta\":{\"n_ctx\":%d,"
                  "\"n_vocab\":%d,\"backend\":\"%s\",\"speculative\":%s,\"parallel\":%d,\"chat_template\":",
                  (int)srv->n_ctx, (int)srv->n_vocab, srv->backend_name, srv->draft ? "true" : "false",
                  srv->cfg.parallel);
    if (srv->chat_family) sd_buf_json_str(b, srv->chat_family, strlen(srv->chat_family));
    else sd_buf_puts(b, "null"); /* a template of no family specdec renders */
    sd_buf_puts(b, "}}]}");
    return b->oom ? -1 : 0;
}

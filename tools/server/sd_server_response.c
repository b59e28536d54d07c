/* sd_server_response.c — response bodies in OpenAI's shapes: text_completion,
 * chat.completion, their stream chunks (server-sent events), errors, the model list.
 * The speculative statistics travel in the extension field "speculative". Written
 * with sd_buf (JSON strings escaped by sd_buf_json_str, so NUL bytes survive). */
#include <math.h>
#include <string.h>

#include "sd_server_internal.h"

static const char *sd_verify_name(specdec_verify_mode v) {
    switch (v) {
    case SPECDEC_VERIFY_REJECTION: return "rejection";
    case SPECDEC_VERIFY_GREEDY: return "greedy";
    case SPECDEC_VERIFY_MATCH: return "match";
    default: return "auto";
    }
}

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

static void sd_speculative(sd_buf *b, const sd_server *srv, const sd_gen_result *r) {
    const specdec_stats *s = r->stats;
    sd_buf_printf(b,
                  "\"speculative\":{\"backend\":\"%s\",\"method\":\"%s\",\"n_draft\":%d,\"verify\":\"%s\",\"rounds\":%lld,"
                  "\"drafted\":%lld,\"accepted\":%lld,\"acceptance_rate\":%.6g,\"tokens_per_round\":%.6g,"
                  "\"mean_accepted_length\":%.6g,\"nodes_per_round\":%.6g,\"tokens_per_second\":%.6g,",
                  srv->backend_name, sd_spec_method_name(s->draft_method), (int)r->n_draft, sd_verify_name(r->verify),
                  (long long)s->n_rounds,
                  (long long)s->n_drafted, (long long)s->n_accepted, sd_finite(s->acceptance_rate),
                  sd_finite(s->tokens_per_round), sd_finite(s->mean_accepted_length), sd_finite(s->nodes_per_round),
                  sd_finite(s->tokens_per_second));
    if (r->n_tree > 0 || r->draft_nodes > 0) { /* tree speculation: the shape asked for */
        sd_buf_puts(b, "\"tree\":[");
        for (int i = 0; i < r->n_tree; i++) sd_buf_printf(b, "%s%d", i ? "," : "", (int)r->tree[i]);
        sd_buf_printf(b, "],\"draft_nodes\":%d,", (int)r->draft_nodes);
    }
    sd_buf_printf(b, "\"stop_reason\":\"%s\"}", r->stop_detail);
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

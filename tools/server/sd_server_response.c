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

/* OpenAI's usage object; prompt_tokens_details.cached_tokens: the prompt tokens whose KV came
 * from the prefix cache (OpenAI's prompt caching field; vLLM fills it with
 * --enable-prompt-tokens-details, this server always). */
static void sd_usage(sd_buf *b, const sd_gen_result *r) {
    sd_buf_printf(b,
                  "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
                  "\"prompt_tokens_details\":{\"cached_tokens\":%d}",
                  (int)r->n_prompt, (int)r->n_completion, (int)(r->n_prompt + r->n_completion), (int)r->n_cached);
    /* chat with --reasoning-parser: OpenAI's completion_tokens_details.reasoning_tokens */
    if (r->has_reasoning) sd_buf_printf(b, ",\"completion_tokens_details\":{\"reasoning_tokens\":%d}", (int)r->n_reasoning);
    sd_buf_puts(b, "}");
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
                  "\"verify\":\"%s\",\"n_draft\":%d,\"adaptive_draft\":%d,\"draft_nodes\":%d,\"n_cached_prompt\":%lld,"
                  "\"n_forced\":%lld,\"n_preemptions\":%lld,",
                  sd_finite(s->t_load_s), sd_finite(s->t_first_token_s), sd_finite(s->prompt_tokens_per_second),
                  (long long)s->n_target_passes, sd_finite(s->tokens_per_target_pass), (unsigned long long)s->seed,
                  specdec_draft_method_name(s->draft_method), specdec_verify_mode_name(r->verify), (int)s->n_draft,
                  (int)s->adaptive_draft, (int)s->draft_nodes, (long long)s->n_cached_prompt, (long long)s->n_forced,
                  (long long)s->n_preemptions);
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

/* ------------------------------------------------------------------------- */
/* logprobs                                                                   */
/* ------------------------------------------------------------------------- */
#define SD_TOK_BYTES 256                  /* a token's bytes shown (longer ones are cut) */
#define SD_TOK_TEXT (3 * SD_TOK_BYTES + 1) /* its text: each byte may become U+FFFD */

/* GPT-2's byte-level alphabet drawn back to its byte: the printable bytes stand for
 * themselves, the other 68 (0..32, 127..160, 173, in order) for U+0100..U+0143. -1: none. */
static int sd_byte_level(unsigned c) {
    if ((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)) return (int)c;
    if (c < 256 || c > 323) return -1;
    unsigned n = c - 256;
    return n <= 32 ? (int)n : n <= 66 ? (int)(127 + n - 33) : 173;
}

static int sd_hex(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                                                                          : -1;
}

/* The bytes a vocabulary piece stands for when it stands for bytes: "<0xHH>" (byte
 * fallback) or a piece of the byte-level alphabet. 0 when it is neither. */
static size_t sd_piece_bytes(const char *p, size_t n, unsigned char *out, size_t cap) {
    if (n == 6 && !memcmp(p, "<0x", 3) && p[5] == '>' && sd_hex(p[3]) >= 0 && sd_hex(p[4]) >= 0) {
        out[0] = (unsigned char)(sd_hex(p[3]) * 16 + sd_hex(p[4]));
        return 1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n && k < cap;) {
        unsigned char c = (unsigned char)p[i];
        unsigned cp = c;
        size_t l = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : 0; /* the alphabet is below U+0800 */
        if (!l || i + l > n || !sd_api_utf8_valid(p + i, l)) return 0;
        if (l == 2) cp = ((c & 0x1Fu) << 6) | ((unsigned char)p[i + 1] & 0x3Fu);
        int byte = sd_byte_level(cp);
        if (byte < 0) return 0;
        out[k++] = (unsigned char)byte;
        i += l;
    }
    return k;
}

/* s[0..n) with each maximal invalid subsequence replaced by U+FFFD, the rule of Python's
 * bytes.decode("utf-8", errors="replace"). out holds 3n + 1 bytes. */
static size_t sd_utf8_lossy(const unsigned char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 1;
        unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        size_t m = 1;
        while (c >= 0x80 && m < k && i + m < n && s[i + m] >= (m == 1 ? lo : 0x80) && s[i + m] <= (m == 1 ? hi : 0xBF))
            m++;
        if (c < 0x80 || (k > 1 && m == k)) {
            memcpy(out + o, s + i, m);
            o += m;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
        }
        i += m;
    }
    out[o] = '\0';
    return o;
}

static int sd_has_fffd(const char *s, size_t n) {
    for (size_t i = 0; i + 3 <= n; i++)
        if (!memcmp(s + i, "\xEF\xBF\xBD", 3)) return 1;
    return 0;
}

void sd_resp_token_text(const specdec_tokenizer *tok, int32_t id, char *text, size_t text_cap, size_t *text_len,
                        unsigned char *bytes, size_t bytes_cap, size_t *bytes_len) {
    size_t n = 0, m = 0;
    if (specdec_detokenize(tok, &id, 1, 0, text, text_cap, &n) != SPECDEC_OK) n = 0;
    text[n] = '\0';
    if (text_cap < 3 * bytes_cap + 1) n = 0; /* no room for the text of bytes_cap bytes */
    if (!sd_api_utf8_valid(text, n)) { /* part of a UTF-8 sequence, decoded as its raw bytes */
        *bytes_len = n < bytes_cap ? n : bytes_cap;
        memcpy(bytes, text, *bytes_len);
        *text_len = sd_utf8_lossy(bytes, *bytes_len, text);
        return;
    }
    char piece[SD_TOK_BYTES];
    /* decoded as U+FFFD (a decoder that replaces them): the raw bytes come from the piece */
    if (sd_has_fffd(text, n) &&
        specdec_token_to_piece(tok, id, piece, sizeof piece, &m) == SPECDEC_OK &&
        (m = sd_piece_bytes(piece, m, bytes, bytes_cap)) > 0 && !sd_api_utf8_valid((const char *)bytes, m)) {
        *bytes_len = m;
        *text_len = sd_utf8_lossy(bytes, m, text);
        return;
    }
    *text_len = n;
    *bytes_len = n < bytes_cap ? n : bytes_cap;
    memcpy(bytes, text, *bytes_len);
}

/* A logprob as JSON: -inf (and below) as -9999.0, as vLLM (JSON has no infinity). */
static void sd_lp_num(sd_buf *b, float x) {
    double d = x;
    sd_buf_printf(b, "%.9g", d >= -9999.0 ? d : -9999.0);
}

/* {"token": ..., "logprob": ..., "bytes": [...] (the closing brace left to the caller) */
static void sd_lp_chat_token(sd_buf *b, const sd_server *srv, int32_t id, float lp) {
    char text[SD_TOK_TEXT];
    unsigned char bytes[SD_TOK_BYTES];
    size_t tn, bn;
    sd_resp_token_text(srv->tok, id, text, sizeof text, &tn, bytes, sizeof bytes, &bn);
    sd_buf_puts(b, "{\"token\":");
    sd_buf_json_str(b, text, tn);
    sd_buf_puts(b, ",\"logprob\":");
    sd_lp_num(b, lp);
    sd_buf_puts(b, ",\"bytes\":[");
    for (size_t i = 0; i < bn; i++) sd_buf_printf(b, "%s%u", i ? "," : "", (unsigned)bytes[i]);
    sd_buf_puts(b, "]");
}

static void sd_lp_chat(sd_buf *b, const sd_server *srv, const sd_lp_span *lp) {
    sd_buf_puts(b, "{\"content\":[");
    for (int32_t k = 0; k < lp->n; k++) {
        const sd_lp_entry *e = &lp->e[k];
        if (k) sd_buf_puts(b, ",");
        sd_lp_chat_token(b, srv, e->token, e->logprob);
        sd_buf_puts(b, ",\"top_logprobs\":[");
        for (int32_t t = 0; t < e->n_top; t++) {
            if (t) sd_buf_puts(b, ",");
            sd_lp_chat_token(b, srv, e->top_tokens[t], e->top_logprobs[t]);
            sd_buf_puts(b, "}");
        }
        sd_buf_puts(b, "]}");
    }
    sd_buf_puts(b, "]}");
}

static void sd_lp_text(sd_buf *b, const sd_server *srv, int32_t id) {
    char text[SD_TOK_TEXT];
    unsigned char bytes[SD_TOK_BYTES];
    size_t tn, bn;
    sd_resp_token_text(srv->tok, id, text, sizeof text, &tn, bytes, sizeof bytes, &bn);
    sd_buf_json_str(b, text, tn);
}

/* Code points of the returned text before byte pos (cut to the returned length). */
static size_t sd_lp_offset(const sd_lp_span *lp, size_t pos) {
    sd_cp_cursor local = {0, 0}, *c = lp->cur && lp->cur->bytes <= pos ? lp->cur : &local;
    if (pos > lp->len) pos = lp->len;
    for (; c->bytes < pos; c->bytes++) c->cps += ((unsigned char)lp->text[c->bytes] & 0xC0) != 0x80;
    return c->cps;
}

/* One top_logprobs object: the first n_top of e's list, then the token itself when it is
 * not among them (up to n_top + 1 entries, as OpenAI and vLLM). */
static void sd_lp_top_dict(sd_buf *b, const sd_server *srv, const sd_lp_entry *e, int32_t n_top) {
    int in_top = 0;
    if (n_top > e->n_top) n_top = e->n_top;
    sd_buf_puts(b, "{");
    for (int32_t t = 0; t < n_top; t++) {
        in_top |= e->top_tokens[t] == e->token;
        sd_lp_text(b, srv, e->top_tokens[t]);
        sd_buf_puts(b, ":");
        sd_lp_num(b, e->top_logprobs[t]);
        sd_buf_puts(b, t + 1 < n_top || !in_top ? "," : "");
    }
    if (!in_top) sd_lp_text(b, srv, e->token), sd_buf_puts(b, ":"), sd_lp_num(b, e->logprob);
    sd_buf_puts(b, "}");
}

/* OpenAI's legacy shape, the echoed prompt's tokens first (the first with null entries). */
static void sd_lp_completion(sd_buf *b, const sd_server *srv, const sd_lp_span *lp) {
    const sd_lp_echo *ec = lp->echo;
    const int32_t np = ec ? ec->n : 0, n = np + lp->n;
    sd_buf_puts(b, "{\"tokens\":[");
    for (int32_t k = 0; k < n; k++) {
        if (k) sd_buf_puts(b, ",");
        sd_lp_text(b, srv, k < np ? ec->ids[k] : lp->e[k - np].token);
    }
    sd_buf_puts(b, "],\"token_logprobs\":[");
    for (int32_t k = 0; k < n; k++) {
        if (k) sd_buf_puts(b, ",");
        if (k == 0 && np) sd_buf_puts(b, "null");
        else sd_lp_num(b, k < np ? ec->e[k - 1].logprob : lp->e[k - np].logprob);
    }
    sd_buf_puts(b, "],\"top_logprobs\":[");
    for (int32_t k = 0; k < n; k++) {
        if (k) sd_buf_puts(b, ",");
        if (k == 0 && np) sd_buf_puts(b, "null");
        else if (k < np) sd_lp_top_dict(b, srv, &ec->e[k - 1], ec->n_top);
        else sd_lp_top_dict(b, srv, &lp->e[k - np], SPECDEC_MAX_TOP_LOGPROBS);
    }
    sd_buf_puts(b, "],\"text_offset\":[");
    const size_t base = lp->base;
    for (int32_t k = 0; k < n; k++) {
        const int32_t g = k - np; /* the generated token's index */
        size_t off = k < np ? ec->offset[k] : base + sd_lp_offset(lp, g ? lp->e[g - 1].end : lp->start);
        sd_buf_printf(b, "%s%zu", k ? "," : "", off);
    }
    sd_buf_puts(b, "]}");
}

/* vLLM's prompt_logprobs: [null, {"id": {"logprob", "rank", "decoded_token"}, ...}, ...], each
 * dict the prompt token (its own rank) then the top n_top others (rank = place in the list). */
static void sd_prompt_lp_write(sd_buf *b, const sd_server *srv, const sd_prompt_lp *p) {
    sd_buf_puts(b, "[null");
    for (int32_t k = 1; k < p->n; k++) {
        const sd_lp_entry *e = &p->e[k - 1];
        int32_t n_top = p->n_top < e->n_top ? p->n_top : e->n_top;
        sd_buf_printf(b, ",{\"%d\":{\"logprob\":", (int)e->token);
        sd_lp_num(b, e->logprob);
        sd_buf_printf(b, ",\"rank\":%d,\"decoded_token\":", (int)e->rank);
        sd_lp_text(b, srv, e->token);
        sd_buf_puts(b, "}");
        for (int32_t t = 0; t < n_top; t++) {
            if (e->top_tokens[t] == e->token) continue;
            sd_buf_printf(b, ",\"%d\":{\"logprob\":", (int)e->top_tokens[t]);
            sd_lp_num(b, e->top_logprobs[t]);
            sd_buf_printf(b, ",\"rank\":%d,\"decoded_token\":", (int)t + 1);
            sd_lp_text(b, srv, e->top_tokens[t]);
            sd_buf_puts(b, "}");
        }
        sd_buf_puts(b, "}");
    }
    sd_buf_puts(b, "]");
}

int sd_resp_logprobs(sd_buf *b, const sd_server *srv, int chat, const sd_lp_span *lp) {
    if (!lp) return sd_buf_puts(b, "null");
    if (chat) sd_lp_chat(b, srv, lp);
    else sd_lp_completion(b, srv, lp);
    return b->oom ? -1 : 0;
}

/* The JSON string of a[0..an) followed by t[0..tn) (a may be NULL). */
static void sd_json_str2(sd_buf *b, const char *a, size_t an, const char *t, size_t tn) {
    sd_buf_puts(b, "\"");
    if (a) sd_buf_json_chars(b, a, an);
    sd_buf_json_chars(b, t, tn);
    sd_buf_puts(b, "\"");
}

/* ,"finish_reason":...,"stop_reason":... of a choice that ended (vLLM's stop_reason: the
 * stop_token_ids id as an integer, the stop string, or null). */
static void sd_finish_fields(sd_buf *b, const sd_gen_result *r) {
    sd_buf_printf(b, ",\"finish_reason\":\"%s\",\"stop_reason\":", r->finish);
    if (r->stop_by_token) sd_buf_printf(b, "%d", (int)r->stop_token);
    else if (r->stop_str) sd_buf_json_str(b, r->stop_str, strlen(r->stop_str));
    else sd_buf_puts(b, "null");
}

/* A chat message's content with tool calling (text[0..len): the content part of the output):
 * content (null when the parser says so), then tool_calls, as vLLM writes them; *finish "tool_calls" when "auto" / "required" parsed calls
 * ("required" only after a "stop"). */
static void sd_resp_tool_message(sd_buf *b, const sd_gen_result *r, const char *text, size_t len,
                                 const char **finish) {
    sd_tool_result t;
    sd_tools_final(r->tools, text, len, &t);
    if (t.content) sd_buf_json_str(b, t.content, t.content_len);
    else sd_buf_puts(b, "null");
    sd_buf_puts(b, ",\"tool_calls\":[");
    for (int i = 0; i < t.n_calls; i++) {
        sd_buf_puts(b, i ? ",{\"id\":" : "{\"id\":");
        sd_buf_json_str(b, t.calls[i].id, strlen(t.calls[i].id));
        sd_buf_puts(b, ",\"type\":\"function\",\"function\":{\"name\":");
        sd_buf_json_str(b, t.calls[i].name, strlen(t.calls[i].name));
        sd_buf_puts(b, ",\"arguments\":");
        sd_buf_json_str(b, t.calls[i].args, strlen(t.calls[i].args));
        sd_buf_puts(b, "}}");
    }
    sd_buf_puts(b, "]");
    if (t.called && (r->tools->choice == SD_TC_AUTO || !strcmp(r->finish, "stop"))) *finish = "tool_calls";
    sd_tools_result_free(&t);
}

/* One choice of a whole response; its "speculative" object inside it when spec. */
static void sd_resp_choice(sd_buf *b, const sd_server *srv, int chat, int index, const sd_gen_result *r, int spec) {
    sd_buf_printf(b, "{\"index\":%d,", index);
    const char *finish = r->finish;
    if (chat) {
        /* with a reasoning parser: the thinking in "reasoning" (vLLM's current field) and
           "reasoning_content" (its former one), the content (and tool calls) from the rest */
        sd_reasoning_split sp = {0, 0, 0, r->len, 0, 1};
        if (r->rsn) sd_reasoning_whole(r->rsn, r->text, r->len, &sp);
        sd_buf_puts(b, "\"message\":{\"role\":\"assistant\",");
        if (r->rsn)
            for (int k = 0; k < 2; k++) {
                sd_buf_puts(b, k ? "\"reasoning_content\":" : "\"reasoning\":");
                if (sp.has_r) sd_buf_json_str(b, r->text + sp.r_off, sp.r_len);
                else sd_buf_puts(b, "null");
                sd_buf_puts(b, ",");
            }
        sd_buf_puts(b, "\"content\":");
        if (r->tools) sd_resp_tool_message(b, r, sp.has_c ? r->text + sp.c_off : "", sp.has_c ? sp.c_len : 0, &finish);
        else if (sp.has_c) sd_buf_json_str(b, r->text + sp.c_off, sp.c_len);
        else sd_buf_puts(b, "null");
        sd_buf_puts(b, "},");
    } else {
        sd_buf_puts(b, "\"text\":");
        sd_json_str2(b, r->echo, r->echo_len, r->text, r->len);
        sd_buf_puts(b, ",");
    }
    sd_buf_puts(b, "\"logprobs\":");
    sd_resp_logprobs(b, srv, chat, r->lp);
    sd_gen_result fr = *r;
    fr.finish = finish;
    sd_finish_fields(b, &fr);
    if (!chat && r->prompt_lp) {
        sd_buf_puts(b, ",\"prompt_logprobs\":");
        sd_prompt_lp_write(b, srv, r->prompt_lp);
    }
    if (spec) {
        sd_buf_puts(b, ",");
        sd_speculative(b, srv, r);
    }
    sd_buf_puts(b, "}");
}

int sd_resp_completion(sd_buf *b, const sd_server *srv, int chat, const char *id, long created,
                       const sd_gen_result *r, int n_choices, const sd_gen_result *usage) {
    sd_head(b, srv, chat ? "chat.completion" : "text_completion", id, created);
    sd_buf_puts(b, ",\"choices\":[");
    for (int i = 0; i < n_choices; i++) {
        if (i) sd_buf_puts(b, ",");
        sd_resp_choice(b, srv, chat, i, &r[i], n_choices > 1);
    }
    sd_buf_puts(b, "],");
    if (chat && n_choices > 0 && r[0].prompt_lp) { /* vLLM: chat's at the response level */
        sd_buf_puts(b, "\"prompt_logprobs\":");
        sd_prompt_lp_write(b, srv, r[0].prompt_lp);
        sd_buf_puts(b, ",");
    }
    sd_usage(b, usage);
    if (n_choices == 1) { /* one choice: its statistics at the top level (the shape before n > 1) */
        sd_buf_puts(b, ",");
        sd_speculative(b, srv, &r[0]);
    }
    return sd_buf_puts(b, "}");
}

int sd_resp_chunk(sd_buf *b, const sd_server *srv, int chat, const char *id, long created, int index,
                  const char *text, size_t len, int chat_role, const sd_gen_result *r, const sd_lp_span *lp) {
    sd_buf_puts(b, "data: ");
    sd_head(b, srv, chat ? "chat.completion.chunk" : "text_completion", id, created);
    sd_buf_printf(b, ",\"choices\":[{\"index\":%d,", index);
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
    sd_buf_puts(b, "\"logprobs\":");
    sd_resp_logprobs(b, srv, chat, lp);
    if (r) {
        sd_finish_fields(b, r);
        sd_buf_puts(b, "}],");
        sd_speculative(b, srv, r);
        return sd_buf_puts(b, "}\n\n");
    }
    return sd_buf_puts(b, ",\"finish_reason\":null}]}\n\n");
}

int sd_resp_delta_chunk(sd_buf *b, const sd_server *srv, const char *id, long created, int index, const char *delta,
                        size_t n, const sd_lp_span *lp) {
    sd_buf_puts(b, "data: ");
    sd_head(b, srv, "chat.completion.chunk", id, created);
    sd_buf_printf(b, ",\"choices\":[{\"index\":%d,\"delta\":", index);
    sd_buf_append(b, delta, n);
    sd_buf_puts(b, ",\"logprobs\":");
    sd_resp_logprobs(b, srv, 1, lp);
    return sd_buf_puts(b, ",\"finish_reason\":null}]}\n\n");
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
    /* vLLM's model card fields: root (the model as given), parent (null), max_model_len */
    sd_buf_puts(b, ",\"root\":");
    sd_buf_json_str(b, srv->cfg.target_dir ? srv->cfg.target_dir : srv->model_id,
                    strlen(srv->cfg.target_dir ? srv->cfg.target_dir : srv->model_id));
    sd_buf_printf(b, ",\"parent\":null,\"max_model_len\":%d", (int)srv->n_ctx);
    sd_buf_printf(b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"specdec\",\"meta\":{\"n_ctx\":%d,"
                  "\"n_vocab\":%d,\"backend\":\"%s\",\"speculative\":%s,\"parallel\":%d,\"chat_template\":",
                  (int)srv->n_ctx, (int)srv->n_vocab, srv->backend_name, srv->draft ? "true" : "false",
                  srv->cfg.parallel);
    if (srv->chat_family) sd_buf_json_str(b, srv->chat_family, strlen(srv->chat_family));
    else sd_buf_puts(b, "null"); /* a template of no family specdec renders */
    sd_buf_puts(b, "}}]}");
    return b->oom ? -1 : 0;
}

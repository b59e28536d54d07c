/* cmd_tokenize.c — `specdec tokenize -m DIR -p TEXT [--pieces] [--no-special]`:
 * prints the ids of TEXT (space-separated), or with --pieces one "id<TAB>piece" line
 * per token, using DIR/tokenizer.json. -f FILE reads the text from a file instead.
 * --chat FILE.json renders a conversation (OpenAI-format messages, tools, chat_template_kwargs:
 * specdec_chat_apply_json) with the model's chat template (as the server's /v1/chat/completions
 * does) and prints its ids, or with --text the rendered prompt itself, byte for byte, so a user can check a template against transformers' apply_chat_template.
 * The file is read as POST /tokenize reads its body (sd_api_tokenize_body + sd_api_parse, the
 * server's request layer, linked with or without the server): the same checks of messages, tools in
 * vLLM's model_dump form, chat_template_kwargs, add_generation_prompt and continue_final_message,
 * so the ids are /tokenize's and usage.prompt_tokens' for the same conversation. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "sd_server_request.h"
#include "specdec.h"

static void cli_tok_usage(FILE *f) {
    fprintf(f,
            "usage: specdec tokenize -m DIR (-p TEXT | -f FILE | --chat FILE.json [--text]) [--pieces] [--no-special]\n"
            "                [--decode]\n"
            "  -m, --model DIR   directory with tokenizer.json (or the file itself, or a .gguf file)\n"
            "  -p, --prompt TEXT text to encode\n"
            "  -f, --file FILE   read the text from FILE (bytes, as is)\n"
            "  --chat FILE       a conversation (JSON): OpenAI-format messages [{\"role\": ..., \"content\": ...},\n"
            "                    ...] (tool_calls, tool results, content parts as the server takes them),\n"
            "                    or {\"messages\": [...], \"tools\": [...], \"chat_template_kwargs\": {...},\n"
            "                    \"add_generation_prompt\": true, \"continue_final_message\": false,\n"
            "                    \"template\": NAME} (defaults: no tools, true, false, the model's own\n"
            "                    template); read as the server's POST /tokenize reads its body (other\n"
            "                    fields ignored), rendered with the chat template and tokenized as the\n"
            "                    server does (--no-special is ignored)\n"
            "  --text            with --chat: print the rendered prompt (exact bytes) instead of ids\n"
            "  --pieces          print one line per token: id, TAB, vocabulary string\n"
            "  --no-special      do not apply the post-processor (no BOS/EOS)\n"
            "  --decode          also print the ids decoded back to text\n");
}

/* --chat FILE.json: the conversation as the server reads it (sd_api_tokenize_body + sd_api_parse,
 * as POST /tokenize: messages checked, tools in vLLM's model_dump form, chat_template_kwargs,
 * add_generation_prompt, continue_final_message) and the template to render it with. */
typedef struct cli_chat {
    sd_api_request req; /* messages_json, tools_json, kwargs_json: what the template gets */
    int parsed;         /* req filled (free it) */
    char *name;         /* NULL: the tokenizer's own template (or plain) */
    int reported;       /* an error already printed */
} cli_chat;

static int cli_chat_fail(const char *path, const char *what) {
    fprintf(stderr, "specdec tokenize: %s: %s\n", path, what);
    return 1;
}

static int cli_chat_load(const char *path, cli_chat *c) {
    size_t len = 0;
    char *text = cli_read_file(path, &len);
    memset(c, 0, sizeof *c);
    if (!text) return cli_chat_fail(path, "cannot read");
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root) return cli_chat_fail(path, "not valid JSON");
    const cJSON *name = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "template") : NULL;
    if (name && !cJSON_IsString(name)) {
        cJSON_Delete(root);
        return cli_chat_fail(path, "template must be a name");
    }
    if (name && !(c->name = strdup(name->valuestring))) {
        cJSON_Delete(root);
        return cli_chat_fail(path, "out of memory");
    }
    /* a bare list is the messages of a body with only them */
    cJSON *wrap = cJSON_IsArray(root) ? cJSON_CreateObject() : NULL;
    int oom = cJSON_IsArray(root) && !(wrap && cJSON_AddItemReferenceToObject(wrap, "messages", root));
    char *body = oom ? NULL : sd_api_tokenize_body(wrap ? wrap : root, 1);
    cJSON_Delete(wrap);
    cJSON_Delete(root);
    if (!body) return cli_chat_fail(path, "out of memory");
    sd_api_error e;
    int rc = sd_api_parse(body, strlen(body), 1, NULL, &c->req, &e);
    cJSON_free(body);
    if (rc != 200) {
        fprintf(stderr, "specdec tokenize: %s: %s%s%s\n", path, e.param[0] ? e.param : "", e.param[0] ? ": " : "",
                e.message);
        return 1;
    }
    c->parsed = 1;
    return 0;
}

static void cli_chat_free(cli_chat *c) {
    if (c->parsed) sd_api_request_free(&c->req);
    free(c->name);
}

static specdec_status cli_tok_ids(const specdec_tokenizer *tok, const char *text, size_t len, int special, int32_t **ids,
                                  int32_t *n);

/* The rendered text to stdout (--text), or its ids (tokenized with the template's add_special, as
 * the server does) in *ids / *n; continue_final_message cuts the text as the server cuts it. */
static specdec_status cli_chat_run(const specdec_tokenizer *tok, cli_chat *c, int text_out, int32_t **ids,
                                   int32_t *n) {
    const sd_api_request *r = &c->req;
    size_t len = 0;
    specdec_status st = specdec_chat_apply_json(tok, c->name, r->messages_json, r->tools_json, r->kwargs_json,
                                                r->add_generation_prompt, NULL, 0, &len);
    if (st != SPECDEC_ERR_BUFFER_TOO_SMALL) return st ? st : SPECDEC_ERR_INTERNAL;
    char *text = malloc(len + 1);
    if (!text) return SPECDEC_ERR_OUT_OF_MEMORY;
    st = specdec_chat_apply_json(tok, c->name, r->messages_json, r->tools_json, r->kwargs_json, r->add_generation_prompt,
                                 text, len + 1, &len);
    sd_api_error e;
    memset(&e, 0, sizeof e);
    if (!st && sd_api_continue_final(r, text, &len, &e)) {
        fprintf(stderr, "specdec tokenize: %s\n", e.message);
        c->reported = 1;
        st = SPECDEC_ERR_INVALID_ARGUMENT;
    }
    int special = 0;
    if (!st && text_out) fwrite(text, 1, len, stdout);
    else if (!st && !(st = specdec_chat_add_special(tok, c->name, &special))) st = cli_tok_ids(tok, text, len, special, ids, n);
    free(text);
    return st;
}

/* The ids of text[0..len) (special: the post-processor's tokens). */
static specdec_status cli_tok_ids(const specdec_tokenizer *tok, const char *text, size_t len, int special, int32_t **ids,
                                  int32_t *n) {
    specdec_status st = specdec_tokenize(tok, text, len, special, NULL, 0, n);
    if (st && st != SPECDEC_ERR_BUFFER_TOO_SMALL) return st;
    if (!(*ids = malloc(((size_t)*n + 1) * sizeof **ids))) return SPECDEC_ERR_OUT_OF_MEMORY;
    return specdec_tokenize(tok, text, len, special, *ids, *n, n);
}

/* ids as "1 2 3", or one "id<TAB>piece" line each; with decode, then the text they decode to. */
static specdec_status cli_tok_print(const specdec_tokenizer *tok, const int32_t *ids, int32_t n, int pieces, int decode) {
    size_t cap = 256, l = 0;
    char *buf = malloc(cap);
    specdec_status st = buf ? SPECDEC_OK : SPECDEC_ERR_OUT_OF_MEMORY;
    for (int32_t i = 0; !st && i < n; i++) {
        if (!pieces) {
            printf("%s%d", i ? " " : "", ids[i]);
            continue;
        }
        st = specdec_token_to_piece(tok, ids[i], buf, cap, &l);
        if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) {
            char *p = realloc(buf, l + 1);
            if (!p) break;
            buf = p;
            cap = l + 1;
            st = specdec_token_to_piece(tok, ids[i], buf, cap, &l);
        }
        if (!st) printf("%d\t%s\n", ids[i], buf);
    }
    if (!st && !pieces) printf("\n");
    if (!st && decode) {
        st = specdec_detokenize(tok, ids, n, 0, NULL, 0, &l);
        char *p = !st || st == SPECDEC_ERR_BUFFER_TOO_SMALL ? realloc(buf, l + 1) : NULL;
        if (p) buf = p;
        if (p && !(st = specdec_detokenize(tok, ids, n, 0, buf, l + 1, &l))) printf("%s\n", buf);
        else if (!p && !st) st = SPECDEC_ERR_OUT_OF_MEMORY;
    }
    free(buf);
    return st;
}

int cli_cmd_tokenize(int argc, char **argv) {
    cli_tok_opts o;
    cli_parse_err err;
    cli_parse_rc prc = cli_tok_parse(argc, argv, &o, &err);
    if (prc != CLI_PARSE_OK) {
        cli_parse_err_print(stderr, "tokenize", &err);
        cli_tok_usage(prc == CLI_PARSE_HELP ? stdout : stderr); /* --help: stdout, as the other commands */
        return prc == CLI_PARSE_HELP ? 0 : 2;
    }
    char *owned = NULL;
    size_t len = 0;
    cli_chat chat = {0};
    if (o.chat && cli_chat_load(o.chat, &chat)) {
        cli_chat_free(&chat);
        return 1;
    }
    if (o.file && !(owned = cli_read_file(o.file, &len))) {
        fprintf(stderr, "specdec tokenize: cannot read %s\n", o.file);
        return 1;
    }
    if (o.text) len = strlen(o.text);
    specdec_tokenizer *tok = NULL;
    int32_t n = 0, *ids = NULL;
    specdec_status st = specdec_tokenizer_load(o.dir, &tok);
    if (!st && o.chat) st = cli_chat_run(tok, &chat, o.chat_text, &ids, &n);
    else if (!st) st = cli_tok_ids(tok, owned ? owned : o.text, len, o.special, &ids, &n);
    if (!st && !(o.chat && o.chat_text)) st = cli_tok_print(tok, ids, n, o.pieces, o.decode);
    if (st && !chat.reported) fprintf(stderr, "specdec tokenize: %s\n", specdec_last_error());
    free(ids);
    free(owned);
    cli_chat_free(&chat);
    specdec_tokenizer_free(tok);
    return st ? 1 : 0;
}

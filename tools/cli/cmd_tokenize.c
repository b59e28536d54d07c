/* cmd_tokenize.c — `specdec tokenize -m DIR -p TEXT [--pieces] [--no-special]`:
 * prints the ids of TEXT (space-separated), or with --pieces one "id<TAB>piece" line
 * per token, using DIR/tokenizer.json. -f FILE reads the text from a file instead.
 * --chat FILE.json renders a conversation (OpenAI-format messages, tools, chat_template_kwargs:
 * specdec_chat_apply_json) with the model's chat template (as the server's /v1/chat/completions
 * does) and prints its ids, or with --text the rendered prompt itself, byte for byte, so a user can check a template against transformers' apply_chat_template.
 * The tools and chat_template_kwargs go through the server's own checks and normalisation
 * (sd_tools_parse: vLLM's model_dump of each tool) when the program has the server, so the ids
 * are /tokenize's and usage.prompt_tokens' for the same conversation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "specdec.h"
#ifdef SPECDEC_WITH_SERVER
#include "sd_server_request.h"
#include "sd_server_tools.h"
#endif

static void cli_tok_usage(FILE *f) {
    fprintf(f,
            "usage: specdec tokenize -m DIR (-p TEXT | -f FILE | --chat FILE.json [--text]) [--pieces] [--no-special]\n"
            "                [--decode]\n"
            "  -m, --model DIR   directory with tokenizer.json (or the file itself)\n"
            "  -p, --prompt TEXT text to encode\n"
            "  -f, --file FILE   read the text from FILE (bytes, as is)\n"
            "  --chat FILE       a conversation (JSON): OpenAI-format messages [{\"role\": ..., \"content\": ...},\n"
            "                    ...] (tool_calls, tool results, content parts as the server takes them),\n"
            "                    or {\"messages\": [...], \"tools\": [...], \"chat_template_kwargs\": {...},\n"
            "                    \"add_generation_prompt\": true, \"template\": NAME} (defaults: no tools,\n"
            "                    true, the model's own template); rendered with the chat template and\n"
            "                    tokenized as the server does (--no-special is ignored)\n"
            "  --text            with --chat: print the rendered prompt (exact bytes) instead of ids\n"
            "  --pieces          print one line per token: id, TAB, vocabulary string\n"
            "  --no-special      do not apply the post-processor (no BOS/EOS)\n"
            "  --decode          also print the ids decoded back to text\n");
}

/* --chat FILE.json: the conversation and how to render it (specdec_chat_apply_json: OpenAI-format
 * messages as the server takes them, tools and chat_template_kwargs). */
typedef struct cli_chat {
    cJSON *root;
    char *messages, *tools, *kwargs; /* JSON texts (tools, kwargs: NULL when absent) */
    int agp;
    const char *name; /* NULL: the tokenizer's own template (or plain) */
} cli_chat;

static int cli_chat_fail(const char *path, const char *what) {
    fprintf(stderr, "specdec tokenize: %s: %s\n", path, what);
    return 1;
}

#ifdef SPECDEC_WITH_SERVER
/* tools and chat_template_kwargs as the server hands them to the template (sd_tools_parse: each tool
 * checked and written as vLLM's model_dump writes it, description and parameters null when absent),
 * so --chat renders exactly what /v1/chat/completions and /tokenize render. */
static int cli_chat_as_server(const char *path, cli_chat *c, const cJSON *tools, const cJSON *kw) {
    cJSON *req = cJSON_CreateObject();
    sd_api_request r;
    sd_api_error e;
    memset(&r, 0, sizeof r);
    memset(&e, 0, sizeof e);
    int bad = !req || (tools && !cJSON_AddItemReferenceToObject(req, "tools", (cJSON *)tools)) ||
              (kw && !cJSON_AddItemReferenceToObject(req, "chat_template_kwargs", (cJSON *)kw));
    int rc = bad ? 500 : sd_tools_parse(req, &r, &e);
    if (!rc) {
        cJSON_free(c->tools);
        cJSON_free(c->kwargs);
        c->tools = r.tools_json; /* both cJSON_PrintUnformatted texts, now the chat's */
        c->kwargs = r.kwargs_json;
        r.tools_json = r.kwargs_json = NULL;
    }
    sd_api_request_free(&r);
    cJSON_Delete(req);
    return rc ? cli_chat_fail(path, bad ? "out of memory" : e.message) : 0;
}
#endif

static int cli_chat_load(const char *path, cli_chat *c) {
    size_t len = 0;
    char *text = cli_read_file(path, &len);
    memset(c, 0, sizeof *c);
    c->agp = 1;
    if (!text) return cli_chat_fail(path, "cannot read");
    c->root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!c->root) return cli_chat_fail(path, "not valid JSON");
    const cJSON *msgs = c->root, *tools = NULL, *kw = NULL;
    if (!cJSON_IsArray(c->root)) {
        const cJSON *agp = cJSON_GetObjectItemCaseSensitive(c->root, "add_generation_prompt"),
                    *name = cJSON_GetObjectItemCaseSensitive(c->root, "template");
        msgs = cJSON_GetObjectItemCaseSensitive(c->root, "messages");
        tools = cJSON_GetObjectItemCaseSensitive(c->root, "tools");
        kw = cJSON_GetObjectItemCaseSensitive(c->root, "chat_template_kwargs");
        if (agp && !cJSON_IsBool(agp)) return cli_chat_fail(path, "add_generation_prompt must be true or false");
        if (name && !cJSON_IsString(name)) return cli_chat_fail(path, "template must be a name");
        if (tools && !cJSON_IsArray(tools) && !cJSON_IsNull(tools)) return cli_chat_fail(path, "tools must be a list");
        if (kw && !cJSON_IsObject(kw)) return cli_chat_fail(path, "chat_template_kwargs must be an object");
        c->agp = !agp || cJSON_IsTrue(agp);
        c->name = name ? name->valuestring : NULL;
    }
    if (!cJSON_IsArray(msgs)) return cli_chat_fail(path, "expected a list of messages");
    c->messages = cJSON_PrintUnformatted(msgs);
    if (tools && !cJSON_IsNull(tools)) c->tools = cJSON_PrintUnformatted(tools);
    if (kw) c->kwargs = cJSON_PrintUnformatted(kw);
    if (!c->messages || (tools && !cJSON_IsNull(tools) && !c->tools) || (kw && !c->kwargs))
        return cli_chat_fail(path, "out of memory");
#ifdef SPECDEC_WITH_SERVER
    return cli_chat_as_server(path, c, tools && !cJSON_IsNull(tools) ? tools : NULL, kw);
#else
    return 0;
#endif
}


static void cli_chat_free(cli_chat *c) {
    cJSON_free(c->messages);
    cJSON_free(c->tools);
    cJSON_free(c->kwargs);
    cJSON_Delete(c->root);
}

static specdec_status cli_tok_ids(const specdec_tokenizer *tok, const char *text, size_t len, int special, int32_t **ids,
                                  int32_t *n);

/* The rendered text to stdout (--text), or its ids (tokenized with the template's add_special, as
 * the server does) in *ids / *n. */
static specdec_status cli_chat_run(const specdec_tokenizer *tok, const cli_chat *c, int text_out, int32_t **ids,
                                   int32_t *n) {
    size_t len = 0;
    specdec_status st = specdec_chat_apply_json(tok, c->name, c->messages, c->tools, c->kwargs, c->agp, NULL, 0, &len);
    if (st != SPECDEC_ERR_BUFFER_TOO_SMALL) return st ? st : SPECDEC_ERR_INTERNAL;
    char *text = malloc(len + 1);
    if (!text) return SPECDEC_ERR_OUT_OF_MEMORY;
    st = specdec_chat_apply_json(tok, c->name, c->messages, c->tools, c->kwargs, c->agp, text, len + 1, &len);
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
    if (st) fprintf(stderr, "specdec tokenize: %s\n", specdec_last_error());
    free(ids);
    free(owned);
    cli_chat_free(&chat);
    specdec_tokenizer_free(tok);
    return st ? 1 : 0;
}

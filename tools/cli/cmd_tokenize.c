/* cmd_tokenize.c — `specdec tokenize -m DIR -p TEXT [--pieces] [--no-special]`:
 * prints the ids of TEXT (space-separated), or with --pieces one "id<TAB>piece" line
 * per token, using DIR/tokenizer.json. -f FILE reads the text from a file instead.
 * --chat FILE.json renders a conversation with the model's chat template (as the server's
 * /v1/chat/completions does) and prints its ids, or with --text the rendered prompt itself,
 * byte for byte, so a user can check a template against transformers' apply_chat_template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "specdec.h"

static void cli_tok_usage(FILE *f) {
    fprintf(f,
            "usage: specdec tokenize -m DIR (-p TEXT | -f FILE | --chat FILE.json [--text]) [--pieces] [--no-special]\n"
            "                [--decode]\n"
            "  -m, --model DIR   directory with tokenizer.json (or the file itself)\n"
            "  -p, --prompt TEXT text to encode\n"
            "  -f, --file FILE   read the text from FILE (bytes, as is)\n"
            "  --chat FILE       a conversation (JSON): [{\"role\": ..., \"content\": ...}, ...], or\n"
            "                    {\"messages\": [...], \"add_generation_prompt\": true, \"template\": NAME}\n"
            "                    (defaults: true, the model's own template); rendered with the chat\n"
            "                    template and tokenized as the server does (--no-special is ignored)\n"
            "  --text            with --chat: print the rendered prompt (exact bytes) instead of ids\n"
            "  --pieces          print one line per token: id, TAB, vocabulary string\n"
            "  --no-special      do not apply the post-processor (no BOS/EOS)\n"
            "  --decode          also print the ids decoded back to text\n");
}

/* --chat FILE.json: the conversation and how to render it. */
typedef struct cli_chat {
    cJSON *root;
    specdec_chat_message *m;
    int32_t n;
    int agp;
    const char *name; /* NULL: the tokenizer's own template (or plain) */
} cli_chat;

static int cli_chat_fail(const char *path, const char *what, int i) {
    if (i >= 0) fprintf(stderr, "specdec tokenize: %s: message %d: %s\n", path, i, what);
    else fprintf(stderr, "specdec tokenize: %s: %s\n", path, what);
    return 1;
}

/* Messages of the array msgs; each an object with string "role" and "content" and nothing else. */
static int cli_chat_messages(const char *path, const cJSON *msgs, cli_chat *c) {
    if (!cJSON_IsArray(msgs)) return cli_chat_fail(path, "expected a list of messages", -1);
    c->n = cJSON_GetArraySize(msgs);
    if (!(c->m = calloc((size_t)(c->n ? c->n : 1), sizeof *c->m))) return cli_chat_fail(path, "out of memory", -1);
    int32_t i = 0;
    for (const cJSON *e = msgs->child; e; e = e->next, i++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "role"), *t = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsString(r) || !cJSON_IsString(t)) return cli_chat_fail(path, "needs a string \"role\" and \"content\"", i);
        for (const cJSON *k = e->child; k; k = k->next)
            if (strcmp(k->string, "role") && strcmp(k->string, "content"))
                return cli_chat_fail(path, "only \"role\" and \"content\" are supported (the C API's messages)", i);
        c->m[i].role = r->valuestring;
        c->m[i].content = t->valuestring;
    }
    return 0;
}

static int cli_chat_load(const char *path, cli_chat *c) {
    size_t len = 0;
    char *text = cli_read_file(path, &len);
    memset(c, 0, sizeof *c);
    c->agp = 1;
    if (!text) return cli_chat_fail(path, "cannot read", -1);
    c->root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!c->root) return cli_chat_fail(path, "not valid JSON", -1);
    if (cJSON_IsArray(c->root)) return cli_chat_messages(path, c->root, c);
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(c->root, "add_generation_prompt"),
                *name = cJSON_GetObjectItemCaseSensitive(c->root, "template");
    if (agp && !cJSON_IsBool(agp)) return cli_chat_fail(path, "add_generation_prompt must be true or false", -1);
    if (name && !cJSON_IsString(name)) return cli_chat_fail(path, "template must be a name", -1);
    c->agp = !agp || cJSON_IsTrue(agp);
    c->name = name ? name->valuestring : NULL;
    return cli_chat_messages(path, cJSON_GetObjectItemCaseSensitive(c->root, "messages"), c);
}

static void cli_chat_free(cli_chat *c) {
    free(c->m);
    cJSON_Delete(c->root);
}

/* The rendered text to stdout (--text), or the ids in *ids / *n. */
static specdec_status cli_chat_run(const specdec_tokenizer *tok, const cli_chat *c, int text_out, int32_t **ids,
                                   int32_t *n) {
    size_t len = 0;
    specdec_status st;
    if (text_out) {
        st = specdec_chat_apply(tok, c->name, c->m, c->n, c->agp, NULL, 0, &len);
        if (st != SPECDEC_ERR_BUFFER_TOO_SMALL) return st ? st : SPECDEC_ERR_INTERNAL;
        char *text = malloc(len + 1);
        if (!text) return SPECDEC_ERR_OUT_OF_MEMORY;
        if (!(st = specdec_chat_apply(tok, c->name, c->m, c->n, c->agp, text, len + 1, &len))) fwrite(text, 1, len, stdout);
        free(text);
        return st;
    }
    st = specdec_chat_tokenize(tok, c->name, c->m, c->n, c->agp, NULL, 0, n);
    if (st && st != SPECDEC_ERR_BUFFER_TOO_SMALL) return st;
    if (!(*ids = malloc(((size_t)*n + 1) * sizeof **ids))) return SPECDEC_ERR_OUT_OF_MEMORY;
    return specdec_chat_tokenize(tok, c->name, c->m, c->n, c->agp, *ids, *n, n);
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

/* cmd_tokenize.c — `specdec tokenize -m DIR -p TEXT [--pieces] [--no-special]`:
 * prints the ids of TEXT (space-separated), or with --pieces one "id<TAB>piece" line
 * per token, using DIR/tokenizer.json. -f FILE reads the text from a file instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "specdec.h"

static void cli_tok_usage(FILE *f) {
    fprintf(f,
            "usage: specdec tokenize -m DIR (-p TEXT | -f FILE) [--pieces] [--no-special] [--decode]\n"
            "  -m, --model DIR   directory with tokenizer.json (or the file itself)\n"
            "  -p, --prompt TEXT text to encode\n"
            "  -f, --file FILE   read the text from FILE (bytes, as is)\n"
            "  --pieces          print one line per token: id, TAB, vocabulary string\n"
            "  --no-special      do not apply the post-processor (no BOS/EOS)\n"
            "  --decode          also print the ids decoded back to text\n");
}

static char *cli_tok_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        char *p = realloc(buf, cap * 2);
        if (!p) { free(buf); buf = NULL; break; }
        buf = p;
        cap *= 2;
    }
    fclose(f);
    *len = n;
    return buf;
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
    const char *dir = o.dir, *text = o.text, *file = o.file;
    const int pieces = o.pieces, special = o.special, decode = o.decode;
    char *owned = NULL;
    size_t len = 0;
    if (file) {
        owned = cli_tok_read(file, &len);
        if (!owned) { fprintf(stderr, "specdec tokenize: cannot read %s\n", file); return 1; }
        text = owned;
    } else {
        len = strlen(text);
    }
    specdec_tokenizer *tok = NULL;
    specdec_status st = specdec_tokenizer_load(dir, &tok);
    if (st) {
        fprintf(stderr, "specdec tokenize: %s\n", specdec_last_error());
        free(owned);
        return 1;
    }
    int rc = 1;
    int32_t n = 0;
    int32_t *ids = NULL;
    char *buf = NULL;
    st = specdec_tokenize(tok, text, len, special, NULL, 0, &n);
    if (st && st != SPECDEC_ERR_BUFFER_TOO_SMALL) goto fail;
    ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) goto fail;
    if ((st = specdec_tokenize(tok, text, len, special, ids, n, &n))) goto fail;
    size_t cap = 256;
    buf = malloc(cap);
    if (!buf) goto fail;
    for (int32_t i = 0; i < n; i++) {
        if (!pieces) {
            printf("%s%d", i ? " " : "", ids[i]);
            continue;
        }
        size_t l = 0;
        st = specdec_token_to_piece(tok, ids[i], buf, cap, &l);
        if (st == SPECDEC_ERR_BUFFER_TOO_SMALL) {
            char *p = realloc(buf, l + 1);
            if (!p) goto fail;
            buf = p;
            cap = l + 1;
            st = specdec_token_to_piece(tok, ids[i], buf, cap, &l);
        }
        if (st) goto fail;
        printf("%d\t%s\n", ids[i], buf);
    }
    if (!pieces) printf("\n");
    if (decode) {
        size_t l = 0;
        st = specdec_detokenize(tok, ids, n, 0, NULL, 0, &l);
        if (st && st != SPECDEC_ERR_BUFFER_TOO_SMALL) goto fail;
        char *p = realloc(buf, l + 1);
        if (!p) goto fail;
        buf = p;
        if ((st = specdec_detokenize(tok, ids, n, 0, buf, l + 1, &l))) goto fail;
        printf("%s\n", buf);
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "specdec tokenize: %s\n", st ? specdec_last_error() : "out of memory");
    free(buf);
    free(ids);
    free(owned);
    specdec_tokenizer_free(tok);
    return rc;
}

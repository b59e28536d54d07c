/* specdec command-line program: subcommand dispatch.
 *   specdec info     -m DIR                 model summary        (cmd_info.c)
 *   specdec generate [-m DIR] [-md DIR] ... speculative decoding (cmd_generate.c)
 *   specdec tokenize -m DIR -p TEXT         text -> ids          (cmd_tokenize.c)
 *   specdec batch    -f PROMPTS ...         many prompts through the scheduler (cmd_batch.c)
 *   specdec serve    [-m DIR] [-md DIR] ... OpenAI-compatible HTTP server (cmd_serve.c) */
#include <stdio.h>
#include <string.h>

#include "specdec.h"
#include "cli.h"

int cli_cmd_serve(int argc, char **argv); /* cmd_serve.c */

static void usage(FILE *f) {
    fprintf(f,
            "specdec %s — speculative decoding for Llama-family models\n"
            "usage: specdec <command> [options]\n"
            "  batch      generate for every line of a file through the scheduler, see 'specdec batch --help'\n"
            "  generate   generate text (speculative with -md), see 'specdec generate --help'\n"
            "  info       print a model's architecture, sizes, dtype and parameter count\n"
            "  serve      OpenAI-compatible HTTP server, see 'specdec serve --help'\n"
            "  tokenize   print the token ids of a text\n"
            "  version    print the library version\n",
            specdec_version_string());
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "generate")) return cli_cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "batch")) return cli_cmd_batch(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return cli_cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return cli_cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cli_cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("specdec %s (CUDA backend %s)\n", specdec_version_string(), specdec_has_cuda() ? "built in" : "not built");
        return 0;
    }
    fprintf(stderr, "specdec: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}

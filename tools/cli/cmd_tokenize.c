/* PLACEHOLDER: replaced by the work that owns 'specdec tokenize'. */
#include <stdio.h>
#include "cli.h"
int cli_cmd_tokenize(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "specdec tokenize: not built yet\n"); return 1; }

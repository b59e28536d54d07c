/* PLACEHOLDER: replaced by the work that owns 'specdec generate'. */
#include <stdio.h>
#include "cli.h"
int cli_cmd_generate(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "specdec generate: not built yet\n"); return 1; }

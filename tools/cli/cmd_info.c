/* PLACEHOLDER: replaced by the work that owns 'specdec info'. */
#include <stdio.h>
#include "cli.h"
int cli_cmd_info(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "specdec info: not built yet\n"); return 1; }

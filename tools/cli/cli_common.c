/* cli_common.c — helpers shared by the subcommands. */
#include <stdio.h>
#include <sys/stat.h>

#include "cli.h"

static int cli_is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *cli_bundled_models_dir(void) {
    static char buf[4096];
    const char *cands[] = {SPECDEC_SOURCE_MODELS_DIR, SPECDEC_INSTALL_MODELS_DIR};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        snprintf(buf, sizeof buf, "%s/kjv-target", cands[i]);
        if (cli_is_dir(buf)) return cands[i];
    }
    return NULL;
}

/* cli_common.c — helpers shared by the subcommands. */
#define _DEFAULT_SOURCE /* readlink, realpath */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static int cli_is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* share/specdec/models beside the running program's bin/ (an installed prefix that
 * was moved, or installed with `cmake --install --prefix P`), or "" if unknown. */
static const char *cli_models_beside_exe(void) {
    static char dir[PATH_MAX];
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return "";
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return "";
    *slash = '\0';
    char rel[4200];
    snprintf(rel, sizeof rel, "%s/%s", exe, SPECDEC_INSTALL_MODELS_REL);
    return realpath(rel, dir) ? dir : ""; /* prefix/share/..., without "bin/.." */
}

const char *cli_bundled_models_dir(void) {
    static char buf[4300];
    const char *cands[] = {cli_models_beside_exe(), SPECDEC_SOURCE_MODELS_DIR, SPECDEC_INSTALL_MODELS_DIR};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        if (!cands[i][0]) continue;
        snprintf(buf, sizeof buf, "%s/kjv-target", cands[i]);
        if (cli_is_dir(buf)) return cands[i];
    }
    return NULL;
}

int cli_fail(const char *cmd, const char *what, specdec_status st, const char *detail) {
    fprintf(stderr, "specdec %s: %s: %s%s%s\n", cmd, what, specdec_status_string(st), detail && *detail ? ": " : "",
            detail ? detail : "");
    return 1;
}

/* -m absent: the bundled pair (target and, unless -md, its draft). */
static int cli_pair_dirs(const char *cmd, int bundled_draft, cli_pair *p) {
    if (p->target_dir) return 0;
    const char *dir = cli_bundled_models_dir();
    if (!dir) {
        fprintf(stderr,
                "specdec %s: no -m given and the bundled model pair (models/kjv-target, models/kjv-draft) "
                "is not present in the source tree or the installed share/specdec/models; pass -m TARGET_DIR\n",
                cmd);
        return 1;
    }
    snprintf(p->bundled_t, sizeof p->bundled_t, "%s/kjv-target", dir);
    snprintf(p->bundled_d, sizeof p->bundled_d, "%s/kjv-draft", dir);
    p->target_dir = p->bundled_t;
    if (!p->draft_dir && bundled_draft) p->draft_dir = p->bundled_d;
    return 0;
}

int cli_pair_load(const char *cmd, const char *target_dir, const char *draft_dir, const char *tokenizer_path,
                  int bundled_draft, int mtp, cli_pair *p) {
    memset(p, 0, sizeof *p);
    p->target_dir = target_dir;
    p->draft_dir = draft_dir;
    if (cli_pair_dirs(cmd, bundled_draft, p)) return 1;
    specdec_status st;
    specdec_model_params mp = specdec_model_default_params();
    if ((st = specdec_model_load(p->target_dir, &mp, &p->target)) != SPECDEC_OK)
        return cli_fail(cmd, "loading the target model", st, specdec_last_error());
    if (mtp && !p->draft_dir) p->draft_dir = p->target_dir; /* the checkpoint's own MTP layer */
    specdec_model_params dp = mp;
    dp.mtp = mtp;
    if (p->draft_dir && (st = specdec_model_load(p->draft_dir, &dp, &p->draft)) != SPECDEC_OK)
        return cli_fail(cmd, mtp ? "loading the MTP layer" : "loading the draft model", st, specdec_last_error());
    if ((st = specdec_tokenizer_load(tokenizer_path ? tokenizer_path : p->target_dir, &p->tok)) != SPECDEC_OK)
        return cli_fail(cmd, "loading the tokenizer", st, specdec_last_error());
    return 0;
}

void cli_pair_free(cli_pair *p) {
    specdec_tokenizer_free(p->tok);
    specdec_model_free(p->draft);
    specdec_model_free(p->target);
    memset(p, 0, sizeof *p);
}

specdec_status cli_encode(const specdec_tokenizer *tok, const char *text, size_t len, int32_t **ids, int32_t *n) {
    int32_t cap = 256;
    *ids = NULL;
    *n = 0;
    for (;;) {
        int32_t *buf = malloc((size_t)cap * sizeof *buf);
        if (!buf) return SPECDEC_ERR_OUT_OF_MEMORY;
        specdec_status st = specdec_tokenize(tok, text, len, 1, buf, cap, n);
        if (st == SPECDEC_OK) {
            *ids = buf;
            return st;
        }
        free(buf);
        if (st != SPECDEC_ERR_BUFFER_TOO_SMALL || *n <= cap) return st;
        cap = *n;
    }
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *p = realloc(buf, cap * 2);
        if (!p) free(buf);
        buf = p;
        cap *= 2;
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    if (!buf) errno = ENOMEM;
    *len = n;
    return buf;
}

int cli_bad_words_tokenize(const char *cmd, const cli_gen_opts *o, const specdec_tokenizer *tok, cli_bad_words *bw) {
    bw->n = 0;
    if (o->n_bad_words == 0) return 0;
    const specdec_status st = specdec_tokenize_bad_words(tok, o->bad_words, o->n_bad_words, bw->ids, bw->offsets, &bw->n);
    if (st == SPECDEC_OK) return 0;
    fprintf(stderr, "specdec %s: --bad-words: %s\n", cmd, specdec_last_error());
    return st == SPECDEC_ERR_INVALID_ARGUMENT ? 2 : 1;
}

void cli_bad_words_set(const cli_bad_words *bw, specdec_generate_params *gp) {
    gp->bad_words_ids = bw->n ? bw->ids : NULL;
    gp->bad_words_offsets = bw->n ? bw->offsets : NULL;
    gp->n_bad_words = bw->n;
}

int cli_grammar_compile(const char *cmd, const cli_gen_opts *o, const specdec_tokenizer *tok, specdec_grammar **out) {
    *out = NULL;
    if (!o->grammar_kind) return 0;
    const char *spec = o->grammar_arg;
    char *file = NULL;
    size_t len = spec ? strlen(spec) : 0;
    if (o->grammar_kind == SPECDEC_GRAMMAR_JSON_SCHEMA || o->grammar_kind == SPECDEC_GRAMMAR_GBNF) { /* a file */
        if (!(file = cli_read_file(o->grammar_arg, &len))) {
            fprintf(stderr, "specdec %s: %s: cannot read '%s': %s\n", cmd, o->grammar_opt, o->grammar_arg,
                    strerror(errno));
            return 1;
        }
        spec = file;
    }
    specdec_status st = specdec_grammar_compile(tok, o->grammar_kind, spec, len, out);
    free(file);
    if (st == SPECDEC_OK) return 0;
    const int usage = st == SPECDEC_ERR_INVALID_ARGUMENT || st == SPECDEC_ERR_UNSUPPORTED; /* the value's fault */
    fprintf(stderr, "specdec %s: %s: %s%s%s\n", cmd, o->grammar_opt, usage ? "" : specdec_status_string(st),
            usage ? "" : ": ", specdec_last_error());
    return usage ? 2 : 1;
}

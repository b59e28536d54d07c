/* A C program using specdec through its installed package (CMake or pkg-config): it
 * loads the installed bundled pair, generates 8 tokens greedily on the CPU and prints
 * them with the statistics. Linking it against the static library with a C linker is
 * what needs the package to carry the C++ / CUDA runtime libraries of a CUDA build.
 * Usage: consumer MODELS_DIR (share/specdec/models of the prefix). Exit 0 on success. */
#include <specdec.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2 || specdec_version_number() != SPECDEC_VERSION_NUMBER) return 1;
    char tdir[4096], ddir[4096];
    snprintf(tdir, sizeof tdir, "%s/kjv-target", argv[1]);
    snprintf(ddir, sizeof ddir, "%s/kjv-draft", argv[1]);
    specdec_model *t = NULL, *d = NULL;
    specdec_tokenizer *tok = NULL;
    specdec_engine *e = NULL;
    int rc = 1;
    if (specdec_model_load(tdir, NULL, &t) != SPECDEC_OK || specdec_model_load(ddir, NULL, &d) != SPECDEC_OK ||
        specdec_tokenizer_load(tdir, &tok) != SPECDEC_OK) {
        fprintf(stderr, "load: %s\n", specdec_last_error());
        goto done;
    }
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    if (specdec_engine_create(t, d, &ep, &e) != SPECDEC_OK) {
        fprintf(stderr, "engine: %s\n", specdec_last_error());
        goto done;
    }
    int32_t prompt[64], n_prompt = 0, out[8], n_out = 0;
    if (specdec_tokenize(tok, "And God said", strlen("And God said"), 1, prompt, 64, &n_prompt) != SPECDEC_OK) goto done;
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 8;
    gp.temperature = 0.0f;
    gp.ignore_eos = 1;
    specdec_stats st;
    if (specdec_generate(e, prompt, n_prompt, &gp, out, 8, &n_out, &st) != SPECDEC_OK || n_out != 8) {
        fprintf(stderr, "generate: %s\n", specdec_engine_last_error(e));
        goto done;
    }
    printf("C consumer: specdec %s, %d tokens in %lld target passes, draft %s\n", specdec_version_string(), (int)n_out,
           (long long)st.n_target_passes, specdec_draft_method_name(st.draft_method));
    rc = 0;
done:
    specdec_engine_free(e);
    specdec_tokenizer_free(tok);
    specdec_model_free(d);
    specdec_model_free(t);
    return rc;
}

/* test_fixture_generate.c — generation through the public API (CPU backend) on the family
 * fixtures: speculative decoding with mixture-of-experts models (GPT-OSS with its sinks and
 * windows too, MXFP4 or not; OLMoE, Granite-MoE), with OLMo-2 (post-norms), Granite (multipliers) and SmolLM3
 * (layers without rope that slide), and the context limit.
 *
 * The fixtures (tests/models/fixtures, written by transformers) share a vocabulary of 80 ids
 * and bos/eos, so any two form a target/draft pair. Claims (docs: README "Model families";
 * exactness as for dense models, SPECULATIVE.md): for a MoE target drafted by a dense model,
 * and a dense target drafted by a MoE model,
 *   - GREEDY: speculative output == plain greedy decoding, token for token;
 *   - MATCH (temperature 0.9, top-p 0.95): speculative output == plain sampling with the same
 *     seed, token for token;
 * over 4 seeds x 40 tokens each, chain drafts of 4 and a 3-deep tree. A MoE model drafting
 * itself must have drafts accepted (the accepted paths' KV rows of a MoE target are reused);
 * unrelated random models rarely agree, so there the rejection path is what is exercised. */
#include <stdio.h>
#include <string.h>

#include "sd_test.h"
#include "specdec.h"

#define N_OUT 40

static specdec_model *load(const char *dir, const char *name) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    specdec_model *m = NULL;
    SD_CHECK(specdec_model_load(p, NULL, &m) == SPECDEC_OK, "load %s: %s", p, specdec_last_error());
    return m;
}

static specdec_engine *engine(const specdec_model *t, const specdec_model *d) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    ep.n_ctx = 64;
    specdec_engine *e = NULL;
    SD_CHECK(specdec_engine_create(t, d, &ep, &e) == SPECDEC_OK, "engine: %s", specdec_last_error());
    return e;
}

static int32_t gen(specdec_engine *e, const specdec_generate_params *gp, int32_t *out, specdec_stats *st) {
    static const int32_t prompt[6] = {1, 17, 42, 5, 63, 9};
    int32_t n = 0;
    specdec_status s = specdec_generate(e, prompt, 6, gp, out, N_OUT, &n, st);
    SD_CHECK(s == SPECDEC_OK, "generate: %s", specdec_engine_last_error(e));
    return s == SPECDEC_OK ? n : -1;
}

/* target drafted by draft: plain and speculative runs compared in GREEDY and MATCH */
static void pair(const char *dir, const char *tname, const char *dname, int must_accept) {
    specdec_model *t = load(dir, tname), *d = load(dir, dname);
    specdec_engine *plain = t ? engine(t, NULL) : NULL, *spec = t && d ? engine(t, d) : NULL;
    if (!plain || !spec) goto out;
    int64_t accepted = 0;
    for (int mode = 0; mode < 2; mode++)
        for (uint64_t seed = 1; seed <= 4; seed++) {
            specdec_generate_params gp = specdec_generate_default_params();
            gp.n_predict = N_OUT;
            gp.ignore_eos = 1;
            gp.seed = seed;
            gp.temperature = mode ? 0.9f : 0.0f;
            gp.top_p = mode ? 0.95f : 1.0f;
            gp.verify = mode ? SPECDEC_VERIFY_MATCH : SPECDEC_VERIFY_GREEDY;
            int32_t ref[N_OUT], got[N_OUT];
            gp.draft_method = SPECDEC_DRAFT_NONE;
            int32_t nr = gen(plain, &gp, ref, NULL);
            gp.draft_method = SPECDEC_DRAFT_MODEL;
            gp.n_draft = 4;
            if (seed == 4) specdec_generate_params_set_tree(&gp, (const int32_t[]){2, 2, 1}, 3);
            specdec_stats st;
            memset(&st, 0, sizeof st);
            int32_t ng = gen(spec, &gp, got, &st);
            SD_CHECK(nr == N_OUT && ng == nr && memcmp(ref, got, sizeof(int32_t) * (size_t)N_OUT) == 0,
                     "%s drafted by %s, %s seed %llu%s: speculative output differs from plain decoding", tname,
                     dname, mode ? "match" : "greedy", (unsigned long long)seed, seed == 4 ? " (tree)" : "");
            if (!mode) accepted += st.n_accepted;
        }
    SD_CHECK(!must_accept || accepted > 0, "%s drafted by itself: no draft token was ever accepted", tname);
    printf("%-16s drafted by %-16s: greedy and match == plain (%lld greedy drafts accepted)\n", tname, dname,
           (long long)accepted);
out:
    specdec_engine_free(spec);
    specdec_engine_free(plain);
    specdec_model_free(d);
    specdec_model_free(t);
}

/* The engine refuses n_ctx past max_position_embeddings (positions never trained), except for
 * dynamic NTK rope, whose frequencies grow with the context (its max_position_embeddings is the
 * original length): llama_rope_dynamic has max_position_embeddings 16, llama_bias 64. */
static void context_limit(const char *dir) {
    specdec_model *dyn = load(dir, "llama_rope_dynamic"), *plain = load(dir, "llama_bias");
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = SPECDEC_BACKEND_CPU;
    specdec_engine *e = NULL;
    ep.n_ctx = 48;
    SD_CHECK(dyn && specdec_engine_create(dyn, NULL, &ep, &e) == SPECDEC_OK,
             "dynamic rope: n_ctx 48 > max_position_embeddings 16 must be accepted: %s", specdec_last_error());
    if (e) {
        specdec_generate_params gp = specdec_generate_default_params();
        gp.n_predict = 30;
        gp.ignore_eos = 1;
        int32_t out[N_OUT];
        SD_CHECK(gen(e, &gp, out, NULL) == 30, "dynamic rope: 30 tokens past position 16");
        specdec_engine_free(e);
        e = NULL;
    }
    ep.n_ctx = 65;
    SD_CHECK(plain && specdec_engine_create(plain, NULL, &ep, &e) == SPECDEC_ERR_INVALID_ARGUMENT && !e &&
                 strstr(specdec_last_error(), "max_position_embeddings 64"),
             "default rope: n_ctx 65 > 64 must be refused naming the limit: %s", specdec_last_error());
    specdec_engine_free(e);
    specdec_model_free(dyn);
    specdec_model_free(plain);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    pair(argv[1], "qwen3_moe", "qwen3_moe", 1);
    pair(argv[1], "mixtral", "mixtral", 1);
    pair(argv[1], "qwen2_moe_window", "qwen2_moe_window", 1);
    pair(argv[1], "qwen3_moe", "qwen3", 0);
    pair(argv[1], "qwen3", "qwen3_moe_step", 0);
    pair(argv[1], "gpt_oss", "gpt_oss", 1);
    pair(argv[1], "gpt_oss_mxfp4", "gpt_oss", 0);
    pair(argv[1], "qwen3", "gpt_oss_mxfp4", 0);
    pair(argv[1], "olmo2", "olmo2", 1);
    pair(argv[1], "granite", "granite", 1);
    pair(argv[1], "smollm3_window", "smollm3_window", 1);
    pair(argv[1], "olmoe", "olmoe", 1);
    pair(argv[1], "granite_moe", "granite_moe", 1);
    pair(argv[1], "granite", "granite_moe", 0);
    pair(argv[1], "olmo2", "granite", 0);
    pair(argv[1], "smollm3_window", "olmoe", 0);
    pair(argv[1], "ernie4_5", "ernie4_5", 1);
    pair(argv[1], "ernie4_5", "granite", 0);
    pair(argv[1], "glm4", "glm4", 1);
    pair(argv[1], "glm4", "ernie4_5", 0);
    pair(argv[1], "exaone4_window", "exaone4_window", 1);
    pair(argv[1], "exaone4_window", "olmo2", 0);
    pair(argv[1], "glm4_moe", "glm4_moe", 1);
    pair(argv[1], "glm4_moe", "glm4_moe_flat", 0);
    pair(argv[1], "deepseek_v3", "deepseek_v3", 1);
    pair(argv[1], "deepseek_v3_plain", "glm4_moe", 0);
    pair(argv[1], "deepseek_v2_grouped", "deepseek_v2_grouped", 1);
    pair(argv[1], "deepseek_v2_lite", "deepseek_v3", 0);
    context_limit(argv[1]);
    return sd_test_done();
}

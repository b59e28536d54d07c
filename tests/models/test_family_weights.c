/* test_family_weights.c — the model descriptions of OLMo-2, OLMoE, Granite(-MoE) and SmolLM3 as the
 * loader builds them from the transformers-written fixtures, and what every runner checks of
 * them at creation (sd_weights_validate, core/sd_weights.c):
 *   1. the loaded layers: OLMo-2 without input / pre-MLP norms and with its post-sublayer norms,
 *      whole-projection q/k norms ([n_heads * head_dim], [n_kv_heads * head_dim]) on OLMo-2 and
 *      OLMoE, OLMoE's experts in every layer, Granite-MoE's experts as views of its stacked
 *      input_linear / output_linear;
 *   2. altered copies of the loaded description refused naming the tensor or value: a per-head
 *      q_norm where the whole projection is normed, a pre-norm present in a post-norm model, a
 *      post norm missing, both kinds of q/k norm, post-only norms without post norms, a negative
 *      logits_scaling or residual multiplier, a NaN clip_qkv;
 *   3. GLM-4's sandwich norms under GLM's names and gate_up_proj views, q/k/v biases without an o
 *      bias (a missing post-MLP norm and an o bias refused); ERNIE's biases on every projection;
 *   4. sd_cfg_cpu_only names the feature the CUDA backend lacks for each new family, and
 *      nothing for a Llama (which the CUDA backend runs);
 *   5. GLM-4.5: a dense first layer, then router + e_score_correction_bias + experts + an ungated
 *      shared expert (mlp.shared_experts), the checkpoint's MTP layer not read (a missing score
 *      bias, a score bias on a softmax router, a shared gate where there is none refused);
 *   6. DeepSeek-V3's latent attention tensors (q through its latent or q_proj, kv_a / kv_b, o over
 *      n_heads x v_head_dim; no k/v projections), altered copies refused naming the tensor; the CPU
 *      cache holds the latent (kv_lora_rank + rope_dim floats per token and layer, not the
 *      2 x n_heads x head_dim of the expanded keys and values).
 * argv[1] = fixture directory. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sd_cpu_runner.h"
#include "sd_model.h"
#include "sd_test.h"
#include "specdec.h"

#define MAX_LAYERS 8

static const char *g_fx;

static specdec_model *load(const char *name) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", g_fx, name);
    specdec_model *m = NULL;
    SD_CHECK(specdec_model_load(p, NULL, &m) == SPECDEC_OK, "load %s: %s", p, specdec_last_error());
    return m;
}

/* A copy of m's description whose layers are a copy too (alter freely; views still borrowed). */
typedef struct alt {
    sd_weights w;
    sd_layer layers[MAX_LAYERS];
} alt;

static void alt_init(alt *a, const specdec_model *m) {
    a->w = m->w;
    SD_CHECK(m->w.cfg.n_layers <= MAX_LAYERS, "fixture has %d layers", (int)m->w.cfg.n_layers);
    memcpy(a->layers, m->w.layers, sizeof(sd_layer) * (size_t)m->w.cfg.n_layers);
    a->w.layers = a->layers;
}

static void refused(const char *what, const alt *a, specdec_status want, const char *fragment) {
    sd_errbuf eb = {{0}};
    specdec_status st = sd_weights_validate(&a->w, &eb);
    SD_CHECK(st == want && strstr(eb.msg, fragment) != NULL, "%s: status %s (expected %s), message '%s' lacks '%s'",
             what, specdec_status_string(st), specdec_status_string(want), eb.msg, fragment);
}

static void olmo2(void) {
    specdec_model *m = load("olmo2");
    if (!m) return;
    const sd_config *c = &m->w.cfg;
    const int64_t Q = (int64_t)c->n_heads * c->head_dim, KV = (int64_t)c->n_kv_heads * c->head_dim;
    for (int32_t l = 0; l < c->n_layers; l++) {
        const sd_layer *L = &m->w.layers[l];
        SD_CHECK(!L->attn_norm.data && !L->ffn_norm.data && L->attn_post_norm.data && L->ffn_post_norm.data,
                 "olmo2 layer %d: post norms only", (int)l);
        SD_CHECK(L->q_norm.shape[0] == Q && L->k_norm.shape[0] == KV && Q != c->head_dim,
                 "olmo2 layer %d: q_norm [%lld], k_norm [%lld]: the whole projections (%lld, %lld)", (int)l,
                 (long long)L->q_norm.shape[0], (long long)L->k_norm.shape[0], (long long)Q, (long long)KV);
    }
    SD_CHECK(sd_weights_validate(&m->w, NULL) == SPECDEC_OK, "olmo2: the loaded description validates");
    const char *why = sd_cfg_cpu_only(c);
    SD_CHECK(why && strstr(why, "whole projection"), "olmo2: CPU-only for its q/k norms (%s)", why ? why : "NULL");
    alt a;
    alt_init(&a, m);
    a.layers[1].q_norm.shape[0] = c->head_dim;
    refused("olmo2 per-head q_norm", &a, SPECDEC_ERR_MODEL_MISMATCH, "self_attn.q_norm.weight has shape");
    alt_init(&a, m);
    a.layers[0].attn_norm = a.layers[0].attn_post_norm;
    refused("olmo2 input norm present", &a, SPECDEC_ERR_MODEL_MISMATCH,
            "input_layernorm.weight is present but the configuration does not use it");
    alt_init(&a, m);
    a.layers[2].ffn_post_norm.data = NULL;
    refused("olmo2 post norm missing", &a, SPECDEC_ERR_MODEL_MISMATCH, "post_feedforward_layernorm.weight missing");
    alt_init(&a, m);
    a.w.cfg.qk_norm = 1;
    refused("olmo2 both q/k norms", &a, SPECDEC_ERR_FORMAT, "per-head and whole-projection q/k norms");
    alt_init(&a, m);
    a.w.cfg.sandwich_norms = 0;
    refused("olmo2 post-only without post norms", &a, SPECDEC_ERR_FORMAT, "post-only norms need");
    alt_init(&a, m);
    a.w.cfg.post_norms_only = 0; /* a Gemma-2-style sandwich then needs the pre-norms */
    refused("olmo2 read as sandwich", &a, SPECDEC_ERR_MODEL_MISMATCH, "input_layernorm.weight missing");
    specdec_model_free(m);
}

static void olmoe(void) {
    specdec_model *m = load("olmoe");
    if (!m) return;
    const sd_config *c = &m->w.cfg;
    SD_CHECK(c->qk_norm_whole && c->clip_qkv == 1.5f && !c->norm_topk_prob && c->n_experts == 6 &&
                 c->n_experts_used == 3,
             "olmoe: the fixture's configuration");
    for (int32_t l = 0; l < c->n_layers; l++)
        SD_CHECK(m->w.layers[l].experts && m->w.layers[l].attn_norm.data &&
                     m->w.layers[l].k_norm.shape[0] == (int64_t)c->n_kv_heads * c->head_dim,
                 "olmoe layer %d: experts, a pre-norm block, k_norm over the whole k", (int)l);
    SD_CHECK(sd_weights_validate(&m->w, NULL) == SPECDEC_OK, "olmoe: the loaded description validates");
    SD_CHECK(sd_cfg_cpu_only(c) != NULL, "olmoe: CPU-only");
    alt a;
    alt_init(&a, m);
    a.layers[0].k_norm.shape[0] = c->head_dim;
    refused("olmoe per-head k_norm", &a, SPECDEC_ERR_MODEL_MISMATCH, "self_attn.k_norm.weight has shape");
    alt_init(&a, m);
    a.w.cfg.clip_qkv = NAN;
    refused("olmoe NaN clip", &a, SPECDEC_ERR_FORMAT, "clip_qkv");
    specdec_model_free(m);
}

static void granite_smollm3(void) {
    specdec_model *m = load("granite");
    if (m) {
        const sd_config *c = &m->w.cfg;
        SD_CHECK(c->embed_scale == 2.5f && c->residual_scale == 0.4f && c->attn_scale == 0.3f &&
                     c->logits_divisor == 3.0f,
                 "granite: the fixture's multipliers");
        const char *why = sd_cfg_cpu_only(c);
        SD_CHECK(why && strstr(why, "residual"), "granite: CPU-only for its residual multiplier (%s)",
                 why ? why : "NULL");
        alt a;
        alt_init(&a, m);
        a.w.cfg.logits_divisor = -3.0f;
        refused("granite negative logits_scaling", &a, SPECDEC_ERR_FORMAT, "logits_scaling");
        alt_init(&a, m);
        a.w.cfg.residual_scale = INFINITY;
        refused("granite infinite residual multiplier", &a, SPECDEC_ERR_FORMAT, "residual multiplier");
        specdec_model_free(m);
    }
    m = load("granite_moe");
    if (m) { /* each expert's gate rows, then its up rows, of the stacked input_linear: views */
        const sd_config *c = &m->w.cfg;
        const size_t esz = sd_dtype_size(m->w.dtype), gate = (size_t)c->moe_intermediate * c->hidden_size * esz;
        int views = 1;
        for (int32_t l = 0; l < c->n_layers; l++)
            for (int32_t e = 0; e < c->n_experts; e++) {
                const sd_expert *x = &m->w.layers[l].experts[e], *x0 = &m->w.layers[l].experts[0];
                views &= (const char *)x->w_up.data == (const char *)x->w_gate.data + gate &&
                         (const char *)x->w_gate.data == (const char *)x0->w_gate.data + 2 * gate * (size_t)e &&
                         x->w_down.shape[0] == c->hidden_size && x->w_down.shape[1] == c->moe_intermediate;
            }
        SD_CHECK(views && c->n_experts == 4 && c->norm_topk_prob && c->residual_scale == 0.6f,
                 "granite-moe: experts as views of input_linear [E, 2I, hidden] (gate rows, then up rows)");
        SD_CHECK(sd_weights_validate(&m->w, NULL) == SPECDEC_OK, "granite-moe: the loaded description validates");
        alt a;
        alt_init(&a, m);
        a.layers[0].router.data = NULL;
        refused("granite-moe router missing", &a, SPECDEC_ERR_MODEL_MISMATCH, "router");
        specdec_model_free(m);
    }
    m = load("smollm3_window");
    if (m) {
        const sd_config *c = &m->w.cfg;
        int rope = 0, slide = 0;
        for (int32_t l = 0; l < c->n_layers; l++) {
            rope |= (c->layer_no_rope[l] != 0) << l;
            slide |= (c->layer_sliding[l] != 0) << l;
        }
        SD_CHECK(rope == 0xa && slide == 0xa && c->sliding_window == 5,
                 "smollm3_window: layers 1 and 3 without rope, sliding within 5 (rope %x, sliding %x)", rope, slide);
        const char *why = sd_cfg_cpu_only(c);
        SD_CHECK(why && strstr(why, "no_rope_layers"), "smollm3: CPU-only for its layers without rope (%s)",
                 why ? why : "NULL");
        specdec_model_free(m);
    }
    m = load("llama_bias");
    if (m) {
        SD_CHECK(sd_cfg_cpu_only(&m->w.cfg) == NULL, "llama: nothing CPU-only");
        specdec_model_free(m);
    }
}

/* GLM-4 and ERNIE 4.5: the sandwich norms read under GLM's names, gate_up_proj as two views of one
 * tensor, q/k/v biases without an o bias; ERNIE's biases on every projection. */
static void glm4_ernie(void) {
    specdec_model *m = load("glm4");
    if (m) {
        const sd_config *c = &m->w.cfg;
        const int64_t I = c->intermediate_size, H = c->hidden_size;
        for (int32_t l = 0; l < c->n_layers; l++) {
            const sd_layer *L = &m->w.layers[l];
            SD_CHECK(L->attn_norm.data && L->attn_post_norm.data && L->ffn_norm.data && L->ffn_post_norm.data &&
                         L->bq.data && L->bk.data && L->bv.data && !L->bo.data && !L->b_gate.data,
                     "glm4 layer %d: four norms, q/k/v biases, no o / MLP bias", (int)l);
            SD_CHECK(L->w_up.data == (const char *)L->w_gate.data + (size_t)(I * H) * sd_dtype_size(L->w_gate.dtype),
                     "glm4 layer %d: gate and up are the two halves of gate_up_proj", (int)l);
        }
        SD_CHECK(sd_weights_validate(&m->w, NULL) == SPECDEC_OK, "glm4: the loaded description validates");
        alt a;
        alt_init(&a, m);
        a.layers[1].ffn_post_norm.data = NULL;
        refused("glm4 post_mlp_layernorm missing", &a, SPECDEC_ERR_MODEL_MISMATCH, "post_feedforward_layernorm");
        alt_init(&a, m);
        a.layers[0].bo = a.layers[0].bq;
        refused("glm4 o bias present", &a, SPECDEC_ERR_MODEL_MISMATCH, "o_proj.bias");
        specdec_model_free(m);
    }
    m = load("ernie4_5");
    if (m) {
        const sd_layer *L = &m->w.layers[0];
        SD_CHECK(L->bq.data && L->bo.data && L->b_gate.data && L->b_up.data && L->b_down.data &&
                     m->w.lm_head.data == m->w.tok_embd.data && m->w.cfg.rope_interleaved,
                 "ernie4_5: use_bias biases every projection, tied embeddings, interleaved rope");
        specdec_model_free(m);
    }
}

/* GLM-4.5 (fixture glm4_moe: 3 layers, first_k_dense_replace 1, 2 shared experts of 16, an MTP
 * layer 3 with shapes no decoder layer has). */
static void glm4_moe(void) {
    specdec_model *m = load("glm4_moe");
    if (!m) return;
    const sd_config *c = &m->w.cfg;
    SD_CHECK(c->n_layers == 3 && c->shared_expert_intermediate == 32 && c->shared_ungated && c->moe_route == SD_ROUTE_SIGMOID_GROUPED,
             "glm4_moe: 3 decoder layers (the MTP layer is not one), shared experts 2 x 16 wide");
    const sd_layer *L0 = &m->w.layers[0];
    SD_CHECK(!L0->experts && !L0->router.data && !L0->router_score_bias.data && L0->w_gate.data,
             "glm4_moe layer 0: dense (first_k_dense_replace 1)");
    for (int32_t l = 1; l < c->n_layers; l++) {
        const sd_layer *L = &m->w.layers[l];
        SD_CHECK(L->experts && L->router.data && L->router_score_bias.data && L->router_score_bias.shape[0] == 8 &&
                     L->shared && L->shared->w_down.shape[1] == 32 && !L->shared_gate.data && !L->router_bias.data &&
                     L->q_norm.data && L->bq.data && !L->bo.data,
                 "glm4_moe layer %d: router, score bias [8], experts, ungated shared expert, q/k norms and biases",
                 (int)l);
    }
    SD_CHECK(sd_weights_validate(&m->w, NULL) == SPECDEC_OK, "glm4_moe: the loaded description validates");
    SD_CHECK(sd_cfg_cpu_only(c) != NULL, "glm4_moe: CPU-only");
    alt a;
    alt_init(&a, m);
    a.layers[2].router_score_bias.data = NULL;
    refused("glm4_moe score bias missing", &a, SPECDEC_ERR_MODEL_MISMATCH, "router score bias is missing");
    alt_init(&a, m);
    a.layers[1].shared_gate = a.layers[1].router;
    refused("glm4_moe shared gate present", &a, SPECDEC_ERR_MODEL_MISMATCH, "shared expert gate is present");
    alt_init(&a, m);
    a.layers[1].shared = NULL;
    refused("glm4_moe shared expert missing", &a, SPECDEC_ERR_MODEL_MISMATCH, "shared expert is missing");
    alt_init(&a, m);
    a.w.cfg.moe_route = SD_ROUTE_SOFTMAX; /* a softmax router given a score bias */
    refused("glm4_moe score bias on a softmax router", &a, SPECDEC_ERR_MODEL_MISMATCH, "router score bias is present");
    alt_init(&a, m);
    a.layers[1].router_score_bias.shape[0] = 7;
    refused("glm4_moe score bias shape", &a, SPECDEC_ERR_MODEL_MISMATCH, "e_score_correction_bias");
    alt_init(&a, m);
    a.layers[0].router_score_bias = a.layers[1].router_score_bias;
    refused("glm4_moe score bias on a dense layer", &a, SPECDEC_ERR_MODEL_MISMATCH, "makes its MLP dense");
    specdec_model_free(m);
}

/* DeepSeek-V3 (fixtures deepseek_v3: q latent of 12, kv latent of 10, heads rope 4 + nope 6, values 5;
 * deepseek_v3_plain: q_proj, attention biases). */
static void deepseek_v3(void) {
    specdec_model *m = load("deepseek_v3");
    if (m) {
        const sd_config *c = &m->w.cfg;
        SD_CHECK(c->mla && c->head_dim == 10 && sd_cfg_rope_dim(c) == 4 && c->q_lora_rank == 12 &&
                     c->kv_lora_rank == 10 && c->v_head_dim == 5 && c->n_layers == 3,
                 "deepseek_v3: latent attention widths, 3 decoder layers (the MTP layer is not one)");
        for (int32_t l = 0; l < c->n_layers; l++) {
            const sd_layer *L = &m->w.layers[l];
            SD_CHECK(!L->wq.data && !L->wk.data && !L->wv.data && L->wq_a.shape[0] == 12 && L->q_a_norm.data &&
                         L->wq_b.shape[0] == 40 && L->wq_b.shape[1] == 12 && L->wkv_a.shape[0] == 14 &&
                         L->kv_a_norm.shape[0] == 10 && L->wkv_b.shape[0] == 44 && L->wo.shape[1] == 20 &&
                         !L->bq_a.data && !L->bkv_a.data && !L->bo.data,
                     "deepseek_v3 layer %d: q_a [12] -> q_b [4 x 10], kv_a [10 + 4], kv_b [4 x (6 + 5)], o over 4 x 5",
                     (int)l);
        }
        SD_CHECK(!m->w.layers[0].experts && m->w.layers[1].experts && m->w.layers[1].router_score_bias.data,
                 "deepseek_v3: layer 0 dense, the others sparse with a score bias");
        SD_CHECK(sd_weights_validate(&m->w, NULL) == SPECDEC_OK, "deepseek_v3: the loaded description validates");
        specdec_model_info info;
        SD_CHECK(specdec_model_get_info(m, &info) == SPECDEC_OK && info.rope_type == SPECDEC_ROPE_YARN &&
                     !info.rope_scaling_llama3 && info.head_dim == 10,
                 "deepseek_v3: model info gives the yarn rope (rope_type %d)", (int)info.rope_type);
        sd_runner_group *g = NULL;
        SD_CHECK(sd_cpu_group_create(&m->w, 16, 8, 1, 16, &g, NULL) == SPECDEC_OK && sd_cpu_group_kv_floats(g) == 14,
                 "deepseek_v3: the CPU cache holds the latent, 10 + 4 floats per token and layer (got %lld; expanded: "
                 "2 x 4 x 10)",
                 g ? (long long)sd_cpu_group_kv_floats(g) : -1LL);
        sd_runner_group_destroy(g);
        alt a;
        alt_init(&a, m);
        a.layers[1].wkv_b.data = NULL;
        refused("deepseek_v3 kv_b missing", &a, SPECDEC_ERR_MODEL_MISMATCH, "kv_b_proj");
        alt_init(&a, m);
        a.layers[0].wk = a.layers[0].wq_b;
        refused("deepseek_v3 k_proj present", &a, SPECDEC_ERR_MODEL_MISMATCH, "k_proj.weight is present");
        alt_init(&a, m);
        a.layers[2].wq = a.layers[2].wq_b;
        refused("deepseek_v3 q_proj beside the q latent", &a, SPECDEC_ERR_MODEL_MISMATCH, "q_proj.weight is present");
        alt_init(&a, m);
        a.layers[0].wo.shape[1] = 40; /* o over n_heads x head_dim instead of x v_head_dim */
        refused("deepseek_v3 o_proj width", &a, SPECDEC_ERR_MODEL_MISMATCH, "o_proj");
        alt_init(&a, m);
        a.layers[1].q_a_norm.data = NULL;
        refused("deepseek_v3 q_a_layernorm missing", &a, SPECDEC_ERR_MODEL_MISMATCH, "q_a_layernorm");
        specdec_model_free(m);
    }
    m = load("deepseek_v3_plain");
    if (m) {
        const sd_layer *L = &m->w.layers[0];
        SD_CHECK(L->wq.data && !L->wq_a.data && !L->wq_b.data && L->bkv_a.data && L->bo.data && !L->bq_a.data &&
                     m->w.cfg.q_lora_rank == 0 && !m->w.cfg.rope_interleaved,
                 "deepseek_v3_plain: q_proj, kv_a and o biases, rotate-half rope");
        SD_CHECK(sd_weights_validate(&m->w, NULL) == SPECDEC_OK, "deepseek_v3_plain: validates");
        alt a;
        alt_init(&a, m);
        a.layers[0].wq_a = a.layers[0].wq;
        refused("deepseek_v3_plain q latent without q_lora_rank", &a, SPECDEC_ERR_MODEL_MISMATCH, "q_a_proj");
        alt_init(&a, m);
        a.layers[0].bkv_a.data = NULL;
        refused("deepseek_v3_plain kv_a bias missing", &a, SPECDEC_ERR_MODEL_MISMATCH, "kv_a_proj_with_mqa.bias");
        specdec_model_free(m);
    }
    m = load("deepseek_v2_grouped"); /* softmax routing: no score bias; the shared expert as V3's */
    if (m) {
        const sd_layer *L = &m->w.layers[1];
        SD_CHECK(m->w.cfg.moe_route == SD_ROUTE_SOFTMAX_GROUPED && L->experts && !L->router_score_bias.data &&
                     L->shared && !L->shared_gate.data && L->wq_a.data && L->bq_a.data && L->bkv_a.data,
                 "deepseek_v2_grouped: softmax router without a score bias, ungated shared expert, q latent with "
                 "biases");
        SD_CHECK(sd_weights_validate(&m->w, NULL) == SPECDEC_OK, "deepseek_v2_grouped: validates");
        alt a;
        alt_init(&a, m);
        a.layers[0].router_score_bias = a.layers[0].bq_a;
        refused("deepseek_v2 score bias present", &a, SPECDEC_ERR_MODEL_MISMATCH, "router score bias is present");
        specdec_model_free(m);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    g_fx = argv[1];
    olmo2();
    olmoe();
    granite_smollm3();
    glm4_ernie();
    glm4_moe();
    deepseek_v3();
    return sd_test_done();
}

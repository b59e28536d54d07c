/* fuzz_config.c — fuzz target: config.json text through sd_config_parse(). A
 * successful parse must give sizes within the documented bounds and consistent heads,
 * and a model description the forward can run: rotary dimensions even and within the
 * head, rope parameters of its type usable, a window >= 1 on every sliding layer,
 * finite non-negative scales, caps, multipliers and clips, one kind of q/k norm, post-only
 * norms only with their post-sublayer norms, a known activation, a sigmoid router's groups that
 * can fill its top-k, MoE layers only where the CUDA backend refuses them, latent attention widths
 * that make up the head. */
#include "fuzz_common.h"
#include <math.h>

#include "sd_config.h"

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_config c;
    sd_errbuf eb;
    specdec_status st = sd_config_parse((const char *)data, size, "config.json", &c, &eb);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(eb.msg[0] != '\0');
        return (int)st;
    }
    sd_fuzz_require(c.vocab_size >= 1 && c.vocab_size <= SD_CFG_MAX_VOCAB);
    sd_fuzz_require(c.hidden_size >= 1 && c.hidden_size <= SD_CFG_MAX_HIDDEN);
    sd_fuzz_require(c.n_layers >= 1 && c.n_layers <= SD_CFG_MAX_LAYERS);
    sd_fuzz_require(c.n_kv_heads >= 1 && c.n_heads % c.n_kv_heads == 0);
    sd_fuzz_require(c.head_dim >= 2 && c.head_dim % 2 == 0 && c.head_dim <= SD_CFG_MAX_HEAD_DIM);
    sd_fuzz_require(c.n_eos >= 0 && c.n_eos <= SPECDEC_MAX_EOS);
    for (int i = 0; i < c.n_eos; i++) sd_fuzz_require(c.eos_ids[i] >= 0 && c.eos_ids[i] < c.vocab_size);
    sd_fuzz_require(c.bos_id >= -1 && c.bos_id < c.vocab_size);
    sd_fuzz_require(c.rms_norm_eps > 0 && c.rope_theta >= 1);
    if (c.rope_type == SD_ROPE_LLAMA3) sd_fuzz_require(c.rope_high_freq_factor > c.rope_low_freq_factor);
    const int32_t rd = sd_cfg_rope_dim(&c);
    sd_fuzz_require(rd >= 2 && rd % 2 == 0 && rd <= c.head_dim);
    if (c.rope_type == SD_ROPE_LINEAR || c.rope_type == SD_ROPE_DYNAMIC || c.rope_type == SD_ROPE_YARN)
        sd_fuzz_require(c.rope_factor > 0 && isfinite(c.rope_factor));
    if (c.rope_type == SD_ROPE_DYNAMIC) sd_fuzz_require(rd > 2);
    if (c.rope_type == SD_ROPE_YARN || c.rope_type == SD_ROPE_LONGROPE)
        sd_fuzz_require(c.rope_original_max_pos > 0 && c.rope_attn_factor > 0 && isfinite(c.rope_attn_factor));
    if (c.rope_type == SD_ROPE_LONGROPE)
        for (int32_t i = 0; i < rd / 2; i++) sd_fuzz_require(c.rope_short_factor[i] > 0 && c.rope_long_factor[i] > 0);
    for (int32_t l = 0; l < c.n_layers; l++) sd_fuzz_require(!c.layer_sliding[l] || c.sliding_window >= 1);
    sd_fuzz_require(c.attn_scale >= 0 && isfinite(c.attn_scale) && c.attn_softcap >= 0 && isfinite(c.attn_softcap));
    sd_fuzz_require(c.final_softcap >= 0 && isfinite(c.final_softcap) && c.embed_scale >= 0 && isfinite(c.embed_scale));
    sd_fuzz_require((unsigned)c.act <= (unsigned)SD_ACT_GELU);
    sd_fuzz_require(c.residual_scale >= 0 && isfinite(c.residual_scale) && c.logits_divisor >= 0 &&
                    isfinite(c.logits_divisor) && c.clip_qkv >= 0 && isfinite(c.clip_qkv));
    sd_fuzz_require(!(c.qk_norm && c.qk_norm_whole) && (!c.post_norms_only || c.sandwich_norms));
    /* interleaved rotary pairs: a flag (both backends rotate them, core/sd_math.h sd_rope_pair) */
    sd_fuzz_require(c.rope_interleaved == 0 || c.rope_interleaved == 1);
    /* DeepSeek-V3 / GLM-4.5 routing: groups of >= 2 experts dividing them, enough experts in the
     * competing groups, a positive finite scale, an ungated shared expert of positive width */
    if (c.moe_route != SD_ROUTE_SOFTMAX)
        sd_fuzz_require(c.n_group >= 1 && c.n_experts % c.n_group == 0 &&
                        c.n_experts / c.n_group >= (c.moe_route == SD_ROUTE_SIGMOID_GROUPED ? 2 : 1) &&
                        c.topk_group >= 1 && c.topk_group <= c.n_group &&
                        (int64_t)c.topk_group * (c.n_experts / c.n_group) >= c.n_experts_used &&
                        c.routed_scaling > 0 && isfinite(c.routed_scaling));
    sd_fuzz_require(!c.shared_ungated || c.shared_expert_intermediate > 0);
    /* latent attention: rope + nope = head_dim, values within the head, one key/value head per head,
     * positive latents, CPU only */
    if (c.mla)
        sd_fuzz_require(rd + c.qk_nope_dim == c.head_dim && c.v_head_dim >= 1 && c.v_head_dim <= c.head_dim &&
                        c.n_kv_heads == c.n_heads && c.kv_lora_rank >= 1 && c.q_lora_rank >= 0 &&
                        sd_cfg_cpu_only(&c) != NULL);
    else
        sd_fuzz_require(!c.q_lora_rank && !c.kv_lora_rank && !c.qk_nope_dim && !c.v_head_dim);
    for (int32_t l = 0; l < c.n_layers; l++) sd_fuzz_require(!c.layer_moe[l] || sd_cfg_cpu_only(&c));
    /* the frequencies of both layer kinds at two context sizes are finite and positive */
    const int32_t ctxs[2] = {1, 1 << 20};
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) {
            sd_rope_spec rp;
            sd_cfg_rope_params(&c, ctxs[j], k, &rp);
            for (int32_t i = 0; i < rd / 2; i++) {
                double f = sd_rope_spec_inv_freq(&rp, i);
                sd_fuzz_require(isfinite(f) && f >= 0);
            }
        }
    return 0;
}

SD_FUZZ_DEFINE_ENTRY

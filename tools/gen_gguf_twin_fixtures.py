#!/usr/bin/env python3
"""gen_gguf_twin_fixtures.py — GGUF (llama.cpp) twins of the mixture-of-experts and Phi-3 fixtures, with
transformers' fp32 logits.

Each fixture converts one of tests/models/fixtures' tiny checkpoints (written by gen_model_fixtures.py) as
llama.cpp's convert_hf_to_gguf.py does for its architecture: Qwen3-MoE as "qwen3moe", Qwen2-MoE as
"qwen2moe" (shared expert, its gate stored 1-D), Mixtral as "llama" with llama.expert_count (q / k rows
permuted for ggml's rope); every expert's gate / up / down stacked into one [E, rows, cols] tensor
(blk.N.ffn_{gate,up,down}_exps), the router as blk.N.ffn_gate_inp, a dense layer (mlp_only_layers) as
plain ffn_gate / ffn_up / ffn_down. Phi-3 as "phi3": the fused qkv_proj as attn_qkv and gate_up_proj as
ffn_up (quantized whole: specdec splits the repacked matrix into row views), rope.dimension_count the
rotary part (Phi-4-mini's partial rotary), longrope as rope_factors_short / rope_factors_long tensors with
phi3.rope.scaling.original_context_length and .attn_factor, the window as phi3.attention.sliding_window.
Gemma / Gemma 2 / Gemma 3 as "gemma" / "gemma2" / "gemma3": every RMSNorm weight stored as (1 + w) (the
converter's norm shift), Gemma 2 / 3's four norms a layer (attn_norm, post_attention_norm, ffn_norm = the
pre-MLP one, post_ffw_norm), soft-capping and the window as metadata, Gemma 3's global rope base and linear
scaling; what the file cannot say is set in the reference to what llama.cpp runs (query_pre_attn_scalar =
head_dim, the window on layer l when l % 2 < 1 / l % 6 < 5, Gemma 3's sliding layers at base 10000): so
gguf_gemma3 converts a 7-layer source built here (SOURCES), whose sixth layer is global. GPT-OSS as
"gpt-oss": the source's MXFP4 expert codes unchanged, repacked into ggml's blocks (scale byte, elements 0-15
in the low nibbles, 16-31 in the high ones), gate_up split into ffn_gate_exps / ffn_up_exps (even / odd rows)
with their biases, the sinks as attn_sinks.weight; the reference at llama.cpp's window pattern and SwiGLU
constants, with the experts gguf-py decodes from the file. Matrices are
encoded in the ggml types FIXTURES assigns (gguf-py's quantizer; a type whose block does not divide the
rows stays F16); 1-D tensors F32. Then

    OUT/<name>/model.gguf        the checkpoint (no tokenizer: the source fixtures have none)
    OUT/<name>/ids.txt           the source fixture's ids
    OUT/<name>/logits.f32        transformers' logits for them, from the weights gguf-py decodes from the
                                 file (llama's q / k un-permuted), saved in the source's layout and loaded
                                 with from_pretrained (transformers fuses the experts itself)
    OUT/<name>/mtp_logits.f32, mtp.txt   gguf_glm4_moe: the MTP drafter's reference on the MTP block's decoded
                                 weights (gen_model_fixtures.mtp_reference; tests/models/test_mtp.c reads them)
    OUT/gguf_twin_manifest.txt   "<name> <T> <V> <n_ctx>" per fixture

Checks (printed; the script stops when one fails): every tensor read back by GGUFReader decodes to the
weights the reference used; the logits differ from the source fixture's (quantization happened) and each
position's top-2 margin exceeds gen_model_fixtures.MARGIN; where llama.cpp's routing differs from a plain
reading (qwen3moe renormalises the top-k weights, so does Mixtral), the logits without it differ by more
than the C test's tolerance.

Needs torch, transformers and gguf (run by hand; CI reads the committed files):
    /tmp/ht-venv/bin/python tools/gen_gguf_twin_fixtures.py [--out tests/models/fixtures]
"""
import argparse
import json
import math
import os
import re
import shutil
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_gguf_fixtures as ggf  # noqa: E402  (exits with a message without torch / transformers / gguf)

gguf, gmf, np, torch, transformers = ggf.gguf, ggf.gmf, ggf.np, ggf.torch, ggf.transformers
Q = gguf.GGMLQuantizationType

# name -> source fixture, gguf architecture, config edits for the reference (keys the GGUF cannot carry,
# set to what llama.cpp runs), {projection kind: ggml type}
FIXTURES = {
    "gguf_qwen3_moe": dict(src="qwen3_moe", arch="qwen3moe", edits={},
                           types={"attn": Q.Q8_0, "exps_gate": Q.Q4_0, "exps_up": Q.Q8_0, "exps_down": Q.Q5_1,
                                  "dense": Q.Q5_0, "router": Q.F32, "out": Q.Q8_0}),
    "gguf_qwen2_moe": dict(src="qwen2_moe_window", arch="qwen2moe",
                           edits={"use_sliding_window": False, "sliding_window": None},
                           types={"attn": Q.Q4_1, "exps_gate": Q.Q8_0, "exps_up": Q.Q5_0, "exps_down": Q.Q8_0,
                                  "dense": Q.Q8_0, "shexp": Q.Q4_0, "router": Q.F32, "out": Q.F16}),
    "gguf_mixtral": dict(src="mixtral", arch="llama", edits={},
                         types={"attn": Q.Q5_1, "exps_gate": Q.Q4_1, "exps_up": Q.Q8_0, "exps_down": Q.BF16,
                                "router": Q.F32, "out": Q.Q8_0}),
    # Phi-3: fused qkv / gate_up quantized whole, a sliding window (7 < 24 tokens)
    "gguf_phi3": dict(src="phi3_window", arch="phi3", edits={},
                      types={"attn": Q.Q8_0, "dense": Q.Q4_0, "out": Q.Q5_0}),
    # Phi-3.5: longrope (the long factors: 64 positions > 16 original), no window
    "gguf_phi35": dict(src="phi35_longrope", arch="phi3", edits={},
                       types={"attn": Q.Q8_0, "dense": Q.Q5_1, "out": Q.Q8_0}),
    # Phi-4-mini: partial rotary (12 of 16 dimensions), longrope, tied embeddings
    "gguf_phi4_mini": dict(src="phi4_mini", arch="phi3", edits={},
                           types={"attn": Q.Q8_0, "dense": Q.Q8_0, "out": Q.Q4_0}),
    # Llama with yarn rope (factor 4 over 16 original positions, beta_fast 8, beta_slow 0.5), q / k permuted
    "gguf_llama_yarn": dict(src="llama_rope_yarn", arch="llama", edits={}, moe=False,
                            types={"attn": Q.Q8_0, "dense": Q.Q4_0, "out": Q.Q8_0}),
    # GPT-OSS: MXFP4 experts (the source's codes, repacked into ggml's blocks, gate / up split), sinks,
    # biases, yarn; llama.cpp's window pattern (layer 0 slides) and SwiGLU constants (1.702, 7)
    "gguf_gpt_oss": dict(src="gpt_oss_mxfp4", arch="gpt-oss", moe=False,
                         edits={"layer_types": ["sliding_attention", "full_attention"], "swiglu_alpha": 1.702,
                                "swiglu_limit": 7.0},
                         types={"attn": Q.Q8_0, "router": Q.F32, "out": Q.Q8_0}),
    # SmolLM3: q / k permuted, llama.cpp's no-rope step 4 (layer 3 of 4) and no window
    "gguf_smollm3": dict(src="smollm3_window", arch="smollm3", moe=False,
                         edits={"no_rope_layer_interval": 4, "use_sliding_window": False, "sliding_window": None},
                         types={"attn": Q.Q8_0, "dense": Q.Q4_1, "out": Q.Q8_0}),
    # OLMo 2: post-norm blocks, whole-projection q / k norms
    "gguf_olmo2": dict(src="olmo2", arch="olmo2", edits={}, moe=False,
                       types={"attn": Q.Q5_0, "dense": Q.Q8_0, "out": Q.F16}),
    # Granite: q / k permuted, the four multipliers as *_scale keys, tied
    "gguf_granite": dict(src="granite", arch="granite", edits={}, moe=False,
                         types={"attn": Q.Q8_0, "dense": Q.Q4_0, "out": Q.Q8_0}),
    # GLM-4.5: sigmoid routing with the score bias, 2 shared experts, a dense first layer, half rotary, q / k
    # norms, biases; the MTP block (blk.3: its layer and nextn.*), which the target leaves out and an MTP load
    # reads (mtp_logits.f32 / mtp.txt: mtp_twin_reference); llama.cpp routes without groups
    "gguf_glm4_moe": dict(src="glm4_moe", arch="glm4moe", moe=False, edits={"n_group": 1, "topk_group": 1},
                          types={"attn": Q.Q8_0, "exps_gate": Q.Q4_0, "exps_up": Q.Q8_0, "exps_down": Q.F16,
                                 "shexp": Q.Q5_0, "dense": Q.Q8_0, "router": Q.F32, "out": Q.Q8_0}),
    # GLM-4-0414: sandwich norms under GLM's names, the fused gate_up as ffn_up, half rotary (adjacent pairs)
    "gguf_glm4": dict(src="glm4", arch="glm4", edits={}, moe=False,
                      types={"attn": Q.Q8_0, "dense": Q.Q5_1, "out": Q.Q8_0}),
    # OLMoE: whole-projection q / k norms, 6 experts top 3 not renormalised; its clip_qkv dropped (no key)
    "gguf_olmoe": dict(src="olmoe", arch="olmoe", edits={"clip_qkv": None},
                       types={"attn": Q.Q8_0, "exps_gate": Q.Q4_1, "exps_up": Q.Q8_0, "exps_down": Q.F16,
                              "router": Q.F32, "out": Q.Q8_0}),
    # ERNIE-4.5 dense: biases (use_bias), adjacent-pair rope, tied
    "gguf_ernie4_5": dict(src="ernie4_5", arch="ernie4_5", edits={}, moe=False,
                          types={"attn": Q.Q8_0, "dense": Q.Q4_0, "out": Q.Q8_0}),
    # EXAONE 4: post norms, per-head q / k norms, window 5 on the layers the pattern marks, NoPE global
    "gguf_exaone4": dict(src="exaone4_window", arch="exaone4", edits={}, moe=False,
                         types={"attn": Q.Q8_0, "dense": Q.Q8_0, "out": Q.Q4_1}),
    # Granite MoE: 4 experts top 2 (input_linear split into gate / up), the four multipliers, q / k permuted
    "gguf_granite_moe": dict(src="granite_moe", arch="granitemoe", edits={},
                             types={"attn": Q.Q8_0, "exps_gate": Q.Q4_0, "exps_up": Q.Q8_0, "exps_down": Q.F16,
                                    "router": Q.F32, "out": Q.Q8_0}),
    # DeepSeek-V2-Lite: q_proj (no q lora), softmax routing, 2 shared experts, a dense layer, yarn with
    # mscale_all_dim; kv_b_proj whole (attn_kv_b, as older converters wrote it)
    "gguf_deepseek_v2_lite": dict(src="deepseek_v2_lite", arch="deepseek2", edits={}, moe=False,
                                  types={"attn": Q.Q8_0, "exps_gate": Q.Q8_0, "exps_up": Q.Q8_0, "exps_down": Q.F16,
                                         "shexp": Q.F16, "dense": Q.Q8_0, "router": Q.F32, "out": Q.Q8_0}),
    # DeepSeek-V3: q lora, sigmoid routing with the score bias (llama.cpp: no groups), yarn (mscale equal to
    # mscale_all_dim: the only one the file carries), kv_b_proj split into attn_k_b / attn_v_b, MTP layer left out
    "gguf_deepseek_v3": dict(src="deepseek_v3", arch="deepseek2", kv_b_split=True, moe=False,
                             edits={"n_group": 1, "topk_group": 1,
                                    "rope_parameters": {"beta_fast": 8.0, "beta_slow": 1.0, "factor": 4.0,
                                                        "mscale": 0.6, "mscale_all_dim": 0.6,
                                                        "original_max_position_embeddings": 8, "rope_theta": 500.0,
                                                        "rope_type": "yarn"}},
                             types={"attn": Q.Q8_0, "exps_gate": Q.Q4_0, "exps_up": Q.Q8_0, "exps_down": Q.F16,
                                    "shexp": Q.F16, "dense": Q.Q8_0, "router": Q.F32, "out": Q.Q8_0}),
    # Gemma: (1 + w) norms stored shifted, tied embeddings quantized
    "gguf_gemma": dict(src="gemma", arch="gemma", edits={},
                       types={"attn": Q.Q4_1, "dense": Q.Q8_0, "out": Q.Q8_0}),
    # Gemma 2: soft-capping 2 / 15, window 4 on layers 0 and 2; llama.cpp's attention scale (head_dim)
    "gguf_gemma2": dict(src="gemma2", arch="gemma2", edits={"query_pre_attn_scalar": 16},
                        types={"attn": Q.Q8_0, "dense": Q.Q5_0, "out": Q.F16}),
    # Gemma 3: q / k norms, 7 layers (the sixth global: linear scaling 2, base 1000; the others base 10000);
    # the MLP in IQ4_NL (random blocks: gguf-py does not quantize to it)
    "gguf_gemma3": dict(src="gemma3_swa6", arch="gemma3", edits={},
                        types={"attn": Q.Q5_1, "dense": Q.IQ4_NL, "out": Q.Q4_0}),
    # Qwen2.5-VL's text as llama.cpp writes it ("qwen2vl": qwen2's tensors, rope.dimension_sections): the reference
    # the plain rope, which the sectioned rope is on text; q / k / v biases, tied; no window (Qwen2.5-VL's is off)
    "gguf_qwen2vl": dict(src="qwen2_window", arch="qwen2vl", moe=False,
                         edits={"use_sliding_window": False, "layer_types": ["full_attention"] * 3},
                         types={"attn": Q.Q8_0, "dense": Q.Q4_1, "out": Q.Q8_0}),
    # the codebook types IQ1-IQ3 (256-value blocks: a source 256 wide), one a projection; random blocks
    "gguf_qwen3_iq": dict(src="qwen3_wide", arch="qwen3", edits={}, moe=False,
                          types={"attn_q": Q.IQ2_XXS, "attn_k": Q.IQ2_XS, "attn_v": Q.IQ2_S,
                                 "attn_output": Q.IQ3_XXS, "ffn_gate": Q.IQ3_S, "ffn_up": Q.IQ1_S,
                                 "ffn_down": Q.IQ4_XS, "out": Q.Q4_K}),
}

# Sources built here (not in tests/models/fixtures): name -> gen_model_fixtures VARIANTS entry
SOURCES = {
    "qwen3_wide": lambda: (transformers.Qwen3Config, transformers.Qwen3ForCausalLM,
                           {**gmf.BASE, "hidden_size": 256, "intermediate_size": 512, "head_dim": 64}, False),
    "gemma3_swa6": lambda: (transformers.Gemma3TextConfig, transformers.Gemma3ForCausalLM,
                            {**gmf.BASE, "num_hidden_layers": 7, "head_dim": 16, "tie_word_embeddings": True,
                             "sliding_window": 4, "query_pre_attn_scalar": 16, "final_logit_softcapping": None,
                             "layer_types": ["sliding_attention"] * 5 + ["full_attention", "sliding_attention"],
                             "rope_parameters": {
                                 "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000.0},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}, True),
}
GEMMA = ("gemma", "gemma2", "gemma3")
LLAMA_LIKE = ("llama", "smollm3", "granite", "granitemoe")  # LlamaModel's converters: q / k rows permuted for ggml's rope

LAYER = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
         "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
         "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
         "mlp.gate": "ffn_gate_inp", "block_sparse_moe.gate": "ffn_gate_inp", "block_sparse_moe.router.layer": "ffn_gate_inp",
         "mlp.shared_expert.gate_proj": "ffn_gate_shexp", "mlp.shared_expert.up_proj": "ffn_up_shexp",
         "mlp.shared_expert.down_proj": "ffn_down_shexp", "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
         "self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up"}
OSS = {"post_attention_layernorm": "post_attention_norm", "mlp.router": "ffn_gate_inp", "self_attn.sinks": "attn_sinks"}
# GLM-4.5 (Glm4MoeModel): the pre-MLP norm, the ungated shared experts, the router's score bias, the MTP
# block's own tensors (nextn.*)
GLM = {"post_attention_layernorm": "post_attention_norm", "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
       "mlp.shared_experts.up_proj": "ffn_up_shexp", "mlp.shared_experts.down_proj": "ffn_down_shexp",
       "e_score_correction_bias": "exp_probs_b.bias", "eh_proj": "nextn.eh_proj", "enorm": "nextn.enorm",
       "hnorm": "nextn.hnorm", "shared_head.head": "nextn.shared_head_head",
       "shared_head.norm": "nextn.shared_head_norm", "embed_tokens": "nextn.embed_tokens"}
GLM4 = {"post_self_attn_layernorm": "post_attention_norm", "post_mlp_layernorm": "post_ffw_norm",
        "mlp.gate_up_proj": "ffn_up"}  # Glm4Model (gguf-py's GLM4 names)
SANDWICH = {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
            "post_feedforward_layernorm": "post_ffw_norm"}  # Gemma 2 / 3
GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
          "lm_head.weight": "output.weight"}
EXPERT = re.compile(r"model\.layers\.(\d+)\.(?:mlp|block_sparse_moe)\.experts\.(\d+)\.(\w+)\.weight")
PROJ = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down", "w1": "gate", "w3": "up", "w2": "down"}


def kind_of(g):
    """The FIXTURES type key of gguf tensor g."""
    part = g.split(".")[-2] if g.startswith("blk.") else g.split(".")[0]
    if part.endswith("_exps"):
        return "exps_" + part[4:-5]
    if part.endswith("_shexp"):
        return "shexp"
    if part == "ffn_gate_inp":
        return "router"
    if part in ("ffn_gate", "ffn_up", "ffn_down"):  # (Phi-3's ffn_up: gate and up)
        return "dense"
    return "out" if part in ("token_embd", "output") else "attn"


def type_of(spec, g):
    """The ggml type FIXTURES gives gguf tensor g: by its own name (e.g. "attn_q") first, else by kind_of."""
    part = g.split(".")[-2] if g.startswith("blk.") else g.split(".")[0]
    return spec["types"].get(part, spec["types"].get(kind_of(g)))


def encode(w, qtype):
    """w float32 [..., rows, cols] -> (stored array, ggml type): F16 when qtype's block does not divide cols;
    a type gguf-py cannot quantize (ggf.KQ_FP16: K-quants, IQ1_S .. IQ4_XS) as random blocks of w's size
    (ggf.kquant_random, seeded by the matrix's shape and first value), which replace w."""
    if qtype in (Q.F32, Q.F16, Q.BF16) or w.shape[-1] % gguf.GGML_QUANT_SIZES[qtype][0]:
        qtype = Q.F16 if qtype != Q.F32 and qtype != Q.BF16 else qtype
    if qtype == Q.F32:
        return w, qtype
    if qtype == Q.F16:
        return w.astype(np.float16), qtype
    if qtype in ggf.KQ_FP16:
        rows, cols = int(np.prod(w.shape[:-1])), w.shape[-1]
        rng = np.random.default_rng(zlib.crc32(np.ascontiguousarray(w).tobytes()[:64]))
        raw = ggf.kquant_random(rows, cols, qtype, 1.0 / math.sqrt(cols), rng)
        return raw.reshape(*w.shape[:-1], -1), qtype
    return gguf.quants.quantize(w, qtype), qtype


def gguf_tensors(src_dir, spec, cfg):
    """{gguf name: (ggml type, stored array, decoded float32 in the HF layout, [HF names])}."""
    from safetensors.numpy import load_file
    state = load_file(os.path.join(src_dir, "model.safetensors"))
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    experts, out = {}, {}
    for name, w in state.items():
        w = w.astype(np.float32)
        m = EXPERT.fullmatch(name)
        if m:
            experts.setdefault((int(m[1]), PROJ[m[3]]), {})[int(m[2])] = (name, w)
            continue
        p = name.split(".")
        if name in GLOBAL:
            g = GLOBAL[name]
        elif spec["arch"] == "glm4moe" and (".".join(p[3:-1]) in GLM or p[-1] == "e_score_correction_bias"):
            g = f"blk.{p[2]}.{GLM[p[-1] if p[-1] == 'e_score_correction_bias' else '.'.join(p[3:-1])]}"
            g += "" if g.endswith(".bias") else "." + p[-1]
        else:
            part = ".".join(p[3:-1])
            post = spec["arch"] in GEMMA[1:] + ("olmo2", "exaone4") and part in SANDWICH
            glm = spec["arch"] == "glm4" and part in GLM4
            g = f"blk.{p[2]}.{GLM4[part] if glm else SANDWICH[part] if post else LAYER[part]}.{p[-1]}"
        if spec["arch"] in GEMMA and name.endswith("norm.weight"):
            stored = w + np.float32(1.0)  # the converter's norm shift; the reference gets stored - 1
            out[g] = (Q.F32, stored, (stored - np.float32(1.0)).reshape(state[name].shape), [name])
            continue
        heads = None
        if spec["arch"] in LLAMA_LIKE and (".q_proj." in name or ".k_proj." in name):
            heads = n_head if ".q_proj." in name else n_kv
            w = ggf.permute_qk(w, heads)
        if g.endswith("ffn_gate_inp_shexp.weight"):
            w = w.reshape(-1)  # the converter stores the shared expert's gate 1-D
        data, qt = encode(w, type_of(spec, g)) if w.ndim > 1 else (w, Q.F32)
        deq = gguf.quants.dequantize(data, qt).astype(np.float32).reshape(w.shape)
        if heads is not None:
            deq = ggf.unpermute_qk(deq, heads)
        out[g] = (qt, data, deq.reshape(state[name].shape), [name])
    for (layer, proj), es in sorted(experts.items()):
        names = [es[e][0] for e in sorted(es)]
        w = np.stack([es[e][1] for e in sorted(es)])
        g = f"blk.{layer}.ffn_{proj}_exps.weight"
        data, qt = encode(w, type_of(spec, g))
        out[g] = (qt, data, gguf.quants.dequantize(data, qt).astype(np.float32).reshape(w.shape), names)
    return out


def mxfp4_codes(blocks):
    """transformers' MXFP4 bytes [..., 16] (element 2j in byte j's low nibble, 2j + 1 in its high one) ->
    the 32 codes of each block [..., 32]."""
    return np.stack([blocks & 15, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)


def ggml_mxfp4(blocks, scales):
    """[..., G, 16] codes + [..., G] scales -> ggml's MXFP4 rows [..., G * 17]: per block the scale byte, then
    16 bytes whose low nibbles are elements 0-15 and high nibbles 16-31."""
    c = mxfp4_codes(blocks)
    qs = (c[..., :16] | (c[..., 16:] << 4)).astype(np.uint8)
    return np.concatenate([scales[..., None], qs], axis=-1).reshape(*scales.shape[:-1], -1)


def oss_tensors(src_dir, spec):
    """GPT-OSS as llama.cpp's converter writes it: {gguf name: (type, stored, decoded HF-layout float, [HF
    names])}, the experts' entries with no HF name, plus the experts in transformers' float layout
    (gate_up_proj [E, H, 2I] with gate / up columns interleaved, down_proj [E, I, H]) for the reference."""
    from safetensors.numpy import load_file
    state = load_file(os.path.join(src_dir, "model.safetensors"))
    out, experts = {}, {}
    for name, w in state.items():
        p = name.split(".")
        if ".mlp.experts." in name:
            experts.setdefault(int(p[2]), {})[p[-1]] = w
            continue
        if name in GLOBAL:
            g = GLOBAL[name]
        else:
            part = ".".join(p[3:-1]) if p[-1] in ("weight", "bias") else ".".join(p[3:])
            g = f"blk.{p[2]}.{OSS.get(part) or LAYER[part]}.{p[-1] if p[-1] in ('weight', 'bias') else 'weight'}"
        w = w.astype(np.float32)
        data, qt = encode(w, type_of(spec, g)) if w.ndim > 1 else (w, Q.F32)
        out[g] = (qt, data, gguf.quants.dequantize(data, qt).astype(np.float32).reshape(w.shape), [name])
    hf = {}
    for layer, t in sorted(experts.items()):
        pre = f"model.layers.{layer}.mlp.experts."
        for proj, rows in (("gate", slice(0, None, 2)), ("up", slice(1, None, 2)), ("down", slice(None))):
            fused = "down_proj" if proj == "down" else "gate_up_proj"
            data = ggml_mxfp4(t[fused + "_blocks"][:, rows], t[fused + "_scales"][:, rows])
            deq = gguf.quants.dequantize(data, Q.MXFP4).astype(np.float32)  # [E, rows, cols]
            out[f"blk.{layer}.ffn_{proj}_exps.weight"] = (Q.MXFP4, data, deq, [])
            out[f"blk.{layer}.ffn_{proj}_exps.bias"] = (Q.F32, t[fused + "_bias"][:, rows].astype(np.float32),
                                                        t[fused + "_bias"][:, rows].astype(np.float32), [])
            hf[(layer, proj)] = deq
        gate, up = hf.pop((layer, "gate")), hf.pop((layer, "up"))
        gu = np.empty((gate.shape[0], 2 * gate.shape[1], gate.shape[2]), dtype=np.float32)
        gu[:, 0::2], gu[:, 1::2] = gate, up
        hf[pre + "gate_up_proj"] = np.ascontiguousarray(gu.transpose(0, 2, 1))
        hf[pre + "gate_up_proj_bias"] = t["gate_up_proj_bias"].astype(np.float32)
        hf[pre + "down_proj"] = np.ascontiguousarray(hf.pop((layer, "down")).transpose(0, 2, 1))
        hf[pre + "down_proj_bias"] = t["down_proj_bias"].astype(np.float32)
    return out, hf


def granitemoe_tensors(src_dir, spec, cfg):
    """Granite MoE as GraniteMoeModel writes it: the stacked input_linear [E, 2I, H] split into ffn_gate_exps /
    ffn_up_exps (first / second I rows), output_linear as ffn_down_exps, router.layer as ffn_gate_inp; the
    rest as gguf_tensors does (q / k permuted). Returns (tensors, the experts in transformers' layout)."""
    from safetensors.numpy import load_file, save_file
    state = load_file(os.path.join(src_dir, "model.safetensors"))
    stacked = {n: w for n, w in state.items() if ".block_sparse_moe.input_linear." in n
               or ".block_sparse_moe.output_linear." in n}
    with tempfile.TemporaryDirectory() as tmp:  # the rest through the common path
        save_file({n: w for n, w in state.items() if n not in stacked}, os.path.join(tmp, "model.safetensors"))
        out = gguf_tensors(tmp, spec, cfg)
    hf = {}
    for n, w in sorted(stacked.items()):
        layer = int(n.split(".")[2])
        w = w.astype(np.float32)
        parts = (("gate", w[:, :w.shape[1] // 2]), ("up", w[:, w.shape[1] // 2:])) if "input_linear" in n \
            else (("down", w),)
        decoded = []
        for proj, part in parts:
            g = f"blk.{layer}.ffn_{proj}_exps.weight"
            data, qt = encode(np.ascontiguousarray(part), type_of(spec, g))
            deq = gguf.quants.dequantize(data, qt).astype(np.float32).reshape(part.shape)
            out[g] = (qt, data, deq, [])
            decoded.append(deq)
        hf[n] = np.ascontiguousarray(np.concatenate(decoded, axis=1))
    return out, hf


DS = {"self_attn.q_a_proj": "attn_q_a", "self_attn.q_a_layernorm": "attn_q_a_norm", "self_attn.q_b_proj": "attn_q_b",
      "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa", "self_attn.kv_a_layernorm": "attn_kv_a_norm",
      "self_attn.kv_b_proj": "attn_kv_b", "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
      "mlp.shared_experts.up_proj": "ffn_up_shexp", "mlp.shared_experts.down_proj": "ffn_down_shexp"}


def ds_tensors(src_dir, spec, cfg):
    """DeepSeek as DeepseekV2Model writes it: MTP layers (>= num_hidden_layers) left out, the experts stacked,
    the score bias as exp_probs_b.bias; with spec["kv_b_split"] kv_b_proj split per head into attn_k_b
    [heads, kv_lora, nope] (the key part transposed) and attn_v_b [heads, v, kv_lora], else kept whole
    (attn_kv_b, older files). Returns (tensors, kv_b_proj put back together from the decoded parts)."""
    from safetensors.numpy import load_file, save_file
    state = load_file(os.path.join(src_dir, "model.safetensors"))
    L, NH = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    N, V, KL = cfg["qk_nope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
    keep, special, hf = {}, {}, {}
    for n, w in state.items():
        p = n.split(".")
        if n.startswith("model.layers.") and int(p[2]) >= L:
            continue  # the MTP layer: skip_mtp
        if n.startswith("model.layers.") and (".".join(p[3:-1]) in DS or p[-1] == "e_score_correction_bias"):
            special[n] = w.astype(np.float32)
        else:
            keep[n] = w
    with tempfile.TemporaryDirectory() as tmp:
        save_file(keep, os.path.join(tmp, "model.safetensors"))
        out = gguf_tensors(tmp, spec, cfg)
    for n, w in sorted(special.items()):
        p = n.split(".")
        if p[-1] == "e_score_correction_bias":
            out[f"blk.{p[2]}.exp_probs_b.bias"] = (Q.F32, w, w, [n])
            continue
        part, g = ".".join(p[3:-1]), f"blk.{p[2]}.{DS['.'.join(p[3:-1])]}.{p[-1]}"
        if part == "self_attn.kv_b_proj" and spec.get("kv_b_split"):
            kv = w.reshape(NH, N + V, KL)
            k_b, v_b = np.ascontiguousarray(kv[:, :N].transpose(0, 2, 1)), np.ascontiguousarray(kv[:, N:])
            dec = []
            for name, a in ((f"blk.{p[2]}.attn_k_b.weight", k_b), (f"blk.{p[2]}.attn_v_b.weight", v_b)):
                data, qt = encode(a, spec["types"]["attn"])
                d = gguf.quants.dequantize(data, qt).astype(np.float32).reshape(a.shape)
                out[name] = (qt, data, d, [])
                dec.append(d)
            hf[n] = np.ascontiguousarray(np.concatenate([dec[0].transpose(0, 2, 1), dec[1]], axis=1).reshape(w.shape))
            continue
        data, qt = encode(w, type_of(spec, g)) if w.ndim > 1 else (w, Q.F32)
        out[g] = (qt, data, gguf.quants.dequantize(data, qt).astype(np.float32).reshape(w.shape), [n])
    return out, hf


def phi3_rope(w, cfg):
    """Phi3MiniModel's rope metadata: the rotary dimensions, and for longrope the factor tensors, the
    original context and the attention factor (1 when not extended, else sqrt(1 + ln(s) / ln(original)))."""
    rp = cfg["rope_parameters"]
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    rot = int(rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)) * cfg["hidden_size"]) \
        // cfg["num_attention_heads"]
    w.add_rope_dimension_count(rot)
    if cfg.get("sliding_window"):
        w.add_sliding_window(cfg["sliding_window"])
    if rp.get("rope_type") != "longrope":
        return
    orig = rp["original_max_position_embeddings"]
    scale = cfg["max_position_embeddings"] / orig
    w.add_rope_scaling_attn_factors(1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(orig)))
    w.add_rope_scaling_orig_ctx_len(orig)
    w.add_tensor("rope_factors_long.weight", np.asarray(rp["long_factor"], dtype=np.float32))
    w.add_tensor("rope_factors_short.weight", np.asarray(rp["short_factor"], dtype=np.float32))
    if len(rp["long_factor"]) != rot // 2 or hd < rot:
        sys.exit(f"phi3: {len(rp['long_factor'])} factors for {rot} rotary dimensions")


def write_gguf(path, spec, cfg, tensors):
    """The file, metadata as the converter writes it for the architecture."""
    w = gguf.GGUFWriter(path, spec["arch"])
    for g, (qt, data, _, _) in tensors.items():
        w.add_tensor(g, data, raw_dtype=qt)
    if spec["arch"] == "phi3":
        phi3_rope(w, cfg)
    w.add_type(gguf.GGUFType.MODEL)
    w.add_block_count(cfg["num_hidden_layers"] + (cfg.get("num_nextn_predict_layers") or 0
                                                  if spec["arch"] == "glm4moe" else 0))
    if spec["arch"] == "deepseek2":  # DeepseekV2Model.set_gguf_parameters (older files: the heads' sizes direct)
        rope_dim, kl = cfg["qk_rope_head_dim"], cfg["kv_lora_rank"]
        w.add_kv_lora_rank(kl)
        if cfg.get("q_lora_rank"):
            w.add_q_lora_rank(cfg["q_lora_rank"])
        w.add_rope_dimension_count(rope_dim)
        w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_count(cfg["n_routed_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_shared_count(cfg["n_shared_experts"])
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        if cfg.get("norm_topk_prob"):
            w.add_expert_weights_norm(True)
        w.add_vocab_size(cfg["vocab_size"])
        if cfg["model_type"] == "deepseek_v3":
            w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        rp = cfg["rope_parameters"]
        if rp.get("mscale_all_dim") is not None:
            w.add_rope_scaling_yarn_log_mul(0.1 * rp["mscale_all_dim"])
    if spec["arch"] in ("glm4", "glm4moe"):  # Glm4Model / Glm4MoeModel: the rotary part
        hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        w.add_rope_dimension_count(int(hd * cfg["rope_parameters"].get("partial_rotary_factor", 0.5)))
    if spec["arch"] == "glm4moe":  # Glm4MoeModel.set_gguf_parameters
        w.add_expert_count(cfg["n_routed_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_count(cfg["n_shared_experts"])
        w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        w.add_expert_weights_norm(cfg["norm_topk_prob"])
        w.add_nextn_predict_layers(cfg["num_nextn_predict_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(1 if spec.get("kv_b_split") else cfg["num_key_value_heads"])  # MLA as MQA (split files)
    if spec["arch"] == "gemma3":  # the global layers' base and scaling; the sliding ones' base is llama.cpp's 10000
        full = cfg["rope_parameters"]["full_attention"]
        w.add_rope_freq_base(full["rope_theta"])
        if full["rope_type"] == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(full["factor"])
    elif spec["arch"] not in GEMMA:  # (Gemma 1 / 2: the converter writes no base; 10000 is the default)
        rp = cfg["rope_parameters"]
        w.add_rope_freq_base(rp["rope_theta"])
        if rp.get("rope_type") == "yarn":  # TextModel.set_gguf_parameters: the keys the rope dictionary has
            w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
            w.add_rope_scaling_factor(rp["factor"])
            w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])
            if "beta_fast" in rp:
                w.add_rope_scaling_yarn_beta_fast(rp["beta_fast"])
            if "beta_slow" in rp:
                w.add_rope_scaling_yarn_beta_slow(rp["beta_slow"])
    if spec["arch"] in ("gemma2", "gemma3", "gpt-oss", "exaone4"):
        w.add_sliding_window(cfg["sliding_window"])
    if spec["arch"] == "exaone4":  # Exaone4Model: the pattern from layer_types, one bool a layer
        w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg["layer_types"]])
        w.add_vocab_size(cfg["vocab_size"])
    if spec["arch"] == "gpt-oss":  # GptOssModel: the experts' width as expert_feed_forward_length too
        w.add_expert_count(cfg["num_local_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["intermediate_size"])
    if spec["arch"] == "gemma2":
        w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if spec["arch"] == "deepseek2":
        qk = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
        if spec.get("kv_b_split"):
            w.add_key_length(cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"])
            w.add_value_length(cfg["kv_lora_rank"])
            w.add_key_length_mla(qk)
            w.add_value_length_mla(cfg["v_head_dim"])
        else:
            w.add_key_length(qk)
            w.add_value_length(cfg["v_head_dim"])
    elif cfg.get("head_dim"):
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    if spec["arch"] not in ("phi3",) + GEMMA and spec.get("moe", True):
        w.add_expert_count(cfg.get("num_experts") or cfg["num_local_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
    if spec["arch"] not in ("phi3", "gpt-oss", "olmo2", "olmoe", "glm4", "glm4moe", "ernie4_5", "exaone4", "deepseek2") + GEMMA \
            + LLAMA_LIKE and spec.get("moe", True):
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if spec["arch"] == "qwen2vl":  # Qwen2VLModel: the rotary pairs' sections (time / height / width / 0)
        half = (cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]) // 2
        w.add_rope_dimension_sections([half - 2 * (half // 3), half // 3, half // 3, 0])
    if spec["arch"] == "qwen2moe":
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    if spec["arch"] in ("granite", "granitemoe"):  # GraniteModel: the multipliers as *_scale keys
        w.add_attention_scale(cfg["attention_multiplier"])
        w.add_embedding_scale(cfg["embedding_multiplier"])
        w.add_residual_scale(cfg["residual_multiplier"])
        w.add_logit_scale(cfg["logits_scaling"])
    if spec["arch"] in LLAMA_LIKE:
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(cfg["hidden_size"] // cfg["num_attention_heads"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference(tmp, cfg, tensors, ids, hf=None, **edits):
    """transformers' logits for ids from the decoded weights, saved in the source layout (hf: more
    tensors, already in it); a quantization_config is dropped (the weights are decoded floats)."""
    from safetensors.numpy import save_file
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump({k: v for k, v in {**cfg, **edits}.items() if k != "quantization_config"}, f)
    st = dict(hf or {})
    for _, _, deq, names in tensors.values():
        for i, n in enumerate(names):
            st[n] = np.ascontiguousarray(deq[i] if len(names) > 1 else deq)
    save_file(st, os.path.join(tmp, "model.safetensors"))
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float().numpy()


def mtp_twin_reference(tmp, cfg, ids):
    """The MTP drafter's reference (gen_model_fixtures.mtp_reference) on the weights reference() decoded into
    tmp: the target, and its MTP block (model.layers.<num_hidden_layers>.*: the decoder layer, eh_proj, the
    three norms and the block's own embedding and head copies, as specdec loads them from nextn.*)."""
    from safetensors.numpy import load_file
    st = load_file(os.path.join(tmp, "model.safetensors"))
    n, h = cfg["num_hidden_layers"], cfg["hidden_size"]
    pre = f"model.layers.{n}."
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    big_dir = os.path.join(tmp, "with-mtp")  # the same weights read as n + 1 layers (transformers fuses the experts)
    os.makedirs(big_dir, exist_ok=True)
    with open(os.path.join(tmp, "config.json")) as f:
        big_cfg = {**json.load(f), "num_hidden_layers": n + 1}
    with open(os.path.join(big_dir, "config.json"), "w") as f:
        json.dump(big_cfg, f)
    shutil.copy(os.path.join(tmp, "model.safetensors"), big_dir)
    big, info = transformers.AutoModelForCausalLM.from_pretrained(big_dir, dtype=torch.float32, attn_implementation="eager",
                                                                  output_loading_info=True)
    big.eval()
    if info["missing_keys"]:
        sys.exit(f"the MTP reference lacks {sorted(info['missing_keys'])[:4]}")
    shutil.rmtree(big_dir)
    mods = {}
    for k in ("enorm", "hnorm", "shared_head.norm"):
        mods[k] = type(big.model.norm)(h, eps=cfg["rms_norm_eps"])
        with torch.no_grad():
            mods[k].weight.copy_(torch.from_numpy(st[pre + k + ".weight"]))
    t = {k: torch.from_numpy(st[pre + k + ".weight"]) for k in ("eh_proj", "embed_tokens", "shared_head.head")}
    logits, step_tok = gmf.mtp_reference(model, big, mods, t["eh_proj"], t["embed_tokens"], t["shared_head.head"], ids)
    return logits.numpy(), step_tok


def source_dir(spec, src_root, tmp):
    """The source fixture's directory: tests/models/fixtures' own, or one built into tmp (SOURCES)."""
    if spec["src"] not in SOURCES:
        return os.path.join(src_root, spec["src"])
    gmf.VARIANTS[spec["src"]] = SOURCES[spec["src"]]()
    gmf.write_fixture(tmp, spec["src"])
    return os.path.join(tmp, spec["src"])


def write_fixture(out, name, src_root):
    with tempfile.TemporaryDirectory() as tmp:
        return write_fixture_from(out, name, source_dir(FIXTURES[name], src_root, tmp))


def write_fixture_from(out, name, src):
    spec = FIXTURES[name]
    with open(os.path.join(src, "config.json")) as f:
        cfg = {**json.load(f), **spec["edits"]}
    ids = [int(x) for x in open(os.path.join(src, "ids.txt")).read().split()]
    if spec["arch"] == "gpt-oss":
        tensors, hf = oss_tensors(src, spec)
    elif spec["arch"] == "granitemoe":
        tensors, hf = granitemoe_tensors(src, spec, cfg)
    elif spec["arch"] == "deepseek2":
        tensors, hf = ds_tensors(src, spec, cfg)
    else:
        tensors, hf = gguf_tensors(src, spec, cfg), None
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.gguf")
    write_gguf(path, spec, cfg, tensors)
    reader = gguf.GGUFReader(path)
    worst = 0.0
    rope = cfg["rope_parameters"]
    extra = {"rope_factors_long.weight": rope.get("long_factor"), "rope_factors_short.weight": rope.get("short_factor")}
    for t in reader.tensors:
        if t.name in extra:  # Phi-3's longrope factors: the config's lists, exactly
            if not np.array_equal(np.asarray(t.data, dtype=np.float32), np.asarray(extra[t.name], dtype=np.float32)):
                sys.exit(f"{name}: {t.name} reads back as {t.data}")
            continue
        qt, _, deq, names = tensors[t.name]
        back = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        if spec["arch"] in GEMMA and t.name.endswith("norm.weight"):
            back = back - np.float32(1.0)
        if spec["arch"] in LLAMA_LIKE and (".attn_q." in t.name or ".attn_k." in t.name):
            back = ggf.unpermute_qk(back, cfg["num_attention_heads" if ".attn_q." in t.name else "num_key_value_heads"])
        worst = max(worst, float(np.abs(back.reshape(deq.shape) - deq).max()))
    if worst != 0.0 or len([t for t in reader.tensors if t.name not in extra]) != len(tensors):
        sys.exit(f"{name}: the file reads back to other weights (max |delta| {worst:g})")
    with tempfile.TemporaryDirectory() as tmp:
        logits = reference(tmp, cfg, tensors, ids, hf)
        mtp = mtp_twin_reference(tmp, cfg, ids) if spec["arch"] == "glm4moe" else None
        if mtp is not None:  # the MTP block: quantized too, its rows apart
            src_mtp = np.fromfile(os.path.join(src, "mtp_logits.f32"), dtype=np.float32).reshape(mtp[0].shape)
            if ggf.row_error(mtp[0], src_mtp) < 1e-4:
                sys.exit(f"{name}: the MTP block's encoded weights give the source's MTP logits: nothing quantized")
            top2 = np.sort(mtp[0], axis=1)[:, -2:]
            if (top2[:, 1] - top2[:, 0]).min() <= gmf.MARGIN:
                sys.exit(f"{name}: an MTP top-2 logit margin <= {gmf.MARGIN}")
        src_logits = np.fromfile(os.path.join(src, "logits.f32"), dtype=np.float32).reshape(logits.shape)
        quant = ggf.row_error(logits, src_logits)
        if quant < 1e-4:
            sys.exit(f"{name}: the encoded weights give the source's logits ({quant:.2e}): nothing quantized")
        top2 = np.sort(logits, axis=1)[:, -2:]
        if (top2[:, 1] - top2[:, 0]).min() <= gmf.MARGIN:
            sys.exit(f"{name}: a top-2 logit margin {float((top2[:, 1] - top2[:, 0]).min()):.3g} <= {gmf.MARGIN}")
        plain = ggf.row_error(reference(tmp, cfg, tensors, ids, hf, norm_topk_prob=False), logits) \
            if spec["arch"] == "qwen3moe" else None
        if plain is not None and plain < 1e-3:
            sys.exit(f"{name}: renormalising the top-k weights does not change the logits ({plain:.2e})")
        rp = cfg["rope_parameters"]
        if rp.get("rope_type") == "yarn" and "beta_fast" in rp and spec["arch"] != "deepseek2":  # the betas matter
            # (DeepSeek's 2 rotary pairs: both betas' correction range clamps to the same) (transformers' defaults: 32 / 1)
            plain = ggf.row_error(reference(tmp, cfg, tensors, ids, hf, rope_parameters={
                k: v for k, v in rp.items() if k not in ("beta_fast", "beta_slow")}), logits)
            if plain < 1e-3:
                sys.exit(f"{name}: the yarn betas do not change the logits ({plain:.2e})")
    logits.astype("<f4").tofile(os.path.join(d, "logits.f32"))
    if mtp is not None:  # test_mtp's reference files (gen_model_fixtures.add_mtp_layer's layout)
        mtp[0].astype("<f4").tofile(os.path.join(d, "mtp_logits.f32"))
        with open(os.path.join(d, "mtp.txt"), "w") as f:
            f.write(f"{mtp[1]}\n")
    with open(os.path.join(d, "ids.txt"), "w") as f:
        f.write(" ".join(str(i) for i in ids) + "\n")
    types = sorted({qt.name for qt, _, _, _ in tensors.values()})
    print(f"{name}: {len(tensors)} tensors ({', '.join(types)}); re-read |delta| {worst:g}; vs the unquantized "
          f"source {quant:.2e}" + (f"; without top-k renormalisation / the yarn betas {plain:.2e}"
                                   if plain is not None else ""))
    return f"{name} {len(ids)} {cfg['vocab_size']} {len(ids)}\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "models", "fixtures"))
    ap.add_argument("names", nargs="*", default=sorted(FIXTURES))
    a = ap.parse_args()
    lines = {n: write_fixture(a.out, n, a.out) for n in a.names}
    gmf.write_manifest(os.path.join(a.out, "gguf_twin_manifest.txt"), lines, FIXTURES,
                       "name T V n_ctx; <name>/model.gguf (tools/gen_gguf_twin_fixtures.py)")


if __name__ == "__main__":
    main()

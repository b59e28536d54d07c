#!/usr/bin/env python3
"""gen_vlm_fixtures.py — tiny vision-language checkpoints whose LANGUAGE model specdec runs (text in, text
out), with the logits of transformers' own multimodal class on text-only input.

Published Gemma 3 (4B, 12B, 27B), Mistral Small 3.1 / 3.2, Ministral 3, LLaVA and InternVL (-hf) checkpoints are
image-text-to-text models: config.json says Gemma3ForConditionalGeneration / Mistral3ForConditionalGeneration /
LlavaForConditionalGeneration / InternVLForConditionalGeneration, the language model's
settings sit under "text_config", and its weights beside a vision tower and a projector. For text the
vision part is never used, so specdec loads the language model alone (models/sd_config.c, "text of a
vision-language checkpoint"). Each fixture is such a checkpoint built HERE by transformers (random
weights, a vision tower of one tiny layer), saved by save_pretrained, with

    OUT/<name>/config.json, model.safetensors   as save_pretrained writes them: the names the Hub's files
                                  carry (language_model.model.*, language_model.lm_head.weight when untied,
                                  vision_tower.*, multi_modal_projector.*)
    OUT/<name>/ids.txt, logits.f32 the multimodal class's logits for text-only ids (no image token among them)
    OUT/vlm_manifest.txt          "<name> <T> <V> <n_ctx>" (tests/models: model_fixtures_vlm)

and "<name>_modules": the same checkpoint under transformers 5's module names (model.language_model.*,
lm_head.weight, model.vision_tower.*, model.multi_modal_projector.*), which transformers reads too (checked:
the same logits; Qwen3-VL saves these names itself: no copy); "vlm_mistral3_sharded": the Hub's layout, two
shards and model.safetensors.index.json whose weight_map names the vision tower's tensors too; "vlm_qwen2_5_vl_flat":
the Hub's Qwen2.5-VL config.json, flat (no text_config; rope_scaling {"type": "mrope", ...}), read by transformers to
the same logits. Checks (the script stops when one fails): the
top-2 margin of every row exceeds gen_model_fixtures.MARGIN; the language model alone (the text class built
from text_config with the language weights) gives the same logits as the multimodal class (within 1e-5) —
but for what the multimodal class does not apply: Gemma 3's final_logit_softcapping (set in vlm_gemma3's
text_config, so a loader that applied it would fail the fixture).

Needs torch and transformers (run by hand; CI reads the committed files):
    python3 tools/gen_vlm_fixtures.py [--out tests/models/fixtures]
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_fixtures as gmf  # noqa: E402  (exits with a message without torch / transformers)

torch, transformers = gmf.torch, gmf.transformers
V, T = gmf.V, gmf.T
TEXT = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-5, bos_token_id=1,
            eos_token_id=2, pad_token_id=0)
# image / begin / end-of-image token ids: the top of the vocabulary, never among the fixture's ids
IMG = dict(image_token_index=V - 1)


def gemma3():
    text = transformers.Gemma3TextConfig(**TEXT, sliding_window=4, query_pre_attn_scalar=16,
                                         layer_types=["sliding_attention", "full_attention"],
                                         final_logit_softcapping=30.0, tie_word_embeddings=False)
    vision = transformers.SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                             num_attention_heads=2, image_size=28, patch_size=14)
    cfg = transformers.Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                                    boi_token_index=V - 3, eoi_token_index=V - 2, **IMG)
    # Gemma3ForConditionalGeneration never applies text_config.final_logit_softcapping (Gemma3ForCausalLM does;
    # the published configs say null): the language model alone is compared without it
    return cfg, transformers.Gemma3ForConditionalGeneration, transformers.Gemma3ForCausalLM, True, \
        {"final_logit_softcapping": None}


def mistral3_of(text, text_cls):
    """A Mistral3ForConditionalGeneration around `text`: a one-layer Pixtral vision tower; untied, as Mistral Small
    3.1 / 3.2 and Ministral 3: transformers ties by the TOP-LEVEL tie_word_embeddings (default true), whatever
    text_config says (true in vlm_mistral3's, false in vlm_gemma3's, tied at the top: both readings tested)."""
    vision = transformers.PixtralVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                              num_attention_heads=2, image_size=28, patch_size=14, head_dim=8)
    cfg = transformers.Mistral3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), spatial_merge_size=2,
                                      tie_word_embeddings=False, **IMG)
    return cfg, transformers.Mistral3ForConditionalGeneration, text_cls, False, {}


def mistral3():
    return mistral3_of(transformers.MistralConfig(**TEXT, sliding_window=None, rope_theta=1e6, tie_word_embeddings=True),
                       transformers.MistralForCausalLM)


def ministral3():
    """Ministral 3 (Mistral3ForConditionalGeneration 2512): a ministral3 text model, its queries scaled by position
    past original_max_position_embeddings (8 here)."""
    text = transformers.Ministral3Config(**TEXT, rope_parameters={
        "rope_type": "yarn", "rope_theta": 1e6, "factor": 2.0, "original_max_position_embeddings": 8, "beta_fast": 32.0,
        "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1})
    return mistral3_of(text, transformers.Ministral3ForCausalLM)


def llava():
    """LLaVA-style checkpoints (LLaVA 1.5 / NeXT's llama, Pixtral 12B's mistral): LlavaForConditionalGeneration."""
    text = transformers.LlamaConfig(**TEXT, tie_word_embeddings=True)
    vision = transformers.CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                           num_attention_heads=2, image_size=28, patch_size=14, projection_dim=16)
    cfg = transformers.LlavaConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), tie_word_embeddings=False,
                                   **IMG)
    return cfg, transformers.LlavaForConditionalGeneration, transformers.LlamaForCausalLM, False, {}


def internvl():
    """InternVL 3 / 3.5 in transformers' format (InternVLForConditionalGeneration): a qwen3 (or qwen2) text model."""
    text = transformers.Qwen3Config(**TEXT, tie_word_embeddings=False)
    vision = transformers.InternVLVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                               num_attention_heads=2, image_size=[28, 28], patch_size=[14, 14])
    cfg = transformers.InternVLConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), image_seq_length=4,
                                      downsample_ratio=0.5, tie_word_embeddings=True, image_token_id=V - 1)
    return cfg, transformers.InternVLForConditionalGeneration, transformers.Qwen3ForCausalLM, False, {}


def qwen2_5_vl():
    """Qwen2.5-VL: a Qwen2-like text model (head_dim hidden / heads = 8) whose multimodal rope (sections 1 / 1 / 2
    of the 4 rotary pairs) is the plain rope on text; untied at the top (the class's default false), text_config
    saying tied."""
    text = transformers.Qwen2_5_VLTextConfig(**{**TEXT, "head_dim": None}, rope_parameters={
        "rope_type": "mrope", "mrope_section": [1, 1, 2], "rope_theta": 1e6}, tie_word_embeddings=True)
    vision = transformers.Qwen2_5_VLVisionConfig(depth=1, hidden_size=16, intermediate_size=32, num_heads=2,
                                                 out_hidden_size=32, fullatt_block_indexes=[0])
    cfg = transformers.Qwen2_5_VLConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), image_token_id=V - 1,
                                        video_token_id=V - 2, vision_start_token_id=V - 3, vision_end_token_id=V - 4)
    return cfg, transformers.Qwen2_5_VLForConditionalGeneration, transformers.Qwen2ForCausalLM, False, \
        {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}, "head_dim": 8, "model_type": "qwen2"}


def qwen3_vl():
    """Qwen3-VL (dense): a Qwen3 text model (q / k norms) with the interleaved multimodal rope, plain on text."""
    text = transformers.Qwen3VLTextConfig(**TEXT, rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3],
                                                                    "mrope_interleaved": True, "rope_theta": 5e6})
    vision = transformers.Qwen3VLVisionConfig(depth=1, hidden_size=16, intermediate_size=32, num_heads=2,
                                              out_hidden_size=32, deepstack_visual_indexes=[0], num_position_embeddings=16)
    cfg = transformers.Qwen3VLConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), image_token_id=V - 1,
                                     video_token_id=V - 2, vision_start_token_id=V - 3, vision_end_token_id=V - 4)
    return cfg, transformers.Qwen3VLForConditionalGeneration, transformers.Qwen3ForCausalLM, False, \
        {"rope_parameters": {"rope_type": "default", "rope_theta": 5e6}, "model_type": "qwen3"}


FIXTURES = {"vlm_gemma3": gemma3, "vlm_mistral3": mistral3, "vlm_ministral3": ministral3, "vlm_llava": llava,
            "vlm_internvl": internvl, "vlm_qwen2_5_vl": qwen2_5_vl, "vlm_qwen3_vl": qwen3_vl}
SEEDS = {"vlm_gemma3": 61, "vlm_mistral3": 62, "vlm_ministral3": 63, "vlm_llava": 64,
         "vlm_internvl": 65, "vlm_qwen2_5_vl": 66, "vlm_qwen3_vl": 68}  # fixed: a new fixture changes no other

# the Hub's names -> transformers 5's module names
MODULES = [("model.language_model.", "model.language_model."), ("model.visual.", "model.visual."),  # already
           ("language_model.model.", "model.language_model."), ("language_model.lm_head.", "lm_head."),
           ("vision_tower.", "model.vision_tower."), ("multi_modal_projector.", "model.multi_modal_projector."),
           ("visual.", "model.visual."), ("model.", "model.language_model.")]  # the last two: Qwen-VL's names


def to_modules(k):
    """A tensor's name under transformers 5's module names."""
    for a, b in MODULES:
        if k.startswith(a):
            return b + k[len(a):]
    return k


def text_weights(sd):
    """The language model's tensors of a checkpoint in the Hub's names, under a text model's names."""
    out = {}
    for k, v in sd.items():
        if k.startswith("language_model."):
            out[k[len("language_model."):]] = v
        elif k.startswith("model.language_model."):  # (Qwen3-VL saves its module names)
            out["model." + k[len("model.language_model."):]] = v
        elif (k.startswith("model.") or k.startswith("lm_head.")) and not k.startswith("model.visual."):
            out[k] = v  # Qwen2-VL / Qwen2.5-VL: the language model's names are a text model's
    return out


def logits_of(d, cls):
    m = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    return m


def write(out, name, seed):
    from safetensors.numpy import load_file, save_file
    cfg, vlm_cls, text_cls, zero_norms, text_edits = FIXTURES[name]()
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = vlm_cls(cfg).to(torch.float32).eval()
    gmf.randomize(model, seed, zero_norms)
    rng = np.random.default_rng(seed)
    ids = [int(x) for x in rng.integers(3, V - 3, T)]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float().numpy()
    top2 = np.sort(logits, axis=1)[:, -2:]
    if (top2[:, 1] - top2[:, 0]).min() <= gmf.MARGIN:
        sys.exit(f"{name}: a top-2 logit margin <= {gmf.MARGIN}")
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    model.save_pretrained(d)
    for f in os.listdir(d):
        if f not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(d, f))
    # the language model alone, from text_config and the language weights, must give the same logits
    sd = load_file(os.path.join(d, "model.safetensors"))
    tmp = d + ".text-tmp"
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump({**cfg.text_config.to_dict(), **text_edits, "architectures": [text_cls.__name__],
                   "tie_word_embeddings": cfg.tie_word_embeddings}, f)
    save_file(text_weights(sd), os.path.join(tmp, "model.safetensors"))
    with torch.no_grad():
        alone = logits_of(tmp, text_cls)(input_ids=torch.tensor([ids])).logits[0].float().numpy()
    shutil.rmtree(tmp)
    if np.abs(alone - logits).max() > 1e-5:
        sys.exit(f"{name}: the language model alone differs from the multimodal class ({np.abs(alone - logits).max():.2e})")
    modules = any(k != to_modules(k) for k in sd)  # Qwen3-VL saves the module names: no second copy
    names = [d] + ([d + "_modules"] if modules else []) + ([d + "_sharded"] if name == "vlm_mistral3" else []) + \
        ([d + "_flat"] if name == "vlm_qwen2_5_vl" else [])
    for dd in names:
        if dd.endswith("_flat"):  # the Hub's Qwen2.5-VL configs: no text_config, its keys at the top level
            shutil.rmtree(dd, ignore_errors=True)
            os.makedirs(dd)
            shutil.copy(os.path.join(d, "model.safetensors"), dd)
            with open(os.path.join(d, "config.json")) as f:
                top = json.load(f)
            tc = top.pop("text_config")
            flat = {**{k: v for k, v in tc.items() if k != "model_type"}, **top}
            flat["rope_scaling"] = {"type": "mrope", "mrope_section": tc["rope_parameters"]["mrope_section"]}
            flat["rope_theta"] = tc["rope_parameters"]["rope_theta"]
            del flat["rope_parameters"]
            with open(os.path.join(dd, "config.json"), "w") as f:
                json.dump(flat, f, indent=2)
            with torch.no_grad():
                back = logits_of(dd, vlm_cls)(input_ids=torch.tensor([ids])).logits[0].float().numpy()
            if np.abs(back - logits).max() > 1e-6:
                sys.exit(f"{name}_flat: transformers reads the flat config to other logits")
        elif dd.endswith("_sharded"):  # the Hub's layout: two shards and model.safetensors.index.json (the
            # vision tower's tensors in its weight_map too)
            shutil.rmtree(dd, ignore_errors=True)
            os.makedirs(dd)
            shutil.copy(os.path.join(d, "config.json"), dd)
            keys = sorted(sd)
            shards = {"model-00001-of-00002.safetensors": keys[::2], "model-00002-of-00002.safetensors": keys[1::2]}
            for fn, ks in shards.items():
                save_file({k: sd[k] for k in ks}, os.path.join(dd, fn), metadata={"format": "pt"})
            with open(os.path.join(dd, "model.safetensors.index.json"), "w") as f:
                json.dump({"metadata": {"total_size": int(sum(v.nbytes for v in sd.values()))},
                           "weight_map": {k: fn for fn, ks in shards.items() for k in ks}}, f, indent=2)
            with torch.no_grad():
                back = logits_of(dd, vlm_cls)(input_ids=torch.tensor([ids])).logits[0].float().numpy()
            if np.abs(back - logits).max() > 1e-6:
                sys.exit(f"{name}_sharded: transformers reads the shards to other logits")
        elif dd != d:  # transformers 5's module names
            shutil.rmtree(dd, ignore_errors=True)
            os.makedirs(dd)
            shutil.copy(os.path.join(d, "config.json"), dd)
            renamed = {to_modules(k): v for k, v in sd.items()}
            save_file(renamed, os.path.join(dd, "model.safetensors"), metadata={"format": "pt"})
            with torch.no_grad():
                back = logits_of(dd, vlm_cls)(input_ids=torch.tensor([ids])).logits[0].float().numpy()
            if np.abs(back - logits).max() > 1e-6:
                sys.exit(f"{name}_modules: transformers reads the module names to other logits")
        logits.astype("<f4").tofile(os.path.join(dd, "logits.f32"))
        with open(os.path.join(dd, "ids.txt"), "w") as f:
            f.write(" ".join(str(i) for i in ids) + "\n")
    print(f"{name}: {len(sd)} tensors ({len(text_weights(sd))} of the "
          f"language model); language model alone vs multimodal {np.abs(alone - logits).max():.1e}; "
          f"min top-2 margin {(top2[:, 1] - top2[:, 0]).min():.2e}")
    return {os.path.basename(n): f"{os.path.basename(n)} {T} {V} {T}\n" for n in names}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "models", "fixtures"))
    a = ap.parse_args()
    lines = {}
    for n in sorted(FIXTURES):
        lines.update(write(a.out, n, SEEDS[n]))
    gmf.write_manifest(os.path.join(a.out, "vlm_manifest.txt"), lines, lines,
                       "name T V n_ctx (tools/gen_vlm_fixtures.py)")


if __name__ == "__main__":
    main()

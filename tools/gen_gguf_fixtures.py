#!/usr/bin/env python3
"""gen_gguf_fixtures.py — tiny random GGUF (llama.cpp) checkpoints with transformers' fp32 logits.

For each fixture (FIXTURES below) it builds a tiny model from its transformers config class with the
fixture generator's seeded weights (gen_model_fixtures.randomize), encodes every tensor in the ggml
type the fixture assigns it and writes the file as llama.cpp's convert_hf_to_gguf.py does for that
architecture (gguf-py's GGUFWriter: general.* and <arch>.* metadata, gguf-py's tensor names, llama's
Q/K row permutation, rope_freqs.weight for Llama-3.1 rope scaling, no output.weight when the embeddings
are tied, 1-D tensors in F32, general.file_type, the default alignment), plus an embedded byte-level BPE
tokenizer (tokenizer.ggml.*). Then

    OUT/<name>/model.gguf       the checkpoint
    OUT/<name>/ids.txt          T token ids, one line
    OUT/<name>/logits.f32       [T, V] float32 little-endian: transformers' logits for the ids
    OUT/<name>/tokenizer.json   the same tokenizer as the HF file (for comparisons)
    OUT/<name>/contents.txt     what the file holds: metadata, every tensor's ggml type and shape
    OUT/gguf_manifest.txt       "<name> <T> <V> <n_ctx>" per fixture (manifest.txt's format)

Encoding: F32 / F16 / BF16 / Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 by gguf-py's own quantizer
(gguf.quants.quantize). gguf-py cannot quantize to the K-quants, so a Q2_K / Q3_K / Q4_K / Q5_K / Q6_K
tensor is written as random blocks (every code, sub-block scale and min byte uniform) whose fp16 super-
block scales d (and dmin) are chosen so that the weights are about N(0, 1/fan_in)-sized and centred
(kquant_random). The reference does not depend on how the bytes were made: every tensor is decoded by
gguf-py's dequantizer (gguf.quants.dequantize, what transformers' GGUF loader uses), llama's Q/K rows
are un-permuted, and those float32 weights are loaded into the transformers model whose forward
(eager attention, fp32) gives logits.f32. A fixture is re-drawn (next seed) until every position's
top-2 logit margin exceeds gen_model_fixtures.MARGIN.

Checks, each printed with its max |delta| (the script stops if one fails):
  - the written file read back with gguf-py's GGUFReader: every tensor's type and shape as assigned,
    its bytes decode to exactly the weights the reference used;
  - transformers' own GGUF loader (from_pretrained(dir, gguf_file=...)) gives the same weights
    (bitwise) and logits; it ignores rope_freqs.weight (Llama 3.1 rope), so gguf_llama's logits are
    compared with the same weights under plain rope there (and the difference the factors make is
    printed too);
  - the fixture discriminates: forgetting llama's Q/K un-permutation or the rope factors changes
    the logits by far more than the C test's tolerance (1e-4 relative per row);
  - llama3 rope: transformers' inverse frequencies == base frequencies / rope_freqs;
  - the embedded tokenizer: transformers' GGUF tokenizer and tokenizer.json encode a sample alike;
  - with --llama-cpp (needs llama-cpp-python): llama.cpp itself on an F32 twin of each file gives
    logits.f32 within 1e-4 (check_llama_cpp) and tokenizes the sample as tokenizer.json does.

Needs torch, transformers and gguf (run by hand; CI reads the committed files):
    /tmp/ht-venv/bin/python tools/gen_gguf_fixtures.py [--out tests/models/fixtures] [--llama-cpp] [NAME ...]
"""
import importlib.metadata
import json
import math
import os
import shutil
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_model_fixtures as gmf  # noqa: E402  (exits with a message without torch / transformers)

try:
    import gguf
    from gguf import GGMLQuantizationType as Q
except ImportError as e:
    sys.exit(f"gen_gguf_fixtures.py: needs gguf (pip install gguf) ({e})")

np, torch, transformers = gmf.np, gmf.torch, gmf.transformers
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,  # noqa: E402
                          Qwen3Config, Qwen3ForCausalLM)

T = gmf.T
V = 96            # the tiny tokenizer's 80 ids (write_tiny_tokenizer) + MERGES' 16 merged tokens
REL_TOL = 1e-4    # tests/models/test_model_fixtures.c: ||row - ref|| / ||ref||

# Merges of the embedded BPE tokenizer, by rank; each result is a vocabulary entry (ids 80..95), each
# part a single character or an earlier result ("\u0120" is GPT-2's byte-level symbol of the space).
MERGES = ["\u0120 t", "h e", "\u0120 a", "i n", "\u0120t he", "e r", "o n", "\u0120 s", "r e", "a t", "e n",
          "\u0120 o", "n d", "\u0120 w", "in g", "\u0120a nd"]

SAMPLE = "the cat and the ring, where 42 went: Then we sat on a red mat!\nAnd (so) on."  # tokenizer checks

# The published pre-tokenizers named by tokenizer.ggml.pre (Llama 3's and Qwen2's tokenizer.json).
PRE_REGEX = {
    "llama-bpe": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+",
}

# Shapes: hidden and intermediate sizes multiples of 256 where a K-quant (256 values a block) applies.
BASE = dict(vocab_size=V, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)

# name -> arch (gguf), config class, model class, config kwargs, tokenizer.ggml.pre, add_bos_token,
# general.file_type, {gguf tensor name (no .weight): ggml type} (1-D tensors are always F32)
FIXTURES = {
    # Llama 3.1 style: GQA, llama3 rope (rope_freqs.weight), not tied; a Q4_K_M-like mix (Q4_K, with
    # Q6_K for attn_v / ffn_down / output, Q8_0 token_embd). original_max_position_embeddings 64 (not
    # Llama 3.1's 8192) so the rope factors (1, smoothed and 8) change the logits of a 24-token prompt.
    "gguf_llama": dict(
        arch="llama", cfg=LlamaConfig, model=LlamaForCausalLM,
        kw={**BASE, "hidden_size": 256, "intermediate_size": 512, "max_position_embeddings": 256,
            "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
            "rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 64,
                                "rope_theta": 500000.0}},
        pre="llama-bpe", add_bos=True, ftype=gguf.LlamaFileType.MOSTLY_Q4_K_M,
        types={"token_embd": Q.Q8_0, "output": Q.Q6_K,
               **{f"blk.{i}.{t}": Q.Q6_K for i in range(2) for t in ("attn_v", "ffn_down")},
               **{f"blk.{i}.{t}": Q.Q4_K for i in range(2)
                  for t in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up")}}),
    # Qwen3: per-head q/k norms, head_dim 128 != hidden / heads (64) (transformers' GGUF reader ignores
    # qwen3.attention.key_length and takes Qwen3Config's default head_dim, 128: so 128 here), tied embeddings (drawn N(0, 1/256),
    # not the generator's N(0, 1): a tied unit-variance embedding makes every logit row peak at its input
    # token, |e|^2 = 256); every other quant type at least once
    "gguf_qwen3": dict(
        arch="qwen3", cfg=Qwen3Config, model=Qwen3ForCausalLM,
        kw={**BASE, "hidden_size": 256, "intermediate_size": 512, "head_dim": 128, "max_position_embeddings": 256,
            "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}},
        pre="qwen2", add_bos=False, ftype=gguf.LlamaFileType.MOSTLY_Q4_0, emb_scale=1 / 16,
        types={"token_embd": Q.Q8_0,
               "blk.0.attn_q": Q.Q4_0, "blk.0.attn_k": Q.Q4_1, "blk.0.attn_v": Q.Q5_0, "blk.0.attn_output": Q.Q5_1,
               "blk.0.ffn_gate": Q.Q2_K, "blk.0.ffn_up": Q.Q3_K, "blk.0.ffn_down": Q.Q5_K,
               "blk.1.attn_q": Q.Q5_K, "blk.1.attn_k": Q.Q2_K, "blk.1.attn_v": Q.Q3_K, "blk.1.attn_output": Q.Q8_0,
               "blk.1.ffn_gate": Q.Q5_1, "blk.1.ffn_up": Q.Q4_1, "blk.1.ffn_down": Q.Q5_0}),
    # Qwen2: q/k/v biases, not tied; matrices in F16 and BF16, token_embd and every 1-D tensor in F32
    "gguf_qwen2": dict(
        arch="qwen2", cfg=Qwen2Config, model=Qwen2ForCausalLM,
        kw={**BASE, "hidden_size": 128, "intermediate_size": 256, "max_position_embeddings": 256,
            "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}},
        pre="qwen2", add_bos=False, ftype=gguf.LlamaFileType.MOSTLY_F16,
        types={"token_embd": Q.F32, "output": Q.BF16,
               **{f"blk.{i}.{t}": (Q.F16 if (j + i) % 2 == 0 else Q.BF16) for i in range(2)
                  for j, t in enumerate(("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                         "ffn_down"))}}),
}

# Byte offsets of the fp16 super-block scale d and min dmin in ggml's K-quant blocks (block_q2_K:
# scales[16] qs[64] d dmin; block_q3_K: hmask[32] qs[64] scales[12] d; block_q4_K / q5_K: d dmin
# scales[12] (qh[32]) qs; block_q6_K: ql[128] qh[64] scales[16] d; block_iq4_nl: d qs[16]; block_iq4_xs: d
# scales_h scales_l[4] qs[128]). kquant_random checks them. (gguf-py quantizes none of these types.)
KQ_FP16 = {Q.Q2_K: (80, 82), Q.Q3_K: (108, None), Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208, None),
           Q.IQ4_NL: (0, None), Q.IQ4_XS: (0, None), Q.IQ2_XXS: (0, None), Q.IQ2_XS: (0, None),
           Q.IQ2_S: (0, None), Q.IQ3_XXS: (0, None), Q.IQ3_S: (0, None), Q.IQ1_S: (0, None)}


def permute_qk(w, n_head):
    """convert_hf_to_gguf.py's llama permutation of q_proj / k_proj rows (n_head: heads of that
    projection): each head's rotate-half halves [x0..x(d/2-1) | y0..] become adjacent pairs x0 y0 x1 y1
    ... for ggml's NORM rope."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_qk(w, n_head):
    """The inverse of permute_qk (what a loader must do to get transformers' rows back)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(rope, dim):
    """rope_freqs.weight as convert_hf_to_gguf.py computes it for rope_type llama3: per frequency
    pair, 1 (wavelength < original / high_freq_factor), factor (> original / low_freq_factor) or the
    smoothed 1 / ((1 - s) / factor + s); ggml divides each frequency by it. original_max_position_embeddings
    comes from the rope parameters (the converter reads a top-level key, 8192 when absent: Llama 3.1's)."""
    freqs = 1.0 / (rope["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, lo, hi = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    out = []
    for f in freqs.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < old / hi:
            out.append(1.0)
        elif wavelen > old / lo:
            out.append(factor)
        else:
            s = (old / wavelen - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def set_f16(raw, off, vals):
    raw[:, off:off + 2] = np.asarray(vals, dtype=np.float16).reshape(-1, 1).view(np.uint8).reshape(-1, 2)


def kquant_random(rows, cols, qtype, std, rng):
    """Random K-quant blocks for a [rows, cols] matrix: uniform bytes, then per block the fp16 d (and
    dmin) so the decoded weights have about std and, with a min, a block mean near 0 (+-15% of the
    scaled codes' mean). Returns the raw bytes [rows, cols / 256 * type_size]."""
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    nb = rows * cols // bs
    raw = rng.integers(0, 256, (nb, ts), dtype=np.uint8)
    d_off, m_off = KQ_FP16[qtype]

    def decode():
        return gguf.quants.dequantize(raw, qtype).reshape(nb, bs).astype(np.float64)

    set_f16(raw, d_off, np.zeros(nb))
    if m_off is not None:
        set_f16(raw, m_off, np.zeros(nb))
    if np.any(decode() != 0):
        sys.exit(f"{qtype.name}: d / dmin are not at the offsets KQ_FP16 says")
    set_f16(raw, d_off, np.ones(nb))
    a = decode()                                      # d = 1, dmin = 0: the scaled codes
    ratio, mins = np.zeros(nb), np.zeros_like(a)
    if m_off is not None:
        set_f16(raw, d_off, np.zeros(nb))
        set_f16(raw, m_off, np.ones(nb))
        mins = -decode()                              # d = 0, dmin = 1: the sub-block mins
        ratio = a.mean(1) / np.maximum(mins.mean(1), 1e-3) * rng.uniform(0.85, 1.15, nb)
    unit = a - ratio[:, None] * mins
    d = std / unit.std() * rng.uniform(0.5, 1.5, nb)
    set_f16(raw, d_off, d)
    if m_off is not None:
        set_f16(raw, m_off, d * ratio)
    w = gguf.quants.dequantize(raw, qtype)
    if not np.isfinite(w).all() or not 0.3 * std < w.std() < 3 * std:
        sys.exit(f"{qtype.name}: random blocks decode to std {w.std():g} (wanted about {std:g})")
    return raw.reshape(rows, cols // bs * ts)


def encode(w, qtype, rng):
    """w float32 [rows, cols] (ggml row order) -> the bytes / array GGUFWriter stores for qtype."""
    if qtype in KQ_FP16:
        return kquant_random(w.shape[0], w.shape[1], qtype, 1.0 / math.sqrt(w.shape[1]), rng)
    return gguf.quants.quantize(w.astype(np.float32), qtype)


def tiny_tokenizer(d, spec):
    """write_tiny_tokenizer's 80 ids (specials, single characters) + MERGES' results as ids 80..95 and
    the published pre-tokenizer of spec["pre"] (Llama 3: BOS added by the post-processor, ignore_merges;
    Qwen2: NFC). Writes d/tokenizer.json."""
    gmf.write_tiny_tokenizer(d, size=V)
    path = os.path.join(d, "tokenizer.json")
    with open(path) as f:
        tok = json.load(f)
    by_id = {i: t for t, i in tok["model"]["vocab"].items()}
    first = len(gmf.TINY_CHARS) + 3
    if len(MERGES) != V - first or any(not by_id[i].startswith("<unused") for i in range(first, V)):
        sys.exit("the tiny tokenizer's free ids do not fit MERGES")
    for k, m in enumerate(MERGES):
        a, b = m.split(" ")
        if a not in tok["model"]["vocab"] or b not in tok["model"]["vocab"]:
            sys.exit(f"merge {m!r}: a part is not in the vocabulary yet")
        del tok["model"]["vocab"][by_id[first + k]]
        tok["model"]["vocab"][a + b] = first + k
    tok["model"]["merges"] = list(MERGES)
    split = {"type": "Split", "pattern": {"Regex": PRE_REGEX[spec["pre"]]}, "behavior": "Isolated", "invert": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, byte_level]}
    tok["decoder"] = dict(byte_level)
    tok["post_processor"] = dict(byte_level)
    if spec["pre"] == "llama-bpe":
        tok["model"]["ignore_merges"] = True
    else:
        tok["normalizer"] = {"type": "NFC"}
    if spec["add_bos"]:
        bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
        tok["post_processor"] = {"type": "Sequence", "processors": [dict(byte_level), {
            "type": "TemplateProcessing", "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}]}
    tok["model"]["vocab"] = dict(sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1]))
    with open(path, "w") as f:
        json.dump(tok, f, indent=1, ensure_ascii=False)


def add_tokenizer(writer, d, spec):
    """tokenizer.ggml.* as convert_hf_to_gguf.py's _set_vocab_gpt2 writes them: tokens by id, type
    CONTROL for the special added tokens and NORMAL otherwise, then gguf-py's SpecialVocab (what the
    converter runs) for the merges, special ids and add_bos / add_eos from tokenizer.json and a
    tokenizer_config.json (written to a scratch directory, not kept). d: the directory of tokenizer.json."""
    with open(os.path.join(d, "tokenizer.json")) as f:
        tok = json.load(f)
    specials = {a["id"] for a in tok["added_tokens"] if a["special"]}
    tokens = sorted(tok["model"]["vocab"], key=tok["model"]["vocab"].get)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(spec["pre"])
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if i in specials else gguf.TokenType.NORMAL
                            for i in range(len(tokens))])
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(os.path.join(d, "tokenizer.json"), tmp)
        with open(os.path.join(tmp, "tokenizer_config.json"), "w") as f:
            json.dump({"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                       "add_bos_token": spec["add_bos"], "add_eos_token": False}, f)
        sv = gguf.SpecialVocab(tmp, load_merges=True, n_vocab=len(tokens))
        if len(sv.merges) != len(MERGES) or sv.special_token_ids.get("bos") != 1:
            sys.exit(f"SpecialVocab read {len(sv.merges)} merges, specials {sv.special_token_ids}")
        sv.add_to_gguf(writer, quiet=True)


def hf_to_gguf_names(model, arch):
    """{HF parameter name: gguf tensor name} by gguf-py's TensorNameMap (the converter's map_tensor_name);
    named_parameters lists a tied lm_head once (as embed_tokens), so no output.weight then."""
    nmap = gguf.get_tensor_name_map(next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch),
                                    model.config.num_hidden_layers)
    out = {}
    for n, _ in model.named_parameters():
        base, suffix = n.rsplit(".", 1)
        g = nmap.get_name(base)
        if g is None:
            sys.exit(f"{arch}: no gguf name for {n}")
        out[n] = f"{g}.{suffix}"
    return out


def build(name, seed):
    """The HF model (seeded weights) and, per gguf tensor: (HF name or None, ggml type, stored array,
    decoded float32 weights in the HF layout)."""
    spec = FIXTURES[name]
    cfg = spec["cfg"](**spec["kw"])
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = spec["model"](cfg).to(torch.float32).eval()
    gmf.randomize(model, seed, False)
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(spec.get("emb_scale", 1.0))
    rng = np.random.default_rng(seed * 100003 + zlib.crc32(name.encode()) % 100000)
    n_head, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    tensors = {}
    if spec["arch"] == "llama" and cfg.rope_parameters.get("rope_type") == "llama3":
        f = llama3_rope_factors(cfg.rope_parameters, cfg.head_dim)
        tensors[gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight"] = (None, Q.F32, f, f)
    names = hf_to_gguf_names(model, spec["arch"])
    state = {}
    for hf_name, p in model.named_parameters():
        g = names[hf_name]
        w = p.detach().numpy().astype(np.float32)
        qtype = Q.F32 if w.ndim == 1 else spec["types"][g[:-len(".weight")]]
        heads = None
        if spec["arch"] == "llama" and (hf_name.endswith("q_proj.weight") or hf_name.endswith("k_proj.weight")):
            heads = n_head if "q_proj" in hf_name else n_kv
            w = permute_qk(w, heads)
        data = encode(w, qtype, rng)
        deq = gguf.quants.dequantize(data, qtype).reshape(w.shape).astype(np.float32)
        if heads is not None:
            if not np.array_equal(permute_qk(unpermute_qk(deq, heads), heads), deq):
                sys.exit("unpermute_qk is not the inverse of permute_qk")
            deq = unpermute_qk(deq, heads)
        tensors[g] = (hf_name, qtype, data, deq)
        state[hf_name] = torch.from_numpy(deq.copy())
    missing = model.load_state_dict(state, strict=False).missing_keys
    if [k for k in missing if not (k == "lm_head.weight" and cfg.tie_word_embeddings)]:
        sys.exit(f"{name}: parameters without a gguf tensor: {missing}")
    return model, tensors


def write_gguf(path, name, model, tensors, d):
    """The file, metadata in the converter's order (general.*, then TextModel / LlamaModel's
    set_gguf_parameters, the quantization version, the vocabulary)."""
    spec, cfg = FIXTURES[name], model.config
    w = gguf.GGUFWriter(path, spec["arch"])
    for g, (_, qtype, data, _) in tensors.items():
        w.add_tensor(g, data, raw_dtype=qtype)
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if "head_dim" in cfg.to_dict():          # the converter: only when the config has head_dim
        w.add_key_length(cfg.head_dim)
        w.add_value_length(cfg.head_dim)
    w.add_file_type(spec["ftype"])
    if spec["arch"] == "llama":
        w.add_vocab_size(cfg.vocab_size)
        w.add_rope_dimension_count(cfg.head_dim)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    add_tokenizer(w, d, spec)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def forward(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(ids[None].astype(np.int64))).logits[0].float().numpy()


def row_error(a, ref):
    """The C test's metric: max over rows of ||a - ref|| / ||ref||."""
    return float((np.linalg.norm(a - ref, axis=1) / np.linalg.norm(ref, axis=1)).max())


def variant(model, **cfg_edits):
    """The same decoded weights in a model whose config differs by cfg_edits."""
    cfg = type(model.config)(**{**model.config.to_dict(), **cfg_edits})
    cfg._attn_implementation = "eager"
    m = type(model)(cfg).to(torch.float32).eval()
    m.load_state_dict({k: v for k, v in model.state_dict().items()}, strict=True)
    return m


def check_reread(path, tensors, arch):
    """GGUFReader: each tensor's type and shape as assigned, decoding (llama's q / k un-permuted by the
    head counts in the file's metadata) to exactly the reference's weights."""
    reader = gguf.GGUFReader(path)
    got = {t.name: t for t in reader.tensors}
    if set(got) != set(tensors):
        sys.exit(f"{path}: tensors {sorted(set(got) ^ set(tensors))} differ from those written")
    worst = 0.0
    for g, (_, qtype, _, deq) in tensors.items():
        t = got[g]
        if t.tensor_type != qtype or [int(x) for x in t.shape] != list(reversed(deq.shape)):
            sys.exit(f"{g}: read back as {t.tensor_type.name} {list(t.shape)}")
        back = gguf.quants.dequantize(t.data, t.tensor_type).reshape(deq.shape)
        if arch == "llama" and (".attn_q." in g or ".attn_k." in g):
            key = f"llama.attention.head_count{'_kv' if '.attn_k.' in g else ''}"
            back = unpermute_qk(back, int(reader.fields[key].contents()))
        worst = max(worst, float(np.abs(back - deq).max()))
    if worst != 0.0:
        sys.exit(f"{path}: tensors read back decode to other weights (max |delta| {worst:g})")
    return reader, worst


def check_transformers(d, model, tensors, ids, logits, spec):
    """transformers' GGUF loader: bitwise the same weights; the logits (plain rope for llama3)."""
    hf = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file="model.gguf", dtype=torch.float32,
                                                           attn_implementation="eager").eval()
    mine = dict(model.named_parameters())
    wdiff = 0.0
    for n, p in hf.named_parameters():
        if n not in mine:
            sys.exit(f"{d}: transformers' GGUF model has {n}, the reference does not")
        wdiff = max(wdiff, float((p.detach().float() - mine[n].detach()).abs().max()))
    if wdiff != 0.0:
        sys.exit(f"{d}: transformers' GGUF loader decodes other weights (max |delta| {wdiff:g})")
    got = forward(hf, ids)
    out = {"weights": wdiff}
    if spec["kw"]["rope_parameters"]["rope_type"] == "llama3":
        plain = forward(variant(model, rope_parameters={
            "rope_type": "default", "rope_theta": spec["kw"]["rope_parameters"]["rope_theta"]}), ids)
        out["logits_vs_plain_rope"] = float(np.abs(got - plain).max())
        out["logits_vs_reference"] = float(np.abs(got - logits).max())
        if out["logits_vs_plain_rope"] > 1e-4:
            sys.exit(f"{d}: transformers' GGUF logits differ from plain rope's by {out['logits_vs_plain_rope']:g}")
    else:
        out["logits_vs_reference"] = float(np.abs(got - logits).max())
        if out["logits_vs_reference"] > 1e-4:
            sys.exit(f"{d}: transformers' GGUF logits differ from the reference by {out['logits_vs_reference']:g}")
    return out


def check_discriminates(model, tensors, ids, logits, spec):
    """A loader that gets the Q/K row order wrong (llama: skips the un-permutation; the others: applies
    it) or skips the rope factors must fail the C test by far; the K-quants' fp16 scales include
    subnormals (as real Q6_K files do), so a decoder flushing them to zero fails too."""
    out = {}
    cfg = model.config
    wrong = variant(model)
    reorder = permute_qk if spec["arch"] == "llama" else unpermute_qk
    with torch.no_grad():
        for layer in wrong.model.layers:
            for proj, heads in ((layer.self_attn.q_proj, cfg.num_attention_heads),
                                (layer.self_attn.k_proj, cfg.num_key_value_heads)):
                proj.weight.copy_(torch.from_numpy(reorder(proj.weight.numpy(), heads).copy()))
                if proj.bias is not None:
                    proj.bias.copy_(torch.from_numpy(reorder(proj.bias.numpy(), heads).copy()))
    out["qk_rows_wrong"] = row_error(forward(wrong, ids), logits)
    if cfg.rope_parameters.get("rope_type") == "llama3":
        plain = variant(model, rope_parameters={"rope_type": "default",
                                                         "rope_theta": cfg.rope_parameters["rope_theta"]})
        out["rope_freqs_ignored"] = row_error(forward(plain, ids), logits)
        f = tensors["rope_freqs.weight"][3].astype(np.float64)
        base = 1.0 / (cfg.rope_parameters["rope_theta"] ** (np.arange(0, cfg.head_dim, 2) / cfg.head_dim))
        inv = model.model.rotary_emb.inv_freq.double().numpy()
        out["inv_freq_vs_rope_freqs"] = float(np.abs(inv / (base / f) - 1).max())
        if out["inv_freq_vs_rope_freqs"] > 1e-6:
            sys.exit(f"transformers' llama3 frequencies are not base / rope_freqs ({out['inv_freq_vs_rope_freqs']:g})")
    for k in ("qk_rows_wrong", "rope_freqs_ignored"):
        if k in out and out[k] < 100 * REL_TOL:
            sys.exit(f"the fixture hardly depends on {k}: row error {out[k]:g}")
    scales = []
    for _, qtype, data, _ in tensors.values():
        if qtype in KQ_FP16:
            raw = data.reshape(-1, gguf.GGML_QUANT_SIZES[qtype][1])
            for off in (o for o in KQ_FP16[qtype] if o is not None):
                scales.append(raw[:, off:off + 2].copy().view(np.float16).ravel())
    if scales:
        v = np.abs(np.concatenate(scales).astype(np.float32))
        out["kquant_fp16_scales"] = f"{int((v < 2.0 ** -14).sum())} subnormal of {v.size}"
    return out


def check_tokenizer(d):
    """transformers' tokenizer from the GGUF metadata vs tokenizer.json, on a sample of the characters."""
    from tokenizers import Tokenizer
    ref = Tokenizer.from_file(os.path.join(d, "tokenizer.json")).encode(SAMPLE).ids
    got = transformers.AutoTokenizer.from_pretrained(d, gguf_file="model.gguf").encode(SAMPLE)
    merged = sum(1 for i in ref if i >= V - len(MERGES))
    return ref == got, len(ref), merged, (ref, got)


def check_llama_cpp(d, name, model, tensors, ids, logits):
    """--llama-cpp (needs llama-cpp-python): llama.cpp itself, F32 KV cache, on an F32 twin of model.gguf
    (the decoded weights stored as F32 in the same layout, same metadata and tokenizer) must give
    logits.f32 within the C test's tolerance: its own reading of the metadata, tensor names, Q/K order,
    rope_freqs, q/k norms. On model.gguf itself the error is only printed (ggml's CPU matmul rounds the
    activations to Q8 / F16 / BF16 for quantized / half weights: ~1e-2). Its tokenizer must encode
    SAMPLE as tokenizer.json does."""
    import llama_cpp
    from tokenizers import Tokenizer
    cfg, out = model.config, {}
    twin = {}
    for g, (hf_name, _, _, deq) in tensors.items():
        w = deq
        if FIXTURES[name]["arch"] == "llama" and (".attn_q." in g or ".attn_k." in g):
            w = permute_qk(deq, cfg.num_attention_heads if ".attn_q." in g else cfg.num_key_value_heads)
        twin[g] = (hf_name, Q.F32, np.ascontiguousarray(w, dtype=np.float32), deq)
    with tempfile.TemporaryDirectory() as tmp:
        write_gguf(os.path.join(tmp, "model.gguf"), name, model, twin, d)
        for what, path in (("f32_twin", os.path.join(tmp, "model.gguf")), ("model_gguf", os.path.join(d, "model.gguf"))):
            llm = llama_cpp.Llama(model_path=path, n_ctx=2 * T, n_batch=2 * T, logits_all=True, type_k=0, type_v=0,
                                  n_threads=1, verbose=False)
            llm.eval([int(i) for i in ids])
            got = np.array(llm.scores[:T], dtype=np.float32)
            out[f"llama_cpp_{what}_row_error"] = row_error(got, logits)
            out[f"llama_cpp_{what}_argmax_differs"] = int((got.argmax(1) != logits.argmax(1)).sum())
            if what == "f32_twin":
                toks = llm.tokenize(SAMPLE.encode(), add_bos=False, special=False)
                if toks != Tokenizer.from_file(os.path.join(d, "tokenizer.json")).encode(SAMPLE, add_special_tokens=False).ids:
                    sys.exit(f"{name}: llama.cpp tokenizes the sample as {toks}")
                out["llama_cpp_tokenizer"] = "== tokenizer.json on the sample"
            del llm
    if out["llama_cpp_f32_twin_row_error"] > REL_TOL:
        sys.exit(f"{name}: llama.cpp on the F32 twin: row error {out['llama_cpp_f32_twin_row_error']:g}")
    return out


def contents(name, model, tensors, reader, checks):
    spec, cfg = FIXTURES[name], model.config
    lines = [f"# {name}: written by tools/gen_gguf_fixtures.py (gguf-py {importlib.metadata.version('gguf')}"
             f", transformers {transformers.__version__}, torch {torch.__version__})",
             f"arch {spec['arch']}  ({type(model).__name__})",
             f"config hidden {cfg.hidden_size} intermediate {cfg.intermediate_size} layers {cfg.num_hidden_layers} "
             f"heads {cfg.num_attention_heads} kv_heads {cfg.num_key_value_heads} head_dim {getattr(cfg, 'head_dim', None) or cfg.hidden_size // cfg.num_attention_heads} vocab "
             f"{cfg.vocab_size} tied {cfg.tie_word_embeddings} rms_eps {cfg.rms_norm_eps}",
             f"rope {json.dumps(cfg.rope_parameters, sort_keys=True)}",
             "", "# metadata (key = value; arrays: their length)"]
    for k, f in reader.fields.items():
        if k.startswith("GGUF."):
            continue
        if f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
            lines.append(f"{k} = [{len(f.data)} x {f.types[-1].name}]")
        else:
            lines.append(f"{k} = {f.contents()!r}")
    lines += ["", "# tensors: gguf name, ggml type, ggml shape (ne0 first), HF name (qk-permuted: llama's row order)"]
    for t in reader.tensors:
        hf_name = tensors[t.name][0] or "-"
        perm = " (qk-permuted)" if spec["arch"] == "llama" and (".attn_q." in t.name or ".attn_k." in t.name) else ""
        lines.append(f"{t.name:28s} {t.tensor_type.name:5s} {str(list(int(x) for x in t.shape)):12s} {hf_name}{perm}")
    lines += ["", "# checks (max |delta|; row errors as the C test measures them)"]
    lines += [f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in checks.items()]
    return "\n".join(lines) + "\n"


def write_fixture(out, name, llama_cpp=False):
    spec = FIXTURES[name]
    rng = np.random.default_rng(2000 + zlib.crc32(name.encode()) % 100000)
    ids = rng.integers(3, V, T)
    ids[0] = 1  # bos
    seed, model, tensors, logits = gmf.first_seed(name, ids, lambda s: build(name, s))
    d = os.path.join(out, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    tiny_tokenizer(d, spec)
    path = os.path.join(d, "model.gguf")
    write_gguf(path, name, model, tensors, d)
    with open(os.path.join(d, "ids.txt"), "w") as f:
        f.write(" ".join(str(int(i)) for i in ids) + "\n")
    logits.astype("<f4").tofile(os.path.join(d, "logits.f32"))

    reader, reread = check_reread(path, tensors, spec["arch"])
    checks = {"reread_weights": reread}
    checks.update({f"transformers_gguf_{k}": v for k, v in check_transformers(d, model, tensors, ids, logits,
                                                                                spec).items()})
    checks.update(check_discriminates(model, tensors, ids, logits, spec))
    same, n_tok, merged, (ref, got) = check_tokenizer(d)
    if not same:
        sys.exit(f"{name}: transformers' GGUF tokenizer encodes {got}, tokenizer.json {ref}")
    checks["tokenizer"] = f"transformers' GGUF tokenizer == tokenizer.json on a {n_tok}-token sample ({merged} merged)"
    if llama_cpp:
        checks.update(check_llama_cpp(d, name, model, tensors, ids, logits))
    top2 = np.sort(logits, axis=-1)[:, -2:]
    checks["seed"] = seed
    checks["min_top2_margin"] = float((top2[:, 1] - top2[:, 0]).min())
    with open(os.path.join(d, "contents.txt"), "w") as f:
        f.write(contents(name, model, tensors, reader, checks))
    size = os.path.getsize(path)
    print(f"{name:12s} seed {seed}  T={T} V={V}  model.gguf {size / 1024:.0f} KiB  |logits| max "
          f"{np.abs(logits).max():.2f}")
    for k, v in checks.items():
        print(f"    {k}: {v:.3g}" if isinstance(v, float) else f"    {k}: {v}")
    return f"{name} {T} {V} {T}\n"


def main():
    out, names, opts = gmf.fixture_args(__doc__, FIXTURES, {
        "llama-cpp": "also run llama.cpp (llama-cpp-python) on each file and its F32 twin (check_llama_cpp)"})
    lines = {n: write_fixture(out, n, opts.llama_cpp) for n in names}
    gmf.write_manifest(os.path.join(out, "gguf_manifest.txt"), lines, FIXTURES,
                       "name T V n_ctx; <name>/model.gguf (tools/gen_gguf_fixtures.py)")
    print(f"{len(names)} fixtures in {out}")


if __name__ == "__main__":
    main()

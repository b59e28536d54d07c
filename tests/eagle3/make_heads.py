#!/usr/bin/env python3
"""make_heads.py — fixtures for the EAGLE-3 tests (no torch): random-weight heads in every
published layout for a random 8-layer target, a scripted sequence of draft steps per head with
the float64 reference outputs (eagle3_ref.py), and bad heads.

    python3 make_heads.py OUT_DIR
writes
  OUT_DIR/target/                 random Llama target (8 layers, hidden 64, vocab 200; make_checkpoint.py)
  OUT_DIR/<case>/                 config.json + model.safetensors of a head, script.bin (below)
  OUT_DIR/bad_<what>/             broken heads (truncated, wrong shape, d2t out of range, ...)
  OUT_DIR/manifest.txt            "<case> <dir>" per good head
script.bin: records of int32 op, n, n_shared (-1: chain rows), int32 tokens[n], pos[n],
parents[n] (tree rows only), then per op
  op 1 (rows on target features): float32 aux[n, 3·tH], float64 logits[n, Vd], g_next[n, H], q[n, V]
  op 2 (rows on earlier outputs):  int32 src[n] (g = g_next of output row src: rows of all ops so far
                                   numbered in order), then the same refs
  op 3 (rollback to n rows):        nothing
Weights are drawn from fixed seeds with scales that keep activations O(1) and logits spread.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
sys.path.insert(0, HERE)
import make_checkpoint  # noqa: E402
import eagle3_ref  # noqa: E402
import drafts_ref  # noqa: E402

# drafts.txt: greedy generation with chains of DRAFT_GAMMA from DRAFT_PROMPT (test_eagle3_gen.c)
DRAFT_PROMPT = [5, 17, 42, 99, 3, 150]
DRAFT_GAMMA = 4
DRAFT_ROUNDS = 6
# the G-test pair (test_eagle3_gen.c): V = 16 so that the exact law of 3 tokens has 4096 cells
GTARGET = dict(arch="llama", hidden=32, inter=64, layers=8, heads=4, kv_heads=2, vocab=16, tied=False, dtype="F32")
GHEAD = dict(layout="flat", dtype="F32", vd=12, d2t=True, t2d=True, embed=False,
             eagle_config={"use_aux_hidden_state": True})

TARGET = dict(arch="llama", hidden=64, inter=128, layers=8, heads=4, kv_heads=2, vocab=200, tied=False, dtype="F32")

# name -> spec. layout: flat (midlayer., flat config) / speculators (layers.0., nested config).
CASES = {
    # EAGLE / SpecForge style: F32, reduced vocab with d2t + t2d in HF's dtype order, no
    # embedding (the target's), default capture rule, eagle_config without ids.
    "flat_f32_d2t": dict(layout="flat", dtype="F32", vd=120, d2t=True, t2d=True, embed=False,
                         eagle_config={"use_aux_hidden_state": True}),
    # sglang style: BF16, its own embedding, SpecForge ids [1, 3, 6] in eagle_config (+1 rule:
    # hs[2, 4, 7]), fc.bias (`bias: true`), llama3 RoPE, head_dim 24 != H / nH, misaligned data.
    "flat_bf16_embed_bias": dict(layout="flat", dtype="BF16", vd=200, d2t=True, t2d=True, embed=True,
                                 bias=True, head_dim=24, align=False,
                                 eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 3, 6]},
                                 rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                   high_freq_factor=4.0, original_max_position_embeddings=16),
                                 theta=500000.0),
    # speculators: F16, nested config, layers.0., norm_before_residual by default (absent key),
    # top-level ids [2, 5, 8] (hs indices; 8 = the last layer's output), t2d only, EAGLE-3.1
    # fc_norm + norm_output.
    "speculators_f16_t2d": dict(layout="speculators", dtype="F16", vd=150, d2t=False, t2d=True, embed=False,
                                top_ids=[2, 5, 8], fc_norm=True, norm_output=True),
    # speculators with explicit norm_before_residual false, norm_before_fc (input_norm), full
    # vocabulary without d2t/t2d, MHA.
    "speculators_f32_fullvocab": dict(layout="speculators", dtype="F32", vd=None, d2t=False, t2d=False,
                                      embed=True, norm_before_residual=False, norm_before_fc=True, kv_heads=4),
}


def st_write(path, tensors, align=True):
    """tensors: list of (name, dtype, array); dtype F32/F16/BF16/I64/BOOL."""
    header = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for name, dt, a in tensors:
        if dt == "I64":
            raw = np.asarray(a, dtype="<i8").tobytes()
        elif dt == "BOOL":
            raw = np.asarray(a, dtype=bool).astype(np.uint8).tobytes()
        else:
            raw, _ = make_checkpoint.encode(np.asarray(a, dtype=np.float32), dt)
        header[name] = {"dtype": dt, "shape": list(np.shape(a)), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode()
    if align:
        hj += b" " * (-len(hj) % 8)
    elif len(hj) % 2 == 0:
        hj += b" "  # odd header length: every tensor misaligned, the loader must copy
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def head_tensors(spec, rng, H, V, tH):
    nH, nKV = 4, spec.get("kv_heads", 2)
    hd = spec.get("head_dim", H // nH)
    F = 96
    vd = spec["vd"] or V
    pfx = "midlayer." if spec["layout"] == "flat" else "layers.0."
    dt = spec["dtype"]

    def lin(o, i, gain=1.0):
        return rng.standard_normal((o, i)) * (gain / np.sqrt(i))

    def norm(n):
        return 1.0 + 0.1 * rng.standard_normal(n)

    t = [("fc.weight", dt, lin(H, 3 * tH, 1.5))]
    if spec.get("bias"):
        t.append(("fc.bias", dt, 0.2 * rng.standard_normal(H)))
    for i in range(3 if spec.get("fc_norm") else 0):
        t.append((f"fc_norm.{i}.weight", dt, norm(tH)))
    if spec.get("norm_before_fc"):
        t.append(("input_norm.weight", dt, norm(3 * tH)))
    for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        t.append((pfx + n + ".weight", dt, norm(H)))
    t += [(pfx + "self_attn.q_proj.weight", dt, lin(nH * hd, 2 * H, 2.0)),
          (pfx + "self_attn.k_proj.weight", dt, lin(nKV * hd, 2 * H, 2.0)),
          (pfx + "self_attn.v_proj.weight", dt, lin(nKV * hd, 2 * H)),
          (pfx + "self_attn.o_proj.weight", dt, lin(H, nH * hd)),
          (pfx + "mlp.gate_proj.weight", dt, lin(F, H)),
          (pfx + "mlp.up_proj.weight", dt, lin(F, H)),
          (pfx + "mlp.down_proj.weight", dt, lin(H, F)),
          ("norm.weight", dt, norm(H)),
          ("lm_head.weight", dt, lin(vd, H, 3.0))]
    if spec.get("embed"):
        t.append(("embed_tokens.weight", dt, 0.5 * rng.standard_normal((V, H))))
    sel = np.sort(rng.choice(V, vd, replace=False)) if vd < V else np.arange(V)
    if spec.get("d2t"):
        t.append(("d2t", "I64", sel - np.arange(vd)))
    if spec.get("t2d"):
        m = np.zeros(V, dtype=bool)
        m[sel] = True
        t.append(("t2d", "BOOL", m))
    # HF save_pretrained order: I64 first, floats by name, BOOL last
    order = {"I64": 0, "BOOL": 2}
    t.sort(key=lambda x: (order.get(x[1], 1), x[0]))
    return t, dict(nH=nH, nKV=nKV, hd=hd, F=F, vd=vd)


def head_config(spec, H, V, dims, tH):
    layer = {"model_type": "llama", "hidden_size": H, "intermediate_size": dims["F"], "num_hidden_layers": 1,
             "num_attention_heads": dims["nH"], "num_key_value_heads": dims["nKV"], "head_dim": dims["hd"],
             "rms_norm_eps": 1e-5, "vocab_size": V, "max_position_embeddings": 2048, "hidden_act": "silu",
             "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
             "rope_theta": spec.get("theta", 10000.0)}
    if spec.get("rope_scaling"):
        layer["rope_scaling"] = spec["rope_scaling"]
    extra = {"target_hidden_size": tH}
    if spec["vd"]:
        extra["draft_vocab_size"] = dims["vd"]
    for k in ("norm_before_residual", "norm_output", "fc_norm", "norm_before_fc"):
        if k in spec:
            extra[k] = spec[k]
    if spec.get("top_ids"):
        extra["eagle_aux_hidden_state_layer_ids"] = spec["top_ids"]
    if spec.get("bias"):
        extra["bias"] = True
    if spec["layout"] == "flat":
        cfg = dict(layer, architectures=["LlamaForCausalLMEagle3"], torch_dtype="bfloat16", **extra)
        if "eagle_config" in spec:
            cfg["eagle_config"] = spec["eagle_config"]
        return cfg
    return dict(architectures=["Eagle3Speculator"], speculators_model_type="eagle3",
                transformer_layer_config=layer, speculators_config={
                    "algorithm": "eagle3", "default_proposal_method": "greedy",
                    "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                    "verifier": {"name_or_path": "random-target", "architectures": ["LlamaForCausalLM"]}},
                **extra)


class Script:
    def __init__(self, ref, rng, tH):
        self.ref, self.rng, self.tH = ref, rng, tH
        self.buf = bytearray()
        self.all_g = np.zeros((0, ref.H))  # every row output so far, in order (src indexes it)

    def _rows(self, op, tokens, pos, parents, n_shared, payload):
        n = len(tokens)
        self.buf += struct.pack("<3i", op, n, n_shared if parents is not None else -1)
        self.buf += np.asarray(tokens, "<i4").tobytes() + np.asarray(pos, "<i4").tobytes()
        if parents is not None:
            self.buf += np.asarray(parents, "<i4").tobytes()
        self.buf += payload

    def _refs(self, logits, g):
        self.buf += logits.astype("<f8").tobytes() + g.astype("<f8").tobytes() + self.ref.q(logits).astype("<f8").tobytes()
        self.all_g = np.concatenate([self.all_g, g])

    def fused(self, tokens, pos, parents=None, n_shared=0):
        aux = (self.rng.standard_normal((len(tokens), 3 * self.tH)) * 1.3).astype(np.float32)
        self._rows(1, tokens, pos, parents, n_shared, aux.tobytes())
        self._refs(*self.ref.step(tokens, self.ref.fuse(aux), pos, parents, n_shared))

    def recur(self, tokens, pos, src, parents=None, n_shared=0):
        g = self.all_g[np.asarray(src)]
        self._rows(2, tokens, pos, parents, n_shared, np.asarray(src, "<i4").tobytes())
        self._refs(*self.ref.step(tokens, g, pos, parents, n_shared))

    def truncate(self, n):
        self.buf += struct.pack("<3i", 3, n, -1)
        self.ref.truncate(n)


def write_script(d, ref, rng, tH, V):
    """A drafter's life (docs/EAGLE3.md §6-7): prefix extend, chain, rollback + re-extend with
    the accepted rows' target features, chain again, then one EAGLE-2 tree level pair."""
    s = Script(ref, rng, tH)
    tok = lambda n: rng.integers(0, V, n)  # noqa: E731
    last = lambda: len(s.all_g) - 1  # noqa: E731
    N = 12
    s.fused(tok(N), np.arange(N))                    # prefix rows p: (t_{p+1}, g_p) at pos p
    for j in range(3):                               # chain: previous row's g_next, pos + 1
        s.recur(tok(1), [N + j], [last()])
    s.truncate(N)                                    # rejected: keep the verified rows
    s.fused(tok(3), np.arange(N, N + 3))             # 2 accepted + bonus: 3 rows on target features
    root = last()
    for j in range(2):
        s.recur(tok(1), [N + 3 + j], [last()])
    s.truncate(N + 3)
    P = N + 3                                        # tree: 2 children of the root, 2 grandchildren of child 0
    s.recur(tok(2), [P, P], [root, root], parents=[-1, -1], n_shared=P)
    c0 = last() - 1
    s.recur(tok(3), [P + 1, P + 1, P + 1], [c0, c0, c0 + 1], parents=[P, P, P + 1], n_shared=P)
    with open(os.path.join(d, "script.bin"), "wb") as f:
        f.write(bytes(s.buf))


def write_head(out, name, spec, seed, target_embed, target=TARGET, script=True):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    H, V, tH = target["hidden"], target["vocab"], target["hidden"]
    t, dims = head_tensors(spec, rng, H, V, tH)
    st_write(os.path.join(d, "model.safetensors"), t, align=spec.get("align", True))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(head_config(spec, H, V, dims, tH), f, indent=2)
    ref = eagle3_ref.Eagle3Ref(d, target_embed)
    if script:
        write_script(d, ref, rng, tH, V)
    return d, ref


def bad_heads(out, good):
    """Variants of the flat F32 head, each broken one way."""
    src = os.path.join(out, good)
    cfg = json.load(open(os.path.join(src, "config.json")))
    W = eagle3_ref.read_safetensors(os.path.join(src, "model.safetensors"))

    def tens(mod=None):
        t = [(k, "I64" if v.dtype == np.int64 else "BOOL" if v.dtype == bool else "F32", v) for k, v in W.items()]
        return mod(t) if mod else t

    def emit(name, tensors=None, config=None, raw=None):
        d = os.path.join(out, "bad_" + name)
        os.makedirs(d, exist_ok=True)
        json.dump(config or cfg, open(os.path.join(d, "config.json"), "w"))
        if raw is not None:
            open(os.path.join(d, "model.safetensors"), "wb").write(raw)
        else:
            st_write(os.path.join(d, "model.safetensors"), tensors or tens())

    raw = open(os.path.join(src, "model.safetensors"), "rb").read()
    emit("truncated", raw=raw[:len(raw) - 100])
    emit("q_shape", tens(lambda t: [(k, d, v[:, :64] if k.endswith("q_proj.weight") else v) for k, d, v in t]))
    emit("no_lm_head", tens(lambda t: [x for x in t if x[0] != "lm_head.weight"]))
    emit("d2t_range", tens(lambda t: [(k, d, v + np.where(np.arange(len(v)) == len(v) - 1, 1000, 0)
                                       if k == "d2t" else v) for k, d, v in t]))
    def dup(v):  # draft id 1 maps to the same target id as draft id 0
        v = v.copy()
        v[1] = v[0] - 1
        return v
    emit("d2t_dup", tens(lambda t: [(k, d, dup(v) if k == "d2t" else v) for k, d, v in t]))
    def big(v):  # d2t[2] + 2 overflows int64
        v = v.copy()
        v[2] = np.iinfo(np.int64).max
        return v
    emit("d2t_overflow", tens(lambda t: [(k, d, big(v) if k == "d2t" else v) for k, d, v in t]))
    emit("t2d_mismatch", tens(lambda t: [(k, d, ~v if k == "t2d" else v) for k, d, v in t]))
    emit("d2t_dtype", tens(lambda t: [(k, "F32" if k == "d2t" else d, v) for k, d, v in t]))
    emit("aux_range", config=dict(cfg, eagle_aux_hidden_state_layer_ids=[2, 4, 9]))
    emit("aux_list", config=dict(cfg, eagle_aux_hidden_state_layer_ids=[2, 4]))
    emit("two_layers", config=dict(cfg, num_hidden_layers=2))
    emit("eagle1", config=dict(cfg, eagle_config={"use_aux_hidden_state": False}))
    emit("vocab_too_small", config=dict(cfg, draft_vocab_size=cfg["vocab_size"] + 1))
    emit("qwen3_layer", config=dict(cfg, model_type="qwen3"))
    emit("hidden_act_gelu", config=dict(cfg, hidden_act="gelu"))
    emit("mlp_bias", config=dict(cfg, mlp_bias=True))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    make_checkpoint.CASES["eagle3_target"] = TARGET
    tdir = make_checkpoint.write_checkpoint(os.path.join(out, "target"), "eagle3_target")
    tcfg, tw = make_checkpoint_weights(tdir)
    lines, drafts = [], []
    for i, (name, spec) in enumerate(sorted(CASES.items())):
        d, ref = write_head(out, name, spec, 500 + i, tw["model.embed_tokens.weight"])
        lines.append(f"{name} {os.path.abspath(d)}\n")
        # the drafter's greedy rounds (drafts_ref.py): "<case> <round> <tokens...>"
        for r, chain in enumerate(drafts_ref.simulate(tcfg, tw, ref, DRAFT_PROMPT, DRAFT_GAMMA, DRAFT_ROUNDS)):
            drafts.append(f"{name} {r} " + " ".join(map(str, chain)) + "\n")
    bad_heads(out, "flat_f32_d2t")
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.writelines(lines)
    with open(os.path.join(out, "drafts.txt"), "w") as f:
        f.writelines(drafts)
    # the G-test pair: a 16-token 8-layer target and a head over 12 of its ids
    make_checkpoint.CASES["eagle3_gtarget"] = GTARGET
    gdir = make_checkpoint.write_checkpoint(os.path.join(out, "gtarget"), "eagle3_gtarget")
    _, gw = make_checkpoint_weights(gdir)
    write_head(out, "ghead", GHEAD, 900, gw["model.embed_tokens.weight"], GTARGET, script=False)
    print(f"make_heads.py: {len(lines)} heads, a target and bad heads in {out}")


def make_checkpoint_weights(d):
    import llama_ref
    return llama_ref.load_checkpoint(d)


if __name__ == "__main__":
    main()

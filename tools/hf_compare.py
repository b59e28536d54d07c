#!/usr/bin/env python3
"""hf_compare.py — check that specdec reads a Hugging Face model directory exactly as
`transformers` does: same token ids, same decoded text, same fp32 logits.

--families: every family and variant specdec supports (Llama with biases and each
rope_scaling type, Mistral with a window, Qwen2/Qwen3 with windows, Phi-3/3.5/4,
Gemma 1/2/3, the MoE families, GPT-OSS plain and MXFP4, OLMo-2, Granite(-MoE), SmolLM3, OLMoE, ERNIE 4.5, GLM-4, EXAONE 4, GLM-4.5, DeepSeek-V2/V3:
tools/gen_model_fixtures.py's variants), written as tiny random
checkpoints by transformers into a temporary directory and compared on token ids
(logits only: one call, two chunks, token by token; rows within --tol and the
argmax identical). A directory without tokenizer.json is compared the same way.

For each model directory (default: the bundled models/kjv-target and models/kjv-draft):
  - transformers: AutoTokenizer + AutoModelForCausalLM in fp32 (eager attention)
  - specdec, through its public C ABI with ctypes on libspecdec.so: specdec_tokenizer_load /
    specdec_tokenize / specdec_detokenize, specdec_model_load / specdec_engine_create
    (CPU backend) / specdec_engine_forward
  - token ids must be identical on every text; decoded text identical
  - logits: ||specdec - hf|| / ||hf|| < --tol (1e-5) over every position of every text, for a
    whole-sequence forward and for the same sequence fed in two chunks (KV-cache path)
Prints one line per check and PASS/FAIL; exits 0 only if everything passed, 1 on a mismatch,
2 when something needed (transformers, the library, a directory) is missing.

  python3 tools/hf_compare.py [--lib build-x/libspecdec.so] [DIR ...]
  python3 tools/hf_compare.py --families [--tol 1e-4]
Needs: torch and transformers (pip, CPU is enough; tools/requirements-train.txt), numpy.
"""
import argparse
import ctypes as C
import glob
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def die(msg, code=2):
    print(f"hf_compare: {msg}", file=sys.stderr)
    sys.exit(code)


try:
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
except ImportError as e:
    die(f"needs torch, transformers and numpy ({e}); install with "
        f"`pip install -r tools/requirements-train.txt` (CPU wheels are enough)")

# Texts for the comparisons: KJV verses from the books held out of training, plus strings
# that stress the byte-level pre-tokenizer (digits, whitespace runs, non-ASCII, specials).
FIXED_TEXTS = [
    "And Ruth said, Intreat me not to leave thee, or to return from following after thee:",
    "Now the word of the LORD came unto Jonah the son of Amittai, saying,",
    "Arise, go to Nineveh, that great city, and cry against it; for their wickedness is come up before me.",
    "Paul, a prisoner of Jesus Christ, and Timothy our brother, unto Philemon our dearly beloved,",
    "Mercy unto you, and peace, and love, be multiplied.\nBeloved, when I gave all diligence",
    "In the year 1611,  the  translators   wrote:\n\n\tverse 3:16 -- 42 times?!",
    "Caf\u00e9 na\u00efve \u00fcber \u2014 \u201cquoted\u201d \u00e6on \U0001F600 \u05d0\u05b8\u05d3\u05b8\u05dd",
    "<s>And the LORD said</s> unto Moses",
    "",
]


def heldout_texts(n):
    """Up to n held-out verses from Debian's `bible` (package bible-kjv), if installed."""
    try:
        raw = subprocess.run(["bible", "Ruth1:1-1:22"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    out, cur = [], None
    for line in raw.split("\n"):
        s = line.strip()
        if not s or s.startswith("Ruth"):
            continue
        if line.startswith("  ") and s.split(" ", 1)[0].isdigit():
            if cur:
                out.append(cur)
            cur = s.split(" ", 1)[1]
        elif cur is not None:
            cur += " " + s
    if cur:
        out.append(cur)
    # join verses two by two: longer sequences exercise more positions
    return [out[i] + "\n" + out[i + 1] for i in range(0, min(len(out) - 1, 2 * n), 2)]


class ModelParams(C.Structure):
    _fields_ = [("use_mmap", C.c_int32), ("reserved_i", C.c_int32 * 7), ("reserved", C.c_uint64 * 8)]


class EngineParams(C.Structure):
    _fields_ = [("backend", C.c_int), ("n_ctx", C.c_int32), ("max_batch", C.c_int32),
                ("cuda_device", C.c_int32), ("cuda_keep_f32", C.c_int32),
                ("reserved_i", C.c_int32 * 7), ("reserved", C.c_uint64 * 8)]


class ModelInfo(C.Structure):
    _fields_ = [("architecture", C.c_char * 64), ("vocab_size", C.c_int32), ("hidden_size", C.c_int32),
                ("intermediate_size", C.c_int32), ("n_layers", C.c_int32), ("n_heads", C.c_int32),
                ("n_kv_heads", C.c_int32), ("head_dim", C.c_int32), ("max_position_embeddings", C.c_int32),
                ("rms_norm_eps", C.c_float), ("rope_theta", C.c_float), ("rope_scaling_llama3", C.c_int32),
                ("tie_word_embeddings", C.c_int32), ("attention_bias", C.c_int32), ("dtype", C.c_int),
                ("n_params", C.c_int64), ("bos_id", C.c_int32), ("n_eos", C.c_int32),
                ("eos_ids", C.c_int32 * 8), ("reserved", C.c_uint64 * 8)]


class GenerateParams(C.Structure):
    _fields_ = [("n_predict", C.c_int32), ("temperature", C.c_float), ("top_k", C.c_int32), ("top_p", C.c_float),
                ("min_p", C.c_float), ("seed", C.c_uint64), ("sequence_id", C.c_uint64), ("verify", C.c_int),
                ("n_draft", C.c_int32), ("adaptive_draft", C.c_int32), ("ignore_eos", C.c_int32),
                ("stop_strings", C.c_void_p), ("n_stop_strings", C.c_int32), ("tokenizer", C.c_void_p),
                ("callback", C.c_void_p), ("user_data", C.c_void_p), ("reserved_i", C.c_int32 * 8),
                ("reserved", C.c_uint64 * 8)]


class Stats(C.Structure):
    _fields_ = [("n_prompt", C.c_int64), ("n_generated", C.c_int64), ("n_rounds", C.c_int64),
                ("n_drafted", C.c_int64), ("n_accepted", C.c_int64), ("acceptance_rate", C.c_double),
                ("tokens_per_round", C.c_double), ("t_prefill_s", C.c_double), ("t_draft_s", C.c_double),
                ("t_target_s", C.c_double), ("t_verify_s", C.c_double), ("t_total_s", C.c_double),
                ("tokens_per_second", C.c_double), ("final_n_draft", C.c_int32), ("stop_reason", C.c_int),
                ("reserved", C.c_uint64 * 8)]


BACKEND_CPU = 1
VERIFY_REJECTION, VERIFY_GREEDY = 1, 2
ROLE_TARGET = 0
ERR_BUFFER_TOO_SMALL = 11


def find_lib(explicit):
    if explicit:
        return explicit
    cands = glob.glob(os.path.join(ROOT, "build*", "libspecdec.so"))
    if not cands:
        die("no build*/libspecdec.so under the repository; build first "
            "(cmake -S . -B build -DSPECDEC_CUDA=OFF && cmake --build build) or pass --lib")
    return max(cands, key=os.path.getmtime)


class Specdec:
    def __init__(self, path):
        try:
            L = C.CDLL(path)
        except OSError as e:
            die(f"cannot load {path}: {e}")
        vp = C.c_void_p
        sig = {
            "specdec_status_string": (C.c_char_p, [C.c_int]),
            "specdec_last_error": (C.c_char_p, []),
            "specdec_model_default_params": (ModelParams, []),
            "specdec_model_load": (C.c_int, [C.c_char_p, C.POINTER(ModelParams), C.POINTER(vp)]),
            "specdec_model_free": (None, [vp]),
            "specdec_model_get_info": (C.c_int, [vp, C.POINTER(ModelInfo)]),
            "specdec_engine_default_params": (EngineParams, []),
            "specdec_engine_create": (C.c_int, [vp, vp, C.POINTER(EngineParams), C.POINTER(vp)]),
            "specdec_engine_free": (None, [vp]),
            "specdec_engine_last_error": (C.c_char_p, [vp]),
            "specdec_engine_forward": (C.c_int, [vp, C.c_int, C.POINTER(C.c_int32), C.c_int32, C.c_int32,
                                                 C.POINTER(C.c_float)]),
            "specdec_tokenizer_load": (C.c_int, [C.c_char_p, C.POINTER(vp)]),
            "specdec_tokenizer_free": (None, [vp]),
            "specdec_tokenizer_last_error": (C.c_char_p, [vp]),
            "specdec_tokenize": (C.c_int, [vp, C.c_char_p, C.c_size_t, C.c_int, C.POINTER(C.c_int32),
                                           C.c_int32, C.POINTER(C.c_int32)]),
            "specdec_generate_default_params": (GenerateParams, []),
            "specdec_generate": (C.c_int, [vp, C.POINTER(C.c_int32), C.c_int32, C.POINTER(GenerateParams),
                                           C.POINTER(C.c_int32), C.c_int32, C.POINTER(C.c_int32), C.POINTER(Stats)]),
            "specdec_detokenize": (C.c_int, [vp, C.POINTER(C.c_int32), C.c_int32, C.c_int, C.c_char_p,
                                             C.c_size_t, C.POINTER(C.c_size_t)]),
        }
        for name, (res, args) in sig.items():
            try:
                f = getattr(L, name)
            except AttributeError:
                die(f"{path} does not export {name} (library too old or incomplete?)")
            f.restype, f.argtypes = res, args
        self.L = L

    def check(self, st, what, handle_err=None):
        if st != 0:
            detail = handle_err() if handle_err else self.L.specdec_last_error()
            raise RuntimeError(f"{what}: {self.L.specdec_status_string(st).decode()}: "
                               f"{(detail or b'').decode(errors='replace')}")


def sd_tokenize(sd, tok, text, add_special):
    b = text.encode("utf-8")
    n = C.c_int32(0)
    cap = len(b) + 8
    buf = (C.c_int32 * cap)()
    st = sd.L.specdec_tokenize(tok, b, len(b), add_special, buf, cap, C.byref(n))
    if st == ERR_BUFFER_TOO_SMALL:
        cap = n.value
        buf = (C.c_int32 * cap)()
        st = sd.L.specdec_tokenize(tok, b, len(b), add_special, buf, cap, C.byref(n))
    sd.check(st, "specdec_tokenize", lambda: sd.L.specdec_tokenizer_last_error(tok))
    return list(buf[:n.value])


def sd_detokenize(sd, tok, ids):
    arr = (C.c_int32 * max(1, len(ids)))(*ids)
    n = C.c_size_t(0)
    cap = 16 * len(ids) + 16
    buf = C.create_string_buffer(cap)
    st = sd.L.specdec_detokenize(tok, arr, len(ids), 1, buf, cap, C.byref(n))
    if st == ERR_BUFFER_TOO_SMALL:
        cap = n.value + 1
        buf = C.create_string_buffer(cap)
        st = sd.L.specdec_detokenize(tok, arr, len(ids), 1, buf, cap, C.byref(n))
    sd.check(st, "specdec_detokenize", lambda: sd.L.specdec_tokenizer_last_error(tok))
    return buf.raw[:n.value].decode("utf-8", errors="replace")


def specdec_acceptance(lib, target_dir, draft_dir, prompts, n_new=64, gamma=4, temperature=0.0, seed=1234):
    """Speculative generation with specdec (CPU) over prompts (lists of ids, BOS included).
    temperature 0: greedy verification; else rejection sampling with top-k/top-p/min-p off.
    Returns dict(drafted, accepted, acceptance, generated, rounds, tokens_per_round, seconds)."""
    sd = Specdec(find_lib(lib))
    mp = sd.L.specdec_model_default_params()
    tm, dm, eng = C.c_void_p(), C.c_void_p(), C.c_void_p()
    sd.check(sd.L.specdec_model_load(target_dir.encode(), C.byref(mp), C.byref(tm)), "load target")
    sd.check(sd.L.specdec_model_load(draft_dir.encode(), C.byref(mp), C.byref(dm)), "load draft")
    ep = sd.L.specdec_engine_default_params()
    ep.backend = BACKEND_CPU
    tot = dict(drafted=0, accepted=0, generated=0, rounds=0, seconds=0.0)
    try:
        sd.check(sd.L.specdec_engine_create(tm, dm, C.byref(ep), C.byref(eng)), "specdec_engine_create")
        for i, p in enumerate(prompts):
            gp = sd.L.specdec_generate_default_params()
            gp.n_predict, gp.temperature, gp.n_draft, gp.ignore_eos = n_new, temperature, gamma, 1
            gp.top_k, gp.top_p, gp.min_p = 0, 1.0, 0.0
            gp.verify = VERIFY_GREEDY if temperature == 0 else VERIFY_REJECTION
            gp.seed, gp.sequence_id = seed, i
            arr = (C.c_int32 * len(p))(*p)
            out = (C.c_int32 * n_new)()
            n = C.c_int32(0)
            st = Stats()
            sd.check(sd.L.specdec_generate(eng, arr, len(p), C.byref(gp), out, n_new, C.byref(n), C.byref(st)),
                     "specdec_generate", lambda: sd.L.specdec_engine_last_error(eng))
            tot["drafted"] += st.n_drafted
            tot["accepted"] += st.n_accepted
            tot["generated"] += st.n_generated
            tot["rounds"] += st.n_rounds
            tot["seconds"] += st.t_total_s
    finally:
        sd.L.specdec_engine_free(eng)
        sd.L.specdec_model_free(dm)
        sd.L.specdec_model_free(tm)
    tot["acceptance"] = tot["accepted"] / max(1, tot["drafted"])
    tot["tokens_per_round"] = tot["generated"] / max(1, tot["rounds"])
    return tot


def load_hf(d):
    kw = dict(attn_implementation="eager")
    try:
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, **kw)
    except TypeError:  # transformers 4.x spells it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32, **kw)
    return model.eval(), AutoTokenizer.from_pretrained(d)


def compare_dir(sd, d, texts, tol):
    ok = True
    name = os.path.basename(os.path.normpath(d))
    model, hf_tok = load_hf(d)
    tokh = C.c_void_p()
    sd.check(sd.L.specdec_tokenizer_load(d.encode(), C.byref(tokh)), f"specdec_tokenizer_load({d})")
    mh = C.c_void_p()
    mp = sd.L.specdec_model_default_params()
    sd.check(sd.L.specdec_model_load(d.encode(), C.byref(mp), C.byref(mh)), f"specdec_model_load({d})")
    eng = C.c_void_p()
    ep = sd.L.specdec_engine_default_params()
    ep.backend = BACKEND_CPU
    try:
        sd.check(sd.L.specdec_engine_create(mh, None, C.byref(ep), C.byref(eng)), "specdec_engine_create")
        info = ModelInfo()
        sd.check(sd.L.specdec_model_get_info(mh, C.byref(info)), "specdec_model_get_info")
        n_hf = sum(p.numel() for p in model.parameters())
        cfg = model.config
        meta_ok = (info.n_params == n_hf and info.vocab_size == cfg.vocab_size
                   and info.n_kv_heads == cfg.num_key_value_heads and info.n_layers == cfg.num_hidden_layers
                   and bool(info.tie_word_embeddings) == bool(cfg.tie_word_embeddings))
        print(f"[{name}] info: {info.architecture.decode()} params specdec {info.n_params} hf {n_hf}, "
              f"layers {info.n_layers}, heads {info.n_heads}/{info.n_kv_heads} kv, "
              f"tied {info.tie_word_embeddings}: {'ok' if meta_ok else 'MISMATCH'}")
        ok &= meta_ok

        n_tok_bad = n_dec_bad = 0
        worst, worst_split, argmax_bad, n_pos = 0.0, 0.0, 0, 0
        V = cfg.vocab_size
        for text in texts:
            ref_ids = hf_tok(text)["input_ids"]
            ids = sd_tokenize(sd, tokh, text, 1)
            if ids != ref_ids:
                n_tok_bad += 1
                print(f"[{name}] token ids differ on {text!r}:\n  hf      {ref_ids}\n  specdec {ids}")
            ref_dec = hf_tok.decode(ref_ids, skip_special_tokens=True)
            dec = sd_detokenize(sd, tokh, ref_ids)
            if dec != ref_dec:
                n_dec_bad += 1
                print(f"[{name}] decode differs on {ref_ids}:\n  hf      {ref_dec!r}\n  specdec {dec!r}")
            if not ref_ids:
                continue
            with torch.no_grad():
                ref = model(input_ids=torch.tensor([ref_ids])).logits[0].double().numpy()
            n = len(ref_ids)
            arr = (C.c_int32 * n)(*ref_ids)
            out = np.zeros((n, V), dtype=np.float32)
            outp = out.ctypes.data_as(C.POINTER(C.c_float))
            sd.check(sd.L.specdec_engine_forward(eng, ROLE_TARGET, arr, n, 0, outp), "specdec_engine_forward",
                     lambda: sd.L.specdec_engine_last_error(eng))
            rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
            worst = max(worst, rel)
            argmax_bad += int((out.argmax(-1) != ref.argmax(-1)).sum())
            n_pos += n
            # the same ids in two calls: the second reads the first's keys/values from the cache
            k = max(1, n // 2)
            out2 = np.zeros((n, V), dtype=np.float32)
            sd.check(sd.L.specdec_engine_forward(eng, ROLE_TARGET, arr, k, 0,
                                                 out2.ctypes.data_as(C.POINTER(C.c_float))),
                     "specdec_engine_forward (chunk 1)", lambda: sd.L.specdec_engine_last_error(eng))
            if n > k:
                arr2 = (C.c_int32 * (n - k))(*ref_ids[k:])
                sd.check(sd.L.specdec_engine_forward(eng, ROLE_TARGET, arr2, n - k, k,
                                                     out2[k:].ctypes.data_as(C.POINTER(C.c_float))),
                         "specdec_engine_forward (chunk 2)", lambda: sd.L.specdec_engine_last_error(eng))
            worst_split = max(worst_split, np.linalg.norm(out2 - ref) / np.linalg.norm(ref))
        tok_ok = n_tok_bad == 0 and n_dec_bad == 0
        print(f"[{name}] tokenizer: {len(texts)} texts, ids differ on {n_tok_bad}, decode differs on "
              f"{n_dec_bad}: {'PASS' if tok_ok else 'FAIL'}")
        lg_ok = worst < tol and worst_split < tol
        print(f"[{name}] logits: {n_pos} positions, max ||d||/||ref|| {worst:.3e} (one call), "
              f"{worst_split:.3e} (two calls), argmax differs at {argmax_bad}, tol {tol:g}: "
              f"{'PASS' if lg_ok else 'FAIL'}")
        ok &= tok_ok and lg_ok
    finally:
        sd.L.specdec_engine_free(eng)
        sd.L.specdec_model_free(mh)
        sd.L.specdec_tokenizer_free(tokh)
    return ok


def load_hf_model(d):
    try:
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    except TypeError:  # transformers 4.x spells it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager")
    return model.eval()


def compare_ids(sd, d, ids, tol, model=None):
    """Logits of ids by transformers and by specdec (CPU engine with n_ctx = len(ids)):
    one call, two chunks, token by token; each row within tol, argmax identical."""
    name = os.path.basename(os.path.normpath(d))
    model = model or load_hf_model(d)
    V, n = model.config.vocab_size, len(ids)
    with torch.no_grad():
        ref = model(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0].double().numpy()
    mh, eng = C.c_void_p(), C.c_void_p()
    mp = sd.L.specdec_model_default_params()
    sd.check(sd.L.specdec_model_load(d.encode(), C.byref(mp), C.byref(mh)), f"specdec_model_load({d})")
    ep = sd.L.specdec_engine_default_params()
    ep.backend, ep.n_ctx, ep.max_batch = BACKEND_CPU, n, n
    ok = True
    try:
        sd.check(sd.L.specdec_engine_create(mh, None, C.byref(ep), C.byref(eng)), "specdec_engine_create")
        arr = (C.c_int32 * n)(*ids)

        def run(splits):
            out = np.zeros((n, V), dtype=np.float32)
            for a, b in zip(splits[:-1], splits[1:]):
                sd.check(sd.L.specdec_engine_forward(eng, ROLE_TARGET, C.cast(C.byref(arr, 4 * a), C.POINTER(C.c_int32)),
                                                     b - a, a, out[a:].ctypes.data_as(C.POINTER(C.c_float))),
                         "specdec_engine_forward", lambda: sd.L.specdec_engine_last_error(eng))
            return out
        for what, splits in (("one call", [0, n]), ("two chunks", [0, n // 2, n]), ("token by token", list(range(n + 1)))):
            out = run(splits)
            rel = (np.linalg.norm(out - ref, axis=-1) / np.linalg.norm(ref, axis=-1)).max()
            bad = int((out.argmax(-1) != ref.argmax(-1)).sum())
            good = rel < tol and bad == 0
            ok &= good
            print(f"[{name}] {model.config.architectures[0]} {what}: {n} positions, max row ||d||/||ref|| {rel:.2e}, "
                  f"argmax differs at {bad}, tol {tol:g}: {'PASS' if good else 'FAIL'}")
    finally:
        sd.L.specdec_engine_free(eng)
        sd.L.specdec_model_free(mh)
    return ok


def compare_families(sd, tol):
    """Every variant of tools/gen_model_fixtures.py, written by transformers here."""
    import tempfile
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import gen_model_fixtures as gen
    ok = True
    with tempfile.TemporaryDirectory(prefix="hf_compare_") as tmp:
        for i, name in enumerate(sorted(gen.VARIANTS)):
            model = gen.build(name, 1)
            d = os.path.join(tmp, name)
            gen.save(name, model, d)  # MXFP4 variants: experts as the published gpt-oss checkpoints store them
            ids = [1] + list(np.random.default_rng(i).integers(3, gen.V, gen.T - 1))
            try:
                ok &= compare_ids(sd, d, [int(x) for x in ids], tol, model)
            except RuntimeError as e:
                print(f"[{name}] error: {e}")
                ok = False
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="*", default=[os.path.join(ROOT, "models", "kjv-target"),
                                                 os.path.join(ROOT, "models", "kjv-draft")])
    ap.add_argument("--lib", help="path to libspecdec.so (default: newest build*/libspecdec.so)")
    ap.add_argument("--tol", type=float, default=1e-5, help="bound on ||specdec - hf|| / ||hf||")
    ap.add_argument("--n-verses", type=int, default=8, help="held-out verse pairs taken from `bible`")
    ap.add_argument("--families", action="store_true", help="every supported family on tiny random checkpoints")
    args = ap.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    if args.families:
        sd = Specdec(find_lib(args.lib))
        ok = compare_families(sd, args.tol)
        print("PASS" if ok else "FAIL")
        sys.exit(0 if ok else 1)
    for d in args.dirs:
        if not os.path.isfile(os.path.join(d, "config.json")):
            die(f"{d}: no config.json")
    lib = find_lib(args.lib)
    sd = Specdec(lib)
    texts = FIXED_TEXTS + heldout_texts(args.n_verses)
    print(f"hf_compare: library {lib}, {len(texts)} texts")
    ok = True
    for d in args.dirs:
        try:
            if not os.path.isfile(os.path.join(d, "tokenizer.json")):  # logits on fixed ids only
                ids = [1] + [int(x) for x in np.random.default_rng(0).integers(3, 60, 31)]
                ok &= compare_ids(sd, d, ids, args.tol)
                continue
            ok &= compare_dir(sd, d, texts, args.tol)
        except RuntimeError as e:
            print(f"[{os.path.basename(os.path.normpath(d))}] error: {e}")
            ok = False
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""gen_gguf_tokenizer_fixtures.py — vocab-only GGUF files (no tensors) holding the tokenizer of a
tokenizer.json, written the way llama.cpp's convert_hf_to_gguf.py writes them (gguf-py's GGUFWriter:
tokenizer.ggml.model / pre / tokens / token_type / merges or scores, the special ids, add_bos_token,
add_eos_token and the chat template from tokenizer_config.json).

  byte-level BPE ("gpt2": GPT-2, Llama 3, Qwen2.5): tokens in id order; an added token is CONTROL when
    special or when it looks special ("<|...|>"), else USER_DEFINED (convert_hf_to_gguf's
    get_vocab_base); merges as "a b" strings; `pre` as convert_hf_to_gguf's hash table names it.
  SentencePiece BPE ("llama": Mistral v1, TinyLlama, Phi-3): convert_hf_to_gguf reads tokenizer.model,
    which only the published tokenizer.json stands in for here. SentencePiece orders a BPE vocabulary
    by score, a merge result scoring by when it was learnt; so each NORMAL token gets score
    -(rank of the first merge producing it), the single characters after all merges (-(merges + id)),
    and types UNKNOWN / CONTROL / BYTE / NORMAL as sentencepiece marks them; tokens past the
    sentencepiece vocabulary (Phi-3's chat tokens) are CONTROL when special, else USER_DEFINED.

usage:
  gen_gguf_tokenizer_fixtures.py --shared ../shared/tokenizers --out DIR [--names a,b]
      one DIR/NAME.gguf per published tokenizer (prints "skipped: ..." and exits 77 without --shared)
  gen_gguf_tokenizer_fixtures.py --tiny tests/tokenizer/fixtures/gguf
      the committed tiny fixtures: tiny-gpt2/ (tools/gen_model_fixtures.py's tokenizer) and tiny-spm/
      (a small SentencePiece-style vocabulary), each a tokenizer.json (+ tokenizer_config.json) and
      the tokenizer.gguf made from it; tiny-gemma/ (see tiny_gemma: a Gemma-like GGUF and what
      transformers' GGUF tokenizer makes of it, expected.json; needs transformers, so run it with
      /tmp/ht-venv/bin/python or any Python that has transformers + gguf)
"""
import argparse
import importlib.util
import json
import os
import re
import sys

import gguf

HERE = os.path.dirname(os.path.abspath(__file__))

# GPT-2 publishes no tokenizer_config.json: convert_hf_to_gguf takes its special ids from config.json
CONFIG_IDS = {"gpt2": {"bos_token": 50256, "eos_token": 50256}}

# name -> (architecture, tokenizer.ggml.pre or None for SentencePiece, general.name)
PUBLISHED = {
    "gpt2": ("gpt2", "gpt-2", "GPT-2"),
    "llama-3-8b": ("llama", "llama-bpe", "Meta Llama 3 8B"),
    "qwen2.5-1.5b-instruct": ("qwen2", "qwen2", "Qwen2.5 1.5B Instruct"),
    "mistral-v1-mixtral-8x22b": ("llama", None, "Mixtral 8x22B v0.1"),
    "tinyllama-1.1b-chat-v1.0": ("llama", None, "TinyLlama 1.1B Chat v1.0"),
    "phi-3-mini": ("phi3", None, "Phi 3 Mini 4k Instruct"),
}

BYTE_RE = re.compile(r"<0x[0-9A-Fa-f]{2}>$")


def looks_special(t):
    """convert_hf_to_gguf's does_token_look_special."""
    return (t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (t.startswith("<|") and t.endswith("|>"))
            or (t.startswith("<\uff5c") and t.endswith("\uff5c>")) or (t.startswith("<unused") and t.endswith(">")))


def merge_pairs(model):
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]


def load_dir(d):
    tj = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    cp = os.path.join(d, "tokenizer_config.json")
    cfg = json.load(open(cp, encoding="utf-8")) if os.path.exists(cp) else {}
    return tj, cfg


def cfg_text(v):
    return v.get("content") if isinstance(v, dict) else v


def vocab_gpt2(tj):
    """Tokens and types in id order (get_vocab_base); gaps become [PADn] UNUSED."""
    rev = {i: t for t, i in tj["model"]["vocab"].items()}
    added = {a["id"]: a for a in tj["added_tokens"]}
    n = max(list(rev) + list(added)) + 1
    toks, types = [], []
    for i in range(n):
        if i in added:
            a = added[i]
            toks.append(a["content"])
            types.append(gguf.TokenType.CONTROL if a["special"] or looks_special(a["content"])
                         else gguf.TokenType.USER_DEFINED)
        elif i in rev:
            toks.append(rev[i])
            types.append(gguf.TokenType.NORMAL)
        else:
            toks.append("[PAD%d]" % i)
            types.append(gguf.TokenType.UNUSED)
    return toks, types


def vocab_spm(tj, cfg):
    """Tokens, scores and types as sentencepiece's model would give them (see the module comment)."""
    m = tj["model"]
    rev = {i: t for t, i in m["vocab"].items()}
    added = {a["id"]: a for a in tj["added_tokens"]}
    first = {}
    for r, (a, b) in enumerate(merge_pairs(m)):
        first.setdefault(a + b, r)
    n_merges = len(m["merges"])
    control = {cfg_text(cfg.get(k)) for k in ("bos_token", "eos_token")} | {"<s>", "</s>"}
    unk = m.get("unk_token")
    n = max(list(rev) + list(added)) + 1
    toks, scores, types = [], [], []
    for i in range(n):
        if i in rev:
            t = rev[i]
            toks.append(t)
            if t == unk:
                types.append(gguf.TokenType.UNKNOWN)
                scores.append(0.0)
            elif BYTE_RE.match(t):
                types.append(gguf.TokenType.BYTE)
                scores.append(0.0)
            elif t in control and i in added:
                types.append(gguf.TokenType.CONTROL)
                scores.append(0.0)
            else:
                types.append(gguf.TokenType.NORMAL)
                scores.append(-float(first[t]) if t in first else -float(n_merges + i))
        elif i in added:
            a = added[i]
            toks.append(a["content"])
            types.append(gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED)
            scores.append(-1000.0)
        else:
            toks.append("[PAD%d]" % i)
            types.append(gguf.TokenType.UNUSED)
            scores.append(-1000.0)
    return toks, scores, types


def write_gguf(path, tj, cfg, arch, pre, name, config_ids=None):
    w = gguf.GGUFWriter(path, arch)
    w.add_name(name)
    if pre is not None:
        toks, types = vocab_gpt2(tj)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_list(toks)
        w.add_token_types(types)
        w.add_token_merges([a + " " + b for a, b in merge_pairs(tj["model"])])
    else:
        toks, scores, types = vocab_spm(tj, cfg)
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(toks)
        w.add_token_scores(scores)
        w.add_token_types(types)
    index = {}
    for i, t in enumerate(toks):
        index.setdefault(t, i)
    for key, fn in (("bos_token", w.add_bos_token_id), ("eos_token", w.add_eos_token_id),
                    ("unk_token", w.add_unk_token_id), ("pad_token", w.add_pad_token_id)):
        t = cfg_text(cfg.get(key))
        if t is not None and t in index:
            fn(index[t])
        elif config_ids and key in config_ids:
            fn(config_ids[key])
    if pre is None and cfg_text(cfg.get("unk_token")) is None and tj["model"].get("unk_token") in index:
        w.add_unk_token_id(index[tj["model"]["unk_token"]])
    for key, fn in (("add_bos_token", w.add_add_bos_token), ("add_eos_token", w.add_add_eos_token)):
        if isinstance(cfg.get(key), bool):
            fn(cfg[key])
    if isinstance(cfg.get("chat_template"), str):
        w.add_chat_template(cfg["chat_template"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def published(shared, out, names):
    os.makedirs(out, exist_ok=True)
    for name in names:
        arch, pre, gname = PUBLISHED[name]
        tj, cfg = load_dir(os.path.join(shared, name))
        write_gguf(os.path.join(out, name + ".gguf"), tj, cfg, arch, pre, gname, CONFIG_IDS.get(name))
        print("wrote", os.path.join(out, name + ".gguf"))


def tiny_spm_json():
    """A small SentencePiece-style BPE tokenizer.json (Llama 2 layout): <unk> <s> </s>, the 256 byte
    tokens, then merge results and single characters; merges from the vocabulary by transformers'
    generate_merges (an implementation independent of specdec's)."""
    from transformers.tokenization_utils_base import generate_merges
    words = ["\u2581the", "\u2581a", "\u2581of", "\u2581and", "\u2581to", "\u2581in", "ing", "\u2581is", "er", "\u2581that",
             "\u2581speculative", "\u2581decoding", "\u2581\u2581", "\u2581\u2581\u2581\u2581", "\u2581\u4e16\u754c"]
    vocab = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    pieces = set()
    for w_ in words:  # every prefix of a word is a piece, so merges chain
        for k in range(2, len(w_) + 1):
            pieces.add(w_[:k])
    merged = sorted(pieces, key=lambda p: (len(p), p))
    chars = sorted({c for w_ in words for c in w_} | set("bcdefghjklmnopqrsuvwxyz.,!?'0123456789ABCT"))
    vocab += merged + [c for c in chars if c not in merged]
    ids = {t: i for i, t in enumerate(vocab)}
    scores = {t: (0.0 if i < 259 else -float(i)) for t, i in ids.items()}
    normal = {t: i for t, i in ids.items() if i >= 259}
    merges = generate_merges(normal, {t: scores[t] for t in normal})
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(["<unk>", "<s>", "</s>"])]
    added.append({"id": len(vocab), "content": "<tool>", "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": False})
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                             {"type": "Replace", "pattern": {"String": " "},
                                                              "content": "\u2581"}]},
          "pre_tokenizer": None,
          "post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
          "decoder": {"type": "Sequence", "decoders": [
              {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
              {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                    "vocab": ids, "merges": [a + " " + b for a, b in merges]}}
    cfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
           "chat_template": "{% for m in messages %}{{ bos_token }}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}"
                            "{% endfor %}"}
    return tj, cfg


# tiny-gemma: a Gemma-like "llama" vocabulary in the layout convert_hf_to_gguf.py (GemmaModel /
# Gemma2Model / Gemma3Model) writes from Google's tokenizer.model: pad 0, eos 1, bos 2, unk 3, CONTROL
# turn tokens, white-space runs stored with real spaces as USER_DEFINED tokens, the 256 BYTE tokens,
# then NORMAL pieces and single characters; add_space_prefix false, add_bos true. Two tokens are spelt
# again later ("    " as the NORMAL "▁▁▁▁" once respelt, the USER_DEFINED "<b>" as a NORMAL "<b>"):
# transformers keeps the later id, lent the earlier one's added-token status.
GEMMA_HEAD = [("<pad>", 3), ("<eos>", 3), ("<bos>", 3), ("<unk>", 2), ("<mask>", 3), ("<start_of_turn>", 3),
              ("<end_of_turn>", 3), ("<unused0>", 5), ("  ", 4), ("   ", 4), ("\t\t", 4), ("<table>", 4), ("    ", 4),
              ("<b>", 4)]
GEMMA_WORDS = ["\u2581the", "\u2581speculative", "\u2581decoding", "\u2581of", "\u2581and", "\u2581world", "Hello",
               "\u2581is", "\u2581a", "ing", "user", "model", "\u2581\u4e16\u754c", "\u2581there", "\u2581here"]
GEMMA_PAIRS = ["he", "er", "th", "re", "in", "an", "nd", "on", "or", "ld", "de", "co", "at", "iv", "\n\n",
               "\u2581\n", "\u2581\u2581\u2581\u2581", "<b>"]
GEMMA_CHARS = "\n\u2581abcdefghijklmnopqrstuvwxyzHTW0123456789.,!?'():-<>/_\u4e16\u754c"
GEMMA_TEMPLATE = ("{{ bos_token }}{% for message in messages %}<start_of_turn>"
                  "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
                  "{{ message['content'] | trim }}<end_of_turn>\n{% endfor %}"
                  "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
GEMMA_SAMPLE = [
    "", " ", "  ", "   ", "    ", "      ", "Hello world", " Hello world", "  the speculative decoding",
    "the  world   is    here", "there here her other", "hereby thereof", "trailing   ", "\n", "\n\n\n",
    " \n \n", "tabs\tand\t\ttabs\t\t\t", "a\r\nb", "CJK \u4e16\u754c \u4f60\u597d\u4e16", "emoji \U0001f600\U0001f44d\U0001f3fd",
    "\u00e9t\u00e9 na\u00efve \u00c5", "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    "<bos>x<eos> <pad><unk> <mask>", "<table><tr> <table>", "<b>bold</b> <b>", "a    b     c", "<unused0> <unused1>", "  <end_of_turn>  ",
    "ab12 345.6, 7890!", "def f(x):\n    return x ** 2\n", "\u2581already \u2581\u2581marked", "Z~`|\\^",
    "a" * 40, " " * 17 + "x", "\t \t  \n", "\u3000ideographic\u3000space",
]


def gemma_vocab():
    """(tokens, scores, types): GEMMA_HEAD, the bytes, then every prefix of the words and the pairs
    (by length, then text), then the single characters. Scores are shuffled so that ordering the
    recovered merges by score gives other ids than ordering them by file position (what Gemma needs)."""
    import random
    pieces = set(GEMMA_PAIRS)
    for w_ in GEMMA_WORDS:
        for k in range(2, len(w_) + 1):
            pieces.add(w_[:k])
    normal = sorted(pieces, key=lambda p: (len(p), p)) + [c for c in GEMMA_CHARS if c not in pieces]
    toks = [t for t, _ in GEMMA_HEAD] + ["<0x%02X>" % b for b in range(256)] + normal
    types = [k for _, k in GEMMA_HEAD] + [6] * 256 + [1] * len(normal)
    ranks = list(range(len(normal)))
    random.Random(20261129).shuffle(ranks)
    scores = [0.0] * (len(GEMMA_HEAD) + 256) + [-float(r) for r in ranks]
    return toks, scores, types


def write_gemma_gguf(path, toks, scores, types):
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_name("tiny gemma")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_add_space_prefix(False)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_eot_token_id(toks.index("<end_of_turn>"))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(GEMMA_TEMPLATE)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def score_ranked_changes(hf, toks, scores, sample):
    """How many sample encodings change when the recovered merges are ranked by score instead of by
    file position (the same tokenizer otherwise)."""
    from tokenizers import Tokenizer
    from transformers.tokenization_utils_base import generate_merges
    spelled = ["\u2581" * len(t) if " " in t and not t.strip() else t for t in toks]
    vocab = {t: i for i, t in enumerate(spelled)}
    doc = json.loads(hf.backend_tokenizer.to_str())
    doc["model"]["merges"] = [[a, b] for a, b in generate_merges(vocab, dict(zip(spelled, scores)))]
    alt = Tokenizer.from_str(json.dumps(doc))
    return sum(alt.encode(s).ids != hf.backend_tokenizer.encode(s).ids for s in sample)


def tiny_gemma(out):
    """tiny-gemma/tokenizer.gguf and expected.json: transformers' GGUF tokenizer's ids (with and
    without BOS) and decodes (with and without special tokens) of GEMMA_SAMPLE, and one chat
    rendering, for tests/tokenizer/test_gguf_gemma.c to require without Python."""
    import transformers
    from transformers import AutoTokenizer
    d = os.path.join(out, "tiny-gemma")
    os.makedirs(d, exist_ok=True)
    toks, scores, types = gemma_vocab()
    write_gemma_gguf(os.path.join(d, "tokenizer.gguf"), toks, scores, types)
    hf = AutoTokenizer.from_pretrained(d, gguf_file="tokenizer.gguf")
    changed = score_ranked_changes(hf, toks, scores, GEMMA_SAMPLE)
    print("tiny-gemma: %d of %d sample encodings change when merges are ranked by score, not file order"
          % (changed, len(GEMMA_SAMPLE)))
    if changed == 0:
        raise SystemExit("tiny-gemma: the scores do not tell the two merge orders apart on the sample")
    cases = []
    for s in GEMMA_SAMPLE:
        ids = hf.encode(s, add_special_tokens=True)
        cases.append({"text": s, "ids": ids, "ids_plain": hf.encode(s, add_special_tokens=False),
                      "decode": hf.decode(ids, skip_special_tokens=False),
                      "decode_skip": hf.decode(ids, skip_special_tokens=True)})
    msgs = [{"role": "user", "content": "Hi there "}, {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "the world"}]
    chat = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    doc = {"generator": "tools/gen_gguf_tokenizer_fixtures.py --tiny (transformers %s, AutoTokenizer gguf_file=)"
                        % transformers.__version__,
           "score_ranked_changes": changed, "vocab_size": len(toks), "cases": cases,
           "chat": {"messages": msgs, "add_generation_prompt": True, "text": chat}}
    with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")


# ---- pre-tokenizers of published byte-level BPE tokenizer.json files (tokenizer.ggml.pre), as data ----
# Each: the published normalizer, pre_tokenizer and model.ignore_merges, written here from the sources named,
# independently of tokenizer/sd_gguf_tokenizer.c; tests/tokenizer/gguf_pretok_vs_hf.py trains a small
# vocabulary under each, writes its GGUF with that `pre`, and requires specdec's ids on the .gguf to equal the
# `tokenizers` library's on the tokenizer.json.
def _split(regex, behavior="Isolated", invert=False):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": invert}


def _bytelevel(use_regex=False):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def _seq(*steps):
    return {"type": "Sequence", "pretokenizers": list(steps)}


_DIGITS = {"type": "Digits", "individual_digits": True}
_EMPTY_NORM = {"type": "Sequence", "normalizers": []}
LLAMA3_RE = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
             "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
# DeepSeek LLM's cased-letter class, each code point escaped: copies of it in other code (llama.cpp's among
# them) carry U+1F7D, U+1FD3, U+1FDB, U+1FBE, U+2126 and U+212A NFC-normalized, which changes the class
DEEPSEEK_LLM_LETTERS = "\\s?[" + "\u0041-\u005a\u0061-\u007a\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943" + "]+"
DEEPSEEK_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"

# name -> (tokenizer.ggml.pre, architecture, normalizer, pre_tokenizer, ignore_merges, source)
PRETOK = {
    # deepseek-ai/DeepSeek-V3 tokenizer.json (quoted whole in public code; also llama.cpp's DEEPSEEK3_LLM list)
    "deepseek-v3": ("deepseek-v3", "deepseek2", _EMPTY_NORM, _seq(
        _split("\\p{N}{1,3}"), _split("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"),
        _split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
               "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
        _bytelevel()), False, "deepseek-ai/DeepSeek-V3"),
    # DeepSeek LLM / V2 / V2-Lite / Coder-V2 (a census of hub tokenizer.json files quotes the chain for
    # DeepSeek-Coder-V2-Lite-Instruct; llama.cpp's DEEPSEEK_LLM list has \p{N}+ where the file has Digits)
    "deepseek-llm": ("deepseek-llm", "deepseek2", _EMPTY_NORM, _seq(
        _split("[\r\n]"), _split(DEEPSEEK_LLM_LETTERS),
        _split("\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"), _split("\\s+$"),
        _split(DEEPSEEK_CJK), _DIGITS, _bytelevel()), False, "deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct"),
    # deepseek-ai/deepseek-coder-6.7b-instruct (the same census; llama.cpp's DEEPSEEK_CODER list)
    "deepseek-coder": ("deepseek-coder", "llama", _EMPTY_NORM, _seq(
        _split("[\r\n]"), _split("\\s?\\p{L}+"), _split("\\s?\\p{P}+"), _split(DEEPSEEK_CJK), _DIGITS,
        _bytelevel()), False, "deepseek-ai/deepseek-coder-6.7b-instruct"),
    # OLMo 2, Phi-4, Granite 4 (cl100k): Llama 3's regex as Split(Removed, invert) (the census's cl100k chain)
    "dbrx": ("dbrx", "olmo2", None, _seq(_split(LLAMA3_RE, "Removed", True), _bytelevel()), False,
             "allenai/OLMo-2-1124-7B-Instruct"),
    # GLM-4-0414 / GLM-4.5 (zai-org): Llama 3's chain (the census; llama.cpp's CHATGLM4 list, no ignore_merges)
    "glm4": ("glm4", "glm4", None, _seq(_split(LLAMA3_RE), _bytelevel()), False, "zai-org/GLM-4.5"),
    # Granite 3.x (StarCoder's tokenizer, "refact"): Digits, then GPT-2's ByteLevel (llama.cpp's REFACT list)
    "refact": ("refact", "granite", None, _seq(_DIGITS, _bytelevel(True)), False, "ibm-granite/granite-3.1-2b-instruct"),
    # OLMoE (GPT-NeoX's vocabulary, "olmo"): NFC, GPT-2's ByteLevel (llama.cpp: GPT-2's regex)
    "olmo": ("olmo", "olmoe", {"type": "NFC"}, _bytelevel(True), False, "allenai/OLMoE-1B-7B-0924"),
    # EXAONE 4.0 ("exaone4"): llama.cpp's list only (GPT-2's regex)
    "exaone4": ("exaone4", "exaone4", None, _bytelevel(True), False, "LGAI-EXAONE/EXAONE-4.0-1.2B"),
}
PRETOK_SPECIALS = ["<|bos|>", "<|eos|>", "<|user|>", "<\uff5cAssistant\uff5c>"]


def pretok_tokenizer(name, corpus, vocab_size=3000):
    """A byte-level BPE trained with `tokenizers` on corpus, with PRETOK[name]'s normalizer, pre-tokenizer and
    ignore_merges (BOS added by a TemplateProcessing, as add_bos_token says in the GGUF), as a tokenizer.json
    document."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    pre, _, norm, pt, whole, _ = PRETOK[name]
    # trained without splitting (ByteLevel alone), so merges cross every boundary a pre-tokenizer draws and
    # a pre-token cut anywhere else changes the ids; the published pre_tokenizer is set afterwards
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": norm,
           "pre_tokenizer": _bytelevel(), "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True,
                                                                     "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": whole,
                     "vocab": {}, "merges": []}}
    t = Tokenizer.from_str(json.dumps(doc))
    tr = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=PRETOK_SPECIALS, show_progress=False)
    t.train_from_iterator(corpus, tr)
    d = json.loads(t.to_str())
    d["normalizer"], d["pre_tokenizer"], d["decoder"] = norm, pt, doc["decoder"]  # as published, not re-serialized
    d["model"]["ignore_merges"] = whole
    bos = next(a["id"] for a in d["added_tokens"] if a["content"] == "<|bos|>")
    d["post_processor"] = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<|bos|>": {"id": "<|bos|>", "ids": [bos], "tokens": ["<|bos|>"]}}}
    return d


def pretok_gguf(name, tj, path):
    """The GGUF convert_hf_to_gguf.py writes for tj with tokenizer.ggml.pre = PRETOK[name]'s."""
    pre, arch, _, _, _, _ = PRETOK[name]
    cfg = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "add_bos_token": True, "add_eos_token": False}
    write_gguf(path, tj, cfg, arch, pre, "tiny " + name)


# Short strings that tell the pre-tokenizers apart (kept small: the committed fixtures hold their ids)
PRETOK_SAMPLE = [
    "", " ", "Hello world", "  leading", "trailing   ", "it's we'll THEY'RE I'M you've don't",
    "12 345 6789 1234567890 3.14159 ١٢٣ ½ Ⅻ", "a1b22c333d4444", "!!! ??? ... --- === ,,, ;;; ::",
    "(x) [y] {z} <a> 'q' \"w\" `e` ~!@#$%^&*", "line1\nline2\r\nline3\n\n\nend\r\n",
    "\t\ttabs \t and\u3000ideographic\u00a0nbsp", "日本語のテキスト、カタカナ。ひらがな！", "中文字符和数字123混合",
    "한국어 텍스트입니다", "Привет, мир! Ёлка", "Γειά σου κόσμε ὼ ΐ Ί ι Ω K", "café naïve Ångström résumé e\u0301 a\u0308",
    "emoji 😀👍🏽🇫🇷 ❤️ 🧑🏿‍🚀", "def f(x):\n    return x ** 2  # square\n", "if (a && b) { c->d[0] += 1; }",
    "https://example.com/path?q=1&r=2", "x\u0301y\u0323z  \n ", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ！？", "‘quoted’ “double” — dash",
    "<|bos|>text<|eos|> <|user|> <\uff5cAssistant\uff5c>", "   \n   \n", "ABCdefGHI jklMNO", "$100, €200, ¥300",
    "+ümlaut ¿qué? «Ещё» abc日本語def x=ñandú", "שלום עולם مرحبا աբգ ภาษาไทย हिन्दी",
]


def tiny_pretok(out, seed=20261129):
    """fixtures/gguf/pretok-NAME/: tokenizer.gguf (a 450-token vocabulary trained under PRETOK[NAME]) and
    expected.sdtk (tok_compare's format: `tokenizers`' ids and decodes of PRETOK_SAMPLE), which the
    gguf_tokenizer_pretok_NAME tests require without Python."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "tokenizer"))
    import gen_fixtures
    from tokenizers import Tokenizer
    corpus = gen_fixtures.make_corpus(seed, 300) + PRETOK_SAMPLE * 40  # merges across the sample's boundaries
    for name in PRETOK:
        d = os.path.join(out, "pretok-" + name)
        os.makedirs(d, exist_ok=True)
        tj = pretok_tokenizer(name, corpus, vocab_size=450)
        pretok_gguf(name, tj, os.path.join(d, "tokenizer.gguf"))
        tok = Tokenizer.from_str(json.dumps(tj))
        gen_fixtures.write_fixture(os.path.join(d, "expected.sdtk"), tok, [t.encode() for t in PRETOK_SAMPLE])
        print("wrote", d, os.path.getsize(os.path.join(d, "tokenizer.gguf")) + os.path.getsize(os.path.join(d, "expected.sdtk")),
              "bytes")


def tiny(out):
    spec = importlib.util.spec_from_file_location("gmf", os.path.join(HERE, "gen_model_fixtures.py"))
    gmf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gmf)
    d = os.path.join(out, "tiny-gpt2")
    os.makedirs(d, exist_ok=True)
    gmf.write_tiny_tokenizer(d)
    tj, _ = load_dir(d)
    cfg = {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": False}
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"), indent=1)
    write_gguf(os.path.join(d, "tokenizer.gguf"), tj, cfg, "llama", "gpt-2", "tiny gpt2")
    d = os.path.join(out, "tiny-spm")
    os.makedirs(d, exist_ok=True)
    tj, cfg = tiny_spm_json()
    json.dump(tj, open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=1)
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"), indent=1)
    write_gguf(os.path.join(d, "tokenizer.gguf"), tj, cfg, "llama", None, "tiny spm")
    tiny_gemma(out)
    for n in ("tiny-gpt2", "tiny-spm", "tiny-gemma"):
        print("wrote", os.path.join(out, n), os.path.getsize(os.path.join(out, n, "tokenizer.gguf")), "bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared")
    ap.add_argument("--out")
    ap.add_argument("--names", default=",".join(PUBLISHED))
    ap.add_argument("--tiny")
    ap.add_argument("--pretok", help="write only the committed pretok-* fixtures into this folder")
    a = ap.parse_args()
    if a.pretok:
        tiny_pretok(a.pretok)
        return 0
    if a.tiny:
        tiny(a.tiny)
        return 0
    if not a.shared or not os.path.isdir(a.shared):
        print("skipped: ../shared not found (%s)" % a.shared)
        return 77
    published(a.shared, a.out, a.names.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())

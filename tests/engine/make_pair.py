#!/usr/bin/env python3
"""make_pair.py — fixtures for the engine tests: a tiny random target/draft pair that
share a byte-level BPE tokenizer.json, plus two drafts that must be refused.

    python3 make_pair.py OUT_DIR

Writes OUT_DIR/{target,draft,draft_badvocab,draft_badeos}/ (config.json,
model.safetensors, tokenizer.json). The tokenizer is trained with the `tokenizers`
library on a fixed text (special tokens <unk>=0, <s>=1, </s>=2; the post-processor
prepends <s>), and the models' vocab_size equals its size, so every id the models
can emit decodes. Checkpoints come from tests/reference/make_checkpoint.py.
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "reference"))

try:
    import make_checkpoint as mc
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
except ImportError as e:  # fail loudly: tests/requirements.txt lists these
    sys.exit(f"make_pair.py: missing Python package ({e}); run tools/deps.sh")

CORPUS = [
    "In the beginning God created the heaven and the earth.",
    "And the earth was without form, and void; and darkness was upon the face of the deep.",
    "And the Spirit of God moved upon the face of the waters.",
    "And God said, Let there be light: and there was light.",
    "The quick brown fox jumps over the lazy dog; speculative decoding drafts then verifies.",
    "0123456789 +-*/ = () [] {} <> !? \"'` ~ @ # $ % ^ & _ | \\ : ;",
]


def make_tokenizer(vocab):
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return tok


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tok = make_tokenizer(300)
    V = tok.get_vocab_size()
    assert tok.token_to_id("<s>") == 1 and tok.token_to_id("</s>") == 2
    specs = {
        "target": dict(arch="llama", hidden=64, inter=160, layers=2, heads=4, kv_heads=2, vocab=V, tied=False,
                       dtype="F32"),
        "draft": dict(arch="llama", hidden=32, inter=64, layers=1, heads=2, kv_heads=1, vocab=V, tied=True,
                      dtype="F32"),
        "draft_badvocab": dict(arch="llama", hidden=32, inter=64, layers=1, heads=2, kv_heads=1, vocab=V + 3,
                               tied=True, dtype="F32"),
        "draft_badeos": dict(arch="llama", hidden=32, inter=64, layers=1, heads=2, kv_heads=1, vocab=V, tied=True,
                             dtype="F32"),
    }
    for name, spec in specs.items():
        mc.CASES["engine_" + name] = spec
        d = os.path.join(out, name)
        mc.write_checkpoint(d, "engine_" + name, seed=4321)
        if name == "draft_badeos":
            with open(os.path.join(d, "config.json")) as f:
                cfg = json.load(f)
            cfg["eos_token_id"] = [2, 0]
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(cfg, f, indent=2)
        tok.save(os.path.join(d, "tokenizer.json"))
    print(f"make_pair.py: wrote {out} (vocab {V})")


if __name__ == "__main__":
    main()

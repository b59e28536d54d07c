#!/usr/bin/env python3
"""gen_fixtures.py — builds tokenizers with the Hugging Face `tokenizers` library,
generates test strings, records the library's ids and decoded text, and runs the C
comparison program (tok_compare) on each tokenizer.

Tokenizers compared:
  trained here on a mixed corpus (fixed seed):
    gpt2-style   ByteLevel pre-tokenizer + decoder, "a b"... (library writes pair merges)
    llama3-style Split(Llama-3 regex, Isolated) + ByteLevel(use_regex=False), ignore_merges,
                 TemplateProcessing with <|begin_of_text|>
    llama2-style Metaspace(prepend_scheme=first) + BPE(byte_fallback, unk, fuse_unk),
                 decoders ByteFallback + Fuse + Metaspace, TemplateProcessing <s>
    qwen2-style  NFC + Split(Qwen2 regex) + ByteLevel
    kitchen-sink NFKC + Replace(regex) + Lowercase + Strip; Punctuation, Digits, Split
                 (several behaviours, invert), Whitespace; subword prefix/suffix;
                 added tokens with lstrip/rstrip/single_word/normalized; BPEDecoder
    metaspace-b  Metaspace(always, split=False) + Split(MergedWithPrevious) + WhitespaceSplit,
                 Replace/Strip decoders
  and the published tokenizers in --shared DIR (../shared/tokenizers): with --real all|small
  and no such folder the run prints "skipped: ..." and exits 77 (CTest's skip code).

Invalid UTF-8: the C API takes bytes; the library takes str. The library is given
bytes.decode("utf-8", errors="replace") (one U+FFFD per maximal invalid subpart, the
same rule as Rust's String::from_utf8_lossy), and specdec the raw bytes; specdec must
replace them identically. Truncation and padding configured in tokenizer.json are
disabled on the library side (specdec ignores them by design).

usage: gen_fixtures.py --bin TOK_COMPARE --out DIR [--n N] [--real all|none|small] [--shared DIR]
                       [--trained yes|no]
Exit status: non-zero if any comparison fails or a dependency is missing.
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys

try:
    from tokenizers import Tokenizer, Regex, AddedToken
    from tokenizers import models, normalizers, pre_tokenizers, decoders, processors, trainers
except ImportError:
    print("FAIL: the Python package `tokenizers` is missing (pip install -r tests/requirements.txt)")
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED_DEFAULT = os.path.join(ROOT, "..", "shared", "tokenizers")
REAL = ["gpt2", "llama-3-8b", "qwen2.5-1.5b-instruct", "tinyllama-1.1b-chat-v1.0", "phi-3-mini",
        "mistral-v1-mixtral-8x22b"]

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ("the of and to in is was that for it with as his on be at by had are but from or have an they which one you "
         "were her all she there would their we him been has when who will more no if out so said what up its about "
         "into than them can only other new some could time these two may then do first any my now such like our over "
         "man me even most made after also did many before must through back years where much your way well down "
         "should because each just those people Mr how too little state good very make world still own see men work "
         "long get here between both life being under never day same another know while last might us great old year "
         "off come since against go came right used take three tokenizer speculative decoding transformer attention "
         "Hello World Python CUDA kernel GPU München café naïve résumé Zürich façade").split()
CJK = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切ひらがなカタカナ한국어텍스트"
EMOJI = ["😀", "😂", "🤖", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "🧑🏿‍🚀", "✨", "🔥", "🏳️‍🌈", "1️⃣", "©", "™"]
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "\u1100\u1161\u11a8", "\u0915\u094d\u0937",
             "Å", "Å", "ﬁ", "①", "Ⅻ", "ｆｕｌｌ", "ｶﾀｶﾅ", "\u00bd", "x\u20d7", "\u0645\u064e", "ǅ", "İstanbul", "ΣΑΣ",
             "ß", "ﬀ", "\u2126", "\u212b", "K"]
WS = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028", "\u0085", "\u200b",
      "\u2003", "\x0b", "\x0c", "      \n\t  "]
PUNCT = list(".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&`~") + ["...", "--", "—", "–", "«", "»", "“", "”", "¿", "¡", "。", "、", "！"]
CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "if __name__ == '__main__':\n\tmain()",
    "SELECT id, name FROM users WHERE age >= 18;",
    "<div class=\"a\">Hi &amp; bye</div>",
    "x = {'k': [1, 2.5, -3e10], \"s\": None}",
    "#include <stdio.h>\nint main(void){printf(\"%d\\n\", 42);}",
    "fn main() { let v: Vec<u8> = vec![0xFF; 16]; }",
    "$ ls -la /usr/bin | grep -E '^d' && echo ok",
    "   indented    code\twith\ttabs   ",
]
CONTRACTIONS = ["it's", "I'M", "we'll", "they'RE", "you've", "don't", "he'd", "'s", "'t", "O'Neil", "rock'n'roll",
                "'ll'", "ſ's", "IT'S"]


def rand_number(rng):
    k = rng.random()
    if k < 0.4:
        return str(rng.randint(0, 10 ** rng.randint(1, 12)))
    if k < 0.6:
        return "%.*f" % (rng.randint(1, 5), rng.uniform(-1e4, 1e4))
    if k < 0.8:
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(10, 60)))
    return rng.choice(["٣٤٥", "१२३", "²³", "½", "Ⅷ", "১৯৭১", "１２３"])


def rand_word(rng):
    w = rng.choice(WORDS)
    r = rng.random()
    if r < 0.1:
        w = w.upper()
    elif r < 0.2:
        w = w.capitalize()
    return w


def rand_unicode_char(rng):
    blocks = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x5ff), (0x600, 0x6ff),
              (0x900, 0x97f), (0xe00, 0xe7f), (0x1100, 0x11ff), (0x2000, 0x206f), (0x2190, 0x22ff),
              (0x3040, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0xff00, 0xffef), (0x1f300, 0x1faff),
              (0x10000, 0x1007f), (0x20000, 0x2a6df), (0x0, 0x1f), (0x300, 0x36f)]
    lo, hi = rng.choice(blocks)
    return chr(rng.randint(lo, hi))


def rand_piece(rng, specials):
    k = rng.random()
    if k < 0.30:
        return " ".join(rand_word(rng) for _ in range(rng.randint(1, 8)))
    if k < 0.40:
        return "".join(rng.choice(CJK) for _ in range(rng.randint(1, 12)))
    if k < 0.45:
        return rng.choice(EMOJI) * rng.randint(1, 3)
    if k < 0.50:
        return rng.choice(COMBINING)
    if k < 0.58:
        return rng.choice(WS) * rng.randint(1, 4)
    if k < 0.65:
        return rand_number(rng)
    if k < 0.72:
        return rng.choice(PUNCT) * rng.randint(1, 3)
    if k < 0.77:
        return rng.choice(CODE)
    if k < 0.82:
        return rng.choice(CONTRACTIONS)
    if k < 0.88 and specials:
        s = rng.choice(specials)
        return rng.choice(["", " ", "  ", "\n"]) + s + rng.choice(["", " ", "  ", "\n", "x"])
    return "".join(rand_unicode_char(rng) for _ in range(rng.randint(1, 6)))


def corrupt(rng, b):
    """Insert invalid UTF-8: stray continuation bytes, truncated sequences, overlongs,
    surrogates, bytes >= 0xF5."""
    bad = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xff", b"\xfe\xfe",
           b"\xf4\x90\x80\x80", b"\xe0\x80\xaf", b"\xc3", b"\xf8\x88\x80\x80\x80"]
    pos = rng.randint(0, len(b))
    return b[:pos] + rng.choice(bad) + b[pos:]


def make_strings(n, seed, specials):
    rng = random.Random(seed)
    out = [b"", b" ", b"  ", b"\n", b"a", b"Hello world", b"\xff", " ".join(specials[:3]).encode(),
           ("1" * 200).encode(), (" " * 100).encode(), ("\n" * 50).encode(), ("\t " * 30).encode(),
           ("ab" * 300).encode(), "💩".encode() * 40]
    for s in specials[:20]:
        out += [s.encode(), (" " + s + " ").encode(), ("a" + s + "b").encode(), (s + s).encode(),
                (s[:-1]).encode(), ("  " + s + "\n\n").encode()]
    while len(out) < n:
        parts = [rand_piece(rng, specials) for _ in range(rng.randint(1, 12))]
        sep = rng.choice(["", " ", " ", "\n", ""])
        b = sep.join(parts).encode("utf-8", "surrogatepass")
        if rng.random() < 0.08:
            b = corrupt(rng, b)
        if rng.random() < 0.01:
            b = b * rng.randint(5, 40)  # a few long strings
        out.append(b)
    return out[:n]


def make_corpus(seed, n_lines=6000):
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        lines.append((rng.choice([" ", "", "\n"])).join(rand_piece(rng, []) for _ in range(rng.randint(1, 10))))
    return lines


def byte_tokens():
    return ["<0x%02X>" % b for b in range(256)]


def finish(tok, path, drop_added=()):
    tok.save(path)
    if drop_added:
        d = json.load(open(path, encoding="utf-8"))
        d["added_tokens"] = [a for a in d["added_tokens"] if a["content"] not in drop_added]
        json.dump(d, open(path, "w", encoding="utf-8"), ensure_ascii=False)
    return Tokenizer.from_file(path)


def train_all(out, corpus):
    made = {}
    # GPT-2 style
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=3000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<|endoftext|>"], show_progress=False)
    t.train_from_iterator(corpus, tr)
    made["gpt2-style"] = os.path.join(out, "gpt2-style")

    # Llama-3 style
    t3 = Tokenizer(models.BPE(ignore_merges=True))
    t3.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t3.decoder = decoders.ByteLevel()
    sp3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tr = trainers.BpeTrainer(vocab_size=4000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=sp3, show_progress=False)
    t3.train_from_iterator(corpus, tr)
    t3.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
                                                      special_tokens=[("<|begin_of_text|>", 0)])
    made["llama3-style"] = os.path.join(out, "llama3-style")

    # Llama-2 / SentencePiece style
    t2 = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    t2.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    t2.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Metaspace(replacement="\u2581", prepend_scheme="first")])
    tr = trainers.BpeTrainer(vocab_size=3000, special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens(),
                             limit_alphabet=300, show_progress=False)
    t2.train_from_iterator(corpus, tr)
    t2.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                      special_tokens=[("<s>", 1)])
    made["llama2-style"] = os.path.join(out, "llama2-style")

    # Qwen2 style
    tq = Tokenizer(models.BPE())
    tq.normalizer = normalizers.NFC()
    tq.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tq.decoder = decoders.ByteLevel()
    tq.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=3500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], show_progress=False)
    tq.train_from_iterator(corpus, tr)
    made["qwen2-style"] = os.path.join(out, "qwen2-style")

    # kitchen sink
    tk = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tk.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " "),
                                          normalizers.Lowercase(), normalizers.Strip()])
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Split(Regex(r"[aeiou]"), behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"x+"), behavior="removed", invert=True),
        pre_tokenizers.Split("q", behavior="contiguous"),
        pre_tokenizers.Whitespace()])
    tk.decoder = decoders.BPEDecoder(suffix="</w>")
    tr = trainers.BpeTrainer(vocab_size=2500, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                             continuing_subword_prefix="##", end_of_word_suffix="</w>", show_progress=False)
    tk.train_from_iterator(corpus, tr)
    tk.add_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=False),
                   AddedToken("[tool]", rstrip=True, normalized=False),
                   AddedToken("hello world", normalized=True),
                   AddedToken("cat", single_word=True, normalized=True)])
    tk.add_special_tokens([AddedToken("<END>", lstrip=True, rstrip=True, special=True)])
    tk.post_processor = processors.BertProcessing(("[SEP]", tk.token_to_id("[SEP]")), ("[CLS]", tk.token_to_id("[CLS]")))
    made["kitchen-sink"] = os.path.join(out, "kitchen-sink")

    # Metaspace variant + more split behaviours + Replace/Strip decoders
    tm = Tokenizer(models.BPE(unk_token="<unk>"))
    tm.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                          normalizers.Prepend("~"), normalizers.Replace("ab", "AB")])
    tm.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(Regex(r"\p{N}+"), behavior="merged_with_previous"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Metaspace(replacement="_", prepend_scheme="always", split=False)])
    tm.decoder = decoders.Sequence([decoders.Replace("_", " "), decoders.Strip(" ", 1, 0), decoders.Fuse()])
    tr = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<unk>", "<pad>"], show_progress=False)
    tm.train_from_iterator(corpus, tr)
    tm.add_special_tokens(["<pad>"])
    made["metaspace-b"] = os.path.join(out, "metaspace-b")

    objs = {"gpt2-style": t, "llama3-style": t3, "llama2-style": t2, "qwen2-style": tq, "kitchen-sink": tk,
            "metaspace-b": tm}
    result = {}
    for name, d in made.items():
        os.makedirs(d, exist_ok=True)
        drop = set(byte_tokens()) if name == "llama2-style" else ()
        result[name] = (d, finish(objs[name], os.path.join(d, "tokenizer.json"), drop))
    return result


def write_fixture(path, tok, strings):
    texts = [b.decode("utf-8", errors="replace") for b in strings]
    plain = tok.encode_batch(texts, add_special_tokens=False)
    spec = tok.encode_batch(texts, add_special_tokens=True)
    with open(path, "wb") as f:
        f.write(b"SDTK1\n")
        f.write(struct.pack("<I", len(strings)))
        for b, e1, e2 in zip(strings, plain, spec):
            d1 = tok.decode(e1.ids, skip_special_tokens=False).encode("utf-8", "surrogatepass")
            d2 = tok.decode(e2.ids, skip_special_tokens=True).encode("utf-8", "surrogatepass")
            f.write(struct.pack("<I", len(b)) + b)
            f.write(struct.pack("<I", len(e1.ids)) + struct.pack("<%di" % len(e1.ids), *e1.ids))
            f.write(struct.pack("<I", len(e2.ids)) + struct.pack("<%di" % len(e2.ids), *e2.ids))
            f.write(struct.pack("<I", len(d1)) + d1)
            f.write(struct.pack("<I", len(d2)) + d2)


def specials_of(tok):
    return [a.content for a in tok.get_added_tokens_decoder().values()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--n-real", type=int, default=None, help="strings per real tokenizer (default --n)")
    ap.add_argument("--real", default="all", choices=["all", "none", "small"])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--shared", default=SHARED_DEFAULT, help="folder of the published tokenizers")
    ap.add_argument("--trained", default="yes", choices=["yes", "no"], help="also the tokenizers trained here")
    a = ap.parse_args()
    if a.real != "none" and not os.path.isdir(a.shared):
        print("skipped: the published tokenizers folder %s is absent (set SPECDEC_SHARED_DIR)" % a.shared)
        return 77
    os.makedirs(a.out, exist_ok=True)
    toks = train_all(a.out, make_corpus(a.seed)) if a.trained == "yes" else {}
    if a.real != "none":
        names = REAL if a.real == "all" else ["gpt2", "tinyllama-1.1b-chat-v1.0"]
        for name in names:
            d = os.path.join(a.shared, name)
            t = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
            t.no_truncation()
            t.no_padding()
            toks[name] = (d, t)
    failed = []
    for name, (d, tok) in toks.items():
        n = a.n if name in ("gpt2-style", "llama3-style", "llama2-style", "qwen2-style") else (a.n_real or a.n)
        strings = make_strings(n, a.seed + 7, specials_of(tok))
        fx = os.path.join(a.out, name + ".fixture")
        write_fixture(fx, tok, strings)
        r = subprocess.run([a.bin, d, fx], capture_output=True, text=True, errors="replace")
        sys.stdout.write(r.stdout)
        sys.stdout.write(r.stderr[-6000:])
        if r.returncode != 0:
            failed.append(name)
    print("%d passed, %d failed%s" % (len(toks) - len(failed), len(failed),
                                      (" (" + ", ".join(failed) + ")") if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

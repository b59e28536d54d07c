#!/usr/bin/env python3
"""train_pair.py — train the bundled KJV target/draft Llama pair that ships with specdec.

Stages (each cached in --workdir, so a later stage can be re-run alone):
  corpus     run Debian's `bible` (package bible-kjv), strip chapter headers and verse
             numbers, split into a training set and fixed held-out books
  tokenizer  byte-level BPE (vocab 4096) trained with `tokenizers` on the training split
  train      phase 1: target (GQA) and draft LlamaForCausalLM trained together on the same
             batches; the draft is distilled online from the target's logits (detached) mixed
             with the ordinary next-token loss, so it learns to agree with the target.
             phase 2 (--distill-steps): the target frozen, the draft distilled from it alone
  export     F16 safetensors + config.json, generation_config.json, tokenizer files into
             models/kjv-target and models/kjv-draft (Hugging Face format)
  eval       held-out perplexity, greedy and sampled speculative acceptance (gamma = 4),
             sample text (a Python reference loop on the transformers models); <workdir>/eval.json
  card       README.md model cards from eval.json, plus <workdir>/specdec.json and
             <workdir>/hf_compare.txt when present (run after eval by default)
  specdec    (not part of `all`) the same prompts through libspecdec's own speculative loop via
             ctypes -> <workdir>/specdec.json; then re-run --stage card

Deterministic with --seed on CPU (fixed data order, torch.manual_seed, deterministic algorithms).
Needs torch, transformers, tokenizers, safetensors (tools/requirements-train.txt). Not run by CI.

  nice -n 5 python3 tools/train_pair.py --workdir /tmp/kjv --out models
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import (GenerationConfig, LlamaConfig, LlamaForCausalLM,
                              PreTrainedTokenizerFast)
except ImportError as e:  # pragma: no cover - a setup problem, say what to install
    sys.exit(f"train_pair.py: missing dependency ({e}); pip install -r tools/requirements-train.txt")

# Books never seen in training: perplexity and acceptance prompts come from these.
HELDOUT_BOOKS = ["Ruth", "Jonah", "Titus", "Philemon", "Jude"]
BOS, EOS = "<s>", "</s>"
VOCAB = 4096

TARGET_CFG = dict(hidden_size=256, intermediate_size=704, num_hidden_layers=6,
                  num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=False)
DRAFT_CFG = dict(hidden_size=96, intermediate_size=256, num_hidden_layers=2,
                 num_attention_heads=3, num_key_value_heads=3, tie_word_embeddings=True)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------- corpus
def parse_bible(text):
    """Returns [(book, chapter, verse, text)] from `bible` output: a blank line, a
    'Book N' header, a blank line, then verses '  N text' wrapped onto unindented lines."""
    verses = []
    book, chapter = None, None
    lines = text.split("\n")
    i = 0
    header = re.compile(r"^(.+) (\d+)$")
    start = re.compile(r"^\s+(\d+) (.*)$")
    prev_blank = True
    for line in lines:
        if not line.strip():
            prev_blank = True
            continue
        m = header.match(line)
        if prev_blank and m and not line.startswith(" "):
            book, chapter = m.group(1), int(m.group(2))
        else:
            m = start.match(line)
            if m:
                verses.append([book, chapter, int(m.group(1)), m.group(2).strip()])
            else:
                if not verses:
                    raise ValueError(f"continuation line before any verse: {line!r}")
                verses[-1][3] += " " + line.strip()
        prev_blank = False
        i += 1
    return [tuple(v) for v in verses]


def stage_corpus(wd):
    out = os.path.join(wd, "corpus.json")
    if os.path.exists(out):
        return json.load(open(out))
    raw = subprocess.run(["bible", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         text=True).stdout
    verses = parse_bible(raw)
    if len(verses) != 31102:
        raise SystemExit(f"expected 31102 KJV verses from `bible`, parsed {len(verses)}")
    books = sorted({v[0] for v in verses})
    for b in HELDOUT_BOOKS:
        if b not in books:
            raise SystemExit(f"held-out book {b!r} not found; books: {books}")
    train = [v[3] for v in verses if v[0] not in HELDOUT_BOOKS]
    held = [v[3] for v in verses if v[0] in HELDOUT_BOOKS]
    corpus = {"train": train, "heldout": held, "heldout_books": HELDOUT_BOOKS,
              "n_verses": len(verses), "bytes": len(raw.encode())}
    json.dump(corpus, open(out, "w"))
    log(f"corpus: {len(train)} training verses, {len(held)} held-out verses")
    return corpus


# ----------------------------------------------------------------------------- tokenizer
def stage_tokenizer(wd, corpus):
    path = os.path.join(wd, "tokenizer.json")
    if os.path.exists(path):
        return Tokenizer.from_file(path)
    tok = Tokenizer(models.BPE())
    # GPT-2 style: the byte-level regex split, no prefix space, byte-level decoder.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([v + "\n" for v in corpus["train"]], trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)])
    tok.save(path)
    log(f"tokenizer: vocab {tok.get_vocab_size()}, bos {bos_id}, eos {tok.token_to_id(EOS)}")
    return tok


def encode_stream(tok, verses):
    """Token ids of the verses, one per line ('text\\n'), with the index where each verse starts."""
    ids, starts = [], []
    for enc in tok.encode_batch([v + "\n" for v in verses], add_special_tokens=False):
        starts.append(len(ids))
        ids.extend(enc.ids)
    return np.array(ids, dtype=np.int64), np.array(starts, dtype=np.int64)


# ----------------------------------------------------------------------------- models
def make_config(kind, tok, seq_len):
    base = TARGET_CFG if kind == "target" else DRAFT_CFG
    return LlamaConfig(vocab_size=tok.get_vocab_size(), max_position_embeddings=seq_len,
                       rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu",
                       attention_bias=False, mlp_bias=False, initializer_range=0.02,
                       bos_token_id=tok.token_to_id(BOS), eos_token_id=tok.token_to_id(EOS),
                       pad_token_id=None, **base)


def n_params(model):
    # parameters() yields a tied tensor once, so this is the stored count
    return sum(p.numel() for p in model.parameters())


def lr_at(step, total, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def make_optimizer(model, lr):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def batch_at(rng, stream, starts, bos_id, batch, seq_len):
    """batch windows of seq_len tokens: BOS then text from a random verse start (as at inference)."""
    lim = np.searchsorted(starts, len(stream) - seq_len, side="right")
    idx = rng.integers(0, lim, size=batch)
    x = np.empty((batch, seq_len), dtype=np.int64)
    x[:, 0] = bos_id
    for b, i in enumerate(idx):
        s = starts[i]
        x[b, 1:] = stream[s:s + seq_len - 1]
    return torch.from_numpy(x)


def stage_train(wd, args, tok, corpus):
    ckpt = os.path.join(wd, "pair.pt")
    tcfg = make_config("target", tok, args.seq_len)
    dcfg = make_config("draft", tok, args.seq_len)
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        if state.get("done"):
            target, draft = LlamaForCausalLM(tcfg), LlamaForCausalLM(dcfg)
            target.load_state_dict(state["target"])
            draft.load_state_dict(state["draft"])
            return target, draft, state["log"]
    torch.manual_seed(args.seed)
    target = LlamaForCausalLM(tcfg)
    draft = LlamaForCausalLM(dcfg)
    log(f"params: target {n_params(target)}, draft {n_params(draft)}")
    stream, starts = encode_stream(tok, corpus["train"])
    log(f"training stream: {len(stream)} tokens")
    rng = np.random.default_rng(args.seed)
    opt_t = make_optimizer(target, args.lr_target)
    opt_d = make_optimizer(draft, args.lr_draft)
    bos_id = tok.token_to_id(BOS)
    step0, hist = 0, []
    if os.path.exists(ckpt):  # resume a run that was stopped part way
        state = torch.load(ckpt)
        target.load_state_dict(state["target"])
        draft.load_state_dict(state["draft"])
        opt_t.load_state_dict(state["opt_t"])
        opt_d.load_state_dict(state["opt_d"])
        rng.bit_generator.state = state["rng"]
        step0, hist = state["step"], state["log"]
        log(f"resumed at step {step0}")
    target.train()
    draft.train()
    t0 = time.time()
    for step in range(step0, args.steps):
        x = batch_at(rng, stream, starts, bos_id, args.batch, args.seq_len)
        inp, lab = x[:, :-1], x[:, 1:]
        for opt, peak in ((opt_t, args.lr_target), (opt_d, args.lr_draft)):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, args.steps, peak, args.warmup)
        lt = target(input_ids=inp).logits
        loss_t = F.cross_entropy(lt.reshape(-1, lt.size(-1)), lab.reshape(-1))
        opt_t.zero_grad(set_to_none=True)
        loss_t.backward()
        torch.nn.utils.clip_grad_norm_(target.parameters(), 1.0)
        opt_t.step()
        # Draft: next-token loss plus KL to the target's (detached) distribution; the KL
        # weight ramps up as the target becomes worth imitating.
        ld = draft(input_ids=inp).logits
        ce_d = F.cross_entropy(ld.reshape(-1, ld.size(-1)), lab.reshape(-1))
        a = args.kd_weight * min(1.0, step / max(1, args.kd_ramp * args.steps))
        pt = F.log_softmax(lt.detach().float(), dim=-1).reshape(-1, lt.size(-1))
        qd = F.log_softmax(ld, dim=-1).reshape(-1, ld.size(-1))
        kl = F.kl_div(qd, pt, log_target=True, reduction="batchmean")
        loss_d = (1 - a) * ce_d + a * kl
        opt_d.zero_grad(set_to_none=True)
        loss_d.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt_d.step()
        if step % 10 == 0 or step == args.steps - 1:
            el = time.time() - t0
            rate = (step + 1 - step0) * args.batch * args.seq_len / max(el, 1e-9)
            hist.append({"step": step, "loss_target": loss_t.item(), "ce_draft": ce_d.item(),
                         "kl_draft": kl.item()})
            log(f"step {step}/{args.steps} target {loss_t.item():.3f} draft ce {ce_d.item():.3f} "
                f"kl {kl.item():.3f} | {rate:.0f} tok/s, {el/60:.1f} min")
        if (step + 1) % args.ckpt_every == 0 and step + 1 < args.steps:
            torch.save({"target": target.state_dict(), "draft": draft.state_dict(),
                        "opt_t": opt_t.state_dict(), "opt_d": opt_d.state_dict(),
                        "rng": rng.bit_generator.state, "step": step + 1, "log": hist}, ckpt)
    torch.save({"target": target.state_dict(), "draft": draft.state_dict(), "log": hist,
                "done": True}, ckpt)
    return target, draft, hist


def stage_distill(wd, args, tok, corpus, target, draft):
    """Phase 2: the trained target frozen, the draft trained on the target's distributions alone
    (KL(target || draft), plus a little next-token loss). A target forward costs a third of a
    training step, so this gives the draft several times more tokens per minute than phase 1."""
    ckpt = os.path.join(wd, "distill.pt")
    if args.distill_steps <= 0:
        return draft
    state = torch.load(ckpt) if os.path.exists(ckpt) else None
    if state and state.get("done"):
        draft.load_state_dict(state["draft"])
        return draft
    stream, starts = encode_stream(tok, corpus["train"])
    rng = np.random.default_rng(args.seed + 1)
    torch.manual_seed(args.seed + 1)
    opt = make_optimizer(draft, args.lr_distill)
    step0 = 0
    if state:
        draft.load_state_dict(state["draft"])
        opt.load_state_dict(state["opt"])
        rng.bit_generator.state = state["rng"]
        step0 = state["step"]
        log(f"distill: resumed at step {step0}")
    bos_id = tok.token_to_id(BOS)
    target.eval()
    draft.train()
    t0 = time.time()
    for step in range(step0, args.distill_steps):
        x = batch_at(rng, stream, starts, bos_id, args.batch, args.seq_len)
        inp, lab = x[:, :-1], x[:, 1:]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.distill_steps, args.lr_distill, args.warmup)
        with torch.no_grad():
            pt = F.log_softmax(target(input_ids=inp).logits.float(), dim=-1)
        ld = draft(input_ids=inp).logits
        qd = F.log_softmax(ld, dim=-1)
        V = ld.size(-1)
        kl = F.kl_div(qd.reshape(-1, V), pt.reshape(-1, V), log_target=True, reduction="batchmean")
        ce = F.nll_loss(qd.reshape(-1, V), lab.reshape(-1))
        loss = 0.9 * kl + 0.1 * ce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        if step % 20 == 0 or step == args.distill_steps - 1:
            agree = (qd.argmax(-1) == pt.argmax(-1)).float().mean().item()
            el = time.time() - t0
            log(f"distill step {step}/{args.distill_steps} kl {kl.item():.3f} ce {ce.item():.3f} "
                f"argmax agreement {agree:.3f} | {(step + 1 - step0) * args.batch * args.seq_len / max(el, 1e-9):.0f}"
                f" tok/s, {el / 60:.1f} min")
        if (step + 1) % args.ckpt_every == 0 and step + 1 < args.distill_steps:
            torch.save({"draft": draft.state_dict(), "opt": opt.state_dict(), "rng": rng.bit_generator.state,
                        "step": step + 1}, ckpt)
    torch.save({"draft": draft.state_dict(), "done": True}, ckpt)
    return draft


# ----------------------------------------------------------------------------- export
def stage_export(args, tok, target, draft):
    for name, model in (("kjv-target", target), ("kjv-draft", draft)):
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        m = model.to(torch.float16)
        m.generation_config = GenerationConfig(bos_token_id=m.config.bos_token_id,
                                               eos_token_id=m.config.eos_token_id,
                                               do_sample=True, temperature=0.8, top_p=0.95)
        m.save_pretrained(d, safe_serialization=True)
        model.to(torch.float32)
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS,
                                       model_max_length=args.seq_len)
        fast.save_pretrained(d)
        for extra in ("special_tokens_map.json", "chat_template.jinja"):
            p = os.path.join(d, extra)  # tokenizer_config.json already names the specials
            if os.path.exists(p):
                os.remove(p)
        compat_configs(d)
        log(f"exported {d}: " + ", ".join(sorted(os.listdir(d))))


def compat_configs(d):
    """transformers 5 writes rope_parameters/dtype and its own tokenizer class name; add the
    keys older readers (transformers 4.x, specdec, llama.cpp converters) look for, so the
    directory loads everywhere. Both spellings carry the same values."""
    p = os.path.join(d, "config.json")
    cfg = json.load(open(p))
    rp = cfg.get("rope_parameters") or {}
    cfg.setdefault("rope_theta", rp.get("rope_theta", 10000.0))
    cfg.setdefault("torch_dtype", cfg.get("dtype", "float16"))
    json.dump(cfg, open(p, "w"), indent=2, sort_keys=True)
    p = os.path.join(d, "tokenizer_config.json")
    tc = json.load(open(p))
    tc.pop("backend", None)
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc["clean_up_tokenization_spaces"] = False  # decode must equal tokenizers' decode
    tc["add_bos_token"] = False  # the post-processor in tokenizer.json adds <s>
    json.dump(tc, open(p, "w"), indent=2, sort_keys=True)


# ----------------------------------------------------------------------------- eval
@torch.no_grad()
def heldout_ppl(model, stream, bos_id, seq_len):
    nll, n = 0.0, 0
    step = seq_len - 1
    for s in range(0, len(stream) - 1, step):
        chunk = stream[s:s + step]
        x = torch.tensor([[bos_id] + chunk.tolist()])
        logits = model(input_ids=x[:, :-1]).logits.float()
        nll += F.cross_entropy(logits[0], x[0, 1:], reduction="sum").item()
        n += x.size(1) - 1
    return math.exp(nll / n), n


@torch.no_grad()
def spec_decode(target, draft, prompt, n_new, gamma, temperature, gen):
    """Plain speculative decoding without a KV cache (sequences here are short).
    temperature 0: greedy, accept while the draft equals the target's argmax.
    temperature > 0: Leviathan/Chen rejection sampling. Returns (tokens, drafted, accepted)."""
    seq = list(prompt)
    drafted = accepted = 0
    end = len(prompt) + n_new
    while len(seq) < end:
        g = min(gamma, end - len(seq))
        ctx = list(seq)
        qs = []
        for _ in range(g):
            lq = draft(input_ids=torch.tensor([ctx])).logits[0, -1].float()
            if temperature == 0:
                t = int(lq.argmax())
            else:
                q = torch.softmax(lq / temperature, -1)
                qs.append(q)
                t = int(torch.multinomial(q, 1, generator=gen))
            ctx.append(t)
        lp = target(input_ids=torch.tensor([ctx])).logits[0, len(seq) - 1:].float()
        drafted += g
        for i in range(g):
            tok = ctx[len(seq)]
            if temperature == 0:
                want = int(lp[i].argmax())
                if tok == want:
                    accepted += 1
                    seq.append(tok)
                    continue
                seq.append(want)
                break
            p = torch.softmax(lp[i] / temperature, -1)
            u = float(torch.rand(1, generator=gen))
            if u < min(1.0, float(p[tok] / qs[i][tok])):
                accepted += 1
                seq.append(tok)
                continue
            r = torch.clamp(p - qs[i], min=0)
            seq.append(int(torch.multinomial(r / r.sum(), 1, generator=gen)))
            break
        else:  # all accepted: the bonus token from the target's last row
            if len(seq) < end:
                if temperature == 0:
                    seq.append(int(lp[g].argmax()))
                else:
                    p = torch.softmax(lp[g] / temperature, -1)
                    seq.append(int(torch.multinomial(p, 1, generator=gen)))
    return seq[:end], drafted, accepted


def heldout_prompts(tok, corpus, n, plen):
    """n prompts: BOS + the first plen tokens from evenly spaced held-out verse starts."""
    stream, starts = encode_stream(tok, corpus["heldout"])
    ok = starts[starts + plen + 64 <= len(stream)]
    pick = ok[np.linspace(0, len(ok) - 1, n).round().astype(int)]
    bos_id = tok.token_to_id(BOS)
    return [[bos_id] + stream[s:s + plen].tolist() for s in pick]


def stage_eval(wd, args, tok, corpus, target, draft):
    target.eval()
    draft.eval()
    bos_id = tok.token_to_id(BOS)
    res = {"params_target": n_params(target), "params_draft": n_params(draft)}
    hstream, _ = encode_stream(tok, corpus["heldout"])
    for name, m in (("target", target), ("draft", draft)):
        ppl, n = heldout_ppl(m, hstream, bos_id, args.seq_len)
        res[f"ppl_{name}"] = ppl
        res["ppl_tokens"] = n
        log(f"held-out perplexity {name}: {ppl:.2f} over {n} tokens")
    prompts = heldout_prompts(tok, corpus, args.n_prompts, args.prompt_len)
    for label, temp in (("greedy", 0.0), ("sampled_t1", 1.0)):
        gen = torch.Generator().manual_seed(args.seed)
        dr = ac = 0
        t0 = time.time()
        for p in prompts:
            _, d, a = spec_decode(target, draft, p, args.n_new, args.gamma, temp, gen)
            dr += d
            ac += a
        res[f"acceptance_{label}"] = ac / dr
        res[f"drafted_{label}"] = dr
        log(f"acceptance {label} (gamma {args.gamma}, {len(prompts)} prompts x {args.n_new} "
            f"tokens): {ac}/{dr} = {ac / dr:.3f} ({time.time() - t0:.0f} s)")
    gen = torch.Generator().manual_seed(args.seed)
    samples = []
    for text in ("And it came to pass", "In the beginning"):
        ids = tok.encode(text).ids
        out, _, _ = spec_decode(target, draft, ids, 80, args.gamma, 0.0, gen)
        samples.append({"prompt": text, "mode": "greedy", "text": tok.decode(out)})
        out, _, _ = spec_decode(target, draft, ids, 80, args.gamma, 0.8, gen)
        samples.append({"prompt": text, "mode": "temperature 0.8", "text": tok.decode(out)})
    res["samples"] = samples
    for s in samples:
        log(f"sample ({s['mode']}): {s['text']!r}")
    res["heldout_books"] = corpus["heldout_books"]
    res["args"] = vars(args)
    json.dump(res, open(os.path.join(wd, "eval.json"), "w"), indent=1)
    return res


# ----------------------------------------------------------------------------- specdec
def stage_specdec(wd, args, tok, corpus):
    """The same held-out prompts through specdec's own speculative loop (CPU, via ctypes)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hf_compare
    prompts = heldout_prompts(tok, corpus, args.n_prompts, args.prompt_len)
    tdir, ddir = os.path.join(args.out, "kjv-target"), os.path.join(args.out, "kjv-draft")
    res = {}
    for label, temp in (("greedy", 0.0), ("sampled_t1", 1.0)):
        r = hf_compare.specdec_acceptance(args.lib, tdir, ddir, prompts, args.n_new, args.gamma, temp, args.seed)
        res[label] = r
        log(f"specdec acceptance {label}: {r['accepted']}/{r['drafted']} = {r['acceptance']:.3f}, "
            f"{r['tokens_per_round']:.2f} tokens/round, {r['generated'] / max(r['seconds'], 1e-9):.0f} tokens/s")
    json.dump(res, open(os.path.join(wd, "specdec.json"), "w"), indent=1)


# ----------------------------------------------------------------------------- model cards
def stage_card(wd, args):
    ev = json.load(open(os.path.join(wd, "eval.json")))
    sp_path = os.path.join(wd, "specdec.json")
    sp = json.load(open(sp_path)) if os.path.exists(sp_path) else None
    hf_path = os.path.join(wd, "hf_compare.txt")
    hf = open(hf_path).read().strip() if os.path.exists(hf_path) else None
    a = ev["args"]
    import tokenizers
    import transformers
    tcfg = json.load(open(os.path.join(args.out, "kjv-target", "config.json")))
    dcfg = json.load(open(os.path.join(args.out, "kjv-draft", "config.json")))

    def arch(c):
        return (f"{c['num_hidden_layers']} layers, hidden {c['hidden_size']}, MLP {c['intermediate_size']}, "
                f"{c['num_attention_heads']} query heads / {c['num_key_value_heads']} KV heads "
                f"(head dim {c['hidden_size'] // c['num_attention_heads']}), "
                f"{'tied' if c['tie_word_embeddings'] else 'untied'} embeddings")
    pt, pd = ev["params_target"], ev["params_draft"]
    lines = [
        "",
        "A tiny Llama pair trained from scratch on the King James Bible so that specdec can run a real",
        "speculative generation with no model download: `specdec generate` with no `-m`/`-md` uses it.",
        "It is a demo and test fixture, not a useful language model. Both directories are standard",
        "Hugging Face `LlamaForCausalLM` checkpoints and load with `transformers` as well.",
        "",
        "| | kjv-target | kjv-draft |",
        "| --- | --- | --- |",
        f"| parameters (stored) | {pt:,} | {pd:,} ({pt / pd:.1f}x smaller) |",
        f"| architecture | {arch(tcfg)} | {arch(dcfg)} |",
        f"| context | {tcfg['max_position_embeddings']} tokens (trained at that length), RoPE theta "
        f"{tcfg['rope_theta']:g} | same |",
        f"| weights | model.safetensors, F16 | model.safetensors, F16 |",
        f"| held-out perplexity | {ev['ppl_target']:.2f} | {ev['ppl_draft']:.2f} |",
        "",
        "Perplexity is per token on the held-out books (BOS + 511-token windows). The draft, distilled",
        "from the target on more tokens than the target itself saw, ends up close to it.",
        "",
        "## Data",
        "",
        "The King James Version text of Debian's `bible-kjv` package (public domain), printed with",
        "`bible \"Gen1:1-Rev22:21\"` (31,102 verses, about 4.3 MB). `tools/train_pair.py` strips the chapter",
        "headings and verse numbers and writes one verse per line. The books "
        + ", ".join(ev["heldout_books"]) + " are held out",
        f"(229 verses, {ev['ppl_tokens']:,} tokens): never seen by the tokenizer trainer or the models, used",
        "for perplexity and for the acceptance prompts.",
        "",
        "## Tokenizer",
        "",
        "One byte-level BPE tokenizer shared by both models (`tokenizer.json`, `tokenizer_config.json`):",
        "GPT-2 style byte-level pre-tokenizer (regex split, no prefix space), 4,096 ids trained with the",
        "`tokenizers` library on the training split, specials `<s>` = 0 (BOS) and `</s>` = 1 (EOS); the",
        "post-processor prepends `<s>`. The models never saw `</s>` in training, so generation runs to",
        "its token limit.",
        "",
        "## Training recipe",
        "",
        f"`tools/train_pair.py --steps {a['steps']} --batch {a['batch']} --seq-len {a['seq_len']} --seed {a['seed']}`"
        " on CPU:",
        "",
        f"- {a['steps']} steps of {a['batch']} windows x {a['seq_len']} tokens "
        f"({a['steps'] * a['batch'] * a['seq_len'] / 1e6:.1f}M tokens, about "
        f"{a['steps'] * a['batch'] * a['seq_len'] / 1.03e6:.1f} passes over the 1.03M training tokens); each window is",
        "  `<s>` followed by text starting at a random verse, drawn with numpy's PCG64 seeded by `--seed`.",
        f"- AdamW (betas 0.9/0.95, weight decay 0.1 on matrices), gradient clip 1.0, linear warm-up over",
        f"  {a['warmup']} steps then cosine decay to 10%; peak LR {a['lr_target']:g} (target), {a['lr_draft']:g} (draft).",
        "- Target: next-token cross-entropy. Draft: trained on the same batches at the same time,",
        f"  loss = (1 - a) * cross-entropy + a * KL(target || draft) with the target's logits of that",
        f"  step (detached); a ramps linearly from 0 to {a['kd_weight']:g} over the first "
        f"{a['kd_ramp'] * 100:.0f}% of the steps (online distillation: the draft learns to agree with the target).",
        f"- Phase 2: the target frozen, the draft trained {a['distill_steps']} more steps on fresh batches (seed + 1)",
        f"  with loss 0.9 * KL(target || draft) + 0.1 * cross-entropy, peak LR {a['lr_distill']:g}, same schedule shape.",
        f"  A step costs one target forward instead of a target training step, so the draft sees",
        f"  {a['distill_steps'] * a['batch'] * a['seq_len'] / 1e6:.1f}M more tokens of the target's distributions cheaply;",
        "  it roughly halved the draft's KL to the target.",
        f"- fp32 on 2 CPU threads, `torch.use_deterministic_algorithms(True)`, `torch.manual_seed({a['seed']})`;",
        f"  torch {torch.__version__.split('+')[0]}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}.",
    ]
    if args.train_note:
        lines.append(f"- {args.train_note}")
    lines += [
        "- Exported with `save_pretrained` in F16; `config.json` also carries `rope_theta` and",
        "  `torch_dtype` at the top level for readers older than transformers 5.",
        "",
        "## Speculative decoding (measured)",
        "",
        f"{a['n_prompts']} prompts from the held-out books: `<s>` plus the first {a['prompt_len']} tokens from evenly",
        f"spaced verse starts; {a['n_new']} new tokens each; gamma = {a['gamma']} draft tokens per round;",
        "acceptance = accepted draft tokens / drafted tokens.",
        "",
        "| measured with | greedy (target's own greedy continuation) | sampled, temperature 1 (rejection sampling) |",
        "| --- | --- | --- |",
        f"| Python reference loop (`tools/train_pair.py`, transformers fp32) | {ev['acceptance_greedy']:.3f} "
        f"({ev['drafted_greedy']} drafted) | {ev['acceptance_sampled_t1']:.3f} ({ev['drafted_sampled_t1']} drafted) |",
    ]
    if sp:
        g, t1 = sp["greedy"], sp["sampled_t1"]
        lines.append(f"| specdec CPU backend (`specdec_generate`, `--stage specdec`) | {g['acceptance']:.3f} "
                     f"({g['drafted']} drafted, {g['tokens_per_round']:.2f} tokens/round) | {t1['acceptance']:.3f} "
                     f"({t1['drafted']} drafted, {t1['tokens_per_round']:.2f} tokens/round) |")
    else:
        lines.append("| specdec CPU backend | not measured yet | not measured yet |")
    lines += ["", "## Compatibility check with transformers", ""]
    if hf:
        lines += ["`python3 tools/hf_compare.py` (transformers fp32 eager attention vs specdec's CPU forward and",
                  "tokenizer through the C ABI; passes when every ||specdec - hf|| / ||hf|| < 1e-5 and every id",
                  "and decoded string is identical):", "", "```", hf, "```"]
    else:
        lines += ["`python3 tools/hf_compare.py` compares transformers' fp32 logits and token ids with specdec's;",
                  "not run yet for this export."]
    lines += ["", "## Samples", "",
              "Greedy / sampled speculative generation with the pair (Python reference loop); prompt then",
              "continuation:", ""]
    for smp in ev["samples"]:
        lines += [f"prompt \"{smp['prompt']}\", {smp['mode']}:", "", "```", smp["text"].strip(), "```", ""]
    lines += ["## Reproduce", "", "```",
              "pip install -r tools/requirements-train.txt   # CPU is enough",
              "apt-get install bible-kjv",
              "nice -n 5 python3 tools/train_pair.py --workdir /tmp/kjv --out models   # corpus .. eval, cards",
              "# after building specdec (cmake -S . -B build && cmake --build build):",
              "python3 tools/hf_compare.py | tee /tmp/kjv/hf_compare.txt",
              "python3 tools/train_pair.py --workdir /tmp/kjv --out models --stage specdec",
              "python3 tools/train_pair.py --workdir /tmp/kjv --out models --stage card",
              "```", "",
              "Licence: the training text is in the public domain; the weights ship with specdec.", ""]
    body = "\n".join(lines)
    for name, title, note in (
            ("kjv-target", "kjv-target: the bundled target model",
             "Its draft is `../kjv-draft`."),
            ("kjv-draft", "kjv-draft: the bundled draft model",
             "The draft of `../kjv-target`, distilled from it while both trained; this card covers both.")):
        with open(os.path.join(args.out, name, "README.md"), "w") as f:
            f.write(f"# {title}\n\n{note}\n{body}")
    log("wrote model cards")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/kjv", help="corpus, tokenizer, checkpoints (outside the repo)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
    ap.add_argument("--stage", default="all", choices=["all", "corpus", "tokenizer", "train", "export", "eval", "specdec", "card"])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=420)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--lr-target", type=float, default=2e-3)
    ap.add_argument("--lr-draft", type=float, default=4e-3)
    ap.add_argument("--kd-weight", type=float, default=0.7)
    ap.add_argument("--kd-ramp", type=float, default=0.3, help="fraction of steps to reach kd-weight")
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--distill-steps", type=int, default=800, help="phase 2: draft-only distillation steps")
    ap.add_argument("--lr-distill", type=float, default=3e-3)
    ap.add_argument("--n-prompts", type=int, default=50)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--n-new", type=int, default=64)
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--lib", help="libspecdec.so for --stage specdec (default: newest build*/libspecdec.so)")
    ap.add_argument("--train-note", help="a line about how the run went, for the model card")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.workdir, exist_ok=True)
    wd = args.workdir
    corpus = stage_corpus(wd)
    if args.stage == "corpus":
        return
    tok = stage_tokenizer(wd, corpus)
    if args.stage == "tokenizer":
        return
    if args.stage == "specdec":
        stage_specdec(wd, args, tok, corpus)
        return
    if args.stage == "card":
        stage_card(wd, args)
        return
    target, draft, _ = stage_train(wd, args, tok, corpus)
    draft = stage_distill(wd, args, tok, corpus, target, draft)
    if args.stage == "train":
        return
    if args.stage in ("all", "export"):
        stage_export(args, tok, target, draft)
    if args.stage in ("all", "eval"):
        # measure what ships: the exported F16 weights, computed in fp32
        target, draft = (LlamaForCausalLM.from_pretrained(os.path.join(args.out, n), dtype=torch.float32)
                         for n in ("kjv-target", "kjv-draft"))
        stage_eval(wd, args, tok, corpus, target, draft)
    if args.stage in ("all", "eval"):
        stage_card(wd, args)


if __name__ == "__main__":
    main()

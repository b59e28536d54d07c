#!/usr/bin/env python3
"""train_eagle3.py — train an EAGLE-3 draft head for the bundled models/kjv-target.

The head is the published EAGLE-3 architecture (one Llama decoder layer whose attention reads
[embedding ; fused target hidden] of width 2H, an `fc` that fuses three captured target hidden
states, its own final norm and an LM head over a reduced draft vocabulary with a `d2t` map), and
it is written in the published flat layout (SpecForge / sglang: `fc.weight`, `midlayer.*`,
`norm.weight`, `lm_head.weight`, `d2t`, `t2d`, a flat Llama config.json with `draft_vocab_size`
and `eagle_config`). See docs/EAGLE3.md and ../shared/EAGLE3.md for the format.

Stages (cached in --workdir):
  corpus   the KJV verses exactly as tools/train_pair.py makes them (Debian's bible-kjv), the same
           training split and held-out books; tokenised with models/kjv-target/tokenizer.json
  vocab    the draft vocabulary: the --draft-vocab most frequent training-token ids, ascending
           (d2t[i] = sel[i] - i, t2d = membership), as EAGLE / SpecForge / speculators do
  train    the target (transformers LlamaForCausalLM, frozen, fp32) runs each batch with
           output_hidden_states; the captured states hs[a], hs[b], hs[c] (residual stream at the
           inputs of layers a, b, c) feed the head; the head is trained with EAGLE-3's
           "training-time test": --unroll steps, step j feeds the head its own output hidden of
           step j-1 (teacher-forced tokens), attends to the step-0 rows causally and to its own
           earlier steps of the same row (exactly the draft KV cache a chain sees at inference);
           loss = sum_j 0.8^j * CE(target's distribution over the draft vocab, head)
  export   fp16 safetensors (HF `save_pretrained` tensor order, `format: pt` metadata) +
           config.json into --out (models/kjv-eagle3)
  eval     on the held-out books: top-1 agreement of the head's first draft token with the
           target's greedy next token, the same for models/kjv-draft, and a greedy gamma = 4
           speculative loop for both drafters (tokens per round); <workdir>/eval_eagle3.json

The target has 6 layers, so the default capture rule (hs[2], hs[L//2], hs[L-3]) degenerates to
two states (hs[3] twice); the head uses explicit ids (--aux, default 2,4,5) written both at the
top level (vLLM / speculators numbering = hs index) and in eagle_config (sglang: ids are hs
indices unless the first id is 1), so every engine reads the same three states.

  nice -n 10 /work/venv-torch/bin/python tools/train_eagle3.py --workdir /tmp/kjv-eagle3
"""
import argparse
import json
import math
import os
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from safetensors.torch import save_file
    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM
except ImportError as e:  # pragma: no cover
    sys.exit(f"train_eagle3.py: missing dependency ({e}); pip install -r tools/requirements-train.txt")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_pair as tp  # noqa: E402  (corpus, batches, held-out prompts: the pair's own data path)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------- the head (torch)
def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope(x, pos, theta):
    """HF rotate_half (NeoX) RoPE. x [..., T, nh, hd], pos [T] (int)."""
    hd = x.size(-1)
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    ang = pos.float()[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Eagle3Head(nn.Module):
    def __init__(s, H, tH, nH, nKV, hd, Fm, Vd, eps=1e-5, theta=10000.0):
        super().__init__()
        s.H, s.nH, s.nKV, s.hd, s.eps, s.theta = H, nH, nKV, hd, eps, theta
        L = lambda i, o: nn.Linear(i, o, bias=False)  # noqa: E731
        s.fc = L(3 * tH, H)
        s.input_layernorm = nn.Parameter(torch.ones(H))
        s.hidden_norm = nn.Parameter(torch.ones(H))
        s.post_attention_layernorm = nn.Parameter(torch.ones(H))
        s.norm = nn.Parameter(torch.ones(H))
        s.q_proj, s.k_proj, s.v_proj = L(2 * H, nH * hd), L(2 * H, nKV * hd), L(2 * H, nKV * hd)
        s.o_proj = L(nH * hd, H)
        s.gate_proj, s.up_proj, s.down_proj = L(H, Fm), L(H, Fm), L(Fm, H)
        s.lm_head = L(H, Vd)

    def qkv(s, e, g, pos):
        """e: embeddings [B,T,H], g: hidden [B,T,H] -> q [B,T,nH,hd], k, v [B,T,nKV,hd]."""
        u = torch.cat([rms(e, s.input_layernorm, s.eps), rms(g, s.hidden_norm, s.eps)], -1)
        B, T, _ = u.shape
        q = rope(s.q_proj(u).view(B, T, s.nH, s.hd), pos, s.theta)
        k = rope(s.k_proj(u).view(B, T, s.nKV, s.hd), pos, s.theta)
        v = s.v_proj(u).view(B, T, s.nKV, s.hd)
        return q, k, v

    def tail(s, g, attn):
        """attn [B,T,nH*hd] -> (recurrent hidden h, draft logits)."""
        h1 = g + s.o_proj(attn)
        x = rms(h1, s.post_attention_layernorm, s.eps)
        h = h1 + s.down_proj(F.silu(s.gate_proj(x)) * s.up_proj(x))
        return h, s.lm_head(rms(h, s.norm, s.eps))

    def expand(s, k):
        return k.repeat_interleave(s.nH // s.nKV, dim=2)

    def train_steps(s, emb, aux, tokens, n_steps):
        """Training-time test. emb: frozen embedding module; aux [B,T,3tH]; tokens [B,T+n_steps-1]
        (tokens[:, p + j] is the input token of row p at step j). Yields logits per step."""
        B, T, _ = aux.shape
        pos0 = torch.arange(T)
        g = s.fc(aux)
        scale = 1.0 / math.sqrt(s.hd)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        K0 = V0 = None
        diag_k, diag_v = [], []
        out = []
        for j in range(n_steps):
            q, k, v = s.qkv(emb(tokens[:, j:j + T]), g, pos0 + j)
            k, v = s.expand(k), s.expand(v)
            if j == 0:
                K0, V0 = k, v
            else:
                diag_k.append(k)
                diag_v.append(v)
            # scores vs the step-0 rows (causal) and the row's own later steps (diagonal)
            sc0 = torch.einsum("bthd,bshd->bhts", q, K0) * scale
            sc0 = sc0.masked_fill(~causal, float("-inf"))
            scd = [torch.einsum("bthd,bthd->bht", q, kk)[..., None] * scale for kk in diag_k]
            p = torch.softmax(torch.cat([sc0] + scd, -1), -1)
            a = torch.einsum("bhts,bshd->bthd", p[..., :T], V0)
            for i, vv in enumerate(diag_v):
                a = a + p[..., T + i].permute(0, 2, 1)[..., None] * vv
            g, logits = s.tail(g, a.reshape(B, T, -1))
            out.append(logits)
        return out

    # --- inference with an explicit draft KV cache (the semantics specdec implements)
    def step(s, emb, tok, g, pos, cache):
        """Rows tok [T] with hidden g [T,H] at positions pos [T]; attends to cache + itself
        causally; appends to cache. Returns (h [T,H], logits [T,Vd])."""
        q, k, v = s.qkv(emb(tok)[None], g[None], pos)
        cache["k"] = k if cache.get("k") is None else torch.cat([cache["k"], k], 1)
        cache["v"] = v if cache.get("v") is None else torch.cat([cache["v"], v], 1)
        K, V = s.expand(cache["k"]), s.expand(cache["v"])
        S, T = K.size(1), q.size(1)
        sc = torch.einsum("bthd,bshd->bhts", q, K) / math.sqrt(s.hd)
        mask = torch.arange(S)[None, :] <= (S - T + torch.arange(T))[:, None]
        sc = sc.masked_fill(~mask, float("-inf"))
        a = torch.einsum("bhts,bshd->bthd", torch.softmax(sc, -1), V).reshape(1, T, -1)
        h, logits = s.tail(g[None], a)
        return h[0], logits[0]


# ----------------------------------------------------------------------------- data
def load_data(wd):
    corpus = tp.stage_corpus(wd)
    tok = Tokenizer.from_file(os.path.join(HERE, "..", "models", "kjv-target", "tokenizer.json"))
    return corpus, tok


def draft_vocab(stream, V, Vd):
    cnt = np.bincount(stream, minlength=V)
    order = np.argsort(-cnt, kind="stable")
    sel = np.sort(order[:Vd])
    cover = cnt[sel].sum() / cnt.sum()
    return sel.astype(np.int64), float(cover)


def lr_sched(step, frac, peak, warmup):
    """Linear warm-up over `warmup` steps, then cosine from peak to 10% over frac in [0, 1]."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def capture(target, x, aux_ids):
    out = target(input_ids=x, output_hidden_states=True)
    hs = out.hidden_states
    return torch.cat([hs[i] for i in aux_ids], -1), out.logits


# ----------------------------------------------------------------------------- train
def train(args, wd, corpus, tok, target, sel):
    tcfg = target.config
    H = tcfg.hidden_size
    hd = getattr(tcfg, "head_dim", None) or H // tcfg.num_attention_heads
    torch.manual_seed(args.seed)
    head = Eagle3Head(H, H, tcfg.num_attention_heads, tcfg.num_key_value_heads, hd,
                      args.intermediate, len(sel), tcfg.rms_norm_eps, args.rope_theta)
    if args.init_lm_head:
        # Start in the target's output space: its LM head rows of the draft vocabulary and its
        # final norm (the head's input embedding is the target's already).
        with torch.no_grad():
            head.lm_head.weight.copy_(target.lm_head.weight[torch.from_numpy(sel)])
            head.norm.copy_(target.model.norm.weight)
    emb = target.get_input_embeddings()
    stream, starts = tp.encode_stream(tok, corpus["train"])
    rng = np.random.default_rng(args.seed)
    opt = tp.make_optimizer(head, args.lr)
    ckpt = os.path.join(wd, "eagle3.pt")
    step0, hist, el0 = 0, [], 0.0
    if not os.path.exists(ckpt) and args.init_from:
        # a warm restart: the weights of an earlier run, a fresh optimizer and LR schedule
        head.load_state_dict(torch.load(args.init_from)["head"])
        log(f"initialised from {args.init_from}")
    if os.path.exists(ckpt):
        st = torch.load(ckpt)
        head.load_state_dict(st["head"])
        if st.get("done"):
            return head, st["log"]
        opt.load_state_dict(st["opt"])
        rng.bit_generator.state = st["rng"]
        step0, hist = st["step"], st["log"]
        el0 = st.get("elapsed", 0.0)
        log(f"resumed at step {step0} ({el0 / 60:.1f} min trained)")
    sel_t = torch.from_numpy(sel)
    bos = tok.token_to_id("<s>")
    K = args.unroll
    t0 = time.time()
    for step in range(step0, args.steps):
        el = el0 + time.time() - t0
        frac = step / args.steps
        if args.max_minutes:  # the schedule follows whichever budget runs out first
            frac = max(frac, el / (60 * args.max_minutes))
        if frac >= 1.0:
            log(f"stopping at step {step}: budget reached ({el / 60:.1f} min)")
            hist.append({"stopped_at": step})
            break
        for gr in opt.param_groups:
            gr["lr"] = lr_sched(step, frac, args.lr, args.warmup)
        x = tp.batch_at(rng, stream, starts, bos, args.batch, args.seq_len)  # [B, S]
        with torch.no_grad():
            aux, tl = capture(target, x, args.aux)
            # row p: token x[p+1], feature aux[p]; step j label = target dist at position p+1+j
            T = x.size(1) - 1
            aux = aux[:, :T]
            tokens = torch.cat([x[:, 1:], torch.zeros(x.size(0), K - 1, dtype=x.dtype)], 1)
            tl = tl.float()
            pt_full = torch.cat([tl, tl[:, -1:].expand(-1, K, -1)], 1)  # padded, masked below
        outs = head.train_steps(emb, aux, tokens, K)
        loss, stats = 0.0, []
        for j, lg in enumerate(outs):
            n = T - j  # valid rows: p + 1 + j <= S - 1
            tgt = pt_full[:, 1 + j:1 + j + T][:, :n]
            p = torch.softmax(tgt[..., sel_t], -1)
            lq = F.log_softmax(lg[:, :n], -1)
            lj = -(p * lq).sum(-1).mean()
            loss = loss + (0.8 ** j) * lj
            agree = (sel_t[lq.argmax(-1)] == tgt.argmax(-1)).float().mean().item()
            stats.append((lj.item(), agree))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        el = el0 + time.time() - t0
        if step % 10 == 0 or step == args.steps - 1:
            hist.append({"step": step, "loss": loss.item(), "steps": stats})
            log(f"step {step}/{args.steps} loss {loss.item():.3f} | " +
                " ".join(f"s{j} ce {c:.2f} agree {a:.3f}" for j, (c, a) in enumerate(stats)) +
                f" | {el / 60:.1f} min")
        if (step + 1) % args.ckpt_every == 0:
            torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "rng": rng.bit_generator.state,
                        "step": step + 1, "log": hist, "elapsed": el}, ckpt)
    torch.save({"head": head.state_dict(), "log": hist, "done": True}, ckpt)
    return head, hist


# ----------------------------------------------------------------------------- export
def export(args, head, sel, target, n_trained_steps):
    d = args.out
    os.makedirs(d, exist_ok=True)
    tcfg = target.config
    sd = head.state_dict()
    t = {"fc.weight": sd["fc.weight"], "norm.weight": sd["norm"], "lm_head.weight": sd["lm_head.weight"]}
    for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        t[f"midlayer.{n}.weight"] = sd[n]
    for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
        t[f"midlayer.self_attn.{n}.weight"] = sd[f"{n}.weight"]
    for n in ("gate_proj", "up_proj", "down_proj"):
        t[f"midlayer.mlp.{n}.weight"] = sd[f"{n}.weight"]
    t = {k: v.detach().to(torch.float16).contiguous() for k, v in t.items()}
    V, Vd = tcfg.vocab_size, len(sel)
    t["d2t"] = torch.from_numpy(sel - np.arange(Vd, dtype=np.int64))
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[torch.from_numpy(sel)] = True
    t["t2d"] = t2d
    save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    hd = getattr(tcfg, "head_dim", None) or tcfg.hidden_size // tcfg.num_attention_heads
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
        "bos_token_id": tcfg.bos_token_id, "eos_token_id": tcfg.eos_token_id, "pad_token_id": None,
        "hidden_size": tcfg.hidden_size, "target_hidden_size": tcfg.hidden_size,
        "intermediate_size": args.intermediate, "num_hidden_layers": 1,
        "num_attention_heads": tcfg.num_attention_heads, "num_key_value_heads": tcfg.num_key_value_heads,
        "head_dim": hd, "rms_norm_eps": tcfg.rms_norm_eps, "rope_theta": args.rope_theta,
        "max_position_embeddings": tcfg.max_position_embeddings, "initializer_range": 0.02,
        "vocab_size": V, "draft_vocab_size": Vd, "tie_word_embeddings": False,
        "torch_dtype": "float16", "use_cache": True, "pretraining_tp": 1,
        "eagle_aux_hidden_state_layer_ids": list(args.aux),
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(args.aux), "use_aux_hidden_state": True},
    }
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2, sort_keys=True)
    log(f"exported {d}: {sorted(os.listdir(d))} after {n_trained_steps} steps")


def load_head(d, target):
    from safetensors.torch import load_file
    cfg = json.load(open(os.path.join(d, "config.json")))
    t = {k: v.float() if v.is_floating_point() else v for k, v in load_file(os.path.join(d, "model.safetensors")).items()}
    head = Eagle3Head(cfg["hidden_size"], cfg.get("target_hidden_size", cfg["hidden_size"]),
                      cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"],
                      cfg["intermediate_size"], cfg["draft_vocab_size"], cfg["rms_norm_eps"],
                      cfg.get("rope_theta", 10000.0))
    sd = {"fc.weight": t["fc.weight"], "norm": t["norm.weight"], "lm_head.weight": t["lm_head.weight"]}
    for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        sd[n] = t[f"midlayer.{n}.weight"]
    for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
        sd[f"{n}.weight"] = t[f"midlayer.self_attn.{n}.weight"]
    for n in ("gate_proj", "up_proj", "down_proj"):
        sd[f"{n}.weight"] = t[f"midlayer.mlp.{n}.weight"]
    head.load_state_dict(sd)
    sel = (t["d2t"] + torch.arange(cfg["draft_vocab_size"])).numpy()
    return head, sel, cfg["eagle_aux_hidden_state_layer_ids"]


# ----------------------------------------------------------------------------- eval
@torch.no_grad()
def agreement(target, draft, head, sel, aux_ids, hstream, bos, seq_len):
    """Top-1 agreement with the target's greedy next token over held-out windows: the head's first
    draft token (row p predicts t_{p+2} from t_{p+1} and the target's features at p) and kjv-draft's
    prediction of the same token (it sees t_0..t_{p+1})."""
    emb = target.get_input_embeddings()
    sel_t = torch.from_numpy(sel)
    n = a_head = a_draft = 0
    step = seq_len - 1
    for s in range(0, len(hstream) - 1, step):
        x = torch.tensor([[bos] + hstream[s:s + step].tolist()])
        aux, tl = capture(target, x, aux_ids)
        tg = tl[0].argmax(-1)                      # target greedy next token at each position
        T = x.size(1) - 1
        if T < 2:
            continue
        _, lg = head.step(emb, x[0, 1:], head.fc(aux[0, :T]), torch.arange(T), {})
        hh = sel_t[lg.argmax(-1)]                  # row p -> prediction for position p+1's next
        dg = draft(input_ids=x).logits[0].argmax(-1)
        a_head += (hh[:T - 1] == tg[1:T]).sum().item()
        a_draft += (dg[1:T] == tg[1:T]).sum().item()
        n += T - 1
    return a_head / n, a_draft / n, n


@torch.no_grad()
def spec_greedy(target, propose, prompt, n_new, gamma):
    """Greedy speculative loop without caches; returns (tokens made by rounds, rounds, accepted, drafted):
    the first new token comes from the prompt's pass and is not counted."""
    seq = list(prompt)
    end = len(prompt) + n_new
    seq.append(int(target(input_ids=torch.tensor([seq])).logits[0, -1].argmax()))
    rounds = acc = drafted = 0
    while len(seq) < end:
        g = min(gamma, end - len(seq))
        d = propose(seq, g)
        drafted += g
        lp = target(input_ids=torch.tensor([seq + d])).logits[0, len(seq) - 1:]
        rounds += 1
        for i in range(g + 1):
            want = int(lp[i].argmax())
            if i < g and d[i] == want:
                acc += 1
                seq.append(want)
                continue
            seq.append(want)
            break
    return len(seq[:end]) - len(prompt) - 1, rounds, acc, drafted


def head_proposer(target, head, sel, aux_ids, emb):
    sel_t = torch.from_numpy(sel)

    def propose(seq, g):
        # seq = t_0..t_{N-1}; t_{N-1} is the root (not yet run by the target); features 0..N-2
        aux, _ = capture(target, torch.tensor([seq[:-1]]), aux_ids)
        N = len(seq)
        cache = {}
        h, lg = head.step(emb, torch.tensor(seq[1:]), head.fc(aux[0]), torch.arange(N - 1), cache)
        out = []
        hprev, x, pos = h[-1:], int(sel_t[lg[-1].argmax()]), N - 2
        for _ in range(g):
            out.append(x)
            if len(out) == g:
                break
            pos += 1
            hprev, lg = head.step(emb, torch.tensor([x]), hprev, torch.tensor([pos]), cache)
            x = int(sel_t[lg[-1].argmax()])
        return out
    return propose


def draft_proposer(draft):
    def propose(seq, g):
        ctx = list(seq)
        for _ in range(g):
            ctx.append(int(draft(input_ids=torch.tensor([ctx])).logits[0, -1].argmax()))
        return ctx[len(seq):]
    return propose


@torch.no_grad()
def crosscheck(args, target, tok, corpus):
    """The exported head in this script's torch model vs the float64 reference of the published
    forward (tests/eagle3/eagle3_ref.py, which specdec's C forward is tested against): a prefix
    of held-out rows on the target's real features, then 3 chain steps."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "eagle3"))
    import eagle3_ref
    head, sel, aux_ids = load_head(args.out, target)
    emb = target.get_input_embeddings()
    hstream, _ = tp.encode_stream(tok, corpus["heldout"])
    x = torch.tensor([[tok.token_to_id("<s>")] + hstream[:48].tolist()])
    aux, _ = capture(target, x, aux_ids)
    T = x.size(1) - 1
    ref = eagle3_ref.Eagle3Ref(args.out, emb.weight.double().numpy())
    cache = {}
    h, lg = head.step(emb, x[0, 1:], head.fc(aux[0, :T]), torch.arange(T), cache)
    rl, rg = ref.step(x[0, 1:].numpy(), ref.fuse(aux[0, :T].double().numpy()), np.arange(T))
    worst = 0.0
    for j in range(4):
        if j:
            t = int(sel[lg[-1].argmax()])
            h, lg = head.step(emb, torch.tensor([t]), h[-1:], torch.tensor([T + j - 1]), cache)
            rl, rg = ref.step([t], rg[-1:], [T + j - 1])
        worst = max(worst, float(np.linalg.norm(lg.double().numpy() - rl) / np.linalg.norm(rl)))
    ok = worst < 1e-5 and np.array_equal(ref.d2t, sel)
    log(f"cross-check vs the float64 reference forward: max rel diff of logits {worst:.2e} "
        f"({'ok' if ok else 'MISMATCH'})")
    return worst


def evaluate(args, wd, corpus, tok, target):
    head, sel, aux_ids = load_head(args.out, target)  # what ships (fp16 weights, fp32 compute)
    head.eval()
    draft = LlamaForCausalLM.from_pretrained(os.path.join(HERE, "..", "models", "kjv-draft"), dtype=torch.float32).eval()
    bos = tok.token_to_id("<s>")
    hstream, _ = tp.encode_stream(tok, corpus["heldout"])
    ah, ad, n = agreement(target, draft, head, sel, aux_ids, hstream, bos, args.seq_len)
    log(f"held-out top-1 agreement with the target's greedy token ({n} positions): "
        f"eagle3 head {ah:.4f}, kjv-draft {ad:.4f}")
    tstream, _ = tp.encode_stream(tok, corpus["train"])
    res = {"agree_head": ah, "agree_draft": ad, "agree_positions": n,
           "draft_vocab_cover": float(np.isin(tstream, sel).mean()),
           "crosscheck_rel": crosscheck(args, target, tok, corpus)}
    prompts = tp.heldout_prompts(tok, corpus, args.n_prompts, 32)
    emb = target.get_input_embeddings()
    for name, prop in (("eagle3", head_proposer(target, head, sel, aux_ids, emb)), ("kjv-draft", draft_proposer(draft))):
        gen = rnd = acc = dr = 0
        t0 = time.time()
        for p in prompts:
            a, b, c, d = spec_greedy(target, prop, p, args.n_new, args.gamma)
            gen, rnd, acc, dr = gen + a, rnd + b, acc + c, dr + d
        res[name] = {"generated": gen, "rounds": rnd, "accepted": acc, "drafted": dr, "tokens_per_round": gen / rnd}
        log(f"greedy gamma {args.gamma}, {len(prompts)} held-out prompts x {args.n_new}: {name} "
            f"{gen / rnd:.3f} tokens/round ({acc} accepted in {rnd} rounds, {time.time() - t0:.0f} s)")
    res["args"] = vars(args)
    json.dump(res, open(os.path.join(wd, "eval_eagle3.json"), "w"), indent=1)
    return res


def card(args, wd):
    """models/kjv-eagle3/README.md from eval_eagle3.json and the training log."""
    import transformers
    ev = json.load(open(os.path.join(wd, "eval_eagle3.json")))
    st = torch.load(os.path.join(wd, "eagle3.pt"))
    hist = st["log"]
    steps = next((h["stopped_at"] for h in hist if "stopped_at" in h), args.steps)
    last = [h for h in hist if "steps" in h][-1]
    cfg = json.load(open(os.path.join(args.out, "config.json")))
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    a = ev["args"]
    n_par = size - 8  # rough; the exact count below
    from safetensors import safe_open
    with safe_open(os.path.join(args.out, "model.safetensors"), "pt") as f:
        n_par = sum(f.get_tensor(k).numel() for k in f.keys() if k not in ("d2t", "t2d"))
    e, d = ev["eagle3"], ev["kjv-draft"]
    lines = [
        "# kjv-eagle3: an EAGLE-3 draft head for kjv-target", "",
        "An EAGLE-3 head (one Llama decoder layer over three hidden states captured from the target) for",
        "`../kjv-target`, trained by `tools/train_eagle3.py` on the same King James Bible training split as the",
        "bundled pair (`tools/train_pair.py`; held-out books never seen). Written in the published flat",
        "layout (EAGLE / SpecForge / sglang): `fc.weight`, `midlayer.*`, `norm.weight`, `lm_head.weight`,",
        "`d2t`, `t2d`, a flat Llama `config.json` with `draft_vocab_size` and `eagle_config`. See",
        "`docs/EAGLE3.md` for how specdec loads and runs it.", "",
        "| | |", "| --- | --- |",
        f"| target | kjv-target: {cfg['vocab_size']} ids, hidden {cfg['target_hidden_size']}, 6 layers |",
        f"| captured states | hs[{cfg['eagle_aux_hidden_state_layer_ids'][0]}], hs[{cfg['eagle_aux_hidden_state_layer_ids'][1]}], "
        f"hs[{cfg['eagle_aux_hidden_state_layer_ids'][2]}] (residual stream entering target layers 2, 4, 5): explicit ids, "
        "because the default rule (2, L/2, L-3) repeats hs[3] for L = 6; written at the top level and in `eagle_config` "
        "(first id not 1, so sglang and vLLM read the same states) |",
        f"| decoder layer | hidden {cfg['hidden_size']}, {cfg['num_attention_heads']} query / {cfg['num_key_value_heads']} KV heads "
        f"(head dim {cfg['head_dim']}), MLP {cfg['intermediate_size']}, RoPE theta {cfg['rope_theta']:g} |",
        f"| draft vocabulary | {cfg['draft_vocab_size']} most frequent training ids of {cfg['vocab_size']} "
        f"(cover {ev.get('draft_vocab_cover', 0):.2%} of training tokens), ascending, `d2t` / `t2d` |",
        "| embedding | none stored: the target's `embed_tokens` (as published EAGLE-3 heads) |",
        f"| parameters | {n_par:,} (F16, {size / 1e6:.1f} MB) |", "",
        "## Training", "",
        f"- {steps} steps of {a['batch']} windows x {a['seq_len']} tokens (`<s>` + text from a random verse, numpy PCG64",
        f"  seed {a['seed']}); the target (transformers `LlamaForCausalLM`, fp32, frozen) runs each batch with",
        "  `output_hidden_states` and the three states are concatenated (low, mid, high).",
        f"- EAGLE-3 training-time test with {a['unroll']} unrolled steps: step j feeds the head its own hidden output of",
        "  step j-1 (teacher-forced tokens) and attends to the step-0 rows causally plus its own earlier steps, as a",
        "  chain sees its draft KV cache at inference; loss = sum_j 0.8^j * cross-entropy against the target's",
        "  distribution over the draft vocabulary.",
        f"- AdamW (betas 0.9/0.95, weight decay 0.1 on matrices), clip 1.0, peak LR {a['lr']:g}, {a['warmup']} warm-up steps, then",
        f"  cosine to 10% over a {a['max_minutes']:g}-minute budget (the run is CPU-bound on a shared 2-core machine);",
        "  `lm_head` and the final norm start from the target's rows of the draft vocabulary.",
        f"- last logged training batch: " + ", ".join(f"step {j + 1} agreement {ag:.3f}" for j, (_, ag) in enumerate(last["steps"])),
        f"- torch {torch.__version__.split('+')[0]}, transformers {transformers.__version__}, {a['threads']} CPU thread(s).", "",
        "## Measured (held-out books, Python reference loops, fp32 compute on the F16 weights)", "",
        f"Top-1 agreement of the first draft token with the target's greedy next token, over {ev['agree_positions']:,}",
        "held-out positions (the head sees the target's features up to the previous position and the current",
        "token; kjv-draft sees the whole prefix):", "",
        "| drafter | agreement |", "| --- | --- |",
        f"| kjv-eagle3 | {ev['agree_head']:.4f} |", f"| kjv-draft | {ev['agree_draft']:.4f} |", "",
        f"Greedy speculative decoding, gamma = {a['gamma']}, {a['n_prompts']} held-out prompts (`<s>` + 32 tokens, as",
        f"train_pair.py picks them) x {a['n_new']} new tokens, one target pass per round:", "",
        "| drafter | tokens per round | accepted / drafted |", "| --- | --- | --- |",
        f"| kjv-eagle3 (chain) | {e['tokens_per_round']:.3f} | {e['accepted']} / {e['drafted']} |",
        f"| kjv-draft | {d['tokens_per_round']:.3f} | {d['accepted']} / {d['drafted']} |", "",
        f"The torch model used here equals the float64 reference of the published forward",
        f"(`tests/eagle3/eagle3_ref.py`, which specdec's C forward is tested against) to {ev['crosscheck_rel']:.1e}",
        "(relative, logits of a held-out prefix and 3 chain steps).", "",
        "## Reproduce", "", "```",
        "pip install -r tools/requirements-train.txt; apt-get install bible-kjv",
        f"nice -n 10 python3 tools/train_eagle3.py --workdir /tmp/kjv-eagle3 --max-minutes {a['max_minutes']:g}",
        "```", "", "Licence: the training text is in the public domain; the weights ship with specdec.", ""]
    open(os.path.join(args.out, "README.md"), "w").write("\n".join(lines))
    log("wrote the model card")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/kjv-eagle3")
    ap.add_argument("--target", default=os.path.join(HERE, "..", "models", "kjv-target"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "models", "kjv-eagle3"))
    ap.add_argument("--stage", default="all", choices=["all", "train", "export", "eval", "check", "card"])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--aux", default="2,4,5", help="captured hs indices (input of those layers)")
    ap.add_argument("--draft-vocab", type=int, default=3072)
    ap.add_argument("--intermediate", type=int, default=704)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--unroll", type=int, default=3, help="training-time-test steps")
    ap.add_argument("--no-init-lm-head", dest="init_lm_head", action="store_false",
                    help="random lm_head / norm instead of the target's rows")
    ap.add_argument("--init-from", default="",
                    help="start from the head weights of an earlier run's eagle3.pt (new optimizer and schedule)")
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="training time budget: the LR schedule ends at --steps or at this many minutes, whichever first (0: steps only)")
    ap.add_argument("--n-prompts", type=int, default=50)
    ap.add_argument("--n-new", type=int, default=64)
    ap.add_argument("--gamma", type=int, default=4)
    args = ap.parse_args()
    args.aux = [int(v) for v in args.aux.split(",")]
    torch.set_num_threads(args.threads)
    os.makedirs(args.workdir, exist_ok=True)
    wd = args.workdir
    corpus, tok = load_data(wd)
    target = LlamaForCausalLM.from_pretrained(args.target, dtype=torch.float32).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    L = target.config.num_hidden_layers
    if len(set(args.aux)) != 3 or not all(0 <= a <= L - 1 for a in args.aux):
        sys.exit(f"--aux needs 3 distinct ids in 0..{L - 1}")
    if args.stage in ("all", "train", "export"):
        stream, _ = tp.encode_stream(tok, corpus["train"])
        sel, cover = draft_vocab(stream, target.config.vocab_size, args.draft_vocab)
        log(f"draft vocab {len(sel)} of {target.config.vocab_size}: covers {cover:.4%} of training tokens")
        head, hist = train(args, wd, corpus, tok, target, sel)
        if args.stage != "train":
            export(args, head, sel, target, next((h["stopped_at"] for h in hist if "stopped_at" in h), args.steps))
    if args.stage == "check":
        crosscheck(args, target, tok, corpus)
    if args.stage == "card":
        card(args, wd)
        return
    if args.stage in ("all", "eval"):
        evaluate(args, wd, corpus, tok, target)
        card(args, wd)


if __name__ == "__main__":
    main()

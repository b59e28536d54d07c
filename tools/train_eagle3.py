#!/usr/bin/env python3
"""train_eagle3.py — train an EAGLE-3 draft head for the bundled models/kjv-target.

The head is the published EAGLE-3 architecture (one Llama decoder layer whose attention reads
[embedding ; fused target hidden] of width 2H, an `fc` that fuses three captured target hidden
states of width tH each, its own final norm and an LM head over a reduced draft vocabulary with a
`d2t` map), written in the published flat layout (SpecForge / sglang: `fc.weight`, `midlayer.*`,
`norm.weight`, `lm_head.weight`, `d2t`, `t2d`, and `embed_tokens.weight` when the head is
narrower than the target, a flat Llama config.json with `draft_vocab_size`, `target_hidden_size`
and `eagle_config`). See docs/EAGLE3.md and ../shared/EAGLE3.md for the format.

The head may be narrower than the target (--hidden H < tH = 256): fc maps 3·tH -> H and the head
ships its own embedding [V, H] (EAGLE, SpecForge, sglang, vLLM and specdec all read
`target_hidden_size`; with tH != H the head must carry its embedding). A narrow head drafts for
a fraction of the cost of a step of the target's layer.

Stages (each cached in --workdir; every one is deterministic given --seed):
  corpus   the KJV verses exactly as tools/train_pair.py makes them (Debian's bible-kjv), the same
           training split and held-out books; tokenised with models/kjv-target/tokenizer.json
  gen      the text a greedy speculative run verifies: --gen-prompts prompts (`<s>` + the first
           6-24 tokens of random TRAINING verses) continued greedily by the target to --seq-len
           tokens; and --val-prompts held-out prompts continued the same way (validation only)
  cache    the target (transformers LlamaForCausalLM, fp32, frozen) runs once over every window:
           corpus windows (`<s>` + text from a verse start, tiling the training stream) and the
           greedy windows; stored in <workdir>/cache as fp16 memmaps: the three captured states
           hs[a], hs[b], hs[c] (the residual stream entering layers a, b, c) and the target's
           final normed hidden (its logits are that times lm_head), so a training step never runs
           the target
  vocab    the draft vocabulary: the --draft-vocab ids the target predicts most often (argmax over
           the cached training positions), ascending (d2t[i] = sel[i] - i, t2d = membership)
  train    EAGLE-3's "training-time test" over the cache: --unroll steps, step j feeds the head its
           own output hidden of step j-1 (teacher-forced tokens), attends to the step-0 rows
           causally and to its own earlier steps of the same row (exactly the draft KV cache a
           chain sees at inference); loss = sum_j 0.8^j * CE(target's distribution over the draft
           vocab, head); AdamW, linear warm-up then cosine over --steps (a step schedule, so a
           resumed run is the same run); checkpoint every --ckpt-every steps
  export   fp16 safetensors (HF `save_pretrained` tensor order, `format: pt` metadata) +
           config.json into --out (models/kjv-eagle3)
  eval     on held-out greedy windows: the chain proxy of tokens per round at gamma = 1..6 (the
           leading draft tokens that equal the target's greedy tokens, every position a root) for
           the head and for models/kjv-draft; top-1 agreement; a float64 cross-check of the
           exported head; <workdir>/eval_eagle3.json
  card     models/kjv-eagle3/README.md from eval_eagle3.json (+ --bench JSON of
           bench/eagle3/bench_eagle3.py: the C runtime's numbers)

The target has 6 layers, so the default capture rule (hs[2], hs[L//2], hs[L-3]) degenerates to
two states (hs[3] twice); the head uses explicit ids (--aux, default 2,4,5) written both at the
top level (vLLM / speculators numbering = hs index) and in eagle_config (sglang: ids are hs
indices unless the first id is 1), so every engine reads the same three states.

  nice -n 10 python3 tools/train_eagle3.py --workdir /tmp/kjv-eagle3
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
import train_pair as tp  # noqa: E402  (corpus, held-out books, optimizer: the pair's own data path)


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
    """One EAGLE-3 decoder layer. V > 0: the head has its own embedding [V, H] (needed when
    H != tH); V = 0: the caller passes the target's embedding module."""

    def __init__(s, H, tH, nH, nKV, hd, Fm, Vd, eps=1e-5, theta=10000.0, V=0):
        super().__init__()
        s.H, s.nH, s.nKV, s.hd, s.eps, s.theta = H, nH, nKV, hd, eps, theta
        L = lambda i, o: nn.Linear(i, o, bias=False)  # noqa: E731
        s.embed_tokens = nn.Embedding(V, H) if V else None
        s.fc = L(3 * tH, H)
        s.input_layernorm = nn.Parameter(torch.ones(H))
        s.hidden_norm = nn.Parameter(torch.ones(H))
        s.post_attention_layernorm = nn.Parameter(torch.ones(H))
        s.norm = nn.Parameter(torch.ones(H))
        s.q_proj, s.k_proj, s.v_proj = L(2 * H, nH * hd), L(2 * H, nKV * hd), L(2 * H, nKV * hd)
        s.o_proj = L(nH * hd, H)
        s.gate_proj, s.up_proj, s.down_proj = L(H, Fm), L(H, Fm), L(Fm, H)
        s.lm_head = L(H, Vd)

    def emb(s, temb, tok):
        return (s.embed_tokens if s.embed_tokens is not None else temb)(tok)

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

    def train_steps(s, temb, aux, tokens, n_steps):
        """Training-time test. temb: the target's embedding module; aux [B,T,3tH]; tokens
        [B,T+n_steps-1] (tokens[:, p + j] is the input token of row p at step j). Returns the
        logits of every step."""
        B, T, _ = aux.shape
        pos0 = torch.arange(T)
        g = s.fc(aux)
        scale = 1.0 / math.sqrt(s.hd)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        K0 = V0 = None
        diag_k, diag_v = [], []
        out = []
        for j in range(n_steps):
            q, k, v = s.qkv(s.emb(temb, tokens[:, j:j + T]), g, pos0 + j)
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
    def step(s, temb, tok, g, pos, cache):
        """Rows tok [T] with hidden g [T,H] at positions pos [T]; attends to cache + itself
        causally; appends to cache. Returns (h [T,H], logits [T,Vd])."""
        q, k, v = s.qkv(s.emb(temb, tok)[None], g[None], pos)
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


def head_shape(args, tcfg):
    """(H, nH, nKV, hd) of the head from --hidden / --heads / --kv-heads / --head-dim."""
    tH = tcfg.hidden_size
    H = args.hidden or tH
    hd = args.head_dim or getattr(tcfg, "head_dim", None) or tH // tcfg.num_attention_heads
    nH = args.heads or max(1, H // hd)
    nKV = args.kv_heads or max(1, min(nH, tcfg.num_key_value_heads * nH // tcfg.num_attention_heads))
    if nH % nKV:
        sys.exit(f"--heads {nH} must be a multiple of --kv-heads {nKV}")
    return H, nH, nKV, hd


def make_head(args, target, sel):
    tcfg = target.config
    H, nH, nKV, hd = head_shape(args, tcfg)
    tH = tcfg.hidden_size
    torch.manual_seed(args.seed)
    head = Eagle3Head(H, tH, nH, nKV, hd, args.intermediate, len(sel), tcfg.rms_norm_eps, args.rope_theta,
                      V=tcfg.vocab_size if H != tH else 0)
    with torch.no_grad():
        W = target.lm_head.weight[torch.from_numpy(sel)] * target.model.norm.weight  # [Vd, tH]
        if H == tH:
            # the target's output space: its LM head rows of the draft vocabulary, its final norm
            head.lm_head.weight.copy_(target.lm_head.weight[torch.from_numpy(sel)])
            head.norm.copy_(target.model.norm.weight)
        else:
            # the best rank-H approximation of the target's (norm-folded) LM head rows, and the
            # target's embedding projected on its top-H principal directions
            _, _, Vt = torch.linalg.svd(W, full_matrices=False)
            head.lm_head.weight.copy_(W @ Vt[:H].T)
            E = target.get_input_embeddings().weight
            _, _, Ve = torch.linalg.svd(E - E.mean(0), full_matrices=False)
            head.embed_tokens.weight.copy_(E @ Ve[:H].T)
    return head


# ----------------------------------------------------------------------------- data
def load_data(wd):
    corpus = tp.stage_corpus(wd)
    tok = Tokenizer.from_file(os.path.join(HERE, "..", "models", "kjv-target", "tokenizer.json"))
    return corpus, tok


@torch.no_grad()
def greedy_continue(target, prompts, total):
    """prompts [B, k] (same length) continued greedily by the target to `total` tokens."""
    x = torch.as_tensor(prompts)
    out = target(input_ids=x, use_cache=True)
    past, seq = out.past_key_values, [x]
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    for _ in range(total - x.size(1)):
        seq.append(nxt)
        if sum(t.size(1) for t in seq) >= total:
            break
        out = target(input_ids=nxt, past_key_values=past, use_cache=True)
        past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    return torch.cat(seq, 1)[:, :total].numpy()


def gen_windows(target, stream, starts, bos, n, S, rng, batch, what):
    """n windows of S tokens: `<s>` + the first k (6..24, one k per batch) tokens of a random verse
    of `stream`, continued greedily by the target."""
    ok = starts[starts + 24 <= len(stream)]
    out = np.zeros((n, S), dtype=np.int32)
    t0 = time.time()
    for b0 in range(0, n, batch):
        m = min(batch, n - b0)
        k = int(rng.integers(6, 25))
        idx = rng.choice(ok, size=m, replace=False)
        pr = np.array([[bos] + stream[s:s + k].tolist() for s in idx], dtype=np.int64)
        out[b0:b0 + m] = greedy_continue(target, pr, S)
        if (b0 // batch) % 8 == 0:
            log(f"gen {what}: {b0 + m}/{n} windows ({time.time() - t0:.0f} s)")
    return out


def stage_gen(args, wd, corpus, tok, target):
    path = os.path.join(wd, f"gen_{args.gen_prompts}_{args.seq_len}.npz")
    if os.path.exists(path):
        z = np.load(path)
        return z["train"], z["val"]
    rng = np.random.default_rng(args.seed + 1)
    bos = tok.token_to_id("<s>")
    s, st = tp.encode_stream(tok, corpus["train"])
    tr = gen_windows(target, s, st, bos, args.gen_prompts, args.seq_len, rng, args.gen_batch, "train")
    s, st = tp.encode_stream(tok, corpus["heldout"])
    va = gen_windows(target, s, st, bos, args.val_prompts, min(args.seq_len, 128), rng, args.gen_batch, "held-out")
    np.savez(path, train=tr, val=va)
    return tr, va


def corpus_windows(stream, starts, bos, S):
    """`<s>` + S-1 tokens from a verse start, tiling the stream (the next window starts at the
    last verse start inside the previous one, so no text is skipped)."""
    out, s = [], 0
    while s + S - 1 <= len(stream):
        out.append(np.concatenate([[bos], stream[s:s + S - 1]]))
        nxt = starts[np.searchsorted(starts, s + S - 1, side="right") - 1]
        s = nxt if nxt > s else s + S - 1
    return np.array(out, dtype=np.int32)


class Cache:
    """The target's features of a set of windows, as fp16 memmaps in one folder: tokens [N, S],
    aux [N, S, 3 tH] (captured states, low|mid|high), zf [N, S, tH] (the final normed hidden:
    logits = zf lm_head^T), am [N, S] (the target's argmax over the full vocabulary)."""

    def __init__(s, d, tokens=None, tH=None):
        s.d = d
        meta = os.path.join(d, "meta.json")
        if tokens is not None and not os.path.exists(meta):
            os.makedirs(d, exist_ok=True)
            N, S = tokens.shape
            np.save(os.path.join(d, "tokens.npy"), tokens)
            for name, shape, dt in (("aux", (N, S, 3 * tH), np.float16), ("zf", (N, S, tH), np.float16),
                                    ("am", (N, S), np.int16)):
                np.lib.format.open_memmap(os.path.join(d, f"{name}.npy"), "w+", dt, shape).flush()
            json.dump({"done": 0, "N": N, "S": S}, open(meta, "w"))
        s.meta = json.load(open(meta))
        s.tokens = np.load(os.path.join(d, "tokens.npy"))
        s.aux, s.zf, s.am = (np.load(os.path.join(d, f"{n}.npy"), mmap_mode="r+") for n in ("aux", "zf", "am"))

    @torch.no_grad()
    def fill(s, target, aux_ids, batch):
        N = s.meta["N"]
        W = target.lm_head.weight
        t0, i0 = time.time(), s.meta["done"]
        for i in range(i0, N, batch):
            x = torch.from_numpy(s.tokens[i:i + batch].astype(np.int64))
            out = target(input_ids=x, output_hidden_states=True)
            hs = out.hidden_states
            zf = hs[-1]  # transformers >= 5: the last entry is after the final norm
            if i == i0 and not torch.allclose(zf @ W.T, out.logits, atol=1e-4):
                sys.exit("cache: the last hidden state is not the final normed one (transformers version?)")
            s.aux[i:i + batch] = torch.cat([hs[a] for a in aux_ids], -1).half().numpy()
            s.zf[i:i + batch] = zf.half().numpy()
            s.am[i:i + batch] = out.logits.argmax(-1).numpy().astype(np.int16)
            if (i // batch) % 50 == 49 or i + batch >= N:
                for a in (s.aux, s.zf, s.am):
                    a.flush()
                s.meta["done"] = min(N, i + batch)
                json.dump(s.meta, open(os.path.join(s.d, "meta.json"), "w"))
                log(f"cache {os.path.basename(s.d)}: {s.meta['done']}/{N} windows ({time.time() - t0:.0f} s)")
        return s


def stage_cache(args, wd, corpus, tok, target, gen_tr, gen_va):
    bos = tok.token_to_id("<s>")
    S = args.seq_len
    s, st = tp.encode_stream(tok, corpus["train"])
    tr_tokens = np.concatenate([corpus_windows(s, st, bos, S), gen_tr])
    tH = target.config.hidden_size
    tag = f"{'-'.join(map(str, args.aux))}_{S}_{args.gen_prompts}"
    tr = Cache(os.path.join(wd, f"cache_train_{tag}"), tr_tokens, tH).fill(target, args.aux, args.cache_batch)
    va = Cache(os.path.join(wd, f"cache_val_{tag}"), gen_va, tH).fill(target, args.aux, args.cache_batch)
    log(f"cache: {tr.meta['N']} training windows ({len(tr_tokens) - len(gen_tr)} corpus, {len(gen_tr)} greedy) "
        f"of {S} tokens, {va.meta['N']} held-out greedy windows")
    return tr, va


@torch.no_grad()
def draft_vocab(cache, target, Vd):
    """The draft vocabulary, ascending: every id the target predicts (argmax) at the cached
    training positions, most frequent first, then the ids with the most target probability mass
    (summed over every 10th window) until Vd. Returns (ids, share of the target's greedy tokens
    covered, mean target probability mass covered)."""
    V = target.config.vocab_size
    cnt = np.zeros(V, dtype=np.int64)
    for i in range(0, cache.meta["N"], 256):
        cnt += np.bincount(cache.am[i:i + 256].reshape(-1).astype(np.int64), minlength=V)
    W = target.lm_head.weight
    mass = torch.zeros(V, dtype=torch.float64)
    idx = np.arange(0, cache.meta["N"], 10)
    for i in range(0, len(idx), 16):
        zf = torch.from_numpy(np.asarray(cache.zf[idx[i:i + 16]], dtype=np.float32))
        mass += torch.softmax(zf @ W.T, -1).reshape(-1, V).sum(0).double()
    mass = mass.numpy()
    order = np.lexsort((-mass, -cnt))  # by argmax count, ties (incl. never predicted) by mass
    sel = np.sort(order[:Vd])
    return sel.astype(np.int64), float(cnt[sel].sum() / cnt.sum()), float(mass[sel].sum() / mass.sum())


def lr_sched(step, total, peak, warmup):
    """Linear warm-up over `warmup` steps, then cosine from peak to 10% at `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def capture(target, x, aux_ids):
    out = target(input_ids=x, output_hidden_states=True)
    hs = out.hidden_states
    return torch.cat([hs[i] for i in aux_ids], -1), out.logits


# ----------------------------------------------------------------------------- train
def batch_from(cache, idx, Wsel):
    """Windows idx of the cache -> tokens [B, S], aux [B, S, 3tH], teacher logits [B, S, Vd]."""
    idx = np.sort(idx)
    x = torch.from_numpy(cache.tokens[idx].astype(np.int64))
    aux = torch.from_numpy(np.asarray(cache.aux[idx], dtype=np.float32))
    zf = torch.from_numpy(np.asarray(cache.zf[idx], dtype=np.float32))
    return x, aux, zf @ Wsel.T


def tt_loss(head, temb, x, aux, tl, K, decay=0.8, want_stats=False):
    """Training-time-test loss of a batch. Row p: token x[p+1], feature aux[p]; step j's label is
    the target's distribution at position p+1+j. Returns (loss, [(ce, agreement) per step] when
    want_stats, else [])."""
    T = x.size(1) - 1
    tokens = torch.cat([x[:, 1:], torch.zeros(x.size(0), K - 1, dtype=x.dtype)], 1)
    outs = head.train_steps(temb, aux[:, :T], tokens, K)
    pt = torch.softmax(tl, -1)
    loss, stats = 0.0, []
    for j, lg in enumerate(outs):
        n = T - j  # valid rows: p + 1 + j <= S - 1
        lq = F.log_softmax(lg[:, :n], -1)
        lj = -(pt[:, 1 + j:1 + j + n] * lq).sum(-1).mean()
        loss = loss + (decay ** j) * lj
        if want_stats:
            stats.append((lj.item(), (lq.argmax(-1) == tl[:, 1 + j:1 + j + n].argmax(-1)).float().mean().item()))
    return loss, stats


def train(args, wd, target, sel, cache):
    head = make_head(args, target, sel)
    temb = target.get_input_embeddings()
    Wsel = target.lm_head.weight[torch.from_numpy(sel)].detach()
    opt = tp.make_optimizer(head, args.lr)
    ckpt = os.path.join(wd, "eagle3.pt")
    step0, hist, el0 = 0, [], 0.0
    if os.path.exists(ckpt):
        st = torch.load(ckpt, weights_only=False)
        head.load_state_dict(st["head"])
        if st.get("done"):
            return head, st["log"]
        opt.load_state_dict(st["opt"])
        step0, hist, el0 = st["step"], st["log"], st.get("elapsed", 0.0)
        log(f"resumed at step {step0} ({el0 / 60:.1f} min trained)")
    N = cache.meta["N"]
    n_par = sum(p.numel() for p in head.parameters())
    log(f"head: {n_par:,} parameters; {N} windows of {cache.meta['S']}; {args.steps} steps of {args.batch}")
    perm, pi = None, 0
    K = args.unroll
    t0 = time.time()
    for step in range(step0, args.steps):
        # the epoch order is a function of (seed, step) alone, so a resumed run draws the same batches
        ep, off = divmod(step * args.batch, N)
        if perm is None or pi != ep:
            perm, pi = np.random.default_rng([args.seed, ep]).permutation(N), ep
        idx = np.take(perm, np.arange(off, off + args.batch), mode="wrap")
        for gr in opt.param_groups:
            gr["lr"] = lr_sched(step, args.steps, args.lr, args.warmup)
        x, aux, tl = batch_from(cache, idx, Wsel)
        show = step % 20 == 0 or step == args.steps - 1
        loss, stats = tt_loss(head, temb, x, aux, tl, K, want_stats=show)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        el = el0 + time.time() - t0
        if show:
            hist.append({"step": step, "loss": loss.item(), "steps": stats})
            log(f"step {step}/{args.steps} loss {loss.item():.3f} | " +
                " ".join(f"s{j} ce {c:.2f} agree {a:.3f}" for j, (c, a) in enumerate(stats)) +
                f" | {el / 60:.1f} min")
        if (step + 1) % args.ckpt_every == 0 or (args.max_minutes and el > 60 * args.max_minutes):
            torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "step": step + 1, "log": hist, "elapsed": el}, ckpt)
            if args.max_minutes and el > 60 * args.max_minutes:
                sys.exit(f"stopped at step {step + 1} after {el / 60:.1f} min (--max-minutes); run again to resume")
    torch.save({"head": head.state_dict(), "log": hist, "done": True, "elapsed": el0 + time.time() - t0}, ckpt)
    return head, hist


# ----------------------------------------------------------------------------- export
def export(args, head, sel, target):
    d = args.out
    os.makedirs(d, exist_ok=True)
    tcfg = target.config
    sd = head.state_dict()
    t = {"fc.weight": sd["fc.weight"], "norm.weight": sd["norm"], "lm_head.weight": sd["lm_head.weight"]}
    if head.embed_tokens is not None:
        t["embed_tokens.weight"] = sd["embed_tokens.weight"]
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
    for f in os.listdir(d):  # a directory holds one head: no stale weights next to the new ones
        if f.endswith(".safetensors"):
            os.remove(os.path.join(d, f))
    save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    H, nH, nKV, hd = head_shape(args, tcfg)
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
        "bos_token_id": tcfg.bos_token_id, "eos_token_id": tcfg.eos_token_id, "pad_token_id": None,
        "hidden_size": H, "target_hidden_size": tcfg.hidden_size,
        "intermediate_size": args.intermediate, "num_hidden_layers": 1,
        "num_attention_heads": nH, "num_key_value_heads": nKV,
        "head_dim": hd, "rms_norm_eps": tcfg.rms_norm_eps, "rope_theta": args.rope_theta,
        "max_position_embeddings": tcfg.max_position_embeddings, "initializer_range": 0.02,
        "vocab_size": V, "draft_vocab_size": Vd, "tie_word_embeddings": False,
        "torch_dtype": "float16", "use_cache": True, "pretraining_tp": 1,
        "eagle_aux_hidden_state_layer_ids": list(args.aux),
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(args.aux), "use_aux_hidden_state": True},
    }
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2, sort_keys=True)
    log(f"exported {d}: {sorted(os.listdir(d))}")


def load_head(d, target):
    from safetensors.torch import load_file
    cfg = json.load(open(os.path.join(d, "config.json")))
    t = {k: v.float() if v.is_floating_point() else v for k, v in load_file(os.path.join(d, "model.safetensors")).items()}
    own = "embed_tokens.weight" in t
    head = Eagle3Head(cfg["hidden_size"], cfg.get("target_hidden_size", cfg["hidden_size"]),
                      cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"],
                      cfg["intermediate_size"], cfg["draft_vocab_size"], cfg["rms_norm_eps"],
                      cfg.get("rope_theta", 10000.0), V=cfg["vocab_size"] if own else 0)
    sd = {"fc.weight": t["fc.weight"], "norm": t["norm.weight"], "lm_head.weight": t["lm_head.weight"]}
    if own:
        sd["embed_tokens.weight"] = t["embed_tokens.weight"]
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
def lead_matches(hit):
    """hit [R, G] bool (draft j of root r equals the target's greedy token) -> accepted drafts per
    root for gamma = 1..G: the number of leading hits, capped at gamma. Returns [G] means."""
    G = hit.shape[1]
    run = np.cumprod(hit, axis=1).sum(1)
    return [float(np.minimum(run, g).mean()) for g in range(1, G + 1)]


@torch.no_grad()
def chain_proxy(head, sel, target, draft, cache, G=6):
    """On held-out greedy windows (the text IS the target's greedy output), every position is a
    root: a greedy chain's draft j is accepted iff drafts 0..j-1 were, and then its input tokens
    are the text's, so teacher-forced predictions give the exact accepted length of a round
    rooted there. Head: the training-time test unrolled G steps; kjv-draft: its argmax at the
    next G positions. Returns tokens per round (1 + accepted) at gamma = 1..G for both, and
    the first-token agreement."""
    temb = target.get_input_embeddings()
    Wsel = target.lm_head.weight[torch.from_numpy(sel)]
    sel_t = torch.from_numpy(sel)
    hh, dd = [], []
    for i in range(0, cache.meta["N"], 8):
        idx = np.arange(i, min(i + 8, cache.meta["N"]))
        x, aux, _ = batch_from(cache, idx, Wsel)
        am = torch.from_numpy(cache.am[idx].astype(np.int64))  # am[p]: target's token at p+1
        T = x.size(1) - 1
        tokens = torch.cat([x[:, 1:], torch.zeros(x.size(0), G - 1, dtype=x.dtype)], 1)
        outs = head.train_steps(temb, aux[:, :T], tokens, G)
        dl = draft(input_ids=x).logits.argmax(-1)   # dl[p]: kjv-draft's token at p+1
        R = T - G  # roots p = 0..R-1: row p drafts the tokens at p+2 .. p+1+G
        hh.append(torch.stack([sel_t[outs[j][:, :R].argmax(-1)] == am[:, 1 + j:1 + j + R] for j in range(G)], -1)
                  .reshape(-1, G).numpy())
        dd.append(torch.stack([dl[:, 1 + j:1 + j + R] == am[:, 1 + j:1 + j + R] for j in range(G)], -1)
                  .reshape(-1, G).numpy())
    hh, dd = np.concatenate(hh), np.concatenate(dd)
    return {"roots": int(hh.shape[0]), "head_tpr": [1 + a for a in lead_matches(hh)],
            "draft_tpr": [1 + a for a in lead_matches(dd)],
            "head_agree": float(hh[:, 0].mean()), "draft_agree": float(dd[:, 0].mean())}


@torch.no_grad()
def crosscheck(args, target, tok, corpus):
    """The exported head in this script's torch model vs the float64 reference of the published
    forward (tests/eagle3/eagle3_ref.py, which specdec's C forward is tested against): a prefix
    of held-out rows on the target's real features, then 3 chain steps."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "eagle3"))
    import eagle3_ref
    head, sel, aux_ids = load_head(args.out, target)
    temb = target.get_input_embeddings()
    hstream, _ = tp.encode_stream(tok, corpus["heldout"])
    x = torch.tensor([[tok.token_to_id("<s>")] + hstream[:48].tolist()])
    aux, _ = capture(target, x, aux_ids)
    T = x.size(1) - 1
    ref = eagle3_ref.Eagle3Ref(args.out, temb.weight.double().numpy())
    cache = {}
    h, lg = head.step(temb, x[0, 1:], head.fc(aux[0, :T]), torch.arange(T), cache)
    rl, rg = ref.step(x[0, 1:].numpy(), ref.fuse(aux[0, :T].double().numpy()), np.arange(T))
    worst = 0.0
    for j in range(4):
        if j:
            t = int(sel[lg[-1].argmax()])
            h, lg = head.step(temb, torch.tensor([t]), h[-1:], torch.tensor([T + j - 1]), cache)
            rl, rg = ref.step([t], rg[-1:], [T + j - 1])
        worst = max(worst, float(np.linalg.norm(lg.double().numpy() - rl) / np.linalg.norm(rl)))
    ok = worst < 1e-5 and np.array_equal(ref.d2t, sel)
    log(f"cross-check vs the float64 reference forward: max rel diff of logits {worst:.2e} "
        f"({'ok' if ok else 'MISMATCH'})")
    if not ok:
        sys.exit("the exported head does not match the reference forward")
    return worst


def evaluate(args, wd, corpus, tok, target, val, cover):
    head, sel, _ = load_head(args.out, target)  # what ships (fp16 weights, fp32 compute)
    head.eval()
    draft = LlamaForCausalLM.from_pretrained(os.path.join(HERE, "..", "models", "kjv-draft"),
                                             dtype=torch.float32).eval()
    res = chain_proxy(head, sel, target, draft, val)
    log(f"held-out greedy windows ({res['roots']} roots): first-token agreement head {res['head_agree']:.4f}, "
        f"kjv-draft {res['draft_agree']:.4f}; tokens/round at gamma 1..6: head "
        + " ".join(f"{v:.3f}" for v in res["head_tpr"]) + " | kjv-draft " + " ".join(f"{v:.3f}" for v in res["draft_tpr"]))
    res["draft_vocab_cover"], res["draft_vocab_mass"] = cover
    res["crosscheck_rel"] = crosscheck(args, target, tok, corpus)
    res["args"] = vars(args)
    json.dump(res, open(os.path.join(wd, "eval_eagle3.json"), "w"), indent=1)
    return res


# ----------------------------------------------------------------------------- model card
def command_line(a):
    """The exact training command of this run (flags that differ from the defaults)."""
    ap = build_parser()
    d = vars(ap.parse_args([]))
    flags = []
    for k, v in a.items():
        if k in ("stage", "bench", "workdir", "out", "target") or d.get(k) == v or (k == "aux" and v == [2, 4, 5]):
            continue
        flags.append(f"--{k.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, list) else v}")
    return " ".join(["nice -n 10 python3 tools/train_eagle3.py --workdir /tmp/kjv-eagle3"] + flags)


def card(args, wd):
    """models/kjv-eagle3/README.md from eval_eagle3.json, the training log and --bench."""
    import transformers
    ev = json.load(open(os.path.join(wd, "eval_eagle3.json")))
    st = torch.load(os.path.join(wd, "eagle3.pt"), weights_only=False)
    last = [h for h in st["log"] if "steps" in h][-1]
    cfg = json.load(open(os.path.join(args.out, "config.json")))
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    a = ev["args"]
    from safetensors import safe_open
    with safe_open(os.path.join(args.out, "model.safetensors"), "pt") as f:
        n_par = sum(f.get_tensor(k).numel() for k in f.keys() if k not in ("d2t", "t2d"))
        own = "embed_tokens.weight" in f.keys()
    H, tH, Vd, Fm = cfg["hidden_size"], cfg["target_hidden_size"], cfg["draft_vocab_size"], cfg["intermediate_size"]
    ids = cfg["eagle_aux_hidden_state_layer_ids"]
    macs = 2 * H * (cfg["num_attention_heads"] + 2 * cfg["num_key_value_heads"]) * cfg["head_dim"] \
        + cfg["num_attention_heads"] * cfg["head_dim"] * H + 3 * H * Fm + H * Vd
    tok_seen = a["steps"] * a["batch"] * (a["seq_len"] - 1)
    L = [
        "# kjv-eagle3: an EAGLE-3 draft head for kjv-target", "",
        "An EAGLE-3 head (one Llama decoder layer over three hidden states captured from the target) for",
        "`../kjv-target`, trained by `tools/train_eagle3.py` on the training split of the bundled pair",
        "(`tools/train_pair.py`: the held-out books Ruth, Jonah, Titus, Philemon and Jude are never seen) and on",
        "the target's own greedy continuations of training-verse prompts. Written in the published flat",
        "layout (EAGLE / SpecForge / sglang): `fc.weight`, `midlayer.*`, `norm.weight`, `lm_head.weight`,",
        "`embed_tokens.weight`, `d2t`, `t2d`, a flat Llama `config.json` with `target_hidden_size`,",
        "`draft_vocab_size` and `eagle_config`. See `docs/EAGLE3.md` for how specdec loads and runs it.", "",
        "| | |", "| --- | --- |",
        f"| target | kjv-target: {cfg['vocab_size']} ids, hidden {tH}, 6 layers |",
        f"| captured states | hs[{ids[0]}], hs[{ids[1]}], hs[{ids[2]}] (residual stream entering target layers "
        f"{ids[0]}, {ids[1]}, {ids[2]}): explicit ids, because the default rule (2, L/2, L-3) repeats hs[3] for L = 6; "
        "written at the top level and in `eagle_config` (first id not 1, so sglang and vLLM read the same states) |",
        f"| decoder layer | hidden {H} (the target's is {tH}: `target_hidden_size` {tH}, `fc` {3 * tH} -> {H}), "
        f"{cfg['num_attention_heads']} query / {cfg['num_key_value_heads']} KV heads (head dim {cfg['head_dim']}), "
        f"MLP {Fm}, RoPE theta {cfg['rope_theta']:g} |",
        f"| draft vocabulary | {Vd} of {cfg['vocab_size']} ids: every id the target predicts greedily on the training "
        f"windows, then the ids with the most target probability mass; they cover {ev['draft_vocab_cover']:.2%} of its "
        f"greedy tokens and {ev['draft_vocab_mass']:.1%} of its probability mass there (q is 0 outside them, so rejection "
        "sampling at temperature 1 accepts at most that share); ascending, `d2t` / `t2d` |",
        "| embedding | " + (f"its own `embed_tokens` [{cfg['vocab_size']}, {H}] (required when the head is narrower "
                            "than the target) |" if own else "none stored: the target's `embed_tokens` |"),
        f"| parameters | {n_par:,} (F16, {size / 1e6:.2f} MB) |",
        f"| multiply-adds per draft step | {macs / 1e6:.2f}M (attention projections from 2H, MLP, LM head {H} x {Vd}); "
        f"fc {3 * tH * H / 1e6:.2f}M once per verified row |", "",
        "## Training", "",
        f"- Data, cached once (the target is frozen, so a training step never runs it): {a['gen_prompts']} greedy "
        f"windows (`<s>` + the first 6-24 tokens of a random training verse, continued greedily by the target to "
        f"{a['seq_len']} tokens: the text a greedy speculative run verifies) and the training stream tiled into "
        f"`<s>` + {a['seq_len'] - 1}-token windows from verse starts. The target (transformers `LlamaForCausalLM`, "
        "fp32) runs each window once; the three captured states and its final normed hidden (teacher logits = "
        "that x lm_head) are stored as fp16.",
        f"- {a['steps']} steps of {a['batch']} windows (about {tok_seen / 1e6:.1f}M positions, epochs in a fixed "
        f"order from seed {a['seed']}).",
        f"- EAGLE-3 training-time test with {a['unroll']} unrolled steps: step j feeds the head its own hidden output of",
        "  step j-1 (teacher-forced tokens) and attends to the step-0 rows causally plus its own earlier steps, as a",
        "  chain sees its draft KV cache at inference; loss = sum_j 0.8^j * cross-entropy against the target's",
        "  distribution over the draft vocabulary.",
        f"- AdamW (betas 0.9/0.95, weight decay 0.1 on matrices), clip 1.0, peak LR {a['lr']:g}, {a['warmup']} warm-up "
        f"steps, then cosine to 10% at step {a['steps']}. Initialisation: "
        + ("the LM head is the best rank-H approximation of the target's (final-norm-folded) LM head rows of the "
           "draft vocabulary, the embedding the target's projected on its top-H principal directions."
           if own else "the LM head and final norm are the target's rows of the draft vocabulary."),
        "- last logged training batch: " + ", ".join(f"step {j + 1} agreement {ag:.3f}" for j, (_, ag) in enumerate(last["steps"])),
        f"- {st.get('elapsed', 0) / 60:.0f} minutes of training on {a['threads']} CPU thread(s) of a shared 2-core "
        f"machine; torch {torch.__version__.split('+')[0]}, transformers {transformers.__version__}.", "",
        "## Measured", "",
        f"Held-out greedy windows ({ev['roots']:,} roots: held-out-verse prompts continued greedily by the target; "
        "teacher-forced, so each root gives the exact accepted length of a greedy chain rooted there; fp32 compute on",
        "the F16 weights):", "",
        "| gamma | " + " | ".join(str(g + 1) for g in range(len(ev["head_tpr"]))) + " |",
        "| --- |" + " --- |" * len(ev["head_tpr"]),
        "| kjv-eagle3 tokens/round | " + " | ".join(f"{v:.3f}" for v in ev["head_tpr"]) + " |",
        "| kjv-draft tokens/round | " + " | ".join(f"{v:.3f}" for v in ev["draft_tpr"]) + " |", "",
        f"First-token agreement with the target's greedy token: kjv-eagle3 {ev['head_agree']:.4f}, "
        f"kjv-draft {ev['draft_agree']:.4f}.", ""]
    if args.bench:
        b = json.load(open(args.bench))
        r = b["results"]

        def cell(k):
            v = r[k]
            return f"{v['tokens_per_round']:.3f} | {v['speedup_vs_plain']:.3f} ({v['speedup_min']:.3f}-{v['speedup_max']:.3f})"
        L += [f"specdec's C runtime on the CPU (`bench/eagle3/bench_eagle3.py`, {b['date']}, {b['prompts']} held-out "
              f"prompts (the first 12 words of held-out verses) x {b['n_new']} tokens, greedy, every output equal to "
              f"plain decoding: {str(b['outputs_equal_plain']).lower()}; speedup over plain decoding: median of "
              f"{b['reps']} interleaved repetitions (min-max); {b['machine']}, load average "
              f"{b['load_average_start_end'][0]}-{b['load_average_start_end'][1]}):", "",
              "| chain gamma | kjv-draft tokens/round | kjv-draft speedup | kjv-eagle3 tokens/round | kjv-eagle3 speedup |",
              "| --- | --- | --- | --- | --- |"]
        L += [f"| {g} | {cell(f'kjv-draft chain {g}')} | {cell(f'kjv-eagle3 chain {g}')} |" for g in b["gammas"]]
        L += ["", "| tree | kjv-draft tokens/round | kjv-draft speedup | kjv-eagle3 (EAGLE-2) tokens/round | "
              "kjv-eagle3 speedup |", "| --- | --- | --- | --- | --- |"]
        L += [f"| {k[len('kjv-draft '):]} | {cell(k)} | {cell('kjv-eagle3 ' + k[len('kjv-draft '):])} |"
              for k in r if k.startswith("kjv-draft tree")]
        L += ["", "On the CPU a verify pass of n rows costs a large share of n one-row passes, so trees lose to chains "
              "here. See "
              "`bench/results/` for the per-repetition numbers and the head-step cost.", ""]
    L += [f"The torch model used here equals the float64 reference of the published forward",
          f"(`tests/eagle3/eagle3_ref.py`, which specdec's C forward is tested against) to {ev['crosscheck_rel']:.1e}",
          "(relative, logits of a held-out prefix and 3 chain steps).", "",
          "## Reproduce", "", "```",
          "pip install -r tools/requirements-train.txt; apt-get install bible-kjv", command_line(a),
          "```", "", "Deterministic given the seed on one CPU thread (same torch build); a run stopped by",
          "`--max-minutes` or cut off resumes from `eagle3.pt` with the same batches and schedule.", "",
          "Licence: the training text is in the public domain; the weights ship with specdec.", ""]
    open(os.path.join(args.out, "README.md"), "w").write("\n".join(L))
    log("wrote the model card")


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/kjv-eagle3")
    ap.add_argument("--target", default=os.path.join(HERE, "..", "models", "kjv-target"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "models", "kjv-eagle3"))
    ap.add_argument("--stage", default="all", choices=["all", "data", "train", "export", "eval", "card"])
    ap.add_argument("--bench", default="", help="bench/eagle3/bench_eagle3.py JSON for the model card")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--aux", default="2,4,5", help="captured hs indices (input of those layers)")
    ap.add_argument("--hidden", type=int, default=128, help="head width H (0: the target's; < target: own embedding)")
    ap.add_argument("--heads", type=int, default=0, help="query heads (0: H / head dim)")
    ap.add_argument("--kv-heads", type=int, default=2, help="KV heads (0: the target's query/KV ratio)")
    ap.add_argument("--head-dim", type=int, default=0, help="0: the target's")
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--draft-vocab", type=int, default=1536)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--steps", type=int, default=2400)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--unroll", type=int, default=4, help="training-time-test steps")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="stop (checkpointed, resumable) after this many minutes of training; the schedule is --steps")
    ap.add_argument("--gen-prompts", type=int, default=3072, help="greedy training windows")
    ap.add_argument("--val-prompts", type=int, default=64, help="greedy held-out windows (validation)")
    ap.add_argument("--gen-batch", type=int, default=64)
    ap.add_argument("--cache-batch", type=int, default=8)
    return ap


def main():
    args = build_parser().parse_args()
    args.aux = [int(v) for v in args.aux.split(",")]
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.workdir, exist_ok=True)
    wd = args.workdir
    corpus, tok = load_data(wd)
    target = LlamaForCausalLM.from_pretrained(args.target, dtype=torch.float32).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    L = target.config.num_hidden_layers
    if len(set(args.aux)) != 3 or not all(0 <= a <= L - 1 for a in args.aux):
        sys.exit(f"--aux needs 3 distinct ids in 0..{L - 1}")
    if args.stage == "card":
        card(args, wd)
        return
    gen_tr, gen_va = stage_gen(args, wd, corpus, tok, target)
    tr, va = stage_cache(args, wd, corpus, tok, target, gen_tr, gen_va)
    sel, cover, mass = draft_vocab(tr, target, args.draft_vocab)
    log(f"draft vocab {len(sel)} of {target.config.vocab_size}: covers {cover:.4%} of the target's greedy tokens "
        f"and {mass:.2%} of its probability mass on the training windows")
    if args.stage == "data":
        return
    if args.stage in ("all", "train", "export"):
        head, _ = train(args, wd, target, sel, tr)
        if args.stage != "train":
            export(args, head, sel, target)
    if args.stage in ("all", "eval"):
        evaluate(args, wd, corpus, tok, target, va, (cover, mass))
        card(args, wd)


if __name__ == "__main__":
    main()

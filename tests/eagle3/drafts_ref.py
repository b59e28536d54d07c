"""drafts_ref.py — the float64 reference of the eagle3 drafter's greedy generation
(core/sd_drafter_eagle3.c, docs/EAGLE3.md §3, §6-7), independent of the C code: the target's
hidden states from tests/reference/llama_ref.py, the head from eagle3_ref.py.

simulate() plays greedy speculative decoding with chains of gamma: the head's cache holds one
row per verified position p = (t_{p+1}, fc(concat(hs[a][p], hs[b][p], hs[c][p])), p); a chain
drafts argmax after argmax (each step on the previous step's g_next, position N + j); the target
accepts while the draft equals its argmax and adds its own token; the head then gets the rows of
the newly verified positions. Rounds are recorded until a draft or target argmax is closer than
MARGIN to the runner-up (the C code's float32 could then pick the other token)."""
import numpy as np

import llama_ref

MARGIN = 1e-3


def capture_ids(head_cfg, L):
    """The hs indices a head reads: the top-level key as hs indices, eagle_config ids +1 when the
    first is 1 (sglang's rule), else the default hs[2], hs[L//2], hs[L-3]."""
    top = head_cfg.get("eagle_aux_hidden_state_layer_ids")
    if top:
        return list(top)
    ec = (head_cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    if ec:
        return [i + 1 for i in ec] if ec[0] == 1 else list(ec)
    return [2, L // 2, L - 3]


def top2_gap(row):
    s = np.sort(row)
    return s[-1] - s[-2]


def simulate(tcfg, tW, ref, prompt, gamma, rounds):
    """[(drafted tokens)] per round, up to `rounds` rounds (fewer when a margin is too small)."""
    ids = capture_ids(ref.cfg, tcfg["num_hidden_layers"])
    seq = list(prompt)
    ref.truncate(0)
    root = None
    out = []

    def extend(lo, hi, hs):  # head rows lo .. hi-1 from the target states of a forward over seq
        nonlocal root
        aux = np.concatenate([hs[i][lo:hi] for i in ids], axis=1)
        g = ref.fuse(aux)
        lg, gn = ref.step(np.array(seq[lo + 1:hi + 1]), g, np.arange(lo, hi))
        root = (lg[-1], gn[-1])

    hs = []
    llama_ref.forward(tcfg, tW, seq, hs)
    extend(0, len(seq) - 1, hs)
    for _ in range(rounds):
        N = len(seq) - 1
        lg, g = root
        draft = []
        for j in range(gamma):
            if top2_gap(lg) < MARGIN:
                return out
            draft.append(int(ref.d2t[int(np.argmax(lg))]))
            if j + 1 < gamma:
                lgs, gs = ref.step(np.array([draft[-1]]), g[None, :], np.array([N + j]))
                lg, g = lgs[0], gs[0]
        ref.truncate(N)
        hs = []
        logits = llama_ref.forward(tcfg, tW, seq + draft, hs)
        m = 0
        while m < gamma and draft[m] == int(np.argmax(logits[N + m])):
            m += 1
        if any(top2_gap(logits[N + i]) < MARGIN for i in range(m + 1)):
            return out
        out.append(draft)
        seq += draft[:m] + [int(np.argmax(logits[N + m]))]
        extend(N, N + m + 1, hs)
    return out

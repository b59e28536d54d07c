#!/usr/bin/env python3
"""Differential test of core/sd_regex.h against Python's `re` (the reference the header names:
re.fullmatch(pattern, text, re.ASCII) on the UTF-8 text), through tests/grammar/regex_probe.

Three parts, fixed seed, zero mismatches required:
1. Random patterns from a grammar of the supported syntax (literals in several escape forms,
   multi-byte characters, '.', classes with ranges / negation / \\d\\w\\s, groups of every
   accepted kind, alternation, every quantifier form, lazy forms, ^ and $ at the ends), >= 300
   of them, each with >= 20 strings: samples built from the pattern (kept when `re` matches
   them), random mutations of those, random strings, and invalid UTF-8 byte strings.
   For every string:
   a) the probe's accepting() equals re.fullmatch (False when the bytes are not UTF-8);
   b) viability, one side exact: the probe gives, from the last live state, a shortest
      extension to acceptance found over all 256 bytes; `re` must fullmatch prefix + extension
      (so every prefix the automaton calls live really is viable);
   c) viability, other side bounded: where the automaton says DEAD at byte i, no extension of
      bytes[:i+1] may match: none of the pattern's known matching strings starts with it, and
      no extension of at most K_DEAD characters over the alphabet (the pattern's characters
      plus UNIVERSE) fully matches under `re` (a prefix ending inside a UTF-8 sequence is first
      completed with each character of that alphabet, plus the first and last code point, that
      extends it). This is the bound: a dead verdict wrong only for extensions longer than
      K_DEAD or outside the alphabet would go unseen here.
2. Syntax noise: random short strings over the metacharacters. Where `re` refuses one, the
   probe must refuse it; where the probe accepts one, `re` must too and both must agree on
   random strings (a) and (b). The probe may refuse with UNSUPPORTED (5) what `re` accepts
   (the documented constructs: anchors inside, lookaround, backreferences, inline flags,
   possessive quantifiers, ...), or with INVALID_ARGUMENT (1) a pattern that matches nothing;
   counts of each are printed.
3. A hand list of refused constructs and their statuses.
usage: test_regex_diff.py --probe PATH [--patterns N] [--strings N] [--seed S]"""
import argparse
import codecs
import random
import re
import subprocess
import sys
import warnings

warnings.simplefilter("ignore")  # FutureWarning on '[[' and similar: the semantics do not change

INVALID, UNSUPPORTED = 1, 5
# Characters that strings are made of besides the pattern's own: ASCII letters, digits and
# space classes, a non-ASCII digit (U+0663, which \d must NOT match under re.ASCII), 2-, 3-
# and 4-byte characters, a no-break space, NUL.
UNIVERSE = ["a", "b", "z", "Z", "0", "7", "_", " ", "\t", "\n", "-", ".", "\u0663", "\u00e9", "\u00df",
            "\u20ac", "\u4e2d", "\U0001f600", "\u00a0", "\x00"]
LITERALS = ["a", "b", "c", "x", "0", "1", "-", ".", " ", "_", "\u00e9", "\u20ac", "\U0001f600", "\u4e2d", "\n", "]"]
K_DEAD = 2


def esc_lit(ch, rng):
    """A literal character in one of the escape forms both sides accept."""
    cp = ord(ch)
    forms = [re.escape(ch)]
    if cp < 0x100:
        forms.append("\\x%02x" % cp)
    if cp < 0x10000:
        forms.append("\\u%04X" % cp)
    forms.append("\\U%08x" % cp)
    if cp < 0o100:
        forms.append("\\0%o" % cp if cp >= 8 else "\\0%o" % cp)
    special = {"\n": "\\n", "\t": "\\t"}
    if ch in special:
        forms.append(special[ch])
    return rng.choice(forms)


def class_text(rng):
    items = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.2:
            items.append(rng.choice(["\\d", "\\w", "\\s", "\\D", "\\W", "\\S"]))
        elif r < 0.55:
            a, b = sorted(rng.sample(LITERALS[:13] + ["\u00ff", "\u0100", "\U0001f5ff"], 2), key=ord)
            items.append(esc_lit(a, rng) + "-" + esc_lit(b, rng))
        else:
            items.append(esc_lit(rng.choice(LITERALS), rng))
    return "[" + ("^" if rng.random() < 0.3 else "") + "".join(items) + "]"


class Gen:
    """Random pattern ASTs: ('lit', ch) ('set', text) ('cat', [..]) ('alt', [..])
    ('grp', kind, node) ('rep', node, lo, hi, lazy) — text() writes the pattern."""

    def __init__(self, rng):
        self.rng = rng
        self.names = 0

    def node(self, depth):
        r = self.rng.random()
        if depth <= 0 or r < 0.35:
            return self.atom()
        if r < 0.6:
            return ("cat", [self.node(depth - 1) for _ in range(self.rng.randint(2, 4))])
        if r < 0.75:
            return ("alt", [self.node(depth - 1) for _ in range(self.rng.randint(2, 3))])
        if r < 0.85:
            self.names += 1
            kind = self.rng.choice(["(", "(?:", "(?P<g%d>" % self.names])
            return ("grp", kind, self.node(depth - 1))
        return self.rep(self.node(depth - 1))

    def atom(self):
        r = self.rng.random()
        if r < 0.45:
            return ("lit", self.rng.choice(LITERALS))
        if r < 0.55:
            return ("set", ".")
        if r < 0.7:
            return ("set", self.rng.choice(["\\d", "\\w", "\\s", "\\D", "\\W", "\\S"]))
        if r < 0.9:
            return ("set", class_text(self.rng))
        return self.rep(("lit", self.rng.choice(LITERALS)))

    def rep(self, x):
        if x[0] in ("cat", "alt"):
            x = ("grp", "(?:", x)
        if x[0] == "rep":
            x = ("grp", "(", x)
        r = self.rng
        form = r.choice(["*", "+", "?", "{n}", "{n,}", "{n,m}", "{,m}"])
        lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(form, (None, None))
        n, m = r.randint(0, 3), r.randint(0, 3)
        n, m = min(n, m), max(n, m)
        if form == "{n}":
            lo = hi = n
        elif form == "{n,}":
            lo, hi = n, None
        elif form == "{n,m}":
            lo, hi = n, m
        elif form == "{,m}":
            lo, hi = 0, m
        return ("rep", x, lo, hi, form, r.random() < 0.25)

    def text(self, x):
        k = x[0]
        if k == "lit":
            return esc_lit(x[1], self.rng)
        if k == "set":
            return x[1]
        if k == "cat":
            return "".join(self.text(c) for c in x[1])
        if k == "alt":
            return "|".join(self.text(c) for c in x[1])
        if k == "grp":
            return x[1] + self.text(x[2]) + ")"
        _, c, lo, hi, form, lazy = x
        q = form.replace("n", str(lo)).replace("m", str(hi)) if "{" in form else form
        return self.text(c) + q + ("?" if lazy else "")


def members(set_text, cache):
    if set_text not in cache:
        cache[set_text] = [u for u in UNIVERSE + LITERALS if re.fullmatch(set_text, u, re.ASCII)]
    return cache[set_text]


def sample(x, rng, cache):
    """A random string the AST matches (None when a set has no member in the universe)."""
    k = x[0]
    if k == "lit":
        return x[1]
    if k == "set":
        m = members(x[1], cache)
        return rng.choice(m) if m else None
    if k == "cat":
        parts = [sample(c, rng, cache) for c in x[1]]
        return None if None in parts else "".join(parts)
    if k == "alt":
        for c in rng.sample(x[1], len(x[1])):
            s = sample(c, rng, cache)
            if s is not None:
                return s
        return None
    if k == "grp":
        return sample(x[2], rng, cache)
    _, c, lo, hi, _, _ = x
    n = rng.randint(lo, lo + 3 if hi is None else hi)
    parts = [sample(c, rng, cache) for _ in range(n)]
    return None if None in parts else "".join(parts)


def mutate(s, rng, alphabet):
    s = list(s)
    for _ in range(rng.randint(1, 2)):
        op = rng.randrange(5)
        i = rng.randint(0, len(s))
        if op == 0:
            s.insert(i, rng.choice(alphabet))
        elif op == 1 and s:
            del s[min(i, len(s) - 1)]
        elif op == 2 and s:
            s[min(i, len(s) - 1)] = rng.choice(alphabet)
        elif op == 3:
            s = s[:i]
        else:
            s = s + s[i:]
    return "".join(s)


def invalid_utf8(s, rng):
    b = s.encode()
    bad = rng.choice([b"\x80", b"\xc0\x80", b"\xff", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xf0\x9f"])
    i = rng.randint(0, len(b))
    return b[:i] + bad + b[i:] if rng.random() < 0.7 else b + bad


class Probe:
    def __init__(self, path):
        self.path = path

    def run(self, jobs):
        """jobs: [(pattern bytes, [string bytes])] -> [(compile answer, [string answers])]."""
        lines = []
        for p, ss in jobs:
            lines.append("P " + p.hex())
            lines += ["S " + s.hex() for s in ss]
        r = subprocess.run([self.path], input="\n".join(lines) + "\n", capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: probe exit {r.returncode}: {r.stderr[-2000:]}")
        out = r.stdout.split("\n")
        res, k = [], 0
        for p, ss in jobs:
            head = out[k]
            k += 1
            ans = []
            if head.startswith("ok"):
                for _ in ss:
                    a, d, w = out[k].split(" ")
                    ans.append((int(a), int(d), w))
                    k += 1
            else:
                k += len(ss)  # the probe answers "no pattern" to each
            res.append((head, ans))
        return res


def py_match(rx, b):
    try:
        t = b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return rx.fullmatch(t) is not None


def split_partial(b):
    """(text, partial bytes) when b is valid UTF-8 up to an unfinished sequence; None if invalid."""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(b, final=False)
    except UnicodeDecodeError:
        return None
    return text, b[len(text.encode()):]


def completions(tail, alphabet):
    """Characters whose encoding starts with the partial bytes tail: those of the alphabet and
    the first and last code points that do."""
    out = [c for c in alphabet if c.encode().startswith(tail)]
    lead = tail[0]
    n = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    lo_b = tail + b"\x80" * (n - len(tail))
    hi_b = tail + b"\xbf" * (n - len(tail))
    for cand in (lo_b, hi_b):
        try:
            out.append(cand.decode("utf-8"))
        except UnicodeDecodeError:
            # e.g. E0 80..: the first valid continuation is higher; walk up a little
            for k in range(0x40):
                try:
                    out.append((tail + bytes([0x80 + k]) + b"\x80" * (n - len(tail) - 1)).decode("utf-8"))
                    break
                except UnicodeDecodeError:
                    continue
    return out


def dead_ok(rx, prefix, alphabet, known):
    """True when no extension of prefix (bytes) is found to match (the bounded check)."""
    for m in known:
        if m.startswith(prefix):
            return False
    sp = split_partial(prefix)
    if sp is None:
        return True  # not a UTF-8 prefix: nothing can match
    text, tail = sp
    heads = [text] if not tail else [text + c for c in completions(tail, alphabet)]
    exts = [""]
    frontier = [""]
    for _ in range(K_DEAD):
        frontier = [e + c for e in frontier for c in alphabet]
        exts += frontier
    for h in heads:
        for e in exts:
            if rx.fullmatch(h + e):
                return False
    return True


class Tally:
    def __init__(self):
        self.n = {}
        self.bad = []

    def add(self, key, k=1):
        self.n[key] = self.n.get(key, 0) + k

    def fail(self, msg):
        self.add("mismatches")
        if len(self.bad) < 30:
            self.bad.append(msg)


def check_strings(pat, rx, ss, answers, known, alphabet, T):
    for s, (acc, dead_at, wit) in zip(ss, answers):
        T.add("strings")
        ref = py_match(rx, s)
        T.add("python_matches" if ref else "python_nonmatches")
        if bool(acc) != ref:
            T.fail(f"/{pat}/ on {s!r}: probe accepting={acc}, re.fullmatch={ref}")
            continue
        if dead_at == -2 or wit == "?":
            T.fail(f"/{pat}/ on {s!r}: probe FULL or no witness ({dead_at}, {wit})")
            continue
        live = s if dead_at < 0 else s[:dead_at]
        ext = b"" if wit == "-" else bytes.fromhex(wit)
        if not py_match(rx, live + ext):
            T.fail(f"/{pat}/: live prefix {live!r} + witness {ext!r} does not match under re")
            continue
        T.add("witnesses_verified")
        if dead_at >= 0:
            T.add("dead_verdicts")
            if not dead_ok(rx, s[: dead_at + 1], alphabet, known):
                T.fail(f"/{pat}/: dead at {dead_at} on {s!r} but an extension of {s[:dead_at + 1]!r} matches")


def part_random(args, probe, T):
    rng = random.Random(args.seed)
    gen = Gen(rng)
    jobs, meta = [], []
    cache = {}
    while len(jobs) < args.patterns:
        ast = gen.node(rng.randint(1, 4))
        pat = gen.text(ast)
        if rng.random() < 0.15:
            pat = "^" + pat
        if rng.random() < 0.15:
            pat = pat + "$"
        try:
            rx = re.compile(pat, re.ASCII)
        except re.error as e:
            sys.exit(f"FAIL: the generator wrote a pattern re refuses: {pat!r}: {e}")
        samples = set()
        for _ in range(40):
            s = sample(ast, rng, cache)
            if s is not None and rx.fullmatch(s):
                samples.add(s)
            if len(samples) >= 8:
                break
        T.add("samples_rejected_by_re", 0)
        alphabet = sorted(set(UNIVERSE) | {c for c in pat if not c.isascii()} | set(LITERALS))
        strs = sorted(samples)
        base = strs or [""]
        while len(strs) < args.strings - 6:
            strs.append(mutate(rng.choice(base), rng, alphabet))
        for _ in range(3):
            strs.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5))))
        bs = [s.encode() for s in strs] + [invalid_utf8(rng.choice(base), rng) for _ in range(3)]
        known = [s.encode() for s in strs if rx.fullmatch(s)]
        jobs.append((pat.encode(), bs))
        meta.append((pat, rx, known, alphabet))
        T.add("patterns")
        T.add("patterns_with_samples", 1 if samples else 0)
    for (pat, rx, known, alphabet), (p, bs), (head, answers) in zip(meta, jobs, probe.run(jobs)):
        if not head.startswith("ok"):
            T.fail(f"/{pat}/: re compiles it, the probe says {head}")
            continue
        check_strings(pat, rx, bs, answers, known, alphabet, T)


NOISE = "ab\u00e9()|*+?{}[]^$\\.-,0123dDsSwWxuPn<>:=!#"


def part_noise(args, probe, T):
    rng = random.Random(args.seed + 1)
    jobs, meta = [], []
    for _ in range(args.noise):
        pat = "".join(rng.choice(NOISE) for _ in range(rng.randint(1, 9)))
        try:
            rx = re.compile(pat, re.ASCII)
        except (re.error, OverflowError, RecursionError):
            rx = None
        ss = [("".join(rng.choice("ab\u00e9 0-.\n_{}") for _ in range(rng.randint(0, 4)))).encode() for _ in range(8)]
        jobs.append((pat.encode(), ss))
        meta.append((pat, rx))
    for (pat, rx), (p, ss), (head, answers) in zip(meta, jobs, probe.run(jobs)):
        T.add("noise_patterns")
        if rx is None:
            if head.startswith("ok"):
                T.fail(f"noise /{pat}/: re refuses it, the probe accepts it")
            else:
                T.add("noise_both_refuse")
            continue
        if head.startswith("err"):
            st = int(head.split(" ")[1])
            if st == UNSUPPORTED:
                T.add("noise_unsupported_in_probe")
            elif st == INVALID and "matches no string" in head:
                T.add("noise_empty_language")
            else:
                T.fail(f"noise /{pat}/: re accepts it, the probe says {head}")
            continue
        T.add("noise_both_accept")
        check_strings(pat, rx, ss, answers, [], sorted(set("ab\u00e9 0-.\n_{}")), T)


HAND = [  # (pattern, the probe's status): constructs re accepts that the probe refuses, and errors
    ("a^b", UNSUPPORTED), ("a$b", UNSUPPORTED), ("(a)\\1", UNSUPPORTED), ("(?=a)a", UNSUPPORTED),
    ("(?<=a)b", UNSUPPORTED), ("\\bfoo", UNSUPPORTED), ("(?i)a", UNSUPPORTED), ("a*+", UNSUPPORTED),
    ("(?>ab)", UNSUPPORTED), ("(?P<n>a)(?P=n)", UNSUPPORTED), ("a{1001}", UNSUPPORTED),
    ("(?:a{1000}){1000}", UNSUPPORTED), ("*", INVALID), ("a{2}{3}", INVALID), ("(", INVALID), (")", INVALID),
    ("[b-a]", INVALID), ("\\q", INVALID), ("[^\\s\\S]", INVALID),
]


def part_hand(probe, T):
    res = probe.run([(p.encode(), []) for p, _ in HAND])
    for (p, want), (head, _) in zip(HAND, res):
        T.add("hand_patterns")
        st = int(head.split(" ")[1]) if head.startswith("err") else 0
        if st != want:
            T.fail(f"/{p}/: probe says {head!r}, expected status {want}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True)
    ap.add_argument("--patterns", type=int, default=400)
    ap.add_argument("--strings", type=int, default=24)
    ap.add_argument("--noise", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=20260415)
    args = ap.parse_args()
    probe = Probe(args.probe)
    T = Tally()
    part_random(args, probe, T)
    part_noise(args, probe, T)
    part_hand(probe, T)
    for m in T.bad:
        print("MISMATCH " + m)
    for k in sorted(T.n):
        print(f"{k}: {T.n[k]}")
    print(f"dead verdicts checked with extensions of <= {K_DEAD} characters over each pattern's alphabet")
    if T.n.get("mismatches", 0) or T.n.get("patterns", 0) < 300:
        print("FAIL")
        return 1
    print("ok: 0 mismatches")
    return 0


if __name__ == "__main__":
    sys.exit(main())

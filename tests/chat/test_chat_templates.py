#!/usr/bin/env python3
"""specdec's chat templates against transformers' apply_chat_template.

For every published tokenizer_config.json in SHARED/tokenizers and every template of
chat_fixtures.py (written next to a published tokenizer.json in a temporary model directory),
each conversation of chat_conversations.py is rendered with add_generation_prompt on and off by
transformers (the real Jinja template) and by specdec (chat_driver, the C API: the tokenizer's
template loaded from the model directory, rendered by specdec's Jinja interpreter). Requirements:
  - specdec_chat_template_detect says "jinja" for a tokenizer with a template, "plain" without;
  - the text is byte-identical, or, where transformers raises, specdec fails too: with
    INVALID_ARGUMENT and the template's own message for raise_exception, INVALID_ARGUMENT for
    the empty conversation transformers refuses;
  - the ids specdec_chat_tokenize gives equal transformers' apply_chat_template(tokenize=True)
    wherever transformers tokenizes with the pipeline of tokenizer.json; where transformers
    rebuilds the pipeline itself (v5's LlamaTokenizer for Llama-2-vocabulary models) they must
    equal the `tokenizers` library's encode(text, add_special_tokens=False), specdec's contract,
    and the count of ids that differ from transformers is printed;
  - forcing each family by name on a tokenizer without a template renders like transformers
    with that family's reference template passed as chat_template.
Exit 77 (skip) when SHARED/tokenizers is absent.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_conversations import CONVERSATIONS  # noqa: E402
from chat_fixtures import FIXTURES, LLAMA3_INSTRUCT, CHATML_PLAIN, LLAMA2_CHAT, MIXTRAL_8X22B_DEFAULT  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

INVALID_ARGUMENT, UNSUPPORTED = 1, 5
SHARED_FAMILY = {"llama-3-8b": "jinja", "phi-3-mini": "jinja", "qwen2.5-1.5b-instruct": "jinja",
                 "tinyllama-1.1b-chat-v1.0": "jinja", "mistral-v1-mixtral-8x22b": "plain", "gpt2": "plain"}


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.notes = []

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL", what)
        return ok


def run_driver(driver, mdir, name, convs):
    req = {"dir": mdir, "name": name,
           "convs": [{"msgs": [list(m) for m in msgs], "agp": agp} for msgs, agp in convs]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(req, f, ensure_ascii=False)
        path = f.name
    try:
        out = subprocess.run([driver, path], capture_output=True, timeout=600)
    finally:
        os.unlink(path)
    if out.returncode != 0:
        raise RuntimeError(f"chat_driver failed ({out.returncode}): {out.stderr.decode(errors='replace')}")
    return json.loads(out.stdout.decode("utf-8"))


def hf_render(tok, msgs, agp, template):
    """(text, ids, None) or (None, None, (kind, message))."""
    import jinja2
    conv = [{"role": r, "content": c} for r, c in msgs]
    kw = {"chat_template": template} if template is not None else {}
    try:
        text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=agp, **kw)
        ids = tok.apply_chat_template(conv, tokenize=True, add_generation_prompt=agp, return_dict=False, **kw)
        return text, list(ids), None
    except jinja2.exceptions.TemplateError as e:
        return None, None, ("template", str(e))
    except ValueError as e:
        return None, None, ("value", str(e))


def same_pipeline(tok, raw):
    """Does transformers tokenize with tokenizer.json's own normalizer and pre-tokenizer?"""
    bt = tok.backend_tokenizer
    return str(bt.normalizer) == str(raw.normalizer) and str(bt.pre_tokenizer) == str(raw.pre_tokenizer)


def compare(rep, label, tok, raw, res, convs, template=None):
    """Compare driver results with transformers for convs [(msgs, agp)]; returns id mismatches vs transformers."""
    exact_ids = same_pipeline(tok, raw)
    id_diff = 0
    for (msgs, agp), r in zip(convs, res):
        what = f"{label} {msgs!r:.70} agp={agp}"
        text, ids, err = hf_render(tok, msgs, agp, template)
        if err is None:
            if not rep.check(r["status"] == 0, f"{what}: specdec failed ({r['status']}): {r['error']}"):
                continue
            rep.check(r["text"] == text, f"{what}:\n  transformers {text!r}\n  specdec      {r.get('text')!r}")
            want = ids if exact_ids else raw.encode(text, add_special_tokens=False).ids
            rep.check(r["ids_status"] == 0 and r["ids"] == want, f"{what}: ids differ\n  want {want}\n  got  {r['ids']}")
            id_diff += r["ids"] != ids
        else:
            kind, msg = err
            ok = r["status"] == INVALID_ARGUMENT and (kind != "template" or msg in r["error"])
            rep.check(ok, f"{what}: transformers raised {kind}: {msg!r}; specdec {r['status']}: {r['error']!r}")
    return id_diff


def make_dir(tmp, name, base_dir, chat_template):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    shutil.copy(os.path.join(base_dir, "tokenizer.json"), d)
    cfg_path = os.path.join(base_dir, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.exists(cfg_path) else {}
    cfg["chat_template"] = chat_template
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False)
    return d


def all_convs():
    return [(msgs, agp) for _, msgs in CONVERSATIONS for agp in (True, False)]


def check_dir(rep, args, tokcache, label, mdir, base, family, template=None, force=None):
    from transformers import AutoTokenizer
    from tokenizers import Tokenizer
    if base not in tokcache:
        bdir = os.path.join(args.shared, "tokenizers", base)
        tokcache[base] = (AutoTokenizer.from_pretrained(bdir), Tokenizer.from_file(os.path.join(bdir, "tokenizer.json")))
    tok, raw = tokcache[base]
    convs = all_convs()
    out = run_driver(args.driver, mdir, None, convs)
    rep.check(out["detect"] == family and out["detect_status"] == 0,
              f"{label}: detect gave {out['detect']} ({out['detect_error']}), expected {family}")
    rep.check(out["add_special"] == (1 if family == "plain" else 0), f"{label}: add_special {out['add_special']}")
    if family == "plain":
        _, _, err = hf_render(tok, [("user", "x")], True, None) if template is None else (None, None, None)
        rep.check(err is not None, f"{label}: transformers renders without a template?")
        return
    n_diff = compare(rep, label, tok, raw, out["results"], convs, template)
    if force:  # a forced family renders its built-in template, whatever the tokenizer's own is
        out = run_driver(args.driver, mdir, force, convs)
        rep.check(all(r["status"] in (0, INVALID_ARGUMENT) for r in out["results"]), f"{label}: forced {force} failed")
    if n_diff:
        rep.notes.append(f"{label}: {n_diff}/{len(convs)} renders tokenize differently in transformers "
                         f"(its LlamaTokenizer rebuilds the pipeline); specdec equals tokenizers")


def check_forced(rep, args, tokcache):
    """Every family forced on a tokenizer without a template == transformers with the reference template."""
    zephyr = json.load(open(os.path.join(args.shared, "tokenizers", "tinyllama-1.1b-chat-v1.0",
                                         "tokenizer_config.json"), encoding="utf-8"))["chat_template"]
    phi3 = json.load(open(os.path.join(args.shared, "tokenizers", "phi-3-mini", "tokenizer_config.json"),
                          encoding="utf-8"))["chat_template"]
    refs = {"llama3": LLAMA3_INSTRUCT, "chatml": CHATML_PLAIN, "llama2": LLAMA2_CHAT,
            "mistral": MIXTRAL_8X22B_DEFAULT, "zephyr": zephyr, "phi3": phi3}
    base = "mistral-v1-mixtral-8x22b"
    mdir = os.path.join(args.shared, "tokenizers", base)
    tok, raw = tokcache[base]
    for name, text in refs.items():
        out = run_driver(args.driver, mdir, name, all_convs())
        compare(rep, f"forced {name} on {base}", tok, raw, out["results"], all_convs(), text)


def check_list_default(rep, tmp, fx):
    """transformers resolves a list-form chat_template to its "default" entry, as specdec does."""
    from transformers import AutoTokenizer
    d = os.path.join(tmp, fx["name"])
    default = next(t["template"] for t in fx["chat_template"] if t["name"] == "default")
    rep.check(AutoTokenizer.from_pretrained(d).get_chat_template() == default, f"{fx['name']}: transformers default entry")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--shared", required=True)
    args = ap.parse_args()
    tdir = os.path.join(args.shared, "tokenizers")
    if not os.path.isdir(tdir):
        print(f"skipped: {tdir} is absent (the real tokenizer_config.json files live there)")
        return 77
    import transformers
    print(f"transformers {transformers.__version__}")
    rep, tokcache = Report(), {}
    tmp = tempfile.mkdtemp(prefix="specdec_chat_")
    try:
        for name, family in SHARED_FAMILY.items():
            check_dir(rep, args, tokcache, name, os.path.join(tdir, name), name, family)
        for fx in FIXTURES:
            mdir = make_dir(tmp, fx["name"], os.path.join(tdir, fx["base"]), fx["chat_template"])
            tmpl = fx["chat_template"]
            if isinstance(tmpl, list):
                check_list_default(rep, tmp, fx)
                tmpl = next(t["template"] for t in tmpl if t["name"] == "default")
            check_dir(rep, args, tokcache, fx["name"], mdir, fx["base"], fx["family"], tmpl, fx.get("force"))
        check_forced(rep, args, tokcache)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for n in rep.notes:
        print("note:", n)
    print(f"{rep.passed} passed, {rep.failed} failed")
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())

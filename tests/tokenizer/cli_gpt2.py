#!/usr/bin/env python3
"""`specdec tokenize --decode` on GPT-2's published tokenizer: "Hello world" must give
the ids 15496 995 (those of the `tokenizers` library) and decode back. Skips (exit 77)
when the shared tokenizers folder is absent.
usage: cli_gpt2.py SPECDEC_BINARY GPT2_DIR"""
import os
import subprocess
import sys

cli, d = sys.argv[1], sys.argv[2]
if not os.path.isfile(os.path.join(d, "tokenizer.json")):
    print(f"skipped: {d}/tokenizer.json is absent (set SPECDEC_SHARED_DIR)")
    sys.exit(77)
r = subprocess.run([cli, "tokenize", "-m", d, "-p", "Hello world", "--decode"], capture_output=True, text=True)
want = "15496 995\nHello world\n"
if r.returncode != 0 or r.stdout != want:
    print(f"FAIL: exit {r.returncode}, stdout {r.stdout!r}, want {want!r}; stderr {r.stderr!r}")
    sys.exit(1)
print("ok: " + r.stdout.replace("\n", " | "))

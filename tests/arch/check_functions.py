#!/usr/bin/env python3
"""Function length limit: every function defined in the library's layers (core/,
kernels/, backends/, models/, tokenizer/, runtime/) is at most MAX_LINES lines long,
counted from the first line of its signature to its closing brace.

A function definition is found as a top-level '{' (brace depth 0) whose preceding
text ends with ')' (optionally followed by qualifiers such as 'const'); struct, enum,
union and initialiser braces are skipped. Comments, strings and preprocessor lines are
blanked first so braces inside them do not count.

Usage: check_functions.py ROOT [--max N] [--dirs d1,d2,...] [--report]
       check_functions.py --self-test   (planted functions of 80 and 81 lines)
Exit 1 listing every function over the limit; --report prints the longest ones."""
import os
import re
import sys

DEFAULT_DIRS = ["core", "kernels", "backends", "runtime"]
EXTS = (".c", ".h", ".cu", ".cuh")


def blank(text):
    """Replace comments, string/char literals and preprocessor lines by spaces,
    keeping newlines so line numbers stay right."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":
            # preprocessor line, with continuations
            j = i
            while j < n:
                if text[j] == "\n" and text[j - 1] != "\\":
                    break
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        at_line_start = False
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            if c == "\n":
                at_line_start = True
            out.append(c)
            i += 1
    return "".join(out)


SIG_END = re.compile(r"\)\s*(const\s*)?(noexcept\s*)?$")
NOT_FUNC = re.compile(r"\b(struct|enum|union|typedef)\b[^;()]*$|=\s*$")


def functions(text):
    """Yield (name, first_line, last_line) of every function definition."""
    b = blank(text)
    depth = 0
    stmt_start = 0  # offset after the last ';' or '}' at depth 0
    i = 0
    while i < len(b):
        c = b[i]
        if c == "{":
            if depth == 0:
                head = b[stmt_start:i]
                if SIG_END.search(head.rstrip()) and not NOT_FUNC.search(head.split("(")[0]):
                    # find matching close brace
                    d, j = 0, i
                    while j < len(b):
                        if b[j] == "{":
                            d += 1
                        elif b[j] == "}":
                            d -= 1
                            if d == 0:
                                break
                        j += 1
                    first = b.count("\n", 0, stmt_start + len(head) - len(head.lstrip()))
                    m = re.search(r"([A-Za-z_]\w*)\s*\($", head.split(")")[0].split("(")[0] + "(")
                    name = m.group(1) if m else "?"
                    names = re.findall(r"([A-Za-z_]\w*)\s*\(", head)
                    if names:
                        name = names[0] if names[0] not in ("__attribute__", "__launch_bounds__") else names[-1]
                        for nm in names:
                            if nm not in ("__attribute__", "__launch_bounds__", "__align__", "alignas"):
                                name = nm
                                break
                    yield name, first + 1, b.count("\n", 0, j) + 1
                    i = j + 1
                    stmt_start = i
                    continue
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                stmt_start = i + 1
        elif c == ";" and depth == 0:
            stmt_start = i + 1
        i += 1


def source_files(root, dirs, exts=EXTS):
    """Every source file under root/d for d in dirs, in a stable order."""
    for d in dirs:
        for dp, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith(exts):
                    yield os.path.join(dp, f)


def self_test():
    body = "\n".join("    x += %d;" % i for i in range(77))
    ok80 = "static int ok80(int x) {\n" + body + "\n    return x;\n}\n"          # 80 lines
    bad81 = "static int bad81(int x)\n{\n" + body + "\n    return x;\n}\n"       # 81 lines
    tricky = 'struct s { int a; };\nstatic const char *k = "{ not a function }";\n'
    found = {name: z - a + 1 for name, a, z in functions(tricky + ok80 + bad81)}
    good = found.get("ok80") == 80 and found.get("bad81") == 81 and len(found) == 2
    print(f"self-test: measured {found} (expected ok80: 80, bad81: 81): {'ok' if good else 'WRONG'}")
    return 0 if good else 1


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    if not args:
        print(__doc__)
        return 2
    root = args[0]
    limit = 80
    dirs = DEFAULT_DIRS
    report = "--report" in args
    if "--max" in args:
        limit = int(args[args.index("--max") + 1])
    if "--dirs" in args:
        dirs = args[args.index("--dirs") + 1].split(",")
    found = []
    n_funcs = 0
    for path in source_files(root, dirs):
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for name, a, z in functions(text):
            n_funcs += 1
            found.append((z - a + 1, os.path.relpath(path, root), a, name))
    found.sort(reverse=True)
    over = [x for x in found if x[0] > limit]
    if report:
        for ln, path, a, name in found[:40]:
            print(f"{ln:5d}  {path}:{a}  {name}")
    for ln, path, a, name in over:
        print(f"FAIL {path}:{a}: {name} is {ln} lines (limit {limit})")
    print(f"{n_funcs} functions checked in {', '.join(dirs)}; {len(over)} over {limit} lines")
    if n_funcs == 0:
        print("FAIL no functions found: wrong root?")
        return 1
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())

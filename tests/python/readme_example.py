"""The README's Python examples (each fenced block after a `python-doctest` marker): extract them, or run
them all with `python readme_example.py README.md` (what the python_install test does in a fresh venv)."""
import re
import sys

MARKER = "<!-- python-doctest:"


def extract_all(readme_path: str) -> list:
    """The blocks, in document order."""
    with open(readme_path, encoding="utf-8") as f:
        text = f.read()
    blocks, i = [], text.find(MARKER)
    while i >= 0:
        m = re.compile(r"```python\n(.*?)```", re.S).search(text, i)
        assert m, "no ```python block after a python-doctest marker"
        blocks.append(m.group(1))
        i = text.find(MARKER, m.end())
    assert blocks, "no python-doctest marker"
    return blocks


def extract(readme_path: str) -> str:
    """The first block (the LLM example)."""
    return extract_all(readme_path)[0]


if __name__ == "__main__":
    for k, code in enumerate(extract_all(sys.argv[1])):
        exec(compile(code, f"README.md (python example {k + 1})", "exec"), {"__name__": "__main__"})

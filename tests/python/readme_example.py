"""The README's Python example (the fenced block after the `python-doctest` marker): extract it, or run
it with `python readme_example.py README.md` (what the python_install test does in a fresh venv)."""
import re
import sys

MARKER = "<!-- python-doctest:"


def extract(readme_path: str) -> str:
    with open(readme_path, encoding="utf-8") as f:
        text = f.read()
    i = text.index(MARKER)
    m = re.compile(r"```python\n(.*?)```", re.S).search(text, i)
    assert m, "no ```python block after the python-doctest marker"
    return m.group(1)


if __name__ == "__main__":
    code = extract(sys.argv[1])
    exec(compile(code, "README.md (python example)", "exec"), {"__name__": "__main__"})

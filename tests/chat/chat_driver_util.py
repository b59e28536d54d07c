"""What the chat-template comparisons share (test_jinja_templates.py, test_chat_json.py): a
render's outcome under jinja2 as specdec reports it, and one request to a C driver."""
import json
import os
import subprocess
import tempfile


def outcome(fn):
    """fn()'s outcome: ("ok", text), ("raise", message) for the template's own raise_exception
    (jinja2 TemplateError itself), ("error", ...) for anything else raised inside the template."""
    import jinja2
    try:
        return ("ok", fn())
    except jinja2.exceptions.TemplateError as e:
        return ("raise" if type(e) is jinja2.exceptions.TemplateError else "error", str(e))
    except Exception as e:  # noqa: BLE001 — TypeError, ValueError, ... from inside the template
        return ("error", "%s: %s" % (type(e).__name__, e))


def run_driver(driver, req):
    """The driver's JSON answer to request req (written to a temporary file, TZ=UTC)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(req, f, ensure_ascii=False)
        path = f.name
    try:
        out = subprocess.run([driver, path], capture_output=True, timeout=600, env=dict(os.environ, TZ="UTC"))
    finally:
        os.unlink(path)
    if out.returncode != 0:
        raise RuntimeError(f"{os.path.basename(driver)} failed ({out.returncode}): "
                           f"{out.stderr.decode(errors='replace')[-2000:]}")
    return json.loads(out.stdout.decode("utf-8"))

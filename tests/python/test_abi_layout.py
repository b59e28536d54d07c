"""The binding reads include/specdec.h with cffi; this checks that cffi lays out every struct as the C
compiler does (size, every field's offset and size), that every enum constant has the compiler's value,
and that every SPECDEC_API function of the header is declared and resolves in the library. A planted
fault (a field's type changed in the header text) must be reported by the same comparison."""
import os
import re
import shutil
import subprocess

import cffi
import pytest

from specdec import _ffi

pytestmark = pytest.mark.quick


def c_layout(header, cdef_ffi, tmp_path):
    """What the C compiler says: {name: value} for sizeof/offsetof of every struct field and every enum
    constant known to cdef_ffi."""
    typedefs, structs, _ = cdef_ffi.list_types()
    lines = []
    for t in typedefs:
        ty = cdef_ffi.typeof(t)
        if ty.kind == "struct" and ty.fields is not None:  # opaque handles have no fields
            lines.append(f'P("sizeof {t}", sizeof({t}));')
            for name, f in ty.fields:
                lines.append(f'P("offsetof {t}.{name}", offsetof({t}, {name}));')
                lines.append(f'P("sizeof {t}.{name}", sizeof((({t} *)0)->{name}));')
        elif ty.kind == "enum":
            for name in ty.relements:
                lines.append(f'P("enum {name}", (long long){name});')
    src = tmp_path / "layout.c"
    src.write_text(f'#include <stdio.h>\n#include <stddef.h>\n#include "{header}"\n'
                   '#define P(k, v) printf("%s %lld\\n", k, (long long)(v))\n'
                   'int main(void) {\n' + "\n".join(lines) + "\nreturn 0;\n}\n")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler (cc) to check the layout against"
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (ln.rsplit(" ", 1) for ln in out.splitlines())}


def ffi_layout(cdef_ffi):
    typedefs, _, _ = cdef_ffi.list_types()
    got = {}
    for t in typedefs:
        ty = cdef_ffi.typeof(t)
        if ty.kind == "struct" and ty.fields is not None:
            got[f"sizeof {t}"] = cdef_ffi.sizeof(t)
            for name, f in ty.fields:
                got[f"offsetof {t}.{name}"] = f.offset
                got[f"sizeof {t}.{name}"] = cdef_ffi.sizeof(f.type)
        elif ty.kind == "enum":
            for name, v in ty.relements.items():
                got[f"enum {name}"] = v
    return got


def mismatches(want, got):
    return sorted(k for k in want if got.get(k) != want[k])


def test_struct_layouts_and_enums_match_the_compiler(tmp_path):
    b = _ffi.binding()
    want = c_layout(b.header, b.ffi, tmp_path)
    got = ffi_layout(b.ffi)
    assert set(got) == set(want)
    assert not mismatches(want, got), [(k, want[k], got.get(k)) for k in mismatches(want, got)]
    n_structs = sum(1 for k in want if k.startswith("sizeof ") and "." not in k)
    assert n_structs >= 8  # model params/info, engine params, generate params, stats, scheduler params/metrics, chat message
    for s in ("specdec_generate_params", "specdec_stats", "specdec_engine_params", "specdec_scheduler_metrics"):
        assert f"sizeof {s}" in want


def test_planted_layout_fault_is_caught(tmp_path):
    """A mirror that disagrees with the compiled header (one field widened) is reported."""
    b = _ffi.binding()
    broken = b.header_text.replace("    int32_t n_predict;", "    int64_t n_predict;", 1)
    assert broken != b.header_text
    ffi = cffi.FFI()
    ffi.cdef(_ffi.cdef_source(broken))
    bad = mismatches(c_layout(b.header, b.ffi, tmp_path), ffi_layout(ffi))
    assert "sizeof specdec_generate_params.n_predict" in bad and "offsetof specdec_generate_params.temperature" in bad


def test_every_api_function_is_declared_and_resolves():
    b = _ffi.binding()
    names = re.findall(r"SPECDEC_API\s[^;]*?\b(specdec_\w+)\s*\(", b.header_text)
    assert len(names) > 50 and len(set(names)) == len(names)
    for n in names:
        fn = getattr(b.lib, n)  # AttributeError: not declared in the cdef or not exported
        assert b.ffi.typeof(fn).kind == "function", n


def test_header_matches_library_version():
    b = _ffi.binding()
    assert b.version == _ffi.header_version(b.header_text)
    assert b.lib.specdec_version_number() == int(re.search(r"SPECDEC_VERSION_MAJOR (\d+)", b.header_text)[1]) * 10000 \
        + int(re.search(r"SPECDEC_VERSION_MINOR (\d+)", b.header_text)[1]) * 100 \
        + int(re.search(r"SPECDEC_VERSION_PATCH (\d+)", b.header_text)[1])


def test_cdef_source_keeps_only_declarations():
    text = _ffi.cdef_source('#ifndef G\n#define G\n#define SPECDEC_X 3\n#define SPECDEC_S "s"\n'
                            '#ifdef __cplusplus\nextern "C" {\n#endif\n/* c; */ SPECDEC_API int f(void);\n'
                            '#ifdef __cplusplus\n}\n#endif\n#endif\n')
    assert "extern" not in text and "}" not in text and '"s"' not in text
    assert "#define SPECDEC_X 3" in text and "int f(void);" in text

"""The binding: cffi (ABI mode) fed with the public header itself, and libspecdec opened with dlopen.

No declaration is copied into Python: at import the package reads include/specdec.h (the copy
installed next to the library, or the source tree's), removes what cffi's C parser does not take
(comments, #include / #if blocks, the export macro, non-integer #defines), and hands the rest to
ffi.cdef(). Struct layouts, enum values and prototypes therefore always follow the header the
library was compiled from; tests/python/test_abi_layout.py checks every struct's size and field
offsets against the C compiler's and that every SPECDEC_API function was declared.

cffi releases the GIL around every call into the library; callbacks from library threads take
it back for the time of the Python call.
"""
from __future__ import annotations

import re
import threading

import cffi

from . import _paths
from .errors import BY_STATUS_NAME, SpecdecError


def cdef_source(header_text: str) -> str:
    """The header reduced to what cffi's cdef() parses: declarations and integer #defines."""
    text = re.sub(r"/\*.*?\*/", " ", header_text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = text.replace("\\\n", " ")
    out, depth = [], 0
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("#"):
            if re.match(r"#\s*if", s):
                depth += 1
            elif re.match(r"#\s*endif", s):
                depth -= 1
            else:
                m = re.match(r"#\s*define\s+(SPECDEC_\w+)\s+(\d+)$", s)
                if m:
                    out.append(f"#define {m.group(1)} {m.group(2)}")
            continue
        # depth 1 is the include guard; deeper blocks are the export-macro and extern "C" wrappers
        if depth <= 1:
            out.append(line)
    return "\n".join(out).replace("SPECDEC_API", "")


def header_version(header_text: str) -> str | None:
    m = re.search(r'#\s*define\s+SPECDEC_VERSION_STRING\s+"([^"]*)"', header_text)
    return m.group(1) if m else None


class _Binding:
    def __init__(self):
        lib_path = _paths.library_path()
        if lib_path is None:
            raise ImportError("specdec: libspecdec not found (not in the installed package, no build/ in a source "
                              "checkout); set SPECDEC_LIBRARY to the libspecdec.so file")
        hdr = _paths.header_path(lib_path)
        if hdr is None:
            raise ImportError(f"specdec: specdec.h not found for {lib_path}; set SPECDEC_HEADER")
        with open(hdr, encoding="utf-8") as f:
            self.header_text = f.read()
        self.header = hdr
        self.library = lib_path
        self.ffi = cffi.FFI()
        self.ffi.cdef(cdef_source(self.header_text))
        self.lib = self.ffi.dlopen(lib_path)
        have = self.ffi.string(self.lib.specdec_version_string()).decode()
        want = header_version(self.header_text)
        if have != want:
            raise ImportError(f"specdec: {lib_path} is version {have} but its header {hdr} says {want}")
        self.version = have
        st = self.ffi.typeof("specdec_status")
        self.status_names = dict(st.elements)  # value -> "SPECDEC_ERR_..."
        self.status_values = dict(st.relements)  # name -> value

    # ---- helpers --------------------------------------------------------------------------------
    def enum_value(self, enum: str, name: str) -> int:
        return self.ffi.typeof(enum).relements[name]

    def enum_name(self, enum: str, value: int) -> str | None:
        return self.ffi.typeof(enum).elements.get(value)

    def has_field(self, struct: str, field: str) -> bool:
        return any(n == field for n, _ in self.ffi.typeof(struct).fields)

    def string(self, cptr) -> str:
        return "" if cptr == self.ffi.NULL else self.ffi.string(cptr).decode("utf-8", "replace")

    def error(self, status: int, detail: str = "", context: str = "") -> SpecdecError:
        """The SpecdecError subclass of `status`; its message is "context: detail" (the library's
        detail, or the status's description when there is none)."""
        name = self.status_names.get(status, f"SPECDEC_STATUS_{status}")
        if not detail:
            desc = self.string(self.lib.specdec_status_string(status))
            detail = desc.split(": ", 1)[1] if desc.startswith(name + ": ") else desc
        msg = f"{context}: {detail}" if context else detail
        cls = BY_STATUS_NAME.get(name, SpecdecError)
        return cls(msg, status, name)

    def check(self, status: int, detail_fn=None, context: str = "") -> None:
        """Raise the status's SpecdecError subclass unless it is SPECDEC_OK."""
        if status != 0:
            raise self.error(status, self.string(detail_fn()) if detail_fn else "", context)


_binding = None
_lock = threading.Lock()


def binding() -> _Binding:
    """The process's binding (header parsed and library opened on first use)."""
    global _binding
    if _binding is None:
        with _lock:
            if _binding is None:
                _binding = _Binding()
    return _binding

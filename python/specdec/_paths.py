"""Where the package finds libspecdec, its header, the `specdec` program and the bundled models.

An installed package (pip install .) carries all four inside itself: lib/libspecdec.so*,
include/specdec.h, bin/specdec and models/kjv-{target,draft}. Run from a source checkout
(PYTHONPATH=python) it uses the repository's include/ and models/ and a CMake build tree
(build/ by default). Environment variables override each lookup:
SPECDEC_LIBRARY (the shared library file), SPECDEC_HEADER, SPECDEC_BIN, SPECDEC_MODELS_DIR
(a folder holding kjv-target/ and kjv-draft/).
"""
from __future__ import annotations

import glob
import os

_PKG = os.path.dirname(os.path.abspath(__file__))
# python/specdec -> the repository root, when run from a source checkout
_REPO = os.path.dirname(os.path.dirname(_PKG))


def _first_existing(cands):
    for c in cands:
        if c and os.path.exists(c):
            return c
    return None


def library_path() -> str | None:
    env = os.environ.get("SPECDEC_LIBRARY")
    if env:
        return env
    cands = sorted(glob.glob(os.path.join(_PKG, "lib*", "libspecdec.so*")))
    cands += [os.path.join(_REPO, "build", "libspecdec.so")]
    return _first_existing(cands)


def header_path(library: str | None = None) -> str | None:
    env = os.environ.get("SPECDEC_HEADER")
    if env:
        return env
    cands = [os.path.join(_PKG, "include", "specdec.h"), os.path.join(_REPO, "include", "specdec.h")]
    if library:
        cands.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(library))), "include",
                                  "specdec.h"))
    return _first_existing(cands)


def binary_path() -> str | None:
    env = os.environ.get("SPECDEC_BIN")
    if env:
        return env
    return _first_existing([os.path.join(_PKG, "bin", "specdec"), os.path.join(_REPO, "build", "specdec")])


def library_dir() -> str | None:
    lib = library_path()
    return os.path.dirname(os.path.abspath(lib)) if lib else None


def models_dir() -> str | None:
    """The folder holding the bundled pair (kjv-target/, kjv-draft/), or None."""
    env = os.environ.get("SPECDEC_MODELS_DIR")
    cands = [env] if env else []
    cands += [os.path.join(_PKG, "models"), os.path.join(_REPO, "models")]
    for c in cands:
        if c and os.path.isfile(os.path.join(c, "kjv-target", "config.json")):
            return c
    return None


def bundled_pair() -> tuple[str, str]:
    """(target_dir, draft_dir) of the bundled KJV pair; FileNotFoundError naming where it looked."""
    d = models_dir()
    if d is None:
        raise FileNotFoundError(
            "the bundled model pair (kjv-target, kjv-draft) is neither in the installed package "
            f"({os.path.join(_PKG, 'models')}) nor in a source checkout ({os.path.join(_REPO, 'models')}); "
            "set SPECDEC_MODELS_DIR or pass model=...")
    return os.path.join(d, "kjv-target"), os.path.join(d, "kjv-draft")

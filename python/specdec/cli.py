"""The `specdec` program shipped in the package: `specdec ...` (console script) and
`python -m specdec.serve ...` exec it. generate, batch and serve without -m get the bundled pair."""
from __future__ import annotations

import os
import sys

from . import _paths

_PAIR_COMMANDS = ("generate", "batch", "serve")


def command_line(argv: list) -> list:
    """The argv to exec: the program, then argv, with -m/-md for the bundled pair when absent."""
    binary = _paths.binary_path()
    if binary is None:
        raise FileNotFoundError("specdec: the `specdec` program is neither in the installed package nor in a "
                                "source checkout's build/; set SPECDEC_BIN")
    args = list(argv)
    if args and args[0] in _PAIR_COMMANDS and not any(a in ("-m", "--model") for a in args):
        target, draft = _paths.bundled_pair()
        extra = ["-m", target]
        if not any(a in ("-md", "--model-draft") for a in args):
            extra += ["-md", draft]
        args[1:1] = extra
    return [binary, *args]


def exec_cli(argv: list) -> None:
    cmd = command_line(argv)
    env = dict(os.environ)
    libdir = _paths.library_dir()
    if libdir:  # the program finds the package's libspecdec whatever its run path says
        env["LD_LIBRARY_PATH"] = libdir + (os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(cmd[0], cmd, env)


def main() -> None:
    exec_cli(sys.argv[1:])


if __name__ == "__main__":
    main()

"""python -m specdec.serve [specdec serve options]: exec the `specdec serve` program.

Without -m/--model it serves the bundled pair shipped with the package (as `specdec serve` does
from a source tree). Every option is `specdec serve`'s (README, "Serving").
"""
import sys

from .cli import exec_cli

if __name__ == "__main__":
    exec_cli(["serve", *sys.argv[1:]])

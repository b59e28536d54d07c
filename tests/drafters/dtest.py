"""dtest.py — what the drafter tests' Python scripts share: the counted check, the
arguments (SPECDEC_BINARY MODELS_DIR [--quick]) and the exit status."""
import sys

BIN, MODELS = sys.argv[1], sys.argv[2]
QUICK = "--quick" in sys.argv[3:]
TARGET, DRAFT = f"{MODELS}/kjv-target", f"{MODELS}/kjv-draft"
counts = {"passed": 0, "failed": 0}


def check(cond, what):
    counts["passed" if cond else "failed"] += 1
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)


def finish():
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    sys.exit(1 if counts["failed"] else 0)

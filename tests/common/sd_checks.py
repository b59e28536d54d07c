"""sd_checks.py — the check counter of the Python tests (the C tests' sd_test.h):
check(cond, what) records a pass or prints "FAIL: what" and goes on; done() prints
"N passed, N failed" and returns the exit code. Import with
    sys.path.insert(0, <source>/tests/common); from sd_checks import check, done"""
import sys

_counts = {"passed": 0, "failed": 0}


def check(cond, what):
    if cond:
        _counts["passed"] += 1
    else:
        _counts["failed"] += 1
        print(f"FAIL: {what}", file=sys.stderr)
    return bool(cond)


def done():
    print(f"{_counts['passed']} passed, {_counts['failed']} failed")
    return 1 if _counts["failed"] else 0

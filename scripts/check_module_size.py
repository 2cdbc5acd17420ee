"""Fail when a module under src/ grows past the hard cap of 800 lines."""

import pathlib
import sys

LIMIT = 800

too_big = [
    (path, n)
    for path in sorted(pathlib.Path("src").rglob("*.py"))
    if (n := len(path.read_text().splitlines())) > LIMIT
]
for path, n in too_big:
    print(f"{path}: {n} lines (limit {LIMIT}); split it by what it holds")
sys.exit(1 if too_big else 0)

"""What the machine is like while a benchmark runs: cores, load, and how fast it runs plain Python right now.

The 2-core machine this project measures on is a virtual machine whose speed drifts with its
host's load: the same single-threaded loop ran a third slower at one time of a day than at
another, with nothing else running here. A figure is only comparable with another taken at a
similar speed, so the benchmarks print this line beside theirs.
"""

from __future__ import annotations

import os
import time


def python_speed(iterations: int = 2_000_000) -> float:
    """Nanoseconds per iteration of a plain Python loop (CPU time; the best of three)."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        total = 0
        for i in range(iterations):
            total += i
        best = min(best, time.process_time() - start)
    return best / iterations * 1e9


def describe() -> str:
    """``2 cores, load average 0.31 0.52 1.40, plain Python 37 ns/iteration``."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, load average {load}, plain Python {python_speed():.0f} ns/iteration"

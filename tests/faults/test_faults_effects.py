"""Acceptance (effect journal): SIGKILL at every await point of a two-step tool turn, then recover.

The turn: an approved ``book`` call whose tool does ``ctx.step("reserve")`` then
``ctx.step("charge")`` (each appends one line to an append-only "external effects" file,
as a keyed payment API would), then a model call, then the fenced commit. The worker is
killed at each of the eleven points of ``effects_worker.POINTS``, attached and detached,
ten runs each, for a plain tool and for an ``idempotent=True`` one against a service that
dedupes by key. After the killed worker's lease lapses (``claim_ttl=1``) the test resumes;
an in-doubt pause is answered as a person would after reading the effects file (restart if
the charge did not happen, respond if it did).

Asserted on every run: 0 silent repeats (an effect repeats only for a step the journal never
recorded, after a person's restart asked for it); an idempotent tool against a deduping
service takes effect exactly once per step; every call in doubt (its intent journaled, no
outcome) surfaces as an in-doubt interrupt before anything runs, unless the tool is
idempotent; no turn is lost (the session's latest snapshot is completed and holds the tool's
result); the file passes ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import pathlib
import time

import pytest
from effects_worker import POINTS, effect_runs, render, table

pytestmark = pytest.mark.slow

RUNS = 10


async def test_a_killed_two_step_tool_turn_never_repeats_an_effect_silently_nor_loses_the_turn(
    tmp_path: pathlib.Path,
) -> None:
    start = time.monotonic()
    runs = await effect_runs(tmp_path, runs=RUNS, parallel=12)
    print(f"\n{render(*table(runs))}\n{len(runs)} runs in {time.monotonic() - start:.1f} s")
    assert len(runs) == 2 * len(POINTS) * 2 * RUNS
    problems = [f"{r.variant} {r.point} {r.mode}: {p}" for r in runs for p in r.problems]
    assert problems == [], "\n".join(problems)
    assert sum(r.silent_repeats for r in runs) == 0
    assert not any(r.lost for r in runs)
    in_doubt = [r for r in runs if r.status_at_kill == "running"]
    assert in_doubt and all(r.in_doubt for r in in_doubt if r.variant == "asks")
    assert all(r.auto_retried for r in in_doubt if r.variant == "idempotent")
    assert all(set(r.counts.values()) == {1} for r in runs if r.variant == "idempotent")
    # the only repeats: a reserve done but never journaled, retried because a person said "run it again"
    assert {r.point for r in runs if r.retried_after_asking} <= {"reserve-effect"}

"""What a detached turn's pending snapshot carries for the worker that runs it.

A turn detached to a worker queue (:mod:`interlock.workers`) is written as a ``pending``
snapshot before its job is enqueued. Besides the usual fields (session, parent, agent),
its ``metadata.handoff`` holds what no other row has: the turn's input (the message or
the resume, as Genkit JSON) and the caller's context (its JSON values: identity, tenant,
...; what tools see as ``ctx.context`` and what the audit record's ``by`` is read from). The
worker reads the turn from the store alone: the job names only the snapshot.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, cast

from .._wire import input_from_json, input_to_json
from ..errors import FailedPreconditionError
from ..metadata import HANDOFF
from ..records._sessions import Snapshot
from .io import AgentInput


def handoff_metadata(input: AgentInput, context: dict[str, Any], *, named: str | None = None) -> dict[str, Any]:
    """The metadata entry a pending snapshot carries for its worker (context values that are not JSON are left out).

    ``named`` is the snapshot id the caller named (``None`` for a resume by session id).
    """
    data = {"input": input_to_json(replace(input, detach=False)), "context": _json_values(context)}
    return {HANDOFF: data if named is None else {**data, "named": named}}


def handoff_named(snap: Snapshot) -> str | None:
    """The snapshot id the caller of a handed-off turn named (``None``: it resumed by session id)."""
    found = (snap.metadata or {}).get(HANDOFF)
    named = cast(dict[str, Any], found).get("named") if isinstance(found, dict) else None
    return named if isinstance(named, str) else None


def read_handoff(snap: Snapshot) -> tuple[AgentInput, dict[str, Any]]:
    """The input and context a pending snapshot carries.

    Raises:
        FailedPreconditionError: the snapshot carries none (it was not detached to a worker queue).
    """
    found = (snap.metadata or {}).get(HANDOFF)
    if not isinstance(found, dict):
        raise FailedPreconditionError(
            f"snapshot {snap.snapshot_id} carries no handed-off input: it was not detached to a worker queue"
        )
    data = cast(dict[str, Any], found)
    context = data.get("context")
    return input_from_json(data.get("input")), cast(dict[str, Any], context) if isinstance(context, dict) else {}


def _json_values(context: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in context.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        kept[key] = value
    return kept

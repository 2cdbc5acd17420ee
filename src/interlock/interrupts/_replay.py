"""Spent client states: a client-managed agent given ``Host(spent_tokens=store)`` answers each interrupt once.

A signed client-managed state (:mod:`interlock.interrupts._signing`) proves the agent handed it out,
not that it was never used: without a store, the same approved state sent twice runs the
tool twice. An agent built with ``host=Host(state_signing=Keyring(...), spent_tokens=store)``
spends a nonce per paused state when a resume of it is accepted (validated, before
anything runs), in one atomic write of ``store``, and refuses a second resume of the same
paused state with ``PERMISSION_DENIED`` (``details["reason"] == "replayed"``), nothing run.

It is the single-use rule of resume tokens (:func:`interlock.records.snapshots.refuse_spent`): the
nonce is recorded in ``metadata.consumedTokens`` of a row of ``store`` (one per paused
state, with no session state in it), and the same function refuses it. The nonce is a
digest of what the signature covers of the pause (agent, session id, the paused
message and its position), so re-signing the same paused state (a failed turn's output)
does not make it fresh. A resume once accepted stays spent, also when its turn then
fails: the tool may have run.
"""

from __future__ import annotations

import hashlib
import json

from .._wire import message_to_json
from ..records._sessions import SessionState
from ..records.snapshots import spend_nonce
from ..stores import SnapshotStore


def pause_nonce(agent: str, state: SessionState) -> str:
    """The nonce of ``state``'s pause: a digest of the agent, the session and the paused (last) message."""
    last = state.messages[-1] if state.messages else None
    body = [agent, state.session_id, len(state.messages), None if last is None else message_to_json(last)]
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "pause-" + hashlib.sha256(text.encode()).hexdigest()


async def spend_pause(store: SnapshotStore, agent: str, state: SessionState, *, tenant: str | None) -> None:
    """Spend the nonce of ``state``'s pause in ``store``; raises PERMISSION_DENIED (``replayed``) if it was."""
    nonce = pause_nonce(agent, state)
    await store.save(nonce, spend_nonce(nonce, session_id=state.session_id or nonce, agent=agent), tenant=tenant)

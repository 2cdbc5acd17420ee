"""Host: where and how an agent is deployed, one validated value the engine reads.

An agent's own parameters say what it does (model, instructions, tools); its ``store``
says where its sessions live. Everything else about running it (claims and heartbeats,
signed state and resume tokens, webhooks, workers, what callers may see) is a
:class:`Host`::

    from interlock.agents._host import Host
    from interlock.interrupts._tokens import TokenSigner

    agent = PromptAgent("bank", model, tools=[transfer], store=store,
                        host=Host(resume_tokens=TokenSigner(key), notify=True))

The combination rules are checked once: a host's own in its constructor, and those that
depend on the store when an agent takes the host (:meth:`Host.check`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

from .._engine.io import StreamChunk
from ..errors import UsageError
from ..records._sessions import SessionState, Snapshot

if TYPE_CHECKING:
    from ..interrupts._signing import Keyring
    from ..interrupts._tokens import TokenSigner
    from ..stores import SessionStore, SnapshotStore


class DetachTarget(Protocol):
    """Where an agent hands its detached turns (:class:`interlock.workers.WorkerQueue` is one)."""

    async def hand_off(self, store: SnapshotStore, pending: Snapshot, tenant: str | None) -> None:
        """Write the pending row ``pending`` and the job that runs it, in one transaction of ``store``."""
        ...

    async def abort(self, snapshot_id: str, tenant: str | None) -> int: ...


StateTransform: TypeAlias = Callable[[SessionState], SessionState]
"""Egress-only: rewrites state before it leaves the agent (outputs, snapshots read through the agent)."""
ChunkTransform: TypeAlias = Callable[[StreamChunk], StreamChunk | None]
"""Egress-only: rewrites (or drops, by returning ``None``) each stream chunk."""

_SPENT_TOKENS = (
    "spent_tokens is for client-managed agents with state_signing (a server-managed agent spends "
    "resume tokens in its own store; unsigned state can be altered to look unspent)"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Host:
    """The deployment settings of an agent (every one optional); give it as ``host=``.

    Raises:
        UsageError: a setting out of range, or settings that do not go together.
    """

    claim_ttl: float = 60.0
    """Seconds a resume's claim on an interrupted snapshot lasts without refresh (a crashed
    resumer's claim expires after this)."""
    heartbeat_interval: float = 30.0
    """Seconds between heartbeats of a detached turn."""
    state_signing: Keyring | None = None
    """For a client-managed agent: sign the state it hands out and refuse state it did not sign
    (:class:`interlock.interrupts.Keyring`). Without it the caller controls client-managed state entirely."""
    spent_tokens: SnapshotStore | None = None
    """For a client-managed agent with ``state_signing``: a store where each paused state's resume is
    spent, so the same state sent back twice is refused (PERMISSION_DENIED, ``replayed``;
    :mod:`interlock.interrupts._replay`). Without it a signed state can be replayed: each copy runs the resume again."""
    resume_tokens: TokenSigner | None = None
    """For a server-managed agent: mint a signed, single-use, expiring token into every pending
    interrupt (:class:`interlock.interrupts.TokenSigner`); tokens that come back are checked."""
    require_resume_tokens: bool = False
    """Refuse (PERMISSION_DENIED) every resume entry without a valid token for the interrupt it answers."""
    notify: bool = False
    """For a server-managed agent: write webhook events (``interrupt.created``, ``interrupt.answered``,
    ...; :func:`interlock._engine.commit.commit_events`) to the store's outbox in the same transaction as each turn's
    snapshot; :mod:`interlock.notify._webhooks` delivers them."""
    detach_to: DetachTarget | None = None
    """Where detached turns run (:class:`interlock.workers.WorkerQueue`: ``interlock worker``
    processes); without it they run in this process. A detach sent while a turn already runs here
    keeps that turn here."""
    state_transform: StateTransform | None = None
    """Egress-only rewrite of state that leaves the agent (outputs, snapshots read through it)."""
    chunk_transform: ChunkTransform | None = None
    """Egress-only rewrite (or drop, by returning ``None``) of each stream chunk."""

    def __post_init__(self) -> None:
        for name in ("claim_ttl", "heartbeat_interval"):
            value: object = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise UsageError(f"Host({name}=...) is a number of seconds above 0, got {value!r}")
        if self.require_resume_tokens and self.resume_tokens is None:
            raise UsageError("require_resume_tokens needs resume_tokens=TokenSigner(...) to mint and check them")
        if self.spent_tokens is not None and self.state_signing is None:
            raise UsageError(_SPENT_TOKENS)

    def check(self, store: SessionStore | None) -> None:
        """Refuse a host that does not fit an agent with ``store`` (server-managed) or without one.

        Raises:
            UsageError: a client-managed setting with a store, or a server-managed one without.
        """
        if store is not None:
            if self.state_signing is not None:
                raise UsageError(
                    "state_signing is for client-managed agents (no store); a store keeps the state itself"
                )
            if self.spent_tokens is not None:
                raise UsageError(_SPENT_TOKENS)
            return
        if self.resume_tokens is not None:
            raise UsageError("resume_tokens are for server-managed agents: a token binds a stored snapshot")
        if self.notify:
            raise UsageError("notify=True needs a store: webhook events are written to the store's outbox")
        if self.detach_to is not None:
            raise UsageError("detach_to needs a store: the worker reads the detached turn from the store")

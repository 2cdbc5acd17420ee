"""The approval inbox: interrupts waiting for an answer across sessions, their answers, and the audit trail.

::

    async with open_store("sqlite:///sessions.db") as store:
        inbox = Inbox(store, agents=[banker, ops])
        for item in await inbox.pending(older_than=timedelta(minutes=10)):
            print(item.agent, item.tool, item.data)
        await inbox.approve(snapshot_id, identity="alice")
        print(await inbox.audit(session_id))   # who answered what, and when

A snapshot waits when its turn ended ``interrupted``, it is ``completed``, its session did
not go on from it (no ``completed`` snapshot of the session names it as its parent), and no
resume holds it (:func:`interlock.records.snapshots.claim_state`: a claim whose resumer crashed or
stalled lapses after the agent's ``claim_ttl``; answering then takes it over). Every store
keeps an index of exactly those calls (:mod:`interlock.records._interrupt_index`), which
:meth:`Inbox.pending` reads. An answer runs through the agent named
in the snapshot with ``context={"identity": ..., "tenant": ...}``: the resumed snapshot's
``metadata["resume"]`` records who answered and when, and a second answer fails (``ABORTED``).

Each verb is a thin constructor of a :class:`~interlock.interrupts.Decision`; what it does
depends on what paused the call:

=======  ========================  ==========================  ==============================
verb     a tool-approval hold      the tool's own interrupt    an in-doubt call
                                                               (:attr:`PendingInterrupt
                                                               .in_doubt`)
=======  ========================  ==========================  ==============================
approve  :func:`~interlock         restart with ``payload``    *run it again*: a restart with
         .middleware.approve`:     (default ``{"approved":     the same idempotency key,
         the tool runs             true}``)                    carrying the payload it had
                                                               (``payload`` replaces it)
reject   :func:`~interlock         restart with ``payload``    *skip it*: respond with
         .middleware.deny`: the    (default ``{"approved":     ``output`` (default
         tool never runs;          false}``), or respond with  ``{"skipped": true,
         ``output`` is the note    ``output`` when given       "message": ...}``); the tool
         the model sees                                        does not run
respond  ``output`` answers the    ``output`` answers the      *it did happen*: the journal
         call; no decision label   call; no decision label     records ``output`` as the
                                                               call's result (``done``)
=======  ========================  ==========================  ==============================

A restart from approve carries the approval marker ``toolApproved: true`` and one from
reject ``toolApproved: false`` (tools never see it; the audit records the decision
``approve``/``deny``, and a ``tool_approval`` middleware around the tool lets an approved
restart through); a respond from reject is marked ``deny``. An in-doubt call's attempt
history is its :class:`~interlock.records.JournalEntry` (:meth:`Inbox.journal_entry`).

A marker needs a JSON object payload: a scalar payload (``True`` for a ``bool`` tool)
travels as is, and the audit labels it only through the tool's declared ``approval`` rule.

A resume answers every interrupt of the paused turn, so approve, reject, respond and
:meth:`Inbox.answer` need a snapshot with one interrupt (``ref``/``tool`` confirm which);
:meth:`Inbox.answer_all` answers several at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .. import metadata as md
from .._engine.io import AgentOutput
from .._json_object import is_object
from ..errors import (
    ClaimConflictError,
    FailedPreconditionError,
    InvalidArgumentError,
    SnapshotNotFoundError,
    UnimplementedError,
    UsageError,
)
from ..interrupts._plan import Resume
from ..parts import ToolRequestPart, ToolResponsePart
from ..records._interrupt_index import InterruptQuery, entries_of
from ..records._journal import JournalEntry
from ..records._sessions import Snapshot, utcnow
from ..records.snapshots import claim_state
from ..stores import SessionStore
from ._answers import Answer, Approve, Reject, Respond, entry, match_all
from ._answers import Edit as Edit
from ._answers import Restart as Restart
from ._extend import extend
from ._items import AuditAnswer as AuditAnswer
from ._items import AuditEntry, PendingInterrupt, ResumableAgent, agent_of, pending_item, vote_entries

T = TypeVar("T")


class Inbox:
    """Pending interrupts across the sessions of a store, their answers, and the audit trail.

    Args:
        store: where the snapshots are; ``None`` for an inbox that only answers, through
            one agent (e.g. a :class:`~interlock.http.RemoteAgent`: Genkit's protocol
            cannot list snapshots, so :meth:`pending` needs a store).
        agents: the agents that resume answered snapshots, by name (a sequence uses each
            agent's ``name``); give every agent whose snapshots you answer.
    """

    def __init__(
        self, store: SessionStore | None, *, agents: Mapping[str, ResumableAgent] | Sequence[ResumableAgent] = ()
    ) -> None:
        self.store = store
        self.agents: dict[str, ResumableAgent] = dict(agents) if isinstance(agents, Mapping) else {}
        for agent in agents if not isinstance(agents, Mapping) else ():
            if agent.name in self.agents:
                raise UsageError(f"two agents are named {agent.name!r}; pass a dict to name them apart")
            self.agents[agent.name] = agent

    # reading ---------------------------------------------------------------------------------

    async def pending(
        self,
        *,
        agent: str | None = None,
        tool: str | None = None,
        tenant: str | None = None,
        older_than: timedelta | None = None,
        newer_than: timedelta | None = None,
        in_doubt: bool | None = None,
        session_id: str | None = None,
        newest_first: bool = False,
        after: tuple[datetime, str] | None = None,
        limit: int | None = None,
        now: datetime | None = None,
    ) -> list[PendingInterrupt]:
        """Interrupts waiting for an answer in ``tenant``'s sessions, the longest-waiting first.

        Filters: the snapshot's ``agent``, the paused ``tool``, the age of the paused turn
        (``older_than``: at least that old; ``newer_than``: younger than that), measured at
        ``now`` (default: the current time), ``in_doubt`` (``True``: only in-doubt calls,
        ``False``: none of them, ``None``: all) and ``session_id``.

        Paging: ``newest_first`` reverses the order; ``after`` is the ``(created_at,
        snapshot_id)`` of the last item of the previous page (:attr:`PendingInterrupt.position`);
        ``limit`` stops once that many interrupts were found (a snapshot's interrupts are
        never split across pages). It reads the store's index of open interrupts
        (:mod:`interlock.records._interrupt_index`), filtered and paged in the query: no snapshot is loaded.
        """
        store = self._require_store("listing pending interrupts")
        now = now or utcnow()
        query = InterruptQuery(
            now=now,
            agent=agent,
            tool=tool,
            session_id=session_id,
            in_doubt=in_doubt,
            created_before=None if older_than is None else now - older_than,
            created_after=None if newer_than is None else now - newer_than,
            newest_first=newest_first,
            after=after,
            limit=limit,
        )
        return [pending_item(e, now, tenant, e.agent) for e in await store.open_interrupts(query, tenant=tenant)]

    async def get(self, snapshot_id: str, *, tenant: str | None = None) -> list[PendingInterrupt]:
        """The interrupts ``snapshot_id`` waits on; raises when it waits on none.

        Raises:
            SnapshotNotFoundError: no such snapshot (in ``tenant``).
            ClaimConflictError: it was already answered (``ABORTED``).
            FailedPreconditionError: its turn did not pause, or the session went on from it.
        """
        missing = f"no pending interrupt with snapshot id {snapshot_id}"
        if self.store is None:
            only = self._sole_agent()
            try:
                snap = await only.get_snapshot(snapshot_id, context=_context(None, tenant))
            except SnapshotNotFoundError:
                snap = None
        else:
            snap = await self.store.load(snapshot_id, tenant=tenant)
        if snap is None:
            raise SnapshotNotFoundError(
                f"{missing}: there is no such snapshot" + (f" in tenant {tenant!r}" if tenant else "")
            )
        _refuse_taken(snap, missing)
        status = snap.read_status()
        if status != "completed" or not snap.interrupts:
            how = f"is {status}" if status != "completed" else f"finished with {snap.finish_reason or 'no reason'!r}"
            raise FailedPreconditionError(f"{missing}: its turn {how}")
        delegator = (snap.metadata or {}).get(md.DELEGATED_BY)
        if is_object(delegator):
            raise FailedPreconditionError(
                f"{missing}: it is a sub-agent's turn, delegated by session "
                f"{delegator.get('sessionId')}; answer it there, where it is surfaced"
            )
        if self.store is not None:
            await self._check_open(self.store, snap, tenant, missing)
        agent = agent_of(snap) or (None if self.store is not None else self._sole_agent().name)
        return _items(snap, utcnow(), tenant, agent)

    async def _check_open(self, store: SessionStore, snap: Snapshot, tenant: str | None, missing: str) -> None:
        """Refuse ``snap`` when the index no longer lists it and the session went on from it.

        An answer that won meanwhile is what took it out of the index: its claim, read again
        here, refuses this one as a second answer (``ABORTED``), not as a session that went on.
        A claim taken meanwhile with no child yet: go on (the claim decides).
        """
        if await store.open_interrupts(InterruptQuery(now=utcnow(), snapshot_id=snap.snapshot_id), tenant=tenant):
            return
        infos = await store.list(tenant=tenant, session_id=snap.session_id)
        went_on = (i.snapshot_id for i in infos if i.parent_id == snap.snapshot_id and i.status == "completed")
        child = next(went_on, None)
        if child is None:
            return
        now = await store.load(snap.snapshot_id, tenant=tenant)
        if now is not None:
            _refuse_taken(now, missing)
        raise FailedPreconditionError(f"{missing}: the session went on from it (snapshot {child})")

    async def audit(self, session_id: str, *, tenant: str | None = None) -> list[AuditEntry]:
        """Every resume of a session, and every quorum vote, in time order: who answered which calls, and when."""
        store = self._require_store("reading the audit trail")
        entries: list[AuditEntry] = []
        for info in await store.list(tenant=tenant, session_id=session_id):
            snap = await store.load(info.snapshot_id, tenant=tenant)
            if snap is None:
                continue
            entries.extend(vote_entries(snap))
            entry = AuditEntry.from_snapshot(snap) if info.parent_id is not None else None
            if entry is not None:
                entries.append(entry)
        return sorted(entries, key=lambda e: (e.at is None, e.at or datetime.min, e.snapshot_id))

    async def audit_all(self, *, tenant: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """The newest ``limit`` resumes across the store (every session of ``tenant``), newest first."""
        store = self._require_store("reading the audit trail")
        entries: list[AuditEntry] = []
        for info in await store.list(tenant=tenant):  # newest first
            if len(entries) >= limit:
                break
            snap = await store.load(info.snapshot_id, tenant=tenant) if info.parent_id else None
            entry = AuditEntry.from_snapshot(snap) if snap is not None else None
            if entry is not None:
                entries.append(entry)
        return entries

    async def journal(self, session_id: str, *, tenant: str | None = None) -> list[JournalEntry]:
        """The effect journal of a session: one entry per tool call, with its attempts, oldest first."""
        store = self._require_store("reading the effect journal")
        return await store.journal_entries(session_id=session_id, tenant=tenant)

    async def journal_entry(self, item: PendingInterrupt) -> JournalEntry | None:
        """The journal entry of a pending call, with its attempt history; ``None`` when it has none.

        An in-doubt call is found by its idempotency key; a call the tool paused itself, by
        the attempt that paused in the item's snapshot. A hold has none (the tool has not run).
        """
        store = self._require_store("reading the effect journal")
        if item.idempotency_key is not None:
            return await store.journal_get(item.idempotency_key, tenant=item.tenant)
        if item.is_hold:
            return None
        found = [
            e
            for e in await store.journal_entries(session_id=item.session_id, tenant=item.tenant)
            if e.tool == item.tool
            and (e.ref or None) == (item.ref or None)
            and any(a.get("turn") == item.snapshot_id for a in e.attempts)
        ]
        return found[-1] if found else None

    # answering -------------------------------------------------------------------------------

    async def approve(
        self,
        snapshot_id: str,
        *,
        ref: str | None = None,
        tool: str | None = None,
        payload: Any = None,
        identity: Any = None,
        tenant: str | None = None,
    ) -> AgentOutput:
        """Approve the snapshot's interrupt (see the module docs for how) and return the resumed turn's output."""
        return await self.answer(snapshot_id, Approve(payload), ref=ref, tool=tool, identity=identity, tenant=tenant)

    async def reject(
        self,
        snapshot_id: str,
        *,
        ref: str | None = None,
        tool: str | None = None,
        payload: Any = None,
        output: Any = None,
        identity: Any = None,
        tenant: str | None = None,
    ) -> AgentOutput:
        """Reject the snapshot's interrupt (see the module docs for how) and return the resumed turn's output."""
        return await self.answer(
            snapshot_id, Reject(payload, output), ref=ref, tool=tool, identity=identity, tenant=tenant
        )

    async def respond(
        self,
        snapshot_id: str,
        output: Any,
        *,
        ref: str | None = None,
        tool: str | None = None,
        identity: Any = None,
        tenant: str | None = None,
    ) -> AgentOutput:
        """Answer the snapshot's interrupt with ``output`` (the tool does not run)."""
        return await self.answer(snapshot_id, Respond(output), ref=ref, tool=tool, identity=identity, tenant=tenant)

    async def answer_all(
        self,
        snapshot_id: str,
        answers: Answer | Mapping[str, Answer],
        *,
        identity: Any = None,
        tenant: str | None = None,
        tokens: Mapping[str, str] | None = None,
    ) -> AgentOutput:
        """Answer every interrupt of a snapshot in one resume.

        ``answers`` is one answer for all, or a mapping from a ref (or a tool name: every
        call to that tool) to an answer, which must cover every interrupt. ``tokens`` maps a
        ref to the resume token its answer carries (an answer link's); by default, the stored one.
        """
        agent, resume = await self.resume_for(snapshot_id, answers, tenant=tenant, tokens=tokens)
        return await agent.run(resume=resume, snapshot_id=snapshot_id, context=_context(identity, tenant))

    async def resume_for(
        self,
        snapshot_id: str,
        answers: Answer | Mapping[str, Answer],
        *,
        tenant: str | None = None,
        tokens: Mapping[str, str] | None = None,
    ) -> tuple[ResumableAgent, Resume]:
        """The agent and the resume :meth:`answer_all` runs, without running it (a protocol adapter streams it).

        The same checks as :meth:`answer_all`: the snapshot waits (:meth:`get`), the answers
        cover its interrupts, each token names one of them.
        """
        items = await self.get(snapshot_id, tenant=tenant)
        unknown = sorted(set(tokens or {}) - {i.ref for i in items if i.ref})
        if unknown:
            raise InvalidArgumentError(f"snapshot {snapshot_id} has no interrupt with ref {unknown[0]!r} for a token")
        pairs = [
            (_carrying(item, (tokens or {}).get(item.ref or "")), a)
            for item, a in match_all(snapshot_id, items, answers)
        ]
        return self._resume_of(snapshot_id, pairs)

    async def answer(
        self,
        snapshot_id: str,
        answer: Answer,
        *,
        ref: str | None = None,
        tool: str | None = None,
        identity: Any = None,
        tenant: str | None = None,
        token: str | None = None,
    ) -> AgentOutput:
        """Give ``answer`` to the snapshot's interrupt (``ref``/``tool`` pick it when it waits on several).

        ``token`` is the resume token the answer carries (an answer link's, :mod:`interlock.interrupts._tokens`);
        by default, the one stored with the interrupt.
        """
        items = await self.get(snapshot_id, tenant=tenant)
        picked = [i for i in items if ref in (None, i.ref) and tool in (None, i.tool)]
        waits = f"snapshot {snapshot_id} waits on {', '.join(i.label for i in items)}"
        if not picked:
            raise InvalidArgumentError(
                f"{waits}; none matches" + f" ref {ref!r}" * bool(ref) + f" tool {tool!r}" * bool(tool)
            )
        if len(items) > 1:
            raise UsageError(f"{waits}; a resume answers all of them at once: use answer_all (command line: --all)")
        return await self._resume(snapshot_id, [(_carrying(picked[0], token), answer)], identity, tenant)

    async def extend(
        self,
        snapshot_id: str,
        *,
        by: timedelta | None = None,
        until: datetime | None = None,
        ref: str | None = None,
        tool: str | None = None,
        identity: Any = None,
        tenant: str | None = None,
    ) -> datetime:
        """Move the deadline of the snapshot's interrupt (``by`` more, or ``until``); returns the new deadline.

        Whoever may answer the call may extend it (its answer policy; anyone without one); the
        extension is audited (``metadata.extended``: who, when, from, to) and its timers move with it
        (:mod:`interlock.inbox._extend`). Raises PERMISSION_DENIED with the policy's reason.
        """
        store = self._require_store("extending a deadline")
        items = await self.get(snapshot_id, tenant=tenant)
        picked = [i for i in items if ref in (None, i.ref) and tool in (None, i.tool)]
        if len(picked) != 1:
            raise InvalidArgumentError(
                f"snapshot {snapshot_id} waits on {', '.join(i.label for i in items)}; name one with ref or tool"
            )
        agent = self.agents.get(picked[0].agent or "")
        return await extend(store, picked[0], agent, by=by, until=until, identity=identity, tenant=tenant)

    async def _resume(
        self, snapshot_id: str, pairs: list[tuple[PendingInterrupt, Answer]], identity: Any, tenant: str | None
    ) -> AgentOutput:
        agent, resume = self._resume_of(snapshot_id, pairs)
        return await agent.run(resume=resume, snapshot_id=snapshot_id, context=_context(identity, tenant))

    def _resume_of(
        self, snapshot_id: str, pairs: list[tuple[PendingInterrupt, Answer]]
    ) -> tuple[ResumableAgent, Resume]:
        agent = self._agent_named(snapshot_id, pairs[0][0].agent)
        entries = [entry(item, answer, agent) for item, answer in pairs]
        resume = Resume(
            respond=[e for e in entries if isinstance(e, ToolResponsePart)],
            restart=[e for e in entries if isinstance(e, ToolRequestPart)],
        )
        return agent, resume

    # agents ------------------------------------------------------------------------------------

    def _require_store(self, what: str) -> SessionStore:
        if self.store is None:
            raise UnimplementedError(
                f"{what} needs a session store: Genkit's HTTP protocol has no call that lists snapshots"
            )
        return self.store

    def _sole_agent(self) -> ResumableAgent:
        if len(self.agents) != 1:
            raise UsageError(f"an inbox without a store works through exactly one agent, not {len(self.agents)}")
        return next(iter(self.agents.values()))

    def _agent_named(self, snapshot_id: str, name: str | None) -> ResumableAgent:
        if name is None:
            if len(self.agents) == 1:
                return next(iter(self.agents.values()))
            raise UsageError(f"snapshot {snapshot_id} does not name its agent; build the Inbox with exactly one agent")
        found = self.agents.get(name)
        if found is None:
            known = ", ".join(repr(n) for n in self.agents) or "none"
            raise UsageError(
                f"snapshot {snapshot_id} belongs to agent {name!r}, which this inbox cannot run (it has: {known}); "
                f"pass it as Inbox(store, agents=[...]), or on the command line as --agents module:attr naming "
                "an agent, a list or dict of agents, or a function (store) -> agents"
            )
        return found


# helpers ----------------------------------------------------------------------------------------


def _context(identity: object, tenant: str | None) -> dict[str, Any]:
    return {"identity": identity, "tenant": tenant}


def _refuse_taken(snap: Snapshot, missing: str) -> None:
    """The refusal of an answer to a snapshot another answer claimed (``ABORTED``, naming that turn)."""
    state = claim_state(snap)
    if state in ("held", "answered"):
        how = "was already answered (resumed" if state == "answered" else "is being answered (claimed"
        raise ClaimConflictError(f"{missing}: it {how} by turn {snap.claimed_by})", winner=snap.claimed_by)


def _items(snap: Snapshot, now: datetime, tenant: str | None, agent: str | None) -> list[PendingInterrupt]:
    return [pending_item(e, now, tenant, agent) for e in entries_of(snap)]


def _carrying(item: PendingInterrupt, token: str | None) -> PendingInterrupt:
    """``item`` with the resume token an answer carries in place of the stored one (``None``: keep it)."""
    return item if token is None else replace(item, part=md.with_resume_token(item.part, token))

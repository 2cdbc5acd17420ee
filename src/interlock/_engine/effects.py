"""The effect journal as one turn uses it: replay, retry, or ask (see :mod:`interlock.records._journal`).

:class:`Effects` is built by the runtime for each turn of a server-managed agent and
handed to the tool loop, which runs every tool body through :meth:`Effects.run`. It is
the one place that decides whether a call's body runs: a recorded output is replayed, a
call the tool interrupted or failed runs again, and a call whose earlier attempt may
have taken effect is retried only when the tool says that is safe (``idempotent``,
``reconcile``) or a person said so (they answered the in-doubt interrupt by restarting
it); otherwise it pauses the turn with an in-doubt interrupt.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .. import metadata as md
from .._json import check_json
from .._json_object import is_object, new_dict
from ..errors import ClaimConflictError, FailedPreconditionError, Interrupt
from ..interrupts._plan import ResumePlan
from ..parts import ToolRequestPart
from ..records._journal import Expecting, JournalEntry, JournalStatus, call_key, canonical, text_digest
from ..records._sessions import utcnow
from ..stores import JournalStore, JournalUpdater
from ..telemetry import _hooks as hooks
from ..tools._context import to_json

if TYPE_CHECKING:
    from ..tools._context import ToolContext
    from ..tools._tool import Tool


T = TypeVar("T")


def in_doubt_data(entry: JournalEntry, resumed: object, reclaimed_from: str | None = None) -> dict[str, Any]:
    """The interrupt data of an in-doubt call: what is known, and how to answer.

    ``reclaimed_from`` is the turn a takeover found the call in (the restart's tool is told it).
    """
    taken = {} if reclaimed_from is None else {md.RECLAIMED_FROM: reclaimed_from}
    return {
        **taken,
        md.IN_DOUBT: True,
        "message": (
            f"The effect of {entry.tool} is unknown: attempt {entry.attempt} started and never reported back "
            "(its process died or the turn was aborted). Restart the call to run it again with the same "
            "idempotency key, or respond with its output if it did happen, or with a note for the model to skip it."
        ),
        "idempotencyKey": entry.key,
        "attempts": entry.attempt,
        md.RESUMED: resumed,
    }


def names_in_doubt_attempt(entry: ToolRequestPart, request: ToolRequestPart) -> bool:
    """Whether the restart ``entry`` names the in-doubt attempt ``request`` asks about.

    It does when its ``metadata.interrupt`` is that question's data (the in-doubt marker, the
    idempotency key and the attempt number), as a restart built from the paused request carries
    (:meth:`interlock.interrupts.Decision.answer`, and Genkit's ``restart()``, copy it).
    """
    asked, named = request.meta(md.INTERRUPT), entry.meta(md.INTERRUPT)
    if not is_object(asked) or not is_object(named):
        return False
    return all(named.get(k) == asked.get(k) for k in (md.IN_DOUBT, "idempotencyKey", "attempts"))


def check_in_doubt_answers(plan: ResumePlan, *, named_snapshot: bool, tokens_checked: bool) -> None:
    """Refuse a restart of an in-doubt call that is not an answer to the in-doubt question.

    An in-doubt call runs again only when a person who saw the question says so. A restart
    answers it when the resume named the in-doubt pause itself (``named_snapshot``: by its
    snapshot id, the only way a retry of an earlier answer cannot), carried a resume token that
    :func:`interlock.interrupts.check_tokens` bound to that pause (``tokens_checked``), or names the
    attempt (:func:`names_in_doubt_attempt`). Anything else, such as a client resending the
    approval that started the lost attempt to the session, is refused as stale: nothing runs.

    Raises:
        FailedPreconditionError: a restart of an in-doubt call that does not answer its question.
    """
    if named_snapshot:
        return
    for call in plan.calls:
        entry = call.restart
        if entry is None or not md.is_in_doubt(call.request):
            continue
        if (tokens_checked and entry.meta(md.RESUME_TOKEN) is not None) or names_in_doubt_attempt(entry, call.request):
            continue
        data = call.request.meta(md.INTERRUPT)
        attempt = data.get("attempts") if is_object(data) else None
        label = f"{call.request.name!r}" + (f" (ref: {call.request.ref})" if call.request.ref else "")
        raise FailedPreconditionError(
            f"resume.restart for tool {label} is stale: the call is in doubt (attempt {attempt} started and "
            "never reported back, so its effect is unknown), and this restart does not answer that question "
            "(is it a retry of the earlier answer?). A person must decide: answer the in-doubt interrupt by "
            "the paused snapshot's id (the inbox does), or restart it with metadata.interrupt copied from the "
            "paused request to run it again, or respond with its output if it did happen."
        )


def flushes_intent(tool: Tool[Any, Any, Any], ctx: ToolContext[Any], entry: JournalEntry | None) -> bool:
    """Whether a call's intent must reach the disk before its body runs, not only outlive its process.

    Every intent is written before the body runs and survives a crash of its process (a SIGKILL
    included): the call then reads as in doubt. What a flush adds is a power failure (or a crash
    of the machine) while the body runs:

    * a call from the history (a restart, a retry, a call the journal has seen) keeps its key
      whatever happens, so its intent is flushed. A resume's restarts have theirs in the claim's
      transaction, which is flushed anyway.
    * a call the model has just asked for is not flushed. Were its turn to run again, it would ask
      the model again, and models name their calls afresh (OpenAI, Anthropic and the local model
      give random ids): a new call, with a new key, whatever the journal holds. Only a model that
      repeats the same ref (a scripted one, Gemini without call ids) meets the entry again, and
      it is lost only if the machine failed mid-body, before the turn's next durable write.
    * an idempotent tool's call in doubt is retried with the same key anyway: no flush of its own.
    """
    return not tool.idempotent and (entry is not None or ctx.is_resumed)


@dataclass(kw_only=True, slots=True)
class Effects:
    """The journal of one turn's tool calls, in one store and tenant.

    Reads and writes go to the store's :class:`~interlock.stores.JournalStore`; what the claim and the
    commit write with their rows (:meth:`prepare`, :meth:`commit_updates`) the turn's writer writes.
    """

    store: JournalStore
    tenant: str | None
    agent: str | None
    session_id: str
    snapshot_id: str
    """The snapshot the turn continues (or its own, for a session's first turn): entries are pruned with it."""
    turn_id: str | None
    _seen: dict[str, JournalEntry | None] = field(default_factory=new_dict)
    """Entries the resume's claim read, by key (no read of their own when their calls run)."""
    _prepared: dict[str, tuple[JournalEntry, JournalEntry]] = field(default_factory=new_dict)
    """Intents the claim wrote for calls it restarts, with the entry each replaced, until their bodies run."""
    _outcomes: dict[str, JournalEntry] = field(default_factory=new_dict)
    """Outcomes the turn's commit writes (a call that paused): no write of their own before it."""
    _pending: dict[str, tuple[JournalEntry | None, JournalEntry | None]] = field(default_factory=new_dict)
    """What the claim's updates read and wrote, until the claim is known to be taken."""
    _planned: dict[tuple[str, str | None, int], tuple[object, str, str]] = field(default_factory=new_dict)
    """The key and input digest :meth:`prepare` computed for each restart, with the value it was of."""

    # folding journal writes into the claim and the commit (one transaction each) ---------------

    def prepare(
        self, requests: Iterable[tuple[ToolRequestPart, object]], index: int
    ) -> list[tuple[str, JournalUpdater]]:
        """The journal updates a resume's claim writes for the calls it restarts (``(request, validated input)``).

        A call that paused (``interrupted``) gets its next attempt's intent in the claim's own
        transaction; every call's entry is read there. Call :meth:`claimed` once the claim is taken.
        """
        self._pending = {}
        updates: list[tuple[str, JournalUpdater]] = []
        for request, value in requests:
            key, input_digest = self._key(request.name, request.ref, value, index)
            self._planned[(request.name, request.ref, index)] = (value, key, input_digest)

            def read(
                cur: JournalEntry | None, key: str = key, request: ToolRequestPart = request
            ) -> JournalEntry | None:
                intent = None
                if cur is not None and cur.status == "interrupted":
                    intent = self._intent(request.name, request.ref, key, cur.input_digest, cur)
                self._pending[key] = (cur, intent)
                return intent

            updates.append((key, read))
        return updates

    def claimed(self) -> None:
        """The claim carrying :meth:`prepare`'s updates was taken: what it read and wrote is now known."""
        for key, (seen, intent) in self._pending.items():
            self._seen[key] = seen
            if intent is not None and seen is not None:
                self._prepared[key] = (intent, seen)
        self._pending = {}

    def commit_updates(self) -> list[tuple[str, JournalUpdater]]:
        """The journal updates the turn's commit writes: deferred outcomes, and unused intents undone."""
        updates: list[tuple[str, JournalUpdater]] = [(key, Expecting(entry)) for key, entry in self._outcomes.items()]
        updates += [(key, _undo(intent, seen)) for key, (intent, seen) in self._prepared.items()]
        self._outcomes, self._prepared = {}, {}
        return updates

    def key(self, tool: str, ref: str | None, value: object, index: int) -> str:
        """The idempotency key of a call asked for by the model message at ``index`` of the history.

        ``value`` is the call's validated input (a model, a dataclass or JSON); the key is of its JSON form.
        """
        return self._key(tool, ref, value, index)[0]

    def _key(self, tool: str, ref: str | None, value: object, index: int) -> tuple[str, str]:
        """The call's key and its input's digest (:func:`_call_key`)."""
        return _call_key(self.agent, self.session_id, index, tool, ref, to_json(value, check=False))

    async def run(
        self,
        tool: Tool[Any, Any, Any],
        ctx: ToolContext[Any],
        value: object,
        index: int,
        body: Callable[[], Awaitable[Any]],
        *,
        retry: bool = False,
        untouched: bool = False,
    ) -> Any:
        """Run a tool body at most as often as the journal allows; returns its output (recorded or new).

        ``value`` is the validated input the body runs on (its JSON form is what the key is of).
        ``retry`` is set when a person answered this call's in-doubt interrupt by restarting it.
        ``untouched`` says ``value`` is the resume plan's own, which nothing could have changed since
        the claim keyed it (:meth:`prepare`: no middleware, no recheck): its key is not computed again.
        Raises :class:`~interlock.errors.Interrupt` (an in-doubt pause, or the tool's own).
        """
        known = self._planned.pop((tool.name, ctx.request.ref, index), None) if untouched else None
        if known is not None and known[0] is value:
            key, input_digest = known[1], known[2]
        else:
            key, input_digest = self._key(tool.name, ctx.request.ref, value, index)
        ctx.idempotency_key = key
        if key in self._prepared:  # a restart whose intent the claim wrote (with or without a payload)
            return await self._run_body(ctx, self._prepared.pop(key)[0], body)
        if key in self._seen:  # a restart: the claim read the call's entry
            entry = self._seen.pop(key)
        elif ctx.is_resumed:  # a restart: the call was journaled when it paused
            entry = await self.store.journal_get(key, tenant=self.tenant)
        else:
            try:  # a call the model just asked for is usually new: its intent in one write
                return await self._run_body(ctx, await self._start(tool, ctx, key, input_digest, None), body)
            except _SeenBefore:
                entry = await self.store.journal_get(key, tenant=self.tenant)
        if entry is not None and entry.status == "done":
            ctx.attempt = entry.attempt
            hooks.journal("replayed", entry)
            return entry.output  # replayed: the body does not run again
        if entry is not None and entry.status == "running" and not retry and not tool.idempotent:
            known = await self._reconcile(tool, entry)
            if known is None:
                hooks.journal("in_doubt", entry)
                raise Interrupt(in_doubt_data(entry, ctx.resumed, ctx.reclaimed_from))
            hooks.journal("reconciled", entry)
            if known is not _NOT_HAPPENED:
                await self._record(entry, "done", output=known)
                return known
        elif entry is not None and entry.status == "running":
            hooks.journal("retried", entry)
        entry = await self._start(tool, ctx, key, input_digest, entry)
        return await self._run_body(ctx, entry, body)

    async def _run_body(self, ctx: ToolContext[Any], entry: JournalEntry, body: Callable[[], Awaitable[Any]]) -> Any:
        """Run the body of the attempt ``entry`` records, and record how it ended."""
        ctx.attempt = entry.attempt
        ctx.steps = _Steps(effects=self, entry=entry)
        try:
            output = await body()
        except Interrupt:
            self._outcomes[entry.key] = self._outcome(ctx.steps.entry, "interrupted")  # written by the commit
            raise
        except Exception:
            await self._record(ctx.steps.entry, "failed")  # the tool said it failed: a retry may run it again
            raise
        # cancelled (an abort) or killed mid-body: the entry stays "running", and the call is in doubt
        await self._record(ctx.steps.entry, "done", output=output)
        return output

    async def mark_done(self, key: str, output: object) -> None:
        """Record ``output`` for an in-doubt call a person answered with a respond (it did happen)."""
        entry = await self.store.journal_get(key, tenant=self.tenant)
        if entry is not None and entry.status == "running":
            await self._record(entry, "done", output=output)

    async def _reconcile(self, tool: Tool[Any, Any, Any], entry: JournalEntry) -> Any:
        """The tool's word on an in-doubt call: its output, ``_NOT_HAPPENED``, or ``None`` (ask a person)."""
        if tool.reconcile is None:
            return None
        found = tool.reconcile(entry.key)
        if inspect.isawaitable(found):
            found = await found
        return _NOT_HAPPENED if found is None else tool.validate_output(found)

    async def _start(
        self,
        tool: Tool[Any, Any, Any],
        ctx: ToolContext[Any],
        key: str,
        input_digest: str,
        entry: JournalEntry | None,
    ) -> JournalEntry:
        intent = self._intent(tool.name, ctx.request.ref, key, input_digest, entry)
        expect = 0 if entry is None else entry.attempt
        try:
            await self.store.journal_put(
                intent, expect=expect, tenant=self.tenant, durable=flushes_intent(tool, ctx, entry)
            )
        except ClaimConflictError:
            if entry is None:
                raise _SeenBefore from None
            raise
        return intent

    def _intent(
        self, tool: str, ref: str | None, key: str, input_digest: str, entry: JournalEntry | None
    ) -> JournalEntry:
        """The entry of a new attempt of the call ``key`` (``entry``: its last one)."""
        attempt = 1 if entry is None else entry.attempt + 1
        now = utcnow()
        history = () if entry is None else entry.attempts
        return JournalEntry(
            key=key,
            session_id=self.session_id,
            snapshot_id=self.snapshot_id if entry is None else entry.snapshot_id,
            agent=self.agent,
            tool=tool,
            ref=ref,
            input_digest=input_digest,
            attempt=attempt,
            status="running",
            steps={} if entry is None else dict(entry.steps),
            turn_id=self.turn_id,
            started_at=now if entry is None else entry.started_at,
            attempts=(*history, {"attempt": attempt, "turn": self.turn_id, "status": "running", "at": now.isoformat()}),
        )

    @staticmethod
    def _outcome(entry: JournalEntry, status: JournalStatus, *, output: object = None) -> JournalEntry:
        now = utcnow()
        attempts = list(entry.attempts)
        if attempts and attempts[-1].get("attempt") == entry.attempt:
            attempts[-1] = {**attempts[-1], "status": status, "finished": now.isoformat()}
        return entry.evolve(status=status, output=output, finished_at=now, attempts=tuple(attempts))

    async def _record(self, entry: JournalEntry, status: JournalStatus, *, output: object = None) -> JournalEntry:
        done = self._outcome(entry, status, output=output)
        # Not flushed to disk before the turn goes on: a process crash keeps it; a power failure may lose
        # it, and then the call asks (in doubt) instead of replaying. The intent before the body is flushed.
        await self.store.journal_put(done, expect=entry.attempt, tenant=self.tenant, durable=False)
        return done


_NOT_HAPPENED: Any = object()


_KEYS: dict[tuple[str | None, str, int, str, str | None], tuple[str, str, str]] = {}
"""Recently computed keys by call, with the canonical text of the input each is of and its digest: a
call's key is needed again by the turn that resumes it (its claim), often in this process."""
_KEYS_KEPT = 4096


def _call_key(
    agent: str | None, session_id: str, index: int, tool: str, ref: str | None, input: Any
) -> tuple[str, str]:
    """The key of a call (:func:`~interlock.records._journal.call_key`) and its input's digest.

    ``input`` is the call's input in its JSON form. The input's canonical text is what its digest
    is of, so a call keyed recently with the same text has the same key: it comes from memory
    (the text compared, no hashing).
    """
    try:
        text = canonical(input)  # refuses what is not JSON, so the caller skips the check pass
    except (TypeError, ValueError):
        check_json(input, "the value")  # raises the InvalidArgumentError that says what is wrong
        raise
    slot = (agent, session_id, index, tool, ref)
    known = _KEYS.get(slot)
    if known is not None and known[0] == text:  # same call, same input: same key
        return known[1], known[2]
    input_digest = text_digest(text)
    key = call_key(agent=agent, session_id=session_id, index=index, tool=tool, ref=ref, input_digest=input_digest)
    if len(_KEYS) >= _KEYS_KEPT:
        _KEYS.clear()  # a memory, not a record: starting afresh costs one digest per call
    _KEYS[slot] = (text, key, input_digest)
    return key, input_digest


def _undo(intent: JournalEntry, seen: JournalEntry) -> JournalUpdater:
    """Put back the entry a claim's intent replaced, when the call's body never ran (nor was taken over)."""
    return lambda cur: (
        seen if cur is not None and cur.attempt == intent.attempt and cur.turn_id == intent.turn_id else None
    )


class _SeenBefore(Exception):
    """The journal already has the call an optimistic first intent was written for."""


@dataclass(kw_only=True, slots=True)
class _Steps:
    """``ctx.step`` for one attempt of one call: each named step's result is journaled once."""

    effects: Effects
    entry: JournalEntry

    async def step(self, name: str, fn: Callable[[], Awaitable[T] | T]) -> T:
        if name in self.entry.steps:
            return cast(T, self.entry.steps[name])
        result = fn()
        value = await result if inspect.isawaitable(result) else result
        check_json(value, f"the result of step {name!r}")
        self.entry = self.entry.evolve(steps={**self.entry.steps, name: value})
        await self.effects.store.journal_put(
            self.entry, expect=self.entry.attempt, tenant=self.effects.tenant, durable=False
        )
        return cast(T, value)

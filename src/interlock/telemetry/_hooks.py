"""The narrow hooks the runtime calls about turns: each makes its span or span event, and its log record.

Every turn is an ``invoke_agent {agent}`` span (OpenTelemetry's GenAI semantic
conventions; model and tool calls are in :mod:`interlock.telemetry._calls`). interlock's own
facts are ``interlock.*`` attributes and events: ``interlock.interrupt``, ``interlock.resume``,
``interlock.claim.*``, ``interlock.journal.*``, ``interlock.detached.*``,
``interlock.store.error``. A turn's span
context is stored in the snapshot it writes (``metadata.traceContext``), so the turn that
resumes it, in any process, links to it.

Content (messages, tool inputs and outputs, interrupt data, resume payloads) is recorded
only when :func:`~interlock.telemetry.capture_content` says so. Resume tokens never are.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import metadata as md
from .._json_object import is_object
from ..errors import InterlockError
from ._logs import logger
from ._otel import (
    Attributes,
    Opened,
    add_event,
    as_json,
    capture_content,
    close_span,
    current_span,
    elapsed_ms,
    error_type,
    fail,
    recorder,
    span_carrier,
    start,
)
from ._otel import span as otel_span

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from ..interrupts._plan import PlannedCall, ResumePlan
    from ..messages import Message
    from ..parts import ToolRequestPart
    from ..records._journal import JournalEntry
    from ..records._sessions import ErrorInfo, Snapshot


_agents, _claims, _effects, _stores = logger("agents"), logger("claims"), logger("effects"), logger("stores")


# turns ------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class TurnTrace:
    """The span of one turn (``None`` without OpenTelemetry) and what its log lines say."""

    span: Span | None
    agent: str
    session_id: str | None
    turn_id: str | None

    def metadata(self) -> dict[str, Any]:
        """The snapshot metadata that lets a later resume link to this turn (``{}`` without a span)."""
        carrier = span_carrier(self.span)
        return {md.TRACE_CONTEXT: carrier} if carrier else {}

    def finish(self, *, finish_reason: str | None, error: ErrorInfo | None, messages: Sequence[Message]) -> None:
        """Record how the turn ended: its finish reason, its interrupts, or its error."""
        if error is not None:
            fail(self.span, error.status, error.message)
            _agents.warning(
                "turn failed: %s %s", error.status, error.message, extra={**self.where(), "status": error.status}
            )
            return
        if self.span is not None:
            self.span.set_attribute("interlock.finish_reason", finish_reason or "")
        if (
            finish_reason == "interrupted"
            and messages
            and (self.span is not None or _agents.isEnabledFor(logging.INFO))
        ):
            for part in messages[-1].interrupts:
                _interrupted(self, part)
        if _agents.isEnabledFor(logging.DEBUG):
            _agents.debug("turn finished: %s", finish_reason, extra={**self.where(), "finish_reason": finish_reason})

    def where(self) -> dict[str, Any]:
        return {"agent": self.agent, "session_id": self.session_id, "snapshot_id": self.turn_id}


def _interrupted(trace: TurnTrace, part: ToolRequestPart) -> None:
    kind = "in_doubt" if md.is_in_doubt(part) else "hold" if md.is_hold(part) else "tool"
    if trace.span is not None:
        attributes: dict[str, Any] = {"gen_ai.tool.name": part.name, "interlock.interrupt.kind": kind}
        if part.ref is not None:
            attributes["gen_ai.tool.call.id"] = part.ref
        if trace.turn_id is not None:
            attributes["interlock.snapshot.id"] = trace.turn_id
        if capture_content():
            attributes["interlock.interrupt.data"] = as_json(part.meta(md.INTERRUPT))
        trace.span.add_event("interlock.interrupt", attributes)
    if _agents.isEnabledFor(logging.INFO):
        _agents.info(
            "turn paused: %s (%s) waits for an answer",
            part.name,
            kind,
            extra={"agent": trace.agent, "session_id": trace.session_id, "snapshot_id": trace.turn_id}
            | {"tool": part.name, "ref": part.ref, "interrupt_kind": kind},
        )


class _QuietTurn(contextlib.AbstractContextManager[TurnTrace]):
    """A turn with neither a tracer provider nor debug logging: no span, nothing timed."""

    def __init__(self, trace: TurnTrace) -> None:
        self.trace = trace

    def __enter__(self) -> TurnTrace:
        return self.trace

    def __exit__(self, *exc: object) -> None:
        return None


def turn(
    agent: str,
    *,
    session_id: str | None,
    turn_id: str | None,
    parent: Snapshot | None,
    tenant: str | None,
    detached: str | None,
) -> contextlib.AbstractContextManager[TurnTrace]:
    """The ``invoke_agent`` span of one turn; a turn continuing a paused snapshot links to its span."""
    trace = TurnTrace(span=None, agent=agent, session_id=session_id, turn_id=turn_id)
    tracer = recorder()
    if tracer is None and not _agents.isEnabledFor(logging.DEBUG):
        return _QuietTurn(trace)
    return _TracedTurn(trace, tracer, parent=parent, tenant=tenant, detached=detached)


class _TracedTurn(contextlib.AbstractContextManager[TurnTrace]):
    """A turn's ``invoke_agent`` span (when a tracer provider is set) and its debug-logged duration.

    A class rather than a generator: a recorded turn pays for its span, not for the scaffolding.
    """

    def __init__(
        self,
        trace: TurnTrace,
        tracer: Tracer | None,
        *,
        parent: Snapshot | None,
        tenant: str | None,
        detached: str | None,
    ) -> None:
        self.trace, self.tracer, self.parent, self.tenant, self.detached = trace, tracer, parent, tenant, detached
        self.opened: Opened | None = None
        self.started = 0.0

    def __enter__(self) -> TurnTrace:
        self.started = time.perf_counter()
        if self.tracer is not None:
            self._open(self.tracer)
        return self.trace

    def _open(self, tracer: Tracer) -> None:
        trace, parent, detached = self.trace, self.parent, self.detached
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": trace.agent,
            "interlock.detached": detached is not None,
        }
        if trace.session_id is not None:
            attributes["gen_ai.conversation.id"] = trace.session_id
        if trace.turn_id is not None:
            attributes["interlock.snapshot.id"] = trace.turn_id
        if parent is not None:
            attributes["interlock.parent_snapshot.id"] = parent.snapshot_id
        if self.tenant is not None:
            attributes["interlock.tenant"] = self.tenant
        paused = parent is not None and parent.finish_reason == "interrupted"
        carrier = (parent.metadata or {}).get(md.TRACE_CONTEXT) if paused and parent is not None else None
        self.opened = start(
            tracer, f"invoke_agent {trace.agent}", attributes, link_to=carrier if is_object(carrier) else None
        )
        trace.span = self.opened[0]
        if detached is not None:
            trace.span.add_event("interlock.detached.started", {"interlock.snapshot.id": detached})

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if self.opened is not None:
            if exc is not None:
                fail(self.opened[0], error_type(exc), str(exc) or type(exc).__name__, exc)
            close_span(self.opened)
        if exc is None and _agents.isEnabledFor(logging.DEBUG):
            duration = elapsed_ms(self.started)
            _agents.debug("turn took %.1f ms", duration, extra={"agent": self.trace.agent, "duration_ms": duration})


def resuming(plan: ResumePlan, context: dict[str, Any], holder: str | None) -> None:
    """A resume runs: per answered call its verb, tool and ref; who answered; the claim's holder (fencing token)."""
    identity = context.get("identity")
    answered = [c for c in plan.calls if c.verb != "pending"]
    target = current_span() if recorder() is not None else None
    if target is not None:
        content = capture_content()
        for call in answered:
            target.add_event("interlock.resume", _resume_attributes(call, identity, holder, content))
    if _agents.isEnabledFor(logging.INFO):
        calls = ", ".join(f"{c.verb} {c.request.name}" for c in answered)
        _agents.info(
            "resume: %s", calls, extra={"identity": identity, "holder": holder, "verbs": [c.verb for c in answered]}
        )


def _resume_attributes(call: PlannedCall, identity: object, holder: str | None, content: bool) -> dict[str, Any]:
    """An ``interlock.resume`` event's attributes (no ``None`` values: the SDK would drop them with a warning)."""
    attributes: dict[str, Any] = {"interlock.resume.verb": call.verb}
    if call.decision is not None:
        attributes["interlock.resume.decision"] = call.decision
    attributes["gen_ai.tool.name"] = call.request.name
    if call.request.ref is not None:
        attributes["gen_ai.tool.call.id"] = call.request.ref
    if isinstance(identity, str):
        attributes["interlock.identity"] = identity
    if holder is not None:
        attributes["interlock.claim.holder"] = holder
    if content:
        payload = call.payload if call.verb == "restart" else (call.response.output if call.response else None)
        attributes["interlock.resume.payload"] = as_json(payload)
    return attributes


def answer_refused(details: dict[str, Any], digest: str | None) -> None:
    """An answer policy refused a resume (nothing was claimed or run): who, when, what, under which policy."""
    attrs = {
        "interlock.policy.reason": details.get("reason"),
        "interlock.policy.digest": digest,
        "interlock.identity": details.get("identity"),
        "interlock.answer.kind": details.get("kind"),
        "gen_ai.tool.name": details.get("tool"),
        "gen_ai.tool.call.id": details.get("ref"),
    }
    add_event("interlock.answer.refused", attrs)
    _agents.warning(
        "answer refused (%s): %s of %s#%s by %s",
        details.get("reason"),
        details.get("kind"),
        details.get("tool"),
        details.get("ref") or "",
        details.get("identity"),
        extra={"policy": digest, **{k: v for k, v in details.items() if k != "message"}},
    )


def detached_enqueued(agent: str, snapshot_id: str, session_id: str | None, trace: TurnTrace | None) -> None:
    """A turn went to the background: its pending snapshot is written."""
    add_event("interlock.detached.enqueued", {"interlock.snapshot.id": snapshot_id}, trace.span if trace else None)
    _agents.info(
        "detached: turn runs on in the background as snapshot %s",
        snapshot_id,
        extra={"agent": agent, "session_id": session_id, "snapshot_id": snapshot_id},
    )


@contextlib.contextmanager
def detached_finished(
    agent: str, snapshot_id: str, status: str, trace: TurnTrace | None
) -> Generator[None, None, None]:
    """The detached run writes its outcome: a short span, a child of its last turn's."""
    attributes: Attributes = {"interlock.snapshot.id": snapshot_id, "interlock.detached.status": status}
    parent = trace.span if trace else None
    with otel_span("interlock.detached.finish", attributes, parent=parent) as span:
        try:
            yield
        except BaseException as exc:
            fail(span, error_type(exc), str(exc) or type(exc).__name__, exc)
            raise
    _agents.info(
        "detached run finished: %s", status, extra={"agent": agent, "snapshot_id": snapshot_id, "status": status}
    )


# claims and the journal -------------------------------------------------------------------


def claim_taken(parent_id: str, holder: str, reclaimed_from: str | None, ttl: float) -> None:
    """A resume claimed an interrupted snapshot (and maybe took a lapsed claim over)."""
    target = current_span() if recorder() is not None else None
    if reclaimed_from is None and target is None and not _claims.isEnabledFor(logging.DEBUG):
        return
    attributes = {"interlock.snapshot.id": parent_id, "interlock.claim.holder": holder, "interlock.claim.ttl": ttl}
    if target is not None:
        target.add_event("interlock.claim.taken", attributes)
    extra = {"snapshot_id": parent_id, "holder": holder, "ttl": ttl}
    if reclaimed_from is None:
        _claims.debug("claim taken on %s by %s", parent_id, holder, extra=extra)
        return
    if target is not None:
        previous = {**attributes, "interlock.claim.previous_holder": reclaimed_from}
        target.add_event("interlock.claim.taken_over", previous)
    _claims.warning(
        "claim on %s taken over from %s (its lease lapsed) by %s",
        parent_id,
        reclaimed_from,
        holder,
        extra={**extra, "previous_holder": reclaimed_from},
    )


def claim_lost(parent_id: str, holder: str, reason: str) -> None:
    """A claim's lease lapsed or was taken over while its turn ran: the turn cannot commit."""
    add_event("interlock.claim.lost", {"interlock.snapshot.id": parent_id, "interlock.claim.holder": holder})
    _claims.warning("claim lost: %s", reason, extra={"snapshot_id": parent_id, "holder": holder})


def journal(event: str, entry: JournalEntry) -> None:
    """The effect journal decided a call: ``replayed``, ``in_doubt``, ``reconciled`` or ``retried``."""
    attributes = {
        "interlock.journal.key": entry.key,
        "interlock.journal.attempt": entry.attempt,
        "gen_ai.tool.name": entry.tool,
        "gen_ai.tool.call.id": entry.ref,
    }
    add_event(f"interlock.journal.{event}", attributes)
    extra = {"tool": entry.tool, "ref": entry.ref, "idempotency_key": entry.key, "attempt": entry.attempt}
    if event == "in_doubt":
        _effects.warning("%s is in doubt: attempt %d never reported back", entry.tool, entry.attempt, extra=extra)
    else:
        _effects.info("%s %s from the journal", entry.tool, event, extra=extra)


def store_error(error: InterlockError, *, store: str, operation: str) -> None:
    """A store call failed (``UNAVAILABLE`` may pass on a retry; the rest need someone to act)."""
    add_event("interlock.store.error", {"error.type": error.status, "interlock.store.operation": operation})
    level = "warning" if error.status == "UNAVAILABLE" else "error"
    getattr(_stores, level)(
        "%s store: %s failed: %s",
        store,
        operation,
        error.message,
        extra={"store": store, "operation": operation, "status": error.status},
    )

"""Signed webhooks, delivered at least once from the store's outbox.

Agents built with ``host=Host(notify=True)`` write their events (:func:`interlock._engine.commit.commit_events`)
into the store's outbox in the same transaction as the state change. :class:`Webhooks`
delivers them: it takes due rows with a lease (two deliverers never post one event at
the same time), POSTs each to every endpoint subscribed to it, and marks it done once
all of them answered 2xx. A failed delivery is retried with exponential backoff
(``retry_base * 2**(attempts-1)``, at most ``retry_cap``), endpoints that already
acknowledged it are skipped, and after ``max_attempts`` the row is marked ``failed``. A
deliverer that dies mid-delivery loses its lease after ``lease`` seconds and another (or
the restarted one) delivers again: receivers must drop duplicates by ``id``.

Each request carries the event as JSON (``{id, type, createdAt, tenant, group, data}``)
and these headers:

=========================  =============================================================
``Interlock-Event``        the event type (``interrupt.created``, ...)
``Interlock-Delivery``     the event id (the same on every retry)
``Interlock-Signature``    ``v1.<key id>.<unix time>.<mac>``
=========================  =============================================================

``<mac>`` is base64url (no padding) of HMAC-SHA256, keyed by the key ``<key id>`` names,
over ``v1.<key id>.<unix time>.`` + ``interlock.webhook.v1:`` + the body's bytes. The keys
live in a :class:`~interlock.interrupts.Keyring` (one signs, every listed one verifies, so
keys rotate: receivers list the new key first, then the sender signs with it, then
both drop the old one). :func:`verify` checks a request on the receiving side.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx

from .._json_object import is_object
from ..errors import InterlockError, PermissionDeniedError, UsageError
from ..interrupts._signing import Keyring
from ..records._outbox import KEEP_SETTLED, WEBHOOK, OutboxEvent, Retention, backoff
from ..records._sessions import new_id, utcnow
from ..stores import OutboxStore

logger = logging.getLogger("interlock.webhooks")

EVENT = "Interlock-Event"
DELIVERY = "Interlock-Delivery"
SIGNATURE = "Interlock-Signature"
_DOMAIN = b"interlock.webhook.v1:"  # separates webhook MACs from state signatures and tokens


def sign(body: bytes, keyring: Keyring, *, now: float | None = None) -> str:
    """The ``Interlock-Signature`` header value for ``body``."""
    return keyring.sign(_DOMAIN + body, now=now)


def _refused(reason: str, message: str) -> PermissionDeniedError:
    return PermissionDeniedError(message, details={"reason": reason})


def verify(
    body: bytes | str,
    headers: Mapping[str, str],
    keyring: Keyring,
    *,
    tolerance: float = 300.0,
    now: float | None = None,
) -> dict[str, Any]:
    """Check a webhook request; returns its event (the parsed body).

    ``body`` is the raw request body (``str`` is UTF-8 encoded); ``headers`` may be any
    mapping (names are matched case-insensitively). Refusals are
    :class:`~interlock.errors.PermissionDeniedError` with ``details["reason"]``:
    ``missing`` (no signature header), ``malformed``, ``unknown-key`` (a key id the
    keyring does not list), ``stale`` (signed more than ``tolerance`` seconds away from
    ``now``, either way: a replay), ``tampered`` (the body or header changed).
    """
    if isinstance(body, str):
        body = body.encode()
    found = {k.lower(): v for k, v in headers.items()}.get(SIGNATURE.lower())
    if found is None:
        raise _refused("missing", f"the request has no {SIGNATURE} header; it was not sent by interlock")
    pieces = found.split(".")
    if len(pieces) != 4 or pieces[0] != "v1" or not (pieces[2].isascii() and pieces[2].isdigit()):
        raise _refused("malformed", f"the {SIGNATURE} header is not v1.<key id>.<unix time>.<mac>")
    _, kid, issued, _ = pieces
    if kid not in keyring.key_ids:
        raise _refused("unknown-key", f"the webhook was signed by key {kid!r}, which the keyring does not list")
    clock = time.time() if now is None else now
    if abs(clock - int(issued)) > tolerance:
        raise _refused(
            "stale", f"the webhook was signed {int(clock - int(issued))} s from now, outside ±{tolerance:g} s"
        )
    try:
        keyring.verify(found, _DOMAIN + body, now=int(issued))
    except PermissionDeniedError:
        raise _refused("tampered", "the webhook's body does not match its signature") from None
    try:
        event: Any = json.loads(body)
    except ValueError:
        raise _refused("malformed", "the webhook's body is not JSON") from None
    if not is_object(event):
        raise _refused("malformed", "the webhook's body is not a JSON object")
    return event


@dataclass(frozen=True, kw_only=True, slots=True)
class Endpoint:
    """Where webhooks go.

    Attributes:
        url: the receiver (``http://`` or ``https://``).
        name: what the outbox records as delivered (default: the URL); keep it stable.
        events: the event types it gets (``None``: all).
        groups: the groups it gets (``None`` stands for the default group; the default
            ``(None,)`` is the default group only). An escalation names its group.
        timeout: seconds a request may take.
    """

    url: str
    name: str | None = None
    events: frozenset[str] | None = None
    groups: frozenset[str | None] = frozenset((None,))
    timeout: float = 10.0

    @property
    def key(self) -> str:
        return self.name or self.url

    def wants(self, event: OutboxEvent) -> bool:
        return (self.events is None or event.type in self.events) and event.group in self.groups


class Webhooks:
    """Delivers the outbox's webhook rows to ``endpoints``, signed by ``keyring``.

    Args:
        endpoints: endpoints, or URLs (the default group, every event).
        keyring: the signing keys (:class:`~interlock.interrupts.Keyring`).
        lease: seconds a deliverer holds the rows it took; a pass stops posting after 80 % of
            it (the rest lapse and are taken again), so keep it longer than ``timeout`` times
            the number of endpoints.
        retry_base: the first backoff of a failed delivery, in seconds (doubled per attempt).
        retry_cap: the longest backoff, in seconds.
        max_attempts: attempts before a row is marked ``failed``.
        poll_interval: seconds between looks at the outbox in :meth:`run`.
        batch: rows taken per look.
        keep_settled: how long :meth:`run` keeps delivered and failed rows before it prunes them
            (once an hour); ``None`` keeps them all.
    """

    def __init__(
        self,
        endpoints: Iterable[Endpoint | str],
        keyring: Keyring,
        *,
        lease: float = 60.0,
        retry_base: float = 1.0,
        retry_cap: float = 3600.0,
        max_attempts: int = 20,
        poll_interval: float = 0.5,
        batch: int = 50,
        keep_settled: timedelta | None = KEEP_SETTLED,
    ) -> None:
        self.endpoints = [Endpoint(url=e) if isinstance(e, str) else e for e in endpoints]
        if not self.endpoints:
            raise UsageError("Webhooks needs at least one endpoint")
        for e in self.endpoints:
            if not e.url.startswith(("http://", "https://")):
                raise UsageError(f"a webhook endpoint is an http:// or https:// URL, not {e.url!r}")
        self.keyring = keyring
        self.lease = lease
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.max_attempts = max_attempts
        self.poll_interval = poll_interval
        self.batch = batch
        self.retention = Retention(keep_settled)

    async def deliver_due(self, store: OutboxStore, *, holder: str | None = None) -> list[OutboxEvent]:
        """Take the due rows once, deliver them, and write back each outcome; returns the rows as settled."""
        holder = holder or f"webhooks-{new_id()}"
        rows = await store.outbox_claim(channel=WEBHOOK, holder=holder, lease=self.lease, limit=self.batch)
        if not rows:
            return []
        settled: list[OutboxEvent] = []
        until = time.monotonic() + self.lease * 0.8  # rows not reached by then are left to lapse, not posted late
        async with httpx.AsyncClient() as client:
            for row in rows:
                if time.monotonic() > until:
                    break
                outcome = await self._deliver(client, row)
                if await store.outbox_settle(outcome, holder=holder):
                    settled.append(outcome)
        return settled

    async def _deliver(self, client: httpx.AsyncClient, row: OutboxEvent) -> OutboxEvent:
        body = json.dumps(row.body(), separators=(",", ":"), ensure_ascii=False).encode()
        done = list(row.done_for)
        errors: list[str] = []
        for endpoint in self._targets(row):
            error = await self._post(client, endpoint, row, body)
            if error is None:
                done.append(endpoint.key)
            else:
                errors.append(f"{endpoint.key}: {error}")
        attempts, now = row.attempts + 1, utcnow()
        if not errors:
            return row.evolve(status="done", attempts=attempts, done_for=tuple(done), last_error=None, settled_at=now)
        message = "; ".join(errors)
        logger.warning("webhook %s (%s) attempt %d failed: %s", row.id, row.type, attempts, message)
        if attempts >= self.max_attempts:
            return row.evolve(
                status="failed", attempts=attempts, done_for=tuple(done), last_error=message, settled_at=now
            )
        wait = backoff(attempts, base=self.retry_base, cap=self.retry_cap)
        return row.evolve(
            attempts=attempts, done_for=tuple(done), last_error=message, due_at=now + timedelta(seconds=wait)
        )

    def _targets(self, row: OutboxEvent) -> list[Endpoint]:
        return [e for e in self.endpoints if e.wants(row) and e.key not in row.done_for]

    async def _post(self, client: httpx.AsyncClient, endpoint: Endpoint, row: OutboxEvent, body: bytes) -> str | None:
        """POST one delivery; ``None`` on a 2xx answer, else what went wrong."""
        headers = {
            "content-type": "application/json",
            "user-agent": "interlock-webhooks",
            EVENT: row.type,
            DELIVERY: row.id,
            SIGNATURE: sign(body, self.keyring),
        }
        try:
            response = await client.post(endpoint.url, content=body, headers=headers, timeout=endpoint.timeout)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}"

    async def run(self, store: OutboxStore, *, stop: asyncio.Event | None = None, holder: str | None = None) -> None:
        """Deliver due rows every ``poll_interval`` seconds until ``stop`` is set (or the task is cancelled).

        Once an hour it also prunes the webhook rows settled more than ``keep_settled`` ago.
        """
        stop = stop or asyncio.Event()
        holder = holder or f"webhooks-{new_id()}"
        while not stop.is_set():
            try:
                delivered = await self.deliver_due(store, holder=holder)
                if (cutoff := self.retention.cutoff()) is not None:
                    await store.outbox_prune(channel=WEBHOOK, settled_before=cutoff)
            except InterlockError as exc:  # the store is unavailable: try again next time
                logger.warning("webhook delivery pass failed: %s", exc.message)
                delivered = []
            except Exception:  # a loop beside a server must outlive one bad pass
                logger.exception("webhook delivery pass failed")
                delivered = []
            if len(delivered) >= self.batch:
                continue  # more may be due
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await stop.wait()


def endpoints_from_specs(specs: Sequence[str]) -> list[Endpoint]:
    """Endpoints from ``URL`` (the default group) or ``GROUP=URL`` strings (the command line's ``--endpoint``)."""
    found: list[Endpoint] = []
    for spec in specs:
        group, sep, url = spec.partition("=")
        if sep and not group.startswith(("http:", "https:")):
            found.append(Endpoint(url=url, groups=frozenset((group or None,))))
        else:
            found.append(Endpoint(url=spec))
    return found

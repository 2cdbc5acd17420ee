"""Signed client state: a client-managed agent refuses state it did not hand out.

Without a store, the caller keeps the session state and sends it back each turn, so a
caller could invent a history (a model message asking for a transfer to Mallory, marked
as interrupted) and "restart" it. With ``host=Host(state_signing=Keyring(...))`` the agent signs
every state it hands out and refuses, with ``PERMISSION_DENIED`` and before anything
runs, any state that is unsigned, altered, signed by an unknown or retired key, or older
than ``max_age``.

The signature is HMAC-SHA256 over a canonical JSON encoding of the state: its session
id, custom state and artifacts, and every message's role and parts. Parts are covered
with their metadata in the last message (the one a resume acts on: its interrupts,
parked outputs and recorded originals); in earlier messages, the metadata of tool
requests (spent interrupt bookkeeping, which Genkit's Python client keeps in its own
form) and message-level metadata (which that client's rebuilt messages lack) are not
covered. The agent drops what is not covered from the state it verifies, so nothing
unsigned gets in. It rides inside the state's ``custom``
value, under :data:`ENVELOPE` (Genkit clients carry ``custom`` back unchanged): a dict
custom state keeps its own keys beside it; any other value moves into the envelope.

A fresh state (no messages, custom state or artifacts) needs no signature: it is what
a client sends to start a session.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from .._json_object import is_object
from ..errors import PermissionDeniedError, UsageError
from ..messages import Message
from ..records._sessions import SessionState

ENVELOPE = "$interlock"
"""The key in ``custom`` that carries the signature of a client-managed state."""
_VERSION = "v1"


class Keyring:
    """HMAC keys by key id: one signs, every listed one verifies (so keys rotate).

    Args:
        keys: key id → secret (at least 32 bytes of randomness; ``str`` is UTF-8 encoded).
        signing: the id of the key that signs; default: the last one listed.
        max_age: seconds a signed state stays valid (``None``: no limit).

    Rotation: add the new key and make it the signing key; keep the old one listed while
    states signed by it may come back; then remove it (its states are refused).
    """

    def __init__(
        self, keys: Mapping[str, bytes | str], *, signing: str | None = None, max_age: float | None = None
    ) -> None:
        if not keys:
            raise UsageError("a Keyring needs at least one key")
        self._keys = {kid: k.encode() if isinstance(k, str) else bytes(k) for kid, k in keys.items()}
        for kid, key in self._keys.items():
            if "." in kid or not kid:
                raise UsageError(f"key id {kid!r} must be non-empty and contain no '.'")
            if len(key) < 32:
                raise UsageError(f"key {kid!r} is {len(key)} bytes; use at least 32 random bytes")
        self.signing = signing if signing is not None else list(self._keys)[-1]
        if self.signing not in self._keys:
            raise UsageError(f"the signing key {self.signing!r} is not among the keys")
        self.max_age = max_age

    @property
    def key_ids(self) -> frozenset[str]:
        """The ids of every listed key (each verifies)."""
        return frozenset(self._keys)

    def sign(self, payload: bytes, *, now: float | None = None) -> str:
        """``v1.<key id>.<issued at>.<mac>`` for ``payload``."""
        issued = int(now if now is not None else time.time())
        return f"{_VERSION}.{self.signing}.{issued}.{self._mac(self.signing, issued, payload)}"

    def verify(self, signature: object, payload: bytes, *, now: float | None = None) -> None:
        """Check a signature made by :meth:`sign`; raises :class:`PermissionDeniedError` saying why."""
        if not isinstance(signature, str) or signature.count(".") != 3:
            raise PermissionDeniedError("the state's signature is malformed; send back the state as it was returned")
        version, kid, issued_text, mac = signature.split(".")
        if version != _VERSION:
            raise PermissionDeniedError(f"the state's signature has an unknown version {version!r}")
        if kid not in self._keys:
            raise PermissionDeniedError(
                f"the state was signed by key {kid!r}, which this agent does not know (unknown or retired); "
                "start a new session"
            )
        if not (issued_text.isascii() and issued_text.isdigit()) or issued_text != str(int(issued_text)):
            raise PermissionDeniedError("the state's signature is malformed; send back the state as it was returned")
        issued = int(issued_text)
        if not hmac.compare_digest(mac, self._mac(kid, issued, payload)):
            raise PermissionDeniedError("the state was altered after this agent signed it; send it back unchanged")
        age = (now if now is not None else time.time()) - issued
        if self.max_age is not None and age > self.max_age:
            raise PermissionDeniedError(
                f"the state was signed {int(age)} s ago, longer than this agent accepts ({int(self.max_age)} s); "
                "start a new session"
            )

    def _mac(self, kid: str, issued: int, payload: bytes) -> str:
        message = f"{_VERSION}.{kid}.{issued}.".encode() + payload
        digest = hmac.new(self._keys[kid], message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    # states ------------------------------------------------------------------------------

    def sign_state(self, state: SessionState, *, now: float | None = None) -> SessionState:
        """A copy of ``state`` carrying its signature in ``custom``."""
        signature = self.sign(_canonical(state), now=now)
        custom = state.custom
        signed = state.copy()
        if custom is None or isinstance(custom, dict):
            signed.custom = {**cast(dict[str, Any], custom or {}), ENVELOPE: {"sig": signature}}
        else:
            signed.custom = {ENVELOPE: {"sig": signature, "value": custom}}
        return signed

    def verify_state(self, state: SessionState, *, now: float | None = None) -> SessionState:
        """The state without its signature, once verified; raises :class:`PermissionDeniedError`."""
        custom = state.custom
        envelope = custom.get(ENVELOPE) if is_object(custom) else None
        if envelope is None:
            if not state.messages and not state.artifacts and custom in (None, {}):
                return state  # a fresh session: nothing to trust yet
            raise PermissionDeniedError(
                "this agent signs its state and the state sent back carries no signature; "
                "send back the state exactly as the agent returned it"
            )
        if not is_object(envelope) or not is_object(custom):
            raise PermissionDeniedError("the state's signature is malformed; send back the state as it was returned")
        env = envelope
        rest = {k: v for k, v in custom.items() if k != ENVELOPE}
        inner: Any = env["value"] if "value" in env else (rest or None)
        plain = replace(state.copy(), custom=inner)
        plain.messages = _covered(plain.messages)
        self.verify(env.get("sig"), _canonical(plain), now=now)
        return plain


def _covered(messages: list[Message]) -> list[Message]:
    """The messages as far as the signature covers them (see the module docs)."""
    last = len(messages) - 1
    return [_bare(m, keep_tool_metadata=i == last) for i, m in enumerate(messages)]


def _bare(message: Message, *, keep_tool_metadata: bool) -> Message:
    content = message.content
    if not keep_tool_metadata and any(p.kind == "tool_request" and p.metadata for p in content):
        content = [replace(p, metadata=None) if p.kind == "tool_request" and p.metadata else p for p in content]
    if content is message.content and message.metadata is None and not message.extra:
        return message
    return replace(message, content=content, metadata=None, extra={})


def _canonical(state: SessionState) -> bytes:
    """The signed bytes: sorted-key compact JSON of what the signature covers."""
    from .._wire import artifact_to_json
    from ..parts import part_to_json

    body = {
        "sessionId": state.session_id,
        "messages": [
            {"role": m.role, "content": [part_to_json(p) for p in m.content]} for m in _covered(state.messages)
        ],
        "custom": state.custom,
        "artifacts": [artifact_to_json(a) for a in state.artifacts],
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()

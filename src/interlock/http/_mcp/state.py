"""The sealed ``requestState`` of a paused MCP call: which pause an answer resumes, and for whom.

MCP's client echoes ``requestState`` back on its retry, so the server must treat it as
attacker-controlled. :class:`StateSeal` seals a :class:`Pause` with AES-256-GCM (the MCP SDK's
:class:`~mcp.server.request_state.AESGCMRequestStateCodec`: keys derived with HKDF, a key id
in every token so keys rotate; the first key seals, every listed one opens) and opens it
again only for the same caller, agent and call, before its expiry. Each refusal is a typed
error saying why (``details["reason"]``), and nothing has run when it is raised.

What it does not decide: whether the pause is still waiting, and single use. Those are the
engine's (the snapshot's fenced claim; a second answer is ``ABORTED``, naming who answered),
as for every other surface.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

from ...errors import FailedPreconditionError, InterlockError, InvalidArgumentError, PermissionDeniedError, UsageError
from .._service import Caller

_VERSION = 1
MAX_STATE = 16_384
"""The longest ``requestState`` opened, in characters (a sealed pause is far shorter)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Pause:
    """What a sealed ``requestState`` carries."""

    agent: str
    """The served agent (the MCP tool) whose turn paused."""
    snapshot_id: str
    """The paused snapshot the answers resume."""
    keys: tuple[str, ...]
    """The input requests' keys: each pending interrupt's ref (or its tool's name)."""
    tokens: dict[str, str]
    """The resume token of each key that has one (checked by the engine on resume)."""
    principal: str
    """A digest of the caller's identity and tenant."""
    call: str
    """A digest of the tool call's arguments."""
    expires: float
    """When it stops opening (seconds since the epoch)."""
    nonce: str
    """Random: no two pauses seal alike."""


def digest(value: object) -> str:
    """A short, stable digest of a JSON-like value (what a pause binds without keeping)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=repr)
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:18]).decode()


def principal_of(caller: Caller) -> str:
    """The digest a pause binds for ``caller``: who asks, in which tenant."""
    return digest(["principal", caller.identity, caller.tenant])


def _refuse(error: type[InterlockError], reason: str, message: str) -> InterlockError:
    return error(message, details={"reason": reason})


class StateSeal:
    """Seals and opens :class:`Pause` values as ``requestState`` strings.

    Args:
        keys: secrets of at least 32 bytes, the first sealing and each opening (rotate by
            putting a new key first, then dropping the old one after ``ttl``); ``None``: one
            random key held by this process (state does not survive a restart, nor reach
            another worker process).
        ttl: seconds a pause's ``requestState`` opens for.
    """

    def __init__(self, keys: Sequence[bytes | str] | None = None, *, ttl: float = 600.0) -> None:
        if not (math.isfinite(ttl) and ttl > 0):
            raise UsageError(f"the requestState lifetime must be a positive number of seconds, not {ttl!r}")
        try:
            self._codec = AESGCMRequestStateCodec(list(keys) if keys is not None else [os.urandom(32)])
        except (TypeError, ValueError) as exc:
            raise UsageError(f"MCP requestState keys: {exc}") from None
        self.ttl = ttl
        self.ephemeral = keys is None

    def seal(
        self,
        *,
        agent: str,
        snapshot_id: str,
        keys: Sequence[str],
        tokens: Mapping[str, str],
        arguments: object,
        caller: Caller,
        now: float | None = None,
    ) -> str:
        """The ``requestState`` of a pause of ``agent``'s call with ``arguments``, for ``caller``."""
        pause = Pause(
            agent=agent,
            snapshot_id=snapshot_id,
            keys=tuple(keys),
            tokens=dict(tokens),
            principal=principal_of(caller),
            call=digest(arguments),
            expires=(time.time() if now is None else now) + self.ttl,
            nonce=base64.urlsafe_b64encode(os.urandom(12)).decode(),
        )
        body = asdict(pause) | {"v": _VERSION, "keys": list(pause.keys)}
        return self._codec.seal(json.dumps(body, separators=(",", ":")).encode())

    def open(self, state: object, *, agent: str, arguments: object, caller: Caller, now: float | None = None) -> Pause:
        """The pause ``state`` seals, if it was sealed here, for this caller and call, and has not expired.

        Raises (nothing has run): PERMISSION_DENIED for a state altered or sealed under a key
        this server does not hold (``tampered``), or sealed for another caller (``foreign``);
        INVALID_ARGUMENT for one sealed for another tool or other arguments (``other_call``);
        FAILED_PRECONDITION for an expired one (``expired``).
        """
        pause = self._unseal(state)
        if pause.principal != principal_of(caller):
            raise _refuse(
                PermissionDeniedError, "foreign", "the requestState was issued to another caller; only they may answer"
            )
        if pause.agent != agent or pause.call != digest(arguments):
            raise _refuse(
                InvalidArgumentError,
                "other_call",
                f"the requestState was issued for another call (tool {pause.agent!r}); "
                "retry the same tools/call, with the same arguments, that returned it",
            )
        moment = time.time() if now is None else now
        if not moment < pause.expires:
            at = datetime.fromtimestamp(pause.expires, UTC).isoformat(timespec="seconds")
            raise _refuse(
                FailedPreconditionError,
                "expired",
                f"the requestState expired at {at} (it lasts {self.ttl:g} s); call the tool again, "
                f"or answer snapshot {pause.snapshot_id} in the inbox",
            )
        return pause

    def _unseal(self, state: object) -> Pause:
        tampered = _refuse(
            PermissionDeniedError,
            "tampered",
            "the requestState does not verify: it was altered, or sealed under a key this server no longer holds; "
            "send it back exactly as it was returned",
        )
        if not isinstance(state, str) or len(state) > MAX_STATE:
            raise tampered
        try:
            body: Any = json.loads(self._codec.unseal(state))
            pause = Pause(
                agent=str(body["agent"]),
                snapshot_id=str(body["snapshot_id"]),
                keys=tuple(str(k) for k in body["keys"]),
                tokens={str(k): str(v) for k, v in body["tokens"].items()},
                principal=str(body["principal"]),
                call=str(body["call"]),
                expires=float(body["expires"]),
                nonce=str(body["nonce"]),
            )
        except (InvalidRequestState, ValueError, KeyError, TypeError, AttributeError):
            raise tampered from None
        if body.get("v") != _VERSION:
            raise tampered
        return pause

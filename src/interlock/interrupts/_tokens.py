"""Resume tokens: a server-minted, single-use, expiring capability to answer one interrupt.

A snapshot id is a credential (whoever holds it can resume the turn), and an approval
link that is clicked twice, forwarded, or replayed later should not answer twice or
answer something else. A server-managed agent built with ``host=Host(resume_tokens=TokenSigner(...))``
mints a token into every pending interrupt of a turn that ends ``interrupted``
(``metadata.resumeToken`` on the paused tool request, in the stored snapshot and in the
output). The token binds:

* the agent's name, the session id and the snapshot id the interrupt pauses in (each
  turn writes a new snapshot, so this is the snapshot *version*); the ids as 128-bit
  digests, so a token does not reveal them;
* the tool name and ref, and a SHA-256 digest of the tool input;
* the digest of the answer policy the interrupt was asked under (:mod:`interlock.interrupts._policy`),
  and, for a quorum vote's token (:func:`vote_token`), the one voter who may use it;
* the decisions it allows: ``respond``, ``restart``, and ``edit`` (a restart with a
  revised input) only when the agent allows revised inputs (:meth:`Agent.token_decisions`);
* an expiry (``ttl``, 24 h by default) and a random 128-bit nonce;

signed with HMAC-SHA256 by a key of the signer (:class:`~interlock.interrupts.Keyring`
holds the keys: one signs, every listed one verifies, so keys rotate).

A resume entry carries the token of the interrupt it answers in its own
``metadata.resumeToken`` (:meth:`~interlock.interrupts.Decision.answer` copies it, so
``InterruptedCall.respond/restart``, ``middleware.approve/deny`` and the inbox do).
With ``Host(require_resume_tokens=True)`` every entry must carry a valid one; without it, a
token that is present is still checked. :func:`check_tokens` runs once per resume,
right after the resume is validated and before anything is claimed or run; a refusal is
:class:`~interlock.errors.PermissionDeniedError` (``details["reason"]``, below) and
changes nothing.

Single use: the nonces of a resume's tokens are recorded in the answered snapshot's
``metadata.consumedTokens`` in the same transaction as the fenced commit of its answer.
A resume whose valid token was spent so finds its interrupt answered, and the claim refuses
it as any second answer: ABORTED naming the winner (a racing answer with the same link and a
replay are alike); ``replayed`` is left for a spent nonce on a snapshot nobody answered. A
resume that fails or is aborted before it commits gives the interrupt back and leaves its
tokens unspent, so the same link works again.

===================  ===============================================================
reason               the token ...
===================  ===============================================================
``missing``          is absent, and the agent requires tokens
``malformed``        is not shaped like a token (cut short, another format or version)
``unknown-key``      was signed by a key id the signer does not list (unknown or retired)
``tampered``         does not match its signature (any change of its text after minting,
                     a truncated or re-encoded signature or payload included)
``expired``          is past its expiry
``other-agent``      was minted by another agent
``other-session``    belongs to another session
``other-snapshot``   belongs to another snapshot of the session (an older version)
``other-interrupt``  answers another tool, ref or input
``decision``         does not allow this decision (e.g. restart of an ask-only tool)
``edited``           does not allow a revised input
``policy_changed``   was minted under another answer policy than the tool has now (its digest)
``other-voter``      is another identity's quorum vote token (:func:`vote_token`)
``replayed``         was spent, yet its snapshot is not answered (:mod:`interlock._engine.commit`;
                     spent by the answer that won: ABORTED, naming it)
===================  ===============================================================
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from .. import metadata as md
from .._json_object import is_array, is_object
from ..errors import PermissionDeniedError, UsageError
from ..messages import Message
from ..parts import ToolRequestPart, ToolResponsePart
from ._policy import recorded
from ._signing import Keyring
from ._who import identity_key

if TYPE_CHECKING:
    from ._plan import ResumePlan


TokenDecision: TypeAlias = Literal["respond", "restart", "edit"]
"""What a token allows: supply the output, run the call again, run it with a revised input."""
DEFAULT_TTL = 24 * 3600.0
"""Seconds a token stays valid by default."""
_DECISIONS: frozenset[str] = frozenset(("respond", "restart", "edit"))
_PREFIX = "it1"
_SIGNATURE = "v1"  # the version Keyring.sign writes
_DOMAIN = b"interlock.resume-token.v1:"  # separates token MACs from state signatures made with the same keys
_ISSUED = re.compile(r"(?:0|[1-9][0-9]{0,11})", re.ASCII)


def refused(reason: str, message: str) -> PermissionDeniedError:
    """The refusal of a resume token: PERMISSION_DENIED with ``details={"reason": reason}``."""
    return PermissionDeniedError(message, details={"reason": reason})


def input_digest(value: object) -> str:
    """SHA-256 (base64url) of a tool input's canonical JSON; ``1`` and ``1.0`` digest alike, as they compare."""
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return _b64(hashlib.sha256(text.encode()).digest())


def id_digest(value: str) -> str:
    """What a token carries of a session or snapshot id: 128 bits of its SHA-256 (tokens do not reveal ids)."""
    return _b64(hashlib.sha256(value.encode()).digest()[:16])


def _canonical(value: object) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if is_object(value):
        return {k: _canonical(v) for k, v in value.items()}
    if is_array(value):
        return [_canonical(v) for v in value]
    return value


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, kw_only=True, slots=True)
class ResumeToken:
    """What a verified token says (its signature and expiry checked; its binding not yet).

    ``session_id`` and ``snapshot_id`` are :func:`id_digest` values, not the ids.
    """

    agent: str
    session_id: str
    snapshot_id: str
    tool: str
    ref: str | None
    input_digest: str
    decisions: frozenset[str]
    expires_at: float
    nonce: str
    key_id: str
    policy: str | None = None
    """The digest of the answer policy the interrupt was asked under (``None``: none)."""
    voter: str | None = None
    """A quorum vote's token names its voter (:func:`identity_key`); only that identity may use it."""


class TokenSigner:
    """Mints and verifies resume tokens with HMAC-SHA256 keys by key id.

    Args:
        keys: key id → secret (at least 32 random bytes; ids without ``.``), as for
            :class:`~interlock.interrupts.Keyring`, which holds them.
        signing: the id of the key that signs new tokens; default: the last one listed.
        ttl: seconds a token stays valid (default 24 h).
        clock: the time source (seconds since the epoch).

    Rotation: list the new key beside the old and make it the signing key; tokens the old
    key signed keep verifying while it is listed; remove it after ``ttl`` (its tokens are
    then refused as ``unknown-key``).
    """

    def __init__(
        self,
        keys: Mapping[str, bytes | str],
        *,
        signing: str | None = None,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not ttl > 0:
            raise UsageError(f"a resume token's ttl must be positive, not {ttl!r}")
        self._keyring = Keyring(keys, signing=signing)
        self.key_ids = frozenset(keys)
        self.signing = self._keyring.signing
        self.ttl = ttl
        self.clock = clock

    def mint(
        self,
        *,
        agent: str,
        session_id: str,
        snapshot_id: str,
        part: ToolRequestPart,
        decisions: Iterable[str],
        voter: str | None = None,
    ) -> str:
        """A token for the interrupt ``part`` pausing in ``snapshot_id`` (for one quorum ``voter``, if named).

        It names the digest of the answer policy ``part`` records (:mod:`interlock.interrupts._policy`).
        """
        allowed = sorted(set(decisions))
        if not allowed or not set(allowed) <= _DECISIONS:
            raise UsageError(f"a resume token allows some of respond, restart and edit, not {allowed!r}")
        now = self.clock()
        body = [
            agent,
            id_digest(session_id),
            id_digest(snapshot_id),
            part.name,
            part.ref,
            input_digest(part.input),
            allowed,
            int(now + self.ttl),
            secrets.token_urlsafe(16),
        ]
        policy = (recorded(part) or {}).get("digest")
        if policy is not None or voter is not None:
            body += [policy, voter]
        payload = _b64(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())
        return f"{_PREFIX}.{payload}.{self._keyring.sign(_DOMAIN + payload.encode('ascii'), now=now)}"

    def read(self, token: object, *, label: str = "the interrupt") -> ResumeToken:
        """Verify ``token``'s form, key, signature and expiry; raises :func:`refused` saying why."""
        bad = refused(
            "malformed",
            f"the resume token for {label} is malformed (truncated, re-encoded or not a token); "
            "send it back exactly as the agent minted it",
        )
        if not isinstance(token, str) or not token.isascii():
            raise bad
        pieces = token.split(".")
        if len(pieces) != 6 or pieces[0] != _PREFIX or pieces[2] != _SIGNATURE or not _ISSUED.fullmatch(pieces[4]):
            raise bad
        _, payload, version, kid, issued, _mac = pieces
        if kid not in self.key_ids:
            raise refused(
                "unknown-key",
                f"the resume token for {label} was signed by key {kid!r}, which this agent does not list "
                "(unknown or retired)",
            )
        try:
            self._keyring.verify(".".join((version, kid, issued, _mac)), _DOMAIN + payload.encode(), now=int(issued))
        except PermissionDeniedError:
            raise refused(
                "tampered",
                f"the resume token for {label} does not match its signature (it was altered after the agent minted it)",
            ) from None
        claims = _decode(payload, kid)
        if claims is None:
            raise bad
        if self.clock() >= claims.expires_at:
            at = datetime.fromtimestamp(claims.expires_at, UTC).isoformat()
            raise refused("expired", f"the resume token for {label} expired at {at}")
        return claims


def _decode(payload: str, kid: str) -> ResumeToken | None:
    try:
        body: Any = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, binascii.Error):
        return None
    if not is_array(body) or len(body) not in (9, 11):
        return None
    agent, session_id, snapshot_id, tool, ref, digest, decisions, expires, nonce = body[:9]
    policy, voter = body[9:] if len(body) == 11 else (None, None)
    if not all(x is None or isinstance(x, str) for x in (policy, voter)):
        return None
    texts = (agent, session_id, snapshot_id, tool, digest, nonce)
    if not all(isinstance(t, str) for t in texts) or not (ref is None or isinstance(ref, str)):
        return None
    if not is_array(decisions) or not isinstance(expires, int):
        return None
    return ResumeToken(
        agent=agent,
        session_id=session_id,
        snapshot_id=snapshot_id,
        tool=tool,
        ref=ref,
        input_digest=digest,
        decisions=frozenset(str(d) for d in decisions),
        expires_at=float(expires),
        nonce=nonce,
        key_id=kid,
        policy=policy,
        voter=voter,
    )


def _label(name: str, ref: str | None) -> str:
    return f"{name}#{ref}" if ref else name


class TokenHost(Protocol):
    """The settings tokens are minted and checked with (a :class:`~interlock.agents.Host` has them)."""

    @property
    def resume_tokens(self) -> TokenSigner | None: ...

    @property
    def require_resume_tokens(self) -> bool: ...


class TokenAgent(Protocol):
    """What minting and checking tokens needs of an agent: its name, its settings, its tools' decisions."""

    @property
    def name(self) -> str: ...

    @property
    def host(self) -> TokenHost: ...

    def token_decisions(self, part: ToolRequestPart) -> tuple[TokenDecision, ...]: ...


def mint_tokens(agent: TokenAgent, messages: Sequence[Message], *, session_id: str, snapshot_id: str) -> list[Message]:
    """``messages`` with a fresh token on each pending interrupt of the last (model) message.

    Unchanged when the agent mints no tokens or nothing waits for an answer.
    """
    signer = agent.host.resume_tokens
    out = list(messages)
    if signer is None or not out or out[-1].role != "model" or not out[-1].interrupts:
        return out
    last = out[-1]

    def stamp(part: ToolRequestPart) -> ToolRequestPart:
        token = signer.mint(
            agent=agent.name,
            session_id=session_id,
            snapshot_id=snapshot_id,
            part=part,
            decisions=agent.token_decisions(part),
        )
        return replace(part, metadata={**(part.metadata or {}), md.RESUME_TOKEN: token})  # never mutated in place

    content = [stamp(p) if isinstance(p, ToolRequestPart) and p.is_interrupt else p for p in last.content]
    out[-1] = replace(last, content=content)
    return out


def check_tokens(
    agent: TokenAgent, plan: ResumePlan, *, session_id: str, snapshot_id: str | None, identity: object = None
) -> tuple[str, ...]:
    """Check the token of every entry of a validated resume of ``snapshot_id``; the nonces to spend.

    The one check (``Turn._plan``, in ``interlock._engine.turn``, calls it after ``check_resume``, before any claim).
    Returns ``()`` when the agent mints no tokens. Raises :func:`refused` (PERMISSION_DENIED).
    """
    signer = agent.host.resume_tokens
    if signer is None:
        return ()
    nonces: list[str] = []
    for call in plan.calls:
        entry: ToolRequestPart | ToolResponsePart | None = call.response if call.verb == "respond" else call.restart
        if entry is None:
            continue
        label = _label(call.request.name, call.request.ref)
        raw = entry.meta(md.RESUME_TOKEN)
        if raw is None:
            if agent.host.require_resume_tokens:
                raise refused(
                    "missing",
                    f"resume.{call.verb} for {label} carries no resume token, and agent {agent.name!r} requires one: "
                    f"copy metadata.{md.RESUME_TOKEN} from the paused tool request into the entry",
                )
            continue
        token = signer.read(raw, label=label)
        _check_binding(token, agent.name, session_id, snapshot_id, call.request, label)
        _check_policy(token, call.policy.digest if call.policy else None, identity, label)
        if call.verb not in token.decisions:
            allows = ", ".join(sorted(token.decisions))
            raise refused("decision", f"the resume token for {label} does not allow {call.verb} (it allows {allows})")
        if call.replaced and "edit" not in token.decisions:
            raise refused(
                "edited",
                f"the resume token for {label} does not allow a revised input; restart with the original input",
            )
        nonces.append(token.nonce)
    return tuple(nonces)


def _check_policy(token: ResumeToken, current: str | None, identity: object, label: str) -> None:
    if token.policy != current:
        raise refused(
            "policy_changed",
            f"the resume token for {label} was minted under another answer policy than the tool has now; "
            "it cannot answer under the new one (ask again: run the turn anew)",
        )
    if token.voter is not None and identity_key(identity) != token.voter:
        raise refused(
            "other-voter",
            f"the resume token for {label} is {token.voter!r}'s quorum vote; each voter answers with their own",
        )


def vote_token(
    agent: TokenAgent, part: ToolRequestPart, *, session_id: str, snapshot_id: str, voter: object
) -> str | None:
    """A token only ``voter`` may answer the quorum interrupt ``part`` with (``None``: the agent mints none)."""
    signer = agent.host.resume_tokens
    who = identity_key(voter)
    if signer is None:
        return None
    if who is None:
        raise UsageError("a vote token names its voter: pass an identity with a name")
    decisions = agent.token_decisions(part)
    return signer.mint(
        agent=agent.name, session_id=session_id, snapshot_id=snapshot_id, part=part, decisions=decisions, voter=who
    )


def _check_binding(
    token: ResumeToken, agent: str, session_id: str, snapshot_id: str | None, request: ToolRequestPart, label: str
) -> None:
    if token.agent != agent:
        raise refused("other-agent", f"the resume token for {label} was minted by agent {token.agent!r}, not {agent!r}")
    if token.session_id != id_digest(session_id):
        raise refused("other-session", f"the resume token for {label} belongs to another session, not {session_id}")
    if snapshot_id is None or token.snapshot_id != id_digest(snapshot_id):
        raise refused(
            "other-snapshot",
            f"the resume token for {label} belongs to another snapshot of the session, not {snapshot_id} "
            "(an older version?): answer with the token of the snapshot you resume",
        )
    if token.tool != request.name or (token.ref or None) != (request.ref or None):
        raise refused(
            "other-interrupt",
            f"the resume token was minted for {_label(token.tool, token.ref)}, not for {label}",
        )
    if token.input_digest != input_digest(request.input):
        raise refused("other-interrupt", f"the resume token for {label} was minted for another input of that call")

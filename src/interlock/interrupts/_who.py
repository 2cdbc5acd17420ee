"""The shapes an answer policy is built from: identities (who answers) and edit bounds (how far).

:func:`has_role`, :func:`in_group`, :func:`is_identity` and :func:`any_of` build the ``who``
predicate of an :class:`~interlock.interrupts.AnswerPolicy` over the identity your context hook
supplies (``context["identity"]``: a string, a dict, or an object with attributes);
:func:`may_decrease`, :func:`may_increase`, :func:`within` and :func:`one_of` build its ``edits``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

Predicate = Callable[[Any], bool]
"""``who(identity) -> bool``: may this identity (``context["identity"]``) answer?"""


# identities ---------------------------------------------------------------------------------


def identity_key(identity: object) -> str | None:
    """The stable name of an identity: a string itself, else its ``id``/``sub``/``name`` (key or attribute)."""
    if identity is None or isinstance(identity, bool):
        return None
    if isinstance(identity, (str, int, float)):
        return str(identity)
    for key in ("id", "sub", "name"):
        found = _field(identity, key)
        if isinstance(found, (str, int)) and not isinstance(found, bool):
            return str(found)
    return None


def _field(identity: object, key: str) -> Any:
    if isinstance(identity, Mapping):
        named: Mapping[str, Any] = cast(Mapping[str, Any], identity)
        return named.get(key)
    return getattr(identity, key, None)


def _members(identity: object, key: str) -> set[str]:
    found = _field(identity, key)
    if isinstance(found, str):
        return {found}
    if isinstance(found, (list, tuple, set, frozenset)):
        return {x for x in found if isinstance(x, str)}  # pyright: ignore[reportUnknownVariableType]
    return set()


@dataclass(frozen=True, slots=True)
class _Membership:
    key: str
    names: tuple[str, ...]

    def __call__(self, identity: object) -> bool:
        return bool(_members(identity, self.key) & set(self.names))

    def __repr__(self) -> str:
        helper = "has_role" if self.key == "roles" else "in_group"
        return f"{helper}({', '.join(map(repr, self.names))})"


def has_role(*roles: str) -> Predicate:
    """An identity whose ``roles`` (a key of a dict identity, or an attribute) include one of ``roles``."""
    return _Membership("roles", tuple(roles))


def in_group(*groups: str) -> Predicate:
    """An identity whose ``groups`` (a key of a dict identity, or an attribute) include one of ``groups``."""
    return _Membership("groups", tuple(groups))


@dataclass(frozen=True, slots=True)
class _Named:
    names: tuple[str, ...]

    def __call__(self, identity: object) -> bool:
        return identity_key(identity) in self.names

    def __repr__(self) -> str:
        return f"is_identity({', '.join(map(repr, self.names))})"


def is_identity(*names: str) -> Predicate:
    """One of the identities ``names`` (compared by :func:`identity_key`)."""
    return _Named(tuple(names))


@dataclass(frozen=True, slots=True)
class _AnyOf:
    predicates: tuple[Predicate, ...]

    def __call__(self, identity: object) -> bool:
        return any(p(identity) for p in self.predicates)

    def __repr__(self) -> str:
        return f"any_of({', '.join(describe(p) for p in self.predicates)})"


def any_of(*predicates: Predicate) -> Predicate:
    """An identity any of ``predicates`` admits."""
    return _AnyOf(tuple(predicates))


def describe(fn: object) -> str:
    if isinstance(fn, (_Membership, _Named, _AnyOf)):
        return repr(fn)
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"


# edits --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bound:
    """How an edit may change one field of a paused call's input, checked against the original."""

    kind: Literal["decrease", "increase", "within", "one_of", "any"]
    low: float | None = None
    high: float | None = None
    values: tuple[Any, ...] = ()

    def allows(self, old: object, new: object) -> bool:
        """True when ``old`` may become ``new``."""
        if self.kind == "any":
            return True
        if self.kind == "one_of":
            return any(same(new, v) for v in self.values)
        if not _number(new) or (self.kind != "within" and not _number(old)):
            return False
        value = float(new)  # pyright: ignore[reportArgumentType]
        if self.kind == "decrease" and value > float(old):  # pyright: ignore[reportArgumentType]
            return False
        if self.kind == "increase" and value < float(old):  # pyright: ignore[reportArgumentType]
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def describe(self) -> dict[str, Any]:
        """The bound as JSON (for the policy's digest and for the inbox)."""
        return {"kind": self.kind, "low": self.low, "high": self.high, "values": list(self.values)}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same(a: object, b: object) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and type(a) is type(b)


def may_decrease(*, low: float | None = None) -> Bound:
    """A number that may only go down (not below ``low``)."""
    return Bound("decrease", low=low)


def may_increase(*, high: float | None = None) -> Bound:
    """A number that may only go up (not above ``high``)."""
    return Bound("increase", high=high)


def within(low: float | None = None, high: float | None = None) -> Bound:
    """A number between ``low`` and ``high`` (inclusive)."""
    return Bound("within", low=low, high=high)


def one_of(*values: Any) -> Bound:
    """One of ``values`` (JSON)."""
    return Bound("one_of", values=tuple(values))

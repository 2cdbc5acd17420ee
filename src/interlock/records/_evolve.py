"""A fast :func:`dataclasses.replace` for the frozen record types a turn copies many times per cycle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T")


def evolver(cls: type[T]) -> Callable[..., T]:
    """``evolve(record, **changes)``: a copy of ``record`` (a ``cls``) with ``changes`` applied.

    As :func:`dataclasses.replace`, without its walk over the fields' definitions on every
    call and without ``__init__`` (the record types have no ``__post_init__``); an unknown
    field raises :class:`TypeError` as it does.
    """
    names = tuple(f.name for f in fields(cls))  # pyright: ignore[reportArgumentType]
    known = frozenset(names)
    values = attrgetter(*names)
    put = object.__setattr__

    def evolve(record: T, **changes: Any) -> T:
        new = object.__new__(type(record))
        for name, value in zip(names, values(record), strict=True):
            put(new, name, value)
        for name, value in changes.items():
            if name not in known:
                raise TypeError(f"{cls.__name__} has no field {name!r}")
            put(new, name, value)
        return new

    return evolve

"""A fast :func:`dataclasses.replace` for the frozen record types a turn copies many times per cycle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def evolver(cls: type[T]) -> Callable[..., T]:
    """``evolve(record, **changes)``: a copy of ``record`` (a ``cls``) with ``changes`` applied.

    As :func:`dataclasses.replace`, without its walk over the fields' definitions on every
    call and without ``__init__`` (the record types have no ``__post_init__``); an unknown
    field raises :class:`TypeError` as it does. ``cls`` has slots: each field is copied by
    its slot's own setter, in a function written for ``cls`` once (as :mod:`dataclasses`
    writes ``__init__``), so a copy is one straight run of slot reads and writes.

    When ``cls`` declares an ``evolve`` method (for its signature and docs, calling this
    function), the function takes its place on the class, keeping its name and docs: a
    method call then costs no second call with the changes packed again.
    """
    names = tuple(f.name for f in fields(cls))  # pyright: ignore[reportArgumentType]
    setters: dict[str, Callable[[Any, Any], None]] = {name: getattr(cls, name).__set__ for name in names}
    copies = "".join(f"    set_{name}(new, record.{name})\n" for name in names)
    source = (
        "def evolve(record, **changes):\n"
        "    new = make(cls)\n"
        f"{copies}"
        "    for name, value in changes.items():\n"
        "        if name not in setters:\n"
        "            raise TypeError(f'{cls.__name__} has no field {name!r}')\n"
        "        setters[name](new, value)\n"
        "    return new\n"
    )
    scope: dict[str, Any] = {"make": object.__new__, "cls": cls, "setters": setters}
    scope.update({f"set_{name}": setter for name, setter in setters.items()})
    exec(source, scope)  # names are the dataclass's own field names (identifiers)
    evolve: Callable[..., T] = scope["evolve"]
    declared = vars(cls).get("evolve")
    if callable(declared):
        evolve.__doc__, evolve.__qualname__ = declared.__doc__, f"{cls.__qualname__}.evolve"
        cls.evolve = evolve  # pyright: ignore[reportAttributeAccessIssue]
    return evolve

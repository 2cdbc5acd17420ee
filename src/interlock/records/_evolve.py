"""A fast :func:`dataclasses.replace` and ``__init__`` for the frozen records a turn builds many times per cycle.

Both write a record's slots while it is an instance of a *builder*: a class with the record's
slots and bases and ``object.__setattr__``, so each write is a plain (specialised) attribute
store; the finished object then becomes a record by one ``__class__`` assignment, which CPython
allows between two classes of the same layout (the same bases and the same ``__slots__``). The frozen
class's own ``__setattr__`` refuses every write, and writing through each slot's descriptor
(``Snapshot.status.__set__``) costs a general call per field. A class the builder cannot serve
(another layout, a subclass of a record) is written through its slots' descriptors instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any, TypeVar

from .._json_object import new_dict, new_list

T = TypeVar("T")


def _builder(cls: type) -> type | None:
    """A class whose instances can become ``cls`` instances by ``__class__`` assignment (``None``: not possible)."""
    slots = vars(cls).get("__slots__")
    if not isinstance(slots, tuple):
        return None
    # object's own __setattr__ (a frozen base's refuses): CPython then stores to a slot directly
    namespace: dict[str, Any] = {"__slots__": slots, "__module__": cls.__module__, "__setattr__": object.__setattr__}
    builder = type(f"_{cls.__name__}Builder", cls.__bases__, namespace)
    probe = object.__new__(builder)
    try:
        probe.__class__ = cls
    except TypeError:  # another layout after all
        return None
    return builder


def _setters(cls: type, names: tuple[str, ...]) -> dict[str, Callable[[Any, Any], None]]:
    return {name: getattr(cls, name).__set__ for name in names}


def evolver(cls: type[T]) -> Callable[..., T]:
    """``evolve(record, **changes)``: a copy of ``record`` (a ``cls``) with ``changes`` applied.

    As :func:`dataclasses.replace`, without its walk over the fields' definitions on every
    call and without ``__init__`` (the record types have no ``__post_init__``); an unknown
    field raises :class:`TypeError` as it does. ``cls`` has slots: the copy is written as a
    builder instance (see the module), in a function written for ``cls`` once (as
    :mod:`dataclasses` writes ``__init__``), so a copy is one straight run of slot reads and writes.

    When ``cls`` declares an ``evolve`` method (for its signature and docs, calling this
    function), the function takes its place on the class, keeping its name and docs: a
    method call then costs no second call with the changes packed again.
    """
    names = tuple(f.name for f in fields(cls))  # pyright: ignore[reportArgumentType]
    builder = _builder(cls)
    scope: dict[str, Any] = {"make": object.__new__, "cls": cls, "names": frozenset(names)}
    if builder is not None:
        scope["builder"] = builder
        copies = "".join(f"    new.{name} = record.{name}\n" for name in names)
        source = (
            "def evolve(record, **changes):\n"
            "    new = make(builder)\n"
            f"{copies}"
            "    for name, value in changes.items():\n"
            "        if name not in names:\n"
            "            raise TypeError(f'{cls.__name__} has no field {name!r}')\n"
            "        setattr(new, name, value)\n"
            "    new.__class__ = cls\n"
            "    return new\n"
        )
    else:
        setters = _setters(cls, names)
        scope["setters"] = setters
        scope.update({f"set_{name}": setter for name, setter in setters.items()})
        copies = "".join(f"    set_{name}(new, record.{name})\n" for name in names)
        source = (
            "def evolve(record, **changes):\n"
            "    new = make(cls)\n"
            f"{copies}"
            "    for name, value in changes.items():\n"
            "        if name not in names:\n"
            "            raise TypeError(f'{cls.__name__} has no field {name!r}')\n"
            "        setters[name](new, value)\n"
            "    return new\n"
        )
    exec(source, scope)  # names are the dataclass's own field names (identifiers)
    evolve: Callable[..., T] = scope["evolve"]
    declared = vars(cls).get("evolve")
    if callable(declared):
        evolve.__doc__, evolve.__qualname__ = declared.__doc__, f"{cls.__qualname__}.evolve"
        cls.evolve = evolve  # pyright: ignore[reportAttributeAccessIssue]
    return evolve


_EMPTY: dict[object, str] = {dict: "{}", list: "[]", new_dict: "{}", new_list: "[]"}
"""Default factories written as a literal (``dict[str, Any]`` counts as ``dict``): no call per object."""

_BUILT_INIT = 12
"""The fields from which ``__init__`` writes as a builder: below, its two ``__class__`` assignments cost more."""


def fast_init(cls: type[T]) -> type[T]:
    """Give a frozen, slotted, keyword-only dataclass an ``__init__`` that writes its slots as a builder does.

    Apply it above ``@dataclass(frozen=True, kw_only=True, slots=True)``. The generated
    ``__init__`` of a frozen dataclass sets every field through ``object.__setattr__`` (the
    frozen class refuses its own); this one takes the same keyword arguments, with the same
    defaults and default factories, and writes them while the object is an instance of the
    class's builder (see the module) when it has many fields, else (and for an instance of a
    subclass) through the slots' descriptors. A class it cannot serve (not frozen, no slots, a positional field, an
    ``InitVar``, a ``__post_init__``) raises :class:`TypeError` when it is decorated.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in vars(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_init needs a frozen, slotted dataclass without __post_init__, not {cls.__name__}")
    # the helpers' names start with "_fast_": a field's name (an argument here) cannot hide them
    scope: dict[str, Any] = {"MISSING": MISSING, "_fast_cls": cls, "_fast_type": type, "_fast_set": object.__setattr__}
    args: list[str] = []
    values: list[tuple[str, str]] = []
    for f in fields(cls):  # pyright: ignore[reportArgumentType]
        if not f.init or not f.kw_only:
            raise TypeError(f"fast_init needs keyword-only init fields; {cls.__name__}.{f.name} is not")
        name = f.name
        scope[f"set_{name}"] = getattr(cls, name).__set__
        if f.default is not MISSING:
            scope[f"default_{name}"] = f.default
            args.append(f"{name}=default_{name}")
            values.append((name, name))
        elif f.default_factory is not MISSING:
            scope[f"factory_{name}"] = f.default_factory
            args.append(f"{name}=MISSING")
            made = _EMPTY.get(getattr(f.default_factory, "__origin__", f.default_factory), f"factory_{name}()")
            values.append((name, f"{made} if {name} is MISSING else {name}"))
        else:
            args.append(name)
            values.append((name, name))
    builder = _builder(cls) if len(values) >= _BUILT_INIT else None
    slow = [f"        set_{name}(self, {value})" for name, value in values]
    if builder is None:
        body = [line[4:] for line in slow] or ["    pass"]
    else:
        scope["_fast_builder"] = builder
        body = [
            "    if _fast_type(self) is not _fast_cls:  # a subclass: its own layout",
            *(slow or ["        pass"]),
            "        return",
            "    _fast_set(self, '__class__', _fast_builder)",
            *(f"    self.{name} = {value}" for name, value in values),
            "    self.__class__ = _fast_cls",
        ]
    source = f"def __init__(self, *, {', '.join(args)}):\n" + "\n".join(body) + "\n"
    exec(source, scope)  # names are the dataclass's own field names (identifiers)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init
    return cls

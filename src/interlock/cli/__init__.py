"""The ``interlock`` command: ``serve``, ``demo``, ``sessions``, ``inbox`` (see :mod:`interlock.cli._main`)."""

from ._main import main

__all__ = ["main"]

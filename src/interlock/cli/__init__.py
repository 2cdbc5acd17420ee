"""The ``interlock`` command: ``serve``, ``demo``, ``sessions``, ``inbox`` (see :mod:`interlock.cli.main`)."""

from .main import main

__all__ = ["main"]

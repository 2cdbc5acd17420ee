"""``python -m interlock``: the command line (see :mod:`interlock.cli`)."""

from .cli import _main as main

raise SystemExit(main())

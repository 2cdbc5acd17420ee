"""``python -m interlock``: the command line (see :mod:`interlock.cli`)."""

from .cli import main

raise SystemExit(main())

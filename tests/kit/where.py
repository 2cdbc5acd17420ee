"""Where things are, for tests and helpers in any tier: the checkout, this kit, the shared reference folder."""

from __future__ import annotations

import pathlib

KIT = pathlib.Path(__file__).resolve().parent
"""``tests/kit``: the helper modules, and the scripts the tests start as processes."""
ROOT = KIT.parents[1]
"""The checkout: ``src/``, ``docs/``, ``examples/``, ``scripts/``."""
SHARED = ROOT.parent / "shared"
"""The workplace's shared reference folder (spec, captures), beside the checkout."""
UNIT = KIT.parent / "unit"
"""``tests/unit``: its test modules are importable by name too (pytest's ``pythonpath``), for the other tiers."""

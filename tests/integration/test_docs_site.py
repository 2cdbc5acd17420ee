"""The docs site's hooks (scripts/mkdocs_hooks.py): optional pages and the generated API reference."""

from __future__ import annotations

import importlib.util
import pathlib
from types import ModuleType

from where import ROOT


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_optional_pages_appear_when_present_and_fall_back_or_vanish_when_not(tmp_path: pathlib.Path) -> None:
    h = hooks()
    (tmp_path / "observability.md").write_text("# o\n")
    nav = [
        {"Home": "index.md"},
        {"Ops": [{"Observability": "observability.md"}, {"Notifications": "notifications.md"}]},
        {"Deployment": "deployment.md"},
        {"Typo": "getting-startd.md"},  # not optional: kept, so the strict build fails on it
    ]
    assert h._filter(nav, tmp_path) == [
        {"Home": "index.md"},
        {"Ops": [{"Observability": "observability.md"}]},
        {"Deployment": "guides/one-machine.md"},
        {"Typo": "getting-startd.md"},
    ]
    (tmp_path / "deployment.md").write_text("# d\n")
    assert {"Deployment": "deployment.md"} in h._filter(nav, tmp_path)


def test_the_api_reference_lists_every_public_module_and_no_private_one() -> None:
    modules = hooks().public_modules()
    assert modules[0] == "interlock"
    assert {"interlock.agents", "interlock.http", "interlock.cli", "interlock.testing"} <= set(modules)
    assert not [m for m in modules if any(part.startswith("_") for part in m.split("."))]
    assert "interlock.__main__" not in modules and len(modules) == len(set(modules))

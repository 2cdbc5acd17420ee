"""MkDocs hooks for the docs site (mkdocs.yml lists this file).

* Optional pages: ``OPTIONAL_PAGES`` are pages another change may add. A nav entry for one whose
  file is missing is replaced by its fallback page, or dropped; any other missing page still fails
  the strict build.
* The API reference: one generated page per public module of ``src/interlock`` (no path component
  starting with ``_``), each a mkdocstrings ``:::`` directive, appended to the nav. It follows the
  package's layout by itself, so moving a module never leaves a stale reference page behind.
"""

from __future__ import annotations

import pathlib
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "interlock"
OPTIONAL_PAGES: dict[str, str | None] = {
    "inbox.md": None,
    "notifications.md": None,
    "observability.md": None,
    "deployment.md": "guides/one-machine.md",
}
"""Page -> what the nav shows while it does not exist (None: nothing)."""


def public_modules() -> list[str]:
    """Dotted names of the public modules, the package itself first."""
    names: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts[-1] == "__main__" or any(p.startswith("_") for p in parts):
            continue
        names.append(".".join(parts))
    return sorted(names, key=lambda n: (n != "interlock", n))


def _reference_uri(module: str) -> str:
    return f"reference/{module}.md"


def _filter(nav: list[Any], docs_dir: pathlib.Path) -> list[Any]:
    kept: list[Any] = []
    for entry in nav:
        if isinstance(entry, dict):
            (title, value), *_ = entry.items()
            if isinstance(value, list):
                kept.append({title: _filter(value, docs_dir)})
                continue
            if isinstance(value, str) and value in OPTIONAL_PAGES and not (docs_dir / value).exists():
                fallback = OPTIONAL_PAGES[value]
                if fallback is not None:
                    kept.append({title: fallback})
                continue
        kept.append(entry)
    return kept


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    docs_dir = pathlib.Path(config.docs_dir)
    nav = _filter(list(config.nav or []), docs_dir)
    nav.append({"API reference": [{m: _reference_uri(m)} for m in public_modules()]})
    config.nav = nav
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for module in public_modules():
        content = f"# `{module}`\n\n::: {module}\n"
        files.append(File.generated(config, _reference_uri(module), content=content))
    return files

"""Project metadata stays true: the licence, the version, and every extra the docs mention exists."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib

from where import ROOT

import interlock

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_version_comes_from_the_package_metadata() -> None:
    assert interlock.__version__ == importlib.metadata.version("interlock") == PROJECT["version"]


def test_the_licence_file_is_the_apache_2_licence_the_metadata_declares() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert PROJECT["license"] == "Apache-2.0"
    assert text.strip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.split()) > 1500


def test_every_extra_mentioned_in_the_docs_and_messages_exists() -> None:
    extras = set(PROJECT["optional-dependencies"])
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "src").rglob("*.py")]
    mentioned = {
        (f.relative_to(ROOT).as_posix(), extra)
        for f in files
        for group in re.findall(r"interlock\[([a-z0-9_,-]+)\]", f.read_text())
        for extra in group.split(",")
    }
    assert mentioned, "no extras mentioned at all: the pattern is wrong"
    assert sorted((f, e) for f, e in mentioned if e not in extras) == []
